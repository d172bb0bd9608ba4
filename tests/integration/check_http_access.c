/* check_http_access.c — who may use tomolived's HTTP server (issue 27), against a real
 * daemon (CPU backend, HTTP on a free loopback port, the page from the source tree):
 *   - the reviewer's attack: a page of http://evil.example opens the preview's WebSocket to
 *     shift the centre of rotation; the handshake is refused, the centre is unchanged, the
 *     refusal counted (/metrics, /api/status) and logged; the same from the page's own
 *     origin is let in, and a request with a foreign Origin gets 403;
 *   - http.origins: exactly the listed origins, the page's own no longer implied;
 *   - the operator token: actions refused without it (code "unauthorized"), with a wrong
 *     one, accepted with the right one; with the views closed a WebSocket sees nothing
 *     before it and /api/status and /metrics answer 401 without "Bearer TOKEN"; open views
 *     need no token but actions still do; the token never reaches the log or status;
 *   - a missing, short or unreadable token file fails start-up; no token file: no actions;
 *   - the security headers on every route's answers, errors included.
 * TLS is tested in check_http_tls.py.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/daemon_fixture.h"
#include "tests/http_client.h"
#include "tests/testutil.h"
#include "tests/unit/check_http_expo.h"
#include "tests/ws_client.h"

#define AUTH_HEADER "Authorization: Bearer " TL_HC_TOKEN "\r\n"

static double metric(int port, const char *series)
{
    tl_hc_response r;
    tl_hc_request(port, "GET", "/metrics", AUTH_HEADER, &r);
    ck_assert_int_eq(r.status, 200);
    char err[512];
    ck_assert_msg(tl_expo_check(r.body, err, sizeof err) == 0, "%s", err);
    double v = -1;
    ck_assert_msg(tl_expo_value(r.body, series, &v), "no %s", series);
    tl_hc_free(&r);
    return v;
}

static json_t *api_status(int port)
{
    tl_hc_response r;
    tl_hc_request(port, "GET", "/api/status", AUTH_HEADER, &r);
    ck_assert_int_eq(r.status, 200);
    json_t *j = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(j);
    tl_hc_free(&r);
    return j;
}

static double center(tl_fixture *f)
{
    json_t *st = tl_fx_ok(f, "status", NULL);
    double c = json_real_value(json_object_get(json_object_get(st, "scan"), "center"));
    json_decref(st);
    return c;
}

/* A scan that stays open (no end): a centre to shift. */
static void open_scan(tl_fixture *f)
{
    char *out = NULL;
    int rc = tl_fx_run(&out,
                       "tomolive push --endpoint '%s' --rows 8 --cols 32 --projections 24 "
                       "--no-end --quiet",
                       f->ingest);
    ck_assert_msg(rc == 0, "push: %s", out);
    free(out);
    ck_assert(tl_fx_wait_status(f, "frames.accepted.proj", 24, 20));
}

/* Sends {"req": id, "cmd": ...rest} and returns the reply. */
static json_t *ask(tl_ws *w, int id, const char *rest)
{
    char m[512];
    snprintf(m, sizeof m, "{\"req\":%d,%s}", id, rest);
    tl_ws_send_text(w, m);
    return tl_ws_reply(w, id, 10);
}

static void assert_unauthorized(json_t *j)
{
    ck_assert_msg(json_is_false(json_object_get(j, "ok")), "%s", json_dumps(j, 0));
    ck_assert_str_eq(json_string_value(json_object_get(j, "code")), "unauthorized");
    json_decref(j);
}

static void assert_ok(json_t *j)
{
    ck_assert_msg(json_is_true(json_object_get(j, "ok")), "%s", json_dumps(j, 0));
    json_decref(j);
}

START_TEST(foreign_origin)
{
    tl_fixture f;
    int port = tl_hc_start(&f, "http-origin"); /* views open: the origin check alone */
    open_scan(&f);
    double c0 = center(&f);

    /* the attack: the operator's browser runs evil.example's script, which opens the
     * WebSocket (browsers send the script's Origin) and asks for another centre */
    tl_ws w;
    int st = tl_ws_open(&w, port, "Origin: http://evil.example\r\n", 0);
    ck_assert_msg(st != 101, "a page of http://evil.example opened the WebSocket");
    if (st == 101) /* not reached: what it would have done */
        tl_ws_send_text(&w, "{\"req\":1,\"cmd\":\"center\",\"value\":3}");
    tl_ws_close(&w);
    ck_assert_double_eq(center(&f), c0);
    ck_assert_double_eq(metric(port, "tomolive_http_refused_total{reason=\"origin\"}"), 1);
    ck_assert(tl_fx_wait_log(&f, "http_refused reason=origin what=websocket", 10));
    char *log = tl_fx_log(&f);
    ck_assert_ptr_nonnull(strstr(log, "evil.example"));
    free(log);

    /* Origin: null (a sandboxed frame, a file:// page) and a neighbouring port: refused */
    ck_assert_int_ne(tl_ws_open(&w, port, "Origin: null\r\n", 0), 101);
    tl_ws_close(&w);
    char h[128];
    snprintf(h, sizeof h, "Origin: http://127.0.0.1:%d\r\n", port + 1);
    ck_assert_int_ne(tl_ws_open(&w, port, h, 0), 101);
    tl_ws_close(&w);

    /* a foreign Origin on a plain request: 403 */
    tl_hc_response r;
    tl_hc_request(port, "GET", "/api/status", "Origin: http://evil.example\r\n", &r);
    ck_assert_int_eq(r.status, 403);
    tl_hc_free(&r);
    json_t *api = api_status(port);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(json_object_get(api, "http"), "refused"), "origin")),
                     4);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(api, "http"), "origins")),
                     "self");
    json_decref(api);

    /* the page's own origin is let in; still no action without the token */
    snprintf(h, sizeof h, "Origin: http://127.0.0.1:%d\r\n", port);
    ck_assert_int_eq(tl_ws_open(&w, port, h, 0), 101);
    assert_unauthorized(ask(&w, 2, "\"cmd\":\"center\",\"value\":3"));
    ck_assert_double_eq(center(&f), c0);
    assert_ok(ask(&w, 3, "\"cmd\":\"auth\",\"token\":\"" TL_HC_TOKEN "\""));
    assert_ok(ask(&w, 4, "\"cmd\":\"center\",\"value\":3"));
    ck_assert_double_eq(center(&f), 3);
    tl_ws_close(&w);
    tl_hc_request(port, "GET", "/", h, &r);
    ck_assert_int_eq(r.status, 200);
    tl_hc_free(&r);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

START_TEST(listed_origins)
{
    tl_fixture f;
    const char *extra[] = {"--set", "http.open_views=true", "--set",
                           "http.origins=https://beamline.example:8600,http://viewer.example",
                           NULL};
    int port = tl_hc_start_with(&f, "http-origins", extra);
    tl_ws w;
    ck_assert_int_eq(tl_ws_open(&w, port, "Origin: https://beamline.example:8600\r\n", 0), 101);
    tl_ws_close(&w);
    ck_assert_int_eq(tl_ws_open(&w, port, "Origin: HTTP://viewer.example\r\n", 0), 101);
    tl_ws_close(&w);
    char h[128];
    snprintf(h, sizeof h, "Origin: http://127.0.0.1:%d\r\n", port); /* not listed */
    ck_assert_int_ne(tl_ws_open(&w, port, h, 0), 101);
    tl_ws_close(&w);
    ck_assert_int_ne(tl_ws_open(&w, port, "Origin: http://evil.example\r\n", 0), 101);
    tl_ws_close(&w);
    ck_assert_double_eq(metric(port, "tomolive_http_refused_total{reason=\"origin\"}"), 2);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* The default: views closed, the token needed for everything but the page's files. */
START_TEST(token_closed_views)
{
    tl_fixture f;
    int port = tl_hc_start_with(&f, "http-token", NULL);
    open_scan(&f);
    double c0 = center(&f);

    tl_hc_response r;
    static const char *const guarded[] = {"/api/status", "/metrics"};
    for (int i = 0; i < 2; i++) {
        tl_hc_get(port, guarded[i], &r);
        ck_assert_int_eq(r.status, 401);
        char *wa = tl_hc_header(&r, "www-authenticate");
        ck_assert_msg(wa && strncmp(wa, "Bearer", 6) == 0, "%s", r.head);
        free(wa);
        tl_hc_free(&r);
        tl_hc_request(port, "GET", guarded[i], "Authorization: Bearer wrong-token-0123456789\r\n",
                      &r);
        ck_assert_int_eq(r.status, 401);
        tl_hc_free(&r);
        tl_hc_request(port, "GET", guarded[i], AUTH_HEADER, &r);
        ck_assert_int_eq(r.status, 200);
        tl_hc_free(&r);
    }
    tl_hc_get(port, "/", &r); /* the page's files hold no data */
    ck_assert_int_eq(r.status, 200);
    tl_hc_free(&r);

    /* a WebSocket: told the views need the token, and shown nothing before it */
    tl_ws w;
    ck_assert_int_eq(tl_ws_open(&w, port, NULL, 0), 101);
    json_t *a = tl_ws_text(&w, "access", 10);
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(json_string_value(json_object_get(a, "views")), "token");
    ck_assert_str_eq(json_string_value(json_object_get(a, "actions")), "token");
    json_decref(a);
    assert_unauthorized(ask(&w, 1, "\"cmd\":\"center\",\"value\":2"));
    assert_unauthorized(ask(&w, 2, "\"cmd\":\"move\",\"view\":\"preview-x\",\"position\":1"));
    assert_unauthorized(ask(&w, 3, "\"cmd\":\"reset_views\""));
    assert_unauthorized(ask(&w, 9, "\"cmd\":\"auto_center\",\"value\":true"));
    assert_unauthorized(ask(&w, 4, "\"cmd\":\"auth\",\"token\":\"wrong-token-0123456789\""));
    assert_unauthorized(ask(&w, 5, "\"cmd\":\"auth\",\"token\":\"" TL_HC_TOKEN "x\""));
    assert_unauthorized(ask(&w, 6, "\"cmd\":\"auth\",\"token\":17"));
    ck_assert_double_eq(center(&f), c0);
    ck_assert_double_eq(metric(port, "tomolive_preview_clients"), 0); /* not watching */
    /* 2 x 2 HTTP refusals, 4 actions and 3 wrong tokens */
    ck_assert_double_eq(metric(port, "tomolive_http_refused_total{reason=\"token\"}"), 11);

    /* the token: the state comes, the page watches, and may act */
    json_t *ok = ask(&w, 7, "\"cmd\":\"auth\",\"token\":\"" TL_HC_TOKEN "\"");
    ck_assert(json_is_true(json_object_get(json_object_get(ok, "result"), "operator")));
    assert_ok(ok);
    json_t *state = tl_ws_text(&w, "state", 10);
    ck_assert_ptr_nonnull(state);
    json_decref(state);
    ck_assert_double_eq(metric(port, "tomolive_preview_clients"), 1);
    assert_ok(ask(&w, 8, "\"cmd\":\"center\",\"value\":2.5"));
    ck_assert_double_eq(center(&f), 2.5);
    tl_ws_close(&w);

    /* a new connection is a new page: the token again */
    ck_assert_int_eq(tl_ws_open(&w, port, NULL, 0), 101);
    assert_unauthorized(ask(&w, 1, "\"cmd\":\"center\",\"value\":1"));
    tl_ws_close(&w);
    ck_assert_double_eq(center(&f), 2.5);

    /* what is said about it, and where the token never goes */
    json_t *api = api_status(port);
    json_t *http = json_object_get(api, "http");
    ck_assert_str_eq(json_string_value(json_object_get(http, "views")), "token");
    ck_assert_str_eq(json_string_value(json_object_get(http, "actions")), "token");
    ck_assert(json_is_false(json_object_get(http, "tls")));
    char *text = json_dumps(api, 0);
    ck_assert_ptr_null(strstr(text, TL_HC_TOKEN));
    free(text);
    json_decref(api);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    char *log = tl_fx_log(&f);
    ck_assert_ptr_null(strstr(log, TL_HC_TOKEN));
    ck_assert_ptr_nonnull(strstr(log, "http_refused reason=token"));
    free(log);
    tl_fx_cleanup(&f);
}
END_TEST

/* http.open_views = true: images, status and metrics without the token; actions with it. */
START_TEST(open_views)
{
    tl_fixture f;
    int port = tl_hc_start(&f, "http-open");
    open_scan(&f);
    tl_hc_response r;
    tl_hc_get(port, "/api/status", &r);
    ck_assert_int_eq(r.status, 200);
    tl_hc_free(&r);
    tl_hc_get(port, "/metrics", &r);
    ck_assert_int_eq(r.status, 200);
    tl_hc_free(&r);
    tl_ws w;
    ck_assert_int_eq(tl_ws_open(&w, port, NULL, 0), 101);
    json_t *state = tl_ws_text(&w, "state", 10);
    ck_assert_ptr_nonnull(state);
    json_decref(state);
    tl_preview_hdr h;
    ck_assert_msg(tl_ws_image(&w, 0, NULL, NULL, 30, &h, NULL), "no image without the token");
    double c0 = center(&f);
    assert_unauthorized(ask(&w, 1, "\"cmd\":\"center\",\"value\":4"));
    ck_assert_double_eq(center(&f), c0);
    tl_ws_close(&w);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* No token file: the page takes no actions (and says why); a bad one fails start-up. */
START_TEST(token_file)
{
    tl_fixture f;
    const char *none[] = {"--set", "http.open_views=true", "--set", "http.token_file=", NULL};
    int port = tl_hc_start_with(&f, "http-notoken", none);
    ck_assert(tl_fx_wait_log(&f, "http_no_token", 10));
    tl_ws w;
    ck_assert_int_eq(tl_ws_open(&w, port, NULL, 0), 101);
    json_t *a = tl_ws_text(&w, "access", 10);
    ck_assert_str_eq(json_string_value(json_object_get(a, "actions")), "off");
    json_decref(a);
    json_t *j = ask(&w, 1, "\"cmd\":\"auth\",\"token\":\"anything-0123456789\"");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "error")), "token_file"));
    assert_unauthorized(j);
    tl_ws_close(&w);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);

    char path[] = "/tmp/tomolive-test-short-XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0 && write(fd, "short\n", 6) == 6);
    close(fd);
    static const struct {
        const char *file, *says;
    } bad[] = {{"/nonexistent/token", "cannot read"}, {NULL, "16 to 256 printable"}};
    for (int i = 0; i < 2; i++) {
        char kv[128], listen[64];
        snprintf(kv, sizeof kv, "http.token_file=%s", bad[i].file ? bad[i].file : path);
        snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", tl_hc_free_port());
        const char *args[] = {"--set", listen, "--set", kv, NULL};
        ck_assert_int_eq(tl_fx_start(&f, "http-badtoken", args), -1);
        char *log = tl_fx_log(&f);
        ck_assert_msg(strstr(log, "http.token_file") && strstr(log, bad[i].says), "%s", log);
        free(log);
        tl_fx_cleanup(&f);
    }
    unlink(path);
}
END_TEST

/* Every route's answer, errors included, carries the security headers. */
START_TEST(security_headers)
{
    tl_fixture f;
    int port = tl_hc_start_with(&f, "http-headers", NULL);
    static const struct {
        const char *method, *path, *headers;
        int status;
    } routes[] = {
        {"GET", "/", NULL, 200},
        {"GET", "/app.js", NULL, 200},
        {"GET", "/style.css", NULL, 200},
        {"HEAD", "/", NULL, 200},
        {"GET", "/metrics", AUTH_HEADER, 200},
        {"GET", "/api/status", AUTH_HEADER, 200},
        {"GET", "/metrics", NULL, 401},
        {"GET", "/api/status", NULL, 401},
        {"GET", "/nope", NULL, 404},
        {"GET", "/ws", NULL, 400},
        {"POST", "/", NULL, 405},
        {"GET", "/", "Origin: http://evil.example\r\n", 403},
    };
    static const struct {
        const char *name, *contains;
    } want[] = {
        {"content-security-policy", "default-src 'none'"},
        {"content-security-policy", "script-src 'self';"},
        {"content-security-policy", "connect-src 'self';"},
        {"content-security-policy", "frame-ancestors 'none'"},
        {"x-content-type-options", "nosniff"},
        {"x-frame-options", "DENY"},
        {"referrer-policy", "no-referrer"},
        {"cache-control", "no-store"},
    };
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        tl_hc_response r;
        tl_hc_request(port, routes[i].method, routes[i].path, routes[i].headers, &r);
        ck_assert_msg(r.status == routes[i].status, "%s %s: %d", routes[i].method,
                      routes[i].path, r.status);
        for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
            char *v = tl_hc_header(&r, want[k].name);
            ck_assert_msg(v && strstr(v, want[k].contains), "%s %s: %s: %s\n%s",
                          routes[i].method, routes[i].path, want[k].name, v ? v : "(none)",
                          r.head);
            free(v);
        }
        char *hsts = tl_hc_header(&r, "strict-transport-security");
        ck_assert_msg(!hsts, "HSTS over plain HTTP");
        tl_hc_free(&r);
    }
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http_access");
    TCase *tc = tcase_create("access");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, foreign_origin);
    tcase_add_test(tc, listed_origins);
    tcase_add_test(tc, token_closed_views);
    tcase_add_test(tc, open_views);
    tcase_add_test(tc, token_file);
    tcase_add_test(tc, security_headers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tl_run_suite(suite(), false);
}
