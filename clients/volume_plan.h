/* volume_plan.h — how a whole volume is cut into z-slabs so that it fits the GPU and the
 * host (seed 002's out-of-core decomposition), for `tomolive recon` and `bench --volume`.
 *
 * A pure function of the problem and the two budgets: no device, no files. The caller
 * says what an engine of h detector rows costs on the device (engine_bytes: in practice
 * tl_engine_estimate), and the planner picks the tallest slab that fits both budgets:
 *   device  engine(h) + batch x size^2 x 4      (the window of the slab's rows, filtered,
 *                                                 plus the device buffer of one batch of
 *                                                 slices the engine copies back)
 *   host    2 x (darks + flats + projections) x h x cols x in_sample   (input, double-buffered)
 *         + 2 x h x size^2 x 4                                        (slabs, double-buffered)
 *         + writer_bytes                   (the output's buffers: converted and deflated slices)
 * Rule: the tallest h that fits, a multiple of the reader's granularity (read_rows: an
 * HDF5 chunk's height) where it can be, and, unless the caller fixes h, at most
 * rows / TL_VOLUME_MIN_SLABS, so reading slab k+1 and writing slab k-1 overlap the GPU
 * work on slab k with only 1/16 of the reading and writing left outside the overlap, and
 * the pinned buffers (pinning costs ~0.5 s per GiB) stay small: on the H100 host, 2048
 * projections of 2048^2 into 2048^3 took 2.3 s less to set up and 1.1 s less to run with
 * 16 slabs of 128 rows than with 8 of 256 (BENCHMARKS.md §7).
 *
 * Where filtered projections live: parallel beam maps slice z to detector row z, so a
 * slab's rows are its own and no row is needed by two slabs: every projection row is read,
 * uploaded and filtered once and stays on the GPU for its slab (TL_VOLUME_FILTERED_GPU).
 * Whole frames (frame_rows > 0): per-frame corrections that see neighbouring rows (dezinger:
 * a 3 x 3 median; Paganin: a 2-D transform of the frame) need every detector row in the
 * engine, so the engine holds whole frames, filled once from reads of chunk_frames frames,
 * and the slabs only cut the output: device = engine(frame_rows) + batch x size^2 x 4,
 * host = chunk_frames x frame_rows x cols x in_sample + the slab terms above.
 * Cone beam: every slice reads rows above and below its own. Without those corrections
 * the caller gives both frame_rows and band_rows (volume_bands.h: the detector rows a slab
 * of h slices reads, v = D z / w, seed-002-004.md §2): whole frames are planned when they
 * fit (each row read, uploaded and filtered once, the filtered frames kept on the GPU);
 * otherwise each slab's engine holds only its band, read and filtered again per slab
 * (TL_VOLUME_FILTERED_RECOMPUTE; bands of neighbouring slabs overlap, so rows are read
 * more than once: `passes` counts the mean), and the device and host terms above take
 * band_rows(h) rows where they take h. Keeping filtered rows in host memory between slabs
 * (TL_VOLUME_FILTERED_HOST) would need the engine to hand filtered rows out and take them
 * back; it does not, so the planner never picks it.
 *
 *   tl_volume_problem p = {...}; tl_volume_budget b = {gpu, host};
 *   tl_volume_plan plan; char err[256];
 *   if (tl_volume_plan_make(&p, &b, 0, &plan, err, sizeof err) != 0) ... (err: both numbers)
 *   tl_volume_plan_print(&plan, &p, &b, stdout);
 */
#ifndef TL_VOLUME_PLAN_H
#define TL_VOLUME_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TL_VOLUME_MIN_SLABS 16

typedef enum {
    TL_VOLUME_FILTERED_GPU = 0, /* filtered once, kept on the device for the slab */
    TL_VOLUME_FILTERED_HOST,    /* (cone beam) filtered once, kept in host memory */
    TL_VOLUME_FILTERED_RECOMPUTE /* (cone beam) re-read and re-filtered per slab */
} tl_volume_filtered;

typedef struct {
    uint32_t projections, darks, flats;
    uint32_t rows;     /* detector rows to reconstruct (= volume height, parallel beam) */
    uint32_t cols;     /* detector columns */
    uint32_t size;     /* slices are size x size */
    size_t in_sample;  /* bytes per input sample as the engine takes it */
    size_t out_sample; /* bytes per voxel in the output file */
    size_t writer_bytes; /* host bytes of the output's own buffers
                            (tl_volume_output_buffer_bytes; 0: no output) */
    uint32_t read_rows; /* the reader's row granularity (HDF5 chunk height); 0 or 1: any */
    uint32_t cap_rows;  /* > 0: the rows the overlap rule divides (the tallest slab is
                           cap_rows / TL_VOLUME_MIN_SLABS, at most rows): a grid rank's
                           part gives the whole volume's, so small parts do not make
                           short slabs; 0: rows */
    uint32_t frame_rows;   /* > 0: whole frames of this many rows in the engine (above) */
    uint32_t chunk_frames; /* ... read and submitted this many frames at a time */
    /* cone beam: the engine's rows for slabs of h slices (above); NULL: h */
    uint32_t (*band_rows)(void *ctx, uint32_t h);
    void *band_ctx;
    /* device bytes of an engine holding `rows` detector rows of every projection */
    size_t (*engine_bytes)(void *ctx, uint32_t rows);
    void *ctx;
} tl_volume_problem;

typedef struct {
    size_t gpu, host; /* bytes */
} tl_volume_budget;

typedef struct {
    uint32_t slab_rows; /* h: rows per slab (the last may be shorter) */
    uint32_t slabs;
    uint32_t last_rows; /* rows of the last slab */
    uint32_t batch;     /* slices per reconstruction call */
    double passes;      /* passes over the input: 1 (each row read once), more with bands */
    tl_volume_filtered filtered;
    bool whole;           /* the engine holds whole frames (frame_rows), filled once */
    uint32_t engine_rows; /* detector rows the engine holds: whole frames, a band or h */
    size_t gpu_bytes, host_bytes; /* at h */
    uint64_t bytes_read, bytes_uploaded, bytes_downloaded, bytes_written;
} tl_volume_plan;

/* The plan for the problem within the budgets; slab_rows > 0 fixes h (clamped to rows).
 * Returns 0, or -1 with a message naming what is needed and what the budget is. */
int tl_volume_plan_make(const tl_volume_problem *p, const tl_volume_budget *b, uint32_t slab_rows,
                        tl_volume_plan *out, char *err, size_t errlen);

/* Device and host bytes of a slab of h rows (the two sums above), with whole frames when
 * p->frame_rows is set, else bands when p->band_rows is. */
size_t tl_volume_plan_gpu_bytes(const tl_volume_problem *p, uint32_t h, uint32_t batch);
size_t tl_volume_plan_host_bytes(const tl_volume_problem *p, uint32_t h);
/* Slices per reconstruction call for slabs of h rows: about 1 GiB of slices, at most h. */
uint32_t tl_volume_plan_batch(const tl_volume_problem *p, uint32_t h);

const char *tl_volume_filtered_name(tl_volume_filtered f);

/* "8G", "512M", "1.5GiB", "1000000": bytes (K, M, G, T binary; "iB" or "B" may follow). */
bool tl_volume_parse_bytes(const char *s, size_t *out);
/* What a default budget keeps of free memory: all but 10% and 256 MiB. */
size_t tl_volume_less_margin(size_t free_bytes);

/* Prints the plan as a few "plan: ..." lines. */
void tl_volume_plan_print(const tl_volume_plan *plan, const tl_volume_problem *p,
                          const tl_volume_budget *b, FILE *f);

#endif
