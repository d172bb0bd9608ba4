/* adapters_seeds.c — see adapters_seeds.h. */
#include "config.h"

#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/adapters_seeds.h"

void tlt_fz_put(tlt_fz_buf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            fprintf(stderr, "adapters_seeds: out of memory\n");
            exit(99);
        }
        b->data = d;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
}

void tlt_fz_clear(tlt_fz_buf *b)
{
    b->len = 0;
}

void tlt_fz_free(tlt_fz_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void tlt_fz_write(const tlt_fz_buf *b, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->data, 1, b->len, f) != b->len || fclose(f) != 0) {
        perror(path);
        exit(99);
    }
}

void tlt_fz_begin(tlt_fz_buf *in, uint8_t selector)
{
    tlt_fz_clear(in);
    tlt_fz_put(in, &selector, 1);
}

void tlt_fz_msg(tlt_fz_buf *in, int nparts, const void *const *parts, const size_t *lens)
{
    uint8_t n = (uint8_t)(nparts - 1);
    tlt_fz_put(in, &n, 1);
    for (int i = 0; i < nparts; i++) {
        uint8_t le[4] = {(uint8_t)lens[i], (uint8_t)(lens[i] >> 8), (uint8_t)(lens[i] >> 16),
                         (uint8_t)(lens[i] >> 24)};
        tlt_fz_put(in, le, 4);
        tlt_fz_put(in, parts[i], lens[i]);
    }
}

void tlt_fz_msg1(tlt_fz_buf *in, const void *data, size_t len)
{
    tlt_fz_msg(in, 1, &data, &len);
}

void tlt_cb_head(tlt_fz_buf *b, int major, uint64_t v)
{
    uint8_t h[9];
    int n;
    uint8_t m = (uint8_t)(major << 5);
    if (v < 24) {
        h[0] = m | (uint8_t)v;
        n = 0;
    } else if (v <= 0xff) {
        h[0] = m | 24;
        n = 1;
    } else if (v <= 0xffff) {
        h[0] = m | 25;
        n = 2;
    } else if (v <= 0xffffffffu) {
        h[0] = m | 26;
        n = 4;
    } else {
        h[0] = m | 27;
        n = 8;
    }
    for (int i = 0; i < n; i++)
        h[1 + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    tlt_fz_put(b, h, 1 + (size_t)n);
}

void tlt_cb_text(tlt_fz_buf *b, const char *s)
{
    tlt_cb_head(b, 3, strlen(s));
    tlt_fz_put(b, s, strlen(s));
}

void tlt_cb_bytes(tlt_fz_buf *b, const void *p, size_t n)
{
    tlt_cb_head(b, 2, n);
    tlt_fz_put(b, p, n);
}

void tlt_cb_double(tlt_fz_buf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    uint8_t h[9] = {0xfb};
    for (int i = 0; i < 8; i++)
        h[1 + i] = (uint8_t)(u >> (8 * (7 - i)));
    tlt_fz_put(b, h, 9);
}

void tlt_d2_start(tlt_fz_buf *b, uint64_t series, uint32_t rows, uint32_t cols, uint32_t nimages,
                  int extra_keys)
{
    tlt_cb_head(b, 6, 55799);
    tlt_cb_head(b, 5, 6 + (uint64_t)extra_keys);
    tlt_cb_text(b, "type");
    tlt_cb_text(b, "start");
    tlt_cb_text(b, "series_id");
    tlt_cb_head(b, 0, series);
    tlt_cb_text(b, "series_unique_id");
    tlt_cb_text(b, "01GRXWYAQ9NN93NRNS0H4S7JYZ");
    tlt_cb_text(b, "image_size_x");
    tlt_cb_head(b, 0, cols);
    tlt_cb_text(b, "image_size_y");
    tlt_cb_head(b, 0, rows);
    tlt_cb_text(b, "number_of_images");
    tlt_cb_head(b, 0, nimages);
}

void tlt_d2_array(tlt_fz_buf *b, uint32_t rows, uint32_t cols, uint64_t tag, const void *px,
                  size_t elem, const char *algorithm, const tlt_fz_buf *content)
{
    tlt_cb_head(b, 6, 40);
    tlt_cb_head(b, 4, 2);
    tlt_cb_head(b, 4, 2);
    tlt_cb_head(b, 0, rows);
    tlt_cb_head(b, 0, cols);
    tlt_cb_head(b, 6, tag);
    if (!algorithm) {
        tlt_cb_bytes(b, px, (size_t)rows * cols * elem);
        return;
    }
    tlt_cb_head(b, 6, 56500);
    tlt_cb_head(b, 4, 3);
    tlt_cb_text(b, algorithm);
    tlt_cb_head(b, 0, elem);
    tlt_cb_bytes(b, content->data, content->len);
}

void tlt_d2_image(tlt_fz_buf *b, uint64_t series, uint64_t id, uint32_t rows, uint32_t cols,
                  uint64_t tag, const void *px, size_t elem, const char *algorithm,
                  const tlt_fz_buf *content)
{
    tlt_cb_head(b, 6, 55799);
    tlt_cb_head(b, 5, 4);
    tlt_cb_text(b, "type");
    tlt_cb_text(b, "image");
    tlt_cb_text(b, "series_id");
    tlt_cb_head(b, 0, series);
    tlt_cb_text(b, "image_id");
    tlt_cb_head(b, 0, id);
    tlt_cb_text(b, "data");
    tlt_cb_head(b, 5, 1);
    tlt_cb_text(b, "threshold_1");
    tlt_d2_array(b, rows, cols, tag, px, elem, algorithm, content);
}

static void put_be(tlt_fz_buf *b, uint64_t v, int n)
{
    uint8_t be[8];
    for (int i = 0; i < n; i++)
        be[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    tlt_fz_put(b, be, (size_t)n);
}

/* One LZ4 block of n bytes, its big-endian compressed size first. */
static void lz4_block(tlt_fz_buf *out, const void *src, size_t n)
{
    int cap = LZ4_compressBound((int)n);
    char *tmp = malloc((size_t)cap);
    int c = tmp ? LZ4_compress_default(src, tmp, (int)n, cap) : 0;
    if (c <= 0) {
        fprintf(stderr, "adapters_seeds: LZ4 failed\n");
        exit(99);
    }
    put_be(out, (uint64_t)c, 4);
    tlt_fz_put(out, tmp, (size_t)c);
    free(tmp);
}

void tlt_bslz4(const void *px, size_t n, size_t elem, size_t block, tlt_fz_buf *out)
{
    const uint8_t *in = px;
    tlt_fz_clear(out);
    put_be(out, n * elem, 8);
    put_be(out, block * elem, 4);
    uint8_t *tmp = malloc(block * elem);
    size_t done = 0;
    while (n - done >= 8) {
        size_t m = n - done >= block ? block : (n - done) - (n - done) % 8;
        memset(tmp, 0, m * elem);
        for (size_t i = 0; i < m; i++) /* bit k of byte j of element i: bit i of row 8j + k */
            for (size_t j = 0; j < elem; j++)
                for (int k = 0; k < 8; k++)
                    if (in[(done + i) * elem + j] >> k & 1) {
                        size_t bit = (j * 8 + (size_t)k) * m + i;
                        tmp[bit / 8] |= (uint8_t)(1u << (bit % 8));
                    }
        lz4_block(out, tmp, m * elem);
        done += m;
    }
    tlt_fz_put(out, in + done * elem, (n - done) * elem); /* fewer than 8 travel raw */
    free(tmp);
}

void tlt_lz4_hdf5(const void *px, size_t bytes, size_t block, tlt_fz_buf *out)
{
    tlt_fz_clear(out);
    put_be(out, bytes, 8);
    put_be(out, block, 4);
    for (size_t done = 0; done < bytes; done += block)
        lz4_block(out, (const uint8_t *)px + done, bytes - done < block ? bytes - done : block);
}
