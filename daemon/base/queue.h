/* queue.h — the bounded queue between the ingest thread and the engine worker.
 *
 * The ingest thread decodes and checks each message, then pushes it here with its payload
 * still in the ZeroMQ message it arrived in (moved, not copied). The worker pops items in
 * order. A full queue either blocks the ingest thread (ZeroMQ's high-water mark then pushes
 * back on the sender; nothing is lost) or refuses the item, which the caller counts as
 * dropped. Slots are allocated once; pushing and popping allocate nothing.
 *
 *   tl_queue q; tl_queue_init(&q, 64);
 *   ingest:  tl_queue_push(&q, &item, true, &stop)      (item's payload is moved in)
 *   worker:  if (tl_queue_pop(&q, &item, 0.2) == 1) { ...; zmq_msg_close(&item.payload); }
 */
#ifndef TL_QUEUE_H
#define TL_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

#include "protocol/protocol.h"

/* What a detector said about the frames of a scan (a DECTRIS Stream V2 start message):
 * the corrections it applied, and the pixels its mask marks, which the adapter fills from
 * their neighbours in every frame. All zero for formats that do not say. */
typedef struct {
    bool told; /* the detector said */
    bool flatfield_enabled, countrate_correction_enabled, pixel_mask_enabled;
    uint64_t masked_pixels;
} tl_item_detector;

typedef struct {
    tl_msg_type type;     /* TL_MSG_SCAN, TL_MSG_FRAME or TL_MSG_END */
    uint64_t t_recv;      /* receive time, CLOCK_REALTIME ns */
    uint64_t t_recv_mono; /* receive time, CLOCK_MONOTONIC ns (stage latencies) */
    size_t bytes;         /* message size on the wire */
    union {
        tl_proto_scan scan;
        tl_proto_frame frame;
        tl_proto_end end;
    };
    char filter[33];                         /* scan: the filter name (the header part is gone) */
    char rings[33];                          /* scan: ring removal, as sent */
    char release[TL_PROTO_MAX_ENDPOINT + 1]; /* scan: its release endpoint, or "" */
    char release_refused[TL_PROTO_MAX_ENDPOINT + 192]; /* scan: why release is not allowed */
    char producer_key[41]; /* scan: its sender's CURVE public key (Z85), or "" */
    uint8_t ipc_handle[TL_PROTO_IPC_HANDLE]; /* frame in GPU memory: its header's handle */
    char ipc_device[TL_PROTO_UUID_LEN + 1];  /* ... and device UUID */
    tl_item_detector detector;               /* scan: what its detector said */
    uint64_t masked_filled;                  /* frame: masked pixels the adapter filled */
    zmq_msg_t payload; /* frame: the pixels, zero-copy from ZeroMQ (must stay last) */
} tl_item;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    tl_item *slots;
    uint32_t cap, head, count;
    uint32_t high; /* high-water mark */
    bool wake;     /* a pop should return early (tl_queue_wake) */
} tl_queue;

int tl_queue_init(tl_queue *q, uint32_t cap);
/* Closes the payloads of items still queued. */
void tl_queue_destroy(tl_queue *q);

/* Moves *item into the queue (item->payload is left empty). With block, waits for room
 * until *stop becomes true. Returns 1 when queued, 0 when the queue was full (not blocking)
 * or stop was set; then *item is untouched and the caller still owns it. */
int tl_queue_push(tl_queue *q, tl_item *item, bool block, const atomic_bool *stop);

/* Moves the oldest item into *out (out->payload must be initialised; it is replaced).
 * Waits up to timeout seconds. Returns 1 with an item, 0 on timeout or tl_queue_wake. */
int tl_queue_pop(tl_queue *q, tl_item *out, double timeout);

/* Makes a waiting (or the next) tl_queue_pop return early, and wakes a blocked push so it
 * can see its stop flag. */
void tl_queue_wake(tl_queue *q);

uint32_t tl_queue_depth(tl_queue *q);
uint32_t tl_queue_high(tl_queue *q);

#endif
