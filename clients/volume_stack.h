/* volume_stack.h — frames of one kind (darks, flats or projections) from a file, read as
 * row bands of many frames at once, for `tomolive recon`.
 *
 * Three sources look alike: a multi-page TIFF (one page per frame), a TIFF stack (a
 * directory of single-page TIFFs, or a glob pattern such as 'scan/proj_*.tif', in name
 * order: one file per frame) and one kind of an HDF5 scan's frames (clients/hdf5.h). Every
 * frame's shape and sample type is checked when the stack is opened, so a bad file fails
 * before any work; reading a band touches only the strips, tiles or chunks that hold it,
 * never a whole file.
 *
 *   tl_volume_stack s; char err[512];
 *   if (tl_volume_stack_open(&s, "scan/", err, sizeof err) != 0) ...  s.frames, s.rows, ...
 *   tl_volume_stack_read(&s, first, n, row0, nrows, buf, err, sizeof err);
 *   tl_volume_stack_close(&s);
 * A stack is read by one thread at a time.
 */
#ifndef TL_VOLUME_STACK_H
#define TL_VOLUME_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clients/hdf5.h"
#include "clients/tiff.h"

typedef enum { TL_STACK_TIFF_PAGES = 0, TL_STACK_TIFF_FILES, TL_STACK_HDF5 } tl_stack_type;

typedef struct {
    tl_stack_type type;
    const char *path;     /* what was opened (names the stack in messages) */
    uint32_t frames, rows, cols;
    tl_dtype dtype;       /* samples as read */
    tl_tiff_reader tif;   /* the multi-page file, or the file of FILES open now */
    char **files;         /* FILES: one per frame, sorted */
    uint32_t open_file;   /* FILES: which one tif holds (frames: none) */
    tl_hdf5_reader *h5;   /* HDF5: the scan (not owned) */
    tl_frame_kind kind;   /* HDF5: which of its frames */
} tl_volume_stack;

/* Whether path names a TIFF stack rather than one file: a directory, or a glob pattern. */
bool tl_volume_stack_is_multi(const char *path);

/* A multi-page TIFF file, a directory of TIFFs (*.tif, *.tiff) or a glob pattern. */
int tl_volume_stack_open(tl_volume_stack *s, const char *path, char *err, size_t errlen);
/* One kind of an open HDF5 scan's frames (never fails: hdf5.h checked them). */
void tl_volume_stack_hdf5(tl_volume_stack *s, tl_hdf5_reader *h, tl_frame_kind kind);

/* Rows [row0, row0 + nrows) of frames [first, first + n) into buf, frame after frame:
 * n x nrows x cols samples of s->dtype. */
int tl_volume_stack_read(tl_volume_stack *s, uint32_t first, uint32_t n, uint32_t row0,
                         uint32_t nrows, void *buf, char *err, size_t errlen);

/* The row granularity of a read (HDF5 chunk height; 1 for TIFF strips and contiguous data). */
uint32_t tl_volume_stack_read_rows(const tl_volume_stack *s);

void tl_volume_stack_close(tl_volume_stack *s);

#endif
