/* heap.h — gives the heap's free memory back to the system once ingest falls idle.
 *
 * main.c raises glibc's thresholds so that received frames are served from the heap and go
 * back to it (no mmap, munmap and 2,000 page faults per 8 MB frame). The price: the heap
 * then keeps the high-water mark of each burst for good, and a long-running daemon's RSS
 * ratchets up with no leak behind it (the soak saw 9 to 14 MiB an hour). So once no ingest
 * message has arrived for TL_HEAP_IDLE_NS, the heap is trimmed (malloc_trim), once per
 * idle spell: while frames stream nothing changes, and the first frames after a pause
 * fault their pages in again (about 1 ms for an 8 MB frame). malloc_trim shrinks only the
 * main arena's top, so main.c keeps every thread in that one arena (M_ARENA_MAX).
 * The loop thread owns one tl_heap and checks it from a timer:
 *
 *   if (tl_heap_idle_check(&h, tl_stats_get(&stats.messages), tl_clock_ns()))
 *       ...trimmed; h.trims counts it...
 *   tl_heap_usage(&in_use, &free_bytes);   what status reports
 */
#ifndef TL_HEAP_H
#define TL_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TL_HEAP_IDLE_NS 1000000000ull /* no message for this long: ingest is idle */
#define TL_HEAP_CHECK_MS 250          /* how often the loop checks */

typedef struct {
    uint64_t messages; /* ingest messages at the last check */
    uint64_t since_ns; /* monotonic time they last changed */
    bool trimmed;      /* trimmed since they last changed */
    uint64_t trims;    /* trims done (status memory.heap_trims) */
} tl_heap;

/* Trims the heap if no message has come (messages unchanged) for TL_HEAP_IDLE_NS and it
 * has not been trimmed since the last one. Returns whether it trimmed. */
bool tl_heap_idle_check(tl_heap *h, uint64_t messages, uint64_t now_ns);
/* The heap's bytes in use (by malloc, mmapped blocks included) and free but kept. */
void tl_heap_usage(size_t *in_use, size_t *free_bytes);

#endif
