/* hdf5.h — tomography scans in HDF5 files (libhdf5), read frame by frame, for `tomolive
 * recon` and `tomolive push --file`.
 *
 * Two layouts, recognised by their datasets:
 *   APS Data Exchange  /exchange/data (projections x rows x cols), /exchange/data_white
 *                      (flats), /exchange/data_dark (darks), /exchange/theta (one angle per
 *                      projection, degrees)
 *   NeXus NXtomo       /entry/data/data (or /entry/instrument/detector/data): every frame,
 *                      /entry/.../image_key per frame (0 projection, 1 flat, 2 dark, 3
 *                      invalid: skipped), /entry/sample/rotation_angle per frame (degrees)
 * A frame is read with a hyperslab of the 3-D dataset into the caller's buffer, never the
 * whole file. Samples come as they are stored when that is uint8/16/32 or float32 (and all
 * three kinds agree), else as float32 (HDF5 converts). Frames are numbered per kind, in
 * file order.
 *
 *   tl_hdf5_reader r; char err[256];
 *   if (tl_hdf5_open(&r, "scan.h5", err, sizeof err) != 0) ...
 *   r.count[TL_FRAME_PROJ], r.rows, r.cols, r.dtype, r.angles (radians, or NULL)
 *   tl_hdf5_read(&r, TL_FRAME_DARK, i, buf, err, sizeof err);
 *   tl_hdf5_close(&r);
 */
#ifndef TL_HDF5_H
#define TL_HDF5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/engine.h"

typedef enum { TL_HDF5_DATA_EXCHANGE = 0, TL_HDF5_NXTOMO } tl_hdf5_layout;

typedef struct {
    char path[1024];
    tl_hdf5_layout layout;
    int64_t file;    /* hid_t */
    int64_t dset[3]; /* by tl_frame_kind; NXtomo: all the same dataset */
    int64_t memtype; /* the HDF5 type frames are read as */
    uint32_t rows, cols;
    tl_dtype dtype;
    uint32_t count[3];   /* frames per kind */
    uint32_t *frames[3]; /* NXtomo: each kind's frame numbers in the dataset */
    double *angles;      /* per projection, radians; NULL when the file has none */
} tl_hdf5_reader;

/* Whether path looks like HDF5: its signature at offset 0, 512, 1024 or 2048, or (for a
 * file that does not exist yet) a .h5/.hdf5/.hdf/.nxs/.cxi name. */
bool tl_hdf5_is_hdf5(const char *path);

int tl_hdf5_open(tl_hdf5_reader *r, const char *path, char *err, size_t errlen);
/* Frame i (0-based, of kind) into buf: rows x cols samples of r->dtype. */
int tl_hdf5_read(tl_hdf5_reader *r, tl_frame_kind kind, uint32_t i, void *buf, char *err,
                 size_t errlen);
/* Rows row0 .. row0+nrows-1 of frames first .. first+n-1 (of kind) into buf, frame after
 * frame (n x nrows x cols samples): one hyperslab per run of consecutive frames in the
 * file, so a band of many frames is one read (and only the chunks that hold it). */
int tl_hdf5_read_band(tl_hdf5_reader *r, tl_frame_kind kind, uint32_t first, uint32_t n,
                      uint32_t row0, uint32_t nrows, void *buf, char *err, size_t errlen);
/* The height of the projections' chunks (what one read of a row band costs at least);
 * 0 when the dataset is contiguous. */
uint32_t tl_hdf5_chunk_rows(const tl_hdf5_reader *r);
void tl_hdf5_close(tl_hdf5_reader *r);

#endif
