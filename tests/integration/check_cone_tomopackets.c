/* check_cone_tomopackets.c — RECAST3D's ConeVecGeometry through the daemon (ingest.format =
 * tomopackets, CPU backend): the same exact cone-beam line integrals sent once under a
 * ConeBeamGeometry (ASTRA's circular "cone": source_origin, origin_det, detector_size,
 * angles t) and once under a ConeVecGeometry of the cone_vec rows ASTRA makes of that
 * geometry (astra_geom_2vec), must give the same slice in the orbit's plane to DESIGN.md
 * §3's exact tolerance (relative L2 <= 2e-5): the second scan reconstructs along one matrix
 * per projection (tl_cone_from_astra_vec of float32 vectors), the first along the circle
 * at angles -t. The test can fail: the slice is not empty, status shows that the second
 * scan carries matrices and the first none, and the second slice is a later publication
 * (measured: relative L2 0 to 1.8e-7 on the CPU backend; the two scans' matrices differ
 * by about float32 rounding). Before the engine's intrinsics tolerance was 1e-5 this scan
 * was refused (u0 3.3e-5 px apart across views of float32 vectors).
 *
 * tomopackets has no end of scan, so no final slice: the slice is taken once the
 * subscriber printed one made of every projection, after a `resend` made it print a second
 * (the subscriber writes a slice's file before it reads the next, so the first is whole).
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cone_opts.h"
#include "daemon/ingest/tomopackets.h"
#include "tests/daemon_fixture.h"
#include "tests/integration/cone_truth.h"
#include "tests/testutil.h"

enum { R = 33, W = 64, N = 120 };
#define SO 300.0f /* source_origin, mm */
#define OD 150.0f /* origin_det, mm: source_detector 450 */
#define PX 0.5f   /* detector_size, mm */

static const tl_cone_opts cone = {.cone = true,
                                  .source_origin = SO,
                                  .source_detector = SO + OD,
                                  .pixel_u = PX,
                                  .pixel_v = PX};

static size_t put(uint8_t *p, int32_t v)
{
    tl_tomop_put_i32(p, v);
    return 4;
}

static size_t putf(uint8_t *p, float v)
{
    tl_tomop_put_f32(p, v);
    return 4;
}

static void send1(tl_fixture *f, const void *p, size_t len)
{
    const void *parts[1] = {p};
    ck_assert_int_eq(tl_fx_send_raw(f, parts, &len, 1), 0);
}

/* ASTRA's angle of projection k (float32 on the wire, as RECAST3D sends it). */
static float astra_angle(int k)
{
    return (float)(2 * M_PI * k / N);
}

/* ScanSettings (no darks or flats, already linear), a geometry (vec: ConeVecGeometry, else
 * ConeBeamGeometry), and the N projections: the exact line integrals along our circle at
 * the negated angles, which both geometries describe. */
static void send_scan(tl_fixture *f, bool vec, const float *li)
{
    uint8_t *p = malloc(64 + 48 * (size_t)N + (size_t)R * W * 4);
    ck_assert_ptr_nonnull(p);
    size_t n = put(p, 0x302) + put(p + 4, 0) + put(p + 8, 0) + put(p + 12, 0);
    p[n++] = 1; /* already_linear */
    send1(f, p, n);
    n = put(p, vec ? 0x306 : 0x305);
    n += put(p + n, 0);
    n += put(p + n, R);
    n += put(p + n, W);
    n += put(p + n, N);
    if (!vec) {
        n += putf(p + n, SO);
        n += putf(p + n, OD);
        n += putf(p + n, PX);
        n += putf(p + n, PX);
    }
    n += put(p + n, vec ? 12 * N : N);
    for (int k = 0; k < N; k++) {
        double t = astra_angle(k);
        float row[12] = {(float)(sin(t) * SO),
                         (float)(-cos(t) * SO),
                         0,
                         (float)(-sin(t) * OD),
                         (float)(cos(t) * OD),
                         0,
                         (float)(cos(t) * PX),
                         (float)(sin(t) * PX),
                         0,
                         0,
                         0,
                         PX}; /* astra_geom_2vec of cone */
        for (int i = 0; i < (vec ? 12 : 1); i++)
            n += putf(p + n, vec ? row[i] : (float)t);
    }
    send1(f, p, n);
    for (int k = 0; k < N; k++) {
        n = put(p, 0x309) + put(p + 4, 2) + put(p + 8, k) + put(p + 12, R) + put(p + 16, W) +
            put(p + 20, R * W);
        for (int i = 0; i < R * W; i++)
            n += putf(p + n, li[(size_t)k * R * W + i]);
        send1(f, p, n);
    }
    free(p);
}

/* The slice "mid" of the scan sent by send_scan(vec), through `tomolive sub`; its seq
 * into *seq_out (a later scan's slice has a later one). */
static float *slice_of(tl_fixture *f, bool vec, const float *li, const char *out,
                       long long *seq_out)
{
    ck_assert_int_eq(tl_fx_run(NULL,
                               "cd '%s' || exit 1; mkdir -p %s; "
                               "tomolive sub --endpoint '%s' --out %s --every-seq --timeout 120 "
                               "mid > %s.txt 2>&1 < /dev/null & echo $! > %s.pid",
                               f->dir, out, f->slices, out, out, out),
                     0);
    ck_assert(tl_fx_wait_status(f, "slices.subscriptions", 1, 30));
    send_scan(f, vec, li);
    char *seq = NULL;
    /* a slice of every projection, then (after resend) another: the first is on disk */
    ck_assert_int_eq(tl_fx_run(NULL,
                               "cd '%s' && for i in $(seq 2400); do grep -q 'projections=%d ' "
                               "%s.txt && exit 0; sleep 0.05; done; exit 1",
                               f->dir, N, out),
                     0);
    json_decref(tl_fx_ok(f, "resend", "{\"id\":\"mid\"}"));
    ck_assert_int_eq(tl_fx_run(&seq,
                               "cd '%s' && for i in $(seq 2400); do "
                               "[ $(grep -c 'projections=%d ' %s.txt) -ge 2 ] && "
                               "{ grep -m1 'projections=%d ' %s.txt | sed 's/.* seq=\\([0-9]*\\) "
                               ".*/\\1/'; exit 0; }; sleep 0.05; done; exit 1",
                               f->dir, N, out, N, out),
                     0);
    ck_assert_int_eq(tl_fx_run(NULL, "cd '%s' && kill $(cat %s.pid)", f->dir, out), 0);
    ck_assert(tl_fx_wait_status(f, "slices.subscriptions", 0, 30));
    char path[700];
    *seq_out = atoll(seq);
    free(seq);
    snprintf(path, sizeof path, "%s/%s/mid-%lld.tif", f->dir, out, *seq_out);
    return tl_cone_read_slice(path, W, W);
}

/* status.scan.cone.matrices: the count, or -1 for nil. */
static long long status_matrices(tl_fixture *f)
{
    json_t *st = tl_fx_ok(f, "status", NULL);
    json_t *m = json_object_get(json_object_get(json_object_get(st, "scan"), "cone"), "matrices");
    char *dump = json_dumps(json_object_get(st, "last_scan_error"), JSON_ENCODE_ANY);
    ck_assert_msg(m && (json_is_null(m) || json_is_integer(m)), "status.scan.cone.matrices: %s",
                  dump);
    free(dump);
    long long n = json_is_null(m) ? -1 : (long long)json_integer_value(m);
    json_decref(st);
    return n;
}

START_TEST(cone_vec_equals_cone_beam)
{
    tl_phantom ph;
    char why[256];
    double center = (W - 1) / 2.0;
    ck_assert_msg(tl_cone_opts_phantom(&cone, R, W, center, 2.0, &ph, why, sizeof why) == 0, "%s",
                  why);
    size_t npix = (size_t)R * W;
    float *li = malloc(N * npix * sizeof *li);
    double *d = malloc(npix * sizeof *d);
    for (int k = 0; k < N; k++) {
        tl_errbuf eb = {0};
        ck_assert_int_eq(tl_cone_opts_view(&cone, &ph, R, W, center, -(double)astra_angle(k), NULL,
                                           li + k * npix, d, &eb),
                         TL_OK);
    }
    tl_phantom_free(&ph);
    free(d);

    tl_fixture f;
    const char *args[] = {"--set", "ingest.format=tomopackets", NULL};
    ck_assert_int_eq(tl_fx_start(&f, "cone-tomop", args), 0);
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"mid\",\"kind\":\"row\",\"z\":16}"));
    long long seq_a, seq_b;
    float *a = slice_of(&f, false, li, "beam", &seq_a);
    ck_assert_int_eq(status_matrices(&f), -1);
    float *b = slice_of(&f, true, li, "vec", &seq_b);
    ck_assert_int_eq(status_matrices(&f), N);
    ck_assert_int_gt(seq_b, seq_a); /* the second scan's own slice, not a resend of the first */
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.series"), 2);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.protocol"), 0);
    double rel = tl_rel_l2(b, a, (size_t)W * W), norm = 0;
    for (size_t i = 0; i < (size_t)W * W; i++)
        norm += (double)a[i] * a[i];
    fprintf(stderr,
            "tomopackets: ConeVecGeometry against ConeBeamGeometry, orbit plane: relative L2 "
            "%.3g (|slice| %.3g)\n",
            rel, sqrt(norm));
    ck_assert_msg(sqrt(norm) > 1, "the slice is empty (%g)", sqrt(norm));
    ck_assert_msg(rel <= 2e-5, "relative L2 %g > 2e-5", rel);
    free(a);
    free(b);
    free(li);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cone_tomopackets");
    TCase *tc = tcase_create("daemon");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cone_vec_equals_cone_beam);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
