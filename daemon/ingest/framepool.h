/* framepool.h — frame buffers for decoded detector frames, lent to ZeroMQ messages.
 *
 * A decoded frame travels to the engine worker in a buffer handed to ZeroMQ with
 * zmq_msg_init_data; the buffer comes back to the pool when the worker closes the payload,
 * so steady streaming allocates no pixels. The pool can also wrap a frame that lies inside
 * a received message (a CBOR byte string, a tomopackets float array) without copying: the
 * message moves into the pool entry and lives as long as the payload. The pool outlives
 * its adapter until the last buffer is back (the ingest thread drops it, the worker
 * returns buffers), hence its lock.
 */
#ifndef TL_FRAMEPOOL_H
#define TL_FRAMEPOOL_H

#include <stddef.h>
#include <zmq.h>

typedef struct tl_framepool tl_framepool;

tl_framepool *tl_framepool_new(void);
/* The adapter is done with the pool; it is freed when the last buffer comes back. */
void tl_framepool_drop(tl_framepool *p);
/* A buffer of n bytes, made the content of payload (which must be closed or empty). NULL
 * when out of memory. */
void *tl_framepool_payload(tl_framepool *p, size_t n, zmq_msg_t *payload);
/* payload = the n bytes at data, which lie inside msg: msg moves into the pool (left empty
 * here) and is closed when payload is. 0, or -1 when out of memory (msg untouched). */
int tl_framepool_wrap(tl_framepool *p, zmq_msg_t *msg, const void *data, size_t n,
                      zmq_msg_t *payload);
/* Buffers handed out and not yet back (tests). */
size_t tl_framepool_live(tl_framepool *p);

#endif
