/* engine_bench.h — benchmarks of an engine: its back-projection kernels on given slices,
 * the per-frame path, and the device's hardware rates. Part of the public API (gpu/engine.h
 * includes it at its end); bench.c implements it over the backend's bench operations.
 */
#ifndef TL_ENGINE_BENCH_H
#define TL_ENGINE_BENCH_H

#include "gpu/base/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_engine tl_engine;

/* Times every kernel able to serve these slices (reconstructing into internal buffers, no
 * host copies) as if the window were full: every slot, uniform angles over 180 degrees,
 * whatever the slots hold, so a new scan can be timed before its first frame. Writes at
 * most cap rows, sets *n to the count. */
tl_status tl_engine_bench(tl_engine *e, const int *ids, size_t nids, int reps, tl_bench_row *rows,
                          size_t cap, size_t *n);
/* The same for one kernel only (by name); TL_EINVAL for a name the backend has not,
 * TL_EUNSUPPORTED when the kernel cannot serve the slices (its stack not made, say). An
 * engine created with config.kernel set times only that kernel in tl_engine_bench too. */
tl_status tl_engine_bench_kernel(tl_engine *e, const int *ids, size_t nids, const char *kernel,
                                 int reps, tl_bench_row *row);

/* Runs the micro-benchmarks (a second or two on a GPU). TL_EUNSUPPORTED on backends
 * without them (the CPU). Writes at most cap rows, sets *n to the count. */
tl_status tl_engine_hw_rates(tl_engine *e, tl_hw_rate *out, size_t cap, size_t *n);
/* Times the per-frame path (upload from pinned host memory, convert, correct, filter,
 * store) for frame f, median of reps calls after warm-up. The frame is not kept. On an
 * engine spanning several devices (here and in tl_engine_bench) every device runs its share
 * at once and the time is the slowest one's: when the whole frame (job) is done. */
tl_status tl_engine_bench_store(tl_engine *e, const tl_frame *f, int reps, double *ms);

#ifdef __cplusplus
}
#endif
#endif
