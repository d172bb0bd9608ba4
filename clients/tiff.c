/* tiff.c — multi-page TIFF stacks (see tiff.h).
 *
 * libtiff reports errors through a process-wide handler; we install one that keeps the
 * last message in a thread-local buffer (and silences warnings about unknown tags, which
 * every camera vendor produces), so each failing call can return libtiff's own reason in
 * the caller's message buffer instead of printing it. Pages are read through strips or
 * tiles as stored; strips land directly in the caller's buffer.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <unistd.h>

#include "clients/tiff.h"

static _Thread_local char last_tiff_error[512];

static void on_error(const char *module, const char *fmt, va_list ap)
{
    int n = 0;
    if (module && *module)
        n = snprintf(last_tiff_error, sizeof last_tiff_error, "%s: ", module);
    if (n < 0 || (size_t)n >= sizeof last_tiff_error)
        n = 0;
    vsnprintf(last_tiff_error + n, sizeof last_tiff_error - (size_t)n, fmt, ap);
}

static void on_warning(const char *module, const char *fmt, va_list ap)
{
    (void)module;
    (void)fmt;
    (void)ap;
}

static void set_handlers(void)
{
    TIFFSetErrorHandler(on_error);
    TIFFSetWarningHandler(on_warning);
}

/* The handlers are libtiff's globals: set once, as several threads may write files at once
 * (the volume output's TIFF stacks); each thread keeps its own last message. */
static void install_handlers(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, set_handlers);
    last_tiff_error[0] = '\0';
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
                                                      ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const char *tiff_reason(void)
{
    return last_tiff_error[0] ? last_tiff_error : "libtiff error";
}

/* ---- reading ------------------------------------------------------------------------ */

typedef struct {
    uint32_t width, length;
    uint16_t spp, bps, format;
} page_info;

static int read_info(TIFF *tif, page_info *pi)
{
    uint16_t spp = 1, bps = 1, fmt = SAMPLEFORMAT_UINT;
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &pi->width) ||
        !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &pi->length))
        return -1;
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &fmt);
    pi->spp = spp;
    pi->bps = bps;
    pi->format = fmt;
    return 0;
}

static int dtype_of(const page_info *pi, tl_dtype *dt)
{
    if (pi->spp != 1)
        return -1;
    if (pi->format == SAMPLEFORMAT_UINT) {
        switch (pi->bps) {
            case 8: *dt = TL_DTYPE_U8; return 0;
            case 16: *dt = TL_DTYPE_U16; return 0;
            case 32: *dt = TL_DTYPE_U32; return 0;
            default: return -1;
        }
    }
    if (pi->format == SAMPLEFORMAT_IEEEFP && pi->bps == 32) {
        *dt = TL_DTYPE_F32;
        return 0;
    }
    return -1;
}

static const char *format_name(uint16_t f)
{
    switch (f) {
        case SAMPLEFORMAT_UINT: return "unsigned";
        case SAMPLEFORMAT_INT: return "signed";
        case SAMPLEFORMAT_IEEEFP: return "float";
        default: return "complex/other";
    }
}

int tl_tiff_open(tl_tiff_reader *r, const char *path, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path);
    /* libtiff's message for a missing file is vague; ask the system first */
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return fail(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    close(fd);
    install_handlers();
    TIFF *tif = TIFFOpen(path, "r");
    if (!tif)
        return fail(err, errlen, "cannot read '%s' as TIFF: %s", path, tiff_reason());
    r->tif = tif;
    tdir_t n = TIFFNumberOfDirectories(tif);
    if (n == 0) {
        tl_tiff_close(r);
        return fail(err, errlen, "'%s' has no pages", path);
    }
    page_info first = {0};
    for (tdir_t d = 0; d < n; d++) {
        page_info pi;
        if (!TIFFSetDirectory(tif, d) || read_info(tif, &pi) != 0) {
            tl_tiff_close(r);
            return fail(err, errlen, "'%s' page %u: cannot read its header: %s", path, (unsigned)d,
                        tiff_reason());
        }
        tl_dtype dt;
        if (dtype_of(&pi, &dt) != 0) {
            tl_tiff_close(r);
            return fail(err, errlen,
                        "'%s' page %u: unsupported sample format (%u samples per pixel of "
                        "%u-bit %s; need one sample of 8/16/32-bit unsigned or 32-bit float)",
                        path, (unsigned)d, pi.spp, pi.bps, format_name(pi.format));
        }
        if (d == 0) {
            first = pi;
            r->dtype = dt;
        } else if (pi.width != first.width || pi.length != first.length || pi.bps != first.bps ||
                   pi.format != first.format) {
            tl_tiff_close(r);
            return fail(err, errlen,
                        "'%s' has pages of different shapes: page 0 is %u x %u (%u-bit %s), "
                        "page %u is %u x %u (%u-bit %s)",
                        path, first.length, first.width, first.bps, format_name(first.format),
                        (unsigned)d, pi.length, pi.width, pi.bps, format_name(pi.format));
        }
    }
    r->pages = (uint32_t)n;
    r->rows = first.length;
    r->cols = first.width;
    return 0;
}

static void *scratch(tl_tiff_reader *r, size_t n)
{
    if (r->scratch_len < n) {
        void *p = realloc(r->scratch, n);
        if (!p)
            return NULL;
        r->scratch = p;
        r->scratch_len = n;
    }
    return r->scratch;
}

/* Rows [row0, row0 + nrows) from tiles: every tile row that meets them, clipped. */
static int read_tiled(tl_tiff_reader *r, uint32_t row0, uint32_t nrows, uint8_t *dst,
                      size_t rowbytes, size_t ss, char *err, size_t errlen)
{
    TIFF *tif = r->tif;
    uint32_t tw = 0, th = 0;
    TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
    tmsize_t tsize = TIFFTileSize(tif);
    if (tw == 0 || th == 0 || tsize <= 0)
        return fail(err, errlen, "'%s': bad tile layout", r->path);
    uint8_t *tile = scratch(r, (size_t)tsize);
    if (!tile)
        return fail(err, errlen, "'%s': out of memory for a tile", r->path);
    uint32_t row1 = row0 + nrows;
    for (uint32_t y = row0 / th * th; y < row1; y += th)
        for (uint32_t x = 0; x < r->cols; x += tw) {
            if (TIFFReadTile(tif, tile, x, y, 0, 0) < 0)
                return fail(err, errlen, "'%s': cannot read tile at (%u, %u): %s", r->path, x, y,
                            tiff_reason());
            uint32_t lo = y > row0 ? y : row0, hi = y + th < row1 ? y + th : row1;
            uint32_t w = r->cols - x < tw ? r->cols - x : tw;
            for (uint32_t yy = lo; yy < hi; yy++)
                memcpy(dst + (size_t)(yy - row0) * rowbytes + (size_t)x * ss,
                       tile + ((size_t)(yy - y) * tw) * ss, (size_t)w * ss);
        }
    return 0;
}

int tl_tiff_read_rows(tl_tiff_reader *r, uint32_t page, uint32_t row0, uint32_t nrows, void *buf,
                      char *err, size_t errlen)
{
    if (!r->tif || page >= r->pages)
        return fail(err, errlen, "'%s': no page %u (it has %u)", r->path, page, r->pages);
    if (nrows == 0 || row0 > r->rows || nrows > r->rows - row0)
        return fail(err, errlen, "'%s': no rows %u .. %u (it has %u)", r->path, row0,
                    row0 + nrows, r->rows);
    install_handlers();
    TIFF *tif = r->tif;
    if (TIFFCurrentDirectory(tif) != page && !TIFFSetDirectory(tif, (tdir_t)page))
        return fail(err, errlen, "'%s': cannot go to page %u: %s", r->path, page, tiff_reason());
    size_t ss = tl_dtype_size(r->dtype), rowbytes = (size_t)r->cols * ss;
    uint8_t *dst = buf;
    if (TIFFIsTiled(tif))
        return read_tiled(r, row0, nrows, dst, rowbytes, ss, err, errlen);
    uint32_t rps = r->rows;
    TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rps);
    if (rps == 0 || rps > r->rows)
        rps = r->rows;
    tstrip_t nstrips = TIFFNumberOfStrips(tif);
    uint32_t row1 = row0 + nrows;
    for (tstrip_t s = row0 / rps; s < nstrips && (uint64_t)s * rps < row1; s++) {
        uint32_t y = s * rps, h = r->rows - y < rps ? r->rows - y : rps;
        bool whole = y >= row0 && y + h <= row1; /* straight into the caller's buffer */
        uint8_t *to = whole ? dst + (size_t)(y - row0) * rowbytes : scratch(r, h * rowbytes);
        if (!to)
            return fail(err, errlen, "'%s': out of memory for a strip", r->path);
        if (TIFFReadEncodedStrip(tif, s, to, (tmsize_t)(h * rowbytes)) < 0)
            return fail(err, errlen, "'%s' page %u: cannot read strip %u: %s", r->path, page,
                        (unsigned)s, tiff_reason());
        if (!whole) {
            uint32_t lo = y > row0 ? y : row0, hi = y + h < row1 ? y + h : row1;
            memcpy(dst + (size_t)(lo - row0) * rowbytes, to + (size_t)(lo - y) * rowbytes,
                   (size_t)(hi - lo) * rowbytes);
        }
    }
    return 0;
}

int tl_tiff_read_page(tl_tiff_reader *r, uint32_t page, void *buf, char *err, size_t errlen)
{
    return tl_tiff_read_rows(r, page, 0, r->rows, buf, err, errlen);
}

void tl_tiff_close(tl_tiff_reader *r)
{
    if (r->tif)
        TIFFClose(r->tif);
    r->tif = NULL;
    free(r->scratch);
    r->scratch = NULL;
    r->scratch_len = 0;
}

/* ---- writing ------------------------------------------------------------------------ */

int tl_tiff_create(tl_tiff_writer *w, const char *path, uint64_t expected_bytes, char *err,
                   size_t errlen)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    install_handlers();
    /* classic TIFF offsets are 32-bit; leave room for the directories */
    bool big = expected_bytes > 0xF0000000ULL;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0)
        return fail(err, errlen, "cannot create '%s': %s", path, strerror(errno));
    close(fd);
    w->tif = TIFFOpen(path, big ? "w8" : "w");
    if (!w->tif)
        return fail(err, errlen, "cannot create '%s': %s", path, tiff_reason());
    return 0;
}

int tl_tiff_write_page(tl_tiff_writer *w, tl_dtype dtype, const void *data, uint32_t rows,
                       uint32_t cols, char *err, size_t errlen)
{
    if (!w->tif)
        return fail(err, errlen, "'%s' is not open for writing", w->path);
    if (rows == 0 || cols == 0)
        return fail(err, errlen, "'%s': empty page", w->path);
    install_handlers();
    TIFF *tif = w->tif;
    size_t ss = tl_dtype_size(dtype), rowbytes = (size_t)cols * ss;
    /* strips of about 256 KiB: small enough to stream, large enough to be cheap */
    uint32_t rps = (uint32_t)(262144 / rowbytes);
    if (rps < 1)
        rps = 1;
    if (rps > rows)
        rps = rows;
    int ok = TIFFSetField(tif, TIFFTAG_SUBFILETYPE, FILETYPE_PAGE) &&
             TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, cols) &&
             TIFFSetField(tif, TIFFTAG_IMAGELENGTH, rows) &&
             TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1) &&
             TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, (int)(8 * ss)) &&
             TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT,
                          dtype == TL_DTYPE_F32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT) &&
             TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK) &&
             TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG) &&
             TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_NONE) &&
             TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, rps);
    if (!ok)
        return fail(err, errlen, "'%s' page %u: cannot set tags: %s", w->path, w->pages,
                    tiff_reason());
    const uint8_t *src = data;
    for (uint32_t y = 0, s = 0; y < rows; y += rps, s++) {
        uint32_t h = rows - y < rps ? rows - y : rps;
        /* libtiff takes a non-const buffer but does not modify it for uncompressed data */
        if (TIFFWriteEncodedStrip(tif, s, (void *)(uintptr_t)(src + (size_t)y * rowbytes),
                                  (tmsize_t)(h * rowbytes)) < 0)
            return fail(err, errlen, "'%s' page %u: write failed: %s", w->path, w->pages,
                        tiff_reason());
    }
    if (!TIFFWriteDirectory(tif))
        return fail(err, errlen, "'%s' page %u: write failed: %s", w->path, w->pages,
                    tiff_reason());
    w->pages++;
    return 0;
}

int tl_tiff_writer_fd(const tl_tiff_writer *w)
{
    return w->tif ? TIFFFileno(w->tif) : -1;
}

int tl_tiff_finish(tl_tiff_writer *w, char *err, size_t errlen)
{
    if (!w->tif)
        return fail(err, errlen, "'%s' is not open for writing", w->path);
    install_handlers();
    int rc = TIFFFlush(w->tif) ? 0 : -1;
    TIFFClose(w->tif);
    w->tif = NULL;
    if (rc != 0)
        return fail(err, errlen, "'%s': cannot flush: %s", w->path, tiff_reason());
    return 0;
}
