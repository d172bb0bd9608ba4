/* iterative_cone.cu — the CUDA backend's iterative primitives for cone-beam problems
 * (backend.h, tl_it_problem CONE; the method is gpu/method/iterative.c, the CPU's twin
 * gpu/cpu/iterative_cone.c). x is every pixel of a stack of planes (tomosynthesis: planes
 * parallel to the detector), b every detector pixel of each view, taken from the kept
 * measurements (before FDK's weights), and A the transpose of FDK's pixel-driven back
 * projection: a pixel reaches the four detector pixels around its (u, v) bilinearly,
 * weighed 1 / w^2, nothing off the detector or at or behind the source.
 *
 * As seed 003 (§40.3) maps the two phases of DBT, the back projection runs a thread per
 * pixel (voxel), gathering from every view of the subset; the
 * forward projection also runs a thread per pixel and view, scattering into the four detector pixels by
 * atomicAdd (the transpose of that gather, so the pair is exactly the same links; a
 * detector-driven gather would need the inverse of the bilinear footprint). One function,
 * taps(), decides a link in both directions, in double with explicit intrinsics (no
 * contraction): the forward and the backward kernel see bit-identical weights. x, b and
 * the per-subset values are float, the norms double.
 *
 * Several GPUs (issue #28 item 5; engine config `devices`, cone beam with kept
 * measurements): the stack is split by volume, as seed 003 (§40.3.4) splits its back
 * projection: each device holds a slab of the planes (balanced by pixels) and every view.
 * A forward pass is each slab's share of A x, summed over the devices: every device
 * copies the others' shares of the subset's views (peer to peer) and adds them, in device
 * order, so every device holds the same A x; the rule then runs on every device and the
 * backward pass updates each slab alone. What crosses between GPUs per subset is the
 * subset's projections, never the volume (seed 003's other half, projections split in
 * the forward pass, would move a slab of x after every backward pass: more bytes for a
 * DBT stack, whose volume outweighs a subset's views). b reaches the other devices once,
 * from the engine's. Streams are ordered by events, not by the host: one device's copy
 * waits for the others' shares, and a device overwrites its share only after every other
 * device has copied it.
 *
 * Joseph's pair (gpu/base/joseph.h, on a stack that is a voxel grid): a thread per
 * detector pixel of each view walks its ray, reading the voxels of its device's slab
 * (forward: the slab's share of the ray sum, summed over devices as above) or adding into
 * them by atomicAdd, with A^T 1 beside (backward), the update then a pass over the slab.
 *
 * TV steps (gpu/cpu/iterative_cone.c's, in three dimensions across the stack's planes of
 * one shape) gather each voxel's gradient from its own differences and those of the
 * voxels before it; split over devices, each step first copies the plane before and the
 * plane after each slab from the neighbouring devices (the halo the differences reach),
 * and the step's scale is one norm over all devices, summed on the host.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/base/joseph.h"
#include "gpu/cuda/check.cuh"
#include "gpu/cuda/cuda_state.cuh"
#include "gpu/cuda/iterative.cuh"

#define ITC_MAX_GRID 65535u /* slices (grid y) and views (grid z) of a problem */
#define ITC_MAX_PARTS TL_ENGINE_MAX_DEVICES

/* A slice of the stack as the kernels place its pixels (tl_bp_slice_grid), and pixel
 * (i, j)'s index in x: `first` + i w + j. */
typedef struct {
    tl_bp_grid grid;
    uint32_t h, w;
    unsigned long long first;
    long long next, prev; /* x index offsets to the same pixel of the stack's next and
                             previous plane where it has this shape; 0: none */
} itc_slice;

/* One device's share of a problem: its slab of the stack, and its copy of everything
 * else. */
typedef struct {
    int device;
    cudaStream_t stream;      /* the engine's on the first device; its own elsewhere */
    cudaEvent_t projected;    /* its share of A x is in ax */
    cudaEvent_t copied;       /* it has copied the other devices' shares */
    cudaEvent_t stepped;      /* its slab as the last TV step (or clamp) left it */
    uint32_t slice0, nslices; /* its planes of the stack */
    size_t pix0, npix;        /* ... as pixels of x */
    itc_slice *slices;        /* the whole stack's table (each kernel gets its slab) */
    double *m;                /* nproj x 12: each view's cone matrix */
    uint32_t *slots;
    float *x;               /* npix of the whole stack; its slab is its own */
    float *b, *ax, *r, *R;  /* nproj * view_len */
    float *others;          /* (parts - 1) x nproj x view_len: the others' shares of A x */
    double *sums;           /* reductions, 2 */
    unsigned *least;        /* min b's float_key; in the TV steps max |x|'s bits */
    float *mark, *g;        /* TV steps only (npix, at the first mark): x as marked, gradient */
    tl_joseph_view *jv;     /* Joseph's pair: nproj ray tables */
    float *acc;             /* ... 2 x npix: its back projection's g and A^T 1 */
} itc_part;

struct tl_cuda_itc {
    uint32_t nslices, nproj, rows, cols;
    size_t npix, view_len, nmeas;
    uint32_t slice_max; /* pixels of the largest slice: the kernels' grid in x */
    uint32_t nparts;
    itc_part part[ITC_MAX_PARTS];
    itc_slice *table; /* the slices' table on the host (the TV steps' halos read it) */
    bool joseph;      /* Joseph's pair on this grid (else the matched pair) */
    tl_joseph_grid grid;
    size_t bytes; /* device memory of all the above, every device */
};

/* The other parts' shares of A x as a kernel reads them: share[j] is part j's (the own
 * part's: its ax), so that every part adds them in the same order. */
typedef struct {
    const float *share[ITC_MAX_PARTS];
} itc_shares;

/* Pixel (i, j) of slice s in volume coordinates. */
__device__ __forceinline__ void pixel_position(const itc_slice &s, uint32_t i, uint32_t j,
                                               double p[3])
{
    for (int a = 0; a < 3; a++)
        p[a] = __fma_rn((double)j, s.grid.dj[a], __fma_rn((double)i, s.grid.di[a], s.grid.p00[a]));
}

/* One row of a matrix applied to p. */
__device__ __forceinline__ double row_dot(const double *m, const double p[3])
{
    return __fma_rn(m[2], p[2], __fma_rn(m[1], p[1], __fma_rn(m[0], p[0], m[3])));
}

/* The link function: the four detector pixels at[t] (-1: off the detector) pixel p reaches
 * in the view of matrix m, with weights wt[t]; false when it reaches none. */
__device__ __forceinline__ bool taps(const double *__restrict__ m, const double p[3],
                                     uint32_t rows, uint32_t cols, long long at[4], float wt[4])
{
    const double depth = row_dot(m + 8, p);
    if (!(depth > 0.0))
        return false; /* at or behind the source */
    const double inv = __ddiv_rn(1.0, depth); /* one division: the costliest operation here */
    const double u = __dmul_rn(row_dot(m, p), inv), v = __dmul_rn(row_dot(m + 4, p), inv);
    if (!(u > -1.0 && u < (double)cols && v > -1.0 && v < (double)rows))
        return false;
    const double fu = floor(u), fv = floor(v), gu = __dsub_rn(u, fu), gv = __dsub_rn(v, fv);
    const double scale = __dmul_rn(inv, inv);
    for (int dv = 0; dv < 2; dv++)
        for (int du = 0; du < 2; du++) {
            const long long uu = (long long)fu + du, vv = (long long)fv + dv;
            const bool on = uu >= 0 && uu < (long long)cols && vv >= 0 && vv < (long long)rows;
            const double wu = du ? gu : __dsub_rn(1.0, gu), wv = dv ? gv : __dsub_rn(1.0, gv);
            at[2 * dv + du] = on ? vv * (long long)cols + uu : -1;
            wt[2 * dv + du] = on ? (float)__dmul_rn(scale, __dmul_rn(wu, wv)) : 0.0f;
        }
    return true;
}

/* b: every detector pixel of each view from the kept measurements ([row][slot][col]); the
 * sum of b^2 into *sumsq, the least b's key into *least. */
__global__ void gather_cone_kernel(const float *__restrict__ meas, size_t slab, size_t pitch,
                                   const uint32_t *__restrict__ slots, uint32_t nproj,
                                   uint32_t rows, uint32_t cols, float *__restrict__ b,
                                   double *sumsq, unsigned *least)
{
    const size_t view_len = (size_t)rows * cols;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    double b2 = 0;
    unsigned key = 0xffffffffu;
    if (t < (size_t)nproj * view_len) {
        const size_t k = t / view_len, e = t % view_len;
        const float v = meas[(e / cols) * slab + (size_t)slots[k] * pitch + e % cols];
        b[t] = v;
        b2 = (double)v * v;
        key = float_key(__float_as_uint(v));
    }
    warp_extreme<true>(key, least);
    block_sum(b2, sumsq);
}

/* The pixel of this thread: (i, j) of slice blockIdx.y, and its index in x; false past
 * the slice's end (the grid covers the largest slice). */
__device__ __forceinline__ bool this_pixel(const itc_slice *__restrict__ sl, itc_slice *s,
                                           uint32_t *i, uint32_t *j, size_t *q)
{
    *s = sl[blockIdx.y];
    const uint32_t local = blockIdx.x * blockDim.x + threadIdx.x;
    if (local >= s->h * s->w)
        return false;
    *i = local / s->w;
    *j = local % s->w;
    *q = (size_t)s->first + local;
    return true;
}

/* A x (x NULL: ones) of view first + blockIdx.z * stride added into ax: a thread per pixel
 * scatters into the four detector pixels it reaches. Views are the grid's slowest axis, so
 * the blocks running at once scatter into one view's projection (their atomics meet in
 * L2), not into every view's. */
__global__ void forward_cone_kernel(const itc_slice *__restrict__ sl, const double *__restrict__ m,
                                    uint32_t first, uint32_t stride, uint32_t rows, uint32_t cols,
                                    const float *__restrict__ x, float *__restrict__ ax)
{
    itc_slice s;
    uint32_t i, j;
    size_t q;
    if (!this_pixel(sl, &s, &i, &j, &q))
        return;
    const float xv = x ? x[q] : 1.0f;
    if (xv == 0.0f)
        return;
    const uint32_t k = first + blockIdx.z * stride;
    double p[3];
    pixel_position(s, i, j, p);
    long long at[4];
    float wt[4];
    if (!taps(m + 12 * (size_t)k, p, rows, cols, at, wt))
        return;
    float *y = ax + (size_t)k * rows * cols;
    for (int t = 0; t < 4; t++)
        if (at[t] >= 0)
            atomicAdd(&y[at[t]], wt[t] * xv);
}

/* A thread per pixel: g = A_S^T r and c = A_S^T 1 over the subset's views, then the update
 * x += lambda g / c (SART) or x *= g / c (EM); a pixel the subset does not see is left. */
__global__ void backward_cone_kernel(const itc_slice *__restrict__ sl, const double *__restrict__ m,
                                     uint32_t first, uint32_t stride, uint32_t count,
                                     uint32_t rows, uint32_t cols, tl_it_rule rule, float lambda,
                                     const float *__restrict__ r, float *__restrict__ x)
{
    itc_slice s;
    uint32_t i, j;
    size_t q;
    if (!this_pixel(sl, &s, &i, &j, &q))
        return;
    double p[3];
    pixel_position(s, i, j, p);
    float g = 0.0f, norm = 0.0f;
    for (uint32_t n = 0; n < count; n++) {
        const uint32_t k = first + n * stride;
        long long at[4];
        float wt[4];
        if (!taps(m + 12 * (size_t)k, p, rows, cols, at, wt))
            continue;
        const float *rk = r + (size_t)k * rows * cols;
        for (int t = 0; t < 4; t++)
            if (at[t] >= 0) {
                g += wt[t] * __ldg(&rk[at[t]]);
                norm += wt[t];
            }
    }
    if (!(norm > 0.0f))
        return;
    x[q] = rule == TL_IT_EM ? x[q] * (g / norm) : x[q] + lambda * (g / norm);
}

/* ax = the sum of the parts' shares of A x, in part order, over subset (first, stride,
 * count) of views of view_len values. */
__global__ void sum_shares_kernel(itc_shares in, uint32_t nparts, size_t view_len, uint32_t first,
                                  uint32_t stride, uint32_t count, float *ax)
{
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)count * view_len)
        return;
    const size_t e = (size_t)(first + (uint32_t)(t / view_len) * stride) * view_len + t % view_len;
    float sum = 0.0f;
    for (uint32_t j = 0; j < nparts; j++)
        sum += in.share[j][e];
    ax[e] = sum;
}

/* The planes along ray r that can reach voxels [lo, hi) of grid g: a ray walking the
 * stack's planes (axis 2) reads plane m alone on step m; others may read any. */
__device__ __forceinline__ void joseph_range(const tl_joseph_ray &r, const tl_joseph_grid &g,
                                             long long lo, long long hi, uint32_t *m0,
                                             uint32_t *m1)
{
    const long long plane = (long long)g.n[0] * g.n[1];
    *m0 = 0;
    *m1 = r.planes;
    if (r.a == 2) {
        *m0 = (uint32_t)(lo / plane);
        *m1 = (uint32_t)((hi + plane - 1) / plane);
    }
}

/* Joseph's A x (x NULL: ones) of view first + blockIdx.y * stride into ax: a thread per
 * detector pixel walks its ray, reading the voxels of [lo, hi) (its device's slab). */
__global__ void forward_joseph_kernel(tl_joseph_grid g, const tl_joseph_view *__restrict__ jv,
                                      uint32_t first, uint32_t stride, uint32_t rows, uint32_t cols,
                                      long long lo, long long hi, const float *__restrict__ x,
                                      float *__restrict__ ax)
{
    const uint32_t e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= rows * cols)
        return;
    const uint32_t k = first + blockIdx.y * stride;
    tl_joseph_ray r;
    double sum = 0;
    long long at[4];
    double wt[4];
    uint32_t m0, m1;
    if (tl_joseph_ray_of(&jv[k], &g, e % cols, e / cols, &r))
        for (joseph_range(r, g, lo, hi, &m0, &m1); m0 < m1; m0++)
            if (tl_joseph_taps(&r, &g, m0, at, wt))
                for (int t = 0; t < 4; t++)
                    if (at[t] >= lo && at[t] < hi)
                        sum += wt[t] * (x ? x[at[t]] : 1.0f);
    ax[(size_t)k * rows * cols + e] = (float)sum;
}

/* Joseph's transpose over the subset's views: a thread per detector pixel and view adds
 * its r into g and 1 into A^T 1 (acc, acc + npix) at the voxels of [lo, hi) it reads. */
__global__ void backward_joseph_kernel(tl_joseph_grid g, const tl_joseph_view *__restrict__ jv,
                                       uint32_t first, uint32_t stride, uint32_t rows,
                                       uint32_t cols, long long lo, long long hi,
                                       const float *__restrict__ r, float *__restrict__ acc,
                                       size_t npix)
{
    const uint32_t e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= rows * cols)
        return;
    const uint32_t k = first + blockIdx.y * stride;
    const float value = r[(size_t)k * rows * cols + e];
    tl_joseph_ray ray;
    long long at[4];
    double wt[4];
    uint32_t m0, m1;
    if (!tl_joseph_ray_of(&jv[k], &g, e % cols, e / cols, &ray))
        return;
    for (joseph_range(ray, g, lo, hi, &m0, &m1); m0 < m1; m0++)
        if (tl_joseph_taps(&ray, &g, m0, at, wt))
            for (int t = 0; t < 4; t++)
                if (at[t] >= lo && at[t] < hi) {
                    atomicAdd(&acc[at[t]], (float)wt[t] * value);
                    atomicAdd(&acc[npix + at[t]], (float)wt[t]);
                }
}

/* The update of voxels [lo, lo + n) from Joseph's g and A^T 1: x += lambda g / c (SART) or
 * x *= g / c (EM); a voxel the subset does not see is left. */
__global__ void update_joseph_kernel(const float *__restrict__ acc, size_t npix, size_t lo,
                                     size_t n, tl_it_rule rule, float lambda, float *__restrict__ x)
{
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n)
        return;
    const size_t q = lo + t;
    const float g = acc[q], norm = acc[npix + q];
    if (!(norm > 0.0f))
        return;
    x[q] = rule == TL_IT_EM ? x[q] * (g / norm) : x[q] + lambda * (g / norm);
}

/* The forward differences of x at pixel (i, j) of slice s, index v: along the row, up the
 * rows (row i - 1) and to the next plane; and their smoothed norm. */
__device__ __forceinline__ float tv_diff(const float *__restrict__ x, const itc_slice &s,
                                         uint32_t i, uint32_t j, size_t v, float eps2, float d[3])
{
    d[0] = j + 1 < s.w ? x[v + 1] - x[v] : 0.0f;
    d[1] = i > 0 ? x[v - s.w] - x[v] : 0.0f;
    d[2] = s.next ? x[v + s.next] - x[v] : 0.0f;
    return sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2);
}

/* The smoothed TV's gradient (gpu/cpu/iterative_cone.c's tv_gradient, gathered per voxel:
 * its own differences, and those of the voxels before it along each axis, which reach
 * it), and the sum of its squares into *gn. */
__global__ void tv_gradient_cone_kernel(const itc_slice *__restrict__ sl,
                                        const float *__restrict__ x, float *__restrict__ g,
                                        float eps2, double *gn)
{
    itc_slice s;
    uint32_t i, j;
    size_t v;
    double sq = 0;
    if (this_pixel(sl, &s, &i, &j, &v)) {
        float d[3], nrm = tv_diff(x, s, i, j, v, eps2, d);
        float sum = -(d[0] + d[1] + d[2]) / nrm;
        if (j > 0) {
            nrm = tv_diff(x, s, i, j - 1, v - 1, eps2, d);
            sum += d[0] / nrm;
        }
        if (i + 1 < s.h) {
            nrm = tv_diff(x, s, i + 1, j, v + s.w, eps2, d);
            sum += d[1] / nrm;
        }
        if (s.prev) { /* the previous plane's slice: this one's shape, this one next */
            itc_slice below = s;
            below.next = s.prev;
            nrm = tv_diff(x, below, i, j, v - s.prev, eps2, d);
            sum += d[2] / nrm;
        }
        g[v] = sum;
        sq = (double)sum * sum;
    }
    block_sum(sq, gn);
}

/* ---- one part, and the parts together ------------------------------------------------- */

/* Makes part q's device current: every call on its stream or buffers comes after. */
static tl_status on(tl_cuda_state *s, const itc_part *q)
{
    TL_CUDA(s->eb, cudaSetDevice(q->device));
    return TL_OK;
}

static tl_cuda_queue queue(tl_cuda_state *s, const itc_part *q)
{
    return tl_cuda_queue{q->stream, s->eb};
}

static void free_part(tl_cuda_state *s, itc_part *q)
{
    if (cudaSetDevice(q->device) != cudaSuccess)
        return; /* teardown: nothing to do about a failure */
    if (q->stream)
        cudaStreamSynchronize(q->stream);
    void *bufs[] = {q->slices, q->m, q->slots, q->x,    q->b,
                    q->ax,     q->r, q->R,     q->others, q->sums, q->least};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        cudaFree(bufs[i]);
    if (q->projected)
        cudaEventDestroy(q->projected);
    if (q->copied)
        cudaEventDestroy(q->copied);
    if (q->stepped)
        cudaEventDestroy(q->stepped);
    cudaFree(q->mark);
    cudaFree(q->g);
    cudaFree(q->jv);
    cudaFree(q->acc);
    if (q->stream && q->stream != s->stream)
        cudaStreamDestroy(q->stream);
}

void tl_cuda_itc_free(tl_cuda_state *s)
{
    tl_cuda_itc *c = s->itc;
    if (!c)
        return;
    for (uint32_t k = 0; k < c->nparts; k++)
        free_part(s, &c->part[k]);
    cudaSetDevice(s->device);
    cudaGetLastError(); /* teardown: clear what a failure above left */
    s->mem -= c->bytes;
    free(c->table);
    free(c);
    s->itc = NULL;
}

/* Every part's share of A x of subset v into its ax (x NULL: ones), the subset's views
 * zeroed first. */
static tl_status forward_shares(tl_cuda_state *s, tl_it_views v, bool ones)
{
    tl_cuda_itc *c = s->itc;
    for (uint32_t k = 0; k < c->nparts; k++) {
        const itc_part *q = &c->part[k];
        TL_TRY(on(s, q));
        if (v.stride == 1)
            TL_CUDA(s->eb, cudaMemsetAsync(q->ax + (size_t)v.first * c->view_len, 0,
                                           v.count * c->view_len * sizeof(float), q->stream));
        else
            for (uint32_t n = 0; n < v.count; n++)
                TL_CUDA(s->eb,
                        cudaMemsetAsync(q->ax + (size_t)(v.first + n * v.stride) * c->view_len, 0,
                                        c->view_len * sizeof(float), q->stream));
        if (c->joseph) {
            const dim3 grid(tl_cuda_it_blocks(c->view_len), v.count);
            forward_joseph_kernel<<<grid, IT_BLOCK, 0, q->stream>>>(
                c->grid, q->jv, v.first, v.stride, c->rows, c->cols, (long long)q->pix0,
                (long long)(q->pix0 + q->npix), ones ? NULL : q->x, q->ax);
            TL_CUDA_LAUNCHED(s->eb, "forward_joseph_kernel");
            continue;
        }
        const dim3 grid(tl_cuda_it_blocks(c->slice_max), q->nslices, v.count);
        forward_cone_kernel<<<grid, IT_BLOCK, 0, q->stream>>>(q->slices + q->slice0, q->m,
                                                              v.first, v.stride, c->rows,
                                                              c->cols, ones ? NULL : q->x, q->ax);
        TL_CUDA_LAUNCHED(s->eb, "forward_cone_kernel");
    }
    return TL_OK;
}

/* Copies part `from`'s share of subset v into slot j of part q's `others`. */
static tl_status copy_share(tl_cuda_state *s, const itc_part *q, const itc_part *from, uint32_t j,
                            tl_it_views v)
{
    tl_cuda_itc *c = s->itc;
    float *dst = q->others + (size_t)j * c->nmeas;
    const size_t view_bytes = c->view_len * sizeof(float);
    const uint32_t runs = v.stride == 1 ? 1 : v.count; /* contiguous views: one copy */
    const size_t bytes = v.stride == 1 ? v.count * view_bytes : view_bytes;
    for (uint32_t n = 0; n < runs; n++) {
        const size_t at = (size_t)(v.first + n * v.stride) * c->view_len;
        TL_CUDA(s->eb, cudaMemcpyPeerAsync(dst + at, q->device, from->ax + at, from->device,
                                           bytes, q->stream));
    }
    return TL_OK;
}

/* With several parts: A x of subset v on every part, the sum of their shares. Part q
 * copies the others' shares once they are projected, and overwrites its own only once
 * every other part has copied it. */
static tl_status sum_shares(tl_cuda_state *s, tl_it_views v)
{
    tl_cuda_itc *c = s->itc;
    if (c->nparts == 1)
        return TL_OK;
    for (uint32_t k = 0; k < c->nparts; k++) {
        TL_TRY(on(s, &c->part[k]));
        TL_CUDA(s->eb, cudaEventRecord(c->part[k].projected, c->part[k].stream));
    }
    for (uint32_t k = 0; k < c->nparts; k++) {
        const itc_part *q = &c->part[k];
        TL_TRY(on(s, q));
        for (uint32_t j = 0, slot = 0; j < c->nparts; j++) {
            if (j == k)
                continue;
            TL_CUDA(s->eb, cudaStreamWaitEvent(q->stream, c->part[j].projected, 0));
            TL_TRY(copy_share(s, q, &c->part[j], slot++, v));
        }
        TL_CUDA(s->eb, cudaEventRecord(q->copied, q->stream));
    }
    for (uint32_t k = 0; k < c->nparts; k++) {
        const itc_part *q = &c->part[k];
        TL_TRY(on(s, q));
        itc_shares in;
        for (uint32_t j = 0, slot = 0; j < c->nparts; j++) {
            if (j == k) {
                in.share[j] = q->ax;
                continue;
            }
            TL_CUDA(s->eb, cudaStreamWaitEvent(q->stream, c->part[j].copied, 0));
            in.share[j] = q->others + (size_t)slot++ * c->nmeas;
        }
        sum_shares_kernel<<<tl_cuda_it_blocks((size_t)v.count * c->view_len), IT_BLOCK, 0,
                            q->stream>>>(in, c->nparts, c->view_len, v.first, v.stride, v.count,
                                         q->ax);
        TL_CUDA_LAUNCHED(s->eb, "sum_shares_kernel");
    }
    return TL_OK;
}

/* A x of subset v (ones: A 1) into every part's ax. */
static tl_status forward(tl_cuda_state *s, tl_it_views v, bool ones)
{
    TL_TRY(forward_shares(s, v, ones));
    return sum_shares(s, v);
}

/* ---- setting a problem up ---------------------------------------------------------------- */

/* The devices of the engine's configuration: the engine's own first. */
static uint32_t devices_of(const tl_cuda_state *s, int dev[ITC_MAX_PARTS])
{
    const tl_engine_config *cfg = &s->cfg;
    dev[0] = s->device;
    if (cfg->ndevices < 2)
        return 1;
    for (uint32_t k = 1; k < cfg->ndevices && k < ITC_MAX_PARTS; k++)
        dev[k] = cfg->devices[k];
    return cfg->ndevices;
}

/* Deals the slices to the parts, in order, balanced by pixels: each part at least one. */
static void deal_slices(tl_cuda_itc *c, const tl_it_problem *p)
{
    uint32_t next = 0;
    size_t taken = 0;
    for (uint32_t k = 0; k < c->nparts; k++) {
        itc_part *q = &c->part[k];
        q->slice0 = next;
        q->pix0 = taken;
        const size_t target = (k + 1) * c->npix / c->nparts;
        const uint32_t left_for_others = c->nparts - 1 - k;
        do {
            taken += (size_t)p->slices[next].height * p->slices[next].width;
            next++;
        } while (next < p->nslices - left_for_others && taken < target);
        q->nslices = next - q->slice0;
        q->npix = taken - q->pix0;
    }
}

static tl_status alloc_part(tl_cuda_state *s, itc_part *q, const tl_it_problem *p, bool first)
{
    tl_cuda_itc *c = s->itc;
    TL_TRY(on(s, q));
    if (first)
        q->stream = s->stream;
    else
        TL_CUDA(s->eb, cudaStreamCreateWithFlags(&q->stream, cudaStreamNonBlocking));
    TL_CUDA(s->eb, cudaEventCreateWithFlags(&q->projected, cudaEventDisableTiming));
    TL_CUDA(s->eb, cudaEventCreateWithFlags(&q->copied, cudaEventDisableTiming));
    TL_CUDA(s->eb, cudaEventCreateWithFlags(&q->stepped, cudaEventDisableTiming));
    tl_cuda_enable_peers(q->device);
    char what[96];
    snprintf(what, sizeof what, "iterative cone-beam reconstruction (CUDA device %d)", q->device);
    const size_t before = s->mem;
    struct {
        void **p;
        size_t bytes;
    } want[] = {
        {(void **)&q->slices, p->nslices * sizeof(itc_slice)},
        {(void **)&q->m, (size_t)p->nproj * 12 * sizeof(double)},
        {(void **)&q->slots, p->nproj * sizeof(uint32_t)},
        {(void **)&q->x, c->npix * sizeof(float)},
        {(void **)&q->b, c->nmeas * sizeof(float)},
        {(void **)&q->ax, c->nmeas * sizeof(float)},
        {(void **)&q->r, c->nmeas * sizeof(float)},
        {(void **)&q->R, c->nmeas * sizeof(float)},
        {(void **)&q->others, (c->nparts - 1) * c->nmeas * sizeof(float)},
        {(void **)&q->sums, 2 * sizeof(double)},
        {(void **)&q->least, sizeof(unsigned)},
        {(void **)&q->jv, c->joseph ? p->nproj * sizeof(tl_joseph_view) : 0},
        {(void **)&q->acc, c->joseph ? 2 * c->npix * sizeof(float) : 0},
    };
    tl_status st = TL_OK;
    for (size_t i = 0; st == TL_OK && i < sizeof want / sizeof *want; i++)
        if (want[i].bytes)
            st = tl_cuda_alloc(s, want[i].p, want[i].bytes, what);
    c->bytes += s->mem - before;
    return st;
}

static tl_status alloc_itc(tl_cuda_state *s, const tl_it_problem *p)
{
    tl_cuda_itc *c = (tl_cuda_itc *)calloc(1, sizeof *c);
    if (!c)
        return tl_fail(s->eb, TL_ENOMEM, "iterative: no host memory");
    s->itc = c;
    c->nslices = p->nslices;
    c->nproj = p->nproj;
    c->rows = s->rows;
    c->cols = s->cols;
    c->npix = tl_it_pixels(p);
    c->view_len = (size_t)s->rows * s->cols;
    c->nmeas = (size_t)p->nproj * c->view_len;
    for (uint32_t n = 0; n < p->nslices; n++) {
        const size_t px = (size_t)p->slices[n].height * p->slices[n].width;
        c->slice_max = px > c->slice_max ? (uint32_t)px : c->slice_max;
    }
    if (p->nslices > ITC_MAX_GRID || p->nproj > ITC_MAX_GRID)
        return tl_fail(s->eb, TL_EINVAL,
                       "iterative: %u slices and %u views in a cone-beam stack: at most %u each",
                       p->nslices, p->nproj, ITC_MAX_GRID);
    if (p->projector == TL_PROJECTOR_JOSEPH) {
        TL_TRY(tl_joseph_grid_of(p, &c->grid, s->eb));
        c->joseph = true;
    }
    int dev[ITC_MAX_PARTS];
    uint32_t ndev = devices_of(s, dev);
    c->nparts = ndev < p->nslices ? ndev : p->nslices; /* a slice is a part's least share */
    for (uint32_t k = 0; k < c->nparts; k++)
        c->part[k].device = dev[k];
    deal_slices(c, p);
    for (uint32_t k = 0; k < c->nparts; k++)
        TL_TRY(alloc_part(s, &c->part[k], p, k == 0));
    return TL_OK;
}

/* The host tables (each slice's pixel placement, tl_bp_slice_grid; each view's matrix
 * and slot) onto every part's device. */
static tl_status upload_tables(tl_cuda_state *s, const tl_it_problem *p)
{
    tl_cuda_itc *c = s->itc;
    itc_slice *hs = (itc_slice *)malloc(p->nslices * sizeof *hs);
    double *hm = (double *)malloc((size_t)p->nproj * 12 * sizeof *hm);
    uint32_t *hslot = (uint32_t *)malloc(p->nproj * sizeof *hslot);
    tl_joseph_view *hjv =
        c->joseph ? (tl_joseph_view *)malloc(p->nproj * sizeof *hjv) : (tl_joseph_view *)NULL;
    tl_status st = hs && hm && hslot && (hjv || !c->joseph)
                       ? TL_OK
                       : tl_fail(s->eb, TL_ENOMEM, "iterative: no host memory for the tables");
    for (uint32_t k = 0; st == TL_OK && hjv && k < p->nproj; k++)
        if (!tl_joseph_view_of(&c->grid, p->proj[k].cone, &hjv[k]))
            st = tl_fail(s->eb, TL_EINVAL, "iterative: view %u's matrix is singular", k);
    unsigned long long first = 0;
    for (uint32_t n = 0; st == TL_OK && n < p->nslices; n++) {
        const tl_bp_slice *sl = &p->slices[n];
        hs[n] = (itc_slice){.grid = tl_bp_slice_grid(sl),
                            .h = sl->height,
                            .w = sl->width,
                            .first = first,
                            .next = 0,
                            .prev = 0};
        first += (unsigned long long)sl->height * sl->width;
        if (n > 0 && hs[n - 1].h == hs[n].h && hs[n - 1].w == hs[n].w) /* the stack's planes */
            hs[n - 1].next = hs[n].prev = (long long)(hs[n].first - hs[n - 1].first);
    }
    for (uint32_t k = 0; st == TL_OK && k < p->nproj; k++) {
        memcpy(hm + 12 * (size_t)k, p->proj[k].cone, 12 * sizeof *hm);
        hslot[k] = p->proj[k].slot;
    }
    cudaError_t e = cudaSuccess;
    for (uint32_t k = 0; st == TL_OK && e == cudaSuccess && k < c->nparts; k++) {
        const itc_part *q = &c->part[k];
        e = cudaSetDevice(q->device);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(q->slices, hs, p->nslices * sizeof *hs, cudaMemcpyHostToDevice,
                                q->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(q->m, hm, (size_t)p->nproj * 12 * sizeof *hm,
                                cudaMemcpyHostToDevice, q->stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(q->slots, hslot, p->nproj * sizeof *hslot,
                                cudaMemcpyHostToDevice, q->stream);
        if (e == cudaSuccess && hjv)
            e = cudaMemcpyAsync(q->jv, hjv, p->nproj * sizeof *hjv, cudaMemcpyHostToDevice,
                                q->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(q->stream); /* before the host tables go */
    }
    if (st == TL_OK && e != cudaSuccess)
        st = tl_cuda_fail_call(s->eb, e, "cudaMemcpyAsync (iterative cone tables)", __FILE__,
                               __LINE__);
    c->table = hs; /* kept */
    free(hm);
    free(hslot);
    free(hjv);
    return st;
}

/* b from the kept measurements, with ||b||^2 and min b reduced on the engine's device,
 * then copied to the other parts. */
static tl_status gather(tl_cuda_state *s, double stats[2])
{
    tl_cuda_itc *c = s->itc;
    const itc_part *q = &c->part[0];
    TL_TRY(on(s, q));
    unsigned least = 0xffffffffu;
    TL_CUDA(s->eb, cudaMemsetAsync(q->sums, 0, 2 * sizeof(double), q->stream));
    TL_CUDA(s->eb,
            cudaMemcpyAsync(q->least, &least, sizeof least, cudaMemcpyHostToDevice, q->stream));
    gather_cone_kernel<<<tl_cuda_it_blocks(c->nmeas), IT_BLOCK, 0, q->stream>>>(
        s->meas, s->slab_el, s->pitch_el, q->slots, c->nproj, c->rows, c->cols, q->b, q->sums,
        q->least);
    TL_CUDA_LAUNCHED(s->eb, "gather_cone_kernel");
    TL_CUDA(s->eb,
            cudaMemcpyAsync(&least, q->least, sizeof least, cudaMemcpyDeviceToHost, q->stream));
    double sums[2];
    TL_TRY(tl_cuda_it_read_sums(queue(s, q), q->sums, sums)); /* waits: least is there too */
    stats[0] = sums[0];
    stats[1] = key_float(least);
    for (uint32_t k = 1; k < c->nparts; k++) {
        const itc_part *to = &c->part[k];
        TL_TRY(on(s, to));
        TL_CUDA(s->eb, cudaMemcpyPeerAsync(to->b, to->device, q->b, q->device,
                                           c->nmeas * sizeof(float), to->stream));
    }
    return TL_OK;
}

/* ---- the operations ---------------------------------------------------------------------- */

tl_status tl_cuda_itc_begin(tl_cuda_state *s, const tl_it_problem *p, double stats[2])
{
    if (!s->meas)
        return tl_fail(s->eb, TL_EINTERNAL, "iterative cone beam without kept measurements");
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    tl_cuda_itc_free(s);
    tl_status st = alloc_itc(s, p);
    if (st == TL_OK)
        st = upload_tables(s, p);
    if (st == TL_OK)
        st = gather(s, stats);
    if (st == TL_OK) /* R = 1 / (A 1) over every view, on every part */
        st = forward(s, (tl_it_views){0, 1, p->nproj}, true);
    tl_cuda_itc *c = s->itc;
    for (uint32_t k = 0; st == TL_OK && k < c->nparts; k++) {
        const itc_part *q = &c->part[k];
        cudaError_t e = cudaSetDevice(q->device);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(q->R, q->ax, c->nmeas * sizeof(float), cudaMemcpyDeviceToDevice,
                                q->stream);
        if (e == cudaSuccess)
            e = cudaMemsetAsync(q->x, 0, c->npix * sizeof(float), q->stream);
        if (e != cudaSuccess)
            st = tl_cuda_fail_call(s->eb, e, "cudaMemcpyAsync (iterative cone R)", __FILE__,
                                   __LINE__);
        if (st == TL_OK)
            st = tl_cuda_it_invert(queue(s, q), q->R, c->nmeas);
    }
    if (st == TL_OK)
        st = tl_cuda_use_device(s);
    if (st != TL_OK)
        tl_cuda_itc_free(s);
    return st;
}

/* in (host; NULL: keep) into each part's slab of x, then each slab into out (NULL: none). */
tl_status tl_cuda_itc_image(tl_cuda_state *s, const float *in, float *out)
{
    tl_cuda_itc *c = s->itc;
    for (uint32_t k = 0; k < c->nparts; k++) {
        const itc_part *q = &c->part[k];
        const size_t bytes = q->npix * sizeof(float);
        TL_TRY(on(s, q));
        if (in)
            TL_CUDA(s->eb, cudaMemcpyAsync(q->x + q->pix0, in + q->pix0, bytes,
                                           cudaMemcpyHostToDevice, q->stream));
        if (out)
            TL_CUDA(s->eb, cudaMemcpyAsync(out + q->pix0, q->x + q->pix0, bytes,
                                           cudaMemcpyDeviceToHost, q->stream));
    }
    for (uint32_t k = 0; k < c->nparts; k++) { /* in may be freed, out read */
        TL_TRY(on(s, &c->part[k]));
        TL_CUDA(s->eb, cudaStreamSynchronize(c->part[k].stream));
    }
    return tl_cuda_use_device(s);
}

tl_status tl_cuda_itc_forward(tl_cuda_state *s, tl_it_views v, tl_it_rule rule, double *sumsq)
{
    tl_cuda_itc *c = s->itc;
    TL_TRY(forward(s, v, false));
    /* every part needs the rule's values of the subset; the first one's sums are read */
    for (uint32_t k = c->nparts; k-- > 0;) {
        const itc_part *q = &c->part[k];
        double *sums = k == 0 && sumsq ? q->sums : NULL;
        TL_TRY(on(s, q));
        if (sums)
            TL_CUDA(s->eb, cudaMemsetAsync(sums, 0, 2 * sizeof(double), q->stream));
        TL_TRY(tl_cuda_it_rule(queue(s, q), (uint32_t)c->view_len, v, rule, q->b, q->ax, q->R,
                               q->r, sums));
    }
    if (!sumsq)
        return TL_OK;
    double sums[2];
    TL_TRY(tl_cuda_it_read_sums(queue(s, &c->part[0]), c->part[0].sums, sums));
    *sumsq = sums[0];
    return TL_OK;
}

tl_status tl_cuda_itc_backward(tl_cuda_state *s, tl_it_views v, tl_it_rule rule, double lambda)
{
    tl_cuda_itc *c = s->itc;
    for (uint32_t k = c->nparts; k-- > 0;) { /* the engine's device last: current after */
        const itc_part *q = &c->part[k];
        TL_TRY(on(s, q));
        if (c->joseph) {
            TL_CUDA(s->eb, cudaMemsetAsync(q->acc, 0, 2 * c->npix * sizeof(float), q->stream));
            const dim3 rays(tl_cuda_it_blocks(c->view_len), v.count);
            backward_joseph_kernel<<<rays, IT_BLOCK, 0, q->stream>>>(
                c->grid, q->jv, v.first, v.stride, c->rows, c->cols, (long long)q->pix0,
                (long long)(q->pix0 + q->npix), q->r, q->acc, c->npix);
            TL_CUDA_LAUNCHED(s->eb, "backward_joseph_kernel");
            update_joseph_kernel<<<tl_cuda_it_blocks(q->npix), IT_BLOCK, 0, q->stream>>>(
                q->acc, c->npix, q->pix0, q->npix, rule, (float)lambda, q->x);
            TL_CUDA_LAUNCHED(s->eb, "update_joseph_kernel");
            continue;
        }
        const dim3 grid(tl_cuda_it_blocks(c->slice_max), q->nslices);
        backward_cone_kernel<<<grid, IT_BLOCK, 0, q->stream>>>(q->slices + q->slice0, q->m,
                                                               v.first, v.stride, v.count,
                                                               c->rows, c->cols, rule,
                                                               (float)lambda, q->r, q->x);
        TL_CUDA_LAUNCHED(s->eb, "backward_cone_kernel");
    }
    return TL_OK;
}

tl_status tl_cuda_itc_mark(tl_cuda_state *s)
{
    tl_cuda_itc *c = s->itc;
    for (uint32_t k = 0; k < c->nparts; k++) {
        itc_part *q = &c->part[k];
        TL_TRY(on(s, q));
        const size_t before = s->mem;
        tl_status st = TL_OK;
        if (!q->mark)
            st = tl_cuda_alloc(s, (void **)&q->mark, c->npix * sizeof(float), "TV steps");
        if (st == TL_OK && !q->g)
            st = tl_cuda_alloc(s, (void **)&q->g, c->npix * sizeof(float), "TV steps");
        c->bytes += s->mem - before;
        TL_TRY(st);
        TL_CUDA(s->eb, cudaMemcpyAsync(q->mark + q->pix0, q->x + q->pix0, q->npix * sizeof(float),
                                       cudaMemcpyDeviceToDevice, q->stream));
    }
    return tl_cuda_use_device(s);
}

/* The pair of doubles every part reduced into its sums: added over the parts (max for
 * `largest`, as floats' bits in least), after the work queued so far. */
static tl_status gather_sums(tl_cuda_state *s, double total[2], float *largest)
{
    tl_cuda_itc *c = s->itc;
    total[0] = total[1] = 0;
    unsigned most = 0;
    for (uint32_t k = 0; k < c->nparts; k++) {
        const itc_part *q = &c->part[k];
        TL_TRY(on(s, q));
        unsigned bits = 0;
        if (largest)
            TL_CUDA(s->eb, cudaMemcpyAsync(&bits, q->least, sizeof bits, cudaMemcpyDeviceToHost,
                                           q->stream));
        double sums[2];
        TL_TRY(tl_cuda_it_read_sums(queue(s, q), q->sums, sums)); /* waits: bits too */
        total[0] += sums[0];
        total[1] += sums[1];
        most = bits > most ? bits : most;
    }
    if (largest)
        memcpy(largest, &most, sizeof most);
    return TL_OK;
}

/* Part k's neighbours' boundary planes into its x: the plane before its slab and the one
 * after it, once the neighbours' last step is done. */
static tl_status copy_halo(tl_cuda_state *s, uint32_t k)
{
    const itc_slice *table = s->itc->table;
    tl_cuda_itc *c = s->itc;
    const itc_part *q = &c->part[k];
    const int side[2] = {-1, 1};
    for (int t = 0; t < 2; t++) {
        if ((t == 0 && k == 0) || (t == 1 && k + 1 == c->nparts))
            continue;
        const itc_part *n = &c->part[k + side[t]];
        const itc_slice &plane = table[t == 0 ? q->slice0 - 1 : q->slice0 + q->nslices];
        TL_CUDA(s->eb, cudaStreamWaitEvent(q->stream, n->stepped, 0));
        TL_CUDA(s->eb, cudaMemcpyPeerAsync(q->x + plane.first, q->device, n->x + plane.first,
                                           n->device,
                                           (size_t)plane.h * plane.w * sizeof(float), q->stream));
    }
    return TL_OK;
}

/* The TV steps on every part's slab (tl_cuda_itc_regularise). */
static tl_status tv_steps(tl_cuda_state *s, double tv_weight, uint32_t steps)
{
    tl_cuda_itc *c = s->itc;
    double sums[2];
    float amax;
    TL_TRY(gather_sums(s, sums, &amax)); /* the clamp's: moved and max |x| */
    if (!(amax > 0))
        return TL_OK; /* a zero image: nothing to smooth */
    const float eps = (float)(TL_TV_SMOOTHING * amax);
    const double step = tv_weight * sqrt(sums[0]);
    for (uint32_t n = 0; n < steps; n++) {
        for (uint32_t k = 0; k < c->nparts; k++) {
            TL_TRY(on(s, &c->part[k]));
            TL_CUDA(s->eb, cudaEventRecord(c->part[k].stepped, c->part[k].stream));
        }
        for (uint32_t k = 0; k < c->nparts; k++) {
            const itc_part *q = &c->part[k];
            TL_TRY(on(s, q));
            TL_TRY(copy_halo(s, k));
            TL_CUDA(s->eb, cudaMemsetAsync(q->sums, 0, 2 * sizeof(double), q->stream));
            const dim3 grid(tl_cuda_it_blocks(c->slice_max), q->nslices);
            tv_gradient_cone_kernel<<<grid, IT_BLOCK, 0, q->stream>>>(q->slices + q->slice0, q->x,
                                                                      q->g, eps * eps, q->sums + 1);
            TL_CUDA_LAUNCHED(s->eb, "tv_gradient_cone_kernel");
        }
        TL_TRY(gather_sums(s, sums, NULL)); /* waits: every halo is copied */
        const double gn = sqrt(sums[1]);
        if (!(gn > 0))
            break;
        for (uint32_t k = 0; k < c->nparts; k++) {
            const itc_part *q = &c->part[k];
            TL_TRY(on(s, q));
            TL_TRY(tl_cuda_it_tv_step(queue(s, q), q->x + q->pix0, q->g + q->pix0, q->npix,
                                      (float)(step / gn)));
        }
    }
    return TL_OK;
}

tl_status tl_cuda_itc_regularise(tl_cuda_state *s, bool nonneg, double tv_weight,
                                 uint32_t tv_steps_per)
{
    tl_cuda_itc *c = s->itc;
    const bool tv = tv_weight > 0 && tv_steps_per > 0;
    if (!nonneg && !tv)
        return TL_OK;
    for (uint32_t k = 0; k < c->nparts; k++) {
        const itc_part *q = &c->part[k];
        TL_TRY(on(s, q));
        if (tv) {
            TL_CUDA(s->eb, cudaMemsetAsync(q->sums, 0, 2 * sizeof(double), q->stream));
            TL_CUDA(s->eb, cudaMemsetAsync(q->least, 0, sizeof(unsigned), q->stream));
        }
        TL_TRY(tl_cuda_it_clamp(queue(s, q), q->x + q->pix0, tv ? q->mark + q->pix0 : NULL,
                                q->npix, nonneg, tv ? q->sums : NULL, tv ? q->least : NULL));
    }
    if (tv)
        TL_TRY(tv_steps(s, tv_weight, tv_steps_per));
    return tl_cuda_use_device(s);
}
