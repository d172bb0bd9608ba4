/* phantom.h — analytic phantoms with exact parallel-beam projections.
 *
 * A phantom is a sum of uniform ellipsoids (the 3-D Shepp-Logan set, or any you add).
 * Projections are exact line integrals through the ellipsoids, evaluated at each detector
 * pixel centre — no discretised volume is forward-projected, so tests that reconstruct
 * them are free of the inverse crime. The same library synthesises camera frames (flat
 * field with a detector gain pattern, dark offset, optional Poisson noise for a given
 * incident flux) for the simulated camera, tests and benchmarks.
 *
 * Coordinates are the engine's (ARCHITECTURE.md §3.1): x, y in detector pixels from the
 * rotation axis, z = detector row; the ray of projection angle theta through (x, y)
 * hits column u = center + x cos(theta) - y sin(theta). Ellipsoids are given in
 * normalised units ([-1, 1] spans the phantom) and mapped to volume coordinates by
 *   x = X * radius,  y = Y * radius,  z = z_center + Z * radius_z.
 *
 *   tl_phantom ph; tl_phantom_shepp_logan(&ph, 0.45 * cols, (rows - 1) / 2.0, 0.45 * rows);
 *   tl_phantom_project(&ph, theta, center, rows, cols, line_integrals);
 *   double mu = tl_phantom_value(&ph, x, y, z);
 *   tl_phantom_free(&ph);
 */
#ifndef TL_PHANTOM_H
#define TL_PHANTOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One ellipsoid in normalised units: density added inside, semi-axes (a, b, c), centre
 * (x0, y0, z0), and Euler angles in degrees (phi about z, then theta about the new x, then
 * psi about the new z: the ZXZ convention of the 3-D Shepp-Logan tables). */
typedef struct {
    double density;
    double a, b, c;
    double x0, y0, z0;
    double phi, theta, psi;
} tl_ellipsoid;

typedef struct {
    size_t n, cap;
    tl_ellipsoid *e;
    double (*rot)[9]; /* per ellipsoid: rotation (body -> normalised), row-major */
    double radius, z_center, radius_z;
} tl_phantom;

/* An empty phantom with the given mapping. Returns 0, or -1 when out of memory. */
int tl_phantom_init(tl_phantom *p, double radius, double z_center, double radius_z);
/* The modified (high-contrast) 3-D Shepp-Logan set, 10 ellipsoids. */
int tl_phantom_shepp_logan(tl_phantom *p, double radius, double z_center, double radius_z);
int tl_phantom_add(tl_phantom *p, const tl_ellipsoid *e);
void tl_phantom_free(tl_phantom *p);

/* Multiplies every density by factor. Densities are per detector pixel, so a Shepp-Logan
 * phantom spanning hundreds of pixels has line integrals in the hundreds, which no camera
 * transmits: simulated camera scans scale them to a few units of attenuation first. */
void tl_phantom_scale_density(tl_phantom *p, double factor);

/* Density at a volume point. */
double tl_phantom_value(const tl_phantom *p, double x, double y, double z);

/* Exact line integral of the ray hitting detector column offset t = u - center, angle
 * theta, row z. */
double tl_phantom_line_integral(const tl_phantom *p, double theta, double t, double z);

/* Line integral of the density along origin + t dir for t in [0, infinity), in units of
 * the phantom's coordinates times density (dir need not be a unit vector: t is scaled by
 * |dir| so the result is per unit length). 0 for a zero dir. A cone-beam ray starts at
 * its source (phantom_cone.h). */
double tl_phantom_ray_integral(const tl_phantom *p, const double origin[3], const double dir[3]);

/* Line integrals of a whole rows x cols projection: out[v * cols + u] for the ray through
 * column u and row v. */
void tl_phantom_project(const tl_phantom *p, double theta, double center, uint32_t rows,
                        uint32_t cols, float *out);

/* ---- camera frames ---------------------------------------------------------------------- */

/* A small deterministic random generator (xoshiro256**), so simulated data repeat. */
typedef struct {
    uint64_t s[4];
} tl_rng;
void tl_rng_seed(tl_rng *r, uint64_t seed);
uint64_t tl_rng_next(tl_rng *r);
double tl_rng_uniform(tl_rng *r); /* [0, 1) */
uint64_t tl_rng_poisson(tl_rng *r, double mean);

/* Detector model: counts = gain(u, v) * flux * exp(-line integral) + dark, with
 * gain(u, v) = 1 + gain_variation * (a smooth deterministic pattern in [-1, 1]), dark a
 * constant offset, and Poisson noise on the photon counts when noise is set. Darks are
 * the dark offset alone (plus noise); flats the unattenuated beam. Values are clamped to
 * the dtype range. */
typedef struct {
    double flux;           /* incident photons per pixel (default 10000) */
    double dark;           /* dark offset in counts (default 100) */
    double gain_variation; /* relative amplitude of the gain pattern (default 0.1) */
    bool noise;            /* Poisson noise (default false) */
} tl_camera;
void tl_camera_init(tl_camera *c);

/* What a frame shows: the phantom at angle theta (proj), the open beam (flat) or nothing
 * (dark). */
typedef enum { TL_SIM_DARK = 0, TL_SIM_FLAT, TL_SIM_PROJ } tl_sim_kind;

/* A uint16 camera frame of rows x cols. rng may be NULL when c->noise is false.
 * line_integrals (rows x cols, from tl_phantom_project) is used for projections and may
 * be NULL for darks and flats. */
void tl_camera_frame_u16(const tl_camera *c, tl_sim_kind kind, const float *line_integrals,
                         uint32_t rows, uint32_t cols, tl_rng *rng, uint16_t *out);
/* The same in float32 counts (no clamping). */
void tl_camera_frame_f32(const tl_camera *c, tl_sim_kind kind, const float *line_integrals,
                         uint32_t rows, uint32_t cols, tl_rng *rng, float *out);

#endif
