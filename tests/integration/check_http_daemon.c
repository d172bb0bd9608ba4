/* check_http_daemon.c — tomolived's HTTP server end to end (a real daemon, CPU backend, on a
 * free loopback port; the page from the source tree):
 *   - GET / and the page's files, 404 for everything else, /api/status as JSON;
 *   - a WebSocket client (a minimal one written here, RFC 6455) receives binary preview
 *     images of the four preview slices after a phantom scan, moves an ortho-slice and
 *     sees the new one arrive; the preview slices are pinned while it is connected and
 *     unpinned when it leaves;
 *   - GET /metrics passes the strict exposition checker and agrees with `status`;
 *   - a page that never reads does not slow the daemon: its images are dropped, counted;
 *   - a port that cannot be bound fails start-up; SIGTERM with a page connected exits 0.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon/serve/preview.h"
#include "tests/daemon_fixture.h"
#include "tests/http_client.h"
#include "tests/testutil.h"
#include "tests/unit/check_http_expo.h"
#include "tests/ws_client.h"

static json_t *slice_by_id(json_t *list, const char *id)
{
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s) if (strcmp(json_string_value(json_object_get(s, "id")), id) ==
                                       0) return s;
    return NULL;
}

/* ---- tests --------------------------------------------------------------------------------- */

START_TEST(pages_and_404)
{
    tl_fixture f;
    int port = tl_hc_start(&f, "http-pages");
    tl_hc_response r;
    tl_hc_get(port, "/", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.ctype, "text/html; charset=utf-8");
    ck_assert_ptr_nonnull(strstr(r.body, "<script src=\"app.js\">"));
    tl_hc_free(&r);
    tl_hc_get(port, "/app.js", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.ctype, "text/javascript; charset=utf-8");
    ck_assert_ptr_nonnull(strstr(r.body, "tomolive-preview"));
    tl_hc_free(&r);
    tl_hc_get(port, "/style.css", &r);
    ck_assert_int_eq(r.status, 200);
    tl_hc_free(&r);
    static const char *const missing[] = {"/nope",
                                          "/nope.js",
                                          "/api",
                                          "/metrics/x",
                                          "/../../etc/passwd",
                                          "/%2e%2e/%2e%2e/etc/passwd",
                                          "/.hidden.html"};
    for (size_t i = 0; i < sizeof missing / sizeof *missing; i++) {
        tl_hc_get(port, missing[i], &r);
        ck_assert_msg(r.status == 404, "%s: %d", missing[i], r.status);
        tl_hc_free(&r);
    }
    tl_hc_get(port, "/ws", &r); /* not an upgrade */
    ck_assert_int_eq(r.status, 400);
    tl_hc_free(&r);

    /* /api/status: the status command's result as JSON */
    tl_hc_get(port, "/api/status", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.ctype, "application/json");
    json_error_t je;
    json_t *st = json_loads(r.body, 0, &je);
    ck_assert_msg(st != NULL, "%s: %s", je.text, r.body);
    ck_assert_str_eq(json_string_value(json_object_get(st, "version")), PACKAGE_VERSION);
    ck_assert(json_is_null(json_object_get(st, "scan")));
    json_decref(st);
    tl_hc_free(&r);

    /* /metrics with no scan */
    tl_hc_get(port, "/metrics", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.ctype, "text/plain; version=0.0.4; charset=utf-8");
    char err[512];
    ck_assert_msg(tl_expo_check(r.body, err, sizeof err) == 0, "%s", err);
    double v;
    ck_assert(tl_expo_value(r.body, "tomolive_scan_open", &v) && v == 0);
    tl_hc_free(&r);

    /* SIGTERM with a page connected: still a clean, quick exit */
    tl_ws w;
    ck_assert_int_eq(tl_ws_open(&w, port, NULL, 0), 101);
    double secs;
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, &secs), 0);
    ck_assert_msg(secs < 2.5, "stopped in %.2f s", secs);
    tl_ws_close(&w);
    tl_fx_cleanup(&f);
}
END_TEST

static bool at_position(const tl_preview_hdr *h, void *ctx)
{
    return fabs(h->orientation[6] - *(double *)ctx) < 1e-4;
}

START_TEST(scan_preview_metrics)
{
    tl_fixture f;
    int port = tl_hc_start(&f, "http-scan");
    tl_ws w;
    ck_assert_int_eq(tl_ws_open(&w, port, NULL, 0), 101);
    /* first what the page may do (views open, actions with the token), then the state */
    int op;
    uint8_t *m;
    size_t n;
    ck_assert(tl_ws_recv(&w, &op, &m, &n, 10));
    ck_assert_int_eq(op, 1);
    json_t *j = json_loads((char *)m, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(j, "type")), "access");
    ck_assert_str_eq(json_string_value(json_object_get(j, "views")), "open");
    ck_assert_str_eq(json_string_value(json_object_get(j, "actions")), "token");
    json_decref(j);
    free(m);
    ck_assert(tl_ws_recv(&w, &op, &m, &n, 10));
    ck_assert_int_eq(op, 1);
    j = json_loads((char *)m, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(j, "type")), "state");
    json_decref(j);
    free(m);

    char *out = NULL;
    int rc = tl_fx_run(&out,
                       "tomolive push --endpoint '%s' --rows 16 --cols 64 --projections 120 "
                       "--darks 2 --flats 2 --quiet",
                       f.ingest);
    ck_assert_msg(rc == 0, "push: %s", out);
    free(out);

    /* one image of each view: 8-bit, the slice's size (all within 512), where it should be */
    tl_preview_hdr h[4];
    for (int v = 0; v < 4; v++) {
        uint8_t *px;
        ck_assert_msg(tl_ws_image(&w, v, NULL, NULL, 30, &h[v], &px), "no image of view %d", v);
        ck_assert_uint_eq(h[v].bits, 8);
        ck_assert(h[v].hi > h[v].lo);
        int lo = 255, hi = 0;
        for (size_t i = 0; i < (size_t)h[v].width * h[v].height; i++) {
            lo = px[TL_PREVIEW_HDR + i] < lo ? px[TL_PREVIEW_HDR + i] : lo;
            hi = px[TL_PREVIEW_HDR + i] > hi ? px[TL_PREVIEW_HDR + i] : hi;
        }
        ck_assert_int_eq(lo, 0); /* quantised over the image's own range */
        ck_assert_int_eq(hi, 255);
        free(px);
        ck_assert_uint_gt(h[v].t_pub, 0);
    }
    ck_assert_uint_eq(h[0].width, 64); /* row: cols x cols */
    ck_assert_uint_eq(h[0].height, 64);
    ck_assert_float_eq(h[0].orientation[8], 8); /* z = rows / 2 */
    ck_assert_uint_eq(h[1].width, 64);          /* ortho x: rows x cols */
    ck_assert_uint_eq(h[1].height, 16);
    ck_assert_float_eq(h[1].orientation[6], 0); /* through the axis */

    /* pinned while a page watches */
    json_t *list = tl_fx_ok(&f, "list_slices", NULL);
    for (int v = 0; v < 4; v++) {
        static const char *const ids[] = {"preview-row", "preview-x", "preview-y", "preview-z"};
        json_t *s = slice_by_id(list, ids[v]);
        ck_assert_msg(s && json_is_true(json_object_get(s, "pinned")), "%s not pinned", ids[v]);
    }
    json_decref(list);

    /* an operator now (check_http_access tests the refusals) */
    tl_ws_send_text(&w, "{\"req\":6,\"cmd\":\"auth\",\"token\":\"" TL_HC_TOKEN "\"}");
    j = tl_ws_reply(&w, 6, 10);
    ck_assert_msg(json_is_true(json_object_get(j, "ok")), "%s", json_dumps(j, 0));
    json_decref(j);
    /* move the x ortho-slice: a reply, then an image at the new position */
    tl_ws_send_text(&w, "{\"req\":7,\"cmd\":\"move\",\"view\":\"preview-x\",\"position\":5}");
    j = tl_ws_reply(&w, 7, 10);
    ck_assert_msg(json_is_true(json_object_get(j, "ok")), "%s", json_dumps(j, 0));
    json_decref(j);
    double want = 5;
    tl_preview_hdr moved;
    ck_assert_msg(tl_ws_image(&w, 1, at_position, &want, 20, &moved, NULL), "no image at x = 5");
    ck_assert_uint_gt(moved.seq, h[1].seq);
    /* a bad request is answered with an error, and changes nothing */
    tl_ws_send_text(&w, "{\"req\":8,\"cmd\":\"move\",\"view\":\"someone-else\",\"position\":1}");
    j = tl_ws_reply(&w, 8, 10);
    ck_assert(json_is_false(json_object_get(j, "ok")));
    ck_assert_ptr_nonnull(json_string_value(json_object_get(j, "error")));
    json_decref(j);
    tl_ws_send_text(&w, "{\"req\":9,\"cmd\":\"center\",\"value\":31.75}");
    j = tl_ws_reply(&w, 9, 10);
    ck_assert_msg(json_is_true(json_object_get(j, "ok")), "%s", json_dumps(j, 0));
    json_decref(j);
    json_t *st = tl_fx_ok(&f, "status", NULL);
    ck_assert_double_eq_tol(json_real_value(
                                json_object_get(json_object_get(st, "scan"), "center")),
                            31.75, 1e-9);
    json_decref(st);
    ck_assert(
        tl_fx_wait_messages(&f, 2 + 2 + 120 + 2, 20)); /* scan, darks, flats, projections, end */

    /* /metrics: valid, and the same numbers as status (taken before and after) */
    json_t *s1 = tl_fx_ok(&f, "status", NULL);
    tl_hc_response r;
    tl_hc_get(port, "/metrics", &r);
    json_t *s2 = tl_fx_ok(&f, "status", NULL);
    char err[512];
    ck_assert_msg(tl_expo_check(r.body, err, sizeof err) == 0, "%s\n%s", err, r.body);
    static const struct {
        const char *series, *path[3];
    } same[] = {
        {"tomolive_frames_accepted_total{kind=\"proj\"}", {"frames", "accepted", "proj"}},
        {"tomolive_frames_accepted_total{kind=\"dark\"}", {"frames", "accepted", "dark"}},
        {"tomolive_ingest_messages_total", {"frames", "messages", NULL}},
        {"tomolive_ingest_bytes_total", {"frames", "bytes", NULL}},
        {"tomolive_frames_rejected_total{reason=\"stale\"}", {"frames", "rejected", "stale"}},
        {"tomolive_slices_published_total", {"slices", "published", NULL}},
        {"tomolive_slices_computed_total", {"slices", "computed", NULL}},
        {"tomolive_slices_failed_total", {"slices", "failed", NULL}},
        {"tomolive_slice_iterations_total", {"slices", "iterations", NULL}},
        {"tomolive_queue_capacity", {"queue", "capacity", NULL}},
        {"tomolive_slices_defined", {"slices", "defined", NULL}},
    };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        double v;
        ck_assert_msg(tl_expo_value(r.body, same[i].series, &v), "no %s", same[i].series);
        json_t *a = s1, *b = s2;
        for (int k = 0; k < 3 && same[i].path[k]; k++) {
            a = json_object_get(a, same[i].path[k]);
            b = json_object_get(b, same[i].path[k]);
        }
        ck_assert_msg(json_integer_value(a) <= v && v <= json_integer_value(b),
                      "%s = %g, status %lld..%lld", same[i].series, v,
                      (long long)json_integer_value(a), (long long)json_integer_value(b));
    }
    double v;
    ck_assert(tl_expo_value(r.body, "tomolive_frames_accepted_total{kind=\"proj\"}", &v) &&
              v == 120);
    ck_assert(tl_expo_value(r.body, "tomolive_preview_clients", &v) && v == 1);
    ck_assert(tl_expo_value(r.body, "tomolive_scan_open", &v) && v == 1);
    ck_assert(tl_expo_value(r.body, "tomolive_window_fill_ratio", &v) && v == 1);
    ck_assert(tl_expo_value(r.body, "tomolive_preview_frames_total{outcome=\"sent\"}", &v) &&
              v >= 5);
    ck_assert(
        tl_expo_value(r.body, "tomolive_stage_latency_seconds_count{stage=\"reconstruct\"}", &v) &&
        v > 0);
    ck_assert(
        tl_expo_value(r.body, "tomolive_slice_latency_seconds_count{since=\"received\"}", &v) &&
        v > 0);
    ck_assert_ptr_nonnull(
        strstr(r.body, "\ntomolive_scan_info{series=\"1\",backend=\"cpu\",device=\""));
    ck_assert_ptr_null(strstr(r.body, "kernel=\"\"")); /* the kernel of the last slice */
    json_decref(s1);
    json_decref(s2);
    tl_hc_free(&r);

    /* /api/status: valid JSON with the same numbers */
    tl_hc_get(port, "/api/status", &r);
    json_t *api = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(api);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(json_object_get(api, "frames"), "accepted"), "proj")),
                     120);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(api, "scan"), "series")),
                     1);
    json_decref(api);
    tl_hc_free(&r);

    /* the page leaves: the preview slices are unpinned (and no longer computed) */
    tl_ws_close(&w);
    bool unpinned = false;
    for (double t0 = tl_fx_seconds(); !unpinned && tl_fx_seconds() - t0 < 10; usleep(50000)) {
        list = tl_fx_ok(&f, "list_slices", NULL);
        json_t *s = slice_by_id(list, "preview-x");
        unpinned = s && json_is_false(json_object_get(s, "pinned"));
        json_decref(list);
    }
    ck_assert_msg(unpinned, "preview-x still pinned after the page left");
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A page that never reads: the daemon goes on at full speed, keeps one image per view for
 * it and counts the ones it drops. */
START_TEST(slow_reader)
{
    tl_fixture f;
    int port = tl_hc_start(&f, "http-slow");
    tl_ws w;
    ck_assert_int_eq(tl_ws_open(&w, port, NULL, 4096), 101);
    tl_ws_send_text(&w, "{\"req\":1,\"cmd\":\"bits\",\"value\":16}");
    json_t *j = tl_ws_reply(&w, 1, 10);
    ck_assert(json_is_true(json_object_get(j, "ok")));
    json_decref(j);
    /* from here on: not a byte read */
    double t0 = tl_fx_seconds();
    char *out = NULL;
    int rc = tl_fx_run(&out,
                       "tomolive push --endpoint '%s' --rows 32 --cols 256 --projections 720 "
                       "--darks 2 --flats 2 --rate 240 --quiet",
                       f.ingest);
    ck_assert_msg(rc == 0, "push: %s", out);
    free(out);
    ck_assert(tl_fx_wait_messages(&f, 2 + 2 + 720 + 2, 30));
    double secs = tl_fx_seconds() - t0;
    ck_assert_msg(secs < 20, "the scan took %.1f s with a stalled page", secs);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.proj"), 720);
    /* the control socket and /metrics answer at once meanwhile */
    double t1 = tl_fx_seconds();
    tl_hc_response r;
    tl_hc_get(port, "/metrics", &r);
    ck_assert_msg(tl_fx_seconds() - t1 < 2, "/metrics took %.2f s", tl_fx_seconds() - t1);
    double dropped = 0, sent = 0;
    ck_assert(
        tl_expo_value(r.body, "tomolive_preview_frames_total{outcome=\"dropped\"}", &dropped));
    ck_assert(tl_expo_value(r.body, "tomolive_preview_frames_total{outcome=\"sent\"}", &sent));
    printf("slow reader: %g images sent, %g dropped in %.1f s\n", sent, dropped, secs);
    ck_assert_msg(dropped > 0, "nothing dropped (sent %g)", sent);
    tl_hc_free(&r);
    tl_ws_close(&w);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* Without http.root, a daemon run from the build tree serves the page of the source tree
 * (not the installed one, which may not exist yet, or be another version's); and
 * http.listen = 127.0.0.1:PORT listens there only (127.0.0.2, another address of the
 * loopback interface, is refused: a socket on every interface would take it). */
START_TEST(page_of_the_build_tree)
{
    tl_fixture f;
    int port = -1;
    char listen_kv[64];
    for (int attempt = 0; attempt < 3 && port < 0; attempt++) {
        int p = tl_hc_free_port();
        snprintf(listen_kv, sizeof listen_kv, "http.listen=127.0.0.1:%d", p);
        const char *args[] = {"--set", listen_kv, NULL};
        if (tl_fx_start(&f, "http-tree", args) == 0)
            port = p;
        else
            tl_fx_cleanup(&f);
    }
    ck_assert_msg(port > 0, "the daemon did not start");
    tl_hc_response r;
    tl_hc_get(port, "/", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "<script src=\"app.js\">"));
    tl_hc_free(&r);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in other = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.2", &other.sin_addr);
    ck_assert(fd >= 0);
    ck_assert_msg(connect(fd, (struct sockaddr *)&other, sizeof other) != 0,
                  "http.listen 127.0.0.1 accepted a connection to 127.0.0.2");
    close(fd);
    char *log = tl_fx_log(&f);
    ck_assert_msg(!strstr(log, "http_page_missing") && strstr(log, "/daemon/www"), "%s", log);
    free(log);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A port that cannot be bound is a start-up error, not a daemon without its page. */
START_TEST(port_in_use)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    char listen_kv[64];
    snprintf(listen_kv, sizeof listen_kv, "http.listen=127.0.0.1:%d", ntohs(a.sin_port));
    const char *args[] = {"--set", listen_kv, NULL};
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "http-busy", args), -1);
    char *log = tl_fx_log(&f);
    ck_assert_msg(strstr(log, "cannot listen") && strstr(log, "Address already in use"), "%s",
                  log);
    free(log);
    tl_fx_cleanup(&f);
    close(fd);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http_daemon");
    TCase *tc = tcase_create("daemon");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pages_and_404);
    tcase_add_test(tc, page_of_the_build_tree);
    tcase_add_test(tc, scan_preview_metrics);
    tcase_add_test(tc, slow_reader);
    tcase_add_test(tc, port_in_use);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tl_run_suite(suite(), false);
}
