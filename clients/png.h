/* png.h — 8-bit grayscale PNG previews of float images (libpng), for `tomolive sub`, the
 * demo and anyone who wants to look at a slice without a TIFF viewer.
 *
 * Contrast: values map linearly from [lo, hi] to [0, 255] and clamp outside it. The limits
 * are given, or by default the 0.5 and 99.5 percentiles of the finite pixels, so a few hot
 * pixels or a ring do not wash out the image. NaN pixels are black.
 *
 * Functions return 0 on success and -1 with a message in err.
 */
#ifndef TL_PNG_H
#define TL_PNG_H

#include <stddef.h>
#include <stdint.h>

/* The p_lo and p_hi percentiles (0..100, linear interpolation between order statistics)
 * of the finite values of img[0..n-1]. Returns -1 when there is no finite value. */
int tl_png_percentiles(const float *img, size_t n, double p_lo, double p_hi, double *lo,
                       double *hi);

/* Writes a rows x cols image (row 0 at the top) to path. limits: {lo, hi}, or NULL for the
 * 0.5 / 99.5 percentiles. An image with lo == hi comes out black. */
int tl_png_write_preview(const char *path, const float *img, uint32_t rows, uint32_t cols,
                         const double *limits, char *err, size_t errlen);

#endif
