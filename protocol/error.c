/* error.c — error code names and the tl_proto_error filler.
 *
 * Messages often quote values that came off the wire; tlp_quote makes such text safe to log
 * (printable ASCII only, bounded length) so that a hostile header cannot inject terminal
 * escapes or newlines into the daemon's log through an error message.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

const char *tl_proto_err_name(tl_proto_err code)
{
    switch (code) {
        case TL_PROTO_OK: return "OK";
        case TL_PROTO_E_PARTS: return "E_PARTS";
        case TL_PROTO_E_TOO_BIG: return "E_TOO_BIG";
        case TL_PROTO_E_MALFORMED: return "E_MALFORMED";
        case TL_PROTO_E_LIMIT: return "E_LIMIT";
        case TL_PROTO_E_NOT_MAP: return "E_NOT_MAP";
        case TL_PROTO_E_DUP_KEY: return "E_DUP_KEY";
        case TL_PROTO_E_VERSION: return "E_VERSION";
        case TL_PROTO_E_TYPE: return "E_TYPE";
        case TL_PROTO_E_MISSING: return "E_MISSING";
        case TL_PROTO_E_KEY_TYPE: return "E_KEY_TYPE";
        case TL_PROTO_E_NOT_FINITE: return "E_NOT_FINITE";
        case TL_PROTO_E_RANGE: return "E_RANGE";
        case TL_PROTO_E_DTYPE: return "E_DTYPE";
        case TL_PROTO_E_KIND: return "E_KIND";
        case TL_PROTO_E_OVERFLOW: return "E_OVERFLOW";
        case TL_PROTO_E_PAYLOAD: return "E_PAYLOAD";
        case TL_PROTO_E_UNKNOWN_CMD: return "E_UNKNOWN_CMD";
        case TL_PROTO_E_BAD_ARG: return "E_BAD_ARG";
        case TL_PROTO_E_NOT_FOUND: return "E_NOT_FOUND";
        case TL_PROTO_E_STATE: return "E_STATE";
        case TL_PROTO_E_UNSUPPORTED: return "E_UNSUPPORTED";
        case TL_PROTO_E_RESOURCE: return "E_RESOURCE";
        case TL_PROTO_E_INTERNAL: return "E_INTERNAL";
        case TL_PROTO_E_DENIED: return "E_DENIED";
    }
    return "E_?";
}

tl_proto_err tl_proto_fail(tl_proto_error *err, tl_proto_err code, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

void tlp_quote(char *dst, size_t cap, const char *s, size_t n, size_t max)
{
    if (cap == 0)
        return;
    size_t k = 0;
    bool cut = n > max;
    size_t take = cut ? max : n;
    for (size_t i = 0; i < take && k + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[k++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    for (int i = 0; cut && i < 3 && k + 1 < cap; i++)
        dst[k++] = '.';
    dst[k] = '\0';
}

const char *tlp_object_type_name(const msgpack_object *o)
{
    switch (o->type) {
        case MSGPACK_OBJECT_NIL: return "nil";
        case MSGPACK_OBJECT_BOOLEAN: return "bool";
        case MSGPACK_OBJECT_POSITIVE_INTEGER: return "unsigned integer";
        case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "negative integer";
        case MSGPACK_OBJECT_FLOAT32: return "float32";
        case MSGPACK_OBJECT_FLOAT64: return "float64";
        case MSGPACK_OBJECT_STR: return "str";
        case MSGPACK_OBJECT_ARRAY: return "array";
        case MSGPACK_OBJECT_MAP: return "map";
        case MSGPACK_OBJECT_BIN: return "bin";
        case MSGPACK_OBJECT_EXT: return "ext";
    }
    return "unknown";
}

void tlp_err_prefix(tl_proto_error *err, const char *prefix)
{
    if (!err)
        return;
    char tmp[sizeof err->message];
    snprintf(tmp, sizeof tmp, "%s%s", prefix, err->message);
    memcpy(err->message, tmp, sizeof tmp);
}
