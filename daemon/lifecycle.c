/* lifecycle.c — a daemon's life: configuration, start-up, reload and shutdown
 * (lifecycle.h). main.c parses the command line around it; the HTTP fuzzer
 * (tests/fuzz/fuzz_http.c) runs a whole daemon in-process through the same calls.
 *
 * Start-up is all or nothing: configuration, the requested backend, and the three sockets
 * must all be there before systemd hears READY=1; anything missing is a loud error and a
 * non-zero exit, never a silent fallback. The loop then serves control requests, publishes
 * slices, reports STATUS= and pets the watchdog only while the engine worker is alive.
 * SIGHUP reloads what can change at run time and says what needs a restart; SIGTERM and
 * SIGINT stop ingest, let the worker finish what is in flight, publish, and exit 0 within
 * two seconds.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/core/daemon.h"
#include "daemon/lifecycle.h"
#include "daemon/serve/commands.h"
#include "daemon/serve/control.h"
#include "daemon/serve/http.h"
#include "daemon/base/notify.h"
#include "daemon/serve/recast3d.h"

#define TL_STOP_BUDGET_NS 1500000000ull /* of the 2 s allowed for SIGTERM */
#define TL_LINGER_MS 300

/* Defaults, the file, then the command-line overrides, then the cross-key checks. */
int tl_daemon_load_config(tl_daemon *d, tl_settings *c, char *err, size_t errlen)
{
    tl_settings_defaults(c);
    if (d->config_path && tl_settings_load(c, d->config_path, err, errlen) != 0)
        return -1;
    for (int i = 0; i < d->noverrides; i++) {
        char kv[512];
        snprintf(kv, sizeof kv, "%s", d->overrides[i]);
        char *eq = strchr(kv, '=');
        if (!eq) {
            snprintf(err, errlen, "--set %.200s: expected KEY=VALUE", kv);
            return -1;
        }
        *eq = 0;
        if (tl_settings_set(c, kv, eq + 1, err, errlen) != 0)
            return -1;
    }
    return tl_settings_check(c, err, errlen);
}

/* ---- status, watchdog ---------------------------------------------------------------------- */

static void status_line(tl_daemon *d, char *buf, size_t n)
{
    pthread_mutex_lock(&d->lock);
    if (d->scan.open) {
        tl_engine_state st;
        tl_engine_get_state(d->scan.engine, &st);
        snprintf(buf, n,
                 "scan %llu%s: %u/%u projections, %d slices, %llu frames, %llu slices published",
                 (unsigned long long)d->scan.series, d->scan.finished ? " (ended)" : "", st.held,
                 st.window, d->slices.n, (unsigned long long)tl_stats_get(&d->stats.messages),
                 (unsigned long long)tl_stats_get(&d->stats.slices_published));
    } else {
        snprintf(buf, n, "waiting for a scan, %d slices defined", d->slices.n);
    }
    pthread_mutex_unlock(&d->lock);
}

static void on_status(uv_timer_t *t)
{
    tl_daemon *d = t->data;
    char line[256];
    status_line(d, line, sizeof line);
    tl_notify_status(line);
    uint64_t rejected = 0;
    for (int i = 0; i < TL_REJ_COUNT; i++)
        rejected += tl_stats_get(&d->stats.rejected[i]);
    tl_log(TL_LOG_DEBUG, "status", "summary=%s rejected=%llu queue=%u", tl_logq(line),
           (unsigned long long)rejected, tl_queue_depth(&d->queue));
}

/* Pets the watchdog only while the worker turns: a loop that is alive around a stuck
 * engine is still a stuck daemon. Timing kernels (tuning.c) keeps a turn going for up to
 * engine.tune_budget and more: that is not a stall, until its own deadline. */
static void on_watchdog(uv_timer_t *t)
{
    tl_daemon *d = t->data;
    uint64_t beat = atomic_load(&d->worker_beat), now = tl_clock_ns();
    if (now - beat < d->watchdog_usec * 1000ull || now < atomic_load(&d->tuning.busy_until))
        tl_notify_watchdog();
    else
        tl_log(TL_LOG_ERROR, "worker_stalled", "seconds=%.1f", (tl_clock_ns() - beat) / 1e9);
}

static void on_heap(uv_timer_t *t)
{
    tl_daemon *d = t->data;
    if (tl_heap_idle_check(&d->heap, tl_stats_get(&d->stats.messages), tl_clock_ns()))
        tl_log(TL_LOG_DEBUG, "heap_trimmed", "trims=%llu", (unsigned long long)d->heap.trims);
}

static void start_status_timer(tl_daemon *d)
{
    uint64_t ms = (uint64_t)(d->cfg.status_interval * 1000);
    uv_timer_start(&d->status_timer, on_status, ms, ms);
}

/* ---- reload -------------------------------------------------------------------------------- */

static void report_change(const char *key, bool reloadable, void *ctx)
{
    if (reloadable)
        tl_log(TL_LOG_INFO, "config_changed", "key=%s", key);
    else
        tl_log(TL_LOG_WARN, "config_needs_restart", "key=%s", key);
}

static void reload(tl_daemon *d)
{
    tl_notify_reloading();
    tl_auth_reload(&d->auth); /* security.clients: keys added or removed */
    tl_settings fresh;
    char err[512];
    if (tl_daemon_load_config(d, &fresh, err, sizeof err) != 0) {
        tl_log(TL_LOG_ERROR, "config_reload_failed", "error=%s", tl_logq(err));
    } else {
        tl_settings_diff(&d->cfg, &fresh, report_change, NULL);
        pthread_mutex_lock(&d->lock);
        int n = tl_settings_apply_reloadable(&d->cfg, &fresh);
        tl_update_policy p = tl_default_policy(&d->cfg);
        for (int i = 0; i < d->slices.n; i++)
            if (!d->slices.v[i].policy_given)
                d->slices.v[i].policy = p;
        pthread_mutex_unlock(&d->lock);
        tl_log_set_level(d->cfg.log_level);
        atomic_store(&d->overflow, d->cfg.ingest_overflow);
        start_status_timer(d);
        tl_log(TL_LOG_INFO, "config_reloaded", "path=%s applied=%d",
               tl_logq(d->config_path ? d->config_path : "(defaults)"), n);
    }
    tl_notify_ready();
}

/* ---- shutdown ------------------------------------------------------------------------------ */

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void tl_daemon_shutdown(tl_daemon *d)
{
    if (d->stopping)
        return;
    d->stopping = true;
    uint64_t t0 = tl_clock_ns();
    tl_notify_stopping();
    tl_log(TL_LOG_INFO, "stopping", "queued=%u", tl_queue_depth(&d->queue));
    tl_ingest_stop(d);                         /* no new frames */
    tl_worker_stop(d, t0 + TL_STOP_BUDGET_NS); /* in-flight and queued work, bounded */
    uint32_t left = tl_queue_depth(&d->queue);
    if (left)
        tl_log(TL_LOG_WARN, "frames_discarded_at_stop", "count=%u", left);
    tl_http_stop(d);                           /* before the publisher: it taps it */
    tl_recast3d_stop(d);                       /* before the publisher: it taps it */
    tl_publisher_close(&d->pub, TL_LINGER_MS); /* sends what the worker published */
    tl_control_close(d);
    tl_auth_close(&d->auth); /* after every socket it admits to */
    close_handle((uv_handle_t *)&d->sigterm);
    close_handle((uv_handle_t *)&d->sigint);
    close_handle((uv_handle_t *)&d->sighup);
    close_handle((uv_handle_t *)&d->status_timer);
    close_handle((uv_handle_t *)&d->watchdog_timer);
    close_handle((uv_handle_t *)&d->heap_timer);
}

static void on_signal(uv_signal_t *h, int signum)
{
    tl_daemon *d = h->data;
    if (signum == SIGHUP)
        reload(d);
    else
        tl_daemon_shutdown(d);
}

static void on_subscriptions(void *ctx)
{
    tl_worker_poke(ctx);
}

/* ---- start-up ------------------------------------------------------------------------------ */

int tl_daemon_start(tl_daemon *d, char *err, size_t errlen)
{
    const tl_settings *c = &d->cfg;
    tl_backend_kind b;
    char why[256];
    tl_backend_parse(tl_settings_enum_name("daemon.backend", c->backend), &b);
    if (b != TL_BACKEND_AUTO && !tl_backend_available(b, why, sizeof why)) {
        snprintf(err, errlen, "backend %s requested but not usable: %s", tl_backend_name(b), why);
        return -1;
    }
    if (b == TL_BACKEND_AUTO)
        b = tl_backend_available(TL_BACKEND_CUDA, NULL, 0) ? TL_BACKEND_CUDA : TL_BACKEND_CPU;
    d->zctx = zmq_ctx_new();
    if (!d->zctx || zmq_ctx_set(d->zctx, ZMQ_IO_THREADS, c->io_threads) != 0) {
        snprintf(err, errlen, "cannot create the ZeroMQ context");
        return -1;
    }
    if (tl_queue_init(&d->queue, (uint32_t)c->ingest_queue) != 0) {
        snprintf(err, errlen, "out of memory for the ingest queue");
        return -1;
    }
    atomic_store(&d->overflow, c->ingest_overflow);
    d->adapter = tl_adapter_find(tl_settings_enum_name("ingest.format", c->ingest_format));
    if (!d->adapter) {
        snprintf(err, errlen, "no adapter for ingest format %s",
                 tl_settings_enum_name("ingest.format", c->ingest_format));
        return -1;
    }
    /* slice buffers: pinned where the GPU fills them */
    d->host_memory = TL_BACKEND_CPU;
    tl_backend_parse(tl_settings_enum_name("daemon.backend", c->backend), &d->host_memory);
    tl_scan_bands_init(d);
    tl_publisher_opts pub = {.endpoint = c->slices_endpoint,
                             .sndhwm = c->slices_sndhwm,
                             .stall_ms = c->slices_stall_ms,
                             .max_slices = c->slices_max,
                             .memory = d->host_memory,
                             .auth = &d->auth};
    /* [security]: keys and clients read, the ZAP handler bound before any socket (auth.h) */
    if (tl_auth_open(&d->auth, c, err, errlen) != 0 ||
        tl_auth_serve(&d->auth, &d->loop, d->zctx, err, errlen) != 0)
        return -1;
    if (tl_publisher_open(&d->pub, &d->loop, &pub, &d->stats, on_subscriptions, d, err, errlen) !=
            0 ||
        tl_control_open(d, err, errlen) != 0 || tl_ingest_start(d, err, errlen) != 0 ||
        tl_auth_watch(&d->auth, &d->loop, d->zctx, TL_AUTH_INGEST, err, errlen) != 0 ||
        tl_http_start(d, err, errlen) != 0 || tl_recast3d_start(d, err, errlen) != 0)
        return -1;
    if (tl_worker_start(d) != 0) {
        snprintf(err, errlen, "cannot start the engine worker");
        return -1;
    }
    uv_signal_t *sig[] = {&d->sigterm, &d->sigint, &d->sighup};
    int num[] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&d->loop, sig[i]);
        sig[i]->data = d;
        uv_signal_start(sig[i], on_signal, num[i]);
    }
    uv_timer_init(&d->loop, &d->status_timer);
    d->status_timer.data = d;
    start_status_timer(d);
    uv_timer_init(&d->loop, &d->heap_timer);
    d->heap_timer.data = d;
    uv_timer_start(&d->heap_timer, on_heap, TL_HEAP_CHECK_MS, TL_HEAP_CHECK_MS);
    uv_timer_init(&d->loop, &d->watchdog_timer);
    d->watchdog_timer.data = d;
    d->watchdog_usec = tl_notify_watchdog_usec();
    if (d->watchdog_usec) /* every half interval, as sd_watchdog_enabled(3) advises */
        uv_timer_start(&d->watchdog_timer, on_watchdog, d->watchdog_usec / 2000,
                       d->watchdog_usec / 2000);
    tl_log(TL_LOG_INFO, "started",
           "version=%s backend=%s ingest=%s control=%s slices=%s queue=%d overflow=%s "
           "watchdog_s=%.1f curve=%s",
           PACKAGE_VERSION, tl_backend_name(b), tl_logq(c->ingest_endpoint),
           tl_logq(c->control_endpoint), tl_logq(c->slices_endpoint), c->ingest_queue,
           tl_settings_enum_name("ingest.overflow", c->ingest_overflow), d->watchdog_usec / 1e6,
           c->curve ? (c->plain[0] ? "on_except_plain" : "on") : "off");
    char line[256];
    status_line(d, line, sizeof line);
    tl_notify_status(line);
    tl_notify_ready();
    return 0;
}

void tl_daemon_init(tl_daemon *d)
{
    d->started_ns = tl_clock_ns();
    for (int i = 0; i < TL_REJ_COUNT; i++)
        pthread_mutex_init(&d->reject_rl[i].lock, NULL);
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->ingest_mu, NULL);
    pthread_cond_init(&d->ingest_cv, NULL);
    tl_slices_init(&d->slices);
    uv_loop_init(&d->loop);
}

void tl_daemon_destroy(tl_daemon *d)
{
    tl_queue_destroy(&d->queue); /* frames the stop budget left unprocessed */
    zmq_ctx_term(d->zctx);
    tl_publisher_destroy(&d->pub); /* waits for the linger of the last slices */
    tl_scan_close(d);
    tl_bands_destroy(&d->bands);
    for (int i = 0; i < d->slices.n; i++)
        tl_slice_shm_drop(d, &d->slices.v[i]);
    tl_slices_destroy(&d->slices);
    uv_loop_close(&d->loop);
    tl_log(TL_LOG_INFO, "stopped", "frames=%llu slices_published=%llu",
           (unsigned long long)tl_stats_get(&d->stats.messages),
           (unsigned long long)tl_stats_get(&d->stats.slices_published));
}
