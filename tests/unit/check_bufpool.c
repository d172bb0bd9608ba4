/* check_bufpool.c — the slice buffer pool (daemon/bufpool.h): buffers come back for reuse,
 * so steady streaming allocates nothing; a get takes the smallest buffer large enough and
 * allocates when none is; it keeps at most max_free; a trim frees what nobody took since
 * the previous trim; the accounts (buffers, bytes) follow all of it.
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

/* Best fit: a small slice takes a small buffer, never the large one another slice needs,
 * and a larger slice allocates rather than growing (and so losing) a small one. */
START_TEST(bufpool_best_fit)
{
    tl_bufpool p;
    tl_bufpool_init(&p, 8, TL_BACKEND_CPU);
    tl_slicebuf *big = tl_bufpool_get(&p, 1000), *small = tl_bufpool_get(&p, 10);
    float *dbig = big->data, *dsmall = small->data;
    tl_bufpool_put(big);
    tl_bufpool_put(small);
    tl_slicebuf *a = tl_bufpool_get(&p, 8); /* both fit: the small one */
    ck_assert_ptr_eq(a->data, dsmall);
    tl_slicebuf *b = tl_bufpool_get(&p, 900);
    ck_assert_ptr_eq(b->data, dbig);
    tl_slicebuf *c = tl_bufpool_get(&p, 2000); /* none fits: a new one, the others kept */
    ck_assert_uint_eq(c->cap, 2000);
    size_t buffers, bytes;
    tl_bufpool_usage(&p, &buffers, &bytes);
    ck_assert_uint_eq(buffers, 3);
    ck_assert_uint_eq(bytes, (1000 + 10 + 2000) * sizeof(float));
    tl_bufpool_put(a);
    tl_bufpool_put(b);
    tl_bufpool_put(c);
    /* a shared-memory-only read-out (no pixels) takes the smallest */
    tl_slicebuf *z = tl_bufpool_get(&p, 0);
    ck_assert_ptr_eq(z->data, dsmall);
    tl_bufpool_put(z);
    tl_bufpool_destroy(&p);
}
END_TEST

/* A trim frees the buffers nobody took since the previous trim, and only those; the
 * accounts follow. Slices of changing sizes, a long run of them: the memory stays what the
 * sizes of now need (the old first fit grew every kept buffer to the largest size). */
START_TEST(bufpool_trim)
{
    tl_bufpool p;
    tl_bufpool_init(&p, 8, TL_BACKEND_CPU);
    tl_slicebuf *a = tl_bufpool_get(&p, 100), *b = tl_bufpool_get(&p, 200);
    tl_bufpool_put(a);
    tl_bufpool_put(b);
    ck_assert_uint_eq(tl_bufpool_trim(&p), 0); /* both were taken since the start */
    a = tl_bufpool_get(&p, 100);               /* a is used again, b not */
    ck_assert_uint_eq(a->cap, 100);
    ck_assert_uint_eq(tl_bufpool_trim(&p), 1); /* b: idle for a whole period */
    size_t buffers, bytes;
    tl_bufpool_usage(&p, &buffers, &bytes);
    ck_assert_uint_eq(buffers, 1); /* a, handed out: never freed then */
    ck_assert_uint_eq(bytes, 100 * sizeof(float));
    ck_assert_uint_eq(tl_bufpool_trim(&p), 0);
    tl_bufpool_put(a);
    ck_assert_uint_eq(tl_bufpool_trim(&p), 0); /* a was taken since the trim before */
    ck_assert_uint_eq(tl_bufpool_trim(&p), 1);
    tl_bufpool_usage(&p, &buffers, &bytes);
    ck_assert_uint_eq(buffers, 0);
    ck_assert_uint_eq(bytes, 0);

    /* add and remove slices of many sizes, trimming as the publisher does: what is left
     * is what the last sizes need */
    for (int round = 0; round < 50; round++) {
        tl_slicebuf *v[4];
        for (int i = 0; i < 4; i++)
            v[i] = tl_bufpool_get(&p, (size_t)(round % 7 + 1) * 64 + (size_t)i);
        for (int i = 0; i < 4; i++)
            tl_bufpool_put(v[i]);
        tl_bufpool_trim(&p);
    }
    tl_bufpool_trim(&p);
    tl_bufpool_usage(&p, &buffers, &bytes);
    ck_assert_uint_le(buffers, 4);
    ck_assert_uint_le(bytes, 4 * (7 * 64 + 3) * sizeof(float));
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
    tcase_add_test(t, bufpool_best_fit);
    tcase_add_test(t, bufpool_trim);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
