/* wire.h — values packed one after another into a byte buffer and read back in the same
 * order: the operations gpu/remote.c sends between the ranks of one job. Both ends run the
 * same build (remote.c checks), so structures travel as their bytes, each at a multiple of 8
 * bytes (a reader may use them in place); a reader past the end gets NULL and marks itself
 * short rather than read beyond the message.
 *
 *   tl_wire w = {0};                  // grows, and is kept for the next message
 *   tl_wire_reset(&w); TL_WIRE_PUT(&w, slot); tl_wire_put(&w, pixels, n);
 *   tl_wire_reader r = {w.p, w.len, 0, false};
 *   uint32_t slot; TL_WIRE_TAKE(&r, slot);  const void *px = tl_wire_get(&r, n);
 */
#ifndef TL_WIRE_H
#define TL_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    unsigned char *p;
    size_t len, cap;
    bool failed; /* out of memory: everything after was dropped */
} tl_wire;

typedef struct {
    const unsigned char *p;
    size_t len, at;
    bool short_read; /* a get asked for more than was left */
} tl_wire_reader;

static inline void tl_wire_reset(tl_wire *w)
{
    w->len = 0;
    w->failed = false;
}
/* n bytes appended to w for the caller to fill, or NULL (w->failed) without memory. */
void *tl_wire_room(tl_wire *w, size_t n);
void tl_wire_put(tl_wire *w, const void *src, size_t n);
/* A string with its length (NULL travels as ""). */
void tl_wire_put_str(tl_wire *w, const char *s);
void tl_wire_free(tl_wire *w);
#define TL_WIRE_PUT(w, v) tl_wire_put((w), &(v), sizeof(v))

/* The next n bytes, or NULL (r->short_read) when fewer are left. */
const void *tl_wire_get(tl_wire_reader *r, size_t n);
/* Copies the next n bytes into dst (zeros when short). */
void tl_wire_take(tl_wire_reader *r, void *dst, size_t n);
/* The next string, inside the message ("" when short). */
const char *tl_wire_get_str(tl_wire_reader *r);
#define TL_WIRE_TAKE(r, v) tl_wire_take((r), &(v), sizeof(v))

#ifdef __cplusplus
}
#endif
#endif
