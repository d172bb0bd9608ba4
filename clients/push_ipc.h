/* push_ipc.h — the producer's side of frames in GPU memory (CUDA IPC, PROTOCOL.md §8.4):
 * a ring of frame slots on the GPU and the `release` messages that hand slots back. Used
 * by `tomolive push --cuda-ipc` and `tomolive bench --stream --cuda-ipc`; a producer of
 * one's own (a frame grabber writing into GPU memory) would do the same.
 *
 * A frame in GPU memory travels as a header alone: it says which allocation holds the
 * frame (its 64-byte CUDA IPC handle), where in it (offset, row pitch) and which ring slot
 * that is. The consumer (tomolived) maps the allocation once, reads the frame in place and
 * answers with a `release` naming the slot, after which the producer may write the slot
 * again. So the ring is:
 *
 *   - ONE exportable device allocation of `slots` frames (ipc_buffer 0); slot s starts at
 *     s * rows * pitch, and rows are `pitch` bytes apart (by default cols * sample size
 *     rounded up to 512 bytes, as cudaMallocPitch would, so consumers meet a real pitch);
 *   - a ZeroMQ PULL socket, bound by the producer, where releases arrive; its endpoint is
 *     what the scan's `release` key says (the consumer connects a PUSH there);
 *   - each slot's state: free, written by the producer, or lent to the consumer (a header
 *     naming it was sent, for frame series/index, and no release came back yet).
 *
 * Nothing is allocated per frame. The ring is not thread-safe: one thread drives it.
 *
 *   tl_push_ipc_opts o = {.device = 0, .rows = R, .cols = C, .dtype = TL_PROTO_U16,
 *                         .slots = 16};
 *   tl_push_ipc *ring = tl_push_ipc_create(&o, err, sizeof err);
 *   scan.release = tl_push_ipc_endpoint(ring)            (a C string), then send the scan
 *   for each frame f (f.series, f.index ... set):
 *       uint32_t slot;
 *       tl_push_ipc_acquire(ring, 10.0, &slot, err, sizeof err);   may wait for a release
 *       write the frame into the slot: tl_push_ipc_fill_host / _fill_bank, or a kernel of
 *           one's own at tl_push_ipc_slot(ring, slot), rows tl_push_ipc_pitch(ring) apart,
 *           complete (synchronised) before the header goes out
 *       tl_push_ipc_lend(ring, slot, &f);        sets f.has_ipc and f.ipc; slot is lent
 *       send f's header alone            (if that fails: tl_push_ipc_cancel(ring, slot))
 *   tl_push_ipc_drain(ring, 10.0, err, sizeof err);   every slot back
 *   send `end`; tl_push_ipc_wait_consumers(ring, 10.0);     the consumer is done with it
 *   tl_push_ipc_get_stats(ring, &st);                 released, rejected (first error)
 *   tl_push_ipc_destroy(ring);
 *
 * A "bank" is an optional second allocation of frames in the same layout, uploaded once
 * (tl_push_ipc_bank_alloc, _bank_put) so that a frame that repeats costs one device-to-
 * device copy (tl_push_ipc_fill_bank) instead of an upload from host memory: this is how a
 * test producer reaches the rates of a camera writing into GPU memory.
 *
 * Functions that can fail return 0, or -1 with a message in err. Without CUDA in the build
 * tl_push_ipc_create fails and says so (gpu/ipc.h answers TL_EUNSUPPORTED).
 */
#ifndef TL_PUSH_IPC_H
#define TL_PUSH_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/ipc.h"
#include "protocol/protocol.h"

typedef struct {
    int device; /* CUDA ordinal of the GPU that holds the ring */
    uint32_t rows, cols;
    tl_proto_dtype dtype;
    uint32_t slots;       /* frames in the ring, >= 1 */
    size_t pitch;         /* bytes between rows; 0 = cols * sample size rounded up to 512 */
    const char *endpoint; /* where to bind the release socket; NULL = tcp://127.0.0.1:* */
    /* this producer's secret CURVE certificate (NULL: $TOMOLIVE_KEY, if set): the release
     * socket is then a CURVE server with it, and a daemon with [security] curve connects
     * to it with the key the producer sent the scan with (PROTOCOL.md §8.4) */
    const char *key;
} tl_push_ipc_opts;

typedef struct {
    uint64_t lent;           /* headers announced (tl_push_ipc_lend, less cancels) */
    uint64_t released;       /* releases with ok: true */
    uint64_t rejected;       /* releases with ok: false */
    tl_proto_err first_code; /* of the first rejection */
    char first_message[256]; /* "" without rejections */
    uint64_t bad;            /* messages on the release socket that release nothing: not a
                               release, a slot not lent, or naming another frame than the
                               slot holds (a consumer's bug) */
    char first_bad[256];
    uint32_t in_flight; /* slots lent now */
} tl_push_ipc_stats;

typedef struct tl_push_ipc tl_push_ipc;

/* Allocates the ring on the GPU and binds the release socket. NULL with err on failure. */
tl_push_ipc *tl_push_ipc_create(const tl_push_ipc_opts *o, char *err, size_t errlen);
/* Frees the ring (and the bank) and closes the socket. Slots still lent are lost to their
 * consumer: drain first when one may still read them. NULL is fine. */
void tl_push_ipc_destroy(tl_push_ipc *p);

/* The endpoint a consumer connects to (for the scan's `release` key), the GPU's UUID, the
 * row pitch, and the bytes of one slot (rows * pitch). */
const char *tl_push_ipc_endpoint(const tl_push_ipc *p);
const char *tl_push_ipc_device_uuid(const tl_push_ipc *p);
size_t tl_push_ipc_pitch(const tl_push_ipc *p);
size_t tl_push_ipc_slot_bytes(const tl_push_ipc *p);
/* Device address of slot's row 0. */
void *tl_push_ipc_slot(const tl_push_ipc *p, uint32_t slot);

/* A free slot, in the order they were released (the oldest first). When none is free,
 * reads release messages until one frees a slot; -1 when none did for timeout_s seconds
 * (the message says which frames are still out and where releases are expected). */
int tl_push_ipc_acquire(tl_push_ipc *p, double timeout_s, uint32_t *slot, char *err,
                        size_t errlen);
/* Fills f's ipc fields for the acquired slot (f->has_ipc, f->ipc) and records the slot as
 * lent for frame (f->series, f->index), which the release must name. f->ipc's pointers
 * point into the ring: valid until tl_push_ipc_destroy. */
void tl_push_ipc_lend(tl_push_ipc *p, uint32_t slot, tl_proto_frame *f);
/* Takes back an acquired or lent slot whose header was not sent after all. */
void tl_push_ipc_cancel(tl_push_ipc *p, uint32_t slot);
/* Reads the releases that have arrived, without waiting. -1 only on a socket error. */
int tl_push_ipc_poll(tl_push_ipc *p, char *err, size_t errlen);
/* Waits until no slot is lent; -1 when no release came for timeout_s seconds. */
int tl_push_ipc_drain(tl_push_ipc *p, double timeout_s, char *err, size_t errlen);
void tl_push_ipc_get_stats(const tl_push_ipc *p, tl_push_ipc_stats *s);
/* After the `end`: waits until every consumer that connected to the release endpoint has
 * disconnected, as tomolived does once the series is over (and its mappings of the ring
 * are closed); 0 then, or at once when none is connected; -1 after timeout_s. */
int tl_push_ipc_wait_consumers(tl_push_ipc *p, double timeout_s);

/* Writes a dense host frame (rows * cols samples, C order) into an acquired slot: one
 * upload, the copy complete on return. */
int tl_push_ipc_fill_host(tl_push_ipc *p, uint32_t slot, const void *frame, char *err,
                          size_t errlen);
/* The bank: n frames on the GPU in the slots' layout (one allocation, not exported).
 * bank_put uploads a dense host frame to entry i; fill_bank copies entry i into an acquired
 * slot on the device, complete on return. */
int tl_push_ipc_bank_alloc(tl_push_ipc *p, size_t n, char *err, size_t errlen);
int tl_push_ipc_bank_put(tl_push_ipc *p, size_t i, const void *frame, char *err, size_t errlen);
int tl_push_ipc_fill_bank(tl_push_ipc *p, uint32_t slot, size_t i, char *err, size_t errlen);

#endif
