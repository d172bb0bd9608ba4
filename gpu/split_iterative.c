/* split_iterative.c — iterative slices on an engine split by rows over several GPUs
 * (issue #28 item 5; split.c says why rows). A parallel-beam iterative problem is one
 * horizontal slice, which reads one detector row of every view: the part that owns the
 * row holds it whole (its rows and the halo), so that part solves the problem alone, on
 * its own GPU, exactly as a single engine would (the slice is shifted into the part's
 * rows like any other). This is the volume split of seed 003 (§40.3.4) in parallel beam:
 * different slices run on different GPUs, and the row-split window needs no exchange.
 * A cone-beam stack needs every row, so cone beam never comes here (backends.c: one CUDA
 * engine whose problems spread over the devices, gpu/cuda/iterative_cone.cu).
 */
#include "config.h"

#include "gpu/split_impl.h"

/* The part solving the current problem (it_begin chose it). */
static tl_split_part *solver(tl_split *sp)
{
    return &sp->p[sp->it_part];
}

/* A child's failure as the split's: its message, named by part and device. */
static tl_status child(tl_split *sp, tl_status st)
{
    if (st == TL_OK)
        return TL_OK;
    solver(sp)->st = st;
    return tl_split_part_fail(sp, sp->it_part);
}

tl_status tl_split_it_begin(void *state, const tl_it_problem *p, double stats[2])
{
    tl_split *sp = state;
    if (p->geometry != TL_GEOMETRY_PARALLEL || p->nslices != 1 || p->slices[0].plane[2] != 0 ||
        p->slices[0].plane[5] != 0)
        return tl_fail(sp->eb, TL_EINTERNAL,
                       "split iterative: one horizontal parallel-beam slice per problem");
    uint32_t k0, k1;
    tl_split_parts_of(sp, &p->slices[0], &k0, &k1);
    sp->it_part = k0;
    tl_split_part *q = solver(sp);
    tl_bp_slice shifted = p->slices[0];
    shifted.plane[8] -= (float)q->first; /* exact where q owns the height (split_route.c) */
    tl_it_problem mine = *p;
    mine.slices = &shifted;
    if (!q->ops->it_begin)
        return tl_fail(sp->eb, TL_EINVAL, "iterative: the %s backend has no iterative methods",
                       q->ops->name);
    return child(sp, q->ops->it_begin(q->be, &mine, stats));
}

tl_status tl_split_it_image(void *state, const float *in, float *out)
{
    tl_split *sp = state;
    return child(sp, solver(sp)->ops->it_image(solver(sp)->be, in, out));
}

tl_status tl_split_it_forward(void *state, tl_it_views v, tl_it_rule rule, double *sumsq)
{
    tl_split *sp = state;
    return child(sp, solver(sp)->ops->it_forward(solver(sp)->be, v, rule, sumsq));
}

tl_status tl_split_it_backward(void *state, tl_it_views v, tl_it_rule rule, double lambda)
{
    tl_split *sp = state;
    return child(sp, solver(sp)->ops->it_backward(solver(sp)->be, v, rule, lambda));
}

tl_status tl_split_it_sweep(void *state, double lambda, bool *swept)
{
    tl_split *sp = state;
    const tl_backend_ops *ops = solver(sp)->ops;
    *swept = false;
    return ops->it_sweep ? child(sp, ops->it_sweep(solver(sp)->be, lambda, swept)) : TL_OK;
}

tl_status tl_split_it_mark(void *state)
{
    tl_split *sp = state;
    return child(sp, solver(sp)->ops->it_mark(solver(sp)->be));
}

tl_status tl_split_it_regularise(void *state, bool nonneg, double tv_weight, uint32_t tv_steps)
{
    tl_split *sp = state;
    return child(sp, solver(sp)->ops->it_regularise(solver(sp)->be, nonneg, tv_weight, tv_steps));
}

void tl_split_it_end(void *state)
{
    tl_split *sp = state;
    solver(sp)->ops->it_end(solver(sp)->be);
}
