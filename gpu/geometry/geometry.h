/* geometry.h — what a projection means in one beam geometry: which configurations it
 * serves and how a projection taken at an angle becomes the description a backend
 * back-projects (tl_bp_proj, gpu/base/backend.h). The engine asks the geometry of its
 * configuration (tl_geometry_find) and never switches on the kind itself, so a geometry is
 * a file of its own (parallel.c, cone_beam.c) and one line in geometry.c.
 * What a slice means (a plane through the volume) is the same in every geometry: slice.h.
 *
 *   const tl_geometry_ops *g;
 *   if (tl_geometry_find(cfg->geometry, eb, &g) != TL_OK) ...
 *   tl_bp_proj p = g->projection(cfg, slot, index, angle, center_offset);
 */
#ifndef TL_GEOMETRY_H
#define TL_GEOMETRY_H

#include "gpu/base/backend.h"

typedef struct tl_geometry_ops {
    const char *name;
    /* What this geometry asks of a configuration beyond the checks every geometry shares
     * (the engine's check_config). */
    tl_status (*check)(const tl_engine_config *c, tl_errbuf *eb);
    /* The projection of frame `index` held in `slot`, taken at `angle` (radians) with the
     * axis corrected by center_offset pixels, weighed pi / window: the uniform FBP weight,
     * which the method may replace (gpu/method/method.h). */
    tl_bp_proj (*projection)(const tl_engine_config *c, uint32_t slot, uint64_t index,
                             double angle, double center_offset);
    /* Weights every stored projection is multiplied by before the filter, pixel by pixel
     * (rows x cols into w), or NULL where there are none. */
    void (*pixel_weights)(const tl_engine_config *c, double *w);
    /* The detector rows where the box lo..hi of volume coordinates lands in projection p
     * (from `projection` above): v[0] <= v <= v[1] for every point of the box, fractional
     * (before interpolation). Non-finite when the box reaches behind the source. */
    void (*rows_seen)(const tl_engine_config *c, const tl_bp_proj *p, const double lo[3],
                      const double hi[3], double v[2]);
    /* The scan of c as detector rows [row0, row0 + out->rows) see it (out: a copy of c with
     * its rows already set): every projection of volume point (x, y, z) of c lands where
     * out's projection of (x, y, z - row0) does, row0 rows higher. Given cone-beam
     * matrices are shifted into `matrices` (c's count), which out then points to;
     * TL_EINVAL when there are some and no room for them. */
    tl_status (*band)(const tl_engine_config *c, uint32_t row0, tl_engine_config *out,
                      double (*matrices)[12], tl_errbuf *eb);
    /* Why configuration c, which check accepted, cannot be reconstructed by FBP (its
     * views are fit for iterative slices only), or NULL; NULL here: always. */
    const char *(*no_fbp)(const tl_engine_config *c);
    /* The angular range of a complete scan (radians): pi for parallel beam (opposite rays
     * are the same ray), 2 pi for cone beam. Benchmarks spread their angles over it. */
    double turn;
} tl_geometry_ops;

extern const tl_geometry_ops tl_geometry_parallel; /* parallel.c */
extern const tl_geometry_ops tl_geometry_cone;     /* cone_beam.c */

/* The geometry of kind g: TL_EINVAL for an unknown kind, with the message in eb. */
tl_status tl_geometry_find(tl_geometry g, tl_errbuf *eb, const tl_geometry_ops **out);

#endif
