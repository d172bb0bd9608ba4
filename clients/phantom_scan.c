/* phantom_scan.c — `tomolive phantom --scan OUT.h5`: a whole simulated scan written as an
 * APS Data Exchange HDF5 file, streamed (a batch of projections at a time, never the scan
 * in memory), so a machine that cannot download data can make the input of a large
 * `tomolive recon` run itself: e.g. 1200 projections of 2048 x 2048 uint16 (9.4 GiB).
 *
 * The sample is the 3-D Shepp-Logan phantom (gpu/phantom.h, exact line integrals), its
 * densities scaled so the thickest path attenuates by about e^-2. Parallel beam: N views
 * over 180 degrees. Cone beam (--geometry cone and its options, spelled as recon and push
 * spell them: clients/cone_opts.h): N views over a whole turn of the sample `tomolive
 * push --geometry cone` sends, sized so no view is truncated, its exact cone-beam line
 * integrals (tl_cone_opts_phantom, tl_cone_opts_view), so a recon given the same options
 * has the phantom as its truth. A projection is
 * dark + (flat - dark) exp(-line integral) counts (dark 100, flat 4000, no noise), with 4
 * darks and 4 flats; float32 scans hold the line integrals themselves (reconstruct them
 * with --already-linear). Projections are computed by one thread per core. Chunks are
 * (1, 64, cols): the row bands out-of-core reconstruction reads.
 */
#include "config.h"

#include <getopt.h>
#include <hdf5.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clients/cli.h"
#include "clients/commands.h"
#include "clients/cone_opts.h"
#include "gpu/phantom.h"

#define ME "tomolive phantom --scan"
#define DARK 100.0
#define FLAT 4000.0
#define CALIB 4 /* darks, and flats, in the file */
#define CHUNK_ROWS 64

static const char usage_text[] =
    "usage: tomolive phantom --scan OUT.h5 [--projections N] [--size S] [--rows R]\n"
    "                        [--dtype uint16|float32] [--threads T]\n"
    "                        [--geometry cone --source-origin MM --source-detector MM\n"
    "                         --pixel-size MM[,MM] [--offset U,V]]\n"
    "Writes a simulated parallel-beam scan of the 3-D Shepp-Logan phantom as an APS Data\n"
    "Exchange HDF5 file: N projections (default 1200) over 180 degrees of R x S pixels\n"
    "(default 2048 x 2048; R defaults to S), 4 darks, 4 flats, /exchange/theta. uint16\n"
    "(default) holds counts; float32 holds line integrals (recon --already-linear).\n"
    "--geometry cone: a circular cone-beam scan over 360 degrees instead, the sample and\n"
    "its exact line integrals those of `tomolive push --geometry cone` (the options as\n"
    "there); reconstruct with `tomolive recon --geometry cone` and the same options.\n";

typedef struct {
    const tl_phantom *ph;
    const tl_cone_opts *cone; /* cone beam, or NULL */
    double center;            /* the axis' (principal point's) column */
    uint32_t rows, cols, nproj, first, count, stride, offset;
    bool u16;
    void *out;  /* count frames */
    float *tmp; /* one frame of line integrals */
    double *dl; /* cone beam: one frame of them in float64 (tl_cone_opts_view) */
    tl_errbuf eb;
    tl_status st; /* cone beam: a view that failed (no source: not for a checked circle) */
} work;

static void *compute(void *arg)
{
    work *w = arg;
    size_t npix = (size_t)w->rows * w->cols;
    for (uint32_t k = w->offset; k < w->count; k += w->stride) {
        uint32_t i = w->first + k;
        float *li = w->u16 ? w->tmp : (float *)w->out + k * npix;
        if (w->cone) {
            w->st = tl_cone_opts_view(w->cone, w->ph, w->rows, w->cols, w->center,
                                      2 * M_PI * i / w->nproj, NULL, li, w->dl, &w->eb);
            if (w->st != TL_OK)
                return NULL;
        } else {
            tl_phantom_project(w->ph, M_PI * i / w->nproj, w->center, w->rows, w->cols, li);
        }
        if (w->u16) {
            uint16_t *o = (uint16_t *)w->out + k * npix;
            for (size_t p = 0; p < npix; p++)
                o[p] = (uint16_t)lrint(DARK + (FLAT - DARK) * exp(-(double)li[p]));
        }
    }
    return NULL;
}

static hid_t make_set(hid_t f, const char *name, hid_t type, uint32_t n, uint32_t rows,
                      uint32_t cols)
{
    hsize_t dims[3] = {n, rows, cols}, chunk[3] = {1, rows < CHUNK_ROWS ? rows : CHUNK_ROWS, cols};
    hid_t sp = H5Screate_simple(3, dims, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(pl, 3, chunk);
    hid_t d = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    H5Pclose(pl);
    H5Sclose(sp);
    return d;
}

static int write_frames(hid_t d, hid_t memtype, uint32_t first, uint32_t n, uint32_t rows,
                        uint32_t cols, const void *buf)
{
    hsize_t start[3] = {first, 0, 0}, count[3] = {n, rows, cols};
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(3, count, NULL);
    herr_t st = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    if (st >= 0)
        st = H5Dwrite(d, memtype, ms, fs, H5P_DEFAULT, buf);
    H5Sclose(fs);
    H5Sclose(ms);
    return st < 0 ? -1 : 0;
}

int tl_cmd_phantom_scan(int argc, char **argv)
{
    const char *out = NULL, *dtype = "uint16";
    long nproj = 1200, size = 2048, rows = 0, threads = 0;
    tl_cone_opts cone = {0};
    char why[256];
    static const struct option opts[] = {{"scan", required_argument, NULL, 'o'},
                                         {"projections", required_argument, NULL, 'n'},
                                         {"size", required_argument, NULL, 's'},
                                         {"rows", required_argument, NULL, 'r'},
                                         {"dtype", required_argument, NULL, 'd'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"geometry", required_argument, NULL, 'c'},
                                         {"source-origin", required_argument, NULL, 'c'},
                                         {"source-detector", required_argument, NULL, 'c'},
                                         {"pixel-size", required_argument, NULL, 'c'},
                                         {"offset", required_argument, NULL, 'c'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    optind = 1;
    opterr = 0;
    int c, at = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, &at)) != -1) {
        long *v = c == 'n' ? &nproj : c == 's' ? &size : c == 'r' ? &rows : &threads;
        switch (c) {
            case 'o': out = optarg; break;
            case 'd': dtype = optarg; break;
            case 'c':
                if (!tl_cone_opt(&cone, opts[at].name, optarg, why, sizeof why))
                    return tl_cli_fail(ME, 1, "%s", why);
                break;
            case 'n':
            case 's':
            case 'r':
            case 't':
                if (!tl_cli_long(optarg, 1, 65536, v))
                    return tl_cli_fail(ME, 1, "bad value '%s' for --%s", optarg, opts[at].name);
                break;
            case 'h': fputs(usage_text, stdout); return 0;
            default: return tl_cli_fail(ME, 2, "bad option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (!out)
        return tl_cli_fail(ME, 2, "missing --scan OUT.h5");
    if (out[0] == '-') /* `--scan --help` would write gigabytes to a file named --help */
        return tl_cli_fail(ME, 2, "'%s' is not an output file name (--scan OUT.h5)", out);
    if (!tl_cone_opts_check(&cone, false, why, sizeof why))
        return tl_cli_fail(ME, 2, "%s", why);
    bool u16 = !strcmp(dtype, "uint16");
    if (!u16 && strcmp(dtype, "float32"))
        return tl_cli_fail(ME, 1, "bad --dtype '%s' (uint16, float32)", dtype);
    uint32_t R = (uint32_t)(rows ? rows : size), W = (uint32_t)size, N = (uint32_t)nproj;
    uint32_t T = threads ? (uint32_t)threads : (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
    T = T ? T : 1;
    size_t npix = (size_t)R * W, ss = u16 ? 2 : 4;
    /* frames per write: two per thread, and at least the CALIB darks (flats) written
     * from the same buffer */
    uint32_t batch = 2 * T > CALIB ? 2 * T : CALIB;
    double center = tl_cone_opts_center(&cone, W, false, 0);
    tl_phantom ph;
    if (cone.cone) { /* in mm, as large as fits, the thickest path 2 (cone_opts.h) */
        if (tl_cone_opts_phantom(&cone, R, W, center, 2.0, &ph, why, sizeof why) != 0)
            return tl_cli_fail(ME, 1, "%s", why);
    } else {
        if (tl_phantom_shepp_logan(&ph, 0.45 * W, (R - 1) / 2.0, 0.45 * R) != 0)
            return tl_cli_fail(ME, 1, "out of memory");
        tl_phantom_scale_density(&ph, 2.0 / (0.9 * W));
    }
    void *buf = malloc(batch * npix * ss);
    float *tmp = malloc(T * npix * sizeof(float));
    double *dl = cone.cone ? malloc(T * npix * sizeof(double)) : NULL;
    work *w = calloc(T, sizeof *w);
    pthread_t *tid = calloc(T, sizeof *tid);
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(out, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int rc =
        buf && tmp && w && tid && (dl || !cone.cone) ? 0 : tl_cli_fail(ME, 1, "out of memory");
    if (rc == 0 && f < 0)
        rc = tl_cli_fail(ME, 1, "cannot create '%s'", out);
    hid_t ft = u16 ? H5T_STD_U16LE : H5T_IEEE_F32LE,
          mt = u16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_FLOAT;
    hid_t g = -1, dp = -1, dd = -1, dw = -1;
    if (rc == 0) {
        g = H5Gcreate2(f, "/exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        dp = make_set(f, "/exchange/data", ft, N, R, W);
        dd = make_set(f, "/exchange/data_dark", ft, CALIB, R, W);
        dw = make_set(f, "/exchange/data_white", ft, CALIB, R, W);
        if (g < 0 || dp < 0 || dd < 0 || dw < 0)
            rc = tl_cli_fail(ME, 1, "'%s': cannot create the datasets", out);
    }
    /* darks and flats: uniform (float32: zeros and ones, harmless with --already-linear) */
    for (int k = 0; rc == 0 && k < 2; k++) {
        for (size_t p = 0; p < CALIB * npix; p++)
            if (u16)
                ((uint16_t *)buf)[p] = k ? (uint16_t)FLAT : (uint16_t)DARK;
            else
                ((float *)buf)[p] = k ? 1.0f : 0.0f;
        if (write_frames(k ? dw : dd, mt, 0, CALIB, R, W, buf) != 0)
            rc = tl_cli_fail(ME, 1, "'%s': cannot write (disk full?)", out);
    }
    double t0 = tl_cli_now();
    for (uint32_t first = 0; rc == 0 && first < N; first += batch) {
        uint32_t n = N - first < batch ? N - first : batch;
        for (uint32_t t = 0; t < T; t++) {
            w[t] = (work){.ph = &ph,
                          .cone = cone.cone ? &cone : NULL,
                          .center = center,
                          .rows = R,
                          .cols = W,
                          .nproj = N,
                          .first = first,
                          .count = n,
                          .stride = T,
                          .offset = t,
                          .u16 = u16,
                          .out = buf,
                          .tmp = tmp + t * npix,
                          .dl = dl ? dl + t * npix : NULL};
            pthread_create(&tid[t], NULL, compute, &w[t]);
        }
        for (uint32_t t = 0; t < T; t++)
            pthread_join(tid[t], NULL);
        for (uint32_t t = 0; rc == 0 && t < T; t++)
            if (w[t].st != TL_OK)
                rc = tl_cli_fail(ME, 1, "a cone-beam view: %s", w[t].eb.msg);
        if (rc == 0 && write_frames(dp, mt, first, n, R, W, buf) != 0)
            rc = tl_cli_fail(ME, 1, "'%s': cannot write projections %u .. %u (disk full?)", out,
                             first, first + n - 1);
        if (isatty(STDERR_FILENO))
            fprintf(stderr, "\r" ME ": %u/%u projections", first + n, N);
    }
    if (rc == 0) {
        hsize_t n = N;
        double *theta = malloc(N * sizeof *theta);
        hid_t sp = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(f, "/exchange/theta", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT);
        for (uint32_t i = 0; theta && i < N; i++)
            theta[i] = (cone.cone ? 360.0 : 180.0) * i / N;
        if (!theta || d < 0 ||
            H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, theta) < 0)
            rc = tl_cli_fail(ME, 1, "'%s': cannot write /exchange/theta", out);
        if (d >= 0)
            H5Dclose(d);
        H5Sclose(sp);
        free(theta);
    }
    hid_t ids[] = {dp, dd, dw};
    for (int k = 0; k < 3; k++)
        if (ids[k] >= 0)
            H5Dclose(ids[k]);
    if (g >= 0)
        H5Gclose(g);
    if (f >= 0 && H5Fclose(f) < 0 && rc == 0)
        rc = tl_cli_fail(ME, 1, "'%s': cannot close", out);
    if (rc == 0)
        printf(ME ": %s: %u %sprojections of %u x %u %s, 4 darks, 4 flats in %.1f s\n", out, N,
               cone.cone ? "cone-beam " : "", R, W, dtype, tl_cli_now() - t0);
    else if (f >= 0)
        unlink(out);
    tl_phantom_free(&ph);
    free(buf);
    free(tmp);
    free(dl);
    free(w);
    free(tid);
    return rc;
}
