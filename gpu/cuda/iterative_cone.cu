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
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/check.cuh"
#include "gpu/cuda/cuda_state.cuh"
#include "gpu/cuda/iterative.cuh"

#define ITC_MAX_GRID 65535u /* slices (grid y) and views (grid z) of a problem */

/* A slice of the stack as the kernels place its pixels (tl_bp_slice_grid), and pixel
 * (i, j)'s index in x: `first` + i w + j. */
typedef struct {
    tl_bp_grid grid;
    uint32_t h, w;
    unsigned long long first;
} itc_slice;

struct tl_cuda_itc {
    uint32_t nslices, nproj, rows, cols;
    size_t npix, view_len;
    uint32_t slice_max; /* pixels of the largest slice: the kernels' grid in x */
    itc_slice *slices; /* device tables */
    double *m;         /* nproj x 12: each view's cone matrix */
    uint32_t *slots;
    float *x;                /* npix */
    float *b, *ax, *r, *R;   /* nproj * view_len */
    double *sums;            /* reductions, 2 */
    unsigned *least;         /* min b's float_key */
    size_t bytes;            /* device memory of all the above */
};

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

/* ---- the operations ---------------------------------------------------------------------- */

void tl_cuda_itc_free(tl_cuda_state *s)
{
    tl_cuda_itc *c = s->itc;
    if (!c)
        return;
    void *bufs[] = {c->slices, c->m, c->slots, c->x, c->b, c->ax, c->r, c->R, c->sums, c->least};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        cudaFree(bufs[i]); /* teardown: nothing to do about a failure */
    s->mem -= c->bytes;
    free(c);
    s->itc = NULL;
}

/* A x of subset v into ax (x NULL: ones), the subset's views zeroed first. */
static tl_status forward(tl_cuda_state *s, tl_it_views v, const float *x)
{
    tl_cuda_itc *c = s->itc;
    for (uint32_t n = 0; n < v.count; n++)
        TL_CUDA(s->eb, cudaMemsetAsync(c->ax + (size_t)(v.first + n * v.stride) * c->view_len,
                                       0, c->view_len * sizeof(float), s->stream));
    const dim3 grid(tl_cuda_it_blocks(c->slice_max), c->nslices, v.count);
    forward_cone_kernel<<<grid, IT_BLOCK, 0, s->stream>>>(c->slices, c->m, v.first, v.stride,
                                                          c->rows, c->cols, x, c->ax);
    TL_CUDA_LAUNCHED(s->eb, "forward_cone_kernel");
    return TL_OK;
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
    for (uint32_t n = 0; n < p->nslices; n++) {
        const size_t px = (size_t)p->slices[n].height * p->slices[n].width;
        c->slice_max = px > c->slice_max ? (uint32_t)px : c->slice_max;
    }
    if (p->nslices > ITC_MAX_GRID || p->nproj > ITC_MAX_GRID)
        return tl_fail(s->eb, TL_EINVAL,
                       "iterative: %u slices and %u views in a cone-beam stack: at most %u each",
                       p->nslices, p->nproj, ITC_MAX_GRID);
    const size_t nmeas = (size_t)p->nproj * c->view_len, before = s->mem;
    struct {
        void **p;
        size_t bytes;
    } want[] = {
        {(void **)&c->slices, p->nslices * sizeof(itc_slice)},
        {(void **)&c->m, (size_t)p->nproj * 12 * sizeof(double)},
        {(void **)&c->slots, p->nproj * sizeof(uint32_t)},
        {(void **)&c->x, c->npix * sizeof(float)},
        {(void **)&c->b, nmeas * sizeof(float)},
        {(void **)&c->ax, nmeas * sizeof(float)},
        {(void **)&c->r, nmeas * sizeof(float)},
        {(void **)&c->R, nmeas * sizeof(float)},
        {(void **)&c->sums, 2 * sizeof(double)},
        {(void **)&c->least, sizeof(unsigned)},
    };
    tl_status st = TL_OK;
    for (size_t i = 0; st == TL_OK && i < sizeof want / sizeof *want; i++)
        st = tl_cuda_alloc(s, want[i].p, want[i].bytes, "iterative cone-beam reconstruction");
    c->bytes = s->mem - before;
    return st;
}

/* The host tables: each slice's pixel placement (tl_bp_slice_grid), each view's matrix and
 * slot. */
static tl_status upload_tables(tl_cuda_state *s, const tl_it_problem *p)
{
    tl_cuda_itc *c = s->itc;
    itc_slice *hs = (itc_slice *)malloc(p->nslices * sizeof *hs);
    double *hm = (double *)malloc((size_t)p->nproj * 12 * sizeof *hm);
    uint32_t *hslot = (uint32_t *)malloc(p->nproj * sizeof *hslot);
    tl_status st = hs && hm && hslot ? TL_OK
                                     : tl_fail(s->eb, TL_ENOMEM, "iterative: no host memory for "
                                                                 "the tables");
    unsigned long long first = 0;
    for (uint32_t n = 0; st == TL_OK && n < p->nslices; n++) {
        const tl_bp_slice *sl = &p->slices[n];
        hs[n] = (itc_slice){.grid = tl_bp_slice_grid(sl),
                            .h = sl->height,
                            .w = sl->width,
                            .first = first};
        first += (unsigned long long)sl->height * sl->width;
    }
    for (uint32_t k = 0; st == TL_OK && k < p->nproj; k++) {
        memcpy(hm + 12 * (size_t)k, p->proj[k].cone, 12 * sizeof *hm);
        hslot[k] = p->proj[k].slot;
    }
    cudaError_t e = cudaSuccess;
    if (st == TL_OK)
        e = cudaMemcpyAsync(c->slices, hs, p->nslices * sizeof *hs, cudaMemcpyHostToDevice,
                            s->stream);
    if (st == TL_OK && e == cudaSuccess)
        e = cudaMemcpyAsync(c->m, hm, (size_t)p->nproj * 12 * sizeof *hm, cudaMemcpyHostToDevice,
                            s->stream);
    if (st == TL_OK && e == cudaSuccess)
        e = cudaMemcpyAsync(c->slots, hslot, p->nproj * sizeof *hslot, cudaMemcpyHostToDevice,
                            s->stream);
    if (st == TL_OK && e == cudaSuccess)
        e = cudaStreamSynchronize(s->stream); /* before the host tables go */
    if (st == TL_OK && e != cudaSuccess)
        st = tl_cuda_fail_call(s->eb, e, "cudaMemcpyAsync (iterative cone tables)", __FILE__,
                               __LINE__);
    free(hs);
    free(hm);
    free(hslot);
    return st;
}

/* b from the kept measurements, with ||b||^2 and min b reduced on the device. */
static tl_status gather(tl_cuda_state *s, double stats[2])
{
    tl_cuda_itc *c = s->itc;
    unsigned least = 0xffffffffu;
    TL_CUDA(s->eb, cudaMemsetAsync(c->sums, 0, 2 * sizeof(double), s->stream));
    TL_CUDA(s->eb,
            cudaMemcpyAsync(c->least, &least, sizeof least, cudaMemcpyHostToDevice, s->stream));
    const size_t nmeas = (size_t)c->nproj * c->view_len;
    gather_cone_kernel<<<tl_cuda_it_blocks(nmeas), IT_BLOCK, 0, s->stream>>>(
        s->meas, s->slab_el, s->pitch_el, c->slots, c->nproj, c->rows, c->cols, c->b, c->sums,
        c->least);
    TL_CUDA_LAUNCHED(s->eb, "gather_cone_kernel");
    TL_CUDA(s->eb,
            cudaMemcpyAsync(&least, c->least, sizeof least, cudaMemcpyDeviceToHost, s->stream));
    double sums[2];
    TL_TRY(tl_cuda_it_read_sums(s, c->sums, sums)); /* synchronises: least is there too */
    stats[0] = sums[0];
    stats[1] = key_float(least);
    return TL_OK;
}

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
    tl_cuda_itc *c = s->itc;
    if (st == TL_OK) /* R = 1 / (A 1) over every view */
        st = forward(s, (tl_it_views){0, 1, p->nproj}, NULL);
    if (st == TL_OK) {
        cudaError_t e = cudaMemcpyAsync(c->R, c->ax, (size_t)c->nproj * c->view_len * sizeof(float),
                                        cudaMemcpyDeviceToDevice, s->stream);
        if (e == cudaSuccess)
            e = cudaMemsetAsync(c->x, 0, c->npix * sizeof(float), s->stream);
        if (e != cudaSuccess)
            st = tl_cuda_fail_call(s->eb, e, "cudaMemcpyAsync (iterative cone R)", __FILE__,
                                   __LINE__);
    }
    if (st == TL_OK)
        st = tl_cuda_it_invert(s, c->R, (size_t)c->nproj * c->view_len);
    if (st != TL_OK)
        tl_cuda_itc_free(s);
    return st;
}

tl_status tl_cuda_itc_image(tl_cuda_state *s, const float *in, float *out)
{
    TL_TRY(tl_cuda_use_device(s));
    tl_cuda_itc *c = s->itc;
    const size_t bytes = c->npix * sizeof(float);
    if (in)
        TL_CUDA(s->eb, cudaMemcpyAsync(c->x, in, bytes, cudaMemcpyHostToDevice, s->stream));
    if (out)
        TL_CUDA(s->eb, cudaMemcpyAsync(out, c->x, bytes, cudaMemcpyDeviceToHost, s->stream));
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream)); /* in may be freed, out read */
    return TL_OK;
}

tl_status tl_cuda_itc_forward(tl_cuda_state *s, tl_it_views v, tl_it_rule rule, double *sumsq)
{
    TL_TRY(tl_cuda_use_device(s));
    tl_cuda_itc *c = s->itc;
    TL_TRY(forward(s, v, c->x));
    if (sumsq)
        TL_CUDA(s->eb, cudaMemsetAsync(c->sums, 0, 2 * sizeof(double), s->stream));
    TL_TRY(tl_cuda_it_rule(s, (uint32_t)c->view_len, v, rule, c->b, c->ax, c->R, c->r,
                           sumsq ? c->sums : NULL));
    if (!sumsq)
        return TL_OK;
    double sums[2];
    TL_TRY(tl_cuda_it_read_sums(s, c->sums, sums));
    *sumsq = sums[0];
    return TL_OK;
}

tl_status tl_cuda_itc_backward(tl_cuda_state *s, tl_it_views v, tl_it_rule rule, double lambda)
{
    TL_TRY(tl_cuda_use_device(s));
    tl_cuda_itc *c = s->itc;
    const dim3 grid(tl_cuda_it_blocks(c->slice_max), c->nslices);
    backward_cone_kernel<<<grid, IT_BLOCK, 0, s->stream>>>(c->slices, c->m, v.first, v.stride,
                                                           v.count, c->rows, c->cols, rule,
                                                           (float)lambda, c->r, c->x);
    TL_CUDA_LAUNCHED(s->eb, "backward_cone_kernel");
    return TL_OK;
}

tl_status tl_cuda_itc_regularise(tl_cuda_state *s, bool nonneg, double tv_weight)
{
    if (tv_weight > 0)
        return tl_fail(s->eb, TL_EINTERNAL,
                       "iterative: no TV steps in cone beam (the engine refuses them)");
    TL_TRY(tl_cuda_use_device(s));
    return nonneg ? tl_cuda_it_nonneg(s, s->itc->x, s->itc->npix) : TL_OK;
}
