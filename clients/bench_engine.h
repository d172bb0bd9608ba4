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
#include <stddef.h>
#include <stdint.h>

#include "clients/cone_opts.h"
#include "gpu/engine.h"

/* Creates the engine in *e and, when ids is not NULL, one size x size row slice per
 * detector row into ids[0..rows-1]. Returns 0, or 1 after printing the error as "<me>:
 * message" (then *e is NULL). */
int tl_bench_engine(const char *me, tl_backend_kind backend, int device, uint32_t size,
                    uint32_t proj, uint32_t rows, tl_engine **e, int *ids);

/* The same for a circular cone-beam scan of geometry k (cone_opts.h, k->cone set and
 * checked), without slices: `rows` x `size` projections of the 3-D Shepp-Logan phantom
 * over a full turn into an engine of quality `fast` (so that it lists every cone-beam
 * kernel). */
int tl_bench_engine_cone(const char *me, tl_backend_kind backend, int device, uint32_t size,
                         uint32_t proj, uint32_t rows, const tl_cone_opts *k, tl_engine **e);

/* Submits projection k, rows x cols float32 line integrals li at angle theta (more: another
 * follows at once, engine.h). Returns 0, or 1 after printing the error as "<me>: message". */
int tl_bench_submit(const char *me, tl_engine *e, uint32_t k, double theta, uint32_t rows,
                    uint32_t cols, const float *li, bool more);

/* What tables say about a kernel: its slices per pass (0) and parameters ("") when the
 * engine does not list it. */
void tl_bench_kernel_info(const tl_engine *e, const char *name, uint32_t *slices,
                          const char **params);

/* The devices a benchmark runs on (--gpus): CUDA ordinals, or row partitions on the CPU
 * backend; n = 0 when not given. With two or more, the engine splits the detector rows
 * across them (engine.h, config.devices). */
typedef struct {
    uint32_t n;
    int dev[TL_ENGINE_MAX_DEVICES];
} tl_bench_gpus;

/* Parses a --gpus value: ordinals separated by commas ("0,1"; "0,0" is two partitions on
 * one GPU) or "all" (every CUDA device here). Returns 0, or the exit status (2 for a bad
 * list, 1 when "all" finds no device) after printing the error as "<me>: message". */
int tl_bench_parse_gpus(const char *me, const char *arg, tl_bench_gpus *g);
/* Sets the engine configuration to the first k devices of g (k = 1: one engine on it). */
void tl_bench_use_gpus(tl_engine_config *c, const tl_bench_gpus *g, uint32_t k);
/* "GPU 0", "GPUs 0,1" for the first k devices of g. */
void tl_bench_gpus_label(const tl_bench_gpus *g, uint32_t k, char *buf, size_t len);

/* Prints the micro-benchmark table of tl_engine_hw_rates (name | value | unit). Returns 0
 * (printed), 1 after printing the error as "<me>: message", or 0 with *unsupported set
 * (printing nothing) on a backend without micro-benchmarks. */
int tl_bench_print_rates(const char *me, tl_engine *e, bool *unsupported);

#endif
