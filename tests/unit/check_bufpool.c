/* check_bufpool.c — the slice buffer pool (daemon/bufpool.h): buffers come back for reuse,
 * so steady streaming allocates nothing; it grows for a larger slice and keeps at most
 * max_free.
 */
#include "config.h"

#include "daemon/base/bufpool.h"
#include "tests/testutil.h"

START_TEST(bufpool_reuse)
{
    tl_bufpool p;
    tl_bufpool_init(&p, 2, TL_BACKEND_CPU);
    tl_slicebuf *a = tl_bufpool_get(&p, 100), *b = tl_bufpool_get(&p, 50);
    ck_assert_uint_eq(tl_bufpool_live(&p), 2);
    float *da = a->data;
    tl_bufpool_put(a);
    tl_bufpool_put(b);
    ck_assert_uint_eq(tl_bufpool_live(&p), 0);
    /* the same memory comes back: steady streaming allocates nothing */
    tl_slicebuf *c = tl_bufpool_get(&p, 80);
    ck_assert_ptr_eq(c->data, da);
    tl_slicebuf *e = tl_bufpool_get(&p, 200); /* larger than anything kept: grows */
    ck_assert_uint_ge(e->cap, 200);
    tl_slicebuf *f = tl_bufpool_get(&p, 10), *g = tl_bufpool_get(&p, 10);
    tl_bufpool_put(c);
    tl_bufpool_put(e);
    tl_bufpool_put(f);
    tl_bufpool_put(g); /* beyond max_free: released */
    ck_assert_uint_eq(p.nfree, 2);
    tl_bufpool_destroy(&p);
}
END_TEST

/* A held buffer goes back only when its last holder puts it (ZeroMQ and the publisher's
 * repeats both hold a buffer they send). */
START_TEST(bufpool_holders)
{
    tl_bufpool p;
    tl_bufpool_init(&p, 2, TL_BACKEND_CPU);
    tl_slicebuf *a = tl_bufpool_get(&p, 16);
    tl_bufpool_hold(a);
    tl_bufpool_hold(a);
    tl_bufpool_put(a);
    tl_bufpool_put(a);
    ck_assert_uint_eq(tl_bufpool_live(&p), 1);
    ck_assert_uint_eq(p.nfree, 0);
    tl_bufpool_put(a);
    ck_assert_uint_eq(tl_bufpool_live(&p), 0);
    ck_assert_uint_eq(p.nfree, 1);
    tl_slicebuf *b = tl_bufpool_get(&p, 16); /* reused: one holder again */
    ck_assert_ptr_eq(b, a);
    tl_bufpool_put(b);
    ck_assert_uint_eq(tl_bufpool_live(&p), 0);
    tl_bufpool_destroy(&p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bufpool");
    TCase *t = tcase_create("bufpool");
    tcase_add_test(t, bufpool_reuse);
    tcase_add_test(t, bufpool_holders);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
