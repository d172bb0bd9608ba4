/* ingest.c — the ingest thread: receive, decode, check, queue.
 *
 * It owns the PULL socket and does nothing that can wait on the rest of the daemon except
 * pushing into the bounded queue (which blocks or drops per ingest.overflow), so control
 * requests and publishing never starve frame ingest. Each message goes through the adapter
 * of the socket's stream format (adapter.h); malformed ones are rejected here with their
 * protocol error, counted and logged at a limited rate; valid ones travel on with their
 * payload still in the ZeroMQ message they arrived in.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "daemon/ingest/adapter.h"
#include "daemon/core/daemon.h"
#include "daemon/base/log.h"
#include "daemon/base/zbind.h"
#include "daemon/ingest/release_allow.h"

static void reject(tl_daemon *d, const tl_proto_error *err)
{
    tl_stats_count(&d->stats.rejected[TL_REJ_PROTOCOL]);
    tl_stats_count(&d->stats.rejected_proto[(unsigned)err->code & 63]);
    static tl_ratelimit rl = TL_RATELIMIT_INIT;
    uint64_t suppressed;
    if (tl_ratelimit_allow(&rl, 5.0, 5, &suppressed))
        tl_log(TL_LOG_WARN, "message_rejected", "socket=ingest error=%s reason=%s suppressed=%llu",
               tl_proto_err_name(err->code), tl_logq(err->message),
               (unsigned long long)suppressed);
}

/* A scan's release endpoint: allowed hosts only (release_allow.h); the sender's CURVE key,
 * which the release socket then authenticates (auth.c puts it in the ZAP metadata). */
static void check_release(tl_daemon *d, tl_item *it, zmq_msg_t *header)
{
    const char *peer = zmq_msg_gets(header, "Peer-Address");
    const char *key = zmq_msg_gets(header, "X-Key");
    if (key && strlen(key) < sizeof it->producer_key)
        snprintf(it->producer_key, sizeof it->producer_key, "%s", key);
    if (tl_release_allowed(it->release, peer, d->cfg.release_hosts, it->release_refused,
                           sizeof it->release_refused))
        return;
    tl_stats_count(&d->auth.release_refused);
    static tl_ratelimit rl = TL_RATELIMIT_INIT;
    uint64_t suppressed;
    if (tl_ratelimit_allow(&rl, 5.0, 5, &suppressed))
        tl_log(TL_LOG_WARN, "release_refused", "series=%llu peer=%s error=%s suppressed=%llu",
               (unsigned long long)it->scan.series, tl_logq(peer ? peer : ""),
               tl_logq(it->release_refused), (unsigned long long)suppressed);
    it->release[0] = 0;
}

static void *run(void *arg)
{
    tl_daemon *d = arg;
    pthread_setname_np(pthread_self(), "tl-ingest"); /* names in top -H and the bench */
    void *sock = zmq_socket(d->zctx, ZMQ_PULL);
    int hwm = d->cfg.ingest_rcvhwm, linger = 0, timeout = 100;
    int rc = sock ? 0 : -1;
    if (rc == 0)
        rc = zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (rc == 0)
        rc = zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    if (rc == 0) /* wake now and then to see the stop flag */
        rc = zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    char aerr[256] = "";
    bool auth_failed =
        rc == 0 && tl_auth_socket(&d->auth, sock, TL_AUTH_INGEST, aerr, sizeof aerr) != 0;
    if (rc == 0 && !auth_failed)
        rc = d->cfg.ingest_bind ? tl_zbind(sock, d->cfg.ingest_endpoint)
                                : zmq_connect(sock, d->cfg.ingest_endpoint);
    pthread_mutex_lock(&d->ingest_mu);
    if (auth_failed) {
        snprintf(d->ingest_error, sizeof d->ingest_error, "%s", aerr);
        d->ingest_ready = -1;
        rc = -1;
    } else if (rc != 0) {
        snprintf(d->ingest_error, sizeof d->ingest_error, "ingest socket %s: %s",
                 d->cfg.ingest_endpoint, zmq_strerror(zmq_errno()));
        d->ingest_ready = -1;
    } else {
        d->ingest_ready = 1;
    }
    pthread_cond_signal(&d->ingest_cv);
    pthread_mutex_unlock(&d->ingest_mu);
    if (rc != 0) {
        if (sock)
            zmq_close(sock);
        return NULL;
    }

    const tl_adapter_ops *ad = d->adapter;
    void *as = ad->create(&d->cfg, aerr, sizeof aerr);
    if (!as)
        tl_log(TL_LOG_ERROR, "ingest_failed", "format=%s error=%s", ad->name, tl_logq(aerr));
    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    tl_item it;
    memset(&it, 0, sizeof it); /* fields a format does not set stay zero */
    zmq_msg_init(&it.payload);
    while (!atomic_load(&d->ingest_stop) && as) {
        tl_proto_error err;
        int n = tl_proto_recv(sock, parts, TL_PROTO_MAX_PARTS, 0, &err);
        if (n == -1) {
            if (zmq_errno() == EAGAIN || zmq_errno() == EINTR)
                continue;
            tl_log(TL_LOG_ERROR, "ingest_failed", "error=%s", tl_logq(zmq_strerror(zmq_errno())));
            break;
        }
        int kept = n == -2 ? TL_PROTO_MAX_PARTS : n;
        it.t_recv = tl_clock_realtime_ns();
        it.t_recv_mono = tl_clock_ns();
        tl_stats_count(&d->stats.messages);
        size_t bytes = 0;
        for (int i = 0; i < kept; i++)
            bytes += zmq_msg_size(&parts[i]);
        tl_stats_add(&d->stats.bytes, bytes);
        it.release[0] = 0; /* only the native format's scans have one */
        it.release_refused[0] = 0;
        it.producer_key[0] = 0;
        int got = n == -2 ? -1 : ad->decode(as, parts, n, &it, &err);
        if (got > 0 && it.type == TL_MSG_SCAN && it.release[0])
            check_release(d, &it, &parts[0]);
        tl_proto_close(parts, kept);
        if (got < 0)
            reject(d, &err);
        if (got <= 0)
            continue;
        if (it.type == TL_MSG_FRAME && it.frame.has_t_acq) /* the link's share of the latency */
            tl_hist_add(&d->stats.latency[TL_LAT_ACQ_TO_RECV],
                        (double)(int64_t)(it.t_recv - it.frame.t_acq) / 1e9);
        it.bytes = bytes;
        do { /* the message's items: one, or more from the adapter's next (a synthesised scan) */
            /* only frames may be dropped: a lost scan or end would mix up whole series; and
             * never frames in GPU memory: their producer's ring is the back-pressure, and
             * each one is owed a release that only the worker can send */
            bool block = it.type != TL_MSG_FRAME || it.frame.has_ipc ||
                         atomic_load(&d->overflow) == TL_SETTINGS_OVERFLOW_BLOCK;
            if (!tl_queue_push(&d->queue, &it, block, &d->ingest_stop)) {
                if (atomic_load(&d->ingest_stop))
                    break;
                tl_stats_count(&d->stats.rejected[TL_REJ_QUEUE_FULL]);
                static tl_ratelimit rl = TL_RATELIMIT_INIT;
                uint64_t suppressed;
                if (tl_ratelimit_allow(&rl, 5.0, 3, &suppressed))
                    tl_log(TL_LOG_WARN, "frame_dropped",
                           "reason=queue_full depth=%u suppressed=%llu", tl_queue_depth(&d->queue),
                           (unsigned long long)suppressed);
                zmq_msg_close(&it.payload);
                zmq_msg_init(&it.payload);
            }
        } while (ad->next && ad->next(as, &it) > 0);
    }
    if (it.type == TL_MSG_SCAN) /* stopped before it was queued (else NULL: move_item) */
        tl_proto_scan_free(&it.scan);
    zmq_msg_close(&it.payload);
    if (as)
        ad->destroy(as);
    zmq_close(sock);
    return NULL;
}

int tl_ingest_start(tl_daemon *d, char *err, size_t errlen)
{
    d->ingest_ready = 0;
    atomic_store(&d->ingest_stop, false);
    if (pthread_create(&d->ingest_thread, NULL, run, d) != 0) {
        snprintf(err, errlen, "cannot start the ingest thread");
        return -1;
    }
    pthread_mutex_lock(&d->ingest_mu);
    while (d->ingest_ready == 0)
        pthread_cond_wait(&d->ingest_cv, &d->ingest_mu);
    int ok = d->ingest_ready;
    pthread_mutex_unlock(&d->ingest_mu);
    if (ok < 0) {
        pthread_join(d->ingest_thread, NULL);
        snprintf(err, errlen, "%s", d->ingest_error);
        return -1;
    }
    return 0;
}

void tl_ingest_stop(tl_daemon *d)
{
    atomic_store(&d->ingest_stop, true);
    tl_queue_wake(&d->queue); /* a push blocked on a full queue sees the flag */
    pthread_join(d->ingest_thread, NULL);
}
