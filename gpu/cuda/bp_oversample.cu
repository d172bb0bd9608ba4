/* bp_oversample.cu — x4 oversampled caches with nearest-neighbour lookup: Chilingaryan
 * et al. 2020, J. Real-Time Image Proc. 17:1331, Sect. 7.2 (ARCHITECTURE.md §5, H2).
 * Quality mode `preview`.
 *
 * Like the ALU kernels (bp_alu.cuh: tiles, passes of s projections, the cache starting one
 * bin below the tile's lowest), but the cache holds each bin's linear interpolation at
 * offsets 0, 1/4, 1/2 and 3/4 (weighted), computed once per pass in exact fp32 (the paper
 * let the texture unit make them; the ALUs are as cheap here and exact). An update is then
 * one lookup at round(4 h) and one add: the rounding trick on 4 h gives the index with a
 * single FP add (fround.h: t = 4h + 2^23 rounds to the nearest integer). The error lies
 * between nearest neighbour and linear interpolation: a quarter of NN's
 * (ARCHITECTURE.md §6.0: 0.24-0.25 x NN's relative L2), about 1e-2 relative L2 on a
 * phantom.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include "gpu/cuda/bp_alu.cuh"

#define OS_RATE 4 /* samples per bin */

template <int NV> struct os_cell;
template <> struct os_cell<1> {
    float v;
};
template <> struct os_cell<2> {
    float2 v;
};
template <> struct os_cell<4> {
    float4 v;
};

/* The cell at shared address addr (formed by hand, as in bp_alu.cuh). */
__device__ __forceinline__ void os_lds(os_cell<1> &c, unsigned addr)
{
    asm("ld.shared.f32 %0, [%1];" : "=f"(c.v) : "r"(addr));
}
__device__ __forceinline__ void os_lds(os_cell<2> &c, unsigned addr)
{
    asm("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(c.v.x), "=f"(c.v.y) : "r"(addr));
}
__device__ __forceinline__ void os_lds(os_cell<4> &c, unsigned addr)
{
    asm("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(c.v.x), "=f"(c.v.y), "=f"(c.v.z), "=f"(c.v.w)
        : "r"(addr));
}

template <int NV> __device__ __forceinline__ void os_add(float *acc, const os_cell<NV> &c)
{
    if constexpr (NV == 1) {
        acc[0] += c.v;
    } else if constexpr (NV == 2) {
        acc[0] += c.v.x;
        acc[1] += c.v.y;
    } else {
        acc[0] += c.v.x;
        acc[1] += c.v.y;
        acc[2] += c.v.z;
        acc[3] += c.v.w;
    }
}

template <int NV, int TILE, int TY, int SD>
__global__ void __launch_bounds__(TILE *TY)
    bp_os_kernel(tl_cuda_rows rows, size_t pitch_el, int W, const float4 *__restrict__ par,
                 const int *__restrict__ slot, int nproj, tl_cuda_geom g, int cw, alu_outs outs,
                 int nz)
{
    constexpr int NQ = TILE / TY, NT = TILE * TY, ST = NT / SD;
    static_assert(NT % SD == 0, "threads must divide among the cached projections");
    extern __shared__ __align__(16) char os_smem[];
    os_cell<NV> *cache = (os_cell<NV> *)os_smem; /* [SD][OS_RATE cw] */
    __shared__ float4 s_p[SD];                   /* 4 (centre - first), 4 cos, 4 sin, weight */
    __shared__ int s_first[SD];
    __shared__ int s_slot[SD];

    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TILE + tx;
    const int j0 = blockIdx.x * TILE, i0 = blockIdx.y * TILE, j = j0 + tx;
    const float x0 = tl_geom_x(g, i0 + ty, j), y0 = tl_geom_y(g, i0 + ty, j);
    const float sx = TY * g.bx, sy = TY * g.by;
    const int cw4 = OS_RATE * cw;
    /* shared address of cell 0, less the bits of 2^23 (the index is the float's bits) */
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(cache) -
                           (unsigned)TL_FROUND_BITS * (unsigned)sizeof(os_cell<NV>);
    float acc[NQ][NV];
#pragma unroll
    for (int q = 0; q < NQ; q++)
#pragma unroll
        for (int v = 0; v < NV; v++)
            acc[q][v] = 0.f;

    for (int pb = 0; pb < nproj; pb += SD) {
        const int nb = nproj - pb < SD ? nproj - pb : SD;
        if (tid < nb) {
            const float4 q = par[pb + tid];
            const float first = alu_first_bin(g, i0, j0, TILE, q);
            s_p[tid] = make_float4(OS_RATE * (q.z - first), OS_RATE * q.x, OS_RATE * q.y, q.w);
            s_first[tid] = (int)first;
            s_slot[tid] = slot[pb + tid];
        }
        __syncthreads();
        {
            const int pp = tid / ST;
            if (pp < nb) {
                const size_t so = (size_t)s_slot[pp] * pitch_el;
                const float w = s_p[pp].w;
                for (int c = tid - pp * ST; c < cw4; c += ST) {
                    const int bin = s_first[pp] + c / OS_RATE;
                    const float f = (float)(c % OS_RATE) * (1.f / OS_RATE);
                    float val[NV];
#pragma unroll
                    for (int v = 0; v < NV; v++) {
                        const float *r = rows.row[v] + so;
                        const float a = bin >= 0 && bin < W ? __ldg(r + bin) : 0.f;
                        const float b = bin + 1 >= 0 && bin + 1 < W ? __ldg(r + bin + 1) : 0.f;
                        val[v] = w * tl_lerp(a, b, f);
                    }
                    os_cell<NV> &cell = cache[pp * cw4 + c];
                    if constexpr (NV == 1)
                        cell.v = val[0];
                    else if constexpr (NV == 2)
                        cell.v = make_float2(val[0], val[1]);
                    else
                        cell.v = make_float4(val[0], val[1], val[2], val[3]);
                }
            }
        }
        __syncthreads();
        for (int pi = 0; pi < nb; pi++) {
            const float4 P = s_p[pi];
            const float h0 = fmaf(x0, P.y, fmaf(-y0, P.z, P.x)); /* 4 h */
            const float st = fmaf(sx, P.y, -sy * P.z);
            const unsigned sb = alu_opaque(sbase + (unsigned)(pi * cw4) * sizeof(os_cell<NV>));
#pragma unroll
            for (int q = 0; q < NQ; q++) {
                /* nearest of the 4 samples per bin: round(4 h), one FP add */
                const float t = __fadd_rn(fmaf((float)q, st, h0), TL_FROUND_TWO23);
                os_cell<NV> cv;
                os_lds(cv, sb + (unsigned)tl_fround_bits(t) * (unsigned)sizeof(os_cell<NV>));
                os_add<NV>(acc[q], cv);
            }
        }
        __syncthreads();
    }

    if (j >= g.w)
        return;
#pragma unroll
    for (int q = 0; q < NQ; q++) {
        const int i = i0 + ty + q * TY;
        if (i >= g.h)
            continue;
#pragma unroll
        for (int v = 0; v < NV; v++)
            if (v < nz)
                outs.o[v][(size_t)i * g.w + j] = acc[q][v];
    }
}

template <int NV, int TILE, int TY, int SD>
static tl_status os_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_cuda_batch *b,
                           size_t nproj)
{
    alu_outs outs;
    for (int v = 0; v < TL_CUDA_MAX_NV; v++)
        outs.o[v] = b->out[v < b->nz ? v : 0];
    const dim3 block(TILE, TY);
    const dim3 grid((unsigned)((b->g.w + TILE - 1) / TILE),
                    (unsigned)((b->g.h + TILE - 1) / TILE));
    const size_t shmem = (size_t)SD * OS_RATE * b->cache_width * sizeof(os_cell<NV>);
    bp_os_kernel<NV, TILE, TY, SD>
        <<<grid, block, shmem, s->stream>>>(tl_cuda_batch_rows(s, b), s->pitch_el, (int)s->cols,
                                            s->d_par, s->d_slot, (int)nproj, b->g, b->cache_width,
                                            outs, b->nz);
    TL_CUDA_LAUNCHED(s->eb, "bp_os_kernel");
    return TL_OK;
}

#define OS(NAME, NV, TILE, TY, SD, PARAMS)                                            \
    {                                                                                 \
        NAME, TL_QUALITY_PREVIEW, NV, TL_KF_ALU, PARAMS, TILE,                        \
            (int)(ALU_SMEM_MAX / ((SD)*OS_RATE * sizeof(os_cell<NV>))), false, false, \
            os_launch<NV, TILE, TY, SD>                                               \
    }

const tl_cuda_kernel tl_cuda_os_kernels[] = {
    OS("os4/t64q16s8", 1, 64, 4, 8, "x4 oversampled cache, NN lookup, tile 64x64, 16 px/thread"),
    OS("os4-2/t64q8s8", 2, 64, 8, 8, "2 slices, x4 oversampled float2 cache, NN, tile 64x64"),
    OS("os4-4/t32q4s8", 4, 32, 8, 8, "4 slices, x4 oversampled float4 cache, NN, tile 32x32"),
};
const int tl_cuda_os_nkernels = sizeof tl_cuda_os_kernels / sizeof *tl_cuda_os_kernels;
