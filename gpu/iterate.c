/* iterate.c — iterative slices out of an engine (engine.h, tl_engine_iterate): the checks
 * that the window can serve them, and the problem handed to the method (gpu/method/
 * iterative.h): one horizontal slice in parallel beam, a stack of any planes in cone
 * beam. The views are ordered by angle, so that the subsets of SART and OS-SART,
 * which interleave the views, each spread over the whole arc whatever order the frames
 * came in.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "gpu/engine_impl.h"
#include "gpu/method/iterative.h"

/* Why the engine cannot reconstruct slices ids[0..n-1] iteratively as one problem with
 * options o (NULL: any), TL_EINVAL (TL_EUNSUPPORTED for what a backend lacks), or TL_OK. */
static tl_status check_iterative(tl_engine *e, const int *ids, size_t n, const tl_iter_options *o)
{
    if (n == 0)
        return tl_fail(&e->err, TL_EINVAL, "iterative: no slices");
    for (size_t k = 0; k < n; k++)
        if (!tl_engine_slice(e, ids[k]))
            return TL_ENOTFOUND;
    if (e->halfacq)
        return tl_fail(&e->err, TL_EINVAL,
                       "iterative: not with half acquisition (its column weights are FBP's)");
    if (e->cfg.geometry == TL_GEOMETRY_CONE) {
        if (!e->cfg.keep_measurements) /* filtered or not, the window is weighed for FDK */
            return tl_fail(&e->err, TL_EINVAL,
                           "iterative: cone beam needs the measurements kept "
                           "(keep_measurements): the window holds FDK's weighed projections");
        return TL_OK;
    }
    if (n != 1)
        return tl_fail(&e->err, TL_EINVAL,
                       "iterative: parallel beam takes one slice per problem (%zu given): "
                       "horizontal slices are independent",
                       n);
    const tl_slice_entry *se = tl_engine_slice(e, ids[0]);
    if (e->cfg.filter != TL_FILTER_NONE && !e->cfg.keep_measurements)
        return tl_fail(&e->err, TL_EINVAL,
                       "iterative: the window is filtered (%s) and the measurements are not "
                       "kept: filter none, or keep_measurements",
                       tl_filter_name(e->cfg.filter));
    if (se->plane[2] != 0 || se->plane[5] != 0)
        return tl_fail(&e->err, TL_EINVAL,
                       "iterative: the slice must be horizontal (a row slice, or a plane of "
                       "constant z): a tilted plane is not a problem of its own");
    return TL_OK;
}

tl_status tl_iter_options_check(const tl_iter_options *o, char *why, size_t why_len)
{
    tl_errbuf eb = {{0}};
    tl_status st = tl_iter_check_options(o, UINT32_MAX, &eb); /* no views yet: any count */
    if (st != TL_OK && why_len)
        snprintf(why, why_len, "%s", eb.msg);
    return st;
}

tl_status tl_engine_can_iterate(tl_engine *e, int id)
{
    return check_iterative(e, &id, 1, NULL);
}

static int by_angle(const void *a, const void *b)
{
    const tl_angle_key *x = a, *y = b;
    return (x->angle > y->angle) - (x->angle < y->angle);
}

tl_status tl_engine_iterate(tl_engine *e, const int *ids, size_t n, const tl_iter_options *o,
                            const float *start, float *out, double *residual, uint32_t *done,
                            tl_slice_info *info)
{
    *done = 0;
    tl_status st = check_iterative(e, ids, n, o);
    tl_bp_job job;
    if (st == TL_OK)
        st = tl_engine_prepare_job(e, ids, n, NULL, &job);
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
    tl_it_problem p = {.geometry = e->cfg.geometry,
                       .projector = o->projector,
                       .slices = job.slices,
                       .nslices = (uint32_t)n,
                       .proj = views,
                       .nproj = (uint32_t)job.nproj,
                       .unit_z = e->cfg.geometry == TL_GEOMETRY_CONE
                                     ? e->cfg.cone.pixel_v / e->cfg.cone.pixel_u
                                     : 1.0};
    uint32_t sweeps = 0;
    st = tl_iterative_run(e->ops, e->be, &p, o, start, out, residual, done, &sweeps, &e->err);
    free(views);
    if (info) {
        tl_engine_describe_window(e, info);
        info->kernel = sweeps ? TL_ITER_SWEEP_KERNEL : tl_iter_method_name(o->method);
    }
    return st;
}
