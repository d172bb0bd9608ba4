/* bp_hybrid.cu — texture and ALU blocks sharing the card: Chilingaryan et al. 2020, J.
 * Real-Time Image Proc. 17:1331, Sect. 7.1 (ARCHITECTURE.md §5, H1). Quality mode
 * `fast` (texture blocks carry the texture unit's 8-bit weights).
 *
 * The ALU kernels leave the texture units idle and the texture kernel leaves most of the
 * ALUs and shared memory idle, so each block of a hybrid launch takes one path or the
 * other: thread 0 reads the SM it runs on (%smid), takes a ticket from that SM's counter
 * (atomicAdd) and takes the texture path for T of every T + A tickets. The counters are
 * sized by %nsmid (bp_state.cu; the paper's 128 is too small for an H100's 132 SMs) and,
 * unlike the paper's, reset before every launch, so every launch splits the same way (the
 * first T of each T + A blocks an SM receives take the texture path) instead of depending
 * on how many blocks earlier launches left behind. Which tile lands on which SM is still
 * the hardware's choice: a tile's values are exactly tex-std's or exactly those of
 * alu-fr/t64q16s8, and which of the two may change from call to call (within `fast`).
 *
 * Both paths cover a 64 x 64 tile with 64 x 4 threads of 16 pixels each. The ALU path is
 * alu-fr/t64q16s8's block (bp_alu.cuh); the texture path computes every pixel exactly as
 * tex-std does (same u, same fetch, same order of accumulation), so each tile of a hybrid
 * result equals, bit for bit, the same tile of tex-std or of alu-fr/t64q16s8 — which is how
 * tests see which path computed it (AC-8). Per-projection constants come from global
 * memory (cached, warp-uniform), not __constant__, so windows of any length need one launch.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include "gpu/cuda/bp_alu.cuh"

#define HYB_TILE 64
#define HYB_TY 4                   /* threads per tile column: 64 x 4 = 256 */
#define HYB_NQ (HYB_TILE / HYB_TY) /* pixels per thread */
#define HYB_SD 8                   /* the ALU path's projections per pass */

__device__ __forceinline__ void hyb_tex_block(cudaTextureObject_t tex, const tl_cuda_geom &g,
                                              const float4 *__restrict__ par,
                                              const float *__restrict__ texy, int nproj,
                                              float xoff, float *out, int bx, int by)
{
    const int j = bx * HYB_TILE + threadIdx.x, i0 = by * HYB_TILE + threadIdx.y;
    float x[HYB_NQ], y[HYB_NQ], acc[HYB_NQ];
#pragma unroll
    for (int q = 0; q < HYB_NQ; q++) {
        x[q] = tl_geom_x(g, i0 + q * HYB_TY, j);
        y[q] = tl_geom_y(g, i0 + q * HYB_TY, j);
        acc[q] = 0.f;
    }
    for (int p = 0; p < nproj; p++) {
        const float4 q = __ldg(par + p);
        const float r = __ldg(texy + p);
#pragma unroll
        for (int k = 0; k < HYB_NQ; k++)
            acc[k] = fmaf(q.w, tex2D<float>(tex, tl_ray_u(x[k], y[k], q) + xoff, r), acc[k]);
    }
    if (j >= g.w)
        return;
#pragma unroll
    for (int q = 0; q < HYB_NQ; q++)
        if (i0 + q * HYB_TY < g.h)
            out[(size_t)(i0 + q * HYB_TY) * g.w + j] = acc[q];
}

template <int T, int A>
__global__ void __launch_bounds__(HYB_TILE *HYB_TY)
    bp_hyb_kernel(cudaTextureObject_t tex, tl_cuda_rows rows, size_t pitch_el, int W,
                  const float4 *__restrict__ par, const int *__restrict__ slot,
                  const float *__restrict__ texy, int nproj, tl_cuda_geom g, int cw, float xoff,
                  float *out, unsigned *tickets, int nsmid)
{
    extern __shared__ __align__(16) char hyb_smem[];
    __shared__ int s_tex;
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        const unsigned t = atomicAdd(tickets + sm % (unsigned)nsmid, 1u);
        s_tex = t % (T + A) < T;
    }
    __syncthreads();
    if (s_tex) {
        hyb_tex_block(tex, g, par, texy, nproj, xoff, out, blockIdx.x, blockIdx.y);
    } else {
        alu_outs outs;
        for (int v = 0; v < TL_CUDA_MAX_NV; v++)
            outs.o[v] = out;
        alu_block<1, HYB_TILE, HYB_TY, HYB_SD, CELL_F32>(rows, pitch_el, W, par, slot, nproj, g,
                                                         cw, NULL, outs, 1, blockIdx.x, blockIdx.y,
                                                         hyb_smem);
    }
}

template <int T, int A>
static tl_status hyb_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_cuda_batch *b,
                            size_t nproj)
{
    if (!s->tex_ok || b->z[0] >= s->ntex)
        return tl_fail(s->eb, TL_EINTERNAL, "%s used without textures: %s", k->name, s->tex_why);
    const dim3 block(HYB_TILE, HYB_TY);
    const dim3 grid((unsigned)((b->g.w + HYB_TILE - 1) / HYB_TILE),
                    (unsigned)((b->g.h + HYB_TILE - 1) / HYB_TILE));
    const size_t shmem = (size_t)HYB_SD * b->cache_width * sizeof(alu_cell<1, CELL_F32>);
    TL_CUDA(s->eb,
            cudaMemsetAsync(s->d_tickets, 0, (size_t)s->nsmid * sizeof(unsigned), s->stream));
    bp_hyb_kernel<T, A>
        <<<grid, block, shmem, s->stream>>>(s->tex[b->z[0]], tl_cuda_batch_rows(s, b), s->pitch_el,
                                            (int)s->cols, s->d_par, s->d_slot, s->d_texy,
                                            (int)nproj, b->g, b->cache_width, s->tex_xoff,
                                            b->out[0], s->d_tickets, s->nsmid);
    TL_CUDA_LAUNCHED(s->eb, "bp_hyb_kernel");
    return TL_OK;
}

#define HYB(NAME, T, A, PARAMS)                                                           \
    {                                                                                     \
        NAME, TL_QUALITY_FAST, 1, TL_KF_HYB, PARAMS, HYB_TILE,                            \
            (int)(ALU_SMEM_MAX / (HYB_SD * sizeof(alu_cell<1, CELL_F32>))), false, false, \
            hyb_launch<T, A>                                                              \
    }

const tl_cuda_kernel tl_cuda_hyb_kernels[] = {
    HYB("hyb/1:2", 1, 2, "1 texture block per 2 ALU blocks (alu-fr/t64q16s8), per SM"),
    HYB("hyb/1:3", 1, 3, "1 texture block per 3 ALU blocks (alu-fr/t64q16s8), per SM"),
    HYB("hyb/1:5", 1, 5, "1 texture block per 5 ALU blocks (alu-fr/t64q16s8), per SM"),
};
const int tl_cuda_hyb_nkernels = sizeof tl_cuda_hyb_kernels / sizeof *tl_cuda_hyb_kernels;
