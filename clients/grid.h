/* grid.h — `mpirun -n R*C tomolive recon --grid RxC`: seed 004's 2-D grid of MPI ranks,
 * one engine per rank, for volumes and scans that outgrow one host.
 *
 * Rank k sits at grid row k / C, column k % C.
 *   Rows split the volume: grid row r reconstructs the slices tl_engine_split_rows gives
 *       part r of R, and reads only the detector rows they need (parallel beam: those
 *       rows; cone beam: their band, volume_bands.h).
 *   Columns split the projections: column c back-projects part c of C of the pages, each
 *       weighed as a part of the whole scan (the window is the whole scan and the frame
 *       indices are global), so the C partial sub-volumes of a row sum to the volume one
 *       process makes. The sum is an MPI_Reduce over the row's C ranks into its column 0,
 *       slab by slab, from the pipeline's writer thread (volume_pipeline.h `combine`);
 *       column 0 writes that sub-volume.
 * iFDK also AllGathers filtered projections within a column, because its ranks read and
 * filter whole projections. Here no rank needs another's: the ramp filter runs along
 * detector rows and each rank filters the rows it reads, so filtering is not repeated
 * (cone-beam bands overlap by a few rows). The model (grid_model.h) says so.
 *
 * Threads: MPI_THREAD_SERIALIZED. The main thread calls before and after tl_volume_run, the
 * pipeline's writer thread during it, never two at once.
 * Failure: a rank that fails before the pipeline says so in tl_grid_agree, and every rank
 * then ends with status 1 (the failing one printed why); a rank that fails during it calls
 * tl_grid_abort, which ends the job; a rank that is killed makes mpirun end the job.
 *
 *   tl_grid g; if (tl_grid_start(&g, 2, 2, err, n) != 0) ...    (MPI_Init, communicators)
 *   ... each rank sets up its part; ok = tl_grid_agree(&g, true) ...
 *   job.combine = tl_grid_reduce; job.combine_ctx = &g;
 *   tl_grid_end(&g);                                             (MPI_Finalize)
 * Built without MPI (configure found none), tl_grid_start fails and says how to build it.
 */
#ifndef TL_GRID_H
#define TL_GRID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t rows, cols;        /* R x C */
    uint32_t row, col;          /* this rank's place */
    int rank, size;             /* in the job */
    int local_rank, local_size; /* among the ranks of this host */
    bool started;               /* MPI is initialised (and not yet finalised) */
    double reduce_s;            /* seconds reducing in tl_grid_reduce, summed */
    double wait_s;              /* ... and waiting for the row's other ranks, before it */
    void *comms;                /* the row's communicator (grid.c) */
} tl_grid;

/* "RxC" (also "R,C"), each 1 .. 65536. */
bool tl_grid_parse(const char *s, uint32_t *rows, uint32_t *cols);

/* MPI_Init_thread (SERIALIZED), checks that the job has R x C ranks and splits the
 * communicators. A failure is said in err and MPI is left started (tl_grid_end). */
int tl_grid_start(tl_grid *g, uint32_t rows, uint32_t cols, char *err, size_t errlen);

/* Whether every rank is ok (a collective: every rank calls it once, ok or not). */
bool tl_grid_agree(tl_grid *g, bool ok);

/* The pipeline's combine hook: sums the row's C slabs of n floats into column 0's slab.
 * A barrier of the row first, so that the wait for its slowest rank (wait_s) and the
 * reduction itself (reduce_s: what seed 004's model predicts) are timed apart. */
int tl_grid_reduce(void *grid, float *slab, size_t n, char *err, size_t errlen);

/* Rank 0's n doubles v, on every rank (a collective). */
void tl_grid_bcast(tl_grid *g, double *v, int n);

/* Column 0's v, on every rank of its grid row (a collective of the row). */
uint32_t tl_grid_row_bcast(tl_grid *g, uint32_t v);

/* The least v over this rank's grid row (a collective of the row). */
uint32_t tl_grid_row_min(tl_grid *g, uint32_t v);

/* Seconds of the slowest rank (on every rank): a collective. */
double tl_grid_max(tl_grid *g, double v);

/* Waits for every rank. */
void tl_grid_barrier(tl_grid *g);

/* Times one MPI_Reduce of `bytes` over a row (sum of floats into column 0), median of a
 * few: the model's reduce rate in bytes per second (every rank; a collective). */
double tl_grid_reduce_rate(tl_grid *g, size_t bytes);

/* Whether the MPI library can read device memory ("yes", "no", or "unknown"): reported,
 * not used, since the slabs are reduced from host memory. */
const char *tl_grid_cuda_aware(void);

/* Ends the whole job with status rc after printing why (never returns). */
void tl_grid_abort(tl_grid *g, int rc) __attribute__((noreturn));

/* MPI_Finalize (after a successful run, or after tl_grid_agree said no). */
void tl_grid_end(tl_grid *g);

#endif
