/* check_volume_convert.c — the volume output's conversions (clients/volume_convert.h).
 *
 * The vector paths (F16C, AVX: whichever this CPU runs; on others both sides are the
 * scalar path and the comparisons hold trivially) must give the scalar definitions' bits:
 * compared over every exponent with every rounding remainder, a stride through all 2^32
 * float patterns (NaN payloads and infinities included), random floats, unaligned
 * buffers and lengths that are not a multiple of the vector width. The scalar definitions
 * are held to known values, so the two cannot agree on a wrong answer. All 2^32 patterns
 * take minutes: test_exhaustive, by hand only.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clients/volume_convert.h"
#include "tests/testutil.h"

static float f_of(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t next32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Both paths over n samples (converted from src + 1: unaligned), sample by sample. */
static void same_half(const float *src, size_t n)
{
    uint16_t *a = malloc((n + 1) * 2), *b = malloc((n + 1) * 2);
    ck_assert(a && b);
    tl_half_of_floats(a + 1, src, n);
    tl_half_of_floats_scalar(b + 1, src, n);
    for (size_t i = 0; i < n; i++) {
        if (a[i + 1] == b[i + 1])
            continue; /* (a passing ck_assert costs a message to the parent process) */
        uint32_t x;
        memcpy(&x, &src[i], 4);
        ck_abort_msg("%s: float 0x%08x -> 0x%04x, scalar 0x%04x", tl_convert_paths(), x,
                     a[i + 1], b[i + 1]);
    }
    free(a);
    free(b);
}

static void same_u16(const float *src, size_t n, double offset, double scale)
{
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
    ck_assert(a && b);
    tl_u16_of_floats(a, src, n, offset, scale);
    tl_u16_of_floats_scalar(b, src, n, offset, scale);
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            ck_abort_msg("%s: %.9g (offset %g scale %g) -> %u, scalar %u", tl_convert_paths(),
                         src[i], offset, scale, a[i], b[i]);
    free(a);
    free(b);
}

START_TEST(test_half_definition)
{
    static const struct {
        uint32_t in;
        uint16_t out;
    } known[] = {
        {0x00000000, 0x0000}, {0x80000000, 0x8000}, /* signed zeros */
        {0x3f800000, 0x3c00}, {0xc0000000, 0xc000}, /* 1, -2 */
        {0x477fe000, 0x7bff},                       /* 65504, the largest half */
        {0x477fefff, 0x7bff},                       /* just below the tie: down */
        {0x477ff000, 0x7c00},                       /* 65520: the tie goes to infinity */
        {0x7f7fffff, 0x7c00}, {0xff800000, 0xfc00}, /* overflow, -infinity */
        {0x33800000, 0x0001},                       /* 2^-24, the smallest subnormal */
        {0x33000000, 0x0000},                       /* 2^-25: tie to even, zero */
        {0x33000001, 0x0001},                       /* above the tie: up */
        {0x33c00000, 0x0002},                       /* 1.5 x 2^-24: tie to even, 2 */
        {0x38800000, 0x0400},                       /* 2^-14, the smallest normal */
        {0x387fe000, 0x0400},                       /* 1023.5 x 2^-24: up into it */
        {0x387fc000, 0x03ff},                       /* 1023 x 2^-24, the largest subnormal */
        {0x00000001, 0x0000}, {0x807fffff, 0x8000}, /* float subnormals: signed zero */
        {0x3f801000, 0x3c00}, {0x3f803000, 0x3c02}, /* ties: to the even mantissa */
        {0x7fc00000, 0x7e00}, {0xffc00000, 0xfe00}, /* quiet NaNs */
        {0x7f800001, 0x7e00}, {0x7fc02000, 0x7e00}, /* payloads are not kept */
        {0x7fffffff, 0x7e00},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        float f = f_of(known[i].in);
        uint16_t h, v;
        tl_half_of_floats_scalar(&h, &f, 1);
        ck_assert_msg(h == known[i].out, "0x%08x -> 0x%04x, not 0x%04x", known[i].in, h,
                      known[i].out);
        tl_half_of_floats(&v, &f, 1);
        ck_assert_uint_eq(v, h);
    }
    /* the same values eight at a time, in every lane, next to ordinary ones */
    size_t n = sizeof known / sizeof known[0];
    float v[16 * 32];
    for (size_t i = 0; i < 16 * n; i++)
        v[i] = i % 2 ? f_of(known[(i / 2) % n].in) : (float)i;
    same_half(v, 16 * n);
}
END_TEST

START_TEST(test_half_every_remainder)
{
    /* every sign and exponent with all 2^13 patterns of the bits a normal half drops,
     * under four patterns of the bits it keeps (subnormal halves drop more: the sweep
     * and the random floats below cover those too) */
    static const uint32_t high[4] = {0, 0x2000, 0x3fe000, 0x7fe000};
    enum { N = 4 << 13 };
    float *v = malloc(N * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (uint32_t se = 0; se < 512; se++) {
        for (uint32_t i = 0; i < N; i++)
            v[i] = f_of(se << 23 | high[i >> 13] | (i & 0x1fff));
        same_half(v, N - 3); /* a length that is not a multiple of 8 */
    }
    free(v);
}
END_TEST

START_TEST(test_half_sweep_and_random)
{
    enum { N = 1 << 20 };
    float *v = malloc(N * sizeof *v);
    ck_assert_ptr_nonnull(v);
    /* every 251st bit pattern of all 2^32 (NaNs with payloads, infinities, subnormals) */
    for (uint64_t base = 0; base < (1ULL << 32); base += (uint64_t)N * 251) {
        size_t n = 0;
        for (uint64_t x = base; n < N && x < (1ULL << 32); x += 251)
            v[n++] = f_of((uint32_t)x);
        same_half(v, n);
    }
    /* random bit patterns, then values of a reconstruction's scale */
    for (size_t i = 0; i < N; i++)
        v[i] = f_of(next32());
    same_half(v, N);
    for (size_t i = 0; i < N; i++)
        v[i] = (float)((int32_t)next32() * 0x1p-37);
    same_half(v, N);
    free(v);
}
END_TEST

START_TEST(test_u16)
{
    /* the definition: round half to even, clamp, NaN -> 0 */
    static const float in[] = {0.5f, 1.5f, 2.5f, -0.5f, -0.0f, -1.0f, 65534.5f, 65535.5f,
                               70000.0f, NAN, -NAN, INFINITY, -INFINITY, 3.49f};
    static const uint16_t out[] = {0, 2, 2, 0, 0, 0, 65534, 65535, 65535, 0, 0, 65535, 0, 3};
    uint16_t got[14];
    tl_u16_of_floats_scalar(got, in, 14, 0.0, 1.0);
    for (int i = 0; i < 14; i++)
        ck_assert_msg(got[i] == out[i], "%g -> %u, not %u", in[i], got[i], out[i]);
    same_u16(in, 14, 0.0, 1.0);
    /* exact ties of (v - offset) * scale in double, at another offset and scale */
    float t[64];
    for (int i = 0; i < 64; i++)
        t[i] = (float)(i * 0.25 - 3.0);
    same_u16(t, 64, -2.0, 2.0);
    /* every 251st bit pattern and random floats, through a reconstruction's range */
    enum { N = 1 << 20 };
    float *v = malloc(N * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (uint64_t base = 0; base < (1ULL << 32); base += (uint64_t)N * 251) {
        size_t n = 0;
        for (uint64_t x = base; n < N && x < (1ULL << 32); x += 251)
            v[n++] = f_of((uint32_t)x);
        same_u16(v, n, -0.001, 65535.0 / 0.022);
    }
    /* every 61st float from 0.25 to past 65536 at unit scale: the ties and the clamp */
    for (uint32_t base = 0x3e800000; base < 0x47800100; base += N * 61) {
        size_t n = 0;
        for (uint32_t x = base; n < N && x < 0x47800100; x += 61)
            v[n++] = f_of(x);
        same_u16(v, n, 0.0, 1.0);
    }
    for (size_t i = 0; i < N; i++)
        v[i] = (float)((int32_t)next32() * 0x1p-35);
    same_u16(v, N - 5, -0.001, 65535.0 / 0.022);
    same_u16(v, N, 0.0, 1e6);
    free(v);
}
END_TEST

START_TEST(test_range)
{
    float v[] = {0.0f, NAN, -0.0f, 2.0f, INFINITY, -INFINITY, -0.0f, 0.0f};
    float lo = INFINITY, hi = -INFINITY;
    tl_finite_range(v, 8, &lo, &hi);
    ck_assert(lo == 0.0f && !signbit(lo)); /* the first of the equal minima */
    ck_assert(hi == 2.0f);
    lo = INFINITY, hi = -INFINITY;
    tl_finite_range(v + 4, 2, &lo, &hi); /* nothing finite: unchanged */
    ck_assert(isinf(lo) && lo > 0 && isinf(hi) && hi < 0);
}
END_TEST

/* All 2^32 bit patterns, both conversions: minutes (4.5 on a 2-core VM), so only by hand
 * (TL_CONVERT_EXHAUSTIVE=1 tests/unit/check_volume_convert); the sweeps above are the
 * routine's share of it. */
START_TEST(test_exhaustive)
{
    if (!getenv("TL_CONVERT_EXHAUSTIVE"))
        return;
    enum { N = 1 << 24 };
    float *v = malloc(N * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (uint64_t base = 0; base < (1ULL << 32); base += N) {
        for (uint32_t i = 0; i < N; i++)
            v[i] = f_of((uint32_t)(base + i));
        same_half(v, N);
        same_u16(v, N, -0.001, 65535.0 / 0.022);
        same_u16(v, N, 0.0, 1.0);
    }
    free(v);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("volume_convert");
    TCase *tc = tcase_create("convert");
    tcase_set_timeout(tc, getenv("TL_CONVERT_EXHAUSTIVE") ? 3600 : 120);
    tcase_add_test(tc, test_half_definition);
    tcase_add_test(tc, test_half_every_remainder);
    tcase_add_test(tc, test_half_sweep_and_random);
    tcase_add_test(tc, test_u16);
    tcase_add_test(tc, test_range);
    tcase_add_test(tc, test_exhaustive);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
