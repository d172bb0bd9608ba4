/* geometry.c — the geometries by kind (geometry.h): the one place that lists them. */
#include "config.h"

#include "gpu/geometry/geometry.h"

tl_status tl_geometry_find(tl_geometry g, tl_errbuf *eb, const tl_geometry_ops **out)
{
    *out = NULL;
    switch (g) {
        case TL_GEOMETRY_PARALLEL: *out = &tl_geometry_parallel; return TL_OK;
        case TL_GEOMETRY_CONE: *out = &tl_geometry_cone; return TL_OK;
    }
    return tl_fail(eb, TL_EINVAL, "unknown geometry %d", (int)g);
}
