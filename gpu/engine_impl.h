/* engine_impl.h — the engine's state, shared by the files of gpu/ that implement engine.h
 * (internal: nothing outside gpu/ includes it). Who owns what:
 *   engine.c       creation, configuration checks, parameters and state
 *   backends.c     which backend runs an engine (discovery); host.c: host memory
 *   frames.c       frames in: checks, calibration batches, the window, fences
 *   slices.c       the slice registry (ids, specs, planes)
 *   track.c        tracked slices: accumulators updated projection by projection
 *   reconstruct.c  jobs for the backend, and reading slices out
 *   iterate.c      iterative slices (the method: gpu/method/iterative.c)
 *   choices.c      the kernel list and the tuned kernel choices
 *   bench.c        benchmarks (engine_bench.h)
 *   bands.c        detector row bands (out-of-core slabs)
 * The geometry (gpu/geometry/) says what a projection is, the method (gpu/method/) how the
 * window becomes a slice; the backend (gpu/base/backend.h) does the numbers.
 */
#ifndef TL_ENGINE_IMPL_H
#define TL_ENGINE_IMPL_H

#include "gpu/base/backend.h"
#include "gpu/base/rings.h"
#include "gpu/engine.h"
#include "gpu/geometry/geometry.h"
#include "gpu/method/method.h"
#include "gpu/window.h"

/* What the engine remembers of the projection in one slot of the window. */
typedef struct {
    double angle;           /* radians */
    double center_offset;   /* pixels, added to the engine's centre */
    uint64_t t_acq, t_recv; /* carried into slice info */
} tl_slot_info;

typedef struct {
    bool used;
    tl_slice_spec spec;
    float plane[9];
    bool tracked;     /* kept incrementally (tl_engine_track) */
    bool valid;       /* its accumulator equals the window's back projection */
    uint32_t updates; /* incremental updates since the last rebuild */
} tl_slice_entry;

/* Scratch of the job handed to the backend (reconstruct.c): one slice and one kernel name
 * per slice of the job, one projection and one angle key per slot of the window. */
typedef struct {
    tl_bp_slice *slices;
    const char **kernel; /* what the backend says made each slice */
    size_t cap;          /* slices */
    tl_bp_proj *proj;    /* window slots */
    tl_angle_key *order; /* window slots: for the method's weights */
} tl_job_scratch;

/* Slice ids with their outputs, as the backend's accumulator operations take them. */
typedef struct {
    int *ids;
    float **out;
    size_t n;
} tl_slice_list;

/* How the slices of one tl_engine_reconstruct are served (reconstruct.c). */
typedef struct {
    tl_slice_list rebuild;  /* tracked, accumulator rebuilt first (out unused) */
    tl_slice_list read;     /* tracked: read out of the accumulator */
    tl_slice_list fresh;    /* not tracked: back-projected from the window */
    const char **kernel_of; /* per requested slice: what made it */
    size_t cap;
} tl_recon_scratch;

/* Incremental tracking (track.c). */
typedef struct {
    int ntracked;
    tl_bp_slice *slices; /* scratch: one per tracked slice */
    int *ids;
    int cap;
    int evicted;                      /* evictions seen by the current tl_window_place */
    tl_bp_proj pending[TL_ACC_BATCH]; /* updates not yet applied (tl_track_queue) */
    int npending;
    const char *kernel; /* what the backend's incremental updates ran */
} tl_track_state;

/* Slice sizes with a tuned kernel choice (tl_engine_set_choice). */
#define TL_ENGINE_MAX_CHOICES 16
/* Kernels a backend may list. */
#define TL_ENGINE_MAX_KERNELS 128

struct tl_engine {
    tl_engine_config cfg;
    const tl_backend_ops *ops;
    void *be;            /* backend state */
    const char *backend; /* "cpu", "cuda": the kind (also of a split's parts) */
    const tl_geometry_ops *geometry;
    const char *no_fbp; /* why this engine's views serve iterative slices alone, or NULL */
    const tl_method_ops *method;
    tl_errbuf err;
    size_t padded;    /* filter length */
    double *response; /* filter response, padded/2 + 1 */

    tl_window win;
    tl_slot_info *slot; /* per slot of the window */

    uint32_t batch[2];  /* frames in the current dark (0) and flat (1) batch */
    bool proj_since[2]; /* a projection arrived since that batch's last frame */

    tl_slice_entry *slices;
    int nslices, cap_slices, live_slices;

    tl_job_scratch job;
    tl_recon_scratch recon;
    tl_track_state track;

    uint64_t accepted[3], stale, duplicate, shape;
    struct tl_center_ctx *center;         /* centre estimation (center.c), or NULL */
    struct tl_halfacq *halfacq;           /* half acquisition (halfacq.c), or NULL */
    tl_engine_config given; /* cfg as the caller sees it: the real detector (halfacq) */
    double (*matrices)[12]; /* cone beam: the engine's copy of cfg.cone.matrices, or NULL */
    double *weight_angles;  /* the engine's sorted copy of cfg.weight_angles, or NULL */
    uint32_t ring_since;                  /* projections since the last ring estimate */
    uint64_t ring_updates, ring_rebuilds; /* tl_engine_corr_state */
    uint64_t frames_queued, frames_done; /* fences (tl_engine_frames_done) */

    tl_kernel_choice choices[TL_ENGINE_MAX_CHOICES]; /* tuned kernels by slice size */
    size_t nchoices;
};

/* The error of the last failed tl_engine_create on this thread (engine.c). */
tl_errbuf *tl_engine_create_error(void);
/* Whether a configuration can be served: the shared checks, then the geometry's (engine.c). */
tl_status tl_engine_check_config(const tl_engine_config *c, tl_errbuf *eb);

/* backends.c: the operation table of a resolved kind (CPU or CUDA), NULL where this build
 * has none. */
const tl_backend_ops *tl_engine_backend_ops(tl_backend_kind kind);
/* backends.c: which backend runs an engine of configuration c, and the configuration it
 * gets (*rc: AUTO resolved, the device list applied); *kind names its kind. */
tl_status tl_engine_pick_backend(const tl_engine_config *c, tl_errbuf *eb, tl_engine_config *rc,
                                 const tl_backend_ops **ops, const char **kind);

/* frames.c */
tl_status tl_engine_check_frame(tl_engine *e, const tl_frame *f);

/* slices.c: the slice of id, or NULL (and the error set) when there is none. */
tl_slice_entry *tl_engine_slice(tl_engine *e, int id);

/* track.c */
/* Whether tracked slices are kept incrementally at all (the method is linear). */
bool tl_track_applies(const tl_engine *e);
/* Every tracked slice is rebuilt at its next read; queued updates are dropped. */
void tl_track_invalidate(tl_engine *e);
/* A projection stored into slot (added), or about to leave it (evicted): queued. */
void tl_track_added(tl_engine *e, uint32_t slot);
void tl_track_evicted(tl_engine *e, uint32_t slot);
/* Before slot is overwritten: applies the queue if an update in it reads the slot. */
void tl_track_before_store(tl_engine *e, uint32_t slot);
/* Applies queued updates: to the slices ids only (the queue kept for the others), or to
 * all but those (emptying the queue), around a read-out (tl_engine_reconstruct). */
void tl_track_flush_only(tl_engine *e, const int *ids, size_t n);
void tl_track_flush_others(tl_engine *e, const int *ids, size_t n);
/* Whether a tracked slice's accumulator must be rebuilt before it is read. */
bool tl_track_needs_rebuild(const tl_engine *e, const tl_slice_entry *se);
/* What the incremental updates ran, for slice info. */
const char *tl_track_kernel(const tl_engine *e);

/* reconstruct.c: fills e->job for the slices ids (outputs out[k], or NULL for internal
 * buffers) over the held projections, weighed by the method. */
tl_status tl_engine_prepare_job(tl_engine *e, const int *ids, size_t n, float *const *out,
                                tl_bp_job *job);

/* reconstruct.c: what a slice read out now uses of the window (info, but its kernel). */
void tl_engine_describe_window(const tl_engine *e, tl_slice_info *out);

/* halfacq.c: 360-degree scans with an offset axis. setup turns c into the virtual
 * detector's configuration (NULL *out without half acquisition); weights hands the
 * column weights to the backend (for c->center, virtual); embed makes a real frame a
 * virtual one (out->data is the context's buffer, valid until the next call); span is
 * where the real detector lies in the virtual one; center turns an axis column of the
 * real detector into the virtual one, TL_EINVAL where the stitched field would leave
 * the virtual detector (fits says whether it would). */
typedef struct tl_halfacq tl_halfacq;
tl_status tl_halfacq_setup(tl_engine_config *c, tl_errbuf *eb, tl_halfacq **out);
void tl_halfacq_span(const tl_halfacq *h, uint32_t *first, uint32_t *cols);
bool tl_halfacq_fits(const tl_halfacq *h, double center);
tl_status tl_halfacq_center(const tl_halfacq *h, double center, double *virt, tl_errbuf *eb);
void tl_halfacq_free(tl_halfacq *h);
/* the weight of virtual column v for the virtual axis cv (2 w(v), 0 off the detector) */
double tl_halfacq_weight(const tl_halfacq *h, double cv, uint32_t v);
tl_status tl_halfacq_weights(const tl_halfacq *h, const tl_engine_config *c,
                             const tl_backend_ops *ops, void *be, tl_errbuf *eb);
tl_status tl_halfacq_embed(tl_halfacq *h, const tl_frame *f, tl_frame *out, tl_errbuf *eb);

/* center.c: the centre estimation's state, and its hooks around a projection's store */
typedef struct tl_center_ctx tl_center_ctx;
tl_status tl_center_init(tl_engine *e);
void tl_center_free(tl_engine *e);
tl_status tl_center_before_store(tl_engine *e);
tl_status tl_center_after_store(tl_engine *e, const tl_frame *f);

/* choices.c: whether the backend has a kernel of this name. */
bool tl_engine_has_kernel(const tl_engine *e, const char *name);

#endif
