/* push_ipc.c — a producer's ring of frames in GPU memory and its release socket (see
 * push_ipc.h).
 *
 * Slot states: FREE (in the queue of free slots), HELD (acquired: the producer writes it)
 * and LENT (its header went out; the consumer may read it until it sends a release). Free
 * slots are handed out oldest-released first, so a slot the consumer just gave back is
 * written last, which leaves the most time between a release and the next write of that
 * memory. Releases are read only when a slot is needed (acquire, drain) or asked for
 * (poll): the ring bounds the lent slots, so at most `slots` releases can be waiting.
 *
 * A release is trusted only as far as it matches: it must name a lent slot and the frame
 * (series, index) that slot was lent for. Anything else is counted as bad and releases
 * nothing, because freeing a slot the consumer may still read would let the producer
 * overwrite a frame in use; the consequence of a consumer's bug is then a clear timeout,
 * not a corrupt frame.
 *
 * A socket monitor counts the consumers connected to the release socket: a timeout can
 * then say whether the consumer never connected (it did not get or cannot reach the
 * endpoint) or connected and released nothing, and at the end the producer can wait for
 * the consumer to disconnect, which tomolived does when the series ends: only then is the
 * producer's memory surely unmapped there, and closing earlier would look to tomolived
 * like a producer that died before its `end`.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "clients/cli.h"
#include "clients/push_ipc.h"
#include "protocol/zcert.h"

enum { FREE = 0, HELD, LENT };

typedef struct {
    int state;
    uint64_t series, index; /* the frame it is lent for */
    double t_lent;          /* monotonic seconds, for the timeout message */
} slot_info;

struct tl_push_ipc {
    int device;
    uint32_t rows, cols;
    size_t row_bytes, pitch, slot_bytes;
    uint32_t nslots;
    void *ring; /* device: nslots * slot_bytes */
    size_t ring_bytes;
    uint8_t handle[TL_IPC_HANDLE_BYTES];
    char uuid[TL_IPC_UUID_LEN + 1];
    void *zctx, *sock; /* PULL, bound: releases */
    char endpoint[TL_PROTO_MAX_ENDPOINT + 1];
    void *mon;     /* PAIR: the release socket's connection events */
    int consumers; /* connected now */
    bool ever_connected;
    tl_proto_decoder *dec;
    slot_info *slot;
    uint32_t *freeq, head, nfree; /* FIFO of free slots */
    void *bank;                   /* device: nbank * slot_bytes, or NULL */
    size_t nbank;
    uint8_t *staging; /* host: one slot in the pitched layout */
    tl_push_ipc_stats st;
};

static int failf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int failf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- lifetime ----------------------------------------------------------------------- */

tl_push_ipc *tl_push_ipc_create(const tl_push_ipc_opts *o, char *err, size_t errlen)
{
    size_t sample = tl_proto_dtype_size(o->dtype);
    if (o->rows < 1 || o->cols < 1 || o->rows > TL_PROTO_MAX_DIM || o->cols > TL_PROTO_MAX_DIM ||
        o->slots < 1 || o->slots > (1u << 20)) {
        failf(err, errlen, "a ring of %u slots of %u x %u frames is not possible", o->slots,
              o->rows, o->cols);
        return NULL;
    }
    size_t row_bytes = (size_t)o->cols * sample;
    /* a pitch rounded up to 512 bytes, as cudaMallocPitch and frame grabbers align rows:
     * consumers must honour ipc_pitch, and a ring that always had dense rows would never
     * show whether they do */
    size_t pitch = o->pitch ? o->pitch : (row_bytes + 511) / 512 * 512;
    if (pitch < row_bytes || pitch > ((size_t)1 << 31)) {
        failf(err, errlen, "a row pitch of %zu bytes is not possible for rows of %zu bytes", pitch,
              row_bytes);
        return NULL;
    }
    if ((size_t)o->rows * pitch > SIZE_MAX / o->slots) {
        failf(err, errlen, "a ring of %u slots of %u rows of %zu bytes is too large", o->slots,
              o->rows, pitch);
        return NULL;
    }
    tl_push_ipc *p = calloc(1, sizeof *p);
    if (!p) {
        failf(err, errlen, "out of memory");
        return NULL;
    }
    p->device = o->device;
    p->rows = o->rows;
    p->cols = o->cols;
    p->row_bytes = row_bytes;
    p->pitch = pitch;
    p->slot_bytes = (size_t)o->rows * pitch;
    p->nslots = o->slots;
    p->ring_bytes = p->slot_bytes * o->slots;
    p->slot = calloc(o->slots, sizeof *p->slot);
    p->freeq = malloc(o->slots * sizeof *p->freeq);
    p->dec = tl_proto_decoder_new();
    if (!p->slot || !p->freeq || !p->dec) {
        failf(err, errlen, "out of memory");
        goto fail;
    }
    for (uint32_t s = 0; s < o->slots; s++)
        p->freeq[s] = s;
    p->nfree = o->slots;

    /* the GPU first: without CUDA (or without this device) nothing else is worth doing */
    char why[512];
    tl_status st = tl_ipc_device_uuid(o->device, p->uuid, why, sizeof why);
    if (st != TL_OK) {
        if (st == TL_EUNSUPPORTED)
            failf(err, errlen, "%s", why);
        else
            failf(err, errlen, "GPU %d: %s", o->device, why);
        goto fail;
    }
    if (tl_ipc_alloc(o->device, p->ring_bytes, &p->ring, p->handle, why, sizeof why) != TL_OK) {
        failf(err, errlen, "cannot allocate a ring of %u frames (%.1f MB) on GPU %d: %s", o->slots,
              (double)p->ring_bytes / 1e6, o->device, why);
        goto fail;
    }

    /* The release socket. tcp://127.0.0.1 on a port the kernel picks by default, rather
     * than an ipc:// path: CUDA IPC already means one host, and a loopback port is
     * reachable by a daemon that does not share our view of /tmp (systemd's PrivateTmp,
     * another mount namespace), and never leaves a stale file behind. */
    const char *ep = o->endpoint ? o->endpoint : "tcp://127.0.0.1:*";
    int linger = 0, hwm = (int)(o->slots + 1000); /* every lent slot's release fits */
    p->zctx = zmq_ctx_new();
    p->sock = p->zctx ? zmq_socket(p->zctx, ZMQ_PULL) : NULL;
    if (!p->sock || zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0) {
        failf(err, errlen, "cannot create the release socket: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://tl-push-ipc-monitor-%p", (void *)p);
    if (zmq_socket_monitor(p->sock, mon, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0 ||
        !(p->mon = zmq_socket(p->zctx, ZMQ_PAIR)) || zmq_connect(p->mon, mon) != 0) {
        failf(err, errlen, "cannot monitor the release socket: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    const char *key = o->key && *o->key ? o->key : getenv("TOMOLIVE_KEY");
    if (key && *key) {
        tl_zcert me;
        char kwhy[600];
        if (tl_zcert_load(key, &me, kwhy, sizeof kwhy) != 0 ||
            tl_zcert_server(p->sock, &me, kwhy, sizeof kwhy) != 0) {
            failf(err, errlen, "release socket: %s", kwhy);
            goto fail;
        }
    }
    if (zmq_bind(p->sock, ep) != 0) {
        failf(err, errlen, "cannot bind the release socket to '%s': %s", ep,
              zmq_strerror(zmq_errno()));
        goto fail;
    }
    size_t len = sizeof p->endpoint;
    if (zmq_getsockopt(p->sock, ZMQ_LAST_ENDPOINT, p->endpoint, &len) != 0) {
        failf(err, errlen, "cannot read the release socket's endpoint: %s",
              zmq_strerror(zmq_errno()));
        goto fail;
    }
    p->endpoint[sizeof p->endpoint - 1] = 0;
    if (strlen(p->endpoint) < 1 || strlen(p->endpoint) > TL_PROTO_MAX_ENDPOINT) {
        failf(err, errlen, "the release endpoint '%s' is longer than %d bytes", p->endpoint,
              TL_PROTO_MAX_ENDPOINT);
        goto fail;
    }
    return p;
fail:
    tl_push_ipc_destroy(p);
    return NULL;
}

void tl_push_ipc_destroy(tl_push_ipc *p)
{
    if (!p)
        return;
    if (p->mon) {
        zmq_socket_monitor(p->sock, NULL, 0);
        zmq_close(p->mon);
    }
    if (p->sock)
        zmq_close(p->sock);
    if (p->zctx)
        zmq_ctx_term(p->zctx);
    tl_ipc_free(p->device, p->bank);
    tl_ipc_free(p->device, p->ring);
    tl_proto_decoder_free(p->dec);
    free(p->staging);
    free(p->slot);
    free(p->freeq);
    free(p);
}

const char *tl_push_ipc_endpoint(const tl_push_ipc *p)
{
    return p->endpoint;
}
const char *tl_push_ipc_device_uuid(const tl_push_ipc *p)
{
    return p->uuid;
}
size_t tl_push_ipc_pitch(const tl_push_ipc *p)
{
    return p->pitch;
}
size_t tl_push_ipc_slot_bytes(const tl_push_ipc *p)
{
    return p->slot_bytes;
}

void *tl_push_ipc_slot(const tl_push_ipc *p, uint32_t slot)
{
    return (uint8_t *)p->ring + (size_t)slot * p->slot_bytes;
}

/* ---- consumers ---------------------------------------------------------------------- */

/* Applies the connection events that have arrived: [uint16 event, uint32 value][endpoint]. */
static void events(tl_push_ipc *p)
{
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, p->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return;
        }
        uint16_t ev = 0;
        if (zmq_msg_size(&m) >= sizeof ev)
            memcpy(&ev, zmq_msg_data(&m), sizeof ev);
        while (zmq_msg_more(&m)) { /* the endpoint part */
            zmq_msg_close(&m);
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, p->mon, 0) < 0)
                break;
        }
        zmq_msg_close(&m);
        if (ev == ZMQ_EVENT_ACCEPTED) {
            p->consumers++;
            p->ever_connected = true;
        } else if (ev == ZMQ_EVENT_DISCONNECTED && p->consumers > 0) {
            p->consumers--;
        }
    }
}

int tl_push_ipc_wait_consumers(tl_push_ipc *p, double timeout_s)
{
    double deadline = tl_cli_now() + timeout_s;
    for (;;) {
        events(p);
        double left = deadline - tl_cli_now();
        if (p->consumers == 0)
            return 0;
        if (left <= 0)
            return -1;
        zmq_pollitem_t it = {p->mon, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, (long)(left * 1000) + 1); /* EINTR: the loop looks again */
    }
}

/* ---- releases ----------------------------------------------------------------------- */

static void put_free(tl_push_ipc *p, uint32_t slot)
{
    p->slot[slot].state = FREE;
    p->freeq[(p->head + p->nfree++) % p->nslots] = slot;
}

static void bad(tl_push_ipc *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(tl_push_ipc *p, const char *fmt, ...)
{
    if (p->st.bad++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->st.first_bad, sizeof p->st.first_bad, fmt, ap);
        va_end(ap);
    }
}

/* Applies one received message. Returns 1 when it freed a slot. */
static int apply(tl_push_ipc *p, zmq_msg_t *parts, int n)
{
    tl_proto_msg m;
    tl_proto_error e;
    if (tl_proto_decode_parts(p->dec, parts, n, TL_MSG_RELEASE, &m, &e) != TL_PROTO_OK) {
        bad(p, "not a release: %s: %s", tl_proto_err_name(e.code), e.message);
        return 0;
    }
    const tl_proto_release *r = &m.release;
    if (r->slot >= p->nslots) {
        bad(p, "a release of slot %" PRIu32 ", but the ring has %" PRIu32 " slots", r->slot,
            p->nslots);
        return 0;
    }
    slot_info *s = &p->slot[r->slot];
    if (s->state != LENT) {
        bad(p,
            "a release of slot %" PRIu32 " (frame %" PRIu64 "/%" PRIu64 "), which is not "
            "lent",
            r->slot, r->series, r->index);
        return 0;
    }
    if (s->series != r->series || s->index != r->index) {
        bad(p,
            "a release of slot %" PRIu32 " for frame %" PRIu64 "/%" PRIu64 ", but the slot "
            "holds frame %" PRIu64 "/%" PRIu64,
            r->slot, r->series, r->index, s->series, s->index);
        return 0;
    }
    if (r->ok) {
        p->st.released++;
    } else if (p->st.rejected++ == 0) {
        p->st.first_code = r->code;
        snprintf(p->st.first_message, sizeof p->st.first_message, "%.*s",
                 (int)(r->message.len > 240 ? 240 : r->message.len),
                 r->message.len ? r->message.ptr : "");
    }
    put_free(p, r->slot);
    p->st.in_flight--;
    return 1;
}

/* Reads what has arrived; waits up to wait_ms for the first message (0: no wait). Returns
 * the slots freed, or -1 on a socket error. */
static int receive(tl_push_ipc *p, long wait_ms, char *err, size_t errlen)
{
    int freed = 0;
    for (;;) {
        if (wait_ms > 0) {
            zmq_pollitem_t it = {p->sock, 0, ZMQ_POLLIN, 0};
            int rc = zmq_poll(&it, 1, wait_ms);
            wait_ms = 0;
            if (rc < 0 && zmq_errno() != EINTR)
                return failf(err, errlen, "waiting for releases: %s", zmq_strerror(zmq_errno()));
            if (rc <= 0)
                return freed;
        }
        zmq_msg_t parts[TL_PROTO_MAX_PARTS];
        tl_proto_error e;
        int n = tl_proto_recv(p->sock, parts, TL_PROTO_MAX_PARTS, ZMQ_DONTWAIT, &e);
        if (n == -1) {
            if (zmq_errno() == EAGAIN)
                return freed;
            if (zmq_errno() == EINTR)
                continue;
            return failf(err, errlen, "receiving a release: %s", zmq_strerror(zmq_errno()));
        }
        if (n == -2) {
            bad(p, "not a release: %s: %s", tl_proto_err_name(e.code), e.message);
            tl_proto_close(parts, TL_PROTO_MAX_PARTS);
            continue;
        }
        freed += apply(p, parts, n);
        tl_proto_close(parts, n);
    }
}

/* "the oldest: frame 1/42, lent 10.0 s ago", for timeout messages. */
static void oldest(const tl_push_ipc *p, char *b, size_t n)
{
    const slot_info *o = NULL;
    for (uint32_t s = 0; s < p->nslots; s++)
        if (p->slot[s].state == LENT && (!o || p->slot[s].t_lent < o->t_lent))
            o = &p->slot[s];
    if (o)
        snprintf(b, n, "the oldest: frame %" PRIu64 "/%" PRIu64 ", lent %.1f s ago", o->series,
                 o->index, tl_cli_now() - o->t_lent);
    else
        snprintf(b, n, "none lent");
}

static int timed_out(tl_push_ipc *p, double timeout_s, const char *what, char *err, size_t errlen)
{
    char old[128];
    oldest(p, old, sizeof old);
    events(p);
    char hint[512];
    if (!p->ever_connected)
        snprintf(hint, sizeof hint,
                 "no consumer ever connected to the release endpoint %s: "
                 "does it get the scan's `release` key, and can it reach that address?",
                 p->endpoint);
    else if (p->consumers == 0)
        snprintf(hint, sizeof hint,
                 "the consumer has disconnected from %s (it ended the "
                 "series, or went away)",
                 p->endpoint);
    else
        snprintf(hint, sizeof hint,
                 "the consumer is connected to %s but releases nothing: "
                 "does it take frames in GPU memory?",
                 p->endpoint);
    return failf(err, errlen,
                 "no release for %.1f s %s (%" PRIu32 " of %" PRIu32 " slots lent, "
                 "%s); %s%s%s",
                 timeout_s, what, p->st.in_flight, p->nslots, old, hint,
                 p->st.bad ? " It sent something else: " : "", p->st.bad ? p->st.first_bad : "");
}

int tl_push_ipc_acquire(tl_push_ipc *p, double timeout_s, uint32_t *slot, char *err, size_t errlen)
{
    double deadline = tl_cli_now() + timeout_s;
    while (p->nfree == 0) {
        double left = deadline - tl_cli_now();
        if (left <= 0)
            return timed_out(p, timeout_s, "while every slot was lent", err, errlen);
        if (receive(p, (long)(left * 1000) + 1, err, errlen) < 0)
            return -1;
    }
    *slot = p->freeq[p->head];
    p->head = (p->head + 1) % p->nslots;
    p->nfree--;
    p->slot[*slot].state = HELD;
    return 0;
}

void tl_push_ipc_lend(tl_push_ipc *p, uint32_t slot, tl_proto_frame *f)
{
    slot_info *s = &p->slot[slot];
    s->state = LENT;
    s->series = f->series;
    s->index = f->index;
    s->t_lent = tl_cli_now();
    p->st.lent++;
    p->st.in_flight++;
    f->has_ipc = true;
    f->ipc = (tl_proto_ipc){.handle = p->handle,
                            .buffer = 0,
                            .size = p->ring_bytes,
                            .offset = (uint64_t)slot * p->slot_bytes,
                            .pitch = p->pitch,
                            .device = {p->uuid, strlen(p->uuid)},
                            .slot = slot};
}

void tl_push_ipc_cancel(tl_push_ipc *p, uint32_t slot)
{
    if (p->slot[slot].state == LENT) {
        p->st.lent--;
        p->st.in_flight--;
    }
    if (p->slot[slot].state != FREE)
        put_free(p, slot);
}

int tl_push_ipc_poll(tl_push_ipc *p, char *err, size_t errlen)
{
    return receive(p, 0, err, errlen) < 0 ? -1 : 0;
}

int tl_push_ipc_drain(tl_push_ipc *p, double timeout_s, char *err, size_t errlen)
{
    /* the clock restarts with every release: a slow consumer that keeps releasing is
     * not a dead one */
    double deadline = tl_cli_now() + timeout_s;
    while (p->st.in_flight > 0) {
        double left = deadline - tl_cli_now();
        if (left <= 0)
            return timed_out(p, timeout_s, "while draining the ring", err, errlen);
        int freed = receive(p, (long)(left * 1000) + 1, err, errlen);
        if (freed < 0)
            return -1;
        if (freed > 0)
            deadline = tl_cli_now() + timeout_s;
    }
    return 0;
}

void tl_push_ipc_get_stats(const tl_push_ipc *p, tl_push_ipc_stats *s)
{
    *s = p->st;
}

/* ---- writing frames ----------------------------------------------------------------- */

/* Uploads a dense host frame to device memory dst in the pitched layout. Rows that are
 * already dense go in one copy; otherwise the frame is laid out in a host staging slot
 * first (allocated once), so that it still takes one copy rather than one per row. */
static int upload(tl_push_ipc *p, void *dst, const void *frame, char *err, size_t errlen)
{
    char why[512];
    const void *src = frame;
    if (p->pitch != p->row_bytes) {
        if (!p->staging && !(p->staging = calloc(1, p->slot_bytes)))
            return failf(err, errlen, "out of memory for a staging frame of %zu bytes",
                         p->slot_bytes);
        for (uint32_t r = 0; r < p->rows; r++)
            memcpy(p->staging + (size_t)r * p->pitch, (const uint8_t *)frame + r * p->row_bytes,
                   p->row_bytes);
        src = p->staging;
    }
    if (tl_ipc_copy(p->device, dst, src, p->slot_bytes, why, sizeof why) != TL_OK)
        return failf(err, errlen, "cannot upload a frame to GPU %d: %s", p->device, why);
    return 0;
}

int tl_push_ipc_fill_host(tl_push_ipc *p, uint32_t slot, const void *frame, char *err,
                          size_t errlen)
{
    return upload(p, tl_push_ipc_slot(p, slot), frame, err, errlen);
}

int tl_push_ipc_bank_alloc(tl_push_ipc *p, size_t n, char *err, size_t errlen)
{
    char why[512];
    uint8_t unused[TL_IPC_HANDLE_BYTES];
    if (p->bank)
        return failf(err, errlen, "the ring has a bank already");
    if (n == 0 || n > SIZE_MAX / p->slot_bytes)
        return failf(err, errlen, "a bank of %zu frames is not possible", n);
    if (tl_ipc_alloc(p->device, n * p->slot_bytes, &p->bank, unused, why, sizeof why) != TL_OK)
        return failf(err, errlen, "cannot allocate a bank of %zu frames (%.1f MB) on GPU %d: %s",
                     n, (double)(n * p->slot_bytes) / 1e6, p->device, why);
    p->nbank = n;
    return 0;
}

int tl_push_ipc_bank_put(tl_push_ipc *p, size_t i, const void *frame, char *err, size_t errlen)
{
    if (i >= p->nbank)
        return failf(err, errlen, "bank entry %zu of %zu", i, p->nbank);
    return upload(p, (uint8_t *)p->bank + i * p->slot_bytes, frame, err, errlen);
}

int tl_push_ipc_fill_bank(tl_push_ipc *p, uint32_t slot, size_t i, char *err, size_t errlen)
{
    char why[512];
    if (i >= p->nbank)
        return failf(err, errlen, "bank entry %zu of %zu", i, p->nbank);
    if (tl_ipc_copy(p->device, tl_push_ipc_slot(p, slot), (uint8_t *)p->bank + i * p->slot_bytes,
                    p->slot_bytes, why, sizeof why) != TL_OK)
        return failf(err, errlen, "cannot copy a frame on GPU %d: %s", p->device, why);
    return 0;
}
