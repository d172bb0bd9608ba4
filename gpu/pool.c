/* pool.c — see pool.h. Jobs are handed out through one atomic counter, so threads that
 * finish early take more (rows near the edge of a slice are cheaper than the middle).
 * A generation number tells sleeping workers that a new batch has started. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "gpu/pool.h"

struct tl_pool {
    int size;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    unsigned long generation;
    bool quit;
    /* the current batch */
    tl_pool_fn fn;
    void *ctx;
    size_t njobs;
    atomic_size_t next;
    int active; /* workers still inside the batch */
};

typedef struct {
    tl_pool *pool;
    int id;
} worker_arg;

static void work(tl_pool *p, int id)
{
    for (;;) {
        size_t j = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (j >= p->njobs)
            return;
        p->fn(p->ctx, j, id);
    }
}

static void *worker(void *arg)
{
    worker_arg *wa = arg;
    tl_pool *p = wa->pool;
    int id = wa->id;
    free(wa);
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->start, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        work(p, id);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

tl_pool *tl_pool_create(int nthreads)
{
    if (nthreads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        nthreads = n > 0 ? (int)n : 1;
    }
    tl_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->size = 1;
    p->threads = calloc((size_t)nthreads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int i = 1; i < nthreads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) {
            wa->pool = p;
            wa->id = i;
        }
        if (!wa || pthread_create(&p->threads[i], NULL, worker, wa) != 0) {
            free(wa);
            tl_pool_destroy(p);
            return NULL;
        }
        p->size++;
    }
    return p;
}

void tl_pool_destroy(tl_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->size; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int tl_pool_size(const tl_pool *p)
{
    return p->size;
}

void tl_pool_run(tl_pool *p, size_t njobs, tl_pool_fn fn, void *ctx)
{
    if (p->size == 1 || njobs <= 1) {
        for (size_t j = 0; j < njobs; j++)
            fn(ctx, j, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->njobs = njobs;
    atomic_store(&p->next, 0);
    p->active = p->size - 1;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
