/* bp_alu.cuh — the block of the FP-rounding ALU kernels (bp_alu.cu), as a template that
 * the hybrid kernels (bp_hybrid.cu) embed for their ALU blocks, so both produce the same
 * numbers. See bp_alu.cu for the design (ARCHITECTURE.md §5: A3 + A4 + A5).
 */
#ifndef TL_CUDA_BP_ALU_CUH
#define TL_CUDA_BP_ALU_CUH

#include <cuda_fp16.h>

#include "gpu/cuda/fround.h"
#include "gpu/cuda/kernels.cuh"

#define ALU_FAR 1e9f /* |first bin| bound, far beyond any detector */
/* Bytes of dynamic shared memory a cache may take: without opt-in a block has 48 KiB in
 * all, and the kernels' static arrays (per-projection tables, at most 32 x 24 bytes) come
 * out of the same 48 KiB. */
#define ALU_SMEM_MAX (48 * 1024 - 1024)
/* ... and with the opt-in (cudaFuncAttributeMaxDynamicSharedMemorySize) a kernel asks for
 * at launch: room for 32 projections of a 64-pixel tile's 16-byte cells, and two such
 * blocks per SM (sm_80 and sm_90 have 164 / 228 KiB per SM). */
#define ALU_SMEM_OPTIN (80 * 1024)

enum { CELL_F32 = 0, CELL_F16 = 1 };

/* A cache cell for NV slices at bin j of the cache (column 0 = the tile's first bin):
 *   float: (a', d) with d = w (v[j+1] - v[j]) and a' = w v[j] - (j - c0) d, so that the
 *          interpolation at cache offset h = j + f is  a' + (h - c0) d  — one FMA, with no
 *          floor or fraction needed beyond the index (c0 = cw / 2 keeps |j - c0| small, so
 *          the cancellation costs a few ulps: well inside `exact`);
 *   half:  (a, d) with a = w s v[j] (s: the sinogram's scale), interpolated as a + f d with
 *          f = h - j, since half cannot afford the cancellation of the float form. */
template <int NV, int PREC> struct alu_cell;
template <> struct alu_cell<1, CELL_F32> {
    float2 v;
}; /* a' d */
template <> struct alu_cell<2, CELL_F32> {
    float4 v;
}; /* a'0 a'1 d0 d1 */
template <> struct alu_cell<4, CELL_F32> {
    float4 a, d;
};
template <> struct __align__(16) alu_cell<4, CELL_F16>
{
    __half2 a01, a23, d01, d23;
};

struct alu_outs {
    float *o[TL_CUDA_MAX_NV];
};

/* Fills the cell at cache column c from the NV sinogram rows at `bin` and `bin + 1`, times
 * weight w (and, in half, times the sinogram's scale). */
template <int NV, int PREC>
__device__ __forceinline__ void alu_fill(alu_cell<NV, PREC> &cell, const tl_cuda_rows &rows,
                                         size_t so, int W, int bin, float w, const float *scale,
                                         float c_minus_c0)
{
    float a[NV], d[NV];
#pragma unroll
    for (int v = 0; v < NV; v++) {
        const float *r = rows.row[v] + so;
        const float va = bin >= 0 && bin < W ? __ldg(r + bin) : 0.f;
        const float vb = bin + 1 >= 0 && bin + 1 < W ? __ldg(r + bin + 1) : 0.f;
        const float sw = PREC == CELL_F16 ? w * scale[v] : w;
        d[v] = sw * (vb - va);
        a[v] = PREC == CELL_F16 ? sw * va : fmaf(-c_minus_c0, d[v], sw * va);
    }
    if constexpr (NV == 1) {
        cell.v = make_float2(a[0], d[0]);
    } else if constexpr (NV == 2) {
        cell.v = make_float4(a[0], a[1], d[0], d[1]);
    } else if constexpr (PREC == CELL_F32) {
        cell.a = make_float4(a[0], a[1], a[2], a[3]);
        cell.d = make_float4(d[0], d[1], d[2], d[3]);
    } else {
        cell.a01 = __floats2half2_rn(a[0], a[1]);
        cell.a23 = __floats2half2_rn(a[2], a[3]);
        cell.d01 = __floats2half2_rn(d[0], d[1]);
        cell.d23 = __floats2half2_rn(d[2], d[3]);
    }
}

/* Loads the cell at shared address addr. The address is formed by hand (one LEA per update:
 * base + index << log2(cell size)); left to the compiler, the index arithmetic took three
 * integer instructions per update on sm_90. */
__device__ __forceinline__ void alu_lds(alu_cell<1, CELL_F32> &c, unsigned addr)
{
    asm("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(c.v.x), "=f"(c.v.y) : "r"(addr));
}
__device__ __forceinline__ void alu_lds(alu_cell<2, CELL_F32> &c, unsigned addr)
{
    asm("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(c.v.x), "=f"(c.v.y), "=f"(c.v.z), "=f"(c.v.w)
        : "r"(addr));
}
__device__ __forceinline__ void alu_lds(alu_cell<4, CELL_F32> &c, unsigned addr)
{
    asm("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(c.a.x), "=f"(c.a.y), "=f"(c.a.z), "=f"(c.a.w)
        : "r"(addr));
    asm("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4+16];"
        : "=f"(c.d.x), "=f"(c.d.y), "=f"(c.d.z), "=f"(c.d.w)
        : "r"(addr));
}
__device__ __forceinline__ void alu_lds(alu_cell<4, CELL_F16> &c, unsigned addr)
{
    unsigned x, y, z, w;
    asm("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(x), "=r"(y), "=r"(z), "=r"(w)
        : "r"(addr));
    c.a01 = *(__half2 *)&x;
    c.a23 = *(__half2 *)&y;
    c.d01 = *(__half2 *)&z;
    c.d23 = *(__half2 *)&w;
}

/* x, made opaque to the compiler (no instruction). The per-projection cache base must be:
 * left visible, the compiler re-associates  base + (bits << k)  into
 * (pi * cw + bits) << k + const  and spends three integer instructions per update (two
 * IMAD and a MOV of the constant) instead of one LEA (seen in the SASS on sm_90). */
__device__ __forceinline__ unsigned alu_opaque(unsigned x)
{
    asm volatile("" : "+r"(x));
    return x;
}

/* acc[v] += a'_v + hr d_v (float cells). */
template <int NV>
__device__ __forceinline__ void alu_add(float *acc, const alu_cell<NV, CELL_F32> &c, float hr)
{
    if constexpr (NV == 1) {
        acc[0] = fmaf(hr, c.v.y, acc[0] + c.v.x);
    } else if constexpr (NV == 2) {
        acc[0] = fmaf(hr, c.v.z, acc[0] + c.v.x);
        acc[1] = fmaf(hr, c.v.w, acc[1] + c.v.y);
    } else {
        acc[0] = fmaf(hr, c.d.x, acc[0] + c.a.x);
        acc[1] = fmaf(hr, c.d.y, acc[1] + c.a.y);
        acc[2] = fmaf(hr, c.d.z, acc[2] + c.a.z);
        acc[3] = fmaf(hr, c.d.w, acc[3] + c.a.w);
    }
}

/* The tile's first cached bin for projection q: one below the least u over its corners. */
__device__ __forceinline__ float alu_first_bin(const tl_cuda_geom &g, int i0, int j0, int tile,
                                               float4 q)
{
    const int i1 = i0 + tile - 1, j1 = j0 + tile - 1;
    const float u00 = tl_ray_u(tl_geom_x(g, i0, j0), tl_geom_y(g, i0, j0), q);
    const float u01 = tl_ray_u(tl_geom_x(g, i0, j1), tl_geom_y(g, i0, j1), q);
    const float u10 = tl_ray_u(tl_geom_x(g, i1, j0), tl_geom_y(g, i1, j0), q);
    const float u11 = tl_ray_u(tl_geom_x(g, i1, j1), tl_geom_y(g, i1, j1), q);
    const float umin = fminf(fminf(u00, u01), fminf(u10, u11));
    return fminf(fmaxf(floorf(umin) - 1.f, -ALU_FAR), ALU_FAR);
}

template <int N> struct alu_log2;
template <> struct alu_log2<8> {
    static constexpr int v = 3;
};
template <> struct alu_log2<16> {
    static constexpr int v = 4;
};
template <> struct alu_log2<32> {
    static constexpr int v = 5;
};

/* One block of the FP-rounding family: NV slices, TILE x TILE pixels, TILE x TY threads
 * with TILE / TY pixels each (rows ty, ty + TY, ...), SD projections per pass. Shared by
 * the hybrid kernels (bp_hybrid.cu) for their ALU blocks, so both produce the same
 * numbers; the block's tile (bx, by) is passed in for that reason.
 *
 * Per pixel and projection: hr = h - c0 (one FMA from the thread's first pixel), the
 * cache index floor(h) = bits(hr + (2^23 + c0), rounded down) - bits(2^23) (fround.h,
 * one FADD; folded into the address, one LEA), one shared load, and per slice an add and
 * an FMA (float) — six instructions for one slice. */
template <int NV, int TILE, int TY, int SD, int PREC>
__device__ __forceinline__ void alu_block(const tl_cuda_rows &rows, size_t pitch_el, int W,
                                          const float4 *__restrict__ par,
                                          const int *__restrict__ slot, int nproj,
                                          const tl_cuda_geom &g, int cw, const float *scale,
                                          const alu_outs &outs, int nz, int bx, int by, char *smem)
{
    constexpr int NQ = TILE / TY, NT = TILE * TY, ST = NT / SD; /* caching threads per proj */
    static_assert(NT % SD == 0, "threads must divide among the cached projections");
    typedef alu_cell<NV, PREC> cell_t;
    constexpr int LOG = alu_log2<sizeof(cell_t)>::v;
    cell_t *cache = (cell_t *)smem; /* [SD][cw] */
    __shared__ float4 s_p[SD];      /* centre - first bin - c0, cos, sin, step (st below) */
    __shared__ float s_w[SD];       /* weight (folded into the cells) */
    __shared__ int s_first[SD];
    __shared__ int s_slot[SD];

    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TILE + tx;
    const int j0 = bx * TILE, i0 = by * TILE, j = j0 + tx;
    const float x0 = tl_geom_x(g, i0 + ty, j), y0 = tl_geom_y(g, i0 + ty, j);
    const float sx = TY * g.bx, sy = TY * g.by; /* from one of a thread's pixels to the next */
    const int c0 = cw / 2;
    const float k1 = TL_FROUND_TWO23 + (float)c0; /* exact: c0 < 2^22 */
    /* shared address of cell 0 of projection 0, less the bits of 2^23 (the index is the
     * float's bit pattern; mod 2^32 arithmetic) */
    const unsigned sbase =
        (unsigned)__cvta_generic_to_shared(cache) - ((unsigned)TL_FROUND_BITS << LOG);
    const unsigned sstride = (unsigned)cw << LOG;
    float acc[NQ][NV];
#pragma unroll
    for (int q = 0; q < NQ; q++)
#pragma unroll
        for (int v = 0; v < NV; v++)
            acc[q][v] = 0.f;
    float sc[NV];
#pragma unroll
    for (int v = 0; v < NV; v++)
        sc[v] = PREC == CELL_F16 ? scale[v] : 1.f;

    for (int pb = 0; pb < nproj; pb += SD) {
        const int nb = nproj - pb < SD ? nproj - pb : SD;
        if (tid < nb) {
            const float4 q = par[pb + tid];
            const float first = alu_first_bin(g, i0, j0, TILE, q);
            /* the step of h from one of a thread's pixels to the next is the same for every
             * thread: computed once here, not per thread and projection below */
            s_p[tid] = make_float4(q.z - first - (float)c0, q.x, q.y, fmaf(sx, q.x, -sy * q.y));
            s_w[tid] = q.w;
            s_first[tid] = (int)first;
            s_slot[tid] = slot[pb + tid];
        }
        __syncthreads();
        { /* ST threads per projection, consecutive bins: coalesced reads, no conflicts */
            const int pp = tid / ST;
            if (pp < nb) {
                const size_t so = (size_t)s_slot[pp] * pitch_el;
                const float w = s_w[pp];
                for (int c = tid - pp * ST; c < cw; c += ST)
                    alu_fill<NV, PREC>(cache[pp * cw + c], rows, so, W, s_first[pp] + c, w, sc,
                                       (float)(c - c0));
            }
        }
        __syncthreads();
        __half2 hacc[NQ][NV > 1 ? NV / 2 : 1];
        if constexpr (PREC == CELL_F16) {
#pragma unroll
            for (int q = 0; q < NQ; q++)
#pragma unroll
                for (int v = 0; v < NV / 2; v++)
                    hacc[q][v] = __float2half2_rn(0.f);
        }
        for (int pi = 0; pi < nb; pi++) {
            const float4 P = s_p[pi];
            /* hr = h - c0, h = (centre - first) + x cos - y sin >= 1 the cache offset */
            const float h0 = fmaf(x0, P.y, fmaf(-y0, P.z, P.x));
            const float st = P.w;
            const unsigned sb = alu_opaque(sbase + (unsigned)pi * sstride);
#pragma unroll
            for (int q = 0; q < NQ; q++) {
                const float hr = fmaf((float)q, st, h0);
                const float t = tl_fround_sum(hr, k1); /* 2^23 + floor(h) */
                cell_t cv;
                alu_lds(cv, sb + ((unsigned)tl_fround_bits(t) << LOG));
                if constexpr (PREC == CELL_F32) {
                    alu_add<NV>(acc[q], cv, hr);
                } else {
                    const __half2 f2 = __float2half2_rn(hr - (t - k1)); /* h - floor(h) */
                    hacc[q][0] = __hadd2(hacc[q][0], __hfma2(f2, cv.d01, cv.a01));
                    hacc[q][1] = __hadd2(hacc[q][1], __hfma2(f2, cv.d23, cv.a23));
                }
            }
        }
        if constexpr (PREC == CELL_F16) { /* the pass's half sums into float */
#pragma unroll
            for (int q = 0; q < NQ; q++) {
                const float2 s01 = __half22float2(hacc[q][0]), s23 = __half22float2(hacc[q][1]);
                acc[q][0] += s01.x;
                acc[q][1] += s01.y;
                acc[q][2] += s23.x;
                acc[q][3] += s23.y;
            }
        }
        __syncthreads(); /* the cache is refilled next pass */
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
                outs.o[v][(size_t)i * g.w + j] = PREC == CELL_F16 ? acc[q][v] / sc[v] : acc[q][v];
    }
}

#endif
