/* check_http.c — the HTTP server's routing (daemon/http.h): paths to files, /metrics,
 * /api/status and /ws, everything else not found; MIME types; http.listen parsed; the
 * Origin rule, the token comparison, and the [http] defaults (loopback, views closed).
 * Preview images are tested in check_preview.c, the text of /metrics in check_metrics.c.
 */
#include "config.h"

#include <string.h>

#include "daemon/base/settings.h"
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

START_TEST(origins)
{
    /* no Origin: no browser */
    ck_assert(tl_http_origin_allowed(NULL, "127.0.0.1:8600", false, ""));
    /* the page's own: the Origin's host:port is the Host, over the connection's scheme */
    ck_assert(tl_http_origin_allowed("http://127.0.0.1:8600", "127.0.0.1:8600", false, ""));
    ck_assert(tl_http_origin_allowed("http://Beamline.Example", "beamline.example", false, ""));
    ck_assert(tl_http_origin_allowed("https://b.example:8443", "b.example:8443", true, ""));
    ck_assert(!tl_http_origin_allowed("https://b.example:8443", "b.example:8443", false, ""));
    ck_assert(!tl_http_origin_allowed("http://b.example:8443", "b.example:8443", true, ""));
    ck_assert(!tl_http_origin_allowed("http://evil.example", "127.0.0.1:8600", false, ""));
    ck_assert(!tl_http_origin_allowed("http://127.0.0.1:8601", "127.0.0.1:8600", false, ""));
    ck_assert(!tl_http_origin_allowed("http://127.0.0.1:8600.evil", "127.0.0.1:8600", false, ""));
    ck_assert(!tl_http_origin_allowed("null", "127.0.0.1:8600", false, ""));
    ck_assert(!tl_http_origin_allowed("http://127.0.0.1:8600", NULL, false, ""));
    ck_assert(!tl_http_origin_allowed("http://", "", false, ""));
    /* a list: exactly its origins */
    const char *list = "https://a.example:8600,http://b.example";
    ck_assert(tl_http_origin_allowed("https://a.example:8600", "x", false, list));
    ck_assert(tl_http_origin_allowed("HTTP://B.example", "x", false, list));
    ck_assert(!tl_http_origin_allowed("https://a.example", "a.example", true, list));
    ck_assert(!tl_http_origin_allowed("http://b.example:80", "x", false, list));
    ck_assert(!tl_http_origin_allowed("https://a.example:860", "x", false, list));
    ck_assert(!tl_http_origin_allowed("http://x", "x", false, list)); /* not its own then */
}
END_TEST

START_TEST(tokens)
{
    const char *t = "0123456789abcdef";
    ck_assert(tl_http_token_equal(t, 16, "0123456789abcdef", 16));
    ck_assert(!tl_http_token_equal(t, 16, "0123456789abcdeF", 16));
    ck_assert(!tl_http_token_equal(t, 16, "0123456789abcde", 15));
    ck_assert(!tl_http_token_equal(t, 16, "0123456789abcdef0", 17));
    ck_assert(!tl_http_token_equal(t, 16, "", 0));
    ck_assert(!tl_http_token_equal("", 0, "", 0)); /* no token: nothing matches */
    char nul[16];
    memcpy(nul, t, 15);
    nul[15] = 0; /* a NUL in the given token does not end the comparison */
    ck_assert(!tl_http_token_equal(t, 16, nul, 16));
}
END_TEST

/* The [http] defaults a beamline gets without configuring anything. */
START_TEST(defaults)
{
    tl_settings c;
    tl_settings_defaults(&c);
    ck_assert_str_eq(c.http_listen, "127.0.0.1:8600");
    ck_assert_str_eq(c.http_origins, "");
    ck_assert_str_eq(c.http_token_file, "");
    ck_assert(!c.http_open_views);
    ck_assert_str_eq(c.http_tls_cert, "");
    char err[512];
    ck_assert_int_eq(tl_settings_set(&c, "http.origins", "https://a.example:8600,http://[::1]:1",
                                     err, sizeof err),
                     0);
    static const char *const bad[] = {"a.example", "ftp://a", "https://a/x", "http://a, http://b",
                                      "http://"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(tl_settings_set(&c, "http.origins", bad[i], err, sizeof err) == -1, "%s",
                      bad[i]);
    ck_assert_int_eq(tl_settings_set(&c, "http.tls_cert", "/x/cert.pem", err, sizeof err), 0);
    ck_assert_int_eq(tl_settings_check(&c, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "tls_key"));
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, routes);
    tcase_add_test(tc, origins);
    tcase_add_test(tc, tokens);
    tcase_add_test(tc, defaults);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(http_suite(), false);
}
