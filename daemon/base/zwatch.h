/* zwatch.h — a ZeroMQ socket watched by the libuv loop.
 *
 * ZMQ_FD is edge-triggered and readable for any pending event (zmq_getsockopt(3);
 * ARCHITECTURE.md §8): a bounded drain can leave messages behind that no new edge will
 * announce, and a send can make the socket readable without an edge. So the watcher drains
 * up to a budget when the fd fires, and a prepare/check pair re-checks ZMQ_EVENTS around
 * every loop iteration, keeping an idle handle running (the loop then polls without
 * blocking) while messages are still queued. The callback receives one message at a time
 * and must consume it.
 *
 *   tl_zwatch w; tl_zwatch_start(&w, loop, sock, on_readable, ctx);
 *   ... static void on_readable(tl_zwatch *w) { zmq_msg_recv(..., ZMQ_DONTWAIT) ... }
 *   tl_zwatch_stop(&w);   before zmq_close(sock)
 */
#ifndef TL_ZWATCH_H
#define TL_ZWATCH_H

#include <stdbool.h>
#include <uv.h>

typedef struct tl_zwatch tl_zwatch;
typedef void (*tl_zwatch_cb)(tl_zwatch *w);

struct tl_zwatch {
    void *sock;
    void *ctx;
    tl_zwatch_cb cb;
    uv_poll_t poll;
    uv_prepare_t prepare;
    uv_check_t check;
    uv_idle_t idle;
    int budget; /* messages per drain, for fairness between sockets */
    bool started;
};

/* Returns 0 or a libuv/ZeroMQ error (negative). */
int tl_zwatch_start(tl_zwatch *w, uv_loop_t *loop, void *sock, tl_zwatch_cb cb, void *ctx);
/* Stops watching and closes the handles (the socket stays open). */
void tl_zwatch_stop(tl_zwatch *w);
/* Whether the socket has a message ready. */
bool tl_zwatch_readable(const tl_zwatch *w);

#endif
