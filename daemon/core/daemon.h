/* daemon.h — tomolived's state, and which thread owns what.
 *
 * Three threads share it:
 *   - the ingest thread (ingest.c) owns the PULL socket: it receives, decodes and checks
 *     messages and queues them with their payloads (zero-copy) — nothing else can slow it;
 *   - the engine worker (worker.c, scan.c) owns the engine: it applies scans and frames,
 *     decides which slices are due and reconstructs them;
 *   - the event loop (lifecycle.c) owns the control ROUTER (serve/control.h) and the
 *     slices XPUB sockets, signals, timers and systemd notifications, the HTTP server
 *     (serve/http.c: preview page, /metrics) and the RECAST3D viewer link (serve/recast3d.c);
 *     the last two see published slices through the publisher's taps and act through
 *     control commands (serve/commands.h).
 * This header and what it declares are daemon/core/: the state and the threads that work on
 * it. daemon/serve/ builds on it; nothing here calls into serve/ (the loop's callbacks are
 * function pointers set by lifecycle.c and serve/).
 * `lock` guards the scan, its engine and the slice registry: the worker holds it per frame
 * and per reconstruction, control commands hold it briefly. Counters are atomics (stats.h);
 * the queue and the publisher's outbox have locks of their own. Timing kernels (tuning.c)
 * runs on a thread and an engine of its own; the worker only looks in on it.
 */
#ifndef TL_DAEMON_H
#define TL_DAEMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/base/auth.h"
#include "daemon/ingest/adapter.h"
#include "daemon/ingest/bands.h"
#include "daemon/base/heap.h"
#include "daemon/base/settings.h"
#include "daemon/ingest/ipc_frames.h"
#include "daemon/base/log.h"
#include "daemon/base/pacing.h"
#include "daemon/core/publisher.h"
#include "daemon/base/queue.h"
#include "daemon/base/slices.h"
#include "daemon/base/stats.h"
#include "daemon/base/zwatch.h"
#include "gpu/base/clock.h"
#include "gpu/base/link.h"
#include "gpu/engine.h"
#include "gpu/tune.h"
#include "protocol/protocol.h"

/* One slice the worker reads out this turn (worker.c): chosen by its select phase, given
 * a buffer by the take phase, filled by the reconstruct phase, handed over by the post. */
typedef struct {
    int slice;         /* index in d->slices */
    bool tcp, shm;     /* how it is wanted (tl_slice_wanted); shm only once its
                                   slots exist */
    tl_slicebuf *buf;  /* from the publisher's pool */
    float *slot;       /* the shared-memory slot the read-out goes to, or NULL */
    uint64_t slot_off; /* that slot's offset (tl_shm_ring_begin) */
    tl_slice_info info; /* what the read-out used */
    uint64_t cost_ns;   /* its share of the turn's reconstruction time */
} tl_worker_readout;

/* The worker's per-turn scratch, sized once for slices.max read-outs, so a turn allocates
 * nothing. */
typedef struct {
    int cap;
    tl_worker_readout *due; /* this turn's read-outs, in serving order */
    /* tl_engine_reconstruct's arguments, which its API takes as arrays: gathered from due
     * just before the call */
    int *engine_ids;
    float **outs;
    tl_slice_info *info;
    double *residual; /* an iterative read-out's, TL_SLICE_ITER_STEP_MAX */
    /* an iterative cone-beam stack's engine slices and their images, TL_SLICE_ITER_PLANES_MAX;
     * a box's planes' images (stack_outs) and what each used (stack_info) */
    int *stack_ids;
    float **stack_outs;
    tl_slice_info *stack_info;
    tl_pace pace;     /* frames first (pacing.h) */
} tl_worker_scratch;

/* The current scan. */
typedef struct {
    bool open;     /* an engine exists */
    bool finished; /* its end has arrived */
    uint64_t series;
    tl_proto_scan msg; /* as received (msg.filter is not valid: see filter) */
    char filter[33];
    tl_engine *engine;
    bool was_complete;    /* the window was complete at the last frame */
    bool gpu_frames;      /* its engine reads frames in GPU memory (the CUDA backend) */
    uint64_t projections; /* accepted in this scan */
    bool backlog;         /* the worker has more items queued behind the one it
                                   applies: its projection may wait to be filtered in a
                                   batch (tl_frame.more; the worker flushes at the end) */
    char last_error[512]; /* why the last scan was refused, for status */

    tl_item_detector detector; /* what its detector said (DECTRIS start), for status */
    uint64_t masked_filled;    /* masked pixels its adapter filled, in accepted frames */
} tl_scan;

/* The kernels chosen for one slice size of the current engine (tuning.c). */
typedef enum {
    TL_TUNE_SRC_TUNING = 0, /* being timed now, beside the scan: the built-in rule serves */
    TL_TUNE_SRC_CACHE,      /* read from the cache */
    TL_TUNE_SRC_TUNED,      /* timed for this engine */
    TL_TUNE_SRC_OFF,        /* the backend's built-in rule (engine.tune = off, or not cached) */
    TL_TUNE_SRC_FAILED,     /* the built-in rule, because the cache or the timing failed */
    TL_TUNE_SRC_ONLY        /* one kernel can serve the engine's quality: nothing to time */
} tl_tune_source;
const char *tl_tune_source_name(tl_tune_source s);

#define TL_TUNE_MAX_SIZES 16 /* sizes an engine keeps choices for (tl_engine_set_choice) */

typedef struct {
    uint32_t height, width, window, batch; /* the tuned shape */
    tl_tune_source source;
    tl_kernel_choice choice; /* names "" where the built-in rule applies */
    double seconds;          /* the resolution took */
} tl_tune_size;

/* The tune command: queued by commands.c, run by the worker, answered by control.c. */
typedef enum {
    TL_TUNE_JOB_IDLE = 0,
    TL_TUNE_JOB_QUEUED,
    TL_TUNE_JOB_RUNNING,
    TL_TUNE_JOB_DONE
} tl_tune_job_state;

struct tl_tune_task; /* a timing on its thread (tuning.c) */

typedef struct {
    /* guarded by lock */
    tl_tune_size sizes[TL_TUNE_MAX_SIZES]; /* resolved for the current engine; emptied with it */
    struct tl_tune_task *task;             /* the timing under way, NULL when none */
    int task_size;                         /* its entry of sizes[] */
    bool task_job;                         /* it is for the tune command (else automatic) */
    int nsizes;
    bool full_logged; /* more sizes than the engine keeps: said once per engine */
    tl_tune_job_state job;
    uint64_t job_id; /* the request's id */
    uint32_t job_dims[TL_TUNE_MAX_SIZES][2];
    int job_n;
    int job_next;          /* the job's next size to time */
    tl_proto_err job_code; /* TL_PROTO_OK, or why the job failed */
    char job_msg[600];     /* the failure's message */
    /* the job's reply: packed by the worker (RUNNING), sent by the loop (DONE) */
    msgpack_sbuffer job_reply;
    unsigned char job_route[256]; /* the requester's ROUTER identity (control.c) */
    size_t job_route_len;
    bool job_envelope;   /* a REQ client: an empty part after the identity */
    uv_async_t job_done; /* the worker wakes the loop to send the reply */
    bool job_async_ready;
    tl_tune_result *result; /* the worker's: timings read from the cache */
    /* the watchdog accepts a silent worker until then (monotonic ns), 0 = no timing on the
     * worker (only a tune command that finds no memory for an engine of its own) */
    atomic_uint_least64_t busy_until;
    atomic_int threads; /* timing threads running (left behind by a stop, too) */
} tl_tuning;

typedef struct tl_daemon {
    tl_settings cfg;
    const char *config_path; /* NULL: defaults only */
    char **overrides;        /* "key=value" from the command line, re-applied on reload */
    int noverrides;
    uint64_t started_ns;                  /* CLOCK_MONOTONIC */
    tl_ratelimit reject_rl[TL_REJ_COUNT]; /* one log limiter per rejection reason */

    void *zctx;
    uv_loop_t loop;
    tl_auth auth; /* [security]: keys, roles, the ZAP handler (loop thread) */
    tl_backend_kind host_memory; /* whose host memory slice buffers use (tl_host_alloc) */
    const tl_link *link;         /* tomolived --mpi: the other ranks, which hold parts of the rows
                            (gpu/remote.h); NULL: this host alone */
    uint32_t shm_objects;        /* shared-memory objects created: part of each name */
    tl_stats stats;

    /* ingest thread */
    const tl_adapter_ops *adapter; /* the stream format of the ingest socket */
    tl_queue queue;
    pthread_t ingest_thread;
    atomic_bool ingest_stop;
    atomic_int overflow;    /* TL_SETTINGS_OVERFLOW_* (reloadable) */
    char ingest_error[512]; /* bind/connect failure, reported at start-up */
    int ingest_ready;       /* 0 starting, 1 running, -1 failed */
    pthread_mutex_t ingest_mu;
    pthread_cond_t ingest_cv;

    /* engine worker */
    pthread_t worker_thread;
    atomic_bool worker_stop;
    atomic_uint_least64_t worker_beat; /* CLOCK_MONOTONIC ns of its last turn */
    tl_worker_scratch scratch;
    tl_ipc_frames ipc; /* producers' GPU memory and their releases (lock held) */
    tl_bands bands;    /* frames sent in row bands, in assembly (lock held) */
    pthread_mutex_t lock;
    tl_scan scan;
    tl_slices slices;
    tl_tuning tuning;

    /* event loop */
    tl_publisher pub;
    void *control_sock;
    tl_zwatch control_watch;
    tl_proto_decoder *control_dec;
    msgpack_sbuffer reply;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t watchdog_timer, status_timer;
    uv_timer_t heap_timer; /* trims the heap once ingest is idle (heap.h) */
    tl_heap heap;          /* loop thread */
    uint64_t watchdog_usec;
    bool stopping;
} tl_daemon;

/* ingest.c */
int tl_ingest_start(tl_daemon *d, char *err, size_t errlen);
void tl_ingest_stop(tl_daemon *d);

/* worker.c */
int tl_worker_start(tl_daemon *d);
/* Finishes what is in flight and queued (up to deadline_ns, monotonic) and joins. */
void tl_worker_stop(tl_daemon *d, uint64_t deadline_ns);
/* Makes the worker look at the slices again (new subscription, new slice, new parameter). */
void tl_worker_poke(tl_daemon *d);

/* scan.c — all with d->lock held, on the worker thread (or a control command). */
/* Applies a scan, frame or end. Returns whether a frame reached the engine (or was
 * refused as a whole frame): a frame, or the row band that completed one. */
bool tl_scan_apply(tl_daemon *d, tl_item *it);
void tl_scan_close(tl_daemon *d);
/* Sends the releases of frames in GPU memory the engine has finished reading; first waits
 * for the oldest one's read (the worker has nothing else to do) or for all of them (before
 * mappings close). */
typedef enum { TL_RELEASE_NOWAIT, TL_RELEASE_OLDEST, TL_RELEASE_ALL } tl_release_wait;
void tl_scan_releases(tl_daemon *d, tl_release_wait wait);
/* Runs the filtering of frames the engine holds for a batch (tl_engine_flush): after the
 * worker's backlog is applied. */
void tl_scan_flush(tl_daemon *d);
/* Ends the series whose producer of frames in GPU memory went away (once per turn). */
void tl_scan_producer_check(tl_daemon *d);
/* Frames sent in row bands: the assembly set up (at start), and each turn, frames whose
 * bands have not all come in time dropped (counted and logged). */
void tl_scan_bands_init(tl_daemon *d);
void tl_scan_bands_check(tl_daemon *d);
/* Adds a registered slice to the current engine (resolving its size; a box: each of its
 * planes); 0 or -1 with err. */
int tl_scan_attach(tl_daemon *d, tl_slice *sl, char *err, size_t errlen);
/* Takes a slice out of the current engine (every plane of a box); nothing if it is not in. */
void tl_scan_detach(tl_daemon *d, tl_slice *sl);

/* slice_shm.c (worker thread, lock held): prepare creates (or resizes) a slice's
 * shared-memory slots (sl->shm), 0 or -1 (logged, counted, retried after a pause); drop
 * unmaps and unlinks them. */
int tl_slice_shm_prepare(tl_daemon *d, tl_slice *sl);
/* Whether a slice is wanted (lock held): over TCP or by a tap (pinned), and/or through
 * shared memory (a subscriber of shm/<id>/ and slices.shm set). */
bool tl_slice_wanted(tl_daemon *d, const tl_slice *sl, bool *tcp, bool *shm);
/* Whether its slots exist and fit its size (what a successful prepare leaves). */
bool tl_slice_shm_ready(const tl_slice *sl);
void tl_slice_shm_drop(tl_daemon *d, tl_slice *sl);

/* tuning.c — which kernels serve each slice size (gpu/tune.h). init and destroy come with
 * the worker (tl_worker_start, tl_worker_stop); the others want the lock held. */
int tl_tuning_init(tl_daemon *d); /* 0, or -1 out of memory */
void tl_tuning_destroy(tl_daemon *d);
/* Worker thread: resolves the kernel choice of every wanted slice size that the current
 * engine has none for yet (cache, one candidate, timing or the built-in rule, per
 * engine.tune), and runs a queued tune command. A timing goes on on a thread of its own
 * while the built-in rule serves; a later turn switches to its choice. Never waits for it. */
void tl_tuning_turn(tl_daemon *d);
/* The engine went away (tl_scan_close): its sizes are forgotten, a timing under way is
 * left to finish alone. */
void tl_tuning_forget(tl_daemon *d);
/* status: the "kernels" map. */
void tl_tuning_pack_status(tl_daemon *d, msgpack_packer *pk);

#endif
