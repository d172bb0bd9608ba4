/* check_e2e.c — the daemon issue's main acceptance test, through the real tools:
 *
 *   a 256-wide phantom scan (10 darks, 10 flats, 720 projections as uint16 camera frames
 *   with a gain pattern and Poisson noise) is written as TIFF stacks, replayed into
 *   tomolived by `tomolive push --tiff` with 5 % of the frames out of order and 1 % lost,
 *   and watched by `tomolive sub` on three slices (a row, an ortho-slice, an oblique plane).
 *
 * The final slices must equal `tomolive recon` on the same frames within relative L2 1e-6
 * (the row a page of its output, the ortho-slice pixels of its stack; the plane, which recon
 * cannot make, an in-process engine fed the same frames), and every slice header's
 * projections_used and missing must be exact. The backend is the CPU unless TL_E2E_BACKEND
 * says otherwise (tests/gpu runs this on CUDA, comparing within the kernel's mode).
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clients/tiff.h"
#include "gpu/engine.h"
#include "tests/camera_scan.h"
#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

enum { R = 16, W = 256, N = 720, DARKS = 10, FLATS = 10, S = 256 };
static const float tilt[9] = {200, 0, 6, 0, 200, 0, -100, -100, 4.5f};

/* Whole stacks through clients/tiff.h. */
static void write_u16(const char *path, const uint16_t *v, uint32_t pages, uint32_t rows,
                      uint32_t cols)
{
    tl_tiff_writer w;
    char err[256];
    ck_assert_msg(tl_tiff_create(&w, path, (uint64_t)pages * rows * cols * 2, err, sizeof err) ==
                      0,
                  "%s", err);
    for (uint32_t k = 0; k < pages; k++)
        ck_assert_msg(tl_tiff_write_page(&w, TL_DTYPE_U16, v + (size_t)k * rows * cols, rows, cols,
                                         err, sizeof err) == 0,
                      "%s", err);
    ck_assert_msg(tl_tiff_finish(&w, err, sizeof err) == 0, "%s", err);
}

/* Any stack as float32, or (as16) the raw uint16 samples of a uint16 stack. */
static void *read_stack_as(const char *path, bool as16, uint32_t *pages, uint32_t *rows,
                           uint32_t *cols)
{
    tl_tiff_reader r;
    char err[256];
    ck_assert_msg(tl_tiff_open(&r, path, err, sizeof err) == 0, "%s", err);
    size_t n = (size_t)r.rows * r.cols;
    ck_assert(!as16 || r.dtype == TL_DTYPE_U16);
    void *all = malloc((size_t)r.pages * n * (as16 ? 2 : 4));
    void *page = malloc(n * 4);
    for (uint32_t k = 0; k < r.pages; k++) {
        ck_assert_msg(tl_tiff_read_page(&r, k, page, err, sizeof err) == 0, "%s", err);
        if (as16) {
            memcpy((uint16_t *)all + k * n, page, n * 2);
            continue;
        }
        float *dst = (float *)all + k * n;
        for (size_t i = 0; i < n; i++)
            dst[i] = r.dtype == TL_DTYPE_F32   ? ((float *)page)[i]
                     : r.dtype == TL_DTYPE_U16 ? ((uint16_t *)page)[i]
                     : r.dtype == TL_DTYPE_U8  ? ((uint8_t *)page)[i]
                                               : (float)((uint32_t *)page)[i];
    }
    *pages = r.pages;
    *rows = r.rows;
    *cols = r.cols;
    tl_tiff_close(&r);
    free(page);
    return all;
}

static float *read_stack(const char *path, uint32_t *pages, uint32_t *rows, uint32_t *cols)
{
    return read_stack_as(path, false, pages, rows, cols);
}

static void write_stacks(const char *dir)
{
    uint16_t *frames[3];
    tl_test_camera_scan(R, W, DARKS, FLATS, N, 99, &frames[0], &frames[1], &frames[2]);
    const char *names[] = {"d.tif", "f.tif", "p.tif"};
    const int counts[] = {DARKS, FLATS, N};
    for (int kind = 0; kind < 3; kind++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, names[kind]);
        write_u16(path, frames[kind], (uint32_t)counts[kind], R, W);
        free(frames[kind]);
    }
}

/* The final line tomolive sub printed for id: its projections= and missing= values. */
static void final_counts(const char *out, const char *id, long *used, long *missing)
{
    char key[80];
    snprintf(key, sizeof key, "id=%s ", id);
    const char *last = NULL;
    for (const char *p = out; (p = strstr(p, key)) != NULL; p++)
        if (strstr(p, " final") && (!strchr(p, '\n') || strstr(p, " final") < strchr(p, '\n')))
            last = p;
    ck_assert_msg(last != NULL, "no final slice for %s in:\n%s", id, out);
    ck_assert(sscanf(strstr(last, "projections="), "projections=%ld", used) == 1);
    ck_assert(sscanf(strstr(last, "missing="), "missing=%ld", missing) == 1);
}

/* The plane through an engine fed the kept frames in index order. */
static float *engine_plane(const char *dir, const bool *dropped, tl_backend_kind backend)
{
    char path[700];
    uint32_t pages, rows, cols;
    float *stk[3];
    const char *names[] = {"d.tif", "f.tif", "p.tif"};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        stk[k] = read_stack(path, &pages, &rows, &cols);
    }
    tl_engine_config c;
    tl_engine_config_init(&c, R, W, N);
    c.backend = backend;
    c.dtype = TL_DTYPE_F32;
    tl_engine *e;
    ck_assert_msg(tl_engine_create(&c, &e) == TL_OK, "%s", tl_engine_last_error(NULL));
    for (int kind = 0; kind < 3; kind++)
        for (int k = 0; k < (kind == 0 ? DARKS : kind == 1 ? FLATS : N); k++) {
            if (kind == 2 && dropped[k])
                continue;
            tl_frame f = {.kind = (tl_frame_kind)kind,
                          .index = (uint64_t)k,
                          .angle = M_PI * k / N,
                          .dtype = TL_DTYPE_F32,
                          .rows = R,
                          .cols = W,
                          .data = stk[kind] + (size_t)k * R * W};
            ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
        }
    tl_slice_spec sp;
    tl_slice_spec_plane(&sp, tilt, 64, 64);
    int id;
    tl_engine_add_slice(e, &sp, &id);
    float *out = malloc(64 * 64 * sizeof *out);
    ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &out, NULL), TL_OK);
    tl_engine_destroy(e);
    for (int k = 0; k < 3; k++)
        free(stk[k]);
    return out;
}

START_TEST(phantom_scan_through_the_tools)
{
    const char *be = getenv("TL_E2E_BACKEND");
    const char *backend = be && *be ? be : "cpu";
    /* the GPU kernels are compared within their quality mode, the CPU exactly */
    double tol = strcmp(backend, "cpu") == 0 ? 1e-6 : 2e-5;
    tl_fixture f;
    const char *args[] = {"--backend", backend, NULL};
    ck_assert_int_eq(tl_fx_start(&f, "e2e", args), 0);
    const char *dir = f.dir;
    write_stacks(dir);
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"row\",\"kind\":\"row\",\"z\":8}"));
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"side\",\"kind\":\"ortho\",\"axis\":\"x\","
                         "\"position\":-27.5,\"size\":[16,256]}"));
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"tilt\",\"kind\":\"plane\",\"size\":[64,64],"
                         "\"orientation\":[200,0,6,0,200,0,-100,-100,4.5]}"));
    /* the subscriber in the background, leaving its exit status in sub.rc; the scan is
     * pushed once its three subscriptions have reached the daemon, and the subscriber's
     * output read once sub.rc says it has ended */
    ck_assert_int_eq(tl_fx_run(NULL,
                               "cd '%s' || exit 1; "
                               "{ tomolive sub --endpoint '%s' --out views --png --until-final "
                               "--timeout 120 row side tilt > sub.txt 2>&1; echo $? > sub.rc; } "
                               "< /dev/null > /dev/null 2>&1 &",
                               dir, f.slices),
                     0);
    ck_assert(tl_fx_wait_status(&f, "slices.subscriptions", 3, 30));
    char *out = NULL;
    int rc =
        tl_fx_run(&out,
                  "cd '%s' && tomolive push --endpoint '%s' --tiff p.tif --tiff-darks d.tif "
                  "--tiff-flats f.tif --angles-deg 0:180:%d --shuffle 5 --drop 1 --seed 42 "
                  "--drop-list dropped.txt --quiet && "
                  "{ while [ ! -s sub.rc ]; do sleep 0.05; done; [ \"$(cat sub.rc)\" = 0 ]; } "
                  "&& cat sub.txt",
                  dir, f.ingest, N);
    ck_assert_msg(rc == 0, "push/sub failed (%d):\n%s", rc, out);

    /* what was lost on the way, and what the window should say */
    bool dropped[N] = {0};
    char path[700];
    snprintf(path, sizeof path, "%s/dropped.txt", dir);
    FILE *fp = fopen(path, "r");
    ck_assert_ptr_nonnull(fp);
    int k, ndrop = 0;
    while (fscanf(fp, "%d", &k) == 1) {
        ck_assert(k >= 0 && k < N);
        dropped[k] = true;
        ndrop++;
    }
    fclose(fp);
    ck_assert_msg(ndrop > 0 && ndrop < 20, "%d dropped", ndrop);
    int last = N - 1;
    while (dropped[last])
        last--;
    long expect_used = N - ndrop, expect_missing = (last + 1) - expect_used;
    const char *ids[] = {"row", "side", "tilt"};
    for (int i = 0; i < 3; i++) {
        long used, missing;
        final_counts(out, ids[i], &used, &missing);
        ck_assert_msg(used == expect_used && missing == expect_missing,
                      "%s: projections=%ld missing=%ld, expected %ld and %ld", ids[i], used,
                      missing, expect_used, expect_missing);
    }

    /* tomolive recon on the same frames: the kept pages, their indices, window N */
    uint32_t pages, rows, cols;
    snprintf(path, sizeof path, "%s/p.tif", dir);
    uint16_t *p = read_stack_as(path, true, &pages, &rows, &cols);
    uint16_t *kept = malloc((size_t)N * R * W * sizeof *kept);
    snprintf(path, sizeof path, "%s/kept_idx.txt", dir);
    fp = fopen(path, "w");
    int nk = 0;
    for (k = 0; k < N; k++)
        if (!dropped[k]) {
            memcpy(kept + (size_t)nk++ * R * W, p + (size_t)k * R * W, (size_t)R * W * 2);
            fprintf(fp, "%d\n", k);
        }
    fclose(fp);
    snprintf(path, sizeof path, "%s/kept.tif", dir);
    write_u16(path, kept, (uint32_t)nk, R, W);
    free(p);
    free(kept);
    free(out);
    rc = tl_fx_run(&out,
                   "cd '%s' && tomolive recon --backend cpu --input kept.tif --darks d.tif "
                   "--flats f.tif --angles-deg 0:180:%d --indices kept_idx.txt --window %d "
                   "--output rec.tif 2>&1",
                   dir, N, N);
    ck_assert_msg(rc == 0, "recon failed:\n%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/rec.tif", dir);
    float *rec = read_stack(path, &pages, &rows, &cols);
    ck_assert(pages == R && rows == S && cols == S);

    /* the row slice is recon's page 8 */
    snprintf(path, sizeof path, "%s/views/row.tif", dir);
    float *row = read_stack(path, &pages, &rows, &cols);
    double r_row = tl_rel_l2(row, rec + (size_t)8 * S * S, (size_t)S * S);
    /* the ortho-slice x = -27.5 is column 100 of every page; its column j is page row 255-j */
    snprintf(path, sizeof path, "%s/views/side.tif", dir);
    float *side = read_stack(path, &pages, &rows, &cols);
    ck_assert(rows == R && cols == S);
    float *expect = malloc((size_t)R * S * sizeof *expect);
    for (uint32_t i = 0; i < R; i++)
        for (uint32_t j = 0; j < S; j++)
            expect[i * S + j] = rec[(size_t)i * S * S + (size_t)(S - 1 - j) * S + 100];
    double r_side = tl_rel_l2(side, expect, (size_t)R * S);
    /* the plane against an engine fed the same frames */
    snprintf(path, sizeof path, "%s/views/tilt.tif", dir);
    float *pl = read_stack(path, &pages, &rows, &cols);
    float *ref = engine_plane(dir, dropped, TL_BACKEND_CPU);
    double r_tilt = tl_rel_l2(pl, ref, 64 * 64);
    printf(
        "e2e (%s): %d of %d projections lost; rel L2 vs recon: row %.2e, ortho %.2e, plane %.2e\n",
        backend, ndrop, N, r_row, r_side, r_tilt);
    ck_assert_msg(r_row <= tol && r_side <= tol && r_tilt <= tol, "row %g side %g tilt %g", r_row,
                  r_side, r_tilt);
    for (int i = 0; i < 3; i++) { /* PNG previews were written too */
        snprintf(path, sizeof path, "%s/views/%s.png", dir, ids[i]);
        ck_assert_msg(access(path, R_OK) == 0, "%s", path);
    }
    free(rec);
    free(row);
    free(side);
    free(expect);
    free(pl);
    free(ref);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("e2e");
    TCase *t = tcase_create("tools");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, phantom_scan_through_the_tools);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    const char *be = getenv("TL_E2E_BACKEND");
    tl_backend_kind b;
    char why[256];
    if (be && *be && (!tl_backend_parse(be, &b) || !tl_backend_available(b, why, sizeof why))) {
        printf("SKIP: backend %s is not usable here\n", be);
        return 77;
    }
    return tl_run_suite(suite(), true);
}
