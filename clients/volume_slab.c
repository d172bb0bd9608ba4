/* volume_slab.c — see volume_slab.h.
 *
 * The ring (tl_vslab_ordered): task k (the pool takes them in increasing order) waits for
 * slot k % slots to be free, that is for slice k - slots to be written, fills it and marks
 * it ready with k + 1; the caller waits for slice k's mark, writes it and frees the slot.
 * Neither side waits for a later slice than the other has, so the ring cannot lock up, and
 * with slots = threads + 2 every thread can be converting while the caller writes. A task
 * that fails, or a caller that fails, stops the rest (the caller still waits for the pool,
 * so no task outlives the call).
 *
 * Chunks are stored as libhdf5 would store them through H5Dwrite, so h5py, h5dump and
 * H5Dread see the same file: uncompressed, the samples in the file type's byte order (the
 * host's, little-endian: asserted); deflated, zlib's compress2 at the level into a buffer
 * of compressBound bytes, which is what HDF5's deflate filter runs (one deflate call with
 * room for all of it: the stream does not depend on the buffer's size), filter mask 0.
 * tests/unit/check_volume_output.c compares the chunks' bytes with H5Dwrite's.
 *
 * Writeback: sync_file_range(WRITE) queues a slice's pages for the disk at once; once more
 * than WRITEBACK_BYTES are queued, the oldest ranges are waited for (WAIT_BEFORE | WRITE |
 * WAIT_AFTER). The waits make the writer as fast as the disk, which the slab's fdatasync
 * would anyway, but spread over the slab, with a bounded amount of dirty page cache
 * instead of a slab's. Their errors are the write's: a wait that sees an I/O error marks
 * it seen for this descriptor, so the later fdatasync might not report it again.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "clients/cli.h"
#include "clients/volume_convert.h"
#include "clients/volume_pool.h"
#include "clients/volume_slab.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "chunks are written as they are in memory; the file's types are little-endian");

#define MAX_THREADS 64
#define MAX_SLOTS (MAX_THREADS + 2)
#define WRITEBACK_BYTES ((int64_t)128 << 20)
#define WRITEBACK_RANGES 64

typedef struct {
    int fd;
    int64_t off, len;
} range;

struct tl_vslab {
    tl_vpool pool;
    bool pool_started;
    size_t npx;       /* samples per slice */
    unsigned slots;   /* the ring's (ordered); a TIFF stack uses one per thread */
    uint16_t *conv;   /* slots converted slices (16-bit dtypes) */
    uint8_t *zbuf;    /* slots deflated slices (deflate) */
    size_t zcap;      /* compressBound of a slice */
    float *lohi;      /* tl_vslab_range: a minimum and a maximum per thread */
    /* the job in progress */
    tl_volume_output *o;
    const float *src;
    uint32_t z0, h;
    pthread_mutex_t mu;
    pthread_cond_t ready_cv, free_cv;
    uint32_t ready[MAX_SLOTS]; /* k + 1: slice k is in the slot */
    const void *slot_buf[MAX_SLOTS];
    size_t slot_len[MAX_SLOTS];
    uint32_t written; /* ordered: slices the caller has written */
    bool stop;        /* ordered: the caller is done; waiting tasks return */
    bool failed;
    char err[1024];
    /* writeback: the ranges queued and not yet waited for, oldest first */
    range wb[WRITEBACK_RANGES];
    unsigned wb_first, wb_n;
    int64_t wb_bytes;
    int64_t pages_end; /* multi-page TIFF: the file's size after the last page */
};
typedef struct tl_vslab work;

static void __attribute__((format(printf, 2, 3))) fail(work *w, const char *fmt, ...)
{
    pthread_mutex_lock(&w->mu);
    if (!w->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err, sizeof w->err, fmt, ap);
        va_end(ap);
        w->failed = true;
    }
    pthread_cond_broadcast(&w->ready_cv);
    pthread_cond_broadcast(&w->free_cv);
    pthread_mutex_unlock(&w->mu);
}

static bool failed(work *w)
{
    pthread_mutex_lock(&w->mu);
    bool f = w->failed;
    pthread_mutex_unlock(&w->mu);
    return f;
}


void tl_vslab_path(const tl_volume_output *o, uint32_t z, char *buf, size_t n)
{
    snprintf(buf, n, "%s/slice_%05u.tif", o->spec.path, o->spec.z_base + z);
}

static void convert(const tl_volume_output *o, uint16_t *dst, const float *src, size_t n)
{
    if (o->spec.dtype == TL_OUT_F16)
        tl_half_of_floats(dst, src, n);
    else
        tl_u16_of_floats(dst, src, n, o->offset, o->scale);
}

/* ---- writeback ------------------------------------------------------------------------ */

/* A sync_file_range failure that matters: not "this file cannot" (a pipe, a file system
 * without it), which leaves the work to the sync. */
static bool sfr_failed(int rc)
{
    return rc != 0 && errno != EINVAL && errno != ESPIPE && errno != ENOSYS;
}

static int wait_oldest(work *w)
{
    range r = w->wb[w->wb_first];
    w->wb_first = (w->wb_first + 1) % WRITEBACK_RANGES;
    w->wb_n--;
    w->wb_bytes -= r.len;
    return sfr_failed(sync_file_range(r.fd, r.off, r.len,
                                      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                          SYNC_FILE_RANGE_WAIT_AFTER))
               ? -1
               : 0;
}

/* Queues [off, off + len) of fd for the disk; waits for the oldest beyond the bound. */
static int writeback(work *w, int fd, int64_t off, int64_t len)
{
    if (len <= 0)
        return 0;
    if (sfr_failed(sync_file_range(fd, off, len, SYNC_FILE_RANGE_WRITE)))
        return -1;
    if (w->wb_n == WRITEBACK_RANGES && wait_oldest(w) != 0)
        return -1;
    w->wb[(w->wb_first + w->wb_n++) % WRITEBACK_RANGES] = (range){fd, off, len};
    w->wb_bytes += len;
    while (w->wb_bytes > WRITEBACK_BYTES)
        if (wait_oldest(w) != 0)
            return -1;
    return 0;
}

/* ---- in order: HDF5 chunks, TIFF pages ------------------------------------------------ */

/* Task k: slice k converted and deflated into its slot. */
static void prepare(void *ctx, uint32_t k, unsigned worker)
{
    (void)worker;
    work *w = ctx;
    const tl_volume_output *o = w->o;
    unsigned s = k % w->slots;
    pthread_mutex_lock(&w->mu);
    while (!w->stop && !w->failed && k >= w->written + w->slots)
        pthread_cond_wait(&w->free_cv, &w->mu);
    bool skip = w->stop || w->failed;
    pthread_mutex_unlock(&w->mu);
    if (skip)
        return;
    const void *buf = w->src + (size_t)k * w->npx;
    size_t len = w->npx * sizeof(float);
    if (o->spec.dtype != TL_OUT_F32) {
        uint16_t *d = w->conv + (size_t)s * w->npx;
        convert(o, d, buf, w->npx);
        buf = d;
        len = w->npx * sizeof(uint16_t);
    }
    if (o->spec.deflate > 0) {
        uint8_t *z = w->zbuf + (size_t)s * w->zcap;
        uLongf zn = w->zcap;
        int st = compress2(z, &zn, buf, len, o->spec.deflate);
        if (st != Z_OK) {
            fail(w, "'%s': cannot deflate slice %u (zlib error %d)", o->spec.path, w->z0 + k, st);
            return;
        }
        buf = z;
        len = zn;
    }
    pthread_mutex_lock(&w->mu);
    w->slot_buf[s] = buf;
    w->slot_len[s] = len;
    w->ready[s] = k + 1;
    pthread_cond_broadcast(&w->ready_cv);
    pthread_mutex_unlock(&w->mu);
}

static int h5_chunk(tl_volume_output *o, uint32_t z, const void *buf, size_t len, char *err,
                    size_t errlen)
{
    hsize_t at[3] = {z, 0, 0}, size = 0;
    haddr_t addr = HADDR_UNDEF;
    unsigned mask = 0;
    errno = 0;
    if (H5Dwrite_chunk(o->dset, H5P_DEFAULT, 0, at, len, buf) < 0)
        return tl_cli_errf(err, errlen, "'%s': cannot write slice %u (%s)", o->spec.path, z,
                     errno ? strerror(errno) : "disk full?");
    if (H5Dget_chunk_info_by_coord(o->dset, at, &mask, &addr, &size) < 0 || addr == HADDR_UNDEF)
        return 0; /* no range to hint: the slab's sync does it all */
    if (writeback(o->slab, o->fd, (int64_t)addr, (int64_t)size) != 0)
        return tl_cli_errf(err, errlen, "'%s': cannot write slice %u: %s", o->spec.path, z,
                     strerror(errno));
    return 0;
}

static int tiff_page(tl_volume_output *o, uint32_t z, const void *buf, size_t len, char *err,
                     size_t errlen)
{
    (void)len;
    work *w = o->slab;
    tl_dtype dt = o->spec.dtype == TL_OUT_U16 ? TL_DTYPE_U16 : TL_DTYPE_F32;
    if (tl_tiff_write_page(&o->pages, dt, buf, o->spec.size, o->spec.size, err, errlen) != 0)
        return -1;
    int fd = tl_tiff_writer_fd(&o->pages);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= w->pages_end)
        return 0;
    int64_t from = w->pages_end;
    w->pages_end = st.st_size;
    if (writeback(w, fd, from, st.st_size - from) != 0)
        return tl_cli_errf(err, errlen, "'%s': cannot write slice %u: %s", o->spec.path, z,
                     strerror(errno));
    return 0;
}

int tl_vslab_ordered(tl_volume_output *o, uint32_t z0, uint32_t h, const float *slab, char *err,
                     size_t errlen)
{
    work *w = o->slab;
    bool tasks = o->spec.dtype != TL_OUT_F32 || o->spec.deflate > 0;
    w->src = slab;
    w->z0 = z0;
    w->h = h;
    w->written = 0;
    w->stop = w->failed = false;
    memset(w->ready, 0, sizeof w->ready);
    if (tasks)
        tl_vpool_submit(&w->pool, h, prepare, w);
    int rc = 0;
    bool task_failed = false;
    for (uint32_t k = 0; rc == 0 && k < h; k++) {
        const void *buf = slab + (size_t)k * w->npx;
        size_t len = w->npx * sizeof(float);
        if (tasks) {
            unsigned s = k % w->slots;
            pthread_mutex_lock(&w->mu);
            while (!w->failed && w->ready[s] != k + 1)
                pthread_cond_wait(&w->ready_cv, &w->mu);
            task_failed = w->failed;
            buf = w->slot_buf[s];
            len = w->slot_len[s];
            pthread_mutex_unlock(&w->mu);
            if (task_failed) {
                rc = -1;
                break;
            }
        }
        rc = o->form == TL_OUT_HDF5 ? h5_chunk(o, z0 + k, buf, len, err, errlen)
                                    : tiff_page(o, z0 + k, buf, len, err, errlen);
        if (tasks) {
            pthread_mutex_lock(&w->mu);
            w->written = k + 1;
            pthread_cond_broadcast(&w->free_cv);
            pthread_mutex_unlock(&w->mu);
        }
    }
    if (tasks) {
        pthread_mutex_lock(&w->mu);
        w->stop = true; /* after a failure: the tasks waiting for a slot return */
        pthread_cond_broadcast(&w->free_cv);
        pthread_mutex_unlock(&w->mu);
        tl_vpool_wait(&w->pool);
        if (task_failed)
            snprintf(err, errlen, "%s", w->err);
    }
    return rc;
}

/* ---- a TIFF stack: a file per slice, in parallel --------------------------------------- */

static void file_task(void *ctx, uint32_t k, unsigned worker)
{
    work *w = ctx;
    const tl_volume_output *o = w->o;
    if (failed(w))
        return;
    const void *buf = w->src + (size_t)k * w->npx;
    if (o->spec.dtype != TL_OUT_F32) {
        uint16_t *d = w->conv + (size_t)worker * w->npx;
        convert(o, d, buf, w->npx);
        buf = d;
    }
    char path[1100], err[1024];
    tl_vslab_path(o, w->z0 + k, path, sizeof path);
    tl_tiff_writer tw;
    int rc = tl_tiff_create(&tw, path, w->npx * tl_out_dtype_size(o->spec.dtype), err,
                            sizeof err);
    if (rc == 0) {
        rc = tl_tiff_write_page(&tw, o->spec.dtype == TL_OUT_U16 ? TL_DTYPE_U16 : TL_DTYPE_F32,
                                buf, o->spec.size, o->spec.size, err, sizeof err);
        /* the sync comes once the slab's files are written: let the disk start now */
        if (rc == 0)
            (void)sync_file_range(tl_tiff_writer_fd(&tw), 0, 0, SYNC_FILE_RANGE_WRITE);
        if (rc != 0)
            tl_tiff_finish(&tw, NULL, 0);
        else
            rc = tl_tiff_finish(&tw, err, sizeof err);
    }
    if (rc != 0)
        fail(w, "%s", err);
}

static void sync_task(void *ctx, uint32_t k, unsigned worker)
{
    (void)worker;
    work *w = ctx;
    if (failed(w))
        return;
    char path[1100];
    tl_vslab_path(w->o, w->z0 + k, path, sizeof path);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fdatasync(fd) != 0)
        fail(w, "cannot flush '%s' to disk: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

int tl_vslab_files(tl_volume_output *o, uint32_t z0, uint32_t h, const float *slab, char *err,
                   size_t errlen)
{
    work *w = o->slab;
    w->src = slab;
    w->z0 = z0;
    w->h = h;
    w->failed = false;
    /* every file written before any is waited for: concurrent syncs share journal commits */
    tl_vpool_run(&w->pool, h, file_task, w);
    if (!w->failed)
        tl_vpool_run(&w->pool, h, sync_task, w);
    if (w->failed)
        return tl_cli_errf(err, errlen, "%s", w->err);
    return 0;
}

/* ---- a slab's range ------------------------------------------------------------------- */

static void range_task(void *ctx, uint32_t part, unsigned worker)
{
    (void)worker;
    work *w = ctx;
    size_t n = (size_t)w->h * w->npx, parts = w->pool.threads;
    size_t a = n / parts * part + (part < n % parts ? part : n % parts);
    size_t b = a + n / parts + (part < n % parts);
    w->lohi[2 * part] = INFINITY;
    w->lohi[2 * part + 1] = -INFINITY;
    tl_finite_range(w->src + a, b - a, &w->lohi[2 * part], &w->lohi[2 * part + 1]);
}

void tl_vslab_range(tl_volume_output *o, const float *slab, uint32_t h, float *lo, float *hi)
{
    work *w = o->slab;
    w->src = slab;
    w->h = h;
    tl_vpool_run(&w->pool, w->pool.threads, range_task, w);
    /* the parts' extremes in order, each kept over an equal later one, as one scan has it */
    *lo = INFINITY;
    *hi = -INFINITY;
    for (unsigned p = 0; p < w->pool.threads; p++) {
        *lo = w->lohi[2 * p] < *lo ? w->lohi[2 * p] : *lo;
        *hi = w->lohi[2 * p + 1] > *hi ? w->lohi[2 * p + 1] : *hi;
    }
}

/* ---- setup ---------------------------------------------------------------------------- */

unsigned tl_vslab_threads(const tl_volume_output_spec *spec)
{
    unsigned n = spec->threads ? spec->threads : tl_vpool_default_threads();
    return n > MAX_THREADS ? MAX_THREADS : n;
}

/* The ring's slots; a TIFF stack uses the first `threads`, one per thread. */
static unsigned slots_of(const tl_volume_output_spec *spec)
{
    return tl_vslab_threads(spec) + 2;
}

size_t tl_vslab_bytes(const tl_volume_output_spec *spec)
{
    size_t npx = (size_t)spec->size * spec->size, slots = slots_of(spec), b = 0;
    if (spec->dtype != TL_OUT_F32)
        b += slots * npx * sizeof(uint16_t);
    if (spec->deflate > 0)
        b += slots * compressBound(npx * tl_out_dtype_size(spec->dtype));
    return b + 2 * MAX_THREADS * sizeof(float);
}

int tl_vslab_start(tl_volume_output *o, char *err, size_t errlen)
{
    work *w = calloc(1, sizeof *w);
    if (!w)
        return tl_cli_errf(err, errlen, "out of memory");
    o->slab = w;
    w->o = o;
    w->npx = (size_t)o->spec.size * o->spec.size;
    w->slots = slots_of(&o->spec);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->ready_cv, NULL);
    pthread_cond_init(&w->free_cv, NULL);
    if (o->spec.dtype != TL_OUT_F32 && !(w->conv = malloc(w->slots * w->npx * sizeof *w->conv)))
        return tl_cli_errf(err, errlen, "out of memory for %u converted slices", w->slots);
    if (o->spec.deflate > 0) {
        w->zcap = compressBound(w->npx * tl_out_dtype_size(o->spec.dtype));
        if (!(w->zbuf = malloc(w->slots * w->zcap)))
            return tl_cli_errf(err, errlen, "out of memory for %u deflated slices", w->slots);
    }
    if (!(w->lohi = malloc(2 * MAX_THREADS * sizeof *w->lohi)))
        return tl_cli_errf(err, errlen, "out of memory");
    if (tl_vpool_start(&w->pool, tl_vslab_threads(&o->spec), err, errlen) != 0)
        return -1;
    w->pool_started = true;
    return 0;
}

void tl_vslab_stop(tl_volume_output *o)
{
    work *w = o->slab;
    if (!w)
        return;
    if (w->pool_started)
        tl_vpool_stop(&w->pool);
    pthread_cond_destroy(&w->ready_cv);
    pthread_cond_destroy(&w->free_cv);
    pthread_mutex_destroy(&w->mu);
    free(w->conv);
    free(w->zbuf);
    free(w->lohi);
    free(w);
    o->slab = NULL;
}
