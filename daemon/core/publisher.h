/* publisher.h — the XPUB socket that publishes slices, and its subscriptions.
 *
 * The engine worker posts finished slices from its own thread; the publisher sends them
 * from the loop thread (ZeroMQ sockets stay on one thread). Posting is "latest wins": if a
 * slice's previous buffer has not gone out yet, the new one replaces it and the old one is
 * counted as superseded, so a slow loop never builds a backlog. Each message is
 * [topic "slice/<id>/", msgpack header, float32 pixels], the pixels zero-copy from the
 * buffer. PUB semantics apply per subscriber: one that stops reading loses messages at its
 * high-water mark without slowing anyone else; its gaps show in the seq numbers.
 *
 * The socket also reports subscriptions (ZMQ_XPUB_VERBOSER); when the set of wanted
 * topics changes, on_change runs on the loop thread so the worker can start or stop work.
 *
 * The socket lives in a ZeroMQ context of its own, with its own I/O thread: writing a few
 * 16 MB slices to a subscriber keeps an I/O thread busy for milliseconds, and an ingest
 * connection sharing that thread would stall meanwhile (the camera would see it as
 * back-pressure, and the frames' latency would grow).
 */
#ifndef TL_PUBLISHER_H
#define TL_PUBLISHER_H

#include <msgpack.h>
#include <pthread.h>
#include <uv.h>

#include "daemon/base/bufpool.h"
#include "daemon/base/stats.h"
#include "daemon/base/subs.h"
#include "daemon/base/zwatch.h"

#define TL_PUBLISHER_TAPS 4 /* consumers inside the daemon: the preview page, RECAST3D, ... */

typedef struct {
    void *zctx; /* the publisher's own context (above) */
    void *sock;
    tl_zwatch watch;
    uv_async_t async;
    pthread_mutex_t mu;
    tl_slicebuf **outbox; /* pending, at most one per slice id */
    int nout, cap;
    tl_bufpool pool;
    tl_subs subs;
    tl_stats *stats;
    msgpack_sbuffer hdr; /* reused header buffer (loop thread) */
    void (*on_change)(void *ctx);
    void *ctx;
    struct {
        void (*fn)(void *ctx, const tl_slicebuf *b);
        void *ctx;
    } taps[TL_PUBLISHER_TAPS]; /* see tl_publisher_add_tap */
    int ntaps;
    bool open;
} tl_publisher;

/* Binds the XPUB socket at endpoint; slice buffers come from memory's host memory
 * (tl_host_alloc). Returns 0, or -1 with err set. */
int tl_publisher_open(tl_publisher *p, uv_loop_t *loop, const char *endpoint, int sndhwm,
                      int max_slices, tl_backend_kind memory, tl_stats *stats,
                      void (*on_change)(void *ctx), void *ctx, char *err, size_t errlen);
/* Posts a finished slice (any thread). */
void tl_publisher_post(tl_publisher *p, tl_slicebuf *b);
/* Shows every slice about to be published to fn as well (loop thread, before the send:
 * the buffer is valid during the call only). For consumers inside the daemon, such as the
 * preview page; each adds its own tap (at most TL_PUBLISHER_TAPS; -1 when full), and taps
 * run in the order they were added. remove_tap takes back the tap added with fn and ctx.
 * Add taps after tl_publisher_open, which starts with none. */
int tl_publisher_add_tap(tl_publisher *p, void (*fn)(void *ctx, const tl_slicebuf *b), void *ctx);
void tl_publisher_remove_tap(tl_publisher *p, void (*fn)(void *ctx, const tl_slicebuf *b),
                             void *ctx);
/* The older name of tl_publisher_add_tap (it adds; it no longer replaces). */
void tl_publisher_set_tap(tl_publisher *p, void (*fn)(void *ctx, const tl_slicebuf *b), void *ctx);
/* Sends everything posted so far (loop thread). */
void tl_publisher_flush(tl_publisher *p);
/* Whether anyone is subscribed to topic (any thread). */
bool tl_publisher_wanted(tl_publisher *p, const char *topic, size_t len);
/* Closes the socket after a final flush; linger_ms bounds how long unsent slices wait. */
void tl_publisher_close(tl_publisher *p, int linger_ms);
/* Frees what remains once the ZeroMQ context is gone (every buffer has come back). */
void tl_publisher_destroy(tl_publisher *p);

#endif
