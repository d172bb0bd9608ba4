/* filter.cu — the FBP filter on the GPU with cuFFT: every detector row of a projection is
 * zero-padded to P (preprocess.cu), transformed, multiplied by H / P and transformed back;
 * the first W values of each row go into the window (Chilingaryan et al. 2020, J.
 * Real-Time Image Proc. 17:1331, Sect. 4: batched FFTs; the filter design is
 * gpu/method/filter.h, shared with the CPU backend).
 *
 * A pass filters 1 .. batch projections at once (store.cu holds short frames for it while
 * frames queue up: TL_CUDA_BATCH_ROWS), so the plans are made once in create() for every
 * count k: R2C and C2R over k x rows transforms of length P, with one work area allocated
 * by us and shared by all (they run one after the other on the engine's stream). R2C goes
 * out of place, pad -> spec; C2R in place in spec (its real rows 2 (P/2 + 1) floats
 * apart), so pad is never overwritten: its zero columns W .. P-1, set once at creation,
 * stay zero, and preprocessing writes W columns a frame, not P. The multiply and the
 * extraction are per-row kernels (tl_cuda_row_grid) over all rows of the pass.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include <stdint.h>

#include "gpu/cuda/cuda_state.cuh"

#define FILTER_BLOCK TL_CUDA_ELEM_BLOCK /* element-wise kernels, grid-stride loops */

tl_status tl_cuda_fft_work_estimate(uint32_t rows, size_t padded, size_t *bytes)
{
    /* cufftEstimate1d takes int sizes; beyond them (or if it refuses) assume a work area
     * as large as the spectra, a generous upper bound for power-of-two lengths */
    size_t a = 0, b = 0, fallback = (size_t)rows * (padded / 2 + 1) * sizeof(cufftComplex);
    if (padded > (size_t)INT32_MAX || (size_t)rows * padded > (size_t)INT32_MAX ||
        cufftEstimate1d((int)padded, CUFFT_R2C, (int)rows, &a) != CUFFT_SUCCESS ||
        cufftEstimate1d((int)padded, CUFFT_C2R, (int)rows, &b) != CUFFT_SUCCESS) {
        cudaGetLastError();
        *bytes = fallback;
        return TL_OK;
    }
    *bytes = a > b ? a : b;
    return TL_OK;
}

/* One batched plan: frames x rows transforms of length P, spectra P/2 + 1 complex apart,
 * real rows P floats apart for R2C's input, 2 (P/2 + 1) for C2R's in-place output. The
 * 64-bit interface only where the sizes exceed int. */
static tl_status make_plan(tl_cuda_state *s, cufftHandle plan, cufftType type, uint32_t frames,
                           size_t *work)
{
    long long P = (long long)s->padded, nf = P / 2 + 1, batch = (long long)frames * s->rows;
    bool r2c = type == CUFFT_R2C;
    long long idist = r2c ? P : nf, odist = r2c ? nf : 2 * nf;
    TL_CUFFT(s->eb, cufftSetAutoAllocation(plan, 0)); /* one shared work area, ours */
    if (batch * P <= INT32_MAX) {
        int n[1] = {(int)P}, inembed[1] = {(int)idist}, onembed[1] = {(int)odist};
        TL_CUFFT(s->eb, cufftMakePlanMany(plan, 1, n, inembed, 1, (int)idist, onembed, 1,
                                          (int)odist, type, (int)batch, work));
    } else {
        long long n[1] = {P}, inembed[1] = {idist}, onembed[1] = {odist};
        TL_CUFFT(s->eb, cufftMakePlanMany64(plan, 1, n, inembed, 1, idist, onembed, 1, odist, type,
                                            batch, work));
    }
    return TL_OK;
}

tl_status tl_cuda_fft_create(tl_cuda_state *s)
{
    size_t work = 0;
    for (uint32_t k = 0; k < s->batch; k++) {
        size_t w1 = 0, w2 = 0;
        /* created in pairs, counted once both exist: destroy frees what nplans says */
        cufftResult r = cufftCreate(&s->r2c[k]);
        if (r == CUFFT_SUCCESS && (r = cufftCreate(&s->c2r[k])) != CUFFT_SUCCESS)
            cufftDestroy(s->r2c[k]);
        TL_CUFFT(s->eb, r);
        s->nplans = k + 1;
        TL_TRY(make_plan(s, s->r2c[k], CUFFT_R2C, k + 1, &w1));
        TL_TRY(make_plan(s, s->c2r[k], CUFFT_C2R, k + 1, &w2));
        work = w1 > work ? w1 : work;
        work = w2 > work ? w2 : work;
    }
    if (work > 0)
        TL_TRY(tl_cuda_alloc(s, &s->fft_work, work, "cuFFT work area"));
    for (uint32_t k = 0; k < s->nplans; k++) {
        if (work > 0) {
            TL_CUFFT(s->eb, cufftSetWorkArea(s->r2c[k], s->fft_work));
            TL_CUFFT(s->eb, cufftSetWorkArea(s->c2r[k], s->fft_work));
        }
        TL_CUFFT(s->eb, cufftSetStream(s->r2c[k], s->stream));
        TL_CUFFT(s->eb, cufftSetStream(s->c2r[k], s->stream));
    }
    s->sz.fft_work = work;
    return TL_OK;
}

void tl_cuda_fft_destroy(tl_cuda_state *s)
{
    for (uint32_t k = 0; k < s->nplans; k++) {
        cufftDestroy(s->r2c[k]);
        cufftDestroy(s->c2r[k]);
    }
    s->nplans = 0;
    if (s->fft_work)
        cudaFree(s->fft_work);
    s->fft_work = NULL;
}

/* spec[r][k] *= H[k] / P (both parts: the response is real), per-row grid. */
__global__ void __launch_bounds__(FILTER_BLOCK)
    filter_multiply_kernel(cufftComplex *__restrict__ spec, const float *__restrict__ response,
                           uint32_t rows, uint32_t nfreq)
{
    for (uint32_t r = blockIdx.y; r < rows; r += gridDim.y) {
        cufftComplex *row = spec + (size_t)r * nfreq;
#pragma unroll tl_cuda_row_ilp
        for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < nfreq;
             k += gridDim.x * blockDim.x) {
            const float h = response[k];
            cufftComplex v = row[k];
            v.x *= h;
            v.y *= h;
            row[k] = v;
        }
    }
}

/* The first cols values of every filtered row (rows src_stride floats apart) into its
 * projection's destination: row g of the pass is row g % rows of projection g / rows. */
__global__ void __launch_bounds__(FILTER_BLOCK)
    filter_extract_kernel(const float *__restrict__ src, size_t src_stride, uint32_t rows,
                          uint32_t total, uint32_t cols, tl_cuda_dsts dst, size_t dst_stride)
{
    for (uint32_t g = blockIdx.y; g < total; g += gridDim.y) {
        const uint32_t k = g / rows, r = g - k * rows;
        const float *in = src + (size_t)g * src_stride;
        float *out = dst.p[k] + (size_t)r * dst_stride;
#pragma unroll tl_cuda_row_ilp
        for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += gridDim.x * blockDim.x) {
            out[c] = in[c];
        }
    }
}

tl_status tl_cuda_filter_rows(tl_cuda_state *s, uint32_t n, const tl_cuda_dsts *dst,
                              size_t dst_stride)
{
    if (n < 1 || n > s->nplans)
        return tl_fail(s->eb, TL_EINTERNAL, "filter pass of %u frames (plans for 1..%u)", n,
                       s->nplans);
    const uint32_t nf = (uint32_t)(s->padded / 2 + 1), total = n * s->rows;
    TL_CUFFT(s->eb, cufftExecR2C(s->r2c[n - 1], s->pad, s->spec));
    filter_multiply_kernel<<<tl_cuda_row_grid(total, nf), FILTER_BLOCK, 0, s->stream>>>(
        s->spec, s->response, total, nf);
    TL_CUDA_LAUNCHED(s->eb, "filter_multiply_kernel");
    /* in place: the real rows overlay the spectra they come from */
    float *real = reinterpret_cast<float *>(s->spec);
    TL_CUFFT(s->eb, cufftExecC2R(s->c2r[n - 1], s->spec, real));
    filter_extract_kernel<<<tl_cuda_row_grid(total, s->cols), FILTER_BLOCK, 0, s->stream>>>(
        real, 2 * (size_t)nf, s->rows, total, s->cols, *dst, dst_stride);
    TL_CUDA_LAUNCHED(s->eb, "filter_extract_kernel");
    return TL_OK;
}
