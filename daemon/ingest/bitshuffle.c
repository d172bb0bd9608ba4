/* bitshuffle.c — see bitshuffle.h. The untransposition works on 8 elements at a time: the
 * 8 bytes that hold bit 0..7 of byte j of those elements (one byte from each of 8 bit-rows)
 * form an 8 x 8 bit matrix whose transpose is byte j of each of the 8 elements. The
 * transpose is three delta swaps on a 64-bit word (Hacker's Delight, §7-3). LZ4 itself is
 * liblz4's LZ4_decompress_safe, which never writes past the capacity it is given. */
#include <config.h>

#include <limits.h>
#include <lz4.h>
#include <stdio.h>
#include <string.h>

#include "daemon/ingest/bitshuffle.h"

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Bit c of byte r moves to bit r of byte c. */
static uint64_t transpose8(uint64_t x)
{
    uint64_t t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
    x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
    x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
    x ^= t ^ (t << 28);
    return x;
}

int tl_bitshuffle_untranspose(const void *in, void *out, size_t n, size_t elem)
{
    if (n % 8 || elem == 0 || elem > 8)
        return -1;
    const uint8_t *src = in;
    uint8_t *dst = out;
    size_t row = n / 8; /* bytes per bit-row */
    for (size_t j = 0; j < elem; j++) {
        const uint8_t *rows = src + 8 * j * row; /* the 8 bit-rows of byte j */
        for (size_t g = 0; g < row; g++) {
            uint64_t x = 0;
            for (int k = 0; k < 8; k++)
                x |= (uint64_t)rows[(size_t)k * row + g] << (8 * k);
            x = transpose8(x);
            uint8_t *o = dst + 8 * g * elem + j;
            for (int m = 0; m < 8; m++, x >>= 8)
                o[(size_t)m * elem] = (uint8_t)x;
        }
    }
    return 0;
}

#define FAIL(...) (snprintf(why, whylen, __VA_ARGS__), -1)

int tl_bitshuffle_header(const void *in, size_t len, uint64_t *total, uint32_t *block, char *why,
                         size_t whylen)
{
    if (len < 12)
        return FAIL("compressed payload of %zu bytes is shorter than its 12-byte header", len);
    *total = be64(in);
    *block = be32((const uint8_t *)in + 8);
    return 0;
}

size_t tl_bitshuffle_scratch(const void *in, size_t len)
{
    uint64_t total;
    uint32_t block;
    char why[8];
    if (tl_bitshuffle_header(in, len, &total, &block, why, sizeof why) != 0 || block == 0 ||
        block > (64u << 20))
        return 0;
    return block;
}

/* The checks both framings share: the size the header declares is the caller's, and the
 * payload can expand to it at all. */
static int check_total(uint64_t total, size_t len, size_t outlen, char *why, size_t whylen)
{
    if (total != outlen)
        return FAIL("decompressed size %llu differs from the %zu bytes the shape declares",
                    (unsigned long long)total, outlen);
    if ((uint64_t)outlen > (uint64_t)len * TL_LZ4_MAX_RATIO + 64)
        return FAIL("compression bomb: %zu bytes cannot expand to %zu (LZ4 expands at most "
                    "%ux)",
                    len, outlen, TL_LZ4_MAX_RATIO);
    return 0;
}

/* One LZ4 block of exactly want bytes into dst. */
static int lz4_block(const uint8_t *src, uint32_t csize, uint8_t *dst, size_t want, size_t idx,
                     char *why, size_t whylen)
{
    if (csize > INT_MAX || want > INT_MAX)
        return FAIL("block %zu: size out of range", idx);
    int got = LZ4_decompress_safe((const char *)src, (char *)dst, (int)csize, (int)want);
    if (got < 0)
        return FAIL("block %zu: LZ4 data is corrupt", idx);
    if ((size_t)got != want)
        return FAIL("block %zu decodes to %d bytes, expected %zu", idx, got, want);
    return 0;
}

int tl_bitshuffle_decode_bslz4(const void *in, size_t len, size_t elem, void *out, size_t outlen,
                               void *scratch, size_t scratch_len, char *why, size_t whylen)
{
    uint64_t total;
    uint32_t block;
    if (tl_bitshuffle_header(in, len, &total, &block, why, whylen) != 0 ||
        check_total(total, len, outlen, why, whylen) != 0)
        return -1;
    if (elem != 1 && elem != 2 && elem != 4 && elem != 8)
        return FAIL("bitshuffle element size %zu is not 1, 2, 4 or 8", elem);
    if (outlen % elem)
        return FAIL("%zu bytes are not a whole number of %zu-byte elements", outlen, elem);
    if (block == 0 || block % (8 * elem))
        return FAIL("bitshuffle block of %u bytes is not a positive multiple of 8 elements",
                    block);
    size_t n = outlen / elem, per = block / elem;
    const uint8_t *p = (const uint8_t *)in + 12, *end = (const uint8_t *)in + len;
    uint8_t *o = out;
    size_t done = 0, idx = 0;
    while (n - done >= 8) {
        size_t m = n - done >= per ? per : (n - done) - (n - done) % 8;
        size_t bytes = m * elem;
        if (bytes > scratch_len)
            return FAIL("bitshuffle block of %zu bytes exceeds the scratch of %zu", bytes,
                        scratch_len);
        if (end - p < 4)
            return FAIL("block %zu: header truncated", idx);
        uint32_t csize = be32(p);
        p += 4;
        if ((size_t)(end - p) < csize)
            return FAIL("block %zu: %u compressed bytes declared, %zu left", idx, csize,
                        (size_t)(end - p));
        if (lz4_block(p, csize, scratch, bytes, idx, why, whylen) != 0)
            return -1;
        tl_bitshuffle_untranspose(scratch, o + done * elem, m, elem);
        p += csize;
        done += m;
        idx++;
    }
    size_t rest = (n - done) * elem; /* fewer than 8 elements travel raw */
    if ((size_t)(end - p) != rest)
        return FAIL("%zu bytes after the last block, expected %zu raw", (size_t)(end - p), rest);
    memcpy(o + done * elem, p, rest);
    return 0;
}

int tl_lz4_decode_hdf5(const void *in, size_t len, void *out, size_t outlen, char *why,
                       size_t whylen)
{
    uint64_t total;
    uint32_t block;
    if (tl_bitshuffle_header(in, len, &total, &block, why, whylen) != 0 ||
        check_total(total, len, outlen, why, whylen) != 0)
        return -1;
    if (block == 0 || block > (1u << 30))
        return FAIL("LZ4 block size %u out of range", block);
    const uint8_t *p = (const uint8_t *)in + 12, *end = (const uint8_t *)in + len;
    uint8_t *o = out;
    size_t done = 0, idx = 0;
    while (done < outlen) {
        size_t want = outlen - done < block ? outlen - done : block;
        if (end - p < 4)
            return FAIL("block %zu: header truncated", idx);
        uint32_t csize = be32(p);
        p += 4;
        if ((size_t)(end - p) < csize)
            return FAIL("block %zu: %u compressed bytes declared, %zu left", idx, csize,
                        (size_t)(end - p));
        if (csize == want)
            memcpy(o + done, p, want); /* stored raw */
        else if (lz4_block(p, csize, o + done, want, idx, why, whylen) != 0)
            return -1;
        p += csize;
        done += want;
        idx++;
    }
    if (p != end)
        return FAIL("%zu bytes after the last block", (size_t)(end - p));
    return 0;
}

int tl_lz4_decode_block(const void *in, size_t len, void *out, size_t outlen, char *why,
                        size_t whylen)
{
    if ((uint64_t)outlen > (uint64_t)len * TL_LZ4_MAX_RATIO + 64)
        return FAIL("compression bomb: %zu bytes cannot expand to %zu (LZ4 expands at most "
                    "%ux)",
                    len, outlen, TL_LZ4_MAX_RATIO);
    if (len > INT_MAX)
        return FAIL("LZ4 block of %zu bytes is too large", len);
    return lz4_block(in, (uint32_t)len, out, outlen, 0, why, whylen);
}
