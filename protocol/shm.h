/* shm.h — slices in shared memory, for subscribers on the daemon's own host (PROTOCOL.md §10.1).
 *
 * Over TCP a 2048² float32 slice is 16 MB that the kernel copies twice, ~4 ms per slice on
 * loopback: four slices are 16 ms of latency for a control loop on the same machine. With
 * shared memory the daemon's GPU read-out writes each slice once, straight into a slot of a
 * POSIX shared-memory object, and the slice message (topic "shm/<id>/") carries only the
 * header plus the object's name and the pixels' offset.
 *
 * One object per slice and size: `slots` slots, each a 4096-byte slot header and the pixels
 * (rounded up to 4096 bytes). The little-endian u64 64 bytes before a slot's pixels is its
 * sequence word: 0 while the daemon writes the slot, then the seq of the slice in it. The
 * daemon fills the slots in turn, so a slot is rewritten `slots` publications later; a
 * reader copies the pixels and checks the word equals the message's seq before and after
 * the copy, and otherwise discards the copy (it fell behind: latest wins, as over TCP).
 * A kept slot (tl_shm_ring_keep: the daemon keeps each scan's final slice) is skipped until
 * another is kept, so a final stays readable however late its reader comes; the others
 * turn over among the remaining slots - 1.
 *
 * Writer (the daemon):
 *   tl_shm_ring r; tl_shm_ring_create(&r, "/tomolive-a-1", 4, bytes, err, sizeof err);
 *   uint64_t off; void *px = tl_shm_ring_begin(&r, &off);  ... fill ...
 *   tl_shm_ring_commit(&r, off, seq);                        then publish name, off, seq
 *   tl_shm_ring_destroy(&r);        unlinks the name; mappings of readers stay valid
 * Reader (a subscriber):
 *   tl_shm_reader rd = {0};
 *   int rc = tl_shm_read(&rd, &slice_header, dst, err, sizeof err);  0, TL_SHM_STALE or -1
 *   or, without a copy: tl_shm_view(&rd, &slice_header, &px, ...), use px,
 *   then tl_shm_valid(&rd, &slice_header) says whether what was read is the slice
 *   tl_shm_reader_close(&rd);
 */
#ifndef TL_PROTO_SHM_H
#define TL_PROTO_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/protocol.h"

#define TL_SHM_PAGE 4096    /* slot header size and pixel rounding */
#define TL_SHM_WORD_BACK 64 /* the sequence word lies this many bytes before the pixels */
#define TL_SHM_STALE 1      /* tl_shm_read: the slot was rewritten; the copy is invalid */

typedef struct {
    char name[TL_PROTO_SHM_NAME_MAX + 1];
    void *base;
    size_t size; /* of the mapping */
    size_t slot_bytes, pixel_bytes;
    uint32_t slots, next;
    uint32_t kept; /* slot index + 1 of the kept slot, 0: none */
} tl_shm_ring;

/* Creates (replacing a leftover of the same name) and maps an object of `slots` slots of
 * pixel_bytes each. Returns 0, or -1 with err set. */
int tl_shm_ring_create(tl_shm_ring *r, const char *name, uint32_t slots, size_t pixel_bytes,
                       char *err, size_t errlen);
/* The next slot's pixels, marked as being written; *offset is what the message says. */
void *tl_shm_ring_begin(tl_shm_ring *r, uint64_t *offset);
/* Marks the slot at offset as holding the slice seq (> 0). Call after the pixels are there. */
void tl_shm_ring_commit(tl_shm_ring *r, uint64_t offset, uint64_t seq);
/* Keeps the slot at offset (committed) from being rewritten until another slot is kept.
 * Needs slots >= 2. */
void tl_shm_ring_keep(tl_shm_ring *r, uint64_t offset);
/* Unmaps and unlinks. Safe on a zeroed or destroyed ring. */
void tl_shm_ring_destroy(tl_shm_ring *r);

typedef struct {
    char name[TL_PROTO_SHM_NAME_MAX + 1];
    const void *base;
    size_t size;
} tl_shm_reader;

/* Copies the pixels of slice message s (has_shm) into dst (shape x dtype bytes), mapping
 * s's object on first use or when the name changes. Returns 0, TL_SHM_STALE when the slot
 * no longer holds s->seq, or -1 with err set (no such object, offset outside it). */
int tl_shm_read(tl_shm_reader *rd, const tl_proto_slice *s, void *dst, char *err, size_t errlen);
/* The pixels of s in place: 0 with *pixels set, TL_SHM_STALE or -1 as above. They stay the
 * slice's until its slot is rewritten: after reading them, tl_shm_valid must still be true
 * for what was read to count. The pointer lives as long as the mapping: the next view or
 * read of another object, or tl_shm_reader_close, unmaps it. Call tl_shm_valid only after
 * a view that returned 0. The reader caches its mapping by name, so writers must never
 * reuse a name for a new object (the daemon's names carry its pid and a counter). */
int tl_shm_view(tl_shm_reader *rd, const tl_proto_slice *s, const void **pixels, char *err,
                size_t errlen);
bool tl_shm_valid(const tl_shm_reader *rd, const tl_proto_slice *s);
void tl_shm_reader_close(tl_shm_reader *rd);

#endif
