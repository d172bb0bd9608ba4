/* check_hdf5.c — scans in HDF5 files (clients/hdf5.h), written here with libhdf5:
 *
 *   - `tomolive recon` on an APS Data Exchange file (/exchange/data, data_white, data_dark,
 *     theta in degrees) gives exactly the reconstruction of the same frames as TIFF stacks
 *     with --angles-deg; so does a NeXus NXtomo file (one /entry/data/data with image_key,
 *     flats before darks, an invalid frame, rotation_angle per frame);
 *   - `tomolive push --file scan.h5 --rate R` replays it into a daemon: every frame
 *     accepted, no faster than R frames/s, and the daemon's row slice equals recon's page.
 */
#include "config.h"

#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "clients/tiff.h"
#include "tests/daemon_fixture.h"
#include "tests/camera_scan.h"
#include "tests/testutil.h"

enum { R = 8, W = 64, N = 90, D = 4, F = 4 };
#define NPIX ((size_t)R * W)

static uint16_t *darks, *flats, *projs;

static void make_scan(void)
{
    tl_test_camera_scan(R, W, D, F, N, 11, &darks, &flats, &projs);
}

static void write_tiff(const char *path, const uint16_t *v, int pages)
{
    tl_tiff_writer w;
    char err[256];
    ck_assert_msg(tl_tiff_create(&w, path, 0, err, sizeof err) == 0, "%s", err);
    for (int k = 0; k < pages; k++)
        ck_assert_msg(tl_tiff_write_page(&w, TL_DTYPE_U16, v + (size_t)k * NPIX, R, W, err,
                                         sizeof err) == 0,
                      "%s", err);
    ck_assert_msg(tl_tiff_finish(&w, err, sizeof err) == 0, "%s", err);
}

static void write_dataset(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                          const void *data)
{
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(d >= 0);
    ck_assert(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
}

static void write_dx(const char *path)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "/exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dp[3] = {N, R, W}, dd[3] = {D, R, W}, df[3] = {F, R, W}, dt[1] = {N};
    write_dataset(g, "data", H5T_NATIVE_UINT16, 3, dp, projs);
    write_dataset(g, "data_dark", H5T_NATIVE_UINT16, 3, dd, darks);
    write_dataset(g, "data_white", H5T_NATIVE_UINT16, 3, df, flats);
    double theta[N];
    for (int k = 0; k < N; k++)
        theta[k] = k * 180.0 / N; /* degrees, as --angles-deg 0:180:N makes them */
    write_dataset(g, "theta", H5T_NATIVE_DOUBLE, 1, dt, theta);
    H5Gclose(g);
    H5Fclose(f);
}

/* NXtomo: flats, an invalid frame, darks, then the projections, in one dataset. */
static void write_nx(const char *path)
{
    int n = F + 1 + D + N;
    uint16_t *all = malloc((size_t)n * NPIX * 2);
    int32_t *key = malloc((size_t)n * sizeof *key);
    double *angle = malloc((size_t)n * sizeof *angle);
    int i = 0;
    for (int k = 0; k < F; k++, i++) {
        memcpy(all + i * NPIX, flats + k * NPIX, NPIX * 2);
        key[i] = 1;
        angle[i] = 0;
    }
    for (size_t p = 0; p < NPIX; p++)
        all[i * NPIX + p] = 65535; /* invalid: must be skipped */
    key[i] = 3;
    angle[i++] = 0;
    for (int k = 0; k < D; k++, i++) {
        memcpy(all + i * NPIX, darks + k * NPIX, NPIX * 2);
        key[i] = 2;
        angle[i] = 0;
    }
    for (int k = 0; k < N; k++, i++) {
        memcpy(all + i * NPIX, projs + k * NPIX, NPIX * 2);
        key[i] = 0;
        angle[i] = k * 180.0 / N;
    }
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t e = H5Gcreate2(f, "/entry", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t d = H5Gcreate2(e, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t s = H5Gcreate2(e, "sample", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[3] = {(hsize_t)n, R, W}, d1[1] = {(hsize_t)n};
    write_dataset(d, "data", H5T_NATIVE_UINT16, 3, dims, all);
    write_dataset(d, "image_key", H5T_NATIVE_INT32, 1, d1, key);
    write_dataset(s, "rotation_angle", H5T_NATIVE_DOUBLE, 1, d1, angle);
    H5Gclose(s);
    H5Gclose(d);
    H5Gclose(e);
    H5Fclose(f);
    free(all);
    free(key);
    free(angle);
}

static float *read_stack(const char *path, uint32_t *pages)
{
    tl_tiff_reader r;
    char err[256];
    ck_assert_msg(tl_tiff_open(&r, path, err, sizeof err) == 0, "%s", err);
    ck_assert(r.dtype == TL_DTYPE_F32 && r.rows == W && r.cols == W);
    float *all = malloc((size_t)r.pages * W * W * sizeof *all);
    for (uint32_t k = 0; k < r.pages; k++)
        ck_assert(tl_tiff_read_page(&r, k, all + (size_t)k * W * W, err, sizeof err) == 0);
    *pages = r.pages;
    tl_tiff_close(&r);
    return all;
}

static float *recon(const char *dir, const char *args, const char *out)
{
    char *log = NULL;
    int rc = tl_fx_run(&log, "cd '%s' && tomolive recon --backend cpu %s --output %s 2>&1", dir,
                       args, out);
    ck_assert_msg(rc == 0, "recon %s failed:\n%s", args, log);
    free(log);
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, out);
    uint32_t pages;
    float *v = read_stack(path, &pages);
    ck_assert_uint_eq(pages, R);
    return v;
}

START_TEST(recon_hdf5_equals_tiff)
{
    make_scan();
    char *dir = tl_tmpdir("hdf5");
    char path[700];
    const char *names[] = {"d.tif", "f.tif", "p.tif"};
    const uint16_t *stacks[] = {darks, flats, projs};
    const int counts[] = {D, F, N};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        write_tiff(path, stacks[k], counts[k]);
    }
    snprintf(path, sizeof path, "%s/scan.h5", dir);
    write_dx(path);
    snprintf(path, sizeof path, "%s/scan.nxs", dir);
    write_nx(path);
    float *tif =
        recon(dir, "--input p.tif --darks d.tif --flats f.tif --angles-deg 0:180:90", "t.tif");
    float *dx = recon(dir, "--input scan.h5", "dx.tif");
    float *nx = recon(dir, "--input scan.nxs", "nx.tif");
    size_t n = (size_t)R * W * W;
    double e_dx = tl_rel_l2(dx, tif, n), e_nx = tl_rel_l2(nx, tif, n);
    fprintf(stderr, "recon: Data Exchange vs TIFF rel L2 %.3g, NXtomo vs TIFF %.3g\n", e_dx, e_nx);
    ck_assert_msg(memcmp(dx, tif, n * sizeof *tif) == 0, "Data Exchange differs: %g", e_dx);
    ck_assert_msg(memcmp(nx, tif, n * sizeof *tif) == 0, "NXtomo differs: %g", e_nx);
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += fabs(tif[i]);
    ck_assert(s > 0); /* a reconstruction, not zeros */

    /* push --file replays the Data Exchange file into a daemon, paced */
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "hdf5push", NULL), 0);
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"row\",\"kind\":\"row\",\"z\":3}"));
    char *out = NULL;
    double t0 = tl_fx_seconds();
    int rc = tl_fx_run(&out,
                       "tomolive push --endpoint '%s' --file '%s/scan.h5' --rate 400 --quiet 2>&1",
                       f.ingest, dir);
    double secs = tl_fx_seconds() - t0;
    ck_assert_msg(rc == 0, "push --file failed:\n%s", out);
    fprintf(stderr, "push --file: %s(%.2f s for %d frames at 400/s)\n", out, secs, D + F + N);
    free(out);
    ck_assert(secs >= (D + F + N - 1) / 400.0);
    ck_assert(tl_fx_wait_messages(&f, 1 + D + F + N + 1, 30));
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.dark"), D);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.flat"), F);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.proj"), N);
    void *sub = zmq_socket(f.zctx, ZMQ_SUB);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "slice/row/", 10);
    zmq_connect(sub, f.slices);
    zmq_pollitem_t it = {sub, 0, ZMQ_POLLIN, 0};
    ck_assert_int_gt(zmq_poll(&it, 1, 20000), 0);
    zmq_msg_t parts[4];
    tl_proto_error e;
    int np = tl_proto_recv(sub, parts, 4, 0, &e);
    tl_proto_decoder *dec = tl_proto_decoder_new();
    tl_proto_msg m;
    ck_assert_int_eq(tl_proto_decode_parts(dec, parts, np, TL_MSG_SLICE, &m, &e), TL_PROTO_OK);
    ck_assert_uint_eq(m.slice.payload_len, (size_t)W * W * 4);
    double e_push = tl_rel_l2(m.slice.payload, tif + (size_t)3 * W * W, (size_t)W * W);
    fprintf(stderr, "push --file: daemon row 3 vs recon page 3 rel L2 %.3g\n", e_push);
    ck_assert(e_push <= 1e-6);
    tl_proto_close(parts, np);
    tl_proto_decoder_free(dec);
    zmq_close(sub);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);

    free(tif);
    free(dx);
    free(nx);
    tl_rm_rf(dir);
    free(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hdf5");
    TCase *tc = tcase_create("hdf5");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, recon_hdf5_equals_tiff);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
