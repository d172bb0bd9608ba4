/* bp_cone.cu — cone-beam back projection (FDK), the cone-beam kernel family (issue #21).
 *
 * Every kernel is pixel-driven, as the voxel-driven back projection of Feldkamp, Davis and
 * Kress (JOSA A 1(6):612, 1984, Eq. 5): an output pixel has a volume position (x, y, z);
 * each projection's 3x4 matrix (backend.h, tl_bp_proj.cone) takes it to detector (u, v)
 * and relative depth w; the filtered projection is interpolated there and weighed 1 / w^2.
 * The matrices of CONE_CHUNK projections at a time are staged in shared memory by each
 * block (RTK keeps them in constant memory). The kernels:
 *   cone-exact     any plane; one pixel per thread; bilinear in exact fp32 arithmetic from
 *                  the window itself through __ldg (tl_cone_sample, bp_common.cuh: the
 *                  CPU backend's rule), so a projection is back-projected the moment it
 *                  is stored. `exact`.
 *   cone-tex       any plane; the same with the texture unit interpolating the projection
 *                  stack (cone_stack.cu): RTK's kernel_fdk_3Dgrid, the in-run baseline of
 *                  the issue. `fast` (8-bit interpolation weights).
 *   cone-zb/8      up to 8 horizontal slices of one (x, y) grid per pass, for circular
 *                  scans: Chen et al. 2019 (seed 004, iFDK, §4.2.1 "per-column
 *                  invariants"): u and w do not depend on z when the matrix's z column
 *                  has no u or w part (a circular trajectory about z), so a thread
 *                  computes them once per projection for its (x, y) and then only v, a
 *                  linear function of z, per slice. `exact`, from the window.
 *   cone-tex-zb/8, cone-tex-zb/16  the same (8 or 16 slices) reading the projection stack
 *                  through the texture unit. `fast`.
 *   cone-col/N, cone-col/NxC  a warp per (x, y) column (per C columns) walking N slices
 *                  through the transposed stack: iFDK's L1-Tran (bp_cone_column.cu).
 *                  `exact`.
 *   cone-tex16-zb/16  cone-tex-zb/16 reading the float16 texture stack (cone_stack.cu):
 *                  half the bytes per fetch. `fast`.
 *   cone-coltex/64x4, cone-coltex16/64x4  the column kernel's walk with each update one
 *                  texture fetch of the float or float16 stack (iFDK's "Tex" variant).
 *                  `fast`.
 *   cone-colhyb16-3:1/64x4  three texture blocks (coltex16) to one transposed-stack block
 *                  (col) on each SM: seed 000's hybrid (Sect. 7.1) in cone beam. `fast`.
 *   cone-colq/64x4  the column walk reading the quad stack (cone_stack.cu): one float4
 *                  per update, cone-col's arithmetic. `exact`.
 *   cone-colhybq16-3:1/64x4, -5:1  texture blocks (coltex16) and blocks reading four
 *                  float16 of the float16 quad stack per update (both rows interpolated
 *                  along u in one half2 multiply-add), 3:1 or 5:1 on each SM:
 *                  the quad blocks load half the bytes of cone-colq's, so they take less
 *                  of the L1 the texture blocks read through. `fast`.
 *   cone-colmir16/64x4, /128x4  the coltex16 walk over the upper slices of a batch with
 *                  each fetch from the mirror stack (cone_stack.cu), which also gives the
 *                  slice's mirror image about the source's plane: iFDK's z-mirror pairing
 *                  (§4.2.2), two updates per fetch, 1 or 2 pairs per lane. It serves a
 *                  slice whose mirror is in the same job, where the source's plane meets
 *                  the detector in its middle row (offset_v 0, no tilt). `fast`.
 * Measured and left out (H200, 1024^2 -> 1024^3, GUPS), with the quads interpolated in
 * float: the float16 quads alone 633 (the conversions cost more issue slots than the
 * bytes save: cone-colq 729), the texture with them 1:1 865, the texture with float quads
 * 3:1 938 and 2:1 899; with the half2 interpolation, 2:1 952 (3:1 987, 5:1 985).
 */
#include "config.h"

#include "gpu/base/backend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda/kernels.cuh"

#define CONE_BLOCK 16 /* 16 x 16 threads, one pixel (column of pixels: z-batch) each */
#define CONE_CHUNK 64 /* projections whose matrices a block holds at once */
#define CONE_ZB_MAX 16 /* slices of a z-batch pass, at most (8 or 16) */
/* The mirror kernels read a voxel's mirror at rows - 1 - v: where the source's plane meets
 * the detector this far from the middle row, at most, or a slice's mirror lies this far
 * from its height (volume rows), they refuse. */
#define MIRROR_PIXELS 1e-3

static_assert(CONE_ZB_MAX <= TL_CUDA_CONE_MAX_NZ, "a z-batch fits the batch");

/* The matrices, weights and slots of projections [p0, p0 + nc), into shared memory. */
struct cone_chunk {
    float m[CONE_CHUNK][12];
    float weight[CONE_CHUNK];
    int slot[CONE_CHUNK];
};

/* scale: per slot, what undoes the float16 stack's scaling (NULL: a float stack). */
__device__ __forceinline__ void stage_chunk(cone_chunk &c, const float *__restrict__ cone,
                                            const float4 *__restrict__ par,
                                            const int *__restrict__ slot,
                                            const float *__restrict__ scale, int p0, int nc)
{
    const int tid = threadIdx.y * CONE_BLOCK + threadIdx.x;
    __syncthreads(); /* the previous chunk is no longer read */
    for (int t = tid; t < nc * 12; t += CONE_BLOCK * CONE_BLOCK)
        c.m[t / 12][t % 12] = __ldg(cone + (size_t)p0 * 12 + t);
    for (int t = tid; t < nc; t += CONE_BLOCK * CONE_BLOCK) {
        const int k = __ldg(slot + p0 + t);
        c.weight[t] = __ldg(par + p0 + t).w * (scale ? __ldg(scale + k) : 1.f);
        c.slot[t] = k;
    }
    __syncthreads();
}

/* The stack sampled at detector (u, v) of layer `slot`: texel centres at +0.5. */
__device__ __forceinline__ float stack_sample(cudaTextureObject_t tex, float u, float v, int slot)
{
    return tex2DLayered<float>(tex, u + 0.5f, v + 0.5f, slot);
}

/* One pixel per thread, any plane; TEX: from the stack, else from the window. */
template <bool TEX>
__global__ void __launch_bounds__(CONE_BLOCK *CONE_BLOCK)
    bp_cone_kernel(const float *__restrict__ window, size_t pitch_el, size_t slab_el, int W, int H,
                   cudaTextureObject_t tex, const float *__restrict__ cone,
                   const float4 *__restrict__ par, const int *__restrict__ slot, int nproj,
                   tl_cuda_geom g, float *__restrict__ out)
{
    __shared__ cone_chunk c;
    const int j = blockIdx.x * CONE_BLOCK + threadIdx.x;
    const int i = blockIdx.y * CONE_BLOCK + threadIdx.y;
    const bool inside = i < g.h && j < g.w;
    const float x = tl_geom_x(g, i, j), y = tl_geom_y(g, i, j), z = tl_geom_z(g, i, j);
    float acc = 0.f;
    for (int p0 = 0; p0 < nproj; p0 += CONE_CHUNK) {
        const int nc = nproj - p0 < CONE_CHUNK ? nproj - p0 : CONE_CHUNK;
        stage_chunk(c, cone, par, slot, NULL, p0, nc);
        if (!inside)
            continue;
        for (int k = 0; k < nc; k++) {
            const float *m = c.m[k];
            if (!TEX) {
                acc = fmaf(c.weight[k],
                           tl_cone_sample(window, pitch_el, slab_el, W, H, m, c.slot[k], x, y, z),
                           acc);
                continue;
            }
            const float w = fmaf(m[8], x, fmaf(m[9], y, fmaf(m[10], z, m[11])));
            if (!(w > 0.f))
                continue; /* at or behind the source */
            const float iw = 1.f / w;
            const float u = fmaf(m[0], x, fmaf(m[1], y, fmaf(m[2], z, m[3]))) * iw;
            const float v = fmaf(m[4], x, fmaf(m[5], y, fmaf(m[6], z, m[7]))) * iw;
            acc = fmaf(c.weight[k] * iw * iw, stack_sample(tex, u, v, c.slot[k]), acc);
        }
    }
    if (inside)
        out[(size_t)i * g.w + j] = acc;
}

/* A z-batch: nz horizontal slices of one (x, y) grid at heights z[]. */
struct cone_zbatch {
    float z[CONE_ZB_MAX];
    float *out[CONE_ZB_MAX];
    int nz;
};

/* Row r of slot's projection at column position (iu, fu), zero off the detector. */
__device__ __forceinline__ float window_row(const float *__restrict__ col, size_t slab_el, int r,
                                            int iu, float fu, bool lo, bool hi)
{
    const float *row = col + (size_t)r * slab_el;
    const float a = lo ? __ldg(row + iu) : 0.f;
    const float b = hi ? __ldg(row + iu + 1) : 0.f;
    return tl_lerp(a, b, fu);
}

template <bool TEX, int ZB>
__global__ void __launch_bounds__(CONE_BLOCK *CONE_BLOCK)
    bp_cone_zb_kernel(const float *__restrict__ window, size_t pitch_el, size_t slab_el, int W,
                      int H, cudaTextureObject_t tex, const float *__restrict__ scale,
                      const float *__restrict__ cone, const float4 *__restrict__ par,
                      const int *__restrict__ slot, int nproj, tl_cuda_geom g, cone_zbatch zb)
{
    __shared__ cone_chunk c;
    const int j = blockIdx.x * CONE_BLOCK + threadIdx.x;
    const int i = blockIdx.y * CONE_BLOCK + threadIdx.y;
    const bool inside = i < g.h && j < g.w;
    const float x = tl_geom_x(g, i, j), y = tl_geom_y(g, i, j);
    float acc[ZB];
#pragma unroll
    for (int s = 0; s < ZB; s++)
        acc[s] = 0.f;
    for (int p0 = 0; p0 < nproj; p0 += CONE_CHUNK) {
        const int nc = nproj - p0 < CONE_CHUNK ? nproj - p0 : CONE_CHUNK;
        stage_chunk(c, cone, par, slot, scale, p0, nc);
        if (!inside)
            continue;
        for (int k = 0; k < nc; k++) {
            const float *m = c.m[k]; /* m[2] = m[10] = 0: checked on the host */
            const float w = fmaf(m[8], x, fmaf(m[9], y, m[11]));
            if (!(w > 0.f))
                continue;
            const float iw = 1.f / w;
            const float u = fmaf(m[0], x, fmaf(m[1], y, m[3])) * iw;
            const float va = fmaf(m[4], x, fmaf(m[5], y, m[7])) * iw, vb = m[6] * iw;
            const float wt = c.weight[k] * iw * iw;
            if (TEX) {
#pragma unroll
                for (int s = 0; s < ZB; s++)
                    acc[s] =
                        fmaf(wt, stack_sample(tex, u, fmaf(vb, zb.z[s], va), c.slot[k]), acc[s]);
                continue;
            }
            if (!(u > -1.f && u < (float)W))
                continue;
            const float flu = floorf(u);
            const int iu = (int)flu;
            const float fu = u - flu;
            const bool lo = iu >= 0, hi = iu + 1 < W;
            const float *col = window + (size_t)c.slot[k] * pitch_el;
#pragma unroll
            for (int s = 0; s < ZB; s++) {
                const float v = fmaf(vb, zb.z[s], va);
                if (!(v > -1.f && v < (float)H))
                    continue;
                const float flv = floorf(v);
                const int r0 = (int)flv;
                const float gv = v - flv;
                const float a = r0 >= 0 ? window_row(col, slab_el, r0, iu, fu, lo, hi) : 0.f;
                const float b = gv != 0.f && r0 + 1 < H
                                    ? window_row(col, slab_el, r0 + 1, iu, fu, lo, hi)
                                    : 0.f;
                acc[s] = fmaf(wt, tl_lerp(a, b, gv), acc[s]);
            }
        }
    }
    if (!inside)
        return;
#pragma unroll
    for (int s = 0; s < ZB; s++)
        if (s < zb.nz)
            zb.out[s][(size_t)i * g.w + j] = acc[s];
}

static dim3 cone_grid(const tl_cuda_geom *g)
{
    return dim3((unsigned)((g->w + CONE_BLOCK - 1) / CONE_BLOCK),
                (unsigned)((g->h + CONE_BLOCK - 1) / CONE_BLOCK));
}

/* How each entry of tl_cuda_cone_kernels (below, same order) runs. */
enum cone_source {
    FROM_WINDOW,     /* the window itself */
    FROM_TEXTURE,    /* the texture stack (cone_stack.cu) */
    FROM_TEXTURE16,  /* the texture stack in float16 (cone_stack.cu) */
    FROM_TRANSPOSED, /* the transposed stack (cone_stack.cu) */
    FROM_QUAD,       /* the float quad stack (cone_stack.cu) */
    FROM_QUAD16,     /* the float16 quad stack (cone_stack.cu) */
    FROM_MIRROR16,   /* the mirror stack (cone_stack.cu) */
};
/* k's slices per pass (tl_cuda_kernel.slices) say the z-batch's length, and the column
 * kernels' slices per lane (32 lanes; the mirror kernels' half of them mirrors). */
typedef tl_status (*cone_launch_fn)(tl_cuda_state *s, const tl_cuda_kernel *k,
                                    const tl_cuda_cone_batch *b, size_t nproj);
struct cone_impl {
    cone_launch_fn launch;
    cone_source source;
    int cols; /* column kernels: columns per warp */
    /* column kernels: of every tex + alu blocks, tex read the float16 texture stack (the
     * float one where `source` is FROM_TEXTURE) and alu the transposed stack, or the quad
     * stack `source` names (bp_cone_column.cu) */
    int tex, alu;
};
static const cone_impl *impl_of(const tl_cuda_kernel *k);

static tl_status one_launch(tl_cuda_state *s, const tl_cuda_kernel *k,
                            const tl_cuda_cone_batch *b, size_t nproj)
{
    const dim3 block(CONE_BLOCK, CONE_BLOCK);
    if (impl_of(k)->source == FROM_TEXTURE)
        bp_cone_kernel<true>
            <<<cone_grid(&b->g), block, 0, s->stream>>>(s->window, s->pitch_el, s->slab_el,
                                                        (int)s->cols, (int)s->rows, s->stack_tex,
                                                        s->d_cone, s->d_par, s->d_slot, (int)nproj,
                                                        b->g, b->out[0]);
    else
        bp_cone_kernel<false>
            <<<cone_grid(&b->g), block, 0, s->stream>>>(s->window, s->pitch_el, s->slab_el,
                                                        (int)s->cols, (int)s->rows, 0, s->d_cone,
                                                        s->d_par, s->d_slot, (int)nproj, b->g,
                                                        b->out[0]);
    TL_CUDA_LAUNCHED(s->eb, "bp_cone_kernel");
    return TL_OK;
}

template <int ZB>
static tl_status zb_launch_n(tl_cuda_state *s, const tl_cuda_kernel *k,
                             const tl_cuda_cone_batch *b, size_t nproj)
{
    cone_zbatch zb;
    zb.nz = b->nz;
    for (int i = 0; i < ZB; i++) { /* missing slices repeat the last, unwritten */
        zb.z[i] = b->z[i < b->nz ? i : b->nz - 1];
        zb.out[i] = b->out[i < b->nz ? i : b->nz - 1];
    }
    const dim3 block(CONE_BLOCK, CONE_BLOCK);
    const cone_source src = impl_of(k)->source;
    if (src == FROM_TEXTURE || src == FROM_TEXTURE16)
        bp_cone_zb_kernel<true, ZB><<<cone_grid(&b->g), block, 0, s->stream>>>(
            s->window, s->pitch_el, s->slab_el, (int)s->cols, (int)s->rows,
            src == FROM_TEXTURE ? s->stack_tex : s->stack16_tex,
            src == FROM_TEXTURE ? NULL : s->stack16_scale, s->d_cone, s->d_par, s->d_slot,
            (int)nproj, b->g, zb);
    else
        bp_cone_zb_kernel<false, ZB><<<cone_grid(&b->g), block, 0, s->stream>>>(
            s->window, s->pitch_el, s->slab_el, (int)s->cols, (int)s->rows, 0, NULL, s->d_cone,
            s->d_par, s->d_slot, (int)nproj, b->g, zb);
    TL_CUDA_LAUNCHED(s->eb, "bp_cone_zb_kernel");
    return TL_OK;
}

static tl_status zb_launch(tl_cuda_state *s, const tl_cuda_kernel *k,
                           const tl_cuda_cone_batch *b, size_t nproj)
{
    return k->slices == 16 ? zb_launch_n<16>(s, k, b, nproj) : zb_launch_n<8>(s, k, b, nproj);
}

static tl_status column_launch(tl_cuda_state *s, const tl_cuda_kernel *k,
                               const tl_cuda_cone_batch *b, size_t nproj)
{
    const cone_impl *im = impl_of(k);
    tl_cuda_cone_column_path path = {im->tex, im->alu, 0, NULL, TL_CUDA_COL_T32, false};
    if (im->tex) {
        path.stack = im->source == FROM_TEXTURE ? s->stack_tex : s->stack16_tex;
        path.scale = im->source == FROM_TEXTURE ? NULL : s->stack16_scale;
    }
    if (im->source == FROM_QUAD || im->source == FROM_QUAD16)
        path.alu = im->source == FROM_QUAD ? TL_CUDA_COL_Q32 : TL_CUDA_COL_Q16;
    path.mirror = im->source == FROM_MIRROR16;
    if (path.mirror) /* a pass of k->slices: half of them the mirrors */
        path.stack = s->stackm16_tex;
    return tl_cuda_cone_column_launch(s, k->slices / (path.mirror ? 64 : 32), im->cols, &path, b,
                                      nproj);
}

/* ---- the table ------------------------------------------------------------------------- */

const tl_cuda_kernel tl_cuda_cone_kernels[] = {
    {"cone-exact", TL_QUALITY_EXACT, 1, TL_KF_CONE,
     "16x16 threads, 1 pixel each, bilinear in (u, v) from the window (__ldg)", 0, 0, false, false,
     NULL},
    {"cone-tex", TL_QUALITY_FAST, 1, TL_KF_CONE,
     "16x16 threads, 1 pixel each, texture bilinear from the projection stack", 0, 0, false, false,
     NULL},
    {"cone-zb/8", TL_QUALITY_EXACT, 8, TL_KF_CONE,
     "16x16 threads, 8 slices each, u and w once per column, bilinear from the window", 0, 0,
     false, false, NULL},
    {"cone-tex-zb/8", TL_QUALITY_FAST, 8, TL_KF_CONE,
     "16x16 threads, 8 slices each, u and w once per column, texture from the stack", 0, 0, false,
     false, NULL},
    {"cone-col/32", TL_QUALITY_EXACT, 32, TL_KF_CONE,
     "32x8 threads, a warp per column, 1 slice per lane, bilinear from the transposed stack", 0, 0,
     false, false, NULL},
    {"cone-col/64", TL_QUALITY_EXACT, 64, TL_KF_CONE,
     "32x8 threads, a warp per column, 2 slices per lane, bilinear from the transposed stack", 0,
     0, false, false, NULL},
    {"cone-col/32x4", TL_QUALITY_EXACT, 32, TL_KF_CONE,
     "32x8 threads, a warp per 4 columns, 1 slice per lane, from the transposed stack", 0, 0,
     false, false, NULL},
    {"cone-col/64x4", TL_QUALITY_EXACT, 64, TL_KF_CONE,
     "32x8 threads, a warp per 4 columns, 2 slices per lane, from the transposed stack", 0, 0,
     false, false, NULL},
    {"cone-tex-zb/16", TL_QUALITY_FAST, 16, TL_KF_CONE,
     "16x16 threads, 16 slices each, u and w once per column, texture from the stack", 0, 0,
     false, false, NULL},
    {"cone-tex16-zb/16", TL_QUALITY_FAST, 16, TL_KF_CONE,
     "16x16 threads, 16 slices each, u and w once per column, texture from the float16 stack",
     0, 0, false, false, NULL},
    {"cone-coltex/64x4", TL_QUALITY_FAST, 64, TL_KF_CONE,
     "32x8 threads, a warp per 4 columns, 2 slices per lane, texture from the stack", 0, 0,
     false, false, NULL},
    {"cone-coltex16/64x4", TL_QUALITY_FAST, 64, TL_KF_CONE,
     "32x8 threads, a warp per 4 columns, 2 slices per lane, texture from the float16 stack", 0,
     0, false, false, NULL},
    {"cone-colhyb16-3:1/64x4", TL_QUALITY_FAST, 64, TL_KF_CONE,
     "cone-coltex16/64x4 and cone-col/64x4 blocks, 3:1 on each SM", 0, 0, false, false, NULL},
    {"cone-colq/64x4", TL_QUALITY_EXACT, 64, TL_KF_CONE,
     "32x8 threads, a warp per 4 columns, 2 slices per lane, one float4 of the quad stack", 0,
     0, false, false, NULL},
    {"cone-colhybq16-3:1/64x4", TL_QUALITY_FAST, 64, TL_KF_CONE,
     "cone-coltex16/64x4 blocks and float16 quad blocks, 3:1 on each SM", 0, 0, false, false,
     NULL},
    {"cone-colhybq16-5:1/64x4", TL_QUALITY_FAST, 64, TL_KF_CONE,
     "cone-coltex16/64x4 blocks and float16 quad blocks, 5:1 on each SM", 0, 0, false, false,
     NULL},
    {"cone-colmir16/64x4", TL_QUALITY_FAST, 64, TL_KF_CONE,
     "32x8 threads, a warp per 4 columns, 1 slice and its mirror per lane, mirror stack", 0, 0,
     false, false, NULL},
    {"cone-colmir16/128x4", TL_QUALITY_FAST, 128, TL_KF_CONE,
     "32x8 threads, a warp per 4 columns, 2 slices and their mirrors per lane, mirror stack",
     0, 0, false, false, NULL},
};
const int tl_cuda_cone_nkernels = sizeof tl_cuda_cone_kernels / sizeof *tl_cuda_cone_kernels;

static const cone_impl impls[] = {
    {one_launch, FROM_WINDOW, 0, 0, 0},
    {one_launch, FROM_TEXTURE, 0, 0, 0},
    {zb_launch, FROM_WINDOW, 0, 0, 0},
    {zb_launch, FROM_TEXTURE, 0, 0, 0},
    {column_launch, FROM_TRANSPOSED, 1, 0, 1},
    {column_launch, FROM_TRANSPOSED, 1, 0, 1},
    {column_launch, FROM_TRANSPOSED, 4, 0, 1},
    {column_launch, FROM_TRANSPOSED, 4, 0, 1},
    {zb_launch, FROM_TEXTURE, 0, 0, 0},
    {zb_launch, FROM_TEXTURE16, 0, 0, 0},
    {column_launch, FROM_TEXTURE, 4, 1, 0},
    {column_launch, FROM_TEXTURE16, 4, 1, 0},
    {column_launch, FROM_TEXTURE16, 4, 3, 1},
    {column_launch, FROM_QUAD, 4, 0, 1},
    {column_launch, FROM_QUAD16, 4, 3, 1},
    {column_launch, FROM_QUAD16, 4, 5, 1},
    {column_launch, FROM_MIRROR16, 4, 1, 0},
    {column_launch, FROM_MIRROR16, 4, 1, 0},
};
static_assert(sizeof impls / sizeof *impls ==
                  sizeof tl_cuda_cone_kernels / sizeof *tl_cuda_cone_kernels,
              "one implementation per kernel");

static const cone_impl *impl_of(const tl_cuda_kernel *k)
{
    return &impls[k - tl_cuda_cone_kernels];
}

/* ---- which slices, in which passes -------------------------------------------------------- */

static bool horizontal(const tl_bp_slice *sl)
{
    return sl->plane[2] == 0.f && sl->plane[5] == 0.f;
}

/* Two horizontal slices of the same (x, y) grid (they may differ in z only). */
static bool same_grid(const tl_bp_slice *a, const tl_bp_slice *b)
{
    const int xy[6] = {0, 1, 3, 4, 6, 7};
    if (a->height != b->height || a->width != b->width || !horizontal(a) || !horizontal(b))
        return false;
    for (int k = 0; k < 6; k++)
        if (a->plane[xy[k]] != b->plane[xy[k]])
            return false;
    return true;
}

/* (u, v) of volume point x under matrix m. */
static void cone_project(const double *m, const double x[3], double uv[2])
{
    const double w = m[8] * x[0] + m[9] * x[1] + m[10] * x[2] + m[11];
    uv[0] = (m[0] * x[0] + m[1] * x[1] + m[2] * x[2] + m[3]) / w;
    uv[1] = (m[4] * x[0] + m[5] * x[1] + m[6] * x[2] + m[7]) / w;
}

double tl_cuda_cone_voxel_pixels(const tl_bp_job *job, size_t i)
{
    if (job->nproj == 0)
        return INFINITY;
    const tl_cuda_geom g = tl_cuda_make_geom(&job->slices[i]);
    const double step = hypot(g.ax, g.ay); /* a voxel, taken as cubic */
    const double half_w = 0.5 * job->slices[i].width, half_h = 0.5 * job->slices[i].height;
    const double c[3] = {g.px + g.ax * half_w + g.bx * half_h, g.py + g.ay * half_w + g.by * half_h,
                         g.pz};
    const double *m = job->proj[0].cone;
    double at[2], moved[2], widest = 0;
    cone_project(m, c, at);
    for (int axis = 0; axis < 3; axis++) {
        double x[3] = {c[0], c[1], c[2]};
        x[axis] += step;
        cone_project(m, x, moved);
        widest = fmax(widest, fmax(fabs(moved[0] - at[0]), fabs(moved[1] - at[1])));
    }
    return widest;
}

/* The height (volume z) of the source's plane where every projection of the job sees it in
 * the detector's middle row at every corner of slice sl's grid, within MIRROR_PIXELS, with
 * the matrices rounded as the kernels see them; NAN where it does not. (v is linear in x
 * and y over w, so the corners bound the grid.) */
static double mirror_plane(const tl_bp_job *job, const tl_bp_slice *sl, uint32_t rows)
{
    const double mid = 0.5 * (rows - 1.0);
    if (job->nproj == 0)
        return NAN;
    const tl_cuda_geom g = tl_cuda_make_geom(sl);
    const double *m0 = job->proj[0].cone;
    if ((float)m0[6] == 0.f)
        return NAN;
    const double zm = (mid * (float)m0[11] - (float)m0[7]) / (float)m0[6];
    for (size_t p = 0; p < job->nproj; p++) {
        float m[12];
        for (int e = 0; e < 12; e++)
            m[e] = (float)job->proj[p].cone[e];
        for (int corner = 0; corner < 4; corner++) {
            const double j = corner & 1 ? sl->width - 1 : 0, i = corner & 2 ? sl->height - 1 : 0;
            const double x = g.px + g.ax * j + g.bx * i, y = g.py + g.ay * j + g.by * i;
            const double w = m[8] * x + m[9] * y + m[11];
            const double v = (m[4] * x + m[5] * y + m[6] * zm + m[7]) / w;
            if (w > 0 && !(fabs(v - mid) <= MIRROR_PIXELS))
                return NAN;
        }
    }
    return zm;
}

/* The slice of the job at the mirror image of slice i's height about the plane at zm,
 * on the same grid and not yet computed (s->job_done; NULL: any), else SIZE_MAX; i
 * itself where it lies in the plane. */
static size_t mirror_slice(const tl_bp_job *job, size_t i, double zm, const bool *done)
{
    const double want = 2 * zm - job->slices[i].plane[8];
    if (fabs(want - job->slices[i].plane[8]) <= MIRROR_PIXELS)
        return i;
    for (size_t j = 0; j < job->nslices; j++)
        if (j != i && !(done && done[j]) && fabs(job->slices[j].plane[8] - want) <= MIRROR_PIXELS &&
            same_grid(&job->slices[i], &job->slices[j]))
            return j;
    return SIZE_MAX;
}

size_t tl_cuda_cone_partners(const tl_bp_job *job, size_t i)
{
    size_t n = 0;
    for (size_t j = 0; j < job->nslices; j++)
        n += j == i || same_grid(&job->slices[i], &job->slices[j]);
    return n;
}

bool tl_cuda_cone_can_serve(const tl_cuda_state *s, const tl_cuda_kernel *k, const tl_bp_slice *sl,
                            const tl_bp_job *job, char *why, size_t why_len)
{
    const cone_impl *im = impl_of(k);
    const cone_source src = im->source;
    if ((src == FROM_TEXTURE || src == FROM_TEXTURE16 || src == FROM_QUAD16 ||
         src == FROM_MIRROR16 || im->tex > 0) &&
        !s->stack) {
        snprintf(why, why_len,
                 "%s needs the projection stack, which an engine of quality exact has not",
                 k->name);
        return false;
    }
    if ((src == FROM_QUAD && !s->tquad) || (src == FROM_QUAD16 && !s->tquad16)) {
        snprintf(why, why_len,
                 "%s needs the quad stacks (%.1f GiB), which were not made: they would have "
                 "left less than a quarter of the device's memory free",
                 k->name, tl_cuda_cone_quad_bytes(&s->cfg) / 1073741824.0);
        return false;
    }
    if (src == FROM_MIRROR16 && !s->stackm16) {
        snprintf(why, why_len,
                 "%s needs the mirror stack (%.1f GiB), which was not made: it would have left "
                 "less than a quarter of the device's memory free",
                 k->name, tl_cuda_cone_mirror_bytes(&s->cfg) / 1073741824.0);
        return false;
    }
    if (k->slices == 1)
        return true;
    if (!horizontal(sl)) {
        snprintf(why, why_len, "%s serves horizontal slices only (plane z components %g, %g)",
                 k->name, sl->plane[2], sl->plane[5]);
        return false;
    }
    for (size_t p = 0; p < job->nproj; p++) /* rounded as the kernel sees them */
        if ((float)job->proj[p].cone[2] != 0.f || (float)job->proj[p].cone[10] != 0.f) {
            snprintf(why, why_len,
                     "%s needs a trajectory about the z axis (projection %zu moves u or w "
                     "with z)",
                     k->name, p);
            return false;
        }
    if (src != FROM_MIRROR16)
        return true;
    const double zm = mirror_plane(job, sl, s->rows);
    if (isnan(zm)) {
        snprintf(why, why_len,
                 "%s needs the source's plane to meet the detector in its middle row (row "
                 "%.1f: offset_v 0, no tilt)",
                 k->name, 0.5 * (s->rows - 1.0));
        return false;
    }
    if (mirror_slice(job, (size_t)(sl - job->slices), zm, NULL) == SIZE_MAX) {
        snprintf(why, why_len,
                 "%s needs the slice's mirror image about the source's plane (z %g) in the "
                 "same job (this slice: z %g)",
                 k->name, 2 * zm - sl->plane[8], sl->plane[8]);
        return false;
    }
    return true;
}

/* The mirror kernels' pass from slice i: up to k->slices / 2 slices, each with its mirror
 * of the same kernel not yet computed (or none: then the slice alone). */
static tl_status mirror_job_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_bp_job *job,
                                   size_t i, const size_t *off)
{
    tl_cuda_cone_batch b;
    memset(&b, 0, sizeof b);
    b.g = tl_cuda_make_geom(&job->slices[i]);
    const double zm = mirror_plane(job, &job->slices[i], s->rows);
    for (size_t j = i; j < job->nslices && b.nz < k->slices / 2; j++) {
        if (s->job_done[j] || s->job_kernel[j] != s->job_kernel[i] ||
            (j != i && !same_grid(&job->slices[i], &job->slices[j])))
            continue;
        s->job_done[j] = true;
        const size_t m = mirror_slice(job, j, zm, s->job_done);
        b.z[b.nz] = job->slices[j].plane[8];
        b.out[b.nz] = s->out + off[j];
        if (m != SIZE_MAX && m != j && s->job_kernel[m] == s->job_kernel[i]) {
            b.mirror[b.nz] = s->out + off[m];
            s->job_done[m] = true;
        }
        b.nz++;
    }
    return impl_of(k)->launch(s, k, &b, job->nproj);
}

tl_status tl_cuda_cone_job_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_bp_job *job,
                                  size_t i, const size_t *off)
{
    if (impl_of(k)->source == FROM_MIRROR16)
        return mirror_job_launch(s, k, job, i, off);
    tl_cuda_cone_batch b;
    memset(&b, 0, sizeof b);
    b.g = tl_cuda_make_geom(&job->slices[i]);
    for (size_t j = i; j < job->nslices && b.nz < k->slices; j++) {
        if (s->job_done[j] || s->job_kernel[j] != s->job_kernel[i] ||
            (j != i && !same_grid(&job->slices[i], &job->slices[j])))
            continue;
        b.z[b.nz] = job->slices[j].plane[8];
        b.out[b.nz] = s->out + off[j];
        b.nz++;
        s->job_done[j] = true;
    }
    return impl_of(k)->launch(s, k, &b, job->nproj);
}
