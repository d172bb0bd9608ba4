/* tune.c — `tomolive tune`: which back-projection kernel is fastest on this card for a
 * shape, measured by the autotuner (gpu/tune.h) and kept in its cache file.
 *
 * This is the daemon's tuning step run by hand: the same engine setup, the same cache (so
 * tuning here spares the daemon the wait at its next start) and the same choice rule. It
 * prints what the choice rests on: the device the cache entry is keyed by, the ranking of
 * every kernel and batch size with the standard texture kernel of the same batch as the
 * baseline, the choices per quality mode, and the device's micro-benchmarks, which explain
 * a ranking (Chilingaryan et al. 2020, J. Real-Time Image Proc. 17:1331: texture and
 * conversion rates differ between GPU generations; ARCHITECTURE.md §4.3).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clients/bench_engine.h"
#include "clients/cli.h"
#include "clients/commands.h"
#include "clients/cone_opts.h"
#include "gpu/engine.h"
#include "gpu/tune.h"

#define ME "tomolive tune"
#define DEFAULT_SIZE_CUDA 2048 /* a typical detector width */
#define DEFAULT_SIZE_CPU 256   /* small enough to tune in seconds */
#define DEFAULT_BATCH 4
#define DEFAULT_BUDGET_S 15.0
#define MAX_SIZE 65536
#define MAX_WINDOW 1000000
#define MAX_BUDGET_S 3600.0
#define PATH_LEN 4096

static const char usage_text[] =
    "usage: tomolive tune [--backend auto|cpu|cuda] [--device N] [--size N] [--window N]\n"
    "                     [--batch 1|2|4] [--cache PATH | --no-cache] [--force]\n"
    "                     [--budget SECONDS] [--no-rates]\n"
    "                     [--geometry cone --source-origin MM --source-detector MM\n"
    "                      --pixel-size MM[,MM] [--offset U,V] [--rows N]]\n"
    "\n"
    "Times every back-projection kernel of the backend on N x N row slices from a window\n"
    "of projections, for batches of 1, 2 and 4 slices, and prints the ranking and the\n"
    "kernel chosen per quality mode: single (lowest time for one slice) and batch (most\n"
    "updates/s). The result is cached per device, driver, geometry and shape; the daemon\n"
    "reads the same cache. With --geometry cone, the cone-beam kernels on a circular\n"
    "cone-beam scan of the 3-D phantom over a full turn (a detector of --rows rows,\n"
    "default N): the entry a cone-beam scan with N x N slices and that window finds.\n"
    "(Stacks of 32 and more rows take the built-in choice, which this does not time:\n"
    "tomolive bench --cone.)\n"
    "\n"
    "      --backend NAME   cpu, cuda or auto (default: cuda when available)\n"
    "      --device N       CUDA device ordinal (default 0)\n"
    "      --size N         slice side and detector width (default 2048 on CUDA, 256 on\n"
    "                       the CPU)\n"
    "      --window N       projections in the window (default: the size)\n"
    "      --batch B        largest batch of slices: 1, 2 or 4 (default 4)\n"
    "      --cache PATH     the cache file (default $TOMOLIVE_TUNE_CACHE, else\n"
    "                       $XDG_CACHE_HOME/tomolive/tune.json, else\n"
    "                       ~/.cache/tomolive/tune.json)\n"
    "      --no-cache       neither read nor write the cache\n"
    "      --force          tune even when the cache has the shape, then store\n"
    "      --budget S       tuning time to aim for, in seconds (default 15)\n"
    "      --no-rates       skip the micro-benchmarks (texture, conversion, shared memory)\n"
    "      --rows N         cone: detector rows (default: the size)\n" TL_CONE_OPTS_HELP "\n"
    "Exit status: 0 done, 1 failed (no such backend, cache unreadable, ...), 2 usage error.\n";

typedef struct {
    tl_backend_kind backend;
    int device;
    uint32_t size, window, batch; /* 0: the default */
    const char *cache;
    bool no_cache, force, rates;
    double budget;
    tl_cone_opts cone;  /* --geometry cone and its options */
    uint32_t cone_rows; /* --rows (0: the size) */
} options;

#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)

static bool parse_u32(const char *s, uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || *end || errno || *s == '-' || v < 1 || v > max)
        return false;
    *out = (uint32_t)v;
    return true;
}

static int parse_options(int argc, char **argv, options *o)
{
    enum {
        O_BACKEND = 256,
        O_DEVICE,
        O_SIZE,
        O_WINDOW,
        O_BATCH,
        O_CACHE,
        O_NOCACHE,
        O_FORCE,
        O_BUDGET,
        O_NORATES,
        O_ROWS,
        O_CONE /* --geometry and the cone-beam options, by name */
    };
    static const struct option longopts[] = {
        {"backend", required_argument, NULL, O_BACKEND},
        {"device", required_argument, NULL, O_DEVICE},
        {"size", required_argument, NULL, O_SIZE},
        {"window", required_argument, NULL, O_WINDOW},
        {"batch", required_argument, NULL, O_BATCH},
        {"cache", required_argument, NULL, O_CACHE},
        {"no-cache", no_argument, NULL, O_NOCACHE},
        {"force", no_argument, NULL, O_FORCE},
        {"budget", required_argument, NULL, O_BUDGET},
        {"no-rates", no_argument, NULL, O_NORATES},
        {"rows", required_argument, NULL, O_ROWS},
        {"geometry", required_argument, NULL, O_CONE},
        {"source-origin", required_argument, NULL, O_CONE},
        {"source-detector", required_argument, NULL, O_CONE},
        {"pixel-size", required_argument, NULL, O_CONE},
        {"offset", required_argument, NULL, O_CONE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->batch = DEFAULT_BATCH;
    o->budget = DEFAULT_BUDGET_S;
    o->rates = true;
    optind = 1;
    opterr = 0;
    int c, li = -1;
    char *end, why[256];
    long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, &li)) != -1) {
        switch (c) {
            case O_BACKEND:
                if (!tl_backend_parse(optarg, &o->backend))
                    return fail(2, "unknown backend '%s' (cpu, cuda, auto)", optarg);
                break;
            case O_DEVICE:
                if (!tl_cli_long(optarg, 0, 1024, &v))
                    return fail(2, "bad --device '%s': need a device ordinal", optarg);
                o->device = (int)v;
                break;
            case O_SIZE:
                if (!parse_u32(optarg, MAX_SIZE, &o->size))
                    return fail(2, "bad --size '%s': need 1..%d", optarg, MAX_SIZE);
                break;
            case O_WINDOW:
                if (!parse_u32(optarg, MAX_WINDOW, &o->window))
                    return fail(2, "bad --window '%s': need 1..%d", optarg, MAX_WINDOW);
                break;
            case O_BATCH:
                if (!parse_u32(optarg, 4, &o->batch) || o->batch == 3)
                    return fail(2, "bad --batch '%s': need 1, 2 or 4", optarg);
                break;
            case O_CACHE: o->cache = optarg; break;
            case O_NOCACHE: o->no_cache = true; break;
            case O_FORCE: o->force = true; break;
            case O_BUDGET:
                errno = 0;
                o->budget = strtod(optarg, &end);
                if (end == optarg || *end || errno ||
                    !(o->budget > 0 && o->budget <= MAX_BUDGET_S))
                    return fail(2, "bad --budget '%s': need seconds, more than 0 and at most %g",
                                optarg, MAX_BUDGET_S);
                break;
            case O_NORATES: o->rates = false; break;
            case O_ROWS:
                if (!parse_u32(optarg, MAX_SIZE, &o->cone_rows))
                    return fail(2, "bad --rows '%s': need 1..%d", optarg, MAX_SIZE);
                break;
            case O_CONE:
                if (!tl_cone_opt(&o->cone, longopts[li].name, optarg, why, sizeof why))
                    return fail(2, "%s", why);
                break;
            case 'h': fputs(usage_text, stdout); return 0;
            default:
                return fail(2, "%s '%s' (see tomolive tune --help)",
                            c == ':' ? "option needs a value" : "unknown option",
                            argv[optind - 1]);
        }
    }
    if (optind < argc)
        return fail(2, "unexpected argument '%s' (see tomolive tune --help)", argv[optind]);
    if (o->cache && o->no_cache)
        return fail(2, "--cache and --no-cache exclude each other");
    if (!tl_cone_opts_check(&o->cone, false, why, sizeof why))
        return fail(2, "%s", why);
    if (o->cone_rows && !o->cone.cone)
        return fail(2, "--rows is for --geometry cone (parallel beam times %u rows)",
                    DEFAULT_BATCH);
    return -1;
}

/* ---- output ----------------------------------------------------------------------------- */

static const char *or_na(const char *s)
{
    return s[0] ? s : "n/a";
}

static void print_device(const tl_device_id *d, const char *backend)
{
    bool cpu = strcmp(backend, "cpu") == 0;
    printf("device: %s (backend %s)\n", d->name, backend);
    printf("  uuid %s, driver %s, runtime %s, ", d->uuid, or_na(d->driver), or_na(d->runtime));
    if (cpu)
        printf("compute capability n/a, %d threads\n", d->sm_count);
    else
        printf("compute capability %d.%d, %d SMs\n", d->cc_major, d->cc_minor, d->sm_count);
}

static int by_batch_then_ms(const void *pa, const void *pb)
{
    const tl_tune_entry *a = pa, *b = pb;
    if (a->batch != b->batch)
        return a->batch < b->batch ? -1 : 1;
    return (a->ms > b->ms) - (a->ms < b->ms);
}

/* The entry a choice stands for: the kernel's batch-1 row (single) or its row of most
 * updates/s (batch). */
static const tl_tune_entry *chosen(const tl_tune_result *r, const char *kernel, bool single)
{
    const tl_tune_entry *best = NULL;
    for (size_t i = 0; i < r->nentries; i++) {
        const tl_tune_entry *t = &r->entries[i];
        if (strcmp(t->kernel, kernel) != 0 || (single && t->batch != 1))
            continue;
        if (!best || (single ? t->ms < best->ms : t->updates_per_s > best->updates_per_s))
            best = t;
    }
    return best;
}

static void print_ranking(const tl_engine *e, const tl_tune_result *r)
{
    tl_tune_entry sorted[TL_TUNE_MAX_ENTRIES];
    size_t n = r->nentries < TL_TUNE_MAX_ENTRIES ? r->nentries : TL_TUNE_MAX_ENTRIES;
    memcpy(sorted, r->entries, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_batch_then_ms);
    /* the standard texture kernel of the geometry (RTK's kernel_fdk_3Dgrid for cone beam) */
    const char *baseline = r->shape.geometry == TL_GEOMETRY_CONE ? "cone-tex" : "tex-std";
    char x_base[24];
    snprintf(x_base, sizeof x_base, "x %s", baseline);
    printf("\nranking (by batch, fastest first; baseline: %s at the same batch):\n", baseline);
    printf("%-16s | %-7s | %11s | %5s | %11s | %11s | %9s | %s\n", "kernel", "mode", "slices/pass",
           "batch", "ms (median)", "G updates/s", x_base, "params");
    printf("-----------------+---------+-------------+-------+-------------+-------------+----"
           "-------+-------\n");
    for (size_t i = 0; i < n; i++) {
        const tl_tune_entry *t = &sorted[i];
        const tl_tune_entry *base = NULL;
        for (size_t j = 0; j < n; j++)
            if (sorted[j].batch == t->batch && !strcmp(sorted[j].kernel, baseline))
                base = &sorted[j];
        char ratio[32] = "n/a";
        if (base && t->ms > 0)
            snprintf(ratio, sizeof ratio, "%.2f", base->ms / t->ms);
        uint32_t slices;
        const char *params;
        tl_bench_kernel_info(e, t->kernel, &slices, &params);
        printf("%-16s | %-7s | %11u | %5u | %11.3f | %11.2f | %9s | %s\n", t->kernel,
               tl_quality_name(t->quality), t->slices, t->batch, t->ms, t->updates_per_s * 1e-9,
               ratio, params);
    }
}

static void print_choices(const tl_tune_result *r)
{
    printf("\nchoices for %ux%u slices (single: one slice, least time; batch: most "
           "updates/s):\n",
           r->choice.height, r->choice.width);
    printf("%-7s | %-34s | %s\n", "quality", "single", "batch");
    printf("--------+------------------------------------+-----------------------------------"
           "---\n");
    for (int q = 0; q < TL_QUALITY_COUNT; q++) {
        char single[64] = "none", batch[96] = "none";
        const tl_tune_entry *s = chosen(r, r->choice.single[q], true);
        const tl_tune_entry *b = chosen(r, r->choice.batch[q], false);
        if (r->choice.single[q][0] && s)
            snprintf(single, sizeof single, "%s (%.3f ms)", s->kernel, s->ms);
        if (r->choice.batch[q][0] && b)
            snprintf(batch, sizeof batch, "%s (batch %u, %.2f G updates/s)", b->kernel, b->batch,
                     b->updates_per_s * 1e-9);
        printf("%-7s | %-34s | %s\n", tl_quality_name((tl_quality)q), single, batch);
    }
}

/* ---- the command ------------------------------------------------------------------------ */

/* The result for the shape: from the cache, or measured (and stored). */
static int get_result(const options *o, const char *path, tl_engine *e, const tl_tune_shape *sh,
                      tl_tune_result *r)
{
    if (path && !o->force) {
        tl_status st = tl_tune_cache_lookup(path, e, sh, r);
        if (st == TL_OK) {
            char date[64] = "?";
            time_t when = (time_t)r->when;
            struct tm tm;
            if (localtime_r(&when, &tm))
                strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", &tm);
            printf("cached result from %s (measured %s, median of %d calls)\n", path, date,
                   r->reps);
            return 0;
        }
        if (st != TL_ENOTFOUND)
            return fail(1, "%s (%s); use --no-cache, or remove the file", tl_tune_last_error(),
                        tl_status_name(st));
        printf("not cached: %s\n", tl_tune_last_error());
    }
    printf("tuning %ux%u slices, window %u, batches up to %u (budget %g s) ...\n", sh->height,
           sh->width, sh->window, sh->batch, o->budget);
    fflush(stdout);
    tl_tune_options opt = {.budget_s = o->budget};
    tl_status st = tl_tune_run(e, sh, &opt, r);
    if (st != TL_OK)
        return fail(1, "tuning failed: %s (%s)", tl_tune_last_error(), tl_status_name(st));
    /* what the daemon will do with it: the engine must accept the choice */
    if ((st = tl_engine_set_choice(e, &r->choice)) != TL_OK)
        return fail(1, "the engine rejects the choice: %s (%s)", tl_engine_last_error(e),
                    tl_status_name(st));
    printf("tuned in %.1f s, median of %d calls per timing\n", r->seconds, r->reps);
    if (path) {
        if ((st = tl_tune_cache_store(path, r)) != TL_OK)
            return fail(1, "%s (%s)", tl_tune_last_error(), tl_status_name(st));
        printf("stored in %s\n", path);
    }
    return 0;
}

int tl_cmd_tune(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char why[256] = "";
    if (o.backend == TL_BACKEND_AUTO)
        o.backend =
            tl_backend_available(TL_BACKEND_CUDA, NULL, 0) ? TL_BACKEND_CUDA : TL_BACKEND_CPU;
    else if (!tl_backend_available(o.backend, why, sizeof why))
        return fail(1, "backend %s is not available: %s", tl_backend_name(o.backend), why);
    if (!o.size)
        o.size = o.backend == TL_BACKEND_CUDA ? DEFAULT_SIZE_CUDA : DEFAULT_SIZE_CPU;
    if (!o.window)
        o.window = o.size;
    char buf[PATH_LEN];
    const char *path = NULL;
    if (!o.no_cache) {
        path = o.cache ? o.cache : tl_tune_default_path(buf, sizeof buf);
        if (!*path)
            return fail(1, "no cache path: set TOMOLIVE_TUNE_CACHE or HOME, or use --cache "
                           "or --no-cache");
    }

    tl_engine *e = NULL;
    if (o.cone.cone
            ? tl_bench_engine_cone(ME, o.backend, o.device, o.size, o.window,
                                   o.cone_rows ? o.cone_rows : o.size, &o.cone, &e)
            : tl_bench_engine(ME, o.backend, o.device, o.size, o.window, o.batch, &e, NULL))
        return 1;
    tl_engine_state es;
    tl_engine_get_state(e, &es);
    tl_device_id dev;
    tl_engine_device_id(e, &dev);
    print_device(&dev, es.backend);
    fflush(stdout);

    tl_tune_shape sh = {.height = o.size, .width = o.size, .window = o.window, .batch = o.batch};
    tl_tune_result *r = malloc(sizeof *r);
    rc = r ? get_result(&o, path, e, &sh, r) : fail(1, "out of memory");
    if (rc == 0) {
        print_ranking(e, r);
        print_choices(r);
    }
    if (rc == 0 && o.rates) {
        bool unsupported;
        rc = tl_bench_print_rates(ME, e, &unsupported);
        if (rc == 0 && unsupported)
            printf("\nmicro-benchmarks: not available on the %s backend\n", es.backend);
    }
    free(r);
    tl_engine_destroy(e);
    return rc;
}
