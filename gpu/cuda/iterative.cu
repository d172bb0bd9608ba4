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
#include "gpu/cuda/iterative.cuh"
#include "gpu/cuda/iterative_slice.cuh"

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

__device__ __forceinline__ bool planes_are_rows(const it_view &v)
{
    return v.rows != 0;
}

/* Joseph's link function: where the ray of bin `bin` crosses plane p, in pixels along
 * the plane. */
__device__ __forceinline__ float joseph_pos(const it_view &v, bool rows, float bin, float p)
{
    float u0 = rows ? pixel_u(v, p, 0.0f) : pixel_u(v, 0.0f, p);
    return __fmul_rn(__fsub_rn(bin, u0), v.inv_along);
}

/* The weight of pixel `a` of plane p on the ray of bin `bin` (0: not linked). */
__device__ __forceinline__ float joseph_weight(const it_grid &g, const it_view &v, bool rows,
                                               int bin, int p, int a)
{
    int nalong = rows ? g.w : g.h;
    float pos = joseph_pos(v, rows, (float)bin, (float)p);
    if (!(pos > -1.0f && pos < (float)nalong))
        return 0.0f;
    float fl = floorf(pos), f = __fsub_rn(pos, fl);
    if ((int)fl == a)
        return __fmul_rn(v.len, __fsub_rn(1.0f, f));
    if ((int)fl + 1 == a)
        return __fmul_rn(v.len, f);
    return 0.0f;
}

/* b of view k, bin u: the window's row(s) at z, linear between two rows; the sum of b^2
 * into *sumsq and the least b's key into *least. */
__global__ void gather_kernel(const float *__restrict__ window, size_t slab, size_t pitch,
                              const uint32_t *__restrict__ slots, uint32_t nproj, uint32_t cols,
                              uint32_t rows, int r0, float gz, float *__restrict__ b,
                              double *sumsq, unsigned *least)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    double b2 = 0;
    unsigned key = 0xffffffffu;
    if (t < (size_t)nproj * cols) {
        uint32_t k = (uint32_t)(t / cols), u = (uint32_t)(t % cols);
        const float *col = window + (size_t)slots[k] * pitch + u;
        float a = r0 >= 0 && r0 < (int)rows ? col[(size_t)r0 * slab] : 0.0f;
        float c =
            gz != 0.0f && r0 + 1 >= 0 && r0 + 1 < (int)rows ? col[(size_t)(r0 + 1) * slab] : 0.0f;
        float v = a + gz * (c - a);
        b[t] = v;
        b2 = (double)v * v;
        key = float_key(__float_as_uint(v));
    }
    warp_extreme<true>(key, least);
    block_sum(b2, sumsq);
}

/* A x (ones when x is NULL) of the subset's views into ax, planes [p0, p0 + chunk) of
 * each bin's walk; added atomically when `add` (chunked passes), stored otherwise. A warp
 * is 32 neighbouring bins, whose pixels in a plane are neighbours along the plane: along a
 * row of x, or along a column, read from xt (x transposed) so that both are coalesced. */
template <tl_projector P>
__global__ void forward_kernel(it_grid g, const it_view *__restrict__ views, uint32_t first,
                               uint32_t stride, uint32_t count, uint32_t chunk,
                               const float *__restrict__ x, const float *__restrict__ xt,
                               float *__restrict__ ax, bool add)
{
    uint32_t bin = blockIdx.x * blockDim.x + threadIdx.x, n = blockIdx.y;
    if (bin >= g.cols || n >= count)
        return;
    uint32_t k = first + n * stride;
    const it_view v = views[k];
    size_t at = (size_t)k * g.cols + bin;
    const bool rows = planes_are_rows(v); /* the planes: rows of pixels, or columns */
    const int nplanes = rows ? g.h : g.w, nalong = rows ? g.w : g.h;
    const int p0 = blockIdx.z * chunk, p1 = min(nplanes, (int)(p0 + chunk));
    const float along = rows ? v.du_j : v.du_i, across = rows ? v.du_i : v.du_j;
    const float binf = (float)bin;
    float sum = 0.0f;
    if constexpr (P == TL_PROJECTOR_JOSEPH) {
        for (int p = p0; along != 0.0f && p < p1; p++) {
            float pos = joseph_pos(v, rows, binf, (float)p);
            if (!(pos > -1.0f && pos < (float)nalong))
                continue;
            int a0 = (int)floorf(pos);
            for (int a = max(a0, 0); a <= min(a0 + 1, nalong - 1); a++) {
                int i = rows ? p : a, jj = rows ? a : p;
                float wgt = joseph_weight(g, v, rows, (int)bin, p, a);
                sum += wgt * (!x            ? 1.0f
                              : rows || !xt ? x[(size_t)i * g.w + jj]
                                            : xt[(size_t)jj * g.h + i]);
            }
        }
    } else if (along != 0.0f) {
        /* candidates of plane p: within 1 / |along| pixels of where u = bin, widened by the
         * slack; pixel_u decides */
        const float inv = 1.0f / along, width = fabsf(inv) + IT_SLACK;
        const float mid0 = (binf - v.u00) * inv, dmid = -across * inv;
        for (int p = p0; p < p1; p++) {
            const float pf = (float)p;
            const float mid = __fmaf_rn(pf, dmid, mid0);
            const int lo = max(0, (int)floorf(mid - width));
            const int hi = min(nalong - 1, (int)ceilf(mid + width));
            float qf = (float)lo;
            for (int q = lo; q <= hi; q++, qf += 1.0f) {
                float u = rows ? pixel_u(v, pf, qf) : pixel_u(v, qf, pf);
                float fl = floorf(u), f = u - fl, wgt;
                if (fl == binf) /* bins outside the detector never equal bin */
                    wgt = 1.0f - f;
                else if (fl + 1.0f == binf)
                    wgt = f;
                else
                    continue;
                sum += wgt * (!x     ? 1.0f
                              : rows ? x[(size_t)p * g.w + q]
                              : xt   ? xt[(size_t)p * g.h + q]
                                     : x[(size_t)q * g.w + p]);
            }
        }
    }
    if (add)
        atomicAdd(&ax[at], sum);
    else
        ax[at] = sum;
}

/* The rule (backend.h, tl_it_rule) on the subset's measurements, and the sum of
 * (b - A x)^2 into *sumsq (NULL: not wanted). */
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
    if (sumsq) /* the same for the whole launch */
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
__global__ void backward_kernel(it_grid g, const it_view *__restrict__ views, uint32_t first,
                                uint32_t stride, uint32_t count, tl_it_rule rule, float lambda,
                                const float *__restrict__ r, float *__restrict__ x)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= (int)g.h || j >= (int)g.w)
        return;
    float sum = 0.0f, norm = 0.0f;
    const float fi = (float)i, fj = (float)j;
    for (uint32_t n = 0; n < count; n++) {
        uint32_t k = first + n * stride;
        const it_view v = views[k];
        const float *row = r + (size_t)k * g.cols;
        const float u = pixel_u(v, fi, fj);
        if constexpr (P == TL_PROJECTOR_JOSEPH) { /* the rays within a pixel, in its plane */
            const bool rows = planes_are_rows(v);
            const float along = rows ? v.du_j : v.du_i;
            if (along == 0.0f)
                continue;
            const float reach = fabsf(along) + IT_SLACK;
            int lo = max(0, (int)floorf(u - reach)),
                hi = min((int)g.cols - 1, (int)ceilf(u + reach));
            for (int bin = lo; bin <= hi; bin++) {
                float wgt = joseph_weight(g, v, rows, bin, rows ? i : j, rows ? j : i);
                sum += wgt * row[bin];
                norm += wgt;
            }
            continue;
        }
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
    unsigned bits = 0;
    if (t < n) {
        float v = x[t];
        if (nonneg && !(v > 0.0f))
            x[t] = v = 0.0f;
        if (moved) { /* mark is only set when the TV steps need it */
            float d = v - mark[t];
            d2 = (double)d * d;
            bits = __float_as_uint(fabsf(v));
        }
    }
    if (moved) { /* the same for the whole launch */
        warp_extreme<false>(bits, amax);
        block_sum(d2, moved);
    }
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

unsigned tl_cuda_it_blocks(size_t n)
{
    return (unsigned)((n + IT_BLOCK - 1) / IT_BLOCK);
}

tl_status tl_cuda_it_rule(tl_cuda_queue q, uint32_t view_len, tl_it_views v, tl_it_rule rule,
                          const float *b, const float *ax, const float *R, float *r, double *sums)
{
    rule_kernel<<<tl_cuda_it_blocks((size_t)v.count * view_len), IT_BLOCK, 0, q.stream>>>(
        view_len, v.first, v.stride, v.count, rule, b, ax, R, r, sums);
    TL_CUDA_LAUNCHED(q.eb, "rule_kernel");
    return TL_OK;
}

tl_status tl_cuda_it_invert(tl_cuda_queue q, float *v, size_t n)
{
    invert_kernel<<<tl_cuda_it_blocks(n), IT_BLOCK, 0, q.stream>>>(v, n);
    TL_CUDA_LAUNCHED(q.eb, "invert_kernel");
    return TL_OK;
}

tl_status tl_cuda_it_clamp(tl_cuda_queue q, float *x, const float *mark, size_t n, bool nonneg,
                           double *moved, unsigned *amax)
{
    clamp_kernel<<<tl_cuda_it_blocks(n), IT_BLOCK, 0, q.stream>>>(x, mark, n, nonneg, moved, amax);
    TL_CUDA_LAUNCHED(q.eb, "clamp_kernel");
    return TL_OK;
}

tl_status tl_cuda_it_tv_step(tl_cuda_queue q, float *x, const float *g, size_t n, float scale)
{
    tv_step_kernel<<<tl_cuda_it_blocks(n), IT_BLOCK, 0, q.stream>>>(x, g, n, scale);
    TL_CUDA_LAUNCHED(q.eb, "tv_step_kernel");
    return TL_OK;
}

static dim3 pixel_grid(const it_grid &g)
{
    return dim3((g.w + IT_TILE_X - 1) / IT_TILE_X, (g.h + IT_TILE_Y - 1) / IT_TILE_Y);
}

void tl_cuda_it_free(tl_cuda_state *s)
{
    tl_cuda_iter *it = s->it;
    if (!it)
        return;
    void *bufs[] = {it->views, it->x, it->xt, it->mark, it->g,    it->b,
                    it->ax,    it->r, it->R,  it->sums, it->amax, it->slots};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        cudaFree(bufs[i]); /* teardown: nothing to do about a failure */
    s->mem -= it->bytes;
    free(it);
    s->it = NULL;
}

/* The problem ends; a parallel-beam slice's buffers stay for the next one (a volume's
 * slices, one after another; tl_cuda_it_free frees them). */
void tl_cuda_op_it_end(void *state)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if ((s->it || s->itc) && cudaSetDevice(s->device) == cudaSuccess)
        cudaStreamSynchronize(s->stream);
    tl_cuda_itc_free(s); /* a cone-beam stack's buffers: large, and rarely the same twice */
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
        zero_views_kernel<<<tl_cuda_it_blocks(pairs), IT_BLOCK, 0, s->stream>>>(it->ax, g.cols, v.first,
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

tl_status tl_cuda_it_read_sums(tl_cuda_queue q, const double *sums, double out[2])
{
    TL_CUDA(q.eb,
            cudaMemcpyAsync(out, sums, 2 * sizeof(double), cudaMemcpyDeviceToHost, q.stream));
    TL_CUDA(q.eb, cudaStreamSynchronize(q.stream));
    return TL_OK;
}

static tl_status alloc_iter(tl_cuda_state *s, const tl_it_problem *p)
{
    tl_cuda_iter *it = (tl_cuda_iter *)calloc(1, sizeof *it);
    if (!it)
        return tl_fail(s->eb, TL_ENOMEM, "iterative: no host memory");
    s->it = it;
    size_t npix = (size_t)tl_it_pixels(p), nmeas = (size_t)p->nproj * s->cols;
    size_t before = s->mem;
    struct {
        void **p;
        size_t bytes;
    } want[] = {
        {(void **)&it->views, p->nproj * sizeof(it_view)},
        {(void **)&it->x, npix * sizeof(float)},
        {(void **)&it->mark, npix * sizeof(float)},
        {(void **)&it->g, npix * sizeof(float)},
        {(void **)&it->xt, npix * sizeof(float)},
        {(void **)&it->b, nmeas * sizeof(float)},
        {(void **)&it->ax, nmeas * sizeof(float)},
        {(void **)&it->r, nmeas * sizeof(float)},
        {(void **)&it->R, nmeas * sizeof(float)},
        {(void **)&it->sums, 2 * sizeof(double)},
        {(void **)&it->amax, sizeof(unsigned)},
        {(void **)&it->slots, p->nproj * sizeof(uint32_t)},
    };
    tl_status st = TL_OK;
    for (size_t i = 0; st == TL_OK && i < sizeof want / sizeof *want; i++)
        st = tl_cuda_alloc(s, want[i].p, want[i].bytes, "iterative reconstruction");
    it->bytes = s->mem - before;
    it->npix_cap = npix;
    it->nview_cap = p->nproj;
    return st;
}

tl_status tl_cuda_op_it_begin(void *state, const tl_it_problem *p, double stats[2])
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (p->geometry == TL_GEOMETRY_CONE)
        return tl_cuda_itc_begin(s, p, stats);
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    tl_status st = TL_OK;
    if (!s->it || s->it->npix_cap < (size_t)tl_it_pixels(p) ||
        s->it->nview_cap < p->nproj) {
        tl_cuda_it_free(s);
        st = alloc_iter(s, p);
    }
    if (st != TL_OK) {
        tl_cuda_it_free(s);
        return st;
    }
    tl_cuda_iter *it = s->it;
    const float *o = p->slices[0].plane;
    const uint32_t h = p->slices[0].height, w = p->slices[0].width, n = p->nproj;
    it->nproj = n;
    it->projector = p->projector;
    it->du_max[0] = it->du_max[1] = 0.0f;
    it->du_fast_min = INFINITY;
    it->grid = (it_grid){.h = h, .w = w, .cols = s->cols};
    /* pixel (i, j) of the plane at (x, y) = xy0 + i xy_i + j xy_j */
    const tl_bp_grid pg = tl_bp_slice_grid(&p->slices[0]);
    const double x0 = pg.p00[0], y0 = pg.p00[1], xi = pg.di[0], yi = pg.di[1];
    const double xj = pg.dj[0], yj = pg.dj[1];
    /* the views and their slots (host tables, copied before anything reads them) */
    it_view *hv = (it_view *)malloc(n * sizeof *hv);
    uint32_t *hslot = (uint32_t *)malloc(n * sizeof *hslot);
    if (!hv || !hslot)
        st = tl_fail(s->eb, TL_ENOMEM, "iterative: no host memory for %u views", n);
    for (uint32_t k = 0; st == TL_OK && k < n; k++) {
        const double c = p->proj[k].cos_t, sn = p->proj[k].sin_t;
        const double du_i = xi * c - yi * sn, du_j = xj * c - yj * sn;
        /* Joseph: one plane on along the ray, d pixels along the plane */
        const bool rows = fabs(du_j) >= fabs(du_i);
        const double d = rows ? (du_j != 0 ? -du_i / du_j : 0) : (du_i != 0 ? -du_j / du_i : 0);
        const double len =
            rows ? hypot(xi + d * xj, yi + d * yj) : hypot(xj + d * xi, yj + d * yi);
        hv[k] = (it_view){.u00 = (float)(p->proj[k].center + x0 * c - y0 * sn),
                          .du_i = (float)du_i,
                          .du_j = (float)du_j,
                          .len = (float)len,
                          .inv_along = (float)(rows ? (du_j != 0 ? 1 / du_j : 0)
                                                    : (du_i != 0 ? 1 / du_i : 0)),
                          .rows = rows};
        hslot[k] = p->proj[k].slot;
        it->du_max[0] = fmaxf(it->du_max[0], fabsf(hv[k].du_i));
        it->du_max[1] = fmaxf(it->du_max[1], fabsf(hv[k].du_j));
        it->du_fast_min = fminf(it->du_fast_min, fmaxf(fabsf(hv[k].du_i), fabsf(hv[k].du_j)));
    }
    const double z = o[8], fl = floor(z);
    if (st == TL_OK) {
        cudaError_t e =
            cudaMemcpyAsync(it->views, hv, n * sizeof *hv, cudaMemcpyHostToDevice, s->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(it->slots, hslot, n * sizeof *hslot, cudaMemcpyHostToDevice,
                                s->stream);
        if (e != cudaSuccess)
            st = tl_cuda_fail_call(s->eb, e, "cudaMemcpyAsync (iterative tables)", __FILE__,
                                   __LINE__);
    }
    if (st == TL_OK) { /* b, with ||b||^2 and min b summed on the device */
        size_t nmeas = (size_t)n * s->cols;
        unsigned least = 0xffffffffu;
        double sumsq = 0;
        cudaError_t e = cudaMemsetAsync(it->sums, 0, 2 * sizeof(double), s->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(it->amax, &least, sizeof least, cudaMemcpyHostToDevice, s->stream);
        if (e == cudaSuccess) {
            /* the kept measurements where the window is filtered (keep_measurements) */
            const float *window = s->meas ? s->meas : s->window;
            gather_kernel<<<tl_cuda_it_blocks(nmeas), IT_BLOCK, 0, s->stream>>>(window, s->slab_el,
                                                                     s->pitch_el, it->slots, n,
                                                                     s->cols, s->rows, (int)fl,
                                                                     (float)(z - fl), it->b,
                                                                     it->sums, it->amax);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(&sumsq, it->sums, sizeof sumsq, cudaMemcpyDeviceToHost, s->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(&least, it->amax, sizeof least, cudaMemcpyDeviceToHost, s->stream);
        if (e == cudaSuccess)
            e = cudaMemsetAsync(it->x, 0, (size_t)h * w * sizeof(float), s->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(s->stream); /* before the host tables go */
        if (e != cudaSuccess)
            st = tl_cuda_fail_call(s->eb, e, "gather_kernel (iterative measurements)", __FILE__,
                                   __LINE__);
        stats[0] = sumsq;
        stats[1] = key_float(least);
    }
    free(hv);
    free(hslot);
    if (st == TL_OK) /* R = 1 / (A 1) over every view */
        st = forward(s, (tl_it_views){0, 1, n}, NULL);
    if (st == TL_OK) {
        TL_CUDA(s->eb, cudaMemcpyAsync(it->R, it->ax, (size_t)n * s->cols * sizeof(float),
                                       cudaMemcpyDeviceToDevice, s->stream));
        st = tl_cuda_it_invert(tl_cuda_queue_of(s), it->R, (size_t)n * s->cols);
    }
    if (st != TL_OK)
        tl_cuda_it_free(s);
    return st;
}

tl_status tl_cuda_op_it_image(void *state, const float *in, float *out)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (s->itc)
        return tl_cuda_itc_image(s, in, out);
    TL_TRY(tl_cuda_use_device(s));
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
    if (s->itc)
        return tl_cuda_itc_forward(s, v, rule, sumsq);
    TL_TRY(tl_cuda_use_device(s));
    tl_cuda_iter *it = s->it;
    TL_TRY(forward(s, v, it->x));
    if (sumsq)
        TL_CUDA(s->eb, cudaMemsetAsync(it->sums, 0, 2 * sizeof(double), s->stream));
    TL_TRY(tl_cuda_it_rule(tl_cuda_queue_of(s), it->grid.cols, v, rule, it->b, it->ax, it->R, it->r,
                           sumsq ? it->sums : NULL));
    if (!sumsq)
        return TL_OK;
    double sums[2];
    TL_TRY(tl_cuda_it_read_sums(tl_cuda_queue_of(s), it->sums, sums));
    *sumsq = sums[0];
    return TL_OK;
}

tl_status tl_cuda_op_it_backward(void *state, tl_it_views v, tl_it_rule rule, double lambda)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (s->itc)
        return tl_cuda_itc_backward(s, v, rule, lambda);
    TL_TRY(tl_cuda_use_device(s));
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

tl_status tl_cuda_op_it_sweep(void *state, double lambda, bool *swept)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    *swept = false;
    if (s->itc)
        return TL_OK; /* cone-beam stacks: the per-view passes */
    TL_TRY(tl_cuda_use_device(s));
    return tl_cuda_it_sweep(s, lambda, swept);
}

tl_status tl_cuda_op_it_mark(void *state)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (s->itc)
        return tl_cuda_itc_mark(s);
    TL_TRY(tl_cuda_use_device(s));
    tl_cuda_iter *it = s->it;
    TL_CUDA(s->eb,
            cudaMemcpyAsync(it->mark, it->x, (size_t)it->grid.h * it->grid.w * sizeof(float),
                            cudaMemcpyDeviceToDevice, s->stream));
    return TL_OK;
}

tl_status tl_cuda_op_it_regularise(void *state, bool nonneg, double tv_weight, uint32_t tv_steps)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (s->itc)
        return tl_cuda_itc_regularise(s, nonneg, tv_weight, tv_steps);
    TL_TRY(tl_cuda_use_device(s));
    tl_cuda_iter *it = s->it;
    const size_t npix = (size_t)it->grid.h * it->grid.w;
    const bool tv = tv_weight > 0 && tv_steps > 0;
    if (!nonneg && !tv)
        return TL_OK;
    TL_CUDA(s->eb, cudaMemsetAsync(it->sums, 0, 2 * sizeof(double), s->stream));
    TL_CUDA(s->eb, cudaMemsetAsync(it->amax, 0, sizeof(unsigned), s->stream));
    TL_TRY(tl_cuda_it_clamp(tl_cuda_queue_of(s), it->x, it->mark, npix, nonneg,
                            tv ? it->sums : NULL, it->amax));
    if (!tv)
        return TL_OK;
    unsigned bits;
    TL_CUDA(s->eb,
            cudaMemcpyAsync(&bits, it->amax, sizeof bits, cudaMemcpyDeviceToHost, s->stream));
    double sums[2];
    TL_TRY(tl_cuda_it_read_sums(tl_cuda_queue_of(s), it->sums, sums)); /* synchronises: bits is there too */
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
        TL_TRY(tl_cuda_it_read_sums(tl_cuda_queue_of(s), it->sums, sums));
        double gn = sqrt(sums[1]);
        if (!(gn > 0))
            break;
        TL_TRY(tl_cuda_it_tv_step(tl_cuda_queue_of(s), it->x, it->g, npix, (float)(step / gn)));
    }
    return TL_OK;
}
