/* zwatch.c — see zwatch.h. The prepare/check/idle trio is the libuv counterpart of
 * zeromq.js's poller: without it, 64 unread messages left by a bounded drain would stall
 * the loop forever (ARCHITECTURE.md §8). */
#include <config.h>

#include <zmq.h>

#include "daemon/base/zwatch.h"

bool tl_zwatch_readable(const tl_zwatch *w)
{
    int ev = 0;
    size_t len = sizeof ev;
    return zmq_getsockopt(w->sock, ZMQ_EVENTS, &ev, &len) == 0 && (ev & ZMQ_POLLIN);
}

static void drain(tl_zwatch *w)
{
    for (int n = 0; n < w->budget && w->started && tl_zwatch_readable(w); n++)
        w->cb(w);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    drain(h->data);
}

static void on_idle(uv_idle_t *h)
{
}

/* Before the loop blocks: if messages are still waiting, keep it from blocking. */
static void on_prepare(uv_prepare_t *h)
{
    tl_zwatch *w = h->data;
    if (tl_zwatch_readable(w))
        uv_idle_start(&w->idle, on_idle);
}

/* After polling: finish what is waiting (no edge may come for it). */
static void on_check(uv_check_t *h)
{
    tl_zwatch *w = h->data;
    uv_idle_stop(&w->idle);
    drain(w);
}

int tl_zwatch_start(tl_zwatch *w, uv_loop_t *loop, void *sock, tl_zwatch_cb cb, void *ctx)
{
    int fd;
    size_t len = sizeof fd;
    if (zmq_getsockopt(sock, ZMQ_FD, &fd, &len) != 0)
        return -1;
    w->sock = sock;
    w->cb = cb;
    w->ctx = ctx;
    w->budget = 64;
    int rc = uv_poll_init(loop, &w->poll, fd);
    if (rc != 0)
        return rc;
    uv_prepare_init(loop, &w->prepare);
    uv_check_init(loop, &w->check);
    uv_idle_init(loop, &w->idle);
    w->poll.data = w->prepare.data = w->check.data = w->idle.data = w;
    /* READABLE only: ZMQ_FD signals every event that way (zmq_getsockopt(3)) */
    uv_poll_start(&w->poll, UV_READABLE, on_poll);
    uv_prepare_start(&w->prepare, on_prepare);
    uv_check_start(&w->check, on_check);
    w->started = true;
    return 0;
}

void tl_zwatch_stop(tl_zwatch *w)
{
    if (!w->started)
        return;
    w->started = false;
    uv_close((uv_handle_t *)&w->poll, NULL);
    uv_close((uv_handle_t *)&w->prepare, NULL);
    uv_close((uv_handle_t *)&w->check, NULL);
    uv_close((uv_handle_t *)&w->idle, NULL);
}
