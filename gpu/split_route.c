/* split_route.c — which part of a split engine computes what, and running an operation
 * on every part at once (split.c says why rows, and the ownership rule). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/split_impl.h"

/* ---- running the parts --------------------------------------------------------------------- */

/* Part p's rows of frame f: same pitch, starting at its first row (host or device memory). */
static tl_frame part_frame(const tl_split_part *p, const tl_frame *f)
{
    size_t pitch = f->pitch ? f->pitch : (size_t)f->cols * tl_dtype_size(f->dtype);
    tl_frame s = *f;
    s.data = (const char *)f->data + (size_t)p->first * pitch;
    s.rows = p->held;
    s.pitch = pitch;
    return s;
}

/* Part p's job: the caller's projections and kernel rules, its own slices. */
static tl_bp_job part_job(tl_split_part *p, const tl_bp_job *job)
{
    tl_bp_job j = *job;
    j.slices = p->sl;
    j.nslices = p->n;
    j.slice_kernel = p->sk;
    j.kernel = NULL;
    for (size_t m = 0; m < p->n; m++)
        p->sk[m] = NULL;
    return j;
}

/* Whether part k has a share of the current operation. */
bool tl_split_busy(const tl_split *sp, uint32_t k)
{
    return sp->op <= OP_BENCH_STORE || sp->op == OP_FLUSH || sp->p[k].n > 0;
}

/* One pool job: part k's share of the current operation (sp->op). */
static void run_part(void *ctx, size_t k, int thread)
{
    (void)thread;
    tl_split *sp = ctx;
    tl_split_part *p = &sp->p[k];
    tl_frame f;
    tl_bp_job j;
    if (!tl_split_busy(sp, (uint32_t)k))
        return;
    switch (sp->op) {
        case OP_CALIB:
            f = part_frame(p, sp->f);
            p->st = p->ops->calib_add(p->be, &f, sp->count);
            break;
        case OP_STORE:
            f = part_frame(p, sp->f);
            p->st = p->ops->store(p->be, &f, sp->slot);
            break;
        case OP_BENCH_STORE:
            f = part_frame(p, sp->f);
            p->st = p->ops->bench_store(p->be, &f, sp->reps, &p->ms);
            break;
        case OP_BACKPROJECT:
            j = part_job(p, sp->job);
            p->st = p->ops->backproject(p->be, &j);
            p->kernel = j.kernel;
            break;
        case OP_ACC_UPDATE:
            j = part_job(p, sp->job);
            p->st = p->ops->acc_update(p->be, &j, p->ids, sp->add);
            p->kernel = j.kernel;
            break;
        case OP_ACC_READ: p->st = p->ops->acc_read(p->be, p->ids, p->n, p->outs); break;
        case OP_BENCH:
            j = part_job(p, sp->job);
            p->nrows = 0;
            p->st = p->ops->bench(p->be, &j, sp->reps, p->rows, TL_SPLIT_BENCH_ROWS, &p->nrows);
            if (p->nrows > TL_SPLIT_BENCH_ROWS)
                p->nrows = TL_SPLIT_BENCH_ROWS;
            break;
        case OP_FLUSH: p->st = p->ops->flush ? p->ops->flush(p->be) : TL_OK; break;
    }
}

/* Runs operation op on every part with a share, all at once; the first failure (by part)
 * is the result. */
tl_status tl_split_run(tl_split *sp, tl_split_op op)
{
    sp->op = op;
    uint32_t active = 0, last = 0;
    for (uint32_t k = 0; k < sp->np; k++) {
        sp->p[k].st = TL_OK;
        if (tl_split_busy(sp, k)) {
            active++;
            last = k;
        }
    }
    if (active == 1) /* waking the pool would only cost time */
        run_part(sp, last, 0);
    else if (active > 1)
        tl_pool_run(sp->pool, sp->np, run_part, sp);
    for (uint32_t k = 0; k < sp->np; k++)
        if (sp->p[k].st != TL_OK)
            return tl_split_part_fail(sp, k);
    return TL_OK;
}

/* ---- who computes what --------------------------------------------------------------------- */

/* The part that owns height z: the one owning row floor(z), clamped to [-1, H - 1]. */
static uint32_t owner(const tl_split *sp, double z)
{
    double r = floor(z);
    if (!(r >= 0))
        return 0; /* below row 0 (and the -1 < z < 0 band): part 0 */
    uint32_t row = r >= sp->rows ? sp->rows - 1 : (uint32_t)r;
    /* floor(k H / P) <= row for this k, so the owner is k or a later part */
    uint32_t k = (uint32_t)((uint64_t)row * sp->np / sp->rows);
    while (row >= sp->p[k].end)
        k++;
    return k;
}

static bool horizontal(const tl_bp_slice *sl)
{
    return sl->plane[2] == 0.f && sl->plane[5] == 0.f;
}

/* Height of output pixel (i, j): base + s xaxis + t yaxis with s = (j + 0.5) / w and
 * t = 1 - (i + 0.5) / h (engine.h), in double. */
static double pixel_z(const tl_bp_slice *sl, uint32_t i, uint32_t j)
{
    const float *o = sl->plane;
    double s = (j + 0.5) / sl->width, t = 1.0 - (i + 0.5) / sl->height;
    return o[8] + s * o[2] + t * o[5];
}

/* The parts that compute slice sl: [*k0, *k1]. z is affine in the pixel, so its extremes
 * are at corner pixels, and ownership grows with z. */
void tl_split_parts_of(const tl_split *sp, const tl_bp_slice *sl, uint32_t *k0, uint32_t *k1)
{
    if (horizontal(sl)) {
        *k0 = *k1 = owner(sp, sl->plane[8]);
        return;
    }
    uint32_t h = sl->height - 1, w = sl->width - 1;
    double c[4] = {pixel_z(sl, 0, 0), pixel_z(sl, 0, w), pixel_z(sl, h, 0), pixel_z(sl, h, w)};
    double lo = c[0], hi = c[0];
    for (int i = 1; i < 4; i++) {
        lo = c[i] < lo ? c[i] : lo;
        hi = c[i] > hi ? c[i] : hi;
    }
    *k0 = owner(sp, lo);
    *k1 = owner(sp, hi);
}

/* The owner of pixel (i, j) of a plane computed by parts [k0, k1]. (Clamped: the host's
 * rounding must not pick a part that did not compute the plane.) */
static uint32_t pixel_owner(const tl_split *sp, const tl_bp_slice *sl, uint32_t i, uint32_t j,
                            uint32_t k0, uint32_t k1)
{
    uint32_t k = owner(sp, pixel_z(sl, i, j));
    return k < k0 ? k0 : k > k1 ? k1 : k;
}

/* A plane whose output rows each lie at one height (no z along a row: ortho-slices), but
 * not all at the same: its rows are dealt out by height. */
static bool banded(const tl_bp_slice *sl)
{
    return sl->plane[2] == 0.f && !horizontal(sl);
}

/* The first row of banded plane sl whose owner is at or beyond part `to` in the order the
 * owners take along its rows (rising: owner >= to; falling: owner <= to), h when none is. */
static uint32_t first_row(const tl_split *sp, const tl_bp_slice *sl, uint32_t k0, uint32_t k1,
                          bool rising, int64_t to)
{
    uint32_t lo = 0, hi = sl->height; /* the answer lies in [lo, hi] */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int64_t o = pixel_owner(sp, sl, mid, 0, k0, k1);
        if (rising ? o >= to : o <= to)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

bool tl_split_share(const tl_split *sp, const tl_bp_slice *sl, uint32_t k, tl_bp_slice *share,
                    uint32_t *r0)
{
    uint32_t k0, k1;
    tl_split_parts_of(sp, sl, &k0, &k1);
    *share = *sl;
    *r0 = 0;
    if (k < k0 || k > k1)
        return false;
    if (!banded(sl))
        return true;
    /* the owner is monotonic in the row (z is affine in it): k's rows are one run, found
     * by bisection (this runs for every tracked update, so not row by row) */
    uint32_t h = sl->height;
    bool rising = pixel_owner(sp, sl, h - 1, 0, k0, k1) >= pixel_owner(sp, sl, 0, 0, k0, k1);
    int64_t next = rising ? (int64_t)k + 1 : (int64_t)k - 1; /* the part after k's rows */
    uint32_t first = first_row(sp, sl, k0, k1, rising, k);
    uint32_t end = first_row(sp, sl, k0, k1, rising, next);
    if (end <= first)
        return false;
    /* rows [first, end) as a plane: t = 1 - (i + 0.5) / h over them is the sub-plane's own
     * t' scaled by (end - first) / h, offset by (h - end) / h */
    const double scale = (double)(end - first) / h, lift = (double)(h - end) / h;
    for (int a = 0; a < 3; a++) {
        share->plane[3 + a] = (float)(sl->plane[3 + a] * scale);
        share->plane[6 + a] = (float)(sl->plane[6 + a] + lift * sl->plane[3 + a]);
    }
    share->height = end - first;
    *r0 = first;
    return true;
}

/* Puts plane sl together in out from the parts' copies (copy[k]: part k's, for k in
 * [k0, k1]): each pixel from the part that owns its height; a banded plane's rows from the
 * part whose share they are. */
static void assemble(const tl_split *sp, const tl_bp_slice *sl, const float *const *copy,
                     uint32_t k0, uint32_t k1, float *out)
{
    uint32_t h = sl->height, w = sl->width;
    if (banded(sl)) {
        for (uint32_t k = k0; k <= k1; k++) {
            tl_bp_slice share;
            uint32_t r0;
            if (tl_split_share(sp, sl, k, &share, &r0))
                memcpy(out + (size_t)r0 * w, copy[k], (size_t)share.height * w * sizeof *out);
        }
        return;
    }
    for (uint32_t i = 0; i < h; i++) {
        size_t row = (size_t)i * w;
        for (uint32_t j = 0; j < w; j++)
            out[row + j] = copy[pixel_owner(sp, sl, i, j, k0, k1)][row + j];
    }
}

/* realloc that keeps p (and clears *ok) when it fails, so several arrays can grow in one
 * expression and be checked once. */
void *tl_split_grown(void *p, size_t n, size_t size, bool *ok)
{
    void *q = realloc(p, n * size);
    *ok = *ok && q != NULL;
    return q ? q : p;
}

/* Room for n slices in part p's lists and px floats of plane copies. */
static tl_status reserve_part(tl_split *sp, tl_split_part *p, size_t n, size_t px)
{
    bool ok = true;
    if (n > p->cap) {
        p->sl = tl_split_grown(p->sl, n, sizeof *p->sl, &ok);
        p->sk = tl_split_grown(p->sk, n, sizeof *p->sk, &ok);
        p->ids = tl_split_grown(p->ids, n, sizeof *p->ids, &ok);
        p->outs = tl_split_grown(p->outs, n, sizeof *p->outs, &ok);
        p->from = tl_split_grown(p->from, n, sizeof *p->from, &ok);
        if (!ok)
            return tl_fail(sp->eb, TL_ENOMEM, "out of memory for a job of %zu slices", n);
        p->cap = n;
    }
    if (px > p->scratch_cap) { /* page-locked: planes come back at the bus's full speed */
        char why[256];
        tl_backend_kind kind = sp->cuda ? TL_BACKEND_CUDA : TL_BACKEND_CPU;
        tl_host_free(kind, p->scratch);
        p->scratch = NULL;
        p->scratch_cap = 0;
        if (tl_host_alloc(kind, px * sizeof *p->scratch, (void **)&p->scratch, why, sizeof why) !=
            TL_OK)
            return tl_fail(sp->eb, TL_ENOMEM,
                           "out of host memory for %.1f MiB of plane "
                           "slices: %s",
                           px * sizeof(float) / 1048576.0, why);
        p->scratch_cap = px;
    }
    return TL_OK;
}

/* Deals slices sl[0..n) (ids: their slice ids, or NULL) to the parts that compute them,
 * each shifted into the part's rows. A horizontal slice keeps its output (the caller's
 * buffer, or NULL); a plane with an output gets one in the part's scratch, listed in
 * sp->copy for assemble(). */
tl_status tl_split_route(tl_split *sp, const tl_bp_slice *sl, size_t n, const int *ids)
{
    size_t count[TL_ENGINE_MAX_DEVICES] = {0}, px[TL_ENGINE_MAX_DEVICES] = {0};
    uint32_t k0, k1, r0;
    tl_bp_slice share;
    for (size_t i = 0; i < n; i++) {
        tl_split_parts_of(sp, &sl[i], &k0, &k1);
        for (uint32_t k = k0; k <= k1; k++) {
            if (!tl_split_share(sp, &sl[i], k, &share, &r0))
                continue;
            count[k]++;
            if (!horizontal(&sl[i]) && sl[i].out)
                px[k] += (size_t)share.height * share.width;
        }
    }
    for (uint32_t k = 0; k < sp->np; k++) {
        tl_status st = reserve_part(sp, &sp->p[k], count[k], px[k]);
        if (st != TL_OK)
            return st;
        sp->p[k].n = 0;
        px[k] = 0; /* from here: scratch used so far */
    }
    if (n > sp->copy_cap) {
        bool ok = true;
        sp->copy = tl_split_grown(sp->copy, n * sp->np, sizeof *sp->copy, &ok);
        if (!ok)
            return tl_fail(sp->eb, TL_ENOMEM, "out of memory for a job of %zu slices", n);
        sp->copy_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        tl_split_parts_of(sp, &sl[i], &k0, &k1);
        for (uint32_t k = k0; k <= k1; k++) {
            if (!tl_split_share(sp, &sl[i], k, &share, &r0))
                continue;
            tl_split_part *p = &sp->p[k];
            size_t m = p->n++;
            p->sl[m] = share;
            /* exact when z >= first (a float minus a smaller whole number): where p owns z */
            p->sl[m].plane[8] = share.plane[8] - (float)p->first;
            if (!horizontal(&sl[i]) && sl[i].out) {
                p->sl[m].out = p->scratch + px[k];
                px[k] += (size_t)share.height * share.width;
                sp->copy[i * sp->np + k] = p->sl[m].out;
            }
            p->outs[m] = p->sl[m].out;
            p->ids[m] = ids ? ids[i] : -1;
            p->from[m] = i;
        }
    }
    return TL_OK;
}

/* After tl_split_route() and tl_split_run(): the planes among sl[0..n) put together into their
 * outputs (sl[i].out, where there is one). */
void tl_split_assemble_all(tl_split *sp, const tl_bp_slice *sl, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (horizontal(&sl[i]) || !sl[i].out)
            continue;
        uint32_t k0, k1;
        tl_split_parts_of(sp, &sl[i], &k0, &k1);
        assemble(sp, &sl[i], sp->copy + i * sp->np, k0, k1, sl[i].out);
    }
}

/* job->kernel and slice_kernel from what the parts ran: a plane is named by the first
 * part that computed it (they run the same rule), "mixed" when slices differ. */
void tl_split_name_kernels(const tl_split *sp, tl_bp_job *job)
{
    job->kernel = NULL;
    if (job->slice_kernel)
        for (size_t i = 0; i < job->nslices; i++)
            job->slice_kernel[i] = NULL;
    for (uint32_t k = 0; k < sp->np; k++) {
        const tl_split_part *p = &sp->p[k];
        for (size_t m = 0; m < p->n; m++) {
            const char *name = p->sk[m] ? p->sk[m] : p->kernel ? p->kernel : "?";
            if (job->slice_kernel && !job->slice_kernel[p->from[m]])
                job->slice_kernel[p->from[m]] = name;
            if (!job->kernel)
                job->kernel = name;
            else if (strcmp(job->kernel, name) != 0)
                job->kernel = "mixed";
        }
    }
    if (!job->kernel)
        job->kernel = "none";
}
