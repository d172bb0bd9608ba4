/* check_proto_util.c — see check_proto_util.h. A recursive-descent reader that packs as it
 * goes; a container's element count is found by a first, non-emitting pass over it. */
#include "config.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_proto_util.h"

static void die(const char *why, const char *at)
{
    fprintf(stderr, "tlt_pack_text: %s at \"%.20s\"\n", why, at);
    abort();
}

static const char *ws(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

static const char *value(const char *p, msgpack_packer *pk);

/* Reads a quoted string into out (static-sized) and returns the position after it. */
static const char *quoted(const char *p, char *out, size_t cap, size_t *n)
{
    if (*p != '"')
        die("expected '\"'", p);
    p++;
    *n = 0;
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\') {
            c = *p++;
            c = c == 'n' ? '\n' : c == '0' ? '\0' : c;
        }
        if (*n + 1 >= cap)
            die("string too long", p);
        out[(*n)++] = c;
    }
    if (*p != '"')
        die("unterminated string", p);
    return p + 1;
}

/* Elements of the container whose body starts at p, up to `close`; emits when pk. */
static const char *elements(const char *p, char close, bool is_map, msgpack_packer *pk,
                            size_t *count)
{
    *count = 0;
    p = ws(p);
    while (*p != close) {
        p = ws(value(ws(p), pk));
        if (is_map) {
            if (*p != ':')
                die("expected ':'", p);
            p = ws(value(ws(p + 1), pk));
        }
        (*count)++;
        if (*p == ',')
            p = ws(p + 1);
        else if (*p != close)
            die("expected ',' or close", p);
    }
    return p + 1;
}

static const char *container(const char *p, char close, bool is_map, msgpack_packer *pk)
{
    size_t n;
    elements(p, close, is_map, NULL, &n); /* count first */
    if (pk && is_map)
        msgpack_pack_map(pk, n);
    else if (pk)
        msgpack_pack_array(pk, n);
    return elements(p, close, is_map, pk, &n);
}

static bool word(const char **p, const char *w)
{
    size_t n = strlen(w);
    if (strncmp(*p, w, n) != 0)
        return false;
    *p += n;
    return true;
}

static const char *value(const char *p, msgpack_packer *pk)
{
    static char s[70000];
    size_t n;
    p = ws(p);
    if (*p == '{')
        return container(p + 1, '}', true, pk);
    if (*p == '[')
        return container(p + 1, ']', false, pk);
    if (*p == '"') {
        p = quoted(p, s, sizeof s, &n);
        if (pk)
            msgpack_pack_str_with_body(pk, s, n);
        return p;
    }
    if (p[0] == 'b' && p[1] == '"') {
        p = quoted(p + 1, s, sizeof s, &n);
        if (pk)
            msgpack_pack_bin_with_body(pk, s, n);
        return p;
    }
    double special = 0;
    bool is_special = true;
    if (word(&p, "true")) {
        if (pk)
            msgpack_pack_true(pk);
        return p;
    } else if (word(&p, "false")) {
        if (pk)
            msgpack_pack_false(pk);
        return p;
    } else if (word(&p, "null")) {
        if (pk)
            msgpack_pack_nil(pk);
        return p;
    } else if (word(&p, "NaN")) {
        special = NAN;
    } else if (word(&p, "Infinity")) {
        special = INFINITY;
    } else if (word(&p, "-Infinity")) {
        special = -INFINITY;
    } else {
        is_special = false;
    }
    if (is_special) {
        if (pk)
            msgpack_pack_double(pk, special);
        return p;
    }
    if (word(&p, "f32(")) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || *end != ')')
            die("bad f32()", p);
        if (pk)
            msgpack_pack_float(pk, (float)v);
        return end + 1;
    }
    size_t len = strspn(p, "+-0123456789.eE");
    if (len == 0)
        die("unexpected character", p);
    char num[64];
    if (len >= sizeof num)
        die("number too long", p);
    memcpy(num, p, len);
    num[len] = '\0';
    if (strpbrk(num, ".eE")) {
        if (pk)
            msgpack_pack_double(pk, strtod(num, NULL));
    } else if (num[0] == '-') {
        if (pk)
            msgpack_pack_int64(pk, strtoll(num, NULL, 10));
    } else {
        if (pk)
            msgpack_pack_uint64(pk, strtoull(num, NULL, 10));
    }
    return p + len;
}

void tlt_pack_text(msgpack_sbuffer *buf, const char *text)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    const char *end = ws(value(text, &pk));
    if (*end)
        die("trailing text", end);
}

size_t tlt_hex(uint8_t *out, size_t cap, const char *hex)
{
    size_t n = 0;
    while (*hex) {
        if (isspace((unsigned char)*hex)) {
            hex++;
            continue;
        }
        unsigned v;
        if (sscanf(hex, "%2x", &v) != 1 || n >= cap)
            die("bad hex", hex);
        out[n++] = (uint8_t)v;
        hex += 2;
    }
    return n;
}

/* Finds the top-level entry `"key":` in a map text and returns its [start, end) span
 * including a following comma, or false. Top-level means depth 1 inside the outer braces. */
static bool find_entry(const char *base, const char *key, size_t *start, size_t *end)
{
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    size_t pl = strlen(pat);
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; base[i]; i++) {
        char c = base[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (c == '{' || c == '[') {
            depth++;
            continue;
        }
        if (c == '}' || c == ']') {
            depth--;
            continue;
        }
        if (c != '"')
            continue;
        if (depth == 1 && strncmp(base + i, pat, pl) == 0 && *ws(base + i + pl) == ':') {
            /* the entry runs to the next comma or closing brace at depth 1 */
            size_t j = i;
            int d = 0;
            bool s = false;
            for (j = i; base[j]; j++) {
                char e = base[j];
                if (s) {
                    if (e == '\\')
                        j++;
                    else if (e == '"')
                        s = false;
                } else if (e == '"') {
                    s = true;
                } else if (e == '{' || e == '[') {
                    d++;
                } else if (e == '}' || e == ']') {
                    if (d == 0)
                        break;
                    d--;
                } else if (e == ',' && d == 0) {
                    j++;
                    break;
                }
            }
            *start = i;
            *end = j;
            return true;
        }
        in_str = true;
    }
    return false;
}

const char *tlt_with(const char *base, const char *key, const char *value_text)
{
    static char out[8192];
    size_t s, e;
    if (find_entry(base, key, &s, &e)) {
        if (value_text)
            snprintf(out, sizeof out, "%.*s\"%s\": %s,%s", (int)s, base, key, value_text,
                     base + e);
        else
            snprintf(out, sizeof out, "%.*s%s", (int)s, base, base + e);
    } else {
        const char *close = strrchr(base, '}');
        if (!close || !value_text)
            die("tlt_with: no such key to remove", key);
        snprintf(out, sizeof out, "%.*s, \"%s\": %s}", (int)(close - base), base, key, value_text);
    }
    /* removing/replacing the last entry can leave ",}" or ", }": drop that comma */
    char *p;
    while ((p = strstr(out, ",}")) || (p = strstr(out, ", }")))
        memmove(p, p + 1, strlen(p + 1) + 1);
    return out;
}
