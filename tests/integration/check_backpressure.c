/* check_backpressure.c — when the engine falls behind, back-pressure is explicit and every
 * frame is accounted for (streaming issue, acceptance: "explicit, counted back-pressure").
 *
 * A daemon on the CPU backend with a queue of 4 items and a pinned 512 x 512 slice from a
 * 256-projection window recomputed from scratch after every projection (tens of ms each on
 * the CPU) receives 600 frames as fast as a socket takes them, far faster than it can
 * reconstruct:
 *   - ingest.overflow = drop: frames are dropped, and every one is counted with its reason
 *     (status frames.rejected.queue_full) and logged ("frame_dropped reason=queue_full");
 *     accepted + dropped equals what was sent, exactly — nothing is lost silently; the
 *     queue's high-water mark reached its capacity;
 *   - ingest.overflow = block: the same stream loses nothing (every frame accepted, no
 *     queue_full), the sender having waited instead.
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

#define ROWS 4
#define COLS 256
#define WINDOW 256
#define FRAMES 600
#define QUEUE 4

/* A scan of ROWS x COLS float32 line integrals (a centred disk), FRAMES projections sent
 * back to back. */
static void send_scan(tl_fixture *f)
{
    tl_proto_scan s = {.series = 1,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = ROWS,
                       .cols = COLS,
                       .dtype = TL_PROTO_F32,
                       .window = WINDOW,
                       .already_linear = true};
    ck_assert_int_eq(tl_fx_send_scan(f, &s), 0);
    static float img[ROWS * COLS];
    tl_fx_disk_projection(img, ROWS, COLS, COLS / 3.0);
    for (uint32_t k = 0; k < FRAMES; k++) {
        tl_proto_frame h = {.series = 1,
                            .index = k,
                            .kind = TL_PROTO_PROJ,
                            .has_angle = true,
                            .angle = M_PI * k / WINDOW,
                            .dtype = TL_PROTO_F32,
                            .rows = ROWS,
                            .cols = COLS};
        ck_assert_int_eq(tl_fx_send_frame(f, &h, img, sizeof img), 0);
    }
}

/* Starts a daemon with the given overflow policy, defines the slow slice, sends the scan
 * and waits until every message was taken. */
static void run(tl_fixture *f, const char *policy)
{
    char overflow[64], queue[64];
    snprintf(overflow, sizeof overflow, "ingest.overflow=%s", policy);
    snprintf(queue, sizeof queue, "ingest.queue=%d", QUEUE);
    const char *args[] = {"--set", overflow, "--set", queue, "--set", "slices.incremental=false",
                          NULL};
    ck_assert_int_eq(tl_fx_start(f, policy, args), 0);
    json_decref(tl_fx_ok(f, "set_slice",
                         "{\"id\":\"slow\",\"kind\":\"row\",\"z\":1,\"size\":[512,512],"
                         "\"pin\":true,\"update\":{\"every\":1,\"max_rate\":1000}}"));
    send_scan(f);
    /* the scan message and every frame, each either queued or dropped */
    ck_assert_msg(tl_fx_wait_messages(f, FRAMES + 1, 120), "the daemon did not take all frames");
}

START_TEST(drop_is_counted)
{
    tl_fixture f;
    run(&f, "drop");
    long long accepted = tl_fx_status_int(&f, "frames.accepted.proj");
    long long dropped = tl_fx_status_int(&f, "frames.rejected.queue_full");
    long long high = tl_fx_status_int(&f, "queue.high_water");
    printf("  drop: %d sent, %lld accepted, %lld dropped (queue_full), high water %lld of %d\n",
           FRAMES, accepted, dropped, high, QUEUE);
    ck_assert_int_gt(dropped, 0);
    ck_assert_int_eq(accepted + dropped, FRAMES); /* every frame accounted for */
    ck_assert_int_eq(high, QUEUE);
    char *log = tl_fx_log(&f);
    ck_assert_ptr_nonnull(strstr(log, "frame_dropped"));
    ck_assert_ptr_nonnull(strstr(log, "reason=queue_full"));
    free(log);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

START_TEST(block_loses_nothing)
{
    tl_fixture f;
    run(&f, "block");
    long long accepted = tl_fx_status_int(&f, "frames.accepted.proj");
    long long dropped = tl_fx_status_int(&f, "frames.rejected.queue_full");
    long long high = tl_fx_status_int(&f, "queue.high_water");
    printf("  block: %d sent, %lld accepted, %lld dropped, high water %lld of %d\n", FRAMES,
           accepted, dropped, high, QUEUE);
    ck_assert_int_eq(accepted, FRAMES);
    ck_assert_int_eq(dropped, 0);
    ck_assert_int_eq(high, QUEUE); /* it did fill: the sender waited */
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backpressure");
    TCase *t = tcase_create("overflow");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, drop_is_counted);
    tcase_add_test(t, block_loses_nothing);
    suite_add_tcase(s, t);
    return tl_run_suite(s, false);
}
