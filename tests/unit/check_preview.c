/* check_preview.c — the preview images of the HTTP server (daemon/preview.h): the
 * downsampling factor, downsampling, quantisation to 8 and 16 bits, and the binary header.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/serve/preview.h"
#include "tests/testutil.h"

START_TEST(preview_factor)
{
    uint32_t oh, ow;
    ck_assert_uint_eq(tl_preview_factor(512, 512, 512, &oh, &ow), 1);
    ck_assert_uint_eq(oh, 512);
    ck_assert_uint_eq(ow, 512);
    ck_assert_uint_eq(tl_preview_factor(1024, 2048, 512, &oh, &ow), 4);
    ck_assert_uint_eq(oh, 256);
    ck_assert_uint_eq(ow, 512);
    ck_assert_uint_eq(tl_preview_factor(1000, 1000, 512, &oh, &ow), 2);
    ck_assert_uint_eq(oh, 500);
    ck_assert_uint_eq(tl_preview_factor(513, 10, 512, &oh, &ow), 2); /* 513 > 512: halve */
    ck_assert_uint_eq(oh, 257);
    ck_assert_uint_eq(ow, 5);
    ck_assert_uint_eq(tl_preview_factor(48, 256, 64, &oh, &ow), 4);
    ck_assert_uint_eq(oh, 12);
    ck_assert_uint_eq(ow, 64);
}
END_TEST

START_TEST(preview_downsample)
{
    /* 5 x 5, f = 2: 3 x 3 blocks; the last row and column average what they have */
    float src[25], out[9];
    for (int i = 0; i < 25; i++)
        src[i] = (float)i;
    tl_preview_downsample(src, 5, 5, 2, out);
    ck_assert_float_eq(out[0], (0 + 1 + 5 + 6) / 4.0f);
    ck_assert_float_eq(out[1], (2 + 3 + 7 + 8) / 4.0f);
    ck_assert_float_eq(out[2], (4 + 9) / 2.0f);
    ck_assert_float_eq(out[6], (20 + 21) / 2.0f);
    ck_assert_float_eq(out[8], 24.0f);
    /* non-finite pixels leave their block's average; a block of only NaN is NaN */
    src[0] = NAN;
    src[1] = INFINITY;
    tl_preview_downsample(src, 5, 5, 2, out);
    ck_assert_float_eq(out[0], (5 + 6) / 2.0f);
    src[5] = src[6] = NAN;
    tl_preview_downsample(src, 5, 5, 2, out);
    ck_assert(isnan(out[0]));
    /* f = 1 copies */
    float one[4] = {1, 2, 3, 4}, copy[4];
    tl_preview_downsample(one, 2, 2, 1, copy);
    ck_assert(memcmp(one, copy, sizeof one) == 0);
}
END_TEST

START_TEST(preview_encode_values)
{
    float img[4] = {0, 1, 2, 3};
    tl_preview_hdr h = {.bits = 8,
                        .view = 2,
                        .final = true,
                        .width = 2,
                        .height = 2,
                        .src_width = 4,
                        .src_height = 4,
                        .projections_used = 180,
                        .missing = 3,
                        .seq = 0x123456789abcull,
                        .t_acq = 1700000000123456789ull,
                        .t_pub = 1700000000223456789ull};
    for (int i = 0; i < 9; i++)
        h.orientation[i] = (float)i - 4.5f;
    uint8_t buf[TL_PREVIEW_HDR + 8];
    ck_assert_uint_eq(tl_preview_bytes(2, 2, 8), TL_PREVIEW_HDR + 4);
    ck_assert_uint_eq(tl_preview_encode(img, &h, buf, sizeof buf), TL_PREVIEW_HDR + 4);
    ck_assert_float_eq(h.lo, 0);
    ck_assert_float_eq(h.hi, 3);
    ck_assert(memcmp(buf, "TLPV", 4) == 0);
    ck_assert_uint_eq(buf[TL_PREVIEW_HDR + 0], 0);
    ck_assert_uint_eq(buf[TL_PREVIEW_HDR + 1], 85);
    ck_assert_uint_eq(buf[TL_PREVIEW_HDR + 2], 170);
    ck_assert_uint_eq(buf[TL_PREVIEW_HDR + 3], 255);
    /* the header reads back */
    tl_preview_hdr r;
    ck_assert_int_eq(tl_preview_decode(buf, TL_PREVIEW_HDR + 4, &r), 0);
    ck_assert_uint_eq(r.bits, 8);
    ck_assert_uint_eq(r.view, 2);
    ck_assert(r.final);
    ck_assert_uint_eq(r.width, 2);
    ck_assert_uint_eq(r.height, 2);
    ck_assert_uint_eq(r.src_width, 4);
    ck_assert_uint_eq(r.projections_used, 180);
    ck_assert_uint_eq(r.missing, 3);
    ck_assert_uint_eq(r.seq, 0x123456789abcull);
    ck_assert_uint_eq(r.t_acq, 1700000000123456789ull);
    ck_assert_uint_eq(r.t_pub, 1700000000223456789ull);
    ck_assert_float_eq(r.lo, 0);
    ck_assert_float_eq(r.hi, 3);
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(r.orientation[i], (float)i - 4.5f);
    /* byte layout is little-endian at the documented offsets */
    ck_assert_uint_eq(buf[8], 2);
    ck_assert_uint_eq(buf[9], 0);
    ck_assert_uint_eq(buf[72], 0xbc);
    ck_assert_uint_eq(buf[73], 0x9a);
    /* wrong length, magic or bits */
    ck_assert_int_eq(tl_preview_decode(buf, TL_PREVIEW_HDR + 3, &r), -1);
    buf[0] = 'X';
    ck_assert_int_eq(tl_preview_decode(buf, TL_PREVIEW_HDR + 4, &r), -1);
}
END_TEST

START_TEST(preview_encode_16bit_and_edges)
{
    float img[4] = {-2, 0, NAN, 2};
    tl_preview_hdr h = {.bits = 16, .width = 4, .height = 1};
    uint8_t buf[TL_PREVIEW_HDR + 8];
    ck_assert_uint_eq(tl_preview_encode(img, &h, buf, sizeof buf), TL_PREVIEW_HDR + 8);
    ck_assert_float_eq(h.lo, -2);
    ck_assert_float_eq(h.hi, 2);
    const uint8_t *px = buf + TL_PREVIEW_HDR;
    ck_assert_uint_eq(px[0] | px[1] << 8, 0);
    ck_assert_uint_eq(px[2] | px[3] << 8, 32768); /* (0 - -2) / 4 * 65535 = 32767.5 -> 32768 */
    ck_assert_uint_eq(px[4] | px[5] << 8, 0);     /* NaN */
    ck_assert_uint_eq(px[6] | px[7] << 8, 65535);
    /* value = lo + q (hi - lo) / 65535 recovers the pixels to within half a step */
    double step = 4.0 / 65535;
    ck_assert(fabs(-2 + 32768 * step - 0) <= step / 2 + 1e-12);
    /* a flat image: hi = lo + 1, every code 0 */
    float flat[4] = {7, 7, 7, 7};
    h.bits = 8;
    ck_assert_uint_eq(tl_preview_encode(flat, &h, buf, sizeof buf), TL_PREVIEW_HDR + 4);
    ck_assert_float_eq(h.lo, 7);
    ck_assert_float_eq(h.hi, 8);
    ck_assert_uint_eq(buf[TL_PREVIEW_HDR], 0);
    /* too small a buffer, or an unsupported depth */
    ck_assert_uint_eq(tl_preview_encode(flat, &h, buf, TL_PREVIEW_HDR + 3), 0);
    h.bits = 12;
    ck_assert_uint_eq(tl_preview_encode(flat, &h, buf, sizeof buf), 0);
}
END_TEST

static Suite *preview_suite(void)
{
    Suite *s = suite_create("preview");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, preview_factor);
    tcase_add_test(tc, preview_downsample);
    tcase_add_test(tc, preview_encode_values);
    tcase_add_test(tc, preview_encode_16bit_and_edges);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(preview_suite(), false);
}
