/* framepool.c — see framepool.h. */
#include <config.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/framepool.h"

#define POOL_KEEP 64 /* free buffers kept for reuse: the queue rarely holds more frames */

typedef struct entry {
    tl_framepool *pool;
    struct entry *next;
    void *buf;
    size_t cap;
    zmq_msg_t keep; /* a wrapped message, while wrapped */
    bool wrapped;
} entry;

struct tl_framepool {
    pthread_mutex_t mu;
    entry *free;
    size_t nfree, live;
    bool dropped;
};

tl_framepool *tl_framepool_new(void)
{
    tl_framepool *p = calloc(1, sizeof *p);
    if (p)
        pthread_mutex_init(&p->mu, NULL);
    return p;
}

static void destroy_entry(entry *e)
{
    free(e->buf);
    free(e);
}

static void destroy_pool(tl_framepool *p)
{
    while (p->free) {
        entry *e = p->free;
        p->free = e->next;
        destroy_entry(e);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* ZeroMQ's free function: runs on whichever thread closes the payload (the worker). */
static void give_back(void *data, void *hint)
{
    (void)data;
    entry *e = hint;
    tl_framepool *p = e->pool;
    if (e->wrapped) {
        zmq_msg_close(&e->keep);
        e->wrapped = false;
    }
    pthread_mutex_lock(&p->mu);
    p->live--;
    bool keep = !p->dropped && p->nfree < POOL_KEEP;
    if (keep) {
        e->next = p->free;
        p->free = e;
        p->nfree++;
    }
    bool last = p->dropped && p->live == 0;
    pthread_mutex_unlock(&p->mu);
    if (!keep)
        destroy_entry(e);
    if (last)
        destroy_pool(p);
}

void tl_framepool_drop(tl_framepool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->dropped = true;
    bool last = p->live == 0;
    pthread_mutex_unlock(&p->mu);
    if (last)
        destroy_pool(p);
}

size_t tl_framepool_live(tl_framepool *p)
{
    pthread_mutex_lock(&p->mu);
    size_t n = p->live;
    pthread_mutex_unlock(&p->mu);
    return n;
}

/* An entry, preferably one whose buffer holds n bytes already. */
static entry *take(tl_framepool *p, size_t n)
{
    pthread_mutex_lock(&p->mu);
    entry **pp = &p->free, *e = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->cap >= n)
            break;
    if (!*pp)
        pp = &p->free;
    if (*pp) {
        e = *pp;
        *pp = e->next;
        p->nfree--;
    }
    p->live++;
    pthread_mutex_unlock(&p->mu);
    if (!e && (e = calloc(1, sizeof *e)) != NULL)
        e->pool = p;
    if (!e) {
        pthread_mutex_lock(&p->mu);
        p->live--;
        pthread_mutex_unlock(&p->mu);
    }
    return e;
}

void *tl_framepool_payload(tl_framepool *p, size_t n, zmq_msg_t *payload)
{
    entry *e = take(p, n);
    if (!e)
        return NULL;
    if (e->cap < n) { /* grows only while the frame size is new */
        free(e->buf);
        e->cap = 0;
        e->buf = malloc(n ? n : 1);
        if (e->buf)
            e->cap = n;
    }
    zmq_msg_close(payload);
    if (!e->buf || zmq_msg_init_data(payload, e->buf, n, give_back, e) != 0) {
        zmq_msg_init(payload);
        give_back(NULL, e);
        return NULL;
    }
    return e->buf;
}

int tl_framepool_wrap(tl_framepool *p, zmq_msg_t *msg, const void *data, size_t n,
                      zmq_msg_t *payload)
{
    entry *e = take(p, 0);
    if (!e)
        return -1;
    size_t off = (size_t)((const char *)data - (const char *)zmq_msg_data(msg));
    zmq_msg_init(&e->keep);
    zmq_msg_move(&e->keep, msg);
    e->wrapped = true;
    /* a very small message lives inside the zmq_msg_t itself, and moved with it */
    void *moved = (char *)zmq_msg_data(&e->keep) + off;
    zmq_msg_close(payload);
    if (zmq_msg_init_data(payload, moved, n, give_back, e) != 0) {
        zmq_msg_init(payload);
        zmq_msg_move(msg, &e->keep); /* untouched for the caller */
        e->wrapped = false;
        give_back(NULL, e);
        return -1;
    }
    return 0;
}
