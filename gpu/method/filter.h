/* filter.h — design of the FBP filters, shared by every backend (ARCHITECTURE.md §3.5).
 *
 * The ramp is the DFT of the band-limited spatial kernel h(0) = 1/4, h(odd n) = -1/(pi n)^2,
 * h(even n) = 0, laid out circularly over the padded length P (>= 2 W, so the circular
 * convolution of a zero-padded row equals the linear one on the W output bins and there is
 * no DC bias). The windowed filters multiply the ramp by a window of the normalised
 * frequency w = 2k/P in [0, 1]:
 *   ram-lak 1;  shepp-logan sinc(w/2);  cosine cos(pi w/2);  hamming 0.54 + 0.46 cos(pi w);
 *   hann (1 + cos(pi w))/2;  parzen 1 - 6w^2 + 6w^3 (w <= 1/2), 2(1 - w)^3 (w > 1/2).
 * The response is real (h is even): H[k] for k = 0 .. P/2. A backend applies it as
 * irfft(rfft(row padded with zeros) * H / P) and keeps the first W values.
 */
#ifndef TL_FILTER_H
#define TL_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/base/types.h"

/* Padded row length for a detector of `cols` columns: the smallest power of two >= 2 cols. */
size_t tl_filter_padded_length(uint32_t cols);

/* Fills H[0 .. padded/2] (padded even). TL_FILTER_NONE gives H = 1 (identity). */
tl_status tl_filter_response(tl_filter f, size_t padded, double *H);

#endif
