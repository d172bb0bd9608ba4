/* iterative_cone.c — the CPU backend's iterative primitives for cone-beam problems
 * (backend.h, tl_it_problem CONE; the method is gpu/method/iterative.c, the parallel-beam
 * primitives iterative.c). x is every pixel of a stack of planes, b every detector pixel
 * of each view (the kept measurements), and A the transpose of FDK's pixel-driven back
 * projection (kernels_impl.h, tl_cpu_bp_cone_row): a pixel reaches the four detector
 * pixels around its (u, v) bilinearly, weighed 1 / w^2, nothing off the detector or at or
 * behind the source. Float64 throughout, as iterative.c.
 *
 * One function, taps(), decides every (pixel, view) link in both directions, so the pair
 * is exactly adjoint: the back projection gathers the four values around each pixel's
 * (u, v); the forward projection scatters each pixel into them, one job per view (a
 * view's projection is written by its job alone: no locks).
 *
 * Joseph's pair (gpu/base/joseph.h) when the stack is a voxel grid: the forward projection
 * walks each detector pixel's ray, a job per view; the back projection spreads each ray
 * back, a job per accumulator (each its own g and A^T 1, at most JOSEPH_ACC_BYTES of
 * them), the accumulators then summed per pixel for the update.
 *
 * TV steps smooth the stack in three dimensions, as the reference smooths its voxel
 * volume: forward differences along a slice's columns, up its rows (row i - 1: rows run
 * from the top down) and to the next slice of the stack where it has the same shape (the
 * planes of a stack in order, one voxel apart: a tomosynthesis stack, a volume's
 * slices); unit weights, as the reference.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/base/joseph.h"
#include "gpu/cpu/cpu_state.h"

#define JOSEPH_ACC_BYTES ((size_t)2 << 30) /* the back projection's accumulators, at most */

/* A slice of the stack: where its pixels lie, its shape, and its first pixel's index in x. */
typedef struct {
    tl_bp_grid grid;
    uint32_t h, w;
    size_t first;
} itc_slice;

typedef struct tl_cpu_itc {
    uint32_t rows, cols, nproj, nslices;
    size_t npix, view_len, nrows; /* nrows: the slices' rows, the back projection's jobs */
    itc_slice *slices;
    double (*m)[12];   /* per view: its cone matrix (tl_bp_proj.cone) */
    double *x;         /* npix */
    double *b, *r, *R; /* nproj * view_len: measurements, per-subset values, 1 / (A 1) */
    double *mark, *g;  /* TV steps only (npix each, at the first mark): x as marked, gradient */
    bool joseph;       /* Joseph's pair, on this grid with these views' tables: */
    tl_joseph_grid grid;
    tl_joseph_view *jv; /* nproj */
    double *acc;        /* nacc x 2 x npix: the back projection's g and A^T 1 */
    uint32_t nacc;
} tl_cpu_itc;

/* Pixel (i, j) of slice sl in volume coordinates. */
static void pixel_position(const itc_slice *sl, uint32_t i, uint32_t j, double p[3])
{
    for (int a = 0; a < 3; a++)
        p[a] = sl->grid.p00[a] + i * sl->grid.di[a] + j * sl->grid.dj[a];
}

/* The links of the pixel at p to view k: up to four detector pixels at[t] (-1: off the
 * detector) with weights wt[t]. False when it does not reach the view's detector at all. */
static bool taps(const tl_cpu_itc *c, uint32_t k, const double p[3], long at[4], double wt[4])
{
    const double *m = c->m[k];
    const double depth = m[8] * p[0] + m[9] * p[1] + m[10] * p[2] + m[11];
    if (!(depth > 0))
        return false; /* at or behind the source */
    const double u = (m[0] * p[0] + m[1] * p[1] + m[2] * p[2] + m[3]) / depth;
    const double v = (m[4] * p[0] + m[5] * p[1] + m[6] * p[2] + m[7]) / depth;
    if (!(u > -1.0 && u < (double)c->cols && v > -1.0 && v < (double)c->rows))
        return false;
    const double fu = floor(u), fv = floor(v), gu = u - fu, gv = v - fv;
    const double scale = 1.0 / (depth * depth);
    for (int dv = 0; dv < 2; dv++)
        for (int du = 0; du < 2; du++) {
            const long uu = (long)fu + du, vv = (long)fv + dv;
            const bool on = uu >= 0 && uu < (long)c->cols && vv >= 0 && vv < (long)c->rows;
            at[2 * dv + du] = on ? vv * (long)c->cols + uu : -1;
            wt[2 * dv + du] = on ? scale * (du ? gu : 1 - gu) * (dv ? gv : 1 - gv) : 0.0;
        }
    return true;
}

static void free_itc(tl_cpu_itc *c)
{
    if (!c)
        return;
    free(c->slices);
    free(c->m);
    free(c->x);
    free(c->b);
    free(c->r);
    free(c->R);
    free(c->mark);
    free(c->g);
    free(c->jv);
    free(c->acc);
    free(c);
}

void tl_cpu_itc_end(tl_cpu_state *s)
{
    free_itc(s->itc);
    s->itc = NULL;
}

/* ---- forward: y = A x over a subset's views, a job per view ----------------------------- */

typedef struct {
    const tl_cpu_itc *c;
    const double *x;
    double *y; /* nproj * view_len */
    tl_it_views v;
} fp_ctx;

static void fp_job(void *ctx, size_t job, int thread)
{
    (void)thread;
    const fp_ctx *f = ctx;
    const tl_cpu_itc *c = f->c;
    const uint32_t k = f->v.first + (uint32_t)job * f->v.stride;
    double *y = f->y + (size_t)k * c->view_len;
    memset(y, 0, c->view_len * sizeof *y);
    long at[4];
    double wt[4], p[3];
    for (uint32_t n = 0; n < c->nslices; n++) {
        const itc_slice *sl = &c->slices[n];
        const double *x = f->x + sl->first;
        for (uint32_t i = 0; i < sl->h; i++)
            for (uint32_t j = 0; j < sl->w; j++, x++) {
                if (*x == 0)
                    continue;
                pixel_position(sl, i, j, p);
                if (!taps(c, k, p, at, wt))
                    continue;
                for (int t = 0; t < 4; t++)
                    if (at[t] >= 0)
                        y[at[t]] += wt[t] * *x;
            }
    }
}

/* Joseph's forward projection of view first + job * stride: every detector pixel's ray. */
static void fp_joseph_job(void *ctx, size_t job, int thread)
{
    (void)thread;
    const fp_ctx *f = ctx;
    const tl_cpu_itc *c = f->c;
    const uint32_t k = f->v.first + (uint32_t)job * f->v.stride;
    double *y = f->y + (size_t)k * c->view_len;
    long long at[4];
    double wt[4];
    for (uint32_t v = 0; v < c->rows; v++)
        for (uint32_t u = 0; u < c->cols; u++) {
            tl_joseph_ray r;
            double sum = 0;
            if (tl_joseph_ray_of(&c->jv[k], &c->grid, u, v, &r))
                for (uint32_t m = 0; m < r.planes; m++)
                    if (tl_joseph_taps(&r, &c->grid, m, at, wt))
                        for (int t = 0; t < 4; t++)
                            if (at[t] >= 0)
                                sum += wt[t] * f->x[at[t]];
            y[(size_t)v * c->cols + u] = sum;
        }
}

static void forward(tl_cpu_state *s, tl_it_views v, const double *x, double *y)
{
    fp_ctx f = {.c = s->itc, .x = x, .y = y, .v = v};
    tl_cpu_run_jobs(s, v.count, 16.0 * s->itc->npix, s->itc->joseph ? fp_joseph_job : fp_job, &f);
}

/* ---- backward: g = A_S^T r, c = A_S^T 1, and the update, a job per row of a slice ------ */

typedef struct {
    tl_cpu_itc *c;
    tl_it_views v;
    tl_it_rule rule;
    double lambda;
    uint32_t jobs; /* Joseph's: accumulators in use */
} bp_ctx;

static void bp_job(void *ctx, size_t job, int thread)
{
    (void)thread;
    const bp_ctx *b = ctx;
    tl_cpu_itc *c = b->c;
    const itc_slice *sl = c->slices; /* job: row `job` of the slices' rows, in order */
    while (job >= sl->h)
        job -= sl++->h;
    const uint32_t i = (uint32_t)job;
    long at[4];
    double wt[4], p[3];
    for (uint32_t j = 0; j < sl->w; j++) {
        const size_t q = sl->first + (size_t)i * sl->w + j;
        pixel_position(sl, i, j, p);
        double g = 0, norm = 0;
        for (uint32_t n = 0; n < b->v.count; n++) {
            const uint32_t k = b->v.first + n * b->v.stride;
            if (!taps(c, k, p, at, wt))
                continue;
            const double *r = c->r + (size_t)k * c->view_len;
            for (int t = 0; t < 4; t++)
                if (at[t] >= 0) {
                    g += wt[t] * r[at[t]];
                    norm += wt[t];
                }
        }
        if (!(norm > 0))
            continue; /* a pixel the subset does not see is left alone */
        c->x[q] = b->rule == TL_IT_EM ? c->x[q] * (g / norm) : c->x[q] + b->lambda * (g / norm);
    }
}

/* Joseph's back projection into accumulator `job`: the rays of the subset's views n with
 * n mod jobs = job spread back, r into g and 1 into A^T 1. */
static void bp_joseph_job(void *ctx, size_t job, int thread)
{
    (void)thread;
    const bp_ctx *b = ctx;
    tl_cpu_itc *c = b->c;
    double *g = c->acc + job * 2 * c->npix, *ones = g + c->npix;
    memset(g, 0, 2 * c->npix * sizeof *g);
    long long at[4];
    double wt[4];
    for (uint32_t n = (uint32_t)job; n < b->v.count; n += b->jobs) {
        const uint32_t k = b->v.first + n * b->v.stride;
        const double *rk = c->r + (size_t)k * c->view_len;
        for (uint32_t v = 0; v < c->rows; v++)
            for (uint32_t u = 0; u < c->cols; u++) {
                tl_joseph_ray r;
                if (!tl_joseph_ray_of(&c->jv[k], &c->grid, u, v, &r))
                    continue;
                const double value = rk[(size_t)v * c->cols + u];
                for (uint32_t m = 0; m < r.planes; m++)
                    if (tl_joseph_taps(&r, &c->grid, m, at, wt))
                        for (int t = 0; t < 4; t++)
                            if (at[t] >= 0) {
                                g[at[t]] += wt[t] * value;
                                ones[at[t]] += wt[t];
                            }
            }
    }
}

#define UPDATE_CHUNK 65536 /* pixels per job of the update after Joseph's back projection */

/* The update of pixels [job * UPDATE_CHUNK, ...) from the accumulators' sums. */
static void update_job(void *ctx, size_t job, int thread)
{
    (void)thread;
    const bp_ctx *b = ctx;
    tl_cpu_itc *c = b->c;
    const size_t q0 = job * UPDATE_CHUNK;
    const size_t q1 = q0 + UPDATE_CHUNK < c->npix ? q0 + UPDATE_CHUNK : c->npix;
    for (size_t q = q0; q < q1; q++) {
        double g = 0, norm = 0;
        for (uint32_t a = 0; a < b->jobs; a++) {
            g += c->acc[(size_t)a * 2 * c->npix + q];
            norm += c->acc[(size_t)a * 2 * c->npix + c->npix + q];
        }
        if (!(norm > 0))
            continue; /* a pixel the subset does not see is left alone */
        c->x[q] = b->rule == TL_IT_EM ? c->x[q] * (g / norm) : c->x[q] + b->lambda * (g / norm);
    }
}

/* Joseph's pair for the stack of p (TL_EINVAL when the stack is not a voxel grid): the
 * grid, each view's table, the accumulators. */
static tl_status joseph_begin(tl_cpu_state *s, tl_cpu_itc *c, const tl_it_problem *p)
{
    tl_status st = tl_joseph_grid_of(p, &c->grid, s->eb);
    if (st != TL_OK)
        return st;
    c->jv = malloc(p->nproj * sizeof *c->jv);
    if (!c->jv)
        return tl_fail(s->eb, TL_ENOMEM, "iterative: no host memory for %u views", p->nproj);
    for (uint32_t k = 0; k < p->nproj; k++)
        if (!tl_joseph_view_of(&c->grid, p->proj[k].cone, &c->jv[k]))
            return tl_fail(s->eb, TL_EINVAL, "iterative: view %u's matrix is singular", k);
    size_t fit = JOSEPH_ACC_BYTES / (2 * c->npix * sizeof(double));
    c->nacc = s->nthreads > 1 ? (uint32_t)s->nthreads : 1;
    c->nacc = fit < c->nacc ? (fit > 0 ? (uint32_t)fit : 1) : c->nacc;
    c->acc = malloc((size_t)c->nacc * 2 * c->npix * sizeof *c->acc);
    if (!c->acc)
        return tl_fail(s->eb, TL_ENOMEM,
                       "iterative: no host memory for Joseph's back projection (%u x 2 x %zu "
                       "pixels)",
                       c->nacc, c->npix);
    c->joseph = true;
    return TL_OK;
}

/* ---- the primitives ------------------------------------------------------------------- */

/* Measurement (row r, slot, column u): the kept measurements (the window itself holds
 * them weighed for FDK, or filtered). */
static double measurement(const tl_cpu_state *s, uint32_t r, uint32_t slot, uint32_t u)
{
    size_t at = ((size_t)r * s->n + slot) * s->cols + u;
    return s->f64 ? ((const double *)s->meas)[at] : ((const float *)s->meas)[at];
}

/* Each slice's place in the stack. */
static void place_slices(tl_cpu_itc *c, const tl_it_problem *p)
{
    size_t first = 0;
    for (uint32_t n = 0; n < p->nslices; n++) {
        const tl_bp_slice *sl = &p->slices[n];
        c->slices[n] = (itc_slice){.grid = tl_bp_slice_grid(sl),
                                   .h = sl->height,
                                   .w = sl->width,
                                   .first = first};
        first += (size_t)sl->height * sl->width;
        c->nrows += sl->height;
    }
}

tl_status tl_cpu_itc_begin(tl_cpu_state *s, const tl_it_problem *p, double stats[2])
{
    if (!s->meas)
        return tl_fail(s->eb, TL_EINTERNAL, "iterative cone beam without kept measurements");
    const size_t npix = tl_it_pixels(p), view_len = (size_t)s->rows * s->cols;
    const size_t nmeas = (size_t)p->nproj * view_len;
    tl_cpu_itc *c = calloc(1, sizeof *c);
    if (c) {
        *c = (tl_cpu_itc){.rows = s->rows,
                          .cols = s->cols,
                          .nproj = p->nproj,
                          .nslices = p->nslices,
                          .npix = npix,
                          .view_len = view_len};
        c->slices = malloc(p->nslices * sizeof *c->slices);
        c->m = malloc(p->nproj * sizeof *c->m);
        c->x = calloc(npix, sizeof *c->x);
        c->b = malloc(nmeas * sizeof *c->b);
        c->r = calloc(nmeas, sizeof *c->r);
        c->R = calloc(nmeas, sizeof *c->R);
    }
    if (!c || !c->slices || !c->m || !c->x || !c->b || !c->r || !c->R) {
        free_itc(c);
        return tl_fail(s->eb, TL_ENOMEM,
                       "iterative: no host memory for %zu pixels and %u views of %u x %u", npix,
                       p->nproj, s->rows, s->cols);
    }
    s->itc = c;
    place_slices(c, p);
    if (p->projector == TL_PROJECTOR_JOSEPH) {
        tl_status st = joseph_begin(s, c, p);
        if (st != TL_OK) {
            tl_cpu_itc_end(s);
            return st;
        }
    }
    double sumsq = 0, bmin = INFINITY;
    for (uint32_t k = 0; k < p->nproj; k++) {
        memcpy(c->m[k], p->proj[k].cone, sizeof c->m[k]);
        double *b = c->b + (size_t)k * view_len;
        for (uint32_t v = 0; v < s->rows; v++)
            for (uint32_t u = 0; u < s->cols; u++) {
                const double m = measurement(s, v, p->proj[k].slot, u);
                b[(size_t)v * s->cols + u] = m;
                sumsq += m * m;
                bmin = fmin(bmin, m);
            }
    }
    /* R = 1 / (A 1), once for every view (x holds ones meanwhile) */
    for (size_t q = 0; q < npix; q++)
        c->x[q] = 1.0;
    forward(s, (tl_it_views){0, 1, p->nproj}, c->x, c->R);
    memset(c->x, 0, npix * sizeof *c->x);
    for (size_t i = 0; i < nmeas; i++)
        c->R[i] = c->R[i] > 0 ? 1.0 / c->R[i] : 0.0;
    stats[0] = sumsq;
    stats[1] = bmin;
    return TL_OK;
}

tl_status tl_cpu_itc_image(void *state, const float *in, float *out)
{
    tl_cpu_itc *c = ((tl_cpu_state *)state)->itc;
    for (size_t q = 0; in && q < c->npix; q++)
        c->x[q] = in[q];
    for (size_t q = 0; out && q < c->npix; q++)
        out[q] = (float)c->x[q];
    return TL_OK;
}

tl_status tl_cpu_itc_forward(void *state, tl_it_views v, tl_it_rule rule, double *sumsq)
{
    tl_cpu_state *s = state;
    tl_cpu_itc *c = s->itc;
    forward(s, v, c->x, c->r);
    double sum = 0;
    for (uint32_t n = 0; n < v.count; n++) {
        size_t at = (size_t)(v.first + n * v.stride) * c->view_len;
        for (size_t e = 0; e < c->view_len; e++, at++) {
            const double ax = c->r[at], b = c->b[at];
            sum += (b - ax) * (b - ax);
            if (rule != TL_IT_RESIDUAL)
                c->r[at] = rule == TL_IT_EM ? (ax > 0 ? b / ax : 0.0) : c->R[at] * (b - ax);
        }
    }
    if (sumsq)
        *sumsq = sum;
    return TL_OK;
}

tl_status tl_cpu_itc_backward(void *state, tl_it_views v, tl_it_rule rule, double lambda)
{
    tl_cpu_state *s = state;
    tl_cpu_itc *c = s->itc;
    bp_ctx b = {.c = c, .v = v, .rule = rule, .lambda = lambda};
    if (!c->joseph) {
        tl_cpu_run_jobs(s, c->nrows, 16.0 * c->npix * v.count, bp_job, &b);
        return TL_OK;
    }
    b.jobs = v.count < c->nacc ? v.count : c->nacc;
    tl_cpu_run_jobs(s, b.jobs, 16.0 * c->npix * v.count, bp_joseph_job, &b);
    tl_cpu_run_jobs(s, (c->npix + UPDATE_CHUNK - 1) / UPDATE_CHUNK, 4.0 * c->npix * b.jobs,
                    update_job, &b);
    return TL_OK;
}

tl_status tl_cpu_itc_mark(void *state)
{
    tl_cpu_state *s = state;
    tl_cpu_itc *c = s->itc;
    if (!c->mark) {
        c->mark = malloc(c->npix * sizeof *c->mark);
        c->g = malloc(c->npix * sizeof *c->g);
        if (!c->mark || !c->g)
            return tl_fail(s->eb, TL_ENOMEM, "iterative: no memory for the TV steps (%zu pixels)",
                           c->npix);
    }
    memcpy(c->mark, c->x, c->npix * sizeof *c->x);
    return TL_OK;
}

/* Slice n + 1 when it has slice n's shape (the stack's next plane), else NULL. */
static const itc_slice *next_plane(const tl_cpu_itc *c, uint32_t n)
{
    const itc_slice *a = &c->slices[n], *b = a + 1;
    return n + 1 < c->nslices && b->h == a->h && b->w == a->w ? b : NULL;
}

/* The smoothed total variation's gradient of x into g (iterative_ref.c's tv_gradient on
 * the stack: the differences this file's comment names, none across a border). */
static void tv_gradient(const tl_cpu_itc *c, const double *x, double eps, double *g)
{
    memset(g, 0, c->npix * sizeof *g);
    for (uint32_t n = 0; n < c->nslices; n++) {
        const itc_slice *sl = &c->slices[n], *up = next_plane(c, n);
        const size_t w = sl->w, next = up ? up->first - sl->first : 0;
        for (size_t i = 0; i < sl->h; i++)
            for (size_t j = 0; j < w; j++) {
                const size_t v = sl->first + i * w + j;
                const double d[3] = {j + 1 < w ? x[v + 1] - x[v] : 0.0,
                                     i > 0 ? x[v - w] - x[v] : 0.0, up ? x[v + next] - x[v] : 0.0};
                const double norm = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps * eps);
                g[v] -= (d[0] + d[1] + d[2]) / norm;
                if (j + 1 < w)
                    g[v + 1] += d[0] / norm;
                if (i > 0)
                    g[v - w] += d[1] / norm;
                if (up)
                    g[v + next] += d[2] / norm;
            }
    }
}

tl_status tl_cpu_itc_regularise(void *state, bool nonneg, double tv_weight, uint32_t tv_steps)
{
    tl_cpu_state *s = state;
    tl_cpu_itc *c = s->itc;
    for (size_t q = 0; nonneg && q < c->npix; q++)
        c->x[q] = c->x[q] > 0 ? c->x[q] : 0.0;
    if (!(tv_weight > 0))
        return TL_OK;
    double moved = 0, amax = 0;
    for (size_t q = 0; q < c->npix; q++) {
        moved += (c->x[q] - c->mark[q]) * (c->x[q] - c->mark[q]);
        amax = fmax(amax, fabs(c->x[q]));
    }
    if (!(amax > 0))
        return TL_OK; /* a zero image: nothing to smooth */
    const double step = tv_weight * sqrt(moved);
    for (uint32_t k = 0; k < tv_steps; k++) {
        tv_gradient(c, c->x, TL_TV_SMOOTHING * amax, c->g);
        double gn = 0;
        for (size_t q = 0; q < c->npix; q++)
            gn += c->g[q] * c->g[q];
        gn = sqrt(gn);
        if (!(gn > 0))
            break;
        for (size_t q = 0; q < c->npix; q++)
            c->x[q] -= step * c->g[q] / gn;
    }
    return TL_OK;
}
