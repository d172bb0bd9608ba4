/* paganin.cu — single-distance phase retrieval (Paganin et al. 2002, J. Microsc. 206:33,
 * Eq. 10) of each flat-field-corrected frame, before −log: the frame is placed in a
 * padded buffer whose margins replicate its edge pixels (tomopy's and tomocupy's
 * retrieve_phase padding; the shape is gpu/base/phase.h), transformed with a 2-D R2C,
 * multiplied by the filter H / (prow pcol) designed by the engine (gpu/method/paganin.h)
 * and transformed back with C2R; the frame's part of the result is the filtered
 * transmission. The CPU reference is tl_cpu_phase_* (gpu/cpu/kernels_impl.h).
 *
 * The two plans, their work area and the buffers are made in create(); a frame costs two
 * 2-D FFTs and two element-wise kernels, nothing is allocated.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include "gpu/cuda/cuda_state.cuh"

/* The margins of the padded buffer: each pixel outside the frame takes the value of the
 * nearest frame pixel (rows and columns clamped). Reads only the frame, writes only the
 * margins, so threads never race. */
__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    phase_pad_kernel(float *buf, uint32_t prow, uint32_t pcol, uint32_t top, uint32_t left,
                     uint32_t rows, uint32_t cols)
{
    for (uint32_t r = blockIdx.y; r < prow; r += gridDim.y) {
        const bool inside_row = r >= top && r < top + rows;
        const uint32_t sr = r < top ? top : r >= top + rows ? top + rows - 1 : r;
        for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < pcol;
             c += gridDim.x * blockDim.x) {
            if (inside_row && c >= left && c < left + cols)
                continue;
            const uint32_t sc = c < left ? left : c >= left + cols ? left + cols - 1 : c;
            buf[(size_t)r * pcol + c] = buf[(size_t)sr * pcol + sc];
        }
    }
}

__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    phase_multiply_kernel(cufftComplex *spec, const float *__restrict__ response, size_t n)
{
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        const float h = response[k];
        spec[k].x *= h;
        spec[k].y *= h;
    }
}

tl_status tl_cuda_phase_work_estimate(const tl_phase_filter *f, size_t *bytes)
{
    size_t a = 0, b = 0;
    *bytes = (size_t)f->prow * (f->pcol / 2 + 1) * sizeof(cufftComplex); /* fallback */
    if (cufftEstimate2d((int)f->prow, (int)f->pcol, CUFFT_R2C, &a) != CUFFT_SUCCESS ||
        cufftEstimate2d((int)f->prow, (int)f->pcol, CUFFT_C2R, &b) != CUFFT_SUCCESS) {
        cudaGetLastError();
        return TL_OK;
    }
    *bytes = a > b ? a : b;
    return TL_OK;
}

tl_status tl_cuda_phase_create(tl_cuda_state *s)
{
    if (!tl_phase_on(&s->cfg.corr))
        return TL_OK;
    TL_TRY(tl_phase_shape(&s->cfg.corr, s->rows, s->cols, &s->phase, s->eb));
    const tl_phase_filter *f = &s->phase;
    const size_t nbuf = (size_t)f->prow * f->pcol, nspec = (size_t)f->prow * (f->pcol / 2 + 1);
    TL_TRY(tl_cuda_alloc(s, (void **)&s->phase_buf, nbuf * sizeof(float), "phase buffer"));
    TL_TRY(
        tl_cuda_alloc(s, (void **)&s->phase_spec, nspec * sizeof(cufftComplex), "phase spectrum"));
    TL_TRY(tl_cuda_alloc(s, (void **)&s->phase_resp, nspec * sizeof(float), "phase filter"));
    size_t wa = 0, wb = 0;
    TL_CUFFT(s->eb, cufftCreate(&s->phase_r2c));
    s->phase_plans = 1;
    TL_CUFFT(s->eb, cufftCreate(&s->phase_c2r));
    s->phase_plans = 2;
    TL_CUFFT(s->eb, cufftSetAutoAllocation(s->phase_r2c, 0));
    TL_CUFFT(s->eb, cufftSetAutoAllocation(s->phase_c2r, 0));
    TL_CUFFT(s->eb, cufftMakePlan2d(s->phase_r2c, (int)f->prow, (int)f->pcol, CUFFT_R2C, &wa));
    TL_CUFFT(s->eb, cufftMakePlan2d(s->phase_c2r, (int)f->prow, (int)f->pcol, CUFFT_C2R, &wb));
    TL_TRY(tl_cuda_alloc(s, &s->phase_work, wa > wb ? wa : wb, "phase FFT work area"));
    TL_CUFFT(s->eb, cufftSetWorkArea(s->phase_r2c, s->phase_work));
    TL_CUFFT(s->eb, cufftSetWorkArea(s->phase_c2r, s->phase_work));
    TL_CUFFT(s->eb, cufftSetStream(s->phase_r2c, s->stream));
    TL_CUFFT(s->eb, cufftSetStream(s->phase_c2r, s->stream));
    return TL_OK;
}

void tl_cuda_phase_destroy(tl_cuda_state *s)
{
    if (s->phase_plans > 0)
        cufftDestroy(s->phase_r2c);
    if (s->phase_plans > 1)
        cufftDestroy(s->phase_c2r);
    void *dev[] = {s->phase_buf, s->phase_spec, s->phase_resp, s->phase_work};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        if (dev[i])
            cudaFree(dev[i]);
}

tl_status tl_cuda_op_set_phase(void *state, const tl_phase_filter *f)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (!s->phase_buf || f->prow != s->phase.prow || f->pcol != s->phase.pcol)
        return tl_fail(s->eb, TL_EINTERNAL, "phase filter %u x %u does not match the backend's",
                       f->prow, f->pcol);
    TL_TRY(tl_cuda_use_device(s));
    const size_t nspec = (size_t)f->prow * (f->pcol / 2 + 1);
    const double scale = 1.0 / ((double)f->prow * f->pcol);
    float *h = (float *)malloc(nspec * sizeof *h); /* once per engine, not per frame */
    if (!h)
        return tl_fail(s->eb, TL_ENOMEM, "out of host memory for the phase filter");
    for (size_t k = 0; k < nspec; k++)
        h[k] = (float)(f->response[k] * scale);
    cudaError_t e = cudaMemcpy(s->phase_resp, h, nspec * sizeof *h, cudaMemcpyHostToDevice);
    free(h);
    TL_CUDA(s->eb, e);
    return TL_OK;
}

float *tl_cuda_phase_frame(tl_cuda_state *s)
{
    return s->phase_buf + (size_t)s->phase.top * s->phase.pcol + s->phase.left;
}

tl_status tl_cuda_phase(tl_cuda_state *s)
{
    const tl_phase_filter *f = &s->phase;
    phase_pad_kernel<<<tl_cuda_row_grid(f->prow, f->pcol), TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(
        s->phase_buf, f->prow, f->pcol, f->top, f->left, f->rows, f->cols);
    TL_CUDA_LAUNCHED(s->eb, "phase_pad_kernel");
    TL_CUFFT(s->eb, cufftExecR2C(s->phase_r2c, s->phase_buf, s->phase_spec));
    const size_t nspec = (size_t)f->prow * (f->pcol / 2 + 1);
    phase_multiply_kernel<<<tl_cuda_elem_grid(nspec), TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(
        s->phase_spec, s->phase_resp, nspec);
    TL_CUDA_LAUNCHED(s->eb, "phase_multiply_kernel");
    TL_CUFFT(s->eb, cufftExecC2R(s->phase_c2r, s->phase_spec, s->phase_buf));
    return TL_OK;
}
