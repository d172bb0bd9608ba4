/* precheck.c — byte-level pre-validation of a msgpack header before msgpack-c unpacks it.
 *
 * Why: msgpack-c's unpacker allocates count * sizeof(msgpack_object) (24 bytes) from its zone
 * as soon as it reads an array or map header, before it has seen any element, so a 5-byte
 * part declaring an array32 of 2^32-1 elements asks for ~100 GB. This walk proves, without
 * allocating, that every container's declared count fits in the bytes that follow it (each
 * element takes at least 1 byte, each map entry at least 2), that nesting stays within
 * TL_PROTO_MAX_DEPTH, and that the part is exactly one complete msgpack object. After it
 * passes, msgpack-c can allocate at most 24 bytes per byte of header, i.e. a bounded
 * ~1.5 MB for the largest legal (64 KiB) header, and it cannot fail except for memory.
 *
 * The walk is iterative with a fixed stack of "elements still to read" per open container,
 * so hostile input cannot exhaust the C stack either. Depth counts containers: the header
 * map itself is depth 1, a map or array directly inside it depth 2, and so on.
 */
#include "config.h"

#include <stdint.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* How one msgpack object is laid out after its type byte: an optional big-endian length or
 * count field of `lenw` bytes (or a count/length in the type byte itself, `fixed`), then
 * `extra` fixed bytes (scalar bodies, ext's type byte, fixext data), then for str/bin/ext a
 * body of `length` bytes, or for containers `count` elements (x2 for maps). */
typedef struct {
    int lenw;       /* width of an explicit length/count field (0, 1, 2 or 4) */
    uint32_t fixed; /* count or length encoded in the type byte itself (fix types) */
    uint32_t extra; /* bytes that follow the length field, excluding a variable body */
    int container;  /* 0 scalar/blob, 1 array, 2 map */
    int blob;       /* 1: the length field counts body bytes (str, bin, ext) */
} shape;

/* Returns false for the reserved byte 0xc1. */
static bool classify(uint8_t b, shape *s)
{
    *s = (shape){0, 0, 0, 0, 0};
    if (b <= 0x7f || b >= 0xe0)
        return true; /* fixint */
    if (b <= 0x8f) {
        s->container = 2;
        s->fixed = b & 0x0f;
        return true;
    }
    if (b <= 0x9f) {
        s->container = 1;
        s->fixed = b & 0x0f;
        return true;
    }
    if (b <= 0xbf) {
        s->blob = 1;
        s->fixed = b & 0x1f;
        return true;
    }
    switch (b) {
        case 0xc0:
        case 0xc2:
        case 0xc3: return true; /* nil, false, true */
        case 0xc4:
            s->blob = 1;
            s->lenw = 1;
            return true; /* bin8 */
        case 0xc5:
            s->blob = 1;
            s->lenw = 2;
            return true; /* bin16 */
        case 0xc6:
            s->blob = 1;
            s->lenw = 4;
            return true; /* bin32 */
        case 0xc7:
            s->blob = 1;
            s->lenw = 1;
            s->extra = 1;
            return true; /* ext8 + type byte */
        case 0xc8:
            s->blob = 1;
            s->lenw = 2;
            s->extra = 1;
            return true;
        case 0xc9:
            s->blob = 1;
            s->lenw = 4;
            s->extra = 1;
            return true;
        case 0xca: s->extra = 4; return true; /* float32 */
        case 0xcb: s->extra = 8; return true; /* float64 */
        case 0xcc:
        case 0xd0: s->extra = 1; return true; /* (u)int8 */
        case 0xcd:
        case 0xd1: s->extra = 2; return true;
        case 0xce:
        case 0xd2: s->extra = 4; return true;
        case 0xcf:
        case 0xd3: s->extra = 8; return true;
        case 0xd4: s->extra = 2; return true; /* fixext1: type + 1 */
        case 0xd5: s->extra = 3; return true;
        case 0xd6: s->extra = 5; return true;
        case 0xd7: s->extra = 9; return true;
        case 0xd8: s->extra = 17; return true;
        case 0xd9:
            s->blob = 1;
            s->lenw = 1;
            return true; /* str8 */
        case 0xda:
            s->blob = 1;
            s->lenw = 2;
            return true;
        case 0xdb:
            s->blob = 1;
            s->lenw = 4;
            return true;
        case 0xdc:
            s->container = 1;
            s->lenw = 2;
            return true; /* array16 */
        case 0xdd:
            s->container = 1;
            s->lenw = 4;
            return true;
        case 0xde:
            s->container = 2;
            s->lenw = 2;
            return true; /* map16 */
        case 0xdf:
            s->container = 2;
            s->lenw = 4;
            return true;
        default: return false; /* 0xc1: never used */
    }
}

tl_proto_err tlp_precheck(const uint8_t *p, size_t len, tl_proto_error *err)
{
    /* rem[d]: objects still to read at depth d; rem[0] is the single top-level object */
    uint64_t rem[TL_PROTO_MAX_DEPTH + 1];
    int d = 0;
    size_t pos = 0;
    rem[0] = 1;
    for (;;) {
        while (rem[d] == 0) {
            if (d == 0)
                goto done;
            d--;
        }
        if (pos >= len)
            return tl_proto_fail(err, TL_PROTO_E_MALFORMED,
                                 "truncated msgpack: header ends at byte %zu inside an object",
                                 len);
        size_t at = pos;
        uint8_t b = p[pos++];
        rem[d]--;
        shape s;
        if (!classify(b, &s))
            return tl_proto_fail(err, TL_PROTO_E_MALFORMED,
                                 "invalid msgpack: reserved byte 0x%02x at offset %zu", b, at);
        uint64_t n = s.fixed;
        if (s.lenw) {
            if (len - pos < (size_t)s.lenw)
                return tl_proto_fail(err, TL_PROTO_E_MALFORMED,
                                     "truncated msgpack: length field at offset %zu cut off", at);
            n = be(p + pos, s.lenw);
            pos += (size_t)s.lenw;
        }
        size_t left = len - pos;
        if (s.container) {
            uint64_t need = n * (uint64_t)s.container; /* minimum bytes of the elements */
            if (need > left)
                return tl_proto_fail(err, TL_PROTO_E_LIMIT,
                                     "%s at offset %zu declares %llu %s but only %zu bytes "
                                     "follow",
                                     s.container == 2 ? "map" : "array", at, (unsigned long long)n,
                                     s.container == 2 ? "entries" : "elements", left);
            if (d >= TL_PROTO_MAX_DEPTH)
                return tl_proto_fail(err, TL_PROTO_E_LIMIT,
                                     "%s at offset %zu nests deeper than %d levels",
                                     s.container == 2 ? "map" : "array", at, TL_PROTO_MAX_DEPTH);
            d++;
            rem[d] = need;
            continue;
        }
        uint64_t body = (s.blob ? n : 0) + s.extra;
        if (body > left)
            return tl_proto_fail(err, TL_PROTO_E_MALFORMED,
                                 "truncated msgpack: object at offset %zu needs %llu bytes, "
                                 "%zu left",
                                 at, (unsigned long long)body, left);
        pos += (size_t)body;
    }
done:
    if (pos != len)
        return tl_proto_fail(err, TL_PROTO_E_MALFORMED,
                             "trailing bytes: the header object ends at byte %zu of %zu", pos,
                             len);
    return TL_PROTO_OK;
}
