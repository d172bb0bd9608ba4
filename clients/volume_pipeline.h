/* volume_pipeline.h — a whole volume, slab by slab, with reading, GPU work and writing
 * overlapped (seed 002's pipeline, parallel beam), for `tomolive recon` and `bench --volume`.
 *
 * Three threads joined by two double buffers:
 *   reader  reads slab k+1's detector-row band of every dark, flat and projection from the
 *           source, a chunk of frames per read, into input buffer (k+1) % 2
 *   engine  (the calling thread) resets the engine, submits slab k's frames from input
 *           buffer k % 2 (upload, correction, filter: each row once) and back-projects its
 *           rows into output buffer k % 2, a batch of slices per call
 *   writer  writes slab k-1 from output buffer (k-1) % 2 and records it as done
 * so reading slab k+1 and writing slab k-1 overlap the GPU work on slab k. Every buffer is
 * allocated once, before the first slab (pinned for the CUDA backend: tl_host_alloc), and
 * the engine is created once for slabs of plan.slab_rows rows: a shorter last slab is
 * submitted with the rows past its end left over (they are reconstructed by nobody; a
 * parallel-beam row is its own sinogram). Each slab starts from an empty window
 * (tl_engine_reset), so slab edges see exactly what the in-core run sees: no seams.
 *
 * Per-frame corrections (gpu/base/types.h, tl_corrections):
 *   whole_frames (dezinger, Paganin: they see neighbouring rows or the whole frame): the
 *           engine holds every detector row (engine.rows = the frame's) and is filled once,
 *           before the slabs, TL_VOLUME_READ_FRAMES whole frames per read; the slabs then
 *           only cut the output (slice z = row0 + z0 + i of the one window): the same
 *           window for every slab, so no seams and no halo to get right. No reader thread.
 *   rings   per detector row (a column profile, filtered across the row's columns), so a
 *           row band works as it is; but the profile outlives tl_engine_reset, so each slab
 *           gets a new engine. The rebuild decision (an estimate that moved by more than
 *           the tolerance somewhere) is taken over the engine's rows: a slab may skip one
 *           that a taller engine makes (differences below the tolerance; none at 0).
 *   bands   (cone beam, when whole frames do not fit the GPU) each slab's slices read a
 *           band of detector rows a little taller than the slab (volume_bands.h): the
 *           reader reads that band of every frame, and each slab gets a new engine of
 *           the band's rows, its geometry re-based to the band (tl_engine_config_band);
 *           rows shared by neighbouring bands are read and filtered once per slab.
 *   centre  tl_volume_center estimates it once, before the run, from a band of rows (whole
 *           frames with whole_frames); the caller puts it in engine.center.
 *
 * Stopping: *stop (set by a SIGINT handler) is polled between reads, frames and batches;
 * the slab in flight is dropped, what the writer has recorded stays (resumable).
 */
#ifndef TL_VOLUME_PIPELINE_H
#define TL_VOLUME_PIPELINE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clients/volume_bands.h"
#include "clients/volume_output.h"
#include "clients/volume_plan.h"
#include "clients/volume_progress.h"
#include "gpu/engine.h"

#define TL_VOLUME_READ_FRAMES 64 /* frames per read call, at most */

/* Reads rows [row0, row0 + nrows) of frames [first, first + n) of a kind, frame after frame,
 * in the engine's dtype. Called from the reader thread only. */
typedef int (*tl_volume_read_fn)(void *ctx, tl_frame_kind kind, uint32_t first, uint32_t n,
                                 uint32_t row0, uint32_t nrows, void *buf, char *err,
                                 size_t errlen);

typedef struct {
    uint32_t count[3];     /* frames per kind (tl_frame_kind) */
    tl_volume_read_fn read;
    void *ctx;
    const double *angles;    /* per projection, radians */
    const uint64_t *indices; /* per projection, or NULL: 0 .. n-1 */
    uint32_t row0;           /* detector row of volume slice 0 */
    uint32_t rows;           /* the volume's height */
    uint32_t size;           /* slices of size x size */
    uint32_t first_row;      /* start here (resume): a slab boundary of this run */
    tl_engine_config engine; /* rows is set to plan.slab_rows, unless whole_frames */
    bool whole_frames;       /* the engine holds whole frames of engine.rows rows (above) */
    /* Cone beam without whole frames: each slab gets a new engine holding the
     * plan->engine_rows detector rows its slices read (volume_bands.h), engine.rows being
     * the whole detector's; NULL: parallel beam's slabs of rows. */
    const tl_volume_bands *bands;
    const tl_volume_plan *plan;
    /* NULL: FBP; else by tl_engine_iterate with these options: parallel beam slice by
     * slice (engine.filter none, or, with engine.keep_measurements, each slice starts from
     * its FBP), cone beam (whole frames, keep_measurements) the whole volume as one
     * problem, solved before the first slab (from its FDK unless engine.filter is none) */
    const tl_iter_options *iterative;
    /* Partial slabs of several processes summed before they are written (recon --grid,
     * grid.h): called by the writer thread for each slab in order, count floats; NULL:
     * none. */
    int (*combine)(void *ctx, float *slab, size_t count, char *err, size_t errlen);
    void *combine_ctx;
    tl_volume_output *out; /* NULL: slabs are discarded (benchmarks; a grid's other
                                columns, after combine) */
    tl_progress_mode progress;
    volatile sig_atomic_t *stop;
    bool verbose;
} tl_volume_job;

#define TL_VOLUME_CURVE 256 /* residuals kept of the middle row's iterations, at most */

/* What the iterative slices did (job->iterative): iterations run per slice, the final
 * relative residual over the slices, and the middle row's residual after each iteration. */
typedef struct {
    uint32_t slices, min_iterations, max_iterations;
    double residual_sum, residual_max;
    uint32_t middle_row, ncurve;
    double curve[TL_VOLUME_CURVE];
} tl_volume_iterative;

/* Busy seconds of each stage, summed over slabs, and the wall time. */
typedef struct {
    double read, submit, backproject, write, wall, setup;
    uint64_t bytes_read, bytes_written;
    uint32_t slabs, rows;
    char kernel[48];
    char device[160];
    tl_volume_iterative iterative;
} tl_volume_times;

typedef enum { TL_VOLUME_DONE = 0, TL_VOLUME_FAILED, TL_VOLUME_STOPPED } tl_volume_result;

/* The planner's engine cost (volume_plan.h engine_bytes, ctx a tl_volume_engine_cost):
 * tl_engine_estimate of the configuration with `rows` rows; the first failure is kept in
 * why (and the cost is then too large for any budget). */
typedef struct {
    tl_engine_config c;
    bool failed;
    char why[512];
} tl_volume_engine_cost;
size_t tl_volume_engine_bytes(void *ctx, uint32_t rows);

/* The host's MemAvailable (/proc/meminfo), bytes; 0 if unknown. */
size_t tl_volume_host_available(void);

/* The centre of rotation from opposite projections (gpu/center.c), from detector rows
 * [row0, row0 + rows) (whole frames with job->whole_frames), through an engine of its own,
 * before the run; 0, or -1 with err. The job's engine.center is not changed. */
int tl_volume_center(const tl_volume_job *job, uint32_t row0, uint32_t rows,
                     tl_center_estimate *out, char *err, size_t errlen);

tl_volume_result tl_volume_run(const tl_volume_job *job, tl_volume_times *t, char *err,
                               size_t errlen);

/* Prints the stage table: each stage's busy time and GB/s, the wall time, and the overlap
 * achieved (sum of stage times / wall time: 1 = nothing overlapped). */
void tl_volume_times_print(const tl_volume_times *t, FILE *f);

#endif
