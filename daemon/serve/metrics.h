/* metrics.h — the daemon's counters, gauges and latency histograms as Prometheus text
 * (exposition format 0.0.4), served at GET /metrics.
 *
 * A pure function of tl_stats (the atomics every thread counts into) and a snapshot of the
 * rest (scan, queue, slices, preview page) that the caller takes on the loop thread, so the
 * text can be checked by a unit test without a daemon. Names follow Prometheus practice:
 * `tomolive_` prefix, base units (seconds, bytes), `_total` for counters, one `# HELP` and
 * `# TYPE` per family.
 *
 * Histograms reuse tl_stats' 200 log-spaced buckets (ratio 2^(1/8)): every 8th bucket
 * bound, 2^k microseconds for k = 6 .. 24 (64 us .. 16.8 s), becomes an `le` bound, and its
 * count is the sum of all the finer buckets up to it — the bounds are exact bucket edges,
 * so the coarse histogram is consistent by construction. `_count` is the sum of the buckets
 * that were read (so it equals the `+Inf` bucket even while other threads add to it);
 * `_sum` is the histogram's nanosecond sum in seconds.
 */
#ifndef TL_METRICS_H
#define TL_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/base/stats.h"

/* What tl_stats does not hold, sampled by the caller. */
typedef struct {
    const char *version;
    double uptime_s;
    /* the open scan; with scan_open false the rest of this group is not written */
    bool scan_open, finished;
    uint64_t series;
    const char *backend, *device; /* as status says them */
    const char *kernel;           /* of the last slice published; NULL or "" = none yet */
    uint32_t window, held, missing;
    uint64_t memory_bytes; /* the engine's allocation (GPU memory with CUDA) */
    double center;
    /* ingest queue */
    uint32_t queue_depth, queue_capacity;
    uint64_t queue_high;
    /* slices */
    int slices_defined, slices_wanted;
    uint64_t subscriptions;
    uint64_t slice_buffers, slice_buffer_bytes; /* the publisher's pool (bufpool.h) */
    /* host memory: the heap in use and freed but kept, its idle trims (heap.h) */
    uint64_t heap_in_use, heap_free, heap_trims;
    /* preview page */
    int preview_clients;
    uint64_t preview_sent, preview_dropped;
    /* HTTP: requests answered 2xx/3xx, answered 4xx/5xx by us, and connections closed before
     * any request was routed (health-check connects, TLS hellos, requests libwebsockets
     * itself refused as malformed or too large) */
    uint64_t http_ok, http_errors, http_unrouted;
    /* requests and WebSocket handshakes refused for their Origin, and for a missing or wrong
     * operator token (daemon/serve/http.h) */
    uint64_t http_refused_origin, http_refused_token;
} tl_metrics_state;

/* The `le` bounds of the histograms: TL_METRICS_LE bounds, bound k is tl_hist_bound of
 * bucket tl_metrics_le_bucket(k). */
#define TL_METRICS_LE 19
int tl_metrics_le_bucket(int k);

/* Writes the whole text into buf like snprintf: at most cap bytes including a NUL, and
 * returns the length of the whole text, so a result >= cap means "call again with a
 * buffer of result + 1 bytes". */
size_t tl_metrics_write(char *buf, size_t cap, const tl_stats *st, const tl_metrics_state *s);

#endif
