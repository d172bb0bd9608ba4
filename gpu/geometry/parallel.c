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

const tl_geometry_ops tl_geometry_parallel = {
    .name = "parallel",
    .check = parallel_check,
    .projection = parallel_projection,
    .pixel_weights = NULL,
    .turn = M_PI,
};
