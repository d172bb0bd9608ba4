/* check_pacing.c — frames first (daemon/pacing.h): the read-outs the worker may do after
 * each frame while frames stream, urgent ones always, everything once the stream pauses.
 */
#include "config.h"

#include <stdint.h>

#include "daemon/base/pacing.h"
#include "tests/testutil.h"

#define MS 1000000ull

/* Frames every 2 ms: after a frame, routine read-outs fit in 0.5 ms (the first always);
 * urgent ones always; a turn without a frame reads none while the stream goes on, and
 * everything once it has paused for two frame intervals. Without a stream, no limit. */
START_TEST(pacing_frames_first)
{
    tl_pace p = {0};
    uint64_t t = 1000 * MS;
    tl_pace_turn(&p, false, t);
    ck_assert(tl_pace_take(&p, false, 400000) && tl_pace_take(&p, false, 400000));
    ck_assert(!p.held);
    for (int i = 0; i < 50; i++) /* a camera at 500 frames/s */
        tl_pace_frame(&p, t + (uint64_t)i * 2 * MS, t + (uint64_t)i * 2 * MS + 100000);
    uint64_t last = t + 49 * 2 * MS, now = last + 200000;
    ck_assert_uint_eq(p.gap_ns, 2 * MS);
    tl_pace_turn(&p, true, now);
    ck_assert_uint_eq(p.budget_ns, MS / 2);
    ck_assert(tl_pace_take(&p, false, 900000));  /* the first, whatever it costs */
    ck_assert(!tl_pace_take(&p, false, 100000)); /* then nothing past the budget */
    ck_assert(p.held);
    ck_assert(tl_pace_take(&p, true, 5 * MS)); /* urgent: never held back */
    tl_pace_turn(&p, true, now);
    ck_assert(tl_pace_take(&p, false, 200000) && tl_pace_take(&p, false, 200000));
    ck_assert(!tl_pace_take(&p, false, 200000)); /* 0.6 ms > 0.5 ms */
    tl_pace_turn(&p, false, now + MS);           /* no frame this turn: wait for one */
    ck_assert(!tl_pace_take(&p, false, 1000));
    ck_assert_uint_eq(p.resume_ns, last + 100000 + 4 * MS);
    tl_pace_turn(&p, false, p.resume_ns); /* the stream has paused */
    ck_assert(tl_pace_take(&p, false, 50 * MS) && tl_pace_take(&p, false, 50 * MS));
    /* frames a second apart are no stream */
    tl_pace q = {0};
    for (int i = 0; i < 20; i++)
        tl_pace_frame(&q, t + (uint64_t)i * 1000 * MS, t + (uint64_t)i * 1000 * MS);
    tl_pace_turn(&q, true, t + 19 * 1000 * MS + MS);
    ck_assert(tl_pace_take(&q, false, 10 * MS) && tl_pace_take(&q, false, 10 * MS));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pacing");
    TCase *t = tcase_create("pacing");
    tcase_add_test(t, pacing_frames_first);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
