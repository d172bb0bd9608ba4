/* fround.h — floor and integer index of a cache offset with one FP32 add: the rounding
 * trick of Chilingaryan et al. 2020, J. Real-Time Image Proc. 17:1331, Sect. 6.6
 * (ARCHITECTURE.md §5 A4, §7.1), shared by the ALU kernels (device) and by
 * tests/unit/check_fround.c (host), hence plain C.
 *
 * Why: on an H100 a float->int conversion or floorf runs at 16 per clock per SM, an FP32
 * add at 128 (measured: `tomolive tune`); an ALU kernel that converts once per update is
 * conversion-bound (ARCHITECTURE.md §4.3).
 *
 * How: for 0 <= h < 2^23, the sum t = h + 2^23 rounded toward minus infinity (one FADD
 * with the .RM modifier, __fadd_rd) is 2^23 + floor(h) exactly: floats in [2^23, 2^24)
 * are the integers. Then
 *   floor  hf  = t - 2^23                       (exact)
 *   index  i   = bits(t) - 0x4B000000           (an integer subtract; = hf, as an int)
 *   weight f   = h - hf                         (exact, in [0, 1))
 * The paper rounds to nearest with h - 0.499999 (CUDA 8 had no directed-rounding add in
 * its kernels' hot path) and its constant 0x4B000001 returns hf - 1, which needs a
 * one-bin bias (ARCHITECTURE.md §7.1); a round-to-nearest variant also has ties at
 * integers, where the index comes out one low and the weight 1 — still a correct
 * interpolation, but one that reads the neighbour and loses a few ulps next to large
 * values. Rounding down has neither problem. The kernels keep h >= 1 (their caches start
 * one bin below the lowest bin a tile needs); tl_fround_ok states the domain.
 *
 * The host version (for the tests) computes the same sum in round-down mode.
 */
#ifndef TL_CUDA_FROUND_H
#define TL_CUDA_FROUND_H

#include <stdint.h>
#include <string.h>
#ifndef __CUDA_ARCH__
#include <fenv.h>
#endif

#ifdef __CUDACC__
#define TL_FROUND_FN __host__ __device__ static inline
#else
#define TL_FROUND_FN static inline
#endif

#define TL_FROUND_TWO23 8388608.0f /* 2^23 */
#define TL_FROUND_BITS 0x4B000000  /* the bits of 2^23 */
#define TL_FROUND_MAX 8388608.0f   /* 2^23: the domain is [0, 2^23) */

TL_FROUND_FN int tl_fround_bits(float t)
{
#ifdef __CUDA_ARCH__
    return __float_as_int(t);
#else
    int32_t b;
    memcpy(&b, &t, sizeof b);
    return b;
#endif
}

/* h + k rounded toward minus infinity. With k = 2^23 + c (c a whole number, |c| < 2^22, so
 * k is exact) and 0 <= h + c < 2^23, this is 2^23 + floor(h + c): the kernels pass their
 * offset relative to the middle of their cache (h - c0) with k = 2^23 + c0, and get the
 * index of the bin below h in the bits. One FADD.RM on the device. */
TL_FROUND_FN float tl_fround_sum(float h, float k)
{
#ifdef __CUDA_ARCH__
    return __fadd_rd(h, k);
#else
    const int mode = fegetround();
    fesetround(FE_DOWNWARD);
    /* volatile in and out: the add must happen at run time and between the two mode
     * switches (without -frounding-math the compiler may otherwise move it past them) */
    volatile float vh = h;
    volatile float t = vh + k;
    fesetround(mode);
    return t;
#endif
}

/* floor(h) as a float (*hf) and as an int (returned); valid for 0 <= h < 2^23. */
TL_FROUND_FN int tl_fround(float h, float *hf)
{
    const float t = tl_fround_sum(h, TL_FROUND_TWO23); /* 2^23 + floor(h) */
    *hf = t - TL_FROUND_TWO23;                         /* exact */
    return tl_fround_bits(t) - TL_FROUND_BITS;
}

/* Whether h is in the trick's domain. */
TL_FROUND_FN int tl_fround_ok(float h)
{
    return h >= 0.0f && h < TL_FROUND_MAX;
}

#endif
