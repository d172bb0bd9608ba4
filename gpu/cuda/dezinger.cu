/* dezinger.cu — zingers (bright single-pixel outliers from scattered X-rays or cosmic
 * rays hitting the sensor) replaced by the median of their 3 x 3 neighbourhood, per frame,
 * before the dark/flat correction. The rule is tomopy's remove_outlier (a pixel more than
 * `dezinger` counts above the local median becomes that median; tomopy is Gürsoy et al. 2014,
 * J. Synchrotron Rad. 21:1188), with the
 * neighbourhood mirrored at the edges (TL_MIRROR_*, gpu/base/types.h); the CPU reference is tl_cpu_dezinger_row
 * (gpu/cpu/kernels_impl.h). The median is a value of the set, so the GPU's sorting network
 * and the CPU's insertion sort agree exactly, and so do the counts.
 *
 * Per-row grid (tl_cuda_row_grid); the nine reads of a pixel overlap its neighbours' and
 * are served by L1/L2. Replaced pixels are counted per warp (shuffle reduction) and added
 * to one 64-bit device counter, copied asynchronously to pinned host memory after each
 * frame, so that status reads it without waiting for the GPU.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include "gpu/cuda/cuda_state.cuh"

#define TL_CUDA_FULL_MASK 0xffffffffu

/* One compare-exchange of the median network. */
#define TL_MED_SORT(a, b)                    \
    do {                                     \
        const float lo_ = fminf(v[a], v[b]); \
        v[b] = fmaxf(v[a], v[b]);            \
        v[a] = lo_;                          \
    } while (0)

/* Median of nine by the 19-exchange network of Paeth (Graphics Gems, 1990), as in
 * Devillard's opt_med9; checked against a full sort on random data. */
__device__ __forceinline__ float median9(float *v)
{
    /* clang-format off */
    TL_MED_SORT(1, 2); TL_MED_SORT(4, 5); TL_MED_SORT(7, 8);
    TL_MED_SORT(0, 1); TL_MED_SORT(3, 4); TL_MED_SORT(6, 7);
    TL_MED_SORT(1, 2); TL_MED_SORT(4, 5); TL_MED_SORT(7, 8);
    TL_MED_SORT(0, 3); TL_MED_SORT(5, 8); TL_MED_SORT(4, 7);
    TL_MED_SORT(3, 6); TL_MED_SORT(1, 4); TL_MED_SORT(2, 5);
    TL_MED_SORT(4, 7); TL_MED_SORT(4, 2); TL_MED_SORT(6, 4);
    TL_MED_SORT(4, 2);
    /* clang-format on */
    return v[4];
}

__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    dezinger_kernel(const float *__restrict__ in, float *__restrict__ out, uint32_t rows,
                    uint32_t cols, float threshold, unsigned long long *replaced)
{
    unsigned count = 0;
    for (uint32_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const uint32_t r0 = TL_MIRROR_BELOW(r, rows), r2 = TL_MIRROR_ABOVE(r, rows);
        const float *a = in + (size_t)r0 * cols, *b = in + (size_t)r * cols,
                    *c = in + (size_t)r2 * cols;
        for (uint32_t x = blockIdx.x * blockDim.x + threadIdx.x; x < cols;
             x += gridDim.x * blockDim.x) {
            const uint32_t x0 = TL_MIRROR_BELOW(x, cols), x2 = TL_MIRROR_ABOVE(x, cols);
            float v[9] = {a[x0], a[x], a[x2], b[x0], b[x], b[x2], c[x0], c[x], c[x2]};
            const float px = b[x], med = median9(v);
            const bool zinger = px - med > threshold;
            out[(size_t)r * cols + x] = zinger ? med : px;
            count += zinger;
        }
    }
    /* every thread reaches this once: the loops above do not contain it */
    for (int off = 16; off > 0; off >>= 1)
        count += __shfl_down_sync(TL_CUDA_FULL_MASK, count, off);
    if ((threadIdx.x & 31) == 0 && count)
        atomicAdd(replaced, (unsigned long long)count);
}

tl_status tl_cuda_dezinger(tl_cuda_state *s, const float *in, float *out)
{
    const dim3 grid = tl_cuda_row_grid(s->rows, s->cols);
    dezinger_kernel<<<grid, TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(in, out, s->rows, s->cols,
                                                                (float)s->cfg.corr.dezinger,
                                                                s->d_replaced);
    TL_CUDA_LAUNCHED(s->eb, "dezinger_kernel");
    /* the running count to the host, so that reading it (status) never waits */
    TL_CUDA(s->eb, cudaMemcpyAsync(s->h_replaced, s->d_replaced, sizeof *s->h_replaced,
                                   cudaMemcpyDeviceToHost, s->stream));
    return TL_OK;
}

/* The count as of the frames whose work is done (the copy each frame enqueues). */
tl_status tl_cuda_op_corr_counts(void *state, uint64_t *replaced)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    *replaced = s->h_replaced ? *(volatile unsigned long long *)s->h_replaced : 0;
    return TL_OK;
}
