/* bench_engine.c — see bench_engine.h. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/bench_engine.h"
#include "clients/cli.h"
#include "gpu/phantom.h"

/* The phantom's outer ellipse, as a share of the detector width. */
#define PHANTOM_RADIUS 0.45
/* Kernels and micro-benchmarks a table lists at most. */
#define MAX_KERNELS 128
#define MAX_RATES 64

/* The configuration both engines share: float32 line integrals, rows x size, window proj. */
static tl_engine_config bench_config(tl_backend_kind backend, int device, uint32_t size,
                                     uint32_t proj, uint32_t rows)
{
    tl_engine_config c;
    tl_engine_config_init(&c, rows, size, proj);
    c.backend = backend;
    c.device = device;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    return c;
}

int tl_bench_submit(const char *me, tl_engine *e, uint32_t k, double theta, uint32_t rows,
                    uint32_t cols, const float *li, bool more)
{
    tl_frame f = {.kind = TL_FRAME_PROJ,
                  .index = k,
                  .angle = theta,
                  .dtype = TL_DTYPE_F32,
                  .rows = rows,
                  .cols = cols,
                  .data = li,
                  .more = more};
    tl_status st = tl_engine_submit(e, &f);
    if (st == TL_OK)
        return 0;
    return tl_cli_fail(me, 1, "projection %u: %s (%s)", k, tl_engine_last_error(e),
                       tl_status_name(st));
}

int tl_bench_engine(const char *me, tl_backend_kind backend, int device, uint32_t size,
                    uint32_t proj, uint32_t rows, tl_engine **e, int *ids)
{
    tl_engine_config c = bench_config(backend, device, size, proj, rows);
    tl_status st = tl_engine_create(&c, e);
    if (st != TL_OK)
        return tl_cli_fail(me, 1,
                           "cannot create an engine for %ux%u slices from %u "
                           "projections: %s (%s)",
                           size, size, proj, tl_engine_last_error(NULL), tl_status_name(st));
    tl_phantom ph;
    float *li = malloc((size_t)rows * size * sizeof *li);
    int rc = 0;
    if (!li || tl_phantom_shepp_logan(&ph, PHANTOM_RADIUS * size, (rows - 1) / 2.0,
                                      PHANTOM_RADIUS * size) != 0) {
        free(li);
        li = NULL;
        rc = tl_cli_fail(me, 1, "out of memory for the phantom");
    }
    for (uint32_t k = 0; li && rc == 0 && k < proj; k++) {
        double theta = k * M_PI / proj;
        tl_phantom_project(&ph, theta, c.center, rows, size, li);
        rc = tl_bench_submit(me, *e, k, theta, rows, size, li, false);
    }
    if (li) {
        tl_phantom_free(&ph);
        free(li);
    }
    for (uint32_t z = 0; ids && rc == 0 && z < rows; z++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, z, size, size);
        if ((st = tl_engine_add_slice(*e, &s, &ids[z])) != TL_OK)
            rc = tl_cli_fail(me, 1, "slice %u: %s (%s)", z, tl_engine_last_error(*e),
                             tl_status_name(st));
    }
    if (rc != 0) {
        tl_engine_destroy(*e);
        *e = NULL;
    }
    return rc;
}

int tl_bench_engine_cone(const char *me, tl_backend_kind backend, int device, uint32_t size,
                         uint32_t proj, uint32_t rows, const tl_cone_opts *k, tl_engine **e)
{
    tl_engine_config c = bench_config(backend, device, size, proj, rows);
    c.quality = TL_QUALITY_FAST;
    const double center = tl_cone_opts_center(k, size, false, 0);
    tl_cone_opts_engine(k, false, center, &c);
    tl_status st = tl_engine_create(&c, e);
    if (st != TL_OK)
        return tl_cli_fail(me, 1,
                           "cannot create a cone-beam engine for %ux%u slices from %u "
                           "projections of %ux%u: %s (%s)",
                           size, size, proj, rows, size, tl_engine_last_error(NULL),
                           tl_status_name(st));
    char why[256];
    tl_errbuf eb = {0};
    tl_phantom ph = {0}; /* freed whether made or not */
    size_t npix = (size_t)rows * size;
    float *li = malloc(npix * sizeof *li);
    double *exact = malloc(npix * sizeof *exact); /* float64 scratch of tl_cone_opts_view */
    int rc = 0;
    if (!li || !exact)
        rc = tl_cli_fail(me, 1, "out of memory for the projections");
    else if (tl_cone_opts_phantom(k, rows, size, center, 1.0, &ph, why, sizeof why) != 0)
        rc = tl_cli_fail(me, 1, "%s", why);
    for (uint32_t p = 0; rc == 0 && p < proj; p++) {
        double theta = 2 * M_PI * p / proj;
        if (tl_cone_opts_view(k, &ph, rows, size, center, theta, NULL, li, exact, &eb) != TL_OK) {
            rc = tl_cli_fail(me, 1, "projection %u: %s", p, eb.msg);
            break;
        }
        rc = tl_bench_submit(me, *e, p, theta, rows, size, li, false);
    }
    tl_phantom_free(&ph);
    free(li);
    free(exact);
    if (rc != 0) {
        tl_engine_destroy(*e);
        *e = NULL;
    }
    return rc;
}

int tl_bench_parse_gpus(const char *me, const char *arg, tl_bench_gpus *g)
{
    g->n = 0;
    if (strcmp(arg, "all") == 0) {
        char why[256] = "";
        int n = tl_backend_device_count(TL_BACKEND_CUDA, why, sizeof why);
        if (n <= 0)
            return tl_cli_fail(me, 1, "--gpus all: no CUDA device: %s", why);
        for (int k = 0; k < n && k < TL_ENGINE_MAX_DEVICES; k++)
            g->dev[g->n++] = k;
        return 0;
    }
    for (const char *p = arg;; p++) {
        char num[16];
        size_t len = strcspn(p, ",");
        long v;
        if (len == 0 || len >= sizeof num || g->n == TL_ENGINE_MAX_DEVICES)
            break;
        memcpy(num, p, len);
        num[len] = '\0';
        if (!tl_cli_long(num, 0, 1024, &v))
            break;
        g->dev[g->n++] = (int)v;
        p += len;
        if (*p == '\0')
            return 0;
    }
    g->n = 0;
    return tl_cli_fail(me, 2,
                       "bad --gpus '%s': need device ordinals like 0,1 (at most %d) "
                       "or all",
                       arg, TL_ENGINE_MAX_DEVICES);
}

void tl_bench_use_gpus(tl_engine_config *c, const tl_bench_gpus *g, uint32_t k)
{
    c->ndevices = 0;
    if (k == 1)
        c->device = g->dev[0];
    else if (k >= 2) {
        c->ndevices = k;
        memcpy(c->devices, g->dev, k * sizeof *g->dev);
    }
}

void tl_bench_gpus_label(const tl_bench_gpus *g, uint32_t k, char *buf, size_t len)
{
    int used = snprintf(buf, len, "GPU%s ", k > 1 ? "s" : "");
    for (uint32_t i = 0; i < k && used > 0 && (size_t)used < len; i++)
        used += snprintf(buf + used, len - (size_t)used, "%s%d", i ? "," : "", g->dev[i]);
}

void tl_bench_kernel_info(const tl_engine *e, const char *name, uint32_t *slices,
                          const char **params)
{
    tl_kernel_info k[MAX_KERNELS];
    size_t n = tl_engine_kernels(e, k, MAX_KERNELS);
    *slices = 0;
    *params = "";
    for (size_t i = 0; i < n && i < MAX_KERNELS; i++)
        if (strcmp(k[i].name, name) == 0) {
            *slices = k[i].slices;
            *params = k[i].params ? k[i].params : "";
        }
}

int tl_bench_print_rates(const char *me, tl_engine *e, bool *unsupported)
{
    tl_hw_rate r[MAX_RATES];
    size_t n = 0;
    tl_status st = tl_engine_hw_rates(e, r, MAX_RATES, &n);
    *unsupported = st == TL_EUNSUPPORTED;
    if (*unsupported)
        return 0;
    if (st != TL_OK)
        return tl_cli_fail(me, 1, "micro-benchmarks failed: %s (%s)", tl_engine_last_error(e),
                           tl_status_name(st));
    printf("\nmicro-benchmarks of the device:\n");
    printf("%-32s | %12s | %s\n", "name", "value", "unit");
    printf("---------------------------------+--------------+-----------\n");
    for (size_t i = 0; i < n && i < MAX_RATES; i++)
        printf("%-32s | %12.2f | %s\n", r[i].name, r[i].value, r[i].unit);
    fflush(stdout);
    return 0;
}
