/* control.c — the ROUTER socket that answers control requests (loop thread).
 *
 * Clients may be REQ sockets ([identity, "", request]) or DEALERs ([identity, request]);
 * the reply goes back with the same envelope. A request that cannot be decoded still gets
 * an error reply naming the problem (id 0 when its id could not be read). Replies never
 * block the loop: a client that has gone or stopped reading loses its reply, counted.
 * A command the worker runs (tune) is answered later: its route is kept, and the worker
 * wakes the loop (tuning.job_done) to send the reply it packed.
 * With [security] curve on, each request runs with the role of its connection's key
 * (auth.h: the ZAP User-Id that libzmq attaches to every message of the connection).
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "daemon/base/zbind.h"
#include "daemon/core/daemon.h"
#include "daemon/serve/commands.h"
#include "daemon/serve/control.h"

static void send_reply(tl_daemon *d, const void *identity, size_t idlen, bool envelope,
                       const msgpack_sbuffer *reply)
{
    int rc = zmq_send(d->control_sock, identity, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0 && envelope)
        rc = zmq_send(d->control_sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0)
        rc = zmq_send(d->control_sock, reply->data, reply->size, ZMQ_DONTWAIT);
    if (rc < 0) {
        tl_stats_count(&d->stats.request_errors);
        tl_log(TL_LOG_WARN, "reply_lost", "error=%s", tl_logq(zmq_strerror(zmq_errno())));
    }
}

static void on_request(tl_zwatch *w)
{
    tl_daemon *d = w->ctx;
    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    tl_proto_error err;
    int n = tl_proto_recv(d->control_sock, parts, TL_PROTO_MAX_PARTS, ZMQ_DONTWAIT, &err);
    if (n == -1)
        return;
    int kept = n == -2 ? TL_PROTO_MAX_PARTS : n;
    tl_stats_count(&d->stats.requests);
    msgpack_sbuffer_clear(&d->reply);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &d->reply, msgpack_sbuffer_write);
    /* parts[0] is the identity ROUTER prepends; an empty part after it is REQ's envelope */
    bool envelope = kept >= 3 && zmq_msg_size(&parts[1]) == 0;
    int body = envelope ? 2 : 1;
    if (kept < 2)
        goto out; /* nothing to answer to */
    if (n == -2 || kept != body + 1) {
        tl_stats_count(&d->stats.request_errors);
        tl_proto_pack_rep_error(&pk, 0, TL_PROTO_E_PARTS,
                                "a request is one message part (after the routing envelope)");
    } else {
        tl_proto_msg m;
        /* who asks: the ZAP User-Id of its connection and that client's role (auth.h) */
        const char *client;
        tl_role role = tl_auth_role(&d->auth, TL_AUTH_CONTROL, &parts[body], &client);
        memset(&m, 0, sizeof m);
        if (tl_proto_decode(d->control_dec, zmq_msg_data(&parts[body]), zmq_msg_size(&parts[body]),
                            TL_PROTO_CONTROL, &m, &err) != TL_PROTO_OK) {
            tl_stats_count(&d->stats.request_errors);
            /* the id, when it could be read (it is checked before cmd and args), so a client
             * with several requests in flight can match the error; else 0 (PROTOCOL.md §9.2) */
            uint64_t id = m.type == TL_MSG_REQ ? m.req.id : 0;
            tl_proto_pack_rep_error(&pk, id, err.code, err.message);
        } else if (tl_commands_run_control(d, &m.req, role, client, &pk)) {
            /* the worker answers later: keep the route (identities are at most 255 bytes) */
            tl_tuning *t = &d->tuning;
            t->job_route_len = zmq_msg_size(&parts[0]);
            if (t->job_route_len > sizeof t->job_route)
                t->job_route_len = sizeof t->job_route;
            memcpy(t->job_route, zmq_msg_data(&parts[0]), t->job_route_len);
            t->job_envelope = envelope;
            goto out;
        }
    }
    send_reply(d, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), envelope, &d->reply);
out:
    tl_proto_close(parts, kept);
}

/* The worker has packed the reply of a tune command. */
static void on_tune_done(uv_async_t *h)
{
    tl_daemon *d = h->data;
    tl_tuning *t = &d->tuning;
    pthread_mutex_lock(&d->lock);
    if (t->job == TL_TUNE_JOB_DONE) {
        send_reply(d, t->job_route, t->job_route_len, t->job_envelope, &t->job_reply);
        msgpack_sbuffer_clear(&t->job_reply);
        t->job = TL_TUNE_JOB_IDLE;
    }
    pthread_mutex_unlock(&d->lock);
}

int tl_control_open(tl_daemon *d, char *err, size_t errlen)
{
    if (uv_async_init(&d->loop, &d->tuning.job_done, on_tune_done) != 0) {
        snprintf(err, errlen, "cannot create the control socket's wake-up handle");
        return -1;
    }
    d->tuning.job_done.data = d;
    d->tuning.job_async_ready = true;
    d->control_sock = zmq_socket(d->zctx, ZMQ_ROUTER);
    d->control_dec = tl_proto_decoder_new();
    msgpack_sbuffer_init(&d->reply);
    int one = 1, linger = 0;
    if (!d->control_sock || !d->control_dec ||
        zmq_setsockopt(d->control_sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one) != 0 ||
        zmq_setsockopt(d->control_sock, ZMQ_LINGER, &linger, sizeof linger) != 0) {
        snprintf(err, errlen, "control socket %s: %s", d->cfg.control_endpoint,
                 zmq_strerror(zmq_errno()));
        return -1;
    }
    if (tl_auth_socket(&d->auth, d->control_sock, TL_AUTH_CONTROL, err, errlen) != 0)
        return -1;
    if (tl_zbind(d->control_sock, d->cfg.control_endpoint) != 0) {
        snprintf(err, errlen, "control socket %s: %s", d->cfg.control_endpoint,
                 zmq_strerror(zmq_errno()));
        return -1;
    }
    if (tl_auth_watch(&d->auth, &d->loop, d->zctx, TL_AUTH_CONTROL, err, errlen) != 0)
        return -1;
    if (tl_zwatch_start(&d->control_watch, &d->loop, d->control_sock, on_request, d) != 0) {
        snprintf(err, errlen, "cannot watch the control socket");
        return -1;
    }
    return 0;
}

void tl_control_close(tl_daemon *d)
{
    if (d->tuning.job_async_ready && !uv_is_closing((uv_handle_t *)&d->tuning.job_done))
        uv_close((uv_handle_t *)&d->tuning.job_done, NULL);
    d->tuning.job_async_ready = false;
    tl_zwatch_stop(&d->control_watch);
    if (d->control_sock)
        zmq_close(d->control_sock);
    d->control_sock = NULL;
    tl_proto_decoder_free(d->control_dec);
    d->control_dec = NULL;
    msgpack_sbuffer_destroy(&d->reply);
}
