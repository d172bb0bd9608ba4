/* iterative.c — the iterative methods over a backend's primitives (iterative.h).
 *
 * An iteration visits the subsets in turn (view k in subset k mod m: SIRT m = 1, SART one
 * view per subset, OS-SART and OS-EM `subsets`); each subset is one forward pass (which
 * leaves the SART or EM ratio in the measurements) and one backward pass (which updates x).
 * Then come non-negativity and the TV steps, as in the reference.
 *
 * The residual ||b - A x|| after an iteration needs A x of the new x. With one subset the
 * next iteration's forward pass computes exactly that, so it is read from there and only
 * the last iteration pays for a forward pass of its own; with several subsets every
 * iteration ends with a forward pass over all views (a third more work for OS-SART, half
 * again for SART), since the subsets' passes each saw a different x.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "gpu/method/iterative.h"

tl_status tl_iter_check_options(const tl_iter_options *o, uint32_t nviews, tl_errbuf *eb)
{
    if ((unsigned)o->method > TL_ITER_OSEM)
        return tl_fail(eb, TL_EINVAL, "iterative: unknown method %d", (int)o->method);
    if ((unsigned)o->projector > TL_PROJECTOR_JOSEPH)
        return tl_fail(eb, TL_EINVAL, "iterative: unknown projector %d", (int)o->projector);
    if (o->iterations == 0)
        return tl_fail(eb, TL_EINVAL, "iterative: iterations 0");
    if (nviews == 0)
        return tl_fail(eb, TL_EINVAL, "iterative: no projections to reconstruct from");
    bool os = o->method == TL_ITER_OS_SART || o->method == TL_ITER_OSEM;
    if (os && o->subsets == 0)
        return tl_fail(eb, TL_EINVAL, "iterative: subsets must be >= 1");
    if (os && o->subsets > nviews)
        return tl_fail(eb, TL_EINVAL, "iterative: %u subsets of %u views", o->subsets, nviews);
    if (o->method != TL_ITER_OSEM && !(o->relaxation > 0 && o->relaxation < 2))
        return tl_fail(eb, TL_EINVAL, "iterative: relaxation %g outside (0, 2)", o->relaxation);
    if (!(o->tv_weight >= 0 && isfinite(o->tv_weight)))
        return tl_fail(eb, TL_EINVAL, "iterative: TV weight %g", o->tv_weight);
    if (!(o->tolerance >= 0 && isfinite(o->tolerance)))
        return tl_fail(eb, TL_EINVAL, "iterative: tolerance %g", o->tolerance);
    return TL_OK;
}

static uint32_t subsets_of(const tl_iter_options *o, uint32_t nviews)
{
    switch (o->method) {
        case TL_ITER_SIRT: return 1;
        case TL_ITER_SART: return nviews;
        default: return o->subsets;
    }
}

/* The views of subset t of m (of n): t, t + m, ... */
static tl_it_views subset(uint32_t t, uint32_t m, uint32_t n)
{
    return (tl_it_views){.first = t, .stride = m, .count = (n - t + m - 1) / m};
}

/* A start for OS-EM when none is given: ones (any start above 0 will do). */
static tl_status ones_start(const tl_it_problem *p, float **out, tl_errbuf *eb)
{
    size_t npix = tl_it_pixels(p);
    float *x = malloc(npix * sizeof *x);
    if (!x)
        return tl_fail(eb, TL_ENOMEM, "iterative: no memory for a start of %zu pixels", npix);
    for (size_t i = 0; i < npix; i++)
        x[i] = 1.0f;
    *out = x;
    return TL_OK;
}

static tl_status check_start(const tl_iter_options *o, const tl_it_problem *p, const float *x,
                             double bmin, tl_errbuf *eb)
{
    if (o->method != TL_ITER_OSEM)
        return TL_OK;
    if (!(bmin >= 0))
        return tl_fail(eb, TL_EINVAL, "iterative: OS-EM needs counts >= 0 (the least is %g)",
                       bmin);
    size_t npix = tl_it_pixels(p);
    for (size_t i = 0; x && i < npix; i++)
        if (!(x[i] > 0))
            return tl_fail(eb, TL_EINVAL,
                           "iterative: OS-EM needs a start above 0 (pixel %zu is %g)", i,
                           (double)x[i]);
    return TL_OK;
}

/* Records iteration it's residual from the sum of squares; true when the tolerance says
 * stop. */
static bool record(const tl_iter_options *o, double sumsq, double bnorm2, uint32_t it,
                   double *residual, double *last, uint32_t *done)
{
    double r = bnorm2 > 0 ? sqrt(sumsq / bnorm2) : 0.0;
    if (residual)
        residual[it] = r;
    bool stop = o->tolerance > 0 && it > 0 && fabs(*last - r) < o->tolerance;
    *last = r;
    *done = it + 1;
    return stop;
}

tl_status tl_iterative_run(const tl_backend_ops *ops, void *be, const tl_it_problem *p,
                           const tl_iter_options *o, const float *start, float *out,
                           double *residual, uint32_t *done, uint32_t *sweeps, tl_errbuf *eb)
{
    *done = 0;
    if (sweeps)
        *sweeps = 0;
    tl_status st = tl_iter_check_options(o, p->nproj, eb);
    if (st != TL_OK)
        return st;
    if (!ops->it_begin)
        return tl_fail(eb, TL_EINVAL, "iterative: the %s backend has no iterative methods",
                       ops->name);
    double stats[2];
    if ((st = ops->it_begin(be, p, stats)) != TL_OK)
        return st;
    float *ones = NULL;
    if (!start && o->method == TL_ITER_OSEM && (st = ones_start(p, &ones, eb)) == TL_OK)
        start = ones;
    if (st == TL_OK)
        st = check_start(o, p, start, stats[1], eb);
    if (st == TL_OK && start)
        st = ops->it_image(be, start, NULL);

    const uint32_t m = subsets_of(o, p->nproj);
    const tl_it_views all = subset(0, 1, p->nproj);
    const tl_it_rule rule = o->method == TL_ITER_OSEM ? TL_IT_EM : TL_IT_SART;
    const bool tv = o->tv_weight > 0 && o->tv_steps > 0;
    /* residuals cost a forward pass of every view per iteration with several subsets (and
     * one at the end with one): only when someone reads them */
    const bool residuals = residual || o->tolerance > 0;
    double last = 0, sumsq = 0;
    bool stop = false;
    for (uint32_t it = 0; st == TL_OK && !stop && it < o->iterations; it++) {
        if (tv)
            st = ops->it_mark(be);
        /* SART: the backend may sweep every view in one go (the same passes, in order) */
        bool swept = false;
        if (m > 1 && m == p->nproj && rule == TL_IT_SART && ops->it_sweep && !o->per_view)
            st = ops->it_sweep(be, o->relaxation, &swept);
        if (swept && sweeps)
            *sweeps += 1;
        for (uint32_t t = 0; st == TL_OK && !swept && t < m; t++) {
            /* only one subset's pass sees the residual: the others need no sum (which
             * would wait for the GPU at every subset) */
            const bool sees = residuals && m == 1;
            st = ops->it_forward(be, subset(t, m, p->nproj), rule, sees ? &sumsq : NULL);
            if (st == TL_OK && sees && it > 0) /* A x of the last iteration's x */
                stop = record(o, sumsq, stats[0], it - 1, residual, &last, done);
            if (st == TL_OK && !stop)
                st = ops->it_backward(be, subset(t, m, p->nproj), rule, o->relaxation);
        }
        if (st == TL_OK && !stop)
            st = ops->it_regularise(be, o->nonneg, tv ? o->tv_weight : 0, o->tv_steps);
        if (st == TL_OK && !stop)
            *done = it + 1;
        bool last_one = it + 1 == o->iterations;
        if (st == TL_OK && !stop && residuals && (m > 1 || last_one)) {
            st = ops->it_forward(be, all, TL_IT_RESIDUAL, &sumsq);
            if (st == TL_OK)
                stop = record(o, sumsq, stats[0], it, residual, &last, done);
        }
    }
    if (st == TL_OK)
        st = ops->it_image(be, NULL, out);
    ops->it_end(be);
    free(ones);
    return st;
}
