/* check_outbox.c — what waits to be published (daemon/base/outbox.h): the newest of each
 * slice replaces the older one, a final waits behind the slice before it and is replaced
 * only by a newer final (never by the next scan's slices), at most three wait per id,
 * order of first posting, and a full outbox hands back what it cannot hold.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "daemon/base/outbox.h"
#include "tests/testutil.h"

#define NBUF 16

static tl_slicebuf bufs[NBUF];
static int nbufs;

static tl_slicebuf *slice(const char *id, uint64_t seq, bool final)
{
    tl_slicebuf *b = &bufs[nbufs++ % NBUF];
    memset(b, 0, sizeof *b);
    snprintf(b->id, sizeof b->id, "%s", id);
    b->seq = seq;
    b->final = final;
    return b;
}

/* The waiting slices as "id:seq[F] ..." */
static const char *contents(const tl_outbox *o)
{
    static char text[256];
    size_t n = 0;
    text[0] = 0;
    for (int i = 0; i < o->count; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%s:%llu%s", i ? " " : "",
                              o->items[i]->id, (unsigned long long)o->items[i]->seq,
                              o->items[i]->final ? "F" : "");
    return text;
}

/* Posts b; returns what it displaced as "seq[F] ..." ("" for nothing). */
static const char *post(tl_outbox *o, tl_slicebuf *b)
{
    static char text[64];
    tl_slicebuf *gone[2];
    int n = tl_outbox_post(o, b, gone);
    size_t len = 0;
    text[0] = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%llu%s", i ? " " : "",
                                (unsigned long long)gone[i]->seq, gone[i]->final ? "F" : "");
    return text;
}

START_TEST(latest_wins_per_slice)
{
    tl_outbox o;
    ck_assert_int_eq(tl_outbox_init(&o, 8), 0);
    ck_assert_str_eq(post(&o, slice("a", 1, false)), "");
    ck_assert_str_eq(post(&o, slice("b", 1, false)), "");
    ck_assert_str_eq(post(&o, slice("a", 2, false)), "1");
    ck_assert_str_eq(contents(&o), "a:2 b:1"); /* a keeps its place */
    ck_assert(tl_outbox_has(&o, "b"));
    ck_assert(!tl_outbox_has(&o, "c"));
    ck_assert_uint_eq(tl_outbox_head(&o)->seq, 2);
    tl_outbox_pop(&o);
    ck_assert_str_eq(contents(&o), "b:1");
    tl_outbox_pop(&o);
    ck_assert_ptr_null(tl_outbox_head(&o));
    tl_outbox_destroy(&o);
}
END_TEST

START_TEST(finals_are_not_replaced)
{
    tl_outbox o;
    ck_assert_int_eq(tl_outbox_init(&o, 8), 0);
    post(&o, slice("b", 1, false));
    post(&o, slice("a", 1, false));
    /* the final waits behind the slice before it (both owed: no gap in the seqs) */
    ck_assert_str_eq(post(&o, slice("a", 2, true)), "");
    ck_assert_str_eq(contents(&o), "b:1 a:1 a:2F");
    /* the next scan's slices wait behind the final, the newest of them only */
    ck_assert_str_eq(post(&o, slice("a", 3, false)), "");
    ck_assert_str_eq(contents(&o), "b:1 a:1 a:2F a:3");
    ck_assert_str_eq(post(&o, slice("a", 4, false)), "3");
    ck_assert_str_eq(contents(&o), "b:1 a:1 a:2F a:4");
    /* a newer final replaces the older and the slice behind it, in the older's place */
    ck_assert_str_eq(post(&o, slice("a", 5, true)), "4 2F");
    ck_assert_str_eq(contents(&o), "b:1 a:1 a:5F");
    ck_assert_str_eq(post(&o, slice("b", 2, true)), "");
    ck_assert_str_eq(contents(&o), "b:1 a:1 a:5F b:2F");
    /* once the slice before it has left, a final waits alone, and so on */
    tl_slicebuf *a = tl_outbox_take(&o, "a");
    ck_assert_uint_eq(a->seq, 1);
    a = tl_outbox_take(&o, "a");
    ck_assert(a->seq == 5 && a->final);
    ck_assert_ptr_null(tl_outbox_take(&o, "a"));
    ck_assert_str_eq(contents(&o), "b:1 b:2F");
    ck_assert_str_eq(post(&o, slice("b", 3, false)), "");
    ck_assert_str_eq(post(&o, slice("b", 4, false)), "3"); /* behind the final: latest wins */
    ck_assert_str_eq(contents(&o), "b:1 b:2F b:4");
    tl_outbox_destroy(&o);
}
END_TEST

START_TEST(full_outbox_hands_back)
{
    tl_outbox o;
    ck_assert_int_eq(tl_outbox_init(&o, 2), 0);
    post(&o, slice("a", 1, false));
    post(&o, slice("b", 1, false));
    ck_assert_str_eq(post(&o, slice("c", 7, false)), "7");
    ck_assert_str_eq(post(&o, slice("b", 2, false)), "1"); /* still replaces */
    ck_assert_str_eq(contents(&o), "a:1 b:2");
    tl_outbox_destroy(&o);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("outbox");
    TCase *t = tcase_create("outbox");
    tcase_add_test(t, latest_wins_per_slice);
    tcase_add_test(t, finals_are_not_replaced);
    tcase_add_test(t, full_outbox_hands_back);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
