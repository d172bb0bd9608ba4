/* iterative_sweep.cu — one whole SART iteration of a parallel-beam slice in one launch
 * (SART: A. H. Andersen, A. C. Kak, Ultrasonic Imaging 6:81-94, 1984; a subset per view,
 * the views in turn; gpu/iterative_ref.h gives the update).
 *
 * Why: each view's forward pass needs the image the previous view's update left, so an
 * iteration is 2 x views dependent passes. As kernels (iterative.cu: four launches per
 * view, each too small to fill the GPU) a 2048^2 slice from 2048 views takes 138 ms on an
 * H200, ~25x its FBP: launches, and the GPU filling and draining between them; this sweep
 * takes 40 ms (BENCHMARKS.md section 8 says where those go).
 *
 * Here one cooperative launch sweeps every view. The image stays on chip: tiles of it, one
 * per block (one block per SM), in shared memory. For each view every block
 *   1. scatters its tile's share of A x (the matched pair: the transpose of interpolation
 *      between two bins, pixel_u's weights) into shared accumulators of the bins its tile
 *      reaches (one per warp: SWEEP_DU_MIN), and adds them into the view's row of A x in
 *      global memory;
 *   2. waits at one grid barrier for every block's share;
 *   3. reads the view's correction r = R (b - A x) for its bins into shared memory and
 *      updates its tile, x += lambda (A_v^T r) / (A_v^T 1), as iterative.cu's backward pass;
 * and step 3 of one view runs in the same pass over the tile as step 1 of the next. One
 * grid barrier per view; only rows of bins leave the chip. A warp's lanes walk the tile
 * along the axis on which the view's u changes faster, so that they add into different
 * bins (lanes_along_i: along the other axis all 32 could hit one bin).
 *
 * The weights and their rounding are pixel_u's, as in the per-view passes; the order in
 * which a bin's forward sum is added up differs, and the update skips the division by
 * the weights' sum where it is (1 - f) + f (a rounding's worth each).
 * Eligible: the matched projector, and a slice whose tiles fit the blocks that can be
 * resident at once, each in the shared memory a block may have (2048^2 fits an H100 or
 * H200: 132 tiles of about 32,800 pixels). Otherwise *swept is false and the per-view
 * passes run (tl_iterative_run).
 */
#include "config.h"

#include <cooperative_groups.h>
#include <limits.h>
#include <math.h>

#include "gpu/cuda/check.cuh"
#include "gpu/cuda/iterative_slice.cuh"

namespace cg = cooperative_groups;

#define SWEEP_TX 32 /* threads per block: 32 x 32 (a warp per row of threads), one per SM */
#define SWEEP_TY 32
#define SWEEP_TILE_W_MAX 1024 /* tile widths tried: multiples of SWEEP_TX up to this */
/* Bins a tile's accumulator holds beyond the span of its pixels' u: the second tap, a
 * bin each side for the rounding of pixel_u at the corners, and one spare. */
#define SWEEP_BIN_SLACK 4
/* A warp adds its pixels' shares into an accumulator of its own with plain adds, in two
 * rounds (every lane's first bin, then its second), its lanes neighbouring pixels along
 * the axis on which u moves by SWEEP_DU_MIN or more per pixel: then at most two
 * neighbouring lanes share a bin in a round, and the first of them adds both shares.
 * (Atomic adds of floats to shared memory are compare-and-swap loops: twice the time of
 * the whole sweep, measured.) SWEEP_DU_MIN leaves room for pixel_u's rounding. */
#define SWEEP_DU_MIN 0.67f

/* A tiling of the slice: tiles of th x tw pixels, tiles_x across, one per block, and the
 * bins (nb) a tile's u can reach in any view. */
typedef struct {
    int tw, th, tiles_x, tiles, nb;
    size_t smem; /* bytes of shared memory per block */
} sweep_tiling;

/* A tile's rows in shared memory are tw + 1 floats apart, so that a warp walking down a
 * column (lanes along i) reads 32 banks, not one. */
__host__ __device__ __forceinline__ int tile_stride(int tw)
{
    return tw + 1;
}

/* Shared memory of a block: the tile, its warps' accumulators, the correction's bins. */
__host__ __device__ __forceinline__ size_t sweep_smem(int th, int tw, int nb)
{
    return ((size_t)th * tile_stride(tw) + (size_t)(SWEEP_TY + 1) * nb) * sizeof(float);
}

/* Whether a warp's lanes walk along i (down a column) in view v: along the axis on which u
 * changes faster, so that neighbouring lanes add into different bins. */
__device__ __forceinline__ bool lanes_along_i(const it_view &v)
{
    return fabsf(v.du_i) > fabsf(v.du_j);
}

/* The first bin of a tile's accumulator in view v: below its corners' least u. */
__device__ __forceinline__ int tile_base(const it_view &v, float i0, float j0, float i1, float j1)
{
    float a = pixel_u(v, i0, j0), b = pixel_u(v, i1, j0), c = pixel_u(v, i0, j1),
          d = pixel_u(v, i1, j1);
    return (int)floorf(fminf(fminf(a, b), fminf(c, d))) - 1;
}

/* Adds w into acc[bin - base] for each lane that `has` a share: a lane whose left
 * neighbour has the same bin leaves its w to that neighbour, which adds both (no two lanes
 * write one bin). Every lane of the warp calls it. */
__device__ __forceinline__ void add_round(float *acc, int base, bool has, int bin, float w)
{
    const unsigned all = 0xffffffffu;
    const int lane = (int)threadIdx.x;
    bin = has ? bin : INT_MIN + lane; /* a bin of nobody's, to compare with */
    const int left = __shfl_up_sync(all, bin, 1), right = __shfl_down_sync(all, bin, 1);
    const float w_right = __shfl_down_sync(all, w, 1);
    if (!has || (lane > 0 && left == bin))
        return;
    acc[bin - base] += w + (lane < SWEEP_TX - 1 && right == bin ? w_right : 0.0f);
}

/* Adds pixel value xv's share of view v's forward pass into the warp's accumulator acc
 * (bins from base). Every lane of the warp calls it; `on`: this lane has a pixel. */
__device__ __forceinline__ void scatter(const it_view &v, int cols, float fi, float fj, float xv,
                                        bool on, float *acc, int base)
{
    const float u = pixel_u(v, fi, fj);
    on = on && u > -1.0f && u < (float)cols;
    const float fl = floorf(u), f = u - fl;
    const int b0 = (int)fl;
    add_round(acc, base, on && b0 >= 0, b0, (1.0f - f) * xv);
    __syncwarp();
    add_round(acc, base, on && b0 + 1 < cols, b0 + 1, f * xv);
    __syncwarp();
}

/* Adds the warps' accumulators (SWEEP_TY rows of nb) into view k's row of A x, and zeroes
 * them for the next view. */
__device__ __forceinline__ void flush(float *accw, int nb, int base, int cols, float *ax_row,
                                      int tid, int nthreads)
{
    for (int t = tid; t < nb; t += nthreads) {
        float sum = 0.0f;
        for (int w = 0; w < SWEEP_TY; w++) {
            sum += accw[w * nb + t];
            accw[w * nb + t] = 0.0f;
        }
        int bin = base + t;
        if (bin >= 0 && bin < cols && sum != 0.0f)
            atomicAdd(&ax_row[bin], sum);
    }
}

__global__ void __launch_bounds__(SWEEP_TX *SWEEP_TY)
    sart_sweep_kernel(it_grid g, const it_view *__restrict__ views, uint32_t nproj,
                      sweep_tiling tl, float lambda, const float *__restrict__ b,
                      const float *__restrict__ R, float *ax, float *x)
{
    extern __shared__ float smem[];
    const int ts = tile_stride(tl.tw);
    float *xs = smem, *accw = xs + (size_t)tl.th * ts, *rs = accw + (size_t)SWEEP_TY * tl.nb;
    float *acc = accw + threadIdx.y * tl.nb; /* this warp's */
    cg::grid_group grid = cg::this_grid();
    const int cols = (int)g.cols;
    const int i0 = (int)(blockIdx.x / tl.tiles_x) * tl.th,
              j0 = (int)(blockIdx.x % tl.tiles_x) * tl.tw;
    const int ih = min(tl.th, (int)g.h - i0), jw = min(tl.tw, (int)g.w - j0);
    const float fi0 = (float)i0, fj0 = (float)j0, fi1 = (float)(i0 + ih - 1),
                fj1 = (float)(j0 + jw - 1);
    const int tid = threadIdx.y * SWEEP_TX + threadIdx.x, nthreads = SWEEP_TX * SWEEP_TY;

    /* the tile on chip, view 0's forward share */
    for (int t = tid; t < SWEEP_TY * tl.nb; t += nthreads)
        accw[t] = 0.0f;
    for (int a = threadIdx.y; a < ih; a += SWEEP_TY)
        for (int c = threadIdx.x; c < jw; c += SWEEP_TX)
            xs[a * ts + c] = x[(size_t)(i0 + a) * g.w + j0 + c];
    it_view v = views[0];
    int base = tile_base(v, fi0, fj0, fi1, fj1);
    bool by_i = lanes_along_i(v);
    __syncthreads();
    /* a warp per row (or column: by_i) of the tile, its lanes along it; every lane runs the
     * same rounds (scatter's), `on` those with a pixel */
    for (int o = threadIdx.y; o < (by_i ? jw : ih); o += SWEEP_TY)
        for (int in0 = 0; in0 < (by_i ? ih : jw); in0 += SWEEP_TX) {
            const int in = in0 + (int)threadIdx.x, a = by_i ? in : o, c = by_i ? o : in;
            const bool on = in < (by_i ? ih : jw);
            scatter(v, cols, (float)(i0 + a), (float)(j0 + c), on ? xs[a * ts + c] : 0.0f, on, acc,
                    base);
        }
    __syncthreads();
    flush(accw, tl.nb, base, cols, ax, tid, nthreads);

    for (uint32_t k = 0; k < nproj; k++) {
        grid.sync(); /* view k's A x is whole */
        const float *bk = b + (size_t)k * cols, *Rk = R + (size_t)k * cols;
        const float *axk = ax + (size_t)k * cols;
        for (int t = tid; t < tl.nb; t += nthreads) {
            int bin = base + t;
            /* __ldcg: past L1, which may hold a line of this row from the last view's
             * reads (other blocks' atomics since went to L2) */
            rs[t] = bin >= 0 && bin < cols ? Rk[bin] * (bk[bin] - __ldcg(&axk[bin])) : 0.0f;
        }
        const bool more = k + 1 < nproj;
        const it_view next = more ? views[k + 1] : v;
        const int next_base = tile_base(next, fi0, fj0, fi1, fj1);
        by_i = lanes_along_i(next); /* for the next view's scatter; the update is any order */
        __syncthreads();
        for (int o = threadIdx.y; o < (by_i ? jw : ih); o += SWEEP_TY)
            for (int in0 = 0; in0 < (by_i ? ih : jw); in0 += SWEEP_TX) {
                const int in = in0 + (int)threadIdx.x, a = by_i ? in : o, c = by_i ? o : in;
                const bool on = in < (by_i ? ih : jw);
                const float fi = (float)(i0 + a), fj = (float)(j0 + c);
                float xv = 0.0f;
                const float u = pixel_u(v, fi, fj);
                if (on) {
                    xv = xs[a * ts + c];
                    if (u > -1.0f && u < (float)cols) { /* view k's update, as backward_kernel */
                        const float fl = floorf(u), f = u - fl;
                        const int b0 = (int)fl;
                        float step;
                        if (b0 >= 0 && b0 + 1 < cols) /* both bins: their weights sum to 1 */
                            step = (1.0f - f) * rs[b0 - base] + f * rs[b0 + 1 - base];
                        else /* one bin: the weighted sum over its weight is its value */
                            step = rs[(b0 >= 0 ? b0 : b0 + 1) - base];
                        xv += lambda * step;
                        xs[a * ts + c] = xv;
                    }
                }
                if (more)
                    scatter(next, cols, fi, fj, xv, on, acc, next_base);
            }
        __syncthreads();
        if (more)
            flush(accw, tl.nb, next_base, cols, ax + (size_t)(k + 1) * cols, tid, nthreads);
        v = next;
        base = next_base;
    }
    for (int a = threadIdx.y; a < ih; a += SWEEP_TY)
        for (int c = threadIdx.x; c < jw; c += SWEEP_TX)
            x[(size_t)(i0 + a) * g.w + j0 + c] = xs[a * ts + c];
}

/* The tiling with the smallest tiles (the most even load) whose count fits `blocks` and
 * whose shared memory fits `smem_max`; false when none does. du: the largest |du_i| and
 * |du_j| over the views (how many bins a pixel step moves u). */
static bool plan_tiles(const it_grid &g, int blocks, size_t smem_max, const float du[2],
                       sweep_tiling *out)
{
    bool found = false;
    for (int tw = SWEEP_TX; tw <= SWEEP_TILE_W_MAX && tw < (int)g.w + SWEEP_TX; tw += SWEEP_TX) {
        int tiles_x = ((int)g.w + tw - 1) / tw, tiles_y_max = blocks / tiles_x;
        if (tiles_y_max == 0)
            break;
        int th = ((int)g.h + tiles_y_max - 1) / tiles_y_max;
        int tiles_y = ((int)g.h + th - 1) / th;
        int nb = (int)ceilf(du[0] * (float)(th - 1) + du[1] * (float)(tw - 1)) + SWEEP_BIN_SLACK;
        size_t smem = sweep_smem(th, tw, nb);
        if (smem > smem_max || (found && (size_t)th * tw >= (size_t)out->th * out->tw))
            continue;
        *out = (sweep_tiling){tw, th, tiles_x, tiles_x * tiles_y, nb, smem};
        found = true;
    }
    return found;
}

tl_status tl_cuda_it_sweep(tl_cuda_state *s, double lambda, bool *swept)
{
    *swept = false;
    tl_cuda_iter *it = s->it;
    if (it->projector != TL_PROJECTOR_MATCHED || it->nproj == 0 ||
        !(it->du_fast_min >= SWEEP_DU_MIN))
        return TL_OK; /* (a pixel much smaller than a bin: the rounds would overlap) */
    int coop = 0, sms = 0, smem_optin = 0;
    TL_CUDA(s->eb, cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, s->device));
    TL_CUDA(s->eb, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, s->device));
    TL_CUDA(s->eb, cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                          s->device));
    sweep_tiling tl;
    if (!coop || !plan_tiles(it->grid, sms, (size_t)smem_optin, it->du_max, &tl))
        return TL_OK;
    TL_CUDA(s->eb,
            cudaFuncSetAttribute(sart_sweep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)tl.smem));
    int per_sm = 0;
    TL_CUDA(s->eb, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sart_sweep_kernel,
                                                                 SWEEP_TX * SWEEP_TY, tl.smem));
    if (per_sm < 1 || tl.tiles > per_sm * sms)
        return TL_OK; /* registers: the block does not fit an SM after all */
    const size_t row_bytes = (size_t)it->nproj * it->grid.cols * sizeof(float);
    TL_CUDA(s->eb, cudaMemsetAsync(it->ax, 0, row_bytes, s->stream)); /* the shares add up */
    it_grid g = it->grid;
    const it_view *views = it->views;
    uint32_t nproj = it->nproj;
    float lam = (float)lambda;
    const float *b = it->b, *R = it->R;
    float *ax = it->ax, *x = it->x;
    void *args[] = {&g, &views, &nproj, &tl, &lam, &b, &R, &ax, &x};
    TL_CUDA(s->eb,
            cudaLaunchCooperativeKernel((const void *)sart_sweep_kernel, dim3(tl.tiles),
                                        dim3(SWEEP_TX, SWEEP_TY), args, tl.smem, s->stream));
    *swept = true;
    return TL_OK;
}
