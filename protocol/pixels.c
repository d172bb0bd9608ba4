/* pixels.c — see pixels.h.
 *
 * The conversions run over every pixel of every published slice (4 M for 2048²), so the
 * float <-> half loops use the F16C instructions where the CPU has them (checked once at
 * run time; every x86-64 CPU since 2013 does) and a portable bit-exact routine otherwise.
 * q16 takes two passes: the range, then the codes. LZ4 is the library's default block
 * compressor (liblz4), which decompresses at several GB/s.
 */
#include "config.h"

#include <lz4.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "protocol/pixels.h"
#include "protocol/proto_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define TL_HAVE_F16C_PATH 1
#endif

#define Q16_MAX 65535.0

/* ---- binary16, portable ------------------------------------------------------------------ */

uint16_t tl_proto_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int32_t exp = (int32_t)((x >> 23) & 0xffu);
    if (exp == 0xff) /* inf, nan (kept a nan) */
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    exp -= 127 - 15;
    if (exp >= 0x1f) /* too large: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) { /* subnormal or zero */
        if (exp < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
        half++; /* may carry into the exponent, up to inf: correct */
    return (uint16_t)(sign | half);
}

float tl_proto_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1f) {
        x = sign | 0x7f800000u | (mant << 13);
    } else if (exp) {
        x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    } else if (mant) { /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            mant <<= 1;
        } while (!(mant & 0x400u));
        x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    } else {
        x = sign;
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* ---- binary16, whole arrays ---------------------------------------------------------------- */

#ifdef TL_HAVE_F16C_PATH
__attribute__((target("avx,f16c"))) static void to_f16_f16c(const float *src, uint16_t *dst,
                                                            size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = tl_proto_f32_to_f16(src[i]);
}

__attribute__((target("avx,f16c"))) static void from_f16_f16c(const uint16_t *src, float *dst,
                                                              size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = tl_proto_f16_to_f32(src[i]);
}

static bool have_f16c(void)
{
    static int have = -1; /* a benign race: every thread computes the same answer */
    unsigned eax, ebx, ecx, edx;
    /* F16C from CPUID itself: clang 14's __builtin_cpu_supports does not know "f16c" */
    if (have < 0)
        have = __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
               (ecx & bit_F16C) != 0;
    return have;
}
#endif

static void to_f16(const float *src, uint16_t *dst, size_t n)
{
#ifdef TL_HAVE_F16C_PATH
    if (have_f16c()) {
        to_f16_f16c(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = tl_proto_f32_to_f16(src[i]);
}

static void from_f16(const uint16_t *src, float *dst, size_t n)
{
#ifdef TL_HAVE_F16C_PATH
    if (have_f16c()) {
        from_f16_f16c(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = tl_proto_f16_to_f32(src[i]);
}

/* ---- q16 ------------------------------------------------------------------------------------ */

static void to_q16(const float *src, uint16_t *dst, size_t n, double *scale, double *offset)
{
    float lo = n ? src[0] : 0, hi = lo;
    for (size_t i = 0; i < n; i++) {
        lo = src[i] < lo ? src[i] : lo;
        hi = src[i] > hi ? src[i] : hi;
    }
    *offset = lo;
    *scale = hi > lo ? ((double)hi - lo) / Q16_MAX : 1.0; /* flat: every code 0 */
    float inv = (float)(1.0 / *scale), base = lo;
    for (size_t i = 0; i < n; i++) {
        float code = (src[i] - base) * inv + 0.5f;
        dst[i] = (uint16_t)(code < 0 ? 0 : code > (float)Q16_MAX ? Q16_MAX : code);
    }
}

static void from_q16(const uint16_t *src, float *dst, size_t n, double scale, double offset)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (float)(offset + scale * src[i]);
}

/* Integers, at any alignment, widened forwards (as the codes below). */
static void widen_integers(const unsigned char *raw, tl_proto_dtype dtype, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t v16;
        uint32_t v32;
        if (dtype == TL_PROTO_U8) {
            dst[i] = raw[i];
        } else if (dtype == TL_PROTO_U16) {
            memcpy(&v16, raw + 2 * i, 2);
            dst[i] = v16;
        } else {
            memcpy(&v32, raw + 4 * i, 4);
            dst[i] = (float)v32;
        }
    }
}

/* ---- the payload ---------------------------------------------------------------------------- */

size_t tl_proto_pixels_bound(size_t n, tl_proto_dtype dtype, bool lz4)
{
    size_t raw = n * tl_proto_dtype_size(dtype);
    size_t staged = dtype == TL_PROTO_F32 ? 0 : raw; /* f16/q16 codes before compression */
    return lz4 ? staged + (size_t)LZ4_compressBound((int)raw) : staged;
}

int tl_proto_pixels_encode(const float *src, size_t n, tl_proto_slice *h, void *dst, size_t cap,
                           const void **payload, size_t *len)
{
    bool codes = h->dtype == TL_PROTO_F16 || h->dtype == TL_PROTO_Q16;
    if ((!codes && h->dtype != TL_PROTO_F32) || cap < tl_proto_pixels_bound(n, h->dtype, h->lz4) ||
        n * 4 >= TL_PROTO_MAX_FRAME_BYTES)
        return -1;
    const void *raw = src;
    size_t raw_len = n * tl_proto_dtype_size(h->dtype);
    h->scale = 1;
    h->offset = 0;
    if (h->dtype == TL_PROTO_F16)
        to_f16(src, dst, n);
    else if (h->dtype == TL_PROTO_Q16)
        to_q16(src, dst, n, &h->scale, &h->offset);
    if (codes)
        raw = dst;
    if (!h->lz4) {
        *payload = raw;
        *len = raw_len;
        return 0;
    }
    char *out = (char *)dst + (codes ? raw_len : 0);
    int z = LZ4_compress_default(raw, out, (int)raw_len, (int)(cap - (size_t)(out - (char *)dst)));
    if (z <= 0)
        return -1;
    *payload = out;
    *len = (size_t)z;
    return 0;
}

tl_proto_err tl_proto_pixels_decode(const tl_proto_slice *s, float *dst, tl_proto_error *err)
{
    size_t n = (size_t)s->shape[0] * s->shape[1], raw_len = n * tl_proto_dtype_size(s->dtype);
    const void *raw = s->payload;
    if (s->lz4) {
        /* f32 decompresses straight into dst; codes into its upper half */
        char *to = s->dtype == TL_PROTO_F32 ? (char *)dst : (char *)dst + n * 4 - raw_len;
        int got = LZ4_decompress_safe(s->payload, to, (int)s->payload_len, (int)raw_len);
        if (got != (int)raw_len)
            return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                                 "LZ4 payload of %zu bytes does not decompress to %zu",
                                 s->payload_len, raw_len);
        raw = to;
    } else if (s->payload_len != raw_len) {
        return tl_proto_fail(err, TL_PROTO_E_PAYLOAD, "payload is %zu bytes, want %zu",
                             s->payload_len, raw_len);
    }
    /* codes decompressed into dst's upper half widen forwards: writing pixel i overwrites
     * only codes before i, already read (8 at a time: those before i + 8) */
    switch (s->dtype) {
        case TL_PROTO_F32:
            if (raw != dst)
                memcpy(dst, raw, raw_len);
            return TL_PROTO_OK;
        case TL_PROTO_F16: from_f16(raw, dst, n); return TL_PROTO_OK;
        case TL_PROTO_Q16: from_q16(raw, dst, n, s->scale, s->offset); return TL_PROTO_OK;
        case TL_PROTO_U8:
        case TL_PROTO_U16:
        case TL_PROTO_U32: /* not what the daemon sends, but a slice may carry them */
            widen_integers(raw, s->dtype, dst, n);
            return TL_PROTO_OK;
        default:
            return tl_proto_fail(err, TL_PROTO_E_DTYPE, "dtype %d is not a known dtype",
                                 (int)s->dtype);
    }
}
