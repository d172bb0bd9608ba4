/* iterative.c — the CPU backend's iterative primitives (backend.h, tl_it_problem; the method
 * itself is gpu/method/iterative.c). Everything is float64, in both precision modes: the
 * window's values are the only float input, so the result differs from the float64
 * reference (gpu/iterative_ref.c) by the window's rounding alone.
 *
 * Each pair visits the same (pixel, bin, weight) links in both directions, decided by one
 * function in both, so it is exactly adjoint (candidates may be found by a division; the
 * link is decided by that function):
 *   matched  the back projection walks pixels and reads the two bins around each pixel's
 *            u (pixel_u); the forward projection walks bins and, plane by plane of pixels,
 *            finds the few pixels whose u lies within a bin of it;
 *   joseph   the forward projection walks each bin's ray plane by plane and reads the two
 *            pixels around its crossing (joseph_pos); the back projection walks pixels and
 *            finds the few rays that cross its plane within a pixel of it.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cpu/cpu_state.h"

#define SLACK 0.01 /* pixels: a plane's candidates widened for the division's rounding */

typedef struct tl_cpu_iter {
    tl_projector projector;
    uint32_t h, w, cols, nproj;
    double *x, *mark, *g; /* images, h * w */
    double *b, *r, *R;    /* nproj * cols: measurements, per-subset values, 1 / (A 1) */
    /* pixel (i, j) at x = x0 + i xi + j xj, y likewise: the slice's plane */
    double x0, xi, xj, y0, yi, yj;
    double *cos_t, *sin_t, *center; /* per view */
} tl_cpu_iter;

static double pixel_u(const tl_cpu_iter *it, uint32_t k, long i, long j)
{
    double x = it->x0 + i * it->xi + j * it->xj, y = it->y0 + i * it->yi + j * it->yj;
    return it->center[k] + x * it->cos_t[k] - y * it->sin_t[k];
}

/* The weight pixel (i, j) gives bin `bin` of view k (0 when they are not linked). */
static double link_weight(const tl_cpu_iter *it, uint32_t k, long i, long j, long bin)
{
    double u = pixel_u(it, k, i, j);
    if (!(u > -1.0 && u < (double)it->cols))
        return 0;
    double fl = floor(u);
    if ((long)fl == bin)
        return 1.0 - (u - fl);
    if ((long)fl + 1 == bin)
        return u - fl;
    return 0;
}

/* Joseph's view k: the planes are rows of pixels when u changes faster along a row, else
 * columns; `along` is u's change per pixel along a plane, `across` per plane, and `len` the
 * path length per plane (volume units). */
typedef struct {
    bool rows;
    double along, across, len;
} joseph_view;

static joseph_view joseph_of(const tl_cpu_iter *it, uint32_t k)
{
    const double du_j = it->xj * it->cos_t[k] - it->yj * it->sin_t[k];
    const double du_i = it->xi * it->cos_t[k] - it->yi * it->sin_t[k];
    joseph_view v = {.rows = fabs(du_j) >= fabs(du_i)};
    v.along = v.rows ? du_j : du_i;
    v.across = v.rows ? du_i : du_j;
    double d = v.along != 0 ? -v.across / v.along : 0; /* along-steps per plane on the ray */
    double dx = v.rows ? it->xi + d * it->xj : it->xj + d * it->xi;
    double dy = v.rows ? it->yi + d * it->yj : it->yj + d * it->yi;
    v.len = hypot(dx, dy);
    return v;
}

/* Where the ray of view k through bin `bin` crosses plane p: the position along the plane,
 * in pixels (the same expression in both directions). */
static double joseph_pos(const tl_cpu_iter *it, uint32_t k, const joseph_view *v, long bin, long p)
{
    double u0 = v->rows ? pixel_u(it, k, p, 0) : pixel_u(it, k, 0, p);
    return (bin - u0) / v->along;
}

/* The weight of pixel `a` of plane p on the ray of bin `bin` (0 when not linked). */
static double joseph_weight(const tl_cpu_iter *it, uint32_t k, const joseph_view *v, long bin,
                            long p, long a)
{
    long nalong = v->rows ? it->w : it->h;
    double pos = joseph_pos(it, k, v, bin, p);
    if (!(pos > -1.0 && pos < (double)nalong))
        return 0;
    double fl = floor(pos);
    if ((long)fl == a)
        return v->len * (1.0 - (pos - fl));
    if ((long)fl + 1 == a)
        return v->len * (pos - fl);
    return 0;
}

static double joseph_bin(const tl_cpu_iter *it, uint32_t k, long bin, const double *x)
{
    const joseph_view v = joseph_of(it, k);
    if (v.along == 0)
        return 0;
    const long nplanes = v.rows ? it->h : it->w, nalong = v.rows ? it->w : it->h;
    double sum = 0;
    for (long p = 0; p < nplanes; p++) {
        double pos = joseph_pos(it, k, &v, bin, p);
        if (!(pos > -1.0 && pos < (double)nalong))
            continue;
        long a0 = (long)floor(pos);
        for (long a = a0; a <= a0 + 1; a++) {
            if (a < 0 || a >= nalong)
                continue;
            long i = v.rows ? p : a, j = v.rows ? a : p;
            sum += joseph_weight(it, k, &v, bin, p, a) * x[(size_t)i * it->w + (size_t)j];
        }
    }
    return sum;
}

/* A^T r (and A^T 1) at pixel (i, j) over view k, Joseph's pair: the rays within a pixel of
 * it in its plane. */
static void joseph_pixel(const tl_cpu_iter *it, uint32_t k, long i, long j, const double *r,
                         double *g, double *norm)
{
    const joseph_view v = joseph_of(it, k);
    if (v.along == 0)
        return;
    const long p = v.rows ? i : j, a = v.rows ? j : i;
    const double u = pixel_u(it, k, i, j), reach = fabs(v.along) + SLACK;
    long lo = (long)floor(u - reach), hi = (long)ceil(u + reach);
    lo = lo < 0 ? 0 : lo;
    hi = hi > (long)it->cols - 1 ? (long)it->cols - 1 : hi;
    for (long bin = lo; bin <= hi; bin++) {
        double wgt = joseph_weight(it, k, &v, bin, p, a);
        *g += wgt * r[bin];
        *norm += wgt;
    }
}

static void free_iter(tl_cpu_iter *it)
{
    if (!it)
        return;
    free(it->x);
    free(it->mark);
    free(it->g);
    free(it->b);
    free(it->r);
    free(it->R);
    free(it->cos_t);
    free(it->sin_t);
    free(it->center);
    free(it);
}

void tl_cpu_it_end(void *state)
{
    tl_cpu_state *s = state;
    free_iter(s->it);
    s->it = NULL;
    tl_cpu_itc_end(s);
}

/* Measurement at (row r, slot, column c), 0 off the detector's rows: the kept
 * measurements where the window is filtered (cfg.keep_measurements), else the window. */
static double window_at(const tl_cpu_state *s, long r, uint32_t slot, uint32_t c)
{
    if (r < 0 || r >= (long)s->rows)
        return 0;
    size_t at = ((size_t)r * s->n + slot) * s->cols + c;
    const void *b = s->meas ? s->meas : s->window;
    return s->f64 ? ((const double *)b)[at] : ((const float *)b)[at];
}

/* ---- forward: y = A x over one view ---------------------------------------------------- */

typedef struct {
    tl_cpu_iter *it;
    const double *x;
    double *y; /* nproj * cols */
    tl_it_views v;
} fp_ctx;

/* Bin `bin` of view k: every pixel linked to it, plane by plane along the axis the pixel
 * grid's u changes least along (so a plane holds at most ceil(2 / |du|) + 1 of them). */
static double matched_bin(const tl_cpu_iter *it, uint32_t k, long bin, const double *x)
{
    const double du_j = it->xj * it->cos_t[k] - it->yj * it->sin_t[k];
    const double du_i = it->xi * it->cos_t[k] - it->yi * it->sin_t[k];
    const bool planes_are_rows = fabs(du_j) >= fabs(du_i);
    const long nplanes = planes_are_rows ? it->h : it->w, nalong = planes_are_rows ? it->w : it->h;
    const double step = planes_are_rows ? du_j : du_i;
    double sum = 0;
    if (step == 0)
        return 0;
    for (long p = 0; p < nplanes; p++) {
        double u0 = planes_are_rows ? pixel_u(it, k, p, 0) : pixel_u(it, k, 0, p);
        double a = (bin - 1 - u0) / step, b = (bin + 1 - u0) / step;
        long lo = (long)floor(fmin(a, b) - SLACK), hi = (long)ceil(fmax(a, b) + SLACK);
        if (lo < 0)
            lo = 0;
        if (hi > nalong - 1)
            hi = nalong - 1;
        for (long q = lo; q <= hi; q++) {
            long i = planes_are_rows ? p : q, j = planes_are_rows ? q : p;
            double wgt = link_weight(it, k, i, j, bin);
            if (wgt != 0)
                sum += wgt * x[(size_t)i * it->w + (size_t)j];
        }
    }
    return sum;
}

static void fp_job(void *ctx, size_t job, int thread)
{
    (void)thread;
    fp_ctx *c = ctx;
    uint32_t k = c->v.first + (uint32_t)job * c->v.stride;
    const bool joseph = c->it->projector == TL_PROJECTOR_JOSEPH;
    for (uint32_t u = 0; u < c->it->cols; u++)
        c->y[(size_t)k * c->it->cols + u] =
            joseph ? joseph_bin(c->it, k, u, c->x) : matched_bin(c->it, k, u, c->x);
}

static void forward(tl_cpu_state *s, tl_it_views v, const double *x, double *y)
{
    tl_cpu_iter *it = s->it;
    fp_ctx c = {.it = it, .x = x, .y = y, .v = v};
    tl_cpu_run_jobs(s, v.count, 8.0 * it->h * it->w, fp_job, &c);
}

/* ---- backward: g = A_S^T r, c = A_S^T 1, and the update -------------------------------- */

typedef struct {
    tl_cpu_iter *it;
    tl_it_views v;
    tl_it_rule rule;
    double lambda;
} bp_ctx;

static void bp_job(void *ctx, size_t job, int thread)
{
    (void)thread;
    const bp_ctx *c = ctx;
    const tl_cpu_iter *it = c->it;
    const long i = (long)job;
    for (long j = 0; j < (long)it->w; j++) {
        double g = 0, norm = 0;
        for (uint32_t n = 0; n < c->v.count; n++) {
            uint32_t k = c->v.first + n * c->v.stride;
            if (it->projector == TL_PROJECTOR_JOSEPH) {
                joseph_pixel(it, k, i, j, it->r + (size_t)k * it->cols, &g, &norm);
                continue;
            }
            double u = pixel_u(it, k, i, j);
            if (!(u > -1.0 && u < (double)it->cols))
                continue;
            double fl = floor(u), f = u - fl;
            long b0 = (long)fl;
            const double *r = it->r + (size_t)k * it->cols;
            if (b0 >= 0) {
                g += (1 - f) * r[b0];
                norm += 1 - f;
            }
            if (b0 + 1 < (long)it->cols) {
                g += f * r[b0 + 1];
                norm += f;
            }
        }
        if (!(norm > 0))
            continue; /* a pixel the subset does not see is left alone */
        double *x = &it->x[(size_t)i * it->w + (size_t)j];
        *x = c->rule == TL_IT_EM ? *x * (g / norm) : *x + c->lambda * (g / norm);
    }
}

tl_status tl_cpu_it_begin(void *state, const tl_it_problem *p, double stats[2])
{
    tl_cpu_state *s = state;
    tl_cpu_it_end(s);
    if (p->geometry == TL_GEOMETRY_CONE)
        return tl_cpu_itc_begin(s, p, stats);
    const float *o = p->slices[0].plane;
    const uint32_t h = p->slices[0].height, w = p->slices[0].width, cols = s->cols, n = p->nproj;
    tl_cpu_iter *it = calloc(1, sizeof *it);
    size_t npix = (size_t)h * w, nmeas = (size_t)n * cols;
    if (it) {
        *it = (tl_cpu_iter){.projector = p->projector, .h = h, .w = w, .cols = cols, .nproj = n};
        it->x = calloc(npix, sizeof *it->x);
        it->mark = calloc(npix, sizeof *it->mark);
        it->g = calloc(npix, sizeof *it->g);
        it->b = calloc(nmeas, sizeof *it->b);
        it->r = calloc(nmeas, sizeof *it->r);
        it->R = calloc(nmeas, sizeof *it->R);
        it->cos_t = calloc(n, sizeof(double));
        it->sin_t = calloc(n, sizeof(double));
        it->center = calloc(n, sizeof(double));
    }
    if (!it || !it->x || !it->mark || !it->g || !it->b || !it->r || !it->R || !it->cos_t ||
        !it->sin_t || !it->center) {
        free_iter(it);
        return tl_fail(s->eb, TL_ENOMEM,
                       "iterative: no host memory for %u x %u pixels and %u views", h, w, n);
    }
    s->it = it;
    const tl_bp_grid g = tl_bp_slice_grid(&p->slices[0]);
    it->x0 = g.p00[0], it->xi = g.di[0], it->xj = g.dj[0];
    it->y0 = g.p00[1], it->yi = g.di[1], it->yj = g.dj[1];
    const double z = o[8];
    const double fl = floor(z), gz = z - fl;
    const long r0 = (long)fl;
    double sumsq = 0, bmin = INFINITY;
    for (uint32_t k = 0; k < n; k++) {
        it->cos_t[k] = p->proj[k].cos_t;
        it->sin_t[k] = p->proj[k].sin_t;
        it->center[k] = p->proj[k].center;
        for (uint32_t u = 0; u < cols; u++) {
            double a = window_at(s, r0, p->proj[k].slot, u);
            double bz = gz != 0 ? window_at(s, r0 + 1, p->proj[k].slot, u) : 0;
            double v = a + gz * (bz - a);
            it->b[(size_t)k * cols + u] = v;
            sumsq += v * v;
            bmin = fmin(bmin, v);
        }
    }
    /* R = 1 / (A 1), once for every view */
    for (size_t i = 0; i < npix; i++)
        it->g[i] = 1.0;
    forward(s, (tl_it_views){0, 1, n}, it->g, it->R);
    for (size_t i = 0; i < nmeas; i++)
        it->R[i] = it->R[i] > 0 ? 1.0 / it->R[i] : 0.0;
    stats[0] = sumsq;
    stats[1] = bmin;
    return TL_OK;
}

tl_status tl_cpu_it_image(void *state, const float *in, float *out)
{
    if (((tl_cpu_state *)state)->itc)
        return tl_cpu_itc_image(state, in, out);
    tl_cpu_iter *it = ((tl_cpu_state *)state)->it;
    size_t npix = (size_t)it->h * it->w;
    for (size_t i = 0; in && i < npix; i++)
        it->x[i] = in[i];
    for (size_t i = 0; out && i < npix; i++)
        out[i] = (float)it->x[i];
    return TL_OK;
}

tl_status tl_cpu_it_forward(void *state, tl_it_views v, tl_it_rule rule, double *sumsq)
{
    if (((tl_cpu_state *)state)->itc)
        return tl_cpu_itc_forward(state, v, rule, sumsq);
    tl_cpu_state *s = state;
    tl_cpu_iter *it = s->it;
    forward(s, v, it->x, it->r);
    double sum = 0;
    for (uint32_t n = 0; n < v.count; n++) {
        size_t at = (size_t)(v.first + n * v.stride) * it->cols;
        for (uint32_t u = 0; u < it->cols; u++, at++) {
            double ax = it->r[at], b = it->b[at];
            sum += (b - ax) * (b - ax);
            if (rule != TL_IT_RESIDUAL)
                it->r[at] = rule == TL_IT_EM ? (ax > 0 ? b / ax : 0.0) : it->R[at] * (b - ax);
        }
    }
    if (sumsq)
        *sumsq = sum;
    return TL_OK;
}

tl_status tl_cpu_it_backward(void *state, tl_it_views v, tl_it_rule rule, double lambda)
{
    if (((tl_cpu_state *)state)->itc)
        return tl_cpu_itc_backward(state, v, rule, lambda);
    tl_cpu_state *s = state;
    bp_ctx c = {.it = s->it, .v = v, .rule = rule, .lambda = lambda};
    tl_cpu_run_jobs(s, s->it->h, 4.0 * s->it->w * v.count, bp_job, &c);
    return TL_OK;
}

tl_status tl_cpu_it_mark(void *state)
{
    if (((tl_cpu_state *)state)->itc)
        return tl_cpu_itc_mark(state);
    tl_cpu_iter *it = ((tl_cpu_state *)state)->it;
    memcpy(it->mark, it->x, (size_t)it->h * it->w * sizeof *it->x);
    return TL_OK;
}

/* The smoothed total variation's gradient of x into g: iterative_ref.c's tv_gradient in
 * two dimensions, forward differences along +x and +y (image row i - 1: rows run from +y
 * down), none across the border. */
static void tv_gradient(const tl_cpu_iter *it, const double *x, double eps, double *g)
{
    const size_t w = it->w, h = it->h;
    memset(g, 0, w * h * sizeof *g);
    for (size_t i = 0; i < h; i++)
        for (size_t j = 0; j < w; j++) {
            size_t v = i * w + j;
            double dx = j + 1 < w ? x[v + 1] - x[v] : 0.0;
            double dy = i > 0 ? x[v - w] - x[v] : 0.0;
            double norm = sqrt(dx * dx + dy * dy + eps * eps);
            g[v] -= dx / norm;
            g[v] -= dy / norm;
            if (j + 1 < w)
                g[v + 1] += dx / norm;
            if (i > 0)
                g[v - w] += dy / norm;
        }
}

tl_status tl_cpu_it_regularise(void *state, bool nonneg, double tv_weight, uint32_t tv_steps)
{
    if (((tl_cpu_state *)state)->itc)
        return tl_cpu_itc_regularise(state, nonneg, tv_weight, tv_steps);
    tl_cpu_iter *it = ((tl_cpu_state *)state)->it;
    const size_t npix = (size_t)it->h * it->w;
    if (nonneg)
        for (size_t i = 0; i < npix; i++)
            it->x[i] = it->x[i] > 0 ? it->x[i] : 0.0;
    if (!(tv_weight > 0))
        return TL_OK;
    double moved = 0;
    for (size_t i = 0; i < npix; i++)
        moved += (it->x[i] - it->mark[i]) * (it->x[i] - it->mark[i]);
    const double step = tv_weight * sqrt(moved);
    double amax = 0;
    for (size_t i = 0; i < npix; i++)
        amax = fmax(amax, fabs(it->x[i]));
    if (!(amax > 0))
        return TL_OK; /* a zero image: nothing to smooth */
    for (uint32_t k = 0; k < tv_steps; k++) {
        tv_gradient(it, it->x, TL_TV_SMOOTHING * amax, it->g);
        double gn = 0;
        for (size_t i = 0; i < npix; i++)
            gn += it->g[i] * it->g[i];
        gn = sqrt(gn);
        if (!(gn > 0))
            break;
        for (size_t i = 0; i < npix; i++)
            it->x[i] -= step * it->g[i] / gn;
    }
    return TL_OK;
}
