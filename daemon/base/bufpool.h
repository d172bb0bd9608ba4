/* bufpool.h — buffers that carry reconstructed slices from the engine worker to subscribers.
 *
 * A buffer holds one slice's pixels and what its header will say. The worker takes one,
 * reconstructs into it and posts it; the publisher sends the pixels zero-copy, and ZeroMQ
 * hands the buffer back from its I/O thread once every subscriber has it. Returned buffers
 * are kept for reuse, so steady streaming allocates nothing; a bounded number is kept so a
 * burst does not pin memory forever.
 *
 * A get takes the smallest kept buffer that is large enough (best fit), and allocates a
 * new one when none is: growing any kept buffer to the largest slice would, over a long
 * run with slices of several sizes, make every buffer the largest size. Buffers nobody
 * took between two tl_bufpool_trim calls are freed there (the publisher trims every 10 s),
 * so memory follows what the slices of now need, not the high-water mark of a burst or of
 * an earlier scan's geometry.
 *
 * A buffer may have several holders (ZeroMQ sending it, the publisher keeping it to repeat
 * after a stall): tl_bufpool_hold adds one, and the buffer goes back when the last one
 * puts it. The pixels live in the engine backend's host memory (tl_host_alloc:
 * page-locked with CUDA), so the read-out from the GPU runs at bus speed.
 */
#ifndef TL_BUFPOOL_H
#define TL_BUFPOOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/engine.h"
#include "protocol/protocol.h"

typedef struct tl_bufpool tl_bufpool;

typedef struct tl_slicebuf {
    tl_bufpool *pool;
    struct tl_slicebuf *next; /* free list */
    atomic_int holders;       /* 1 when handed out; tl_bufpool_hold adds, put takes */
    float *data;
    size_t cap; /* floats */
    /* the header to be */
    char id[TL_PROTO_MAX_ID + 1];
    uint64_t seq;
    uint32_t height, width;
    float orientation[9];
    tl_slice_info info;
    uint32_t iterations; /* an iterative slice's (PROTOCOL.md §10), else 0 */
    double residual;
    uint32_t planes; /* a box's (PROTOCOL.md §10), else 0 */
    double box_step;
    uint64_t t_done; /* CLOCK_REALTIME ns */
    bool final;
    bool tcp; /* data holds the pixels: sent on "slice/<id>/", shown to taps */
    /* what goes on "slice/<id>/": data as f32, or encoded behind it (protocol/pixels.h) */
    tl_proto_dtype wire_dtype;
    bool wire_lz4;
    double wire_scale, wire_offset; /* q16 */
    const void *payload;
    size_t payload_bytes;
    char shm_name[TL_PROTO_SHM_NAME_MAX + 1]; /* "" or the shared memory holding the pixels */
    uint64_t shm_offset;                      /*   at this offset: announced on "shm/<id>/" */
    /* the publisher's record of sending it (publisher.c) */
    unsigned unsent; /* TL_SLICEBUF_SHM | TL_SLICEBUF_TCP: messages not sent yet */
    bool shown;      /* the publisher's taps have seen it */
    bool counted;    /* counted as published */
    bool taken;      /* handed out since the last tl_bufpool_trim */
} tl_slicebuf;

#define TL_SLICEBUF_SHM 1u /* the announcement on "shm/<id>/" */
#define TL_SLICEBUF_TCP 2u /* the pixels on "slice/<id>/" */

struct tl_bufpool {
    pthread_mutex_t mu;
    tl_slicebuf *free;
    size_t nfree, max_free;
    size_t live;            /* handed out and not yet returned */
    size_t buffers, bytes;  /* allocated, kept or handed out: their count and pixel bytes */
    tl_backend_kind memory; /* whose host memory the pixels are in */
    char error[256];        /* why the last get failed */
};

void tl_bufpool_init(tl_bufpool *p, size_t max_free, tl_backend_kind memory);
/* Frees the kept buffers. Call only once every buffer has come back (live == 0). */
void tl_bufpool_destroy(tl_bufpool *p);
/* A buffer for at least n floats, or NULL when out of memory (p->error says why). */
tl_slicebuf *tl_bufpool_get(tl_bufpool *p, size_t n);
/* One more holder of b (any thread): it goes back when every holder has put it. */
void tl_bufpool_hold(tl_slicebuf *b);
/* Gives a buffer back (any thread), once its last holder puts it. */
void tl_bufpool_put(tl_slicebuf *b);
size_t tl_bufpool_live(tl_bufpool *p);
/* Frees the kept buffers not handed out since the previous trim (any thread). Returns how
 * many it freed. */
size_t tl_bufpool_trim(tl_bufpool *p);
/* How many buffers exist (kept or handed out) and their pixel bytes (any thread). */
void tl_bufpool_usage(tl_bufpool *p, size_t *buffers, size_t *bytes);
/* zmq_free_fn for a payload whose hint is its tl_slicebuf. */
void tl_bufpool_zmq_free(void *data, void *hint);

#endif
