/* volume_convert.c — see volume_convert.h.
 *
 * The vector paths convert 8 samples a step and leave the last n % 8 to the scalar
 * definitions. F16C (VCVTPS2PH with an explicit round-to-nearest-even, which ignores the
 * MXCSR's mode and FTZ) rounds, overflows and makes subnormals exactly as half_of does; it
 * differs only on NaN, where it keeps the payload's top bits (0x7fc02000 -> 0x7e01) and
 * half_of keeps none (0x7e00): a step holding a NaN (one compare and a mask test per step)
 * has its NaN lanes rewritten. u16 widens each half of a step to double and computes the
 * scalar expression operation for operation (a subtraction then a multiplication: nothing
 * to fuse), rounds in the current mode as nearbyint does, and clamps with max/min, whose
 * NaN rule (the second operand wins) gives the scalar path's NaN -> 0.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "clients/volume_convert.h"

/* IEEE half, round to nearest even; overflow to infinity, NaN quiet without payload. */
static uint16_t half_of(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xff, m = x & 0x7fffffu;
    if (e == 0xff)
        return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
    int32_t he = (int32_t)e - 127 + 15;
    if (he >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (he <= 0) { /* subnormal or zero */
        if (he < -10)
            return (uint16_t)sign;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - he), hm = m >> shift, rem = m & ((1u << shift) - 1),
                 halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (hm & 1)))
            hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t hm = m >> 13, rem = m & 0x1fffu;
    uint32_t h = sign | ((uint32_t)he << 10) | hm;
    if (rem > 0x1000u || (rem == 0x1000u && (hm & 1)))
        h++; /* may carry into the exponent: correct, up to infinity */
    return (uint16_t)h;
}

static uint16_t u16_of(float v, double offset, double scale)
{
    double s = nearbyint(((double)v - offset) * scale);
    return s >= 0 ? s <= 65535 ? (uint16_t)s : 65535 : 0; /* NaN -> 0 */
}

void tl_half_of_floats_scalar(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = half_of(src[i]);
}

void tl_u16_of_floats_scalar(uint16_t *dst, const float *src, size_t n, double offset,
                             double scale)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = u16_of(src[i], offset, scale);
}

void tl_finite_range(const float *src, size_t n, float *lo, float *hi)
{
    float l = *lo, h = *hi;
    for (size_t i = 0; i < n; i++)
        if (isfinite(src[i])) {
            l = src[i] < l ? src[i] : l;
            h = src[i] > h ? src[i] : h;
        }
    *lo = l;
    *hi = h;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_PATHS 1

__attribute__((target("f16c,avx"))) static void half_f16c(uint16_t *dst, const float *src,
                                                          size_t n)
{
    const __m128i sign = _mm_set1_epi16((short)0x8000), qnan = _mm_set1_epi16(0x7e00);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(src + i);
        __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
        if (_mm256_movemask_ps(nan)) {
            __m256i m32 = _mm256_castps_si256(nan);
            __m128i m16 = _mm_packs_epi32(_mm256_castsi256_si128(m32),
                                          _mm256_extractf128_si256(m32, 1));
            h = _mm_blendv_epi8(h, _mm_or_si128(_mm_and_si128(h, sign), qnan), m16);
        }
        _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
    }
    tl_half_of_floats_scalar(dst + i, src + i, n - i);
}

/* Four samples: the scalar expression in double, rounded and clamped. */
__attribute__((target("avx"))) static inline __m128i u16_step(__m128 v, __m256d off,
                                                              __m256d scale)
{
    __m256d s = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(v), off), scale);
    s = _mm256_round_pd(s, _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC);
    s = _mm256_min_pd(_mm256_max_pd(s, _mm256_setzero_pd()), _mm256_set1_pd(65535.0));
    return _mm256_cvtpd_epi32(s);
}

__attribute__((target("avx"))) static void u16_avx(uint16_t *dst, const float *src, size_t n,
                                                   double offset, double scale)
{
    __m256d off = _mm256_set1_pd(offset), sc = _mm256_set1_pd(scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i a = u16_step(_mm_loadu_ps(src + i), off, sc),
                b = u16_step(_mm_loadu_ps(src + i + 4), off, sc);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), _mm_packus_epi32(a, b));
    }
    tl_u16_of_floats_scalar(dst + i, src + i, n - i, offset, scale);
}

/* libgcc sets "avx" (and so the F16C path's use of it) only where the OS saves the YMM
 * state, so a CPU that has the instructions under a kernel that disabled them is scalar */
static int have_f16c(void)
{
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}

static int have_avx(void)
{
    return __builtin_cpu_supports("avx");
}
#else
#define HAVE_X86_PATHS 0
#endif

void tl_half_of_floats(uint16_t *dst, const float *src, size_t n)
{
#if HAVE_X86_PATHS
    if (have_f16c()) {
        half_f16c(dst, src, n);
        return;
    }
#endif
    tl_half_of_floats_scalar(dst, src, n);
}

void tl_u16_of_floats(uint16_t *dst, const float *src, size_t n, double offset, double scale)
{
#if HAVE_X86_PATHS
    if (have_avx()) {
        u16_avx(dst, src, n, offset, scale);
        return;
    }
#endif
    tl_u16_of_floats_scalar(dst, src, n, offset, scale);
}

const char *tl_convert_paths(void)
{
#if HAVE_X86_PATHS
    return have_f16c() ? "f16c+avx" : have_avx() ? "avx" : "scalar";
#else
    return "scalar";
#endif
}
