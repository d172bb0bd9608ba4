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

static void release(tl_slicebuf *b)
{
    tl_host_free(b->pool->memory, b->data);
    free(b);
}

void tl_bufpool_destroy(tl_bufpool *p)
{
    while (p->free) {
        tl_slicebuf *b = p->free;
        p->free = b->next;
        release(b);
    }
    pthread_mutex_destroy(&p->mu);
}

tl_slicebuf *tl_bufpool_get(tl_bufpool *p, size_t n)
{
    pthread_mutex_lock(&p->mu);
    tl_slicebuf **pp = &p->free, *b = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->cap >= n) {
            b = *pp;
            *pp = b->next;
            p->nfree--;
            break;
        }
    if (!b && p->free) { /* none large enough: grow the first one */
        b = p->free;
        p->free = b->next;
        p->nfree--;
    }
    p->live++;
    pthread_mutex_unlock(&p->mu);
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b) {
            snprintf(p->error, sizeof p->error, "out of host memory");
            goto oom;
        }
        b->pool = p;
    }
    if (b->cap < n) { /* grown by a new allocation: the old pixels are not needed */
        tl_host_free(p->memory, b->data);
        b->data = NULL;
        b->cap = 0;
        void *d;
        if (tl_host_alloc(p->memory, n * sizeof(float), &d, p->error, sizeof p->error) != TL_OK) {
            release(b);
            goto oom;
        }
        b->data = d;
        b->cap = n;
    }
    b->next = NULL;
    b->unsent = 0;
    b->shown = b->counted = false;
    atomic_store(&b->holders, 1);
    return b;
oom:
    pthread_mutex_lock(&p->mu);
    p->live--;
    pthread_mutex_unlock(&p->mu);
    return NULL;
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

void tl_bufpool_zmq_free(void *data, void *hint)
{
    (void)data;
    tl_bufpool_put(hint);
}
