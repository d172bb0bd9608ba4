/* check_subs.c — the subscribed topic prefixes (daemon/subs.h): counted per prefix, so a
 * slice stays wanted until its last subscriber leaves; malformed subscription messages.
 */
#include "config.h"

#include "daemon/base/subs.h"
#include "tests/testutil.h"

START_TEST(subscription_prefixes)
{
    tl_subs s;
    tl_subs_init(&s);
    ck_assert(!tl_subs_match(&s, "slice/row0/", 11));
    ck_assert_int_eq(tl_subs_update(&s, "\x01slice/row0/", 12), 1);
    ck_assert_int_eq(tl_subs_update(&s, "\x01slice/row0/", 12), 0); /* second subscriber */
    ck_assert(tl_subs_match(&s, "slice/row0/", 11));
    ck_assert(!tl_subs_match(&s, "slice/row01/", 12)); /* terminated topics */
    ck_assert_int_eq(tl_subs_update(&s, "\x00slice/row0/", 12), 0);
    ck_assert(tl_subs_match(&s, "slice/row0/", 11));
    ck_assert_int_eq(tl_subs_update(&s, "\x00slice/row0/", 12), 1);
    ck_assert(!tl_subs_match(&s, "slice/row0/", 11));
    ck_assert_int_eq(tl_subs_update(&s, "\x01slice/", 7), 1); /* everything */
    ck_assert(tl_subs_match(&s, "slice/any/", 10));
    ck_assert_int_eq(tl_subs_update(&s, "\x02oops", 5), -1);
    ck_assert_int_eq(tl_subs_update(&s, "", 0), -1);
    ck_assert_int_eq(tl_subs_update(&s, "\x00never", 6), 0); /* unknown unsubscribe */
    ck_assert_uint_eq(tl_subs_count(&s), 1);
    tl_subs_destroy(&s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("subs");
    TCase *t = tcase_create("subs");
    tcase_add_test(t, subscription_prefixes);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
