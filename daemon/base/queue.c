/* queue.c — see queue.h. A ring of pre-initialised items behind one mutex: the ingest and
 * worker threads each touch it once per frame, far below contention. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/base/queue.h"

int tl_queue_init(tl_queue *q, uint32_t cap)
{
    memset(q, 0, sizeof *q);
    q->slots = calloc(cap, sizeof *q->slots);
    if (!q->slots)
        return -1;
    for (uint32_t i = 0; i < cap; i++)
        zmq_msg_init(&q->slots[i].payload);
    q->cap = cap;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    return 0;
}

void tl_queue_destroy(tl_queue *q)
{
    if (!q->slots)
        return;
    for (uint32_t i = 0; i < q->cap; i++) {
        zmq_msg_close(&q->slots[i].payload);
        if (q->slots[i].type == TL_MSG_SCAN) /* NULL once popped (move_item) */
            tl_proto_scan_free(&q->slots[i].scan);
    }
    free(q->slots);
    q->slots = NULL;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
}

static void deadline(struct timespec *ts, double seconds)
{
    clock_gettime(CLOCK_REALTIME, ts); /* pthread_cond_timedwait's default clock */
    long ns = ts->tv_nsec + (long)((seconds - (long)seconds) * 1e9);
    ts->tv_sec += (time_t)seconds + ns / 1000000000L;
    ts->tv_nsec = ns % 1000000000L;
}

/* Copies everything before the payload, then moves the payload (never memcpy a zmq_msg_t). */
static void move_item(tl_item *dst, tl_item *src)
{
    memcpy(dst, src, offsetof(tl_item, payload));
    zmq_msg_move(&dst->payload, &src->payload);
    if (src->type == TL_MSG_SCAN) /* a scan's matrices move too: one owner at a time */
        src->scan.matrices = NULL;
}

int tl_queue_push(tl_queue *q, tl_item *item, bool block, const atomic_bool *stop)
{
    pthread_mutex_lock(&q->mu);
    while (q->count == q->cap) {
        if (!block || (stop && atomic_load(stop))) {
            pthread_mutex_unlock(&q->mu);
            return 0;
        }
        struct timespec ts;
        deadline(&ts, 0.1); /* re-check the stop flag now and then */
        pthread_cond_timedwait(&q->not_full, &q->mu, &ts);
    }
    move_item(&q->slots[(q->head + q->count) % q->cap], item);
    q->count++;
    if (q->count > q->high)
        q->high = q->count;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return 1;
}

int tl_queue_pop(tl_queue *q, tl_item *out, double timeout)
{
    pthread_mutex_lock(&q->mu);
    if (q->count == 0 && !q->wake && timeout > 0) {
        struct timespec ts;
        deadline(&ts, timeout);
        while (q->count == 0 && !q->wake) {
            if (pthread_cond_timedwait(&q->not_empty, &q->mu, &ts) == ETIMEDOUT)
                break;
        }
    }
    q->wake = false;
    if (q->count == 0) {
        pthread_mutex_unlock(&q->mu);
        return 0;
    }
    move_item(out, &q->slots[q->head]);
    q->head = (q->head + 1) % q->cap;
    q->count--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    return 1;
}

void tl_queue_wake(tl_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->wake = true;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

uint32_t tl_queue_depth(tl_queue *q)
{
    pthread_mutex_lock(&q->mu);
    uint32_t n = q->count;
    pthread_mutex_unlock(&q->mu);
    return n;
}

uint32_t tl_queue_high(tl_queue *q)
{
    pthread_mutex_lock(&q->mu);
    uint32_t n = q->high;
    pthread_mutex_unlock(&q->mu);
    return n;
}
