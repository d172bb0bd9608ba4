/* volume_slab.h — a slab's samples into the output's file, fast: the part of
 * volume_output.c that is about speed (volume_output.h, "Speed"). The durability order (the
 * syncs around the progress record) stays in volume_output.c.
 *
 * A slab is cut into its slices, the tasks of the output's pool (volume_pool.h, created
 * once by tl_vslab_start with spec.threads threads); every buffer is allocated there too.
 *   tl_vslab_ordered  HDF5 and the multi-page TIFF: the tasks convert (and deflate) slices
 *                     into a ring of slots; the calling thread takes them in slice order
 *                     and writes each whole (H5Dwrite_chunk; a TIFF page), then starts its
 *                     writeback and waits for that of the slices written 128 MiB earlier
 *                     (sync_file_range), so the page cache holds a bounded tail of dirty
 *                     data and the slab's sync finds most of it on disk. libhdf5 and libtiff
 *                     are only ever called from the calling thread. float32 without
 *                     deflate needs no task: its slices are written from the slab itself.
 *   tl_vslab_files    a TIFF stack: the tasks write a file per slice in parallel (each
 *                     converting into its own buffer), then sync them (fdatasync), also in
 *                     parallel: concurrent syncs share the file system's journal commits.
 *   tl_vslab_range    uint16 without a range: the finite minimum and maximum of a slab,
 *                     in parallel, the same as one scan.
 * The calls return 0, or -1 with the first failure in err; a failure stops the tasks that
 * follow it, and the call returns once no task runs.
 */
#ifndef TL_VOLUME_SLAB_H
#define TL_VOLUME_SLAB_H

#include "clients/volume_output.h"

/* The buffers tl_vslab_start allocates for spec. */
size_t tl_vslab_bytes(const tl_volume_output_spec *spec);
/* The threads the output runs for spec: spec->threads or tl_vpool_default_threads(). */
unsigned tl_vslab_threads(const tl_volume_output_spec *spec);

int tl_vslab_start(tl_volume_output *o, char *err, size_t errlen);
void tl_vslab_stop(tl_volume_output *o);

int tl_vslab_ordered(tl_volume_output *o, uint32_t z0, uint32_t h, const float *slab, char *err,
                     size_t errlen);
int tl_vslab_files(tl_volume_output *o, uint32_t z0, uint32_t h, const float *slab, char *err,
                   size_t errlen);
void tl_vslab_range(tl_volume_output *o, const float *slab, uint32_t h, float *lo, float *hi);

/* DIR/slice_00000.tif: slice z of a TIFF stack. */
void tl_vslab_path(const tl_volume_output *o, uint32_t z, char *buf, size_t n);

#endif
