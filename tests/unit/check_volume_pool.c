/* check_volume_pool.c — the volume output's thread pool (clients/volume_pool.h): every task
 * of every job runs exactly once, on a worker the pool named; tasks of one job run at once
 * on different threads; submit returns before the tasks are done (the HDF5 writer works
 * between submit and wait); a pool is started and stopped with and without jobs.
 * The concurrency tests wait for a state (all tasks arrived; the caller's flag): a pool
 * that ran the tasks one after another, or inside submit, would hang them, and Check's
 * timeout fails them.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "clients/volume_pool.h"
#include "tests/testutil.h"

typedef struct {
    atomic_uint count[1000];
    unsigned threads;
    atomic_bool bad_worker;
} counts;

static void count_task(void *ctx, uint32_t task, unsigned worker)
{
    counts *c = ctx;
    atomic_fetch_add(&c->count[task], 1);
    if (worker >= c->threads)
        atomic_store(&c->bad_worker, true);
}

START_TEST(test_every_task_once)
{
    static counts c;
    char err[256];
    for (unsigned n = 1; n <= 5; n += 2) {
        tl_vpool p;
        ck_assert_int_eq(tl_vpool_start(&p, n, err, sizeof err), 0);
        ck_assert_uint_eq(p.threads, n);
        memset(&c, 0, sizeof c);
        c.threads = n;
        for (int job = 0; job < 60; job++)
            tl_vpool_run(&p, job % 3 == 0 ? 1000 : job % 3 == 1 ? 3 : 0, count_task, &c);
        for (int t = 0; t < 1000; t++)
            if (atomic_load(&c.count[t]) != (t < 3 ? 40u : 20u))
                ck_abort_msg("%u threads: task %d ran %u times", n, t,
                             atomic_load(&c.count[t]));
        ck_assert(!atomic_load(&c.bad_worker));
        tl_vpool_stop(&p);
    }
    tl_vpool p; /* no job at all */
    ck_assert_int_eq(tl_vpool_start(&p, 3, err, sizeof err), 0);
    tl_vpool_stop(&p);
    unsigned d = tl_vpool_default_threads();
    ck_assert(d >= 2 && d <= 16);
}
END_TEST

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned arrived, need;
    bool go;                /* the caller's flag, set after submit returned */
    unsigned long workers;  /* a bit per worker seen */
} meet;

/* Waits until `need` tasks are inside at once, then for the caller's flag. */
static void meet_task(void *ctx, uint32_t task, unsigned worker)
{
    (void)task;
    meet *m = ctx;
    pthread_mutex_lock(&m->mu);
    m->arrived++;
    m->workers |= 1ul << worker;
    pthread_cond_broadcast(&m->cv);
    while (m->arrived < m->need || !m->go)
        pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
}

START_TEST(test_concurrent_and_async)
{
    char err[256];
    tl_vpool p;
    ck_assert_int_eq(tl_vpool_start(&p, 4, err, sizeof err), 0);
    for (int round = 0; round < 20; round++) {
        meet m = {.need = 4};
        pthread_mutex_init(&m.mu, NULL);
        pthread_cond_init(&m.cv, NULL);
        tl_vpool_submit(&p, 4, meet_task, &m);
        /* submit returned: all four tasks meet while this thread is free to wait for it */
        pthread_mutex_lock(&m.mu);
        while (m.arrived < 4)
            pthread_cond_wait(&m.cv, &m.mu);
        m.go = true;
        pthread_cond_broadcast(&m.cv);
        pthread_mutex_unlock(&m.mu);
        tl_vpool_wait(&p);
        ck_assert_uint_eq(m.workers, 0xful); /* four tasks, four different threads */
        pthread_cond_destroy(&m.cv);
        pthread_mutex_destroy(&m.mu);
    }
    tl_vpool_stop(&p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("volume_pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_every_task_once);
    tcase_add_test(tc, test_concurrent_and_async);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
