/* kernels_impl.h — the CPU backend's numbers, written once for a type `real`.
 *
 * Included by kernels_f32.c (real = float: the backend the daemon runs) and kernels_f64.c
 * (real = double: the float64 reference every other kernel is checked against), which
 * define REAL, SFX (name suffix), FFTW(x) (fftwf_x or fftw_x), LOG and FLOOR first.
 * Conventions are ARCHITECTURE.md §3.1: linear interpolation between bins, zero outside the
 * detector, and the ray through (x, y) hits u = center + x cos(theta) - y sin(theta).
 */
#include <math.h>
#include <string.h>

#include "gpu/cpu/cpu_state.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)

/* One raw pixel as a real number. Frames arrive in ZeroMQ buffers that need not be aligned
 * for their dtype, so samples are read with memcpy (which compiles to a plain load). */
static inline REAL FN(pixel)(const void *row, tl_dtype t, uint32_t c)
{
    const unsigned char *p = row;
    uint16_t u16;
    uint32_t u32;
    float f32;
    switch (t) {
        case TL_DTYPE_U8: return (REAL)p[c];
        case TL_DTYPE_U16: memcpy(&u16, p + 2 * (size_t)c, 2); return (REAL)u16;
        case TL_DTYPE_U32: memcpy(&u32, p + 4 * (size_t)c, 4); return (REAL)u32;
        case TL_DTYPE_F32: memcpy(&f32, p + 4 * (size_t)c, 4); return (REAL)f32;
    }
    return 0;
}

static inline const void *FN(frame_row)(const tl_frame *f, uint32_t r)
{
    size_t pitch = f->pitch ? f->pitch : (size_t)f->cols * tl_dtype_size(f->dtype);
    return (const char *)f->data + (size_t)r * pitch;
}

/* Adds one row of a dark (kind 0) or flat (kind 1) to the batch sum, refreshes that row of
 * the average, and the row of the gain 1 / max(F - D, eps) that depends on both. */
void FN(tl_cpu_calib_row)(tl_cpu_state *s, const tl_frame *f, int kind, uint32_t count, uint32_t r)
{
    uint32_t W = s->cols;
    size_t o = (size_t)r * W;
    const void *src = FN(frame_row)(f, r);
    double *sum = s->sum[kind] + o;
    REAL *avg = (REAL *)s->avg[kind] + o;
    for (uint32_t c = 0; c < W; c++) {
        sum[c] += (double)FN(pixel)(src, f->dtype, c);
        avg[c] = (REAL)(sum[c] / count);
    }
    if (!s->have[1] && kind == 0)
        return;
    const REAL *dark = s->have[0] || kind == 0 ? (const REAL *)s->avg[0] + o : NULL;
    const REAL *flat = (const REAL *)s->avg[1] + o;
    REAL *gain = (REAL *)s->gain + o;
    for (uint32_t c = 0; c < W; c++) {
        REAL d = flat[c] - (dark ? dark[c] : 0);
        gain[c] = (REAL)1 / (d > (REAL)TL_CPU_MIN_RATIO ? d : (REAL)TL_CPU_MIN_RATIO);
    }
}

/* Dark/flat correction of one value (dark and gain NULL when there is no average). */
static inline REAL FN(flatfield)(REAL t, const REAL *dark, const REAL *gain, uint32_t c)
{
    if (dark)
        t -= dark[c];
    if (gain)
        t *= gain[c];
    return t;
}

static inline REAL FN(minus_log)(REAL t)
{
    return -LOG(t > (REAL)TL_CPU_MIN_RATIO ? t : (REAL)TL_CPU_MIN_RATIO);
}

static void FN(filter_into)(tl_cpu_state *s, REAL *pad, uint32_t slot, uint32_t r, int thread);

/* Row r of the projection as measured (corrected, linearised; before any weight and the
 * filter) into the kept measurements' slot, where they are kept (cfg.keep_measurements). */
static inline void FN(keep_measurement)(tl_cpu_state *s, const REAL *pad, uint32_t slot,
                                        uint32_t r)
{
    if (s->meas)
        memcpy((REAL *)s->meas + ((size_t)r * s->n + slot) * s->cols, pad, s->cols * sizeof *pad);
}

/* Converts, corrects, linearises and filters row r of a projection into the window. */
void FN(tl_cpu_store_row)(tl_cpu_state *s, const tl_frame *f, uint32_t slot, uint32_t r,
                          int thread)
{
    uint32_t W = s->cols;
    size_t o = (size_t)r * W;
    const void *src = FN(frame_row)(f, r);
    const REAL *dark = s->have[0] ? (const REAL *)s->avg[0] + o : NULL;
    const REAL *gain = s->have[1] ? (const REAL *)s->gain + o : NULL;
    bool linear = s->cfg.already_linear;
    REAL *pad = s->pad[thread];
    for (uint32_t c = 0; c < W; c++) {
        REAL t = FN(flatfield)(FN(pixel)(src, f->dtype, c), dark, gain, c);
        pad[c] = linear ? t : FN(minus_log)(t);
    }
    if (s->prof_pos >= 0)
        FN(tl_cpu_profile_add)(s, pad, thread);
    FN(keep_measurement)(s, pad, slot, r);
    FN(filter_into)(s, pad, slot, r, thread);
}

/* ---- the corrected path (corrections.c): whole-frame stages, row by row ---------------- */

/* Row r of the raw frame as counts into s->frame[0]. */
void FN(tl_cpu_convert_row)(tl_cpu_state *s, const tl_frame *f, uint32_t r)
{
    const void *src = FN(frame_row)(f, r);
    REAL *out = (REAL *)s->frame[0] + (size_t)r * s->cols;
    for (uint32_t c = 0; c < s->cols; c++)
        out[c] = FN(pixel)(src, f->dtype, c);
}

/* Median of nine values: sorted in place by insertion (the result is a value of the
 * set, so any exact method agrees with the GPU's sorting network). */
static inline REAL FN(median9)(REAL *v)
{
    for (int i = 1; i < 9; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            REAL x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return v[4];
}

/* Dezinger of row r, s->frame[0] into s->frame[1]: a pixel more than the threshold above
 * the median of its 3 x 3 neighbourhood (mirrored at the edges, TL_MIRROR_*) becomes that
 * median. Returns
 * how many pixels of the row were replaced. */
uint64_t FN(tl_cpu_dezinger_row)(tl_cpu_state *s, uint32_t r)
{
    const REAL *in = s->frame[0];
    REAL *out = (REAL *)s->frame[1] + (size_t)r * s->cols;
    uint32_t W = s->cols, H = s->rows;
    REAL thr = (REAL)s->cfg.corr.dezinger;
    uint32_t rows[3] = {TL_MIRROR_BELOW(r, H), r, TL_MIRROR_ABOVE(r, H)};
    uint64_t replaced = 0;
    for (uint32_t c = 0; c < W; c++) {
        uint32_t cols[3] = {TL_MIRROR_BELOW(c, W), c, TL_MIRROR_ABOVE(c, W)};
        REAL v[9];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                v[3 * i + j] = in[(size_t)rows[i] * W + cols[j]];
        REAL x = in[(size_t)r * W + c], med = FN(median9)(v);
        bool zinger = x - med > thr;
        out[c] = zinger ? med : x;
        replaced += zinger;
    }
    return replaced;
}

/* Dark/flat correction of row r of `in` (cols values) into out, without -log (the
 * Paganin filter works on transmission). */
void FN(tl_cpu_flat_row)(tl_cpu_state *s, const void *in, void *out, uint32_t r)
{
    size_t o = (size_t)r * s->cols;
    const REAL *dark = s->have[0] ? (const REAL *)s->avg[0] + o : NULL;
    const REAL *gain = s->have[1] ? (const REAL *)s->gain + o : NULL;
    const REAL *src = in;
    REAL *dst = out;
    for (uint32_t c = 0; c < s->cols; c++)
        dst[c] = FN(flatfield)(src[c], dark, gain, c);
}

/* The last stages of row r from `in` (cols values): dark/flat correction when `correct`,
 * -log unless already_linear, the filter, into the window. */
void FN(tl_cpu_finish_row)(tl_cpu_state *s, const void *in, bool correct, uint32_t slot,
                           uint32_t r, int thread)
{
    size_t o = (size_t)r * s->cols;
    const REAL *dark = correct && s->have[0] ? (const REAL *)s->avg[0] + o : NULL;
    const REAL *gain = correct && s->have[1] ? (const REAL *)s->gain + o : NULL;
    bool linear = s->cfg.already_linear;
    const REAL *src = in;
    REAL *pad = s->pad[thread];
    for (uint32_t c = 0; c < s->cols; c++) {
        REAL t = FN(flatfield)(src[c], dark, gain, c);
        pad[c] = linear ? t : FN(minus_log)(t);
    }
    if (s->rings_on) { /* the column profile learns the frame, then its stripes go */
        double *m = s->ring_m + o, w = s->ring_weight;
        const REAL *cc = (const REAL *)s->ring_c + o;
        for (uint32_t c = 0; c < s->cols; c++) {
            m[c] += w * ((double)pad[c] - m[c]);
            pad[c] -= cc[c];
        }
    }
    FN(keep_measurement)(s, pad, slot, r);
    if (s->colw) { /* half acquisition: this projection's share of the stitched one */
        const REAL *w = s->colw;
        for (uint32_t c = 0; c < s->cols; c++)
            pad[c] *= w[c];
    }
    if (s->pixw) { /* cone beam: FDK's cosine weights */
        const REAL *w = (const REAL *)s->pixw + o;
        for (uint32_t c = 0; c < s->cols; c++)
            pad[c] *= w[c];
    }
    if (s->parker_w) { /* a short cone-beam scan: this view's Parker weights */
        const REAL *w = s->parker_w;
        for (uint32_t c = 0; c < s->cols; c++)
            pad[c] *= w[c];
    }
    if (s->prof_pos >= 0)
        FN(tl_cpu_profile_add)(s, pad, thread);
    FN(filter_into)(s, pad, slot, r, thread);
}

/* Replicates the frame's edge pixels into the padding of the phase buffer (tomopy's
 * retrieve_phase padding, gpu/base/phase.h): row r of the padded buffer. */
void FN(tl_cpu_phase_pad_row)(tl_cpu_state *s, uint32_t r)
{
    const tl_phase_filter *f = &s->phase;
    REAL *buf = s->phase_buf;
    uint32_t src_row = r < f->top ? f->top : r >= f->top + f->rows ? f->top + f->rows - 1 : r;
    REAL *row = buf + (size_t)r * f->pcol;
    if (src_row != r) /* above or below the frame: a copy of its first or last row */
        memcpy(row + f->left, buf + (size_t)src_row * f->pcol + f->left, f->cols * sizeof *row);
    REAL first = row[f->left], last = row[f->left + f->cols - 1];
    for (uint32_t c = 0; c < f->left; c++)
        row[c] = first;
    for (uint32_t c = f->left + f->cols; c < f->pcol; c++)
        row[c] = last;
}

/* The phase filter over the padded buffer: rfft2, times H / (prow pcol), irfft2. */
void FN(tl_cpu_phase_filter)(tl_cpu_state *s)
{
    FFTW(complex) *spec = s->phase_spec;
    const REAL *H = s->phase_resp;
    size_t n = (size_t)s->phase.prow * (s->phase.pcol / 2 + 1);
    FFTW(execute)(CAT(s->phase_r2c, PSFX));
    for (size_t k = 0; k < n; k++) {
        spec[k][0] *= H[k];
        spec[k][1] *= H[k];
    }
    FFTW(execute)(CAT(s->phase_c2r, PSFX));
}

/* Zero padding to P, the filter, and the first W values into the window's slot. */
static void FN(filter_into)(tl_cpu_state *s, REAL *pad, uint32_t slot, uint32_t r, int thread)
{
    FN(tl_cpu_filter_values)
    (s, pad, (REAL *)s->window + ((size_t)r * s->n + slot) * s->cols, thread);
}

void FN(tl_cpu_filter_values)(tl_cpu_state *s, void *pad_, void *dst_, int thread)
{
    uint32_t W = s->cols;
    REAL *pad = pad_, *dst = dst_;
    if (!s->filter_on) {
        memcpy(dst, pad, W * sizeof *dst);
        return;
    }
    /* zero padding to P >= 2W, then multiply the spectrum by H / P (filter.h) */
    memset(pad + W, 0, (s->padded - W) * sizeof *pad);
    FFTW(complex) *spec = s->spec[thread];
    const REAL *H = s->response;
    FFTW(execute_dft_r2c)(CAT(s->r2c, PSFX), pad, spec);
    for (size_t k = 0; k <= s->padded / 2; k++) {
        spec[k][0] *= H[k];
        spec[k][1] *= H[k];
    }
    FFTW(execute_dft_c2r)(CAT(s->c2r, PSFX), spec, pad);
    memcpy(dst, pad, W * sizeof *dst);
}

/* Linear interpolation of one sinogram row at column u, zero outside [0, W). */
static inline REAL FN(lerp)(const REAL *row, uint32_t W, REAL u)
{
    if (!(u > (REAL)-1 && u < (REAL)W))
        return 0;
    REAL fl = FLOOR(u);
    long i = (long)fl;
    REAL f = u - fl;
    REAL a = i >= 0 ? row[i] : 0;
    REAL b = i + 1 < (long)W ? row[i + 1] : 0;
    return a + f * (b - a);
}

/* A summed output row into its destination (tl_cpu_dst). */
static void FN(tl_cpu_row_out)(const tl_bp_slice *sl, uint32_t row, const REAL *acc,
                               tl_cpu_dst dst, double *accum)
{
    uint32_t w = sl->width;
    if (dst == TL_CPU_OUT) {
        float *out = sl->out + (size_t)row * w;
        for (uint32_t j = 0; j < w; j++)
            out[j] = (float)acc[j];
    } else if (dst == TL_CPU_ACC_SET) {
        double *a = accum + (size_t)row * w;
        for (uint32_t j = 0; j < w; j++)
            a[j] = (double)acc[j];
    } else {
        /* The contribution is rounded in real as always, so adding a projection and later
         * subtracting it cancel exactly; the sum is double (cpu_state.h), so the rounding of
         * the running sum does not build up over an unbounded stream of updates. */
        double *a = accum + (size_t)row * w;
        for (uint32_t j = 0; j < w; j++)
            a[j] += (double)acc[j];
    }
}

/* Where output row `row` of slice sl starts in volume coordinates, and the step along it:
 * pixel j is at p + j d (engine.h's plane convention, computed in double, rounded once). */
static void FN(row_start)(const tl_bp_slice *sl, uint32_t row, REAL *px, REAL *py, REAL *pz,
                          REAL *dx, REAL *dy, REAL *dz)
{
    const float *o = sl->plane;
    double w = sl->width, t = 1.0 - (row + 0.5) / sl->height, s0 = 0.5 / w;
    *px = (REAL)(o[6] + s0 * o[0] + t * o[3]);
    *py = (REAL)(o[7] + s0 * o[1] + t * o[4]);
    *pz = (REAL)(o[8] + s0 * o[2] + t * o[5]);
    *dx = (REAL)(o[0] / w);
    *dy = (REAL)(o[1] / w);
    *dz = (REAL)(o[2] / w);
}

/* Output row `row` of slice sl: every pixel summed over the projections. For the common
 * case, the horizontal slice, the detector row is constant along an output row, so each
 * projection reads one sinogram row. Each pixel's volume coordinates are computed exactly
 * (start + j * step, exact for pixel grids of half-integers) and u from them by the same
 * expression everywhere, so a voxel gets the same value in a row, an ortho-slice or a plane
 * through it. */
void FN(tl_cpu_bp_row)(tl_cpu_state *s, const tl_bp_slice *sl, uint32_t row,
                       const tl_bp_proj *proj, size_t nproj, int thread, tl_cpu_dst dst,
                       double *accum)
{
    const REAL *win = s->window;
    uint32_t W = s->cols, H = s->rows, n = s->n, w = sl->width;
    REAL px, py, pz, dx, dy, dz;
    FN(row_start)(sl, row, &px, &py, &pz, &dx, &dy, &dz);
    REAL *acc = s->rowbuf[thread];
    memset(acc, 0, w * sizeof *acc);

    for (size_t k = 0; k < nproj; k++) {
        const tl_bp_proj *p = &proj[k];
        REAL c = (REAL)p->cos_t, sn = (REAL)p->sin_t, wt = (REAL)p->weight, cen = (REAL)p->center;
#define U(j) (cen + (px + (REAL)(j)*dx) * c - (py + (REAL)(j)*dy) * sn)
        if (dz == 0) {
            REAL fl = FLOOR(pz);
            REAL g = pz - fl;
            long r0 = (long)fl;
            const REAL *s0row =
                r0 >= 0 && r0 < (long)H ? win + ((size_t)r0 * n + p->slot) * W : NULL;
            const REAL *s1row = g != 0 && r0 + 1 >= 0 && r0 + 1 < (long)H
                                    ? win + ((size_t)(r0 + 1) * n + p->slot) * W
                                    : NULL;
            if (g == 0) {
                if (s0row)
                    for (uint32_t j = 0; j < w; j++)
                        acc[j] += wt * FN(lerp)(s0row, W, U(j));
            } else if (s0row || s1row) {
                for (uint32_t j = 0; j < w; j++) {
                    REAL u = U(j);
                    REAL a = s0row ? FN(lerp)(s0row, W, u) : 0;
                    REAL b = s1row ? FN(lerp)(s1row, W, u) : 0;
                    acc[j] += wt * (a + g * (b - a));
                }
            }
            continue;
        }
        for (uint32_t j = 0; j < w; j++) {
            REAL u = U(j), z = pz + (REAL)j * dz;
            if (!(z > (REAL)-1 && z < (REAL)H))
                continue;
            REAL fl = FLOOR(z);
            long r0 = (long)fl;
            REAL g = z - fl;
            REAL a = r0 >= 0 ? FN(lerp)(win + ((size_t)r0 * n + p->slot) * W, W, u) : 0;
            REAL b =
                r0 + 1 < (long)H ? FN(lerp)(win + ((size_t)(r0 + 1) * n + p->slot) * W, W, u) : 0;
            acc[j] += wt * (a + g * (b - a));
        }
#undef U
    }
    FN(tl_cpu_row_out)(sl, row, acc, dst, accum);
}

/* Output row `row` of slice sl in cone beam (backend.h, tl_bp_proj.cone): every pixel's
 * volume position goes through the projection's matrix to (u, v) and the relative depth
 * w; the filtered projection is sampled bilinearly there (linear between columns within
 * the two detector rows around v, then between the rows, zero outside the detector: the
 * rule of tl_cpu_bp_row in two dimensions) and weighed weight / w^2 (Feldkamp et al.
 * 1984). The pixel positions are computed as in tl_cpu_bp_row. */
void FN(tl_cpu_bp_cone_row)(tl_cpu_state *s, const tl_bp_slice *sl, uint32_t row,
                            const tl_bp_proj *proj, size_t nproj, int thread, tl_cpu_dst dst,
                            double *accum)
{
    const REAL *win = s->window;
    uint32_t W = s->cols, H = s->rows, n = s->n, w = sl->width;
    REAL px, py, pz, dx, dy, dz;
    FN(row_start)(sl, row, &px, &py, &pz, &dx, &dy, &dz);
    REAL *acc = s->rowbuf[thread];
    memset(acc, 0, w * sizeof *acc);

    for (size_t k = 0; k < nproj; k++) {
        const tl_bp_proj *p = &proj[k];
        REAL m[12];
        for (int i = 0; i < 12; i++)
            m[i] = (REAL)p->cone[i];
        REAL wt = (REAL)p->weight;
        for (uint32_t j = 0; j < w; j++) {
            REAL x = px + (REAL)j * dx, y = py + (REAL)j * dy, z = pz + (REAL)j * dz;
            REAL depth = m[8] * x + m[9] * y + m[10] * z + m[11];
            if (!(depth > 0))
                continue; /* at or behind the source */
            REAL u = (m[0] * x + m[1] * y + m[2] * z + m[3]) / depth;
            REAL v = (m[4] * x + m[5] * y + m[6] * z + m[7]) / depth;
            if (!(v > (REAL)-1 && v < (REAL)H))
                continue;
            REAL fl = FLOOR(v);
            long r0 = (long)fl;
            REAL g = v - fl;
            REAL a = r0 >= 0 ? FN(lerp)(win + ((size_t)r0 * n + p->slot) * W, W, u) : 0;
            REAL b = g != 0 && r0 + 1 < (long)H
                         ? FN(lerp)(win + ((size_t)(r0 + 1) * n + p->slot) * W, W, u)
                         : 0;
            acc[j] += wt / (depth * depth) * (a + g * (b - a));
        }
    }
    FN(tl_cpu_row_out)(sl, row, acc, dst, accum);
}
