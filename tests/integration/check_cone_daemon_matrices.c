/* check_cone_daemon_matrices.c — arbitrary cone-beam trajectories over the wire (PROTOCOL.md
 * §8.1.1 "matrices"): `tomolive push --matrices FILE` sends the scan with one projection
 * matrix per projection and simulates the projections along them, and the daemon
 * (CPU backend) reconstructs from them. The matrices here are the circular trajectory's
 * own (tl_cone_opts_matrix at push's angles, written %.17g), so the final slice must equal
 * the one of the same scan sent with the circular keys to DESIGN.md §3's exact tolerance
 * (relative L2 <= 2e-5): both scans project and back-project along the same rays, only
 * through text and a normalisation. The test can fail: the slice is not empty, and with
 * the matrices of another principal row (the circle's with v0 moved by 1 row) push's
 * projections differ from the circle's (relative L2 > 0.1) while the slice must still be
 * the circle's: a daemon that ignored the matrices and used the circle would reconstruct
 * the sample a row off. Frames are float32 counts: uint16 would round the moved
 * projections' counts differently (measured 2.8e-4). Also: status reports the count, and
 * a singular matrix refuses the scan with the engine's message, counted, the daemon
 * serving on.
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/angles.h"
#include "clients/cone_opts.h"
#include "gpu/phantom_cone.h"
#include "tests/daemon_fixture.h"
#include "tests/integration/cone_truth.h"
#include "tests/testutil.h"

enum { R = 33, W = 64, N = 120 };
#define GEOMETRY                                                                         \
    "--geometry cone --source-origin 300 --source-detector 450 --pixel-size 0.5 --rows " \
    "33 --cols 64 --darks 4 --flats 4 --dtype f32"

static const tl_cone_opts cone = {.cone = true,
                                  .source_origin = 300,
                                  .source_detector = 450,
                                  .pixel_u = 0.5,
                                  .pixel_v = 0.5};

/* The circle's matrices at push's angles (--angles-deg 0:360, N views) into dir/name,
 * one %.17g row of 12 a line, with the principal row moved by dv rows; the first into P0. */
static void write_matrices(const char *dir, const char *name, double dv, double P0[12])
{
    double *angles = NULL;
    uint32_t n = 0;
    ck_assert(tl_angles_parse_deg("0:360", N, &angles, &n));
    ck_assert_uint_eq(n, N);
    tl_cone_opts k = cone;
    k.has_offset = dv != 0;
    k.offset_v = dv;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (uint32_t i = 0; i < n; i++) {
        double P[12];
        tl_errbuf eb = {0};
        ck_assert_msg(tl_cone_opts_matrix(&k, R, W, (W - 1) / 2.0, angles[i], P, &eb) == TL_OK,
                      "%s", eb.msg);
        for (int c = 0; c < 12; c++)
            fprintf(f, "%.17g%c", P[c], c == 11 ? '\n' : ' ');
        if (i == 0)
            memcpy(P0, P, sizeof P);
    }
    ck_assert_int_eq(fclose(f), 0);
    free(angles);
}

static float *read_slice(const char *dir, const char *sub)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s/mid.tif", dir, sub);
    return tl_cone_read_slice(path, W, W);
}

/* One scan pushed with `extra` options (series `series`), its final row slice into
 * dir/<out>/mid.tif through `tomolive sub`; status.scan.cone.matrices afterwards (-1: nil). */
static long long push_scan(tl_fixture *f, unsigned series, const char *extra, const char *out)
{
    ck_assert_int_eq(tl_fx_run(NULL,
                               "cd '%s' || exit 1; rm -f %s.rc; "
                               "{ tomolive sub --endpoint '%s' --out %s --until-final "
                               "--timeout 120 mid > %s.txt 2>&1; echo $? > %s.rc; } "
                               "< /dev/null > /dev/null 2>&1 &",
                               f->dir, out, f->slices, out, out, out),
                     0);
    ck_assert(tl_fx_wait_status(f, "slices.subscriptions", 1, 30));
    char *txt = NULL;
    int rc = tl_fx_run(&txt,
                       "cd '%s' && tomolive push --endpoint '%s' " GEOMETRY
                       " --series %u --projections %u --angles-deg 0:360 %s --quiet 2>&1 && "
                       "{ while [ ! -s %s.rc ]; do sleep 0.05; done; cat %s.txt; "
                       "[ \"$(cat %s.rc)\" = 0 ]; } 2>&1",
                       f->dir, f->ingest, series, N, extra, out, out, out);
    ck_assert_msg(rc == 0, "push/sub failed (%d):\n%s", rc, txt);
    ck_assert_msg(strstr(txt, "final"), "no final slice:\n%s", txt);
    free(txt);
    ck_assert(tl_fx_wait_status(f, "slices.subscriptions", 0, 30));
    json_t *st = tl_fx_ok(f, "status", NULL);
    json_t *scan = json_object_get(st, "scan");
    ck_assert_int_eq((long long)json_integer_value(json_object_get(scan, "series")), series);
    json_t *m = json_object_get(json_object_get(scan, "cone"), "matrices");
    ck_assert_msg(m && (json_is_null(m) || json_is_integer(m)), "status.scan.cone.matrices");
    long long n = json_is_null(m) ? -1 : (long long)json_integer_value(m);
    json_decref(st);
    return n;
}

/* How much view 0 of the two trajectories P[0], P[1] differs (relative L2 of the exact
 * line integrals of push's sample). */
static double view_difference(double P[2][12])
{
    tl_phantom ph;
    char why[256];
    ck_assert_msg(tl_cone_opts_phantom(&cone, R, W, (W - 1) / 2.0, 2.0, &ph, why, sizeof why) == 0,
                  "%s", why);
    double *li[2], d = 0, n = 0;
    for (int t = 0; t < 2; t++) {
        tl_errbuf eb = {0};
        li[t] = malloc((size_t)R * W * sizeof *li[t]);
        ck_assert_ptr_nonnull(li[t]);
        ck_assert_msg(tl_phantom_cone_project(&ph, P[t], R, W, li[t], &eb) == TL_OK, "%s", eb.msg);
    }
    for (size_t i = 0; i < (size_t)R * W; i++) {
        d += (li[1][i] - li[0][i]) * (li[1][i] - li[0][i]);
        n += li[0][i] * li[0][i];
    }
    free(li[0]);
    free(li[1]);
    tl_phantom_free(&ph);
    return sqrt(d / n);
}

START_TEST(push_matrices_equal_circle)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "cone-mat", NULL), 0);
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"mid\",\"kind\":\"row\",\"z\":16}"));
    double P[2][12];
    write_matrices(f.dir, "m-circle.txt", 0, P[0]);
    write_matrices(f.dir, "m-moved.txt", 1, P[1]);
    ck_assert_int_eq(push_scan(&f, 1, "", "circ"), -1);
    ck_assert_int_eq(push_scan(&f, 2, "--matrices m-circle.txt:p", "mat"), N);
    ck_assert_int_eq(push_scan(&f, 3, "--matrices m-moved.txt", "moved"), N);
    float *circ = read_slice(f.dir, "circ"), *mat = read_slice(f.dir, "mat"),
          *moved = read_slice(f.dir, "moved");
    size_t n = (size_t)W * W;
    double rel = tl_rel_l2(mat, circ, n), rel_moved = tl_rel_l2(moved, circ, n), norm = 0;
    for (size_t i = 0; i < n; i++)
        norm += (double)circ[i] * circ[i];
    norm = sqrt(norm);
    double views = view_difference(P);
    fprintf(stderr,
            "daemon cone matrices: slice from the circle's matrices against the circular "
            "keys: relative L2 %.3g (|circle| %.3g); from the matrices of the principal row "
            "moved by 1 (projections differing by %.3g): %.3g\n",
            rel, norm, views, rel_moved);
    ck_assert_msg(norm > 1, "the circular slice is empty (|slice| %g)", norm);
    ck_assert_msg(rel <= 2e-5, "relative L2 %g > 2e-5", rel);
    /* push projected along the moved matrices: only a daemon that reconstructs along them
     * too gives the circle's slice back */
    ck_assert_msg(views > 0.1, "the moved trajectory's projections are the circle's (%g)", views);
    ck_assert_msg(rel_moved <= 2e-5, "moved trajectory: relative L2 %g > 2e-5", rel_moved);
    free(circ);
    free(mat);
    free(moved);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A daemon tunes its cone-beam kernels beside the scan (engine.tune = auto; the CPU's one
 * kernel timed as any backend's would be, engine.tune_one_kernel) on an engine of a few
 * rows: a band around the detector's middle with the matrices re-based to it
 * (tl_tune_engine_config; check_cone_engine shows its slices read the middle's rows). The
 * timing succeeds with the scan's matrices, is cached, and the scan is served. */
START_TEST(timing_with_matrices)
{
    tl_fixture f;
    const char *args[] = {"--set", "engine.tune=auto",
                          "--set", "engine.tune_budget=1",
                          "--set", "engine.tune_one_kernel=true",
                          NULL};
    ck_assert_int_eq(tl_fx_start(&f, "cone-tune", args), 0);
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"mid\",\"kind\":\"row\",\"z\":16}"));
    double P[12];
    write_matrices(f.dir, "m-circle.txt", 0, P);
    ck_assert_int_eq(push_scan(&f, 1, "--matrices m-circle.txt", "mat"), N);
    ck_assert_msg(tl_fx_wait_status(&f, "kernels.tune_runs", 1, 60), "no timing ran");
    ck_assert_int_eq(tl_fx_status_int(&f, "kernels.tune_failures"), 0);
    ck_assert_msg(tl_fx_wait_log(&f, "source=tuned", 30), "the timing's choice was not taken");
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A singular matrix (a zero left 3x3 block: no finite source) passes the protocol (12
 * finite numbers) and is refused by the engine's checks, with a message naming it, and
 * counted as a refused scan; the daemon then serves a good scan. */
START_TEST(singular_matrix_refused)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "cone-mat-bad", NULL), 0);
    double P[3][12];
    tl_cone_opts k = cone;
    for (int i = 0; i < 3; i++) {
        tl_errbuf eb = {0};
        ck_assert_int_eq(tl_cone_opts_matrix(&k, 9, 16, 7.5, i * 2.0, P[i], &eb), TL_OK);
    }
    double good[12];
    memcpy(good, P[1], sizeof good);
    for (int r = 0; r < 3; r++) /* M = 0: every point maps to the same place */
        for (int c = 0; c < 3; c++)
            P[1][4 * r + c] = 0;
    tl_proto_scan s = {.series = 5,
                       .geometry = TL_PROTO_CONE,
                       .rows = 9,
                       .cols = 16,
                       .dtype = TL_PROTO_F32,
                       .window = 3,
                       .first_index = 10,
                       .already_linear = true,
                       .source_origin = 300,
                       .source_detector = 450,
                       .pixel_size = {0.5, 0.5},
                       .matrices = P,
                       .nmatrices = 3};
    long long refused0 = tl_fx_status_int(&f, "frames.rejected.scan");
    ck_assert_int_eq(tl_fx_send_scan(&f, &s), 0);
    ck_assert(tl_fx_wait_status(&f, "frames.rejected.scan", refused0 + 1, 10));
    json_t *st = tl_fx_ok(&f, "status", NULL);
    const char *e = json_string_value(json_object_get(st, "last_scan_error"));
    ck_assert_msg(e && strstr(e, "series 5") && strstr(e, "matrix 1 (projection 11)"),
                  "last_scan_error: %s", e ? e : "(none)");
    ck_assert(json_is_null(json_object_get(st, "scan"))); /* nothing open */
    json_decref(st);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.protocol"), 0); /* the engine's */

    memcpy(P[1], good, sizeof good); /* the same scan with the matrix mended is served */
    s.series = 6;
    ck_assert_int_eq(tl_fx_send_scan(&f, &s), 0);
    ck_assert(tl_fx_wait_status(&f, "scan.series", 6, 10));
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.cone.matrices"), 3);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.scan"), refused0 + 1);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cone_daemon_matrices");
    TCase *tc = tcase_create("daemon");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, push_matrices_equal_circle);
    tcase_add_test(tc, singular_matrix_refused);
    tcase_add_test(tc, timing_with_matrices);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
