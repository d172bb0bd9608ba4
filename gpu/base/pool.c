/* pool.c — see pool.h. Jobs are handed out through one atomic counter, so threads that
 * finish early take more (rows near the edge of a slice are cheaper than the middle).
 * A generation number tells sleeping workers that a new batch has started.
 *
 * Waking a sleeping thread costs tens of microseconds (a futex round and the scheduler),
 * a large part of one GPU's share of a frame on two GPUs (~60 us). A pool given a spin time
 * (tl_pool_set_spin) therefore watches the generation, and the caller the count of busy
 * workers, for that long before sleeping on the condition variables: batches that come
 * back to back start and end without a system call. The spin is bounded, so an idle pool
 * sleeps as before. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "gpu/base/clock.h"
#include "gpu/base/pool.h"

struct tl_pool {
    int size;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    atomic_ulong generation;
    bool quit;
    _Atomic uint64_t spin_ns; /* how long to watch for work or completion before sleeping */
    /* the current batch */
    tl_pool_fn fn;
    void *ctx;
    size_t njobs;
    atomic_size_t next;
    atomic_ulong active; /* workers still inside the batch */
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

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins while (*word == value) == while_equal, for at most the pool's spin time. */
static void spin(tl_pool *p, const atomic_ulong *word, unsigned long value, bool while_equal)
{
    uint64_t ns = atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    if (!ns)
        return;
    uint64_t end = tl_clock_ns() + ns;
    for (unsigned i = 1; (atomic_load(word) == value) == while_equal; i++) {
        cpu_relax();
        if (i % 64 == 0 && tl_clock_ns() > end)
            return;
    }
}

static void *worker(void *arg)
{
    worker_arg *wa = arg;
    tl_pool *p = wa->pool;
    int id = wa->id;
    free(wa);
    unsigned long seen = 0;
    for (;;) {
        spin(p, &p->generation, seen, true); /* until the next batch */
        pthread_mutex_lock(&p->mu);
        while (!p->quit && atomic_load(&p->generation) == seen)
            pthread_cond_wait(&p->start, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = atomic_load(&p->generation);
        pthread_mutex_unlock(&p->mu);
        work(p, id);
        /* under the lock, so that a caller about to sleep cannot miss the signal */
        pthread_mutex_lock(&p->mu);
        if (atomic_fetch_sub(&p->active, 1) == 1)
            pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
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

void tl_pool_set_spin(tl_pool *p, uint64_t ns)
{
    atomic_store_explicit(&p->spin_ns, ns, memory_order_relaxed);
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
    atomic_store(&p->active, (unsigned long)p->size - 1);
    /* after the batch's fields: a spinning worker reads them as soon as it sees this */
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    spin(p, &p->active, 0, false); /* until every worker is done */
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->active) > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
