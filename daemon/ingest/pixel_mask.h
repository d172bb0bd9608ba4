/* pixel_mask.h — a detector's pixel mask applied to its frames: each masked pixel filled
 * from unmasked neighbours before the frame goes on to reconstruction.
 *
 * DECTRIS detectors send the mask once per series (the Stream V2 start message with
 * header_detail "all": per channel, bit flags per pixel, nonzero = masked — gaps between
 * chips, dead, hot, noisy pixels). A masked pixel holds no usable count (with masking on,
 * the detector writes all ones there), and one such value spreads along its whole line
 * through the filter. tl_pixel_mask_build turns the mask into a list of fills once, at the
 * start: each masked pixel with the two unmasked pixels it is interpolated from, the
 * nearest on either side along its row (a detector row is a sinogram line, so the fill
 * follows it); a row masked whole takes its column instead, and a pixel whose row and
 * column are both masked whole the nearest unmasked pixel of the nearest row that has one.
 * A frame then costs one pass over the masked pixels and allocates nothing.
 *
 *   tl_pixel_mask pm = {0};
 *   start:  tl_pixel_mask_build(&pm, mask, elem_size, rows, cols, why, sizeof why);
 *   frame:  n = tl_pixel_mask_apply(&pm, pixels, dtype);      (pixels may be unaligned)
 *   done:   tl_pixel_mask_free(&pm);
 */
#ifndef TL_PIXEL_MASK_H
#define TL_PIXEL_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/protocol.h"

typedef struct {
    uint32_t at;             /* the masked pixel (row * cols + col) */
    uint32_t from_a, from_b; /* the unmasked pixels its value comes from */
    float weight_a;          /* value = weight_a * a + (1 - weight_a) * b */
} tl_pixel_fill;

typedef struct {
    uint32_t rows, cols; /* of the frames it applies to; 0 x 0: no mask */
    tl_pixel_fill *fills;
    size_t n, cap; /* fills in use, allocated */
} tl_pixel_mask;

/* The fills of a rows x cols mask of elem_size-byte elements (any byte order: a pixel is
 * masked when any byte of its element is nonzero). The fill list grows only when a mask
 * has more masked pixels than any before. 0, or -1 with why (every pixel masked, out of
 * memory); pm then holds no mask. */
int tl_pixel_mask_build(tl_pixel_mask *pm, const void *mask, size_t elem_size, uint32_t rows,
                        uint32_t cols, char *why, size_t whylen);
/* No mask (the next series sent none); the fill list is kept for reuse. */
void tl_pixel_mask_clear(tl_pixel_mask *pm);
/* Fills the masked pixels of a rows x cols frame of dtype in place (integer types rounded
 * to the nearest); returns how many it filled. */
size_t tl_pixel_mask_apply(const tl_pixel_mask *pm, void *pixels, tl_proto_dtype dtype);
void tl_pixel_mask_free(tl_pixel_mask *pm);

#endif
