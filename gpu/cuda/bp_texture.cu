/* bp_texture.cu — "tex-std": the standard texture back-projection kernel of seed 000,
 * Algorithm 1 (seed-000-001.md §2.1 T0 and §2.2). Quality mode `fast`.
 *
 * 16 x 16 pixel tiles, 4 pixels per thread (below). Every thread loops over the projections and adds
 * weight * tex2D(u + 0.5, slot + 0.5): the texture unit interpolates linearly between the
 * bins around u (the +0.5 addresses texel centres, so bin j's centre is u = j) and, in
 * border mode, returns zero outside the detector, the engine's convention. The hardware
 * weights have 8 fractional bits, so the result is `fast`, not `exact` (§6.0: about 1e-4
 * relative L2 against float64; AC-3 allows 1e-3). The y coordinate slot + 0.5 is a texel
 * centre, so neighbouring slots never blend in.
 *
 * Which way the texture unit quantises the weight (round or truncate) is not documented.
 * create() measures it once with a probe on a two-texel texture; if it truncates, every
 * coordinate gets half a quantum (1/512 bin) added, which turns truncation into rounding
 * and halves the error (seed-000-001.md §6.0: "8-bit weights (rounded)" vs "(truncated)").
 *
 * The per-projection constants (cos, sin, centre, weight) and each projection's texel row
 * live in __constant__ memory: all threads of a warp read the same projection at once, so
 * every read is a broadcast (§0, "keep per-projection constants warp-uniform"). Windows
 * longer than TEX_CHUNK projections take several launches that accumulate into the output.
 * The __constant__ table is one per process and device, hence tl_cuda_constant_lock.
 *
 * Textures: one texture object per detector row, over that row's sinogram in the window
 * (pitched linear memory: width = cols, height = window slots), created once in create().
 * CUDA 12 removed texture references (§7 item 9): objects are kernel arguments.
 */
#include "config.h"

#include "gpu/backend.h"

#include <math.h>
#include <mutex>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/bp_common.cuh"

#define TEX_TILE 16      /* a block covers 16 x 16 pixels (Alg. 1's block) ... */
#define TEX_PIX 4        /* ... with 16 x 4 threads of 4 pixels each (rows i, i+4, i+8, i+12) */
#define TEX_CHUNK 2048   /* projections per launch: 2048 x 20 bytes of __constant__ */

__constant__ float4 c_tex_par[TEX_CHUNK]; /* cos, sin, centre, weight */
__constant__ float c_tex_row[TEX_CHUNK];  /* texel y of the projection's slot: slot + 0.5 */

static std::mutex constant_mutex;

void tl_cuda_constant_lock(void)
{
    constant_mutex.lock();
}

void tl_cuda_constant_unlock(void)
{
    constant_mutex.unlock();
}

/* Alg. 1 with one pixel per thread keeps one fetch in flight per warp: the add that
 * consumes it stalls the warp (in-order issue) before the next projection's fetch, and
 * on the H100 the kernel is bound by texture latency, not by the filter rate (Nsight
 * Compute: texture pipe 42 % busy, warps stalled on "long scoreboard"; 0.26-0.43 T
 * updates/s). Giving each thread 4 pixels of the tile — the thread mapping of seed 000
 * Sect. 5.6 (T4, "more work per thread") — puts 4 independent fetches in flight per
 * projection and reuses its constants 4 times: 1.01 T updates/s in a stand-alone test at
 * 2048^2 x 2048, 97 % of the H100's 1.05 T texels/s. Each pixel still sums its projections
 * in order with the same arithmetic as the one-pixel kernel. */
__global__ void __launch_bounds__(TEX_TILE * TEX_TILE / TEX_PIX)
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

tl_status tl_cuda_bp_texture(tl_cuda_state *s, const tl_cuda_geom *g, uint32_t z, size_t nproj,
                             float *out)
{
    if (!s->tex_ok || z >= s->ntex)
        return tl_fail(s->eb, TL_EINTERNAL, "texture kernel used without textures: %s",
                       s->tex_why);
    const dim3 block(TEX_TILE, TEX_TILE / TEX_PIX);
    const dim3 grid((unsigned)((g->w + TEX_TILE - 1) / TEX_TILE),
                    (unsigned)((g->h + TEX_TILE - 1) / TEX_TILE));
    size_t done = 0;
    do { /* at least one launch: an empty window still writes zeros */
        size_t nb = nproj - done < TEX_CHUNK ? nproj - done : TEX_CHUNK;
        if (nb > 0) {
            /* device to device, ordered after the previous launch on the same stream */
            TL_CUDA(s->eb, cudaMemcpyToSymbolAsync(c_tex_par, s->d_par + done,
                                                   nb * sizeof(float4), 0,
                                                   cudaMemcpyDeviceToDevice, s->stream));
            TL_CUDA(s->eb, cudaMemcpyToSymbolAsync(c_tex_row, s->d_texy + done,
                                                   nb * sizeof(float), 0,
                                                   cudaMemcpyDeviceToDevice, s->stream));
        }
        bp_tex_kernel<<<grid, block, 0, s->stream>>>(s->tex[z], *g, (int)nb, s->tex_xoff,
                                                     done > 0, out);
        TL_CUDA_LAUNCHED(s->eb, "bp_tex_kernel");
        done += nb;
    } while (done < nproj);
    return TL_OK;
}

/* ---- texture objects --------------------------------------------------------------------- */

void tl_cuda_tex_destroy(tl_cuda_state *s)
{
    for (uint32_t r = 0; r < s->ntex; r++)
        cudaDestroyTextureObject(s->tex[r]);
    free(s->tex);
    s->tex = NULL;
    s->ntex = 0;
    s->tex_ok = false;
}

/* Why the window cannot be textured on this device ("" when it can). */
static void tex_limits(const tl_cuda_state *s, char *why, size_t len)
{
    why[0] = '\0';
    if (s->cols > (uint32_t)s->max_tex2d_linear[0])
        snprintf(why, len, "%u detector columns exceed the 2-D linear texture width %d",
                 s->cols, s->max_tex2d_linear[0]);
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

static cudaResourceDesc pitch2d(float *base, uint32_t width, uint32_t height, size_t pitch)
{
    cudaResourceDesc rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypePitch2D;
    rd.res.pitch2D.devPtr = base;
    rd.res.pitch2D.desc = cudaCreateChannelDesc<float>();
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
    TL_CUDA(s->eb, cudaMemcpyAsync(s->scratch, texels, sizeof texels, cudaMemcpyHostToDevice,
                                   s->stream));
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
        cudaResourceDesc rd = pitch2d(s->window + (size_t)r * s->slab_el, s->cols, s->n,
                                      s->sz.pitch);
        TL_CUDA(s->eb, cudaCreateTextureObject(&s->tex[r], &rd, &td, NULL));
        s->ntex = r + 1;
    }
    TL_TRY(probe_rounding(s));
    s->tex_ok = true;
    return TL_OK;
}
