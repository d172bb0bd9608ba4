/* check_daemon_core.c — the daemon's pieces that need no sockets: the update policy of
 * slices, slice ids, subscription prefixes, the bounded queue (blocking, refusing, waking),
 * the buffer pool (reuse, no steady-state allocation), the latency histograms, and the
 * pacing of read-outs while frames stream (and the order slices are served in).
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/ingest/bands.h"
#include "daemon/base/bufpool.h"
#include "daemon/base/pacing.h"
#include "daemon/base/queue.h"
#include "daemon/base/slices.h"
#include "daemon/base/stats.h"
#include "daemon/base/subs.h"
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
    ck_assert(tl_slice_due(&sl, true, true, t + 500 * MS, &wake));  /* 3 >= every */
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
    sl.want_final = true; /* the final slice respects the rate too, then comes */
    ck_assert(!tl_slice_due(&sl, true, true, t + 2500 * MS, &wake));
    ck_assert(tl_slice_due(&sl, true, true, t + 3000 * MS, &wake));
    tl_slice_computed(&sl, t + 3000 * MS);
    ck_assert(!sl.want_final);
}
END_TEST

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
    ck_assert(tl_pace_take(&p, true, 5 * MS));   /* urgent: never held back */
    tl_pace_turn(&p, true, now);
    ck_assert(tl_pace_take(&p, false, 200000) && tl_pace_take(&p, false, 200000));
    ck_assert(!tl_pace_take(&p, false, 200000)); /* 0.6 ms > 0.5 ms */
    tl_pace_turn(&p, false, now + MS);           /* no frame this turn: wait for one */
    ck_assert(!tl_pace_take(&p, false, 1000));
    ck_assert_uint_eq(p.resume_ns, last + 100000 + 4 * MS);
    tl_pace_turn(&p, false, p.resume_ns);        /* the stream has paused */
    ck_assert(tl_pace_take(&p, false, 50 * MS) && tl_pace_take(&p, false, 50 * MS));
    /* frames a second apart are no stream */
    tl_pace q = {0};
    for (int i = 0; i < 20; i++)
        tl_pace_frame(&q, t + (uint64_t)i * 1000 * MS, t + (uint64_t)i * 1000 * MS);
    tl_pace_turn(&q, true, t + 19 * 1000 * MS + MS);
    ck_assert(tl_pace_take(&q, false, 10 * MS) && tl_pace_take(&q, false, 10 * MS));
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

static tl_item item_with(uint64_t index, const char *bytes)
{
    tl_item it;
    memset(&it, 0, sizeof it);
    it.type = TL_MSG_FRAME;
    it.frame.index = index;
    zmq_msg_init_size(&it.payload, strlen(bytes));
    memcpy(zmq_msg_data(&it.payload), bytes, strlen(bytes));
    return it;
}

START_TEST(queue_order_full_and_wake)
{
    tl_queue q;
    ck_assert_int_eq(tl_queue_init(&q, 3), 0);
    atomic_bool stop = false;
    for (int i = 0; i < 3; i++) {
        tl_item it = item_with((uint64_t)i, i == 1 ? "one" : "x");
        ck_assert_int_eq(tl_queue_push(&q, &it, false, &stop), 1);
        ck_assert_uint_eq(zmq_msg_size(&it.payload), 0); /* moved in */
        zmq_msg_close(&it.payload);
    }
    tl_item extra = item_with(9, "full");
    ck_assert_int_eq(tl_queue_push(&q, &extra, false, &stop), 0); /* full, not blocking */
    ck_assert_uint_eq(zmq_msg_size(&extra.payload), 4);           /* still the caller's */
    ck_assert_uint_eq(tl_queue_high(&q), 3);
    tl_item out;
    zmq_msg_init(&out.payload);
    ck_assert_int_eq(tl_queue_pop(&q, &out, 0), 1);
    ck_assert_uint_eq(out.frame.index, 0);
    ck_assert_int_eq(tl_queue_pop(&q, &out, 0), 1);
    ck_assert_uint_eq(out.frame.index, 1);
    ck_assert_mem_eq(zmq_msg_data(&out.payload), "one", 3);
    ck_assert_int_eq(tl_queue_pop(&q, &out, 0), 1);
    ck_assert_int_eq(tl_queue_pop(&q, &out, 0.05), 0); /* empty: times out */
    tl_queue_wake(&q);
    ck_assert_int_eq(tl_queue_pop(&q, &out, 10), 0);   /* woken: returns at once */
    /* a blocked push gives up when its stop flag is raised */
    for (int i = 0; i < 3; i++) {
        tl_item it = item_with((uint64_t)i, "x");
        tl_queue_push(&q, &it, true, &stop);
        zmq_msg_close(&it.payload);
    }
    stop = true;
    ck_assert_int_eq(tl_queue_push(&q, &extra, true, &stop), 0);
    zmq_msg_close(&extra.payload);
    zmq_msg_close(&out.payload);
    tl_queue_destroy(&q); /* closes the three queued payloads */
}
END_TEST

typedef struct {
    tl_queue *q;
    int n;
} producer_arg;

static void *producer(void *arg)
{
    producer_arg *a = arg;
    atomic_bool stop = false;
    for (int i = 0; i < a->n; i++) {
        tl_item it = item_with((uint64_t)i, "p");
        tl_queue_push(a->q, &it, true, &stop);
        zmq_msg_close(&it.payload);
    }
    return NULL;
}

/* Blocking pushes lose nothing: 10000 items through a queue of 4, in order. */
START_TEST(queue_blocking_is_lossless)
{
    tl_queue q;
    tl_queue_init(&q, 4);
    producer_arg a = {&q, 10000};
    pthread_t t;
    pthread_create(&t, NULL, producer, &a);
    tl_item out;
    zmq_msg_init(&out.payload);
    for (int i = 0; i < a.n; i++) {
        ck_assert_int_eq(tl_queue_pop(&q, &out, 5.0), 1);
        ck_assert_uint_eq(out.frame.index, (uint64_t)i);
    }
    pthread_join(t, NULL);
    ck_assert_uint_le(tl_queue_high(&q), 4);
    zmq_msg_close(&out.payload);
    tl_queue_destroy(&q);
}
END_TEST

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

/* ---- frames sent in row bands ---------------------------------------------------------- */

enum { BR = 7, BC = 5 }; /* a frame of 7 rows of 5 uint16 */

static void band_frame(uint64_t index, uint16_t *px)
{
    for (int k = 0; k < BR * BC; k++)
        px[k] = (uint16_t)(1000 * index + (uint64_t)k);
}

/* Band [first, first + rows) of frame index, its payload pointing into px. */
static tl_proto_frame band(uint64_t index, uint32_t first, uint32_t rows, const uint16_t *px)
{
    tl_proto_frame f = {.series = 3, .index = index, .kind = TL_PROTO_PROJ, .has_angle = true,
                        .angle = 0.25 * (double)index, .dtype = TL_PROTO_U16, .rows = BR,
                        .cols = BC, .has_t_acq = true, .t_acq = 77 + index, .has_band = true,
                        .band_first = first, .band_rows = rows};
    f.payload = px + (size_t)first * BC;
    f.payload_len = (size_t)rows * BC * sizeof *px;
    return f;
}

/* The frames dropped, as the assembly reports them. */
typedef struct {
    int n;
    uint64_t index[8];
    uint32_t rows_in[8];
    char why[8][160];
} drops;

static void on_drop(void *ctx, const tl_proto_frame *f, uint32_t rows_in, const char *why)
{
    drops *d = ctx;
    ck_assert_int_lt(d->n, 8);
    d->index[d->n] = f->index;
    d->rows_in[d->n] = rows_in;
    snprintf(d->why[d->n], sizeof d->why[0], "%s", why);
    d->n++;
}

START_TEST(bands_assemble)
{
    tl_bands b;
    drops dr = {0};
    tl_bands_init(&b, 2, TL_BACKEND_CPU, on_drop, &dr);
    uint16_t a[BR * BC], c[BR * BC];
    band_frame(10, a);
    band_frame(11, c);
    tl_bands_frame *done;
    char why[256];
    /* two frames' bands interleaved and out of order: 10 = [4,3] [0,2] [2,2]; 11 = [0,7] */
    tl_proto_frame f = band(10, 4, 3, a);
    ck_assert_int_eq(tl_bands_add(&b, &f, 100, 1000, &done, why, sizeof why), 0);
    f = band(10, 0, 2, a);
    ck_assert_int_eq(tl_bands_add(&b, &f, 101, 1001, &done, why, sizeof why), 0);
    ck_assert_int_eq(tl_bands_pending(&b), 1);
    f = band(11, 0, BR, c);
    ck_assert_int_eq(tl_bands_add(&b, &f, 102, 1002, &done, why, sizeof why), 1);
    ck_assert_uint_eq(done->frame.index, 11);
    ck_assert_mem_eq(done->data, c, sizeof c);
    tl_bands_free(&b, done);
    /* refused, and nothing changes: a band overlapping rows already in, one whose header
     * differs, one whose payload is not its rows */
    f = band(10, 1, 2, a);
    ck_assert_int_eq(tl_bands_add(&b, &f, 103, 1003, &done, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "overlaps row 1"), "%s", why);
    f = band(10, 2, 2, a);
    f.t_acq++;
    ck_assert_int_eq(tl_bands_add(&b, &f, 103, 1003, &done, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "header differs"), "%s", why);
    f = band(10, 2, 2, a);
    f.payload_len -= 2;
    ck_assert_int_eq(tl_bands_add(&b, &f, 103, 1003, &done, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "payload of 18 bytes, not 20"), "%s", why);
    f = band(10, 2, 2, a);
    ck_assert_int_eq(tl_bands_add(&b, &f, 104, 1004, &done, why, sizeof why), 1);
    ck_assert_uint_eq(done->frame.index, 10);
    ck_assert(!done->frame.has_band && done->frame.band_rows == BR && !done->frame.payload);
    ck_assert_uint_eq(done->frame.t_acq, 87);
    ck_assert_uint_eq(done->t_recv, 104); /* its last band's */
    ck_assert_mem_eq(done->data, a, sizeof a);
    tl_bands_free(&b, done);
    ck_assert_int_eq(tl_bands_pending(&b), 0);
    ck_assert_int_eq(dr.n, 0);
    tl_bands_destroy(&b);
}
END_TEST

START_TEST(bands_incomplete_dropped)
{
    tl_bands b;
    drops dr = {0};
    tl_bands_init(&b, 2, TL_BACKEND_CPU, on_drop, &dr);
    uint16_t px[BR * BC];
    band_frame(1, px);
    tl_bands_frame *done;
    char why[256];
    /* three frames begun, room for two: the oldest (1) goes */
    for (uint64_t k = 1; k <= 3; k++) {
        tl_proto_frame f = band(k, 0, 1, px);
        ck_assert_int_eq(tl_bands_add(&b, &f, k, 1000 * k, &done, why, sizeof why), 0);
    }
    ck_assert_int_eq(dr.n, 1);
    ck_assert_uint_eq(dr.index[0], 1);
    ck_assert_uint_eq(dr.rows_in[0], 1);
    ck_assert_msg(strstr(dr.why[0], "band_frames"), "%s", dr.why[0]);
    ck_assert_int_eq(tl_bands_pending(&b), 2);
    /* frame 1 is gone: its next band begins it anew and pushes out frame 2 */
    tl_proto_frame f = band(1, 1, 6, px);
    ck_assert_int_eq(tl_bands_add(&b, &f, 4, 4000, &done, why, sizeof why), 0);
    ck_assert_int_eq(dr.n, 2);
    ck_assert_uint_eq(dr.index[1], 2);
    /* frame 3 began at 3000, frame 1 at 4000: a timeout of 1500 at 4600 drops only 3 */
    ck_assert_int_eq(tl_bands_expire(&b, 4600, 1500), 1);
    ck_assert_uint_eq(dr.index[2], 3);
    ck_assert_msg(strstr(dr.why[2], "band_timeout_ms"), "%s", dr.why[2]);
    ck_assert_int_eq(tl_bands_pending(&b), 1);
    ck_assert_int_eq(tl_bands_clear(&b, "the series ended"), 1);
    ck_assert_uint_eq(dr.index[3], 1);
    ck_assert_uint_eq(dr.rows_in[3], 6);
    ck_assert_str_eq(dr.why[3], "the series ended");
    ck_assert_int_eq(tl_bands_pending(&b), 0);
    ck_assert_int_eq(dr.n, 4);
    tl_bands_destroy(&b);
}
END_TEST

/* Bands of 1 MB and more are copied by several threads: every byte lands in its place. */
START_TEST(bands_large_copy)
{
    enum { LR = 1024, LC = 1024 };
    tl_bands b;
    tl_bands_init(&b, 1, TL_BACKEND_CPU, NULL, NULL);
    uint16_t *px = malloc((size_t)LR * LC * sizeof *px);
    ck_assert_ptr_nonnull(px);
    for (size_t k = 0; k < (size_t)LR * LC; k++)
        px[k] = (uint16_t)(k * 2654435761u >> 7);
    tl_proto_frame f = {.series = 1, .index = 5, .kind = TL_PROTO_PROJ, .dtype = TL_PROTO_U16,
                        .rows = LR, .cols = LC, .has_band = true, .band_rows = LR / 2};
    tl_bands_frame *done;
    char why[256];
    for (int half = 1; half >= 0; half--) {
        f.band_first = (uint32_t)half * (LR / 2);
        f.payload = px + (size_t)f.band_first * LC;
        f.payload_len = (size_t)f.band_rows * LC * sizeof *px;
        ck_assert_int_eq(tl_bands_add(&b, &f, 1, 1, &done, why, sizeof why), half == 0);
    }
    ck_assert_mem_eq(done->data, px, (size_t)LR * LC * sizeof *px);
    tl_bands_destroy(&b);
    free(px);
}
END_TEST

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
    Suite *s = suite_create("daemon core");
    TCase *t = tcase_create("core");
    tcase_add_test(t, policy_every_k_and_rate);
    tcase_add_test(t, policy_triggers);
    tcase_add_test(t, slice_ids_and_registry);
    tcase_add_test(t, pacing_frames_first);
    tcase_add_test(t, served_order);
    tcase_add_test(t, subscription_prefixes);
    tcase_add_test(t, queue_order_full_and_wake);
    tcase_add_test(t, queue_blocking_is_lossless);
    tcase_add_test(t, bufpool_reuse);
    tcase_add_test(t, histogram_quantiles);
    tcase_add_test(t, bands_assemble);
    tcase_add_test(t, bands_incomplete_dropped);
    tcase_add_test(t, bands_large_copy);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
