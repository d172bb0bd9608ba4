/* tuning.c — which back-projection kernels serve each slice size (gpu/tune.h).
 *
 * The first time a slice size is wanted on an engine, the worker resolves its kernel choice
 * as engine.tune says: auto takes the choice cached for this device and shape, else times
 * every kernel, caches the result and uses it; cached never times; off leaves every size to
 * the backend's built-in rule. The choice goes into the engine (tl_engine_set_choice), and
 * the engine names the kernel that actually ran in each slice's info, hence in each slice
 * header. The tune command times sizes again on request, whatever the cache holds.
 *
 * Tuning is an optimisation, never a reason to stop: a cache that cannot be read, a timing
 * that fails or a cache that cannot be written is logged as an error and counted, and the
 * size keeps the built-in rule (until the next engine, or a tune command).
 *
 * Timing takes about engine.tune_budget seconds per size. The worker waits for it,
 * because timings are only honest on an otherwise idle device, so frames queue meanwhile
 * (ingest.queue, then blocked senders or counted drops as ingest.overflow says; tuning
 * before the scan's frames avoids that). It does not hold the daemon lock, so control
 * requests are answered meanwhile: it times an engine of its own with the scan's columns
 * and window and just the rows the batches need (sinograms are stored per detector row,
 * so the timings are those of the scan's engine), on a thread of its own that a stop
 * leaves behind rather than wait for. Only when that engine cannot be had (the scan's
 * window fills the memory) does it time the scan's engine, on the worker, lock held.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/core/daemon.h"

/* How long the watchdog lets a timing worker be silent: timing aims at the budget but
 * can overrun it (at least min_reps calls of the slowest kernel). */
#define TL_TUNE_GRACE_NS(budget_s) ((uint64_t)((4 * (budget_s) + 60) * 1e9))

/* The reply of the tune command must stay under the 64 KiB header limit: rankings are cut
 * to about this many bytes in all (an entry packs to ~80 bytes). */
#define TL_TUNE_REPLY_RANKING_BYTES 48000

const char *tl_tune_source_name(tl_tune_source s)
{
    static const char *const names[] = {"tuning", "cache", "tuned", "off", "failed"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}

int tl_tuning_init(tl_daemon *d)
{
    tl_tuning *t = &d->tuning;
    msgpack_sbuffer_init(&t->job_reply);
    t->result = malloc(sizeof *t->result); /* ~10 KB of timings, reused for every size */
    return t->result ? 0 : -1;
}

void tl_tuning_destroy(tl_daemon *d)
{
    tl_tuning *t = &d->tuning;
    msgpack_sbuffer_destroy(&t->job_reply);
    msgpack_sbuffer_init(&t->job_reply); /* a later destroy or clear stays harmless */
    free(t->result);
    t->result = NULL;
}

void tl_tuning_forget(tl_daemon *d)
{
    d->tuning.nsizes = 0;
    d->tuning.full_logged = false;
}

static tl_tune_size *find_size(tl_tuning *t, uint32_t h, uint32_t w)
{
    for (int i = 0; i < t->nsizes; i++)
        if (t->sizes[i].height == h && t->sizes[i].width == w)
            return &t->sizes[i];
    return NULL;
}

/* A new entry for h x w, or NULL when the engine keeps no more sizes. */
static tl_tune_size *add_size(tl_tuning *t, uint32_t h, uint32_t w)
{
    if (t->nsizes == TL_TUNE_MAX_SIZES)
        return NULL;
    tl_tune_size *ts = &t->sizes[t->nsizes++];
    memset(ts, 0, sizeof *ts);
    ts->height = h;
    ts->width = w;
    return ts;
}

/* What engine.tune* said when a resolution began (the lock is free while timing, and a
 * reload may change the configuration meanwhile). */
typedef struct {
    int mode;
    char path[TL_SETTINGS_ENDPOINT_MAX]; /* "" = tl_tune_default_path */
    double budget;
    unsigned batch;
} tune_cfg;

static void snapshot(const tl_daemon *d, tune_cfg *c)
{
    c->mode = d->cfg.tune;
    snprintf(c->path, sizeof c->path, "%s", d->cfg.tune_cache);
    c->budget = d->cfg.tune_budget;
    c->batch = tl_settings_tune_batch(&d->cfg);
}

static const char *name_or(const char *name, const char *none)
{
    return name && name[0] ? name : none;
}

/* A timing on an engine of its own, on a thread of its own, so that a stop need not wait
 * for it (timing takes seconds; SIGTERM must be done in two): the worker waits for it and
 * leaves it behind when the daemon stops. The thread touches only the task, which the last
 * of the two to let go of it frees. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;           /* the worker and the thread */
    bool done, created; /* the thread has finished; its engine could be made */
    tl_engine_config cfg;
    tl_tune_shape shape;
    tl_tune_options opt;
    atomic_int *running; /* the daemon's count of timing threads */
    tl_status st;
    char err[512];
    tl_tune_result r;
} tune_task;

static void task_release(tune_task *t)
{
    pthread_mutex_lock(&t->mu);
    int left = --t->refs;
    pthread_mutex_unlock(&t->mu);
    if (left == 0) {
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cv);
        free(t);
    }
}

static void *tune_thread(void *arg)
{
    tune_task *t = arg;
    tl_engine *e = NULL;
    tl_status st = tl_engine_create(&t->cfg, &e);
    if (st != TL_OK) {
        snprintf(t->err, sizeof t->err, "%s", tl_engine_last_error(NULL));
    } else {
        st = tl_tune_run(e, &t->shape, &t->opt, &t->r);
        if (st != TL_OK)
            snprintf(t->err, sizeof t->err, "timing failed: %s", tl_tune_last_error());
        tl_engine_destroy(e);
    }
    atomic_int *running = t->running;
    pthread_mutex_lock(&t->mu);
    t->st = st;
    t->created = e != NULL;
    t->done = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    task_release(t);
    atomic_fetch_sub(running, 1);
    return NULL;
}

/* Runs the task on its thread and waits for it, or for the daemon to stop (*left: then the
 * thread is left behind). False when no thread could be started. */
static bool run_task(tl_daemon *d, tune_task *t, bool *left)
{
    pthread_attr_t attr;
    pthread_t th;
    *left = false;
    if (pthread_attr_init(&attr) != 0)
        return false;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&d->tuning.threads, 1);
    t->running = &d->tuning.threads;
    t->refs = 2;
    bool started = pthread_create(&th, &attr, tune_thread, t) == 0;
    pthread_attr_destroy(&attr);
    if (!started) {
        atomic_fetch_sub(&d->tuning.threads, 1);
        t->refs = 1;
        return false;
    }
    pthread_mutex_lock(&t->mu);
    while (!t->done && !atomic_load(&d->worker_stop)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000; /* 0.1 s: how soon a stop is noticed */
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    }
    *left = !t->done;
    pthread_mutex_unlock(&t->mu);
    return true;
}

/* Times shape sh for the scan's engine e into r (lock held on entry and on return, free
 * meanwhile unless the scan's engine itself must be timed). *left: the daemon is stopping
 * and the timing was left behind. */
static tl_status time_kernels(tl_daemon *d, tl_engine *e, const tl_tune_shape *sh,
                              const tune_cfg *c, tl_tune_result *r, bool *left, char *err,
                              size_t errlen)
{
    tl_tune_options opt = {.budget_s = c->budget, .min_reps = 3, .max_reps = 20};
    tl_status st = TL_ENOMEM;
    *left = false;
    atomic_store(&d->tuning.busy_until, tl_clock_ns() + TL_TUNE_GRACE_NS(c->budget));
    tune_task *t = calloc(1, sizeof *t);
    if (t && (pthread_mutex_init(&t->mu, NULL) != 0 || pthread_cond_init(&t->cv, NULL) != 0)) {
        free(t); /* (a mutex or condition that fails to initialise holds nothing) */
        t = NULL;
    }
    bool created = false;
    if (t) {
        t->cfg = *tl_engine_get_config(e);
        t->cfg.rows = sh->batch; /* the rows the batches of horizontal slices need */
        t->cfg.kernel[0] = '\0'; /* every kernel competes */
        t->shape = *sh;
        t->opt = opt;
        pthread_mutex_unlock(&d->lock);
        if (run_task(d, t, left)) {
            created = *left || t->created;
            if (created)
                tl_stats_count(&d->stats.tune_runs);
            if (!*left && t->created) {
                st = t->st;
                if (st == TL_OK)
                    *r = t->r;
                else
                    snprintf(err, errlen, "%s", t->err);
            }
        }
        if (!created)
            tl_log(TL_LOG_WARN, "tune_engine_unavailable", "height=%u width=%u error=%s action=%s",
                   sh->height, sh->width, tl_logq(t->done ? t->err : "cannot start a thread"),
                   tl_logq("timing the scan's engine; control requests wait until it is done"));
        task_release(t);
        pthread_mutex_lock(&d->lock);
    }
    if (!created && !*left) {
        /* no engine of its own (memory): the scan's, which control commands share */
        st = tl_tune_run(e, sh, &opt, r);
        tl_stats_count(&d->stats.tune_runs);
        if (st != TL_OK)
            snprintf(err, errlen, "timing failed: %s", tl_tune_last_error());
    }
    if (st == TL_OK) {
        pthread_mutex_unlock(&d->lock); /* file input/output */
        if (tl_tune_cache_store(c->path[0] ? c->path : NULL, r) != TL_OK) {
            /* the measurement stands; only the next engine will have to time again */
            tl_stats_count(&d->stats.tune_failures);
            tl_log(TL_LOG_ERROR, "tune_cache_write_failed", "height=%u width=%u error=%s",
                   sh->height, sh->width, tl_logq(tl_tune_last_error()));
        }
        pthread_mutex_lock(&d->lock);
    }
    atomic_store(&d->worker_beat, tl_clock_ns()); /* alive: the watchdog's grace ends */
    atomic_store(&d->tuning.busy_until, 0);
    if (*left)
        snprintf(err, errlen, "the daemon is stopping");
    return *left ? TL_EINTERNAL : st;
}

/* Resolves the kernel choice of ts (height x width) on the scan's engine: from the cache,
 * by timing, or the built-in rule, as engine.tune says; force (the tune command) times it
 * whatever the mode and the cache. Lock held; released while timing. r receives the
 * timings (valid when the source is cache or tuned). Logs one line. Returns TL_OK, or the failure with err set
 * (the size then keeps the built-in rule). */
static tl_status resolve(tl_daemon *d, tl_tune_size *ts, bool force, tl_tune_result *r, char *err,
                         size_t errlen)
{
    tl_engine *e = d->scan.engine;
    const tl_engine_config *ec = tl_engine_get_config(e);
    tune_cfg c;
    snapshot(d, &c);
    tl_tune_shape sh = {.height = ts->height,
                        .width = ts->width,
                        .window = ec->window,
                        .batch = c.batch < ec->rows ? c.batch : ec->rows};
    tl_quality q = ec->quality;
    const char *path = c.path[0] ? c.path : NULL;
    const char *why = ""; /* for the log: why the built-in rule serves the size */
    uint64_t t0 = tl_clock_ns();
    tl_status st = TL_OK;
    bool from_cache = false;
    err[0] = '\0';
    ts->window = sh.window;
    ts->batch = sh.batch;
    memset(&ts->choice, 0, sizeof ts->choice);
    ts->choice.height = sh.height;
    ts->choice.width = sh.width;

    if (!force && c.mode == TL_SETTINGS_TUNE_OFF) {
        ts->source = TL_TUNE_SRC_OFF;
        why = "engine.tune = off";
    } else {
        if (!force) {
            st = tl_tune_cache_lookup(path, e, &sh, r);
            if (st == TL_OK && tl_engine_set_choice(e, &r->choice) != TL_OK) {
                /* a stale entry (kernels renamed since): time afresh where allowed */
                tl_log(TL_LOG_WARN, "tune_cache_stale", "height=%u width=%u error=%s", sh.height,
                       sh.width, tl_logq(tl_engine_last_error(e)));
                st = TL_ENOTFOUND;
            } else if (st == TL_OK) {
                from_cache = true;
            } else if (st != TL_ENOTFOUND) {
                snprintf(err, errlen, "cache unreadable: %s", tl_tune_last_error());
            }
        }
        if (from_cache) {
            ts->source = TL_TUNE_SRC_CACHE;
            ts->choice = r->choice;
        } else if (err[0]) {
            ts->source = TL_TUNE_SRC_FAILED;
        } else if (!force && c.mode == TL_SETTINGS_TUNE_CACHED) {
            st = TL_OK;
            ts->source = TL_TUNE_SRC_OFF;
            why = "not cached, engine.tune = cached";
        } else {
            ts->source = TL_TUNE_SRC_TUNING;
            bool left;
            st = time_kernels(d, e, &sh, &c, r, &left, err, errlen);
            if (left) {
                ts->source = TL_TUNE_SRC_OFF;
                tl_log(TL_LOG_INFO, "kernel_choice", "height=%u width=%u source=off reason=%s",
                       sh.height, sh.width, tl_logq("stopping: the timing was left unfinished"));
                return st;
            }
            if (st == TL_OK && tl_engine_set_choice(e, &r->choice) != TL_OK) {
                st = TL_EINTERNAL;
                snprintf(err, errlen, "%s", tl_engine_last_error(e));
            }
            if (st == TL_OK) {
                ts->source = TL_TUNE_SRC_TUNED;
                ts->choice = r->choice;
            } else {
                ts->source = TL_TUNE_SRC_FAILED;
            }
        }
    }
    if (ts->source == TL_TUNE_SRC_FAILED) {
        /* an earlier choice of this size (a tune command on a cached size) must not stay
         * in force while status says "failed": names "" are the built-in rule */
        tl_kernel_choice none = {.height = sh.height, .width = sh.width};
        tl_kernel_choice had;
        if (tl_engine_get_choice(e, sh.height, sh.width, &had))
            tl_engine_set_choice(e, &none);
        tl_stats_count(&d->stats.tune_failures);
        if (st == TL_OK)
            st = TL_EIO;
    }
    ts->seconds = (tl_clock_ns() - t0) / 1e9;
    if (ts->source == TL_TUNE_SRC_FAILED)
        tl_log(TL_LOG_ERROR, "kernel_choice",
               "height=%u width=%u window=%u batch=%u source=failed seconds=%.2f error=%s "
               "action=%s",
               sh.height, sh.width, sh.window, sh.batch, ts->seconds, tl_logq(err),
               tl_logq(
                   "the backend's built-in kernel rule serves this size; reconstruction goes on"));
    else
        tl_log(TL_LOG_INFO, "kernel_choice",
               "height=%u width=%u window=%u batch=%u source=%s quality=%s single=%s "
               "batch_kernel=%s seconds=%.2f%s%s",
               sh.height, sh.width, sh.window, sh.batch, tl_tune_source_name(ts->source),
               tl_quality_name(q), tl_logq(name_or(ts->choice.single[q], "built-in")),
               tl_logq(name_or(ts->choice.batch[q], "built-in")), ts->seconds,
               why[0] ? " reason=" : "", why[0] ? tl_logq(why) : "");
    return st;
}

/* The first wanted slice size of the current engine that has no resolution yet. */
static bool next_unresolved(tl_daemon *d, uint32_t *h, uint32_t *w)
{
    for (int i = 0; i < d->slices.n; i++) {
        tl_slice *sl = &d->slices.v[i];
        if (sl->engine_id < 0 || find_size(&d->tuning, sl->height, sl->width))
            continue;
        if (sl->pinned || tl_publisher_wanted(&d->pub, sl->topic, sl->topic_len)) {
            *h = sl->height;
            *w = sl->width;
            return true;
        }
    }
    return false;
}

static void pack_names(msgpack_packer *pk, const char names[TL_QUALITY_COUNT][32])
{
    msgpack_pack_map(pk, TL_QUALITY_COUNT);
    for (int q = 0; q < TL_QUALITY_COUNT; q++) {
        tl_proto_pack_cstr(pk, tl_quality_name((tl_quality)q));
        if (names[q][0])
            tl_proto_pack_cstr(pk, names[q]);
        else
            msgpack_pack_nil(pk); /* the backend's built-in rule */
    }
}

static int by_rate(const void *a, const void *b)
{
    double x = ((const tl_tune_entry *)a)->updates_per_s,
           y = ((const tl_tune_entry *)b)->updates_per_s;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* One size of the tune command's reply; at most cap entries of the ranking. */
static void pack_tuned(msgpack_packer *pk, const tl_tune_size *ts, const tl_tune_result *r,
                       size_t cap)
{
    tl_tune_entry sorted[TL_TUNE_MAX_ENTRIES];
    size_t n = r->nentries < TL_TUNE_MAX_ENTRIES ? r->nentries : TL_TUNE_MAX_ENTRIES;
    memcpy(sorted, r->entries, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_rate);
    msgpack_pack_map(pk, 10);
    tl_proto_pack_kv_u64(pk, "height", ts->height);
    tl_proto_pack_kv_u64(pk, "width", ts->width);
    tl_proto_pack_kv_u64(pk, "window", ts->window);
    tl_proto_pack_kv_u64(pk, "batch", ts->batch);
    tl_proto_pack_kv_double(pk, "seconds", ts->seconds);
    tl_proto_pack_kv_u64(pk, "reps", r->reps > 0 ? (uint64_t)r->reps : 0);
    tl_proto_pack_cstr(pk, "single");
    pack_names(pk, r->choice.single);
    tl_proto_pack_cstr(pk, "batch_kernels");
    pack_names(pk, r->choice.batch);
    tl_proto_pack_kv_u64(pk, "timed", n);
    tl_proto_pack_cstr(pk, "ranking");
    size_t m = n < cap ? n : cap;
    msgpack_pack_array(pk, m);
    for (size_t i = 0; i < m; i++) {
        msgpack_pack_map(pk, 5);
        tl_proto_pack_kv_str(pk, "kernel", sorted[i].kernel);
        tl_proto_pack_kv_str(pk, "mode", tl_quality_name(sorted[i].quality));
        tl_proto_pack_kv_u64(pk, "batch", sorted[i].batch);
        tl_proto_pack_kv_double(pk, "ms", sorted[i].ms);
        tl_proto_pack_kv_double(pk, "gups", sorted[i].updates_per_s / 1e9);
    }
}

static tl_proto_err reply_code(tl_status st)
{
    switch (st) {
        case TL_EINVAL: return TL_PROTO_E_BAD_ARG;
        case TL_ENOMEM:
        case TL_EDEVICE: return TL_PROTO_E_RESOURCE;
        case TL_EUNSUPPORTED: return TL_PROTO_E_UNSUPPORTED;
        default: return TL_PROTO_E_INTERNAL;
    }
}

/* The tune command (lock held; released while timing): times every size of the job,
 * replies through the loop. */
static void run_job(tl_daemon *d)
{
    tl_tuning *t = &d->tuning;
    t->job = TL_TUNE_JOB_RUNNING;
    msgpack_sbuffer_clear(&t->job_reply);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &t->job_reply, msgpack_sbuffer_write);
    tl_proto_err code = TL_PROTO_OK;
    char msg[600] = "";
    size_t cap = TL_TUNE_REPLY_RANKING_BYTES / 80 / (size_t)(t->job_n > 0 ? t->job_n : 1);
    tl_proto_begin_rep_ok(&pk, t->job_id);
    msgpack_pack_map(&pk, 1);
    tl_proto_pack_cstr(&pk, "sizes");
    msgpack_pack_array(&pk, (size_t)t->job_n);
    for (int i = 0; i < t->job_n && code == TL_PROTO_OK; i++) {
        uint32_t h = t->job_dims[i][0], w = t->job_dims[i][1];
        tl_tune_size *ts = find_size(t, h, w);
        if (atomic_load(&d->worker_stop)) {
            code = TL_PROTO_E_STATE;
            snprintf(msg, sizeof msg, "the daemon is stopping");
        } else if (!d->scan.open) {
            code = TL_PROTO_E_STATE;
            snprintf(msg, sizeof msg, "no scan is open (it went before tuning was done)");
        } else if (!ts && !(ts = add_size(t, h, w))) {
            code = TL_PROTO_E_RESOURCE;
            snprintf(msg, sizeof msg, "the engine keeps kernel choices for at most %d slice sizes",
                     TL_TUNE_MAX_SIZES);
        } else {
            char err[512];
            tl_status st = resolve(d, ts, true, t->result, err, sizeof err);
            if (st == TL_OK) {
                pack_tuned(&pk, ts, t->result, cap);
            } else {
                code = reply_code(st);
                snprintf(msg, sizeof msg, "%ux%u: %s (the built-in kernel rule serves it)", h, w,
                         err);
            }
        }
    }
    if (code != TL_PROTO_OK) {
        msgpack_sbuffer_clear(&t->job_reply);
        tl_proto_pack_rep_error(&pk, t->job_id, code, msg);
        tl_stats_count(&d->stats.request_errors);
    }
    t->job = TL_TUNE_JOB_DONE;
    uv_async_send(&t->job_done); /* control.c sends it from the loop */
}

void tl_tuning_turn(tl_daemon *d)
{
    tl_tuning *t = &d->tuning;
    /* one size at a time: the slices, and a tune command, may come while the lock is free */
    uint32_t h, w;
    for (;;) {
        if (t->job == TL_TUNE_JOB_QUEUED) {
            run_job(d);
            continue;
        }
        if (!d->scan.open || atomic_load(&d->worker_stop) || !next_unresolved(d, &h, &w))
            return;
        tl_tune_size *ts = add_size(t, h, w);
        if (!ts) {
            if (!t->full_logged)
                tl_log(TL_LOG_WARN, "kernel_choice_skipped", "height=%u width=%u reason=%s", h, w,
                       tl_logq("more slice sizes than the engine keeps choices for; the built-in "
                               "rule serves the rest"));
            t->full_logged = true;
            return;
        }
        char err[512];
        resolve(d, ts, false, t->result, err, sizeof err);
    }
}

void tl_tuning_pack_status(tl_daemon *d, msgpack_packer *pk)
{
    tl_tuning *t = &d->tuning;
    char path[TL_SETTINGS_ENDPOINT_MAX + 64];
    if (d->cfg.tune_cache[0])
        snprintf(path, sizeof path, "%s", d->cfg.tune_cache);
    else
        tl_tune_default_path(path, sizeof path);
    msgpack_pack_map(pk, 6);
    tl_proto_pack_kv_str(pk, "tune", tl_settings_enum_name("engine.tune", d->cfg.tune));
    tl_proto_pack_kv_str(pk, "cache", path);
    tl_proto_pack_cstr(pk, "sizes");
    msgpack_pack_array(pk, (size_t)t->nsizes);
    for (int i = 0; i < t->nsizes; i++) {
        const tl_tune_size *ts = &t->sizes[i];
        msgpack_pack_map(pk, 8);
        tl_proto_pack_kv_u64(pk, "height", ts->height);
        tl_proto_pack_kv_u64(pk, "width", ts->width);
        tl_proto_pack_kv_u64(pk, "window", ts->window);
        tl_proto_pack_kv_u64(pk, "batch_size", ts->batch);
        tl_proto_pack_kv_str(pk, "source", tl_tune_source_name(ts->source));
        tl_proto_pack_kv_double(pk, "seconds", ts->seconds);
        tl_proto_pack_cstr(pk, "single");
        pack_names(pk, ts->choice.single);
        tl_proto_pack_cstr(pk, "batch");
        pack_names(pk, ts->choice.batch);
    }
    tl_proto_pack_kv_u64(pk, "tune_runs", tl_stats_get(&d->stats.tune_runs));
    tl_proto_pack_kv_u64(pk, "tune_failures", tl_stats_get(&d->stats.tune_failures));
    tl_proto_pack_kv_bool(pk, "job_running", t->job != TL_TUNE_JOB_IDLE);
}
