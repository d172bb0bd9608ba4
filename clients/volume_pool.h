/* volume_pool.h — a fixed set of threads that run one job's tasks at a time, for the volume
 * output's per-slice work (conversion, deflate, TIFF files: volume_slab.c).
 *
 * The threads are created once, when the output is opened (tl_vpool_start), and sleep
 * between jobs: a slab costs no thread creation and no allocation. tl_vpool_submit hands
 * them tasks 0 .. ntasks-1 and returns at once; the threads take the tasks in increasing
 * order, one at a time (an atomic counter), so a task may wait for an earlier one's effect
 * (volume_slab.c's ring of slices relies on it). tl_vpool_wait returns when every task of
 * the job is done. Between the two the caller is free: the HDF5 writer writes the chunks
 * that the tasks prepare, in order, from its own thread. Each task knows its worker
 * (0 .. threads-1), so per-worker buffers need no lock.
 *
 *   tl_vpool p; if (tl_vpool_start(&p, 4, err, n) != 0) ...
 *   tl_vpool_submit(&p, h, fn, ctx); ... tl_vpool_wait(&p);   each task once: fn(ctx, t, worker)
 *   tl_vpool_run(&p, h, fn, ctx);                            the same, waiting
 *   tl_vpool_stop(&p);
 * One caller, one job at a time.
 */
#ifndef TL_VOLUME_POOL_H
#define TL_VOLUME_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void (*tl_vpool_fn)(void *ctx, uint32_t task, unsigned worker);

typedef struct {
    unsigned threads;
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t go, idle;
    uint64_t job;     /* jobs submitted: a thread waits for the next */
    unsigned running; /* threads not yet done with the current job */
    bool quit;
    tl_vpool_fn fn;
    void *ctx;
    uint32_t ntasks;
    atomic_uint next; /* the next task to take */
} tl_vpool;

/* What `recon --write-threads` defaults to: the online CPUs less two (the pipeline's
 * reader and engine threads), at least 2, at most 16. */
unsigned tl_vpool_default_threads(void);

/* Starts threads (>= 1) threads; -1 with a message if one cannot be created (none is left). */
int tl_vpool_start(tl_vpool *p, unsigned threads, char *err, size_t errlen);
void tl_vpool_submit(tl_vpool *p, uint32_t ntasks, tl_vpool_fn fn, void *ctx);
void tl_vpool_wait(tl_vpool *p);
void tl_vpool_run(tl_vpool *p, uint32_t ntasks, tl_vpool_fn fn, void *ctx);
void tl_vpool_stop(tl_vpool *p);

#endif
