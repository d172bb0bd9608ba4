/* slices.c — the slice registry (engine.h, tl_engine_add_slice): ids are indices of a
 * growing table, reused once removed; each entry keeps its spec and plane. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine_impl.h"

tl_slice_entry *tl_engine_slice(tl_engine *e, int id)
{
    if (id < 0 || id >= e->nslices || !e->slices[id].used) {
        tl_fail(&e->err, TL_ENOTFOUND, "no slice %d", id);
        return NULL;
    }
    return &e->slices[id];
}

static tl_status check_spec(tl_engine *e, const tl_slice_spec *s)
{
    if (!s || s->height == 0 || s->width == 0 || s->height > 65536 || s->width > 65536)
        return tl_fail(&e->err, TL_EINVAL, "slice size out of range 1..65536");
    if (!(s->scale > 0) || !isfinite(s->scale))
        return tl_fail(&e->err, TL_EINVAL, "slice scale must be a positive number");
    if ((unsigned)s->kind > TL_SLICE_PLANE ||
        (s->kind == TL_SLICE_ORTHO && (unsigned)s->axis > TL_AXIS_Z))
        return tl_fail(&e->err, TL_EINVAL, "unknown slice kind or axis");
    if (!isfinite(s->z) || !isfinite(s->position))
        return tl_fail(&e->err, TL_EINVAL, "slice position is not finite");
    for (int i = 0; i < 9; i++)
        if (!isfinite(s->orientation[i]))
            return tl_fail(&e->err, TL_EINVAL, "slice orientation is not finite");
    return TL_OK;
}

tl_status tl_engine_add_slice(tl_engine *e, const tl_slice_spec *s, int *id)
{
    tl_status st = check_spec(e, s);
    if (st != TL_OK)
        return st;
    float plane[9]; /* a position finite as a double may not be as a float (1e308) */
    tl_slice_plane(s, e->cfg.rows, plane);
    for (int i = 0; i < 9; i++)
        if (!isfinite(plane[i]))
            return tl_fail(&e->err, TL_EINVAL, "the slice's plane is not finite");
    int k = 0;
    while (k < e->nslices && e->slices[k].used)
        k++;
    if (k == e->cap_slices) {
        int cap = e->cap_slices ? 2 * e->cap_slices : 8;
        tl_slice_entry *grown = realloc(e->slices, (size_t)cap * sizeof *grown);
        if (!grown)
            return tl_fail(&e->err, TL_ENOMEM, "out of memory for slices");
        e->slices = grown;
        e->cap_slices = cap;
    }
    if (k == e->nslices)
        e->nslices++;
    tl_slice_entry *se = &e->slices[k];
    memset(se, 0, sizeof *se);
    se->used = true;
    se->spec = *s;
    memcpy(se->plane, plane, sizeof se->plane);
    e->live_slices++;
    *id = k;
    return TL_OK;
}

tl_status tl_engine_remove_slice(tl_engine *e, int id)
{
    tl_slice_entry *se = tl_engine_slice(e, id);
    if (!se)
        return TL_ENOTFOUND;
    if (se->tracked)
        tl_engine_track(e, id, false);
    se->used = false;
    e->live_slices--;
    return TL_OK;
}
