/* publisher.c — see publisher.h. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "daemon/base/log.h"
#include "daemon/base/zbind.h"
#include "daemon/core/publisher.h"
#include "gpu/base/clock.h"

/* While a slice waits for a full queue, the flush runs again this often: how late a reader
 * that drains its queue gets the next slice. */
#define TL_PUBLISHER_RETRY_MS 1
/* How often the pool's buffers that nobody took meanwhile are freed: long enough that a
 * slice read a few times a second keeps its buffers, short enough that a burst or an
 * earlier scan's larger slices give their memory back soon. */
#define TL_PUBLISHER_TRIM_MS 10000

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

static void on_retry(uv_timer_t *h)
{
    tl_publisher_flush(h->data);
}

static void on_trim(uv_timer_t *h)
{
    tl_publisher *p = h->data;
    tl_bufpool_trim(&p->pool);
}

int tl_publisher_open(tl_publisher *p, uv_loop_t *loop, const tl_publisher_opts *opts,
                      tl_stats *stats, void (*on_change)(void *ctx), void *ctx, char *err,
                      size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->stats = stats;
    p->on_change = on_change;
    p->ctx = ctx;
    p->stall_ns = (uint64_t)opts->stall_ms * 1000000u;
    pthread_mutex_init(&p->mu, NULL);
    /* three per slice: a slice, the final behind it, the newest behind that (outbox.h) */
    if (tl_outbox_init(&p->outbox, 3 * opts->max_slices) != 0 ||
        tl_outbox_init(&p->latest, 3 * opts->max_slices) != 0 ||
        tl_outbox_init(&p->resends, 3 * opts->max_slices) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    tl_bufpool_init(&p->pool, 2 * (size_t)opts->max_slices + 4, opts->memory);
    tl_subs_init(&p->subs);
    msgpack_sbuffer_init(&p->hdr);
    p->zctx = zmq_ctx_new();
    if (!p->zctx || zmq_ctx_set(p->zctx, ZMQ_IO_THREADS, 1) != 0) {
        snprintf(err, errlen, "cannot create the slices' ZeroMQ context");
        return -1;
    }
    p->sock = zmq_socket(p->zctx, ZMQ_XPUB);
    int one = 1, linger = 0;
    bool auth_failed = false; /* err holds the reason already */
    p->nodrop = true;
    if (!p->sock || zmq_setsockopt(p->sock, ZMQ_SNDHWM, &opts->sndhwm, sizeof opts->sndhwm) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_XPUB_VERBOSER, &one, sizeof one) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_XPUB_NODROP, &one, sizeof one) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        (auth_failed = tl_auth_serve(opts->auth, loop, p->zctx, err, errlen) != 0 ||
                       tl_auth_socket(opts->auth, p->sock, TL_AUTH_SLICES, err, errlen) != 0) ||
        tl_zbind(p->sock, opts->endpoint) != 0 ||
        (auth_failed = tl_auth_watch(opts->auth, loop, p->zctx, TL_AUTH_SLICES, err, errlen) !=
                       0)) {
        if (!auth_failed)
            snprintf(err, errlen, "slices socket %s: %s", opts->endpoint,
                     zmq_strerror(zmq_errno()));
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
    uv_timer_init(loop, &p->retry);
    p->retry.data = p;
    uv_timer_init(loop, &p->trim);
    p->trim.data = p;
    uv_timer_start(&p->trim, on_trim, TL_PUBLISHER_TRIM_MS, TL_PUBLISHER_TRIM_MS);
    p->open = true;
    return 0;
}

bool tl_publisher_wanted(tl_publisher *p, const char *topic, size_t len)
{
    return tl_subs_match(&p->subs, topic, len);
}

/* The messages b makes: its announcement on "shm/<id>/", its pixels on "slice/<id>/". */
static unsigned all_parts(const tl_slicebuf *b)
{
    return (b->shm_name[0] ? TL_SLICEBUF_SHM : 0) | (b->tcp ? TL_SLICEBUF_TCP : 0);
}

/* A buffer that no longer waits to be sent: counted, and given back. */
static void drop_waiting(tl_publisher *p, tl_slicebuf *b)
{
    tl_stats_count(&p->stats->slices_superseded);
    if (b->final)
        tl_stats_count(&p->stats->finals_lost);
    tl_bufpool_put(b);
}

void tl_publisher_post(tl_publisher *p, tl_slicebuf *b)
{
    b->unsent = all_parts(b);
    tl_slicebuf *gone[2];
    pthread_mutex_lock(&p->mu);
    int n = tl_outbox_post(&p->outbox, b, gone);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < n; i++)
        drop_waiting(p, gone[i]);
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

/* Sets ZMQ_XPUB_NODROP when it changes: with it a send that would overflow any subscriber's
 * queue is refused (EAGAIN); without it the message is dropped for the full ones only. */
static void set_nodrop(tl_publisher *p, bool nodrop)
{
    int v = nodrop;
    if (p->nodrop != nodrop && zmq_setsockopt(p->sock, ZMQ_XPUB_NODROP, &v, sizeof v) == 0)
        p->nodrop = nodrop;
}

/* The header of b as §10 says, time of publication now. */
static tl_proto_slice slice_header(const tl_slicebuf *b, uint64_t now)
{
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
        .iterations = b->iterations,
        .residual = b->residual,
        .planes = b->planes,
        .box_step = b->box_step,
    };
    memcpy(h.orientation, b->orientation, sizeof h.orientation);
    return h;
}

typedef enum { SENT, REFUSED, FAILED } send_result;

/* Sends one of b's messages (TL_SLICEBUF_SHM: the announcement on "shm/<id>/"; TCP: the
 * pixels on "slice/<id>/", zero-copy, ZeroMQ holding b until every subscriber has them).
 * The topic goes first on its own: with NODROP only a message's first part can be refused,
 * and then nothing of it, the pixels included, has left b. */
static send_result send_part(tl_publisher *p, tl_slicebuf *b, unsigned part, uint64_t now)
{
    char topic[TL_PROTO_MAX_ID + 16];
    tl_proto_slice h = slice_header(b, now);
    size_t tlen;
    if (part == TL_SLICEBUF_TCP) { /* the pixels as the slice asked (§10.3); shm keeps f32 */
        h.dtype = b->wire_dtype;
        h.lz4 = b->wire_lz4;
        h.scale = b->wire_scale;
        h.offset = b->wire_offset;
    }
    if (part == TL_SLICEBUF_SHM) {
        h.has_shm = true;
        h.shm_name = (tl_proto_str){b->shm_name, strlen(b->shm_name)};
        h.shm_offset = b->shm_offset;
        tlen = tl_proto_shm_topic(topic, sizeof topic, b->id, strlen(b->id));
    } else {
        tlen = tl_proto_slice_topic(topic, sizeof topic, b->id, strlen(b->id));
    }
    msgpack_sbuffer_clear(&p->hdr);
    if (tl_proto_encode_slice(&p->hdr, &h) != 0)
        return FAILED;
    if (zmq_send(p->sock, topic, tlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return zmq_errno() == EAGAIN ? REFUSED : FAILED;
    int rc;
    if (part == TL_SLICEBUF_SHM) {
        rc = tl_proto_send(p->sock, NULL, 0, p->hdr.data, p->hdr.size, NULL, 0, NULL, NULL,
                           ZMQ_DONTWAIT);
    } else {
        tl_bufpool_hold(b); /* ZeroMQ's; tl_proto_send gives it back if the send fails */
        rc = tl_proto_send(p->sock, NULL, 0, p->hdr.data, p->hdr.size, (void *)b->payload,
                           b->payload_bytes, tl_bufpool_zmq_free, b, ZMQ_DONTWAIT);
    }
    return rc == 0 ? SENT : FAILED;
}

/* Sends what is left of b's messages, the shared-memory one first (the local subscriber
 * waiting for it gets it soonest). REFUSED: b->unsent says what is still to go. The first
 * publication of b is counted as published, with its latency; a resend as resent. */
static send_result send_slice(tl_publisher *p, tl_slicebuf *b, bool resend)
{
    static const unsigned parts[] = {TL_SLICEBUF_SHM, TL_SLICEBUF_TCP};
    uint64_t now = tl_clock_realtime_ns();
    if (!resend && !b->shown && (b->unsent & TL_SLICEBUF_TCP)) { /* taps read b->data */
        for (int i = 0; i < p->ntaps; i++)
            p->taps[i].fn(p->taps[i].ctx, b);
        b->shown = true;
    }
    send_result result = FAILED;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (!(b->unsent & parts[i]))
            continue;
        send_result r = send_part(p, b, parts[i], now);
        if (r == REFUSED)
            return REFUSED;
        b->unsent &= ~parts[i];
        if (r == FAILED) {
            send_failed(b);
            continue;
        }
        result = SENT;
        if (resend)
            continue;
        if (parts[i] == TL_SLICEBUF_SHM)
            tl_stats_count(&p->stats->slices_shm);
        if (!b->counted) {
            b->counted = true;
            tl_stats_count(&p->stats->slices_published);
            if (b->info.t_recv)
                tl_hist_add(&p->stats->latency[TL_LAT_FRAME_TO_PUB],
                            (double)(int64_t)(now - b->info.t_recv) / 1e9);
            if (b->info.t_acq)
                tl_hist_add(&p->stats->latency[TL_LAT_ACQ_TO_PUB],
                            (double)(int64_t)(now - b->info.t_acq) / 1e9);
        }
    }
    if (resend && result == SENT)
        tl_stats_count(&p->stats->slices_resent);
    return result;
}

/* The next slice to send (loop thread): a resend first (it is older), else the current one
 * or the outbox's head, taken into p->current. A current one still refused gives way to a
 * newer one of its id, unless it is a final (outbox.h's rules). */
static tl_slicebuf *next_slice(tl_publisher *p, bool *resend)
{
    *resend = p->resends.count > 0;
    if (*resend)
        return tl_outbox_head(&p->resends);
    pthread_mutex_lock(&p->mu);
    tl_slicebuf *stale = NULL;
    if (p->current && !p->current->final && tl_outbox_has(&p->outbox, p->current->id)) {
        stale = p->current;
        p->current = NULL;
    }
    if (!p->current && (p->current = tl_outbox_head(&p->outbox)))
        tl_outbox_pop(&p->outbox);
    tl_slicebuf *b = p->current;
    pthread_mutex_unlock(&p->mu);
    if (stale)
        drop_waiting(p, stale);
    return b;
}

/* b has been sent (or failed for good): a resend lets go of it; a first publication
 * becomes the newest of its slice kept for tl_publisher_resend (the outbox's hold passes
 * to p->latest). */
static void sent(tl_publisher *p, tl_slicebuf *b, bool resend)
{
    if (resend) {
        tl_outbox_pop(&p->resends);
        tl_bufpool_put(b);
        return;
    }
    p->current = NULL;
    /* what was sent last: a final supersedes every earlier slice of its id (in the outbox
     * it waits behind the slice before it, which is owed; a resend owes only the final) */
    if (b->final)
        for (tl_slicebuf *old; (old = tl_outbox_take(&p->latest, b->id));)
            tl_bufpool_put(old);
    tl_slicebuf *gone[2];
    for (int i = 0, n = tl_outbox_post(&p->latest, b, gone); i < n; i++)
        tl_bufpool_put(gone[i]);
}

/* A queue stayed full for stall_ns: counted, and said (rate-limited: a reader slower than
 * the slices makes one every few seconds). */
static void stalled(tl_publisher *p, uint64_t now)
{
    static tl_ratelimit rl = TL_RATELIMIT_INIT;
    uint64_t suppressed;
    tl_stats_count(&p->stats->subscriber_stalls);
    if (tl_ratelimit_allow(&rl, 10.0, 3, &suppressed))
        tl_log(TL_LOG_WARN, "subscriber_stalled", "waited_ms=%.0f suppressed=%llu",
               (double)(now - p->refused_since) / 1e6, (unsigned long long)suppressed);
    p->refused_since = 0;
}

void tl_publisher_flush(tl_publisher *p)
{
    bool resend;
    if (!p->sock) { /* closed: whatever is left goes back to the pool */
        for (tl_slicebuf *b; (b = next_slice(p, &resend));)
            sent(p, b, resend);
        for (tl_slicebuf *b; (b = tl_outbox_head(&p->latest)); tl_outbox_pop(&p->latest))
            tl_bufpool_put(b);
        return;
    }
    for (tl_slicebuf *b; (b = next_slice(p, &resend)); sent(p, b, resend)) {
        if (send_slice(p, b, resend) != REFUSED) {
            p->refused_since = 0;
            continue;
        }
        uint64_t now = tl_clock_ns();
        if (!p->refused_since)
            p->refused_since = now;
        if (now - p->refused_since < p->stall_ns)
            break; /* b waits; the retry timer comes back */
        stalled(p, now);
        set_nodrop(p, false); /* to every queue with room; dropped for the full ones */
        send_slice(p, b, resend);
        set_nodrop(p, true);
    }
    if (!p->current && !p->resends.count)
        uv_timer_stop(&p->retry);
    else if (!uv_is_active((uv_handle_t *)&p->retry))
        uv_timer_start(&p->retry, on_retry, TL_PUBLISHER_RETRY_MS, 0);
}

int tl_publisher_resend(tl_publisher *p, const char *id)
{
    int n = 0;
    for (int i = 0; i < p->latest.count; i++) {
        tl_slicebuf *b = p->latest.items[i];
        if (id && strcmp(b->id, id) != 0)
            continue;
        tl_bufpool_hold(b); /* the resends' */
        b->unsent = all_parts(b);
        tl_slicebuf *gone[2];
        for (int k = 0, m = tl_outbox_post(&p->resends, b, gone); k < m; k++)
            tl_bufpool_put(gone[k]);
        n++;
    }
    tl_publisher_flush(p);
    return n;
}

void tl_publisher_forget(tl_publisher *p, const char *id)
{
    tl_slicebuf *b;
    while ((b = tl_outbox_take(&p->latest, id)))
        tl_bufpool_put(b);
}

void tl_publisher_close(tl_publisher *p, int linger_ms)
{
    if (!p->open)
        return;
    p->stall_ns = 0; /* the last flush waits for no one */
    tl_publisher_flush(p);
    p->open = false;
    tl_zwatch_stop(&p->watch);
    uv_close((uv_handle_t *)&p->async, NULL);
    uv_close((uv_handle_t *)&p->retry, NULL);
    uv_close((uv_handle_t *)&p->trim, NULL);
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
    tl_outbox_destroy(&p->outbox);
    tl_outbox_destroy(&p->latest);
    tl_outbox_destroy(&p->resends);
    pthread_mutex_destroy(&p->mu);
}
