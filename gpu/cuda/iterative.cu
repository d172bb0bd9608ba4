/* iterative.cu — the CUDA backend's iterative primitives (backend.h, tl_it_problem; the
 * method is gpu/method/iterative.c, the CPU's twin gpu/cpu/iterative.c). Float arithmetic,
 * double sums for the norms.
 *
 * Two projector pairs (gpu/base/types.h, tl_projector; project_ref.h is their float64
 * reference). Each decides a (pixel, bin) link with one function in both directions,
 * whose rounding is fixed by explicit intrinsics (no contraction), so the forward and the
 * backward kernel see bit-identical weights and the pair stays adjoint to the rounding of
 * the sums:
 *   matched  A is the transpose of the pixel-driven back projection with linear
 *            interpolation between bins (ARCHITECTURE.md §3.1); the link function is
 *            pixel_u. backward: a thread per pixel reads the two bins around its u in each
 *            view; forward: a thread per (view, bin) walks the planes of pixels (rows or
 *            columns, the axis along which u changes least), finds the few pixels of each
 *            plane whose u lies within a bin (an estimate gives candidates, pixel_u
 *            decides), and sums them;
 *   joseph   ray-driven (Joseph 1982); the link function is joseph_pos, where a bin's ray
 *            crosses a plane. forward: a thread per (view, bin) reads the two pixels around
 *            each crossing; backward: a thread per pixel finds the few rays that cross its
 *            plane within a pixel of it.
 * When a subset has too few (view, bin) pairs to fill the GPU (SART: one view), the
 * forward pass splits the planes into chunks whose sums meet by atomicAdd.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/check.cuh"
#include "gpu/cuda/cuda_state.cuh"

#define IT_BLOCK 256 /* threads per block of the 1-D kernels */
#define IT_TILE_X 32 /* backward and TV: block of 32 x 8 pixels */
#define IT_TILE_Y 8
#define IT_FILL (1u << 20) /* forward threads that keep the GPU busy */
#define IT_MAX_CHUNKS 64u  /* plane chunks of one forward pass, at most */
/* Candidates of a plane: the pixels within a bin of u, widened by this many pixels for
 * the rounding of the division that finds them (u0 of a 16384-pixel plane is off by
 * ~1e-3 at most; a link at the very edge weighs 0 anyway). */
#define IT_SLACK 0.01f
#define IT_T 32 /* transpose tile */
/* Subsets of fewer views read x along columns uncoalesced instead: transposing the whole
 * image costs more than their pass (SART: one view). */
#define IT_TRANSPOSE_MIN_VIEWS 16u

/* The slice's plane: pixel (i, j) at x = x0 + i xi + j xj, y likewise. */
typedef struct {
    float x0, xi, xj, y0, yi, yj;
    uint32_t h, w, cols;
} it_grid;

struct tl_cuda_iter {
    tl_projector projector;
    it_grid grid;
    uint32_t nproj;
    float4 *views;         /* cos, sin, centre per view */
    float *x, *mark, *g;   /* images */
    float *xt;             /* x transposed (w x h), for the forward pass */
    float *b, *ax, *r, *R; /* nproj * cols */
    double *sums;          /* reductions, 2 */
    unsigned *amax;        /* max |x|, as float bits */
    size_t bytes;          /* device memory of all the above */
};

__device__ __forceinline__ float pixel_x(const it_grid &g, int i, int j)
{
    return __fmaf_rn((float)j, g.xj, __fmaf_rn((float)i, g.xi, g.x0));
}

__device__ __forceinline__ float pixel_y(const it_grid &g, int i, int j)
{
    return __fmaf_rn((float)j, g.yj, __fmaf_rn((float)i, g.yi, g.y0));
}

/* u of the point (x, y) in view v (cos, sin, centre) */
__device__ __forceinline__ float view_u(float4 v, float x, float y)
{
    return __fmaf_rn(x, v.x, __fmaf_rn(-y, v.y, v.z));
}

__device__ __forceinline__ float pixel_u(const it_grid &g, float4 v, int i, int j)
{
    return view_u(v, pixel_x(g, i, j), pixel_y(g, i, j));
}

/* Joseph's view: the planes are rows when u changes faster along a row, else columns;
 * `along` is u's change per pixel along a plane, `len` the path length per plane. */
struct joseph_view {
    bool rows;
    float along, len;
};

__device__ __forceinline__ joseph_view joseph_of(const it_grid &g, float4 v)
{
    float du_j = __fmaf_rn(g.xj, v.x, -__fmul_rn(g.yj, v.y));
    float du_i = __fmaf_rn(g.xi, v.x, -__fmul_rn(g.yi, v.y));
    joseph_view j;
    j.rows = fabsf(du_j) >= fabsf(du_i);
    j.along = j.rows ? du_j : du_i;
    float across = j.rows ? du_i : du_j;
    float d = j.along != 0.0f ? -__fdiv_rn(across, j.along) : 0.0f; /* along-steps per plane */
    float dx = j.rows ? __fmaf_rn(d, g.xj, g.xi) : __fmaf_rn(d, g.xi, g.xj);
    float dy = j.rows ? __fmaf_rn(d, g.yj, g.yi) : __fmaf_rn(d, g.yi, g.yj);
    j.len = hypotf(dx, dy);
    return j;
}

/* Where the ray of bin `bin` crosses plane p, in pixels along the plane. */
__device__ __forceinline__ float joseph_pos(const it_grid &g, float4 v, const joseph_view &j,
                                            int bin, int p)
{
    float u0 = j.rows ? pixel_u(g, v, p, 0) : pixel_u(g, v, 0, p);
    return __fdiv_rn(__fsub_rn((float)bin, u0), j.along);
}

/* The weight of pixel `a` of plane p on the ray of bin `bin` (0: not linked). */
__device__ __forceinline__ float joseph_weight(const it_grid &g, float4 v, const joseph_view &j,
                                               int bin, int p, int a)
{
    int nalong = j.rows ? g.w : g.h;
    float pos = joseph_pos(g, v, j, bin, p);
    if (!(pos > -1.0f && pos < (float)nalong))
        return 0.0f;
    float fl = floorf(pos), f = __fsub_rn(pos, fl);
    if ((int)fl == a)
        return __fmul_rn(j.len, __fsub_rn(1.0f, f));
    if ((int)fl + 1 == a)
        return __fmul_rn(j.len, f);
    return 0.0f;
}

/* Adds a block's values into *out (double): one atomic per block. */
__device__ void block_sum(double v, double *out)
{
    __shared__ double part[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = (threadIdx.y * blockDim.x + threadIdx.x) & 31;
    int warp = (threadIdx.y * blockDim.x + threadIdx.x) >> 5;
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    int nwarps = (blockDim.x * blockDim.y + 31) >> 5;
    if (warp == 0) {
        v = lane < nwarps ? part[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0)
            atomicAdd(out, v);
    }
}

/* b of view k, bin u: the window's row(s) at z, linear between two rows. */
__global__ void gather_kernel(const float *__restrict__ window, size_t slab, size_t pitch,
                              const uint32_t *__restrict__ slots, uint32_t nproj, uint32_t cols,
                              uint32_t rows, int r0, float gz, float *__restrict__ b)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)nproj * cols)
        return;
    uint32_t k = (uint32_t)(t / cols), u = (uint32_t)(t % cols);
    const float *col = window + (size_t)slots[k] * pitch + u;
    float a = r0 >= 0 && r0 < (int)rows ? col[(size_t)r0 * slab] : 0.0f;
    float c =
        gz != 0.0f && r0 + 1 >= 0 && r0 + 1 < (int)rows ? col[(size_t)(r0 + 1) * slab] : 0.0f;
    b[t] = a + gz * (c - a);
}

/* A x (ones when x is NULL) of the subset's views into ax, planes [p0, p0 + chunk) of
 * each bin's walk; added atomically when `add` (chunked passes), stored otherwise. A warp
 * is 32 neighbouring bins, whose pixels in a plane are neighbours along the plane: along a
 * row of x, or along a column, read from xt (x transposed) so that both are coalesced. */
template <tl_projector P>
__global__ void forward_kernel(it_grid g, const float4 *__restrict__ views, uint32_t first,
                               uint32_t stride, uint32_t count, uint32_t chunk,
                               const float *__restrict__ x, const float *__restrict__ xt,
                               float *__restrict__ ax, bool add)
{
    uint32_t bin = blockIdx.x * blockDim.x + threadIdx.x, n = blockIdx.y;
    if (bin >= g.cols || n >= count)
        return;
    uint32_t k = first + n * stride;
    float4 v = views[k];
    size_t at = (size_t)k * g.cols + bin;
    if constexpr (P == TL_PROJECTOR_JOSEPH) {
        const joseph_view j = joseph_of(g, v);
        int nplanes = j.rows ? g.h : g.w, nalong = j.rows ? g.w : g.h;
        int p0 = blockIdx.z * chunk, p1 = min(nplanes, (int)(p0 + chunk));
        float sum = 0.0f;
        for (int p = p0; j.along != 0.0f && p < p1; p++) {
            float pos = joseph_pos(g, v, j, (int)bin, p);
            if (!(pos > -1.0f && pos < (float)nalong))
                continue;
            int a0 = (int)floorf(pos);
            for (int a = max(a0, 0); a <= min(a0 + 1, nalong - 1); a++) {
                int i = j.rows ? p : a, jj = j.rows ? a : p;
                float wgt = joseph_weight(g, v, j, (int)bin, p, a);
                sum += wgt * (!x              ? 1.0f
                              : j.rows || !xt ? x[(size_t)i * g.w + jj]
                                              : xt[(size_t)jj * g.h + i]);
            }
        }
        if (add)
            atomicAdd(&ax[at], sum);
        else
            ax[at] = sum;
        return;
    }
    float du_j = g.xj * v.x - g.yj * v.y, du_i = g.xi * v.x - g.yi * v.y;
    bool rows = fabsf(du_j) >= fabsf(du_i);
    int nplanes = rows ? g.h : g.w, nalong = rows ? g.w : g.h;
    float step = rows ? du_j : du_i, across = rows ? du_i : du_j;
    int p0 = blockIdx.z * chunk, p1 = min(nplanes, (int)(p0 + chunk));
    float sum = 0.0f;
    /* candidates of plane p: (bin -+ 1 - u(p, 0)) / step, u(p, 0) = u(0, 0) + p across;
     * the slack absorbs this approximation, pixel_u decides */
    float inv = step != 0.0f ? 1.0f / step : 0.0f, width = fabsf(inv) + IT_SLACK;
    float mid0 = ((float)bin - pixel_u(g, v, 0, 0)) * inv, dmid = -across * inv;
    if (step != 0.0f)
        for (int p = p0; p < p1; p++) {
            float mid = __fmaf_rn((float)p, dmid, mid0);
            int lo = max(0, (int)floorf(mid - width));
            int hi = min(nalong - 1, (int)ceilf(mid + width));
            for (int q = lo; q <= hi; q++) {
                int i = rows ? p : q, j = rows ? q : p;
                float u = pixel_u(g, v, i, j);
                if (!(u > -1.0f && u < (float)g.cols))
                    continue;
                float fl = floorf(u), f = u - fl, wgt;
                if ((int)fl == (int)bin)
                    wgt = 1.0f - f;
                else if ((int)fl + 1 == (int)bin)
                    wgt = f;
                else
                    continue;
                sum += wgt * (!x            ? 1.0f
                              : rows || !xt ? x[(size_t)i * g.w + j]
                                            : xt[(size_t)j * g.h + i]);
            }
        }
    if (add)
        atomicAdd(&ax[at], sum);
    else
        ax[at] = sum;
}

/* The rule (backend.h, tl_it_rule) on the subset's measurements, and the sum of
 * (b - A x)^2 into *sumsq. */
__global__ void rule_kernel(uint32_t cols, uint32_t first, uint32_t stride, uint32_t count,
                            tl_it_rule rule, const float *__restrict__ b,
                            const float *__restrict__ ax, const float *__restrict__ R,
                            float *__restrict__ r, double *sumsq)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    double d2 = 0;
    if (t < (size_t)count * cols) {
        size_t at = (size_t)(first + (t / cols) * stride) * cols + t % cols;
        float d = b[at] - ax[at];
        d2 = (double)d * d;
        if (rule == TL_IT_SART)
            r[at] = R[at] * d;
        else if (rule == TL_IT_EM)
            r[at] = ax[at] > 0.0f ? b[at] / ax[at] : 0.0f;
    }
    block_sum(d2, sumsq);
}

__global__ void transpose_kernel(const float *__restrict__ x, float *__restrict__ xt, uint32_t h,
                                 uint32_t w)
{
    __shared__ float tile[IT_T][IT_T + 1];
    uint32_t j = blockIdx.x * IT_T + threadIdx.x;
    for (uint32_t k = threadIdx.y; k < IT_T; k += blockDim.y) {
        uint32_t i = blockIdx.y * IT_T + k;
        if (i < h && j < w)
            tile[k][threadIdx.x] = x[(size_t)i * w + j];
    }
    __syncthreads();
    uint32_t i = blockIdx.y * IT_T + threadIdx.x;
    for (uint32_t k = threadIdx.y; k < IT_T; k += blockDim.y) {
        uint32_t jj = blockIdx.x * IT_T + k;
        if (i < h && jj < w)
            xt[(size_t)jj * h + i] = tile[threadIdx.x][k];
    }
}

__global__ void zero_views_kernel(float *ax, uint32_t cols, uint32_t first, uint32_t stride,
                                  uint32_t count)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < (size_t)count * cols)
        ax[(size_t)(first + (t / cols) * stride) * cols + t % cols] = 0.0f;
}

__global__ void invert_kernel(float *v, size_t n)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n)
        v[t] = v[t] > 0.0f ? 1.0f / v[t] : 0.0f;
}

/* g = A_S^T r and c = A_S^T 1 per pixel, then the update where c > 0. */
template <tl_projector P>
__global__ void backward_kernel(it_grid g, const float4 *__restrict__ views, uint32_t first,
                                uint32_t stride, uint32_t count, tl_it_rule rule, float lambda,
                                const float *__restrict__ r, float *__restrict__ x)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= (int)g.h || j >= (int)g.w)
        return;
    float sum = 0.0f, norm = 0.0f;
    const float px = pixel_x(g, i, j), py = pixel_y(g, i, j); /* pixel_u's, hoisted */
    for (uint32_t n = 0; n < count; n++) {
        uint32_t k = first + n * stride;
        const float *row = r + (size_t)k * g.cols;
        if constexpr (P == TL_PROJECTOR_JOSEPH) { /* the rays within a pixel, in its plane */
            const joseph_view jv = joseph_of(g, views[k]);
            if (jv.along == 0.0f)
                continue;
            float u = view_u(views[k], px, py), reach = fabsf(jv.along) + IT_SLACK;
            int lo = max(0, (int)floorf(u - reach)),
                hi = min((int)g.cols - 1, (int)ceilf(u + reach));
            for (int bin = lo; bin <= hi; bin++) {
                float wgt = joseph_weight(g, views[k], jv, bin, jv.rows ? i : j, jv.rows ? j : i);
                sum += wgt * row[bin];
                norm += wgt;
            }
            continue;
        }
        float u = view_u(views[k], px, py);
        if (!(u > -1.0f && u < (float)g.cols))
            continue;
        float fl = floorf(u), f = u - fl;
        int b0 = (int)fl;
        if (b0 >= 0) {
            sum += (1.0f - f) * row[b0];
            norm += 1.0f - f;
        }
        if (b0 + 1 < (int)g.cols) {
            sum += f * row[b0 + 1];
            norm += f;
        }
    }
    if (!(norm > 0.0f))
        return;
    float *xv = &x[(size_t)i * g.w + j];
    *xv = rule == TL_IT_EM ? *xv * (sum / norm) : *xv + lambda * (sum / norm);
}

/* x = max(x, 0) (nonneg); with the TV steps to come, the sum of (x - mark)^2 into *moved
 * and max |x| into *amax (its bits: for floats >= 0 their order as integers). */
__global__ void clamp_kernel(float *x, const float *mark, size_t n, bool nonneg, double *moved,
                             unsigned *amax)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    double d2 = 0;
    if (t < n) {
        float v = x[t];
        if (nonneg && !(v > 0.0f))
            x[t] = v = 0.0f;
        if (moved) { /* mark is only set when the TV steps need it */
            float d = v - mark[t];
            d2 = (double)d * d;
            atomicMax(amax, __float_as_uint(fabsf(v)));
        }
    }
    if (moved)
        block_sum(d2, moved);
}

/* The forward differences at pixel (i, j) along +x and +y (row i - 1), and their norm. */
__device__ __forceinline__ void tv_diff(const float *x, int i, int j, int w, float eps2, float *dx,
                                        float *dy, float *norm)
{
    size_t v = (size_t)i * w + j;
    *dx = j + 1 < w ? x[v + 1] - x[v] : 0.0f;
    *dy = i > 0 ? x[v - w] - x[v] : 0.0f;
    *norm = sqrtf(*dx * *dx + *dy * *dy + eps2);
}

/* The smoothed TV's gradient (cpu/iterative.c's tv_gradient, gathered per pixel: its own
 * differences, and those of the pixels left of and below it, which reach it), and the
 * sum of its squares into *gn. */
__global__ void tv_gradient_kernel(const float *__restrict__ x, float *__restrict__ g, int h,
                                   int w, float eps2, double *gn)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    double s = 0;
    if (i < h && j < w) {
        float dx, dy, nrm, v;
        tv_diff(x, i, j, w, eps2, &dx, &dy, &nrm);
        v = -(dx / nrm) - dy / nrm;
        if (j > 0) {
            tv_diff(x, i, j - 1, w, eps2, &dx, &dy, &nrm);
            v += dx / nrm;
        }
        if (i + 1 < h) {
            tv_diff(x, i + 1, j, w, eps2, &dx, &dy, &nrm);
            v += dy / nrm;
        }
        g[(size_t)i * w + j] = v;
        s = (double)v * v;
    }
    block_sum(s, gn);
}

__global__ void tv_step_kernel(float *x, const float *g, size_t n, float scale)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n)
        x[t] -= scale * g[t];
}

/* ---- the operations ---------------------------------------------------------------------- */

static unsigned blocks(size_t n)
{
    return (unsigned)((n + IT_BLOCK - 1) / IT_BLOCK);
}

static dim3 pixel_grid(const it_grid &g)
{
    return dim3((g.w + IT_TILE_X - 1) / IT_TILE_X, (g.h + IT_TILE_Y - 1) / IT_TILE_Y);
}

static void free_iter(tl_cuda_state *s)
{
    tl_cuda_iter *it = s->it;
    if (!it)
        return;
    void *bufs[] = {it->views, it->x, it->xt, it->mark, it->g,   it->b,
                    it->ax,    it->r, it->R,  it->sums, it->amax};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        cudaFree(bufs[i]); /* teardown: nothing to do about a failure */
    s->mem -= it->bytes;
    free(it);
    s->it = NULL;
}

void tl_cuda_op_it_end(void *state)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (s->it && cudaSetDevice(s->device) == cudaSuccess)
        cudaStreamSynchronize(s->stream);
    free_iter(s);
}

/* A x of subset v into ax (x NULL: ones). */
static tl_status forward(tl_cuda_state *s, tl_it_views v, const float *x)
{
    tl_cuda_iter *it = s->it;
    const it_grid &g = it->grid;
    uint32_t planes = g.h > g.w ? g.h : g.w;
    size_t pairs = (size_t)v.count * g.cols;
    uint32_t chunks = pairs >= IT_FILL ? 1u : (uint32_t)((IT_FILL + pairs - 1) / pairs);
    chunks = chunks > IT_MAX_CHUNKS ? IT_MAX_CHUNKS : chunks;
    chunks = chunks > planes ? planes : chunks;
    uint32_t chunk = (planes + chunks - 1) / chunks;
    if (chunks > 1) { /* the chunks add up: from zero */
        zero_views_kernel<<<blocks(pairs), IT_BLOCK, 0, s->stream>>>(it->ax, g.cols, v.first,
                                                                     v.stride, v.count);
        TL_CUDA_LAUNCHED(s->eb, "zero_views_kernel");
    }
    const bool transpose = x && v.count >= IT_TRANSPOSE_MIN_VIEWS;
    if (transpose) {
        dim3 tiles((g.w + IT_T - 1) / IT_T, (g.h + IT_T - 1) / IT_T);
        transpose_kernel<<<tiles, dim3(IT_T, 8), 0, s->stream>>>(x, it->xt, g.h, g.w);
        TL_CUDA_LAUNCHED(s->eb, "transpose_kernel");
    }
    dim3 grid((g.cols + IT_BLOCK - 1) / IT_BLOCK, v.count, chunks);
    auto kernel = it->projector == TL_PROJECTOR_JOSEPH ? forward_kernel<TL_PROJECTOR_JOSEPH>
                                                       : forward_kernel<TL_PROJECTOR_MATCHED>;
    kernel<<<grid, IT_BLOCK, 0, s->stream>>>(g, it->views, v.first, v.stride, v.count, chunk, x,
                                             transpose ? it->xt : NULL, it->ax, chunks > 1);
    TL_CUDA_LAUNCHED(s->eb, "forward_kernel");
    return TL_OK;
}

/* The sums buffer's values, after the work queued so far. */
static tl_status read_sums(tl_cuda_state *s, double out[2])
{
    TL_CUDA(s->eb, cudaMemcpyAsync(out, s->it->sums, 2 * sizeof(double), cudaMemcpyDeviceToHost,
                                   s->stream));
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    return TL_OK;
}

static tl_status alloc_iter(tl_cuda_state *s, const tl_it_problem *p)
{
    tl_cuda_iter *it = (tl_cuda_iter *)calloc(1, sizeof *it);
    if (!it)
        return tl_fail(s->eb, TL_ENOMEM, "iterative: no host memory");
    s->it = it;
    size_t npix = (size_t)p->slice.height * p->slice.width, nmeas = (size_t)p->nproj * s->cols;
    size_t before = s->mem;
    struct {
        void **p;
        size_t bytes;
    } want[] = {
        {(void **)&it->views, p->nproj * sizeof(float4)}, {(void **)&it->x, npix * sizeof(float)},
        {(void **)&it->mark, npix * sizeof(float)},       {(void **)&it->g, npix * sizeof(float)},
        {(void **)&it->xt, npix * sizeof(float)},         {(void **)&it->b, nmeas * sizeof(float)},
        {(void **)&it->ax, nmeas * sizeof(float)},        {(void **)&it->r, nmeas * sizeof(float)},
        {(void **)&it->R, nmeas * sizeof(float)},         {(void **)&it->sums, 2 * sizeof(double)},
        {(void **)&it->amax, sizeof(unsigned)},
    };
    tl_status st = TL_OK;
    for (size_t i = 0; st == TL_OK && i < sizeof want / sizeof *want; i++)
        st = tl_cuda_alloc(s, want[i].p, want[i].bytes, "iterative reconstruction");
    it->bytes = s->mem - before;
    return st;
}

tl_status tl_cuda_op_it_begin(void *state, const tl_it_problem *p, double stats[2])
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    tl_cuda_op_it_end(s);
    tl_status st = alloc_iter(s, p);
    if (st != TL_OK) {
        free_iter(s);
        return st;
    }
    tl_cuda_iter *it = s->it;
    const float *o = p->slice.plane;
    const uint32_t h = p->slice.height, w = p->slice.width, n = p->nproj;
    it->nproj = n;
    it->projector = p->projector;
    double t0 = 1.0 - 0.5 / h, s0 = 0.5 / w;
    it->grid = (it_grid){.x0 = (float)(o[6] + s0 * o[0] + t0 * o[3]),
                         .xi = (float)(-o[3] / (double)h),
                         .xj = (float)(o[0] / (double)w),
                         .y0 = (float)(o[7] + s0 * o[1] + t0 * o[4]),
                         .yi = (float)(-o[4] / (double)h),
                         .yj = (float)(o[1] / (double)w),
                         .h = h,
                         .w = w,
                         .cols = s->cols};
    /* the views and their slots (host tables, copied before anything reads them) */
    float4 *hv = (float4 *)malloc(n * sizeof *hv);
    uint32_t *hslot = (uint32_t *)malloc(n * sizeof *hslot);
    float *hb = (float *)malloc((size_t)n * s->cols * sizeof *hb);
    uint32_t *dslot = NULL;
    if (!hv || !hslot || !hb)
        st = tl_fail(s->eb, TL_ENOMEM, "iterative: no host memory for %u views", n);
    for (uint32_t k = 0; st == TL_OK && k < n; k++) {
        hv[k] = make_float4((float)p->proj[k].cos_t, (float)p->proj[k].sin_t,
                            (float)p->proj[k].center, 0.0f);
        hslot[k] = p->proj[k].slot;
    }
    if (st == TL_OK)
        st = tl_cuda_alloc(s, (void **)&dslot, n * sizeof *dslot, "iterative slot table");
    const double z = o[8], fl = floor(z);
    if (st == TL_OK) {
        cudaError_t e =
            cudaMemcpyAsync(it->views, hv, n * sizeof *hv, cudaMemcpyHostToDevice, s->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(dslot, hslot, n * sizeof *hslot, cudaMemcpyHostToDevice,
                                s->stream);
        if (e != cudaSuccess)
            st = tl_cuda_fail_call(s->eb, e, "cudaMemcpyAsync (iterative tables)", __FILE__,
                                   __LINE__);
    }
    if (st == TL_OK) {
        size_t nmeas = (size_t)n * s->cols;
        gather_kernel<<<blocks(nmeas), IT_BLOCK, 0, s->stream>>>(s->window, s->slab_el,
                                                                 s->pitch_el, dslot, n, s->cols,
                                                                 s->rows, (int)fl, (float)(z - fl),
                                                                 it->b);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(hb, it->b, nmeas * sizeof *hb, cudaMemcpyDeviceToHost, s->stream);
        if (e == cudaSuccess)
            e = cudaMemsetAsync(it->x, 0, (size_t)h * w * sizeof(float), s->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(s->stream); /* before the host tables go */
        if (e != cudaSuccess)
            st = tl_cuda_fail_call(s->eb, e, "gather_kernel (iterative measurements)", __FILE__,
                                   __LINE__);
        double sumsq = 0, bmin = INFINITY;
        for (size_t i = 0; st == TL_OK && i < nmeas; i++) {
            sumsq += (double)hb[i] * hb[i];
            bmin = fmin(bmin, (double)hb[i]);
        }
        stats[0] = sumsq;
        stats[1] = bmin;
    }
    if (dslot) {
        cudaFree(dslot);
        s->mem -= n * sizeof *dslot;
    }
    free(hv);
    free(hslot);
    free(hb);
    if (st == TL_OK) /* R = 1 / (A 1) over every view */
        st = forward(s, (tl_it_views){0, 1, n}, NULL);
    if (st == TL_OK) {
        TL_CUDA(s->eb, cudaMemcpyAsync(it->R, it->ax, (size_t)n * s->cols * sizeof(float),
                                       cudaMemcpyDeviceToDevice, s->stream));
        invert_kernel<<<blocks((size_t)n * s->cols), IT_BLOCK, 0, s->stream>>>(it->R, (size_t)n *
                                                                                          s->cols);
        TL_CUDA_LAUNCHED(s->eb, "invert_kernel");
    }
    if (st != TL_OK)
        free_iter(s);
    return st;
}

tl_status tl_cuda_op_it_image(void *state, const float *in, float *out)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    tl_cuda_iter *it = s->it;
    size_t bytes = (size_t)it->grid.h * it->grid.w * sizeof(float);
    if (in)
        TL_CUDA(s->eb, cudaMemcpyAsync(it->x, in, bytes, cudaMemcpyHostToDevice, s->stream));
    if (out)
        TL_CUDA(s->eb, cudaMemcpyAsync(out, it->x, bytes, cudaMemcpyDeviceToHost, s->stream));
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream)); /* in may be freed, out read */
    return TL_OK;
}

tl_status tl_cuda_op_it_forward(void *state, tl_it_views v, tl_it_rule rule, double *sumsq)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    tl_cuda_iter *it = s->it;
    TL_TRY(forward(s, v, it->x));
    TL_CUDA(s->eb, cudaMemsetAsync(it->sums, 0, 2 * sizeof(double), s->stream));
    size_t n = (size_t)v.count * it->grid.cols;
    rule_kernel<<<blocks(n), IT_BLOCK, 0, s->stream>>>(it->grid.cols, v.first, v.stride, v.count,
                                                       rule, it->b, it->ax, it->R, it->r,
                                                       it->sums);
    TL_CUDA_LAUNCHED(s->eb, "rule_kernel");
    if (!sumsq)
        return TL_OK;
    double sums[2];
    TL_TRY(read_sums(s, sums));
    *sumsq = sums[0];
    return TL_OK;
}

tl_status tl_cuda_op_it_backward(void *state, tl_it_views v, tl_it_rule rule, double lambda)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    tl_cuda_iter *it = s->it;
    auto kernel = it->projector == TL_PROJECTOR_JOSEPH ? backward_kernel<TL_PROJECTOR_JOSEPH>
                                                       : backward_kernel<TL_PROJECTOR_MATCHED>;
    kernel<<<pixel_grid(it->grid), dim3(IT_TILE_X, IT_TILE_Y), 0, s->stream>>>(it->grid, it->views,
                                                                               v.first, v.stride,
                                                                               v.count, rule,
                                                                               (float)lambda,
                                                                               it->r, it->x);
    TL_CUDA_LAUNCHED(s->eb, "backward_kernel");
    return TL_OK;
}

tl_status tl_cuda_op_it_mark(void *state)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    tl_cuda_iter *it = s->it;
    TL_CUDA(s->eb,
            cudaMemcpyAsync(it->mark, it->x, (size_t)it->grid.h * it->grid.w * sizeof(float),
                            cudaMemcpyDeviceToDevice, s->stream));
    return TL_OK;
}

tl_status tl_cuda_op_it_regularise(void *state, bool nonneg, double tv_weight, uint32_t tv_steps)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    tl_cuda_iter *it = s->it;
    const size_t npix = (size_t)it->grid.h * it->grid.w;
    const bool tv = tv_weight > 0 && tv_steps > 0;
    if (!nonneg && !tv)
        return TL_OK;
    TL_CUDA(s->eb, cudaMemsetAsync(it->sums, 0, 2 * sizeof(double), s->stream));
    TL_CUDA(s->eb, cudaMemsetAsync(it->amax, 0, sizeof(unsigned), s->stream));
    clamp_kernel<<<blocks(npix), IT_BLOCK, 0, s->stream>>>(it->x, it->mark, npix, nonneg,
                                                           tv ? it->sums : NULL, it->amax);
    TL_CUDA_LAUNCHED(s->eb, "clamp_kernel");
    if (!tv)
        return TL_OK;
    unsigned bits;
    TL_CUDA(s->eb,
            cudaMemcpyAsync(&bits, it->amax, sizeof bits, cudaMemcpyDeviceToHost, s->stream));
    double sums[2];
    TL_TRY(read_sums(s, sums)); /* synchronises: bits is there too */
    float amax;
    memcpy(&amax, &bits, sizeof amax);
    if (!(amax > 0))
        return TL_OK; /* a zero image: nothing to smooth */
    const float eps = (float)(TL_TV_SMOOTHING * amax);
    const double step = tv_weight * sqrt(sums[0]);
    for (uint32_t k = 0; k < tv_steps; k++) {
        TL_CUDA(s->eb, cudaMemsetAsync(it->sums + 1, 0, sizeof(double), s->stream));
        tv_gradient_kernel<<<pixel_grid(it->grid), dim3(IT_TILE_X, IT_TILE_Y), 0, s->stream>>>(
            it->x, it->g, (int)it->grid.h, (int)it->grid.w, eps * eps, it->sums + 1);
        TL_CUDA_LAUNCHED(s->eb, "tv_gradient_kernel");
        TL_TRY(read_sums(s, sums));
        double gn = sqrt(sums[1]);
        if (!(gn > 0))
            break;
        tv_step_kernel<<<blocks(npix), IT_BLOCK, 0, s->stream>>>(it->x, it->g, npix,
                                                                 (float)(step / gn));
        TL_CUDA_LAUNCHED(s->eb, "tv_step_kernel");
    }
    return TL_OK;
}
