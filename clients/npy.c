/* npy.c — the strict .npy reader (npy.h).
 *
 * The header is the repr of a Python dict, {'descr': '<f8', 'fortran_order': False,
 * 'shape': (N, 12), }, padded with spaces to a multiple of 64 bytes and ended by '\n'
 * (numpy/lib/format.py). It is parsed as exactly that grammar: the three keys once each, in
 * any order, string, boolean and tuple-of-integers values, nothing else; a file numpy did
 * not write that way is refused rather than interpreted.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clients/npy.h"

#define MAX_HEADER (1u << 20) /* numpy's own headers are a few hundred bytes */

typedef struct {
    const char *p, *end;
} cursor;

static void blanks(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static bool take(cursor *c, char ch)
{
    blanks(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes (numpy's keys and dtype strings have none) into buf. */
static bool string(cursor *c, char *buf, size_t len)
{
    blanks(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= len)
            return false;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    buf[n] = '\0';
    return true;
}

static bool word(cursor *c, const char *w)
{
    blanks(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return true;
    }
    return false;
}

/* (a, b, ...) of non-negative integers, trailing comma allowed; "()" is a scalar. */
static bool tuple(cursor *c, tl_npy *a)
{
    if (!take(c, '('))
        return false;
    a->ndim = 0;
    for (;;) {
        if (take(c, ')'))
            return true;
        if (a->ndim == TL_NPY_MAX_DIMS || c->p >= c->end || !isdigit((unsigned char)*c->p))
            return false;
        uint64_t v = 0;
        while (c->p < c->end && isdigit((unsigned char)*c->p)) {
            if (v > (UINT64_MAX - 9) / 10)
                return false;
            v = v * 10 + (uint64_t)(*c->p++ - '0');
        }
        if (c->p < c->end && *c->p == 'L') /* Python 2's long, in files of old numpy */
            c->p++;
        a->shape[a->ndim++] = v;
        if (!take(c, ',')) {
            if (!take(c, ')'))
                return false;
            return a->ndim != 1; /* "(3)" is a number, not a tuple */
        }
    }
}

/* The header dict into a (shape, item size); false with why. */
static bool header(const char *h, size_t len, tl_npy *a, char *why, size_t wlen)
{
    cursor c = {h, h + len};
    char key[32], descr[32] = "";
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    if (!take(&c, '{'))
        return snprintf(why, wlen, "the header is not a dict"), false;
    while (!take(&c, '}')) {
        if (!string(&c, key, sizeof key) || !take(&c, ':'))
            return snprintf(why, wlen, "the header is not numpy's dict (a key expected)"), false;
        bool ok;
        if (strcmp(key, "descr") == 0 && !have_descr)
            ok = have_descr = string(&c, descr, sizeof descr);
        else if (strcmp(key, "fortran_order") == 0 && !have_order)
            ok = have_order = (fortran = word(&c, "True")) || word(&c, "False");
        else if (strcmp(key, "shape") == 0 && !have_shape)
            ok = have_shape = tuple(&c, a);
        else
            return snprintf(why, wlen, "unexpected key '%s' in the header", key), false;
        if (!ok)
            return snprintf(why, wlen,
                            "the header's '%s' is not what numpy writes (descr a dtype "
                            "string, fortran_order True or False, shape a tuple of integers)",
                            key),
                   false;
        if (!take(&c, ',')) {
            if (!take(&c, '}'))
                return snprintf(why, wlen,
                                "the header is not numpy's dict (',' or '}' "
                                "expected after '%s')",
                                key),
                       false;
            break;
        }
    }
    blanks(&c);
    if (c.p != c.end)
        return snprintf(why, wlen, "text after the header's dict"), false;
    if (!have_descr || !have_order || !have_shape)
        return snprintf(why, wlen, "the header lacks '%s'",
                        !have_descr   ? "descr"
                        : !have_order ? "fortran_order"
                                      : "shape"),
               false;
    if (strcmp(descr, "<f8") == 0)
        a->item_size = 8;
    else if (strcmp(descr, "<f4") == 0)
        a->item_size = 4;
    else
        return snprintf(why, wlen,
                        "dtype '%s': need float64 or float32, little-endian ('<f8', '<f4')%s",
                        descr, descr[0] == '>' ? "; this one is big-endian" : ""),
               false;
    if (fortran)
        return snprintf(why, wlen, "Fortran order: need C order (numpy.ascontiguousarray)"), false;
    return true;
}

static uint64_t le(const unsigned char *b, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

static double decode(const unsigned char *b, int size)
{
    if (size == 8) {
        uint64_t u = le(b, 8);
        double d;
        memcpy(&d, &u, sizeof d);
        return d;
    }
    uint32_t u = (uint32_t)le(b, 4);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

bool tl_npy_is(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    unsigned char m[6];
    bool is = fread(m, 1, 6, f) == 6 && memcmp(m, "\x93NUMPY", 6) == 0;
    fclose(f);
    return is;
}

/* Header and data of the open file f of `size` bytes into a; false with why. */
static bool read_all(FILE *f, uint64_t size, tl_npy *a, char *why, size_t wlen)
{
    unsigned char pre[12];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return snprintf(why, wlen, "not a .npy file (no \\x93NUMPY magic)"), false;
    int major = pre[6];
    if (major < 1 || major > 3)
        return snprintf(why, wlen, "format version %d.%d: versions 1 to 3 are read", major,
                        pre[7]),
               false;
    uint64_t hlen = le(pre + 8, 2), at = 10;
    if (major >= 2) {
        if (fread(pre + 10, 1, 2, f) != 2)
            return snprintf(why, wlen, "truncated header"), false;
        hlen = le(pre + 8, 4);
        at = 12;
    }
    if (hlen == 0 || hlen > MAX_HEADER || at + hlen > size)
        return snprintf(why, wlen, "header length %llu does not fit the file of %llu bytes",
                        (unsigned long long)hlen, (unsigned long long)size),
               false;
    char *h = malloc(hlen);
    if (!h)
        return snprintf(why, wlen, "out of memory"), false;
    bool ok = fread(h, 1, hlen, f) == hlen;
    if (!ok || h[hlen - 1] != '\n') {
        free(h);
        return snprintf(why, wlen, "the header does not end with a newline"), false;
    }
    ok = header(h, hlen - 1, a, why, wlen);
    free(h);
    if (!ok)
        return false;
    uint64_t count = 1;
    for (uint32_t i = 0; i < a->ndim; i++) {
        if (a->shape[i] != 0 && count > UINT64_MAX / a->shape[i])
            return snprintf(why, wlen, "the shape overflows"), false;
        count *= a->shape[i];
    }
    uint64_t data = size - at - hlen;
    if (count > UINT64_MAX / (uint64_t)a->item_size || count * (uint64_t)a->item_size != data)
        return snprintf(why, wlen,
                        "%llu bytes of data after the header, but the shape holds %llu values "
                        "of %d bytes",
                        (unsigned long long)data, (unsigned long long)count, a->item_size),
               false;
    a->count = (size_t)count;
    if (count == 0)
        return true;
    unsigned char *raw = malloc((size_t)data);
    if (!raw || !(a->data = malloc((size_t)count * sizeof *a->data))) {
        free(raw);
        return snprintf(why, wlen, "out of memory for %llu values", (unsigned long long)count),
               false;
    }
    ok = fread(raw, 1, (size_t)data, f) == data;
    for (size_t i = 0; ok && i < a->count; i++)
        a->data[i] = decode(raw + i * (size_t)a->item_size, a->item_size);
    free(raw);
    if (!ok)
        return snprintf(why, wlen, "read error: %s", strerror(errno)), false;
    return true;
}

int tl_npy_read(const char *path, tl_npy *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    char why[256];
    bool ok = fstat(fileno(f), &st) == 0 || (snprintf(why, sizeof why, "%s", strerror(errno)), 0);
    ok = ok && read_all(f, (uint64_t)st.st_size, a, why, sizeof why);
    fclose(f);
    if (!ok) {
        snprintf(err, errlen, "'%s': %s", path, why);
        tl_npy_free(a);
        return -1;
    }
    return 0;
}

void tl_npy_free(tl_npy *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}
