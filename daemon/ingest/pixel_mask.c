/* pixel_mask.c — see pixel_mask.h. */
#include <config.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/pixel_mask.h"

typedef struct {
    const uint8_t *bytes;
    size_t elem;
    uint32_t rows, cols;
    uint8_t *row_open; /* per row: it has an unmasked pixel */
} mask_view;

static bool masked(const mask_view *v, size_t at)
{
    const uint8_t *e = v->bytes + at * v->elem;
    for (size_t i = 0; i < v->elem; i++)
        if (e[i])
            return true;
    return false;
}

/* The nearest unmasked pixel before (step -1) or after (step 1) position `from` along a
 * line of `len` pixels that starts at `base` with `stride`; false when there is none. */
static bool nearest(const mask_view *v, size_t base, size_t stride, uint32_t len, uint32_t from,
                    int step, uint32_t *found)
{
    for (int64_t k = (int64_t)from + step; k >= 0 && k < (int64_t)len; k += step)
        if (!masked(v, base + (size_t)k * stride)) {
            *found = (uint32_t)k;
            return true;
        }
    return false;
}

/* The fill of a line position p from its neighbours lo < p < hi (either may be missing). */
static void between(tl_pixel_fill *f, size_t base, size_t stride, uint32_t p, bool has_lo,
                    uint32_t lo, bool has_hi, uint32_t hi)
{
    if (!has_lo)
        lo = hi;
    if (!has_hi)
        hi = lo;
    f->from_a = (uint32_t)(base + (size_t)lo * stride);
    f->from_b = (uint32_t)(base + (size_t)hi * stride);
    f->weight_a = hi == lo ? 1.0f : (float)(hi - p) / (float)(hi - lo);
}

static void fill_of(const mask_view *v, uint32_t r, uint32_t c, tl_pixel_fill *f)
{
    size_t row0 = (size_t)r * v->cols;
    f->at = (uint32_t)(row0 + c);
    uint32_t lo = 0, hi = 0;
    if (v->row_open[r]) { /* along the row */
        bool a = nearest(v, row0, 1, v->cols, c, -1, &lo),
             b = nearest(v, row0, 1, v->cols, c, 1, &hi);
        between(f, row0, 1, c, a, lo, b, hi);
        return;
    }
    bool a = nearest(v, c, v->cols, v->rows, r, -1, &lo),
         b = nearest(v, c, v->cols, v->rows, r, 1, &hi);
    if (a || b) { /* along the column */
        between(f, c, v->cols, r, a, lo, b, hi);
        return;
    }
    uint32_t best = r; /* the nearest row with an unmasked pixel (one exists) */
    for (uint32_t k = 1; best == r && k < v->rows; k++) {
        if (r >= k && v->row_open[r - k])
            best = r - k;
        else if (r + k < v->rows && v->row_open[r + k])
            best = r + k;
    }
    size_t base = (size_t)best * v->cols;
    if (!masked(v, base + c)) { /* straight above or below */
        between(f, base, 1, c, true, c, true, c);
        return;
    }
    a = nearest(v, base, 1, v->cols, c, -1, &lo);
    b = nearest(v, base, 1, v->cols, c, 1, &hi);
    between(f, base, 1, c, a, lo, b, hi);
}

int tl_pixel_mask_build(tl_pixel_mask *pm, const void *mask, size_t elem_size, uint32_t rows,
                        uint32_t cols, char *why, size_t whylen)
{
    tl_pixel_mask_clear(pm);
    mask_view v = {mask, elem_size, rows, cols, calloc(rows ? rows : 1, 1)};
    if (!v.row_open) {
        snprintf(why, whylen, "out of memory for a %u x %u pixel mask", rows, cols);
        return -1;
    }
    size_t n = 0, total = (size_t)rows * cols;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            bool m = masked(&v, (size_t)r * cols + c);
            n += m;
            v.row_open[r] |= !m;
        }
    int rc = 0;
    if (n == total) {
        snprintf(why, whylen, "the pixel mask masks all %zu pixels", total);
        rc = -1;
    } else if (n > pm->cap) { /* once per larger mask, at a series start */
        tl_pixel_fill *f = realloc(pm->fills, n * sizeof *f);
        if (!f) {
            snprintf(why, whylen, "out of memory for %zu masked pixels", n);
            rc = -1;
        } else {
            pm->fills = f;
            pm->cap = n;
        }
    }
    if (rc == 0) {
        for (uint32_t r = 0; r < rows; r++)
            for (uint32_t c = 0; c < cols; c++)
                if (masked(&v, (size_t)r * cols + c))
                    fill_of(&v, r, c, &pm->fills[pm->n++]);
        pm->rows = rows;
        pm->cols = cols;
    }
    free(v.row_open);
    return rc;
}

void tl_pixel_mask_clear(tl_pixel_mask *pm)
{
    pm->rows = pm->cols = 0;
    pm->n = 0;
}

void tl_pixel_mask_free(tl_pixel_mask *pm)
{
    free(pm->fills);
    memset(pm, 0, sizeof *pm);
}

/* One pass per sample type; memcpy reads and writes pixels that may be unaligned (a
 * typed array inside a received CBOR message). */
#define FILL_PASS(type, round_to)                                                 \
    for (size_t i = 0; i < pm->n; i++) {                                          \
        const tl_pixel_fill *f = &pm->fills[i];                                   \
        type a, b;                                                                \
        memcpy(&a, px + (size_t)f->from_a * sizeof a, sizeof a);                  \
        memcpy(&b, px + (size_t)f->from_b * sizeof b, sizeof b);                  \
        double value = f->weight_a * (double)a + (1.0 - f->weight_a) * (double)b; \
        type out = (type)round_to(value);                                         \
        memcpy(px + (size_t)f->at * sizeof out, &out, sizeof out);                \
    }

#define AS_IS(x) (x)

size_t tl_pixel_mask_apply(const tl_pixel_mask *pm, void *pixels, tl_proto_dtype dtype)
{
    uint8_t *px = pixels;
    switch (dtype) {
        case TL_PROTO_U8: FILL_PASS(uint8_t, lround); break;
        case TL_PROTO_U16: FILL_PASS(uint16_t, lround); break;
        case TL_PROTO_U32: FILL_PASS(uint32_t, llround); break;
        case TL_PROTO_F32: FILL_PASS(float, AS_IS); break;
        default: return 0; /* f16, q16: slice dtypes, never a frame's */
    }
    return pm->n;
}
