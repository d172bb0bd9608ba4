/* iterative.cuh — what the CUDA backend's two iterative pairs share: the parallel-beam one
 * (iterative.cu) and the cone-beam one (iterative_cone.cu). Reductions into double sums
 * and float extremes (as order-keeping integer keys), and the element-wise passes of the
 * method (backend.h, tl_it_rule), which see measurements as views of view_len values.
 */
#ifndef TL_CUDA_ITERATIVE_CUH
#define TL_CUDA_ITERATIVE_CUH

#include <string.h>

#include "gpu/cuda/cuda_state.cuh"

#define IT_BLOCK 256 /* threads per block of the 1-D kernels */

/* Where the element-wise passes below run: a stream, and where its failures are told (the
 * engine's own, or one device's of a problem spread over several: iterative_cone.cu). */
typedef struct {
    cudaStream_t stream;
    tl_errbuf *eb;
} tl_cuda_queue;

static inline tl_cuda_queue tl_cuda_queue_of(const tl_cuda_state *s)
{
    return tl_cuda_queue{s->stream, s->eb};
}

/* Adds a block's values into *out (double): one atomic per block. Every thread of the
 * block calls it. */
static __device__ __forceinline__ void block_sum(double v, double *out)
{
    __shared__ double part[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = (threadIdx.y * blockDim.x + threadIdx.x) & 31;
    int warp = (threadIdx.y * blockDim.x + threadIdx.x) >> 5;
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    int nwarps = (blockDim.x * blockDim.y + 31) >> 5;
    if (warp == 0) {
        v = lane < nwarps ? part[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0)
            atomicAdd(out, v);
    }
}

/* Combines a warp's keys into *out, the least (MIN) or the greatest: one atomic per warp.
 * Every lane of a full warp calls it. */
template <bool MIN> static __device__ __forceinline__ void warp_extreme(unsigned v, unsigned *out)
{
    for (int o = 16; o > 0; o >>= 1) {
        unsigned w = __shfl_down_sync(0xffffffffu, v, o);
        v = MIN ? min(v, w) : max(v, w);
    }
    if ((threadIdx.x & 31) == 0) {
        if (MIN)
            atomicMin(out, v);
        else
            atomicMax(out, v);
    }
}

/* A float's bits as a key that orders as the floats do (negative ones too), and back. */
static __host__ __device__ __forceinline__ unsigned float_key(unsigned bits)
{
    return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}
static inline float key_float(unsigned key)
{
    unsigned bits = key & 0x80000000u ? key & 0x7fffffffu : ~key;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Blocks of IT_BLOCK threads for n elements. */
unsigned tl_cuda_it_blocks(size_t n);
/* The rule on subset v's measurements (view_len each): r = R (b - ax) (SART), b / ax (EM)
 * or nothing (RESIDUAL), and the sum of (b - ax)^2 added into *sums (NULL: not wanted). */
tl_status tl_cuda_it_rule(tl_cuda_queue q, uint32_t view_len, tl_it_views v, tl_it_rule rule,
                          const float *b, const float *ax, const float *R, float *r, double *sums);
/* The two double sums at device address sums, after the work queued so far (waits). */
tl_status tl_cuda_it_read_sums(tl_cuda_queue q, const double *sums, double out[2]);
/* v = 1 / v where v > 0, else 0. */
tl_status tl_cuda_it_invert(tl_cuda_queue q, float *v, size_t n);
/* x = max(x, 0) where nonneg; with moved (the TV steps to come) the sum of (x - mark)^2
 * added into *moved and max |x|'s bits combined into *amax (floats >= 0 order as their
 * bits). */
tl_status tl_cuda_it_clamp(tl_cuda_queue q, float *x, const float *mark, size_t n, bool nonneg,
                           double *moved, unsigned *amax);
/* x -= scale g: one TV step. */
tl_status tl_cuda_it_tv_step(tl_cuda_queue q, float *x, const float *g, size_t n, float scale);

#endif
