/* bp_cone.cu — "cone-exact": cone-beam back projection (FDK) of arbitrary planes, the
 * baseline of the cone-beam kernel family (issue #21). Quality mode `exact`.
 *
 * Pixel-driven, as the voxel-driven back projection of Feldkamp, Davis and Kress (JOSA A
 * 1(6):612, 1984, Eq. 5) and of RTK's kernel_fdk_3Dgrid: every output pixel has a volume
 * position (x, y, z); each projection's 3x4 matrix (backend.h, tl_bp_proj.cone) takes it to
 * detector (u, v) and relative depth w, and the filtered projection is interpolated
 * bilinearly there and weighed 1 / w^2 (tl_cone_sample, bp_common.cuh: the CPU backend's
 * rule in exact fp32 arithmetic). Unlike RTK it reads the rolling window where it lies,
 * through the read-only data cache (__ldg), instead of a layered texture filled per batch,
 * so a projection is back-projected the moment it is stored. One thread per pixel in
 * 16 x 16 blocks; each block stages the matrices of CONE_CHUNK projections at a time in
 * shared memory, as RTK keeps its matrices in constant memory.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include "gpu/cuda/kernels.cuh"

#define CONE_BLOCK 16 /* 16 x 16 threads, one pixel each */
#define CONE_CHUNK 64 /* projections whose matrices a block holds at once */

__global__ void __launch_bounds__(CONE_BLOCK *CONE_BLOCK)
    bp_cone_kernel(const float *__restrict__ window, size_t pitch_el, size_t slab_el, int W, int H,
                   const float *__restrict__ cone, const float4 *__restrict__ par,
                   const int *__restrict__ slot, int nproj, tl_cuda_geom g, float *__restrict__ out)
{
    __shared__ float m[CONE_CHUNK][12];
    __shared__ float weight[CONE_CHUNK];
    __shared__ int where[CONE_CHUNK];
    const int tid = threadIdx.y * CONE_BLOCK + threadIdx.x;
    const int j = blockIdx.x * CONE_BLOCK + threadIdx.x;
    const int i = blockIdx.y * CONE_BLOCK + threadIdx.y;
    const bool inside = i < g.h && j < g.w;
    const float x = tl_geom_x(g, i, j), y = tl_geom_y(g, i, j), z = tl_geom_z(g, i, j);
    float acc = 0.f;
    for (int p0 = 0; p0 < nproj; p0 += CONE_CHUNK) {
        const int nc = nproj - p0 < CONE_CHUNK ? nproj - p0 : CONE_CHUNK;
        __syncthreads(); /* the previous chunk is no longer read */
        for (int t = tid; t < nc * 12; t += CONE_BLOCK * CONE_BLOCK)
            m[t / 12][t % 12] = __ldg(cone + (size_t)p0 * 12 + t);
        for (int t = tid; t < nc; t += CONE_BLOCK * CONE_BLOCK) {
            weight[t] = __ldg(par + p0 + t).w;
            where[t] = __ldg(slot + p0 + t);
        }
        __syncthreads();
        if (!inside)
            continue;
        for (int k = 0; k < nc; k++)
            acc = fmaf(weight[k],
                       tl_cone_sample(window, pitch_el, slab_el, W, H, m[k], where[k], x, y, z),
                       acc);
    }
    if (inside)
        out[(size_t)i * g.w + j] = acc;
}

static tl_status cone_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_cuda_batch *b,
                             size_t nproj)
{
    (void)k;
    const tl_cuda_geom *g = &b->g;
    const dim3 block(CONE_BLOCK, CONE_BLOCK);
    const dim3 grid((unsigned)((g->w + CONE_BLOCK - 1) / CONE_BLOCK),
                    (unsigned)((g->h + CONE_BLOCK - 1) / CONE_BLOCK));
    bp_cone_kernel<<<grid, block, 0, s->stream>>>(s->window, s->pitch_el, s->slab_el,
                                                  (int)s->cols, (int)s->rows, s->d_cone, s->d_par,
                                                  s->d_slot, (int)nproj, *g, b->out[0]);
    TL_CUDA_LAUNCHED(s->eb, "bp_cone_kernel");
    return TL_OK;
}

const tl_cuda_kernel tl_cuda_cone_kernels[] = {
    {"cone-exact", TL_QUALITY_EXACT, 1, TL_KF_CONE,
     "16x16 threads, 1 pixel each, matrices in shared memory, bilinear in (u, v), __ldg reads",
     0, 0, false, false, cone_launch},
};
const int tl_cuda_cone_nkernels = 1;
