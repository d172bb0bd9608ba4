/* engine.c — what every backend shares: checking frames and configurations, the rolling
 * window's bookkeeping, the dark/flat batch rule, filter design, slices and FBP weights.
 * The numbers themselves are the backend's (backend.h); this file decides what goes where
 * and in which order, so both backends behave identically by construction. An engine on
 * several devices gets the split backend (gpu/split.c), which spreads detector rows over
 * child backends behind the same table: nothing here depends on it.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/base/backend.h"
#include "gpu/cpu/cpu_backend.h"
#include "gpu/engine.h"
#include "gpu/method/filter.h"
#include "gpu/split.h"
#include "gpu/window.h"
#ifdef HAVE_CUDA
#include "gpu/cuda/cuda_backend.h"
#endif

typedef struct {
    double angle;
    uint32_t k; /* position in e->proj */
} angle_key;

typedef struct {
    bool used;
    tl_slice_spec spec;
    float plane[9];
    bool tracked;             /* kept incrementally (tl_engine_track) */
    bool valid;               /* its accumulator equals the window's back projection */
    uint32_t updates;         /* incremental updates since the last rebuild */
} slice_entry;

/* Evictions in one tl_window_place beyond which tracked slices are rebuilt instead of
 * updated projection by projection (a jump of the index by most of a window). */
#define TL_TRACK_MAX_EVICT 8

/* Slice sizes with a tuned kernel choice (tl_engine_set_choice). */
#define TL_ENGINE_MAX_CHOICES 16
/* Kernels a backend may list. */
#define TL_ENGINE_MAX_KERNELS 128

struct tl_engine {
    tl_engine_config cfg;
    const tl_backend_ops *ops;
    void *be;                 /* backend state */
    const char *backend;      /* "cpu", "cuda": the kind (also of a split's parts) */
    tl_errbuf err;
    size_t padded;            /* filter length */
    double *response;         /* filter response, padded/2 + 1 */

    tl_window win;
    double *angle, *center_offset; /* per slot */
    uint64_t *t_acq, *t_recv;      /* per slot */

    uint32_t batch[2];        /* frames in the current dark (0) and flat (1) batch */
    bool proj_since[2];       /* a projection arrived since that batch's last frame */

    slice_entry *slices;
    int nslices, cap_slices, live_slices;

    tl_bp_proj *proj;         /* scratch for reconstruct: one entry per slot */
    tl_bp_slice *bps;         /* scratch for reconstruct: one per requested slice */
    size_t cap_bps;
    int *ids;                 /* scratch: slice ids, 3 per requested slice (reconstruct_split) */
    float **bps_out;          /* scratch: outputs, 2 per requested slice */
    const char **bps_kernel;  /* scratch: the kernel of each slice of a job */
    const char **kernel_of;   /* scratch: the kernel of each requested slice */
    size_t cap_ids;
    tl_bp_slice *tbps;        /* scratch for incremental updates: one per tracked slice */
    int *tids;
    int ntracked, cap_tracked;
    int evicted;              /* evictions seen by the current tl_window_place */
    tl_bp_proj pend[TL_ACC_BATCH]; /* incremental updates not yet applied (track_queue) */
    int npend;
    const char *track_kernel; /* what the backend's incremental updates ran */
    angle_key *order;         /* scratch for angular weights */

    uint64_t accepted[3], stale, duplicate, shape;
    uint64_t frames_queued, frames_done; /* fences (tl_engine_frames_done) */

    tl_kernel_choice choices[TL_ENGINE_MAX_CHOICES]; /* tuned kernels by slice size */
    size_t nchoices;
};

static _Thread_local tl_errbuf create_error;

const char *tl_engine_last_error(const tl_engine *e)
{
    return e ? e->err.msg : create_error.msg;
}

void tl_engine_config_init(tl_engine_config *c, uint32_t rows, uint32_t cols, uint32_t window)
{
    memset(c, 0, sizeof *c);
    c->backend = TL_BACKEND_AUTO;
    c->geometry = TL_GEOMETRY_PARALLEL;
    c->rows = rows;
    c->cols = cols;
    c->dtype = TL_DTYPE_U16;
    c->window = window;
    c->center = cols > 0 ? (cols - 1) / 2.0 : 0.0;
    c->filter = TL_FILTER_RAMLAK;
    c->weights = TL_WEIGHTS_UNIFORM;
    c->quality = TL_QUALITY_EXACT;
    c->precision = TL_PRECISION_F32;
}

/* ---- backends ----------------------------------------------------------------------------- */

bool tl_backend_available(tl_backend_kind b, char *why, size_t why_len)
{
    char scratch[128];
    if (!why) {
        why = scratch;
        why_len = sizeof scratch;
    }
    switch (b) {
    case TL_BACKEND_CPU:
        return true;
    case TL_BACKEND_CUDA:
#ifdef HAVE_CUDA
        if (tl_cuda_device_count(why, why_len) > 0)
            return true;
        return false;
#else
        snprintf(why, why_len, "this build has no CUDA backend (configure --with-cuda)");
        return false;
#endif
    case TL_BACKEND_AUTO:
        return true;
    }
    return false;
}

#ifdef HAVE_CUDA
/* Which backend's memory tl_host_alloc hands out: CUDA's for CUDA, and for AUTO where a
 * GPU is usable (as pick_backend decides). */
static bool host_pinned(tl_backend_kind b)
{
    return b == TL_BACKEND_CUDA ||
           (b == TL_BACKEND_AUTO && tl_backend_available(TL_BACKEND_CUDA, NULL, 0));
}
#endif

tl_status tl_host_alloc(tl_backend_kind b, size_t bytes, void **out, char *why, size_t why_len)
{
#ifdef HAVE_CUDA
    if (host_pinned(b))
        return tl_cuda_host_alloc(bytes, out, why, why_len);
#endif
    *out = malloc(bytes ? bytes : 1);
    if (*out)
        return TL_OK;
    snprintf(why, why_len, "out of host memory (%.1f MiB)", bytes / 1048576.0);
    return TL_ENOMEM;
}

void tl_host_free(tl_backend_kind b, void *p)
{
#ifdef HAVE_CUDA
    if (host_pinned(b)) {
        tl_cuda_host_free(p);
        return;
    }
#endif
    free(p);
}

tl_status tl_host_register(tl_backend_kind b, void *p, size_t bytes, char *why, size_t why_len)
{
#ifdef HAVE_CUDA
    if (host_pinned(b))
        return tl_cuda_host_register(p, bytes, why, why_len);
#endif
    (void)b, (void)p, (void)bytes, (void)why, (void)why_len;
    return TL_OK;
}

void tl_host_unregister(tl_backend_kind b, void *p)
{
#ifdef HAVE_CUDA
    if (host_pinned(b))
        tl_cuda_host_unregister(p);
#endif
    (void)b, (void)p;
}

int tl_backend_device_count(tl_backend_kind b, char *why, size_t why_len)
{
    if (b == TL_BACKEND_AUTO)
        b = tl_backend_available(TL_BACKEND_CUDA, NULL, 0) ? TL_BACKEND_CUDA : TL_BACKEND_CPU;
    if (b == TL_BACKEND_CPU)
        return 1;
#ifdef HAVE_CUDA
    int n = tl_cuda_device_count(why, why_len);
    return n > 0 ? n : 0;
#else
    if (why && why_len)
        snprintf(why, why_len, "this build has no CUDA backend (configure --with-cuda)");
    return 0;
#endif
}

/* Which backend runs the engine, and the configuration it gets (*rc): the user's with AUTO
 * resolved and the device list applied. AUTO picks CUDA where a GPU is usable; an explicit
 * choice that cannot run is an error. Two or more devices go to the split backend
 * (gpu/split.c), whose parts are of the resolved kind (*kind names it). */
static tl_status pick_backend(const tl_engine_config *c, tl_errbuf *eb, tl_engine_config *rc,
                              const tl_backend_ops **ops, const char **kind)
{
    char why[256] = "";
    tl_backend_kind b = c->backend;
    if (b == TL_BACKEND_AUTO) /* the float64 reference mode exists on the CPU only */
        b = c->precision != TL_PRECISION_F64 && tl_backend_available(TL_BACKEND_CUDA, NULL, 0)
                ? TL_BACKEND_CUDA
                : TL_BACKEND_CPU;
    if (!tl_backend_available(b, why, sizeof why))
        return tl_fail(eb, TL_EDEVICE, "backend %s requested but not usable: %s",
                       tl_backend_name(b), why);
    const tl_backend_ops *one = &tl_cpu_backend;
#ifdef HAVE_CUDA
    if (b == TL_BACKEND_CUDA) {
        one = &tl_cuda_backend;
        /* every ordinal must exist: a missing GPU is an error, never fewer partitions */
        int n = tl_cuda_device_count(why, sizeof why);
        for (uint32_t k = 0; k < c->ndevices; k++)
            if (c->devices[k] < 0 || c->devices[k] >= n)
                return tl_fail(eb, TL_EDEVICE,
                               "devices[%u] is CUDA device %d, but this machine has %d CUDA "
                               "device%s (0..%d)", k, c->devices[k], n > 0 ? n : 0,
                               n == 1 ? "" : "s", n - 1);
    }
#endif
    *rc = *c;
    rc->backend = b;
    if (c->ndevices == 1)
        rc->device = c->devices[0];
    *kind = one->name;
    *ops = c->ndevices >= 2 ? &tl_split_backend : one;
    return TL_OK;
}

static tl_status check_config(const tl_engine_config *c, tl_errbuf *eb)
{
    if (!c)
        return tl_fail(eb, TL_EINVAL, "no configuration");
    if (c->geometry == TL_GEOMETRY_CONE)
        return tl_fail(eb, TL_EUNSUPPORTED, "cone-beam geometry is not implemented yet");
    if (c->geometry != TL_GEOMETRY_PARALLEL)
        return tl_fail(eb, TL_EINVAL, "unknown geometry %d", (int)c->geometry);
    if (c->rows == 0 || c->cols == 0 || c->rows > 65536 || c->cols > 65536)
        return tl_fail(eb, TL_EINVAL, "detector shape %u x %u out of range 1..65536", c->rows,
                       c->cols);
    if (c->window == 0 || c->window > (1u << 20))
        return tl_fail(eb, TL_EINVAL, "window %u out of range 1..%u", c->window, 1u << 20);
    if (tl_dtype_size(c->dtype) == 0)
        return tl_fail(eb, TL_EINVAL, "unknown dtype %d", (int)c->dtype);
    if ((unsigned)c->filter >= TL_FILTER_COUNT)
        return tl_fail(eb, TL_EINVAL, "unknown filter %d", (int)c->filter);
    if (!isfinite(c->center))
        return tl_fail(eb, TL_EINVAL, "center is not finite");
    if (c->weights != TL_WEIGHTS_UNIFORM && c->weights != TL_WEIGHTS_ANGLES)
        return tl_fail(eb, TL_EINVAL, "unknown weighting %d", (int)c->weights);
    if ((unsigned)c->quality > TL_QUALITY_PREVIEW)
        return tl_fail(eb, TL_EINVAL, "unknown quality mode %d", (int)c->quality);
    if (c->precision != TL_PRECISION_F32 && c->precision != TL_PRECISION_F64)
        return tl_fail(eb, TL_EINVAL, "unknown precision %d", (int)c->precision);
    if (c->threads < 0)
        return tl_fail(eb, TL_EINVAL, "threads must be >= 0");
    if (c->ndevices > TL_ENGINE_MAX_DEVICES)
        return tl_fail(eb, TL_EINVAL, "%u devices: an engine spans at most %d", c->ndevices,
                       TL_ENGINE_MAX_DEVICES);
    if (c->ndevices >= 2 && c->ndevices > c->rows)
        return tl_fail(eb, TL_EINVAL,
                       "%u devices for %u detector rows: each device needs a row of its own",
                       c->ndevices, c->rows);
    return TL_OK;
}

tl_status tl_engine_estimate(const tl_engine_config *c, tl_memory_estimate *m)
{
    const tl_backend_ops *ops;
    const char *kind;
    tl_engine_config rc;
    tl_status st = check_config(c, &create_error);
    if (st == TL_OK)
        st = pick_backend(c, &create_error, &rc, &ops, &kind);
    if (st == TL_OK)
        st = ops->estimate(&rc, tl_filter_padded_length(c->cols), m, &create_error);
    return st;
}

/* ---- creation ----------------------------------------------------------------------------- */

static tl_status apply_filter(tl_engine *e, tl_filter f)
{
    if (f == TL_FILTER_NONE)
        return e->ops->set_filter(e->be, NULL);
    tl_status st = tl_filter_response(f, e->padded, e->response);
    if (st != TL_OK)
        return tl_fail(&e->err, st, "cannot design filter %s", tl_filter_name(f));
    return e->ops->set_filter(e->be, e->response);
}

static bool has_kernel(const tl_engine *e, const char *name)
{
    tl_kernel_info k[TL_ENGINE_MAX_KERNELS];
    size_t n = e->ops->kernels(e->be, k, TL_ENGINE_MAX_KERNELS);
    for (size_t i = 0; i < n && i < TL_ENGINE_MAX_KERNELS; i++)
        if (strncmp(k[i].name, name, sizeof e->cfg.kernel) == 0)
            return true;
    return false;
}

tl_status tl_engine_create(const tl_engine_config *c, tl_engine **out)
{
    *out = NULL;
    tl_errbuf *eb = &create_error;
    tl_status st = check_config(c, eb);
    if (st != TL_OK)
        return st;
    tl_engine *e = calloc(1, sizeof *e);
    if (!e)
        return tl_fail(eb, TL_ENOMEM, "out of memory for the engine");
    e->cfg = *c;
    e->padded = tl_filter_padded_length(c->cols);
    tl_engine_config rc; /* what the backend gets */
    st = pick_backend(c, eb, &rc, &e->ops, &e->backend);
    if (st != TL_OK)
        goto fail;

    /* The whole memory need is checked before anything large is allocated, so a scan
     * that does not fit is refused with both numbers instead of failing half-way. */
    tl_memory_estimate m;
    st = e->ops->estimate(&rc, e->padded, &m, eb);
    if (st != TL_OK)
        goto fail;
    if (m.available_bytes && m.total_bytes > m.available_bytes) {
        st = tl_fail(eb, TL_ENOMEM,
                     "scan needs %.2f GiB on the %s backend (window %u x %u rows x %u cols: "
                     "%.2f GiB, buffers %.2f GiB) but only %.2f GiB are free; reconstruct fewer "
                     "rows or shorten the window",
                     m.total_bytes / 1073741824.0, e->backend, c->window, c->rows, c->cols,
                     m.window_bytes / 1073741824.0, m.buffer_bytes / 1073741824.0,
                     m.available_bytes / 1073741824.0);
        goto fail;
    }

    size_t n = c->window;
    e->response = malloc((e->padded / 2 + 1) * sizeof *e->response);
    e->angle = calloc(n, sizeof *e->angle);
    e->center_offset = calloc(n, sizeof *e->center_offset);
    e->t_acq = calloc(n, sizeof *e->t_acq);
    e->t_recv = calloc(n, sizeof *e->t_recv);
    e->proj = malloc(n * sizeof *e->proj);
    e->order = malloc(n * sizeof *e->order);
    if (!e->response || !e->angle || !e->center_offset || !e->t_acq || !e->t_recv || !e->proj ||
        !e->order || tl_window_init(&e->win, c->window, c->first_index) != 0) {
        st = tl_fail(eb, TL_ENOMEM, "out of memory for the window's bookkeeping (%zu slots)", n);
        goto fail;
    }
    st = e->ops->create(&rc, e->padded, &e->err, &e->be);
    if (st != TL_OK) {
        tl_fail(eb, st, "%s", e->err.msg);
        goto fail;
    }
    st = apply_filter(e, c->filter);
    if (st != TL_OK) {
        tl_fail(eb, st, "%s", e->err.msg);
        goto fail;
    }
    if (c->kernel[0] && !has_kernel(e, c->kernel)) {
        st = tl_fail(eb, TL_EINVAL, "the %s backend has no kernel \"%.32s\"", e->backend,
                     c->kernel);
        goto fail;
    }
    *out = e;
    return TL_OK;
fail:
    tl_engine_destroy(e);
    return st;
}

void tl_engine_destroy(tl_engine *e)
{
    if (!e)
        return;
    if (e->be)
        e->ops->destroy(e->be);
    tl_window_free(&e->win);
    free(e->response);
    free(e->angle);
    free(e->center_offset);
    free(e->t_acq);
    free(e->t_recv);
    free(e->proj);
    free(e->order);
    free(e->slices); /* the backend's destroy freed the accumulators */
    free(e->bps);
    free(e->bps_kernel);
    free(e->kernel_of);
    free(e->ids);
    free(e->bps_out);
    free(e->tbps);
    free(e->tids);
    free(e);
}

/* ---- frames ------------------------------------------------------------------------------- */

static tl_status check_frame(tl_engine *e, const tl_frame *f)
{
    const tl_engine_config *c = &e->cfg;
    if (!f || !f->data)
        return tl_fail(&e->err, TL_EINVAL, "frame without data");
    if ((unsigned)f->kind > TL_FRAME_PROJ)
        return tl_fail(&e->err, TL_EINVAL, "unknown frame kind %d", (int)f->kind);
    if (f->rows != c->rows || f->cols != c->cols || f->dtype != c->dtype) {
        e->shape++;
        return tl_fail(&e->err, TL_ESHAPE, "frame %u x %u of dtype %d, scan expects %u x %u of %d",
                       f->rows, f->cols, (int)f->dtype, c->rows, c->cols, (int)c->dtype);
    }
    if (f->pitch && f->pitch < (size_t)f->cols * tl_dtype_size(f->dtype))
        return tl_fail(&e->err, TL_EINVAL, "pitch %zu shorter than a row", f->pitch);
    if (f->kind == TL_FRAME_PROJ && (!isfinite(f->angle) || !isfinite(f->center_offset)))
        return tl_fail(&e->err, TL_EINVAL, "projection %llu: angle or centre offset not finite",
                       (unsigned long long)f->index);
    return TL_OK;
}

/* ---- fences ------------------------------------------------------------------------------ */

tl_status tl_engine_frames_done(tl_engine *e, uint64_t wait_for, uint64_t *done)
{
    while (e->frames_done < e->frames_queued) {
        bool reached = true;
        if (e->ops->fence_done) {
            tl_status st = e->ops->fence_done(e->be, e->frames_done % TL_BACKEND_FENCES,
                                              e->frames_done < wait_for, &reached);
            if (st != TL_OK) {
                *done = e->frames_done;
                return st;
            }
        }
        if (!reached)
            break;
        e->frames_done++;
    }
    *done = e->frames_done;
    return TL_OK;
}

uint64_t tl_engine_frames_queued(const tl_engine *e)
{
    return e->frames_queued;
}

tl_status tl_engine_flush(tl_engine *e)
{
    return e->ops->flush ? e->ops->flush(e->be) : TL_OK;
}

/* After the backend has taken frame f (stored it, or failed to): its fence. A frame read
 * later that failed is waited for here, so its caller may reuse the buffer at once. */
static tl_status fence_frame(tl_engine *e, const tl_frame *f, tl_status stored)
{
    uint64_t done;
    tl_status st = TL_OK;
    if (e->ops->fence) {
        if (e->frames_queued - e->frames_done == TL_BACKEND_FENCES) /* the ring is full */
            st = tl_engine_frames_done(e, e->frames_done + 1, &done);
        if (st == TL_OK)
            st = e->ops->fence(e->be, e->frames_queued % TL_BACKEND_FENCES);
    }
    if (st != TL_OK)
        return stored != TL_OK ? stored : st;
    e->frames_queued++;
    if (stored != TL_OK && f->read_later) /* the failure to report is the store's */
        (void)tl_engine_frames_done(e, e->frames_queued, &done);
    return stored;
}

static tl_status submit_calibration(tl_engine *e, const tl_frame *f)
{
    int k = f->kind == TL_FRAME_DARK ? 0 : 1;
    /* A projection since this batch's last frame closes the batch: the next dark (flat)
     * starts a new one. Darks and flats may interleave freely within a calibration run. */
    if (e->proj_since[k]) {
        tl_status st = e->ops->calib_reset(e->be, f->kind);
        if (st != TL_OK)
            return st;
        e->batch[k] = 0;
        e->proj_since[k] = false;
    }
    tl_status st = fence_frame(e, f, e->ops->calib_add(e->be, f, e->batch[k] + 1));
    if (st != TL_OK)
        return st;
    e->batch[k]++;
    e->accepted[f->kind]++;
    return TL_OK;
}

/* ---- incremental slices ------------------------------------------------------------------ */

static bool tracking_applies(const tl_engine *e)
{
    return e->cfg.weights == TL_WEIGHTS_UNIFORM; /* angular weights change with the set */
}

/* Pending updates are dropped with the slices they were for: each is rebuilt when read. */
static void invalidate_tracked(tl_engine *e)
{
    for (int k = 0; k < e->nslices; k++)
        e->slices[k].valid = false;
    e->npend = 0;
}

static tl_bp_proj proj_of_slot(const tl_engine *e, uint32_t slot)
{
    tl_bp_proj p = {.slot = slot,
                    .cos_t = cos(e->angle[slot]),
                    .sin_t = sin(e->angle[slot]),
                    .center = e->cfg.center + e->center_offset[slot],
                    .weight = M_PI / e->win.n};
    return p;
}

/* Incremental updates are batched: each projection added (sign +1) or evicted (-1) is
 * queued, and up to TL_ACC_BATCH of them go to the accumulators in one pass. A stream then
 * costs one pass per frame instead of two (the previous frame's addition goes with this
 * frame's eviction), and a burst of frames filling the window one pass per batch; the
 * passes are memory-bound, so this halves or better the GPU time of tracked slices. The
 * queue is applied (track_flush) before a slot it reads is overwritten, before anything
 * reads or rebuilds a tracked slice, and when full; so each update still sees the
 * projection it names, and a slice that becomes valid (a rebuild) never sees an update
 * queued before it. A read-out applies it in two parts (tl_engine_reconstruct): to the
 * slices read, then, queued behind their read-out, to the others, so that a read-out
 * waits for its own slices' updates only. */
typedef enum {
    FLUSH_ALL,    /* every tracked slice; the queue is emptied */
    FLUSH_ONLY,   /* only those in ids; the queue is kept for the others */
    FLUSH_OTHERS, /* all but those in ids (which had it with FLUSH_ONLY); emptied */
} flush_set;

static bool listed(const int *ids, size_t n, int id)
{
    for (size_t k = 0; k < n; k++)
        if (ids[k] == id)
            return true;
    return false;
}

static void track_flush_set(tl_engine *e, flush_set which, const int *ids, size_t nids)
{
    if (e->npend == 0)
        return;
    int n = 0;
    for (int k = 0; k < e->nslices; k++) {
        slice_entry *se = &e->slices[k];
        if (!se->used || !se->tracked || !se->valid)
            continue;
        if (which != FLUSH_ALL && listed(ids, nids, k) != (which == FLUSH_ONLY))
            continue;
        tl_bp_slice *b = &e->tbps[n];
        memcpy(b->plane, se->plane, sizeof se->plane);
        b->height = se->spec.height;
        b->width = se->spec.width;
        b->out = NULL;
        e->tids[n++] = k;
    }
    int added = 0;
    for (int k = 0; k < e->npend; k++)
        added += e->pend[k].weight > 0;
    tl_bp_job job = {.slices = e->tbps, .nslices = (size_t)n, .proj = e->pend,
                     .nproj = (size_t)e->npend, .force = e->cfg.kernel,
                     .quality = e->cfg.quality};
    if (which != FLUSH_ONLY)
        e->npend = 0;
    if (n == 0)
        return;
    if (e->ops->acc_update(e->be, &job, e->tids, true) != TL_OK) {
        invalidate_tracked(e); /* the accumulators are unknown: rebuilt at the next read */
        return;
    }
    e->track_kernel = job.kernel;
    for (int k = 0; k < n; k++) /* the refresh period counts projections added */
        e->slices[e->tids[k]].updates += (uint32_t)added;
}

static void track_flush(tl_engine *e)
{
    track_flush_set(e, FLUSH_ALL, NULL, 0);
}

static void track_queue(tl_engine *e, uint32_t slot, double sign)
{
    if (!tracking_applies(e) || e->ntracked == 0)
        return;
    if (e->npend == TL_ACC_BATCH)
        track_flush(e);
    tl_bp_proj p = proj_of_slot(e, slot);
    p.weight *= sign;
    e->pend[e->npend++] = p;
}

/* Whether a queued update reads slot (a short scan: the queue holds TL_ACC_BATCH). */
static bool pending_reads(const tl_engine *e, uint32_t slot)
{
    for (int k = 0; k < e->npend; k++)
        if (e->pend[k].slot == slot)
            return true;
    return false;
}

/* Called by tl_window_place for each slot the window moves past. */
static void on_evict(void *ctx, uint32_t slot)
{
    tl_engine *e = ctx;
    if (++e->evicted > TL_TRACK_MAX_EVICT) {
        invalidate_tracked(e); /* cheaper to rebuild than to subtract a whole window */
        return;
    }
    track_queue(e, slot, -1.0);
}

tl_status tl_engine_track(tl_engine *e, int id, bool on)
{
    if (id < 0 || id >= e->nslices || !e->slices[id].used)
        return tl_fail(&e->err, TL_ENOTFOUND, "no slice %d", id);
    slice_entry *se = &e->slices[id];
    if (se->tracked == on)
        return TL_OK;
    if (on) {
        if (e->ntracked == e->cap_tracked) {
            int cap = e->cap_tracked ? 2 * e->cap_tracked : 8;
            tl_bp_slice *b = realloc(e->tbps, (size_t)cap * sizeof *b);
            if (b)
                e->tbps = b;
            int *t = realloc(e->tids, (size_t)cap * sizeof *t);
            if (t)
                e->tids = t;
            if (!b || !t)
                return tl_fail(&e->err, TL_ENOMEM, "out of memory for tracked slices");
            e->cap_tracked = cap;
        }
        tl_status st = e->ops->acc_alloc(e->be, id, se->spec.height, se->spec.width);
        if (st != TL_OK)
            return st;
        e->ntracked++;
    } else {
        e->ops->acc_free(e->be, id);
        e->ntracked--;
    }
    se->tracked = on;
    se->valid = false;
    se->updates = 0;
    return TL_OK;
}

tl_status tl_engine_submit(tl_engine *e, const tl_frame *f)
{
    tl_status st = check_frame(e, f);
    if (st != TL_OK)
        return st;
    if (f->kind != TL_FRAME_PROJ)
        return submit_calibration(e, f);

    uint32_t slot;
    e->evicted = 0;
    st = tl_window_place(&e->win, f->index, &slot, on_evict, e);
    if (st == TL_ESTALE) {
        e->stale++;
        return tl_fail(&e->err, st, "projection %llu is older than the window [%llu, %llu]",
                       (unsigned long long)f->index, (unsigned long long)tl_window_first(&e->win),
                       (unsigned long long)e->win.last);
    }
    if (st == TL_EDUPLICATE) {
        e->duplicate++;
        return tl_fail(&e->err, st, "projection %llu is already in the window",
                       (unsigned long long)f->index);
    }
    if (pending_reads(e, slot)) /* a queued update still reads what this store overwrites */
        track_flush(e);
    st = fence_frame(e, f, e->ops->store(e->be, f, slot));
    if (st != TL_OK)
        return st;
    tl_window_hold(&e->win, slot, f->index);
    e->angle[slot] = f->angle;
    e->center_offset[slot] = f->center_offset;
    e->t_acq[slot] = f->t_acq;
    e->t_recv[slot] = f->t_recv;
    track_queue(e, slot, +1.0);
    e->proj_since[0] = e->proj_since[1] = true;
    e->accepted[TL_FRAME_PROJ]++;
    return TL_OK;
}

/* ---- slices ------------------------------------------------------------------------------- */

tl_status tl_engine_add_slice(tl_engine *e, const tl_slice_spec *s, int *id)
{
    if (!s || s->height == 0 || s->width == 0 || s->height > 65536 || s->width > 65536)
        return tl_fail(&e->err, TL_EINVAL, "slice size out of range 1..65536");
    if (!(s->scale > 0) || !isfinite(s->scale))
        return tl_fail(&e->err, TL_EINVAL, "slice scale must be a positive number");
    if ((unsigned)s->kind > TL_SLICE_PLANE || (s->kind == TL_SLICE_ORTHO && (unsigned)s->axis > TL_AXIS_Z))
        return tl_fail(&e->err, TL_EINVAL, "unknown slice kind or axis");
    if (!isfinite(s->z) || !isfinite(s->position))
        return tl_fail(&e->err, TL_EINVAL, "slice position is not finite");
    for (int i = 0; i < 9; i++)
        if (!isfinite(s->orientation[i]))
            return tl_fail(&e->err, TL_EINVAL, "slice orientation is not finite");
    int k = 0;
    while (k < e->nslices && e->slices[k].used)
        k++;
    if (k == e->cap_slices) {
        int cap = e->cap_slices ? 2 * e->cap_slices : 8;
        slice_entry *n = realloc(e->slices, (size_t)cap * sizeof *n);
        if (!n)
            return tl_fail(&e->err, TL_ENOMEM, "out of memory for slices");
        e->slices = n;
        e->cap_slices = cap;
    }
    if (k == e->nslices)
        e->nslices++;
    slice_entry *se = &e->slices[k];
    memset(se, 0, sizeof *se);
    se->used = true;
    se->spec = *s;
    tl_slice_plane(s, e->cfg.rows, se->plane);
    e->live_slices++;
    *id = k;
    return TL_OK;
}

tl_status tl_engine_remove_slice(tl_engine *e, int id)
{
    if (id < 0 || id >= e->nslices || !e->slices[id].used)
        return tl_fail(&e->err, TL_ENOTFOUND, "no slice %d", id);
    if (e->slices[id].tracked)
        tl_engine_track(e, id, false);
    e->slices[id].used = false;
    e->live_slices--;
    return TL_OK;
}

/* ---- reconstruction ----------------------------------------------------------------------- */

static int by_angle(const void *a, const void *b)
{
    double x = ((const angle_key *)a)->angle, y = ((const angle_key *)b)->angle;
    return (x > y) - (x < y);
}

/* Weight of each held projection: pi / N (uniform), or its share of the angular range
 * ((theta[k+1] - theta[k-1]) / 2 over the sorted angles, the ends mirrored), scaled so the
 * weights sum to pi. Fills e->proj and returns how many projections are held. */
static size_t build_projections(tl_engine *e)
{
    const tl_window *w = &e->win;
    size_t n = 0;
    for (uint32_t s = 0; s < w->n; s++) {
        if (!w->held[s])
            continue;
        tl_bp_proj *p = &e->proj[n];
        p->slot = s;
        p->cos_t = cos(e->angle[s]);
        p->sin_t = sin(e->angle[s]);
        p->center = e->cfg.center + e->center_offset[s];
        p->weight = M_PI / w->n;
        e->order[n] = (angle_key){e->angle[s], (uint32_t)n};
        n++;
    }
    if (e->cfg.weights != TL_WEIGHTS_ANGLES || n == 0)
        return n;
    if (n == 1) {
        e->proj[0].weight = M_PI;
        return n;
    }
    qsort(e->order, n, sizeof *e->order, by_angle);
    double total = 0;
    for (size_t k = 0; k < n; k++) {
        size_t lo = k ? k - 1 : 0, hi = k + 1 < n ? k + 1 : n - 1;
        double gap = (e->order[hi].angle - e->order[lo].angle) / (double)(hi - lo);
        e->proj[e->order[k].k].weight = gap;
        total += gap;
    }
    for (size_t k = 0; k < n && total > 0; k++)
        e->proj[k].weight *= M_PI / total;
    return n;
}

/* Fills the job for slices ids (outputs out[k], or NULL for internal buffers). */
static tl_status prepare_job(tl_engine *e, const int *ids, size_t n, float *const *out,
                             tl_bp_job *job)
{
    if (n > e->cap_bps) {
        tl_bp_slice *b = realloc(e->bps, n * sizeof *b);
        if (b)
            e->bps = b;
        const char **k = realloc(e->bps_kernel, n * sizeof *k);
        if (k)
            e->bps_kernel = k;
        if (!b || !k)
            return tl_fail(&e->err, TL_ENOMEM, "out of memory for %zu slices", n);
        e->cap_bps = n;
    }
    for (size_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= e->nslices || !e->slices[ids[k]].used)
            return tl_fail(&e->err, TL_ENOTFOUND, "no slice %d", ids[k]);
        const slice_entry *se = &e->slices[ids[k]];
        memcpy(e->bps[k].plane, se->plane, sizeof se->plane);
        e->bps[k].height = se->spec.height;
        e->bps[k].width = se->spec.width;
        e->bps[k].out = out ? out[k] : NULL;
    }
    *job = (tl_bp_job){.slices = e->bps, .nslices = n, .proj = e->proj,
                       .force = e->cfg.kernel, .quality = e->cfg.quality,
                       .choices = e->choices, .nchoices = e->nchoices,
                       .slice_kernel = e->bps_kernel};
    for (size_t k = 0; k < n; k++)
        e->bps_kernel[k] = NULL;
    job->nproj = build_projections(e);
    return TL_OK;
}

/* A full window for benchmarks: every slot, uniform angles over 180 degrees. */
static size_t full_projections(tl_engine *e)
{
    uint32_t n = e->win.n;
    for (uint32_t s = 0; s < n; s++) {
        double theta = M_PI * s / n;
        e->proj[s] = (tl_bp_proj){.slot = s, .cos_t = cos(theta), .sin_t = sin(theta),
                                  .center = e->cfg.center, .weight = M_PI / n};
    }
    return n;
}

static size_t index_of(const int *ids, size_t n, int id)
{
    for (size_t k = 0; k < n; k++)
        if (ids[k] == id)
            return k;
    return 0; /* not reached: id comes from ids */
}

/* Records the kernel that made slice id (ids may name a slice more than once: all). */
static void set_slice_kernel(tl_engine *e, const int *ids, size_t n, int id, const char *name)
{
    for (size_t k = 0; k < n; k++)
        if (ids[k] == id)
            e->kernel_of[k] = name;
}

/* Whether a tracked slice's accumulator must be rebuilt before it is read: when it is not
 * valid, or after `refresh` updates where a period is set. The backends accumulate in
 * float64, so drift needs no periodic rebuild by default (engine.h). */
static bool needs_rebuild(const tl_engine *e, const slice_entry *se)
{
    return !se->valid || (e->cfg.refresh && se->updates >= e->cfg.refresh);
}

/* The tracked slices among ids: rebuilt where needed, then read out. The others are
 * back-projected from scratch. job.kernel ends up naming what ran. */
static tl_status reconstruct_split(tl_engine *e, const int *ids, size_t n, float *const *out,
                                   const char **kernel)
{
    size_t nt = 0, nu = 0, nr = 0;
    for (size_t k = 0; k < n; k++) {
        const slice_entry *se = &e->slices[ids[k]];
        bool t = se->tracked && tracking_applies(e);
        nt += t;
        nr += t && needs_rebuild(e, se);
    }
    nu = n - nt;
    tl_status st = TL_OK;
    tl_bp_job job;
    *kernel = NULL;
    /* scratch lists: rebuild ids, read ids and outs, untracked ids and outs */
    int *rb = e->ids, *rd = e->ids + n, *un = e->ids + 2 * n;
    float **rout = e->bps_out, **uout = e->bps_out + n;
    size_t a = 0, b = 0, c = 0;
    for (size_t k = 0; k < n; k++) {
        slice_entry *se = &e->slices[ids[k]];
        if (se->tracked && tracking_applies(e)) {
            if (needs_rebuild(e, se))
                rb[a++] = ids[k];
            rd[b] = ids[k];
            rout[b++] = out[k];
        } else {
            un[c] = ids[k];
            uout[c++] = out[k];
        }
    }
    if (nr) {
        st = prepare_job(e, rb, nr, NULL, &job);
        if (st == TL_OK)
            st = e->ops->acc_update(e->be, &job, rb, false);
        if (st != TL_OK)
            return st;
        for (size_t k = 0; k < nr; k++)
            set_slice_kernel(e, ids, n, rb[k], e->bps_kernel[k] ? e->bps_kernel[k] : job.kernel);
        for (size_t k = 0; k < nr; k++) {
            e->slices[rb[k]].valid = true;
            e->slices[rb[k]].updates = 0;
        }
        *kernel = job.kernel;
    }
    if (nt) {
        st = e->ops->acc_read(e->be, rd, nt, rout);
        if (st != TL_OK)
            return st;
        if (!*kernel)
            *kernel = e->track_kernel ? e->track_kernel : "incremental";
        for (size_t k = 0; k < nt; k++) /* read-outs not rebuilt now: the update kernel */
            if (!e->kernel_of[index_of(ids, n, rd[k])])
                set_slice_kernel(e, ids, n, rd[k],
                                 e->track_kernel ? e->track_kernel : "incremental");
    }
    if (nu) {
        st = prepare_job(e, un, nu, uout, &job);
        if (st == TL_OK)
            st = e->ops->backproject(e->be, &job);
        if (st != TL_OK)
            return st;
        *kernel = job.kernel;
        for (size_t k = 0; k < nu; k++)
            set_slice_kernel(e, ids, n, un[k], e->bps_kernel[k] ? e->bps_kernel[k] : job.kernel);
    }
    return TL_OK;
}

static tl_status reconstruct_ids(tl_engine *e, const int *ids, size_t n, float *const *out,
                                 tl_slice_info *info)
{
    if (3 * n > e->cap_ids) {
        int *v = realloc(e->ids, 3 * n * sizeof *v);
        float **o = realloc(e->bps_out, 2 * n * sizeof *o);
        const char **kn = realloc(e->kernel_of, n * sizeof *kn);
        if (v)
            e->ids = v;
        if (o)
            e->bps_out = o;
        if (kn)
            e->kernel_of = kn;
        if (!v || !o || !kn)
            return tl_fail(&e->err, TL_ENOMEM, "out of memory for %zu slices", n);
        e->cap_ids = 3 * n;
    }
    for (size_t k = 0; k < n; k++)
        e->kernel_of[k] = NULL;
    for (size_t k = 0; k < n; k++)
        if (ids[k] < 0 || ids[k] >= e->nslices || !e->slices[ids[k]].used)
            return tl_fail(&e->err, TL_ENOTFOUND, "no slice %d", ids[k]);
    const char *kernel;
    tl_status st = reconstruct_split(e, ids, n, out, &kernel);
    if (st != TL_OK)
        return st;
    if (info) {
        tl_slice_info si = {0};
        si.projections_used = e->win.nheld;
        si.missing = tl_window_missing(&e->win);
        si.window_first = e->win.empty ? 0 : tl_window_first(&e->win);
        si.window_last = e->win.last;
        si.kernel = kernel ? kernel : "?";
        /* the newest projection used: the highest index held */
        bool found = false;
        uint64_t best = 0;
        for (uint32_t s = 0; s < e->win.n; s++) {
            if (!e->win.held[s] || (found && e->win.index[s] <= best))
                continue;
            best = e->win.index[s];
            si.t_acq = e->t_acq[s];
            si.t_recv = e->t_recv[s];
            found = true;
        }
        for (size_t k = 0; k < n; k++) {
            info[k] = si;
            if (e->kernel_of[k])
                info[k].kernel = e->kernel_of[k];
        }
    }
    return TL_OK;
}

tl_status tl_engine_reconstruct(tl_engine *e, const int *ids, size_t n, float *const *out,
                                tl_slice_info *info)
{
    /* the slices read include every frame submitted; the other tracked slices catch up
     * behind this read-out */
    track_flush_set(e, FLUSH_ONLY, ids, n);
    tl_status st = reconstruct_ids(e, ids, n, out, info);
    track_flush_set(e, FLUSH_OTHERS, ids, n);
    return st;
}

/* ---- kernels and benchmarks -------------------------------------------------------------- */

size_t tl_engine_kernels(const tl_engine *e, tl_kernel_info *out, size_t cap)
{
    return e->ops->kernels(e->be, out, cap);
}

tl_status tl_engine_bench(tl_engine *e, const int *ids, size_t nids, int reps, tl_bench_row *rows,
                          size_t cap, size_t *n)
{
    tl_bp_job job;
    tl_status st = prepare_job(e, ids, nids, NULL, &job);
    if (st != TL_OK)
        return st;
    job.nproj = full_projections(e);
    return e->ops->bench(e->be, &job, reps < 1 ? 1 : reps, rows, cap, n);
}

tl_status tl_engine_bench_kernel(tl_engine *e, const int *ids, size_t nids, const char *kernel,
                                 int reps, tl_bench_row *row)
{
    tl_bp_job job;
    tl_status st = prepare_job(e, ids, nids, NULL, &job);
    if (st != TL_OK)
        return st;
    if (!kernel || !has_kernel(e, kernel))
        return tl_fail(&e->err, TL_EINVAL, "the %s backend has no kernel \"%s\"", e->backend,
                       kernel ? kernel : "(null)");
    job.force = kernel;
    job.nproj = full_projections(e);
    size_t n = 0;
    st = e->ops->bench(e->be, &job, reps < 1 ? 1 : reps, row, 1, &n);
    if (st == TL_OK && n == 0)
        st = tl_fail(&e->err, TL_EINVAL, "kernel %s cannot serve these slices", kernel);
    return st;
}

tl_status tl_engine_hw_rates(tl_engine *e, tl_hw_rate *out, size_t cap, size_t *n)
{
    *n = 0;
    if (!e->ops->hw_rates)
        return tl_fail(&e->err, TL_EUNSUPPORTED, "the %s backend has no micro-benchmarks",
                       e->backend);
    return e->ops->hw_rates(e->be, out, cap, n);
}

void tl_engine_device_id(const tl_engine *e, tl_device_id *id)
{
    memset(id, 0, sizeof *id);
    e->ops->device_id(e->be, id);
}

/* ---- tuned kernel choices ----------------------------------------------------------------- */

static tl_kernel_choice *find_choice(const tl_engine *e, uint32_t h, uint32_t w)
{
    for (size_t i = 0; i < e->nchoices; i++)
        if (e->choices[i].height == h && e->choices[i].width == w)
            return (tl_kernel_choice *)&e->choices[i];
    return NULL;
}

tl_status tl_engine_set_choice(tl_engine *e, const tl_kernel_choice *c)
{
    for (int q = 0; q < TL_QUALITY_COUNT; q++)
        for (int b = 0; b < 2; b++) {
            const char *name = b ? c->batch[q] : c->single[q];
            if (memchr(name, '\0', sizeof c->single[q]) == NULL)
                return tl_fail(&e->err, TL_EINVAL, "kernel choice: name not terminated");
            if (name[0] && !has_kernel(e, name))
                return tl_fail(&e->err, TL_EINVAL, "kernel choice: the %s backend has no "
                               "kernel \"%s\"", e->backend, name);
        }
    tl_kernel_choice *slot = find_choice(e, c->height, c->width);
    if (!slot) {
        if (e->nchoices == TL_ENGINE_MAX_CHOICES)
            return tl_fail(&e->err, TL_EINVAL, "kernel choices for more than %d slice sizes",
                           TL_ENGINE_MAX_CHOICES);
        slot = &e->choices[e->nchoices++];
    }
    *slot = *c;
    return TL_OK;
}

bool tl_engine_get_choice(const tl_engine *e, uint32_t height, uint32_t width,
                          tl_kernel_choice *out)
{
    const tl_kernel_choice *c = find_choice(e, height, width);
    if (c && out)
        *out = *c;
    return c != NULL;
}

void tl_engine_clear_choices(tl_engine *e)
{
    e->nchoices = 0;
}

tl_status tl_engine_bench_store(tl_engine *e, const tl_frame *f, int reps, double *ms)
{
    tl_status st = check_frame(e, f);
    if (st != TL_OK)
        return st;
    if (f->kind != TL_FRAME_PROJ)
        return tl_fail(&e->err, TL_EINVAL, "the store path is timed on projections");
    return e->ops->bench_store(e->be, f, reps < 1 ? 1 : reps, ms);
}

/* ---- parameters and state ----------------------------------------------------------------- */

tl_status tl_engine_set_center(tl_engine *e, double center)
{
    if (!isfinite(center))
        return tl_fail(&e->err, TL_EINVAL, "center is not finite");
    e->cfg.center = center;
    invalidate_tracked(e); /* every projection moved */
    return TL_OK;
}

tl_status tl_engine_set_filter(tl_engine *e, tl_filter f)
{
    if ((unsigned)f >= TL_FILTER_COUNT)
        return tl_fail(&e->err, TL_EINVAL, "unknown filter %d", (int)f);
    tl_status st = apply_filter(e, f);
    if (st == TL_OK)
        e->cfg.filter = f;
    return st;
}

tl_status tl_engine_reset(tl_engine *e)
{
    tl_window_clear(&e->win);
    invalidate_tracked(e);
    for (int k = 0; k < 2; k++) {
        tl_status st = e->ops->calib_reset(e->be, k == 0 ? TL_FRAME_DARK : TL_FRAME_FLAT);
        if (st != TL_OK)
            return st;
        e->batch[k] = 0;
        e->proj_since[k] = false;
    }
    return TL_OK;
}

void tl_engine_get_state(const tl_engine *e, tl_engine_state *st)
{
    memset(st, 0, sizeof *st);
    st->backend = e->backend;
    st->device_name = e->ops->device_name(e->be);
    st->window = e->win.n;
    st->held = e->win.nheld;
    st->missing = tl_window_missing(&e->win);
    st->empty = e->win.empty;
    st->window_first = e->win.empty ? 0 : tl_window_first(&e->win);
    st->window_last = e->win.last;
    st->dark_batch = e->batch[0];
    st->flat_batch = e->batch[1];
    memcpy(st->accepted, e->accepted, sizeof st->accepted);
    st->stale = e->stale;
    st->duplicate = e->duplicate;
    st->shape = e->shape;
    st->memory_bytes = e->ops->memory_used(e->be);
    st->center = e->cfg.center;
    st->filter = e->cfg.filter;
    st->slices = e->live_slices;
}

size_t tl_engine_missing(const tl_engine *e, uint64_t *out, size_t cap)
{
    return tl_window_missing_list(&e->win, out, cap);
}

const tl_engine_config *tl_engine_get_config(const tl_engine *e)
{
    return &e->cfg;
}
