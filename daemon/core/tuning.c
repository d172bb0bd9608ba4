/* tuning.c — which back-projection kernels serve each slice size (gpu/tune.h).
 *
 * The first time a slice size is wanted on an engine, the worker resolves its kernel choice
 * as engine.tune says: auto takes the choice cached for this device and shape, else times
 * every kernel, caches the result and uses it; cached never times; off leaves every size to
 * the backend's built-in rule. A size where one kernel alone can serve the engine's quality
 * mode (the CPU backend has one kernel) is not timed and needs no cache: its source is
 * "only" at once (engine.tune_one_kernel times it anyway, for the timings). The choice goes
 * into the engine (tl_engine_set_choice), and the engine names the kernel that actually ran
 * in each slice's info, hence in each slice header. The tune command times sizes again on
 * request, whatever the cache holds, and even where one kernel alone serves.
 *
 * Tuning never stalls frames. A timing runs on a thread of its own, on an engine of its own
 * with the scan's columns and window and just the rows the batches need (sinograms are
 * stored per detector row, so the timings are those of the scan's engine); it writes the
 * cache itself. Meanwhile the worker goes on: the size's source is "tuning" and the
 * built-in rule (or the choice the size had) serves its slices; a later turn of the worker,
 * woken when the thread ends, switches the engine to the measured choice and logs it
 * (kernel_choice source=tuning, then source=tuned). A stop, or a new engine, leaves the
 * thread to finish alone rather than wait for it (timing takes seconds; SIGTERM must be
 * done in two). The one exception is a tune command when no second engine fits beside the
 * scan's (memory): the operator asked for the timing, so it times the scan's engine on the
 * worker, lock held, and frames and control requests wait; the automatic path then keeps
 * the built-in rule instead.
 *
 * The timing competes with the scan for the device. What bounds it: one size at a time, one
 * thread; engine.tune_budget seconds per size (about: at least min_reps calls of every
 * kernel); on the CPU the thread, and the threads its engine makes, run at nice
 * TL_TUNE_NICE, so the scan's threads come first; on a GPU the side engine's kernels share
 * the device with the scan's at the same priority, so frames are slower for that while, and
 * the timings, taken beside the scan's work, are pessimistic (tune before the scan's frames,
 * or with the tune command, for clean figures).
 *
 * Tuning is an optimisation, never a reason to stop: a cache that cannot be read, a timing
 * that fails or a cache that cannot be written is logged as an error and counted, and the
 * size keeps the built-in rule (until the next engine, or a tune command).
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "daemon/core/daemon.h"

/* How long the watchdog lets the worker be silent while a tune command times the scan's
 * engine on it: timing aims at the budget but can overrun it (at least min_reps calls of
 * the slowest kernel). */
#define TL_TUNE_GRACE_NS(budget_s) ((uint64_t)((4 * (budget_s) + 60) * 1e9))

/* The nice value of a timing thread: the CPU backend's threads of its engine inherit it,
 * so on a busy host the scan's reconstruction runs first. */
#define TL_TUNE_NICE 10

/* The reply of the tune command must stay under the 64 KiB header limit: rankings are cut
 * to about this many bytes in all (an entry packs to ~80 bytes). */
#define TL_TUNE_REPLY_RANKING_BYTES 48000

const char *tl_tune_source_name(tl_tune_source s)
{
    static const char *const names[] = {"tuning", "cache", "tuned", "off", "failed", "only"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}

static void abandon(tl_daemon *d, const char *reason);

int tl_tuning_init(tl_daemon *d)
{
    tl_tuning *t = &d->tuning;
    msgpack_sbuffer_init(&t->job_reply);
    t->task = NULL;
    t->result = malloc(sizeof *t->result); /* ~10 KB of timings, reused for every size */
    return t->result ? 0 : -1;
}

void tl_tuning_destroy(tl_daemon *d)
{
    tl_tuning *t = &d->tuning;
    pthread_mutex_lock(&d->lock);
    abandon(d, "stopping: the timing was left unfinished");
    pthread_mutex_unlock(&d->lock);
    msgpack_sbuffer_destroy(&t->job_reply);
    msgpack_sbuffer_init(&t->job_reply); /* a later destroy or clear stays harmless */
    free(t->result);
    t->result = NULL;
}

void tl_tuning_forget(tl_daemon *d)
{
    abandon(d, "the scan's engine went away");
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

/* What engine.tune* said when a resolution began (a reload may change the configuration
 * while a timing runs). */
typedef struct {
    int mode;
    char path[TL_SETTINGS_ENDPOINT_MAX]; /* "" = tl_tune_default_path */
    double budget;
    unsigned batch;
    bool one_kernel; /* time a size that one kernel alone can serve, too */
} tune_cfg;

static void snapshot(const tl_daemon *d, tune_cfg *c)
{
    c->mode = d->cfg.tune;
    snprintf(c->path, sizeof c->path, "%s", d->cfg.tune_cache);
    c->budget = d->cfg.tune_budget;
    c->batch = tl_settings_tune_batch(&d->cfg);
    c->one_kernel = d->cfg.tune_one_kernel;
}

static const char *name_or(const char *name, const char *none)
{
    return name && name[0] ? name : none;
}

/* ---- the timing thread ------------------------------------------------------------------ */

/* A timing on an engine of its own, on a thread of its own. The thread touches only the
 * task, which the last of the two (the worker's tl_tuning and the thread) to let go of it
 * frees; the worker's queue is poked when it is done, unless the worker let go first. */
struct tl_tune_task {
    pthread_mutex_t mu;
    int refs;           /* the worker and the thread */
    bool done, created; /* the thread has finished; its engine could be made */
    tl_queue *wake;     /* poked when done; NULL once the worker let go */
    tl_engine_config cfg;
    tl_tune_shape shape;
    tl_tune_options opt;
    tune_cfg tune;       /* engine.tune* when it began */
    atomic_int *running; /* the daemon's count of timing threads */
    uint64_t t0;         /* when the resolution began (monotonic ns) */
    tl_status st;
    char err[512];       /* why the timing failed */
    char store_err[512]; /* why the cache could not be written ("" = written) */
    tl_tune_result r;
    double (*matrices)[12]; /* a cone scan's matrices re-based to the timing's band (cfg
                               points here; tl_tune_engine_config) */
};
typedef struct tl_tune_task tune_task;

static void task_release(tune_task *t)
{
    pthread_mutex_lock(&t->mu);
    int left = --t->refs;
    pthread_mutex_unlock(&t->mu);
    if (left == 0) {
        pthread_mutex_destroy(&t->mu);
        free(t->matrices);
        free(t);
    }
}

static bool task_done(tune_task *t)
{
    pthread_mutex_lock(&t->mu);
    bool done = t->done;
    pthread_mutex_unlock(&t->mu);
    return done;
}

static void *tune_thread(void *arg)
{
    tune_task *t = arg;
    /* Linux: nice is per thread, and threads made from here on inherit it; a failure only
     * leaves the timing at the scan's priority */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), TL_TUNE_NICE);
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
    /* the cache is written here, so the worker does no file input/output; the measurement
     * stands if it fails, only the next engine will have to time again */
    if (st == TL_OK && tl_tune_cache_store(t->tune.path[0] ? t->tune.path : NULL, &t->r) != TL_OK)
        snprintf(t->store_err, sizeof t->store_err, "%s", tl_tune_last_error());
    atomic_int *running = t->running;
    pthread_mutex_lock(&t->mu);
    t->st = st;
    t->created = e != NULL;
    t->done = true;
    if (t->wake)
        tl_queue_wake(t->wake); /* the worker switches to the choice at once */
    pthread_mutex_unlock(&t->mu);
    task_release(t);
    atomic_fetch_sub(running, 1);
    return NULL;
}

/* Starts timing shape sh of the scan's engine on a thread (d->tuning.task), or returns
 * NULL with err set when no thread could be started. */
static tune_task *start_task(tl_daemon *d, const tl_tune_shape *sh, const tune_cfg *c, uint64_t t0,
                             char *err, size_t errlen)
{
    tune_task *t = calloc(1, sizeof *t); /* one per timing (seconds), never per frame */
    if (!t || pthread_mutex_init(&t->mu, NULL) != 0) {
        free(t); /* (a mutex that fails to initialise holds nothing) */
        snprintf(err, errlen, "out of memory for a timing");
        return NULL;
    }
    const tl_engine_config *scan = tl_engine_get_config(d->scan.engine);
    size_t nmat = scan->cone.matrices ? scan->cone.nmatrices : 0;
    t->matrices = nmat ? malloc(nmat * sizeof *t->matrices) : NULL;
    const char *why = nmat && !t->matrices ? "out of memory for a timing's cone-beam matrices"
                      : tl_tune_engine_config(scan, sh->batch, t->matrices, &t->cfg) != TL_OK
                          ? tl_tune_last_error()
                          : NULL;
    if (why) {
        snprintf(err, errlen, "%s", why);
        pthread_mutex_destroy(&t->mu);
        free(t->matrices);
        free(t);
        return NULL;
    }
    t->shape = *sh;
    t->opt = (tl_tune_options){.budget_s = c->budget, .min_reps = 3, .max_reps = 20};
    t->tune = *c;
    t->wake = &d->queue;
    t->running = &d->tuning.threads;
    t->t0 = t0;
    t->refs = 2;
    pthread_attr_t attr;
    pthread_t th;
    bool started = false;
    atomic_fetch_add(&d->tuning.threads, 1);
    if (pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&th, &attr, tune_thread, t) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) {
        atomic_fetch_sub(&d->tuning.threads, 1);
        pthread_mutex_destroy(&t->mu);
        free(t->matrices);
        free(t);
        snprintf(err, errlen, "cannot start a thread");
        return NULL;
    }
    return t;
}

/* The worker lets go of the timing under way, if any: it finishes alone (and still writes
 * the cache), its result is not used. A tune command waiting for it fails. */
static void abandon(tl_daemon *d, const char *reason)
{
    tl_tuning *tn = &d->tuning;
    tune_task *t = tn->task;
    if (!t)
        return;
    tn->task = NULL;
    pthread_mutex_lock(&t->mu);
    t->wake = NULL;
    bool done = t->done;
    pthread_mutex_unlock(&t->mu);
    tl_stats_count(&d->stats.tune_runs);
    tl_tune_size *ts = &tn->sizes[tn->task_size];
    ts->source = TL_TUNE_SRC_OFF;
    tl_log(TL_LOG_INFO, "kernel_choice", "height=%u width=%u source=off reason=%s", ts->height,
           ts->width, tl_logq(done ? "the timing was done but its engine went away" : reason));
    if (tn->task_job && tn->job_code == TL_PROTO_OK) {
        tn->job_code = TL_PROTO_E_STATE;
        snprintf(tn->job_msg, sizeof tn->job_msg, "%s",
                 atomic_load(&d->worker_stop)
                     ? "the daemon is stopping"
                     : "no scan is open (it went before tuning was done)");
    }
    task_release(t);
}

/* ---- resolving a size ------------------------------------------------------------------- */

/* The tune command's reply so far (job_reply). */
static msgpack_packer job_packer(tl_tuning *t)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, &t->job_reply, msgpack_sbuffer_write);
    return pk;
}

static void pack_tuned(msgpack_packer *pk, const tl_tune_size *ts, const tl_tune_result *r,
                       size_t cap);
static tl_proto_err reply_code(tl_status st);

/* Logs the resolution of ts (quality q) that is settled now and, for the tune command,
 * adds it to the reply. st: TL_OK, or the failure (err) after which the built-in rule
 * serves; r: the timings when the source is cache or tuned. */
static void settle(tl_daemon *d, tl_tune_size *ts, bool job, tl_status st, const char *err,
                   const char *why, const tl_tune_result *r, uint64_t t0)
{
    tl_tuning *tn = &d->tuning;
    tl_engine *e = d->scan.engine;
    tl_quality q = tl_engine_get_config(e)->quality;
    if (st != TL_OK)
        ts->source = TL_TUNE_SRC_FAILED;
    if (ts->source == TL_TUNE_SRC_FAILED) {
        /* an earlier choice of this size (a tune command on a cached size) must not stay
         * in force while status says "failed": names "" are the built-in rule */
        tl_kernel_choice none = {.height = ts->height, .width = ts->width};
        tl_kernel_choice had;
        if (tl_engine_get_choice(e, ts->height, ts->width, &had))
            tl_engine_set_choice(e, &none);
        memset(&ts->choice, 0, sizeof ts->choice);
        ts->choice.height = ts->height;
        ts->choice.width = ts->width;
        tl_stats_count(&d->stats.tune_failures);
        if (st == TL_OK)
            st = TL_EIO;
    }
    ts->seconds = (tl_clock_ns() - t0) / 1e9;
    if (ts->source == TL_TUNE_SRC_FAILED)
        tl_log(TL_LOG_ERROR, "kernel_choice",
               "height=%u width=%u window=%u batch=%u source=failed seconds=%.2f error=%s "
               "action=%s",
               ts->height, ts->width, ts->window, ts->batch, ts->seconds, tl_logq(err),
               tl_logq(
                   "the backend's built-in kernel rule serves this size; reconstruction goes on"));
    else
        tl_log(TL_LOG_INFO, "kernel_choice",
               "height=%u width=%u window=%u batch=%u source=%s quality=%s single=%s "
               "batch_kernel=%s seconds=%.2f%s%s",
               ts->height, ts->width, ts->window, ts->batch, tl_tune_source_name(ts->source),
               tl_quality_name(q), tl_logq(name_or(ts->choice.single[q], "built-in")),
               tl_logq(name_or(ts->choice.batch[q], "built-in")), ts->seconds,
               why[0] ? " reason=" : "", why[0] ? tl_logq(why) : "");
    if (!job || tn->job_code != TL_PROTO_OK)
        return;
    if (st == TL_OK) {
        size_t cap = TL_TUNE_REPLY_RANKING_BYTES / 80 / (size_t)(tn->job_n > 0 ? tn->job_n : 1);
        msgpack_packer pk = job_packer(tn);
        pack_tuned(&pk, ts, r, cap);
    } else {
        tn->job_code = reply_code(st);
        snprintf(tn->job_msg, sizeof tn->job_msg, "%ux%u: %s (the built-in kernel rule serves it)",
                 ts->height, ts->width, err);
    }
}

/* The kernels that can serve quality q on engine e: how many, and the first one's name. */
static size_t candidates(tl_engine *e, tl_quality q, const char **first)
{
    tl_kernel_info k[TL_TUNE_MAX_ENTRIES];
    size_t n = tl_engine_kernels(e, k, TL_TUNE_MAX_ENTRIES), count = 0;
    *first = NULL;
    for (size_t i = 0; i < n && i < TL_TUNE_MAX_ENTRIES; i++)
        if ((int)k[i].quality <= (int)q) { /* a stricter mode serves a looser request too */
            if (!*first)
                *first = k[i].name;
            count++;
        }
    return count;
}

/* Whether one kernel alone serves the engine's quality: then ts takes it, for every mode
 * it is alone in, and nothing needs timing. */
static bool only_one(tl_engine *e, tl_tune_size *ts)
{
    const char *name;
    if (candidates(e, tl_engine_get_config(e)->quality, &name) > 1)
        return false;
    for (int q = 0; q < TL_QUALITY_COUNT; q++) {
        const char *alone;
        if (candidates(e, (tl_quality)q, &alone) == 1) {
            snprintf(ts->choice.single[q], sizeof ts->choice.single[q], "%s", alone);
            snprintf(ts->choice.batch[q], sizeof ts->choice.batch[q], "%s", alone);
        }
    }
    (void)name;
    /* the names are the backend's own: the engine takes them (and where it cannot, the
     * built-in rule that it falls back to runs the same one kernel) */
    tl_engine_set_choice(e, &ts->choice);
    return true;
}

/* The tune command when no engine of its own could be had: times the scan's engine on the
 * worker, lock held (frames and control requests wait), and writes the cache. */
static tl_status time_scan_engine(tl_daemon *d, const tl_tune_shape *sh, const tune_cfg *c,
                                  tl_tune_result *r, char *err, size_t errlen)
{
    tl_tune_options opt = {.budget_s = c->budget, .min_reps = 3, .max_reps = 20};
    atomic_store(&d->tuning.busy_until, tl_clock_ns() + TL_TUNE_GRACE_NS(c->budget));
    tl_status st = tl_tune_run(d->scan.engine, sh, &opt, r);
    tl_stats_count(&d->stats.tune_runs);
    if (st != TL_OK)
        snprintf(err, errlen, "timing failed: %s", tl_tune_last_error());
    if (st == TL_OK && tl_tune_cache_store(c->path[0] ? c->path : NULL, r) != TL_OK) {
        tl_stats_count(&d->stats.tune_failures);
        tl_log(TL_LOG_ERROR, "tune_cache_write_failed", "height=%u width=%u error=%s", sh->height,
               sh->width, tl_logq(tl_tune_last_error()));
    }
    atomic_store(&d->worker_beat, tl_clock_ns()); /* alive: the watchdog's grace ends */
    atomic_store(&d->tuning.busy_until, 0);
    return st;
}

/* Settles sizes[idx] with what its timing gave: t (done), or NULL when no thread could be
 * started (start_err says why). Lock held. */
static void finish(tl_daemon *d, int idx, bool job, tune_task *t, const tl_tune_shape *sh,
                   const tune_cfg *c, uint64_t t0, const char *start_err)
{
    tl_tuning *tn = &d->tuning;
    tl_tune_size *ts = &tn->sizes[idx];
    tl_engine *e = d->scan.engine;
    char err[512] = "";
    const char *why = "";
    const tl_tune_result *r = NULL;
    tl_status st = TL_OK;
    if (t && t->created) {
        tl_stats_count(&d->stats.tune_runs);
        st = t->st;
        r = &t->r;
        if (st != TL_OK)
            snprintf(err, sizeof err, "%s", t->err);
        if (t->store_err[0]) {
            tl_stats_count(&d->stats.tune_failures);
            tl_log(TL_LOG_ERROR, "tune_cache_write_failed", "height=%u width=%u error=%s",
                   ts->height, ts->width, tl_logq(t->store_err));
        }
    } else {
        tl_log(TL_LOG_WARN, "tune_engine_unavailable", "height=%u width=%u error=%s action=%s",
               ts->height, ts->width, tl_logq(t ? t->err : start_err),
               tl_logq(job ? "timing the scan's engine; frames and control requests wait "
                             "until it is done"
                           : "the built-in rule serves this size (a tune command would time "
                             "the scan's engine, stopping frames meanwhile)"));
        if (job) {
            st = time_scan_engine(d, sh, c, tn->result, err, sizeof err);
            r = tn->result;
        } else {
            ts->source = TL_TUNE_SRC_OFF;
            why = "no memory for a timing engine beside the scan's";
        }
    }
    if (r && st == TL_OK && tl_engine_set_choice(e, &r->choice) != TL_OK) {
        st = TL_EINTERNAL;
        snprintf(err, sizeof err, "%s", tl_engine_last_error(e));
    }
    if (r && st == TL_OK) {
        ts->source = TL_TUNE_SRC_TUNED;
        ts->choice = r->choice;
    }
    settle(d, ts, job, st, err, why, r, t0);
}

/* Begins resolving sizes[idx] on the scan's engine: from the cache, one candidate, the
 * built-in rule, or a timing started on its thread (then d->tuning.task; finish settles
 * it later), as engine.tune says; job (the tune command) times it whatever the mode, the
 * candidates and the cache. Lock held. */
static void begin(tl_daemon *d, int idx, bool job)
{
    tl_tuning *tn = &d->tuning;
    tl_tune_size *ts = &tn->sizes[idx];
    tl_engine *e = d->scan.engine;
    const tl_engine_config *ec = tl_engine_get_config(e);
    tune_cfg c;
    snapshot(d, &c);
    tl_tune_shape sh = {.height = ts->height,
                        .width = ts->width,
                        .window = ec->window,
                        .batch = c.batch < ec->rows ? c.batch : ec->rows};
    const char *path = c.path[0] ? c.path : NULL;
    uint64_t t0 = tl_clock_ns();
    char err[512] = "";
    ts->window = sh.window;
    ts->batch = sh.batch;
    /* a new size starts without names; one the tune command re-times keeps the choice that
     * serves it until the new one is measured */
    ts->choice.height = sh.height;
    ts->choice.width = sh.width;
    if (!job && c.mode == TL_SETTINGS_TUNE_OFF) {
        ts->source = TL_TUNE_SRC_OFF;
        settle(d, ts, job, TL_OK, "", "engine.tune = off", NULL, t0);
        return;
    }
    if (!job && !c.one_kernel && only_one(e, ts)) {
        ts->source = TL_TUNE_SRC_ONLY;
        settle(d, ts, job, TL_OK, "", "one kernel serves this quality: nothing to time", NULL, t0);
        return;
    }
    if (!job) {
        tl_status st = tl_tune_cache_lookup(path, e, &sh, tn->result);
        if (st == TL_OK && tl_engine_set_choice(e, &tn->result->choice) != TL_OK) {
            /* a stale entry (kernels renamed since): time afresh where allowed */
            tl_log(TL_LOG_WARN, "tune_cache_stale", "height=%u width=%u error=%s", sh.height,
                   sh.width, tl_logq(tl_engine_last_error(e)));
            st = TL_ENOTFOUND;
        }
        if (st == TL_OK) {
            ts->source = TL_TUNE_SRC_CACHE;
            ts->choice = tn->result->choice;
            settle(d, ts, job, TL_OK, "", "", tn->result, t0);
            return;
        }
        if (st != TL_ENOTFOUND) {
            snprintf(err, sizeof err, "cache unreadable: %s", tl_tune_last_error());
            settle(d, ts, job, st, err, "", NULL, t0);
            return;
        }
        if (c.mode == TL_SETTINGS_TUNE_CACHED) {
            ts->source = TL_TUNE_SRC_OFF;
            settle(d, ts, job, TL_OK, "", "not cached, engine.tune = cached", NULL, t0);
            return;
        }
    }
    ts->source = TL_TUNE_SRC_TUNING;
    tune_task *t = start_task(d, &sh, &c, t0, err, sizeof err);
    if (!t) {
        finish(d, idx, job, NULL, &sh, &c, t0, err);
        return;
    }
    tn->task = t;
    tn->task_size = idx;
    tn->task_job = job;
    tl_log(TL_LOG_INFO, "kernel_choice",
           "height=%u width=%u window=%u batch=%u source=tuning budget=%.1f reason=%s", sh.height,
           sh.width, sh.window, sh.batch, c.budget,
           tl_logq("timing the kernels beside the scan; the built-in rule serves meanwhile"));
}

/* The first wanted slice size of the current engine that has no resolution yet. */
static bool next_unresolved(tl_daemon *d, uint32_t *h, uint32_t *w)
{
    for (int i = 0; i < d->slices.n; i++) {
        tl_slice *sl = &d->slices.v[i];
        const uint32_t plane = tl_slice_plane_height(sl); /* a box: its planes' */
        if (sl->engine_id < 0 || find_size(&d->tuning, plane, sl->width))
            continue;
        if (sl->pinned || tl_publisher_wanted(&d->pub, sl->topic, sl->topic_len)) {
            *h = plane;
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

/* ---- the tune command, and the worker's turn ---------------------------------------------- */

/* Ends the tune command: its reply (the sizes, or the failure) goes out through the loop. */
static void job_end(tl_daemon *d)
{
    tl_tuning *t = &d->tuning;
    if (t->job_code != TL_PROTO_OK) {
        msgpack_sbuffer_clear(&t->job_reply);
        msgpack_packer pk = job_packer(t);
        tl_proto_pack_rep_error(&pk, t->job_id, t->job_code, t->job_msg);
        tl_stats_count(&d->stats.request_errors);
    }
    t->job = TL_TUNE_JOB_DONE;
    uv_async_send(&t->job_done); /* control.c sends it from the loop */
}

/* The tune command, while no timing is under way: starts it (QUEUED), begins its next size,
 * or ends it when every size is done or one failed. */
static void job_step(tl_daemon *d)
{
    tl_tuning *t = &d->tuning;
    if (t->job == TL_TUNE_JOB_QUEUED) {
        t->job = TL_TUNE_JOB_RUNNING;
        t->job_next = 0;
        t->job_code = TL_PROTO_OK;
        t->job_msg[0] = '\0';
        msgpack_sbuffer_clear(&t->job_reply);
        msgpack_packer pk = job_packer(t);
        tl_proto_begin_rep_ok(&pk, t->job_id);
        msgpack_pack_map(&pk, 1);
        tl_proto_pack_cstr(&pk, "sizes");
        msgpack_pack_array(&pk, (size_t)t->job_n);
    }
    while (!t->task && t->job_code == TL_PROTO_OK && t->job_next < t->job_n) {
        uint32_t h = t->job_dims[t->job_next][0], w = t->job_dims[t->job_next][1];
        t->job_next++;
        tl_tune_size *ts = find_size(t, h, w);
        if (atomic_load(&d->worker_stop)) {
            t->job_code = TL_PROTO_E_STATE;
            snprintf(t->job_msg, sizeof t->job_msg, "the daemon is stopping");
        } else if (!d->scan.open) {
            t->job_code = TL_PROTO_E_STATE;
            snprintf(t->job_msg, sizeof t->job_msg,
                     "no scan is open (it went before tuning was done)");
        } else if (!ts && !(ts = add_size(t, h, w))) {
            t->job_code = TL_PROTO_E_RESOURCE;
            snprintf(t->job_msg, sizeof t->job_msg,
                     "the engine keeps kernel choices for at most %d slice sizes",
                     TL_TUNE_MAX_SIZES);
        } else {
            begin(d, (int)(ts - t->sizes), true);
        }
    }
    if (!t->task)
        job_end(d);
}

void tl_tuning_turn(tl_daemon *d)
{
    tl_tuning *t = &d->tuning;
    /* one timing at a time; what else is resolved now (cache, one candidate, off) is
     * settled at once */
    for (;;) {
        if (atomic_load(&d->worker_stop))
            return;
        if (t->task) {
            tune_task *task = t->task;
            if (!task_done(task))
                return; /* the frames go on; its end pokes the worker */
            t->task = NULL;
            finish(d, t->task_size, t->task_job, task, &task->shape, &task->tune, task->t0, "");
            task_release(task);
            continue;
        }
        if (t->job == TL_TUNE_JOB_QUEUED || t->job == TL_TUNE_JOB_RUNNING) {
            job_step(d);
            if (t->task)
                return;
            continue;
        }
        uint32_t h, w;
        if (!d->scan.open || !next_unresolved(d, &h, &w))
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
        begin(d, (int)(ts - t->sizes), false);
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
