/* tune.c — the autotuner (tune.h): times every kernel the backend has for one shape, for
 * batches of 1, 2 and 4 row slices, and picks per quality mode the lowest-latency kernel
 * and the highest-throughput one.
 *
 * The engine does the timing (tl_engine_bench, "as if the window were full"), so the tuner
 * is backend-agnostic: it only adds slices, sizes the repetitions to a time budget and
 * ranks the rows. The budget works from one calibration pass of single calls: a whole
 * tuning then costs about budget_s on any card and shape, instead of a fixed repetition
 * count that is seconds on a small problem and minutes on a large one.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpu/base/fail.h"
#include "gpu/base/clock.h"
#include "gpu/tune.h"

#define TUNE_DEFAULT_BUDGET_S 15.0
#define TUNE_DEFAULT_MIN_REPS 3
#define TUNE_DEFAULT_MAX_REPS 20
/* Share of the budget the calibration estimate is scaled to: warm-up calls and the
 * calibration pass itself come on top of the timed calls. */
#define TUNE_BUDGET_SHARE 0.8
/* Batch sizes timed, up to the shape's batch. */
static const uint32_t tune_batches[] = {1, 2, 4};
#define TUNE_NBATCHES (sizeof tune_batches / sizeof tune_batches[0])
#define TUNE_MAX_BATCH 4

/* One error buffer per thread for every tl_tune_* call (tune.c and tune_cache.c). */
static _Thread_local tl_errbuf tune_error;

/* Shared with tune_cache.c, which declares it too (no private header for one function). */
tl_errbuf *tl_tune_errbuf(void);
tl_errbuf *tl_tune_errbuf(void)
{
    return &tune_error;
}

const char *tl_tune_last_error(void)
{
    return tune_error.msg;
}

/* The kernel's slices per pass, 0 when the backend does not list it. */
static uint32_t kernel_slices(const tl_kernel_info *k, size_t nk, const char *name)
{
    for (size_t i = 0; i < nk; i++)
        if (strcmp(k[i].name, name) == 0)
            return k[i].slices;
    return 0;
}

/* Times batch b once with reps calls per kernel; appends the rows to r when record. */
static tl_status time_batch(tl_engine *e, const tl_tune_shape *sh, uint32_t b, int reps,
                            bool record, tl_tune_result *r)
{
    uint32_t rows = tl_engine_get_config(e)->rows;
    int ids[TUNE_MAX_BATCH];
    uint32_t added = 0;
    tl_status st = TL_OK;
    /* consecutive rows around the middle, as a batch of a real scan would be */
    uint32_t z0 = (rows - b) / 2;
    for (; added < b; added++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, z0 + added, sh->height, sh->width);
        if ((st = tl_engine_add_slice(e, &s, &ids[added])) != TL_OK) {
            tl_fail(&tune_error, st, "adding a %ux%u row slice: %s", sh->height, sh->width,
                    tl_engine_last_error(e));
            break;
        }
    }
    tl_bench_row bench[TL_TUNE_MAX_ENTRIES];
    size_t n = 0;
    if (st == TL_OK &&
        (st = tl_engine_bench(e, ids, b, reps, bench, TL_TUNE_MAX_ENTRIES, &n)) != TL_OK)
        tl_fail(&tune_error, st, "timing %u slices of %ux%u: %s", b, sh->height, sh->width,
                tl_engine_last_error(e));
    if (st == TL_OK && n > TL_TUNE_MAX_ENTRIES)
        st = tl_fail(&tune_error, TL_EINTERNAL, "the backend timed %zu kernels, more than %d", n,
                     TL_TUNE_MAX_ENTRIES);
    if (st == TL_OK && record) {
        tl_kernel_info k[TL_TUNE_MAX_ENTRIES];
        size_t nk = tl_engine_kernels(e, k, TL_TUNE_MAX_ENTRIES);
        if (nk > TL_TUNE_MAX_ENTRIES)
            nk = TL_TUNE_MAX_ENTRIES;
        double updates = (double)sh->height * sh->width * sh->window * b;
        for (size_t i = 0; st == TL_OK && i < n; i++) {
            if (r->nentries == TL_TUNE_MAX_ENTRIES) {
                st = tl_fail(&tune_error, TL_EINTERNAL, "more than %d timings",
                             TL_TUNE_MAX_ENTRIES);
                break;
            }
            tl_tune_entry *t = &r->entries[r->nentries++];
            snprintf(t->kernel, sizeof t->kernel, "%s", bench[i].kernel);
            t->quality = bench[i].quality;
            t->slices = kernel_slices(k, nk, bench[i].kernel);
            t->batch = b;
            t->ms = bench[i].ms;
            t->updates_per_s = t->ms > 0 ? updates / (t->ms * 1e-3) : 0;
        }
    }
    /* the engine is left as it was found, also after a failure */
    for (uint32_t i = 0; i < added; i++)
        tl_engine_remove_slice(e, ids[i]);
    return st;
}

/* One pass over every batch size; *seconds gets its wall-clock time. */
static tl_status time_all(tl_engine *e, const tl_tune_shape *sh, int reps, bool record,
                          tl_tune_result *r, double *seconds)
{
    uint32_t rows = tl_engine_get_config(e)->rows;
    uint64_t t0 = tl_clock_ns();
    for (size_t i = 0; i < TUNE_NBATCHES; i++) {
        uint32_t b = tune_batches[i];
        if (b > sh->batch || b > rows)
            break;
        tl_status st = time_batch(e, sh, b, reps, record, r);
        if (st != TL_OK)
            return st;
    }
    *seconds = (double)(tl_clock_ns() - t0) * 1e-9;
    return TL_OK;
}

tl_status tl_tune_engine_config(const tl_engine_config *c, uint32_t batch, double (*matrices)[12],
                                tl_engine_config *out)
{
    if (batch == 0)
        return tl_fail(&tune_error, TL_EINVAL, "tune: a timing engine of 0 rows");
    *out = *c;
    out->kernel[0] = '\0';
    if (c->geometry != TL_GEOMETRY_CONE) { /* a row reads its own row: any rows will do */
        out->rows = batch;
        return TL_OK;
    }
    uint32_t rows = batch < c->rows ? batch : c->rows;
    tl_engine_config one = *c;
    one.ndevices = 0; /* a cone engine is one engine on the first device (types.h) */
    one.device = c->ndevices ? c->devices[0] : c->device;
    tl_status st = tl_engine_config_band(&one, (c->rows - rows) / 2, rows, matrices, out);
    if (st != TL_OK)
        return tl_fail(&tune_error, st, "tune: the timing's band of rows: %s",
                       tl_engine_last_error(NULL));
    out->kernel[0] = '\0';
    return TL_OK;
}

tl_status tl_tune_run(tl_engine *e, const tl_tune_shape *shape, const tl_tune_options *opt,
                      tl_tune_result *r)
{
    memset(r, 0, sizeof *r);
    if (!e || !shape)
        return tl_fail(&tune_error, TL_EINVAL, "tl_tune_run: no engine or shape");
    const tl_engine_config *c = tl_engine_get_config(e);
    if (shape->height < 1 || shape->width < 1)
        return tl_fail(&tune_error, TL_EINVAL, "tune: slice of %ux%u pixels", shape->height,
                       shape->width);
    if (shape->batch != 1 && shape->batch != 2 && shape->batch != 4)
        return tl_fail(&tune_error, TL_EINVAL, "tune: batch %u, need 1, 2 or 4", shape->batch);
    if (shape->window != c->window)
        return tl_fail(&tune_error, TL_EINVAL,
                       "tune: the shape's window is %u projections "
                       "but the engine's is %u (the tuner does not resize engines)",
                       shape->window, c->window);
    double budget = opt && opt->budget_s > 0 ? opt->budget_s : TUNE_DEFAULT_BUDGET_S;
    int lo = opt && opt->min_reps > 0 ? opt->min_reps : TUNE_DEFAULT_MIN_REPS;
    int hi = opt && opt->max_reps > 0 ? opt->max_reps : TUNE_DEFAULT_MAX_REPS;
    if (hi < lo)
        hi = lo;

    uint64_t t0 = tl_clock_ns();
    double t1;
    tl_status st = time_all(e, shape, 1, false, r, &t1);
    if (st != TL_OK)
        return st;
    double want = t1 > 0 ? budget / t1 * TUNE_BUDGET_SHARE : hi;
    int reps = want >= hi ? hi : want <= lo ? lo : (int)want;
    double unused;
    if ((st = time_all(e, shape, reps, true, r, &unused)) != TL_OK) {
        r->nentries = 0;
        return st;
    }
    r->shape = *shape;
    r->shape.geometry = tl_engine_get_config(e)->geometry;
    tl_engine_device_id(e, &r->device);
    r->seconds = (double)(tl_clock_ns() - t0) * 1e-9;
    r->when = (int64_t)time(NULL);
    r->reps = reps;
    tl_tune_choose(r);
    return TL_OK;
}

/* Whether entry a beats the best so far for the throughput choice. */
static bool better_batch(const tl_tune_entry *a, const tl_tune_entry *best)
{
    if (!best)
        return true;
    if (a->updates_per_s != best->updates_per_s)
        return a->updates_per_s > best->updates_per_s;
    return a->batch < best->batch;
}

void tl_tune_choose(tl_tune_result *r)
{
    tl_kernel_choice *c = &r->choice;
    memset(c, 0, sizeof *c);
    c->height = r->shape.height;
    c->width = r->shape.width;
    size_t n = r->nentries < TL_TUNE_MAX_ENTRIES ? r->nentries : TL_TUNE_MAX_ENTRIES;
    for (int q = 0; q < TL_QUALITY_COUNT; q++) {
        const tl_tune_entry *single = NULL, *batch = NULL;
        for (size_t i = 0; i < n; i++) {
            const tl_tune_entry *t = &r->entries[i];
            /* a kernel of a stricter mode serves a looser request too */
            if ((int)t->quality > q || (int)t->quality < 0)
                continue;
            if (t->batch == 1 && t->ms > 0 && isfinite(t->ms) && (!single || t->ms < single->ms))
                single = t;
            if (t->updates_per_s > 0 && isfinite(t->updates_per_s) && better_batch(t, batch))
                batch = t;
        }
        if (single)
            snprintf(c->single[q], sizeof c->single[q], "%s", single->kernel);
        if (batch)
            snprintf(c->batch[q], sizeof c->batch[q], "%s", batch->kernel);
    }
}
