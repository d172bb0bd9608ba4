/* check_heap.c — when the daemon gives its free heap back (daemon/base/heap.h): once ingest
 * has been idle for TL_HEAP_IDLE_NS, once per idle spell, never while messages arrive; and
 * the usage it reports follows an allocation.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/base/heap.h"
#include "tests/testutil.h"

#define MS 1000000ull

START_TEST(trims_once_per_idle_spell)
{
    tl_heap h = {0};
    uint64_t t = 5000 * MS, msgs = 0;
    ck_assert(!tl_heap_idle_check(&h, msgs, t)); /* the first look only starts the clock */
    ck_assert(!tl_heap_idle_check(&h, msgs, t + TL_HEAP_IDLE_NS - 1));
    ck_assert(tl_heap_idle_check(&h, msgs, t + TL_HEAP_IDLE_NS));
    ck_assert(!tl_heap_idle_check(&h, msgs, t + 10 * TL_HEAP_IDLE_NS)); /* once */
    ck_assert_uint_eq(h.trims, 1);
    /* a stream: a message every 100 ms for 5 s, never idle */
    t += 20 * TL_HEAP_IDLE_NS;
    for (int i = 0; i < 50; i++)
        ck_assert(!tl_heap_idle_check(&h, ++msgs, t + (uint64_t)i * 100 * MS));
    t += 49 * 100 * MS;
    ck_assert(!tl_heap_idle_check(&h, msgs, t + TL_HEAP_IDLE_NS / 2));
    ck_assert(tl_heap_idle_check(&h, msgs, t + TL_HEAP_IDLE_NS)); /* the stream stopped */
    ck_assert_uint_eq(h.trims, 2);
}
END_TEST

START_TEST(usage_follows_allocation)
{
    size_t used0, free0, used1, free1;
    tl_heap_usage(&used0, &free0);
    char *p = malloc(1 << 20);
    ck_assert_ptr_nonnull(p);
    memset(p, 1, 1 << 20);
    tl_heap_usage(&used1, &free1);
#if !defined(__SANITIZE_ADDRESS__) /* AddressSanitizer's allocator is not glibc's */
    ck_assert_uint_ge(used1, used0 + (1 << 20));
#endif
    free(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("heap");
    TCase *t = tcase_create("heap");
    tcase_add_test(t, trims_once_per_idle_spell);
    tcase_add_test(t, usage_follows_allocation);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
