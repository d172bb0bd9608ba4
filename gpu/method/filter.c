/* filter.c — FBP filter design (see filter.h for the definitions).
 *
 * The DFT of the spatial kernel is summed directly in double precision instead of calling
 * an FFT: it runs once per scan (or filter change), needs no library, and is exact to
 * rounding. Only odd lags are non-zero, so a 4096-point design is ~2 M cosines.
 */
#include "config.h"

#include <math.h>

#include "gpu/method/filter.h"

size_t tl_filter_padded_length(uint32_t cols)
{
    size_t p = 4; /* so that the lag P/2 is even and carries no weight */
    while (p < 2 * (size_t)cols)
        p *= 2;
    return p;
}

static double window(tl_filter f, double w)
{
    switch (f) {
        case TL_FILTER_RAMLAK: return 1.0;
        case TL_FILTER_SHEPP_LOGAN: {
            double a = M_PI * w / 2.0;
            return a == 0.0 ? 1.0 : sin(a) / a;
        }
        case TL_FILTER_COSINE: return cos(M_PI * w / 2.0);
        case TL_FILTER_HAMMING: return 0.54 + 0.46 * cos(M_PI * w);
        case TL_FILTER_HANN: return 0.5 * (1.0 + cos(M_PI * w));
        case TL_FILTER_PARZEN:
            return w <= 0.5 ? 1.0 - 6.0 * w * w + 6.0 * w * w * w : 2.0 * pow(1.0 - w, 3.0);
        default: return 1.0;
    }
}

tl_status tl_filter_response(tl_filter f, size_t padded, double *H)
{
    if (padded < 2 || padded % 2 || (unsigned)f >= TL_FILTER_COUNT || !H)
        return TL_EINVAL;
    size_t half = padded / 2;
    if (f == TL_FILTER_NONE) {
        for (size_t k = 0; k <= half; k++)
            H[k] = 1.0;
        return TL_OK;
    }
    for (size_t k = 0; k <= half; k++) {
        /* H(k) = h(0) + 2 sum_{n odd, n < P/2} h(n) cos(2 pi k n / P); the lag n = P/2 is
         * even (P is a power of two >= 4) and contributes nothing. */
        double sum = 0.25;
        double step = 2.0 * M_PI * (double)k / (double)padded;
        for (size_t n = 1; n < half; n += 2)
            sum -= 2.0 * cos(step * (double)n) / (M_PI * M_PI * (double)n * (double)n);
        H[k] = sum * window(f, 2.0 * (double)k / (double)padded);
    }
    return TL_OK;
}
