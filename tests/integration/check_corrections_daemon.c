/* check_corrections_daemon.c — per-frame corrections through the daemon: the scan keys
 * `dezinger` and `paganin` (PROTOCOL.md §8.1) reach the engine, status reports them with
 * the replaced-pixel count (scan.corrections) and each stage's latency histogram
 * (latency_ms.dezinger, latency_ms.paganin), and a bad value refuses the scan with a
 * message naming it (last_scan_error). CPU backend.
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

enum { ROWS = 12, COLS = 20, NPROJ = 3, ZINGERS = 2 };

START_TEST(scan_keys_to_status)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "corr", NULL), 0);
    tl_proto_scan s = {.series = 1,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = ROWS,
                       .cols = COLS,
                       .dtype = TL_PROTO_U16,
                       .window = 8,
                       .darks = 1,
                       .flats = 1,
                       .dezinger = 500,
                       .has_paganin = true,
                       .paganin = {20, 0.05f, 1, 100},
                       .rings = {"vo", 2}};
    long long sent = 0;
    tl_fx_send_scan(&f, &s), sent++;
    uint16_t dark[ROWS * COLS], flat[ROWS * COLS], img[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) {
        dark[i] = 100;
        flat[i] = 4000;
        img[i] = (uint16_t)(2000 + 5 * (i % COLS));
    }
    tl_proto_frame h = {.series = 1,
                        .kind = TL_PROTO_DARK,
                        .dtype = TL_PROTO_U16,
                        .rows = ROWS,
                        .cols = COLS};
    tl_fx_send_frame(&f, &h, dark, sizeof dark), sent++;
    h.kind = TL_PROTO_FLAT;
    tl_fx_send_frame(&f, &h, flat, sizeof flat), sent++;
    h.kind = TL_PROTO_PROJ;
    h.has_angle = true;
    for (int k = 0; k < NPROJ; k++) {
        uint16_t z[ROWS * COLS];
        memcpy(z, img, sizeof z);
        z[(3 + k) * COLS + 5] += 1500; /* ZINGERS per frame */
        z[(8 - k) * COLS + 14] += 1500;
        h.index = (uint64_t)k;
        h.angle = M_PI * k / NPROJ;
        tl_fx_send_frame(&f, &h, z, sizeof z), sent++;
    }
    ck_assert(tl_fx_wait_messages(&f, sent, 10));
    ck_assert(tl_fx_wait_status(&f, "frames.accepted.proj", NPROJ, 10));
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.corrections.dezinger_replaced"), NPROJ * ZINGERS);
    ck_assert_int_eq(tl_fx_status_int(&f, "latency_ms.dezinger.count"), NPROJ);
    ck_assert_int_eq(tl_fx_status_int(&f, "latency_ms.paganin.count"), NPROJ);
    /* a window of 8: the ring estimate every projection (8 / 16 rounds up to 1) */
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.corrections.ring_updates"), NPROJ);
    ck_assert_int_eq(tl_fx_status_int(&f, "latency_ms.rings.count"), NPROJ);
    json_t *st = tl_fx_ok(&f, "status", NULL);
    json_t *pg =
        json_object_get(json_object_get(json_object_get(st, "scan"), "corrections"), "paganin");
    ck_assert(json_is_array(pg) && json_array_size(pg) == 4);
    ck_assert(fabs(json_real_value(json_array_get(pg, 1)) - 0.05) < 1e-6);
    const char *rings = json_string_value(
        json_object_get(json_object_get(json_object_get(st, "scan"), "corrections"), "rings"));
    ck_assert_str_eq(rings, "vo:31,0.001");
    json_decref(st);

    /* zero energy: the scan is refused, the reason names it */
    s.series = 2;
    s.paganin[0] = 0;
    tl_fx_send_scan(&f, &s), sent++;
    ck_assert(tl_fx_wait_messages(&f, sent, 10));
    ck_assert(tl_fx_wait_status(&f, "frames.rejected.scan", 1, 10));
    st = tl_fx_ok(&f, "status", NULL);
    const char *why = json_string_value(json_object_get(st, "last_scan_error"));
    ck_assert_msg(why && strstr(why, "energy (keV) must be a positive number"), "%s",
                  why ? why : "(none)");
    json_decref(st);
    /* an unknown ring removal: refused by name */
    s.series = 3;
    s.paganin[0] = 20;
    s.rings = (tl_proto_str){"sorting", 7};
    tl_fx_send_scan(&f, &s), sent++;
    ck_assert(tl_fx_wait_messages(&f, sent, 10));
    ck_assert(tl_fx_wait_status(&f, "frames.rejected.scan", 2, 10));
    st = tl_fx_ok(&f, "status", NULL);
    why = json_string_value(json_object_get(st, "last_scan_error"));
    ck_assert_msg(why && strstr(why, "unknown ring removal \"sorting\""), "%s",
                  why ? why : "(none)");
    json_decref(st);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* Line integrals of two disks around an axis at column `axis`. */
static float disks(double u, double th, double axis)
{
    const double cx[2] = {0, 12}, cy[2] = {0, -7}, r[2] = {40, 6}, mu[2] = {0.01, 0.03};
    double p = 0;
    for (int k = 0; k < 2; k++) {
        double d = u - axis - (cx[k] * cos(th) - cy[k] * sin(th));
        if (fabs(d) < r[k])
            p += 2 * mu[k] * sqrt(r[k] * r[k] - d * d);
    }
    return (float)p;
}

/* auto_center: the estimate in status and applied to the scan's centre; set_param switches
 * it; a scan without the key has no estimation (E_STATE). */
START_TEST(auto_center)
{
    enum { CR = 2, CC = 128, CN = 64 };
    const double axis = 63.5 + 3.4;
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "corr-center", NULL), 0);
    tl_proto_scan s = {.series = 1,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = CR,
                       .cols = CC,
                       .dtype = TL_PROTO_F32,
                       .window = CN,
                       .already_linear = true,
                       .has_auto_center = true,
                       .auto_center = true};
    long long sent = 0;
    tl_fx_send_scan(&f, &s), sent++;
    ck_assert(tl_fx_wait_messages(&f, sent, 10));
    json_t *r = tl_fx_ok(&f, "set_slice", "{\"id\":\"a\",\"kind\":\"row\",\"z\":0,\"pin\":true}");
    json_decref(r);
    float img[CR * CC];
    tl_proto_frame h = {.series = 1,
                        .kind = TL_PROTO_PROJ,
                        .dtype = TL_PROTO_F32,
                        .rows = CR,
                        .cols = CC,
                        .has_angle = true};
    for (int k = 0; k < 3 * CN; k++) {
        h.index = (uint64_t)k;
        h.angle = M_PI * k / CN;
        for (int i = 0; i < CR * CC; i++)
            img[i] = disks(i % CC, h.angle, axis);
        tl_fx_send_frame(&f, &h, img, sizeof img), sent++;
    }
    ck_assert(tl_fx_wait_messages(&f, sent, 20));
    ck_assert(tl_fx_wait_status(&f, "frames.accepted.proj", 3 * CN, 10));
    json_t *st = tl_fx_ok(&f, "status", NULL);
    json_t *scan = json_object_get(st, "scan"), *ce = json_object_get(scan, "center_estimate");
    double found = json_real_value(json_object_get(ce, "center"));
    double center = json_real_value(json_object_get(scan, "center"));
    printf("daemon auto_center: estimate %.4f (confidence %.3f), scan centre %.4f, true %.4f\n",
           found, json_real_value(json_object_get(ce, "confidence")), center, axis);
    ck_assert(json_is_true(json_object_get(ce, "valid")) &&
              json_is_true(json_object_get(ce, "auto")));
    ck_assert(fabs(found - axis) < 0.1 && fabs(center - axis) < 0.1);
    ck_assert_int_ge(json_integer_value(json_object_get(ce, "applied")), 1);
    json_decref(st);
    r = tl_fx_ok(&f, "set_param", "{\"name\":\"auto_center\",\"value\":false}");
    json_decref(r);
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.center_estimate.estimates") > 0, 1);
    /* a scan without the key: no estimation */
    s.series = 2;
    s.has_auto_center = false;
    tl_fx_send_scan(&f, &s), sent++;
    ck_assert(tl_fx_wait_messages(&f, sent, 10));
    r = tl_fx_request(&f, "set_param", "{\"name\":\"auto_center\",\"value\":true}");
    ck_assert_str_eq(json_string_value(json_object_get(r, "name")), "E_STATE");
    json_decref(r);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("corrections_daemon");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, scan_keys_to_status);
    tcase_add_test(t, auto_center);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
