/* window.h — bookkeeping of the rolling window: which frame index lives in which slot.
 *
 * The window holds the last N projections by index: with `last` the highest index placed,
 * it spans [max(first_index, last - N + 1), last]. Index i always lives in slot i mod N,
 * so a newer index evicts exactly the indices the window moves past, whatever the arrival
 * order. An index below the window is stale; an index already held is a duplicate. The
 * data itself lives in the backend; this module only decides and remembers.
 *
 *   uint32_t slot;
 *   if (tl_window_place(&w, index, &slot, on_evict, ctx) == TL_OK && store(slot) == TL_OK)
 *       tl_window_hold(&w, slot, index);
 */
#ifndef TL_WINDOW_H
#define TL_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/engine.h"

typedef struct {
    uint32_t n;
    uint64_t first_index; /* the scan's first index: the window never starts before it */
    bool empty;           /* nothing placed yet */
    uint64_t last;        /* highest index placed */
    uint64_t *index;      /* per slot: the index held there (valid where held) */
    bool *held;
    uint32_t nheld;
} tl_window;

/* Returns 0, or -1 when out of memory. */
int tl_window_init(tl_window *w, uint32_t n, uint64_t first_index);
void tl_window_free(tl_window *w);
/* Forgets every index (a reset): the window is empty again. */
void tl_window_clear(tl_window *w);

/* Decides where `index` goes. TL_OK: *slot is free for it, and the window has moved so
 * that index is inside it (each slot released on the way is reported to evict, which may
 * be NULL). TL_ESTALE: the index is below the window or below first_index. TL_EDUPLICATE:
 * the index is already held. */
tl_status tl_window_place(tl_window *w, uint64_t index, uint32_t *slot,
                          void (*evict)(void *ctx, uint32_t slot), void *ctx);
/* Marks slot as holding index (after the backend stored it). */
void tl_window_hold(tl_window *w, uint32_t slot, uint64_t index);

/* The window's first index (meaningless while empty). */
uint64_t tl_window_first(const tl_window *w);
/* Indices of [first, last] not held. */
uint32_t tl_window_missing(const tl_window *w);
/* Missing indices ascending, at most cap of them written; returns the missing count. */
size_t tl_window_missing_list(const tl_window *w, uint64_t *out, size_t cap);

#endif
