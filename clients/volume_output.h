/* volume_output.h — a reconstructed volume written slab by slab as each completes, and the
 * record of how far it got, so an interrupted run can resume (`tomolive recon --resume`).
 *
 * Three forms, chosen by the path:
 *   NAME.h5 (.hdf5, .nxs)  one chunked HDF5 dataset /volume [z, y, x], a chunk per slice,
 *                         float32, uint16 or float16 (an IEEE half type), optionally
 *                         deflate-compressed. uint16 stores round((v - offset) * scale)
 *                         clamped to 0 .. 65535; the dataset's attributes `scale` and
 *                         `offset` say so (v = stored / scale + offset).
 *                         Progress: the attribute tomolive_rows_done, rewritten after each
 *                         slab's data is flushed and synced (fdatasync), then flushed and
 *                         synced itself. Uncompressed chunks are allocated when the file is
 *                         created, so writing a slab never changes the file's metadata and a
 *                         killed run leaves a readable file.
 *   DIR/ (a directory, or a name ending in /)  a TIFF stack: DIR/slice_00000.tif, one
 *                         file per slice (BigTIFF when one would pass 4 GiB), float32 or
 *                         uint16. Progress: DIR/tomolive-progress, replaced atomically
 *                         (write, fsync, rename) after each slab's files are fsync'ed.
 *   anything else         one multi-page TIFF, a page per slice (the classic `recon`
 *                         output); not resumable.
 * The progress record also holds a description of the job (input, rows, size, centre,
 * filter, dtype); --resume refuses an output made by a different job.
 *
 * Speed (issue #22: the disk's, where the CPUs allow): the output has a pool of threads,
 * started at open (spec.threads, recon --write-threads; volume_pool.h), and buffers
 * allocated there too; a slab is cut into slices, its tasks (volume_slab.h). Each converts
 * its slice to the file's type (volume_convert.h: F16C / AVX where the CPU has them, bit
 * for bit the scalar definitions) and deflates it for a compressed file (zlib, as HDF5's
 * filter does); the calling thread writes the chunks whole (H5Dwrite_chunk) in slice order,
 * so libhdf5 is only ever called from it, and starts each one's writeback at once
 * (sync_file_range), keeping at most 128 MiB of written data waiting for the disk. A TIFF
 * stack's slices are written as files of their own, in parallel. The files are the same
 * whatever the thread count, and the same as the single-threaded writer's (spec.serial,
 * kept as the measure and the reference: bench --volume-write, tests). Syncs per slab:
 * HDF5 two (data, then the record); a TIFF stack one per slice file (in parallel), the
 * directory's, then the record's. HDF5 and the multi-page TIFF are synced at close too.
 *
 *   tl_volume_output o; if (tl_volume_output_open(&o, &spec, err, n) != 0) ...
 *   o.rows_done: where to start (0, or the resumed count)
 *   tl_volume_output_write(&o, z0, h, slab, err, n);   slab: h x size x size floats, z0 = rows_done
 *   tl_volume_output_close(&o, ok ? TL_OUTPUT_DONE : TL_OUTPUT_KEEP);
 * One thread calls; the output's own threads work only inside tl_volume_output_write.
 */
#ifndef TL_VOLUME_OUTPUT_H
#define TL_VOLUME_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clients/tiff.h"

typedef enum { TL_OUT_F32 = 0, TL_OUT_U16, TL_OUT_F16 } tl_out_dtype;
typedef enum { TL_OUT_HDF5 = 0, TL_OUT_TIFF_FILES, TL_OUT_TIFF_PAGES } tl_out_form;

bool tl_out_dtype_parse(const char *s, tl_out_dtype *out);
size_t tl_out_dtype_size(tl_out_dtype t);
tl_out_form tl_out_form_of(const char *path);

typedef struct {
    const char *path;
    uint32_t rows, size; /* the volume: rows slices of size x size */
    tl_out_dtype dtype;
    int deflate;         /* HDF5: 0 none, 1 .. 9 the level */
    bool have_range;     /* uint16: the value range to map onto 0 .. 65535; without it,
                            the first slab's minimum .. maximum */
    double lo, hi;
    const char *job;     /* one line describing the job */
    bool resume;
    unsigned threads;    /* the writer's threads (1 .. 64); 0: tl_vpool_default_threads() */
    bool serial;         /* the single-threaded writer of before (scalar conversion, an
                            H5Dwrite per slice, fsync): the baseline and the reference */
    /* A TIFF stack written by several processes (recon --grid, grid.h): this one's slices
     * are numbered from z_base in the file names, and its progress record is named
     * progress_name (NULL: tomolive-progress). */
    uint32_t z_base;
    const char *progress_name;
} tl_volume_output_spec;

typedef struct tl_vslab tl_vslab; /* the threads and their buffers (volume_slab.c) */

typedef struct {
    tl_volume_output_spec spec;
    tl_out_form form;
    uint32_t rows_done; /* durable rows, from the start */
    double scale, offset;
    bool scaled;        /* uint16 scale fixed */
    void *conv;         /* serial: one converted slice */
    int64_t file, dset; /* HDF5 */
    int fd;             /* HDF5: the file's descriptor (its syncs, writeback) */
    tl_tiff_writer pages;
    char progress[1100]; /* TIFF stack: the progress file */
    tl_vslab *slab;      /* not serial */
} tl_volume_output;

/* Host memory the output allocates for spec (its conversion and deflate buffers). */
size_t tl_volume_output_buffer_bytes(const tl_volume_output_spec *spec);

int tl_volume_output_open(tl_volume_output *o, const tl_volume_output_spec *spec, char *err,
                          size_t errlen);
/* Writes rows [z0, z0 + h) (z0 must be rows_done) and records them durably. */
int tl_volume_output_write(tl_volume_output *o, uint32_t z0, uint32_t h, const float *slab,
                           char *err, size_t errlen);

typedef enum {
    TL_OUTPUT_DONE = 0, /* complete (or finished writing) */
    TL_OUTPUT_KEEP,     /* stopped: keep what is durable, resumable where the form is */
    TL_OUTPUT_REMOVE    /* failed before anything useful: remove it */
} tl_output_end;
/* Closes; with DONE reports a failure to finish the file. */
int tl_volume_output_close(tl_volume_output *o, tl_output_end end, char *err, size_t errlen);

#endif
