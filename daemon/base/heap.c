/* heap.c — see heap.h. */
#include <config.h>

#include <malloc.h>

#include "daemon/base/heap.h"

bool tl_heap_idle_check(tl_heap *h, uint64_t messages, uint64_t now_ns)
{
    if (messages != h->messages || !h->since_ns) {
        h->messages = messages;
        h->since_ns = now_ns;
        h->trimmed = false;
        return false;
    }
    if (h->trimmed || now_ns - h->since_ns < TL_HEAP_IDLE_NS)
        return false;
    malloc_trim(0); /* every arena; free pages inside the heap too, not only its top */
    h->trimmed = true;
    h->trims++;
    return true;
}

void tl_heap_usage(size_t *in_use, size_t *free_bytes)
{
    struct mallinfo2 mi = mallinfo2();
    *in_use = mi.uordblks + mi.hblkhd;
    *free_bytes = mi.fordblks;
}
