/* check_slices.c — the daemon's slice registry (daemon/slices.h): when a slice is due
 * under its update policy (every K frames, at most max_rate, on a complete window, the
 * final one), the order slices are served in, and slice ids and the registry.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "daemon/base/slices.h"
#include "tests/testutil.h"

#define MS 1000000ull

START_TEST(policy_every_k_and_rate)
{
    tl_slice sl = {0};
    sl.policy = (tl_update_policy){.every = 3, .on_complete = false, .max_rate = 10};
    uint64_t wake = UINT64_MAX, t = 1000 * MS;
    /* a newly wanted slice is due at once (if there is data) */
    ck_assert(tl_slice_due(&sl, true, true, t, &wake));
    tl_slice_computed(&sl, t);
    tl_slice_touch(&sl);
    tl_slice_touch(&sl);
    ck_assert(!tl_slice_due(&sl, true, true, t + 500 * MS, &wake)); /* 2 < every */
    tl_slice_touch(&sl);
    ck_assert(tl_slice_due(&sl, true, true, t + 500 * MS, &wake)); /* 3 >= every */
    tl_slice_computed(&sl, t + 500 * MS);
    for (int i = 0; i < 5; i++)
        tl_slice_touch(&sl);
    wake = UINT64_MAX;
    ck_assert(!tl_slice_due(&sl, true, true, t + 550 * MS, &wake)); /* 10 Hz: 100 ms apart */
    ck_assert_uint_eq(wake, t + 600 * MS);
    ck_assert(tl_slice_due(&sl, true, true, t + 600 * MS, &wake));
    /* not wanted: never due, and wanted again: due at once */
    tl_slice_computed(&sl, t + 600 * MS);
    ck_assert(!tl_slice_due(&sl, false, true, t + 900 * MS, &wake));
    ck_assert(tl_slice_due(&sl, true, true, t + 900 * MS, &wake));
    /* no data yet: not due even when wanted */
    tl_slice s2 = {0};
    s2.policy = sl.policy;
    ck_assert(!tl_slice_due(&s2, true, false, t, &wake));
}
END_TEST

START_TEST(policy_triggers)
{
    tl_slice sl = {0};
    sl.policy = (tl_update_policy){.every = 1000, .on_complete = true, .max_rate = 1};
    uint64_t wake = UINT64_MAX, t = 5000 * MS;
    tl_slice_due(&sl, true, true, t, &wake);
    tl_slice_computed(&sl, t);
    ck_assert(!tl_slice_due(&sl, true, true, t + 2000 * MS, &wake));
    sl.want_complete = true;
    ck_assert(tl_slice_due(&sl, true, true, t + 2000 * MS, &wake));
    tl_slice_computed(&sl, t + 2000 * MS);
    /* a parameter change respects the rate (an operator dragging a plane) */
    sl.want_param = true;
    wake = UINT64_MAX;
    ck_assert(!tl_slice_due(&sl, true, true, t + 2500 * MS, &wake));
    ck_assert_uint_eq(wake, t + 3000 * MS);
    ck_assert(tl_slice_due(&sl, true, true, t + 3000 * MS, &wake));
    tl_slice_computed(&sl, t + 3000 * MS);
    /* the scan's end: the final goes at once, whatever the rate (once per scan) */
    sl.want_final = true;
    ck_assert(tl_slice_due(&sl, true, true, t + 3001 * MS, &wake));
    tl_slice_computed(&sl, t + 3001 * MS);
    ck_assert(!sl.want_final);
    /* so does the window's completion */
    sl.want_complete = true;
    ck_assert(tl_slice_due(&sl, true, true, t + 3002 * MS, &wake));
    /* an iterative slice owes its final until it converges: refining at its rate */
    tl_slice it = {0};
    it.policy = sl.policy;
    it.it.on = true;
    tl_slice_due(&it, true, true, t, &wake);
    tl_slice_computed(&it, t);
    it.want_final = true;
    ck_assert(!tl_slice_due(&it, true, true, t + 500 * MS, &wake));
    ck_assert(tl_slice_due(&it, true, true, t + 1000 * MS, &wake));
}
END_TEST

/* A slice wanted over one channel that becomes wanted over the other is due at once: what
 * was published went over the first only (a shared-memory subscriber restarted after the
 * scan's end would otherwise get nothing). */
START_TEST(new_channel_is_new)
{
    tl_slice sl = {0};
    tl_slice_note_wanted(&sl, true, false);
    ck_assert(sl.want_new);
    tl_slice_computed(&sl, 1);
    tl_slice_note_wanted(&sl, true, false);
    ck_assert(!sl.want_new);
    tl_slice_note_wanted(&sl, true, true); /* a shared-memory subscriber joins */
    ck_assert(sl.want_new);
    tl_slice_computed(&sl, 2);
    tl_slice_note_wanted(&sl, false, true); /* the TCP one leaves: nothing new */
    ck_assert(!sl.want_new);
    tl_slice_note_wanted(&sl, true, true); /* and comes back */
    ck_assert(sl.want_new);
}
END_TEST

/* Urgent slices first, then the one computed longest ago. */
START_TEST(served_order)
{
    tl_slice a = {0}, b = {0}, c = {0};
    a.last_ns = 300;
    b.last_ns = 100;
    c.last_ns = 200;
    ck_assert(tl_slice_served_before(&b, &a));
    ck_assert(!tl_slice_served_before(&a, &b));
    ck_assert(tl_slice_served_before(&c, &a));
    a.want_new = true; /* a new subscriber: before any routine one */
    ck_assert(tl_slice_served_before(&a, &b));
    ck_assert(!tl_slice_served_before(&b, &a));
    ck_assert(tl_slice_urgent(&a) && !tl_slice_urgent(&b));
}
END_TEST

START_TEST(slice_ids_and_registry)
{
    ck_assert(tl_slice_id_valid("row_0.a-B", 9));
    ck_assert(!tl_slice_id_valid("", 0));
    ck_assert(!tl_slice_id_valid("a/b", 3));
    ck_assert(!tl_slice_id_valid("a b", 3));
    char long_id[70];
    memset(long_id, 'x', sizeof long_id);
    ck_assert(tl_slice_id_valid(long_id, 64));
    ck_assert(!tl_slice_id_valid(long_id, 65));
    tl_slices s;
    tl_slices_init(&s);
    for (int i = 0; i < 20; i++) {
        char id[8];
        int n = snprintf(id, sizeof id, "s%d", i);
        ck_assert_ptr_nonnull(tl_slices_add(&s, id, (size_t)n));
    }
    tl_slice *x = tl_slices_find(&s, "s7", 2);
    ck_assert_str_eq(x->topic, "slice/s7/");
    ck_assert_int_eq(x->engine_id, -1);
    tl_slices_remove(&s, x);
    ck_assert_ptr_null(tl_slices_find(&s, "s7", 2));
    ck_assert_ptr_nonnull(tl_slices_find(&s, "s19", 3));
    ck_assert_int_eq(s.n, 19);
    tl_slices_destroy(&s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("slices");
    TCase *t = tcase_create("slices");
    tcase_add_test(t, policy_every_k_and_rate);
    tcase_add_test(t, policy_triggers);
    tcase_add_test(t, slice_ids_and_registry);
    tcase_add_test(t, new_channel_is_new);
    tcase_add_test(t, served_order);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
