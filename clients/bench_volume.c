/* bench_volume.c — `tomolive bench --volume`: how long a whole volume takes to back-project,
 * every detector row a SIZE x SIZE slice, from a window of PROJ projections held on the
 * device (the "2048^3 from 2048 projections" target; tomocupy's Fourier
 * reconstruction on the same card is the scale; figures: BENCHMARKS.md).
 *
 * The window is filled through the normal per-frame path with one phantom projection
 * submitted PROJ times at uniform angles (the kernels' speed does not depend on the
 * values, and computing PROJ distinct 2048 x 2048 phantom projections on the CPU would
 * take minutes). The rows are then timed in jobs of --batch slices with
 * tl_engine_bench_kernel, one kernel at a time: the median of --reps calls per job after a
 * warm-up, device outputs only (no copies to the host), summed over the jobs.
 *
 * With --gpus LIST the rows are split across those GPUs (engine.h, config.devices) and each
 * job takes --batch rows from every GPU's share, so all GPUs work on every job, at once;
 * a job is done when the slowest is. With two or more GPUs the first GPU alone is timed
 * first, the baseline of the same run ("x 1 GPU").
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
#include "gpu/phantom.h"

#define ME "tomolive bench --volume"
#define MAX_KERNELS 16
#define DEFAULT_BATCH 256

static const char usage_text[] =
    "usage: tomolive bench --volume [--shape SIZExPROJ] [--kernel NAME ...] [--batch N]\n"
    "                               [--reps R] [--device N] [--gpus LIST]\n"
    "\n"
    "Back-projects every detector row of a SIZE x SIZE x SIZE volume (default 2048x2048)\n"
    "from PROJ projections held on the GPU, with each kernel given (default: the fastest\n"
    "multi-slice kernels of each mode and the tex-std baseline), in jobs of N slices\n"
    "(default 256) per GPU, and prints the total time per kernel. --gpus 0,1 (or all)\n"
    "splits the rows across GPUs, after timing the first GPU alone for comparison.\n"
    "\n"
    "       tomolive bench --volume --end-to-end [--shape SIZExPROJ] [--gpu-memory SIZE]\n"
    "                               [--host-memory SIZE] [--slab-rows N] [--output PATH]\n"
    "                               [--backend cuda|cpu] [--kernel NAME] [--device N]\n"
    "                               [--geometry cone --source-origin MM\n"
    "                                --source-detector MM --pixel-size MM]\n"
    "\n"
    "End to end (implied by --gpu-memory, --host-memory, --slab-rows or --output): the\n"
    "volume through recon's out-of-core pipeline (plan, read, upload + filter, back\n"
    "projection, write), first with the whole device as the baseline, then within the\n"
    "given budgets; each stage's busy time, the wall time, the overlap achieved (sum of\n"
    "stage times / wall) and the out-of-core overhead (wall / baseline wall). Cone beam:\n"
    "views over a turn; the baseline holds whole frames, a budget they do not fit gets\n"
    "bands of the detector rows each slab reads (recon's plan).\n";

typedef struct {
    bool e2e;
    tl_bench_volume_e2e e;
    const char *backend;
    uint32_t size, proj, batch;
    int reps, device;
    tl_bench_gpus gpus;
    const char *kernels[MAX_KERNELS];
    int nkernels;
} options;

static int parse(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"volume", no_argument, NULL, 'V'},
        {"shape", required_argument, NULL, 's'},
        {"kernel", required_argument, NULL, 'k'},
        {"batch", required_argument, NULL, 'b'},
        {"reps", required_argument, NULL, 'r'},
        {"device", required_argument, NULL, 'd'},
        {"gpus", required_argument, NULL, 'g'},
        {"end-to-end", no_argument, NULL, 'E'},
        {"gpu-memory", required_argument, NULL, 'G'},
        {"host-memory", required_argument, NULL, 'H'},
        {"slab-rows", required_argument, NULL, 'S'},
        {"output", required_argument, NULL, 'O'},
        {"backend", required_argument, NULL, 'B'},
        {"geometry", required_argument, NULL, 'C'},
        {"source-origin", required_argument, NULL, 'C'},
        {"source-detector", required_argument, NULL, 'C'},
        {"pixel-size", required_argument, NULL, 'C'},
        {"offset", required_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->size = o->proj = 2048;
    o->batch = DEFAULT_BATCH;
    o->reps = 1;
    optind = 1;
    opterr = 0;
    int c, at = 0;
    long v;
    char why[256];
    while ((c = getopt_long(argc, argv, ":h", longopts, &at)) != -1) {
        switch (c) {
            case 'V': break;
            case 'C':
                if (!tl_cone_opt(&o->e.cone, longopts[at].name, optarg, why, sizeof why))
                    return tl_cli_fail(ME, 2, "%s", why);
                o->e2e = true;
                break;
            case 's':
                if (sscanf(optarg, "%ux%u", &o->size, &o->proj) != 2 || o->size < 1 ||
                    o->proj < 1 || o->size > 65536 || o->proj > 65536)
                    return tl_cli_fail(ME, 2, "bad --shape '%s': need SIZExPROJ", optarg);
                break;
            case 'k':
                if (o->nkernels == MAX_KERNELS)
                    return tl_cli_fail(ME, 2, "at most %d kernels", MAX_KERNELS);
                o->kernels[o->nkernels++] = optarg;
                break;
            case 'b':
            case 'r':
            case 'd':
                if (!tl_cli_long(optarg, c == 'd' ? 0 : 1, 65536, &v))
                    return tl_cli_fail(ME, 2, "bad value '%s' for --%s", optarg,
                                       c == 'b'   ? "batch"
                                       : c == 'r' ? "reps"
                                                  : "device");
                if (c == 'b')
                    o->batch = (uint32_t)v;
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
            case 'E': o->e2e = true; break;
            case 'G': o->e2e = true; o->e.gpu_memory = optarg; break;
            case 'H': o->e2e = true; o->e.host_memory = optarg; break;
            case 'O': o->e2e = true; o->e.output = optarg; break;
            case 'B': o->e.backend = optarg; break;
            case 'S':
                if (!tl_cli_long(optarg, 1, 65536, &v))
                    return tl_cli_fail(ME, 2, "bad value '%s' for --slab-rows", optarg);
                o->e2e = true;
                o->e.slab_rows = (uint32_t)v;
                break;
            case 'h': fputs(usage_text, stdout); return 0;
            default:
                return tl_cli_fail(ME, 2, "%s '%s' (see tomolive bench --volume --help)",
                                   c == ':' ? "option needs a value" : "unknown option",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return tl_cli_fail(ME, 2, "unexpected argument '%s'", argv[optind]);
    if (!tl_cone_opts_check(&o->e.cone, false, why, sizeof why))
        return tl_cli_fail(ME, 2, "%s", why);
    return -1;
}

/* The window, filled with one phantom projection at PROJ angles. */
static int fill(tl_engine *e, const options *o)
{
    size_t npix = (size_t)o->size * o->size;
    float *img = malloc(npix * sizeof *img);
    tl_phantom ph;
    if (!img ||
        tl_phantom_shepp_logan(&ph, 0.45 * o->size, (o->size - 1) / 2.0, 0.45 * o->size) != 0) {
        free(img);
        return tl_cli_fail(ME, 1, "out of memory for a %ux%u projection", o->size, o->size);
    }
    tl_phantom_project(&ph, 0.3, (o->size - 1) / 2.0, o->size, o->size, img);
    tl_phantom_free(&ph);
    int rc = 0;
    for (uint32_t k = 0; rc == 0 && k < o->proj; k++)
        rc = tl_bench_submit(ME, e, k, M_PI * k / o->proj, o->size, o->size, img, false);
    free(img);
    return rc;
}

/* The default kernels: the tex-std baseline and every multi-slice kernel of mode exact or
 * fast (a volume is the batch case). */
static void default_kernels(const tl_engine *e, options *o)
{
    tl_kernel_info k[128];
    size_t n = tl_engine_kernels(e, k, 128);
    o->kernels[o->nkernels++] = "tex-std";
    for (size_t i = 0; i < n && i < 128 && o->nkernels < MAX_KERNELS; i++)
        if (k[i].slices >= 2 && !k[i].planes && k[i].quality != TL_QUALITY_PREVIEW)
            o->kernels[o->nkernels++] = k[i].name;
}

/* The slices in job order: job j takes rows [first + j batch, first + (j + 1) batch) of
 * every GPU's share [first, end) (tl_engine_split_rows), so every GPU has work in every
 * job; with one GPU, the rows in order. */
static void job_order(const int *ids, uint32_t size, uint32_t parts, uint32_t batch, int *order)
{
    size_t n = 0;
    for (uint32_t j = 0; n < size; j++)
        for (uint32_t k = 0; k < parts; k++) {
            uint32_t first, end;
            tl_engine_split_rows(size, parts, k, &first, &end);
            uint64_t lo = first + (uint64_t)j * batch, hi = lo + batch;
            for (uint64_t z = lo; z < end && z < hi; z++)
                order[n++] = ids[z];
        }
}

/* One engine: the first nd devices of --gpus (nd = 0: --device). Times every kernel of o
 * (choosing the default ones on the first call) into ms[k], printing a row each; one[k]
 * is the one-GPU time of the same kernel (0: none) for the "x 1 GPU" column. */
static int run_volume(options *o, uint32_t nd, const double *one, double *ms)
{
    tl_engine_config c;
    tl_engine_config_init(&c, o->size, o->size, o->proj);
    c.backend = TL_BACKEND_CUDA;
    c.device = o->device;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    tl_bench_use_gpus(&c, &o->gpus, nd);
    uint32_t parts = nd > 1 ? nd : 1;
    char label[96];
    if (nd > 0)
        tl_bench_gpus_label(&o->gpus, nd, label, sizeof label);
    else
        snprintf(label, sizeof label, "GPU %d", o->device);
    tl_engine *e = NULL;
    double t0 = tl_cli_now();
    tl_status st = tl_engine_create(&c, &e);
    if (st != TL_OK)
        return tl_cli_fail(ME, 1, "cannot create the engine on %s: %s (%s)", label,
                           tl_engine_last_error(NULL), tl_status_name(st));
    int *ids = calloc(o->size, sizeof *ids), *order = calloc(o->size, sizeof *order);
    int rc = ids && order ? fill(e, o) : tl_cli_fail(ME, 1, "out of memory");
    for (uint32_t z = 0; rc == 0 && z < o->size; z++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, z, o->size, o->size);
        if ((st = tl_engine_add_slice(e, &s, &ids[z])) != TL_OK)
            rc = tl_cli_fail(ME, 1, "slice %u: %s", z, tl_engine_last_error(e));
    }
    if (rc == 0) {
        job_order(ids, o->size, parts, o->batch, order);
        if (o->nkernels == 0)
            default_kernels(e, o);
        tl_engine_state es;
        tl_engine_get_state(e, &es);
        printf("\ndevice: %s (%s), window filled in %.1f s", es.device_name, label,
               tl_cli_now() - t0);
        if (parts > 1)
            printf("; rows split %u ways (%u..%u each), jobs of %u rows from every GPU at once",
                   parts, o->size / parts, (o->size + parts - 1) / parts, o->batch);
        printf("\n%-18s | %-7s | %-12s | %10s | %14s | %10s | %8s\n", "kernel", "mode", "GPUs",
               "volume s", "G updates/s", "x tex-std", "x 1 GPU");
        printf("-------------------+---------+--------------+------------+----------------+----"
               "--------+---------\n");
    }
    double base = 0;
    uint32_t job = parts * o->batch;
    for (int k = 0; rc == 0 && k < o->nkernels; k++) {
        ms[k] = 0;
        tl_quality q = TL_QUALITY_EXACT;
        for (uint32_t z = 0; rc == 0 && z < o->size; z += job) {
            uint32_t n = o->size - z < job ? o->size - z : job;
            tl_bench_row row;
            st = tl_engine_bench_kernel(e, order + z, n, o->kernels[k], o->reps, &row);
            if (st != TL_OK)
                rc = tl_cli_fail(ME, 1, "%s on %s: %s (%s)", o->kernels[k], label,
                                 tl_engine_last_error(e), tl_status_name(st));
            ms[k] += row.ms;
            q = row.quality;
        }
        if (rc != 0)
            break;
        if (strcmp(o->kernels[k], "tex-std") == 0)
            base = ms[k];
        double upd = (double)o->size * o->size * o->size * o->proj;
        char ratio[32] = "n/a", gain[32] = "-";
        if (base > 0)
            snprintf(ratio, sizeof ratio, "%.2f", base / ms[k]);
        if (one && one[k] > 0)
            snprintf(gain, sizeof gain, "%.2f", one[k] / ms[k]);
        const char *gpus = strchr(label, ' ') + 1; /* "0,1" of "GPUs 0,1" */
        printf("%-18s | %-7s | %-12s | %10.3f | %14.1f | %10s | %8s\n", o->kernels[k],
               tl_quality_name(q), gpus, ms[k] * 1e-3, upd / (ms[k] * 1e-3) * 1e-9, ratio, gain);
        fflush(stdout);
    }
    free(ids);
    free(order);
    tl_engine_destroy(e);
    return rc;
}

int tl_cmd_volume_bench(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.e2e) {
        o.e.size = o.size;
        o.e.proj = o.proj;
        o.e.device = o.device;
        o.e.kernel = o.nkernels ? o.kernels[0] : NULL;
        return tl_bench_volume_e2e_run(&o.e);
    }
    printf("volume: %u x %u x %u from %u projections of %u x %u (window on the device); jobs "
           "of %u slices per GPU, median of %d after a warm-up, summed\n",
           o.size, o.size, o.size, o.proj, o.size, o.size, o.batch, o.reps);
    double one[MAX_KERNELS] = {0}, all[MAX_KERNELS] = {0};
    if (o.gpus.n < 2)
        return run_volume(&o, o.gpus.n, NULL, one);
    rc = run_volume(&o, 1, NULL, one); /* the baseline: the first GPU alone */
    return rc != 0 ? rc : run_volume(&o, o.gpus.n, one, all);
}
