/* names.c — the enumerated names of the wire protocol (dtype, frame kind, geometry, message
 * type) and the slice id alphabet.
 *
 * Names are matched by exact bytes (msgpack strings are not NUL-terminated and may contain
 * NULs, so strcmp would be wrong). Name functions return "?" for values outside the enum, so
 * an encoder given a corrupt struct produces a header that the decoder rejects by name
 * instead of crashing.
 */
#include "config.h"

#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

static const char *const dtype_names[] = {"u8", "u16", "u32", "f32", "f16", "q16"};
static const size_t dtype_sizes[] = {1, 2, 4, 4, 2, 2};
#define FRAME_DTYPES 4 /* the first four; f16 and q16 are for slices only */
static const char *const kind_names[] = {"dark", "flat", "proj"};
static const char *const geometry_names[] = {"parallel", "cone"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool lookup(const char *const *names, size_t count, const char *s, size_t n, int *out)
{
    for (size_t i = 0; i < count; i++) {
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) {
            *out = (int)i;
            return true;
        }
    }
    return false;
}

const char *tl_proto_dtype_name(tl_proto_dtype t)
{
    return (unsigned)t < COUNT(dtype_names) ? dtype_names[t] : "?";
}

size_t tl_proto_dtype_size(tl_proto_dtype t)
{
    return (unsigned)t < COUNT(dtype_sizes) ? dtype_sizes[t] : 0;
}

const char *tl_proto_kind_name(tl_proto_kind k)
{
    return (unsigned)k < COUNT(kind_names) ? kind_names[k] : "?";
}

const char *tl_proto_geometry_name(tl_proto_geometry g)
{
    return (unsigned)g < COUNT(geometry_names) ? geometry_names[g] : "?";
}

bool tl_proto_dtype_parse(const char *s, size_t n, tl_proto_dtype *out)
{
    int i;
    if (!s || !lookup(dtype_names, FRAME_DTYPES, s, n, &i))
        return false;
    *out = (tl_proto_dtype)i;
    return true;
}

bool tl_proto_slice_dtype_parse(const char *s, size_t n, tl_proto_dtype *out)
{
    int i;
    if (!s || !lookup(dtype_names, COUNT(dtype_names), s, n, &i))
        return false;
    *out = (tl_proto_dtype)i;
    return true;
}

bool tl_proto_kind_parse(const char *s, size_t n, tl_proto_kind *out)
{
    int i;
    if (!s || !lookup(kind_names, COUNT(kind_names), s, n, &i))
        return false;
    *out = (tl_proto_kind)i;
    return true;
}

bool tlp_geometry_parse(const char *s, size_t n, tl_proto_geometry *out)
{
    int i;
    if (!s || !lookup(geometry_names, COUNT(geometry_names), s, n, &i))
        return false;
    *out = (tl_proto_geometry)i;
    return true;
}

/* Indexed by bit position of tl_msg_type. */
static const char *const msg_type_names[] = {"scan", "frame", "end",    "req",
                                             "rep",  "slice", "release"};

const char *tlp_msg_type_name(tl_msg_type t)
{
    for (size_t i = 0; i < COUNT(msg_type_names); i++)
        if ((unsigned)t == 1u << i)
            return msg_type_names[i];
    return "?";
}

bool tlp_msg_type_parse(const char *s, size_t n, tl_msg_type *out)
{
    int i;
    if (!s || !lookup(msg_type_names, COUNT(msg_type_names), s, n, &i))
        return false;
    *out = (tl_msg_type)(1u << i);
    return true;
}

bool tl_proto_str_eq(tl_proto_str s, const char *cstr)
{
    size_t n = strlen(cstr);
    return s.len == n && (n == 0 || memcmp(s.ptr, cstr, n) == 0);
}

bool tlp_slice_id_valid(const char *s, size_t n)
{
    if (!s || n < 1 || n > TL_PROTO_MAX_ID)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}
