/* filter.cu — the FBP filter on the GPU with cuFFT: every detector row of a projection is
 * zero-padded to P (preprocess.cu), transformed, multiplied by H / P and transformed back;
 * the first W values of each row go into the window (seed-000-001.md §1.1 "Filtering":
 * batched FFTs; the filter design is gpu/filter.h, shared with the CPU backend).
 *
 * Two batched plans (R2C and C2R, `rows` transforms of length P each) are made once in
 * create(), with one work area allocated by us and shared by both (they run one after the
 * other on the engine's stream). R2C goes out of place, pad -> spec; C2R in place in spec
 * (its real rows 2 (P/2 + 1) floats apart), so pad is never overwritten: its zero columns
 * W .. P-1, set once at creation, stay zero, and preprocessing writes W columns a frame,
 * not P. The multiply and the extraction are per-row kernels (tl_cuda_row_grid).
 */
#include "config.h"

#include "gpu/backend.h"

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

/* One batched plan: `rows` transforms of length P, spectra P/2 + 1 complex apart, real rows
 * P floats apart for R2C's input, 2 (P/2 + 1) for C2R's in-place output. The 64-bit
 * interface only where the sizes exceed int. */
static tl_status make_plan(tl_cuda_state *s, cufftHandle plan, cufftType type, size_t *work)
{
    long long P = (long long)s->padded, nf = P / 2 + 1, batch = s->rows;
    bool r2c = type == CUFFT_R2C;
    long long idist = r2c ? P : nf, odist = r2c ? nf : 2 * nf;
    TL_CUFFT(s->eb, cufftSetAutoAllocation(plan, 0)); /* one shared work area, ours */
    if (batch * P <= INT32_MAX) {
        int n[1] = {(int)P}, inembed[1] = {(int)idist}, onembed[1] = {(int)odist};
        TL_CUFFT(s->eb, cufftMakePlanMany(plan, 1, n, inembed, 1, (int)idist, onembed, 1,
                                          (int)odist, type, (int)batch, work));
    } else {
        long long n[1] = {P}, inembed[1] = {idist}, onembed[1] = {odist};
        TL_CUFFT(s->eb, cufftMakePlanMany64(plan, 1, n, inembed, 1, idist, onembed, 1, odist,
                                            type, batch, work));
    }
    return TL_OK;
}

tl_status tl_cuda_fft_create(tl_cuda_state *s)
{
    size_t w1 = 0, w2 = 0;
    TL_CUFFT(s->eb, cufftCreate(&s->r2c));
    s->have_r2c = true;
    TL_TRY(make_plan(s, s->r2c, CUFFT_R2C, &w1));
    TL_CUFFT(s->eb, cufftCreate(&s->c2r));
    s->have_c2r = true;
    TL_TRY(make_plan(s, s->c2r, CUFFT_C2R, &w2));
    size_t work = w1 > w2 ? w1 : w2;
    if (work > 0) {
        TL_TRY(tl_cuda_alloc(s, &s->fft_work, work, "cuFFT work area"));
        TL_CUFFT(s->eb, cufftSetWorkArea(s->r2c, s->fft_work));
        TL_CUFFT(s->eb, cufftSetWorkArea(s->c2r, s->fft_work));
    }
    s->sz.fft_work = work;
    TL_CUFFT(s->eb, cufftSetStream(s->r2c, s->stream));
    TL_CUFFT(s->eb, cufftSetStream(s->c2r, s->stream));
    return TL_OK;
}

void tl_cuda_fft_destroy(tl_cuda_state *s)
{
    if (s->have_r2c)
        cufftDestroy(s->r2c);
    if (s->have_c2r)
        cufftDestroy(s->c2r);
    s->have_r2c = s->have_c2r = false;
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

/* The first cols values of every filtered row (rows src_stride floats apart) into dst. */
__global__ void __launch_bounds__(FILTER_BLOCK)
filter_extract_kernel(const float *__restrict__ src, size_t src_stride, uint32_t rows,
                      uint32_t cols, float *__restrict__ dst, size_t dst_stride)
{
    for (uint32_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *in = src + (size_t)r * src_stride;
        float *out = dst + (size_t)r * dst_stride;
#pragma unroll tl_cuda_row_ilp
        for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += gridDim.x * blockDim.x) {
            out[c] = in[c];
        }
    }
}

tl_status tl_cuda_filter_rows(tl_cuda_state *s, float *dst, size_t dst_stride)
{
    const uint32_t nf = (uint32_t)(s->padded / 2 + 1);
    TL_CUFFT(s->eb, cufftExecR2C(s->r2c, s->pad, s->spec));
    filter_multiply_kernel<<<tl_cuda_row_grid(s->rows, nf), FILTER_BLOCK, 0, s->stream>>>(
        s->spec, s->response, s->rows, nf);
    TL_CUDA_LAUNCHED(s->eb, "filter_multiply_kernel");
    /* in place: the real rows overlay the spectra they come from */
    float *real = reinterpret_cast<float *>(s->spec);
    TL_CUFFT(s->eb, cufftExecC2R(s->c2r, s->spec, real));
    filter_extract_kernel<<<tl_cuda_row_grid(s->rows, s->cols), FILTER_BLOCK, 0, s->stream>>>(
        real, 2 * (size_t)nf, s->rows, s->cols, dst, dst_stride);
    TL_CUDA_LAUNCHED(s->eb, "filter_extract_kernel");
    return TL_OK;
}
