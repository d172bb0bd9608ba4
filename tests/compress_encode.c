/* compress_encode.c — see compress_encode.h. */
#include "config.h"

#include <lz4.h>
#include <string.h>

#include "tests/compress_encode.h"

#define BLOCK 128 /* elements per bitshuffle block: several blocks, and a short last one */

void tlt_put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

size_t tlt_bslz4(const void *data, size_t n, size_t elem, uint8_t *out)
{
    const uint8_t *in = data;
    tlt_put_be(out, n * elem, 8);
    tlt_put_be(out + 8, BLOCK * elem, 4);
    size_t len = 12, done = 0;
    uint8_t tmp[BLOCK * 4];
    while (n - done >= 8) {
        size_t m = n - done >= BLOCK ? BLOCK : (n - done) - (n - done) % 8;
        memset(tmp, 0, m * elem);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < elem; j++)
                for (int k = 0; k < 8; k++)
                    if (in[(done + i) * elem + j] >> k & 1) {
                        size_t bit = (j * 8 + (size_t)k) * m + i;
                        tmp[bit / 8] |= (uint8_t)(1u << (bit % 8));
                    }
        int c = LZ4_compress_default((char *)tmp, (char *)out + len + 4, (int)(m * elem), 4096);
        tlt_put_be(out + len, (uint64_t)c, 4);
        len += 4 + (size_t)c;
        done += m;
    }
    memcpy(out + len, in + done * elem, (n - done) * elem);
    return len + (n - done) * elem;
}

size_t tlt_lz4_hdf5(const void *data, size_t bytes, uint32_t block, uint8_t *out, size_t cap)
{
    if (cap < 16)
        return 0;
    tlt_put_be(out, bytes, 8);
    tlt_put_be(out + 8, block, 4);
    int c = LZ4_compress_default(data, (char *)out + 16, (int)bytes, (int)(cap - 16));
    if (c <= 0)
        return 0;
    tlt_put_be(out + 12, (uint64_t)c, 4);
    return 16 + (size_t)c;
}
