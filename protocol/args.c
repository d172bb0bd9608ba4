/* args.c — typed, validating access to msgpack maps: the decoder reads every header field
 * through these, and the daemon reads request args with the same functions, so both apply
 * the same rules (DESIGN §3, PROTOCOL.md "Value types"):
 *   unsigned fields: msgpack integers >= 0 only (whatever their encoding width or
 *     signedness); a negative integer is E_RANGE, anything else E_KEY_TYPE;
 *   float fields: float32, float64 or any integer, and must be finite;
 *   bool: only bool; str: only str (bin is not text).
 * Every failure message names the key, so a sender can find its mistake from the reply.
 * Outputs are written only on success.
 */
#include "config.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

const msgpack_object *tl_proto_map_get(const msgpack_object *map, const char *key)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP || !key)
        return NULL;
    size_t n = strlen(key);
    const msgpack_object_map *m = &map->via.map;
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
            (n == 0 || memcmp(k->via.str.ptr, key, n) == 0))
            return &m->ptr[i].val;
    }
    return NULL;
}

/* Looks the key up: OK with *o set, OK with *o NULL (absent, optional), or E_MISSING. */
static tl_proto_err find(const msgpack_object *map, const char *key, bool required,
                         const msgpack_object **o, tl_proto_error *err)
{
    *o = tl_proto_map_get(map, key);
    if (!*o && required)
        return tl_proto_fail(err, TL_PROTO_E_MISSING, "missing required key \"%s\"", key);
    return TL_PROTO_OK;
}

static tl_proto_err wrong_type(const char *key, const char *want, const msgpack_object *o,
                               tl_proto_error *err)
{
    return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\": expected %s, got %s", key, want,
                         tlp_object_type_name(o));
}

/* The unsigned value of o, with the key named on failure. */
static tl_proto_err as_u64(const msgpack_object *o, const char *key, uint64_t *out,
                           tl_proto_error *err)
{
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"%s\": %" PRId64 " is negative", key,
                             o->via.i64);
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return wrong_type(key, "unsigned integer", o, err);
    *out = o->via.u64;
    return TL_PROTO_OK;
}

/* The finite numeric value of o. */
static tl_proto_err as_double(const msgpack_object *o, const char *key, double *out,
                              tl_proto_error *err)
{
    double v;
    switch (o->type) {
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64: v = o->via.f64; break;
        case MSGPACK_OBJECT_POSITIVE_INTEGER: v = (double)o->via.u64; break;
        case MSGPACK_OBJECT_NEGATIVE_INTEGER: v = (double)o->via.i64; break;
        default: return wrong_type(key, "number", o, err);
    }
    if (!isfinite(v))
        return tl_proto_fail(err, TL_PROTO_E_NOT_FINITE, "\"%s\": %s is not finite", key,
                             isnan(v) ? "NaN" : (v > 0 ? "+inf" : "-inf"));
    *out = v;
    return TL_PROTO_OK;
}

tl_proto_err tl_proto_get_u64(const msgpack_object *map, const char *key, bool required,
                              uint64_t *out, tl_proto_error *err)
{
    const msgpack_object *o;
    tl_proto_err rc = find(map, key, required, &o, err);
    if (rc || !o)
        return rc;
    return as_u64(o, key, out, err);
}

tl_proto_err tl_proto_get_u32(const msgpack_object *map, const char *key, bool required,
                              uint32_t *out, tl_proto_error *err)
{
    uint64_t v = 0;
    const msgpack_object *o;
    tl_proto_err rc = find(map, key, required, &o, err);
    if (rc || !o)
        return rc;
    if ((rc = as_u64(o, key, &v, err)))
        return rc;
    if (v > UINT32_MAX)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"%s\": %" PRIu64 " exceeds %" PRIu32, key, v,
                             UINT32_MAX);
    *out = (uint32_t)v;
    return TL_PROTO_OK;
}

tl_proto_err tl_proto_get_double(const msgpack_object *map, const char *key, bool required,
                                 double *out, tl_proto_error *err)
{
    const msgpack_object *o;
    tl_proto_err rc = find(map, key, required, &o, err);
    if (rc || !o)
        return rc;
    return as_double(o, key, out, err);
}

tl_proto_err tl_proto_get_bool(const msgpack_object *map, const char *key, bool required,
                               bool *out, tl_proto_error *err)
{
    const msgpack_object *o;
    tl_proto_err rc = find(map, key, required, &o, err);
    if (rc || !o)
        return rc;
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return wrong_type(key, "bool", o, err);
    *out = o->via.boolean;
    return TL_PROTO_OK;
}

tl_proto_err tl_proto_get_str(const msgpack_object *map, const char *key, bool required,
                              tl_proto_str *out, tl_proto_error *err)
{
    const msgpack_object *o;
    tl_proto_err rc = find(map, key, required, &o, err);
    if (rc || !o)
        return rc;
    if (o->type != MSGPACK_OBJECT_STR)
        return wrong_type(key, "str", o, err);
    out->ptr = o->via.str.ptr;
    out->len = o->via.str.size;
    return TL_PROTO_OK;
}

/* An array of exactly n elements; E_KEY_TYPE if not an array, E_RANGE if the length differs
 * (the type is right, the value is not). */
/* Whether o is an array of n elements (named `name`, holding `what`, in messages). */
static tl_proto_err check_array(const msgpack_object *o, const char *name, size_t n,
                                const char *what, tl_proto_error *err)
{
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE,
                             "\"%s\": expected an array of %zu %s, "
                             "got %s",
                             name, n, what, tlp_object_type_name(o));
    if (o->via.array.size != n)
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"%s\": expected an array of %zu %s, "
                             "got %" PRIu32 " elements",
                             name, n, what, o->via.array.size);
    return TL_PROTO_OK;
}

static tl_proto_err find_array(const msgpack_object *map, const char *key, bool required, size_t n,
                               const char *what, const msgpack_object **o, tl_proto_error *err)
{
    tl_proto_err rc = find(map, key, required, o, err);
    if (rc || !*o)
        return rc;
    return check_array(*o, key, n, what, err);
}

tl_proto_err tl_proto_get_floats(const msgpack_object *map, const char *key, bool required,
                                 float *out, size_t n, tl_proto_error *err)
{
    const msgpack_object *o;
    tl_proto_err rc = find_array(map, key, required, n, "numbers", &o, err);
    if (rc || !o)
        return rc;
    char ek[80];
    for (size_t i = 0; i < n; i++) { /* validate everything before writing anything */
        double v;
        snprintf(ek, sizeof ek, "%s[%zu]", key, i);
        if ((rc = as_double(&o->via.array.ptr[i], ek, &v, err)))
            return rc;
        if (fabs(v) > FLT_MAX)
            return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"%s\": %g does not fit a float32", ek,
                                 v);
    }
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        as_double(&o->via.array.ptr[i], key, &v, NULL);
        out[i] = (float)v;
    }
    return TL_PROTO_OK;
}

tl_proto_err tl_proto_get_dims(const msgpack_object *map, const char *key, bool required,
                               uint32_t *out, size_t n, uint32_t max, tl_proto_error *err)
{
    const msgpack_object *o;
    tl_proto_err rc = find_array(map, key, required, n, "unsigned integers", &o, err);
    if (rc || !o)
        return rc;
    char ek[80];
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        snprintf(ek, sizeof ek, "%s[%zu]", key, i);
        if ((rc = as_u64(&o->via.array.ptr[i], ek, &v, err)))
            return rc;
        if (v < 1 || v > max)
            return tl_proto_fail(err, TL_PROTO_E_RANGE,
                                 "\"%s\": %" PRIu64 " is outside "
                                 "1..%" PRIu32,
                                 ek, v, max);
    }
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)o->via.array.ptr[i].via.u64;
    return TL_PROTO_OK;
}

tl_proto_err tlp_get_u64_pair(const msgpack_object *map, const char *key, uint64_t out[2],
                              tl_proto_error *err)
{
    const msgpack_object *o;
    tl_proto_err rc = find_array(map, key, true, 2, "unsigned integers", &o, err);
    if (rc)
        return rc;
    char ek[80];
    uint64_t v[2];
    for (size_t i = 0; i < 2; i++) {
        snprintf(ek, sizeof ek, "%s[%zu]", key, i);
        if ((rc = as_u64(&o->via.array.ptr[i], ek, &v[i], err)))
            return rc;
    }
    out[0] = v[0];
    out[1] = v[1];
    return TL_PROTO_OK;
}

tl_proto_err tlp_get_f64_pair(const msgpack_object *map, const char *key, bool required,
                              double out[2], tl_proto_error *err)
{
    const msgpack_object *o;
    tl_proto_err rc = find(map, key, required, &o, err);
    if (rc || !o)
        return rc;
    double v[2]; /* out stays as it was unless both are good */
    if ((rc = tlp_f64_array(o, key, 2, v, err)))
        return rc;
    out[0] = v[0];
    out[1] = v[1];
    return TL_PROTO_OK;
}

tl_proto_err tlp_f64_array(const msgpack_object *o, const char *name, size_t n, double *out,
                           tl_proto_error *err)
{
    tl_proto_err rc = check_array(o, name, n, "numbers", err);
    if (rc)
        return rc;
    char ek[80];
    for (size_t i = 0; i < n; i++) {
        snprintf(ek, sizeof ek, "%s[%zu]", name, i);
        if ((rc = as_double(&o->via.array.ptr[i], ek, &out[i], err)))
            return rc;
    }
    return TL_PROTO_OK;
}

tl_proto_err tlp_get_dtype(const msgpack_object *map, bool slice, tl_proto_dtype *out,
                           tl_proto_error *err)
{
    tl_proto_str s;
    tl_proto_err rc = tl_proto_get_str(map, "dtype", true, &s, err);
    if (rc)
        return rc;
    bool known = slice ? tl_proto_slice_dtype_parse(s.ptr, s.len, out)
                       : tl_proto_dtype_parse(s.ptr, s.len, out);
    if (!known) {
        char q[40];
        tlp_quote(q, sizeof q, s.ptr, s.len, 32);
        return tl_proto_fail(err, TL_PROTO_E_DTYPE,
                             "\"dtype\": unknown dtype \"%s\" (expected %s)", q,
                             slice ? "f32, f16 or q16" : "u8, u16, u32 or f32");
    }
    return TL_PROTO_OK;
}
