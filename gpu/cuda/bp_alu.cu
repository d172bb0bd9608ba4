/* bp_alu.cu — the ALU / shared-memory back-projection family of Chilingaryan et al.
 * 2020, J. Real-Time Image Proc. 17:1331, Sect. 6 (ARCHITECTURE.md §5). A block owns a
 * square tile of pixels; projections are taken a few at a time in two phases separated
 * by barriers:
 *   1. cache: per projection, the bins the tile can touch, from one bin below the lowest
 *      (floor of the least u over the tile's corners, minus 1) onwards, are copied from
 *      the sinogram rows into shared memory, zero outside the detector (the engine's rule);
 *   2. compute: every thread interpolates its pixels from the cache with the ALUs into
 *      register accumulators.
 * The cache width comes from the host (tl_cuda_cache_width: the tile's span in bins for
 * the job's angles, plus margins), so a tile never reads outside its cache.
 *
 * Kernels (name: family/t<tile>q<pixels per thread>s<projections per pass>):
 *   alu-exact      Alg. 6 as published (A1): 32x32 tiles, 4 pixels per thread, values
 *                  cached, floorf and float->int per update. The baseline of the family.
 *   alu-fr/...     A3 + A4 + A6, reworked for an issue-bound card: each cached bin holds
 *                  (a', d), weight folded in, such that a pixel at cache offset h reads one
 *                  64-bit cell and adds  a' + (h - c0) d  (an add and an FMA; bp_alu.cuh);
 *                  the cell's index comes from the bits of one FADD rounded down
 *                  (fround.h) instead of floorf + float->int, which run at 16 per clock
 *                  per SM on an H100 against 128 FP32 adds (ARCHITECTURE.md §4.3;
 *                  `tomolive tune` prints the measured rates); h along a thread's
 *                  column by one FMA per pixel. Six instructions per update. `exact`.
 *   alu2-fr/...    the same for 2 slices: a cell is float4 (a'0, a'1, d0, d1), one 128-bit
 *                  load per 2 updates; the index arithmetic is shared. `exact`.
 *   alu4-fr/...    4 slices, two float4 per cell. `exact`.
 *   alu4h/...      4 slices in 16-bit (A5 + half arithmetic, which the H100 runs at twice
 *                  the FP32 rate): a cell is (a0..a3, d0..d3) in half = one 128-bit load
 *                  per 4 updates; interpolation a + f d by two HFMA2, partial sums in half2
 *                  over one pass of s projections, then added to float accumulators. Values
 *                  are scaled per sinogram (bp_state.cu) so the largest weighted value is
 *                  2^10: far from half's overflow (65504) and underflow. `fast`.
 * Accumulation order differs between kernels, not the position of a pixel on the
 * detector beyond float rounding, so all exact kernels agree to ~1e-6.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include <math.h>

#include "gpu/cuda/bp_alu.cuh"

/* ---- alu-exact: Alg. 6 as published --------------------------------------------------- */

#define A1_TILE 32                     /* n_s: tile side in pixels */
#define A1_THREADS_Y 8                 /* threads per tile column */
#define A1_NQ (A1_TILE / A1_THREADS_Y) /* n_q: pixels per thread */
#define A1_THREADS (A1_TILE * A1_THREADS_Y)
#define A1_SD 16         /* s_d: projections cached per round */
#define A1_MAX_CACHE 512 /* bins: 16 x 512 x 4 B = 32 KiB of shared memory */

__global__ void __launch_bounds__(A1_THREADS)
    bp_alu_a1_kernel(const float *__restrict__ sino, size_t pitch_el, int W,
                     const float4 *__restrict__ par, const int *__restrict__ slot, int nproj,
                     tl_cuda_geom g, int cw, float *__restrict__ out)
{
    extern __shared__ float cache[];      /* [A1_SD][cw] */
    __shared__ float4 s_par[A1_SD];       /* cos, sin, centre, weight */
    __shared__ float s_first[A1_SD];      /* bin of cache column 0 (an integer) */
    __shared__ const float *s_row[A1_SD]; /* the projection's sinogram row */

    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * A1_TILE + tx;
    const int j0 = blockIdx.x * A1_TILE, i0 = blockIdx.y * A1_TILE;
    const int j = j0 + tx;
    float x[A1_NQ], y[A1_NQ], acc[A1_NQ];
#pragma unroll
    for (int q = 0; q < A1_NQ; q++) {
        const int i = i0 + ty + q * A1_THREADS_Y;
        x[q] = tl_geom_x(g, i, j);
        y[q] = tl_geom_y(g, i, j);
        acc[q] = 0.f;
    }

    for (int pb = 0; pb < nproj; pb += A1_SD) {
        const int nb = nproj - pb < A1_SD ? nproj - pb : A1_SD;
        if (tid < nb) { /* per projection, the first bin the tile needs */
            const float4 q = par[pb + tid];
            const int i1 = i0 + A1_TILE - 1, j1 = j0 + A1_TILE - 1;
            const float u00 = tl_ray_u(tl_geom_x(g, i0, j0), tl_geom_y(g, i0, j0), q);
            const float u01 = tl_ray_u(tl_geom_x(g, i0, j1), tl_geom_y(g, i0, j1), q);
            const float u10 = tl_ray_u(tl_geom_x(g, i1, j0), tl_geom_y(g, i1, j0), q);
            const float u11 = tl_ray_u(tl_geom_x(g, i1, j1), tl_geom_y(g, i1, j1), q);
            const float umin = fminf(fminf(u00, u01), fminf(u10, u11));
            s_par[tid] = q;
            s_first[tid] = fminf(fmaxf(floorf(umin) - 1.f, -ALU_FAR), ALU_FAR);
            s_row[tid] = sino + (size_t)slot[pb + tid] * pitch_el;
        }
        __syncthreads();
        for (int k = tid; k < nb * cw; k += A1_THREADS) { /* the bins, coalesced */
            const int pp = k / cw, bin = (int)s_first[pp] + (k - pp * cw);
            cache[k] = bin >= 0 && bin < W ? s_row[pp][bin] : 0.f;
        }
        __syncthreads();
        for (int pi = 0; pi < nb; pi++) { /* exact linear interpolation from the cache */
            const float4 q = s_par[pi];
            const float first = s_first[pi], last = (float)(cw - 2);
            const float *c = cache + pi * cw;
#pragma unroll
            for (int k = 0; k < A1_NQ; k++) {
                const float u = tl_ray_u(x[k], y[k], q);
                const float fl = floorf(u);
                const int idx = (int)fminf(fmaxf(fl - first, 0.f), last);
                acc[k] = fmaf(q.w, tl_lerp(c[idx], c[idx + 1], u - fl), acc[k]);
            }
        }
        __syncthreads(); /* the cache is refilled next round */
    }

    if (j >= g.w)
        return;
#pragma unroll
    for (int q = 0; q < A1_NQ; q++) {
        const int i = i0 + ty + q * A1_THREADS_Y;
        if (i < g.h)
            out[(size_t)i * g.w + j] = acc[q];
    }
}

static tl_status a1_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_cuda_batch *b,
                           size_t nproj)
{
    const dim3 block(A1_TILE, A1_THREADS_Y);
    const dim3 grid((unsigned)((b->g.w + A1_TILE - 1) / A1_TILE),
                    (unsigned)((b->g.h + A1_TILE - 1) / A1_TILE));
    const size_t shmem = (size_t)A1_SD * b->cache_width * sizeof(float);
    bp_alu_a1_kernel<<<grid, block, shmem, s->stream>>>(s->window + (size_t)b->z[0] * s->slab_el,
                                                        s->pitch_el, (int)s->cols, s->d_par,
                                                        s->d_slot, (int)nproj, b->g,
                                                        b->cache_width, b->out[0]);
    TL_CUDA_LAUNCHED(s->eb, "bp_alu_a1_kernel");
    return TL_OK;
}

/* ---- the FP-rounding family (the block is in bp_alu.cuh) ------------------------------- */

/* One and two slices: at least 1024 threads per SM (64 registers each), which ptxas
 * otherwise undercuts with a spill. */
#define FR_MIN_BLOCKS(NV, NT) (1024 / (NT))

template <int NV, int TILE, int TY, int SD, int PREC>
__global__ void __launch_bounds__(TILE *TY, FR_MIN_BLOCKS(NV, TILE *TY))
    bp_alu_fr_kernel(tl_cuda_rows rows, size_t pitch_el, int W, const float4 *__restrict__ par,
                     const int *__restrict__ slot, int nproj, tl_cuda_geom g, int cw,
                     const float *scale, alu_outs outs, int nz)
{
    extern __shared__ __align__(16) char alu_smem[];
    alu_block<NV, TILE, TY, SD, PREC>(rows, pitch_el, W, par, slot, nproj, g, cw, scale, outs, nz,
                                      blockIdx.x, blockIdx.y, alu_smem);
}

template <int NV, int TILE, int TY, int SD, int PREC>
static tl_status fr_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_cuda_batch *b,
                           size_t nproj)
{
    if (PREC == CELL_F16)
        TL_TRY(tl_cuda_half_scales(s, b, nproj));
    alu_outs outs;
    for (int v = 0; v < TL_CUDA_MAX_NV; v++)
        outs.o[v] = b->out[v < b->nz ? v : 0];
    const dim3 block(TILE, TY);
    const dim3 grid((unsigned)((b->g.w + TILE - 1) / TILE),
                    (unsigned)((b->g.h + TILE - 1) / TILE));
    const size_t shmem = (size_t)SD * b->cache_width * sizeof(alu_cell<NV, PREC>);
    if (shmem > ALU_SMEM_MAX) /* beyond the default 48 KiB: opted in per launch (per device) */
        TL_CUDA(s->eb, cudaFuncSetAttribute(bp_alu_fr_kernel<NV, TILE, TY, SD, PREC>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)shmem));
    bp_alu_fr_kernel<NV, TILE, TY, SD, PREC>
        <<<grid, block, shmem, s->stream>>>(tl_cuda_batch_rows(s, b), s->pitch_el, (int)s->cols,
                                            s->d_par, s->d_slot, (int)nproj, b->g, b->cache_width,
                                            s->d_scale, outs, b->nz);
    TL_CUDA_LAUNCHED(s->eb, "bp_alu_fr_kernel");
    return TL_OK;
}

/* Largest cache width (bins) a kernel's shared memory (SMEM bytes) holds. */
#define FR_MAX_CACHE(NV, SD, PREC, SMEM) ((int)((SMEM) / ((SD) * sizeof(alu_cell<NV, PREC>))))

#define FR_SMEM(NAME, Q, NV, TILE, TY, SD, PREC, SMEM, PARAMS)                                 \
    {                                                                                          \
        NAME, Q, NV, TL_KF_ALU, PARAMS, TILE, FR_MAX_CACHE(NV, SD, PREC, SMEM), false, false, \
            fr_launch<NV, TILE, TY, SD, PREC>                                                  \
    }
#define FR(NAME, Q, NV, TILE, TY, SD, PREC, PARAMS) \
    FR_SMEM(NAME, Q, NV, TILE, TY, SD, PREC, ALU_SMEM_MAX, PARAMS)
/* The same with a cache beyond 48 KiB (opted in at launch). */
#define FR_BIG(NAME, Q, NV, TILE, TY, SD, PREC, PARAMS) \
    FR_SMEM(NAME, Q, NV, TILE, TY, SD, PREC, ALU_SMEM_OPTIN, PARAMS)

const tl_cuda_kernel tl_cuda_alu_kernels[] = {
    {"alu-exact", TL_QUALITY_EXACT, 1, TL_KF_ALU,
     "Alg. 6: tile 32x32, 4 px/thread, 16 proj/pass, floorf + int conversion", A1_TILE,
     A1_MAX_CACHE, false, false, a1_launch},
    FR("alu-fr/t32q4s16", TL_QUALITY_EXACT, 1, 32, 8, 16, CELL_F32,
       "tile 32x32, 4 px/thread, 16 proj/pass, (a', d) cache, FP rounding"),
    FR("alu-fr/t64q16s8", TL_QUALITY_EXACT, 1, 64, 4, 8, CELL_F32,
       "tile 64x64, 16 px/thread, 8 proj/pass, (a', d) cache, FP rounding"),
    FR("alu-fr/t64q16s16", TL_QUALITY_EXACT, 1, 64, 4, 16, CELL_F32,
       "tile 64x64, 16 px/thread, 16 proj/pass, (a', d) cache, FP rounding"),
    FR("alu-fr/t64q16s32", TL_QUALITY_EXACT, 1, 64, 4, 32, CELL_F32,
       "tile 64x64, 16 px/thread, 32 proj/pass, (a', d) cache, FP rounding"),
    FR("alu-fr/t64q8s16", TL_QUALITY_EXACT, 1, 64, 8, 16, CELL_F32,
       "tile 64x64, 8 px/thread (512 threads), 16 proj/pass, (a', d) cache, FP rounding"),
    FR("alu-fr/t64q32s16", TL_QUALITY_EXACT, 1, 64, 2, 16, CELL_F32,
       "tile 64x64, 32 px/thread (128 threads), 16 proj/pass, (a', d) cache, FP rounding"),
    FR("alu2-fr/t32q4s16", TL_QUALITY_EXACT, 2, 32, 8, 16, CELL_F32,
       "2 slices, tile 32x32, 4 px/thread, 16 proj/pass, float4 cells, FP rounding"),
    FR("alu2-fr/t64q8s8", TL_QUALITY_EXACT, 2, 64, 8, 8, CELL_F32,
       "2 slices, tile 64x64, 8 px/thread, 8 proj/pass, float4 cells, FP rounding"),
    FR("alu2-fr/t64q8s16", TL_QUALITY_EXACT, 2, 64, 8, 16, CELL_F32,
       "2 slices, tile 64x64, 8 px/thread, 16 proj/pass, float4 cells, FP rounding"),
    FR("alu4-fr/t32q4s8", TL_QUALITY_EXACT, 4, 32, 8, 8, CELL_F32,
       "4 slices, tile 32x32, 4 px/thread, 8 proj/pass, 2 float4 cells, FP rounding"),
    FR("alu4h/t32q4s16", TL_QUALITY_FAST, 4, 32, 8, 16, CELL_F16,
       "4 slices, tile 32x32, 4 px/thread, 16 proj/pass, half cells + half2 FMA"),
    FR("alu4h/t64q8s8", TL_QUALITY_FAST, 4, 64, 8, 8, CELL_F16,
       "4 slices, tile 64x64, 8 px/thread, 8 proj/pass, half cells + half2 FMA"),
    FR("alu4h/t64q8s16", TL_QUALITY_FAST, 4, 64, 8, 16, CELL_F16,
       "4 slices, tile 64x64, 8 px/thread, 16 proj/pass, half cells + half2 FMA"),
    FR_BIG("alu4h/t64q8s32", TL_QUALITY_FAST, 4, 64, 8, 32, CELL_F16,
           "4 slices, tile 64x64, 8 px/thread, 32 proj/pass (cache > 48 KiB), half cells"),
};
const int tl_cuda_alu_nkernels = sizeof tl_cuda_alu_kernels / sizeof *tl_cuda_alu_kernels;
