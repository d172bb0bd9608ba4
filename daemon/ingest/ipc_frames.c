/* ipc_frames.c — frames in a producer's GPU memory: open once, check, release (ipc_frames.h).
 *
 * Why the checks are here and not in the protocol decoder: the header alone proves only
 * that a frame lies inside the allocation the producer *claims* (PROTOCOL.md §8.4). Whether
 * the handle opens, on which GPU, and how large the allocation really is can only be
 * learnt by opening it, so a forged or stale handle, a device this daemon does not see and
 * a claim larger than the allocation are all found here, each with its own message.
 *
 * Why a socket monitor: a producer that is killed sends no `end`. Its PULL socket closes
 * with it, so the release socket that is connected to it sees the disconnection; that is
 * the one signal that reaches us without the producer's help.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <zmq.h>

#include "daemon/ingest/ipc_frames.h"
#include "daemon/base/log.h"

#define TL_IPC_RELEASE_LINGER_MS 2000 /* releases still queued at close get this long */
#define TL_IPC_RELEASE_HWM 100000     /* releases queued for a slow producer */

void tl_ipc_frames_init(tl_ipc_frames *x, void *zctx, tl_stats *stats)
{
    memset(x, 0, sizeof *x);
    x->zctx = zctx;
    x->stats = stats;
    msgpack_sbuffer_init(&x->sb);
}

void tl_ipc_frames_destroy(tl_ipc_frames *x)
{
    tl_ipc_frames_close(x);
    msgpack_sbuffer_destroy(&x->sb);
}

void tl_ipc_frames_close(tl_ipc_frames *x)
{
    tl_ipc_frames_flush(x, UINT64_MAX);
    for (int i = 0; i < x->nbuf; i++)
        tl_ipc_close(x->buf[i].device, x->buf[i].ptr);
    if (x->nbuf)
        tl_log(TL_LOG_INFO, "gpu_buffers_closed", "series=%" PRIu64 " buffers=%d", x->series,
               x->nbuf);
    x->nbuf = 0;
    if (x->monitor) {
        zmq_socket_monitor(x->release, NULL, 0);
        zmq_close(x->monitor);
        x->monitor = NULL;
    }
    if (x->release) {
        zmq_close(x->release); /* the context delivers what is queued, up to the linger */
        x->release = NULL;
    }
    x->active = false;
    x->connected = false;
    x->endpoint[0] = 0;
}

int tl_ipc_frames_open(tl_ipc_frames *x, uint64_t series, const char *endpoint,
                       const tl_zcert *self, const char *producer_key, char *err, size_t errlen)
{
    tl_ipc_frames_close(x);
    x->active = true;
    x->series = series;
    if (!endpoint || !endpoint[0])
        return 0;
    snprintf(x->endpoint, sizeof x->endpoint, "%s", endpoint);
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://tl-release-monitor-%u", ++x->serial);
    int linger = TL_IPC_RELEASE_LINGER_MS, hwm = TL_IPC_RELEASE_HWM;
    x->release = zmq_socket(x->zctx, ZMQ_PUSH);
    int rc = x->release ? 0 : -1;
    if (rc == 0)
        rc = zmq_setsockopt(x->release, ZMQ_LINGER, &linger, sizeof linger);
    if (rc == 0)
        rc = zmq_setsockopt(x->release, ZMQ_SNDHWM, &hwm, sizeof hwm);
    if (rc == 0 && self) {
        tl_zcert producer = {.has_secret = false};
        char why[256];
        snprintf(producer.public_txt, sizeof producer.public_txt, "%s",
                 producer_key ? producer_key : "");
        if (strlen(producer.public_txt) != TL_ZCERT_Z85_LEN ||
            tl_zcert_client(x->release, self, &producer, why, sizeof why) != 0) {
            snprintf(err, errlen, "release endpoint %s: %s", endpoint,
                     producer.public_txt[0] ? why : "the scan's sender has no CURVE key");
            tl_ipc_frames_close(x);
            x->active = true; /* the series goes on, without releases */
            x->series = series;
            return -1;
        }
    }
    if (rc == 0) /* before connecting, so that the first connection is seen */
        rc = zmq_socket_monitor(x->release, mon, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED);
    if (rc == 0 && (x->monitor = zmq_socket(x->zctx, ZMQ_PAIR)) == NULL)
        rc = -1;
    if (rc == 0)
        rc = zmq_connect(x->monitor, mon);
    if (rc == 0)
        rc = zmq_connect(x->release, endpoint);
    if (rc != 0) {
        snprintf(err, errlen, "release endpoint %s: %s", endpoint, zmq_strerror(zmq_errno()));
        tl_ipc_frames_close(x);
        x->active = true; /* the series goes on, without releases */
        x->series = series;
        return -1;
    }
    return 0;
}

static tl_ipc_buffer *find(tl_ipc_frames *x, uint64_t id)
{
    for (int i = 0; i < x->nbuf; i++)
        if (x->buf[i].id == id)
            return &x->buf[i];
    return NULL;
}

/* Opens buffer f->ipc.buffer (or reopens it under a new handle: a producer that replaced
 * its ring). */
static tl_proto_err open_buffer(tl_ipc_frames *x, const tl_proto_frame *f, const uint8_t *handle,
                                const char *uuid, tl_ipc_buffer **out, char *why, size_t why_len)
{
    tl_ipc_buffer *b = find(x, f->ipc.buffer);
    bool same = b && memcmp(b->handle, handle, TL_IPC_HANDLE_BYTES) == 0;
    if (same && strcasecmp(b->uuid, uuid) == 0) {
        *out = b;
        return TL_PROTO_OK;
    }
    int dev = -1;
    char reason[384];
    tl_status st = tl_ipc_device_ordinal(uuid, &dev, reason, sizeof reason);
    if (st != TL_OK) {
        snprintf(why, why_len, "frame in the memory of GPU %s: %s", uuid, reason);
        return st == TL_EUNSUPPORTED ? TL_PROTO_E_UNSUPPORTED : TL_PROTO_E_RESOURCE;
    }
    if (same) { /* one allocation cannot move to another GPU */
        snprintf(why, why_len, "ipc_buffer %" PRIu64 " was opened on GPU %s, this frame names %s",
                 f->ipc.buffer, b->uuid, uuid);
        return TL_PROTO_E_BAD_ARG;
    }
    if (b) { /* same id, new handle: the old allocation is gone or replaced */
        tl_ipc_close(b->device, b->ptr);
        *b = x->buf[--x->nbuf];
        b = NULL;
    }
    if (x->nbuf == TL_IPC_MAX_BUFFERS) {
        snprintf(why, why_len, "series %" PRIu64 " names more than %d GPU buffers", f->series,
                 TL_IPC_MAX_BUFFERS);
        return TL_PROTO_E_RESOURCE;
    }
    void *p = NULL;
    size_t bytes = 0;
    st = tl_ipc_open(dev, handle, &p, &bytes, reason, sizeof reason);
    if (st != TL_OK) {
        snprintf(why, why_len, "ipc_buffer %" PRIu64 ": %s", f->ipc.buffer, reason);
        return st == TL_EINVAL ? TL_PROTO_E_BAD_ARG : TL_PROTO_E_RESOURCE;
    }
    b = &x->buf[x->nbuf++];
    b->id = f->ipc.buffer;
    memcpy(b->handle, handle, TL_IPC_HANDLE_BYTES);
    snprintf(b->uuid, sizeof b->uuid, "%s", uuid);
    b->device = dev;
    b->ptr = p;
    b->bytes = bytes;
    tl_stats_count(&x->stats->ipc_opened);
    tl_log(TL_LOG_INFO, "gpu_buffer_opened",
           "series=%" PRIu64 " buffer=%" PRIu64 " device=%s ordinal=%d bytes=%zu", f->series,
           f->ipc.buffer, uuid, dev, bytes);
    *out = b;
    return TL_PROTO_OK;
}

tl_proto_err tl_ipc_frames_map(tl_ipc_frames *x, const tl_proto_frame *f, const uint8_t *handle,
                               const char *uuid, const void **ptr, char *why, size_t why_len)
{
    *ptr = NULL;
    tl_ipc_buffer *b = NULL;
    tl_proto_err e = open_buffer(x, f, handle, uuid, &b, why, why_len);
    if (e != TL_PROTO_OK)
        return e;
    /* the decoder proved offset + extent <= ipc_size without overflow; the claim itself
     * is checked against what the driver says */
    if (f->ipc.size > b->bytes) {
        snprintf(why, why_len,
                 "ipc_buffer %" PRIu64 " claims %" PRIu64 " bytes, but the "
                 "allocation behind its handle has %zu",
                 f->ipc.buffer, f->ipc.size, b->bytes);
        return TL_PROTO_E_RANGE;
    }
    *ptr = (const char *)b->ptr + f->ipc.offset;
    return TL_PROTO_OK;
}

static void send_release(tl_ipc_frames *x, uint64_t series, uint64_t index, uint32_t slot,
                         tl_proto_err code, const char *message)
{
    if (!x->release || !x->active || series != x->series)
        return;
    tl_proto_release r = {
        .series = series,
        .index = index,
        .slot = slot,
        .ok = code == TL_PROTO_OK,
        .code = code,
        .message = {message ? message : "", message ? strlen(message) : 0},
    };
    msgpack_sbuffer_clear(&x->sb);
    if (tl_proto_encode_release(&x->sb, &r) != 0 ||
        zmq_send(x->release, x->sb.data, x->sb.size, ZMQ_DONTWAIT) < 0) {
        tl_stats_count(&x->stats->ipc_release_failed);
        static tl_ratelimit rl = TL_RATELIMIT_INIT;
        uint64_t suppressed;
        if (tl_ratelimit_allow(&rl, 5.0, 3, &suppressed))
            tl_log(TL_LOG_WARN, "release_failed",
                   "series=%" PRIu64 " index=%" PRIu64 " endpoint=%s error=%s suppressed=%" PRIu64,
                   series, index, tl_logq(x->endpoint), tl_logq(zmq_strerror(zmq_errno())),
                   suppressed);
        return;
    }
    tl_stats_count(&x->stats->ipc_releases);
}

void tl_ipc_frames_release(tl_ipc_frames *x, const tl_proto_frame *f, tl_proto_err code,
                           const char *message)
{
    send_release(x, f->series, f->index, f->ipc.slot, code, message);
}

void tl_ipc_frames_defer(tl_ipc_frames *x, const tl_proto_frame *f, uint64_t fence)
{
    if (x->ndeferred == TL_IPC_MAX_DEFERRED) /* the caller made no room: the oldest goes
                                                early rather than never (a stalled producer) */
        tl_ipc_frames_flush(x, x->deferred[x->first].fence);
    tl_ipc_deferred *r = &x->deferred[(x->first + x->ndeferred++) % TL_IPC_MAX_DEFERRED];
    *r = (tl_ipc_deferred){f->series, f->index, f->ipc.slot, fence};
}

void tl_ipc_frames_flush(tl_ipc_frames *x, uint64_t done)
{
    while (x->ndeferred && x->deferred[x->first].fence <= done) {
        const tl_ipc_deferred *r = &x->deferred[x->first];
        send_release(x, r->series, r->index, r->slot, TL_PROTO_OK, NULL);
        x->first = (x->first + 1) % TL_IPC_MAX_DEFERRED;
        x->ndeferred--;
    }
}

bool tl_ipc_frames_waiting(const tl_ipc_frames *x, uint64_t *oldest)
{
    if (x->ndeferred && oldest)
        *oldest = x->deferred[x->first].fence;
    return x->ndeferred > 0;
}

bool tl_ipc_frames_full(const tl_ipc_frames *x)
{
    return x->ndeferred == TL_IPC_MAX_DEFERRED;
}

bool tl_ipc_frames_gone(tl_ipc_frames *x)
{
    if (!x->monitor)
        return false;
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, x->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return false;
        }
        uint16_t event = 0;
        if (zmq_msg_size(&ev) >= sizeof event)
            memcpy(&event, zmq_msg_data(&ev), sizeof event);
        bool more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) { /* the endpoint's part */
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, x->monitor, ZMQ_DONTWAIT);
            zmq_msg_close(&addr);
        }
        if (event == ZMQ_EVENT_CONNECTED)
            x->connected = true;
        else if (event == ZMQ_EVENT_DISCONNECTED && x->connected)
            return true;
    }
}

int tl_ipc_frames_open_count(const tl_ipc_frames *x)
{
    return x->nbuf;
}
