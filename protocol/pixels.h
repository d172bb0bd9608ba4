/* pixels.h — a slice's pixels in the compact encodings of PROTOCOL.md §10.3, both ways.
 *
 * Over TCP a 2048² float32 slice is 16 MB, ~4 ms of copies on loopback and far more on a
 * beamline network; a control system rarely needs 24 bits of mantissa. A slice can be
 * published as f16 (IEEE binary16: 11 bits, ~3 decimal digits, half the bytes), as q16
 * (uint16 codes over the slice's own range: value = offset + scale x code, an error of at
 * most scale / 2) and, either way or as f32, compressed as one LZ4 block. The daemon
 * encodes; clients decode with the same file.
 *
 *   size_t cap = tl_proto_pixels_bound(n, TL_PROTO_F16, true);     bytes of dst to give
 *   tl_proto_slice h = {...}; const void *payload; size_t len;
 *   tl_proto_pixels_encode(px, n, &h, dst, cap, &payload, &len);    sets h.scale, h.offset
 *   ...
 *   tl_proto_pixels_decode(&received, out, &err);                   n float32 pixels
 */
#ifndef TL_PROTO_PIXELS_H
#define TL_PROTO_PIXELS_H

#include <stddef.h>

#include "protocol/protocol.h"

/* Bytes of dst that tl_proto_pixels_encode may use for n pixels. */
size_t tl_proto_pixels_bound(size_t n, tl_proto_dtype dtype, bool lz4);
/* Encodes n float32 pixels (finite) as h->dtype (F32, F16, Q16), LZ4-compressed if h->lz4,
 * into dst; *payload and *len say where the payload is (within dst, or src itself for f32
 * without compression). Sets h->scale and h->offset for q16. Returns 0, or -1 when cap is
 * smaller than the bound or the dtype is not a slice dtype. */
int tl_proto_pixels_encode(const float *src, size_t n, tl_proto_slice *h, void *dst, size_t cap,
                           const void **payload, size_t *len);
/* Decodes a received slice's payload (s->payload, s->payload_len: any alignment) into
 * shape[0] x shape[1] float32 pixels, whatever its dtype. E_PAYLOAD when LZ4 data does not
 * decompress to exactly the shape. */
tl_proto_err tl_proto_pixels_decode(const tl_proto_slice *s, float *dst, tl_proto_error *err);

/* IEEE binary16 <-> float32, round to nearest even (exported for tests and clients). */
uint16_t tl_proto_f32_to_f16(float f);
float tl_proto_f16_to_f32(uint16_t h);

#endif
