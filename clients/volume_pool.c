/* volume_pool.c — see volume_pool.h. A job is published under the mutex (fn, ctx, ntasks,
 * the counter reset, job incremented), so a thread that sees the new job number sees the
 * job; the tasks are then taken from the atomic counter without the lock, and what they
 * did is the caller's once tl_vpool_wait has seen running reach 0 under the same mutex. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clients/volume_pool.h"

typedef struct {
    tl_vpool *p;
    unsigned worker;
} thread_arg;

static void *thread_main(void *arg)
{
    thread_arg a = *(thread_arg *)arg;
    free(arg);
    tl_vpool *p = a.p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->job == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->job;
        tl_vpool_fn fn = p->fn;
        void *ctx = p->ctx;
        uint32_t n = p->ntasks;
        pthread_mutex_unlock(&p->mu);
        for (uint32_t t; (t = atomic_fetch_add(&p->next, 1)) < n;)
            fn(ctx, t, a.worker);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0)
            pthread_cond_signal(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

unsigned tl_vpool_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN) - 2;
    return n < 2 ? 2 : n > 16 ? 16 : (unsigned)n;
}

int tl_vpool_start(tl_vpool *p, unsigned threads, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    atomic_init(&p->next, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->idle, NULL);
    if (threads < 1)
        threads = 1;
    if (!(p->tid = calloc(threads, sizeof *p->tid))) {
        snprintf(err, errlen, "out of memory for %u writer threads", threads);
        tl_vpool_stop(p);
        return -1;
    }
    /* the threads take no signal: the caller's thread handles them (recon's SIGINT), and
     * a handler run in a thread could only interrupt its work */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (unsigned i = 0; i < threads; i++) {
        thread_arg *a = malloc(sizeof *a);
        int e = a ? 0 : ENOMEM;
        if (a) {
            *a = (thread_arg){p, i};
            e = pthread_create(&p->tid[i], NULL, thread_main, a);
        }
        if (e != 0) {
            free(a);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            snprintf(err, errlen, "cannot start writer thread %u of %u: %s", i + 1, threads,
                     strerror(e));
            tl_vpool_stop(p);
            return -1;
        }
        p->threads++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return 0;
}

void tl_vpool_submit(tl_vpool *p, uint32_t ntasks, tl_vpool_fn fn, void *ctx)
{
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->ntasks = ntasks;
    atomic_store(&p->next, 0);
    p->running = p->threads;
    p->job++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
}

void tl_vpool_wait(tl_vpool *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->running > 0)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void tl_vpool_run(tl_vpool *p, uint32_t ntasks, tl_vpool_fn fn, void *ctx)
{
    tl_vpool_submit(p, ntasks, fn, ctx);
    tl_vpool_wait(p);
}

void tl_vpool_stop(tl_vpool *p)
{
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->threads; i++)
        pthread_join(p->tid[i], NULL);
    free(p->tid);
    p->tid = NULL;
    p->threads = 0;
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->mu);
}
