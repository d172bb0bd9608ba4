/* check_http.c — the HTTP server's pure parts: preview images (downsampling, quantisation,
 * the binary header), the Prometheus text of /metrics (every line valid exposition format,
 * histograms cumulative and consistent with tl_stats), routing and http.listen.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/serve/http.h"
#include "daemon/serve/metrics.h"
#include "daemon/serve/preview.h"
#include "tests/testutil.h"
#include "tests/unit/check_http_expo.h"

/* ---- preview images ---------------------------------------------------------------------- */

START_TEST(preview_factor)
{
    uint32_t oh, ow;
    ck_assert_uint_eq(tl_preview_factor(512, 512, 512, &oh, &ow), 1);
    ck_assert_uint_eq(oh, 512);
    ck_assert_uint_eq(ow, 512);
    ck_assert_uint_eq(tl_preview_factor(1024, 2048, 512, &oh, &ow), 4);
    ck_assert_uint_eq(oh, 256);
    ck_assert_uint_eq(ow, 512);
    ck_assert_uint_eq(tl_preview_factor(1000, 1000, 512, &oh, &ow), 2);
    ck_assert_uint_eq(oh, 500);
    ck_assert_uint_eq(tl_preview_factor(513, 10, 512, &oh, &ow), 2); /* 513 > 512: halve */
    ck_assert_uint_eq(oh, 257);
    ck_assert_uint_eq(ow, 5);
    ck_assert_uint_eq(tl_preview_factor(48, 256, 64, &oh, &ow), 4);
    ck_assert_uint_eq(oh, 12);
    ck_assert_uint_eq(ow, 64);
}
END_TEST

START_TEST(preview_downsample)
{
    /* 5 x 5, f = 2: 3 x 3 blocks; the last row and column average what they have */
    float src[25], out[9];
    for (int i = 0; i < 25; i++)
        src[i] = (float)i;
    tl_preview_downsample(src, 5, 5, 2, out);
    ck_assert_float_eq(out[0], (0 + 1 + 5 + 6) / 4.0f);
    ck_assert_float_eq(out[1], (2 + 3 + 7 + 8) / 4.0f);
    ck_assert_float_eq(out[2], (4 + 9) / 2.0f);
    ck_assert_float_eq(out[6], (20 + 21) / 2.0f);
    ck_assert_float_eq(out[8], 24.0f);
    /* non-finite pixels leave their block's average; a block of only NaN is NaN */
    src[0] = NAN;
    src[1] = INFINITY;
    tl_preview_downsample(src, 5, 5, 2, out);
    ck_assert_float_eq(out[0], (5 + 6) / 2.0f);
    src[5] = src[6] = NAN;
    tl_preview_downsample(src, 5, 5, 2, out);
    ck_assert(isnan(out[0]));
    /* f = 1 copies */
    float one[4] = {1, 2, 3, 4}, copy[4];
    tl_preview_downsample(one, 2, 2, 1, copy);
    ck_assert(memcmp(one, copy, sizeof one) == 0);
}
END_TEST

START_TEST(preview_encode_values)
{
    float img[4] = {0, 1, 2, 3};
    tl_preview_hdr h = {.bits = 8, .view = 2, .final = true, .width = 2, .height = 2,
                        .src_width = 4, .src_height = 4, .projections_used = 180, .missing = 3,
                        .seq = 0x123456789abcull, .t_acq = 1700000000123456789ull,
                        .t_pub = 1700000000223456789ull};
    for (int i = 0; i < 9; i++)
        h.orientation[i] = (float)i - 4.5f;
    uint8_t buf[TL_PREVIEW_HDR + 8];
    ck_assert_uint_eq(tl_preview_bytes(2, 2, 8), TL_PREVIEW_HDR + 4);
    ck_assert_uint_eq(tl_preview_encode(img, &h, buf, sizeof buf), TL_PREVIEW_HDR + 4);
    ck_assert_float_eq(h.lo, 0);
    ck_assert_float_eq(h.hi, 3);
    ck_assert(memcmp(buf, "TLPV", 4) == 0);
    ck_assert_uint_eq(buf[TL_PREVIEW_HDR + 0], 0);
    ck_assert_uint_eq(buf[TL_PREVIEW_HDR + 1], 85);
    ck_assert_uint_eq(buf[TL_PREVIEW_HDR + 2], 170);
    ck_assert_uint_eq(buf[TL_PREVIEW_HDR + 3], 255);
    /* the header reads back */
    tl_preview_hdr r;
    ck_assert_int_eq(tl_preview_decode(buf, TL_PREVIEW_HDR + 4, &r), 0);
    ck_assert_uint_eq(r.bits, 8);
    ck_assert_uint_eq(r.view, 2);
    ck_assert(r.final);
    ck_assert_uint_eq(r.width, 2);
    ck_assert_uint_eq(r.height, 2);
    ck_assert_uint_eq(r.src_width, 4);
    ck_assert_uint_eq(r.projections_used, 180);
    ck_assert_uint_eq(r.missing, 3);
    ck_assert_uint_eq(r.seq, 0x123456789abcull);
    ck_assert_uint_eq(r.t_acq, 1700000000123456789ull);
    ck_assert_uint_eq(r.t_pub, 1700000000223456789ull);
    ck_assert_float_eq(r.lo, 0);
    ck_assert_float_eq(r.hi, 3);
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(r.orientation[i], (float)i - 4.5f);
    /* byte layout is little-endian at the documented offsets */
    ck_assert_uint_eq(buf[8], 2);
    ck_assert_uint_eq(buf[9], 0);
    ck_assert_uint_eq(buf[72], 0xbc);
    ck_assert_uint_eq(buf[73], 0x9a);
    /* wrong length, magic or bits */
    ck_assert_int_eq(tl_preview_decode(buf, TL_PREVIEW_HDR + 3, &r), -1);
    buf[0] = 'X';
    ck_assert_int_eq(tl_preview_decode(buf, TL_PREVIEW_HDR + 4, &r), -1);
}
END_TEST

START_TEST(preview_encode_16bit_and_edges)
{
    float img[4] = {-2, 0, NAN, 2};
    tl_preview_hdr h = {.bits = 16, .width = 4, .height = 1};
    uint8_t buf[TL_PREVIEW_HDR + 8];
    ck_assert_uint_eq(tl_preview_encode(img, &h, buf, sizeof buf), TL_PREVIEW_HDR + 8);
    ck_assert_float_eq(h.lo, -2);
    ck_assert_float_eq(h.hi, 2);
    const uint8_t *px = buf + TL_PREVIEW_HDR;
    ck_assert_uint_eq(px[0] | px[1] << 8, 0);
    ck_assert_uint_eq(px[2] | px[3] << 8, 32768); /* (0 - -2) / 4 * 65535 = 32767.5 -> 32768 */
    ck_assert_uint_eq(px[4] | px[5] << 8, 0);     /* NaN */
    ck_assert_uint_eq(px[6] | px[7] << 8, 65535);
    /* value = lo + q (hi - lo) / 65535 recovers the pixels to within half a step */
    double step = 4.0 / 65535;
    ck_assert(fabs(-2 + 32768 * step - 0) <= step / 2 + 1e-12);
    /* a flat image: hi = lo + 1, every code 0 */
    float flat[4] = {7, 7, 7, 7};
    h.bits = 8;
    ck_assert_uint_eq(tl_preview_encode(flat, &h, buf, sizeof buf), TL_PREVIEW_HDR + 4);
    ck_assert_float_eq(h.lo, 7);
    ck_assert_float_eq(h.hi, 8);
    ck_assert_uint_eq(buf[TL_PREVIEW_HDR], 0);
    /* too small a buffer, or an unsupported depth */
    ck_assert_uint_eq(tl_preview_encode(flat, &h, buf, TL_PREVIEW_HDR + 3), 0);
    h.bits = 12;
    ck_assert_uint_eq(tl_preview_encode(flat, &h, buf, sizeof buf), 0);
}
END_TEST

/* ---- /metrics ------------------------------------------------------------------------------ */

static tl_metrics_state sample_state(void)
{
    return (tl_metrics_state){
        .version = "0.1.0", .uptime_s = 12.5, .scan_open = true, .finished = false,
        .series = 7, .backend = "cpu", .device = "CPU \"quoted\" \\ (2 threads)\nx",
        .kernel = "cpu-f32", .window = 360, .held = 180, .missing = 0,
        .memory_bytes = 123456789, .center = 127.5, .queue_depth = 3, .queue_capacity = 64,
        .queue_high = 9, .slices_defined = 4, .slices_wanted = 2, .subscriptions = 1,
        .preview_clients = 1, .preview_sent = 10, .preview_dropped = 2};
}

static char *write_metrics(const tl_stats *st, const tl_metrics_state *s)
{
    size_t n = tl_metrics_write(NULL, 0, st, s);
    char *buf = malloc(n + 1);
    ck_assert_uint_eq(tl_metrics_write(buf, n + 1, st, s), n);
    ck_assert_uint_eq(strlen(buf), n);
    return buf;
}

START_TEST(metrics_text_valid)
{
    static tl_stats st; /* zeroed */
    tl_stats_add(&st.messages, 100);
    tl_stats_add(&st.bytes, 123456);
    tl_stats_add(&st.accepted[0], 10);
    tl_stats_add(&st.accepted[1], 10);
    tl_stats_add(&st.accepted[2], 80);
    tl_stats_add(&st.rejected[TL_REJ_STALE], 2);
    tl_stats_add(&st.rejected_proto[3], 1);
    tl_stats_add(&st.slices_published, 42);
    double obs[] = {0.00001, 0.0001, 0.000127, 0.002, 0.5, 20.0, 100.0};
    for (size_t i = 0; i < sizeof obs / sizeof *obs; i++)
        tl_hist_add(&st.latency[TL_LAT_RECON], obs[i]);
    tl_hist_add(&st.latency[TL_LAT_FRAME_TO_PUB], 0.003);
    tl_metrics_state s = sample_state();
    char *t = write_metrics(&st, &s);
    char err[512];
    ck_assert_msg(tl_expo_check(t, err, sizeof err) == 0, "%s\n%s", err, t);

    double v;
    ck_assert(tl_expo_value(t, "tomolive_frames_accepted_total{kind=\"proj\"}", &v) && v == 80);
    ck_assert(tl_expo_value(t, "tomolive_frames_rejected_total{reason=\"stale\"}", &v) && v == 2);
    ck_assert(tl_expo_value(t, "tomolive_ingest_messages_total", &v) && v == 100);
    ck_assert(tl_expo_value(t, "tomolive_slices_published_total", &v) && v == 42);
    ck_assert(tl_expo_value(t, "tomolive_window_fill_ratio", &v) && v == 0.5);
    ck_assert(tl_expo_value(t, "tomolive_preview_frames_total{outcome=\"dropped\"}", &v) && v == 2);
    ck_assert(tl_expo_value(t, "tomolive_build_info{version=\"0.1.0\"}", &v) && v == 1);
    ck_assert_ptr_nonnull(strstr(t, "tomolive_scan_info{series=\"7\",backend=\"cpu\",device=\"CPU "
                                    "\\\"quoted\\\" \\\\ (2 threads)\\nx\",kernel=\"cpu-f32\"} 1\n"));
    /* buckets: exact edges of tl_stats' buckets; each value counts in the first le at or above it */
    ck_assert(tl_expo_value(t, "tomolive_stage_latency_seconds_bucket{stage=\"reconstruct\",le=\"6.4e-05\"}", &v) && v == 1);
    ck_assert(tl_expo_value(t, "tomolive_stage_latency_seconds_bucket{stage=\"reconstruct\",le=\"0.000128\"}", &v) && v == 3);
    ck_assert(tl_expo_value(t, "tomolive_stage_latency_seconds_bucket{stage=\"reconstruct\",le=\"0.002048\"}", &v) && v == 4);
    ck_assert(tl_expo_value(t, "tomolive_stage_latency_seconds_bucket{stage=\"reconstruct\",le=\"16.777216\"}", &v) && v == 5);
    ck_assert(tl_expo_value(t, "tomolive_stage_latency_seconds_bucket{stage=\"reconstruct\",le=\"+Inf\"}", &v) && v == 7);
    ck_assert(tl_expo_value(t, "tomolive_stage_latency_seconds_count{stage=\"reconstruct\"}", &v) && v == 7);
    ck_assert(tl_expo_value(t, "tomolive_stage_latency_seconds_sum{stage=\"reconstruct\"}", &v));
    ck_assert_double_eq_tol(v, 120.502237, 1e-6);
    ck_assert(tl_expo_value(t, "tomolive_slice_latency_seconds_count{since=\"received\"}", &v) && v == 1);
    /* the bounds are the buckets of tl_stats */
    for (int k = 0; k < TL_METRICS_LE; k++)
        ck_assert_double_eq_tol(tl_hist_bound(tl_metrics_le_bucket(k)), 64e-6 * exp2(k), 1e-15);
    ck_assert_int_lt(tl_metrics_le_bucket(TL_METRICS_LE - 1), TL_HIST_BUCKETS - 1);
    free(t);

    /* no scan: no scan series at all, still valid */
    s.scan_open = false;
    t = write_metrics(&st, &s);
    ck_assert_msg(tl_expo_check(t, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_null(strstr(t, "tomolive_scan_info"));
    ck_assert(tl_expo_value(t, "tomolive_scan_open", &v) && v == 0);
    free(t);
}
END_TEST

START_TEST(metrics_short_buffer)
{
    static tl_stats st;
    tl_metrics_state s = sample_state();
    char small[100];
    size_t n = tl_metrics_write(small, sizeof small, &st, &s);
    ck_assert_uint_gt(n, sizeof small);
    ck_assert_uint_eq(strlen(small), sizeof small - 1); /* cut, NUL-terminated */
    char *full = write_metrics(&st, &s);
    ck_assert(strncmp(small, full, sizeof small - 1) == 0);
    free(full);
}
END_TEST

/* The checker itself refuses what it should. */
START_TEST(expo_checker_refuses)
{
    char err[256];
    static const char *const bad[] = {
        "x 1\n",                                                    /* no TYPE */
        "# HELP a_total h\n# TYPE a_total counter\na_total -1\n",   /* negative counter */
        "# HELP a h\n# TYPE a counter\na 1\n",                      /* counter without _total */
        "# HELP a h\n# TYPE a gauge\na 1",                          /* no final newline */
        "# HELP a h\n# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n", /* duplicate */
        "# HELP a h\n# TYPE a gauge\na{x=\"\\q\"} 1\n",             /* bad escape */
        "# HELP a h\n# TYPE a gauge\na 0x10\n",                     /* hex */
        "# HELP a h\n# TYPE a gauge\n\na 1\n",                      /* blank line */
        "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\n"
        "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n",            /* decreasing */
        "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n", /* no +Inf */
        "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 2\n", /* != count */
        "# HELP a h\n# TYPE a gauge\n# HELP b h\n# TYPE b gauge\nb 1\na 1\n", /* split */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(tl_expo_check(bad[i], err, sizeof err) != 0, "accepted #%zu", i);
    ck_assert_int_eq(tl_expo_check("# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
                                   "h_bucket{le=\"+Inf\"} 2\nh_sum 1.5\nh_count 2\n",
                                   err, sizeof err), 0);
}
END_TEST

/* ---- routing -------------------------------------------------------------------------------- */

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
    static const char *const nf[] = {"", "app.js", "/metrics/", "/api", "/api/status/x",
                                     "/../etc/passwd", "/a/b.js", "/.hidden.js", "/x.exe",
                                     "/nothing", "/..", "/%2e%2e.js"};
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
    tcase_add_test(tc, preview_factor);
    tcase_add_test(tc, preview_downsample);
    tcase_add_test(tc, preview_encode_values);
    tcase_add_test(tc, preview_encode_16bit_and_edges);
    tcase_add_test(tc, metrics_text_valid);
    tcase_add_test(tc, metrics_short_buffer);
    tcase_add_test(tc, expo_checker_refuses);
    tcase_add_test(tc, routes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(http_suite(), false);
}
