/* bench.c — benchmarks of an engine (engine_bench.h): the backend times its kernels on a
 * job of the given slices over a full window, and its per-frame path on one frame. */
#include "config.h"

#include <math.h>

#include "gpu/engine_impl.h"

/* A full window for benchmarks: every slot, uniform angles over a complete scan of the
 * geometry (half a turn in parallel beam, a turn in cone beam), the engine's centre. */
static size_t full_projections(tl_engine *e)
{
    uint32_t n = e->win.n;
    for (uint32_t s = 0; s < n; s++)
        e->job.proj[s] = e->geometry->projection(&e->cfg, s, e->cfg.first_index + s,
                                                 e->geometry->turn * s / n, 0.0);
    return n;
}

tl_status tl_engine_bench(tl_engine *e, const int *ids, size_t nids, int reps, tl_bench_row *rows,
                          size_t cap, size_t *n)
{
    tl_bp_job job;
    tl_status st = tl_engine_prepare_job(e, ids, nids, NULL, &job);
    if (st != TL_OK)
        return st;
    job.nproj = full_projections(e);
    return e->ops->bench(e->be, &job, reps < 1 ? 1 : reps, rows, cap, n);
}

tl_status tl_engine_bench_kernel(tl_engine *e, const int *ids, size_t nids, const char *kernel,
                                 int reps, tl_bench_row *row)
{
    tl_bp_job job;
    tl_status st = tl_engine_prepare_job(e, ids, nids, NULL, &job);
    if (st != TL_OK)
        return st;
    if (!kernel || !tl_engine_has_kernel(e, kernel))
        return tl_fail(&e->err, TL_EINVAL, "the %s backend has no kernel \"%s\"", e->backend,
                       kernel ? kernel : "(null)");
    job.force = kernel;
    job.nproj = full_projections(e);
    size_t n = 0;
    st = e->ops->bench(e->be, &job, reps < 1 ? 1 : reps, row, 1, &n);
    if (st == TL_OK && n == 0) /* a backend that skips it without a reason */
        st = tl_fail(&e->err, TL_EUNSUPPORTED, "kernel %s cannot serve these slices", kernel);
    return st;
}

tl_status tl_engine_hw_rates(tl_engine *e, tl_hw_rate *out, size_t cap, size_t *n)
{
    *n = 0;
    if (!e->ops->hw_rates)
        return tl_fail(&e->err, TL_EUNSUPPORTED, "the %s backend has no micro-benchmarks",
                       e->backend);
    return e->ops->hw_rates(e->be, out, cap, n);
}

tl_status tl_engine_bench_store(tl_engine *e, const tl_frame *f, int reps, double *ms)
{
    tl_status st = tl_engine_check_frame(e, f);
    if (st != TL_OK)
        return st;
    if (f->kind != TL_FRAME_PROJ)
        return tl_fail(&e->err, TL_EINVAL, "the store path is timed on projections");
    return e->ops->bench_store(e->be, f, reps < 1 ? 1 : reps, ms);
}
