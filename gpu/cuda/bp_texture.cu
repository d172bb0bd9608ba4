/* bp_texture.cu — the texture family of Chilingaryan et al. 2020, J. Real-Time Image
 * Proc. 17:1331, Sect. 5 (ARCHITECTURE.md §5): the texture unit interpolates, so every
 * kernel here is `fast` (8-bit weights).
 *   tex-std      Alg. 1 (T0), 4 pixels per thread — the in-run baseline of `tomolive bench`;
 *   tex-z        T3 + T4: Z-order within 4x4 squares, 4 projection groups per block, the
 *                groups' partial sums reduced in shared memory (Alg. 2 second mapping);
 *   tex2-lin     T1: 2 slices from one float2 texel, linear thread layout (for AP-4);
 *   tex2-z       T1 + T3 + T4;
 *   tex4h-z      T2 on Hopper: 4 slices from one 64-bit texel of four 16-bit floats, which
 *                the texture unit now filters linearly (CUDA 8 could not: the paper's T2 was
 *                nearest-neighbour on a forged float2). Values scaled per sinogram
 *                (bp_state.cu), accumulated in fp32.
 * The multi-slice kernels read a packed copy of their rows (s->pack, one texel per slot and
 * column holding 2 or 4 sinograms), written by pack_kernel before each batch: 2-4 reads of
 * the window rows, cheap next to the back projection of 2-4 slices.
 *
 * tex-std in detail:
 * 16 x 16 pixel tiles, 4 pixels per thread (below). Every thread loops over the projections and adds
 * weight * tex2D(u + 0.5, slot + 0.5): the texture unit interpolates linearly between the
 * bins around u (the +0.5 addresses texel centres, so bin j's centre is u = j) and, in
 * border mode, returns zero outside the detector, the engine's convention. The hardware
 * weights have 8 fractional bits, so the result is `fast`, not `exact` (ARCHITECTURE.md
 * §6.0: about 1e-4 relative L2 against float64; AC-3 allows 1e-3). The y coordinate
 * slot + 0.5 is a texel centre, so neighbouring slots never blend in.
 *
 * Which way the texture unit quantises the weight (round or truncate) is not documented.
 * create() measures it once with a probe on a two-texel texture; if it truncates, every
 * coordinate gets half a quantum (1/512 bin) added, which turns truncation into rounding
 * and halves the error (ARCHITECTURE.md §6.0: "8-bit weights (rounded)" vs "(truncated)").
 *
 * The per-projection constants (cos, sin, centre, weight) and each projection's texel row
 * live in __constant__ memory: all threads of a warp read the same projection at once, so
 * every read is a broadcast (ARCHITECTURE.md §5: per-projection constants are
 * warp-uniform). Windows longer than TEX_CHUNK projections take several launches that
 * accumulate into the output. The __constant__ table is one per process and device, hence
 * tl_cuda_constant_lock (one lock per device).
 *
 * Textures: one texture object per detector row, over that row's sinogram in the window
 * (pitched linear memory: width = cols, height = window slots), created once in create().
 * CUDA 12 removed texture references (ARCHITECTURE.md §7.2): objects are kernel arguments.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include <math.h>
#include <mutex>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_fp16.h>

#include "gpu/cuda/kernels.cuh"

#define TEX_TILE 16    /* a block covers 16 x 16 pixels (Alg. 1's block) ... */
#define TEX_PIX 4      /* ... with 16 x 4 threads of 4 pixels each (rows i, i+4, i+8, i+12) */
#define TEX_CHUNK 2048 /* projections per launch: 2048 x 20 bytes of __constant__ */

__constant__ float4 c_tex_par[TEX_CHUNK]; /* cos, sin, centre, weight */
__constant__ float c_tex_row[TEX_CHUNK];  /* texel y of the projection's slot: slot + 0.5 */

static std::mutex constant_mutex[TL_CUDA_MAX_DEVICES];

void tl_cuda_constant_lock(int device)
{
    constant_mutex[(unsigned)device % TL_CUDA_MAX_DEVICES].lock();
}

void tl_cuda_constant_unlock(int device)
{
    constant_mutex[(unsigned)device % TL_CUDA_MAX_DEVICES].unlock();
}

/* Alg. 1 with one pixel per thread keeps one fetch in flight per warp: the add that
 * consumes it stalls the warp (in-order issue) before the next projection's fetch, and
 * on the H100 the kernel is bound by texture latency, not by the filter rate (Nsight
 * Compute: the texture pipe less than half busy, warps stalled on "long scoreboard").
 * Giving each thread 4 pixels of the tile — the thread mapping of Chilingaryan et al.
 * 2020, Sect. 5.6 (T4, "more work per thread") — puts 4 independent fetches in flight
 * per projection and reuses its constants 4 times, which brings it close to the card's
 * texture filter rate (figures: BENCHMARKS.md). Each pixel still sums its projections
 * in order with the same arithmetic as the one-pixel kernel. */
__global__ void __launch_bounds__(TEX_TILE *TEX_TILE / TEX_PIX)
    bp_tex_kernel(cudaTextureObject_t tex, tl_cuda_geom g, int nproj, float xoff, int accumulate,
                  float *__restrict__ out)
{
    const int j = blockIdx.x * TEX_TILE + threadIdx.x;
    const int i0 = blockIdx.y * TEX_TILE + threadIdx.y;
    const int step = TEX_TILE / TEX_PIX;
    if (j >= g.w || i0 >= g.h)
        return;
    float x[TEX_PIX], y[TEX_PIX], acc[TEX_PIX];
#pragma unroll
    for (int m = 0; m < TEX_PIX; m++) { /* rows past the slice are computed, not written */
        x[m] = tl_geom_x(g, i0 + m * step, j);
        y[m] = tl_geom_y(g, i0 + m * step, j);
        acc[m] = 0.f;
    }
    for (int p = 0; p < nproj; p++) {
        const float4 q = c_tex_par[p];
        const float r = c_tex_row[p];
#pragma unroll
        for (int m = 0; m < TEX_PIX; m++)
            acc[m] = fmaf(q.w, tex2D<float>(tex, tl_ray_u(x[m], y[m], q) + xoff, r), acc[m]);
    }
#pragma unroll
    for (int m = 0; m < TEX_PIX; m++) {
        if (i0 + m * step >= g.h)
            break;
        float *o = out + (size_t)(i0 + m * step) * g.w + j;
        *o = accumulate ? *o + acc[m] : acc[m];
    }
}

/* Uploads projections [done, done + nb) of the job into the __constant__ table. */
static tl_status upload_chunk(tl_cuda_state *s, size_t done, size_t nb)
{
    /* device to device, ordered after the previous launch on the same stream */
    TL_CUDA(s->eb, cudaMemcpyToSymbolAsync(c_tex_par, s->d_par + done, nb * sizeof(float4), 0,
                                           cudaMemcpyDeviceToDevice, s->stream));
    TL_CUDA(s->eb, cudaMemcpyToSymbolAsync(c_tex_row, s->d_texy + done, nb * sizeof(float), 0,
                                           cudaMemcpyDeviceToDevice, s->stream));
    return TL_OK;
}

static tl_status std_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_cuda_batch *b,
                            size_t nproj)
{
    const tl_cuda_geom *g = &b->g;
    if (!s->tex_ok || b->z[0] >= s->ntex)
        return tl_fail(s->eb, TL_EINTERNAL, "texture kernel used without textures: %s",
                       s->tex_why);
    const dim3 block(TEX_TILE, TEX_TILE / TEX_PIX);
    const dim3 grid((unsigned)((g->w + TEX_TILE - 1) / TEX_TILE),
                    (unsigned)((g->h + TEX_TILE - 1) / TEX_TILE));
    size_t done = 0;
    do { /* at least one launch: an empty window still writes zeros */
        size_t nb = nproj - done < TEX_CHUNK ? nproj - done : TEX_CHUNK;
        if (nb > 0)
            TL_TRY(upload_chunk(s, done, nb));
        bp_tex_kernel<<<grid, block, 0, s->stream>>>(s->tex[b->z[0]], *g, (int)nb, s->tex_xoff,
                                                     done > 0, b->out[0]);
        TL_CUDA_LAUNCHED(s->eb, "bp_tex_kernel");
        done += nb;
    } while (done < nproj);
    return TL_OK;
}

/* ---- T3 + T4 mapping, 1, 2 or 4 slices -------------------------------------------------- */

#define TM_THREADS 256 /* a block: 16 x 16 pixels ... */
#define TM_GROUPS 4    /* ... in 4 projection groups of 64 threads, 4 pixels each */

/* What one fetch returns for NV slices (a float, float2 or the float4 of a half4 texel). */
template <int NV> struct tm_texel;
template <> struct tm_texel<1> {
    typedef float type;
};
template <> struct tm_texel<2> {
    typedef float2 type;
};
template <> struct tm_texel<4> {
    typedef float4 type;
};

__device__ __forceinline__ void tm_add(float *a, float w, float t)
{
    a[0] = fmaf(w, t, a[0]);
}
__device__ __forceinline__ void tm_add(float *a, float w, float2 t)
{
    a[0] = fmaf(w, t.x, a[0]);
    a[1] = fmaf(w, t.y, a[1]);
}
__device__ __forceinline__ void tm_add(float *a, float w, float4 t)
{
    a[0] = fmaf(w, t.x, a[0]);
    a[1] = fmaf(w, t.y, a[1]);
    a[2] = fmaf(w, t.z, a[2]);
    a[3] = fmaf(w, t.w, a[3]);
}

struct tm_outs {
    float *o[TL_CUDA_MAX_NV];
};

/* Thread t of a block: t mod 16 is its place in a 4x4 square (Z-order: 2x2 sub-squares of
 * 2x2 pixels, so 4 consecutive threads fetch within 3 bins; or row-major when !ZORD),
 * (t / 16) mod 4 the square along x (a 16 x 4 strip), t / 64 the projection group: group
 * m takes projections m, m + 4, ..., so each warp works on one projection (constants are
 * broadcasts) and 4 neighbouring projections are in flight per block (2-D locality). Each
 * thread has rows r, r + 4, r + 8, r + 12 of the 16 x 16 tile. */
template <int NV, bool ZORD>
__global__ void __launch_bounds__(TM_THREADS)
    bp_tex_multi_kernel(cudaTextureObject_t tex, tl_cuda_geom g, int nproj, float xoff,
                        int accumulate, const float *scale, tm_outs outs, int nz)
{
    __shared__ float red[TM_GROUPS - 1][TEX_TILE * TEX_TILE][NV]; /* groups 1..3 */
    const int t = threadIdx.x, m = t / 64, sq = (t / 16) % 4, zi = t % 16;
    const int px = ZORD ? (zi & 1) | ((zi >> 1) & 2) : zi % 4;
    const int py = ZORD ? ((zi >> 1) & 1) | ((zi >> 2) & 2) : zi / 4;
    const int lj = 4 * sq + px; /* column within the tile, 0..15; rows py + 4k */
    const int j = blockIdx.x * TEX_TILE + lj, ib = blockIdx.y * TEX_TILE;
    float x[TEX_PIX], y[TEX_PIX], acc[TEX_PIX][NV];
#pragma unroll
    for (int k = 0; k < TEX_PIX; k++) {
        x[k] = tl_geom_x(g, ib + py + 4 * k, j);
        y[k] = tl_geom_y(g, ib + py + 4 * k, j);
#pragma unroll
        for (int v = 0; v < NV; v++)
            acc[k][v] = 0.f;
    }
    for (int p = m; p < nproj; p += TM_GROUPS) {
        const float4 q = c_tex_par[p];
        const float r = c_tex_row[p];
#pragma unroll
        for (int k = 0; k < TEX_PIX; k++)
            tm_add(acc[k], q.w,
                   tex2D<typename tm_texel<NV>::type>(tex, tl_ray_u(x[k], y[k], q) + xoff, r));
    }
    if (m > 0)
#pragma unroll
        for (int k = 0; k < TEX_PIX; k++)
#pragma unroll
            for (int v = 0; v < NV; v++)
                red[m - 1][(py + 4 * k) * TEX_TILE + lj][v] = acc[k][v];
    __syncthreads();
    if (m > 0)
        return;
#pragma unroll
    for (int k = 0; k < TEX_PIX; k++) {
        const int i = ib + py + 4 * k, l = (py + 4 * k) * TEX_TILE + lj;
        if (i >= g.h || j >= g.w)
            continue;
#pragma unroll
        for (int v = 0; v < NV; v++) {
            if (v >= nz)
                break;
            /* the same order for every slice count: group 0, then 1, 2, 3 */
            float a = ((acc[k][v] + red[0][l][v]) + red[1][l][v]) + red[2][l][v];
            if (NV == 4)
                a /= scale[v];
            float *o = outs.o[v] + (size_t)i * g.w + j;
            *o = accumulate ? *o + a : a;
        }
    }
}

/* Interleaves rows z[0..nv-1] of the window (the last repeated) into s->pack: float2 texels
 * for 2 slices, half4 texels (scaled) for 4. */
template <int NV>
__global__ void pack_kernel(tl_cuda_rows rows, size_t pitch_el, int W, int n, void *pack,
                            size_t pack_pitch, const float *scale)
{
    const size_t total = (size_t)n * W;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x) {
        const size_t slot = k / W, col = k - slot * W, src = slot * pitch_el + col;
        char *dst = (char *)pack + slot * pack_pitch;
        if (NV == 2) {
            ((float2 *)dst)[col] = make_float2(rows.row[0][src], rows.row[1][src]);
        } else {
            __half2 *d = (__half2 *)dst + 2 * col;
            d[0] = __floats2half2_rn(rows.row[0][src] * scale[0], rows.row[1][src] * scale[1]);
            d[1] = __floats2half2_rn(rows.row[2][src] * scale[2], rows.row[3][src] * scale[3]);
        }
    }
}

template <int NV, bool ZORD>
static tl_status multi_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_cuda_batch *b,
                              size_t nproj)
{
    const tl_cuda_geom *g = &b->g;
    cudaTextureObject_t tex = 0;
    if (NV == 1) {
        if (!s->tex_ok || b->z[0] >= s->ntex)
            return tl_fail(s->eb, TL_EINTERNAL, "%s used without textures: %s", k->name,
                           s->tex_why);
        tex = s->tex[b->z[0]];
    } else {
        if (!s->pack)
            return tl_fail(s->eb, TL_EINTERNAL, "%s used without its packed texture", k->name);
        if (NV == 4)
            TL_TRY(tl_cuda_half_scales(s, b, nproj));
        tl_cuda_rows rows = tl_cuda_batch_rows(s, b);
        pack_kernel<NV>
            <<<tl_cuda_elem_grid((size_t)s->n * s->cols), TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(
                rows, s->pitch_el, (int)s->cols, (int)s->n, s->pack, s->sz.pack_pitch, s->d_scale);
        TL_CUDA_LAUNCHED(s->eb, "pack_kernel");
        tex = NV == 2 ? s->tex_pack2 : s->tex_pack4h;
    }
    tm_outs outs;
    for (int v = 0; v < TL_CUDA_MAX_NV; v++)
        outs.o[v] = b->out[v < b->nz ? v : 0];
    const dim3 grid((unsigned)((g->w + TEX_TILE - 1) / TEX_TILE),
                    (unsigned)((g->h + TEX_TILE - 1) / TEX_TILE));
    size_t done = 0;
    do {
        size_t nb = nproj - done < TEX_CHUNK ? nproj - done : TEX_CHUNK;
        if (nb > 0)
            TL_TRY(upload_chunk(s, done, nb));
        bp_tex_multi_kernel<NV, ZORD><<<grid, TM_THREADS, 0, s->stream>>>(tex, *g, (int)nb,
                                                                          s->tex_xoff, done > 0,
                                                                          s->d_scale, outs, b->nz);
        TL_CUDA_LAUNCHED(s->eb, "bp_tex_multi_kernel");
        done += nb;
    } while (done < nproj);
    return TL_OK;
}

#define TEXK(NAME, NV, PACK, PARAMS, FN)                                   \
    {                                                                      \
        NAME, TL_QUALITY_FAST, NV, TL_KF_TEX, PARAMS, 0, 0, true, PACK, FN \
    }

const tl_cuda_kernel tl_cuda_tex_kernels[] = {
    TEXK("tex-std", 1, false, "Alg. 1: 16x16 pixels, 16x4 threads of 4 pixels, float texels",
         std_launch),
    TEXK("tex-z", 1, false, "Z-order 4x4, 4 projection groups, 4 px/thread, float texels",
         (multi_launch<1, true>)),
    TEXK("tex2-lin", 2, true, "2 slices, float2 texels, row-major threads, 4 projection groups",
         (multi_launch<2, false>)),
    TEXK("tex2-z", 2, true, "2 slices, float2 texels, Z-order 4x4, 4 projection groups",
         (multi_launch<2, true>)),
    TEXK("tex4h-z", 4, true, "4 slices, half4 texels (linear), Z-order 4x4, 4 projection groups",
         (multi_launch<4, true>)),
};
const int tl_cuda_tex_nkernels = sizeof tl_cuda_tex_kernels / sizeof *tl_cuda_tex_kernels;

/* ---- texture objects --------------------------------------------------------------------- */

void tl_cuda_tex_destroy(tl_cuda_state *s)
{
    for (uint32_t r = 0; r < s->ntex; r++)
        cudaDestroyTextureObject(s->tex[r]);
    free(s->tex);
    s->tex = NULL;
    s->ntex = 0;
    s->tex_ok = false;
    if (s->tex_pack2)
        cudaDestroyTextureObject(s->tex_pack2);
    if (s->tex_pack4h)
        cudaDestroyTextureObject(s->tex_pack4h);
    s->tex_pack2 = s->tex_pack4h = 0;
}

/* Why the window cannot be textured on this device ("" when it can). */
static void tex_limits(const tl_cuda_state *s, char *why, size_t len)
{
    why[0] = '\0';
    if (s->cols > (uint32_t)s->max_tex2d_linear[0])
        snprintf(why, len, "%u detector columns exceed the 2-D linear texture width %d", s->cols,
                 s->max_tex2d_linear[0]);
    else if (s->n > (uint32_t)s->max_tex2d_linear[1])
        snprintf(why, len, "a window of %u projections exceeds the 2-D linear texture height %d",
                 s->n, s->max_tex2d_linear[1]);
    else if (s->sz.pitch > (size_t)s->max_tex2d_linear[2])
        snprintf(why, len, "row pitch %zu exceeds the 2-D linear texture pitch %d", s->sz.pitch,
                 s->max_tex2d_linear[2]);
    else if (s->sz.pitch % s->tex_pitch_align || s->sz.slab % s->tex_align ||
             (uintptr_t)s->window % s->tex_align)
        snprintf(why, len, "window not aligned for textures");
}

static void texture_desc(cudaTextureDesc *td)
{
    memset(td, 0, sizeof *td);
    td->addressMode[0] = cudaAddressModeBorder; /* zero outside the detector ... */
    td->addressMode[1] = cudaAddressModeBorder; /* ... and outside the window */
    td->filterMode = cudaFilterModeLinear;
    td->readMode = cudaReadModeElementType;
    td->normalizedCoords = 0; /* border colour: memset to 0 */
}

static cudaResourceDesc pitch2d(void *base, uint32_t width, uint32_t height, size_t pitch,
                                cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>())
{
    cudaResourceDesc rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypePitch2D;
    rd.res.pitch2D.devPtr = base;
    rd.res.pitch2D.desc = desc;
    rd.res.pitch2D.width = width;
    rd.res.pitch2D.height = height;
    rd.res.pitch2D.pitchInBytes = pitch;
    return rd;
}

/* Texels 0 and 1 hold 0 and 1, so a fetch between them returns the weight itself. */
__global__ void tex_probe_kernel(cudaTextureObject_t tex, float *out)
{
    out[0] = tex2D<float>(tex, 0.5f + 0.75f / 256.f, 0.5f); /* 3/4 of a weight quantum */
}

/* Measures the weight quantisation on a scratch texture (s->scratch, row 0) and sets
 * tex_xoff. Runs once, in create(), before any frame: scratch and out are free. */
static tl_status probe_rounding(tl_cuda_state *s)
{
    s->tex_xoff = 0.5f;
    s->tex_rule = "unknown";
    if (s->cols < 2 || (uintptr_t)s->scratch % s->tex_align)
        return TL_OK; /* nothing to probe with: plain Alg. 1 coordinates */
    static const float texels[2] = {0.f, 1.f};
    TL_CUDA(s->eb, cudaMemsetAsync(s->scratch, 0, s->sz.pitch, s->stream));
    TL_CUDA(s->eb,
            cudaMemcpyAsync(s->scratch, texels, sizeof texels, cudaMemcpyHostToDevice, s->stream));
    cudaTextureDesc td;
    texture_desc(&td);
    cudaResourceDesc rd = pitch2d(s->scratch, s->cols, 1, s->sz.pitch);
    cudaTextureObject_t t = 0;
    TL_CUDA(s->eb, cudaCreateTextureObject(&t, &rd, &td, NULL));
    tex_probe_kernel<<<1, 1, 0, s->stream>>>(t, s->out);
    cudaError_t e = cudaGetLastError();
    float w = -1.f;
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(&w, s->out, sizeof w, cudaMemcpyDeviceToHost, s->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s->stream);
    cudaDestroyTextureObject(t);
    if (e != cudaSuccess)
        return tl_cuda_fail_call(s->eb, e, "texture weight probe (tex_probe_kernel)", __FILE__,
                                 __LINE__);
    if (w == 0.f) { /* 0.75 quantum truncated to 0: add half a quantum to every coordinate */
        s->tex_rule = "truncate";
        s->tex_xoff = 0.5f + 0.5f / 256.f;
    } else if (fabsf(w - 1.f / 256.f) < 1e-6f) {
        s->tex_rule = "round";
    }
    return TL_OK;
}

/* The packed texture of the multi-slice kernels, when its pitch fits the device's limit
 * (else they cannot serve, like tex-std without textures). */
static tl_status pack_create(tl_cuda_state *s)
{
    if (s->sz.pack_pitch > (size_t)s->max_tex2d_linear[2])
        return TL_OK;
    TL_TRY(tl_cuda_alloc(s, &s->pack, s->sz.pack, "packed multi-slice texture"));
    TL_CUDA(s->eb, cudaMemsetAsync(s->pack, 0, s->sz.pack, s->stream));
    cudaTextureDesc td;
    texture_desc(&td);
    cudaResourceDesc rd =
        pitch2d(s->pack, s->cols, s->n, s->sz.pack_pitch, cudaCreateChannelDesc<float2>());
    TL_CUDA(s->eb, cudaCreateTextureObject(&s->tex_pack2, &rd, &td, NULL));
    rd = pitch2d(s->pack, s->cols, s->n, s->sz.pack_pitch, cudaCreateChannelDescHalf4());
    TL_CUDA(s->eb, cudaCreateTextureObject(&s->tex_pack4h, &rd, &td, NULL));
    return TL_OK;
}

tl_status tl_cuda_tex_create(tl_cuda_state *s)
{
    s->tex_ok = false;
    tex_limits(s, s->tex_why, sizeof s->tex_why);
    if (s->tex_why[0])
        return TL_OK; /* tex-std cannot serve this scan; the other kernels can */
    s->tex = (cudaTextureObject_t *)calloc(s->rows, sizeof *s->tex);
    if (!s->tex)
        return tl_fail(s->eb, TL_ENOMEM, "out of memory for %u texture objects", s->rows);

    cudaTextureDesc td;
    texture_desc(&td);
    for (uint32_t r = 0; r < s->rows; r++) {
        cudaResourceDesc rd =
            pitch2d(s->window + (size_t)r * s->slab_el, s->cols, s->n, s->sz.pitch);
        TL_CUDA(s->eb, cudaCreateTextureObject(&s->tex[r], &rd, &td, NULL));
        s->ntex = r + 1;
    }
    TL_TRY(probe_rounding(s));
    s->tex_ok = true;
    return pack_create(s);
}
