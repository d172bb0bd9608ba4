/* proto_internal.h — helpers shared by the protocol sources, not part of the public API.
 *
 * Internal names use the prefix tlp_ so that they cannot collide with the public tl_proto_
 * names. Nothing here allocates except tlp_check_keys, which borrows scratch space from the
 * decoder's zone (bounded by the already pre-validated key count).
 */
#ifndef TL_PROTO_INTERNAL_H
#define TL_PROTO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/protocol.h"

/* Chunk size of the decoder's zone: big enough that ordinary headers (a few dozen objects of
 * 24 bytes each) never make the zone grow after its first chunk. */
#define TLP_ZONE_CHUNK (64u * 1024u)

/* In the decoders: evaluate a getter or check, and return its error code if it failed, so
 * each header reads as the list of its keys. */
#define TLP_TRY(x)              \
    do {                        \
        tl_proto_err rc_ = (x); \
        if (rc_)                \
            return rc_;         \
    } while (0)

#define TLP_MAX_FILTER 32 /* bytes in a scan's filter name */
#define TLP_MAX_CMD 64    /* bytes in a request's cmd */

/* precheck.c: walks the raw msgpack bytes of one header before msgpack-c sees them.
 * E_MALFORMED: truncated, reserved byte 0xc1, trailing bytes. E_LIMIT: a container declares
 * more elements than bytes remain, or nests deeper than TL_PROTO_MAX_DEPTH. */
tl_proto_err tlp_precheck(const uint8_t *p, size_t len, tl_proto_error *err);

/* keys.c: every key of map is a str (else E_NOT_MAP) and none appears twice (E_DUP_KEY).
 * `what` names the map in messages ("header", "\"args\""). */
tl_proto_err tlp_check_keys(const msgpack_object *map, msgpack_zone *zone, const char *what,
                            tl_proto_error *err);

/* error.c: copies at most `max` bytes of untrusted text into dst (cap bytes, always
 * terminated), replacing non-printable bytes with '?' and marking truncation with "...",
 * so that messages are safe to log. */
void tlp_quote(char *dst, size_t cap, const char *s, size_t n, size_t max);
/* error.c: "positive integer", "str", ... for messages. */
const char *tlp_object_type_name(const msgpack_object *o);
/* error.c: prepends prefix to err->message (truncating at the end if needed). */
void tlp_err_prefix(tl_proto_error *err, const char *prefix);

/* names.c */
const char *tlp_msg_type_name(tl_msg_type t);
bool tlp_msg_type_parse(const char *s, size_t n, tl_msg_type *out);
bool tlp_geometry_parse(const char *s, size_t n, tl_proto_geometry *out);
/* 1..TL_PROTO_MAX_ID bytes of [A-Za-z0-9_.-] */
bool tlp_slice_id_valid(const char *s, size_t n);

/* args.c: an array of exactly 2 finite numbers (no range check beyond finite) */
tl_proto_err tlp_get_f64_pair(const msgpack_object *map, const char *key, bool required,
                              double out[2], tl_proto_error *err);
/* args.c: the numbers of array o (exactly n of them, finite) into out; `name` names o in
 * messages ("matrices[3]") */
tl_proto_err tlp_f64_array(const msgpack_object *o, const char *name, size_t n, double *out,
                           tl_proto_error *err);
/* args.c: the required "dtype": a frame's (u8, u16, u32, f32) or a slice's (f32, f16, q16) */
tl_proto_err tlp_get_dtype(const msgpack_object *map, bool slice, tl_proto_dtype *out,
                           tl_proto_error *err);
/* args.c: an array of exactly 2 unsigned integers (no range check beyond unsigned) */
tl_proto_err tlp_get_u64_pair(const msgpack_object *map, const char *key, uint64_t out[2],
                              tl_proto_error *err);

/* decode_*.c: one function per message type; h is the header map, already checked for
 * string keys, duplicates, "v" and "type". */
tl_proto_err tlp_decode_scan(const msgpack_object *h, tl_proto_scan *m, tl_proto_error *err);
/* decode_cone.c: the cone-beam keys of a scan whose other keys are decoded */
tl_proto_err tlp_decode_cone(const msgpack_object *h, tl_proto_scan *m, tl_proto_error *err);
tl_proto_err tlp_decode_frame(const msgpack_object *h, tl_proto_frame *m, tl_proto_error *err);
tl_proto_err tlp_decode_end(const msgpack_object *h, tl_proto_end *m, tl_proto_error *err);
tl_proto_err tlp_decode_req(const msgpack_object *h, msgpack_zone *zone, tl_proto_req *m,
                            tl_proto_error *err);
tl_proto_err tlp_decode_rep(const msgpack_object *h, tl_proto_rep *m, tl_proto_error *err);
tl_proto_err tlp_decode_slice(const msgpack_object *h, tl_proto_slice *m, tl_proto_error *err);
tl_proto_err tlp_decode_release(const msgpack_object *h, tl_proto_release *m, tl_proto_error *err);

#endif
