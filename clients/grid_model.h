/* grid_model.h — seed 004's performance model (iFDK §4.2, Eqs. 8-19; seed-002-004.md §3.8)
 * of a `recon --grid` run (grid.h), from rates measured on the machine it runs on, printed
 * by `recon --grid --plan` and, with the measured stages beside it, by `recon --grid -v`.
 *
 * Work per rank is what its plan says (volume_plan.h): bytes read, bytes uploaded and
 * filtered, voxel updates, bytes reduced (grid columns > 1), bytes stored (column 0).
 * Rates come from a sample of the rank's own problem (tl_grid_calibrate): its first slab
 * from every projection (a slab's fixed costs, such as its copy back, weigh as in the run;
 * with whole frames, which are read and filtered once for all slabs, from the first
 * TL_GRID_SAMPLE_PROJ), the output discarded; one MPI_Reduce of a slab over its grid row;
 * and a slab written and synced beside the output. So there is no table of constants to
 * keep per machine; the sample costs one slab's time (about 1/16 of the run). Not in the
 * model: ranks that share a GPU slow each other down (the device time-slices their
 * contexts), which the concurrent samples see only in part.
 *
 * Each stage takes work / rate. The pipeline (volume_pipeline.h) overlaps three threads:
 * the reader (load), the engine (filter, then back projection, one device), the writer
 * (reduce, then store); so a rank takes
 *   T = max(load, filter + bp, reduce + store) + (their sum - that max) / slabs
 * (the slowest thread for every slab, the others for one: the pipeline filling and
 * draining), and the job the slowest rank's T. iFDK's AllGather of filtered projections
 * is 0 here: each rank filters the detector rows it reads (grid.h).
 */
#ifndef TL_GRID_MODEL_H
#define TL_GRID_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "clients/grid.h"
#include "clients/volume_pipeline.h"

#define TL_GRID_SAMPLE_PROJ 128 /* projections of a whole-frames sample, at most */

/* Rates: load (bytes handed to the engine), filter (upload + filter) and store in bytes/s,
 * bp in voxel updates/s, reduce in bytes/s; 0: not measured (no such stage on this rank).
 * sync: seconds of a small write and its sync (the output syncs per slab). */
typedef struct {
    double load, filter, bp, reduce, store, sync;
} tl_grid_rates;

/* A rank's work: bytes, bytes, updates, bytes, bytes; its slabs; the output's syncs. */
typedef struct {
    double load, filter, bp, reduce, store;
    uint32_t slabs, syncs;
} tl_grid_work;

/* Seconds per stage, and the run's; wait: measured only (the reductions' wait for the
 * row's slowest rank, which the model leaves to the slowest rank's own stages). */
typedef struct {
    double load, filter, allgather, bp, reduce, wait, store, total;
} tl_grid_stages;

/* The model of one rank (above). */
void tl_grid_model(const tl_grid_work *w, const tl_grid_rates *r, tl_grid_stages *out);

/* Measures this rank's rates on a sample of job (its plan, bands, engine) and the row's
 * reduction; writes the store probe beside `output` (NULL: the working directory). A
 * collective: every rank of g calls it. 0, or -1 with err. */
int tl_grid_calibrate(tl_grid *g, const tl_volume_job *job, const char *output, tl_grid_rates *r,
                      char *err, size_t errlen);

/* The job's stages: each the slowest rank's (a collective). */
void tl_grid_stages_max(tl_grid *g, const tl_grid_stages *mine, tl_grid_stages *out);

/* The measured stages of a run, from its times and the grid's reduction clocks. */
void tl_grid_stages_measured(const tl_volume_times *t, const tl_grid *g, tl_grid_stages *out);

/* The table: stage, rate, model seconds and, when measured is not NULL, measured seconds
 * and measured / model. */
void tl_grid_model_print(FILE *f, const tl_grid_rates *r, const tl_grid_stages *model,
                         const tl_grid_stages *measured);

#endif
