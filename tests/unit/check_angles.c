/* check_angles.c — clients/angles.c: "START:STOP:COUNT" angles, and the arc a list of
 * angles covers as a scan (how push and recon tell a short cone-beam scan from a turn). */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "clients/angles.h"
#include "tests/testutil.h"

#define DEG (M_PI / 180)

START_TEST(parse_deg)
{
    double *a = NULL;
    uint32_t n = 0;
    ck_assert(tl_angles_parse_deg("0:180:4", 0, &a, &n));
    ck_assert_uint_eq(n, 4);
    for (uint32_t i = 0; i < n; i++) /* STOP excluded */
        ck_assert_double_eq_tol(a[i], 45.0 * i * DEG, 1e-15);
    free(a);
    ck_assert(tl_angles_parse_deg("10:20", 5, &a, &n));
    ck_assert_uint_eq(n, 5);
    ck_assert_double_eq_tol(a[4], 18 * DEG, 1e-15);
    free(a);
    ck_assert(!tl_angles_parse_deg("10:20", 0, &a, &n)); /* no count, no default */
    ck_assert(!tl_angles_parse_deg("x:20:4", 0, &a, &n));
}
END_TEST

START_TEST(arc)
{
    double *a = NULL, start, range;
    uint32_t n = 0;
    bool full;
    ck_assert(tl_angles_parse_deg("0:360:720", 0, &a, &n));
    ck_assert(tl_angles_arc(a, n, &start, &range, &full));
    ck_assert(full);
    ck_assert_double_eq_tol(range, 2 * M_PI, 1e-12);
    free(a);
    /* 220 degrees in 110 views: each stands for 2 degrees, the arc from -1 to 219 */
    ck_assert(tl_angles_parse_deg("0:220:110", 0, &a, &n));
    ck_assert(tl_angles_arc(a, n, &start, &range, &full));
    ck_assert(!full);
    ck_assert_double_eq_tol(start, -1 * DEG, 1e-12);
    ck_assert_double_eq_tol(range, 220 * DEG, 1e-12);
    /* a degree short of a turn is a short scan */
    free(a);
    ck_assert(tl_angles_parse_deg("0:359:359", 0, &a, &n));
    ck_assert(tl_angles_arc(a, n, &start, &range, &full));
    ck_assert_double_eq_tol(range, 359 * DEG, 1e-12);
    ck_assert(!full);
    double dec[3] = {0.3, 0.2, 0.1}, one = 0;
    ck_assert(!tl_angles_arc(dec, 3, &start, &range, &full));
    ck_assert(!tl_angles_arc(&one, 1, &start, &range, &full));
    free(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("angles");
    TCase *t = tcase_create("angles");
    tcase_add_test(t, parse_deg);
    tcase_add_test(t, arc);
    suite_add_tcase(s, t);
    return tl_run_suite(s, false);
}
