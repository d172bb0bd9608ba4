/* publisher.c — see publisher.h. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "daemon/base/log.h"
#include "daemon/core/publisher.h"
#include "gpu/base/clock.h"

/* Subscription messages from subscribers. */
static void on_readable(tl_zwatch *w)
{
    tl_publisher *p = w->ctx;
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, p->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return;
    }
    int changed = tl_subs_update(&p->subs, zmq_msg_data(&m), zmq_msg_size(&m));
    bool more = zmq_msg_more(&m);
    zmq_msg_close(&m);
    while (more) { /* subscribers send single-part messages; discard anything else */
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, p->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
    if (changed > 0 && p->on_change)
        p->on_change(p->ctx);
}

static void on_async(uv_async_t *h)
{
    tl_publisher_flush(h->data);
}

int tl_publisher_open(tl_publisher *p, uv_loop_t *loop, const char *endpoint, int sndhwm,
                      int max_slices, tl_backend_kind memory, tl_stats *stats,
                      void (*on_change)(void *ctx), void *ctx, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->stats = stats;
    p->on_change = on_change;
    p->ctx = ctx;
    p->cap = max_slices;
    p->outbox = calloc((size_t)max_slices, sizeof *p->outbox);
    if (!p->outbox) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&p->mu, NULL);
    tl_bufpool_init(&p->pool, 2 * (size_t)max_slices + 4, memory);
    tl_subs_init(&p->subs);
    msgpack_sbuffer_init(&p->hdr);
    p->zctx = zmq_ctx_new();
    if (!p->zctx || zmq_ctx_set(p->zctx, ZMQ_IO_THREADS, 1) != 0) {
        snprintf(err, errlen, "cannot create the slices' ZeroMQ context");
        return -1;
    }
    p->sock = zmq_socket(p->zctx, ZMQ_XPUB);
    int one = 1, linger = 0;
    if (!p->sock || zmq_setsockopt(p->sock, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_XPUB_VERBOSER, &one, sizeof one) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_bind(p->sock, endpoint) != 0) {
        snprintf(err, errlen, "slices socket %s: %s", endpoint, zmq_strerror(zmq_errno()));
        if (p->sock)
            zmq_close(p->sock);
        p->sock = NULL;
        return -1;
    }
    if (tl_zwatch_start(&p->watch, loop, p->sock, on_readable, p) != 0) {
        snprintf(err, errlen, "cannot watch the slices socket");
        return -1;
    }
    uv_async_init(loop, &p->async, on_async);
    p->async.data = p;
    p->open = true;
    return 0;
}

bool tl_publisher_wanted(tl_publisher *p, const char *topic, size_t len)
{
    return tl_subs_match(&p->subs, topic, len);
}

void tl_publisher_post(tl_publisher *p, tl_slicebuf *b)
{
    tl_slicebuf *old = NULL;
    pthread_mutex_lock(&p->mu);
    int i = 0;
    while (i < p->nout && strcmp(p->outbox[i]->id, b->id) != 0)
        i++;
    if (i < p->nout) {
        old = p->outbox[i];
        p->outbox[i] = b;
    } else if (p->nout < p->cap) {
        p->outbox[p->nout++] = b;
    } else {
        old = b; /* cannot happen with one entry per slice, but never leak */
    }
    pthread_mutex_unlock(&p->mu);
    if (old) {
        tl_stats_count(&p->stats->slices_superseded);
        tl_bufpool_put(old);
    }
    if (p->open)
        uv_async_send(&p->async);
}

int tl_publisher_add_tap(tl_publisher *p, void (*fn)(void *ctx, const tl_slicebuf *b), void *ctx)
{
    if (p->ntaps >= TL_PUBLISHER_TAPS)
        return -1;
    p->taps[p->ntaps].fn = fn;
    p->taps[p->ntaps].ctx = ctx;
    p->ntaps++;
    return 0;
}

void tl_publisher_remove_tap(tl_publisher *p, void (*fn)(void *ctx, const tl_slicebuf *b),
                             void *ctx)
{
    for (int i = 0; i < p->ntaps; i++)
        if (p->taps[i].fn == fn && p->taps[i].ctx == ctx) {
            memmove(&p->taps[i], &p->taps[i + 1], (size_t)(p->ntaps - i - 1) * sizeof p->taps[0]);
            p->ntaps--;
            return;
        }
}

void tl_publisher_set_tap(tl_publisher *p, void (*fn)(void *ctx, const tl_slicebuf *b), void *ctx)
{
    tl_publisher_add_tap(p, fn, ctx);
}

static void send_failed(const tl_slicebuf *b)
{
    static tl_ratelimit rl = TL_RATELIMIT_INIT;
    uint64_t suppressed;
    if (tl_ratelimit_allow(&rl, 5.0, 3, &suppressed))
        tl_log(TL_LOG_WARN, "slice_send_failed", "id=%s error=%s suppressed=%llu", tl_logq(b->id),
               tl_logq(zmq_strerror(zmq_errno())), (unsigned long long)suppressed);
}

/* Sends b on "slice/<id>/" (pixels zero-copy from b, which ZeroMQ gives back to the pool)
 * and/or announces it on "shm/<id>/" (header only; the pixels are in shared memory). */
static void send_one(tl_publisher *p, tl_slicebuf *b)
{
    if (b->tcp) /* taps read b->data, which only TCP buffers fill */
        for (int i = 0; i < p->ntaps; i++)
            p->taps[i].fn(p->taps[i].ctx, b);
    char topic[TL_PROTO_MAX_ID + 16];
    uint64_t now = tl_clock_realtime_ns();
    tl_proto_slice h = {
        .id = {b->id, strlen(b->id)},
        .seq = b->seq,
        .shape = {b->height, b->width},
        .dtype = TL_PROTO_F32,
        .projections_used = b->info.projections_used,
        .missing = b->info.missing,
        .window_first = b->info.window_first,
        .window_last = b->info.window_last,
        .t_acq = b->info.t_acq,
        .t_pub = now,
        .t_recv = b->info.t_recv,
        .t_done = b->t_done,
        .final = b->final,
        .kernel = {b->info.kernel, strlen(b->info.kernel)},
    };
    memcpy(h.orientation, b->orientation, sizeof h.orientation);
    bool sent = false;
    if (b->shm_name[0]) { /* first: the local subscriber waiting for it gets it soonest */
        h.has_shm = true;
        h.shm_name = (tl_proto_str){b->shm_name, strlen(b->shm_name)};
        h.shm_offset = b->shm_offset;
        size_t tlen = tl_proto_shm_topic(topic, sizeof topic, b->id, strlen(b->id));
        msgpack_sbuffer_clear(&p->hdr);
        if (tl_proto_encode_slice(&p->hdr, &h) != 0 ||
            tl_proto_send(p->sock, topic, tlen, p->hdr.data, p->hdr.size, NULL, 0, NULL, NULL,
                          ZMQ_DONTWAIT) != 0) {
            send_failed(b);
        } else {
            tl_stats_count(&p->stats->slices_shm);
            sent = true;
        }
        h.has_shm = false;
    }
    if (b->tcp) {
        size_t tlen = tl_proto_slice_topic(topic, sizeof topic, b->id, strlen(b->id));
        size_t bytes = (size_t)b->height * b->width * sizeof(float);
        msgpack_sbuffer_clear(&p->hdr);
        /* tl_proto_send gives a zero-copy payload it could not send back to the pool */
        if (tl_proto_encode_slice(&p->hdr, &h) != 0 ||
            tl_proto_send(p->sock, topic, tlen, p->hdr.data, p->hdr.size, b->data, bytes,
                          tl_bufpool_zmq_free, b, ZMQ_DONTWAIT) != 0)
            send_failed(b);
        else
            sent = true;
    } else {
        tl_bufpool_put(b); /* no payload left this buffer */
    }
    if (!sent)
        return;
    tl_stats_count(&p->stats->slices_published);
    if (h.t_recv)
        tl_hist_add(&p->stats->latency[TL_LAT_FRAME_TO_PUB],
                    (double)(int64_t)(now - h.t_recv) / 1e9);
    if (h.t_acq)
        tl_hist_add(&p->stats->latency[TL_LAT_ACQ_TO_PUB], (double)(int64_t)(now - h.t_acq) / 1e9);
}

void tl_publisher_flush(tl_publisher *p)
{
    tl_slicebuf *batch[256];
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int n = p->nout < 256 ? p->nout : 256;
        memcpy(batch, p->outbox, (size_t)n * sizeof *batch);
        memmove(p->outbox, p->outbox + n, (size_t)(p->nout - n) * sizeof *batch);
        p->nout -= n;
        pthread_mutex_unlock(&p->mu);
        if (n == 0)
            return;
        for (int i = 0; i < n; i++) {
            if (p->sock)
                send_one(p, batch[i]);
            else
                tl_bufpool_put(batch[i]);
        }
    }
}

void tl_publisher_close(tl_publisher *p, int linger_ms)
{
    if (!p->open)
        return;
    tl_publisher_flush(p);
    p->open = false;
    tl_zwatch_stop(&p->watch);
    uv_close((uv_handle_t *)&p->async, NULL);
    zmq_setsockopt(p->sock, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    zmq_close(p->sock);
    p->sock = NULL;
}

static void term_context(tl_publisher *p)
{
    if (p->zctx) {
        zmq_ctx_term(p->zctx); /* waits for the linger of the last slices */
        p->zctx = NULL;
    }
}

void tl_publisher_destroy(tl_publisher *p)
{
    term_context(p);
    tl_publisher_flush(p); /* anything posted after close goes back to the pool */
    tl_bufpool_destroy(&p->pool);
    tl_subs_destroy(&p->subs);
    msgpack_sbuffer_destroy(&p->hdr);
    free(p->outbox);
    pthread_mutex_destroy(&p->mu);
}
