/* bench_cone.c — `tomolive bench --cone`: cone-beam (FDK) back projection, kernel only, on
 * the problems of Chen et al. 2019 (seed 004, iFDK) Table 4: a D x D detector, P
 * projections over a full turn, an N x N x Z output volume (issue #21, §4.4 P1 of
 * ../shared/notes/seed-002-004.md).
 *
 * The window is filled through the normal per-frame path with one smooth projection
 * submitted P times at uniform angles (a kernel's speed does not depend on the values).
 * The volume is Z row slices of N x N covering the detector's field of view at the axis
 * (scale D / N volume units per voxel, D / Z apart), timed in jobs of --batch slices with
 * tl_engine_bench_kernel: the median of --reps calls per job after a warm-up, device
 * outputs only (no copies to the host), summed over the jobs. Rates are updates (voxels x
 * projections) per second, in 10^9 (GUPS) and in 2^30 (the unit of seed 004's tables).
 *
 * A job holds the lowest and the highest half-batch of the slices not yet timed, so that
 * each slice's mirror image about the source's plane (the volume's middle) is in its job,
 * as the mirror kernels (cone-colmir16) need; every other kernel sees two runs of
 * consecutive rows, a pass of its own each where --batch is twice its pass. Before the
 * kernels, the first job is reconstructed once with the built-in choice, whose kernels the
 * table's header names: what the daemon and `recon` would run on this shape.
 *
 * With --incremental, the whole volume is then tracked (accumulate.cu: float64
 * accumulators, exact) and projections stream in as a camera sends them, indices rising
 * past the full window: each frame is filtered, added to every slice, and the projection it
 * evicts subtracted, so a frame is two updates of the volume. Timed from the first submit
 * until the engine's fences say the last frame is stored (the median of three runs of
 * INCREMENTAL_FRAMES); updates go in passes of eight, so the last four frames' may still be
 * queued then, and a frame's time is the run's over the frames before them (an upper
 * bound).
 *
 * The geometry: source 1000 mm from the axis, detector 1500 mm from the source, 540 mm
 * wide (pixel pitch 540 / D mm), principal point at the detector's centre.
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

#define ME "tomolive bench --cone"
#define MAX_SHAPES 16
#define MAX_KERNELS 32
#define DEFAULT_BATCH 128 /* a pass of the widest kernels, cone-colmir16/128x4 */
#define SOURCE_AXIS_MM 1000.0
#define SOURCE_DETECTOR_MM 1500.0
#define DETECTOR_MM 540.0
#define INCREMENTAL_FRAMES 200 /* a run of --incremental */
#define INCREMENTAL_RUNS 3
#define INCREMENTAL_TAIL 4 /* frames whose updates may be queued at a run's end: an update
                            * and an eviction each, TL_ACC_BATCH (8) a pass */

static const char usage_text[] =
    "usage: tomolive bench --cone [--shape DxPxN[xZ] ...] [--kernel NAME ...] [--batch N]\n"
    "                             [--reps R] [--incremental] [--device N]\n"
    "                             [--backend cuda|cpu]\n"
    "\n"
    "Times cone-beam back projection (FDK, kernel only) of an N x N x Z volume (Z: N\n"
    "when left out) from P projections of D x D pixels over a full turn, for each shape\n"
    "(default: 512x1024x512, 1024x1024x256, 1024x1024x1024: rows of seed 004's Table 4)\n"
    "and each kernel (default: every cone-beam kernel of the backend), in jobs of --batch row\n"
    "slices (default 128: the lowest and the highest 64 left, so that each slice's mirror\n"
    "image is in its job), and prints the volume time and the updates per second, after\n"
    "the kernel the built-in choice takes for the shape. The volume spans the detector's\n"
    "field of view at the axis, in x, y and z. --incremental then tracks the whole volume\n"
    "and times frames streamed into it: each filtered, added and its evicted projection\n"
    "subtracted (two updates of the volume a frame).\n";

typedef struct {
    uint32_t d, p, n, z; /* detector side, projections, volume side, volume slices */
} shape;

typedef struct {
    shape shapes[MAX_SHAPES];
    int nshapes;
    const char *kernels[MAX_KERNELS];
    int nkernels;
    uint32_t batch;
    int reps, device;
    bool incremental;
    tl_backend_kind backend;
} options;

static int parse(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"cone", no_argument, NULL, 'C'},
        {"shape", required_argument, NULL, 's'},
        {"kernel", required_argument, NULL, 'k'},
        {"batch", required_argument, NULL, 'b'},
        {"reps", required_argument, NULL, 'r'},
        {"incremental", no_argument, NULL, 'i'},
        {"device", required_argument, NULL, 'd'},
        {"backend", required_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->batch = DEFAULT_BATCH;
    o->reps = 1;
    o->backend = TL_BACKEND_CUDA;
    optind = 1;
    opterr = 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
            case 'C': break;
            case 'i': o->incremental = true; break;
            case 's': {
                shape *s = &o->shapes[o->nshapes];
                if (o->nshapes == MAX_SHAPES)
                    return tl_cli_fail(ME, 2, "at most %d shapes", MAX_SHAPES);
                int got = sscanf(optarg, "%ux%ux%ux%u", &s->d, &s->p, &s->n, &s->z);
                if (got == 3)
                    s->z = s->n;
                if ((got != 3 && got != 4) || s->d < 2 || s->p < 1 || s->n < 1 || s->z < 1 ||
                    s->d > 16384 || s->p > 65536 || s->n > 16384 || s->z > 16384)
                    return tl_cli_fail(ME, 2, "bad --shape '%s': need DxPxN or DxPxNxZ", optarg);
                o->nshapes++;
                break;
            }
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
            case 'B':
                if (!tl_backend_parse(optarg, &o->backend) || o->backend == TL_BACKEND_AUTO)
                    return tl_cli_fail(ME, 2, "bad --backend '%s': cuda or cpu", optarg);
                break;
            case 'h': fputs(usage_text, stdout); return 0;
            default:
                return tl_cli_fail(ME, 2, "%s '%s' (see tomolive bench --cone --help)",
                                   c == ':' ? "option needs a value" : "unknown option",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return tl_cli_fail(ME, 2, "unexpected argument '%s'", argv[optind]);
    if (o->nshapes == 0) {
        const shape dflt[] = {{512, 1024, 512, 512},
                              {1024, 1024, 256, 256},
                              {1024, 1024, 1024, 1024}};
        for (size_t i = 0; i < sizeof dflt / sizeof *dflt; i++)
            o->shapes[o->nshapes++] = dflt[i];
    }
    return -1;
}

/* The projection every frame is: a centred Gaussian (NULL, after printing why). */
static float *smooth_projection(const shape *s)
{
    float *img = malloc((size_t)s->d * s->d * sizeof *img);
    if (!img) {
        tl_cli_fail(ME, 1, "out of memory for a %ux%u projection", s->d, s->d);
        return NULL;
    }
    double c = (s->d - 1) / 2.0, r2 = 0.1 * s->d * s->d;
    for (uint32_t v = 0; v < s->d; v++)
        for (uint32_t u = 0; u < s->d; u++)
            img[(size_t)v * s->d + u] = (float)exp(-((u - c) * (u - c) + (v - c) * (v - c)) / r2);
    return img;
}

/* The window: img at P angles over a turn. */
static int fill(tl_engine *e, const shape *s, const float *img)
{
    int rc = 0;
    for (uint32_t k = 0; rc == 0 && k < s->p; k++)
        rc = tl_bench_submit(ME, e, k, 2 * M_PI * k / s->p, s->d, s->d, img, k + 1 < s->p);
    if (rc == 0 && tl_engine_flush(e) != TL_OK)
        rc = tl_cli_fail(ME, 1, "%s", tl_engine_last_error(e));
    return rc;
}

/* The slice ids of z slices (ids[k]: row k, from the bottom) in job order, the lowest and
 * the highest half-batch left together (above); *njobs jobs of sizes[j] slices. */
static void mirror_jobs(const int *ids, uint32_t z, uint32_t batch, int *order, uint32_t *sizes,
                        uint32_t *njobs)
{
    const uint32_t half = batch / 2 > 0 ? batch / 2 : 1;
    uint32_t lo = 0, hi = z, n = 0;
    *njobs = 0;
    while (lo < hi) {
        if (hi - lo <= batch || batch < 2) { /* the rest, or one slice at a time */
            const uint32_t take = batch < 2 ? 1 : hi - lo;
            for (uint32_t k = 0; k < take; k++)
                order[n++] = ids[lo + k];
            lo += take;
            sizes[(*njobs)++] = take;
            continue;
        }
        for (uint32_t k = 0; k < half; k++)
            order[n++] = ids[lo + k];
        for (uint32_t k = hi - half; k < hi; k++)
            order[n++] = ids[k];
        lo += half;
        hi -= half;
        sizes[(*njobs)++] = 2 * half;
    }
}

/* The built-in choice for the first job (a full batch of both halves, as the daemon's and
 * recon's stacks are): the kernels its slices got, as "a" or "a, b". */
static int builtin_choice(tl_engine *e, const shape *s, const int *order, uint32_t size,
                          char *out, size_t out_len)
{
    const size_t npix = (size_t)s->n * s->n;
    float *vol = malloc(size * npix * sizeof *vol);
    float **outs = malloc(size * sizeof *outs);
    tl_slice_info *info = malloc(size * sizeof *info);
    int rc = vol && outs && info ? 0 : tl_cli_fail(ME, 1, "out of memory for the built-in job");
    for (uint32_t k = 0; rc == 0 && k < size; k++)
        outs[k] = vol + k * npix;
    if (rc == 0 && tl_engine_reconstruct(e, order, size, outs, info) != TL_OK)
        rc = tl_cli_fail(ME, 1, "the built-in job: %s", tl_engine_last_error(e));
    out[0] = '\0';
    for (uint32_t k = 0; rc == 0 && k < size; k++) {
        uint32_t first = 0; /* the first slice with this kernel: named once */
        while (strcmp(info[first].kernel, info[k].kernel) != 0)
            first++;
        if (first == k)
            snprintf(out + strlen(out), out_len - strlen(out), "%s%s", out[0] ? ", " : "",
                     info[k].kernel);
    }
    free(vol);
    free(outs);
    free(info);
    return rc;
}

/* --incremental (above): every slice tracked and built, in jobs of --batch, then
 * INCREMENTAL_RUNS runs of frames; *ms the median time of a frame, *kernel what updated. */
static int incremental(tl_engine *e, const shape *s, const options *o, const int *ids,
                       const float *img, double *ms, const char **kernel)
{
    const size_t npix = (size_t)s->n * s->n;
    const uint32_t batch = o->batch < s->z ? o->batch : s->z;
    float *vol = malloc(batch * npix * sizeof *vol);
    float **outs = malloc(batch * sizeof *outs);
    tl_slice_info info;
    int rc = vol && outs ? 0 : tl_cli_fail(ME, 1, "out of memory for the tracked build");
    for (uint32_t k = 0; rc == 0 && k < batch; k++)
        outs[k] = vol + k * npix;
    for (uint32_t k = 0; rc == 0 && k < s->z; k++)
        if (tl_engine_track(e, ids[k], true) != TL_OK)
            rc = tl_cli_fail(ME, 1, "tracking slice %u: %s", k, tl_engine_last_error(e));
    for (uint32_t z = 0; rc == 0 && z < s->z; z += batch) {
        uint32_t n = s->z - z < batch ? s->z - z : batch;
        if (tl_engine_reconstruct(e, ids + z, n, outs, NULL) != TL_OK)
            rc = tl_cli_fail(ME, 1, "building the tracked volume: %s", tl_engine_last_error(e));
    }
    double t[INCREMENTAL_RUNS];
    uint32_t index = s->p; /* the window is full: each frame evicts one */
    for (int run = 0; rc == 0 && run < INCREMENTAL_RUNS; run++) {
        double t0 = tl_cli_now();
        for (uint32_t k = 0; rc == 0 && k < INCREMENTAL_FRAMES; k++, index++)
            rc = tl_bench_submit(ME, e, index, 2 * M_PI * index / s->p, s->d, s->d, img,
                                 k + 1 < INCREMENTAL_FRAMES);
        uint64_t done;
        if (rc == 0 && tl_engine_frames_done(e, tl_engine_frames_queued(e), &done) != TL_OK)
            rc = tl_cli_fail(ME, 1, "streaming into the tracked volume: %s",
                             tl_engine_last_error(e));
        t[run] = (tl_cli_now() - t0) * 1e3 / (INCREMENTAL_FRAMES - INCREMENTAL_TAIL);
    }
    /* one slice read out: the kernel that updated it */
    if (rc == 0 && tl_engine_reconstruct(e, ids, 1, outs, &info) != TL_OK)
        rc = tl_cli_fail(ME, 1, "reading the tracked volume: %s", tl_engine_last_error(e));
    if (rc == 0) {
        *ms = tl_cli_median(t, INCREMENTAL_RUNS);
        *kernel = info.kernel;
    }
    free(vol);
    free(outs);
    return rc;
}

/* Every kernel of the engine (a cone-beam engine lists only cone-beam kernels). */
static int engine_kernels(const tl_engine *e, const options *o, const char **names)
{
    if (o->nkernels > 0) {
        memcpy(names, o->kernels, (size_t)o->nkernels * sizeof *names);
        return o->nkernels;
    }
    tl_kernel_info k[MAX_KERNELS];
    size_t n = tl_engine_kernels(e, k, MAX_KERNELS);
    for (size_t i = 0; i < n && i < MAX_KERNELS; i++)
        names[i] = k[i].name;
    return (int)(n < MAX_KERNELS ? n : MAX_KERNELS);
}

static int bench_shape(const options *o, const shape *s)
{
    tl_engine_config c;
    tl_engine_config_init(&c, s->d, s->d, s->p);
    c.backend = o->backend;
    c.device = o->device;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.quality = TL_QUALITY_FAST; /* with the texture kernels' projection stack */
    c.geometry = TL_GEOMETRY_CONE;
    c.cone = (tl_cone_config){.source_origin = SOURCE_AXIS_MM,
                              .source_detector = SOURCE_DETECTOR_MM,
                              .pixel_u = DETECTOR_MM / s->d,
                              .pixel_v = DETECTOR_MM / s->d};
    tl_engine *e = NULL;
    double t0 = tl_cli_now();
    tl_status st = tl_engine_create(&c, &e);
    if (st != TL_OK)
        return tl_cli_fail(ME, 1, "%ux%ux%u: cannot create the engine: %s (%s)", s->d, s->p, s->n,
                           tl_engine_last_error(NULL), tl_status_name(st));
    int *ids = calloc(s->z, sizeof *ids), *order = calloc(s->z, sizeof *order);
    uint32_t *sizes = calloc(s->z, sizeof *sizes), njobs = 0;
    float *img = smooth_projection(s);
    int rc = !img                     ? 1
             : ids && order && sizes ? fill(e, s, img)
                                     : tl_cli_fail(ME, 1, "out of memory");
    double scale = (double)s->d / s->n; /* volume units per voxel: the same field of view */
    double dz = (double)s->d / s->z;    /* ... and the detector's height in z */
    for (uint32_t k = 0; rc == 0 && k < s->z; k++) {
        tl_slice_spec spec;
        tl_slice_spec_row(&spec, (k + 0.5) * dz - 0.5, s->n, s->n);
        spec.scale = scale;
        if (tl_engine_add_slice(e, &spec, &ids[k]) != TL_OK)
            rc = tl_cli_fail(ME, 1, "slice %u: %s", k, tl_engine_last_error(e));
    }
    if (rc == 0)
        mirror_jobs(ids, s->z, o->batch, order, sizes, &njobs);
    const char *names[MAX_KERNELS];
    int nk = rc == 0 ? engine_kernels(e, o, names) : 0;
    char builtin[160] = "";
    if (rc == 0)
        rc = builtin_choice(e, s, order, sizes[0], builtin, sizeof builtin);
    if (rc == 0) {
        tl_engine_state es;
        tl_engine_get_state(e, &es);
        char volume[48];
        if (s->z == s->n)
            snprintf(volume, sizeof volume, "%u^3", s->n);
        else
            snprintf(volume, sizeof volume, "%u^2 x %u", s->n, s->z);
        printf("\n%ux%u detector, %u projections -> %s on %s (window filled in %.1f s, jobs "
               "of %u slices)\n",
               s->d, s->d, s->p, volume, es.device_name, tl_cli_now() - t0, o->batch);
        printf("built-in choice (fast engine): %s\n", builtin);
        printf("%-22s | %-6s | %10s | %12s | %14s\n", "kernel", "mode", "volume s", "GUPS (1e9)",
               "GUPS (2^30)");
        printf("-----------------------+--------+------------+--------------+---------------\n");
    }
    double updates = (double)s->n * s->n * s->z * s->p;
    for (int k = 0; rc == 0 && k < nk; k++) {
        double ms = 0;
        tl_quality q = TL_QUALITY_EXACT;
        st = TL_OK;
        for (uint32_t j = 0, z = 0; rc == 0 && st == TL_OK && j < njobs; z += sizes[j++]) {
            tl_bench_row row;
            st = tl_engine_bench_kernel(e, order + z, sizes[j], names[k], o->reps, &row);
            if (st == TL_EUNSUPPORTED) /* a row that says so; the others go on */
                printf("%-22s | cannot serve: %s\n", names[k], tl_engine_last_error(e));
            else if (st != TL_OK)
                rc = tl_cli_fail(ME, 1, "%s: %s (%s)", names[k], tl_engine_last_error(e),
                                 tl_status_name(st));
            ms += row.ms;
            q = row.quality;
        }
        if (rc == 0 && st == TL_OK)
            printf("%-22s | %-6s | %10.3f | %12.1f | %14.1f\n", names[k], tl_quality_name(q),
                   ms / 1e3, updates / (ms * 1e-3) / 1e9, updates / (ms * 1e-3) / 1073741824.0);
    }
    double ms;
    const char *kernel;
    if (rc == 0 && o->incremental && (rc = incremental(e, s, o, ids, img, &ms, &kernel)) == 0)
        printf("incremental (%s, the volume tracked): a frame %.3f ms (median of %d runs of "
               "%d), %.0f frames/s, %.1f GUPS (1e9; two updates a frame)\n",
               kernel, ms, INCREMENTAL_RUNS, INCREMENTAL_FRAMES, 1e3 / ms,
               2.0 * s->n * s->n * s->z / (ms * 1e-3) / 1e9);
    free(img);
    free(ids);
    free(order);
    free(sizes);
    tl_engine_destroy(e);
    return rc;
}

int tl_cmd_cone_bench(int argc, char **argv)
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
        if (bench_shape(&o, &o.shapes[i]) != 0)
            return 1;
    return 0;
}
