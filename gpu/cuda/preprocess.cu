/* preprocess.cu — dtype conversion, dark/flat averaging and flat-field correction, −log.
 *
 * Chilingaryan et al. 2020, J. Real-Time Image Proc. 17:1331, Sect. 4, only say "a
 * chain of filters" before filtering; the chain is ours (engine.h, tl_engine_submit)
 * and mirrors the CPU backend's tl_cpu_calib_row / tl_cpu_store_row
 * (gpu/cpu/kernels_impl.h) operation for operation:
 *   pixel -> float;  t = (pixel - D) * gain,  gain = 1 / max(F - D, 1e-6);
 *   p = -log(max(t, 1e-6))  unless already_linear.
 * One fused, memory-bound kernel writes the corrected row straight into its destination:
 * the FFT input (whose zero padding, columns W .. P-1, is never written) or, without a
 * filter, the window. It runs once per frame, so it is laid out per row (blockIdx.y a row,
 * tl_cuda_row_grid). Calibration sums are kept in double, the averages and the gain in
 * float, as on the CPU; that kernel runs only for darks and flats and stays element-wise
 * with a grid-stride loop.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include "gpu/cuda/cuda_state.cuh"

/* A raw pixel as float: (float)value, rounded to nearest like the C conversion. */
template <typename T> __device__ __forceinline__ float load_pixel(const char *row, uint32_t c)
{
    return (float)reinterpret_cast<const T *>(row)[c];
}

/* The corrected pixels of the frame's rows into dst (rows dst_stride floats apart), per-row
 * grid (tl_cuda_row_grid). dark and gain are NULL when there is no average yet. Zero
 * padding for the FFT is not written here: the filter's padded rows keep the zeros they
 * were given at creation (filter.cu). */
template <typename T>
__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    preprocess_kernel(const char *__restrict__ src, size_t src_pitch, uint32_t rows, uint32_t cols,
                      const float *__restrict__ dark, const float *__restrict__ gain, int linear,
                      float *__restrict__ dst, size_t dst_stride)
{
    for (uint32_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const char *in = src + (size_t)r * src_pitch;
        const size_t o = (size_t)r * cols;
        float *out = dst + (size_t)r * dst_stride;
#pragma unroll tl_cuda_row_ilp
        for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += gridDim.x * blockDim.x) {
            float t = load_pixel<T>(in, c);
            if (dark)
                t -= dark[o + c];
            if (gain)
                t *= gain[o + c];
            if (!linear) /* (t > eps ? t : eps): NaN goes to eps, like the CPU's comparison */
                t = -logf(t > TL_CUDA_MIN_RATIO ? t : TL_CUDA_MIN_RATIO);
            out[c] = t;
        }
    }
}

tl_status tl_cuda_preprocess(tl_cuda_state *s, const char *src, size_t pitch, tl_dtype dt,
                             float *dst, size_t dst_stride)
{
    const float *dark = s->have[0] ? s->avg[0] : NULL;
    const float *gain = s->have[1] ? s->gain : NULL;
    int linear = s->cfg.already_linear ? 1 : 0;
    const dim3 grid = tl_cuda_row_grid(s->rows, s->cols);
    switch (dt) {
        case TL_DTYPE_U8:
            preprocess_kernel<uint8_t>
                <<<grid, TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(src, pitch, s->rows, s->cols, dark,
                                                             gain, linear, dst, dst_stride);
            break;
        case TL_DTYPE_U16:
            preprocess_kernel<uint16_t>
                <<<grid, TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(src, pitch, s->rows, s->cols, dark,
                                                             gain, linear, dst, dst_stride);
            break;
        case TL_DTYPE_U32:
            preprocess_kernel<uint32_t>
                <<<grid, TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(src, pitch, s->rows, s->cols, dark,
                                                             gain, linear, dst, dst_stride);
            break;
        case TL_DTYPE_F32:
            preprocess_kernel<float>
                <<<grid, TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(src, pitch, s->rows, s->cols, dark,
                                                             gain, linear, dst, dst_stride);
            break;
        default: return tl_fail(s->eb, TL_EINVAL, "unknown dtype %d", (int)dt);
    }
    TL_CUDA_LAUNCHED(s->eb, "preprocess_kernel");
    return TL_OK;
}

/* ---- the corrected path (types.h, tl_corrections): the same operations in stages ---------- */

/* Raw pixels as float counts into dst (rows x cols, packed), for the dezinger. */
template <typename T>
__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    convert_kernel(const char *__restrict__ src, size_t src_pitch, uint32_t rows, uint32_t cols,
                   float *__restrict__ dst)
{
    for (uint32_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const char *in = src + (size_t)r * src_pitch;
        float *out = dst + (size_t)r * cols;
#pragma unroll tl_cuda_row_ilp
        for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += gridDim.x * blockDim.x)
            out[c] = load_pixel<T>(in, c);
    }
}

tl_status tl_cuda_convert(tl_cuda_state *s, const char *src, size_t pitch, tl_dtype dt, float *dst)
{
    const dim3 grid = tl_cuda_row_grid(s->rows, s->cols);
#define TL_CONVERT_LAUNCH(T) \
    convert_kernel<T><<<grid, TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(src, pitch, s->rows, s->cols, dst)
    switch (dt) {
        case TL_DTYPE_U8: TL_CONVERT_LAUNCH(uint8_t); break;
        case TL_DTYPE_U16: TL_CONVERT_LAUNCH(uint16_t); break;
        case TL_DTYPE_U32: TL_CONVERT_LAUNCH(uint32_t); break;
        case TL_DTYPE_F32: TL_CONVERT_LAUNCH(float); break;
        default: return tl_fail(s->eb, TL_EINVAL, "unknown dtype %d", (int)dt);
    }
#undef TL_CONVERT_LAUNCH
    TL_CUDA_LAUNCHED(s->eb, "convert_kernel");
    return TL_OK;
}

/* Float rows (in_stride apart) through the dark/flat correction (dark and gain NULL: none)
 * and -log (when log), into dst: preprocess_kernel's operations in the same order, on
 * counts that were converted (and dezingered) before. */
__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    correct_kernel(const float *__restrict__ in, size_t in_stride, uint32_t rows, uint32_t cols,
                   const float *__restrict__ dark, const float *__restrict__ gain, int log,
                   float *ring_m, const float *__restrict__ ring_c, float ring_w,
                   const float *__restrict__ colw, const float *__restrict__ pixw,
                   tl_parker parker, double angle, float *__restrict__ dst, size_t dst_stride,
                   float *__restrict__ meas, size_t meas_stride)
{
    for (uint32_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *row = in + (size_t)r * in_stride;
        const size_t o = (size_t)r * cols;
        float *out = dst + (size_t)r * dst_stride;
#pragma unroll tl_cuda_row_ilp
        for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += gridDim.x * blockDim.x) {
            float t = row[c];
            if (dark)
                t -= dark[o + c];
            if (gain)
                t *= gain[o + c];
            if (log)
                t = -logf(t > TL_CUDA_MIN_RATIO ? t : TL_CUDA_MIN_RATIO);
            if (ring_m) { /* rings.cu: the profile learns the frame, its stripes go */
                float m = ring_m[o + c];
                ring_m[o + c] = m + ring_w * (t - m);
                t -= ring_c[o + c];
            }
            if (meas) /* kept for iterative slices: as measured, before any weight */
                meas[(size_t)r * meas_stride + c] = t;
            if (colw) /* half acquisition (gpu/halfacq.c): this projection's share */
                t *= colw[c];
            if (pixw) /* cone beam (gpu/geometry/cone_beam.c): FDK's cosine weights */
                t *= pixw[o + c];
            if (parker.on) /* a short cone-beam scan: this view's weight of column c */
                t *= (float)tl_parker_weight(&parker, angle, (double)c);
            out[c] = t;
        }
    }
}

tl_status tl_cuda_correct(tl_cuda_state *s, const float *in, size_t in_stride, bool flat,
                          bool log, bool ring, float *dst, size_t dst_stride, float *meas,
                          size_t meas_stride)
{
    const float *dark = flat && s->have[0] ? s->avg[0] : NULL;
    const float *gain = flat && s->have[1] ? s->gain : NULL;
    float *ring_m = ring ? s->ring_m : NULL;
    const float w = ring_m ? tl_cuda_ring_next_weight(s) : 0.f;
    tl_parker parker = s->parker;
    parker.on = parker.on && ring; /* the last stage, with the other weights */
    correct_kernel<<<tl_cuda_row_grid(s->rows, s->cols), TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(
        in, in_stride, s->rows, s->cols, dark, gain, log ? 1 : 0, ring_m, s->ring_c, w,
        ring ? s->colw : NULL, ring ? s->pixw : NULL, parker, s->view_angle, dst, dst_stride,
        meas, meas_stride);
    TL_CUDA_LAUNCHED(s->eb, "correct_kernel");
    return TL_OK;
}

/* Adds a frame to the batch sum of `kind` (0 dark, 1 flat), refreshes that average and,
 * where a flat average exists (or this is a flat), the gain. The new average is used from
 * the register it was computed in, so the kernel never reads what it just wrote.
 * dark_avg is the dark average in use for the gain of a flat batch (NULL: no darks yet). */
template <typename T>
__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    calib_kernel(const char *__restrict__ src, size_t src_pitch, uint32_t rows, uint32_t cols,
                 int kind, double count, double *sum, float *avg, const float *dark_avg,
                 const float *flat_avg, int do_gain, float *gain)
{
    const size_t total = (size_t)rows * cols;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x) {
        const uint32_t r = (uint32_t)(k / cols), c = (uint32_t)(k - (size_t)r * cols);
        /* the CPU sums (double)(float)pixel */
        const double v = (double)load_pixel<T>(src + (size_t)r * src_pitch, c);
        const double sm = sum[k] + v;
        sum[k] = sm;
        const float a = (float)(sm / count);
        avg[k] = a;
        if (do_gain) {
            const float d = kind == 0 ? a : (dark_avg ? dark_avg[k] : 0.f);
            const float f = kind == 1 ? a : flat_avg[k];
            const float den = f - d;
            gain[k] = 1.0f / (den > TL_CUDA_MIN_RATIO ? den : TL_CUDA_MIN_RATIO);
        }
    }
}

tl_status tl_cuda_calib_accumulate(tl_cuda_state *s, const char *src, size_t pitch, tl_dtype dt,
                                   int kind, uint32_t count)
{
    /* as tl_cpu_calib_row: the gain needs a flat (this frame or an earlier batch); the
     * dark in it is this batch's average for a dark, the one in use (if any) for a flat */
    int do_gain = s->have[1] || kind == 1;
    const float *dark_avg = s->have[0] ? s->avg[0] : NULL;
    unsigned grid = tl_cuda_elem_grid((size_t)s->rows * s->cols);
#define TL_CALIB_LAUNCH(T)                                                                      \
    calib_kernel<T>                                                                             \
        <<<grid, TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(src, pitch, s->rows, s->cols, kind,        \
                                                     (double)count, s->sum[kind], s->avg[kind], \
                                                     dark_avg, s->avg[1], do_gain, s->gain)
    switch (dt) {
        case TL_DTYPE_U8: TL_CALIB_LAUNCH(uint8_t); break;
        case TL_DTYPE_U16: TL_CALIB_LAUNCH(uint16_t); break;
        case TL_DTYPE_U32: TL_CALIB_LAUNCH(uint32_t); break;
        case TL_DTYPE_F32: TL_CALIB_LAUNCH(float); break;
        default: return tl_fail(s->eb, TL_EINVAL, "unknown dtype %d", (int)dt);
    }
#undef TL_CALIB_LAUNCH
    TL_CUDA_LAUNCHED(s->eb, "calib_kernel");
    return TL_OK;
}
