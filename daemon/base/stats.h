/* stats.h — the daemon's counters and latency histograms, updated from any thread.
 *
 * Counters are relaxed atomics: the ingest thread, the engine worker and the event loop all
 * count without locks, and a status request reads a snapshot that is consistent enough for
 * monitoring. Histograms have fixed log-spaced buckets (ratio 2^(1/8), ~9 % wide, from 1 us
 * to ~17 s), so percentiles are read from the bucket counts; the exact maximum is kept too.
 *
 *   tl_stats_count(&st->rejected[TL_REJ_STALE]);
 *   tl_hist_add(&st->latency[TL_LAT_PUBLISH], seconds);
 *   double p99 = tl_hist_quantile(&st->latency[TL_LAT_PUBLISH], 0.99);
 */
#ifndef TL_STATS_H
#define TL_STATS_H

#include <stdatomic.h>
#include <stdint.h>

/* Why a message on the ingest socket was not used. */
typedef enum {
    TL_REJ_PROTOCOL = 0, /* malformed message (by protocol error code in rejected_proto) */
    TL_REJ_NO_SCAN,      /* frame or end with no scan open */
    TL_REJ_SERIES,       /* frame or end for a series other than the current one */
    TL_REJ_FINISHED,     /* frame for a series whose end has arrived */
    TL_REJ_SHAPE,        /* frame shape or dtype differs from the scan's */
    TL_REJ_ANGLE,        /* projection without an angle, and the scan has no schedule */
    TL_REJ_STALE,        /* projection older than the window */
    TL_REJ_DUPLICATE,    /* projection index already in the window */
    TL_REJ_QUEUE_FULL,   /* dropped: the engine fell behind (ingest.overflow = drop) */
    TL_REJ_SCAN,         /* scan refused (unsupported geometry, bad filter, no memory, ...) */
    TL_REJ_ENGINE,       /* the engine failed on a valid frame */
    TL_REJ_GPU_MEMORY,   /* a frame in GPU memory that cannot be read: its handle does not
                            open, its GPU is not visible, or it lies outside the allocation */
    TL_REJ_BAND,         /* a row band that differs from its frame's first band or overlaps
                            rows received (PROTOCOL.md §8.2), or no memory to assemble it */
    TL_REJ_INCOMPLETE,   /* dropped: a frame sent in bands whose bands did not all come */
    TL_REJ_COUNT
} tl_reject;
const char *tl_reject_name(tl_reject r);

/* Latency stages, in seconds. */
typedef enum {
    TL_LAT_QUEUE = 0,    /* frame received -> taken by the engine worker */
    TL_LAT_SUBMIT,       /* preprocessing + filtering + store of one frame */
    TL_LAT_RECON,        /* back projection of one batch of slices */
    TL_LAT_FRAME_TO_PUB, /* newest frame in a slice received -> slice published */
    TL_LAT_ACQ_TO_PUB,   /* newest frame's t_acq -> slice published */
    TL_LAT_ACQ_TO_RECV,  /* a frame's t_acq -> received: the camera's link to the daemon */
    TL_LAT_DEZINGER,     /* per-frame corrections (ARCHITECTURE.md §3.11), each on its */
    TL_LAT_PAGANIN,      /* device: GPU time by CUDA events, CPU time on the CPU; rings: */
    TL_LAT_RINGS,        /* each update of the estimate (every window/16 frames) */
    TL_LAT_COUNT
} tl_latency;
const char *tl_latency_name(tl_latency l);

#define TL_HIST_BUCKETS 200
#define TL_HIST_MIN 1e-6

typedef struct {
    atomic_uint_least64_t bucket[TL_HIST_BUCKETS];
    atomic_uint_least64_t count;
    atomic_uint_least64_t sum_ns;
    atomic_uint_least64_t max_ns;
} tl_hist;

void tl_hist_add(tl_hist *h, double seconds);
/* Upper bound of the bucket holding quantile q (0..1); 0 when empty. */
double tl_hist_quantile(const tl_hist *h, double q);
double tl_hist_max(const tl_hist *h);
uint64_t tl_hist_count(const tl_hist *h);
/* The upper bound of bucket i, in seconds. */
double tl_hist_bound(int i);

typedef atomic_uint_least64_t tl_counter;

typedef struct {
    tl_counter messages;    /* ingest messages received */
    tl_counter bytes;       /* ingest bytes received (headers + payloads) */
    tl_counter accepted[3]; /* by frame kind: dark, flat, proj */
    tl_counter rejected[TL_REJ_COUNT];
    tl_counter rejected_proto[64]; /* TL_REJ_PROTOCOL by tl_proto_err code */
    tl_counter scans;              /* scans started */
    tl_counter queue_high;         /* queue high-water mark */
    tl_counter requests, request_errors;
    tl_counter slices_computed, slices_published, slices_superseded;
    tl_counter slices_failed;    /* read-outs the engine failed (logged, not published) */
    tl_counter slice_iterations; /* iterations run by iterative slices */
    /* publisher.h: stalls (a slice sent past a queue full for slices.stall_ms); slices sent
     * again on request (resend); finals lost (a later final replaced one still waiting) */
    tl_counter subscriber_stalls, slices_resent, finals_lost;
    tl_counter slices_shm, shm_failed; /* published through shared memory; slots not created */
    tl_counter ipc_frames;             /* frames read from producers' GPU memory (CUDA IPC) */
    tl_counter ipc_opened;             /* producer allocations opened */
    tl_counter ipc_releases, ipc_release_failed; /* release messages sent; not sent */
    tl_counter ipc_producers_lost; /* series ended because their producer went away */
    tl_counter tune_runs;          /* kernel timings run (daemon/tuning.c) */
    tl_counter tune_failures;      /* cache unreadable, timing or cache write failed, ... */
    tl_hist latency[TL_LAT_COUNT];
} tl_stats;

static inline void tl_stats_count(tl_counter *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}
static inline void tl_stats_add(tl_counter *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}
static inline uint64_t tl_stats_get(const tl_counter *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}
/* Raises *c to v if v is larger. */
void tl_stats_max(tl_counter *c, uint64_t v);

#endif
