/* ipc_frames.h — frames that a producer holds in GPU memory (CUDA IPC, PROTOCOL.md §8.4).
 *
 * The engine worker owns one tl_ipc_frames. A scan that names a `release` endpoint gets a
 * PUSH socket connected there; every frame in GPU memory of that series is answered on it
 * with a `release` once the engine has read it (or rejected it), so the producer can reuse
 * its ring slot. Each (series, ipc_buffer) is opened once (gpu/ipc.h) and stays open until
 * the series ends, a new scan replaces it, or its producer goes away: the release socket's
 * monitor reports the producer's disconnection, and tl_ipc_frames_gone then says so once,
 * after which the caller ends the series and everything is closed (nothing leaks, and no
 * later frame of that series touches the producer's memory).
 *
 * The engine reads such a frame asynchronously (tl_frame.read_later): its release is
 * deferred under the engine's fence number for it and sent once tl_engine_frames_done has
 * reached that number, so the worker never waits for the GPU per frame. A rejected frame
 * is released at once (releases may thus come in another order than the frames).
 *
 *   tl_ipc_frames_init(&x, zctx, &stats);
 *   scan:   tl_ipc_frames_open(&x, series, endpoint);     (endpoint may be "")
 *   frame:  tl_ipc_frames_map(&x, &frame, handle, uuid, &ptr, &why...) -> TL_PROTO_OK
 *           ... submit ptr as TL_MEMORY_DEVICE, read_later ...
 *           accepted: tl_ipc_frames_defer(&x, &frame, tl_engine_frames_queued(e));
 *           rejected: tl_ipc_frames_release(&x, &frame, code, message);
 *   often:  tl_engine_frames_done(e, 0, &done); tl_ipc_frames_flush(&x, done);
 *   turn:   if (tl_ipc_frames_gone(&x)) end the series (tl_ipc_frames_close)
 *   end:    the engine's reads finished, then tl_ipc_frames_close(&x);
 */
#ifndef TL_IPC_FRAMES_H
#define TL_IPC_FRAMES_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/base/stats.h"
#include "gpu/ipc.h"
#include "protocol/protocol.h"
#include "protocol/zcert.h"

#define TL_IPC_MAX_BUFFERS 64   /* allocations one series may name (a ring is usually one) */
#define TL_IPC_MAX_DEFERRED 256 /* releases waiting for the engine's reads (>= a ring) */

typedef struct {
    uint64_t series, index;
    uint32_t slot;
    uint64_t fence; /* sent once the engine's frames_done reaches it */
} tl_ipc_deferred;

typedef struct {
    uint64_t id; /* the producer's ipc_buffer */
    uint8_t handle[TL_IPC_HANDLE_BYTES];
    char uuid[TL_IPC_UUID_LEN + 1]; /* the GPU that holds it, as the producer named it */
    int device;                     /* its ordinal in this process */
    void *ptr;                      /* opened mapping */
    size_t bytes;                   /* its real size */
} tl_ipc_buffer;

typedef struct {
    void *zctx;
    tl_stats *stats;
    bool active; /* a series is open */
    uint64_t series;
    void *release;  /* PUSH to the scan's `release` endpoint, or NULL */
    void *monitor;  /* PAIR receiving that socket's connection events */
    bool connected; /* the producer's endpoint was reached at least once */
    char endpoint[TL_PROTO_MAX_ENDPOINT + 1];
    tl_ipc_buffer buf[TL_IPC_MAX_BUFFERS];
    int nbuf;
    tl_ipc_deferred deferred[TL_IPC_MAX_DEFERRED]; /* a ring, oldest at `first` */
    unsigned first, ndeferred;
    msgpack_sbuffer sb; /* release messages are packed here (reused) */
    unsigned serial;    /* makes each monitor's inproc name unique */
} tl_ipc_frames;

void tl_ipc_frames_init(tl_ipc_frames *x, void *zctx, tl_stats *stats);
/* Closes everything (tl_ipc_frames_close) and frees the buffer. */
void tl_ipc_frames_destroy(tl_ipc_frames *x);

/* A new series: closes the previous one's mappings and socket, then connects the release
 * socket when endpoint is non-empty. 0, or -1 with the reason in err (the series then runs
 * without releases; the caller logs it). */
/* self, producer_key: with CURVE on (else NULL, ""), the release socket connects as a CURVE
 * client with the daemon's key pair self, to the producer's public key (Z85): the key it
 * authenticated with on the ingest socket. self without a producer key fails. */
int tl_ipc_frames_open(tl_ipc_frames *x, uint64_t series, const char *endpoint,
                       const tl_zcert *self, const char *producer_key, char *err, size_t errlen);
/* Sends the deferred releases, then closes every mapping and the release socket (queued
 * releases are still delivered). The caller makes sure the engine has finished reading
 * (tl_engine_frames_done, or the engine destroyed). */
void tl_ipc_frames_close(tl_ipc_frames *x);

/* The device pointer of frame f (f->has_ipc; handle and uuid as copied from its header):
 * opens its buffer on first use and checks that the frame lies inside the real allocation.
 * TL_PROTO_OK, or the protocol error code to reject it with and the reason in why. */
tl_proto_err tl_ipc_frames_map(tl_ipc_frames *x, const tl_proto_frame *f, const uint8_t *handle,
                               const char *uuid, const void **ptr, char *why, size_t why_len);
/* Sends frame f's release: ok when code is TL_PROTO_OK, else the error and message.
 * Does nothing for a series without a release endpoint or another series. */
void tl_ipc_frames_release(tl_ipc_frames *x, const tl_proto_frame *f, tl_proto_err code,
                           const char *message);
/* A frame the engine accepted: its release waits until the engine's frames_done reaches
 * fence. Room must be there (tl_ipc_frames_full: flush first). */
void tl_ipc_frames_defer(tl_ipc_frames *x, const tl_proto_frame *f, uint64_t fence);
/* Sends the deferred releases whose fence is <= done, oldest first. */
void tl_ipc_frames_flush(tl_ipc_frames *x, uint64_t done);
/* Whether releases are deferred, and the oldest one's fence. */
bool tl_ipc_frames_waiting(const tl_ipc_frames *x, uint64_t *oldest);
bool tl_ipc_frames_full(const tl_ipc_frames *x);
/* Whether the current series' producer disconnected since it was reached: true once. */
bool tl_ipc_frames_gone(tl_ipc_frames *x);
/* Mappings open now (status). */
int tl_ipc_frames_open_count(const tl_ipc_frames *x);

#endif
