/* bp_common.cuh — what the back-projection kernels share: the geometry of a slice and the
 * arithmetic that puts a pixel on the detector (ARCHITECTURE.md §3.1; Chilingaryan et
 * al. 2020, J. Real-Time Image Proc. 17:1331, Eq. 1).
 *
 * Every kernel computes a pixel's position and its detector column with the same helpers,
 * in the same operation order, so kernels that serve the same slice put every pixel at
 * bit-identical (u, z); only their interpolation differs (hardware texture filtering with
 * 8-bit weights in tex-std, exact fp32 arithmetic in alu-exact and plane-exact).
 */
#ifndef TL_CUDA_BP_COMMON_CUH
#define TL_CUDA_BP_COMMON_CUH

#include "gpu/cuda/cuda_state.cuh"

/* A slice as an affine map from output pixel (row i, column j) to volume coordinates:
 *   position(i, j) = p + j * a + i * b
 * with p the centre of pixel (0, 0), a the step along an output row and b the step down
 * the output column. From the plane (xaxis, yaxis, base) of engine.h:
 *   p = base + (0.5 / w) xaxis + (1 - 0.5 / h) yaxis,  a = xaxis / w,  b = -yaxis / h,
 * computed in double on the host and rounded to float once. */
typedef struct {
    float px, py, pz;
    float ax, ay, az;
    float bx, by, bz;
    int h, w;
} tl_cuda_geom;

tl_cuda_geom tl_cuda_make_geom(const tl_bp_slice *sl);

/* A horizontal slice at an integer detector row (*z): the fast kernels' domain. */
bool tl_cuda_horizontal(const tl_bp_slice *sl, uint32_t rows, uint32_t *z);

__device__ __forceinline__ float tl_geom_x(const tl_cuda_geom &g, int i, int j)
{
    return fmaf((float)j, g.ax, fmaf((float)i, g.bx, g.px));
}
__device__ __forceinline__ float tl_geom_y(const tl_cuda_geom &g, int i, int j)
{
    return fmaf((float)j, g.ay, fmaf((float)i, g.by, g.py));
}
__device__ __forceinline__ float tl_geom_z(const tl_cuda_geom &g, int i, int j)
{
    return fmaf((float)j, g.az, fmaf((float)i, g.bz, g.pz));
}

/* Detector column hit by the ray through (x, y): u = center + x cos - y sin, with the
 * projection's (cos, sin, center, weight) in q. */
__device__ __forceinline__ float tl_ray_u(float x, float y, float4 q)
{
    return fmaf(x, q.x, fmaf(-y, q.y, q.z));
}

/* Linear interpolation between a = d[i] and b = d[i + 1] at fraction f. */
__device__ __forceinline__ float tl_lerp(float a, float b, float f)
{
    return fmaf(f, b - a, a);
}

/* Row `row` of a sinogram at column u: linear between bins, zero outside [0, W). */
__device__ __forceinline__ float tl_sample_row(const float *__restrict__ row, int W, float u)
{
    if (!(u > -1.f && u < (float)W))
        return 0.f;
    const float fl = floorf(u);
    const int i = (int)fl;
    const float a = i >= 0 ? __ldg(row + i) : 0.f;
    const float b = i + 1 < W ? __ldg(row + i + 1) : 0.f;
    return tl_lerp(a, b, u - fl);
}

/* Cone beam (backend.h, tl_bp_proj.cone): the filtered projection in `slot` sampled where
 * the ray from the source through volume point (x, y, z) meets the detector, weighed
 * 1 / w^2 (w the point's depth relative to the isocentre's; Feldkamp et al. 1984):
 * bilinear in (u, v) in exact fp32 arithmetic, linearly between bins along u within the two
 * detector rows around v, then between the rows, zero outside the detector and behind the
 * source. m is the projection's matrix (12 floats, row-major). The CPU backend's rule
 * (tl_cpu_bp_cone_row, gpu/cpu/kernels_impl.h). */
__device__ __forceinline__ float tl_cone_sample(const float *__restrict__ window, size_t pitch_el,
                                                size_t slab_el, int W, int H, const float *m,
                                                int slot, float x, float y, float z)
{
    const float w = fmaf(m[8], x, fmaf(m[9], y, fmaf(m[10], z, m[11])));
    if (!(w > 0.f))
        return 0.f; /* at or behind the source */
    const float v = fmaf(m[4], x, fmaf(m[5], y, fmaf(m[6], z, m[7]))) / w;
    if (!(v > -1.f && v < (float)H))
        return 0.f;
    const float u = fmaf(m[0], x, fmaf(m[1], y, fmaf(m[2], z, m[3]))) / w;
    const float fl = floorf(v);
    const int r0 = (int)fl;
    const float gv = v - fl;
    const float *col = window + (size_t)slot * pitch_el;
    const float a = r0 >= 0 ? tl_sample_row(col + (size_t)r0 * slab_el, W, u) : 0.f;
    const float b = gv != 0.f && r0 + 1 < H ? tl_sample_row(col + (size_t)(r0 + 1) * slab_el, W, u)
                                            : 0.f;
    return tl_lerp(a, b, gv) / (w * w);
}

/* The texture objects over the window (bp_texture.cu), made in create(). */
tl_status tl_cuda_tex_create(tl_cuda_state *s);
void tl_cuda_tex_destroy(tl_cuda_state *s);

/* The __constant__ projection table of the texture kernel is one per process and device:
 * whoever uploads it must hold that device's lock until the kernels that read it have
 * finished. One lock per device, so engines on different GPUs (gpu/split.c) do not wait
 * for each other. */
#define TL_CUDA_MAX_DEVICES 64
void tl_cuda_constant_lock(int device);
void tl_cuda_constant_unlock(int device);

/* Holds that lock, when needed, until the end of the scope (after the stream was
 * synchronised, or on any early return). */
struct tl_cuda_constant_guard {
    bool held;
    int device;
    tl_cuda_constant_guard(bool need, int dev) : held(need), device(dev)
    {
        if (held)
            tl_cuda_constant_lock(device);
    }
    ~tl_cuda_constant_guard()
    {
        if (held)
            tl_cuda_constant_unlock(device);
    }
    tl_cuda_constant_guard(const tl_cuda_constant_guard &) = delete;
    tl_cuda_constant_guard &operator=(const tl_cuda_constant_guard &) = delete;
};

#endif
