/* check_queue.c — the bounded queue between ingest and worker (daemon/queue.h): order,
 * refusing when full, payloads moved in, waking a waiting pop, a blocked push giving up on
 * stop, and blocking pushes that lose nothing.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/base/queue.h"
#include "tests/testutil.h"

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
    ck_assert_int_eq(tl_queue_pop(&q, &out, 10), 0); /* woken: returns at once */
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

/* A scan's matrices (PROTOCOL.md 8.1.1) have one owner at a time: pushing moves them into
 * the queue (the sender's item no longer holds them), popping moves them out (the slot no
 * longer holds them), and a scan still queued at destroy is freed with the queue (run
 * under valgrind or ASan, that is no leak and no double free). */
START_TEST(queue_moves_scan_matrices)
{
    tl_queue q;
    ck_assert_int_eq(tl_queue_init(&q, 2), 0);
    atomic_bool stop = false;
    double(*P[2])[12];
    for (int i = 0; i < 2; i++) {
        tl_item it;
        memset(&it, 0, sizeof it);
        zmq_msg_init(&it.payload);
        it.type = TL_MSG_SCAN;
        it.scan.nmatrices = 1;
        it.scan.matrices = P[i] = calloc(1, sizeof *P[i]);
        ck_assert_ptr_nonnull(P[i]);
        ck_assert_int_eq(tl_queue_push(&q, &it, false, &stop), 1);
        ck_assert_ptr_null(it.scan.matrices);
        zmq_msg_close(&it.payload);
    }
    tl_item out;
    memset(&out, 0, sizeof out);
    zmq_msg_init(&out.payload);
    ck_assert_int_eq(tl_queue_pop(&q, &out, 0), 1);
    ck_assert_ptr_eq(out.scan.matrices, P[0]);
    tl_proto_scan_free(&out.scan); /* the worker's part */
    zmq_msg_close(&out.payload);
    tl_queue_destroy(&q); /* frees P[1], still queued, and nothing of the popped slot */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("queue");
    TCase *t = tcase_create("queue");
    tcase_add_test(t, queue_order_full_and_wake);
    tcase_add_test(t, queue_blocking_is_lossless);
    tcase_add_test(t, queue_moves_scan_matrices);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
