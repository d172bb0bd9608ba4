/* daemon.h — tomolived's state, and which thread owns what.
 *
 * Three threads share it:
 *   - the ingest thread (ingest.c) owns the PULL socket: it receives, decodes and checks
 *     messages and queues them with their payloads (zero-copy) — nothing else can slow it;
 *   - the engine worker (worker.c, scan.c) owns the engine: it applies scans and frames,
 *     decides which slices are due and reconstructs them;
 *   - the event loop (main.c) owns the control ROUTER and the slices XPUB sockets, signals,
 *     timers and systemd notifications, the HTTP server (http.c: preview page, /metrics)
 *     and the RECAST3D viewer link (recast3d.c); the last two see published slices through
 *     the publisher's taps and act through control commands (tl_commands_run).
 * `lock` guards the scan, its engine and the slice registry: the worker holds it per frame
 * and per reconstruction, control commands hold it briefly. Counters are atomics (stats.h);
 * the queue and the publisher's outbox have locks of their own.
 */
#ifndef TL_DAEMON_H
#define TL_DAEMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/adapter.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "daemon/publisher.h"
#include "daemon/queue.h"
#include "daemon/slices.h"
#include "daemon/stats.h"
#include "daemon/zwatch.h"
#include "gpu/engine.h"
#include "protocol/protocol.h"

/* The worker's per-turn arrays, one entry per slice it may reconstruct at once. */
typedef struct {
    int cap;
    int *ids, *due;
    tl_slicebuf **bufs;
    float **outs;
    tl_slice_info *info;
} tl_worker_scratch;

/* The current scan. */
typedef struct {
    bool open;                  /* an engine exists */
    bool finished;              /* its end has arrived */
    uint64_t series;
    tl_proto_scan msg;          /* as received (msg.filter is not valid: see filter) */
    char filter[33];
    tl_engine *engine;
    bool was_complete;          /* the window was complete at the last frame */
    uint64_t projections;       /* accepted in this scan */
    char last_error[512];       /* why the last scan was refused, for status */
} tl_scan;

typedef struct tl_daemon {
    tl_config cfg;
    const char *config_path;    /* NULL: defaults only */
    char **overrides;           /* "key=value" from the command line, re-applied on reload */
    int noverrides;
    uint64_t started_ns;        /* CLOCK_MONOTONIC */
    tl_ratelimit reject_rl[TL_REJ_COUNT]; /* one log limiter per rejection reason */

    void *zctx;
    uv_loop_t loop;
    tl_stats stats;

    /* ingest thread */
    const tl_adapter_ops *adapter; /* the stream format of the ingest socket */
    tl_queue queue;
    pthread_t ingest_thread;
    atomic_bool ingest_stop;
    atomic_int overflow;        /* TL_CONFIG_OVERFLOW_* (reloadable) */
    char ingest_error[512];     /* bind/connect failure, reported at start-up */
    int ingest_ready;           /* 0 starting, 1 running, -1 failed */
    pthread_mutex_t ingest_mu;
    pthread_cond_t ingest_cv;

    /* engine worker */
    pthread_t worker_thread;
    atomic_bool worker_stop;
    atomic_uint_least64_t worker_beat; /* CLOCK_MONOTONIC ns of its last turn */
    tl_worker_scratch scratch;
    pthread_mutex_t lock;
    tl_scan scan;
    tl_slices slices;

    /* event loop */
    tl_publisher pub;
    void *control_sock;
    tl_zwatch control_watch;
    tl_proto_decoder *control_dec;
    msgpack_sbuffer reply;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t watchdog_timer, status_timer;
    uint64_t watchdog_usec;
    bool stopping;
} tl_daemon;

uint64_t tl_now_ns(void);       /* CLOCK_MONOTONIC */
uint64_t tl_realtime_ns(void);  /* CLOCK_REALTIME */

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
void tl_scan_apply(tl_daemon *d, tl_item *it);
void tl_scan_close(tl_daemon *d);
/* Adds a registered slice to the current engine (resolving its size); 0 or -1 with err. */
int tl_scan_attach(tl_daemon *d, tl_slice *sl, char *err, size_t errlen);

/* control.c — loop thread */
int tl_control_open(tl_daemon *d, char *err, size_t errlen);
void tl_control_close(tl_daemon *d);

/* commands.c — one control request; packs the whole reply with pk. */
void tl_commands_run(tl_daemon *d, const tl_proto_req *req, msgpack_packer *pk);

/* The policy a slice follows when its request gave none. */
tl_update_policy tl_default_policy(const tl_config *c);

#endif
