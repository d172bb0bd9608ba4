/* tiff.h — multi-page TIFF stacks in and out (libtiff), for `tomolive recon` and tests.
 *
 * A stack is a file of equally shaped pages, one image each (a projection, a dark, a flat,
 * or a reconstructed slice). Reading opens the file once, checks every page's shape and
 * sample format up front (so a bad file fails before any work is done), then reads pages
 * in any order into caller buffers. Writing appends one page at a time, so a
 * reconstruction can be written as it is produced.
 *
 *   tl_tiff_reader r; char err[256];
 *   if (tl_tiff_open(&r, "proj.tif", err, sizeof err) != 0) ...  r.pages, r.rows, r.cols
 *   tl_tiff_read_page(&r, i, buf, err, sizeof err);  rows x cols samples of r.dtype
 *   tl_tiff_close(&r);
 *
 * Functions return 0 on success and -1 with a message in err (which names the file).
 */
#ifndef TL_TIFF_H
#define TL_TIFF_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/engine.h"

typedef struct {
    void *tif; /* TIFF * */
    char path[1024];
    uint32_t pages, rows, cols;
    tl_dtype dtype; /* sample type of every page: u8, u16, u32 or f32 */
    void *scratch;  /* one strip or tile, for partial reads (tl_tiff_read_rows) */
    size_t scratch_len;
} tl_tiff_reader;

int tl_tiff_open(tl_tiff_reader *r, const char *path, char *err, size_t errlen);
/* Reads page (0-based) into buf: rows x cols samples of r->dtype, row-major, no padding. */
int tl_tiff_read_page(tl_tiff_reader *r, uint32_t page, void *buf, char *err, size_t errlen);
/* Reads rows row0 .. row0+nrows-1 of page into buf (nrows x cols samples): only the strips
 * or tiles that hold them, so a band of a large page costs the band, not the page. */
int tl_tiff_read_rows(tl_tiff_reader *r, uint32_t page, uint32_t row0, uint32_t nrows, void *buf,
                      char *err, size_t errlen);
void tl_tiff_close(tl_tiff_reader *r);

typedef struct {
    void *tif;
    char path[1024];
    uint32_t pages; /* pages written so far */
} tl_tiff_writer;

/* Creates (truncates) path. expected_bytes is the total pixel data the caller will write
 * (0 if unknown); above the classic TIFF's 4 GiB reach the file is written as BigTIFF. */
int tl_tiff_create(tl_tiff_writer *w, const char *path, uint64_t expected_bytes, char *err,
                   size_t errlen);
/* Appends one page of rows x cols samples (u8, u16, u32 or f32), uncompressed. */
int tl_tiff_write_page(tl_tiff_writer *w, tl_dtype dtype, const void *data, uint32_t rows,
                       uint32_t cols, char *err, size_t errlen);
/* The file's descriptor while it is open (-1 when not): for writeback hints and syncs. */
int tl_tiff_writer_fd(const tl_tiff_writer *w);
/* Finishes the file; reports a failure to flush it. Always releases w. */
int tl_tiff_finish(tl_tiff_writer *w, char *err, size_t errlen);

#endif
