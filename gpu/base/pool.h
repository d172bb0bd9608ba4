/* pool.h — a fixed pool of threads that runs "for each job in 0..n-1" in parallel.
 *
 * The CPU backend splits every frame (by detector row) and every reconstruction (by
 * output row) into jobs; the CUDA backend splits the copy of each host frame into its
 * pinned staging buffer. The calling thread works too and returns when all jobs are done.
 * Threads are created once per engine, so the per-frame path creates none.
 *
 *   tl_pool *p = tl_pool_create(0);          0 = one thread per core
 *   tl_pool_run(p, rows, do_row, ctx);       do_row(ctx, job, thread) with thread < size
 *
 * A pool that runs short batches back to back (one per frame) can be told to spin a
 * while between them instead of sleeping at once: tl_pool_set_spin(p, 50000).
 */
#ifndef TL_POOL_H
#define TL_POOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_pool tl_pool;
typedef void (*tl_pool_fn)(void *ctx, size_t job, int thread);

/* nthreads counts the caller; 0 = the number of online cores. NULL when out of memory or
 * when threads cannot be created. */
tl_pool *tl_pool_create(int nthreads);
void tl_pool_destroy(tl_pool *p);
int tl_pool_size(const tl_pool *p);
/* Threads watch for the next batch, and the caller for the end of its batch, for up to ns
 * before sleeping (0, the default: sleep at once). Set before the first tl_pool_run. */
void tl_pool_set_spin(tl_pool *p, uint64_t ns);
void tl_pool_run(tl_pool *p, size_t njobs, tl_pool_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
