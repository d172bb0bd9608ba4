/* wire.c — packing values into messages and reading them back (wire.h). */
#include "gpu/base/wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Every value starts at a multiple of this, so that a reader may use arrays of doubles
 * and structures where they lie in the message (receive buffers come from malloc). */
#define TL_WIRE_ALIGN 8
static size_t aligned(size_t n)
{
    return (n + TL_WIRE_ALIGN - 1) / TL_WIRE_ALIGN * TL_WIRE_ALIGN;
}

void *tl_wire_room(tl_wire *w, size_t n)
{
    if (w->failed)
        return NULL;
    size_t start = aligned(w->len);
    if (start + n > w->cap) { /* doubling: a message as large as any before needs none */
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < start + n)
            cap *= 2;
        unsigned char *p = realloc(w->p, cap);
        if (!p) {
            w->failed = true;
            return NULL;
        }
        w->p = p;
        w->cap = cap;
    }
    memset(w->p + w->len, 0, start - w->len); /* no stray bytes on the wire */
    w->len = start + n;
    return w->p + start;
}

void tl_wire_put(tl_wire *w, const void *src, size_t n)
{
    void *at = tl_wire_room(w, n);
    if (at && n)
        memcpy(at, src, n);
}

void tl_wire_put_str(tl_wire *w, const char *s)
{
    uint32_t n = s ? (uint32_t)strlen(s) : 0;
    TL_WIRE_PUT(w, n);
    char *at = tl_wire_room(w, (size_t)n + 1);
    if (at) { /* with its terminator: the reader hands it out in place */
        memcpy(at, s ? s : "", n);
        at[n] = '\0';
    }
}

void tl_wire_free(tl_wire *w)
{
    free(w->p);
    *w = (tl_wire){0};
}

const void *tl_wire_get(tl_wire_reader *r, size_t n)
{
    size_t start = aligned(r->at);
    if (r->short_read || start > r->len || n > r->len - start) {
        r->short_read = true;
        return NULL;
    }
    r->at = start + n;
    return r->p + start;
}

void tl_wire_take(tl_wire_reader *r, void *dst, size_t n)
{
    const void *src = tl_wire_get(r, n);
    if (src)
        memcpy(dst, src, n);
    else
        memset(dst, 0, n);
}

const char *tl_wire_get_str(tl_wire_reader *r)
{
    uint32_t n = 0;
    TL_WIRE_TAKE(r, n);
    const char *s = tl_wire_get(r, (size_t)n + 1);
    if (s && s[n] == '\0')
        return s;
    r->short_read = true;
    return "";
}
