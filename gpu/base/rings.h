/* rings.h — what the engine and the backends share of ring removal (types.h, tl_rings;
 * ARCHITECTURE.md §3.11): the defaults, the cadence of the estimate's updates, the
 * wavelet, and the column profile's weight. The backends compute the estimate (CPU:
 * gpu/cpu/rings.c, the float64 reference; CUDA: gpu/cuda/rings.cu) the same way:
 *   VO (Vo et al. 2018, Opt. Express 26:28396: the sorting-based method's median
 *      across columns): est = m − median over `size` columns of m, the
 *      neighbourhood mirrored at the edges (TL_MIRROR, as the dezinger's). Sorting a
 *      column along the angles does not change its mean, so the profile m is the mean
 *      row of Vo's sorted sinogram;
 *   FW (Münch et al. 2009, Opt. Express 17:8567, wavelet–Fourier): m extended symmetrically to
 *      a period 2W (then periodically to a multiple of 2^level), decomposed with the
 *      periodised db5 wavelet over `level` levels, reconstructed from the approximation
 *      alone: est = m − that. Münch damps the vertical detail coefficients by
 *      1 − exp(−k²/2σ²) along the angle axis; at k = 0, the profile's only frequency,
 *      the factor is 0 whatever σ, so σ has no role here.
 * m is the running mean of each detector pixel over the projections: weight 1/k for the
 * k-th (k <= window), 1/window afterwards (an exponential memory of about one window).
 */
#ifndef TL_RINGS_H
#define TL_RINGS_H

#include "gpu/base/types.h"

#define TL_RINGS_DEFAULT_SIZE 31 /* Vo's median width (Savu's and sarepy's default) */
/* FW's wavelet levels: 1-2 leave a one-pixel stripe's coarser details, 4-5 take the
 * object's edges (those of its mean projection) for stripes (tests/unit/check_corrections) */
#define TL_RINGS_DEFAULT_LEVEL 3
#define TL_RINGS_DEFAULT_TOLERANCE 1e-3 /* -log units: 0.1 % of transmission */
#define TL_RINGS_MAX_SIZE 101           /* widest median */
#define TL_RINGS_MAX_LEVEL 10
#define TL_RINGS_UPDATES_PER_WINDOW 16 /* the estimate is recomputed every window/16 frames */
#define TL_RINGS_DB5_TAPS 10

/* Daubechies' db5 scaling (low-pass) filter, orthonormal (Daubechies 1992, Ten Lectures
 * on Wavelets; tomopy's remove_stripe_fw default wavelet). */
static const double tl_rings_db5[TL_RINGS_DB5_TAPS] =
    {0.160102397974125,     0.6038292697974729,   0.7243085284385744,  0.13842814590110342,
     -0.24229488706619015,  -0.03224486958502952, 0.07757149384006515, -0.006241490213011705,
     -0.012580751999015526, 0.003335725285001549};

/* Projections between two updates of the estimate, for a window of n. */
static inline uint32_t tl_rings_interval(uint32_t n)
{
    uint32_t k = n / TL_RINGS_UPDATES_PER_WINDOW;
    return k ? k : 1;
}

/* The weight of the k-th projection (k >= 1) in the running profile. */
static inline double tl_rings_weight(uint64_t k, uint32_t n)
{
    return 1.0 / (double)(k < n ? k : n);
}

/* FW's transform length for W columns: a multiple of 2^level, at least 2W. */
static inline uint32_t tl_rings_fw_length(uint32_t cols, uint32_t level)
{
    uint32_t q = 1u << level;
    return (2 * cols + q - 1) / q * q;
}

#endif
