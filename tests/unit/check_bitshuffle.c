/* check_bitshuffle.c — daemon/bitshuffle: frames compressed here with liblz4 and shuffled
 * by a straightforward bit-by-bit reference of the bitshuffle layout (bit k of byte j of
 * element i is bit i of bit-row 8j + k, least significant bit first), framed as the HDF5
 * filters frame them (12-byte big-endian header, per block a big-endian size), must decode
 * bit-exactly: bslz4 for 1-, 2- and 4-byte elements, several blocks, a short last block
 * and a raw tail of fewer than 8 elements; LZ4 in HDF5 framing with compressed and raw
 * blocks; a bare LZ4 block. Every defect is refused: declared size against the shape,
 * truncation, corrupt LZ4, a compression bomb (refused before any work).
 */
#include "config.h"

#include <lz4.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/bitshuffle.h"
#include "tests/compress_encode.h"
#include "tests/testutil.h"

/* The reference transposition of one block of n elements (n a multiple of 8). */
static void ref_shuffle(const uint8_t *in, uint8_t *out, size_t n, size_t elem)
{
    memset(out, 0, n * elem);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < elem; j++)
            for (int k = 0; k < 8; k++)
                if (in[i * elem + j] >> k & 1) {
                    size_t bit = (j * 8 + (size_t)k) * n + i;
                    out[bit / 8] |= (uint8_t)(1u << (bit % 8));
                }
}

/* bslz4 in the HDF5 framing, block of `block` elements. Returns the length. */
static size_t ref_bslz4(const uint8_t *in, size_t n, size_t elem, size_t block, uint8_t *out)
{
    tlt_put_be(out, n * elem, 8);
    tlt_put_be(out + 8, block * elem, 4);
    size_t len = 12, done = 0;
    uint8_t *tmp = malloc(block * elem);
    while (n - done >= 8) {
        size_t m = n - done >= block ? block : (n - done) - (n - done) % 8;
        ref_shuffle(in + done * elem, tmp, m, elem);
        int c = LZ4_compress_default((const char *)tmp, (char *)out + len + 4, (int)(m * elem),
                                     LZ4_compressBound((int)(m * elem)));
        ck_assert_int_gt(c, 0);
        tlt_put_be(out + len, (uint64_t)c, 4);
        len += 4 + (size_t)c;
        done += m;
    }
    memcpy(out + len, in + done * elem, (n - done) * elem);
    len += (n - done) * elem;
    free(tmp);
    return len;
}

/* LZ4 in the HDF5 framing; blocks that do not shrink are stored raw. */
static size_t ref_lz4(const uint8_t *in, size_t bytes, size_t block, uint8_t *out)
{
    tlt_put_be(out, bytes, 8);
    tlt_put_be(out + 8, block, 4);
    size_t len = 12;
    for (size_t done = 0; done < bytes;) {
        size_t m = bytes - done < block ? bytes - done : block;
        int c = LZ4_compress_default((const char *)in + done, (char *)out + len + 4, (int)m,
                                     LZ4_compressBound((int)m));
        ck_assert_int_gt(c, 0);
        if ((size_t)c >= m) {
            memcpy(out + len + 4, in + done, m);
            c = (int)m;
        }
        tlt_put_be(out + len, (uint64_t)c, 4);
        len += 4 + (size_t)c;
        done += m;
    }
    return len;
}

/* Detector-like data: a smooth image with noise, so it compresses but not trivially. */
static uint8_t *frame(size_t n, size_t elem, unsigned seed)
{
    uint8_t *v = malloc(n * elem);
    srand(seed);
    for (size_t i = 0; i < n; i++) {
        uint64_t x = (uint64_t)(1000 + 500 * ((i / 37) % 7) + rand() % 50);
        if (i % 101 == 0)
            x = (uint64_t)rand() << 32 | (uint64_t)rand(); /* hot pixels use the high bytes too */
        memcpy(v + i * elem, &x, elem); /* the low elem bytes (little-endian host) */
    }
    return v;
}

START_TEST(untranspose_matches_reference)
{
    size_t sizes[] = {1, 2, 4, 8};
    for (int e = 0; e < 4; e++) {
        size_t elem = sizes[e], n = 8 * 37;
        uint8_t *in = frame(n, elem, 7 + (unsigned)e), *sh = malloc(n * elem),
                *back = malloc(n * elem);
        ref_shuffle(in, sh, n, elem);
        ck_assert_int_eq(tl_bitshuffle_untranspose(sh, back, n, elem), 0);
        ck_assert_msg(memcmp(in, back, n * elem) == 0, "element size %zu", elem);
        free(in);
        free(sh);
        free(back);
    }
    uint8_t x[16];
    ck_assert_int_eq(tl_bitshuffle_untranspose(x, x + 8, 7, 1), -1); /* not a multiple of 8 */
}
END_TEST

START_TEST(bslz4_bit_exact)
{
    /* (elements, element size, block elements): one block, many, a short last block, a tail */
    struct {
        size_t n, elem, block;
    } cases[] = {
        {256 * 64, 2, 4096}, {256 * 64 + 3, 2, 4096}, {1000, 2, 64},   {1005, 4, 128}, {333, 1, 8},
        {7, 2, 64},          {64 * 64, 4, 2048},      {4099, 1, 8192},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t n = cases[c].n, elem = cases[c].elem, block = cases[c].block, bytes = n * elem;
        uint8_t *in = frame(n, elem, (unsigned)c);
        uint8_t *enc = malloc(12 + 2 * bytes + 4096), *out = malloc(bytes);
        size_t len = ref_bslz4(in, n, elem, block, enc);
        size_t need = tl_bitshuffle_scratch(enc, len);
        ck_assert_uint_eq(need, block * elem);
        void *scratch = malloc(need);
        char why[160] = "";
        memset(out, 0xAB, bytes);
        ck_assert_msg(tl_bitshuffle_decode_bslz4(enc, len, elem, out, bytes, scratch, need, why,
                                                 sizeof why) == 0,
                      "case %zu: %s", c, why);
        ck_assert_msg(memcmp(in, out, bytes) == 0, "case %zu: not bit-exact", c);
        /* the declared size must be the shape's */
        ck_assert_int_eq(tl_bitshuffle_decode_bslz4(enc, len, elem, out, bytes - elem, scratch,
                                                    need, why, sizeof why),
                         -1);
        ck_assert_msg(strstr(why, "differs"), "%s", why);
        /* truncated */
        ck_assert_int_eq(tl_bitshuffle_decode_bslz4(enc, len - 1, elem, out, bytes, scratch, need,
                                                    why, sizeof why),
                         -1);
        free(in);
        free(enc);
        free(out);
        free(scratch);
    }
}
END_TEST

START_TEST(lz4_bit_exact)
{
    size_t bytes = 256 * 64 * 2 + 6;
    uint8_t *in = frame(bytes / 2, 2, 3), *enc = malloc(12 + 2 * bytes + 4096),
            *out = malloc(bytes);
    char why[160] = "";
    /* blocks of 1000 bytes: compressed ones and, for the noise, raw ones */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            for (size_t i = 0; i < bytes; i++)
                in[i] = (uint8_t)rand(); /* incompressible: every block raw */
        size_t len = ref_lz4(in, bytes, 1000, enc);
        ck_assert_msg(tl_lz4_decode_hdf5(enc, len, out, bytes, why, sizeof why) == 0, "%s", why);
        ck_assert(memcmp(in, out, bytes) == 0);
        ck_assert_int_eq(tl_lz4_decode_hdf5(enc, len, out, bytes + 2, why, sizeof why), -1);
        ck_assert_int_eq(tl_lz4_decode_hdf5(enc, len + 1, out, bytes, why, sizeof why), -1);
    }
    /* a bare block */
    uint8_t *again = frame(bytes / 2, 2, 4);
    memcpy(in, again, bytes);
    free(again);
    int c = LZ4_compress_default((const char *)in, (char *)enc, (int)bytes,
                                 LZ4_compressBound((int)bytes));
    ck_assert_msg(tl_lz4_decode_block(enc, (size_t)c, out, bytes, why, sizeof why) == 0, "%s",
                  why);
    ck_assert(memcmp(in, out, bytes) == 0);
    ck_assert_int_eq(tl_lz4_decode_block(enc, (size_t)c, out, bytes - 1, why, sizeof why), -1);
    free(in);
    free(enc);
    free(out);
}
END_TEST

START_TEST(corrupt_and_bombs_refused)
{
    size_t n = 4096, elem = 2, bytes = n * elem;
    uint8_t *in = frame(n, elem, 9), *enc = malloc(4 * bytes), *out = malloc(bytes);
    size_t len = ref_bslz4(in, n, elem, 1024, enc);
    void *scratch = malloc(1024 * elem);
    char why[160];
    /* corrupt LZ4: a block's declared size points past its data */
    enc[12 + 3] ^= 0x40;
    ck_assert_int_eq(tl_bitshuffle_decode_bslz4(enc, len, elem, out, bytes, scratch, 2048, why,
                                                sizeof why),
                     -1);
    /* a bomb: 64 bytes claiming 1 GiB, refused before any block is read */
    uint8_t bomb[64] = {0};
    tlt_put_be(bomb, 1u << 30, 8);
    tlt_put_be(bomb + 8, 8192, 4);
    ck_assert_int_eq(tl_bitshuffle_decode_bslz4(bomb, sizeof bomb, 2, out, 1u << 30, scratch, 2048,
                                                why, sizeof why),
                     -1);
    ck_assert_msg(strstr(why, "bomb"), "%s", why);
    ck_assert_int_eq(tl_lz4_decode_hdf5(bomb, sizeof bomb, out, 1u << 30, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "bomb"), "%s", why);
    ck_assert_int_eq(tl_lz4_decode_block(bomb, sizeof bomb, out, 1u << 30, why, sizeof why), -1);
    /* a block size that is not a multiple of 8 elements */
    tlt_put_be(enc + 8, 1000, 4);
    ck_assert_int_eq(tl_bitshuffle_decode_bslz4(enc, len, elem, out, bytes, scratch, 2048, why,
                                                sizeof why),
                     -1);
    ck_assert_int_eq(tl_bitshuffle_decode_bslz4(enc, 5, elem, out, bytes, scratch, 2048, why,
                                                sizeof why),
                     -1);
    free(in);
    free(enc);
    free(out);
    free(scratch);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bitshuffle");
    TCase *tc = tcase_create("bitshuffle");
    tcase_add_test(tc, untranspose_matches_reference);
    tcase_add_test(tc, bslz4_bit_exact);
    tcase_add_test(tc, lz4_bit_exact);
    tcase_add_test(tc, corrupt_and_bombs_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
