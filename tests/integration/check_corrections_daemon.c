/* check_corrections_daemon.c — per-frame corrections through the daemon: the scan keys
 * `dezinger` and `paganin` (PROTOCOL.md §8.1) reach the engine, status reports them with
 * the replaced-pixel count (scan.corrections) and each stage's latency histogram
 * (latency_ms.dezinger, latency_ms.paganin), and a bad value refuses the scan with a
 * message naming it (last_scan_error). CPU backend.
 */
#include "config.h"

#include <math.h>
#include <signal.h>
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
    tl_proto_frame h = {.series = 1, .kind = TL_PROTO_DARK, .dtype = TL_PROTO_U16,
                        .rows = ROWS, .cols = COLS};
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
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.corrections.dezinger_replaced"),
                     NPROJ * ZINGERS);
    ck_assert_int_eq(tl_fx_status_int(&f, "latency_ms.dezinger.count"), NPROJ);
    ck_assert_int_eq(tl_fx_status_int(&f, "latency_ms.paganin.count"), NPROJ);
    /* a window of 8: the ring estimate every projection (8 / 16 rounds up to 1) */
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.corrections.ring_updates"), NPROJ);
    ck_assert_int_eq(tl_fx_status_int(&f, "latency_ms.rings.count"), NPROJ);
    json_t *st = tl_fx_ok(&f, "status", NULL);
    json_t *pg = json_object_get(json_object_get(json_object_get(st, "scan"), "corrections"),
                                 "paganin");
    ck_assert(json_is_array(pg) && json_array_size(pg) == 4);
    ck_assert(fabs(json_real_value(json_array_get(pg, 1)) - 0.05) < 1e-6);
    const char *rings = json_string_value(json_object_get(
        json_object_get(json_object_get(st, "scan"), "corrections"), "rings"));
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
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("corrections_daemon");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, scan_keys_to_status);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
