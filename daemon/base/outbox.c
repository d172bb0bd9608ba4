/* outbox.c — see outbox.h. A plain array: a few dozen slices wait at most, and posting
 * scans it twice. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "daemon/base/outbox.h"

int tl_outbox_init(tl_outbox *o, int cap)
{
    o->count = 0;
    o->cap = cap;
    o->items = calloc((size_t)cap, sizeof *o->items);
    return o->items ? 0 : -1;
}

void tl_outbox_destroy(tl_outbox *o)
{
    free(o->items);
    o->items = NULL;
    o->count = o->cap = 0;
}

static int find(const tl_outbox *o, const char *id, bool final, int from)
{
    for (int i = from; i < o->count; i++)
        if (o->items[i]->final == final && strcmp(o->items[i]->id, id) == 0)
            return i;
    return -1;
}

static void remove_at(tl_outbox *o, int i)
{
    o->count--;
    memmove(o->items + i, o->items + i + 1, (size_t)(o->count - i) * sizeof *o->items);
}

int tl_outbox_post(tl_outbox *o, tl_slicebuf *b, tl_slicebuf *gone[2])
{
    int n = 0, final = find(o, b->id, true, 0);
    /* the id's newest routine slice: the one behind its final, if a final waits */
    int newest = find(o, b->id, false, final < 0 ? 0 : final + 1);
    if (!b->final && newest >= 0) { /* latest wins */
        gone[n++] = o->items[newest];
        o->items[newest] = b;
        return n;
    }
    if (b->final && final >= 0) { /* a newer final: the older and the slice behind it go */
        if (newest > final) {       /* removed behind it: its index stays */
            gone[n++] = o->items[newest];
            remove_at(o, newest);
        }
        gone[n++] = o->items[final];
        o->items[final] = b; /* in the place of the older */
        return n;
    }
    if (o->count == o->cap) {
        gone[n++] = b;
        return n;
    }
    o->items[o->count++] = b; /* a first final waits behind the slice before it */
    return n;
}

tl_slicebuf *tl_outbox_take(tl_outbox *o, const char *id)
{
    for (int i = 0; i < o->count; i++)
        if (strcmp(o->items[i]->id, id) == 0) {
            tl_slicebuf *b = o->items[i];
            remove_at(o, i);
            return b;
        }
    return NULL;
}

tl_slicebuf *tl_outbox_head(const tl_outbox *o)
{
    return o->count ? o->items[0] : NULL;
}

bool tl_outbox_has(const tl_outbox *o, const char *id)
{
    for (int i = 0; i < o->count; i++)
        if (strcmp(o->items[i]->id, id) == 0)
            return true;
    return false;
}

void tl_outbox_pop(tl_outbox *o)
{
    if (o->count)
        remove_at(o, 0);
}
