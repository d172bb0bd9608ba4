/* bp_plane.cu — "plane-exact": back projection of arbitrary planes (engine.h, RECAST3D
 * convention; ARCHITECTURE.md §3.2). Quality mode `exact`; serves every slice.
 *
 * Chilingaryan et al. 2020, J. Real-Time Image Proc. 17:1331, treat horizontal slices
 * only; their pixel-driven scheme (Eq. 1 and Alg. 1) carries over to planes: every pixel
 * has a volume position (x, y, z), hits detector column u = center + x cos - y sin and row
 * v = z, and is interpolated bilinearly in exact fp32 arithmetic — linearly between bins
 * along u within the two detector rows around z, then linearly between those rows — with
 * zero outside the detector in both directions. This is exactly the CPU backend's rule
 * (tl_cpu_bp_row in gpu/cpu/kernels_impl.h), including the shortcut for integer z, where
 * only one row is read. One thread per pixel in 16 x 16 blocks; sinogram values are read
 * from global memory through the read-only data cache (__ldg): neighbouring pixels read
 * neighbouring bins.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include "gpu/cuda/kernels.cuh"

#define PLANE_BLOCK 16 /* 16 x 16 threads, one pixel each */

__global__ void __launch_bounds__(PLANE_BLOCK *PLANE_BLOCK)
    bp_plane_kernel(const float *__restrict__ window, size_t pitch_el, size_t slab_el, int W,
                    int H, const float4 *__restrict__ par, const int *__restrict__ slot, int nproj,
                    tl_cuda_geom g, float *__restrict__ out)
{
    const int j = blockIdx.x * PLANE_BLOCK + threadIdx.x;
    const int i = blockIdx.y * PLANE_BLOCK + threadIdx.y;
    if (i >= g.h || j >= g.w)
        return;
    const float x = tl_geom_x(g, i, j), y = tl_geom_y(g, i, j), z = tl_geom_z(g, i, j);
    float acc = 0.f;
    if (z > -1.f && z < (float)H) { /* else the pixel is above or below the detector: 0 */
        const float fl = floorf(z);
        const int r0 = (int)fl;
        const float gz = z - fl;
        /* row r0 (absent above the detector) and, only when z is not a row, row r0 + 1 */
        const float *row0 = r0 >= 0 ? window + (size_t)r0 * slab_el : nullptr;
        const float *row1 =
            gz != 0.f && r0 + 1 < H ? window + (size_t)(r0 + 1) * slab_el : nullptr;
        for (int p = 0; p < nproj; p++) {
            const float4 q = __ldg(par + p);
            const size_t so = (size_t)__ldg(slot + p) * pitch_el;
            const float u = tl_ray_u(x, y, q);
            const float a = row0 ? tl_sample_row(row0 + so, W, u) : 0.f;
            const float b = row1 ? tl_sample_row(row1 + so, W, u) : 0.f;
            acc = fmaf(q.w, tl_lerp(a, b, gz), acc);
        }
    }
    out[(size_t)i * g.w + j] = acc;
}

static tl_status plane_launch(tl_cuda_state *s, const tl_cuda_kernel *k, const tl_cuda_batch *b,
                              size_t nproj)
{
    const tl_cuda_geom *g = &b->g;
    const dim3 block(PLANE_BLOCK, PLANE_BLOCK);
    const dim3 grid((unsigned)((g->w + PLANE_BLOCK - 1) / PLANE_BLOCK),
                    (unsigned)((g->h + PLANE_BLOCK - 1) / PLANE_BLOCK));
    bp_plane_kernel<<<grid, block, 0, s->stream>>>(s->window, s->pitch_el, s->slab_el,
                                                   (int)s->cols, (int)s->rows, s->d_par, s->d_slot,
                                                   (int)nproj, *g, b->out[0]);
    TL_CUDA_LAUNCHED(s->eb, "bp_plane_kernel");
    return TL_OK;
}

const tl_cuda_kernel tl_cuda_plane_kernels[] = {
    {"plane-exact", TL_QUALITY_EXACT, 1, TL_KF_PLANE,
     "16x16 threads, 1 pixel each, bilinear in (u, z), global-memory reads", 0, 0, false, false,
     plane_launch},
};
const int tl_cuda_plane_nkernels = 1;
