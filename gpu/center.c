/* center.c — the centre of rotation, estimated live from opposite projections
 * (engine.h, tl_engine_center; ARCHITECTURE.md §3.12).
 *
 * A projection at angle θ + π is the one at θ mirrored about the axis column c:
 * p(θ + π, u) = p(θ, 2c − u). The backend keeps every projection's column profile (the
 * mean over the detector rows, as stored before the filter) in a ring of two windows;
 * every window/16 projections, when a new pair has come, the engine takes up to
 * TL_CENTER_PAIRS pairs, newest first (angles π apart within TL_CENTER_PAIR_TOL, else,
 * for a window of exactly half a turn, within one angular step, the nearer one then
 * extrapolated in angle from its neighbour: center_pair), reads their profiles
 * (one wait for the GPU), and for each pair finds the shift s that best maps the
 * gradient of one profile onto the mirrored gradient of the other: the peak of their
 * cross-correlation (FFTW, zero-padded to avoid wrap-around), refined to sub-pixel by
 * Newton steps on its trigonometric interpolation — the correlation of band-limited
 * signals is itself band-limited, so the peak is found between samples without a
 * model. Then c = (W − 1 + s) / 2 minus the pair's mean centre correction. Gradients, not
 * profiles: flat parts (air, or an object wider than the detector) carry no
 * information and would pull the peak towards zero shift. The estimate is the median over
 * the pairs, the confidence the median normalised correlation of the matched gradients
 * (1: mirror images), the spread the pairs' median absolute deviation. Using the newest
 * pairs tracks a drifting axis (each pair measures the mean axis of its two
 * projections). With center_auto the engine moves its centre to the estimate when the
 * confidence is at least TL_CENTER_MIN_CONFIDENCE and the change at least
 * TL_CENTER_APPLY_PX: as set_center, every tracked slice is rebuilt.
 *
 * With half acquisition (halfacq.c) the profiles are of the virtual detector, the real
 * one embedded at an offset with zeros around it, and weighed column by column for the
 * overlap (a projection and its opposite weighed complementarily, so they would not
 * match): the weights of the axis at the time are divided out (unweigh); only the real
 * columns are correlated (a gradient taken across the embedding's edge would be a step
 * that is no feature of the object); the estimate is given on the real detector, as
 * set_center takes it. Opposite projections overlap only in the columns both see, a
 * share that changes with the shift: the peak is that of the normalised match
 * (partial_peak), refined with a fixed window (partial_window).
 */
#include "config.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/base/sort.h"
#include "gpu/cpu/cpu_backend.h"
#include "gpu/engine_impl.h"

#define TL_CENTER_PAIRS 8            /* pairs per estimate */
#define TL_CENTER_PAIR_TOL 1e-4      /* rad: "exactly" opposite */
#define TL_CENTER_MIN_CONFIDENCE 0.5 /* center_auto applies estimates at least this sure */
#define TL_CENTER_APPLY_PX 0.02      /* ... that move the axis at least this far */
#define TL_CENTER_NEWTON_STEPS 8
#define TL_CENTER_REFINE_MARGIN 2 /* half acquisition: columns kept off the overlap's ends */
#define TL_CENTER_SEARCH 64       /* newest projections a pair is looked for from */
/* half acquisition: shifts whose overlap has fewer real columns than this (and than
 * 1/32 of the detector) are not candidates: a few columns match anything */
#define TL_CENTER_MIN_OVERLAP 16

typedef struct {
    double angle, offset;
    double weighed_at; /* half acquisition: the virtual axis its column weights were for */
    uint64_t index;
    bool valid;
} center_entry;

struct tl_center_ctx {
    uint32_t nprof, cols, len; /* ring size, profile length, FFT length (2^k >= 2W) */
    uint32_t first, last;      /* the columns of the real detector in the profile */
    center_entry *entry;       /* per ring position */
    bool *used;                /* per ring position: taken by a pair (find_pairs) */
    uint64_t stored;           /* projections given a position */
    uint32_t since;            /* projections since the last estimate */
    uint64_t used_newest;      /* newest index of the last estimate's pairs */
    bool have_used;
    uint32_t *pos;                    /* 3 TL_CENTER_PAIRS positions being read */
    float *prof;                      /* ... their profiles */
    double *fa, *fq;                  /* FFT inputs */
    fftw_complex *sa, *sq;            /* spectra */
    bool partial;                     /* half acquisition: the peak by normalised match */
    double *r1, *r2, *r3, *r4;        /* ... its FFT inputs and outputs */
    fftw_complex *s1, *s2;            /* ... and spectra */
    fftw_plan plan_a, plan_q, plan_c; /* r2c of fa, of fq; c2r of sa into fa */
    tl_center_estimate est;
};

void tl_center_free(tl_engine *e)
{
    tl_center_ctx *c = e->center;
    if (!c)
        return;
    tl_cpu_fftw_plan_lock();
    if (c->plan_a)
        fftw_destroy_plan(c->plan_a);
    if (c->plan_q)
        fftw_destroy_plan(c->plan_q);
    if (c->plan_c)
        fftw_destroy_plan(c->plan_c);
    tl_cpu_fftw_plan_unlock();
    fftw_free(c->fa);
    fftw_free(c->fq);
    fftw_free(c->sa);
    fftw_free(c->sq);
    fftw_free(c->r1);
    fftw_free(c->r2);
    fftw_free(c->r3);
    fftw_free(c->r4);
    fftw_free(c->s1);
    fftw_free(c->s2);
    free(c->entry);
    free(c->used);
    free(c->pos);
    free(c->prof);
    free(c);
    e->center = NULL;
}

tl_status tl_center_init(tl_engine *e)
{
    if (!e->cfg.center_estimate && !e->cfg.center_auto)
        return TL_OK;
    if (!e->ops->profiles || !e->ops->profile_slot)
        return tl_fail(&e->err, TL_EUNSUPPORTED,
                       "the %s backend cannot estimate the centre of rotation", e->backend);
    tl_center_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return tl_fail(&e->err, TL_ENOMEM, "out of memory for the centre estimation");
    e->center = c;
    c->nprof = tl_center_profiles(e->cfg.window);
    c->cols = e->cfg.cols;
    c->first = 0;
    c->last = c->cols - 1;
    if (e->halfacq) {
        uint32_t real;
        tl_halfacq_span(e->halfacq, &c->first, &real);
        c->last = c->first + real - 1;
    }
    c->len = 2;
    while (c->len < 2 * c->cols)
        c->len *= 2;
    c->entry = calloc(c->nprof, sizeof *c->entry);
    c->used = calloc(c->nprof, sizeof *c->used);
    c->pos = malloc(3 * TL_CENTER_PAIRS * sizeof *c->pos);
    c->prof = malloc(3 * TL_CENTER_PAIRS * (size_t)c->cols * sizeof *c->prof);
    c->fa = fftw_malloc(c->len * sizeof *c->fa);
    c->fq = fftw_malloc(c->len * sizeof *c->fq);
    c->sa = fftw_malloc((c->len / 2 + 1) * sizeof *c->sa);
    c->sq = fftw_malloc((c->len / 2 + 1) * sizeof *c->sq);
    if (!c->entry || !c->used || !c->pos || !c->prof || !c->fa || !c->fq || !c->sa || !c->sq)
        return tl_fail(&e->err, TL_ENOMEM, "out of memory for the centre estimation");
    c->partial = e->halfacq != NULL;
    if (c->partial) {
        c->r1 = fftw_malloc(c->len * sizeof *c->r1);
        c->r2 = fftw_malloc(c->len * sizeof *c->r2);
        c->r3 = fftw_malloc(c->len * sizeof *c->r3);
        c->r4 = fftw_malloc(c->len * sizeof *c->r4);
        c->s1 = fftw_malloc((c->len / 2 + 1) * sizeof *c->s1);
        c->s2 = fftw_malloc((c->len / 2 + 1) * sizeof *c->s2);
        if (!c->r1 || !c->r2 || !c->r3 || !c->r4 || !c->s1 || !c->s2)
            return tl_fail(&e->err, TL_ENOMEM, "out of memory for the centre estimation");
    }
    tl_cpu_fftw_plan_lock();
    c->plan_a = fftw_plan_dft_r2c_1d((int)c->len, c->fa, c->sa, FFTW_ESTIMATE);
    c->plan_q = fftw_plan_dft_r2c_1d((int)c->len, c->fq, c->sq, FFTW_ESTIMATE);
    c->plan_c = fftw_plan_dft_c2r_1d((int)c->len, c->sa, c->fa, FFTW_ESTIMATE);
    tl_cpu_fftw_plan_unlock();
    if (!c->plan_a || !c->plan_q || !c->plan_c)
        return tl_fail(&e->err, TL_EINTERNAL, "FFTW could not plan a %u-point transform", c->len);
    c->est.estimating = true;
    c->est.auto_on = e->cfg.center_auto;
    return TL_OK;
}

tl_status tl_center_before_store(tl_engine *e)
{
    tl_center_ctx *c = e->center;
    if (!c)
        return TL_OK;
    uint32_t p = (uint32_t)(c->stored % c->nprof);
    c->entry[p].valid = false; /* overwritten now, valid once stored */
    return e->ops->profile_slot(e->be, (int32_t)p);
}

/* ---- one pair -------------------------------------------------------------------------- */

/* The central-difference gradient of a profile into the FFT input, zero-padded, and zero
 * where it would reach beyond the real detector's columns. */
static void gradient(const tl_center_ctx *c, const float *p, double *out, bool mirrored)
{
    const uint32_t W = c->cols;
    memset(out, 0, c->len * sizeof *out);
    for (uint32_t u = 1; u + 1 < W; u++) {
        uint32_t k = mirrored ? W - 1 - u : u;
        if (k <= c->first || k >= c->last)
            continue;
        /* mirroring negates the gradient: q(u) = b(W−1−u), q'(u) = −b'(W−1−u) */
        double g = 0.5 * ((double)p[k + 1] - (double)p[k - 1]);
        out[u] = mirrored ? -g : g;
    }
}

/* The cross-correlation C(s) = sum_u a(u + s) q(u) from its spectrum X = A conj(Q), at a
 * real s (trigonometric interpolation), with its first two derivatives. */
static void corr_at(const fftw_complex *X, uint32_t L, double s, double *C, double *d1, double *d2)
{
    double w = 2 * M_PI / L, c0 = X[0][0], c1 = 0, c2 = 0;
    for (uint32_t k = 1; k < L / 2; k++) {
        double t = w * k * s, cs = cos(t), sn = sin(t);
        double re = X[k][0] * cs - X[k][1] * sn, im = X[k][0] * sn + X[k][1] * cs;
        c0 += 2 * re;
        c1 += -2 * w * k * im;
        c2 += -2 * (w * k) * (w * k) * re;
    }
    double ny = X[L / 2][0]; /* the Nyquist term: cos(pi s) */
    c0 += ny * cos(M_PI * s);
    c1 += -ny * M_PI * sin(M_PI * s);
    c2 += -ny * M_PI * M_PI * cos(M_PI * s);
    *C = c0 / L;
    *d1 = c1 / L;
    *d2 = c2 / L;
}

/* Normalised correlation of a(u + s) (linear interpolation) with q over their overlap:
 * where both are within the real detector's columns [lo, hi] (a unmirrored, q mirrored). */
static double normalised(const double *a, const double *q, uint32_t W, double s, double lo,
                         double hi)
{
    double sa = 0, sq = 0, saa = 0, sqq = 0, saq = 0;
    size_t n = 0;
    for (uint32_t u = 0; u < W; u++) {
        double x = u + s, m = W - 1.0 - u;
        if (x < lo || x > hi || m < lo || m > hi)
            continue;
        uint32_t i = (uint32_t)x;
        double f = x - i, va = i + 1 < W ? a[i] + f * (a[i + 1] - a[i]) : a[i], vq = q[u];
        sa += va;
        sq += vq;
        saa += va * va;
        sqq += vq * vq;
        saq += va * vq;
        n++;
    }
    if (n < 2)
        return 0;
    double cov = saq - sa * sq / n, va = saa - sa * sa / n, vq = sqq - sq * sq / n;
    return va > 0 && vq > 0 ? cov / sqrt(va * vq) : 0;
}

/* x[k] = x[k] conj(y[k]) scale: the spectrum of a cross-correlation (scale 1/L makes the
 * c2r give the correlation itself). L is a power of two, so 1/L is exact. */
static void times_conj(fftw_complex *x, const fftw_complex *y, uint32_t n, double scale)
{
    for (uint32_t k = 0; k < n; k++) {
        double xr = x[k][0], xi = x[k][1], yr = y[k][0], yi = y[k][1];
        x[k][0] = (xr * yr + xi * yi) * scale;
        x[k][1] = (xi * yr - xr * yi) * scale;
    }
}

/* out[s mod L] = sum_u x(u + s) y(u), x and y zero-padded to L (kept: an out-of-place
 * r2c preserves its input). The plans are the context's, run on these arrays. */
static void xcorr(tl_center_ctx *c, double *x, double *y, double *out)
{
    const uint32_t L = c->len;
    fftw_execute_dft_r2c(c->plan_a, x, c->s1);
    fftw_execute_dft_r2c(c->plan_a, y, c->s2);
    times_conj(c->s1, c->s2, L / 2 + 1, 1.0 / L);
    fftw_execute_dft_c2r(c->plan_c, c->s1, out);
}

/* Half acquisition: the opposite projections share only the columns both see, so the
 * plain correlation (the integer shifts' values in `corr`, times L) favours shifts of a
 * larger overlap. Instead the shift of the best normalised match,
 *   C(s) / sqrt(Ea(s) Eq(s)),  Ea(s) = sum over the overlap of a(u + s)^2, Eq likewise,
 * each sum a correlation with the other's mask of real columns (by FFT, as C), among
 * the shifts whose overlap is wide enough. ga: a's gradient; gq: q's (mirrored). */
static long partial_peak(tl_center_ctx *c, const double *corr, const double *ga, const double *gq)
{
    const long W = c->cols, L = c->len, lo = c->first + 1, hi = (long)c->last - 1;
    long need = (hi - lo + 1) / 32;
    need = need > TL_CENTER_MIN_OVERLAP ? need : TL_CENTER_MIN_OVERLAP;
    memset(c->r2, 0, L * sizeof *c->r2);
    for (long u = W - 1 - hi; u <= W - 1 - lo; u++) /* q's real columns (mirrored) */
        c->r2[u] = 1;
    for (long u = 0; u < L; u++)
        c->r1[u] = ga[u] * ga[u];
    xcorr(c, c->r1, c->r2, c->r3); /* Ea */
    memset(c->r1, 0, L * sizeof *c->r1);
    for (long u = lo; u <= hi; u++) /* a's real columns */
        c->r1[u] = 1;
    for (long u = 0; u < L; u++)
        c->r2[u] = gq[u] * gq[u];
    xcorr(c, c->r1, c->r2, c->r4); /* Eq */
    long best = 0;
    double top = -INFINITY;
    for (long s = -W + 2; s <= W - 2; s++) {
        long from = lo - s > W - 1 - hi ? lo - s : W - 1 - hi,
             to = hi - s < W - 1 - lo ? hi - s : W - 1 - lo;
        if (to - from + 1 < need)
            continue;
        long i = (s + L) % L;
        double ea = c->r3[i], eq = c->r4[i];
        if (!(ea > 0 && eq > 0))
            continue;
        double v = corr[i] / L / sqrt(ea * eq);
        if (v > top) {
            top = v;
            best = s;
        }
    }
    return best;
}

/* Half acquisition, between samples. The overlap's ends move with the shift, so the
 * normalised match of partial_peak has kinks at whole shifts (its maximum snaps to one).
 * Instead q is cut to a fixed window, the overlap at the best whole shift less
 * TL_CENTER_REFINE_MARGIN columns at each end (so that a is real all over it for every
 * shift within a sample), and the plain correlation with that window, a spectrum
 * written to X, is refined as in the whole-detector case. False (X unset) where the
 * window would be too narrow: the whole shift stands. ga: a's gradient; gq: q's. */
static bool partial_window(tl_center_ctx *c, double *ga, const double *gq, long best,
                           fftw_complex *X)
{
    const long W = c->cols, L = c->len, lo = c->first + 1, hi = (long)c->last - 1,
               m = TL_CENTER_REFINE_MARGIN;
    long from = lo - best > W - 1 - hi ? lo - best : W - 1 - hi,
         to = hi - best < W - 1 - lo ? hi - best : W - 1 - lo;
    from += m, to -= m;
    if (to - from < 2 * m)
        return false;
    memset(c->r2, 0, L * sizeof *c->r2);
    for (long u = from; u <= to; u++)
        c->r2[u] = gq[u];
    fftw_execute_dft_r2c(c->plan_a, ga, X);
    fftw_execute_dft_r2c(c->plan_a, c->r2, c->s1);
    times_conj(X, c->s1, L / 2 + 1, 1); /* X = A conj(Q_window) */
    return true;
}

/* The axis column from profiles pa (angle θ) and pb (θ + π), and the match's quality. */
static void pair_center(tl_center_ctx *c, const float *pa, const float *pb, double *center,
                        double *quality)
{
    const uint32_t W = c->cols, L = c->len;
    gradient(c, pa, c->fa, false);
    gradient(c, pb, c->fq, true);
    fftw_execute(c->plan_a);
    fftw_execute(c->plan_q);
    times_conj(c->sa, c->sq, L / 2 + 1, 1); /* X = A conj(Q), into sa */
    /* keep X (sa is overwritten by the c2r), the correlation at integer shifts into fa */
    fftw_complex *X = c->sq;
    memcpy(X, c->sa, (L / 2 + 1) * sizeof *X);
    fftw_execute(c->plan_c);
    long best = 0;
    double top = -INFINITY;
    if (c->partial) {
        gradient(c, pa, c->r4, false); /* partial_peak reads it before it writes r4 */
        best = partial_peak(c, c->fa, c->r4, c->fq);
    } else
        for (long s = -(long)W + 2; s <= (long)W - 2; s++) {
            double v = c->fa[(s + (long)L) % L];
            if (v > top) {
                top = v;
                best = s;
            }
        }
    double s = (double)best, C, d1, d2;
    bool refine = true;
    if (c->partial) {
        gradient(c, pa, c->r4, false); /* partial_peak overwrote it */
        refine = partial_window(c, c->r4, c->fq, best, X);
    }
    for (int it = 0; refine && it < TL_CENTER_NEWTON_STEPS; it++) {
        corr_at(X, L, s, &C, &d1, &d2);
        if (!(d2 < 0))
            break; /* not at a maximum's cap: keep the sample */
        double step = -d1 / d2;
        step = step > 0.5 ? 0.5 : step < -0.5 ? -0.5 : step;
        s += step;
        if (fabs(step) < 1e-9)
            break;
    }
    if (fabs(s - best) > 1)
        s = (double)best;
    *center = (W - 1 + s) / 2.0 - c->first; /* on the real detector */
    gradient(c, pa, c->fa, false);
    gradient(c, pb, c->fq, true);
    *quality = normalised(c->fa, c->fq, W, s, c->first + 1.0, c->last - 1.0);
}

/* ---- pairs, estimates ------------------------------------------------------------------- */

static double wrap_pi(double a) /* into (−π, π] */
{
    a = fmod(a, 2 * M_PI);
    if (a > M_PI)
        a -= 2 * M_PI;
    if (a <= -M_PI)
        a += 2 * M_PI;
    return a;
}

/* A pair: positions a and its partner b; when they are not exactly opposite (a window of
 * half a turn), a's profile is extrapolated in angle to the exact opposite of b from its
 * neighbour a2 (t = mismatch / their angular distance):
 *   p(θ_b − π) ≈ (1 + t) p(θ_a) − t p(θ_a2),
 * which leaves an error of the second order in the angular step instead of the first. */
typedef struct {
    uint32_t a, b, a2;
    double t; /* 0: exact, a2 unused */
} center_pair;

/* Up to TL_CENTER_PAIRS pairs, newest first, within tol; returns how many. */
static size_t find_pairs(tl_center_ctx *c, double tol, center_pair *out)
{
    size_t n = 0;
    uint64_t have = c->stored < c->nprof ? c->stored : c->nprof;
    bool *used = c->used; /* no allocation per estimate */
    memset(used, 0, c->nprof * sizeof *used);
    for (uint64_t back = 1; back <= have && back <= TL_CENTER_SEARCH && n < TL_CENTER_PAIRS;
         back++) {
        uint32_t p = (uint32_t)((c->stored - back) % c->nprof);
        if (!c->entry[p].valid || used[p])
            continue;
        double best = tol;
        int32_t partner = -1;
        for (uint32_t q = 0; q < have; q++) {
            if (q == p || !c->entry[q].valid || used[q])
                continue;
            double d = fabs(wrap_pi(c->entry[q].angle - c->entry[p].angle - M_PI));
            if (d <= best) {
                best = d;
                partner = (int32_t)q;
            }
        }
        if (partner < 0)
            continue;
        center_pair pr = {p, (uint32_t)partner, p, 0};
        /* the mismatch: how far a's angle is past the exact opposite of b */
        double m = wrap_pi(c->entry[p].angle - (c->entry[partner].angle - M_PI));
        if (fabs(m) > TL_CENTER_PAIR_TOL) { /* a neighbour of a on the side of +m */
            double near = INFINITY;
            for (uint32_t q = 0; q < have; q++) {
                if (q == p || (int32_t)q == partner || !c->entry[q].valid)
                    continue;
                double d = wrap_pi(c->entry[q].angle - c->entry[p].angle);
                if (d * m > 0 && fabs(d) < near) {
                    near = fabs(d);
                    pr.a2 = q;
                }
            }
            if (!isfinite(near))
                continue; /* nothing to extrapolate from */
            pr.t = fabs(m) / near;
        }
        used[p] = used[partner] = true;
        out[n++] = pr;
    }
    return n;
}

static double median(double *v, size_t n)
{
    tl_sort_doubles(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Half acquisition: a profile as it was before the column weights for the axis cv. The
 * weights near the overlap's far end are tiny but not 0 (a cos^2 ramp): the float product
 * and the division keep the relative precision; a column of weight 0 reads 0. */
static void unweigh(const tl_engine *e, float *p, double cv)
{
    for (uint32_t v = e->center->first; v <= e->center->last; v++) {
        double w = tl_halfacq_weight(e->halfacq, cv, v);
        p[v] = w > 0 ? (float)(p[v] / w) : 0.f;
    }
}

/* Estimates from the newest pairs; *none when there is no pair (or none new, unless
 * force). Waits for the backend's queued work (the profiles). */
static tl_status estimate(tl_engine *e, bool force, bool *none)
{
    tl_center_ctx *c = e->center;
    center_pair pairs[TL_CENTER_PAIRS];
    size_t n = find_pairs(c, TL_CENTER_PAIR_TOL, pairs);
    if (n == 0) /* a window of half a turn holds no exact pair: the nearest, one step off */
        n = find_pairs(c, 1.01 * M_PI / e->cfg.window, pairs);
    *none = n == 0;
    if (n == 0)
        return TL_OK;
    uint64_t newest = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t ia = c->entry[pairs[i].a].index, ib = c->entry[pairs[i].b].index;
        newest = ia > newest ? ia : newest;
        newest = ib > newest ? ib : newest;
    }
    if (!force && c->have_used && newest <= c->used_newest) {
        *none = true;
        return TL_OK;
    }
    for (size_t i = 0; i < n; i++) {
        c->pos[3 * i] = pairs[i].a;
        c->pos[3 * i + 1] = pairs[i].b;
        c->pos[3 * i + 2] = pairs[i].a2;
    }
    tl_status st = e->ops->profiles(e->be, c->pos, 3 * n, c->prof);
    if (st != TL_OK)
        return st;
    if (e->halfacq)
        for (size_t i = 0; i < 3 * n; i++)
            unweigh(e, c->prof + i * c->cols, c->entry[c->pos[i]].weighed_at);
    double centers[TL_CENTER_PAIRS], quality[TL_CENTER_PAIRS], dev[TL_CENTER_PAIRS];
    for (size_t i = 0; i < n; i++) {
        const center_entry *ea = &c->entry[pairs[i].a], *eb = &c->entry[pairs[i].b];
        float *pa = c->prof + 3 * i * c->cols, *pa2 = pa + 2 * (size_t)c->cols;
        const float t = (float)pairs[i].t;
        if (pairs[i].t != 0) /* extrapolated to the exact opposite of b */
            for (uint32_t u = 0; u < c->cols; u++)
                pa[u] = (1 + t) * pa[u] - t * pa2[u];
        pair_center(c, pa, pa + c->cols, &centers[i], &quality[i]);
        centers[i] -= 0.5 * (ea->offset + eb->offset); /* the engine's centre, not the pair's */
    }
    double sorted[TL_CENTER_PAIRS];
    memcpy(sorted, centers, n * sizeof *sorted);
    double m = median(sorted, n);
    for (size_t i = 0; i < n; i++)
        dev[i] = fabs(centers[i] - m);
    tl_center_estimate *est = &c->est;
    est->valid = true;
    est->center = m;
    est->spread = median(dev, n);
    double q = median(quality, n);
    est->confidence = q < 0 ? 0 : q > 1 ? 1 : q;
    est->pairs = (uint32_t)n;
    est->newest = newest;
    est->estimates++;
    c->used_newest = newest;
    c->have_used = true;
    return TL_OK;
}

static tl_status maybe_apply(tl_engine *e)
{
    tl_center_estimate *est = &e->center->est;
    if (!est->auto_on || !est->valid || est->confidence < TL_CENTER_MIN_CONFIDENCE ||
        fabs(est->center - e->given.center) < TL_CENTER_APPLY_PX)
        return TL_OK;
    if (est->center < -0.5 || est->center > e->given.cols - 0.5)
        return TL_OK; /* no column of the detector: not applied */
    if (e->halfacq && !tl_halfacq_fits(e->halfacq, est->center))
        return TL_OK; /* beyond the virtual detector's margin: shown, not applied */
    tl_status st = tl_engine_set_center(e, est->center);
    if (st == TL_OK)
        est->applied++;
    return st;
}

tl_status tl_center_after_store(tl_engine *e, const tl_frame *f)
{
    tl_center_ctx *c = e->center;
    if (!c)
        return TL_OK;
    uint32_t p = (uint32_t)(c->stored % c->nprof);
    c->entry[p] = (center_entry){.angle = f->angle,
                                 .offset = f->center_offset,
                                 .weighed_at = e->cfg.center,
                                 .index = f->index,
                                 .valid = true};
    c->stored++;
    if (++c->since < tl_rings_interval(e->cfg.window))
        return TL_OK;
    c->since = 0;
    bool none;
    tl_status st = estimate(e, false, &none);
    if (st != TL_OK || none)
        return st;
    return maybe_apply(e);
}

/* ---- engine.h ---------------------------------------------------------------------------- */

tl_status tl_engine_center(const tl_engine *e, tl_center_estimate *out)
{
    memset(out, 0, sizeof *out);
    if (e->center)
        *out = e->center->est;
    return TL_OK;
}

tl_status tl_engine_center_estimate_now(tl_engine *e, tl_center_estimate *out)
{
    memset(out, 0, sizeof *out);
    if (!e->center)
        return tl_fail(&e->err, TL_EINVAL,
                       "the engine was created without centre estimation (center_estimate)");
    bool none;
    tl_status st = estimate(e, true, &none);
    if (st != TL_OK)
        return st;
    if (none)
        return tl_fail(&e->err, TL_ENOTFOUND,
                       "no pair of opposite projections (angles pi apart) to find the centre "
                       "from");
    *out = e->center->est;
    return TL_OK;
}

tl_status tl_engine_set_center_auto(tl_engine *e, bool on)
{
    if (!e->center)
        return tl_fail(&e->err, TL_EINVAL,
                       "the engine was created without centre estimation (center_estimate)");
    e->center->est.auto_on = on;
    e->cfg.center_auto = e->given.center_auto = on;
    return on ? maybe_apply(e) : TL_OK;
}
