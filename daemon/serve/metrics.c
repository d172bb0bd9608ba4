/* metrics.c — see metrics.h. */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "daemon/serve/metrics.h"
#include "protocol/protocol.h"

/* snprintf that keeps counting past the end of the buffer. */
typedef struct {
    char *buf;
    size_t cap, len;
} out;

static void __attribute__((format(printf, 2, 3))) put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

/* A label value: backslash, double quote and newline escaped (the format's three). */
static void put_label(out *o, const char *v)
{
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '\\')
            put(o, "\\\\");
        else if (*p == '"')
            put(o, "\\\"");
        else if (*p == '\n')
            put(o, "\\n");
        else
            put(o, "%c", *p);
    }
}

static void family(out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(out *o, const char *name, const char *help, const tl_counter *c)
{
    family(o, name, "counter", help);
    put(o, "%s %llu\n", name, (unsigned long long)tl_stats_get(c));
}

static void gauge(out *o, const char *name, const char *help, double v)
{
    family(o, name, "gauge", help);
    put(o, "%s %.17g\n", name, v);
}

int tl_metrics_le_bucket(int k)
{
    /* tl_hist_bound(8 m - 1) = 2^m us, m = k + 6. The last bucket (199) also holds every
     * larger value, so its bound is never an `le`: 2^24 us (bucket 191) is the last. */
    return 8 * (k + 6) - 1;
}

/* One histogram's samples with label `label="value"`. */
static void histogram(out *o, const char *name, const char *label, const char *value,
                      const tl_hist *h)
{
    uint64_t cum = 0;
    int next = 0;
    for (int k = 0; k < TL_METRICS_LE; k++) {
        int last = tl_metrics_le_bucket(k);
        for (; next <= last; next++)
            cum += atomic_load_explicit(&h->bucket[next], memory_order_relaxed);
        put(o, "%s_bucket{%s=\"%s\",le=\"%.9g\"} %llu\n", name, label, value, tl_hist_bound(last),
            (unsigned long long)cum);
    }
    for (; next < TL_HIST_BUCKETS; next++)
        cum += atomic_load_explicit(&h->bucket[next], memory_order_relaxed);
    put(o, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %llu\n", name, label, value, (unsigned long long)cum);
    put(o, "%s_sum{%s=\"%s\"} %.9f\n", name, label, value,
        atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9);
    put(o, "%s_count{%s=\"%s\"} %llu\n", name, label, value, (unsigned long long)cum);
}

static void frames(out *o, const tl_stats *st)
{
    counter(o, "tomolive_ingest_messages_total", "Messages received on the ingest socket.",
            &st->messages);
    counter(o, "tomolive_ingest_bytes_total",
            "Bytes received on the ingest socket (headers and payloads).", &st->bytes);
    family(o, "tomolive_frames_accepted_total", "counter", "Frames used, by kind.");
    static const char *const kinds[3] = {"dark", "flat", "proj"};
    for (int i = 0; i < 3; i++)
        put(o, "tomolive_frames_accepted_total{kind=\"%s\"} %llu\n", kinds[i],
            (unsigned long long)tl_stats_get(&st->accepted[i]));
    family(o, "tomolive_frames_rejected_total", "counter",
           "Ingest messages not used, by reason (protocol/PROTOCOL.md, status.frames.rejected).");
    for (int i = 0; i < TL_REJ_COUNT; i++)
        put(o, "tomolive_frames_rejected_total{reason=\"%s\"} %llu\n",
            tl_reject_name((tl_reject)i), (unsigned long long)tl_stats_get(&st->rejected[i]));
    family(o, "tomolive_frames_rejected_protocol_total", "counter",
           "Malformed ingest messages, by protocol error (only errors that occurred).");
    for (int i = 0; i < 64; i++)
        if (tl_stats_get(&st->rejected_proto[i]) > 0)
            put(o, "tomolive_frames_rejected_protocol_total{error=\"%s\"} %llu\n",
                tl_proto_err_name((tl_proto_err)i),
                (unsigned long long)tl_stats_get(&st->rejected_proto[i]));
    counter(o, "tomolive_scans_total", "Scans started.", &st->scans);
    counter(o, "tomolive_gpu_frames_total", "Frames read from producers' GPU memory (CUDA IPC).",
            &st->ipc_frames);
    counter(o, "tomolive_gpu_buffers_opened_total", "Producer GPU allocations opened.",
            &st->ipc_opened);
    counter(o, "tomolive_gpu_releases_total", "Release messages sent to producers.",
            &st->ipc_releases);
    counter(o, "tomolive_gpu_release_failed_total", "Release messages that could not be sent.",
            &st->ipc_release_failed);
    counter(o, "tomolive_gpu_producers_lost_total",
            "Series ended because their producer of GPU frames went away.",
            &st->ipc_producers_lost);
}

static void scan(out *o, const tl_metrics_state *s)
{
    gauge(o, "tomolive_scan_open", "1 while a scan is open (an engine exists), else 0.",
          s->scan_open);
    if (!s->scan_open)
        return;
    family(o, "tomolive_scan_info", "gauge",
           "The open scan: series, backend, device and the kernel of the last slice published.");
    put(o, "tomolive_scan_info{series=\"%llu\",backend=\"", (unsigned long long)s->series);
    put_label(o, s->backend);
    put(o, "\",device=\"");
    put_label(o, s->device);
    put(o, "\",kernel=\"");
    put_label(o, s->kernel);
    put(o, "\"} 1\n");
    gauge(o, "tomolive_scan_finished", "1 once the open scan's end has arrived.", s->finished);
    gauge(o, "tomolive_window_projections", "Projections in the rolling window (N).", s->window);
    gauge(o, "tomolive_window_held_projections", "Projections of the window held.", s->held);
    gauge(o, "tomolive_window_missing_projections", "Projections of the window not (yet) arrived.",
          s->missing);
    gauge(o, "tomolive_window_fill_ratio", "Held / window.",
          s->window ? (double)s->held / s->window : 0.0);
    family(o, "tomolive_engine_memory_bytes", "gauge",
           "Memory the engine allocated for the scan (GPU memory on the cuda backend).");
    put(o, "tomolive_engine_memory_bytes{backend=\"");
    put_label(o, s->backend);
    put(o, "\"} %llu\n", (unsigned long long)s->memory_bytes);
    gauge(o, "tomolive_center_column", "Detector column of the rotation axis (set_param center).",
          s->center);
}

size_t tl_metrics_write(char *buf, size_t cap, const tl_stats *st, const tl_metrics_state *s)
{
    out o = {buf, cap, 0};
    if (cap)
        buf[0] = 0;
    family(&o, "tomolive_build_info", "gauge", "The daemon's version.");
    put(&o, "tomolive_build_info{version=\"");
    put_label(&o, s->version);
    put(&o, "\"} 1\n");
    gauge(&o, "tomolive_uptime_seconds", "Seconds since the daemon started.", s->uptime_s);
    frames(&o, st);
    gauge(&o, "tomolive_queue_depth", "Frames waiting between the ingest thread and the engine.",
          s->queue_depth);
    gauge(&o, "tomolive_queue_capacity", "Size of the ingest queue (ingest.queue).",
          s->queue_capacity);
    gauge(&o, "tomolive_queue_high_water", "Deepest the ingest queue has been.",
          (double)s->queue_high);
    scan(&o, s);
    gauge(&o, "tomolive_slices_defined", "Slices defined (set_slice).", s->slices_defined);
    gauge(&o, "tomolive_slices_wanted", "Slices pinned or subscribed to.", s->slices_wanted);
    gauge(&o, "tomolive_subscriptions",
          "Distinct topic prefixes subscribed to on the slices socket.", (double)s->subscriptions);
    gauge(&o, "tomolive_slice_buffers", "Slice buffers in host memory, kept or in use.",
          (double)s->slice_buffers);
    gauge(&o, "tomolive_slice_buffer_bytes", "Pixel bytes of the slice buffers.",
          (double)s->slice_buffer_bytes);
    gauge(&o, "tomolive_heap_in_use_bytes", "Host heap handed out by malloc.",
          (double)s->heap_in_use);
    gauge(&o, "tomolive_heap_free_bytes", "Host heap freed but kept by the allocator.",
          (double)s->heap_free);
    family(&o, "tomolive_heap_trims_total", "counter",
           "Times the free heap was given back to the system (ingest idle for 1 s).");
    put(&o, "tomolive_heap_trims_total %llu\n", (unsigned long long)s->heap_trims);
    counter(&o, "tomolive_slices_computed_total", "Slices reconstructed.", &st->slices_computed);
    counter(&o, "tomolive_slices_failed_total",
            "Slice read-outs the engine failed (logged as reconstruction_failed).",
            &st->slices_failed);
    counter(&o, "tomolive_slice_iterations_total", "Iterations run by iterative slices.",
            &st->slice_iterations);
    counter(&o, "tomolive_slices_published_total", "Slices sent on the slices socket.",
            &st->slices_published);
    counter(&o, "tomolive_slices_superseded_total",
            "Slices replaced by a newer one of the same id before they were sent.",
            &st->slices_superseded);
    counter(&o, "tomolive_subscriber_stalls_total",
            "Slices sent past a subscriber whose queue stayed full for slices.stall_ms.",
            &st->subscriber_stalls);
    counter(&o, "tomolive_slices_resent_total",
            "Slices sent again on request (resend): the newest of each, and its final.",
            &st->slices_resent);
    counter(&o, "tomolive_finals_lost_total",
            "Final slices replaced by a later final before they could be sent.", &st->finals_lost);
    counter(&o, "tomolive_slices_shm_total",
            "Slices published through shared memory (topic shm/<id>/).", &st->slices_shm);
    counter(&o, "tomolive_shm_failed_total",
            "Times a slice's shared-memory slots could not be created.", &st->shm_failed);
    counter(&o, "tomolive_requests_total", "Control requests (the preview page's included).",
            &st->requests);
    counter(&o, "tomolive_request_errors_total", "Control requests answered with an error.",
            &st->request_errors);
    gauge(&o, "tomolive_preview_clients", "Preview pages connected (WebSocket).",
          s->preview_clients);
    family(&o, "tomolive_preview_frames_total", "counter",
           "Preview images for pages: sent, or dropped because a newer one replaced them first.");
    put(&o, "tomolive_preview_frames_total{outcome=\"sent\"} %llu\n",
        (unsigned long long)s->preview_sent);
    put(&o, "tomolive_preview_frames_total{outcome=\"dropped\"} %llu\n",
        (unsigned long long)s->preview_dropped);
    family(&o, "tomolive_http_requests_total", "counter",
           "HTTP requests: answered (ok), answered with an error status (error), or connections "
           "closed before a request was routed (unrouted: bare connects, TLS hellos, requests "
           "libwebsockets refused as malformed or too large).");
    put(&o, "tomolive_http_requests_total{outcome=\"ok\"} %llu\n", (unsigned long long)s->http_ok);
    put(&o, "tomolive_http_requests_total{outcome=\"error\"} %llu\n",
        (unsigned long long)s->http_errors);
    put(&o, "tomolive_http_requests_total{outcome=\"unrouted\"} %llu\n",
        (unsigned long long)s->http_unrouted);
    family(&o, "tomolive_http_refused_total", "counter",
           "HTTP requests, WebSocket handshakes and page actions refused: for a foreign Origin "
           "(origin), or for a missing or wrong operator token (token).");
    put(&o, "tomolive_http_refused_total{reason=\"origin\"} %llu\n",
        (unsigned long long)s->http_refused_origin);
    put(&o, "tomolive_http_refused_total{reason=\"token\"} %llu\n",
        (unsigned long long)s->http_refused_token);

    family(&o, "tomolive_stage_latency_seconds", "histogram",
           "Time per stage: queue (frame received to taken by the engine), submit "
           "(preprocess, filter, store one frame), reconstruct (one batch of slices), transport "
           "(the camera's t_acq to received).");
    histogram(&o, "tomolive_stage_latency_seconds", "stage", "queue", &st->latency[TL_LAT_QUEUE]);
    histogram(&o, "tomolive_stage_latency_seconds", "stage", "submit",
              &st->latency[TL_LAT_SUBMIT]);
    histogram(&o, "tomolive_stage_latency_seconds", "stage", "reconstruct",
              &st->latency[TL_LAT_RECON]);
    histogram(&o, "tomolive_stage_latency_seconds", "stage", "transport",
              &st->latency[TL_LAT_ACQ_TO_RECV]);
    family(&o, "tomolive_correction_latency_seconds", "histogram",
           "Time per frame of each per-frame correction (GPU time on the GPU): dezinger, "
           "paganin; rings: each update of the ring estimate. Empty without corrections.");
    histogram(&o, "tomolive_correction_latency_seconds", "stage", "dezinger",
              &st->latency[TL_LAT_DEZINGER]);
    histogram(&o, "tomolive_correction_latency_seconds", "stage", "paganin",
              &st->latency[TL_LAT_PAGANIN]);
    histogram(&o, "tomolive_correction_latency_seconds", "stage", "rings",
              &st->latency[TL_LAT_RINGS]);
    family(&o, "tomolive_slice_latency_seconds", "histogram",
           "Newest frame in a slice to the slice published: since the daemon received it "
           "(received) or since the camera acquired it (acquired, t_acq).");
    histogram(&o, "tomolive_slice_latency_seconds", "since", "received",
              &st->latency[TL_LAT_FRAME_TO_PUB]);
    histogram(&o, "tomolive_slice_latency_seconds", "since", "acquired",
              &st->latency[TL_LAT_ACQ_TO_PUB]);
    return o.len;
}
