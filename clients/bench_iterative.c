/* bench_iterative.c — `tomolive bench --iterative`: iterative reconstruction of one
 * parallel-beam slice (issue #28), against FBP of the same slice in the same run (the
 * issue's target: one SART iteration of a 2048^2 slice from 2048 projections within twice
 * one FBP).
 *
 * For each shape (an S x S slice from P projections over half a turn, a detector S
 * columns wide and one row high) two engines get one smooth projection P times: one
 * filtered (FBP: tl_engine_reconstruct of the slice, to the host), one unfiltered
 * (tl_engine_iterate). Each is timed --reps times, wall clock, and the medians printed;
 * the iterative run is timed with 1 and with N iterations, so that the time per
 * iteration, (T_N - T_1) / (N - 1), leaves out the set-up (gathering the measurements,
 * the normalisation A 1), which is printed apart. The row names the kernel the engine
 * reported; SART on the CUDA backend gets a second row, its views run one by one
 * (tl_iter_options.per_view): the sweep's in-run baseline.
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

#define ME "tomolive bench --iterative"
#define MAX_SHAPES 8
#define MAX_REPS 64

static const char usage_text[] =
    "usage: tomolive bench --iterative [--shape SxP ...] [--method sirt|sart|os-sart|osem]\n"
    "                                  [--projector matched|joseph] [--iterations N]\n"
    "                                  [--subsets M] [--reps R]\n"
    "                                  [--device N] [--backend cuda|cpu]\n"
    "\n"
    "Times the iterative reconstruction of an S x S slice from P parallel-beam projections\n"
    "(default 2048x2048; 512x360 on the CPU) against FBP of the same slice: the median of R\n"
    "runs (default 5) of FBP, of the method with one iteration and with N (default 10),\n"
    "and the time per iteration (T_N - T_1) / (N - 1). Default method: sart; OS-SART and\n"
    "OS-EM take --subsets (default 16). Rows name the kernel the engine reports: SART on\n"
    "the CUDA backend sweeps its views on chip in one launch (sart-sweep) where the slice\n"
    "fits, and a second row times its views one by one, the sweep's baseline.\n";

typedef struct {
    uint32_t size[MAX_SHAPES], proj[MAX_SHAPES];
    int nshapes;
    tl_iter_options it;
    int reps, device;
    tl_backend_kind backend;
} options;

static int parse(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"iterative", no_argument, NULL, 'I'},
        {"shape", required_argument, NULL, 's'},
        {"method", required_argument, NULL, 'm'},
        {"iterations", required_argument, NULL, 'n'},
        {"subsets", required_argument, NULL, 'u'},
        {"reps", required_argument, NULL, 'r'},
        {"projector", required_argument, NULL, 'P'},
        {"device", required_argument, NULL, 'd'},
        {"backend", required_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->it = (tl_iter_options){.method = TL_ITER_SART,
                              .iterations = 10,
                              .subsets = 16,
                              .relaxation = 1.0};
    o->reps = 5;
    o->backend = TL_BACKEND_CUDA;
    optind = 1;
    opterr = 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
            case 'I': break;
            case 's':
                if (o->nshapes == MAX_SHAPES)
                    return tl_cli_fail(ME, 2, "at most %d shapes", MAX_SHAPES);
                if (sscanf(optarg, "%ux%u", &o->size[o->nshapes], &o->proj[o->nshapes]) != 2 ||
                    o->size[o->nshapes] < 2 || o->size[o->nshapes] > 16384 ||
                    o->proj[o->nshapes] < 1 || o->proj[o->nshapes] > 65536)
                    return tl_cli_fail(ME, 2, "bad --shape '%s': need SxP", optarg);
                o->nshapes++;
                break;
            case 'm':
                if (!tl_iter_method_parse(optarg, &o->it.method))
                    return tl_cli_fail(ME, 2, "bad --method '%s': sirt, sart, os-sart or osem",
                                       optarg);
                break;
            case 'n':
            case 'u':
            case 'r':
            case 'd':
                if (!tl_cli_long(optarg,
                                 c == 'd'   ? 0
                                 : c == 'n' ? 2
                                            : 1,
                                 c == 'r' ? MAX_REPS : 65536, &v))
                    return tl_cli_fail(ME, 2, "bad value '%s' for --%s", optarg,
                                       c == 'n'   ? "iterations (at least 2)"
                                       : c == 'u' ? "subsets"
                                       : c == 'r' ? "reps"
                                                  : "device");
                if (c == 'n')
                    o->it.iterations = (uint32_t)v;
                else if (c == 'u')
                    o->it.subsets = (uint32_t)v;
                else if (c == 'r')
                    o->reps = (int)v;
                else
                    o->device = (int)v;
                break;
            case 'P':
                if (!tl_projector_parse(optarg, &o->it.projector))
                    return tl_cli_fail(ME, 2, "bad --projector '%s': matched or joseph", optarg);
                break;
            case 'B':
                if (!tl_backend_parse(optarg, &o->backend) || o->backend == TL_BACKEND_AUTO)
                    return tl_cli_fail(ME, 2, "bad --backend '%s': cuda or cpu", optarg);
                break;
            case 'h': fputs(usage_text, stdout); return 0;
            default:
                return tl_cli_fail(ME, 2, "%s '%s' (see tomolive bench --iterative --help)",
                                   c == ':' ? "option needs a value" : "unknown option",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return tl_cli_fail(ME, 2, "unexpected argument '%s'", argv[optind]);
    if (o->nshapes == 0) {
        bool gpu = o->backend == TL_BACKEND_CUDA;
        o->size[0] = gpu ? 2048 : 512;
        o->proj[0] = gpu ? 2048 : 360;
        o->nshapes = 1;
    }
    return -1;
}

/* An engine of one detector row holding a smooth projection (a centred Gaussian, positive:
 * counts for OS-EM too) at P angles over half a turn; its slice id in *id. */
static int engine(const options *o, uint32_t size, uint32_t p, tl_filter f, tl_engine **out,
                  int *id)
{
    tl_engine_config c;
    tl_engine_config_init(&c, 1, size, p);
    c.backend = o->backend;
    c.device = o->device;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.filter = f;
    tl_status st = tl_engine_create(&c, out);
    if (st != TL_OK)
        return tl_cli_fail(ME, 1, "%ux%u: cannot create the engine: %s (%s)", size, p,
                           tl_engine_last_error(NULL), tl_status_name(st));
    float *row = malloc(size * sizeof *row);
    if (!row)
        return tl_cli_fail(ME, 1, "out of memory");
    double mid = (size - 1) / 2.0, r2 = 0.05 * size * size;
    for (uint32_t u = 0; u < size; u++)
        row[u] = (float)(size * 0.5 * exp(-(u - mid) * (u - mid) / r2));
    int rc = 0;
    for (uint32_t k = 0; rc == 0 && k < p; k++)
        rc = tl_bench_submit(ME, *out, k, M_PI * k / p, 1, size, row, k + 1 < p);
    free(row);
    if (rc == 0 && tl_engine_flush(*out) != TL_OK)
        rc = tl_cli_fail(ME, 1, "%s", tl_engine_last_error(*out));
    tl_slice_spec s;
    tl_slice_spec_row(&s, 0, size, size);
    if (rc == 0 && tl_engine_add_slice(*out, &s, id) != TL_OK)
        rc = tl_cli_fail(ME, 1, "%s", tl_engine_last_error(*out));
    return rc;
}

/* The median time (ms) of reps FBPs (iterations 0) or iterative runs of the slice (with o's
 * options but per_view); *kernel (NULL: not wanted) the kernel the engine named. */
static int time_runs(const options *o, tl_engine *e, int id, uint32_t iterations, bool per_view,
                     float *img, double *ms, const char **kernel)
{
    double t[MAX_REPS];
    tl_iter_options it = o->it;
    it.iterations = iterations;
    it.per_view = per_view;
    tl_slice_info info = {0};
    for (int r = 0; r <= o->reps; r++) { /* run 0 warms up */
        uint32_t done;
        double t0 = tl_cli_now();
        tl_status st = iterations
                           ? tl_engine_iterate(e, &id, 1, &it, NULL, img, NULL, &done, &info)
                           : tl_engine_reconstruct(e, &id, 1, &img, NULL);
        if (st != TL_OK)
            return tl_cli_fail(ME, 1, "%s (%s)", tl_engine_last_error(e), tl_status_name(st));
        if (r > 0)
            t[r - 1] = (tl_cli_now() - t0) * 1e3;
    }
    *ms = tl_cli_median(t, (size_t)o->reps);
    if (kernel)
        *kernel = info.kernel;
    return 0;
}

/* One row: the iterative runs of the slice (view by view: per_view) against FBP. */
static int method_row(const options *o, tl_engine *e, int id, bool per_view, float *img,
                      double t_fbp)
{
    double t_one, t_n;
    const char *kernel = NULL;
    int rc = time_runs(o, e, id, 1, per_view, img, &t_one, NULL);
    if (rc == 0)
        rc = time_runs(o, e, id, o->it.iterations, per_view, img, &t_n, &kernel);
    if (rc != 0)
        return rc;
    double per = (t_n - t_one) / (o->it.iterations - 1);
    char name[48];
    if (o->it.method == TL_ITER_OS_SART || o->it.method == TL_ITER_OSEM)
        snprintf(name, sizeof name, "%s/%u, %s", kernel, o->it.subsets,
                 tl_projector_name(o->it.projector));
    else
        snprintf(name, sizeof name, "%s, %s%s", kernel, tl_projector_name(o->it.projector),
                 per_view ? " (per view)" : "");
    printf("%-28s | %10.2f | %16.2f | %10.2f | %12.2f\n", name, t_fbp, per, t_one - per,
           per / t_fbp);
    return 0;
}

static int bench_shape(const options *o, uint32_t size, uint32_t p)
{
    tl_engine *fbp = NULL, *iter = NULL;
    int fbp_id, iter_id;
    float *img = malloc((size_t)size * size * sizeof *img);
    int rc = img ? engine(o, size, p, TL_FILTER_RAMLAK, &fbp, &fbp_id)
                 : tl_cli_fail(ME, 1, "out of memory");
    if (rc == 0)
        rc = engine(o, size, p, TL_FILTER_NONE, &iter, &iter_id);
    double t_fbp = 0;
    if (rc == 0)
        rc = time_runs(o, fbp, fbp_id, 0, false, img, &t_fbp, NULL);
    if (rc == 0) {
        tl_engine_state es;
        tl_engine_get_state(iter, &es);
        printf("\n%ux%u slice from %u projections on %s (medians of %d runs, wall clock, "
               "to the host)\n",
               size, size, p, es.device_name, o->reps);
        printf("%-28s | %10s | %14s | %10s | %12s\n", "method", "FBP ms", "per iteration ms",
               "set-up ms", "iteration/FBP");
        printf("-----------------------------+------------+------------------+------------+--"
               "------------\n");
        rc = method_row(o, iter, iter_id, false, img, t_fbp);
    }
    /* SART where the backend sweeps its views: the view-by-view passes too, in the same run */
    if (rc == 0 && o->it.method == TL_ITER_SART && o->backend == TL_BACKEND_CUDA)
        rc = method_row(o, iter, iter_id, true, img, t_fbp);
    tl_engine_destroy(fbp);
    tl_engine_destroy(iter);
    free(img);
    return rc;
}

int tl_cmd_iterative_bench(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char why[256] = "";
    if (!tl_backend_available(o.backend, why, sizeof why))
        return tl_cli_fail(ME, 1, "backend %s is not available: %s", tl_backend_name(o.backend),
                           why);
    for (int i = 0; i < o.nshapes; i++)
        if (bench_shape(&o, o.size[i], o.proj[i]) != 0)
            return 1;
    return 0;
}
