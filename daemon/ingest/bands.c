/* bands.c — frames sent in row bands, put back together (bands.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/bands.h"
#include "gpu/base/pool.h"

#define TL_BANDS_COPY_THREADS 4      /* threads (the worker one of them) copying a band */
#define TL_BANDS_COPY_PIECES 8       /* pieces of a band's copy: early finishers take more */
#define TL_BANDS_COPY_MIN (1u << 20) /* bytes: smaller bands are copied by the worker alone */
#define TL_BANDS_SPIN_NS \
    50000 /* the copy threads wait this long for the next band
                                       * (a frame's bands come together) before sleeping */

void tl_bands_init(tl_bands *b, int n, tl_backend_kind memory, tl_bands_drop_fn drop,
                   void *drop_ctx)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->memory = memory;
    b->drop = drop;
    b->drop_ctx = drop_ctx;
}

/* Frame a goes, incomplete: the caller is told. */
static void drop_frame(tl_bands *b, tl_bands_frame *a, const char *why)
{
    if (b->drop)
        b->drop(b->drop_ctx, &a->frame, a->rows_in, why);
    a->used = false;
}

static void drop_buffers(tl_bands *b)
{
    for (int i = 0; b->v && i < b->n; i++) {
        if (b->v[i].data)
            tl_host_free(b->memory, b->v[i].data);
        free(b->v[i].have);
    }
    free(b->v);
    b->v = NULL;
    b->frame_bytes = 0;
    b->rows = 0;
}

void tl_bands_destroy(tl_bands *b)
{
    drop_buffers(b);
    if (b->pool)
        tl_pool_destroy(b->pool);
    b->pool = NULL;
}

/* One piece of a band's copy. */
typedef struct {
    char *dst;
    const char *src;
    size_t bytes;
} band_copy;

static void copy_piece(void *ctx, size_t piece, int thread)
{
    (void)thread;
    const band_copy *c = ctx;
    size_t a = piece * c->bytes / TL_BANDS_COPY_PIECES;
    size_t z = (piece + 1) * c->bytes / TL_BANDS_COPY_PIECES;
    memcpy(c->dst + a, c->src + a, z - a);
}

/* Buffers for frames of rows x row_bytes, made once per size (pinning costs milliseconds:
 * never per frame). Frames in assembly for another size are dropped. */
static int make_buffers(tl_bands *b, uint32_t rows, size_t frame_bytes, char *why, size_t why_len)
{
    if (b->v && b->frame_bytes == frame_bytes && b->rows == rows)
        return 0;
    tl_bands_clear(b, "a frame of another size began");
    drop_buffers(b);
    if (!b->pool) {
        if (!(b->pool = tl_pool_create(TL_BANDS_COPY_THREADS))) {
            snprintf(why, why_len, "cannot start the %d band copy threads", TL_BANDS_COPY_THREADS);
            return -1;
        }
        tl_pool_set_spin(b->pool, TL_BANDS_SPIN_NS);
    }
    b->v = calloc((size_t)b->n, sizeof *b->v);
    if (!b->v) {
        snprintf(why, why_len, "out of memory for the band assembly of %d frames", b->n);
        return -1;
    }
    for (int i = 0; i < b->n; i++) {
        char err[256] = "";
        b->v[i].have = calloc(rows, 1);
        if (!b->v[i].have ||
            tl_host_alloc(b->memory, frame_bytes, &b->v[i].data, err, sizeof err) != TL_OK) {
            snprintf(why, why_len, "cannot allocate %d frame buffers of %zu bytes for bands: %s",
                     b->n, frame_bytes, err[0] ? err : "out of memory");
            drop_buffers(b);
            return -1;
        }
    }
    b->frame_bytes = frame_bytes;
    b->rows = rows;
    return 0;
}

/* Whether band f belongs to the frame assembled in a (same series, index and kind). */
static bool same_frame(const tl_proto_frame *a, const tl_proto_frame *f)
{
    return a->series == f->series && a->index == f->index && a->kind == f->kind;
}

/* Whether band f repeats the header of its frame's first band. */
static bool same_header(const tl_proto_frame *a, const tl_proto_frame *f)
{
    return a->dtype == f->dtype && a->rows == f->rows && a->cols == f->cols &&
           a->has_angle == f->has_angle && (!a->has_angle || a->angle == f->angle) &&
           a->has_t_acq == f->has_t_acq && (!a->has_t_acq || a->t_acq == f->t_acq) &&
           a->has_center_offset == f->has_center_offset &&
           (!a->has_center_offset || a->center_offset == f->center_offset);
}

/* A buffer for a new frame: a free one, or the oldest frame's, dropped. */
static tl_bands_frame *take(tl_bands *b)
{
    tl_bands_frame *oldest = NULL;
    for (int i = 0; i < b->n; i++) {
        if (!b->v[i].used)
            return &b->v[i];
        if (!oldest || b->v[i].t_first_mono < oldest->t_first_mono)
            oldest = &b->v[i];
    }
    drop_frame(b, oldest,
               "newer frames needed its buffer (more than ingest.band_frames "
               "in assembly)");
    return oldest;
}

int tl_bands_add(tl_bands *b, const tl_proto_frame *f, uint64_t t_recv, uint64_t t_recv_mono,
                 tl_bands_frame **done, char *why, size_t why_len)
{
    *done = NULL;
    size_t row = (size_t)f->cols * tl_proto_dtype_size(f->dtype);
    if (make_buffers(b, f->rows, row * f->rows, why, why_len) != 0)
        return -1;
    if (!f->payload || f->payload_len != (size_t)f->band_rows * row) {
        snprintf(why, why_len, "band [%u, %u] of frame %llu: payload of %zu bytes, not %zu",
                 f->band_first, f->band_rows, (unsigned long long)f->index, f->payload_len,
                 (size_t)f->band_rows * row);
        return -1;
    }
    tl_bands_frame *a = NULL;
    for (int i = 0; i < b->n && !a; i++)
        if (b->v[i].used && same_frame(&b->v[i].frame, f))
            a = &b->v[i];
    if (a && !same_header(&a->frame, f)) {
        snprintf(why, why_len,
                 "band [%u, %u] of frame %llu: its header differs from the "
                 "frame's first band (dtype, shape, angle, t_acq or center_offset)",
                 f->band_first, f->band_rows, (unsigned long long)f->index);
        return -1;
    }
    if (a)
        for (uint32_t r = f->band_first; r < f->band_first + f->band_rows; r++)
            if (a->have[r]) {
                snprintf(why, why_len,
                         "band [%u, %u] of frame %llu overlaps row %u, received "
                         "already",
                         f->band_first, f->band_rows, (unsigned long long)f->index, r);
                return -1;
            }
    if (!a) {
        a = take(b);
        a->used = true;
        a->frame = *f;
        a->frame.has_band = false;
        a->frame.band_first = 0;
        a->frame.band_rows = f->rows;
        a->frame.payload = NULL;
        a->frame.payload_len = 0;
        a->t_first_mono = t_recv_mono;
        a->rows_in = 0;
        memset(a->have, 0, b->rows);
    }
    band_copy cp = {(char *)a->data + (size_t)f->band_first * row, f->payload,
                    (size_t)f->band_rows * row};
    if (cp.bytes >= TL_BANDS_COPY_MIN)
        tl_pool_run(b->pool, TL_BANDS_COPY_PIECES, copy_piece, &cp);
    else
        memcpy(cp.dst, cp.src, cp.bytes);
    memset(a->have + f->band_first, 1, f->band_rows);
    a->rows_in += f->band_rows;
    a->t_recv = t_recv;
    a->t_recv_mono = t_recv_mono;
    if (a->rows_in < b->rows)
        return 0;
    *done = a;
    return 1;
}

void tl_bands_free(tl_bands *b, tl_bands_frame *f)
{
    (void)b;
    f->used = false;
}

/* Drops the frames in assembly whose first band came before `before`. */
static int drop_older(tl_bands *b, uint64_t before, const char *why)
{
    int n = 0;
    for (int i = 0; b->v && i < b->n; i++)
        if (b->v[i].used && b->v[i].t_first_mono < before) {
            drop_frame(b, &b->v[i], why);
            n++;
        }
    return n;
}

int tl_bands_expire(tl_bands *b, uint64_t now_mono, uint64_t timeout_ns)
{
    if (now_mono <= timeout_ns)
        return 0;
    return drop_older(b, now_mono - timeout_ns,
                      "its bands did not all come within "
                      "ingest.band_timeout_ms");
}

int tl_bands_clear(tl_bands *b, const char *why)
{
    return drop_older(b, UINT64_MAX, why);
}

int tl_bands_pending(const tl_bands *b)
{
    int n = 0;
    for (int i = 0; b->v && i < b->n; i++)
        n += b->v[i].used;
    return n;
}
