/* publisher.h — the XPUB socket that publishes slices, and its subscriptions.
 *
 * The engine worker posts finished slices from its own thread; the publisher sends them
 * from the loop thread (ZeroMQ sockets stay on one thread). Each message is [topic
 * "slice/<id>/", msgpack header, float32 pixels], the pixels zero-copy from the buffer, and/or
 * [topic "shm/<id>/", header] for a slice in shared memory.
 *
 * What it promises every subscriber (PROTOCOL.md §10.2 says the same to clients):
 *  - Latest wins, per slice. ZeroMQ's own queue per subscriber (slices.sndhwm messages) drops
 *    the newest message once full and keeps the oldest, and ZMQ_CONFLATE cannot serve
 *    multipart messages or several topics. So the socket is ZMQ_XPUB_NODROP: a send that
 *    would overflow any subscriber's queue is refused, and the slice waits in our outbox
 *    (outbox.h), where a newer one of its id replaces it. A reader that falls behind gets at
 *    most sndhwm older messages (plus what is in flight), then the newest of each slice.
 *  - Finals are never dropped: in the outbox a final waits until sent, whatever follows.
 *  - One subscriber cannot hold up the others for long. When a send has been refused for
 *    slices.stall_ms, that message goes to every queue with room and is dropped for the full
 *    ones (a stall, counted). ZeroMQ then leaves the full queue out, so its reader no longer
 *    holds anyone up, until it reads again; the daemon cannot tell which subscriber it was
 *    or when it reads (XPUB says neither). A reader slower than the slices stalls again
 *    each time it has read a little.
 *  - What was sent last is kept: for each slice its newest message and its newest final.
 *    tl_publisher_resend sends them again (the `resend` command): a reader that stalled and
 *    has read what it had queued, or that joined late, gets the newest of each slice and
 *    the last final at once. Every subscriber of those topics sees them again, same seq.
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

#include "daemon/base/auth.h"
#include "daemon/base/bufpool.h"
#include "daemon/base/outbox.h"
#include "daemon/base/stats.h"
#include "daemon/base/subs.h"
#include "daemon/base/zwatch.h"

#define TL_PUBLISHER_TAPS 4 /* consumers inside the daemon: the preview page, RECAST3D, ... */

typedef struct {
    const char *endpoint;   /* bound */
    int sndhwm;             /* messages queued per subscriber in ZeroMQ */
    int stall_ms;           /* how long sends wait for a full subscriber */
    int max_slices;         /* slices at once: sizes the outboxes */
    tl_backend_kind memory; /* whose host memory slice buffers live in (tl_host_alloc) */
    tl_auth *auth;          /* [security]: the socket's keys and its context's ZAP handler */
} tl_publisher_opts;

typedef struct {
    void *zctx; /* the publisher's own context (above) */
    void *sock;
    tl_zwatch watch;
    uv_async_t async;
    uv_timer_t retry; /* runs the flush again while slices wait for room */
    uv_timer_t trim;  /* frees the pool's idle buffers now and then (bufpool.h) */
    pthread_mutex_t mu;
    tl_outbox outbox;       /* posted, not yet sent (mu) */
    tl_slicebuf *current;   /* taken from the outbox, being sent (loop) */
    tl_outbox latest;       /* sent: the newest of each slice and its final (loop) */
    tl_outbox resends;      /* to send again: tl_publisher_resend (loop) */
    uint64_t refused_since; /* monotonic ns of the first refused send, 0 while sends go */
    uint64_t stall_ns;
    bool nodrop; /* the socket's ZMQ_XPUB_NODROP as last set */
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

/* Binds the XPUB socket at opts->endpoint. Returns 0, or -1 with err set. */
int tl_publisher_open(tl_publisher *p, uv_loop_t *loop, const tl_publisher_opts *opts,
                      tl_stats *stats, void (*on_change)(void *ctx), void *ctx, char *err,
                      size_t errlen);
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
/* Sends what posted slices the socket takes now (loop thread); the rest wait (above). */
void tl_publisher_flush(tl_publisher *p);
/* Sends again the kept newest message and final of slice id (NULL: of every slice) (loop
 * thread). Returns how many were queued. */
int tl_publisher_resend(tl_publisher *p, const char *id);
/* Lets go of what is kept of slice id (it was removed; loop thread). */
void tl_publisher_forget(tl_publisher *p, const char *id);
/* Whether anyone is subscribed to topic (any thread). */
bool tl_publisher_wanted(tl_publisher *p, const char *topic, size_t len);
/* Closes the socket after a last flush that waits for no subscriber; linger_ms bounds how
 * long unsent slices wait in ZeroMQ. */
void tl_publisher_close(tl_publisher *p, int linger_ms);
/* Frees what remains once the ZeroMQ context is gone (every buffer has come back). */
void tl_publisher_destroy(tl_publisher *p);

#endif
