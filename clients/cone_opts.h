/* cone_opts.h — the cone-beam options that `tomolive recon` and `tomolive push` share
 * (issue #21; the scan keys of PROTOCOL.md §8.1.1, the engine's tl_cone_config): parsed
 * and checked with a message that names the bad one, before any file or socket is
 * touched, and the simulated cone-beam sample `tomolive push --geometry cone` shows.
 *
 *   tl_cone_opts k = {0};
 *   char why[256];
 *   while (getopt_long(...)) ... if (!tl_cone_opt(&k, "source-origin", optarg, why, n)) ...
 *   if (!tl_cone_opts_check(&k, has_center, why, sizeof why)) return fail("%s", why);
 *   tl_cone_opts_engine(&k, cols, has_center, &config);   (recon; --matrices: cone_read.h)
 *   tl_cone_opts_scan(&k, has_center, &scan);               (push; it adds --matrices' own)
 *
 * Conventions: gpu/geometry/cone.h. --offset U,V is the principal point minus the
 * detector's middle in pixels: U moves the default centre (cols - 1) / 2 (so --center and
 * a non-zero U are refused together), V is tl_cone_config.offset_v. With --matrices the
 * matrices place the detector: --center and a non-zero U are refused, V still says which
 * row the isocentre's plane is in volume coordinates (tl_cone_config).
 */
#ifndef TL_CONE_OPTS_H
#define TL_CONE_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu/base/fail.h"
#include "gpu/engine.h"
#include "gpu/phantom.h"
#include "protocol/protocol.h"

/* Help lines for the options, for usage texts. */
#define TL_CONE_OPTS_HELP                                                                        \
    "      --geometry parallel|cone  beam geometry (default parallel); cone: a circular\n"       \
    "                        cone-beam scan (FDK), which needs the next three options and a\n"   \
    "                        full turn of angles (e.g. --angles-deg 0:360:N), or a short\n"      \
    "                        scan of 180 degrees plus the fan or more (Parker's weights)\n"      \
    "      --source-origin MM  cone: distance from the source to the rotation axis, mm\n"        \
    "      --source-detector MM  cone: distance from the source to the detector, mm\n"           \
    "      --pixel-size MM[,MM]  cone: detector pixel pitch, mm (one number: square; else\n"     \
    "                        along a row, along a column)\n"                                     \
    "      --offset U,V      cone: principal point minus the detector's middle, pixels (U\n"     \
    "                        moves the axis column, so not with --center; default 0,0)\n"        \
    "      --matrices FILE[:FORMAT]  cone: one projection matrix per projection, an\n"           \
    "                        arbitrary trajectory (the three options above still set the\n"      \
    "                        volume's unit; not with --center or --offset U). FORMAT: p (3x4\n"  \
    "                        matrices, 12 numbers a line or .npy), astra (cone_vec rows, text\n" \
    "                        or .npy), rtk (RTK geometry XML); default rtk for .xml, else p.\n"  \
    "                        push: sends them in the scan (at most 512) and simulates along\n"   \
    "                        them, one projection per matrix\n"

typedef struct {
    bool cone;                             /* --geometry cone */
    double source_origin, source_detector; /* mm */
    double pixel_u, pixel_v;               /* mm */
    bool has_offset;
    double offset_u, offset_v; /* pixels */
    const char *given;         /* the last cone-only option given (for messages), or NULL */
    const char *matrices;      /* --matrices FILE[:FORMAT] (read by the caller: recon, push) */
} tl_cone_opts;

/* Whether name (a long option without "--") is one of these options. */
bool tl_cone_opt_is(const char *name);
/* Applies option name with value into o; false with why for a bad value. */
bool tl_cone_opt(tl_cone_opts *o, const char *name, const char *value, char *why, size_t why_len);
/* After every option: with cone, the three required ones given; without it, no cone-only
 * option; not --center (has_center) with a non-zero --offset U, nor either with --matrices. */
bool tl_cone_opts_check(const tl_cone_opts *o, bool has_center, char *why, size_t why_len);

/* The principal point's column: the --center given, else (cols - 1) / 2 + U. */
double tl_cone_opts_center(const tl_cone_opts *o, uint32_t cols, bool has_center, double center);
/* Geometry, trajectory and centre (as tl_cone_opts_center) into an engine configuration
 * of cols columns; nothing for parallel beam. */
void tl_cone_opts_engine(const tl_cone_opts *o, bool has_center, double center,
                         tl_engine_config *c);
/* The scan message's cone keys (the offset only when given); nothing for parallel beam. */
void tl_cone_opts_scan(const tl_cone_opts *o, tl_proto_scan *s);
/* The job description's cone part ("" for parallel beam), for --resume's identity (the
 * matrices' file by name: the caller adds what identifies its content). */
void tl_cone_opts_describe(const tl_cone_opts *o, char *buf, size_t len);

/* ---- the simulated cone-beam sample ------------------------------------------------------ */

/* The trajectory of o for a rows x cols detector whose principal column is center, at one
 * angle (radians): its normalised 3x4 matrix (gpu/geometry/cone.h). */
tl_status tl_cone_opts_matrix(const tl_cone_opts *o, uint32_t rows, uint32_t cols, double center,
                              double angle, double P[12], tl_errbuf *eb);
/* One view of the sample ph on a rows x cols detector: its exact cone-beam line
 * integrals (gpu/phantom_cone.h) as floats into li, along P, or with P NULL along the
 * circle of o at angle (radians; tl_cone_opts_matrix). scratch: rows x cols doubles. What
 * `tomolive push --geometry cone` sends and `tomolive phantom --scan --geometry cone`
 * writes, so both see the same sample. */
tl_status tl_cone_opts_view(const tl_cone_opts *o, const tl_phantom *ph, uint32_t rows,
                            uint32_t cols, double center, double angle, const double *P, float *li,
                            double *scratch, tl_errbuf *eb);
/* The 3-D Shepp-Logan phantom in world mm (gpu/phantom_cone.h), centred on the isocentre
 * and as large as fits 0.9 of the detector around the principal point from every angle
 * (so no projection is truncated), its densities (1/mm) scaled so that the largest line
 * integral is `attenuation`. The truth of a reconstruction in volume units is
 * tl_phantom_value(ph, x, y, z) times tl_cone_opts_unit(o) (PROTOCOL.md §8.1.1).
 * Returns 0, or -1 with why. */
int tl_cone_opts_phantom(const tl_cone_opts *o, uint32_t rows, uint32_t cols, double center,
                         double attenuation, tl_phantom *ph, char *why, size_t why_len);
/* mm per volume unit in x and y: pixel_u * source_origin / source_detector. */
double tl_cone_opts_unit(const tl_cone_opts *o);

#endif
