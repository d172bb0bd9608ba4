/* jsonpack.c — JSON <-> msgpack conversion for `tomolive ctl` (rules in jsonpack.h). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/jsonpack.h"

#define P(x)           \
    do {               \
        if ((x) != 0)  \
            return -1; \
    } while (0)

int tl_json_pack(msgpack_packer *pk, const json_t *v)
{
    switch (json_typeof(v)) {
        case JSON_OBJECT: {
            const char *key;
            json_t *val;
            P(msgpack_pack_map(pk, json_object_size(v)));
            json_object_foreach((json_t *)v, key, val)
            {
                P(msgpack_pack_str_with_body(pk, key, strlen(key)));
                P(tl_json_pack(pk, val));
            }
            return 0;
        }
        case JSON_ARRAY: {
            size_t i;
            json_t *val;
            P(msgpack_pack_array(pk, json_array_size(v)));
            json_array_foreach(v, i, val) P(tl_json_pack(pk, val));
            return 0;
        }
        case JSON_STRING:
            return msgpack_pack_str_with_body(pk, json_string_value(v), json_string_length(v));
        case JSON_INTEGER: {
            json_int_t i = json_integer_value(v);
            return i >= 0 ? msgpack_pack_uint64(pk, (uint64_t)i) : msgpack_pack_int64(pk, i);
        }
        case JSON_REAL: return msgpack_pack_double(pk, json_real_value(v));
        case JSON_TRUE: return msgpack_pack_true(pk);
        case JSON_FALSE: return msgpack_pack_false(pk);
        case JSON_NULL: return msgpack_pack_nil(pk);
    }
    return -1;
}

char *tl_base64(const void *data, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    char *out = malloc((n + 2) / 3 * 4 + 1), *q = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *q++ = tab[w >> 18 & 63];
        *q++ = tab[w >> 12 & 63];
        *q++ = i + 1 < n ? tab[w >> 6 & 63] : '=';
        *q++ = i + 2 < n ? tab[w & 63] : '=';
    }
    *q = '\0';
    return out;
}

/* A JSON string of n bytes that may not be UTF-8: as is when it is, else with every byte
 * outside printable ASCII replaced by '?' (a reply is shown, not round-tripped). */
static json_t *string_n(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    if (j)
        return j;
    char *c = malloc(n + 1);
    if (!c)
        return NULL;
    for (size_t i = 0; i < n; i++)
        c[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    j = json_stringn(c, n);
    free(c);
    return j;
}

/* {"$bin": b64} or {"$ext": type, "$data": b64}. */
static json_t *bytes_object(const void *p, size_t n, bool ext, int8_t type)
{
    char *b = tl_base64(p, n);
    json_t *o = b ? json_object() : NULL;
    if (o && ext &&
        (json_object_set_new(o, "$ext", json_integer(type)) != 0 ||
         json_object_set_new(o, "$data", json_string(b)) != 0))
        o = (json_decref(o), NULL);
    if (o && !ext && json_object_set_new(o, "$bin", json_string(b)) != 0)
        o = (json_decref(o), NULL);
    free(b);
    return o;
}

/* The key under which a map entry is stored: a str key's text (NUL-terminated, made valid
 * UTF-8), any other key's compact JSON text. Returns a malloc'ed string. */
static char *key_text(const msgpack_object *k)
{
    json_t *j = tl_json_from_msgpack(k);
    if (!j)
        return NULL;
    char *s;
    if (k->type == MSGPACK_OBJECT_STR) {
        /* an embedded NUL would cut the key short: show it as '?' too */
        size_t n = json_string_length(j);
        if ((s = malloc(n + 1)) != NULL) {
            memcpy(s, json_string_value(j), n);
            s[n] = '\0';
            for (size_t i = 0; i < n; i++)
                if (!s[i])
                    s[i] = '?';
        }
    } else {
        s = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
    }
    json_decref(j);
    return s;
}

json_t *tl_json_from_msgpack(const msgpack_object *o)
{
    switch (o->type) {
        case MSGPACK_OBJECT_NIL: return json_null();
        case MSGPACK_OBJECT_BOOLEAN: return json_boolean(o->via.boolean);
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
            return o->via.u64 <= (uint64_t)INT64_MAX ? json_integer((json_int_t)o->via.u64)
                                                     : json_real((double)o->via.u64);
        case MSGPACK_OBJECT_NEGATIVE_INTEGER: return json_integer(o->via.i64);
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
            return isfinite(o->via.f64) ? json_real(o->via.f64) : json_null();
        case MSGPACK_OBJECT_STR: return string_n(o->via.str.ptr, o->via.str.size);
        case MSGPACK_OBJECT_BIN: return bytes_object(o->via.bin.ptr, o->via.bin.size, false, 0);
        case MSGPACK_OBJECT_EXT:
            return bytes_object(o->via.ext.ptr, o->via.ext.size, true, o->via.ext.type);
        case MSGPACK_OBJECT_ARRAY: {
            json_t *a = json_array();
            for (uint32_t i = 0; a && i < o->via.array.size; i++)
                if (json_array_append_new(a, tl_json_from_msgpack(&o->via.array.ptr[i])) != 0)
                    a = (json_decref(a), NULL);
            return a;
        }
        case MSGPACK_OBJECT_MAP: {
            json_t *m = json_object();
            for (uint32_t i = 0; m && i < o->via.map.size; i++) {
                const msgpack_object_kv *kv = &o->via.map.ptr[i];
                char *k = key_text(&kv->key);
                if (!k || json_object_set_new(m, k, tl_json_from_msgpack(&kv->val)) != 0)
                    m = (json_decref(m), NULL);
                free(k);
            }
            return m;
        }
    }
    return NULL;
}

json_t *tl_json_value_or_string(const char *text, char *err, size_t errlen)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (v)
        return v;
    v = json_string(text);
    if (!v)
        snprintf(err, errlen, "'%s' is not valid UTF-8", text);
    return v;
}

/* Adds one key=value argument to args. Returns 0, or -1 with a message in err. */
static int add_kv(json_t *args, const char *arg, char *err, size_t errlen)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        snprintf(err, errlen, "argument '%s' is not key=value (nor one JSON object)", arg);
        return -1;
    }
    char *key = strndup(arg, (size_t)(eq - arg));
    if (!key) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = -1;
    json_t *val = NULL;
    if (json_object_get(args, key))
        snprintf(err, errlen, "argument '%s': key '%s' given twice", arg, key);
    else if ((val = tl_json_value_or_string(eq + 1, err, errlen)) != NULL) {
        rc = json_object_set_new(args, key, val); /* takes val, also on failure */
        if (rc != 0)
            snprintf(err, errlen, "argument '%s': the key is not valid UTF-8", arg);
    }
    free(key);
    return rc;
}

json_t *tl_json_args(int argc, char *const *argv, char *err, size_t errlen)
{
    if (argc == 1 && argv[0][strspn(argv[0], " \t\r\n")] == '{') {
        json_error_t je;
        json_t *v = json_loads(argv[0], JSON_REJECT_DUPLICATES, &je);
        if (!v)
            snprintf(err, errlen, "the arguments are not a JSON object: %s (column %d)", je.text,
                     je.column);
        return v; /* text that begins with '{' and parses is an object */
    }
    json_t *args = json_object();
    if (!args) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (int i = 0; i < argc; i++)
        if (add_kv(args, argv[i], err, errlen) != 0) {
            json_decref(args);
            return NULL;
        }
    return args;
}
