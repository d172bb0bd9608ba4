/* check_recon_window.c — `tomolive recon --window N --indices FILE`: reproducing offline a
 * stream of an N-projection scan in which some projections were lost. The binary's output
 * is compared with the engine driven in-process with window N and the same frame indices
 * and angles; the weight is shown to be pi / N (doubling N halves the slice); angles are
 * taken per page or per frame index; and the errors are checked.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clients/tiff.h"
#include "gpu/engine.h"
#include "gpu/phantom.h"
#include "tests/integration/clients_util.h"
#include "tests/testutil.h"

enum { ROWS = 2, COLS = 48, N = 90 };

static char *dir;
static uint64_t kept[N];
static uint32_t nkept;

static const char *path_in(const char *name)
{
    return tl_path_in(dir, name);
}

static bool is_lost(uint64_t k)
{
    return k == 3 || k == 17 || k == 40 || k == 41 || k == 88;
}

/* Line integrals of the kept projections, in a slightly shuffled arrival order. */
static void make_scan(void)
{
    dir = tl_tmpdir("reconwin");
    ck_assert_ptr_nonnull(dir);
    nkept = 0;
    for (uint64_t k = 0; k < N; k++)
        if (!is_lost(k))
            kept[nkept++] = k;
    uint64_t t = kept[10]; /* arrival order need not be index order */
    kept[10] = kept[11];
    kept[11] = t;
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 0.45 * COLS, 0.5, 0.45 * COLS), 0);
    tl_phantom_scale_density(&ph, 0.05);
    float li[ROWS * COLS];
    char err[512];
    tl_tiff_writer w;
    ck_assert_msg(tl_tiff_create(&w, path_in("proj.tif"), 0, err, sizeof err) == 0, "%s", err);
    FILE *fi = fopen(path_in("indices.txt"), "w"), *fa = fopen(path_in("angles.txt"), "w");
    for (uint32_t i = 0; i < nkept; i++) {
        tl_phantom_project(&ph, kept[i] * M_PI / N, (COLS - 1) / 2.0, ROWS, COLS, li);
        ck_assert_msg(tl_tiff_write_page(&w, TL_DTYPE_F32, li, ROWS, COLS, err, sizeof err) == 0,
                      "%s", err);
        fprintf(fi, "%llu\n", (unsigned long long)kept[i]);
        fprintf(fa, "%.17g\n", kept[i] * 180.0 / N);
    }
    fclose(fi);
    fclose(fa);
    ck_assert_msg(tl_tiff_finish(&w, err, sizeof err) == 0, "%s", err);
    tl_phantom_free(&ph);
}

static void drop_scan(void)
{
    tl_rm_rf(dir);
    free(dir);
}

/* The engine in-process: window N, the kept frames at their indices. */
static float *reference(void)
{
    tl_engine_config c;
    tl_engine_config_init(&c, ROWS, COLS, N);
    c.backend = TL_BACKEND_CPU;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    tl_engine *e;
    ck_assert_msg(tl_engine_create(&c, &e) == TL_OK, "%s", tl_engine_last_error(NULL));
    tl_tiff_reader r;
    char err[512];
    ck_assert_msg(tl_tiff_open(&r, path_in("proj.tif"), err, sizeof err) == 0, "%s", err);
    float li[ROWS * COLS];
    for (uint32_t i = 0; i < nkept; i++) {
        ck_assert(tl_tiff_read_page(&r, i, li, err, sizeof err) == 0);
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = kept[i],
                      .angle = kept[i] * M_PI / N,
                      .dtype = TL_DTYPE_F32,
                      .rows = ROWS,
                      .cols = COLS,
                      .data = li};
        ck_assert_msg(tl_engine_submit(e, &f) == TL_OK, "%s", tl_engine_last_error(e));
    }
    tl_tiff_close(&r);
    float *out = malloc(ROWS * COLS * COLS * sizeof *out);
    for (int z = 0; z < ROWS; z++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, z, COLS, COLS);
        int id;
        ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
        float *o = out + z * COLS * COLS;
        tl_slice_info info;
        ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &o, &info), TL_OK);
        ck_assert_uint_eq(info.missing, N - nkept);
    }
    tl_engine_destroy(e);
    return out;
}

static float *read_output(const char *p)
{
    char err[512];
    tl_tiff_reader r;
    ck_assert_msg(tl_tiff_open(&r, p, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(r.pages, ROWS);
    float *out = malloc(ROWS * COLS * COLS * sizeof *out);
    for (uint32_t i = 0; i < ROWS; i++)
        ck_assert(tl_tiff_read_page(&r, i, out + i * COLS * COLS, err, sizeof err) == 0);
    tl_tiff_close(&r);
    return out;
}

static float *recon(const char *window, const char *angles_opt, const char *angles)
{
    const char *args[] = {"recon",
                          "--input",
                          path_in("proj.tif"),
                          "--already-linear",
                          "--backend",
                          "cpu",
                          angles_opt,
                          angles,
                          "--indices",
                          path_in("indices.txt"),
                          "--output",
                          path_in("out.tif"),
                          window ? "--window" : NULL,
                          window,
                          NULL};
    int rc = tl_client_run(dir, args, 120);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, tl_client_err());
    return read_output(path_in("out.tif"));
}

START_TEST(test_window_matches_engine)
{
    float *ref = reference();
    /* the scan's schedule, each page taking its index's angle */
    float *a = recon("90", "--angles-deg", "0:180:90");
    double rel = tl_rel_l2(a, ref, ROWS * COLS * COLS);
    ck_assert_msg(rel <= 1e-6, "relative L2 %.3g vs the engine with window %d", rel, N);
    /* one angle per page: the same; --window keeps the weights pi / N with a file */
    float *b = recon("90", "--angles", path_in("angles.txt"));
    rel = tl_rel_l2(b, ref, ROWS * COLS * COLS);
    ck_assert_msg(rel <= 1e-6, "per-page angles: relative L2 %.3g", rel);
    /* the weight is pi / N: twice the window, half the slice */
    float *c = recon("180", "--angles-deg", "0:180:90");
    for (size_t i = 0; i < ROWS * COLS * COLS; i++)
        c[i] *= 2;
    rel = tl_rel_l2(c, ref, ROWS * COLS * COLS);
    ck_assert_msg(rel <= 1e-6, "window 180 x 2: relative L2 %.3g", rel);
    free(a);
    free(b);
    free(c);
    free(ref);
}
END_TEST

START_TEST(test_window_errors)
{
    FILE *f = fopen(path_in("short.txt"), "w");
    fprintf(f, "0\n1\n");
    fclose(f);
    f = fopen(path_in("junk.txt"), "w");
    fprintf(f, "0\n# fine\n-1\n");
    fclose(f);
    const struct {
        const char *phrase;
        const char *args[16];
    } cases[] = {
        /* the default window (the page count) is shorter than the indices span */
        {"--window",
         {"recon", "--input", path_in("proj.tif"), "--angles-deg", "0:180:90", "--indices",
          path_in("indices.txt"), "--output", path_in("x.tif"), NULL}},
        {"holds 2 indices",
         {"recon", "--input", path_in("proj.tif"), "--angles-deg", "0:180:85", "--indices",
          path_in("short.txt"), "--window", "90", "--output", path_in("x.tif"), NULL}},
        {"line 3",
         {"recon", "--input", path_in("proj.tif"), "--angles-deg", "0:180:85", "--indices",
          path_in("junk.txt"), "--output", path_in("x.tif"), NULL}},
        {"page count mismatch",
         {"recon", "--input", path_in("proj.tif"), "--angles-deg", "0:180:60", "--indices",
          path_in("indices.txt"), "--window", "90", "--output", path_in("x.tif"), NULL}},
        {"bad --window",
         {"recon", "--input", path_in("proj.tif"), "--angles-deg", "0:180:85", "--window", "0",
          "--output", path_in("x.tif"), NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(tl_client_run(dir, cases[i].args, 60), 1);
        ck_assert_msg(strstr(tl_client_err(), cases[i].phrase) != NULL, "case %zu: %s", i,
                      tl_client_err());
        ck_assert(access(path_in("x.tif"), F_OK) != 0);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("recon-window");
    TCase *tc = tcase_create("recon-window");
    tcase_add_unchecked_fixture(tc, make_scan, drop_scan);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_window_matches_engine);
    tcase_add_test(tc, test_window_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
