/* iterative_ref.c — the float64 reference iterative methods (iterative_ref.h).
 *
 * A subset is a problem of its own: the views k = t, t + m, t + 2m, ... gathered into a
 * geometry of their own (angles and centres, or matrices), so the reference projectors
 * run on it unchanged; its measurements are gathered likewise. The normalisations R_S and
 * C_S are computed once, before the first iteration.
 */
#include "config.h"

#include "gpu/iterative_ref.h"
#include "gpu/method/iterative.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t n; /* views */
    double *theta, *center;
    double (*P)[12];
    tl_pb_slice pb;
    tl_cb_volume cb;
    double *b; /* its measurements, n * view_len */
    double *R; /* 1 / row sums (0 where the row links nothing) */
    double *C; /* 1 / column sums (0 likewise) */
} subset;

void tl_iter_parallel(tl_iter_problem *pb, const tl_pb_slice *g, const double *b, tl_projector p)
{
    memset(pb, 0, sizeof *pb);
    pb->nx = g->nx;
    pb->ny = g->ny;
    pb->nz = 1;
    pb->nviews = g->n;
    pb->view_len = g->cols;
    pb->b = b;
    pb->projector = p;
    pb->pb = *g;
}

void tl_iter_cone(tl_iter_problem *pb, const tl_cb_volume *g, const double *b, tl_projector p)
{
    memset(pb, 0, sizeof *pb);
    pb->nx = g->vol.nx;
    pb->ny = g->vol.ny;
    pb->nz = g->vol.nz;
    pb->nviews = g->n;
    pb->view_len = (size_t)g->rows * g->cols;
    pb->b = b;
    pb->projector = p;
    pb->cone = true;
    pb->cb = *g;
}

static size_t pixels(const tl_iter_problem *pb)
{
    return (size_t)pb->nx * pb->ny * pb->nz;
}

/* A x on subset s's views into out (s->n * view_len). */
static tl_status forward(const tl_iter_problem *pb, const subset *s, const double *x, double *out,
                         tl_errbuf *eb)
{
    if (!pb->cone) {
        tl_project_parallel(&s->pb, pb->projector, x, out);
        return TL_OK;
    }
    return tl_project_cone(&s->cb, pb->projector, x, out, eb);
}

/* A^T y on subset s's views into out (an image). */
static tl_status backward(const tl_iter_problem *pb, const subset *s, const double *y, double *out,
                          tl_errbuf *eb)
{
    if (!pb->cone) {
        tl_backproject_parallel(&s->pb, pb->projector, y, out);
        return TL_OK;
    }
    return tl_backproject_cone(&s->cb, pb->projector, y, out, eb);
}

static void invert(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = v[i] > 0 ? 1.0 / v[i] : 0.0;
}

static void free_subset(subset *s)
{
    free(s->theta);
    free(s->center);
    free(s->P);
    free(s->b);
    free(s->R);
    free(s->C);
}

/* Subset t of m: its views, geometry, measurements and normalisations (ones: scratch of
 * max(pixels, view_len * views) ones). */
static tl_status make_subset(const tl_iter_problem *pb, uint32_t t, uint32_t m, subset *s,
                             const double *ones, tl_errbuf *eb)
{
    const size_t npix = pixels(pb), len = pb->view_len;
    s->n = (pb->nviews - t + m - 1) / m;
    s->b = malloc(s->n * len * sizeof *s->b);
    s->R = malloc(s->n * len * sizeof *s->R);
    s->C = malloc(npix * sizeof *s->C);
    if (pb->cone)
        s->P = malloc(s->n * sizeof *s->P);
    else {
        s->theta = malloc(s->n * sizeof *s->theta);
        s->center = malloc(s->n * sizeof *s->center);
    }
    if (!s->b || !s->R || !s->C || (pb->cone ? !s->P : !s->theta || !s->center))
        return tl_fail(eb, TL_ENOMEM, "iterative: no memory for a subset of %u views", s->n);
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t k = t + i * m;
        memcpy(s->b + i * len, pb->b + k * len, len * sizeof *s->b);
        if (pb->cone)
            memcpy(s->P[i], pb->cb.P[k], sizeof s->P[i]);
        else {
            s->theta[i] = pb->pb.theta[k];
            s->center[i] = pb->pb.center[k];
        }
    }
    s->pb = pb->pb;
    s->pb.n = s->n;
    s->pb.theta = s->theta;
    s->pb.center = s->center;
    s->cb = pb->cb;
    s->cb.n = s->n;
    s->cb.P = (const double(*)[12])s->P;
    tl_status st = forward(pb, s, ones, s->R, eb);
    if (st == TL_OK)
        st = backward(pb, s, ones, s->C, eb);
    invert(s->R, s->n * len);
    invert(s->C, npix);
    return st;
}

/* The smoothed total variation's gradient of x (nx x ny x nz, forward differences, none
 * across the border; smoothing eps) into g. */
static void tv_gradient(const tl_iter_problem *pb, const double *x, double eps, double *g)
{
    const size_t sx = 1, sy = pb->nx, sz = (size_t)pb->nx * pb->ny;
    const uint32_t dims[3] = {pb->nx, pb->ny, pb->nz};
    const size_t strides[3] = {sx, sy, sz};
    memset(g, 0, pixels(pb) * sizeof *g);
    for (uint32_t k = 0; k < pb->nz; k++)
        for (uint32_t j = 0; j < pb->ny; j++)
            for (uint32_t i = 0; i < pb->nx; i++) {
                const uint32_t at[3] = {i, j, k};
                const size_t v = k * sz + j * sy + i;
                double d[3], norm = eps * eps;
                for (int a = 0; a < 3; a++) {
                    d[a] = at[a] + 1 < dims[a] ? x[v + strides[a]] - x[v] : 0.0;
                    norm += d[a] * d[a];
                }
                norm = sqrt(norm);
                for (int a = 0; a < 3; a++) { /* d/dx of norm(v): -d/n at v, +d/n at v + e_a */
                    g[v] -= d[a] / norm;
                    if (at[a] + 1 < dims[a])
                        g[v + strides[a]] += d[a] / norm;
                }
            }
}

static double norm2(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i] * v[i];
    return sqrt(s);
}

static tl_status check_options(const tl_iter_problem *pb, const tl_iter_options *o,
                               const double *x, tl_errbuf *eb)
{
    tl_status st = tl_iter_check_options(o, pb->nviews, eb);
    if (st != TL_OK)
        return st;
    if (o->method == TL_ITER_OSEM) {
        for (size_t i = 0; i < pixels(pb); i++)
            if (!(x[i] > 0))
                return tl_fail(eb, TL_EINVAL,
                               "iterative: OS-EM needs a start above 0 (pixel %zu is %g)", i,
                               x[i]);
        for (size_t i = 0; i < pb->nviews * pb->view_len; i++)
            if (!(pb->b[i] >= 0))
                return tl_fail(eb, TL_EINVAL,
                               "iterative: OS-EM needs counts >= 0 (measurement %zu is %g)", i,
                               pb->b[i]);
    }
    return TL_OK;
}

/* One subset's update of x (ax: measurement scratch, g: image scratch). */
static tl_status update(const tl_iter_problem *pb, const tl_iter_options *o, const subset *s,
                        double *x, double *ax, double *g, tl_errbuf *eb)
{
    const size_t len = s->n * pb->view_len, npix = pixels(pb);
    tl_status st = forward(pb, s, x, ax, eb);
    if (st != TL_OK)
        return st;
    for (size_t i = 0; i < len; i++)
        ax[i] = o->method == TL_ITER_OSEM ? (ax[i] > 0 ? s->b[i] / ax[i] : 0.0)
                                          : s->R[i] * (s->b[i] - ax[i]);
    if ((st = backward(pb, s, ax, g, eb)) != TL_OK)
        return st;
    for (size_t i = 0; i < npix; i++)
        x[i] = o->method == TL_ITER_OSEM ? x[i] * s->C[i] * g[i]
                                         : x[i] + o->relaxation * s->C[i] * g[i];
    return TL_OK;
}

/* The TV steps after an iteration that moved x from prev (overwritten; g: scratch). */
static void tv_steps(const tl_iter_problem *pb, const tl_iter_options *o, double *x, double *prev,
                     double *g)
{
    const size_t npix = pixels(pb);
    for (size_t i = 0; i < npix; i++)
        prev[i] = x[i] - prev[i];
    const double step = o->tv_weight * norm2(prev, npix);
    double amax = 0;
    for (size_t i = 0; i < npix; i++)
        amax = fmax(amax, fabs(x[i]));
    if (!(amax > 0))
        return; /* a zero image: nothing to smooth */
    for (uint32_t k = 0; k < o->tv_steps; k++) {
        tv_gradient(pb, x, TL_TV_SMOOTHING * amax, g);
        double gn = norm2(g, npix);
        if (!(gn > 0))
            return;
        for (size_t i = 0; i < npix; i++)
            x[i] -= step * g[i] / gn;
    }
}

tl_status tl_iter_run(const tl_iter_problem *pb, const tl_iter_options *o, double *x,
                      double *residual, uint32_t *done, tl_errbuf *eb)
{
    *done = 0;
    tl_status st = check_options(pb, o, x, eb);
    if (st != TL_OK)
        return st;
    const uint32_t m = o->method == TL_ITER_SIRT   ? 1
                       : o->method == TL_ITER_SART ? pb->nviews
                                                   : o->subsets;
    const size_t npix = pixels(pb), nb = pb->nviews * pb->view_len;
    const size_t scratch = npix > nb ? npix : nb;
    subset *sub = calloc(m, sizeof *sub);
    double *ones = malloc(scratch * sizeof *ones), *ax = malloc(nb * sizeof *ax);
    double *g = malloc(npix * sizeof *g), *prev = malloc(npix * sizeof *prev);
    /* every view, for the residual: the problem's own geometry (forward reads no more) */
    const subset whole = {.n = pb->nviews, .pb = pb->pb, .cb = pb->cb};
    if (!sub || !ones || !ax || !g || !prev)
        st = tl_fail(eb, TL_ENOMEM, "iterative: no memory for %zu pixels, %zu measurements", npix,
                     nb);
    for (size_t i = 0; st == TL_OK && i < scratch; i++)
        ones[i] = 1.0;
    for (uint32_t t = 0; t < m && st == TL_OK; t++)
        st = make_subset(pb, t, m, &sub[t], ones, eb);
    const double bnorm = norm2(pb->b, nb);
    for (uint32_t it = 0; st == TL_OK && it < o->iterations; it++) {
        memcpy(prev, x, npix * sizeof *x);
        for (uint32_t t = 0; t < m && st == TL_OK; t++)
            st = update(pb, o, &sub[t], x, ax, g, eb);
        if (st != TL_OK)
            break;
        if (o->nonneg)
            for (size_t i = 0; i < npix; i++)
                x[i] = x[i] > 0 ? x[i] : 0.0;
        if (o->tv_weight > 0)
            tv_steps(pb, o, x, prev, g);
        if ((st = forward(pb, &whole, x, ax, eb)) != TL_OK)
            break;
        for (size_t i = 0; i < nb; i++)
            ax[i] = pb->b[i] - ax[i];
        residual[it] = bnorm > 0 ? norm2(ax, nb) / bnorm : 0.0;
        *done = it + 1;
        if (o->tolerance > 0 && it > 0 && fabs(residual[it - 1] - residual[it]) < o->tolerance)
            break;
    }
    for (uint32_t t = 0; sub && t < m; t++)
        free_subset(&sub[t]);
    free(sub);
    free(ones);
    free(ax);
    free(g);
    free(prev);
    return st;
}
