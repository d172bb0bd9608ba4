/* accumulate.cu — accumulators of tracked slices on the GPU (backend.h acc_*; engine.h
 * tl_engine_track): the live-streaming path, where each new projection costs one
 * projection of work per slice instead of N.
 *
 * An accumulator is a double buffer of the slice's pixels in device memory, with a float
 * buffer of the same size for read-outs, both allocated when the slice starts being tracked
 * (never per frame). An update adds weight * (the projection's interpolated value) to
 * every pixel (an evicted projection comes with a negative weight), for a batch of up to
 * TL_ACC_BATCH projections in one pass (the engine queues them, gpu/track.c), with the
 * projections' constants as kernel arguments, so nothing is uploaded and the host never
 * waits: the update is ordered on the engine's stream before the store that overwrites the
 * slot (subtraction) or after it (addition). Interpolation is the exact one of plane-exact
 * (bilinear across columns and detector rows), so tracked slices are
 * `exact` whatever kernel rebuilt them last. A stack of cone-beam slices that differ only
 * in height (a tracked box or volume) is updated by one launch that walks voxel columns
 * (acc_cone_stack_kernel), bit for bit as slice by slice.
 *
 * Why double: the contribution is computed and rounded in float, identically when the
 * projection is added and when it is subtracted, so the two cancel exactly; only the
 * running sum's rounding would accumulate, and in double it stays far below float
 * resolution for any realistic stream. So the engine needs no periodic rebuild, which took
 * tens of milliseconds per batch of large slices and stalled the stream. A rebuild (first
 * read, centre change, reset, index jump, or a configured `refresh`) runs the slice through
 * the normal kernel selection (backproject.cu) and widens the float result into the
 * accumulator. A read-out rounds the sum to float on the device and copies that out, so
 * the bus carries floats; every slice's rounding and copy are enqueued in order on the one
 * stream, with a single wait at the end.
 */
#include "config.h"

#include "gpu/base/backend.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/cuda/bp_common.cuh"

#define ACC_BLOCK 16 /* 16 x 16 threads, one pixel each: the update is memory-bound */

/* The projections of one update (backend.h TL_ACC_BATCH): constants (cos, sin, centre,
 * signed weight) and slots, passed by value so nothing is uploaded. */
struct acc_batch {
    float4 q[TL_ACC_BATCH];
    int slot[TL_ACC_BATCH];
    int n;
};

__global__ void __launch_bounds__(ACC_BLOCK *ACC_BLOCK)
    acc_delta_kernel(const float *__restrict__ window, size_t pitch_el, size_t slab_el, int W,
                     int H, acc_batch b, tl_cuda_geom g, double *__restrict__ acc)
{
    const int j = blockIdx.x * ACC_BLOCK + threadIdx.x;
    const int i = blockIdx.y * ACC_BLOCK + threadIdx.y;
    if (i >= g.h || j >= g.w)
        return;
    const float x = tl_geom_x(g, i, j), y = tl_geom_y(g, i, j), z = tl_geom_z(g, i, j);
    if (!(z > -1.f && z < (float)H))
        return; /* above or below the detector: contributes 0 */
    const float fl = floorf(z);
    const int r0 = (int)fl;
    const float gz = z - fl;
    const bool lo = r0 >= 0, hi = gz != 0.f && r0 + 1 < H;
    double v = acc[(size_t)i * g.w + j];
    for (int k = 0; k < b.n; k++) {
        const size_t so = (size_t)b.slot[k] * pitch_el;
        const float u = tl_ray_u(x, y, b.q[k]);
        const float a0 = lo ? tl_sample_row(window + (size_t)r0 * slab_el + so, W, u) : 0.f;
        const float a1 = hi ? tl_sample_row(window + (size_t)(r0 + 1) * slab_el + so, W, u) : 0.f;
        /* rounded to float on its own (never fused into the add), and added one by one as
         * if each projection came alone, so that removing a projection later takes out
         * exactly what adding it put in, whichever batches the two were part of */
        v += (double)__fmul_rn(b.q[k].w, tl_lerp(a0, a1, gz));
    }
    acc[(size_t)i * g.w + j] = v;
}

/* Cone beam (backend.h, tl_bp_proj.cone): each projection's matrix instead of its
 * (cos, sin, centre), the signed weights apart. */
struct acc_cone_batch {
    float m[TL_ACC_BATCH][12];
    float weight[TL_ACC_BATCH];
    int slot[TL_ACC_BATCH];
    int n;
};

/* A projection's matrix rows summed over a voxel column's x and y: all but the z terms,
 * which each voxel of the column adds alone. Both cone kernels below split the matrix this
 * way, so a voxel gets the same bits from either (tracked stacks, below). */
struct acc_cone_column {
    float u, v, w;
};

__device__ __forceinline__ acc_cone_column acc_cone_col(const float *m, float x, float y)
{
    return {fmaf(m[0], x, fmaf(m[1], y, m[3])), fmaf(m[4], x, fmaf(m[5], y, m[7])),
            fmaf(m[8], x, fmaf(m[9], y, m[11]))};
}

/* The two detector rows r and r + 1 around a voxel's v, sampled at its u (zero off the
 * detector). A column's next voxel meets the same u (on a circular orbit: every voxel of
 * it) and the same or a neighbouring row, so it loads one row or none. u = NaN: empty. */
struct acc_rows {
    float u;
    int r;
    float a, b;
};

__device__ __forceinline__ float acc_row(const float *col, size_t slab_el, int W, int H, int r,
                                         float u)
{
    return r >= 0 && r < H ? tl_sample_row(col + (size_t)r * slab_el, W, u) : 0.f;
}

/* tl_cone_sample's rule (bilinear in exact fp32, weight 1 / w^2, zero off the detector and
 * behind the source) for the voxel at height z of column c, through the row cache. */
__device__ __forceinline__ float acc_cone_value(const float *__restrict__ window, size_t pitch_el,
                                                size_t slab_el, int W, int H, const float *m,
                                                int slot, const acc_cone_column &c, float z,
                                                acc_rows &rows)
{
    const float w = fmaf(m[10], z, c.w);
    if (!(w > 0.f))
        return 0.f;
    const float rw = __frcp_rn(w);
    const float v = fmaf(m[6], z, c.v) * rw;
    if (!(v > -1.f && v < (float)H))
        return 0.f;
    const float u = fmaf(m[2], z, c.u) * rw;
    const float fl = floorf(v);
    const int r0 = (int)fl;
    const float gv = v - fl;
    const float *col = window + (size_t)slot * pitch_el;
    if (!(u == rows.u) || r0 < rows.r - 1 || r0 > rows.r + 1) {
        rows.a = acc_row(col, slab_el, W, H, r0, u);
        rows.b = acc_row(col, slab_el, W, H, r0 + 1, u);
    } else if (r0 == rows.r + 1) {
        rows.a = rows.b;
        rows.b = acc_row(col, slab_el, W, H, r0 + 1, u);
    } else if (r0 == rows.r - 1) {
        rows.b = rows.a;
        rows.a = acc_row(col, slab_el, W, H, r0, u);
    }
    rows.u = u;
    rows.r = r0;
    return tl_lerp(rows.a, gv != 0.f ? rows.b : 0.f, gv) * (rw * rw);
}

/* No rows yet: u = NaN, and a row index no voxel's r0 (>= -1) is next to. */
__device__ __forceinline__ acc_rows acc_rows_empty()
{
    return {__int_as_float(0x7fffffff), -4, 0.f, 0.f};
}

/* One projection as a voxel column of a circular orbit sees it. On an orbit about z (the
 * matrix's z column moves neither u nor w: m[2] = m[10] = 0, as the column kernels of
 * bp_cone_column.cu need too) a column's u, depth and weight do not depend on z (seed
 * 004 §4.2.1, per-column invariants): the taps' detector column and u fraction are the
 * column's, and a voxel only adds v and its rows' loads. The values are acc_cone_value's,
 * in the same operations (fmaf(0, z, c) is c), so a voxel gets the same bits. */
struct acc_orbit {
    const float *tap; /* the window at (slot, row 0, column floor(u)); NULL: all zero */
    float vc, rw, rr, fu;
    bool left, right; /* whether columns floor(u) and floor(u) + 1 are on the detector */
};

__device__ __forceinline__ acc_orbit acc_orbit_make(const float *__restrict__ window,
                                                    size_t pitch_el, int W, int slot,
                                                    const acc_cone_column &c)
{
    acc_orbit o = {NULL, c.v, 0.f, 0.f, 0.f, false, false};
    if (!(c.w > 0.f))
        return o; /* the column is at or behind the source */
    o.rw = __frcp_rn(c.w);
    o.rr = o.rw * o.rw;
    const float u = c.u * o.rw;
    if (!(u > -1.f && u < (float)W))
        return o; /* the column's rays miss the detector's columns */
    const float fl = floorf(u);
    const int iu = (int)fl;
    o.fu = u - fl;
    o.left = iu >= 0;
    o.right = iu + 1 < W;
    o.tap = window + (ptrdiff_t)slot * (ptrdiff_t)pitch_el + iu;
    return o;
}

/* tl_sample_row of detector row r at the column's u (zero off the detector). */
__device__ __forceinline__ float acc_orbit_row(const acc_orbit &o, size_t slab_el, int H, int r)
{
    if (r < 0 || r >= H)
        return 0.f;
    const float *p = o.tap + (size_t)r * slab_el;
    return tl_lerp(o.left ? __ldg(p) : 0.f, o.right ? __ldg(p + 1) : 0.f, o.fu);
}

/* acc_cone_value for the voxel at height z of an orbit column: the row cache's moves as
 * selects, so that the loads of a tile's voxels depend on no earlier load and issue
 * together. */
__device__ __forceinline__ float acc_orbit_value(const acc_orbit &o, size_t slab_el, int H,
                                                 float m6, float z, acc_rows &rows)
{
    if (!o.tap)
        return 0.f;
    const float v = fmaf(m6, z, o.vc) * o.rw;
    if (!(v > -1.f && v < (float)H))
        return 0.f;
    const float fl = floorf(v);
    const int r0 = (int)fl;
    const float gv = v - fl;
    const int step = r0 - rows.r;
    const float a = step == 0 ? rows.a : step == 1 ? rows.b : acc_orbit_row(o, slab_el, H, r0);
    const float b = step == 0    ? rows.b
                    : step == -1 ? rows.a
                                 : acc_orbit_row(o, slab_el, H, r0 + 1);
    rows.a = a;
    rows.b = b;
    rows.r = r0;
    return tl_lerp(a, gv != 0.f ? b : 0.f, gv) * o.rr;
}

__global__ void __launch_bounds__(ACC_BLOCK *ACC_BLOCK)
    acc_cone_kernel(const float *__restrict__ window, size_t pitch_el, size_t slab_el, int W,
                    int H, acc_cone_batch b, tl_cuda_geom g, double *__restrict__ acc)
{
    const int j = blockIdx.x * ACC_BLOCK + threadIdx.x;
    const int i = blockIdx.y * ACC_BLOCK + threadIdx.y;
    if (i >= g.h || j >= g.w)
        return;
    const float x = tl_geom_x(g, i, j), y = tl_geom_y(g, i, j), z = tl_geom_z(g, i, j);
    double v = acc[(size_t)i * g.w + j];
    for (int k = 0; k < b.n; k++) { /* each rounded on its own, as in acc_delta_kernel */
        acc_rows rows = acc_rows_empty();
        v += (double)__fmul_rn(b.weight[k], acc_cone_value(window, pitch_el, slab_el, W, H, b.m[k],
                                                           b.slot[k], acc_cone_col(b.m[k], x, y),
                                                           z, rows));
    }
    acc[(size_t)i * g.w + j] = v;
}

/* A stack of tracked slices that differ only in height (a box's planes, a tracked volume):
 * one thread per voxel column walks them all, so a projection's x and y terms are summed
 * once per column and each voxel loads one detector row or none (acc_rows) instead of two
 * with four taps. Each voxel gets the bits acc_cone_kernel would give it, so a projection
 * added through one and subtracted through the other still cancels exactly. The planes'
 * accumulators and heights travel in the arguments (ACC_STACK_PLANES of them in 4 KB);
 * ACC_STACK_TILE of a column's voxels stay in registers while the batch passes over them,
 * so each accumulator is read and written once per batch. */
#define ACC_STACK_PLANES 192
#define ACC_STACK_TILE 16
#define ACC_STACK_BLOCKS 4 /* blocks an SM holds: 64 registers a thread, no spills */

struct acc_stack {
    double *acc[ACC_STACK_PLANES];
    float z[ACC_STACK_PLANES]; /* each plane's g.pz */
    int n;
};

template <bool ORBIT> /* every projection of the batch has m[2] = m[10] = 0: acc_orbit */
__global__ void __launch_bounds__(ACC_BLOCK *ACC_BLOCK, ACC_STACK_BLOCKS)
    acc_cone_stack_kernel(const float *__restrict__ window, size_t pitch_el, size_t slab_el,
                          int W, int H, acc_cone_batch b, tl_cuda_geom g, acc_stack st)
{
    const int j = blockIdx.x * ACC_BLOCK + threadIdx.x;
    const int i = blockIdx.y * ACC_BLOCK + threadIdx.y;
    if (i >= g.h || j >= g.w)
        return;
    const float x = tl_geom_x(g, i, j), y = tl_geom_y(g, i, j);
    const size_t px = (size_t)i * g.w + j;
    for (int p0 = 0; p0 < st.n; p0 += ACC_STACK_TILE) {
        double sum[ACC_STACK_TILE];
#pragma unroll
        for (int t = 0; t < ACC_STACK_TILE; t++)
            sum[t] = p0 + t < st.n ? st.acc[p0 + t][px] : 0.0;
        for (int k = 0; k < b.n; k++) { /* per voxel in k's order, as acc_cone_kernel adds */
            const acc_cone_column c = acc_cone_col(b.m[k], x, y);
            const acc_orbit o = ORBIT ? acc_orbit_make(window, pitch_el, W, b.slot[k], c)
                                      : acc_orbit{};
            acc_rows rows = acc_rows_empty();
#pragma unroll
            for (int t = 0; t < ACC_STACK_TILE; t++)
                if (p0 + t < st.n) {
                    const float z = fmaf((float)j, g.az, fmaf((float)i, g.bz, st.z[p0 + t]));
                    const float value =
                        ORBIT ? acc_orbit_value(o, slab_el, H, b.m[k][6], z, rows)
                              : acc_cone_value(window, pitch_el, slab_el, W, H, b.m[k],
                                               b.slot[k], c, z, rows);
                    sum[t] += (double)__fmul_rn(b.weight[k], value);
                }
        }
#pragma unroll
        for (int t = 0; t < ACC_STACK_TILE; t++)
            if (p0 + t < st.n)
                st.acc[p0 + t][px] = sum[t];
    }
}

/* Whether slices a and b put every pixel at the same (x, y): equal but for g.pz. */
static bool acc_same_columns(const tl_cuda_geom &a, const tl_cuda_geom &b)
{
    return a.px == b.px && a.py == b.py && a.ax == b.ax && a.ay == b.ay && a.az == b.az &&
           a.bx == b.bx && a.by == b.by && a.bz == b.bz && a.h == b.h && a.w == b.w;
}

/* One incremental pass for the projections [k0, k0 + n) of a cone-beam job: a stack
 * launch for each run of consecutive slices with the same columns (the engine numbers a
 * box's planes in a row), a launch of acc_cone_kernel for each slice alone. */
static tl_status acc_cone_pass(tl_cuda_state *s, const tl_bp_job *job, const int *ids, size_t k0,
                               int n)
{
    acc_cone_batch b;
    b.n = n;
    bool orbit = true; /* u and w free of z in every matrix, as the kernel sees them */
    for (int k = 0; k < n; k++) {
        const tl_bp_proj *p = &job->proj[k0 + k];
        for (int e = 0; e < 12; e++)
            b.m[k][e] = (float)p->cone[e];
        b.weight[k] = (float)p->weight;
        b.slot[k] = (int)p->slot;
        orbit = orbit && b.m[k][2] == 0.f && b.m[k][10] == 0.f;
    }
    for (size_t first = 0, end; first < job->nslices; first = end) {
        const tl_cuda_geom g = tl_cuda_make_geom(&job->slices[first]);
        acc_stack st;
        st.n = 0;
        for (end = first; end < job->nslices && st.n < ACC_STACK_PLANES; end++) {
            const tl_cuda_geom ge = tl_cuda_make_geom(&job->slices[end]);
            if (!acc_same_columns(g, ge))
                break;
            st.acc[st.n] = s->acc[ids[end]];
            st.z[st.n++] = ge.pz;
        }
        const dim3 block(ACC_BLOCK, ACC_BLOCK);
        const dim3 grid((unsigned)((g.w + ACC_BLOCK - 1) / ACC_BLOCK),
                        (unsigned)((g.h + ACC_BLOCK - 1) / ACC_BLOCK));
        if (st.n > 1) {
            if (orbit)
                acc_cone_stack_kernel<true><<<grid, block, 0, s->stream>>>(
                    s->window, s->pitch_el, s->slab_el, (int)s->cols, (int)s->rows, b, g, st);
            else
                acc_cone_stack_kernel<false><<<grid, block, 0, s->stream>>>(
                    s->window, s->pitch_el, s->slab_el, (int)s->cols, (int)s->rows, b, g, st);
            TL_CUDA_LAUNCHED(s->eb, "acc_cone_stack_kernel");
        } else {
            acc_cone_kernel<<<grid, block, 0, s->stream>>>(s->window, s->pitch_el, s->slab_el,
                                                           (int)s->cols, (int)s->rows, b, g,
                                                           s->acc[ids[first]]);
            TL_CUDA_LAUNCHED(s->eb, "acc_cone_kernel");
        }
    }
    return TL_OK;
}

/* dst[i] = src[i] converted: float results into an accumulator, an accumulator to float. */
template <typename S, typename D>
__global__ void __launch_bounds__(TL_CUDA_ELEM_BLOCK)
    acc_convert_kernel(const S *__restrict__ src, D *__restrict__ dst, size_t n)
{
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x)
        dst[k] = (D)src[k];
}

template <typename S, typename D>
static tl_status acc_convert(tl_cuda_state *s, const S *src, D *dst, size_t n)
{
    acc_convert_kernel<S, D>
        <<<tl_cuda_elem_grid(n), TL_CUDA_ELEM_BLOCK, 0, s->stream>>>(src, dst, n);
    TL_CUDA_LAUNCHED(s->eb, "acc_convert_kernel");
    return TL_OK;
}

/* Grows a per-slice-id array to n entries (the caller initialises the new ones). */
template <typename T> static bool acc_grow(T **p, int n)
{
    T *q = (T *)realloc(*p, (size_t)n * sizeof *q);
    if (q)
        *p = q;
    return q != NULL;
}

tl_status tl_cuda_op_acc_alloc(void *state, int id, uint32_t height, uint32_t width)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    if (id >= s->nacc) {
        int n = id + 8;
        if (!acc_grow(&s->acc, n) || !acc_grow(&s->acc_out, n) || !acc_grow(&s->acc_size, n))
            return tl_fail(s->eb, TL_ENOMEM, "out of host memory for accumulators");
        for (int k = s->nacc; k < n; k++) {
            s->acc[k] = NULL;
            s->acc_out[k] = NULL;
            s->acc_size[k] = 0;
        }
        s->nacc = n;
    }
    tl_cuda_op_acc_free(s, id);
    size_t n = (size_t)height * width;
    s->acc_size[id] = n;
    tl_status st = tl_cuda_alloc(s, (void **)&s->acc[id], n * sizeof(double),
                                 "a tracked slice's accumulator");
    if (st == TL_OK)
        st = tl_cuda_alloc(s, (void **)&s->acc_out[id], n * sizeof(float),
                           "a tracked slice's read-out buffer");
    if (st != TL_OK)
        tl_cuda_op_acc_free(s, id); /* both or neither */
    return st;
}

void tl_cuda_op_acc_free(void *state, int id)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    if (id < 0 || id >= s->nacc)
        return;
    if ((s->acc[id] || s->acc_out[id]) && tl_cuda_use_device(s) == TL_OK) {
        cudaStreamSynchronize(s->stream); /* no update or read-out may still be using them */
        if (s->acc[id])
            cudaFree(s->acc[id]);
        if (s->acc_out[id])
            cudaFree(s->acc_out[id]);
    }
    s->mem -= s->acc_size[id] *
              ((s->acc[id] ? sizeof(double) : 0) + (s->acc_out[id] ? sizeof(float) : 0));
    s->acc[id] = NULL;
    s->acc_out[id] = NULL;
    s->acc_size[id] = 0;
}

void tl_cuda_acc_destroy(tl_cuda_state *s)
{
    for (int k = 0; k < s->nacc; k++) {
        if (s->acc[k])
            cudaFree(s->acc[k]);
        if (s->acc_out[k])
            cudaFree(s->acc_out[k]);
    }
    free(s->acc);
    free(s->acc_out);
    free(s->acc_size);
    s->acc = NULL;
    s->acc_out = NULL;
    s->acc_size = NULL;
    s->nacc = 0;
}

tl_status tl_cuda_op_acc_update(void *state, tl_bp_job *job, const int *ids, bool add)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    TL_TRY(tl_cuda_cone_stack_sync(s));
    for (size_t i = 0; i < job->nslices; i++)
        if (ids[i] < 0 || ids[i] >= s->nacc || !s->acc[ids[i]] ||
            s->acc_size[ids[i]] != (size_t)job->slices[i].height * job->slices[i].width)
            return tl_fail(s->eb, TL_EINTERNAL, "slice %d has no accumulator of its size", ids[i]);
    if (!add) {
        /* a rebuild: the normal kernels into the job buffer, widened into the accumulators */
        TL_TRY(tl_cuda_op_backproject(s, job));
        size_t off = 0;
        for (size_t i = 0; i < job->nslices; i++) {
            size_t npx = (size_t)job->slices[i].height * job->slices[i].width;
            TL_TRY(acc_convert(s, s->out + off, s->acc[ids[i]], npx));
            off += npx;
        }
        return TL_OK;
    }
    for (size_t k0 = 0; k0 < job->nproj; k0 += TL_ACC_BATCH) { /* one pass per batch */
        acc_batch b;
        b.n = (int)(job->nproj - k0 < TL_ACC_BATCH ? job->nproj - k0 : TL_ACC_BATCH);
        if (job->geometry == TL_GEOMETRY_CONE) {
            TL_TRY(acc_cone_pass(s, job, ids, k0, b.n));
            continue;
        }
        for (int k = 0; k < b.n; k++) {
            const tl_bp_proj *p = &job->proj[k0 + k];
            /* an evicted projection's weight is negative: -w rounds to exactly -(w rounded) */
            b.q[k] =
                make_float4((float)p->cos_t, (float)p->sin_t, (float)p->center, (float)p->weight);
            b.slot[k] = (int)p->slot;
        }
        for (size_t i = 0; i < job->nslices; i++) {
            tl_cuda_geom g = tl_cuda_make_geom(&job->slices[i]);
            const dim3 block(ACC_BLOCK, ACC_BLOCK);
            const dim3 grid((unsigned)((g.w + ACC_BLOCK - 1) / ACC_BLOCK),
                            (unsigned)((g.h + ACC_BLOCK - 1) / ACC_BLOCK));
            acc_delta_kernel<<<grid, block, 0, s->stream>>>(s->window, s->pitch_el, s->slab_el,
                                                            (int)s->cols, (int)s->rows, b, g,
                                                            s->acc[ids[i]]);
            TL_CUDA_LAUNCHED(s->eb, "acc_delta_kernel");
        }
    }
    job->kernel = job->geometry == TL_GEOMETRY_CONE ? "delta-cone-exact" : "delta-exact";
    return TL_OK;
}

tl_status tl_cuda_op_acc_read(void *state, const int *ids, size_t n, float *const *out)
{
    tl_cuda_state *s = (tl_cuda_state *)state;
    TL_TRY(tl_cuda_use_device(s));
    TL_TRY(tl_cuda_flush(s)); /* the held frames first (store.cu) */
    for (size_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= s->nacc || !s->acc[ids[k]])
            return tl_fail(s->eb, TL_EINTERNAL, "slice %d has no accumulator", ids[k]);
        const size_t npx = s->acc_size[ids[k]];
        float *f = s->acc_out[ids[k]];
        TL_TRY(acc_convert(s, s->acc[ids[k]], f, npx));
        TL_CUDA(s->eb, cudaMemcpyAsync(out[k], f, npx * sizeof(float), cudaMemcpyDeviceToHost,
                                       s->stream));
    }
    TL_CUDA(s->eb, cudaStreamSynchronize(s->stream));
    return TL_OK;
}
