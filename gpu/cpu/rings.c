/* rings.c — ring removal on the CPU backend (types.h, tl_rings; the estimate's definition
 * is gpu/base/rings.h): the column profile and the correction live here, the per-frame
 * part (profile update, correction subtracted) is fused into the last stage of each row
 * (tl_cpu_finish_row), and ring_update recomputes the estimate, in double, row by row on
 * the pool, and brings the window to it when it moved beyond the tolerance. This is the
 * reference the CUDA backend's rings.cu is checked against.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/base/clock.h"
#include "gpu/base/rings.h"
#include "gpu/cpu/cpu_state.h"

static size_t tmp_values(const tl_engine_config *c)
{
    size_t fw = 2 * (size_t)tl_rings_fw_length(c->cols, c->corr.ring_level);
    return fw > c->corr.ring_size ? fw : c->corr.ring_size;
}

size_t tl_cpu_rings_estimate(const tl_engine_config *c)
{
    if (!c->corr.rings)
        return 0;
    size_t npix = (size_t)c->rows * c->cols;
    size_t rs = c->precision == TL_PRECISION_F64 ? sizeof(double) : sizeof(float);
    return npix * (2 * sizeof(double) + 2 * rs) + 64 * tmp_values(c) * sizeof(double);
}

void tl_cpu_rings_destroy(tl_cpu_state *s)
{
    free(s->ring_m);
    free(s->ring_est);
    free(s->ring_c);
    free(s->ring_fd);
    for (int t = 0; s->ring_tmp && t < s->nthreads; t++)
        free(s->ring_tmp[t]);
    free(s->ring_tmp);
}

tl_status tl_cpu_rings_create(tl_cpu_state *s)
{
    s->rings_on = s->cfg.corr.rings != TL_RINGS_NONE;
    s->ring_update_s = -1;
    if (!s->rings_on)
        return TL_OK;
    size_t npix = (size_t)s->rows * s->cols, rs = s->real_size;
    s->ring_m = calloc(npix, sizeof(double));
    s->ring_est = calloc(npix, sizeof(double));
    s->ring_c = calloc(npix, rs);
    s->ring_fd = calloc(npix, rs);
    s->ring_tmp = calloc((size_t)s->nthreads, sizeof *s->ring_tmp);
    if (!s->ring_m || !s->ring_est || !s->ring_c || !s->ring_fd || !s->ring_tmp)
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for ring removal");
    for (int t = 0; t < s->nthreads; t++)
        if (!(s->ring_tmp[t] = malloc(tmp_values(&s->cfg) * sizeof(double))))
            return tl_fail(s->eb, TL_ENOMEM, "out of memory for ring removal");
    s->mem += npix * (2 * sizeof(double) + 2 * rs) +
              (size_t)s->nthreads * tmp_values(&s->cfg) * sizeof(double);
    return TL_OK;
}

/* Index i reflected into [0, n) without repeating the edge (…, 2, 1 | 0, 1, …, n−1 |
 * n−2, …), as TL_MIRROR_* one step out, at any distance. */
static long mirror(long i, long n)
{
    if (n == 1)
        return 0;
    long period = 2 * n - 2;
    i = labs(i) % period;
    return i < n ? i : period - i;
}

static double median_of(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return v[n / 2];
}

/* VO: m minus its running median across `size` columns. */
static void estimate_vo(const double *m, uint32_t W, uint32_t size, double *tmp, double *est)
{
    long half = size / 2;
    for (long u = 0; u < W; u++) {
        for (long d = -half; d <= half; d++)
            tmp[d + half] = m[mirror(u + d, W)];
        est[u] = m[u] - median_of(tmp, (int)size);
    }
}

/* FW: m minus its approximation at `level` levels of the periodised db5 transform of its
 * symmetric extension (rings.h). */
static void estimate_fw(const double *m, uint32_t W, uint32_t level, double *tmp, double *est)
{
    const size_t P = tl_rings_fw_length(W, level);
    double *x = tmp, *y = tmp + P;
    for (size_t i = 0; i < P; i++) {
        size_t j = i % (2 * (size_t)W);
        x[i] = j < W ? m[j] : m[2 * (size_t)W - 1 - j];
    }
    for (uint32_t l = 0; l < level; l++) { /* analysis: approximations only */
        size_t n = P >> l;
        for (size_t k = 0; k < n / 2; k++) {
            double a = 0;
            for (int j = 0; j < TL_RINGS_DB5_TAPS; j++)
                a += tl_rings_db5[j] * x[(2 * k + j) % n];
            y[k] = a;
        }
        memcpy(x, y, n / 2 * sizeof *x);
    }
    for (uint32_t l = level; l-- > 0;) { /* synthesis, the details zero */
        size_t n = P >> l;
        memset(y, 0, n * sizeof *y);
        for (size_t k = 0; k < n / 2; k++)
            for (int j = 0; j < TL_RINGS_DB5_TAPS; j++)
                y[(2 * k + j) % n] += tl_rings_db5[j] * x[k];
        memcpy(x, y, n * sizeof *x);
    }
    for (uint32_t u = 0; u < W; u++)
        est[u] = m[u] - x[u];
}

typedef struct {
    tl_cpu_state *s;
    double *max_change; /* per thread */
} ring_ctx;

static void estimate_job(void *ctx, size_t r, int thread)
{
    ring_ctx *j = ctx;
    tl_cpu_state *s = j->s;
    const tl_corrections *k = &s->cfg.corr;
    size_t o = r * s->cols;
    double *est = s->ring_est + o;
    if (k->rings == TL_RINGS_VO)
        estimate_vo(s->ring_m + o, s->cols, k->ring_size, s->ring_tmp[thread], est);
    else
        estimate_fw(s->ring_m + o, s->cols, k->ring_level, s->ring_tmp[thread], est);
    double worst = j->max_change[thread];
    for (uint32_t u = 0; u < s->cols; u++) {
        double c = s->f64 ? ((double *)s->ring_c)[o + u] : ((float *)s->ring_c)[o + u];
        double d = fabs(est[u] - c);
        worst = d > worst ? d : worst;
    }
    j->max_change[thread] = worst;
}

/* Row r moves to the new estimate: the filtered change is subtracted from every slot. */
static void apply_job(void *ctx, size_t r, int thread)
{
    ring_ctx *j = ctx;
    tl_cpu_state *s = j->s;
    size_t o = r * s->cols, rs = s->real_size;
    for (uint32_t u = 0; u < s->cols; u++) {
        double e = s->ring_est[o + u];
        if (s->f64) {
            double *c = (double *)s->ring_c + o;
            ((double *)s->pad[thread])[u] = e - c[u];
            c[u] = e;
        } else {
            float *c = (float *)s->ring_c + o;
            ((float *)s->pad[thread])[u] = (float)e - c[u];
            c[u] = (float)e;
        }
    }
    for (uint32_t slot = 0; s->meas && slot < s->n; slot++) { /* the change, unfiltered */
        char *m = (char *)s->meas + ((r * s->n + slot) * s->cols) * rs;
        for (uint32_t u = 0; u < s->cols; u++)
            if (s->f64)
                ((double *)m)[u] -= ((const double *)s->pad[thread])[u];
            else
                ((float *)m)[u] -= ((const float *)s->pad[thread])[u];
    }
    char *fd = (char *)s->ring_fd + o * rs;
    if (s->f64)
        tl_cpu_filter_values_f64(s, s->pad[thread], fd, thread);
    else
        tl_cpu_filter_values_f32(s, s->pad[thread], fd, thread);
    for (uint32_t slot = 0; slot < s->n; slot++) {
        char *w = (char *)s->window + ((r * s->n + slot) * s->cols) * rs;
        for (uint32_t u = 0; u < s->cols; u++)
            if (s->f64)
                ((double *)w)[u] -= ((const double *)fd)[u];
            else
                ((float *)w)[u] -= ((const float *)fd)[u];
    }
}

tl_status tl_cpu_ring_update(void *state, bool *changed)
{
    tl_cpu_state *s = state;
    *changed = false;
    if (!s->rings_on || !s->ring_frames)
        return TL_OK;
    uint64_t t0 = tl_clock_ns();
    double max_change[64] = {0};
    if (s->nthreads > 64)
        return tl_fail(s->eb, TL_EINTERNAL, "ring removal: more than 64 threads");
    ring_ctx j = {.s = s, .max_change = max_change};
    double npix = (double)s->rows * s->cols;
    tl_cpu_run_jobs(s, s->rows, npix * 40, estimate_job, &j);
    double worst = 0;
    for (int t = 0; t < s->nthreads; t++)
        worst = max_change[t] > worst ? max_change[t] : worst;
    if (worst > s->cfg.corr.ring_tolerance) {
        tl_cpu_run_jobs(s, s->rows, npix * ((double)s->n + 8), apply_job, &j);
        *changed = true;
    }
    s->ring_update_s = (tl_clock_ns() - t0) * 1e-9;
    return TL_OK;
}
