/* outbox.h — slices waiting to be published: the newest of each slice, and its final.
 *
 * The worker posts slices faster than a slow subscriber takes them. What waits is bounded
 * here, by slice, rather than in ZeroMQ's queues, which keep the oldest messages and drop
 * the newest once full: a slow reader would get stale images and lose the final one. Per
 * slice id, at most three wait: a routine slice, the final after it (the last slice of a
 * scan), and the newest slice posted after that final.
 *  - latest wins: a routine slice replaces the waiting routine slice of its id posted
 *    after the id's waiting final (any, when no final waits);
 *  - a final replaces nothing but an older final: it waits behind the routine slice
 *    before it, which was posted and is owed (a scan's end comes within a millisecond of
 *    its last frame, so that slice often still waits; replacing it left every subscriber,
 *    fast or slow, a gap in the seqs);
 *  - a final is never replaced by the next scan's slices: they wait behind it. Only a newer
 *    final replaces it and the slice behind it (two scans ended while no subscriber could
 *    take anything), and the caller counts that final as lost;
 *  - slices leave in the order they were first posted.
 * The publisher also keeps what it sent last, by the same rules, to send again on request
 * (publisher.h). Not thread-safe: the caller locks.
 *
 *   tl_outbox o; tl_outbox_init(&o, 3 * max_slices);
 *   tl_slicebuf *gone[2]; int n = tl_outbox_post(&o, b, gone);   what b displaced
 *   for (tl_slicebuf *h; (h = tl_outbox_head(&o)); tl_outbox_pop(&o)) send(h);
 */
#ifndef TL_OUTBOX_H
#define TL_OUTBOX_H

#include "daemon/base/bufpool.h"

typedef struct {
    tl_slicebuf **items; /* in posting order */
    int count, cap;
} tl_outbox;

/* Room for cap waiting slices. Returns 0, or -1 out of memory. */
int tl_outbox_init(tl_outbox *o, int cap);
/* Frees the array; the caller has taken every buffer out first. */
void tl_outbox_destroy(tl_outbox *o);
/* Adds b by the rules above. The buffers that no longer wait (replaced by b, or b itself
 * when the outbox is full) go to gone[], at most two; returns how many: the caller counts
 * and releases them. */
int tl_outbox_post(tl_outbox *o, tl_slicebuf *b, tl_slicebuf *gone[2]);
/* The oldest waiting slice, or NULL. */
tl_slicebuf *tl_outbox_head(const tl_outbox *o);
/* Takes out the oldest waiting slice of this id (NULL: none). */
tl_slicebuf *tl_outbox_take(tl_outbox *o, const char *id);
/* Whether a slice of this id waits. */
bool tl_outbox_has(const tl_outbox *o, const char *id);
/* Removes the head (the caller has taken it). */
void tl_outbox_pop(tl_outbox *o);

#endif
