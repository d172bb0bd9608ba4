/* bench.c — `tomolive bench`: how fast this machine back-projects, kernel by kernel, and
 * how long one detector frame takes through the per-frame pipeline.
 *
 * Each problem (slice size x projections) and slice count gets an engine holding a full
 * window of phantom projections (line integrals, so no -log; the preprocessing is not
 * what is timed), then tl_engine_bench times every kernel able to serve that many row
 * slices. Rates are updates per second (pixels x projections x slices / time, DESIGN.md
 * §4) and every row is compared with a baseline measured in the same run: the standard
 * texture kernel "tex-std" of the same problem and slice count.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli.h"
#include "clients/commands.h"
#include "gpu/engine.h"
#include "gpu/phantom.h"

#define ME "tomolive bench"
#define MAX_SHAPES 16
#define MAX_COUNTS 16
#define MAX_KERNELS 64

static const char usage_text[] =
    "usage: tomolive bench [--backend auto|cpu|cuda] [--device N] [--shape SIZExPROJ ...]\n"
    "                      [--slices 1,2,4] [--reps 20] [--no-pipeline]\n"
    "                      [--pipeline-shape ROWSxCOLS]\n"
    "       tomolive bench --stream ...   the daemon under a stream (--stream --help)\n"
    "\n"
    "Times every back-projection kernel of the backend on SIZE x SIZE row slices from a\n"
    "window of PROJ projections (default 1024x1024 and 2048x2048 on CUDA, 512x720 on the\n"
    "CPU), for each slice count, and the per-frame pipeline on one uint16 frame.\n"
    "\n"
    "      --backend NAME       cpu, cuda or auto (default: cuda when available)\n"
    "      --device N           CUDA device ordinal (default 0)\n"
    "      --shape SIZExPROJ    a problem; repeat for several\n"
    "      --slices LIST        slices reconstructed together (default 1,2,4)\n"
    "      --reps R             timed calls per measurement, after warm-up (default 20)\n"
    "      --no-pipeline        skip the per-frame pipeline\n"
    "      --pipeline-shape RxC detector of the pipeline measurement (default 2048x2048)\n"
    "\n"
    "Exit status: 0 done, 1 failed (no such backend, out of memory, ...), 2 usage error.\n";

typedef struct {
    tl_backend_kind backend;
    int device, reps;
    bool pipeline;
    uint32_t size[MAX_SHAPES], proj[MAX_SHAPES];
    size_t nshapes;
    uint32_t counts[MAX_COUNTS];
    size_t ncounts;
    uint32_t prow, pcol;
} options;

#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)

/* "AxB" with 1 <= A, B <= max. */
static bool parse_pair(const char *s, uint32_t max, uint32_t *a, uint32_t *b)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(s, &end, 10);
    if (end == s || *end != 'x' || *s == '-')
        return false;
    const char *p = end + 1;
    unsigned long y = strtoul(p, &end, 10);
    if (end == p || *end || errno || *p == '-' || x < 1 || y < 1 || x > max || y > max)
        return false;
    *a = (uint32_t)x;
    *b = (uint32_t)y;
    return true;
}

/* "1,2,4". */
static bool parse_counts(const char *s, options *o)
{
    o->ncounts = 0;
    for (const char *p = s;; p++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > 256 || o->ncounts == MAX_COUNTS)
            return false;
        o->counts[o->ncounts++] = (uint32_t)v;
        if (*end == '\0')
            return true;
        if (*end != ',')
            return false;
        p = end;
    }
}

/* ---- back projection ------------------------------------------------------------------ */

/* An engine of `slices` detector rows holding a full window of phantom projections, with
 * one SIZE x SIZE row slice per detector row. */
static int make_engine(const options *o, uint32_t size, uint32_t proj, uint32_t slices,
                       tl_engine **e, int *ids)
{
    tl_engine_config c;
    tl_engine_config_init(&c, slices, size, proj);
    c.backend = o->backend;
    c.device = o->device;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    tl_status st = tl_engine_create(&c, e);
    if (st != TL_OK)
        return fail(1, "cannot create an engine for %ux%u slices from %u projections: %s (%s)",
                    size, size, proj, tl_engine_last_error(NULL), tl_status_name(st));
    tl_phantom ph;
    float *li = malloc((size_t)slices * size * sizeof *li);
    if (!li || tl_phantom_shepp_logan(&ph, 0.45 * size, (slices - 1) / 2.0, 0.45 * size) != 0) {
        free(li);
        return fail(1, "out of memory for the phantom");
    }
    int rc = 0;
    for (uint32_t k = 0; rc == 0 && k < proj; k++) {
        double theta = k * M_PI / proj;
        tl_phantom_project(&ph, theta, c.center, slices, size, li);
        tl_frame f = {.kind = TL_FRAME_PROJ, .index = k, .angle = theta,
                      .dtype = TL_DTYPE_F32, .rows = slices, .cols = size, .data = li};
        if ((st = tl_engine_submit(*e, &f)) != TL_OK)
            rc = fail(1, "projection %u: %s (%s)", k, tl_engine_last_error(*e),
                      tl_status_name(st));
    }
    tl_phantom_free(&ph);
    free(li);
    for (uint32_t z = 0; rc == 0 && z < slices; z++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, z, size, size);
        if ((st = tl_engine_add_slice(*e, &s, &ids[z])) != TL_OK)
            rc = fail(1, "slice %u: %s (%s)", z, tl_engine_last_error(*e), tl_status_name(st));
    }
    return rc;
}

static void print_header(const tl_engine *e, const options *o, bool *printed)
{
    if (*printed)
        return;
    *printed = true;
    tl_engine_state st;
    tl_engine_get_state(e, &st);
    printf("device: %s (backend %s)\n", st.device_name, st.backend);
    printf("time: back projection only, window %s, median of %d calls after warm-up\n",
           o->backend == TL_BACKEND_CPU ? "in host memory (CPU backend)" : "on the device",
           o->reps);
}

/* One problem: a table with a row per kernel and slice count. */
static int bench_problem(const options *o, uint32_t size, uint32_t proj, bool *printed)
{
    int rc = 0;
    bool table = false;
    for (size_t ci = 0; rc == 0 && ci < o->ncounts; ci++) {
        uint32_t n = o->counts[ci];
        int *ids = calloc(n, sizeof *ids);
        tl_engine *e = NULL;
        rc = ids ? make_engine(o, size, proj, n, &e, ids) : fail(1, "out of memory");
        tl_bench_row rows[MAX_KERNELS];
        size_t nk = 0;
        tl_status st = TL_OK;
        if (rc == 0 && (st = tl_engine_bench(e, ids, n, o->reps, rows, MAX_KERNELS, &nk)) !=
                           TL_OK)
            rc = fail(1, "benchmark of %ux%u x %u slices failed: %s (%s)", size, size, n,
                      tl_engine_last_error(e), tl_status_name(st));
        if (rc == 0 && nk == 0)
            rc = fail(1, "no kernel can serve %u row slices of %ux%u", n, size, size);
        if (nk > MAX_KERNELS)
            nk = MAX_KERNELS;
        const tl_bench_row *base = NULL;
        for (size_t k = 0; rc == 0 && k < nk; k++)
            if (!strcmp(rows[k].kernel, "tex-std"))
                base = &rows[k];
        if (rc == 0) {
            print_header(e, o, printed);
            if (!table) {
                printf("\nproblem: %ux%u row slices from %u projections (detector %u columns, "
                       "float32 line integrals)\n", size, size, proj, size);
                if (!base)
                    printf("baseline: n/a (no tex-std kernel on this backend): ratios are to "
                           "the first kernel\n");
                printf("%-16s | %-7s | %-11s | %6s | %6s | %11s | %11s | %10s\n", "kernel",
                       "mode", "slice", "proj", "slices", "ms (median)", "G updates/s",
                       "x baseline");
                printf("-----------------+---------+-------------+--------+--------+--------"
                       "-----+-------------+-----------\n");
                table = true;
            }
            if (!base)
                base = &rows[0];
            double updates = (double)size * size * proj * n;
            for (size_t k = 0; k < nk; k++) {
                char shape[32];
                snprintf(shape, sizeof shape, "%ux%u", size, size);
                printf("%-16s | %-7s | %-11s | %6u | %6u | %11.3f | %11.2f | %10.2f\n",
                       rows[k].kernel, tl_quality_name(rows[k].quality), shape, proj, n,
                       rows[k].ms, updates / (rows[k].ms * 1e-3) * 1e-9,
                       base->ms / rows[k].ms);
            }
            fflush(stdout);
        }
        tl_engine_destroy(e);
        free(ids);
    }
    return rc;
}

/* ---- per-frame pipeline --------------------------------------------------------------- */

static int bench_pipeline(const options *o)
{
    uint32_t R = o->prow, C = o->pcol;
    tl_engine_config c;
    tl_engine_config_init(&c, R, C, 4);
    c.backend = o->backend;
    c.device = o->device;
    c.dtype = TL_DTYPE_U16;
    tl_engine *e;
    tl_status st = tl_engine_create(&c, &e);
    if (st != TL_OK)
        return fail(1, "cannot create the pipeline engine (%ux%u u16): %s (%s)", R, C,
                    tl_engine_last_error(NULL), tl_status_name(st));
    size_t npix = (size_t)R * C;
    uint16_t *frame = malloc(npix * sizeof *frame);
    float *li = malloc(npix * sizeof *li);
    tl_phantom ph;
    int rc = frame && li && tl_phantom_shepp_logan(&ph, 0.45 * C, (R - 1) / 2.0, 0.45 * R) == 0
                 ? 0
                 : fail(1, "out of memory for a %ux%u frame", R, C);
    if (rc == 0) {
        /* a transmissive sample: a few units of attenuation at most */
        tl_phantom_scale_density(&ph, 1.0 / C);
        tl_phantom_project(&ph, 0.3, c.center, R, C, li);
        tl_phantom_free(&ph);
        tl_camera cam;
        tl_camera_init(&cam);
        const tl_sim_kind kinds[3] = {TL_SIM_DARK, TL_SIM_FLAT, TL_SIM_PROJ};
        for (int k = 0; rc == 0 && k < 3; k++) {
            tl_camera_frame_u16(&cam, kinds[k], li, R, C, NULL, frame);
            tl_frame f = {.kind = (tl_frame_kind)k, .index = 0, .angle = 0.3,
                          .dtype = TL_DTYPE_U16, .rows = R, .cols = C, .data = frame};
            double ms = 0;
            st = k < 2 ? tl_engine_submit(e, &f) : tl_engine_bench_store(e, &f, o->reps, &ms);
            if (st != TL_OK)
                rc = fail(1, "pipeline %s: %s (%s)", k < 2 ? "calibration frame" : "benchmark",
                          tl_engine_last_error(e), tl_status_name(st));
            else if (k == 2)
                printf("\nper-frame pipeline %ux%u u16 (%sconvert + correct + filter + store): "
                       "%.3f ms median, %.1f frames/s, %.2f GB/s\n",
                       R, C, o->backend == TL_BACKEND_CUDA ? "upload from pinned memory + " : "",
                       ms, 1e3 / ms, (double)npix * sizeof *frame / (ms * 1e-3) * 1e-9);
        }
    }
    free(frame);
    free(li);
    tl_engine_destroy(e);
    return rc;
}

/* ---- the command ---------------------------------------------------------------------- */

static int parse_options(int argc, char **argv, options *o)
{
    enum { O_BACKEND = 256, O_DEVICE, O_SHAPE, O_SLICES, O_REPS, O_NOPIPE, O_PSHAPE };
    static const struct option longopts[] = {
        {"backend", required_argument, NULL, O_BACKEND},
        {"device", required_argument, NULL, O_DEVICE},
        {"shape", required_argument, NULL, O_SHAPE},
        {"slices", required_argument, NULL, O_SLICES},
        {"reps", required_argument, NULL, O_REPS},
        {"no-pipeline", no_argument, NULL, O_NOPIPE},
        {"pipeline-shape", required_argument, NULL, O_PSHAPE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->reps = 20;
    o->pipeline = true;
    o->counts[0] = 1, o->counts[1] = 2, o->counts[2] = 4, o->ncounts = 3;
    o->prow = o->pcol = 2048;
    optind = 1;
    opterr = 0;
    int c;
    char *end;
    long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_BACKEND:
            if (!tl_backend_parse(optarg, &o->backend))
                return fail(2, "unknown backend '%s' (cpu, cuda, auto)", optarg);
            break;
        case O_DEVICE:
            v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 0 || v > 1024)
                return fail(2, "bad --device '%s': need a device ordinal", optarg);
            o->device = (int)v;
            break;
        case O_SHAPE:
            if (o->nshapes == MAX_SHAPES ||
                !parse_pair(optarg, 65536, &o->size[o->nshapes], &o->proj[o->nshapes]))
                return fail(2, "bad --shape '%s': need SIZExPROJ, e.g. 2048x2048 (at most %d)",
                            optarg, MAX_SHAPES);
            o->nshapes++;
            break;
        case O_SLICES:
            if (!parse_counts(optarg, o))
                return fail(2, "bad --slices '%s': need counts 1..256 like 1,2,4", optarg);
            break;
        case O_REPS:
            v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 1 || v > 100000)
                return fail(2, "bad --reps '%s': need a whole number >= 1", optarg);
            o->reps = (int)v;
            break;
        case O_NOPIPE: o->pipeline = false; break;
        case O_PSHAPE:
            if (!parse_pair(optarg, 65536, &o->prow, &o->pcol))
                return fail(2, "bad --pipeline-shape '%s': need ROWSxCOLS", optarg);
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        default:
            return fail(2, "%s '%s' (see tomolive bench --help)",
                        c == ':' ? "option needs a value" : "unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return fail(2, "unexpected argument '%s' (see tomolive bench --help)", argv[optind]);
    return -1;
}

int tl_cmd_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--stream") == 0)
            return tl_cmd_stream_bench(argc, argv);
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    /* auto is resolved here, so the defaults and the table say which backend ran */
    char why[256] = "";
    if (o.backend == TL_BACKEND_AUTO)
        o.backend = tl_backend_available(TL_BACKEND_CUDA, NULL, 0) ? TL_BACKEND_CUDA
                                                                   : TL_BACKEND_CPU;
    else if (!tl_backend_available(o.backend, why, sizeof why))
        return fail(1, "backend %s is not available: %s", tl_backend_name(o.backend), why);
    if (o.nshapes == 0 && o.backend == TL_BACKEND_CUDA) {
        o.size[0] = o.proj[0] = 1024;
        o.size[1] = o.proj[1] = 2048;
        o.nshapes = 2;
    } else if (o.nshapes == 0) {
        o.size[0] = 512;
        o.proj[0] = 720;
        o.nshapes = 1;
    }
    bool printed = false;
    for (size_t i = 0; rc < 0 && i < o.nshapes; i++)
        if (bench_problem(&o, o.size[i], o.proj[i], &printed) != 0)
            rc = 1;
    if (rc < 0 && o.pipeline && bench_pipeline(&o) != 0)
        rc = 1;
    return rc < 0 ? 0 : rc;
}
