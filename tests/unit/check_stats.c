/* check_stats.c — the daemon's latency histograms (daemon/stats.h): quantiles within one
 * bucket of the truth, the maximum, and a negative time counted, not lost.
 */
#include "config.h"

#include <string.h>

#include "daemon/base/stats.h"
#include "tests/testutil.h"

START_TEST(histogram_quantiles)
{
    static tl_hist h;
    memset(&h, 0, sizeof h);
    ck_assert(tl_hist_quantile(&h, 0.5) == 0);
    for (int i = 1; i <= 1000; i++)
        tl_hist_add(&h, i * 1e-4); /* 0.1 ms .. 100 ms uniformly */
    ck_assert_uint_eq(tl_hist_count(&h), 1000);
    double p50 = tl_hist_quantile(&h, 0.5), p99 = tl_hist_quantile(&h, 0.99);
    /* bucket upper bounds: within one bucket width (2^(1/8)) above the true value */
    ck_assert(p50 >= 0.05 && p50 <= 0.05 * 1.0905);
    ck_assert(p99 >= 0.099 && p99 <= 0.099 * 1.0905);
    ck_assert_double_eq_tol(tl_hist_max(&h), 0.1, 1e-9);
    ck_assert(tl_hist_quantile(&h, 1.0) <= tl_hist_max(&h));
    tl_hist_add(&h, -1); /* clock skew: counted as zero, not lost */
    ck_assert_uint_eq(tl_hist_count(&h), 1001);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("stats");
    TCase *t = tcase_create("stats");
    tcase_add_test(t, histogram_quantiles);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
