/* volume_pipeline.c — see volume_pipeline.h.
 *
 * The hand-offs are two slots each way with a state and the slab they hold, under one
 * mutex; waits are timed (50 ms) so a stop request, which a signal handler can only set
 * as a flag, is noticed without one. The first error stops every thread and is the one
 * reported.
 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clients/cli.h"
#include "clients/volume_pipeline.h"

#define READ_FRAMES TL_VOLUME_READ_FRAMES

typedef struct {
    int slab; /* the slab it holds, -1: free */
} slot;

typedef struct {
    const tl_volume_job *job;
    tl_engine *engine;
    tl_engine_config cfg; /* the engine's (rows: E; bands: re-based per slab) */
    bool whole;           /* whole frames: filled once, the slabs cut the output */
    bool bands;           /* cone beam: each slab's engine holds its band of rows */
    bool fresh;           /* a new engine per slab (ring removal, bands: volume_pipeline.h) */
    uint32_t H, nslabs, frames;
    uint32_t E;             /* the engine's rows: H, the frame's (whole), or the plan's band */
    double (*matrices)[12]; /* bands of given cone-beam matrices: the re-based copies */
    size_t frame_bytes;     /* E rows of one frame, in the engine's dtype */
    size_t ds;
    void *in[2];
    float *out[2];
    float *volume; /* cone-beam iterative: the whole volume, one problem (solve_volume) */
    slot ins[2], outs[2];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool failed, stopped;
    char err[1024];
    tl_volume_times *t;
    tl_progress progress;
} pipeline;

static void set_error(pipeline *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(pipeline *p, const char *fmt, ...)
{
    pthread_mutex_lock(&p->mu);
    if (!p->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err, sizeof p->err, fmt, ap);
        va_end(ap);
        p->failed = true;
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Whether to go on (no error, no stop); call with mu held or not. */
static bool going(pipeline *p)
{
    if (p->job->stop && *p->job->stop)
        p->stopped = true;
    return !p->failed && !p->stopped;
}

/* Waits until s->slab == want (want -1: free); false when the run ends first. */
static bool wait_slot(pipeline *p, slot *s, int want)
{
    pthread_mutex_lock(&p->mu);
    while (s->slab != want && going(p)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    bool ok = s->slab == want && going(p);
    pthread_mutex_unlock(&p->mu);
    return ok;
}

static void set_slot(pipeline *p, slot *s, int v)
{
    pthread_mutex_lock(&p->mu);
    s->slab = v;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Slab k: rows [z0, z0 + h) of the volume. */
static void slab_rows(const pipeline *p, uint32_t k, uint32_t *z0, uint32_t *h)
{
    const tl_volume_job *j = p->job;
    *z0 = j->first_row + k * p->H;
    uint32_t left = j->rows - *z0;
    *h = left < p->H ? left : p->H;
}

/* The detector rows read for slab k: [*first, *first + *rows). Parallel beam: the slab's
 * own (the engine's further rows get what follows in the buffer: nobody reads them);
 * bands: the engine's E rows where volume_bands.h places them. */
static void slab_band(const pipeline *p, uint32_t k, uint32_t *first, uint32_t *rows)
{
    const tl_volume_job *j = p->job;
    uint32_t z0, h;
    slab_rows(p, k, &z0, &h);
    *first = p->bands ? tl_volume_bands_first(j->bands, z0, h, p->E) : j->row0 + z0;
    *rows = p->bands ? p->E : h;
}

/* ---- reader --------------------------------------------------------------------------- */

static void *reader(void *arg)
{
    pipeline *p = arg;
    const tl_volume_job *j = p->job;
    char err[1024];
    for (uint32_t k = 0; k < p->nslabs; k++) {
        if (!wait_slot(p, &p->ins[k % 2], -1))
            return NULL;
        uint32_t first, rows;
        slab_band(p, k, &first, &rows);
        double t0 = tl_cli_now();
        uint8_t *dst = p->in[k % 2];
        size_t band = (size_t)rows * j->engine.cols * p->ds; /* compact: the band per frame */
        for (int kind = 0; kind < 3; kind++)
            for (uint32_t f = 0; f < j->count[kind]; f += READ_FRAMES) {
                uint32_t n = j->count[kind] - f < READ_FRAMES ? j->count[kind] - f : READ_FRAMES;
                if (!going(p))
                    return NULL;
                if (j->read(j->ctx, (tl_frame_kind)kind, f, n, first, rows, dst, err,
                            sizeof err) != 0) {
                    set_error(p, "%s", err);
                    return NULL;
                }
                dst += n * band;
            }
        p->t->read += tl_cli_now() - t0;
        p->t->bytes_read += (uint64_t)p->frames * band;
        set_slot(p, &p->ins[k % 2], (int)k);
    }
    return NULL;
}

/* ---- writer --------------------------------------------------------------------------- */

static void *writer(void *arg)
{
    pipeline *p = arg;
    const tl_volume_job *j = p->job;
    char err[1024];
    for (uint32_t k = 0; k < p->nslabs; k++) {
        if (!wait_slot(p, &p->outs[k % 2], (int)k))
            return NULL;
        uint32_t z0, h;
        slab_rows(p, k, &z0, &h);
        /* the hook times itself (recon --grid: its wait and its reduction apart) */
        if (j->combine && j->combine(j->combine_ctx, p->out[k % 2], (size_t)h * j->size * j->size,
                                     err, sizeof err) != 0) {
            set_error(p, "%s", err);
            return NULL;
        }
        double t0 = tl_cli_now();
        if (j->out && tl_volume_output_write(j->out, z0, h, p->out[k % 2], err, sizeof err) != 0) {
            set_error(p, "%s", err);
            return NULL;
        }
        p->t->write += tl_cli_now() - t0;
        p->t->bytes_written += (uint64_t)h * j->size * j->size *
                               (j->out ? tl_out_dtype_size(j->out->spec.dtype) : sizeof(float));
        p->t->slabs = k + 1;
        p->t->rows = z0 + h - j->first_row;
        tl_progress_slab(&p->progress, k + 1, z0 + h, p->t->bytes_read, p->t->bytes_written);
        set_slot(p, &p->outs[k % 2], -1);
    }
    return NULL;
}

/* ---- the engine's thread -------------------------------------------------------------- */

static int engine_fail(pipeline *p, const char *what, tl_status st)
{
    set_error(p, "%s: %s (%s)", what, tl_engine_last_error(p->engine), tl_status_name(st));
    return -1;
}

static const char *kind_name(int kind)
{
    return kind == TL_FRAME_DARK ? "dark" : kind == TL_FRAME_FLAT ? "flat" : "projection";
}

/* Slices z_first .. z_first + h - 1 of the engine into ids. */
static tl_status add_slices(tl_engine *e, uint32_t z_first, uint32_t h, uint32_t size, int *ids)
{
    tl_status st = TL_OK;
    for (uint32_t z = 0; st == TL_OK && z < h; z++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, (double)(z_first + z), size, size);
        st = tl_engine_add_slice(e, &s, &ids[z]);
    }
    return st;
}

/* Reads and submits rows [row0, row0 + rows) of every frame through buf (READ_FRAMES frames
 * of rows x cols) to engine e, a chunk at a time, flushed after each so buf can be
 * refilled: the whole-frame fill and the centre's pass. 0 done, 1 stopped, -1 failed
 * (err). */
static int fill_engine(tl_engine *e, const tl_volume_job *j, uint32_t row0, uint32_t rows,
                       void *buf, tl_volume_times *t, char *err, size_t errlen)
{
    size_t frame = (size_t)rows * j->engine.cols * tl_dtype_size(j->engine.dtype);
    tl_status st;
    for (int kind = 0; kind < 3; kind++)
        for (uint32_t f = 0; f < j->count[kind]; f += READ_FRAMES) {
            uint32_t n = j->count[kind] - f < READ_FRAMES ? j->count[kind] - f : READ_FRAMES;
            if (j->stop && *j->stop)
                return 1;
            double t0 = tl_cli_now();
            if (j->read(j->ctx, (tl_frame_kind)kind, f, n, row0, rows, buf, err, errlen) != 0)
                return -1;
            double t1 = tl_cli_now();
            t->read += t1 - t0;
            t->bytes_read += n * frame;
            for (uint32_t i = 0; i < n; i++) {
                bool proj = kind == TL_FRAME_PROJ;
                uint32_t q = f + i;
                tl_frame fr = {
                    .kind = (tl_frame_kind)kind,
                    .index = proj ? (j->indices ? j->indices[q] : q) : 0,
                    .angle = proj && j->angles ? j->angles[q] : 0.0,
                    .dtype = j->engine.dtype,
                    .rows = rows,
                    .cols = j->engine.cols,
                    .pitch = (size_t)j->engine.cols * tl_dtype_size(j->engine.dtype),
                    .data = (const uint8_t *)buf + i * frame,
                    .memory = TL_MEMORY_HOST,
                    .pinned = true,
                    .more = proj && i + 1 < n,
                };
                if ((st = tl_engine_submit(e, &fr)) != TL_OK) {
                    snprintf(err, errlen, "%s %u: %s (%s)", kind_name(kind), q,
                             tl_engine_last_error(e), tl_status_name(st));
                    return -1;
                }
            }
            if ((st = tl_engine_flush(e)) != TL_OK) { /* then buf is free again */
                snprintf(err, errlen, "flush: %s (%s)", tl_engine_last_error(e),
                         tl_status_name(st));
                return -1;
            }
            t->submit += tl_cli_now() - t1;
        }
    return 0;
}

/* The configuration of slab k's engine: the run's, or re-based to the slab's band. */
static tl_status slab_config(pipeline *p, uint32_t k, tl_engine_config *c)
{
    if (!p->bands) {
        *c = p->cfg;
        return TL_OK;
    }
    uint32_t first, rows;
    slab_band(p, k, &first, &rows);
    return tl_engine_config_band(&p->job->engine, first, rows, p->matrices, c);
}

/* Slab k's slices in its engine's heights: the first and how many. Parallel beam: all H
 * of the engine's rows (made once, reconstructed as far as the slab goes); bands: the
 * slab's own, re-based to its band. */
static void slab_slices(const pipeline *p, uint32_t k, uint32_t *z_first, uint32_t *count)
{
    uint32_t z0, h, first, rows;
    slab_rows(p, k, &z0, &h);
    slab_band(p, k, &first, &rows);
    *z_first = p->bands ? p->job->row0 + z0 - first : 0;
    *count = p->bands ? h : p->H;
}

/* A new engine for slab k with its slices; the first failure is the run's error. */
static int make_engine(pipeline *p, uint32_t k, int *ids)
{
    tl_engine_config c;
    tl_status st = slab_config(p, k, &c);
    if (st == TL_OK)
        st = tl_engine_create(&c, &p->engine);
    if (st != TL_OK) {
        set_error(p, "slab %u: cannot create the engine: %s (%s)", k, tl_engine_last_error(NULL),
                  tl_status_name(st));
        return -1;
    }
    uint32_t z_first, count;
    slab_slices(p, k, &z_first, &count);
    if (p->whole) /* whole frames: each slab adds its own */
        return 0;
    if ((st = add_slices(p->engine, z_first, count, p->job->size, ids)) != TL_OK)
        return engine_fail(p, "slices", st);
    return 0;
}

/* Empties the engine for slab k: a reset, or a new engine with its slices (fresh). */
static int renew_engine(pipeline *p, uint32_t k, int *ids)
{
    tl_status st;
    if (!p->fresh || k == 0) {
        if ((st = tl_engine_reset(p->engine)) != TL_OK)
            return engine_fail(p, "reset", st);
        return 0;
    }
    tl_engine_destroy(p->engine);
    p->engine = NULL;
    return make_engine(p, k, ids);
}

/* Submits slab k's frames (darks, flats, projections) from input buffer k % 2. */
static int submit_slab(pipeline *p, uint32_t k, int *ids)
{
    const tl_volume_job *j = p->job;
    tl_status st;
    if (renew_engine(p, k, ids) != 0)
        return -1;
    const uint8_t *src = p->in[k % 2];
    uint32_t first, rows;
    slab_band(p, k, &first, &rows);
    size_t band = (size_t)rows * j->engine.cols * p->ds;
    uint32_t left = p->frames;
    for (int kind = 0; kind < 3; kind++)
        for (uint32_t i = 0; i < j->count[kind]; i++, src += band) {
            if ((i & 63) == 0 && !going(p))
                return -1;
            bool proj = kind == TL_FRAME_PROJ;
            tl_frame f = {
                .kind = (tl_frame_kind)kind,
                .index = proj ? (j->indices ? j->indices[i] : i) : 0,
                .angle = proj && j->angles ? j->angles[i] : 0.0,
                .dtype = j->engine.dtype,
                .rows = p->E, /* past the band: the next frames' rows, or the buffer's zeros */
                .cols = j->engine.cols,
                .pitch = (size_t)j->engine.cols * p->ds,
                .data = src,
                .memory = TL_MEMORY_HOST,
                .pinned = true,
                .more = --left > 0 && proj,
            };
            if ((st = tl_engine_submit(p->engine, &f)) != TL_OK) {
                char what[64];
                snprintf(what, sizeof what, "slab %u, %s %u", k, kind_name(kind), i);
                return engine_fail(p, what, st);
            }
        }
    if ((st = tl_engine_flush(p->engine)) != TL_OK)
        return engine_fail(p, "flush", st);
    return 0;
}

/* Adds a problem of `slices` slices that ran `done` iterations (residual after each in res)
 * to the summary; `row`, its first slice's volume row, keeps the middle row's curve. */
static void record_iterations(pipeline *p, uint32_t row, uint32_t slices, uint32_t done,
                              const double *res)
{
    tl_volume_iterative *s = &p->t->iterative;
    if (done == 0)
        return;
    double last = res[done - 1];
    s->min_iterations = s->slices == 0 || done < s->min_iterations ? done : s->min_iterations;
    s->max_iterations = done > s->max_iterations ? done : s->max_iterations;
    s->residual_sum += last * slices;
    s->residual_max = last > s->residual_max ? last : s->residual_max;
    s->slices += slices;
    if (s->middle_row >= row && s->middle_row < row + slices) {
        s->ncurve = done < TL_VOLUME_CURVE ? done : TL_VOLUME_CURVE;
        memcpy(s->curve, res, s->ncurve * sizeof *res);
    }
}

/* Slices ids[0..n) (from volume row `row`) iteratively as one problem into out, from
 * out's image when `start` (their FBP), else from zeros; the residuals into the summary. */
static int iterate_slices(pipeline *p, uint32_t row, const int *ids, uint32_t n, bool start,
                          float *out)
{
    const tl_volume_job *j = p->job;
    uint32_t iterations = j->iterative->iterations, done;
    double stack[TL_VOLUME_CURVE];
    double *res = iterations <= TL_VOLUME_CURVE ? stack : malloc(iterations * sizeof *res);
    if (!res) {
        set_error(p, "out of memory for %u residuals", iterations);
        return -1;
    }
    tl_status st = tl_engine_iterate(p->engine, ids, n, j->iterative, start ? out : NULL, out, res,
                                     &done, NULL);
    if (st == TL_OK)
        record_iterations(p, row, n, done, res);
    if (res != stack)
        free(res);
    if (st != TL_OK) {
        char what[96];
        if (n == 1)
            snprintf(what, sizeof what, "iterative reconstruction of row %u", j->row0 + row);
        else
            snprintf(what, sizeof what, "iterative reconstruction of rows %u..%u as one problem",
                     j->row0 + row, j->row0 + row + n - 1);
        return engine_fail(p, what, st);
    }
    return 0;
}

#define SOLVE_BATCH 256 /* slices per FDK call of the cone-beam start */

/* Whether iterative slices start from their FBP (FDK): recon filters the window only for
 * --start fbp (the measurements then kept beside it), else it holds them unfiltered. */
static bool fbp_start(const pipeline *p)
{
    return p->cfg.filter != TL_FILTER_NONE;
}

/* Cone beam: every ray crosses every slice, so the volume is one problem, solved into
 * p->volume before the first slab (the engine holds whole frames); the slabs then cut
 * it out. Resuming solves it whole again: the written slices are part of the problem. */
static int solve_volume(pipeline *p)
{
    const tl_volume_job *j = p->job;
    const size_t npx = (size_t)j->size * j->size;
    const bool start = fbp_start(p);
    int *ids = malloc(j->rows * sizeof *ids);
    if (!ids) {
        set_error(p, "out of memory");
        return -1;
    }
    double t0 = tl_cli_now();
    tl_status st = add_slices(p->engine, j->row0, j->rows, j->size, ids);
    const bool added = st == TL_OK;
    int rc = added ? 0 : engine_fail(p, "slices", st);
    for (uint32_t z = 0; rc == 0 && start && z < j->rows; z += SOLVE_BATCH) {
        uint32_t m = j->rows - z < SOLVE_BATCH ? j->rows - z : SOLVE_BATCH;
        float *outs[SOLVE_BATCH];
        for (uint32_t i = 0; i < m; i++)
            outs[i] = p->volume + (size_t)(z + i) * npx;
        if ((st = tl_engine_reconstruct(p->engine, ids + z, m, outs, NULL)) != TL_OK)
            rc = engine_fail(p, "the FDK start", st);
    }
    if (rc == 0 && going(p))
        rc = iterate_slices(p, 0, ids, j->rows, start, p->volume);
    for (uint32_t z = 0; added && z < j->rows; z++)
        tl_engine_remove_slice(p->engine, ids[z]);
    free(ids);
    snprintf(p->t->kernel, sizeof p->t->kernel, "%s (iterative, one problem)",
             tl_iter_method_name(j->iterative->method));
    p->t->backproject += tl_cli_now() - t0;
    return rc == 0 && going(p) ? 0 : -1;
}

static int backproject_slab(pipeline *p, uint32_t k, uint32_t h, const int *ids)
{
    const tl_volume_job *j = p->job;
    if (p->volume) { /* solved before the first slab */
        uint32_t z0, rows;
        slab_rows(p, k, &z0, &rows);
        size_t npx = (size_t)j->size * j->size;
        memcpy(p->out[k % 2], p->volume + (size_t)z0 * npx, (size_t)h * npx * sizeof(float));
        return 0;
    }
    if (j->iterative) {
        uint32_t z0, rows;
        slab_rows(p, k, &z0, &rows);
        size_t npx = (size_t)j->size * j->size;
        for (uint32_t z = 0; z < h; z++) {
            if (!going(p))
                return -1;
            float *out = p->out[k % 2] + (size_t)z * npx;
            bool start = fbp_start(p);
            tl_status st =
                start ? tl_engine_reconstruct(p->engine, &ids[z], 1, &out, NULL) : TL_OK;
            if (st != TL_OK)
                return engine_fail(p, "the FBP start", st);
            if (iterate_slices(p, z0 + z, &ids[z], 1, start, out) != 0)
                return -1;
        }
        if (!p->t->kernel[0])
            snprintf(p->t->kernel, sizeof p->t->kernel, "%s (iterative)",
                     tl_iter_method_name(j->iterative->method));
        return 0;
    }
    size_t npx = (size_t)j->size * j->size;
    uint32_t batch = j->plan->batch;
    float *outs[4096];
    tl_slice_info info[4096];
    if (batch > 4096)
        batch = 4096;
    for (uint32_t z = 0; z < h; z += batch) {
        if (!going(p))
            return -1;
        uint32_t m = h - z < batch ? h - z : batch;
        for (uint32_t i = 0; i < m; i++)
            outs[i] = p->out[k % 2] + (size_t)(z + i) * npx;
        tl_status st = tl_engine_reconstruct(p->engine, ids + z, m, outs, info);
        if (st != TL_OK)
            return engine_fail(p, "reconstruction", st);
        if (!p->t->kernel[0] && info[0].kernel)
            snprintf(p->t->kernel, sizeof p->t->kernel, "%s", info[0].kernel);
    }
    return 0;
}

static void run_engine(pipeline *p, int *ids)
{
    const tl_volume_job *j = p->job;
    if (p->volume && solve_volume(p) != 0)
        return;
    for (uint32_t k = 0; k < p->nslabs; k++) {
        uint32_t z0, h;
        slab_rows(p, k, &z0, &h);
        if (!p->whole) { /* whole frames: the engine was filled once, before the slabs */
            if (!wait_slot(p, &p->ins[k % 2], (int)k))
                return;
            double t0 = tl_cli_now();
            if (submit_slab(p, k, ids) != 0)
                return;
            p->t->submit += tl_cli_now() - t0;
            set_slot(p, &p->ins[k % 2], -1); /* the engine holds the frames now */
        }
        if (!wait_slot(p, &p->outs[k % 2], -1))
            return;
        double t1 = tl_cli_now();
        tl_status st;
        const bool slab_slices = p->whole && !p->volume;
        if (slab_slices && (st = add_slices(p->engine, j->row0 + z0, h, j->size, ids)) != TL_OK) {
            engine_fail(p, "slices", st);
            return;
        }
        int rc = backproject_slab(p, k, h, ids);
        for (uint32_t z = 0; slab_slices && z < h; z++)
            tl_engine_remove_slice(p->engine, ids[z]);
        if (rc != 0)
            return;
        p->t->backproject += tl_cli_now() - t1;
        set_slot(p, &p->outs[k % 2], (int)k);
    }
}

/* ---- budgets ------------------------------------------------------------------------- */

size_t tl_volume_engine_bytes(void *ctx, uint32_t rows)
{
    tl_volume_engine_cost *ec = ctx;
    tl_engine_config c = ec->c;
    c.rows = rows;
    tl_memory_estimate m;
    tl_status st = tl_engine_estimate(&c, &m);
    if (st != TL_OK && !ec->failed) {
        ec->failed = true;
        snprintf(ec->why, sizeof ec->why, "%s (%s)", tl_engine_last_error(NULL),
                 tl_status_name(st));
    }
    return st == TL_OK ? m.total_bytes : SIZE_MAX / 4;
}

size_t tl_volume_host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (size_t)kb * 1024;
}

/* ---- the centre, before the run -------------------------------------------------------- */

int tl_volume_center(const tl_volume_job *j, uint32_t row0, uint32_t rows, tl_center_estimate *out,
                     char *err, size_t errlen)
{
    tl_engine_config c = j->engine;
    if (j->whole_frames)
        row0 = 0, rows = c.rows;
    c.rows = rows;
    c.center_estimate = true;
    c.center_auto = false; /* with half acquisition, c.center (the middle) is a first guess:
                              the estimator reads the real detector's columns only */
    tl_engine *e = NULL;
    void *buf = NULL;
    char why[256];
    size_t bytes = (size_t)READ_FRAMES * rows * c.cols * tl_dtype_size(c.dtype);
    tl_volume_times t;
    memset(&t, 0, sizeof t);
    int rc = -1;
    tl_status st = tl_engine_create(&c, &e);
    if (st != TL_OK)
        snprintf(err, errlen, "cannot create the engine: %s (%s)", tl_engine_last_error(NULL),
                 tl_status_name(st));
    else if ((st = tl_host_alloc(c.backend, bytes, &buf, why, sizeof why)) != TL_OK)
        snprintf(err, errlen, "cannot allocate %zu MiB of host buffers: %s", bytes >> 20, why);
    else if ((rc = fill_engine(e, j, row0, rows, buf, &t, err, errlen)) == 0 &&
             (st = tl_engine_center_estimate_now(e, out)) != TL_OK) {
        snprintf(err, errlen, "%s (%s)", tl_engine_last_error(e), tl_status_name(st));
        rc = -1;
    }
    if (rc > 0)
        snprintf(err, errlen, "interrupted");
    if (buf)
        tl_host_free(c.backend, buf);
    tl_engine_destroy(e);
    return rc;
}

/* ---- setup ---------------------------------------------------------------------------- */

tl_volume_result tl_volume_run(const tl_volume_job *j, tl_volume_times *t, char *err,
                               size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->iterative.middle_row = j->rows / 2;
    if (j->first_row >= j->rows) /* resumed after the last slab: nothing left */
        return TL_VOLUME_DONE;
    double t0 = tl_cli_now();
    pipeline p;
    memset(&p, 0, sizeof p);
    p.job = j;
    p.t = t;
    p.H = j->plan->slab_rows;
    p.nslabs = (j->rows - j->first_row + p.H - 1) / p.H;
    p.frames = j->count[0] + j->count[1] + j->count[2];
    p.ds = tl_dtype_size(j->engine.dtype);
    p.whole = j->whole_frames;
    p.bands = !p.whole && j->bands;
    p.fresh = p.bands || (!p.whole && j->engine.corr.rings != TL_RINGS_NONE);
    p.E = p.whole ? j->engine.rows : p.bands ? j->plan->engine_rows : p.H;
    p.frame_bytes = (size_t)p.E * j->engine.cols * p.ds;
    p.ins[0].slab = p.ins[1].slab = p.outs[0].slab = p.outs[1].slab = -1;
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);

    tl_engine_config c = j->engine;
    c.rows = p.bands ? j->engine.rows : p.E; /* bands: re-based per slab (slab_config) */
    p.cfg = c;
    int *ids = calloc(p.H, sizeof *ids);
    if (p.bands && c.cone.matrices)
        p.matrices = malloc(c.cone.nmatrices * sizeof *p.matrices);
    tl_status st = TL_ENOMEM;
    if (ids && (!c.cone.matrices || !p.bands || p.matrices)) /* the engine and its slices */
        st = make_engine(&p, 0, ids) == 0 ? TL_OK : TL_EINVAL;
    /* a slab's band of every frame + one frame of slack; whole frames: one read's chunk */
    size_t in_bytes =
        p.whole ? READ_FRAMES * p.frame_bytes : p.frames * p.frame_bytes + p.frame_bytes;
    size_t out_bytes = (size_t)p.H * j->size * j->size * sizeof(float);
    char why[256] = "";
    if (st == TL_ENOMEM)
        snprintf(p.err, sizeof p.err, "out of memory");
    if (st == TL_OK && j->iterative && c.geometry == TL_GEOMETRY_CONE) { /* solve_volume */
        size_t bytes = (size_t)j->rows * j->size * j->size * sizeof(float);
        if (!p.whole) {
            st = TL_EINVAL;
            snprintf(p.err, sizeof p.err,
                     "iterative cone beam solves the volume as one problem, from whole "
                     "frames: the engine cannot hold them in the GPU budget");
        } else if (!(p.volume = malloc(bytes))) {
            st = TL_ENOMEM;
            snprintf(p.err, sizeof p.err,
                     "out of host memory for the volume (%.2f GiB), which iterative cone beam "
                     "solves as one problem",
                     bytes / 1073741824.0);
        }
    }
    for (int b = 0; b < 2 && st == TL_OK && ids; b++) {
        void *o = NULL;
        if ((!p.whole || b == 0) &&
            (st = tl_host_alloc(c.backend, in_bytes, &p.in[b], why, sizeof why)) != TL_OK)
            snprintf(p.err, sizeof p.err, "cannot allocate %zu MiB of host buffers: %s",
                     (2 * (in_bytes + out_bytes)) >> 20, why);
        else if ((st = tl_host_alloc(c.backend, out_bytes, &o, why, sizeof why)) != TL_OK)
            snprintf(p.err, sizeof p.err, "cannot allocate %zu MiB of host buffers: %s",
                     (2 * (in_bytes + out_bytes)) >> 20, why);
        else if (p.in[b])
            memset(p.in[b], 0, in_bytes); /* rows past a short slab's end stay finite */
        p.out[b] = o;
    }
    tl_volume_result result = TL_VOLUME_FAILED;
    if (st == TL_OK && ids) {
        tl_engine_state es;
        tl_engine_get_state(p.engine, &es);
        snprintf(t->device, sizeof t->device, "%s (%s)", es.backend, es.device_name);
        if (j->verbose)
            fprintf(stderr, "tomolive recon: engine %s, %u rows per slab, %zu MiB\n", t->device,
                    p.H, es.memory_bytes >> 20);
        t->setup = tl_cli_now() - t0;
        double w0 = tl_cli_now();
        tl_progress_start(&p.progress, j->progress, p.nslabs, j->rows);
        int filled = p.whole && p.nslabs > 0
                         ? fill_engine(p.engine, j, 0, p.E, p.in[0], t, p.err, sizeof p.err)
                         : 0;
        p.failed = filled < 0;
        p.stopped = filled > 0;
        pthread_t rt, wt;
        bool have_r = !p.whole && filled == 0 && pthread_create(&rt, NULL, reader, &p) == 0;
        bool have_w =
            (have_r || (p.whole && filled == 0)) && pthread_create(&wt, NULL, writer, &p) == 0;
        if (have_w)
            run_engine(&p, ids);
        else if (filled == 0)
            set_error(&p, "cannot start the reader and writer threads");
        if (have_r)
            pthread_join(rt, NULL);
        if (have_w)
            pthread_join(wt, NULL);
        t->wall = tl_cli_now() - w0;
        tl_progress_end(&p.progress);
        result = p.failed ? TL_VOLUME_FAILED : p.stopped ? TL_VOLUME_STOPPED : TL_VOLUME_DONE;
    }
    if (result != TL_VOLUME_DONE)
        snprintf(err, errlen, "%s", p.failed || !p.stopped ? p.err : "interrupted");
    for (int b = 0; b < 2; b++) {
        if (p.in[b])
            tl_host_free(c.backend, p.in[b]);
        if (p.out[b])
            tl_host_free(c.backend, p.out[b]);
    }
    free(ids);
    free(p.matrices);
    free(p.volume);
    tl_engine_destroy(p.engine);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    return result;
}

void tl_volume_times_print(const tl_volume_times *t, FILE *f)
{
    double wall = t->wall > 1e-9 ? t->wall : 1e-9;
    double sum = t->read + t->submit + t->backproject + t->write;
    fprintf(f, "stage                 |  busy s | GB/s\n");
    fprintf(f, "read (files)          | %7.3f | %.2f\n", t->read,
            t->read > 0 ? t->bytes_read / t->read * 1e-9 : 0.0);
    fprintf(f, "upload+filter         | %7.3f | %.2f\n", t->submit,
            t->submit > 0 ? t->bytes_read / t->submit * 1e-9 : 0.0);
    fprintf(f, "back projection+D2H   | %7.3f |\n", t->backproject);
    fprintf(f, "write (files)         | %7.3f | %.2f\n", t->write,
            t->write > 0 ? t->bytes_written / t->write * 1e-9 : 0.0);
    fprintf(f, "wall (after setup)    | %7.3f | setup %.3f s\n", t->wall, t->setup);
    fprintf(f, "overlap (sum / wall)  | %7.2f |\n", sum / wall);
}
