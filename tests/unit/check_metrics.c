/* check_metrics.c — the Prometheus text of /metrics (daemon/metrics.h): every line valid
 * exposition format (the strict checker of check_http_expo.h, itself checked here),
 * histograms cumulative and consistent with tl_stats, and a buffer too short for it.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/serve/metrics.h"
#include "tests/testutil.h"
#include "tests/unit/check_http_expo.h"

static tl_metrics_state sample_state(void)
{
    return (tl_metrics_state){.version = "0.1.0",
                              .uptime_s = 12.5,
                              .scan_open = true,
                              .finished = false,
                              .series = 7,
                              .backend = "cpu",
                              .device = "CPU \"quoted\" \\ (2 threads)\nx",
                              .kernel = "cpu-f32",
                              .window = 360,
                              .held = 180,
                              .missing = 0,
                              .memory_bytes = 123456789,
                              .center = 127.5,
                              .queue_depth = 3,
                              .queue_capacity = 64,
                              .queue_high = 9,
                              .slices_defined = 4,
                              .slices_wanted = 2,
                              .subscriptions = 1,
                              .slice_buffers = 6,
                              .slice_buffer_bytes = 6 * 4096,
                              .heap_in_use = 30 << 20,
                              .heap_free = 5 << 20,
                              .heap_trims = 12,
                              .preview_clients = 1,
                              .preview_sent = 10,
                              .preview_dropped = 2};
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
    ck_assert(tl_expo_value(t, "tomolive_slice_buffer_bytes", &v) && v == 6 * 4096);
    ck_assert(tl_expo_value(t, "tomolive_heap_in_use_bytes", &v) && v == 30 << 20);
    ck_assert(tl_expo_value(t, "tomolive_heap_trims_total", &v) && v == 12);
    ck_assert(tl_expo_value(t, "tomolive_preview_frames_total{outcome=\"dropped\"}", &v) &&
              v == 2);
    ck_assert(tl_expo_value(t, "tomolive_build_info{version=\"0.1.0\"}", &v) && v == 1);
    ck_assert_ptr_nonnull(strstr(t,
                                 "tomolive_scan_info{series=\"7\",backend=\"cpu\",device=\"CPU "
                                 "\\\"quoted\\\" \\\\ (2 threads)\\nx\",kernel=\"cpu-f32\"} 1\n"));
    /* buckets: exact edges of tl_stats' buckets; each value counts in the first le at or above it */
    ck_assert(tl_expo_value(
                  t, "tomolive_stage_latency_seconds_bucket{stage=\"reconstruct\",le=\"6.4e-05\"}",
                  &v) &&
              v == 1);
    ck_assert(tl_expo_value(
                  t,
                  "tomolive_stage_latency_seconds_bucket{stage=\"reconstruct\",le=\"0.000128\"}",
                  &v) &&
              v == 3);
    ck_assert(tl_expo_value(
                  t,
                  "tomolive_stage_latency_seconds_bucket{stage=\"reconstruct\",le=\"0.002048\"}",
                  &v) &&
              v == 4);
    ck_assert(tl_expo_value(
                  t,
                  "tomolive_stage_latency_seconds_bucket{stage=\"reconstruct\",le=\"16.777216\"}",
                  &v) &&
              v == 5);
    ck_assert(
        tl_expo_value(t,
                      "tomolive_stage_latency_seconds_bucket{stage=\"reconstruct\",le=\"+Inf\"}",
                      &v) &&
        v == 7);
    ck_assert(
        tl_expo_value(t, "tomolive_stage_latency_seconds_count{stage=\"reconstruct\"}", &v) &&
        v == 7);
    ck_assert(tl_expo_value(t, "tomolive_stage_latency_seconds_sum{stage=\"reconstruct\"}", &v));
    ck_assert_double_eq_tol(v, 120.502237, 1e-6);
    ck_assert(tl_expo_value(t, "tomolive_slice_latency_seconds_count{since=\"received\"}", &v) &&
              v == 1);
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
        "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n", /* decreasing */
        "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n", /* no +Inf */
        "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 2\n", /* != count */
        "# HELP a h\n# TYPE a gauge\n# HELP b h\n# TYPE b gauge\nb 1\na 1\n", /* split */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(tl_expo_check(bad[i], err, sizeof err) != 0, "accepted #%zu", i);
    ck_assert_int_eq(tl_expo_check("# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
                                   "h_bucket{le=\"+Inf\"} 2\nh_sum 1.5\nh_count 2\n",
                                   err, sizeof err),
                     0);
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, metrics_text_valid);
    tcase_add_test(tc, metrics_short_buffer);
    tcase_add_test(tc, expo_checker_refuses);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(metrics_suite(), false);
}
