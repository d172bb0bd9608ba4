/* bench_tomosynthesis.c — `tomolive bench --tomosynthesis`: an iterative tomosynthesis
 * reconstruction (issue #28's target: a digital breast tomosynthesis case of seed 003's
 * size, 10 iterations, within 1 s). The default case is the clinical one of the research
 * notes (anchors-next.md §3): 15 views (seed 003's count) over 50 degrees from a source on
 * an arc, a stationary 2816 x 3584 detector of 0.085 mm pixels 660 mm from the source (the
 * isocentre 20 mm above it), and 171 planes of 803 x 1127 voxels of 0.25 mm parallel to
 * the detector (155 million voxels).
 *
 * One engine (keeping the measurements) gets one smooth frame per view; the stack is then
 * reconstructed --reps times with 1 and with N iterations, wall clock to the host, and
 * the medians printed: the time of N iterations as a user waits for it (set-up included:
 * gathering the measurements, A 1), per iteration, (T_N - T_1) / (N - 1), and N
 * iterations with every iteration's residual (with several subsets a forward pass each).
 * With --gpus the stack is split by volume over the first k of the listed GPUs
 * (gpu/cuda/iterative_cone.cu), a row for each k from 1: the one-GPU row is the run's own
 * baseline.
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/bench_engine.h"
#include "clients/cli.h"
#include "clients/commands.h"
#include "gpu/engine.h"
#include "gpu/geometry/cone.h"

#define ME "tomolive bench --tomosynthesis"
#define MAX_REPS 64
#define MAX_VIEWS 1024
#define MAX_PLANES 4096

static const char usage_text[] =
    "usage: tomolive bench --tomosynthesis [--detector RxC] [--views N] [--span DEG]\n"
    "                                      [--volume PxHxW] [--voxel MM] [--rotating]\n"
    "                                      [--method sirt|os-sart|osem] [--subsets M]\n"
    "                                      [--projector matched|joseph]\n"
    "                                      [--iterations N] [--reps R]\n"
    "                                      [--device N | --gpus LIST] [--backend cuda|cpu]\n"
    "\n"
    "Times an iterative tomosynthesis reconstruction: N views (default 15) over DEG degrees\n"
    "(default 50) from a source on an arc 640 mm from the isocentre, a stationary R x C\n"
    "detector (default 2816x3584) of 0.085 mm pixels 660 mm from the source (--rotating: it\n"
    "turns with the source), and P planes of H x W voxels (default 171x803x1127) of --voxel\n"
    "mm (default 0.25) parallel to the detector around the isocentre. Prints the medians of\n"
    "R runs (default 3) of N iterations (default 10; set-up included), per iteration, and\n"
    "of N iterations with every iteration's residual. --gpus 0,1 splits the stack over the\n"
    "first k of the GPUs listed, a row for each k from 1 (\"all\": every GPU here).\n"
    "Default method: os-sart with 5 subsets, the matched projector.\n";

#define SAD 640.0
#define SDD 660.0
#define PITCH 0.085

typedef struct {
    uint32_t rows, cols, views, planes, height, width;
    double span, voxel;
    tl_tomo_detector detector;
    tl_iter_options it;
    int reps, device;
    tl_bench_gpus gpus; /* --gpus (n = 0: --device alone) */
    tl_backend_kind backend;
} options;

static int parse(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"tomosynthesis", no_argument, NULL, 'T'},
        {"detector", required_argument, NULL, 'D'},
        {"views", required_argument, NULL, 'v'},
        {"span", required_argument, NULL, 'a'},
        {"volume", required_argument, NULL, 'V'},
        {"voxel", required_argument, NULL, 'x'},
        {"rotating", no_argument, NULL, 'R'},
        {"method", required_argument, NULL, 'm'},
        {"subsets", required_argument, NULL, 'u'},
        {"projector", required_argument, NULL, 'p'},
        {"iterations", required_argument, NULL, 'n'},
        {"reps", required_argument, NULL, 'r'},
        {"device", required_argument, NULL, 'd'},
        {"gpus", required_argument, NULL, 'g'},
        {"backend", required_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (options){.rows = 2816,
                   .cols = 3584,
                   .views = 15,
                   .planes = 171,
                   .height = 803,
                   .width = 1127,
                   .span = 50,
                   .voxel = 0.25,
                   .detector = TL_TOMO_STATIONARY,
                   .it = {.method = TL_ITER_OS_SART,
                          .iterations = 10,
                          .subsets = 5,
                          .relaxation = 1.0},
                   .reps = 3,
                   .backend = TL_BACKEND_CUDA};
    optind = 1;
    opterr = 0;
    int c;
    long v;
    double d;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
            case 'T': break;
            case 'D':
                if (sscanf(optarg, "%ux%u", &o->rows, &o->cols) != 2 || o->rows < 1 ||
                    o->cols < 1 || o->rows > 16384 || o->cols > 16384)
                    return tl_cli_fail(ME, 2, "bad --detector '%s': need RxC", optarg);
                break;
            case 'V':
                if (sscanf(optarg, "%ux%ux%u", &o->planes, &o->height, &o->width) != 3 ||
                    o->planes < 1 || o->planes > MAX_PLANES || o->height < 1 || o->width < 1 ||
                    o->height > 16384 || o->width > 16384)
                    return tl_cli_fail(ME, 2, "bad --volume '%s': need PxHxW", optarg);
                break;
            case 'a':
            case 'x':
                if (!tl_cli_double(optarg, &d) || !(d > 0) || (c == 'a' && !(d < 180)))
                    return tl_cli_fail(ME, 2, "bad value '%s' for --%s", optarg,
                                       c == 'a' ? "span (degrees, 0 < DEG < 180)" : "voxel");
                if (c == 'a')
                    o->span = d;
                else
                    o->voxel = d;
                break;
            case 'R': o->detector = TL_TOMO_ROTATING; break;
            case 'p':
                if (!tl_projector_parse(optarg, &o->it.projector))
                    return tl_cli_fail(ME, 2, "bad --projector '%s': matched or joseph", optarg);
                break;
            case 'm':
                if (!tl_iter_method_parse(optarg, &o->it.method) || o->it.method == TL_ITER_SART)
                    return tl_cli_fail(ME, 2, "bad --method '%s': sirt, os-sart or osem", optarg);
                break;
            case 'v':
            case 'u':
            case 'n':
            case 'r':
            case 'd':
                if (!tl_cli_long(optarg,
                                 c == 'd'   ? 0
                                 : c == 'n' ? 2
                                            : 1,
                                 c == 'r'   ? MAX_REPS
                                 : c == 'v' ? MAX_VIEWS
                                            : 65536,
                                 &v))
                    return tl_cli_fail(ME, 2, "bad value '%s' for --%s", optarg,
                                       c == 'v'   ? "views"
                                       : c == 'u' ? "subsets"
                                       : c == 'n' ? "iterations (at least 2)"
                                       : c == 'r' ? "reps"
                                                  : "device");
                if (c == 'v')
                    o->views = (uint32_t)v;
                else if (c == 'u')
                    o->it.subsets = (uint32_t)v;
                else if (c == 'n')
                    o->it.iterations = (uint32_t)v;
                else if (c == 'r')
                    o->reps = (int)v;
                else
                    o->device = (int)v;
                break;
            case 'g': {
                int rc = tl_bench_parse_gpus(ME, optarg, &o->gpus);
                if (rc != 0)
                    return rc;
                break;
            }
            case 'B':
                if (!tl_backend_parse(optarg, &o->backend) || o->backend == TL_BACKEND_AUTO)
                    return tl_cli_fail(ME, 2, "bad --backend '%s': cuda or cpu", optarg);
                break;
            case 'h': fputs(usage_text, stdout); return 0;
            default:
                return tl_cli_fail(ME, 2, "%s '%s' (see " ME " --help)",
                                   c == ':' ? "option needs a value" : "unknown option",
                                   argv[optind - 1]);
        }
    }
    if (o->it.subsets > o->views)
        return tl_cli_fail(ME, 2, "%u subsets of %u views", o->it.subsets, o->views);
    return -1;
}

/* The engine of the scan on k devices (0: --device), holding one smooth frame per view,
 * and its stack of planes. */
static int engine(const options *o, double (*P)[12], uint32_t k, tl_engine **out, int *ids)
{
    tl_cone_tomosynthesis g = {.source = TL_TOMO_ARC,
                               .detector = o->detector,
                               .span = o->span * M_PI / 180,
                               .sad = SAD,
                               .sdd = SDD,
                               .pitch_u = PITCH,
                               .pitch_v = PITCH,
                               .rows = o->rows,
                               .cols = o->cols,
                               .n = o->views};
    tl_errbuf eb;
    if (tl_cone_tomosynthesis_matrices(&g, P, &eb) != TL_OK)
        return tl_cli_fail(ME, 2, "%s", eb.msg);
    double angles[MAX_VIEWS];
    tl_cone_tomosynthesis_angles(&g, angles);
    tl_engine_config c;
    tl_engine_config_init(&c, o->rows, o->cols, o->views);
    c.backend = o->backend;
    c.device = o->device;
    if (k > 0)
        tl_bench_use_gpus(&c, &o->gpus, k);
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.geometry = TL_GEOMETRY_CONE;
    c.cone = (tl_cone_config){.source_origin = SAD,
                              .source_detector = SDD,
                              .pixel_u = PITCH,
                              .pixel_v = PITCH,
                              .matrices = (const double(*)[12])P,
                              .nmatrices = o->views};
    c.keep_measurements = true;
    tl_status st = tl_engine_create(&c, out);
    if (st != TL_OK)
        return tl_cli_fail(ME, 1, "cannot create the engine: %s (%s)", tl_engine_last_error(NULL),
                           tl_status_name(st));
    size_t npx = (size_t)o->rows * o->cols;
    float *frame = malloc(npx * sizeof *frame);
    if (!frame)
        return tl_cli_fail(ME, 1, "out of memory for a %u x %u frame", o->rows, o->cols);
    const double mu = (o->cols - 1) / 2.0, mv = (o->rows - 1) / 2.0, r2 = 0.1 * npx;
    for (uint32_t v = 0; v < o->rows; v++)
        for (uint32_t u = 0; u < o->cols; u++)
            frame[(size_t)v * o->cols + u] =
                (float)exp(-((u - mu) * (u - mu) + (v - mv) * (v - mv)) / r2);
    int rc = 0;
    for (uint32_t view = 0; rc == 0 && view < o->views; view++)
        rc = tl_bench_submit(ME, *out, view, angles[view], o->rows, o->cols, frame, false);
    free(frame);
    /* the planes y = const around the isocentre, in volume units of pitch sad / sdd mm */
    const double unit = PITCH * SAD / SDD, vox = o->voxel / unit;
    const double v0 = (o->rows - 1) / 2.0;
    for (uint32_t j = 0; rc == 0 && j < o->planes; j++) {
        const float pl[9] = {(float)(o->width * vox),
                             0,
                             0,
                             0,
                             0,
                             (float)(o->height * vox),
                             (float)(-0.5 * o->width * vox),
                             (float)((j - (o->planes - 1) / 2.0) * vox),
                             (float)(v0 - 0.5 * o->height * vox)};
        tl_slice_spec s;
        tl_slice_spec_plane(&s, pl, o->height, o->width);
        if (tl_engine_add_slice(*out, &s, &ids[j]) != TL_OK)
            rc = tl_cli_fail(ME, 1, "%s", tl_engine_last_error(*out));
    }
    return rc;
}

/* The median time (ms) of reps runs of n iterations of the stack, with every iteration's
 * residual (residual, n entries) or without (NULL). */
static int time_runs(const options *o, tl_engine *e, const int *ids, uint32_t n, float *stack,
                     double *residual, double *ms)
{
    double t[MAX_REPS];
    tl_iter_options it = o->it;
    it.iterations = n;
    for (int r = 0; r <= o->reps; r++) { /* run 0 warms up */
        uint32_t done;
        double t0 = tl_cli_now();
        tl_status st =
            tl_engine_iterate(e, ids, o->planes, &it, NULL, stack, residual, &done, NULL);
        if (st != TL_OK)
            return tl_cli_fail(ME, 1, "%s (%s)", tl_engine_last_error(e), tl_status_name(st));
        if (r > 0)
            t[r - 1] = (tl_cli_now() - t0) * 1e3;
    }
    *ms = tl_cli_median(t, (size_t)o->reps);
    return 0;
}

int tl_cmd_tomosynthesis_bench(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char why[256] = "";
    if (!tl_backend_available(o.backend, why, sizeof why))
        return tl_cli_fail(ME, 1, "%s", why);
    double(*P)[12] = malloc(o.views * sizeof *P);
    int *ids = malloc(o.planes * sizeof *ids);
    float *stack = malloc((size_t)o.planes * o.height * o.width * sizeof *stack);
    double *residual = malloc(o.it.iterations * sizeof *residual);
    rc = P && ids && stack && residual ? 0 : tl_cli_fail(ME, 1, "out of memory");
    char name[40];
    snprintf(name, sizeof name, o.it.method == TL_ITER_SIRT ? "%s%s" : "%s%s/%u",
             tl_iter_method_name(o.it.method),
             o.it.projector == TL_PROJECTOR_JOSEPH ? " joseph" : "", o.it.subsets);
    double per_one = 0; /* one device's time per iteration: the baseline */
    tl_engine *e = NULL;
    for (uint32_t k = o.gpus.n ? 1 : 0; rc == 0 && k <= o.gpus.n; k++) {
        rc = engine(&o, P, k, &e, ids);
        double t_one = 0, t_n = 0, t_res = 0;
        if (rc == 0)
            rc = time_runs(&o, e, ids, 1, stack, NULL, &t_one);
        if (rc == 0)
            rc = time_runs(&o, e, ids, o.it.iterations, stack, NULL, &t_n);
        if (rc == 0)
            rc = time_runs(&o, e, ids, o.it.iterations, stack, residual, &t_res);
        if (rc == 0 && k <= 1) {
            tl_engine_state es;
            tl_engine_get_state(e, &es);
            printf("\ntomosynthesis: %u views over %.0f deg, %s %ux%u detector, %u planes of "
                   "%ux%u voxels (%.0f M) on %s (medians of %d runs, wall clock, to the host)\n",
                   o.views, o.span, o.detector == TL_TOMO_ROTATING ? "rotating" : "stationary",
                   o.rows, o.cols, o.planes, o.height, o.width,
                   (double)o.planes * o.height * o.width / 1e6, es.device_name, o.reps);
            printf("%-16s | %-9s | %10s | %10s | %16s | %8s | %10s | %22s\n", "method", "devices",
                   "iterations", "total ms", "per iteration ms", "speed-up", "set-up ms",
                   "total with residuals ms");
            printf("-----------------+-----------+------------+------------+------------------+---"
                   "-------+------------+------------------------\n");
        }
        if (rc == 0) {
            char where[64] = "one";
            if (k > 0)
                tl_bench_gpus_label(&o.gpus, k, where, sizeof where);
            double per = (t_n - t_one) / (o.it.iterations - 1);
            per_one = k <= 1 ? per : per_one;
            printf("%-16s | %-9s | %10u | %10.1f | %16.1f | %7.2fx | %10.1f | %22.1f\n", name,
                   where, o.it.iterations, t_n, per, per_one / per, t_one - per, t_res);
            printf("residual after %u iterations: %.4f\n", o.it.iterations,
                   residual[o.it.iterations - 1]);
        }
        tl_engine_destroy(e);
        e = NULL;
    }
    tl_engine_destroy(e);
    free(residual);
    free(P);
    free(ids);
    free(stack);
    return rc;
}
