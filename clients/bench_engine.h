/* bench_engine.h — an engine holding a full window of phantom projections, for the
 * commands that time kernels (`tomolive bench`, `tomolive tune`).
 *
 * The projections are float32 line integrals of the Shepp-Logan phantom (no -log, so the
 * preprocessing is not what is timed), uniform over 180 degrees, on a detector of `rows`
 * rows and `size` columns.
 */
#ifndef TL_BENCH_ENGINE_H
#define TL_BENCH_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/engine.h"

/* Creates the engine in *e and, when ids is not NULL, one size x size row slice per
 * detector row into ids[0..rows-1]. Returns 0, or 1 after printing the error as "<me>:
 * message" (then *e is NULL). */
int tl_bench_engine(const char *me, tl_backend_kind backend, int device, uint32_t size,
                    uint32_t proj, uint32_t rows, tl_engine **e, int *ids);

/* What tables say about a kernel: its slices per pass (0) and parameters ("") when the
 * engine does not list it. */
void tl_bench_kernel_info(const tl_engine *e, const char *name, uint32_t *slices,
                          const char **params);

/* Prints the micro-benchmark table of tl_engine_hw_rates (name | value | unit). Returns 0
 * (printed), 1 after printing the error as "<me>: message", or 0 with *unsupported set
 * (printing nothing) on a backend without micro-benchmarks. */
int tl_bench_print_rates(const char *me, tl_engine *e, bool *unsupported);

#endif
