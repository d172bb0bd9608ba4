/* window.c — rolling-window bookkeeping (see window.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/window.h"

int tl_window_init(tl_window *w, uint32_t n, uint64_t first_index)
{
    memset(w, 0, sizeof *w);
    w->index = calloc(n, sizeof *w->index);
    w->held = calloc(n, sizeof *w->held);
    if (!w->index || !w->held) {
        tl_window_free(w);
        return -1;
    }
    w->n = n;
    w->first_index = first_index;
    w->empty = true;
    return 0;
}

void tl_window_free(tl_window *w)
{
    free(w->index);
    free(w->held);
    w->index = NULL;
    w->held = NULL;
}

void tl_window_clear(tl_window *w)
{
    memset(w->held, 0, w->n * sizeof *w->held);
    w->nheld = 0;
    w->empty = true;
    w->last = 0;
}

uint64_t tl_window_first(const tl_window *w)
{
    if (w->last - w->first_index < w->n) /* last >= first_index always holds */
        return w->first_index;
    return w->last - w->n + 1;
}

static void release(tl_window *w, uint32_t slot, void (*evict)(void *, uint32_t), void *ctx)
{
    if (!w->held[slot])
        return;
    w->held[slot] = false;
    w->nheld--;
    if (evict)
        evict(ctx, slot);
}

tl_status tl_window_place(tl_window *w, uint64_t index, uint32_t *slot,
                          void (*evict)(void *ctx, uint32_t slot), void *ctx)
{
    if (index < w->first_index)
        return TL_ESTALE;
    uint32_t s = (uint32_t)(index % w->n);
    if (w->empty || index > w->last) {
        if (!w->empty) {
            /* Release the indices the window moves past: [old first, new first). At most N
             * steps, since a jump of N or more releases every slot. */
            uint64_t old_first = tl_window_first(w);
            uint64_t new_first = index - w->first_index < w->n ? w->first_index : index - w->n + 1;
            if (new_first - old_first >= w->n) {
                for (uint32_t k = 0; k < w->n; k++)
                    release(w, k, evict, ctx);
            } else {
                for (uint64_t i = old_first; i < new_first; i++) {
                    uint32_t k = (uint32_t)(i % w->n);
                    if (w->held[k] && w->index[k] == i)
                        release(w, k, evict, ctx);
                }
            }
        }
        w->empty = false;
        w->last = index;
    } else if (index < tl_window_first(w)) {
        return TL_ESTALE;
    } else if (w->held[s] && w->index[s] == index) {
        return TL_EDUPLICATE;
    }
    *slot = s;
    return TL_OK;
}

void tl_window_hold(tl_window *w, uint32_t slot, uint64_t index)
{
    if (!w->held[slot])
        w->nheld++;
    w->held[slot] = true;
    w->index[slot] = index;
}

uint32_t tl_window_missing(const tl_window *w)
{
    if (w->empty)
        return 0;
    return (uint32_t)(w->last - tl_window_first(w) + 1) - w->nheld;
}

size_t tl_window_missing_list(const tl_window *w, uint64_t *out, size_t cap)
{
    if (w->empty)
        return 0;
    size_t count = 0;
    for (uint64_t i = tl_window_first(w); i <= w->last; i++) {
        uint32_t k = (uint32_t)(i % w->n);
        if (w->held[k] && w->index[k] == i)
            continue;
        if (count < cap)
            out[count] = i;
        count++;
    }
    return count;
}
