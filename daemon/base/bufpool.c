/* bufpool.c — see bufpool.h. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/base/bufpool.h"

void tl_bufpool_init(tl_bufpool *p, size_t max_free, tl_backend_kind memory)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    p->max_free = max_free;
    p->memory = memory;
}

/* Frees b's memory; the caller has taken it out of the accounts (forget). */
static void release(tl_slicebuf *b)
{
    tl_host_free(b->pool->memory, b->data);
    free(b);
}

/* Takes b out of the pool's accounts (lock held). */
static void forget(tl_bufpool *p, const tl_slicebuf *b)
{
    p->buffers--;
    p->bytes -= b->cap * sizeof(float);
}

void tl_bufpool_destroy(tl_bufpool *p)
{
    while (p->free) {
        tl_slicebuf *b = p->free;
        p->free = b->next;
        forget(p, b);
        release(b);
    }
    pthread_mutex_destroy(&p->mu);
}

/* Takes the smallest kept buffer of at least n floats out of the free list (lock held);
 * NULL when none is large enough. */
static tl_slicebuf *take_best_fit(tl_bufpool *p, size_t n)
{
    tl_slicebuf **best = NULL;
    for (tl_slicebuf **pp = &p->free; *pp; pp = &(*pp)->next)
        if ((*pp)->cap >= n && (!best || (*pp)->cap < (*best)->cap))
            best = pp;
    if (!best)
        return NULL;
    tl_slicebuf *b = *best;
    *best = b->next;
    p->nfree--;
    return b;
}

/* A new buffer of n floats, counted in the pool's accounts; NULL (p->error says why). */
static tl_slicebuf *allocate(tl_bufpool *p, size_t n)
{
    tl_slicebuf *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(p->error, sizeof p->error, "out of host memory");
        return NULL;
    }
    b->pool = p;
    if (n > 0) {
        void *d;
        if (tl_host_alloc(p->memory, n * sizeof(float), &d, p->error, sizeof p->error) != TL_OK) {
            free(b);
            return NULL;
        }
        b->data = d;
        b->cap = n;
    }
    pthread_mutex_lock(&p->mu);
    p->buffers++;
    p->bytes += b->cap * sizeof(float);
    pthread_mutex_unlock(&p->mu);
    return b;
}

tl_slicebuf *tl_bufpool_get(tl_bufpool *p, size_t n)
{
    pthread_mutex_lock(&p->mu);
    tl_slicebuf *b = take_best_fit(p, n);
    p->live++;
    pthread_mutex_unlock(&p->mu);
    if (!b && !(b = allocate(p, n))) {
        pthread_mutex_lock(&p->mu);
        p->live--;
        pthread_mutex_unlock(&p->mu);
        return NULL;
    }
    b->next = NULL;
    b->unsent = 0;
    b->shown = b->counted = false;
    b->taken = true;
    atomic_store(&b->holders, 1);
    return b;
}

void tl_bufpool_hold(tl_slicebuf *b)
{
    atomic_fetch_add(&b->holders, 1);
}

void tl_bufpool_put(tl_slicebuf *b)
{
    if (atomic_fetch_sub(&b->holders, 1) > 1)
        return; /* someone else still holds it */
    tl_bufpool *p = b->pool;
    pthread_mutex_lock(&p->mu);
    p->live--;
    if (p->nfree < p->max_free) {
        b->next = p->free;
        p->free = b;
        p->nfree++;
        b = NULL;
    } else {
        forget(p, b);
    }
    pthread_mutex_unlock(&p->mu);
    if (b)
        release(b);
}

size_t tl_bufpool_live(tl_bufpool *p)
{
    pthread_mutex_lock(&p->mu);
    size_t n = p->live;
    pthread_mutex_unlock(&p->mu);
    return n;
}

size_t tl_bufpool_trim(tl_bufpool *p)
{
    tl_slicebuf *idle = NULL; /* freed after the lock: freeing pinned memory takes a while */
    size_t n = 0;
    pthread_mutex_lock(&p->mu);
    for (tl_slicebuf **pp = &p->free; *pp;) {
        tl_slicebuf *b = *pp;
        if (b->taken) {
            b->taken = false;
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        p->nfree--;
        forget(p, b);
        b->next = idle;
        idle = b;
        n++;
    }
    pthread_mutex_unlock(&p->mu);
    while (idle) {
        tl_slicebuf *b = idle;
        idle = b->next;
        release(b);
    }
    return n;
}

void tl_bufpool_usage(tl_bufpool *p, size_t *buffers, size_t *bytes)
{
    pthread_mutex_lock(&p->mu);
    *buffers = p->buffers;
    *bytes = p->bytes;
    pthread_mutex_unlock(&p->mu);
}

void tl_bufpool_zmq_free(void *data, void *hint)
{
    (void)data;
    tl_bufpool_put(hint);
}
