/* preview.c — see preview.h. */
#include <config.h>

#include <math.h>
#include <string.h>

#include "daemon/serve/preview.h"

uint32_t tl_preview_factor(uint32_t h, uint32_t w, uint32_t max_side, uint32_t *oh, uint32_t *ow)
{
    if (max_side < 1)
        max_side = 1;
    uint32_t fh = (h + max_side - 1) / max_side, fw = (w + max_side - 1) / max_side;
    uint32_t f = fh > fw ? fh : fw;
    if (f < 1)
        f = 1;
    *oh = (h + f - 1) / f;
    *ow = (w + f - 1) / f;
    return f;
}

void tl_preview_downsample(const float *src, uint32_t h, uint32_t w, uint32_t f, float *out)
{
    if (f <= 1) {
        memcpy(out, src, (size_t)h * w * sizeof *out);
        return;
    }
    uint32_t oh = (h + f - 1) / f, ow = (w + f - 1) / f;
    for (uint32_t i = 0; i < oh; i++) {
        uint32_t r0 = i * f, r1 = r0 + f < h ? r0 + f : h;
        for (uint32_t j = 0; j < ow; j++) {
            uint32_t c0 = j * f, c1 = c0 + f < w ? c0 + f : w;
            double sum = 0;
            uint32_t n = 0;
            for (uint32_t r = r0; r < r1; r++) {
                const float *row = src + (size_t)r * w;
                for (uint32_t c = c0; c < c1; c++)
                    if (isfinite(row[c])) {
                        sum += row[c];
                        n++;
                    }
            }
            out[(size_t)i * ow + j] = n ? (float)(sum / n) : NAN;
        }
    }
}

size_t tl_preview_bytes(uint32_t oh, uint32_t ow, int bits)
{
    return TL_PREVIEW_HDR + (size_t)oh * ow * (size_t)(bits / 8);
}

/* Little-endian writers and readers, whatever the host's byte order. */
static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_f32(uint8_t *p, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    put_u32(p, v);
}
static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}
static float get_f32(const uint8_t *p)
{
    uint32_t v = get_u32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

size_t tl_preview_encode(const float *img, tl_preview_hdr *hdr, uint8_t *out, size_t cap)
{
    int bits = hdr->bits;
    if ((bits != 8 && bits != 16) || hdr->width > 65535 || hdr->height > 65535)
        return 0;
    size_t n = (size_t)hdr->width * hdr->height,
           need = tl_preview_bytes(hdr->height, hdr->width, bits);
    if (need > cap)
        return 0;
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(img[i])) {
            lo = img[i] < lo ? img[i] : lo;
            hi = img[i] > hi ? img[i] : hi;
        }
    if (!(lo <= hi)) /* no finite pixel */
        lo = 0, hi = 1;
    else if (!(hi > lo))
        hi = lo + 1;
    hdr->lo = lo;
    hdr->hi = hi;

    memcpy(out, "TLPV", 4);
    out[4] = TL_PREVIEW_VERSION;
    out[5] = (uint8_t)bits;
    out[6] = hdr->view;
    out[7] = hdr->final ? 1 : 0;
    put_u16(out + 8, (uint16_t)hdr->width);
    put_u16(out + 10, (uint16_t)hdr->height);
    put_u32(out + 12, hdr->src_width);
    put_u32(out + 16, hdr->src_height);
    put_u32(out + 20, hdr->projections_used);
    put_u32(out + 24, hdr->missing);
    put_f32(out + 28, lo);
    put_f32(out + 32, hi);
    for (int i = 0; i < 9; i++)
        put_f32(out + 36 + 4 * i, hdr->orientation[i]);
    put_u64(out + 72, hdr->seq);
    put_u64(out + 80, hdr->t_acq);
    put_u64(out + 88, hdr->t_pub);

    /* in double: (hi - lo) of float32 extremes can overflow a float */
    double qmax = bits == 8 ? 255.0 : 65535.0, k = qmax / ((double)hi - (double)lo);
    uint8_t *px = out + TL_PREVIEW_HDR;
    for (size_t i = 0; i < n; i++) {
        double q = isfinite(img[i]) ? ((double)img[i] - lo) * k + 0.5 : 0.0;
        q = q < 0 ? 0 : q > qmax ? qmax : q;
        if (bits == 8)
            px[i] = (uint8_t)q;
        else
            put_u16(px + 2 * i, (uint16_t)q);
    }
    return need;
}

int tl_preview_decode(const uint8_t *msg, size_t len, tl_preview_hdr *hdr)
{
    if (len < TL_PREVIEW_HDR || memcmp(msg, "TLPV", 4) != 0 || msg[4] != TL_PREVIEW_VERSION ||
        (msg[5] != 8 && msg[5] != 16))
        return -1;
    memset(hdr, 0, sizeof *hdr);
    hdr->bits = msg[5];
    hdr->view = msg[6];
    hdr->final = msg[7] & 1;
    hdr->width = get_u16(msg + 8);
    hdr->height = get_u16(msg + 10);
    hdr->src_width = get_u32(msg + 12);
    hdr->src_height = get_u32(msg + 16);
    hdr->projections_used = get_u32(msg + 20);
    hdr->missing = get_u32(msg + 24);
    hdr->lo = get_f32(msg + 28);
    hdr->hi = get_f32(msg + 32);
    for (int i = 0; i < 9; i++)
        hdr->orientation[i] = get_f32(msg + 36 + 4 * i);
    hdr->seq = get_u64(msg + 72);
    hdr->t_acq = get_u64(msg + 80);
    hdr->t_pub = get_u64(msg + 88);
    return len == tl_preview_bytes(hdr->height, hdr->width, hdr->bits) ? 0 : -1;
}
