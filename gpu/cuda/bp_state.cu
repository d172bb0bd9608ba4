/* bp_state.cu — device state the back-projection kernels share beyond the window: the
 * per-sinogram scales of the 16-bit kernels and the per-SM tickets of the hybrids, made
 * once in create() (tl_cuda_bp_create), so no reconstruction allocates.
 *
 * 16-bit scales: half floats hold 11 significant bits over a range of 2^-24 .. 65504, so
 * the 16-bit kernels (alu4h, tex4h) scale each sinogram by 2^10 / its largest |value|
 * (ARCHITECTURE.md §6.1 AC-6 "range guard": the paper offers no remedy, the scaling is
 * ours). The maximum is found on the device (a reduction with atomicMax on the bits of
 * non-negative floats, whose order equals their values'), so nothing waits for the host.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include "gpu/cuda/kernels.cuh"

#define SCALE_BLOCK 256
#define SCALE_GRID_MAX 1024 /* blocks per row: grid-stride beyond */

__global__ void half_maxabs_kernel(tl_cuda_rows rows, int nrows, size_t pitch_el, int W, int n,
                                   unsigned *maxabs)
{
    const int r = blockIdx.y;
    if (r >= nrows)
        return;
    const float *base = rows.row[r];
    float m = 0.f;
    const size_t total = (size_t)n * W;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x) {
        const size_t slot = k / W, col = k - slot * W;
        m = fmaxf(m, fabsf(base[slot * pitch_el + col]));
    }
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0)
        atomicMax(maxabs + r, __float_as_uint(m));
}

__global__ void half_scale_kernel(const unsigned *maxabs, int nrows, float *scale)
{
    const int r = threadIdx.x;
    if (r >= TL_CUDA_MAX_NV)
        return;
    const float m = __uint_as_float(maxabs[r < nrows ? r : nrows - 1]);
    scale[r] = m > 0.f && isfinite(m) ? TL_CUDA_HALF_PEAK / m : 1.f;
}

tl_status tl_cuda_half_scales(tl_cuda_state *s, const tl_cuda_batch *b, size_t nproj)
{
    (void)nproj; /* the whole window: an upper bound whatever slots the job uses */
    TL_CUDA(s->eb, cudaMemsetAsync(s->d_maxabs, 0, TL_CUDA_MAX_NV * sizeof(unsigned), s->stream));
    size_t total = (size_t)s->n * s->cols;
    unsigned gx = (unsigned)((total + SCALE_BLOCK - 1) / SCALE_BLOCK);
    if (gx > SCALE_GRID_MAX)
        gx = SCALE_GRID_MAX;
    half_maxabs_kernel<<<dim3(gx, (unsigned)b->nz), SCALE_BLOCK, 0, s->stream>>>(
        tl_cuda_batch_rows(s, b), b->nz, s->pitch_el, (int)s->cols, (int)s->n, s->d_maxabs);
    TL_CUDA_LAUNCHED(s->eb, "half_maxabs_kernel");
    half_scale_kernel<<<1, TL_CUDA_MAX_NV, 0, s->stream>>>(s->d_maxabs, b->nz, s->d_scale);
    TL_CUDA_LAUNCHED(s->eb, "half_scale_kernel");
    return TL_OK;
}

/* The largest SM id + 1 the device reports (%nsmid): the hybrids' ticket array must cover
 * every %smid, which may exceed the SM count (ARCHITECTURE.md §7.3). */
__global__ void nsmid_kernel(int *out)
{
    unsigned v;
    asm volatile("mov.u32 %0, %%nsmid;" : "=r"(v));
    *out = (int)v;
}

tl_status tl_cuda_bp_create(tl_cuda_state *s)
{
    TL_TRY(tl_cuda_alloc(s, (void **)&s->d_maxabs, TL_CUDA_MAX_NV * sizeof(unsigned),
                         "16-bit scales"));
    TL_TRY(
        tl_cuda_alloc(s, (void **)&s->d_scale, TL_CUDA_MAX_NV * sizeof(float), "16-bit scales"));
    /* probe %nsmid into the output buffer (free in create) */
    nsmid_kernel<<<1, 1, 0, s->stream>>>((int *)s->out);
    TL_CUDA_LAUNCHED(s->eb, "nsmid_kernel");
    int nsmid = 0;
    TL_CUDA(s->eb,
            cudaMemcpyAsync(&nsmid, s->out, sizeof nsmid, cudaMemcpyDeviceToHost, s->stream));
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    if (nsmid < 1 || nsmid > 65536)
        return tl_fail(s->eb, TL_EDEVICE, "the device reports %%nsmid = %d", nsmid);
    s->nsmid = nsmid;
    TL_TRY(tl_cuda_alloc(s, (void **)&s->d_tickets, (size_t)nsmid * sizeof(unsigned),
                         "hybrid tickets"));
    TL_CUDA(s->eb, cudaMemsetAsync(s->d_tickets, 0, (size_t)nsmid * sizeof(unsigned), s->stream));
    return TL_OK;
}
