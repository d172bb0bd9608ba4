/* profile.cu — the column profiles the centre estimation reads (backend.h, profiles;
 * gpu/center.c): right after a projection's last correction kernel, before its filter
 * pass, the mean over the detector rows of each column goes into position `pos` of a
 * device ring of tl_center_profiles(window) profiles. Rows are summed in chunks of
 * TL_CUDA_PROFILE_ROWS per block, the chunks added atomically (the order of the float
 * additions varies: profiles agree with the CPU's to float rounding). Reading profiles
 * copies them to the host and waits for the work queued before: the engine does it once
 * per estimate, every window/16 projections.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include "gpu/cuda/cuda_state.cuh"

#define TL_CUDA_PROFILE_ROWS 64 /* rows one block sums before its atomic add */

__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    profile_kernel(const float *__restrict__ src, size_t stride, uint32_t rows, uint32_t cols,
                   float scale, float *prof)
{
    const uint32_t r0 = blockIdx.y * TL_CUDA_PROFILE_ROWS;
    const uint32_t r1 = r0 + TL_CUDA_PROFILE_ROWS < rows ? r0 + TL_CUDA_PROFILE_ROWS : rows;
    for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols;
         c += gridDim.x * blockDim.x) {
        float sum = 0.f;
        for (uint32_t r = r0; r < r1; r++)
            sum += src[(size_t)r * stride + c];
        atomicAdd(&prof[c], sum * scale);
    }
}

tl_status tl_cuda_profile_create(tl_cuda_state *s)
{
    s->prof_pos = -1;
    if (!s->cfg.center_estimate)
        return TL_OK;
    s->nprof = tl_center_profiles(s->n);
    TL_TRY(tl_cuda_alloc(s, (void **)&s->d_prof, (size_t)s->nprof * s->cols * sizeof(float),
                         "centre profiles"));
    return TL_OK;
}

size_t tl_cuda_profile_bytes(const tl_engine_config *c)
{
    return c->center_estimate ? (size_t)tl_center_profiles(c->window) * c->cols * sizeof(float)
                              : 0;
}

tl_status tl_cuda_profile_add(tl_cuda_state *s, const float *src, size_t stride)
{
    if (s->prof_pos < 0 || !s->d_prof)
        return TL_OK;
    float *prof = s->d_prof + (size_t)s->prof_pos * s->cols;
    s->prof_pos = -1;
    TL_CUDA(s->eb, cudaMemsetAsync(prof, 0, s->cols * sizeof(float), s->stream));
    const unsigned chunks = (s->rows + TL_CUDA_PROFILE_ROWS - 1) / TL_CUDA_PROFILE_ROWS;
    const dim3 grid(tl_cuda_elem_grid(s->cols),
                    chunks < TL_CUDA_ROW_MAX_GRID ? chunks : TL_CUDA_ROW_MAX_GRID);
    if (chunks > TL_CUDA_ROW_MAX_GRID)
        return tl_fail(s->eb, TL_EUNSUPPORTED, "centre profiles of more than %u rows",
                       TL_CUDA_ROW_MAX_GRID * TL_CUDA_PROFILE_ROWS);
    profile_kernel<<<grid, TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(src, stride, s->rows, s->cols,
                                                               1.0f / (float)s->rows, prof);
    TL_CUDA_LAUNCHED(s->eb, "profile_kernel");
    return TL_OK;
}

tl_status tl_cuda_op_profile_slot(void *state, int32_t pos)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (pos >= (int32_t)s->nprof)
        return tl_fail(s->eb, TL_EINTERNAL, "profile %d outside the ring of %u", pos, s->nprof);
    s->prof_pos = s->d_prof ? pos : -1;
    return TL_OK;
}

tl_status tl_cuda_op_profiles(void *state, const uint32_t *pos, size_t n, float *out)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s));
    for (size_t i = 0; i < n; i++) {
        if (!s->d_prof || pos[i] >= s->nprof)
            return tl_fail(s->eb, TL_EINTERNAL, "no profile %u", pos[i]);
        TL_CUDA(s->eb,
                cudaMemcpyAsync(out + i * s->cols, s->d_prof + (size_t)pos[i] * s->cols,
                                s->cols * sizeof(float), cudaMemcpyDeviceToHost, s->stream));
    }
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    return TL_OK;
}
