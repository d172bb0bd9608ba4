/* preview.h — slices as the preview page receives them: downsampled to fit the view and
 * quantised to 8 or 16 bits, with the scale in a small binary header.
 *
 * A browser needs neither float32 nor full resolution: a 2048² slice is 16 MiB of float32
 * but 256 KiB as a 512² 8-bit image. Downsampling averages f x f blocks (f the smallest
 * integer that brings both sides within the preview size), which keeps edges honest where
 * picking every f-th pixel would alias; quantisation maps [lo, hi] — the image's own
 * minimum and maximum — onto 0 .. 2^bits - 1, and the header carries lo and hi, so the
 * page can show values in the slice's units and stretch the contrast itself.
 *
 * One message (little-endian, TL_PREVIEW_HDR bytes of header, then the pixels row by row):
 *
 *   off size field
 *     0   4  magic "TLPV"
 *     4   1  version (1)
 *     5   1  bits per pixel: 8 or 16
 *     6   1  view (index into the page's views)
 *     7   1  flags: bit 0 = final slice of a scan
 *     8   2  width  (pixels of this image)
 *    10   2  height
 *    12   4  source width  (pixels of the slice the daemon reconstructed)
 *    16   4  source height
 *    20   4  projections used
 *    24   4  missing projections
 *    28   4  lo (float32): the value of pixel 0
 *    32   4  hi (float32): the value of pixel 2^bits - 1
 *    36  36  orientation (9 float32: x-axis, y-axis, base; protocol/PROTOCOL.md §10)
 *    72   8  seq of the slice
 *    80   8  t_acq, ns since the epoch (acquisition of the newest projection used)
 *    88   8  t_pub, ns since the epoch (when the daemon sent it to the page)
 *    96      pixels: width x height of uint8 or uint16; value = lo + q (hi - lo) / (2^bits - 1)
 *
 * Pure functions, no allocation: the caller owns every buffer (see http.c).
 */
#ifndef TL_PREVIEW_H
#define TL_PREVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TL_PREVIEW_HDR 96
#define TL_PREVIEW_VERSION 1

typedef struct {
    uint8_t bits; /* 8 or 16 */
    uint8_t view;
    bool final;
    uint32_t width, height; /* of the preview image */
    uint32_t src_width, src_height;
    uint32_t projections_used, missing;
    float lo, hi;
    float orientation[9];
    uint64_t seq, t_acq, t_pub;
} tl_preview_hdr;

/* The block size f and the preview's size for an h x w slice and a largest side max_side
 * (>= 1): f = max(ceil(h / max_side), ceil(w / max_side)), *oh = ceil(h / f), *ow = ceil(w / f). */
uint32_t tl_preview_factor(uint32_t h, uint32_t w, uint32_t max_side, uint32_t *oh, uint32_t *ow);

/* Averages f x f blocks of src (h x w) into out (ceil(h/f) x ceil(w/f)); blocks at the
 * right and bottom edges average the pixels they have. Non-finite pixels are left out of
 * their block's average (a block without any finite pixel gives NaN). */
void tl_preview_downsample(const float *src, uint32_t h, uint32_t w, uint32_t f, float *out);

/* Bytes of a message for an oh x ow preview at bits per pixel. */
size_t tl_preview_bytes(uint32_t oh, uint32_t ow, int bits);

/* Writes the header and the quantised pixels of img (hdr->height x hdr->width floats) into
 * out (cap bytes). Sets hdr->lo and hi to the smallest and largest finite value (hi = lo + 1
 * when the image is flat or has no finite value; non-finite pixels become 0). Returns the
 * bytes written, or 0 when cap is too small or bits is not 8 or 16. */
size_t tl_preview_encode(const float *img, tl_preview_hdr *hdr, uint8_t *out, size_t cap);

/* Reads a message's header back (for tests and clients). Returns 0, or -1 when len is not
 * exactly the header plus its pixels, or the magic, version or bits are wrong. */
int tl_preview_decode(const uint8_t *msg, size_t len, tl_preview_hdr *hdr);

#endif
