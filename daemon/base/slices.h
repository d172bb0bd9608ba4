/* slices.h — the slices the daemon serves, and when each is due.
 *
 * A slice is named by the requester's id and described like an engine slice (row, ortho,
 * plane). It lives here independently of scans: a new scan adds every registered slice to
 * its engine. A slice is computed only while it is wanted — someone subscribed to its topic
 * or it was pinned — and then per its update policy: after every K new projections, when
 * the window becomes complete, after a parameter change, for a new subscriber, and once
 * more after the scan's end (the "final" slice), never faster than its maximum rate —
 * except what is owed once per scan: the final and the window's completion go out at
 * once. A rate limit that held them back added up to 1 / max_rate to the very slices a
 * control system waits for (the scan's result: 50-100 ms of the demo's 10 Hz slices),
 * and bounded nothing. The registry is guarded by the daemon's lock.
 */
#ifndef TL_SLICES_H
#define TL_SLICES_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/engine.h"
#include "protocol/protocol.h"
#include "protocol/shm.h"

typedef struct {
    uint32_t every;   /* publish after this many new projections (>= 1) */
    bool on_complete; /* and when the window becomes complete */
    double max_rate;  /* at most this many per second */
} tl_update_policy;

/* An iterative slice (set_slice "method", PROTOCOL.md §12; issue #28). Each read-out runs
 * o.iterations more iterations from where the last one left x, and publishes x: after new
 * projections (the update policy, as for FBP), and while the window holds still, until
 * `max_iterations` have run since it last changed or the residual changes by less than
 * `tolerance` (refinement: a routine read-out, paced like the others, pacing.h). The
 * scan's final is published once x has converged after the end. x starts from the
 * slice's FBP (start_fbp) or zeros (ones for OS-EM), again after a parameter change or a
 * new scan. */
typedef struct {
    bool on;
    tl_iter_options o;       /* o.iterations: per read-out; o.tolerance applied here */
    uint32_t max_iterations; /* of refinement since the window last changed */
    bool start_fbp;
    /* cone beam: x is a stack of `planes` planes parallel to the slice, `spacing` volume
     * units apart, the slice plane planes / 2 (tl_slice_spec_stacked): one problem, the
     * slice published. Parallel beam: 1 (a horizontal slice is a problem of its own). */
    uint32_t planes;
    double spacing;
    /* state */
    float *image; /* x, planes x height x width; sized when the slice joins a scan's engine */
    size_t image_floats;
    bool started;        /* image holds x of this scan and parameters */
    uint32_t total;      /* iterations since the start */
    uint32_t since_data; /* ... since the window last changed */
    double residual;     /* after the last iteration */
    bool converged;      /* nothing to refine until the window changes */
} tl_slice_iter;

/* A box (set_slice kind "box", PROTOCOL.md §12; issue #21): an axis-aligned sub-volume
 * of depth x height x width voxels, each `scale` volume units wide, around `center`,
 * reconstructed as `depth` horizontal planes (one engine slice each; plane 0 the lowest
 * z) in one engine call and published as one image of depth x height rows, plane after
 * plane ("planes" and "box_step" in its header). Every plane of a box is kept
 * incrementally while it is watched, like any slice. The slice's spec is a plane's:
 * height, width (0: the detector's width) and scale. */
typedef struct {
    bool on;
    uint32_t depth; /* planes; 0: the detector's rows (the whole volume's height) */
    bool has_center;
    double center[3]; /* x, y, z in volume coordinates; default (0, 0, (rows - 1) / 2) */
    /* per scan: the planes' engine slices (ids[0] is the slice's engine_id) */
    int *ids;
    uint32_t planes;
} tl_slice_box;

/* Planes of a box, at most (the worker's stack scratch serves boxes and iterative
 * stacks alike). */
#define TL_SLICE_BOX_PLANES_MAX TL_SLICE_ITER_PLANES_MAX

typedef struct {
    char id[TL_PROTO_MAX_ID + 1];
    char topic[TL_PROTO_MAX_ID + 16];
    size_t topic_len;
    char shm_topic[TL_PROTO_MAX_ID + 16]; /* "shm/<id>/": delivery through shared memory */
    size_t shm_topic_len;
    tl_shm_ring shm;       /* its slots, while a local subscriber wants them (slice_shm.c) */
    uint64_t shm_retry_ns; /* after a failed creation: not before this (monotonic) */
    tl_slice_spec spec;    /* as requested; height/width 0 = from the scan's detector */
    tl_update_policy policy;
    bool policy_given; /* false: follows the configured defaults (reloadable) */
    bool pinned;
    tl_proto_dtype wire_dtype; /* how its pixels go over TCP (PROTOCOL.md §10.3): f32 f16 q16 */
    bool wire_lz4;             /* and LZ4-compressed */
    /* per scan */
    int engine_id; /* -1: not in the current engine */
    bool tracked;  /* kept incrementally by the engine (tl_engine_track) */
    uint32_t height, width;
    float orientation[9];
    /* scheduling */
    uint64_t seq;     /* last published sequence number */
    uint32_t pending; /* projections since the last computation */
    bool dirty;       /* the window changed since the last computation */
    bool want_complete, want_param, want_new, want_final;
    uint64_t last_ns; /* monotonic time of the last computation, 0 = never */
    uint64_t cost_ns; /* moving average of its share of a read-out's time (pacing.h) */
    bool was_tcp, was_shm; /* wanted over each channel at the last turn */
    tl_slice_iter it;      /* it.on: iterative, not FBP */
    tl_slice_box box;      /* box.on: a sub-volume; height is then box.planes planes' */
} tl_slice;

typedef struct {
    tl_slice *v;
    int n, cap;
} tl_slices;

void tl_slices_init(tl_slices *s);
void tl_slices_destroy(tl_slices *s);
tl_slice *tl_slices_find(tl_slices *s, const char *id, size_t len);
/* A new slice with this id (the caller fills spec and policy), or NULL when memory runs
 * out. The id must have passed tl_slice_id_valid. */
tl_slice *tl_slices_add(tl_slices *s, const char *id, size_t len);
void tl_slices_remove(tl_slices *s, tl_slice *sl);

/* 1..64 bytes of [A-Za-z0-9_.-]. */
bool tl_slice_id_valid(const char *id, size_t len);

/* Plane k of box slice sl in an engine of a rows x cols detector: a horizontal plane of
 * the spec's size (0: cols) at z = center z + (k - (planes - 1) / 2) x scale, centred on
 * the box's x, y (tl_slice_box). *planes gets the box's depth. */
void tl_slice_box_plane(const tl_slice *sl, uint32_t rows, uint32_t cols, uint32_t k,
                        tl_slice_spec *out, uint32_t *planes);
/* Whether slice sl lies in the volume of a rows x cols detector (tl_slice_inside; a box:
 * its first and last planes). */
bool tl_slice_fits(const tl_slice *sl, uint32_t rows, uint32_t cols);
/* The height of one of its planes: sl->height, or a box's height over its planes. */
uint32_t tl_slice_plane_height(const tl_slice *sl);

/* Records one new projection in the window (or a window change of another kind). */
void tl_slice_touch(tl_slice *sl);

/* Iterations one read-out of an iterative slice may run (its "iterations" option). */
#define TL_SLICE_ITER_STEP_MAX 1000
#define TL_SLICE_ITER_PLANES_MAX \
    1024 /* planes of an iterative cone-beam stack (the
                                         "planes must be 1..1024" of commands.c) */

/* Sizes an iterative slice's image for its height x width (when it joins an engine) and
 * starts it over; false when memory runs out. Nothing for an FBP slice. */
bool tl_slice_iter_prepare(tl_slice *sl);
/* Starts an iterative slice over: x from its start again at the next read-out. */
void tl_slice_iter_restart(tl_slice *sl);
/* Records a read-out of an iterative slice: done iterations with their residuals. */
void tl_slice_iter_ran(tl_slice *sl, uint32_t done, const double *residual);
/* Whether an iterative slice has refinement to do (started, not converged). */
bool tl_slice_refining(const tl_slice *sl);

/* Records over which channels the slice is wanted this turn (tcp: pinned or subscribed to
 * "slice/<id>/"; shm: subscribed to "shm/<id>/"). One that becomes wanted over a channel is
 * due at once (want_new), even when the other channel wanted it already: what was published
 * before went over that other channel only, and a scan that has ended publishes nothing
 * more by itself, so the newcomer would get nothing. */
void tl_slice_note_wanted(tl_slice *sl, bool tcp, bool shm);
/* Whether the slice should be computed now (its policy, urgency, or refinement to do);
 * changes nothing but *wake_ns, which is lowered to when it will be due when only its
 * maximum rate holds it back. The rate holds back neither the final nor the window's
 * completion of a slice reconstructed in one read-out (an iterative one owes its final
 * until it converges, and refines at its rate until then). */
bool tl_slice_due_now(const tl_slice *sl, bool wanted, bool have_data, uint64_t now_ns,
                      uint64_t *wake_ns);
/* Both: tl_slice_note_wanted (wanted over TCP), then tl_slice_due_now. */
bool tl_slice_due(tl_slice *sl, bool wanted, bool have_data, uint64_t now_ns, uint64_t *wake_ns);
/* Whether it is due for more than its routine policy: a new subscriber, a parameter
 * change, the window's completion or the scan's end. */
bool tl_slice_urgent(const tl_slice *sl);
/* The order in which due slices are served: urgent ones first, then the one computed
 * longest ago (so that pacing.h, which may hold the last ones back, starves none). */
bool tl_slice_served_before(const tl_slice *a, const tl_slice *b);
/* Resets the triggers after a computation at now_ns. */
void tl_slice_computed(tl_slice *sl, uint64_t now_ns);

#endif
