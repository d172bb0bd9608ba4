/* parallel.c — parallel-beam geometry (geometry.h): every ray of a projection is parallel,
 * so a projection is its angle and the rotation axis column; the ray through volume point
 * (x, y) hits detector column u = center + x cos(theta) - y sin(theta) (backend.h), and
 * detector row z sees volume height z. Any configuration of the shared checks is served.
 */
#include "config.h"

#include <math.h>

#include "gpu/geometry/geometry.h"

static tl_status parallel_check(const tl_engine_config *c, tl_errbuf *eb)
{
    (void)c, (void)eb;
    return TL_OK;
}

static tl_bp_proj parallel_projection(const tl_engine_config *c, uint32_t slot, uint64_t index,
                                      double angle, double center_offset)
{
    (void)index;
    tl_bp_proj p = {.slot = slot,
                    .cos_t = cos(angle),
                    .sin_t = sin(angle),
                    .center = c->center + center_offset,
                    .weight = M_PI / c->window};
    return p;
}

/* Detector row z sees volume height z. */
static void parallel_rows_seen(const tl_engine_config *c, const tl_bp_proj *p, const double lo[3],
                               const double hi[3], double v[2])
{
    (void)c, (void)p;
    v[0] = lo[2];
    v[1] = hi[2];
}

/* Nothing but the rows: a row is its own sinogram. */
static tl_status parallel_band(const tl_engine_config *c, uint32_t row0, tl_engine_config *out,
                               double (*matrices)[12], tl_errbuf *eb)
{
    (void)c, (void)row0, (void)out, (void)matrices, (void)eb;
    return TL_OK;
}

const tl_geometry_ops tl_geometry_parallel = {
    .name = "parallel",
    .check = parallel_check,
    .projection = parallel_projection,
    .pixel_weights = NULL,
    .rows_seen = parallel_rows_seen,
    .band = parallel_band,
    .turn = M_PI,
};
