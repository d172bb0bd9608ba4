/* check_http.c — the HTTP server's routing (daemon/http.h): paths to files, /metrics,
 * /api/status and /ws, everything else not found; MIME types; and http.listen parsed.
 * Preview images are tested in check_preview.c, the text of /metrics in check_metrics.c.
 */
#include "config.h"

#include "daemon/serve/http.h"
#include "tests/testutil.h"

START_TEST(routes)
{
    const char *f;
    ck_assert_int_eq(tl_http_route_path("/", &f), TL_ROUTE_FILE);
    ck_assert_str_eq(f, "index.html");
    ck_assert_int_eq(tl_http_route_path("/index.html", &f), TL_ROUTE_FILE);
    ck_assert_int_eq(tl_http_route_path("/app.js", &f), TL_ROUTE_FILE);
    ck_assert_str_eq(f, "app.js");
    ck_assert_int_eq(tl_http_route_path("/metrics", &f), TL_ROUTE_METRICS);
    ck_assert_int_eq(tl_http_route_path("/api/status", &f), TL_ROUTE_STATUS);
    ck_assert_int_eq(tl_http_route_path("/ws", &f), TL_ROUTE_WS);
    static const char *const nf[] = {"",         "app.js",        "/metrics/",
                                     "/api",     "/api/status/x", "/../etc/passwd",
                                     "/a/b.js",  "/.hidden.js",   "/x.exe",
                                     "/nothing", "/..",           "/%2e%2e.js"};
    for (size_t i = 0; i < sizeof nf / sizeof *nf; i++)
        ck_assert_msg(tl_http_route_path(nf[i], &f) == TL_ROUTE_NOT_FOUND, "%s", nf[i]);
    ck_assert_str_eq(tl_http_mime("app.js"), "text/javascript; charset=utf-8");
    ck_assert_str_eq(tl_http_mime("index.html"), "text/html; charset=utf-8");
    ck_assert_str_eq(tl_http_mime("style.css"), "text/css; charset=utf-8");

    char host[64];
    int port;
    ck_assert_int_eq(tl_http_parse_listen("*:8600", host, sizeof host, &port), 0);
    ck_assert_str_eq(host, "");
    ck_assert_int_eq(port, 8600);
    ck_assert_int_eq(tl_http_parse_listen("127.0.0.1:0", host, sizeof host, &port), 0);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_int_eq(port, 0);
    ck_assert_int_eq(tl_http_parse_listen("[::1]:80", host, sizeof host, &port), 0);
    ck_assert_str_eq(host, "::1");
    ck_assert_int_eq(tl_http_parse_listen("localhost:1", host, sizeof host, &port), 0);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_int_eq(tl_http_parse_listen("bad", host, sizeof host, &port), -1);
    ck_assert_int_eq(tl_http_parse_listen(":80", host, sizeof host, &port), -1);
    ck_assert_int_eq(tl_http_parse_listen("h:70000", host, sizeof host, &port), -1);
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, routes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(http_suite(), false);
}
