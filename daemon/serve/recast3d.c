/* recast3d.c — the RECAST3D viewer link (recast3d.h), on the daemon's libuv loop.
 *
 * One state machine, driven by the two watched sockets and a 100 ms timer: CONNECTING
 * (MakeScene sent, or waiting out the backoff before the next try), READY (scene known,
 * SUB filtering its packets), IDLE (the viewer killed the scene). The REQ socket carries
 * one request at a time; a request unanswered for long (2 s MakeScene, 5 s SliceData)
 * means the viewer is gone: the socket is recreated and MakeScene tried again with
 * backoff. Slices reach the daemon as control requests run in-process (tl_commands_run
 * with msgpack arguments), so they follow exactly the rules of `tomolive ctl set_slice`;
 * their pixels come from the publisher's tap, are kept per slice (latest wins) and sent
 * when the REQ socket is free. The timer also re-registers slices when the scan's
 * detector shape changes (the volume box follows it) or when a slice arrived before any
 * scan. Buffers are per slice and reused; nothing here runs per frame.
 */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "daemon/core/daemon.h"
#include "daemon/serve/commands.h"
#include "daemon/base/log.h"
#include "daemon/serve/recast3d.h"

#define R3D_MAX_SLICES 32
#define R3D_TICK_MS 100
#define R3D_SCENE_TIMEOUT_NS 2000000000ull
#define R3D_DATA_TIMEOUT_NS 5000000000ull
#define R3D_BACKOFF_MIN 0.5
#define R3D_BACKOFF_MAX 30.0

typedef struct {
    int32_t id;           /* the viewer's slice id */
    float orientation[9]; /* the viewer's 9 floats */
    char tl_id[48];       /* the daemon's slice id */
    bool registered;
    uint32_t rows, cols; /* the detector it was registered for */
    float *data;         /* the latest pixels, bottom-up, not yet sent */
    size_t cap;
    uint32_t n; /* side of data */
    bool pending;
} r3d_slice;

enum { R3D_CONNECTING, R3D_READY, R3D_IDLE };

typedef struct {
    tl_daemon *d;
    bool on;
    void *req, *sub;
    /* a stopped watch closes its libuv handles during the loop's next turn, so a new REQ
     * socket gets the next watch of a small ring rather than the one still closing */
    tl_zwatch req_watches[4], sub_watch;
    int req_watch;
    bool req_watched, sub_watched;
    uv_timer_t timer;
    int state;
    bool busy; /* a request is in flight */
    uint64_t sent_ns, next_try_ns;
    double backoff;
    int32_t scene;
    r3d_slice slices[R3D_MAX_SLICES];
    int nslices, next_send;
    uint8_t *packet; /* outgoing packet buffer, reused */
    size_t packet_cap;
    msgpack_sbuffer args, reply;
    tl_proto_decoder *dec;
} r3d;

static r3d R; /* one daemon per process, one viewer link */

/* ---- geometry -------------------------------------------------------------------------- */

void tl_recast3d_to_plane(const float v[9], uint32_t rows, uint32_t cols, float plane[9])
{
    float hx = cols / 2.0f, hz = rows / 2.0f, zc = (rows - 1) / 2.0f;
    for (int k = 0; k < 3; k++) { /* x-axis, y-axis, base */
        plane[3 * k + 0] = v[3 * k + 0] * hx;
        plane[3 * k + 1] = v[3 * k + 1] * hx;
        plane[3 * k + 2] = -v[3 * k + 2] * hz + (k == 2 ? zc : 0.0f);
    }
}

/* ---- requests to the daemon ----------------------------------------------------------------- */

/* Runs cmd with the args packed in R.args; true when the daemon said ok. */
static bool run_command(const char *cmd, char *why, size_t whylen)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    bool ok = false;
    if (msgpack_unpack_next(&u, R.args.data, R.args.size, &off) != MSGPACK_UNPACK_SUCCESS) {
        snprintf(why, whylen, "cannot pack the request");
    } else {
        tl_proto_req req = {.id = 0, .cmd = {cmd, strlen(cmd)}, .args = &u.data};
        msgpack_sbuffer_clear(&R.reply);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &R.reply, msgpack_sbuffer_write);
        tl_commands_run(R.d, &req, &pk);
        tl_proto_msg m;
        tl_proto_error e;
        if (tl_proto_decode(R.dec, R.reply.data, R.reply.size, TL_MSG_REP, &m, &e) != TL_PROTO_OK)
            snprintf(why, whylen, "%s", e.message);
        else if (!m.rep.ok)
            snprintf(why, whylen, "%.*s", (int)m.rep.message.len, m.rep.message.ptr);
        else
            ok = true;
    }
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_clear(&R.args);
    return ok;
}

static void register_slice(r3d_slice *s, uint32_t rows, uint32_t cols)
{
    float plane[9];
    tl_recast3d_to_plane(s->orientation, rows, cols, plane);
    uint32_t n = R.d->cfg.recast3d_slice_size ? (uint32_t)R.d->cfg.recast3d_slice_size : cols;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &R.args, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 5);
    tl_proto_pack_kv_str(&pk, "id", s->tl_id);
    tl_proto_pack_kv_str(&pk, "kind", "plane");
    tl_proto_pack_cstr(&pk, "orientation");
    msgpack_pack_array(&pk, 9);
    for (int i = 0; i < 9; i++)
        msgpack_pack_float(&pk, plane[i]);
    tl_proto_pack_cstr(&pk, "size");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint32(&pk, n);
    msgpack_pack_uint32(&pk, n);
    tl_proto_pack_kv_bool(&pk, "pin", true);
    char why[256];
    s->registered = run_command("set_slice", why, sizeof why);
    s->rows = rows;
    s->cols = cols;
    if (s->registered)
        tl_log(TL_LOG_INFO, "recast3d_slice", "scene=%d slice=%d id=%s size=%u", R.scene, s->id,
               tl_logq(s->tl_id), n);
    else
        tl_log(TL_LOG_WARN, "recast3d_slice_refused", "scene=%d slice=%d error=%s", R.scene, s->id,
               tl_logq(why));
}

static void unregister_slice(r3d_slice *s)
{
    if (!s->registered)
        return;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &R.args, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    tl_proto_pack_kv_str(&pk, "id", s->tl_id);
    char why[256];
    run_command("remove_slice", why, sizeof why);
    s->registered = false;
}

/* The current scan's detector, or false. */
static bool scan_shape(uint32_t *rows, uint32_t *cols)
{
    pthread_mutex_lock(&R.d->lock);
    bool open = R.d->scan.open;
    *rows = R.d->scan.msg.rows;
    *cols = R.d->scan.msg.cols;
    pthread_mutex_unlock(&R.d->lock);
    return open;
}

/* Registers what is not, and re-registers what was made for another detector shape. */
static void sync_slices(void)
{
    uint32_t rows, cols;
    if (!scan_shape(&rows, &cols))
        return;
    for (int i = 0; i < R.nslices; i++) {
        r3d_slice *s = &R.slices[i];
        if (!s->registered || s->rows != rows || s->cols != cols)
            register_slice(s, rows, cols);
    }
}

static void drop_slices(void)
{
    for (int i = 0; i < R.nslices; i++) {
        unregister_slice(&R.slices[i]);
        free(R.slices[i].data);
    }
    R.nslices = 0;
}

/* ---- the viewer's sockets ---------------------------------------------------------------- */

static void on_reply(tl_zwatch *w);
static void on_packet(tl_zwatch *w);

static void close_req(void)
{
    if (R.req_watched)
        tl_zwatch_stop(&R.req_watches[R.req_watch]);
    R.req_watched = false;
    if (R.req)
        zmq_close(R.req);
    R.req = NULL;
    R.busy = false;
}

static int open_req(void)
{
    close_req();
    R.req = zmq_socket(R.d->zctx, ZMQ_REQ);
    int zero = 0, one = 1;
    if (!R.req || zmq_setsockopt(R.req, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_setsockopt(R.req, ZMQ_IMMEDIATE, &one, sizeof one) != 0 ||
        zmq_connect(R.req, R.d->cfg.recast3d_server) != 0 ||
        tl_zwatch_start(&R.req_watches[R.req_watch = (R.req_watch + 1) % 4], &R.d->loop, R.req,
                        on_reply, NULL) != 0) {
        if (R.req)
            zmq_close(R.req);
        R.req = NULL;
        return -1;
    }
    R.req_watched = true;
    return 0;
}

/* The viewer did not answer: a fresh socket, and MakeScene again after the backoff. */
static void reconnect(const char *why)
{
    tl_log(TL_LOG_WARN, "recast3d_retry", "server=%s reason=%s retry_s=%.1f",
           tl_logq(R.d->cfg.recast3d_server), why, R.backoff);
    open_req();
    R.state = R3D_CONNECTING;
    R.next_try_ns = tl_clock_ns() + (uint64_t)(R.backoff * 1e9);
    R.backoff = fmin(R.backoff * 2, R3D_BACKOFF_MAX);
}

static bool send_packet(size_t len)
{
    if (!R.req || zmq_send(R.req, R.packet, len, ZMQ_DONTWAIT) < 0)
        return false;
    R.busy = true;
    R.sent_ns = tl_clock_ns();
    return true;
}

static bool reserve(size_t len)
{
    if (len <= R.packet_cap)
        return true;
    uint8_t *p = realloc(R.packet, len);
    if (!p)
        return false;
    R.packet = p;
    R.packet_cap = len;
    return true;
}

static void send_make_scene(void)
{
    const char *name = R.d->cfg.recast3d_scene;
    size_t n = strlen(name);
    if (!reserve(4 + n + 1 + 4))
        return;
    tl_tomop_put_i32(R.packet, TL_TOMOP_MAKE_SCENE);
    memcpy(R.packet + 4, name, n + 1);
    tl_tomop_put_i32(R.packet + 4 + n + 1, 3); /* dimension */
    if (!send_packet(4 + n + 1 + 4))
        reconnect("not_connected");
}

/* The next slice with new pixels, if the socket is free. */
static void send_slice_data(void)
{
    if (R.state != R3D_READY || R.busy)
        return;
    for (int k = 0; k < R.nslices; k++) {
        r3d_slice *s = &R.slices[(R.next_send + k) % R.nslices];
        if (!s->pending)
            continue;
        size_t count = (size_t)s->n * s->n, len = 4 + 4 + 4 + 8 + 4 + 4 * count + 1;
        if (!reserve(len))
            return;
        uint8_t *p = R.packet;
        tl_tomop_put_i32(p, TL_TOMOP_SLICE_DATA);
        tl_tomop_put_i32(p + 4, R.scene);
        tl_tomop_put_i32(p + 8, s->id);
        tl_tomop_put_i32(p + 12, (int32_t)s->n);
        tl_tomop_put_i32(p + 16, (int32_t)s->n);
        tl_tomop_put_i32(p + 20, (int32_t)count);
        for (size_t i = 0; i < count; i++)
            tl_tomop_put_f32(p + 24 + 4 * i, s->data[i]);
        p[24 + 4 * count] = 0; /* additive: false */
        if (!send_packet(len)) {
            reconnect("send_failed");
            return;
        }
        s->pending = false;
        R.next_send = (R.next_send + k + 1) % R.nslices;
        return;
    }
}

static void subscribe(int opt, int32_t desc)
{
    uint8_t prefix[8];
    tl_tomop_put_i32(prefix, desc);
    tl_tomop_put_i32(prefix + 4, R.scene);
    zmq_setsockopt(R.sub, opt, prefix, sizeof prefix);
}

static void filters(int opt)
{
    subscribe(opt, TL_TOMOP_SET_SLICE);
    subscribe(opt, TL_TOMOP_REMOVE_SLICE);
    subscribe(opt, TL_TOMOP_KILL_SCENE);
}

static void on_reply(tl_zwatch *w)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, R.req, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return;
    }
    bool more = zmq_msg_more(&m);
    int32_t scene = zmq_msg_size(&m) >= 4 ? tl_tomop_i32(zmq_msg_data(&m)) : -1;
    size_t size = zmq_msg_size(&m);
    zmq_msg_close(&m);
    while (more) { /* a reply is one part; discard the rest of anything else */
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, R.req, ZMQ_DONTWAIT) < 0)
            more = false;
        else
            more = zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
    R.busy = false;
    if (R.state == R3D_CONNECTING) {
        if (size != 4 || scene < 0) {
            reconnect("bad_make_scene_reply");
            return;
        }
        R.scene = scene;
        R.state = R3D_READY;
        R.backoff = R3D_BACKOFF_MIN;
        filters(ZMQ_SUBSCRIBE);
        tl_log(TL_LOG_INFO, "recast3d_scene", "server=%s scene=%d name=%s",
               tl_logq(R.d->cfg.recast3d_server), scene, tl_logq(R.d->cfg.recast3d_scene));
    }
    send_slice_data();
}

static r3d_slice *find_slice(int32_t id)
{
    for (int i = 0; i < R.nslices; i++)
        if (R.slices[i].id == id)
            return &R.slices[i];
    return NULL;
}

static void on_packet(tl_zwatch *w)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, R.sub, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return;
    }
    const uint8_t *p = zmq_msg_data(&m);
    size_t len = zmq_msg_size(&m);
    bool more = zmq_msg_more(&m);
    int32_t desc = len >= 8 ? tl_tomop_i32(p) : 0, scene = len >= 8 ? tl_tomop_i32(p + 4) : -1;
    if (R.state != R3D_READY || scene != R.scene) {
        /* an old scene's, or before ours: not for us */
    } else if (desc == TL_TOMOP_SET_SLICE && len == 48) {
        int32_t id = tl_tomop_i32(p + 8);
        float o[9];
        bool finite = true;
        for (int i = 0; i < 9; i++)
            finite &= isfinite(o[i] = tl_tomop_f32(p + 12 + 4 * i)) != 0;
        r3d_slice *s = find_slice(id);
        if (!finite) {
            tl_log(TL_LOG_WARN, "recast3d_packet_ignored",
                   "reason=orientation_not_finite slice=%d", id);
        } else if (!s && R.nslices == R3D_MAX_SLICES) {
            tl_log(TL_LOG_WARN, "recast3d_packet_ignored", "reason=too_many_slices slice=%d", id);
        } else {
            if (!s) {
                s = &R.slices[R.nslices++];
                memset(s, 0, sizeof *s);
                s->id = id;
                snprintf(s->tl_id, sizeof s->tl_id, "r3d-%d-%d", R.scene, id);
            }
            memcpy(s->orientation, o, sizeof o);
            uint32_t rows, cols;
            s->registered = false; /* a SetSlice on a known id moves it */
            if (scan_shape(&rows, &cols))
                register_slice(s, rows, cols);
        }
    } else if (desc == TL_TOMOP_REMOVE_SLICE && len == 12) {
        r3d_slice *s = find_slice(tl_tomop_i32(p + 8));
        if (s) {
            unregister_slice(s);
            free(s->data);
            *s = R.slices[--R.nslices];
        }
    } else if (desc == TL_TOMOP_KILL_SCENE && len == 8) {
        tl_log(TL_LOG_INFO, "recast3d_scene_killed", "scene=%d", R.scene);
        drop_slices();
        filters(ZMQ_UNSUBSCRIBE);
        R.state = R3D_IDLE;
    } else {
        tl_log(TL_LOG_DEBUG, "recast3d_packet_ignored", "descriptor=0x%x bytes=%zu",
               (unsigned)desc, len);
    }
    zmq_msg_close(&m);
    while (more) {
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, R.sub, ZMQ_DONTWAIT) < 0)
            more = false;
        else
            more = zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
}

/* ---- slices from the publisher ------------------------------------------------------------ */

static void on_slice(void *ctx, const tl_slicebuf *b)
{
    if (R.state != R3D_READY || strncmp(b->id, "r3d-", 4) != 0 || b->height != b->width)
        return;
    for (int i = 0; i < R.nslices; i++) {
        r3d_slice *s = &R.slices[i];
        if (!s->registered || strcmp(s->tl_id, b->id) != 0)
            continue;
        size_t n = b->width, count = n * n;
        if (count > s->cap) {
            float *d = realloc(s->data, count * sizeof *d);
            if (!d)
                return;
            s->data = d;
            s->cap = count;
        }
        for (size_t r = 0; r < n; r++) /* bottom-up: viewer row r is tomolive row n-1-r */
            memcpy(s->data + r * n, b->data + (n - 1 - r) * n, n * sizeof *s->data);
        s->n = (uint32_t)n;
        s->pending = true;
        break;
    }
    send_slice_data();
}

/* ---- the timer ---------------------------------------------------------------------------- */

static void on_tick(uv_timer_t *t)
{
    uint64_t now = tl_clock_ns();
    if (R.busy && now - R.sent_ns >
                      (R.state == R3D_CONNECTING ? R3D_SCENE_TIMEOUT_NS : R3D_DATA_TIMEOUT_NS)) {
        if (R.state == R3D_READY) { /* a new viewer gets a new scene: forget the old one */
            drop_slices();
            filters(ZMQ_UNSUBSCRIBE);
        }
        reconnect("no_reply");
        return;
    }
    if (R.state == R3D_CONNECTING && !R.busy && now >= R.next_try_ns)
        send_make_scene();
    if (R.state == R3D_READY) {
        sync_slices();
        send_slice_data();
    }
}

/* ---- start and stop ----------------------------------------------------------------------- */

int tl_recast3d_start(tl_daemon *d, char *err, size_t errlen)
{
    if (!d->cfg.recast3d_server[0])
        return 0;
    memset(&R, 0, sizeof R);
    R.d = d;
    R.backoff = R3D_BACKOFF_MIN;
    msgpack_sbuffer_init(&R.args);
    msgpack_sbuffer_init(&R.reply);
    R.dec = tl_proto_decoder_new();
    R.sub = zmq_socket(d->zctx, ZMQ_SUB);
    int zero = 0;
    if (!R.dec || !R.sub || zmq_setsockopt(R.sub, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_connect(R.sub, d->cfg.recast3d_subscribe) != 0 ||
        tl_zwatch_start(&R.sub_watch, &d->loop, R.sub, on_packet, NULL) != 0) {
        snprintf(err, errlen, "recast3d.subscribe %s: %s", d->cfg.recast3d_subscribe,
                 zmq_strerror(zmq_errno()));
        return -1;
    }
    R.sub_watched = true;
    if (open_req() != 0) {
        snprintf(err, errlen, "recast3d.server %s: %s", d->cfg.recast3d_server,
                 zmq_strerror(zmq_errno()));
        return -1;
    }
    if (tl_publisher_add_tap(&d->pub, on_slice, NULL) != 0) {
        snprintf(err, errlen, "no room for the RECAST3D link among the publisher's taps");
        return -1;
    }
    uv_timer_init(&d->loop, &R.timer);
    uv_timer_start(&R.timer, on_tick, 0, R3D_TICK_MS);
    R.state = R3D_CONNECTING;
    R.on = true;
    tl_log(TL_LOG_INFO, "recast3d_started", "server=%s subscribe=%s",
           tl_logq(d->cfg.recast3d_server), tl_logq(d->cfg.recast3d_subscribe));
    return 0;
}

void tl_recast3d_stop(tl_daemon *d)
{
    if (!R.on)
        return;
    R.on = false;
    tl_publisher_remove_tap(&d->pub, on_slice, NULL);
    uv_timer_stop(&R.timer);
    uv_close((uv_handle_t *)&R.timer, NULL);
    drop_slices();
    close_req();
    if (R.sub_watched)
        tl_zwatch_stop(&R.sub_watch);
    zmq_close(R.sub);
    R.sub = NULL;
    tl_proto_decoder_free(R.dec);
    msgpack_sbuffer_destroy(&R.args);
    msgpack_sbuffer_destroy(&R.reply);
    free(R.packet);
}
