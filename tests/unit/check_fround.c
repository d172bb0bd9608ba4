/* check_fround.c — the FP32 rounding trick of the ALU kernels (gpu/cuda/fround.h;
 * Chilingaryan et al. 2020, J. Real-Time Image Proc. 17:1331, Sect. 6.6;
 * ARCHITECTURE.md §5 A4 and §6.1 AC-9), on the host. The header is plain C outside
 * nvcc: its host path computes the sum h + 2^23 in round-down mode (fesetround), the
 * device path with __fadd_rd; both are the IEEE-754 single-precision add rounded toward
 * minus infinity, so the host checks the arithmetic the kernels run.
 *
 * What is asserted, for every h where tl_fround_ok(h) holds (the header's claims):
 *   - the float floor is exact: hf == floorf(h), no exception (no ties: rounding down);
 *   - the integer index equals it: i == (int)hf;
 *   - the weight f = h - hf is exact, f == h - floorf(h), and in [0, 1);
 *   - the index never leaves [0, ceil(h)] (the cache, AC-9, also for h < 1), and i + 1 is
 *     floor(h) + 1: the bins the exact interpolation reads, no more;
 *   - the interpolation a[i] + f (a[i+1] - a[i]) with random a (plain, and with fmaf as
 *     the GPU contracts it) equals the fp32 interpolation with the true floor within
 *     2 ulp x |a[i+1] - a[i]| + 1 ulp of the result (AC-9) — here bit for bit, since the
 *     index and weight are the true ones;
 *   - the caller's rounding mode is unchanged (the host path switches it and back);
 *   - tl_fround_ok is true on all of [0, 2^23) (the kernels keep h >= 1) and false for
 *     negative numbers, NaN, infinities and h >= 2^23;
 *   - the constants: TL_FROUND_BITS is the bit pattern of 2^23f (0x4B000000),
 *     TL_FROUND_TWO23 is 2^23, TL_FROUND_MAX 2^23; the paper's 0x4B000001 would give
 *     hf - 1 (AC-9: the bias constant).
 * Inputs: N_RANDOM random h (deterministic xorshift), 3/4 uniform in [1, 600] (the cache
 * offsets of the kernels' tiles) and 1/4 log-uniform over [1, 2^21) (the kernel's whole
 * range); every integer of [0, 2^23) with its neighbours (n, n +- 1 ulp, n + 0.5); the
 * 2^16 floats below 2^22 and below 2^23; every float of [1, 2); and [0, 1) (special values:
 * zeros, denormals, 0.25, 0.5, 1 - ulp, and 10^6 random values).
 * Timing (-O2, x86-64 development machine): the host path switches the rounding mode twice
 * per call (about 30 ns), so one h costs about 33 ns and one h with its interpolation check
 * about 100 ns: AC-9's 10^8 random values would take 10 s, so N_RANDOM is 2 x 10^7 (2.0 s),
 * next to 3.4 x 10^7 exhaustive integers and neighbours (1.1 s) and the 9.4 x 10^6 values
 * of [0, 2) (0.3 s); the whole binary takes about 3.5 s (each loop prints its time). Hot
 * loops use if + ck_abort_msg, not ck_assert: every passing ck_assert is a syscall.
 */
#include "config.h"

#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpu/cuda/fround.h"
#include "tests/testutil.h"

#define N_RANDOM 20000000L

static uint32_t float_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* xorshift64*: deterministic, fast */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static inline uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}
/* [0, 1) with 24 random bits */
static inline float rng_unit(void)
{
    return (float)(rng_next() >> 40) * (1.0f / 16777216.0f);
}
/* [-1, 1) */
static inline float rng_sym(void)
{
    return 2.0f * rng_unit() - 1.0f;
}

static inline float ulpf(float x)
{
    x = fabsf(x);
    return nextafterf(x, INFINITY) - x;
}

typedef struct {
    long checked, rejected;
} stats;

/* All properties for one h, asserted where tl_fround_ok admits it. Returns whether it was
 * checked. Check's assertions are reached only on failure (the fast path is a plain if). */
static inline int check_one(float h, stats *st)
{
    if (!tl_fround_ok(h)) {
        st->rejected++;
        return 0;
    }
    float hf;
    int i = tl_fround(h, &hf);
    float fl = floorf(h);
    float f = h - hf;
    st->checked++;

    if (hf != fl)
        ck_abort_msg("h = %.9g (bits 0x%08x): hf = %.9g, floorf(h) = %.9g", h, float_bits(h), hf,
                     fl);
    if (i != (int)hf || (float)i != hf)
        ck_abort_msg("h = %.9g (bits 0x%08x): index %d != (int)hf, hf = %.9g", h, float_bits(h), i,
                     hf);
    if (!(f >= 0.0f && f < 1.0f) || (double)f != (double)h - floor((double)h))
        ck_abort_msg("h = %.9g: weight f = h - hf = %.9g not the exact fraction in [0, 1)", h, f);
    if (i < 0 || (double)i > ceil((double)h) || (double)i != floor((double)h))
        ck_abort_msg("h = %.9g: index %d outside [0, ceil(h)] or not floor(h)", h, i);
    return 1;
}

/* The interpolation through the trick's (i, f) against the fp32 interpolation with the true
 * floor, on random cache values; *worst: the largest error as a fraction of the tolerance. */
static inline void check_interp(float h, double *worst)
{
    float hf;
    int i = tl_fround(h, &hf);
    float f = h - hf;
    int fl = (int)floorf(h);
    float fr = h - (float)fl;
    /* a[fl - 1], a[fl], a[fl + 1] as v[0..2]: a common scale and each value within 2^+-4
     * of it (values of one binade would subtract exactly), so the ulp of the result varies */
    uint64_t r = rng_next();
    float scale = ldexpf(1.0f, (int)(r % 16) - 8), v[3];
    for (int k = 0; k < 3; k++)
        v[k] = ldexpf(scale * rng_sym(), (int)((r >> (8 + 4 * k)) % 9) - 4);
    int j = i - fl + 1; /* v index of a[i] */
    if (j < 0 || j > 1)
        ck_abort_msg("h = %.9g: index %d, floor %d", h, i, fl);
    float d = v[j + 1] - v[j];
    float got = v[j] + f * d, got_fma = fmaf(f, d, v[j]);
    float dref = v[2] - v[1];
    float ref = v[1] + fr * dref, ref_fma = fmaf(fr, dref, v[1]);
    double delta = fabs((double)v[j + 1] - v[j]); /* |a[i+1] - a[i]| */
    double e1 = fabs((double)got - ref), e2 = fabs((double)got_fma - ref_fma);
    double tol1 = 2.0 * FLT_EPSILON * delta + ulpf(ref);
    double tol2 = 2.0 * FLT_EPSILON * delta + ulpf(ref_fma);
    if (e1 > tol1 || e2 > tol2) /* AC-9: 2 ulp x |a[i+1] - a[i]|, + 1 ulp of the result */
        ck_abort_msg("h = %.9g (index %d, f %.9g): interpolation %.9g (fma %.9g) vs true floor "
                     "%.9g (fma %.9g): error %.3g / %.3g > 2 eps x %.3g + ulp",
                     h, i, f, got, got_fma, ref, ref_fma, e1, e2, delta);
    double u = fmax(e1 / tol1, e2 / tol2);
    if (u > *worst)
        *worst = u;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* ---- constants and domain ---------------------------------------------------------------- */

START_TEST(constants)
{
    ck_assert_uint_eq((uint32_t)TL_FROUND_BITS, float_bits(ldexpf(1.0f, 23)));
    ck_assert_uint_eq((uint32_t)TL_FROUND_BITS, 0x4B000000u);
    ck_assert((double)TL_FROUND_TWO23 == ldexp(1.0, 23));
    ck_assert((double)TL_FROUND_MAX == ldexp(1.0, 23));

    /* the bias constant (AC-9): with 0x4B000000 the integer index is hf; the paper's
     * 0x4B000001 would give hf - 1 (it must be paired with a one-bin offset) */
    const float hs[] = {0.0f, 1.0f,   1.5f,   2.0f,       2.75f,
                        3.0f, 17.25f, 599.9f, 4194303.5f, 8388607.5f};
    for (size_t k = 0; k < sizeof hs / sizeof *hs; k++) {
        float hf;
        int i = tl_fround(hs[k], &hf);
        float t = hf + TL_FROUND_TWO23; /* exact: the t of the trick */
        ck_assert_int_eq(tl_fround_bits(t) - 0x4B000000, i);
        ck_assert_int_eq(tl_fround_bits(t) - 0x4B000001, i - 1);
        ck_assert((float)i == hf);
        ck_assert(hf == floorf(hs[k]));
    }
    /* a few by hand: rounding down, no ties. 3.5 tells it from a sum rounded to nearest
     * (8388611.5 ties to the even 8388612); 2.5 does not (8388610.5 -> 8388610) */
    float hf;
    ck_assert_int_eq(tl_fround(2.5f, &hf), 2);
    ck_assert_int_eq(tl_fround(3.5f, &hf), 3);
    ck_assert_int_eq(tl_fround(0.75f, &hf), 0);
    ck_assert_int_eq(tl_fround(599.75f, &hf), 599);
    ck_assert_int_eq(tl_fround(3.999999f, &hf), 3);
    ck_assert_int_eq(tl_fround(4.0f, &hf), 4);
    ck_assert_int_eq(tl_fround(5.0f, &hf), 5);
    ck_assert(hf == 5.0f);
    ck_assert_int_eq(tl_fround(nextafterf(5.0f, 0.0f), &hf), 4);
    ck_assert_int_eq(tl_fround(nextafterf(TL_FROUND_MAX, 0.0f), &hf), 8388607);

    /* the caller's rounding mode survives (the host path switches it and back), and does
     * not leak into the sum */
    ck_assert_int_eq(fegetround(), FE_TONEAREST);
    ck_assert_int_eq(fesetround(FE_UPWARD), 0);
    ck_assert_int_eq(tl_fround(2.5f, &hf), 2);
    ck_assert_int_eq(tl_fround(2.25f, &hf), 2);
    ck_assert_int_eq(fegetround(), FE_UPWARD);
    ck_assert_int_eq(fesetround(FE_TONEAREST), 0);
}
END_TEST

START_TEST(domain)
{
    /* [0, 2^23) admitted, everything else refused */
    ck_assert(tl_fround_ok(0.0f));
    ck_assert(tl_fround_ok(1.0f));
    ck_assert(tl_fround_ok(600.0f));
    ck_assert(tl_fround_ok(ldexpf(1.0f, 21)));
    ck_assert(tl_fround_ok(ldexpf(1.0f, 22)));
    ck_assert(tl_fround_ok(nextafterf(TL_FROUND_MAX, 0.0f)));
    ck_assert(!tl_fround_ok(TL_FROUND_MAX));
    ck_assert(!tl_fround_ok(ldexpf(1.0f, 24)));
    ck_assert(!tl_fround_ok(-1.0f));
    ck_assert(!tl_fround_ok(-FLT_MIN));
    ck_assert(!tl_fround_ok(-FLT_TRUE_MIN));
    ck_assert(!tl_fround_ok(NAN));
    ck_assert(!tl_fround_ok(INFINITY));
    ck_assert(!tl_fround_ok(-INFINITY));

    /* h in [0, 1): special values, then 10^6 random */
    stats st = {0};
    double t0 = now_s();
    const float special[] = {0.0f,         -0.0f,
                             FLT_TRUE_MIN, FLT_MIN,
                             1e-20f,       1e-7f,
                             0.1f,         nextafterf(0.25f, 0.0f),
                             0.25f,        nextafterf(0.25f, 1.0f),
                             0.3f,         nextafterf(0.5f, 0.0f),
                             0.5f,         nextafterf(0.5f, 1.0f),
                             0.75f,        nextafterf(1.0f, 0.0f)};
    for (size_t k = 0; k < sizeof special / sizeof *special; k++)
        if (!check_one(special[k], &st))
            ck_abort_msg("h = %.9g refused by tl_fround_ok", special[k]);
    for (long k = 0; k < 1000000; k++)
        if (!check_one(rng_unit(), &st))
            ck_abort_msg("a value of [0, 1) refused by tl_fround_ok");
    /* [1, 2): every float (2^23 of them) */
    for (float h = 1.0f; h < 2.0f; h = nextafterf(h, 2.0f))
        if (!check_one(h, &st))
            ck_abort_msg("h = %.9g refused by tl_fround_ok", h);
    printf("  [0, 1) and every float of [1, 2): %ld checked, %.2f s\n", st.checked, now_s() - t0);
}
END_TEST

/* Every integer of [0, 2^23) with its neighbours, and the floats just below 2^22 and 2^23. */
START_TEST(integers_and_edges)
{
    stats st = {0};
    double t0 = now_s();
    for (uint32_t n = 0; n < (1u << 23); n++) {
        float h = (float)n;
        check_one(h, &st);
        check_one(nextafterf(h, INFINITY), &st);
        if (n > 0)
            check_one(nextafterf(h, 0.0f), &st);
        check_one(h + 0.5f, &st);
    }
    const float edges[2] = {4194304.0f, TL_FROUND_MAX};
    for (int b = 0; b < 2; b++) {
        float h = edges[b];
        for (int k = 0; k < 65536; k++) {
            h = nextafterf(h, 0.0f);
            if (!check_one(h, &st))
                ck_abort_msg("h = %.9g refused by tl_fround_ok", h);
        }
    }
    printf("  integers of [0, 2^23), +- 1 ulp, + 0.5, 2^16 floats below 2^22 and 2^23: %ld "
           "checked, %ld refused, %.2f s\n",
           st.checked, st.rejected, now_s() - t0);
    ck_assert_int_eq(st.rejected, 0); /* all below 2^23 */

    /* the interpolation at and around integers: every one up to 2^16, then a sample */
    double worst = 0;
    for (uint32_t n = 1; n < (1u << 23); n = n < 65536 ? n + 1 : n + 61) {
        check_interp((float)n, &worst);
        check_interp(nextafterf((float)n, 0.0f), &worst);
        check_interp(nextafterf((float)n, INFINITY), &worst);
    }
    printf("  interpolation at integers +- 1 ulp: worst error %.3g of the tolerance\n", worst);
}
END_TEST

/* N_RANDOM random offsets: 3/4 in [1, 600], 1/4 log-uniform over [1, 2^21). */
START_TEST(random_offsets)
{
    stats st = {0};
    double worst = 0;
    double t0 = now_s();
    for (long k = 0; k < N_RANDOM; k++) {
        uint64_t r = rng_next();
        float h;
        if ((r & 3) != 0)
            h = 1.0f + 599.0f * rng_unit();
        else
            h = exp2f(21.0f * rng_unit());
        if (h >= ldexpf(1.0f, 21))
            h = nextafterf(ldexpf(1.0f, 21), 0.0f);
        if (!check_one(h, &st))
            ck_abort_msg("h = %.9g in the kernels' range refused by tl_fround_ok", h);
        check_interp(h, &worst);
    }
    double dt = now_s() - t0;
    printf("  %ld random offsets in [1, 2^21): worst interpolation error %.3g "
           "of the tolerance, %.2f s\n",
           N_RANDOM, worst, dt);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fround");
    TCase *tc = tcase_create("fround");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, constants);
    tcase_add_test(tc, domain);
    tcase_add_test(tc, integers_and_edges);
    tcase_add_test(tc, random_offsets);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
