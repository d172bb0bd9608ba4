/* corrections.c — the CPU backend's per-frame corrections (tl_corrections, types.h):
 * convert ▸ dezinger ▸ dark/flat ▸ Paganin ▸ −log ▸ filter, each stage a pass over the
 * frame's rows on the thread pool (the dezinger reads neighbouring rows, the phase filter
 * the whole frame, so the fused per-row path of cpu_backend.c cannot serve them). Frames
 * without corrections keep that fused path. Buffers and FFTW plans are made in create;
 * nothing is allocated per frame. In float64 mode this is the reference the CUDA kernels
 * (gpu/cuda/dezinger.cu, gpu/cuda/paganin.cu) are checked against.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/base/clock.h"
#include "gpu/base/rings.h"
#include "gpu/cpu/cpu_state.h"

static bool dezinger_on(const tl_engine_config *c)
{
    return c->corr.dezinger > 0;
}

size_t tl_cpu_corr_estimate(const tl_engine_config *c)
{
    size_t rs = c->precision == TL_PRECISION_F64 ? sizeof(double) : sizeof(float);
    size_t bytes = 0;
    bool cone = c->geometry == TL_GEOMETRY_CONE;
    if (dezinger_on(c) || tl_phase_on(&c->corr) || c->corr.rings || c->half_acquisition || cone)
        bytes += 2 * (size_t)c->rows * c->cols * rs; /* the staged path's frames */
    if (cone)
        bytes += (size_t)c->rows * c->cols * rs; /* the pixel weights */
    if (tl_parker_of(c).on)
        bytes += (size_t)c->cols * rs;
    bytes += tl_cpu_rings_estimate(c);
    tl_phase_filter f;
    if (tl_phase_on(&c->corr) && tl_phase_shape(&c->corr, c->rows, c->cols, &f, NULL) == TL_OK)
        bytes += (size_t)f.prow * f.pcol * rs + (size_t)f.prow * (f.pcol / 2 + 1) * 3 * rs;
    return bytes;
}

void tl_cpu_corr_destroy(tl_cpu_state *s)
{
    pthread_mutex_lock(&tl_cpu_planner_lock);
    if (s->phase_r2c_f)
        fftwf_destroy_plan(s->phase_r2c_f);
    if (s->phase_c2r_f)
        fftwf_destroy_plan(s->phase_c2r_f);
    if (s->phase_r2c_d)
        fftw_destroy_plan(s->phase_r2c_d);
    if (s->phase_c2r_d)
        fftw_destroy_plan(s->phase_c2r_d);
    pthread_mutex_unlock(&tl_cpu_planner_lock);
    fftw_free(s->phase_buf);
    fftw_free(s->phase_spec);
    free(s->phase_resp);
    free(s->frame[0]);
    free(s->frame[1]);
    free(s->replaced);
    free(s->colw);
    free(s->pixw);
    free(s->parker_w);
    tl_cpu_rings_destroy(s);
}

tl_status tl_cpu_corr_create(tl_cpu_state *s)
{
    const tl_engine_config *c = &s->cfg;
    s->phase_on = tl_phase_on(&c->corr);
    bool cone = c->geometry == TL_GEOMETRY_CONE;
    s->corr_on = dezinger_on(c) || s->phase_on || c->corr.rings || c->half_acquisition || cone;
    if (!s->corr_on)
        return TL_OK;
    if (c->half_acquisition) {
        if (!(s->colw = calloc(s->cols, s->real_size)))
            return tl_fail(s->eb, TL_ENOMEM, "out of memory for the column weights");
        s->mem += s->cols * s->real_size;
    }
    s->parker = tl_parker_of(c);
    if (s->parker.on) {
        if (!(s->parker_w = calloc(s->cols, s->real_size)))
            return tl_fail(s->eb, TL_ENOMEM, "out of memory for the Parker weights");
        s->mem += s->cols * s->real_size;
    }
    if (cone) {
        size_t npix = (size_t)s->rows * s->cols;
        if (!(s->pixw = calloc(npix, s->real_size)))
            return tl_fail(s->eb, TL_ENOMEM, "out of memory for the %u x %u pixel weights",
                           s->rows, s->cols);
        s->mem += npix * s->real_size;
    }
    tl_status st = tl_cpu_rings_create(s);
    if (st != TL_OK)
        return st;
    size_t npix = (size_t)s->rows * s->cols, rs = s->real_size;
    s->frame[0] = calloc(npix, rs);
    s->frame[1] = calloc(npix, rs);
    s->replaced = calloc((size_t)s->nthreads, sizeof *s->replaced);
    if (!s->frame[0] || !s->frame[1] || !s->replaced)
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for the correction buffers");
    s->mem += 2 * npix * rs;
    if (!s->phase_on)
        return TL_OK;
    st = tl_phase_shape(&c->corr, s->rows, s->cols, &s->phase, s->eb);
    if (st != TL_OK)
        return st;
    size_t nbuf = (size_t)s->phase.prow * s->phase.pcol;
    size_t nspec = (size_t)s->phase.prow * (s->phase.pcol / 2 + 1);
    s->phase_buf = fftw_malloc(nbuf * rs);
    s->phase_spec = fftw_malloc(nspec * 2 * rs);
    s->phase_resp = calloc(nspec, rs);
    if (!s->phase_buf || !s->phase_spec || !s->phase_resp)
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for the %u x %u phase filter",
                       s->phase.prow, s->phase.pcol);
    s->mem += nbuf * rs + nspec * 3 * rs;
    int n0 = (int)s->phase.prow, n1 = (int)s->phase.pcol;
    pthread_mutex_lock(&tl_cpu_planner_lock);
    if (s->f64) {
        s->phase_r2c_d = fftw_plan_dft_r2c_2d(n0, n1, s->phase_buf, s->phase_spec, FFTW_ESTIMATE);
        s->phase_c2r_d = fftw_plan_dft_c2r_2d(n0, n1, s->phase_spec, s->phase_buf, FFTW_ESTIMATE);
    } else {
        s->phase_r2c_f = fftwf_plan_dft_r2c_2d(n0, n1, s->phase_buf, s->phase_spec, FFTW_ESTIMATE);
        s->phase_c2r_f = fftwf_plan_dft_c2r_2d(n0, n1, s->phase_spec, s->phase_buf, FFTW_ESTIMATE);
    }
    pthread_mutex_unlock(&tl_cpu_planner_lock);
    if (s->f64 ? !s->phase_r2c_d || !s->phase_c2r_d : !s->phase_r2c_f || !s->phase_c2r_f)
        return tl_fail(s->eb, TL_EINTERNAL, "FFTW could not plan a %d x %d transform", n0, n1);
    return TL_OK;
}

tl_status tl_cpu_set_phase(void *state, const tl_phase_filter *f)
{
    tl_cpu_state *s = state;
    if (!s->phase_on || f->prow != s->phase.prow || f->pcol != s->phase.pcol)
        return tl_fail(s->eb, TL_EINTERNAL, "phase filter %u x %u does not match the backend's",
                       f->prow, f->pcol);
    size_t nspec = (size_t)f->prow * (f->pcol / 2 + 1);
    double scale = 1.0 / ((double)f->prow * f->pcol);
    for (size_t k = 0; k < nspec; k++) {
        if (s->f64)
            ((double *)s->phase_resp)[k] = f->response[k] * scale;
        else
            ((float *)s->phase_resp)[k] = (float)(f->response[k] * scale);
    }
    return TL_OK;
}

tl_status tl_cpu_corr_counts(void *state, uint64_t *replaced)
{
    *replaced = ((tl_cpu_state *)state)->replaced_sum;
    return TL_OK;
}

/* ---- the staged path --------------------------------------------------------------------- */

typedef struct {
    tl_cpu_state *s;
    const tl_frame *f;
    uint32_t slot;
    const void *in;  /* finish: the rows' source */
    size_t in_pitch; /* ... values between its rows */
    bool correct;    /* ... dark/flat still to apply */
} corr_ctx;

static void convert_job(void *ctx, size_t r, int thread)
{
    corr_ctx *j = ctx;
    (void)thread;
    if (j->s->f64)
        tl_cpu_convert_row_f64(j->s, j->f, (uint32_t)r);
    else
        tl_cpu_convert_row_f32(j->s, j->f, (uint32_t)r);
}

static void dezinger_job(void *ctx, size_t r, int thread)
{
    corr_ctx *j = ctx;
    j->s->replaced[thread] += j->s->f64 ? tl_cpu_dezinger_row_f64(j->s, (uint32_t)r)
                                        : tl_cpu_dezinger_row_f32(j->s, (uint32_t)r);
}

static void flat_job(void *ctx, size_t r, int thread)
{
    corr_ctx *j = ctx;
    tl_cpu_state *s = j->s;
    (void)thread;
    size_t rs = s->real_size;
    const char *in = (const char *)j->in + r * j->in_pitch * rs;
    char *out = (char *)s->phase_buf + ((s->phase.top + r) * s->phase.pcol + s->phase.left) * rs;
    if (s->f64)
        tl_cpu_flat_row_f64(s, in, out, (uint32_t)r);
    else
        tl_cpu_flat_row_f32(s, in, out, (uint32_t)r);
}

static void pad_job(void *ctx, size_t r, int thread)
{
    corr_ctx *j = ctx;
    (void)thread;
    if (j->s->f64)
        tl_cpu_phase_pad_row_f64(j->s, (uint32_t)r);
    else
        tl_cpu_phase_pad_row_f32(j->s, (uint32_t)r);
}

static void finish_job(void *ctx, size_t r, int thread)
{
    corr_ctx *j = ctx;
    const char *in = (const char *)j->in + r * j->in_pitch * j->s->real_size;
    if (j->s->f64)
        tl_cpu_finish_row_f64(j->s, in, j->correct, j->slot, (uint32_t)r, thread);
    else
        tl_cpu_finish_row_f32(j->s, in, j->correct, j->slot, (uint32_t)r, thread);
}

tl_status tl_cpu_stage_times(void *state, tl_stage_time *out, size_t cap, size_t *n)
{
    tl_cpu_state *s = state;
    *n = 0;
    if (s->ring_update_s >= 0 && cap > 0) { /* the last estimate (rings.c), when new */
        out[(*n)++] = (tl_stage_time){TL_STAGE_RINGS, s->ring_update_s};
        s->ring_update_s = -1;
    }
    if (s->stage_written - s->stage_read > TL_STAGE_RING) /* the oldest were overwritten */
        s->stage_read = s->stage_written - TL_STAGE_RING;
    for (; s->stage_read < s->stage_written; s->stage_read++) {
        unsigned k = (unsigned)(s->stage_read % TL_STAGE_RING);
        for (int st = 0; st < TL_STAGE_COUNT; st++)
            if (s->stage_mask[k] >> st & 1) {
                if (*n == cap)
                    return TL_OK; /* this frame's remaining stages come next time */
                out[(*n)++] = (tl_stage_time){(tl_stage)st, s->stage_s[k][st]};
                s->stage_mask[k] &= ~(1u << st);
            }
    }
    return TL_OK;
}

tl_status tl_cpu_corr_store(tl_cpu_state *s, const tl_frame *f, uint32_t slot)
{
    double npix = (double)s->rows * s->cols;
    unsigned ring = (unsigned)(s->stage_written % TL_STAGE_RING);
    s->stage_mask[ring] = 0;
    corr_ctx j =
        {.s = s, .f = f, .slot = slot, .in = s->frame[0], .in_pitch = s->cols, .correct = true};
    for (uint32_t c = 0; s->parker_w && c < s->cols; c++) { /* this view's (parker.h) */
        double w = tl_parker_weight(&s->parker, f->angle, c);
        if (s->f64)
            ((double *)s->parker_w)[c] = w;
        else
            ((float *)s->parker_w)[c] = (float)w;
    }
    tl_cpu_run_jobs(s, s->rows, npix, convert_job, &j);
    if (dezinger_on(&s->cfg)) {
        uint64_t t0 = tl_clock_ns();
        memset(s->replaced, 0, (size_t)s->nthreads * sizeof *s->replaced);
        tl_cpu_run_jobs(s, s->rows, npix * 20, dezinger_job, &j);
        for (int t = 0; t < s->nthreads; t++)
            s->replaced_sum += s->replaced[t];
        j.in = s->frame[1];
        s->stage_s[ring][TL_STAGE_DEZINGER] = (tl_clock_ns() - t0) * 1e-9;
        s->stage_mask[ring] |= 1u << TL_STAGE_DEZINGER;
    }
    if (s->phase_on) {
        uint64_t t0 = tl_clock_ns();
        const tl_phase_filter *ph = &s->phase;
        tl_cpu_run_jobs(s, s->rows, npix, flat_job, &j);
        tl_cpu_run_jobs(s, ph->prow, (double)ph->prow * ph->pcol, pad_job, &j);
        if (s->f64)
            tl_cpu_phase_filter_f64(s);
        else
            tl_cpu_phase_filter_f32(s);
        j.in = (const char *)s->phase_buf + ((size_t)ph->top * ph->pcol + ph->left) * s->real_size;
        j.in_pitch = ph->pcol;
        j.correct = false;
        s->stage_s[ring][TL_STAGE_PAGANIN] = (tl_clock_ns() - t0) * 1e-9;
        s->stage_mask[ring] |= 1u << TL_STAGE_PAGANIN;
    }
    if (s->rings_on)
        s->ring_weight = tl_rings_weight(++s->ring_frames, s->n);
    tl_cpu_run_jobs(s, s->rows, npix * 8, finish_job, &j);
    s->stage_written++;
    return TL_OK;
}

tl_status tl_cpu_set_pixel_weights(void *state, const double *w)
{
    tl_cpu_state *s = state;
    if (!s->pixw)
        return tl_fail(s->eb, TL_EINTERNAL, "pixel weights without cone beam");
    size_t npix = (size_t)s->rows * s->cols;
    for (size_t k = 0; k < npix; k++)
        if (s->f64)
            ((double *)s->pixw)[k] = w[k];
        else
            ((float *)s->pixw)[k] = (float)w[k];
    return TL_OK;
}

tl_status tl_cpu_set_column_weights(void *state, const double *w)
{
    tl_cpu_state *s = state;
    if (!s->colw)
        return tl_fail(s->eb, TL_EINTERNAL, "column weights without half acquisition");
    for (uint32_t c = 0; c < s->cols; c++)
        if (s->f64)
            ((double *)s->colw)[c] = w[c];
        else
            ((float *)s->colw)[c] = (float)w[c];
    return TL_OK;
}
