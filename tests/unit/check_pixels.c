/* check_pixels.c — the compact slice encodings (protocol/pixels.h, PROTOCOL.md §10.3):
 * binary16 against the float64 value it stands for (round to nearest even, subnormals,
 * overflow), the F16C path equal to the portable one bit for bit, q16 within scale / 2,
 * LZ4 round trips, a corrupt LZ4 payload refused, and the header keys: q16 needs scale and
 * offset, an unknown compression or a slice dtype in a frame is refused.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/pixels.h"
#include "tests/testutil.h"
#include "tests/unit/check_proto_util.h"

enum { H = 61, W = 67, N = H * W }; /* odd sizes: the vector loops' tails run too */

/* A reconstructed slice's kind of image: a smooth field with a step and negative values
 * inside the reconstruction circle, zeros outside it. */
static void phantom(float *px)
{
    for (int i = 0; i < N; i++) {
        double y = i / W - H / 2.0, x = i % W - W / 2.0;
        bool inside = x * x + y * y < 0.25 * H * H;
        px[i] = inside ? (float)(sin(i * 0.013) * 3.5 + (x > 0 ? 0.75 : -0.25)) : 0.0f;
    }
}

static tl_proto_slice decoded_from(const tl_proto_slice *h, const void *payload, size_t len)
{
    tl_proto_slice s = *h;
    s.shape[0] = H;
    s.shape[1] = W;
    s.payload = payload;
    s.payload_len = len;
    return s;
}

/* Encodes px as dtype (lz4 or not) and decodes it again into out. */
static tl_proto_slice round_trip(const float *px, tl_proto_dtype dtype, bool lz4, float *out,
                                 size_t *len)
{
    size_t cap = tl_proto_pixels_bound(N, dtype, lz4) + 1;
    void *dst = malloc(cap);
    tl_proto_slice h = {.dtype = dtype, .lz4 = lz4};
    const void *payload;
    ck_assert_int_eq(tl_proto_pixels_encode(px, N, &h, dst, cap, &payload, len), 0);
    tl_proto_slice s = decoded_from(&h, payload, *len);
    tl_proto_error e;
    ck_assert_msg(tl_proto_pixels_decode(&s, out, &e) == TL_PROTO_OK, "%s", e.message);
    free(dst);
    return h;
}

START_TEST(binary16_against_float64)
{
    /* exact values, ties to even, the largest finite, overflow, subnormals, signs */
    const struct {
        float in;
        double want;
    } cases[] = {
        {1.0f, 1.0},
        {-2.5f, -2.5},
        {65504.0f, 65504.0},
        {65520.0f, INFINITY},
        {1.0f + 1.0f / 2048, 1.0},              /* a tie: to the even 1.0 */
        {1.0f + 3.0f / 2048, 1.0 + 2.0 / 1024}, /* a tie: to the even 1+2^-9 */
        {6.0e-8f, 5.9604644775390625e-08},      /* the smallest subnormal */
        {1.0e-9f, 0.0},
        {0.0f, 0.0},
        {-0.0f, -0.0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        float got = tl_proto_f16_to_f32(tl_proto_f32_to_f16(cases[k].in));
        ck_assert_msg(got == cases[k].want, "%.9g -> %.9g, want %.9g", cases[k].in, got,
                      cases[k].want);
    }
    ck_assert(isnan(tl_proto_f16_to_f32(tl_proto_f32_to_f16(NAN))));
    /* every half value survives the trip back, and normal floats round within 2^-11 */
    for (uint32_t h = 0; h < 0x7c00; h++)
        ck_assert_uint_eq(tl_proto_f32_to_f16(tl_proto_f16_to_f32((uint16_t)h)), h);
    for (double x = 6.2e-5; x < 6.0e4; x *= 1.0007) {
        double got = tl_proto_f16_to_f32(tl_proto_f32_to_f16((float)x));
        ck_assert_msg(fabs(got - x) <= ldexp(x, -11) * 1.0001, "%.9g -> %.9g", x, got);
    }
}
END_TEST

START_TEST(f16_arrays_as_scalars)
{
    float px[N], out[N];
    phantom(px);
    size_t len;
    round_trip(px, TL_PROTO_F16, false, out, &len);
    ck_assert_uint_eq(len, N * 2);
    for (int i = 0; i < N; i++) /* the vector path (F16C) equals the portable one */
        ck_assert_msg(out[i] == tl_proto_f16_to_f32(tl_proto_f32_to_f16(px[i])), "pixel %d", i);
}
END_TEST

START_TEST(q16_within_half_a_step)
{
    float px[N], out[N];
    phantom(px);
    size_t len;
    tl_proto_slice h = round_trip(px, TL_PROTO_Q16, false, out, &len);
    ck_assert_uint_eq(len, N * 2);
    float lo = px[0], hi = px[0];
    for (int i = 0; i < N; i++) {
        lo = fminf(lo, px[i]);
        hi = fmaxf(hi, px[i]);
    }
    ck_assert_double_eq_tol(h.offset, lo, 1e-12);
    ck_assert_double_eq_tol(h.scale, ((double)hi - lo) / 65535, 1e-12);
    for (int i = 0; i < N; i++)
        ck_assert_msg(fabs((double)out[i] - px[i]) <= h.scale * 0.5 + 1e-6 * fabs(px[i]),
                      "pixel %d: %.9g vs %.9g (scale %g)", i, out[i], px[i], h.scale);
    /* a flat slice: every code 0, the value exact */
    for (int i = 0; i < N; i++)
        px[i] = 2.25f;
    h = round_trip(px, TL_PROTO_Q16, false, out, &len);
    ck_assert(h.scale > 0);
    for (int i = 0; i < N; i++)
        ck_assert(out[i] == 2.25f);
}
END_TEST

START_TEST(lz4_round_trips)
{
    float px[N], plain[N], out[N];
    phantom(px);
    const tl_proto_dtype dtypes[] = {TL_PROTO_F32, TL_PROTO_F16, TL_PROTO_Q16};
    for (int k = 0; k < 3; k++) {
        size_t len, zlen;
        round_trip(px, dtypes[k], false, plain, &len);
        round_trip(px, dtypes[k], true, out, &zlen);
        ck_assert_msg(!memcmp(out, plain, sizeof out), "%s: LZ4 changed the pixels",
                      tl_proto_dtype_name(dtypes[k]));
        ck_assert_uint_lt(zlen, len); /* the zeros outside the circle compress */
    }
    /* a corrupt block is refused, never decoded into garbage */
    size_t cap = tl_proto_pixels_bound(N, TL_PROTO_F16, true);
    char *dst = malloc(cap);
    tl_proto_slice h = {.dtype = TL_PROTO_F16, .lz4 = true};
    const void *payload;
    size_t len;
    ck_assert_int_eq(tl_proto_pixels_encode(px, N, &h, dst, cap, &payload, &len), 0);
    tl_proto_slice s = decoded_from(&h, payload, len / 2);
    tl_proto_error e;
    ck_assert_int_eq(tl_proto_pixels_decode(&s, out, &e), TL_PROTO_E_PAYLOAD);
    /* too little room is refused before anything is written */
    ck_assert_int_eq(tl_proto_pixels_encode(px, N, &h, dst, cap - 1, &payload, &len), -1);
    free(dst);
}
END_TEST

/* The header keys of §10.3, through the real encoder and decoder. */
#define SLICE                                                                         \
    "{\"v\": 1, \"type\": \"slice\", \"id\": \"z0\", \"seq\": 3, \"shape\": [4, 4], " \
    "\"dtype\": \"f32\", \"orientation\": [1, 0, 0, 0, 1, 0, 0, 0, 0.5], "            \
    "\"projections_used\": 180, \"missing\": 0, \"window\": [10, 189], "              \
    "\"t_acq\": 1, \"t_pub\": 2, \"kernel\": \"cpu-ref\"}"
#define FRAME                                                                            \
    "{\"v\": 1, \"type\": \"frame\", \"series\": 7, \"index\": 42, \"kind\": \"proj\", " \
    "\"dtype\": \"u16\", \"shape\": [4, 6], \"angle\": 0.5, \"t_acq\": 17}"

/* Decodes the header written as text; its code must be want. */
static void expect(tl_proto_decoder *dec, const char *text, unsigned accept, tl_proto_err want)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    tlt_pack_text(&sb, text);
    tl_proto_msg m;
    tl_proto_error e = {TL_PROTO_OK, ""};
    tl_proto_err rc = tl_proto_decode(dec, sb.data, sb.size, accept, &m, &e);
    ck_assert_msg(rc == want, "%s: got %s (%s), want %s", text, tl_proto_err_name(rc), e.message,
                  tl_proto_err_name(want));
    msgpack_sbuffer_destroy(&sb);
}

START_TEST(header_keys)
{
    tl_proto_decoder *dec = tl_proto_decoder_new();
    tl_proto_slice h = {.id = {"a", 1},
                        .seq = 3,
                        .shape = {H, W},
                        .dtype = TL_PROTO_Q16,
                        .scale = 0.5,
                        .offset = -2,
                        .lz4 = true,
                        .kernel = {"k", 1}};
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    ck_assert_int_eq(tl_proto_encode_slice(&b, &h), 0);
    tl_proto_msg m;
    tl_proto_error e;
    ck_assert_msg(tl_proto_decode(dec, b.data, b.size, TL_MSG_SLICE, &m, &e) == TL_PROTO_OK, "%s",
                  e.message);
    ck_assert_int_eq(m.slice.dtype, TL_PROTO_Q16);
    ck_assert(m.slice.lz4);
    ck_assert_double_eq(m.slice.scale, 0.5);
    ck_assert_double_eq(m.slice.offset, -2);
    /* refusals: q16 without its mapping, a bad scale, an unknown compression */
    char q16[512], base[512]; /* tlt_with returns one static buffer: copies */
    snprintf(q16, sizeof q16, "%s", tlt_with(SLICE, "dtype", "\"q16\""));
    snprintf(base, sizeof base, "%s", tlt_with(q16, "offset", "0.0"));
    expect(dec, base, TL_MSG_SLICE, TL_PROTO_E_MISSING);
    expect(dec, tlt_with(base, "scale", "0.0"), TL_MSG_SLICE, TL_PROTO_E_RANGE);
    expect(dec, tlt_with(base, "scale", "0.25"), TL_MSG_SLICE, TL_PROTO_OK);
    expect(dec, tlt_with(SLICE, "compression", "\"zstd\""), TL_MSG_SLICE, TL_PROTO_E_RANGE);
    expect(dec, tlt_with(SLICE, "compression", "\"lz4\""), TL_MSG_SLICE, TL_PROTO_OK);
    /* a slice dtype in a frame: refused by name */
    expect(dec, tlt_with(FRAME, "dtype", "\"f16\""), TL_MSG_FRAME, TL_PROTO_E_DTYPE);
    expect(dec, tlt_with(FRAME, "dtype", "\"q16\""), TL_MSG_FRAME, TL_PROTO_E_DTYPE);
    msgpack_sbuffer_destroy(&b);
    tl_proto_decoder_free(dec);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pixels");
    TCase *t = tcase_create("pixels");
    tcase_add_test(t, binary16_against_float64);
    tcase_add_test(t, f16_arrays_as_scalars);
    tcase_add_test(t, q16_within_half_a_step);
    tcase_add_test(t, lz4_round_trips);
    tcase_add_test(t, header_keys);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
