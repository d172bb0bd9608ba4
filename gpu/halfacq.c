/* halfacq.c — 360-degree scans with an offset axis (half acquisition; engine.h,
 * tl_engine_config.half_acquisition; ARCHITECTURE.md §3.13).
 *
 * The detector (cols columns) sees the object from the axis column c to one edge; the
 * projection half a turn later sees the other side, mirrored about c. Stitching the two
 * gives a virtual detector of about W' = 2 max(c, cols − 1 − c) + 1 columns centred on
 * the axis (whole columns; the real one at its start or end): twice the field of view. Because FBP is linear the
 * stitching need not wait for the opposite projection: every frame is embedded where it
 * belongs in the virtual row (columns outside the detector read as open beam: zero
 * after −log), multiplied column by column by a weight w with w(v) + w(2c' − v) = 1 (so
 * a projection and its opposite add up to exactly one stitched projection: a cos² ramp
 * over their overlap, 1 where only this one sees, 0 beyond the detector), times 2 (the
 * uniform weights of a window of a whole turn, pi / 2N, count each stitched projection
 * once instead of twice), filtered over the virtual width (zero padding to the engine's
 * filter length, so the ramp's tails reach the other half as the stitched projection's
 * would) and back-projected over the turn. The result equals FBP of the stitched half-turn
 * sinogram with that overlap weighting; incremental updates stay exact.
 *
 * The engine below this file sees the virtual detector (its config's cols and centre);
 * frames of the real detector are embedded here, on the host, into float32 rows (darks
 * pad with 0, flats and projections with 1: open beam). Frames in GPU memory are not
 * supported (they would need the embedding on the device).
 *
 * The axis may move after the start (set_center, or center_auto from the estimate of
 * center.c, which correlates only the real detector's columns: tl_halfacq_span). The
 * embedding does not depend on the axis, only the weights do (tl_halfacq_center), and
 * they apply to the projections that come after the move. Inwards the axis may always
 * move; outwards, with the centre estimated, the virtual detector has TL_HALFACQ_MARGIN
 * spare columns beyond the stitched field's far edge, for a move of up to half of them.
 * Not without estimation: there the filtered projection's tails would reach into the
 * spare columns and show in the corners of the slices, outside the field of view, which
 * would no longer equal a wide detector's. A move beyond needs the scan started again
 * with the new centre.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine_impl.h"

/* spare virtual columns beyond the stitched field: the axis may move by half of them */
#define TL_HALFACQ_MARGIN 32

struct tl_halfacq {
    uint32_t rows, cols; /* the real detector */
    tl_dtype dtype;      /* its frames' dtype */
    uint32_t vcols, off; /* the virtual detector; where the real one starts in it */
    double center;       /* the axis on the real detector */
    float *frame;        /* rows x vcols: the embedded frame */
};

tl_status tl_halfacq_setup(tl_engine_config *c, tl_errbuf *eb, tl_halfacq **out)
{
    *out = NULL;
    if (!c->half_acquisition)
        return TL_OK;
    double w = c->cols, cen = c->center;
    if (!(cen >= 0 && cen <= w - 1))
        return tl_fail(eb, TL_EINVAL,
                       "half acquisition: the axis column %g must be on the detector (0..%u)", cen,
                       c->cols - 1);
    /* axis right of the middle: the far edge is column 0, whose mirror 2c must fit: the
     * detector at offset 0 of floor(2c) + 1 columns; left of it: the far edge is W − 1,
     * mirrored to 2c − (W − 1) < 0, so the detector moves right by the difference; the
     * margin beyond either */
    bool right = cen >= (w - 1) / 2;
    uint32_t margin = c->center_estimate || c->center_auto ? TL_HALFACQ_MARGIN : 0;
    uint32_t off = right ? 0 : (uint32_t)ceil(w - 1 - 2 * cen) + margin;
    uint64_t vcols = right ? (uint64_t)floor(2 * cen) + 1 + margin : (uint64_t)off + c->cols;
    if (vcols < c->cols)
        vcols = c->cols;
    if (vcols > 65536)
        return tl_fail(eb, TL_EINVAL, "half acquisition: virtual detector of %llu columns",
                       (unsigned long long)vcols);
    tl_halfacq *h = calloc(1, sizeof *h);
    if (!h)
        return tl_fail(eb, TL_ENOMEM, "out of memory");
    h->rows = c->rows;
    h->cols = c->cols;
    h->dtype = c->dtype;
    h->vcols = (uint32_t)vcols;
    h->center = cen;
    h->off = off;
    h->frame = malloc((size_t)h->rows * h->vcols * sizeof *h->frame);
    if (!h->frame) {
        free(h);
        return tl_fail(eb, TL_ENOMEM, "out of memory for the half acquisition's frame");
    }
    c->cols = h->vcols;
    c->center = cen + h->off;
    c->dtype = TL_DTYPE_F32;
    *out = h;
    return TL_OK;
}

void tl_halfacq_span(const tl_halfacq *h, uint32_t *first, uint32_t *cols)
{
    *first = h->off;
    *cols = h->cols;
}

/* The mirror of the real detector about the virtual axis cv must stay on the virtual
 * detector (half a column of rounding allowed, as at setup). */
static bool fits(const tl_halfacq *h, double cv)
{
    double lo = 2 * cv - (h->off + h->cols - 1.0), hi = 2 * cv - h->off;
    return lo >= -0.5 && hi <= h->vcols - 0.5;
}

bool tl_halfacq_fits(const tl_halfacq *h, double center)
{
    return isfinite(center) && center >= 0 && center <= h->cols - 1.0 && fits(h, center + h->off);
}

tl_status tl_halfacq_center(const tl_halfacq *h, double center, double *virt, tl_errbuf *eb)
{
    if (!(isfinite(center) && center >= 0 && center <= h->cols - 1.0))
        return tl_fail(eb, TL_EINVAL,
                       "half acquisition: the axis column %g must be on the detector (0..%u)",
                       center, h->cols - 1);
    if (!fits(h, center + h->off))
        return tl_fail(eb, TL_EINVAL,
                       "half acquisition: the axis moved from %g to %g, beyond the virtual "
                       "detector's margin (%d columns): start the scan again with this centre",
                       h->center, center, TL_HALFACQ_MARGIN);
    *virt = center + h->off;
    return TL_OK;
}

void tl_halfacq_free(tl_halfacq *h)
{
    if (!h)
        return;
    free(h->frame);
    free(h);
}

double tl_halfacq_weight(const tl_halfacq *h, double cv, uint32_t v)
{
    double first = h->off, last = h->off + h->cols - 1.0, x = v, wt;
    if (x < first || x > last)
        return 0;
    /* the overlap: columns seen by this projection and, mirrored, by its opposite */
    double a = fmax(first, 2 * cv - last), b = fmin(last, 2 * cv - first);
    bool sees_left = first < a;   /* the detector's own part is left of the overlap */
    if (b <= a || x < a || x > b) /* no overlap, or this view alone */
        wt = 1;
    else {
        double t = (x - a) / (b - a);
        wt = sees_left ? cos(M_PI_2 * t) * cos(M_PI_2 * t) : sin(M_PI_2 * t) * sin(M_PI_2 * t);
    }
    return 2 * wt; /* a whole turn counts each stitched projection twice */
}

tl_status tl_halfacq_weights(const tl_halfacq *h, const tl_engine_config *c,
                             const tl_backend_ops *ops, void *be, tl_errbuf *eb)
{
    double *w = calloc(h->vcols, sizeof *w);
    if (!w)
        return tl_fail(eb, TL_ENOMEM, "out of memory for the column weights");
    for (uint32_t v = h->off; v < h->off + h->cols; v++)
        w[v] = tl_halfacq_weight(h, c->center, v);
    tl_status st = ops->set_column_weights
                       ? ops->set_column_weights(be, w)
                       : tl_fail(eb, TL_EUNSUPPORTED, "backend without column weights");
    free(w);
    return st;
}

tl_status tl_halfacq_embed(tl_halfacq *h, const tl_frame *f, tl_frame *out, tl_errbuf *eb)
{
    if (f->rows != h->rows || f->cols != h->cols || f->dtype != h->dtype)
        return tl_fail(eb, TL_ESHAPE, "frame %u x %u of dtype %d, scan expects %u x %u of %d",
                       f->rows, f->cols, (int)f->dtype, h->rows, h->cols, (int)h->dtype);
    if (f->memory != TL_MEMORY_HOST)
        return tl_fail(eb, TL_EUNSUPPORTED, "half acquisition takes frames in host memory only");
    const float pad = f->kind == TL_FRAME_DARK ? 0.f : 1.f; /* open beam */
    size_t pitch = f->pitch ? f->pitch : (size_t)f->cols * tl_dtype_size(f->dtype);
    for (uint32_t r = 0; r < h->rows; r++) {
        float *row = h->frame + (size_t)r * h->vcols;
        const unsigned char *src = (const unsigned char *)f->data + r * pitch;
        for (uint32_t v = 0; v < h->vcols; v++)
            row[v] = pad;
        float *dst = row + h->off;
        for (uint32_t u = 0; u < h->cols; u++) {
            uint16_t u16;
            uint32_t u32;
            float f32;
            switch (f->dtype) {
                case TL_DTYPE_U8: dst[u] = src[u]; break;
                case TL_DTYPE_U16:
                    memcpy(&u16, src + 2 * (size_t)u, 2);
                    dst[u] = u16;
                    break;
                case TL_DTYPE_U32:
                    memcpy(&u32, src + 4 * (size_t)u, 4);
                    dst[u] = (float)u32;
                    break;
                case TL_DTYPE_F32:
                    memcpy(&f32, src + 4 * (size_t)u, 4);
                    dst[u] = f32;
                    break;
            }
        }
    }
    *out = *f;
    out->dtype = TL_DTYPE_F32;
    out->cols = h->vcols;
    out->pitch = 0;
    out->data = h->frame;
    out->pinned = false;
    out->read_later = false;
    return TL_OK;
}
