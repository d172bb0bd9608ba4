/* bp_cone_column.cu — the column kernels of the cone-beam family (the cone-col kernels): Chen et al.
 * 2019 (seed 004, iFDK, §4.2 and Listing 1, "L1-Tran" of Table 4) adapted to Hopper.
 *
 * A warp owns one (x, y) column of the volume and walks it in z: lane l computes the slices
 * l, l + 32, ... of a batch. On a circular trajectory about z, u and the depth w of a
 * column do not depend on z (§4.2.1, "per-column invariants"), so each warp computes u, w
 * and the weight of CONE_COL_CHUNK projections once per column (one projection per lane,
 * into shared memory), and then every lane needs one multiply-add for v per slice and
 * projection. The filtered projections are read from a transposed copy (cone_stack.cu,
 * v the fastest axis: iFDK's Q^T), so the 32 lanes of a warp, walking v along one
 * detector column, read neighbouring addresses: four coalesced __ldg per update through
 * L1 instead of the texture unit, whose bilinear rate bounds the cone-tex kernels. The
 * copy has a border of zeros, so no lane tests whether its taps are on the detector: the
 * kernels issue instructions at the SM's limit (Nsight Compute, H100: 72 % SM, 93 % L1
 * hits before the border), and every test saved is throughput. A warp walks several
 * columns (a tile of 8 x COLS columns per block) so that the block's reads of one
 * projection overlap in L1.
 * Bilinear interpolation is exact fp32 arithmetic in the order of tl_cone_sample (the
 * CPU backend's rule: along u within each row, then between rows), so the kernels are
 * `exact`. The same walk with each update one texture fetch (of the float or the float16
 * stack, cone_stack.cu) is cone-coltex: `fast`; a hybrid launch runs both kinds of block,
 * chosen per SM by ticket as in bp_hybrid.cu. The quad stacks (cone_stack.cu) hold an
 * update's four taps in one element: the same walk reads one float4 (cone-colq, `exact`,
 * the same arithmetic) or, in the ALU blocks of the cone-colhybq16 hybrids, four float16
 * (`fast`) per update.
 * iFDK's z-mirror pairing (§4.2.2): where the source's plane meets the detector in one
 * row for every column (a centred principal row, no tilt), a voxel at distance d above
 * that plane and its mirror image d below share u and the weight, and their v are mirror
 * images about the row. The mirror stack (cone_stack.cu) holds each float16 texel next to
 * its mirror texel, so one texture fetch at the upper voxel's (u, v) returns both
 * voxels' samples, bilinear at mirrored fractions: the cone-colmir16 kernels (`fast`)
 * walk only the upper slices of a batch and write each slice's mirror too (b.mirror),
 * two updates per fetch of the texture unit that bounds the cone-coltex kernels.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include <cuda_fp16.h>

#include "gpu/cuda/cuda_state.cuh"
#include "gpu/cuda/kernels.cuh"

#define CONE_COL_WARPS 8  /* columns per block: 8 warps of 32 lanes */
#define CONE_COL_CHUNK 64 /* projections whose invariants a warp holds at once */

/* One projection as one column sees it; u < -1 marks "misses the detector". */
struct col_invariant {
    float u, va, vb, wt; /* v = va + vb z; wt = weight / w^2 */
};

struct col_shared {
    float m[CONE_COL_CHUNK][12];
    float weight[CONE_COL_CHUNK];
    int slot[CONE_COL_CHUNK];
};

/* Slice n of the batch (thread lane has slices lane + 32 t, t < PER_LANE): its height and
 * its output (NULL past the batch). The lookup by an unrolled compare keeps the batch in
 * parameter space (a dynamic index would copy it to local memory). */
__device__ __forceinline__ float lane_z(const tl_cuda_cone_batch &b, int n)
{
    float z = 0.f;
#pragma unroll
    for (int k = 0; k < TL_CUDA_CONE_MAX_NZ; k++)
        if (k == n)
            z = b.z[k];
    return z;
}
__device__ __forceinline__ float *lane_out(const tl_cuda_cone_batch &b, int n, bool mirror)
{
    float *out = NULL;
#pragma unroll
    for (int k = 0; k < TL_CUDA_CONE_MAX_NZ; k++)
        if (k == n && k < b.nz)
            out = mirror ? b.mirror[k] : b.out[k];
    return out;
}

/* Element r0 of a float16 quad column (cone_stack.cu: rows r0 and r0 + 1 of the left
 * column, then of the right one) interpolated along u at fraction fu2 in float16: one
 * subtraction and one multiply-add for both rows, then rows r0 and r0 + 1 as floats.
 * `fast` allows it: the weight has 11 significant bits (the texture unit's, 8). */
__device__ __forceinline__ float2 quad16_rows(const uint2 *__restrict__ col, int r0, __half2 fu2)
{
    const uint2 q = __ldg(col + r0);
    const __half2 left = *reinterpret_cast<const __half2 *>(&q.x);
    const __half2 right = *reinterpret_cast<const __half2 *>(&q.y);
    return __half22float2(__hfma2(fu2, __hsub2(right, left), left));
}

/* The block's tile: CONE_COL_WARPS columns in x by COLS in y from i0, a warp per x (j).
 * SRC: where the updates come from (tl_cuda_col_source, or COL_TEXTURE: `stack`, or
 * COL_MIRROR: `stack` is the mirror stack); tstack: the transposed stack or the quad
 * stack SRC names. */
#define COL_TEXTURE (-1)
#define COL_MIRROR (-2)
template <int PER_LANE, int COLS, int SRC>
__device__ __forceinline__ void column_block(
    const void *__restrict__ tstack, int W, int H, cudaTextureObject_t stack,
    const float *__restrict__ scale, const float *__restrict__ cone,
    const float4 *__restrict__ par, const int *__restrict__ slot, int nproj,
    const tl_cuda_geom &g, const tl_cuda_cone_batch &b, col_shared &sh,
    col_invariant (&inv)[CONE_COL_WARPS][COLS][CONE_COL_CHUNK], int j, int i0)
{
    constexpr bool MIR = SRC == COL_MIRROR;
    constexpr bool TEX = SRC == COL_TEXTURE || MIR;
    constexpr int NM = MIR ? PER_LANE : 1; /* the mirror slices' accumulators */
    const int lane = threadIdx.x, warp = threadIdx.y;
    const int tid = warp * 32 + lane;
    /* texel centres at +0.5, folded into the invariants of the texture path */
    const float half = TEX ? 0.5f : 0.f;
    float x[COLS], y[COLS];
    bool inside[COLS];
#pragma unroll
    for (int c = 0; c < COLS; c++) {
        inside[c] = j < g.w && i0 + c < g.h;
        x[c] = tl_geom_x(g, i0 + c, j);
        y[c] = tl_geom_y(g, i0 + c, j);
    }
    float z[PER_LANE];
#pragma unroll
    for (int t = 0; t < PER_LANE; t++)
        z[t] = lane_z(b, lane + 32 * t);
    float acc[COLS][PER_LANE], accm[COLS][NM];
#pragma unroll
    for (int c = 0; c < COLS; c++) {
#pragma unroll
        for (int t = 0; t < PER_LANE; t++)
            acc[c][t] = 0.f;
#pragma unroll
        for (int t = 0; t < NM; t++)
            accm[c][t] = 0.f;
    }
    const int ld = H + TL_CUDA_TSTACK_PAD_ROWS; /* cone_stack.cu: the zero border */
    const size_t proj_el = (size_t)(W + TL_CUDA_TSTACK_PAD_COLS) * ld;
    for (int p0 = 0; p0 < nproj; p0 += CONE_COL_CHUNK) {
        const int nc = nproj - p0 < CONE_COL_CHUNK ? nproj - p0 : CONE_COL_CHUNK;
        __syncthreads(); /* the previous chunk is no longer read */
        for (int t = tid; t < nc * 12; t += 32 * CONE_COL_WARPS)
            sh.m[t / 12][t % 12] = __ldg(cone + (size_t)p0 * 12 + t);
        for (int t = tid; t < nc; t += 32 * CONE_COL_WARPS) {
            const int k = __ldg(slot + p0 + t);
            sh.weight[t] = __ldg(par + p0 + t).w * (scale ? __ldg(scale + k) : 1.f);
            sh.slot[t] = k;
        }
        __syncthreads();
#pragma unroll
        for (int c = 0; c < COLS; c++)
            for (int k = lane; k < nc; k += 32) { /* the invariants, a lane per projection */
                const float *m = sh.m[k]; /* m[2] = m[10] = 0: checked on the host */
                const float w = fmaf(m[8], x[c], fmaf(m[9], y[c], m[11]));
                col_invariant v = {-2.f, 0.f, 0.f, 0.f};
                if (inside[c] && w > 0.f) {
                    const float iw = 1.f / w;
                    v.u = fmaf(m[0], x[c], fmaf(m[1], y[c], m[3])) * iw + half;
                    v.va = fmaf(m[4], x[c], fmaf(m[5], y[c], m[7])) * iw + half;
                    v.vb = m[6] * iw;
                    v.wt = sh.weight[k] * iw * iw;
                }
                inv[warp][c][k] = v;
            }
        __syncwarp();
        for (int k = 0; k < nc; k++) {
            const int layer = sh.slot[k];
#pragma unroll
            for (int c = 0; c < COLS; c++) {
                const col_invariant v = inv[warp][c][k]; /* one broadcast read */
                if (!(v.u > half - 1.f && v.u < (float)W + half))
                    continue; /* the same for the whole warp */
                if (MIR) {
                    /* .x: this slice's sample, .y: its mirror's (border: 0 off the detector) */
#pragma unroll
                    for (int t = 0; t < NM; t++) {
                        const float2 both =
                            tex2DLayered<float2>(stack, v.u, fmaf(v.vb, z[t], v.va), layer);
                        acc[c][t] = fmaf(v.wt, both.x, acc[c][t]);
                        accm[c][t] = fmaf(v.wt, both.y, accm[c][t]);
                    }
                    continue;
                }
                if (TEX) {
                    /* the border address mode gives 0 off the detector */
#pragma unroll
                    for (int t = 0; t < PER_LANE; t++)
                        acc[c][t] = fmaf(
                            v.wt, tex2DLayered<float>(stack, v.u, fmaf(v.vb, z[t], v.va), layer),
                            acc[c][t]);
                    continue;
                }
                const float flu = floorf(v.u);
                const int iu = (int)flu; /* -1 ... W - 1: the border has columns -1 and W */
                const float fu = v.u - flu;
                const size_t col_el = (size_t)layer * proj_el + (size_t)(iu + 1) * ld + 1;
                const __half2 fu2 = __float2half2_rn(fu); /* the float16 quads' weight */
#pragma unroll
                for (int t = 0; t < PER_LANE; t++) {
                    /* rows -1 ... H + 1 exist (zero outside the detector), so v clamped to
                     * [-1, H] needs no test: a sample at -1 or H is 0, as off the detector,
                     * and the row above a zero fraction is read but weighs 0 */
                    const float vv = fminf(fmaxf(fmaf(v.vb, z[t], v.va), -1.f), (float)H);
                    const float flv = floorf(vv);
                    const int r0 = (int)flv;
                    const float gv = vv - flv;
                    float row0, row1;
                    if (SRC == TL_CUDA_COL_T32) {
                        const float *col0 = (const float *)tstack + col_el, *col1 = col0 + ld;
                        row0 = tl_lerp(__ldg(col0 + r0), __ldg(col1 + r0), fu);
                        row1 = tl_lerp(__ldg(col0 + r0 + 1), __ldg(col1 + r0 + 1), fu);
                    } else if (SRC == TL_CUDA_COL_Q32) {
                        const float4 q = __ldg((const float4 *)tstack + col_el + r0);
                        row0 = tl_lerp(q.x, q.y, fu);
                        row1 = tl_lerp(q.z, q.w, fu);
                    } else {
                        const float2 rows = quad16_rows((const uint2 *)tstack + col_el, r0, fu2);
                        row0 = rows.x;
                        row1 = rows.y;
                    }
                    acc[c][t] = fmaf(v.wt, tl_lerp(row0, row1, gv), acc[c][t]);
                }
            }
        }
        __syncwarp(); /* inv[warp] is rewritten after the next staging */
    }
#pragma unroll
    for (int t = 0; t < PER_LANE; t++) {
        float *out = lane_out(b, lane + 32 * t, false); /* looked up late: registers are dear */
#pragma unroll
        for (int c = 0; c < COLS; c++)
            if (inside[c] && out)
                out[(size_t)(i0 + c) * g.w + j] = acc[c][t];
    }
#pragma unroll
    for (int t = 0; t < (MIR ? NM : 0); t++) {
        float *out = lane_out(b, lane + 32 * t, true);
#pragma unroll
        for (int c = 0; c < COLS; c++)
            if (inside[c] && out)
                out[(size_t)(i0 + c) * g.w + j] = accm[c][t];
    }
}

/* TEXN of every TEXN + ALUN blocks an SM receives take the texture path (the per-SM ticket
 * of bp_hybrid.cu, Chilingaryan et al. 2020 Sect. 7.1), the others the stack ALU names
 * (scale: the texture's; alu_scale: the ALU stack's). */
template <int PER_LANE, int COLS, int TEXN, int ALUN, int ALU, bool MIR>
__global__ void __launch_bounds__(32 * CONE_COL_WARPS)
    bp_cone_column_kernel(const void *__restrict__ tstack, const float *__restrict__ alu_scale,
                          int W, int H, cudaTextureObject_t stack, const float *__restrict__ scale,
                          const float *__restrict__ cone, const float4 *__restrict__ par,
                          const int *__restrict__ slot, int nproj, tl_cuda_geom g,
                          tl_cuda_cone_batch b, unsigned *tickets, int nsmid)
{
    __shared__ col_shared sh;
    __shared__ col_invariant inv[CONE_COL_WARPS][COLS][CONE_COL_CHUNK];
    __shared__ int s_tex;
    const int tiles_x = (g.w + CONE_COL_WARPS - 1) / CONE_COL_WARPS;
    const int j = (int)(blockIdx.x % tiles_x) * CONE_COL_WARPS + threadIdx.y;
    const int i0 = (int)(blockIdx.x / tiles_x) * COLS;
    bool tex = TEXN > 0;
    if (TEXN > 0 && ALUN > 0) {
        if (threadIdx.x == 0 && threadIdx.y == 0) {
            unsigned sm;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
            const unsigned t = atomicAdd(tickets + sm % (unsigned)nsmid, 1u);
            s_tex = (int)(t % (unsigned)(TEXN + ALUN)) < TEXN;
        }
        __syncthreads();
        tex = s_tex;
    }
    if (tex)
        column_block<PER_LANE, COLS, MIR ? COL_MIRROR : COL_TEXTURE>(
            tstack, W, H, stack, scale, cone, par, slot, nproj, g, b, sh, inv, j, i0);
    else
        column_block<PER_LANE, COLS, ALU>(tstack, W, H, stack, alu_scale, cone, par, slot, nproj,
                                          g, b, sh, inv, j, i0);
}

template <int PER_LANE, int COLS, int TEXN, int ALUN, int ALU = TL_CUDA_COL_T32,
          bool MIR = false>
static tl_status launch(tl_cuda_state *s, const tl_cuda_cone_column_path *path,
                        const tl_cuda_cone_batch *b, size_t nproj)
{
    const void *alu_stack = ALU == TL_CUDA_COL_T32   ? (const void *)s->tstack
                            : ALU == TL_CUDA_COL_Q32 ? (const void *)s->tquad
                                                     : (const void *)s->tquad16;
    const float *alu_scale = ALU == TL_CUDA_COL_Q16 ? s->stack16_scale : NULL;
    if (ALUN > 0 && !alu_stack) /* tl_cuda_cone_can_serve refuses it first */
        return tl_fail(s->eb, TL_EINTERNAL, "a column kernel's stack is missing");
    const int tiles_x = (b->g.w + CONE_COL_WARPS - 1) / CONE_COL_WARPS;
    const int tiles_y = (b->g.h + COLS - 1) / COLS;
    if (TEXN > 0 && ALUN > 0) /* every launch splits its blocks the same way */
        TL_CUDA(s->eb,
                cudaMemsetAsync(s->d_tickets, 0, (size_t)s->nsmid * sizeof(unsigned), s->stream));
    bp_cone_column_kernel<PER_LANE, COLS, TEXN, ALUN, ALU, MIR>
        <<<(unsigned)tiles_x * tiles_y, dim3(32, CONE_COL_WARPS), 0, s->stream>>>(
            alu_stack, alu_scale, (int)s->cols, (int)s->rows, path->stack, path->scale, s->d_cone,
            s->d_par, s->d_slot, (int)nproj, b->g, *b, s->d_tickets, s->nsmid);
    TL_CUDA_LAUNCHED(s->eb, "bp_cone_column_kernel");
    return TL_OK;
}

tl_status tl_cuda_cone_column_launch(tl_cuda_state *s, int per_lane, int cols,
                                     const tl_cuda_cone_column_path *path,
                                     const tl_cuda_cone_batch *b, size_t nproj)
{
    const int tex = path->tex_blocks, alu = path->alu_blocks;
    if (path->mirror && tex == 1 && alu == 0) /* per_lane: mirror pairs per lane */
        return per_lane == 1 ? launch<1, 4, 1, 0, TL_CUDA_COL_T32, true>(s, path, b, nproj)
                             : launch<2, 4, 1, 0, TL_CUDA_COL_T32, true>(s, path, b, nproj);
    if (path->mirror)
        return tl_fail(s->eb, TL_EINTERNAL, "the mirror kernels have texture blocks only");
    if (tex == 0 && alu > 0 && path->alu == TL_CUDA_COL_T32) {
        if (per_lane == 1)
            return cols == 1 ? launch<1, 1, 0, 1>(s, path, b, nproj)
                             : launch<1, 4, 0, 1>(s, path, b, nproj);
        return cols == 1 ? launch<2, 1, 0, 1>(s, path, b, nproj)
                         : launch<2, 4, 0, 1>(s, path, b, nproj);
    }
    if (per_lane == 2 && cols == 4) {
        if (tex == 0 && alu > 0 && path->alu == TL_CUDA_COL_Q32)
            return launch<2, 4, 0, 1, TL_CUDA_COL_Q32>(s, path, b, nproj);
        if (tex == 1 && alu == 0)
            return launch<2, 4, 1, 0>(s, path, b, nproj);
        if (tex == 3 && alu == 1 && path->alu == TL_CUDA_COL_T32)
            return launch<2, 4, 3, 1>(s, path, b, nproj); /* 1:1 and 1:3 measured slower */
        if (tex == 3 && alu == 1 && path->alu == TL_CUDA_COL_Q16)
            return launch<2, 4, 3, 1, TL_CUDA_COL_Q16>(s, path, b, nproj);
        if (tex == 5 && alu == 1 && path->alu == TL_CUDA_COL_Q16)
            return launch<2, 4, 5, 1, TL_CUDA_COL_Q16>(s, path, b, nproj);
    }
    return tl_fail(s->eb, TL_EINTERNAL,
                   "no column kernel of %d slices per lane, %d columns, %d:%d texture:ALU "
                   "blocks, ALU stack %d",
                   per_lane, cols, tex, alu, (int)path->alu);
}
