/* bp_alu.cu — "alu-exact": the ALU / shared-memory back-projection kernel of seed 000,
 * Algorithm 6 (seed-000-001.md §2.1 A1 and §2.3 A0/A1). Quality mode `exact`.
 *
 * A block owns a 32 x 32 pixel tile (n_s = 32) with 32 x 8 threads; each thread owns 4
 * pixels of one column, rows ty, ty + 8, ty + 16, ty + 24 (n_q = 4). Projections are taken
 * ALU_SD (s_d) at a time, in two phases separated by barriers:
 *   1. cache: for each of the s_d projections, the bins the tile can touch, from
 *      floor(min u over the tile's corners) - 1 onwards, are copied from the sinogram into
 *      shared memory with coalesced loads (consecutive threads, consecutive bins); bins
 *      outside the detector are stored as 0, which is the zero-outside rule;
 *   2. compute: every thread interpolates its pixels from the cache with the ALUs, in
 *      exact fp32 (a + f (b - a)), weighted, into register accumulators.
 * The cache width (bins per projection) is computed on the host from the slice's pixel
 * spacing and the job's angles: the tile spans at most 31 (|du/dj| + |du/di|) bins, i.e.
 * 1.5 n_s for unit pixels (§2.3 A0), plus a margin for the floor and for rounding; the
 * index is also clamped, so no rounding can ever read outside the cache.
 * Pixel positions and u use bp_common.cuh's helpers, so this kernel and plane-exact put
 * every pixel at the same u and agree to the last bit on horizontal slices.
 */
#include "config.h"

#include "gpu/backend.h"

#include <math.h>

#include "gpu/cuda/bp_common.cuh"

#define ALU_TILE 32                      /* n_s: tile side in pixels */
#define ALU_THREADS_Y 8                  /* threads per tile column */
#define ALU_NQ (ALU_TILE / ALU_THREADS_Y) /* n_q: pixels per thread */
#define ALU_THREADS (ALU_TILE * ALU_THREADS_Y)
#define ALU_SD 16                        /* s_d: projections cached per round */
#define ALU_MARGIN 4                     /* extra bins: floor, the b neighbour, rounding */
#define ALU_MAX_CACHE_WIDTH 512          /* bins: ALU_SD x 512 x 4 B = 32 KiB of shared memory */
#define ALU_FAR 1e9f                     /* |first bin| bound, far beyond any detector */

__global__ void __launch_bounds__(ALU_THREADS)
bp_alu_kernel(const float *__restrict__ sino, size_t pitch_el, int W,
              const float4 *__restrict__ par, const int *__restrict__ slot, int nproj,
              tl_cuda_geom g, int cw, float *__restrict__ out)
{
    extern __shared__ float cache[];          /* [ALU_SD][cw] */
    __shared__ float4 s_par[ALU_SD];          /* cos, sin, centre, weight */
    __shared__ float s_first[ALU_SD];         /* bin of cache column 0 (an integer) */
    __shared__ const float *s_row[ALU_SD];    /* the projection's sinogram row */

    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * ALU_TILE + tx;
    const int j0 = blockIdx.x * ALU_TILE, i0 = blockIdx.y * ALU_TILE;
    const int j = j0 + tx;
    float x[ALU_NQ], y[ALU_NQ], acc[ALU_NQ];
#pragma unroll
    for (int q = 0; q < ALU_NQ; q++) {
        const int i = i0 + ty + q * ALU_THREADS_Y;
        x[q] = tl_geom_x(g, i, j);
        y[q] = tl_geom_y(g, i, j);
        acc[q] = 0.f;
    }

    for (int pb = 0; pb < nproj; pb += ALU_SD) {
        const int nb = nproj - pb < ALU_SD ? nproj - pb : ALU_SD;
        /* phase 1a: per projection, the first bin the tile needs */
        if (tid < nb) {
            const float4 q = par[pb + tid];
            const int i1 = i0 + ALU_TILE - 1, j1 = j0 + ALU_TILE - 1;
            const float u00 = tl_ray_u(tl_geom_x(g, i0, j0), tl_geom_y(g, i0, j0), q);
            const float u01 = tl_ray_u(tl_geom_x(g, i0, j1), tl_geom_y(g, i0, j1), q);
            const float u10 = tl_ray_u(tl_geom_x(g, i1, j0), tl_geom_y(g, i1, j0), q);
            const float u11 = tl_ray_u(tl_geom_x(g, i1, j1), tl_geom_y(g, i1, j1), q);
            const float umin = fminf(fminf(u00, u01), fminf(u10, u11));
            s_par[tid] = q;
            /* one bin of margin below; clamped so that far-off tiles stay in int range */
            s_first[tid] = fminf(fmaxf(floorf(umin) - 1.f, -ALU_FAR), ALU_FAR);
            s_row[tid] = sino + (size_t)slot[pb + tid] * pitch_el;
        }
        __syncthreads();
        /* phase 1b: the bins, coalesced; zero outside the detector */
        for (int k = tid; k < nb * cw; k += ALU_THREADS) {
            const int pp = k / cw, bin = (int)s_first[pp] + (k - pp * cw);
            cache[k] = bin >= 0 && bin < W ? s_row[pp][bin] : 0.f;
        }
        __syncthreads();
        /* phase 2: exact linear interpolation from the cache */
        for (int pi = 0; pi < nb; pi++) {
            const float4 q = s_par[pi];
            const float first = s_first[pi], last = (float)(cw - 2);
            const float *c = cache + pi * cw;
#pragma unroll
            for (int k = 0; k < ALU_NQ; k++) {
                const float u = tl_ray_u(x[k], y[k], q);
                const float fl = floorf(u);
                /* exact: both are integers far below 2^24; the clamp only guards memory */
                const int idx = (int)fminf(fmaxf(fl - first, 0.f), last);
                acc[k] = fmaf(q.w, tl_lerp(c[idx], c[idx + 1], u - fl), acc[k]);
            }
        }
        __syncthreads(); /* the cache is refilled next round */
    }

    if (j >= g.w)
        return;
#pragma unroll
    for (int q = 0; q < ALU_NQ; q++) {
        const int i = i0 + ty + q * ALU_THREADS_Y;
        if (i < g.h)
            out[(size_t)i * g.w + j] = acc[q];
    }
}

int tl_cuda_alu_cache_width(const tl_cuda_geom *g, const tl_bp_job *job)
{
    double span = 0;
    for (size_t k = 0; k < job->nproj; k++) {
        double c = job->proj[k].cos_t, s = job->proj[k].sin_t;
        double duj = (double)g->ax * c - (double)g->ay * s; /* per output column */
        double dui = (double)g->bx * c - (double)g->by * s; /* per output row */
        double sp = (ALU_TILE - 1) * (fabs(duj) + fabs(dui));
        if (sp > span)
            span = sp;
    }
    double cw = ceil(span) + ALU_MARGIN;
    return cw <= ALU_MAX_CACHE_WIDTH ? (int)cw : 0;
}

tl_status tl_cuda_bp_alu(tl_cuda_state *s, const tl_cuda_geom *g, uint32_t z, size_t nproj,
                         int cache_width, float *out)
{
    if (cache_width < 2 || cache_width > ALU_MAX_CACHE_WIDTH)
        return tl_fail(s->eb, TL_EINTERNAL, "ALU kernel cache width %d", cache_width);
    const dim3 block(ALU_TILE, ALU_THREADS_Y);
    const dim3 grid((unsigned)((g->w + ALU_TILE - 1) / ALU_TILE),
                    (unsigned)((g->h + ALU_TILE - 1) / ALU_TILE));
    const size_t shmem = (size_t)ALU_SD * cache_width * sizeof(float);
    bp_alu_kernel<<<grid, block, shmem, s->stream>>>(s->window + (size_t)z * s->slab_el,
                                                    s->pitch_el, (int)s->cols, s->d_par,
                                                    s->d_slot, (int)nproj, *g, cache_width,
                                                    out);
    TL_CUDA_LAUNCHED(s->eb, "bp_alu_kernel");
    return TL_OK;
}
