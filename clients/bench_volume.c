/* bench_volume.c — `tomolive bench --volume`: how long a whole volume takes to back-project,
 * every detector row a SIZE x SIZE slice, from a window of PROJ projections held on the
 * device (the "2048^3 from 2048 projections" target; tomocupy's Fourier
 * reconstruction is the scale: 5.73 s fp16, 8.73 s fp32 on an H100).
 *
 * The window is filled through the normal per-frame path with one phantom projection
 * submitted PROJ times at uniform angles (the kernels' speed does not depend on the
 * values, and computing PROJ distinct 2048 x 2048 phantom projections on the CPU would
 * take minutes). The rows are then timed in jobs of --batch slices with
 * tl_engine_bench_kernel, one kernel at a time: the median of --reps calls per job after a
 * warm-up, device outputs only (no copies to the host), summed over the jobs.
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli.h"
#include "clients/commands.h"
#include "gpu/engine.h"
#include "gpu/phantom.h"

#define ME "tomolive bench --volume"
#define MAX_KERNELS 16
#define DEFAULT_BATCH 256

static const char usage_text[] =
    "usage: tomolive bench --volume [--shape SIZExPROJ] [--kernel NAME ...] [--batch N]\n"
    "                               [--reps R] [--device N]\n"
    "\n"
    "Back-projects every detector row of a SIZE x SIZE x SIZE volume (default 2048x2048)\n"
    "from PROJ projections held on the GPU, with each kernel given (default: the fastest\n"
    "multi-slice kernels of each mode and the tex-std baseline), in jobs of N slices\n"
    "(default 256), and prints the total time per kernel.\n";

typedef struct {
    uint32_t size, proj, batch;
    int reps, device;
    const char *kernels[MAX_KERNELS];
    int nkernels;
} options;

static int parse(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"volume", no_argument, NULL, 'V'},      {"shape", required_argument, NULL, 's'},
        {"kernel", required_argument, NULL, 'k'}, {"batch", required_argument, NULL, 'b'},
        {"reps", required_argument, NULL, 'r'},   {"device", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->size = o->proj = 2048;
    o->batch = DEFAULT_BATCH;
    o->reps = 1;
    optind = 1;
    opterr = 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'V': break;
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
                                   c == 'b' ? "batch" : c == 'r' ? "reps" : "device");
            if (c == 'b')
                o->batch = (uint32_t)v;
            else if (c == 'r')
                o->reps = (int)v;
            else
                o->device = (int)v;
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
    return -1;
}

/* The window, filled with one phantom projection at PROJ angles. */
static int fill(tl_engine *e, const options *o)
{
    size_t npix = (size_t)o->size * o->size;
    float *img = malloc(npix * sizeof *img);
    tl_phantom ph;
    if (!img || tl_phantom_shepp_logan(&ph, 0.45 * o->size, (o->size - 1) / 2.0,
                                       0.45 * o->size) != 0) {
        free(img);
        return tl_cli_fail(ME, 1, "out of memory for a %ux%u projection", o->size, o->size);
    }
    tl_phantom_project(&ph, 0.3, (o->size - 1) / 2.0, o->size, o->size, img);
    tl_phantom_free(&ph);
    int rc = 0;
    for (uint32_t k = 0; rc == 0 && k < o->proj; k++) {
        tl_frame f = {.kind = TL_FRAME_PROJ, .index = k, .angle = M_PI * k / o->proj,
                      .dtype = TL_DTYPE_F32, .rows = o->size, .cols = o->size, .data = img};
        tl_status st = tl_engine_submit(e, &f);
        if (st != TL_OK)
            rc = tl_cli_fail(ME, 1, "projection %u: %s (%s)", k, tl_engine_last_error(e),
                             tl_status_name(st));
    }
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

int tl_cmd_volume_bench(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    tl_engine_config c;
    tl_engine_config_init(&c, o.size, o.size, o.proj);
    c.backend = TL_BACKEND_CUDA;
    c.device = o.device;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    tl_engine *e = NULL;
    double t0 = tl_cli_now();
    tl_status st = tl_engine_create(&c, &e);
    if (st != TL_OK)
        return tl_cli_fail(ME, 1, "cannot create the engine: %s (%s)", tl_engine_last_error(NULL),
                           tl_status_name(st));
    int *ids = calloc(o.size, sizeof *ids);
    rc = ids ? fill(e, &o) : tl_cli_fail(ME, 1, "out of memory");
    for (uint32_t z = 0; rc == 0 && z < o.size; z++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, z, o.size, o.size);
        if ((st = tl_engine_add_slice(e, &s, &ids[z])) != TL_OK)
            rc = tl_cli_fail(ME, 1, "slice %u: %s", z, tl_engine_last_error(e));
    }
    if (rc == 0 && o.nkernels == 0)
        default_kernels(e, &o);
    if (rc == 0) {
        tl_engine_state es;
        tl_engine_get_state(e, &es);
        printf("device: %s\n", es.device_name);
        printf("volume: %u x %u x %u from %u projections of %u x %u (window on the device, "
               "filled in %.1f s); jobs of %u slices, median of %d after a warm-up, summed\n",
               o.size, o.size, o.size, o.proj, o.size, o.size, tl_cli_now() - t0, o.batch,
               o.reps);
        printf("%-18s | %-7s | %10s | %14s | %10s\n", "kernel", "mode", "volume s",
               "G updates/s", "x tex-std");
        printf("-------------------+---------+------------+----------------+-----------\n");
    }
    double base = 0;
    for (int k = 0; rc == 0 && k < o.nkernels; k++) {
        double ms = 0;
        tl_quality q = TL_QUALITY_EXACT;
        for (uint32_t z = 0; rc == 0 && z < o.size; z += o.batch) {
            uint32_t n = o.size - z < o.batch ? o.size - z : o.batch;
            tl_bench_row row;
            st = tl_engine_bench_kernel(e, ids + z, n, o.kernels[k], o.reps, &row);
            if (st != TL_OK)
                rc = tl_cli_fail(ME, 1, "%s: %s (%s)", o.kernels[k], tl_engine_last_error(e),
                                 tl_status_name(st));
            ms += row.ms;
            q = row.quality;
        }
        if (rc != 0)
            break;
        if (strcmp(o.kernels[k], "tex-std") == 0)
            base = ms;
        double upd = (double)o.size * o.size * o.size * o.proj;
        char ratio[32] = "n/a";
        if (base > 0)
            snprintf(ratio, sizeof ratio, "%.2f", base / ms);
        printf("%-18s | %-7s | %10.3f | %14.1f | %10s\n", o.kernels[k], tl_quality_name(q),
               ms * 1e-3, upd / (ms * 1e-3) * 1e-9, ratio);
        fflush(stdout);
    }
    free(ids);
    tl_engine_destroy(e);
    return rc;
}
