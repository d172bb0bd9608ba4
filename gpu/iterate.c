/* iterate.c — iterative slices out of an engine (engine.h, tl_engine_iterate): the checks
 * that the window can serve one, and the problem handed to the method (gpu/method/
 * iterative.h). The views are ordered by angle, so that the subsets of SART and OS-SART,
 * which interleave the views, each spread over the whole arc whatever order the frames
 * came in.
 */
#include "config.h"

#include <stdlib.h>

#include "gpu/engine_impl.h"
#include "gpu/method/iterative.h"

/* Why the engine cannot reconstruct slice se iteratively (TL_EINVAL), or TL_OK. */
static tl_status check_iterative(tl_engine *e, const tl_slice_entry *se)
{
    if (e->cfg.geometry != TL_GEOMETRY_PARALLEL)
        return tl_fail(&e->err, TL_EINVAL,
                       "iterative: parallel beam only so far (the cone-beam projector pair "
                       "is gpu/project_ref.c's reference alone)");
    if (e->cfg.filter != TL_FILTER_NONE && !e->cfg.keep_measurements)
        return tl_fail(&e->err, TL_EINVAL,
                       "iterative: the window is filtered (%s) and the measurements are not "
                       "kept: filter none, or keep_measurements",
                       tl_filter_name(e->cfg.filter));
    if (e->halfacq)
        return tl_fail(&e->err, TL_EINVAL,
                       "iterative: not with half acquisition (its column weights are FBP's)");
    if (se->plane[2] != 0 || se->plane[5] != 0)
        return tl_fail(&e->err, TL_EINVAL,
                       "iterative: the slice must be horizontal (a row slice, or a plane of "
                       "constant z): a tilted plane is not a problem of its own");
    if (!e->ops->it_begin) /* the split backend: rows over several GPUs (#29) */
        return tl_fail(&e->err, TL_EINVAL,
                       "iterative: one device only so far (this engine is %s over several)",
                       e->backend);
    return TL_OK;
}

tl_status tl_engine_can_iterate(tl_engine *e, int id)
{
    const tl_slice_entry *se = tl_engine_slice(e, id);
    return se ? check_iterative(e, se) : TL_ENOTFOUND;
}

static int by_angle(const void *a, const void *b)
{
    const tl_angle_key *x = a, *y = b;
    return (x->angle > y->angle) - (x->angle < y->angle);
}

tl_status tl_engine_iterate(tl_engine *e, int id, const tl_iter_options *o, const float *start,
                            float *out, double *residual, uint32_t *done, tl_slice_info *info)
{
    *done = 0;
    const tl_slice_entry *se = tl_engine_slice(e, id);
    if (!se)
        return TL_ENOTFOUND;
    tl_status st = check_iterative(e, se);
    tl_bp_job job;
    if (st == TL_OK)
        st = tl_engine_prepare_job(e, &id, 1, NULL, &job);
    if (st != TL_OK)
        return st;
    tl_bp_proj *views = malloc((job.nproj ? job.nproj : 1) * sizeof *views);
    if (!views)
        return tl_fail(&e->err, TL_ENOMEM, "iterative: no memory for %zu views", job.nproj);
    for (size_t k = 0; k < job.nproj; k++) /* the weights may have sorted e->job.order */
        e->job.order[k] = (tl_angle_key){e->slot[job.proj[k].slot].angle, (uint32_t)k};
    qsort(e->job.order, job.nproj, sizeof *e->job.order, by_angle);
    for (size_t k = 0; k < job.nproj; k++)
        views[k] = job.proj[e->job.order[k].k];
    tl_it_problem p = {.projector = o->projector,
                       .slice = job.slices[0],
                       .proj = views,
                       .nproj = (uint32_t)job.nproj};
    st = tl_iterative_run(e->ops, e->be, &p, o, start, out, residual, done, &e->err);
    free(views);
    if (info) {
        tl_engine_describe_window(e, info);
        info->kernel = tl_iter_method_name(o->method);
    }
    return st;
}
