/* bench_volume_e2e.c — `tomolive bench --volume` end to end: a whole SIZE^3 volume from
 * PROJ projections through the out-of-core pipeline of `tomolive recon` (planner, reader,
 * engine, writer: clients/volume_pipeline.h), timed from the first read to the last
 * write, with each stage's busy time and the overlap achieved (sum of stage times / wall).
 *
 * Two runs of the same size: first the baseline, the plan the whole device allows (slabs
 * only as tall as the I/O overlap wants: the window fits the GPU), then the run under
 * --gpu-memory / --host-memory (or --slab-rows), which forces smaller slabs: the
 * out-of-core overhead is the second wall time over the first. The source is one phantom
 * projection (line integrals, float32) held in memory and handed out as every
 * projection's row band, so "read" is a memory copy; the volume goes to --output (an HDF5
 * file, a TIFF stack directory, ...; written as recon writes it) or nowhere.
 *
 * Cone beam (--geometry cone): the same projection at views over a turn, planned as recon
 * plans it: whole frames where they fit (the baseline), else bands of the detector rows
 * each slab reads (clients/volume_bands.h), so the overhead is what culling leaves.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clients/cli.h"
#include "clients/commands.h"
#include "clients/volume_pipeline.h"
#include "gpu/phantom.h"

#define ME "tomolive bench --volume"

typedef struct {
    const float *proj; /* rows x cols line integrals */
    uint32_t cols;
} synthetic;

static int read_synthetic(void *ctx, tl_frame_kind kind, uint32_t first, uint32_t n,
                          uint32_t row0, uint32_t nrows, void *buf, char *err, size_t errlen)
{
    (void)kind;
    (void)first;
    (void)err;
    (void)errlen;
    const synthetic *s = ctx;
    size_t band = (size_t)nrows * s->cols;
    for (uint32_t i = 0; i < n; i++)
        memcpy((float *)buf + i * band, s->proj + (size_t)row0 * s->cols, band * sizeof(float));
    return 0;
}

/* One run: plan within budget (slab_rows 0: the planner's choice), then the pipeline;
 * bands: cone beam's rows per slice (NULL: parallel beam). */
static int run_once(const char *label, const tl_bench_volume_e2e *o, tl_engine_config *c,
                    const tl_volume_budget *b, uint32_t slab_rows, const double *angles,
                    synthetic *src, tl_volume_bands *bands, double *wall)
{
    tl_volume_engine_cost ec = {.c = *c};
    tl_volume_output_spec spec = {.path = o->output, .rows = o->size, .size = o->size,
                                  .job = "tomolive bench --volume"};
    tl_volume_problem prob = {.projections = o->proj,
                              .rows = o->size,
                              .cols = o->size,
                              .size = o->size,
                              .in_sample = sizeof(float),
                              .out_sample = sizeof(float),
                              .writer_bytes = o->output ? tl_volume_output_buffer_bytes(&spec) : 0,
                              .read_rows = 1,
                              .frame_rows = bands ? o->size : 0,
                              .chunk_frames = TL_VOLUME_READ_FRAMES,
                              .band_rows = bands ? tl_volume_bands_rows : NULL,
                              .band_ctx = bands,
                              .engine_bytes = tl_volume_engine_bytes,
                              .ctx = &ec};
    tl_volume_plan plan;
    char err[1024];
    if (tl_volume_plan_make(&prob, b, slab_rows, &plan, err, sizeof err) != 0)
        return tl_cli_fail(ME, 1, "%s: %s", label, ec.failed ? ec.why : err);
    printf("\n%s:\n", label);
    tl_volume_plan_print(&plan, &prob, b, stdout);
    tl_volume_output out;
    if (o->output && tl_volume_output_open(&out, &spec, err, sizeof err) != 0)
        return tl_cli_fail(ME, 1, "%s", err);
    tl_volume_job job = {.count = {0, 0, o->proj},
                         .read = read_synthetic,
                         .ctx = src,
                         .angles = angles,
                         .rows = o->size,
                         .size = o->size,
                         .engine = *c,
                         .whole_frames = plan.whole,
                         .bands = plan.whole ? NULL : bands,
                         .plan = &plan,
                         .out = o->output ? &out : NULL,
                         .progress = TL_PROGRESS_NONE};
    tl_volume_times t;
    tl_volume_result r = tl_volume_run(&job, &t, err, sizeof err);
    if (o->output)
        tl_volume_output_close(&out, r == TL_VOLUME_DONE ? TL_OUTPUT_DONE : TL_OUTPUT_REMOVE,
                               NULL, 0);
    if (r != TL_VOLUME_DONE)
        return tl_cli_fail(ME, 1, "%s: %s", label, err);
    printf("device %s, kernel %s\n", t.device, t.kernel);
    tl_volume_times_print(&t, stdout);
    double upd = (double)o->size * o->size * o->size * o->proj;
    printf("end to end %.3f s (+ setup %.3f s): %.1f G updates/s\n", t.wall, t.setup,
           upd / t.wall * 1e-9);
    fflush(stdout);
    *wall = t.wall;
    return 0;
}

int tl_bench_volume_e2e_run(const tl_bench_volume_e2e *o)
{
    tl_backend_kind backend = TL_BACKEND_CUDA;
    if (o->backend && !tl_backend_parse(o->backend, &backend))
        return tl_cli_fail(ME, 2, "unknown backend '%s'", o->backend);
    tl_volume_budget forced = {0, 0}, whole;
    if (o->gpu_memory && !tl_volume_parse_bytes(o->gpu_memory, &forced.gpu))
        return tl_cli_fail(ME, 2, "bad --gpu-memory '%s'", o->gpu_memory);
    if (o->host_memory && !tl_volume_parse_bytes(o->host_memory, &forced.host))
        return tl_cli_fail(ME, 2, "bad --host-memory '%s'", o->host_memory);
    tl_engine_config c;
    tl_engine_config_init(&c, o->cone.cone ? o->size : 1, o->size, o->proj);
    tl_cone_opts_engine(&o->cone, false, 0, &c); /* cone beam: FDK; nothing for parallel */
    c.backend = backend;
    c.device = o->device;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    if (o->kernel)
        snprintf(c.kernel, sizeof c.kernel, "%s", o->kernel);
    tl_memory_estimate m;
    tl_status st = tl_engine_estimate(&c, &m);
    if (st != TL_OK)
        return tl_cli_fail(ME, 1, "cannot create the engine: %s (%s)", tl_engine_last_error(NULL),
                           tl_status_name(st));
    whole.gpu = tl_volume_less_margin(m.available_bytes);
    whole.host = tl_volume_less_margin(tl_volume_host_available());
    if (!forced.gpu)
        forced.gpu = whole.gpu;
    if (!forced.host)
        forced.host = whole.host;

    size_t npix = (size_t)o->size * o->size;
    float *proj = malloc(npix * sizeof *proj);
    double *angles = malloc(o->proj * sizeof *angles);
    tl_phantom ph;
    if (!proj || !angles ||
        tl_phantom_shepp_logan(&ph, 0.45 * o->size, (o->size - 1) / 2.0, 0.45 * o->size) != 0) {
        free(proj);
        free(angles);
        return tl_cli_fail(ME, 1, "out of memory");
    }
    tl_phantom_project(&ph, 0.3, (o->size - 1) / 2.0, o->size, o->size, proj);
    tl_phantom_free(&ph);
    double turn = o->cone.cone ? 2 * M_PI : M_PI;
    for (uint32_t k = 0; k < o->proj; k++)
        angles[k] = turn * k / o->proj;
    synthetic src = {proj, o->size};
    tl_volume_bands bands = {0};
    char err[512];
    if (o->cone.cone && tl_volume_bands_init(&bands, &c, o->proj, NULL, angles, o->size, 0,
                                             o->size, err, sizeof err) != 0) {
        free(proj);
        free(angles);
        return tl_cli_fail(ME, 1, "%s", err);
    }
    tl_volume_bands *cone_bands = o->cone.cone ? &bands : NULL;
    printf("volume end to end: %u x %u x %u from %u %sprojections of %u x %u (float32 line "
           "integrals from memory), output %s\n",
           o->size, o->size, o->size, o->proj, o->cone.cone ? "cone-beam " : "", o->size,
           o->size, o->output ? o->output : "none");
    double base = 0, run = 0;
    int rc = run_once("baseline: the whole device (the window fits the GPU)", o, &c, &whole, 0,
                      angles, &src, cone_bands, &base);
    if (rc != 0)
        printf("(no baseline: %s)\n", "it does not fit");
    int rc2 = run_once("out of core: the given budgets", o, &c, &forced, o->slab_rows, angles, &src,
                       cone_bands, &run);
    if (rc == 0 && rc2 == 0)
        printf("\nout-of-core overhead: %.3f s / %.3f s = %.2fx the baseline\n", run, base,
               run / base);
    tl_volume_bands_free(&bands);
    free(proj);
    free(angles);
    return rc2;
}
