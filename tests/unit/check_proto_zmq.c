/* check_proto_zmq.c — messages through real ZeroMQ sockets (inproc): a frame with a
 * zero-copy payload, a 3-part slice through XPUB/SUB with topic filtering, a 2-part slice
 * in shared memory on its own topic, draining of an over-long message, and the payload
 * never leaking when a send fails.
 *
 * Payload release is observed through the free function's counter, which ZeroMQ may call
 * from its I/O thread, hence the atomic and the bounded wait.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "protocol/protocol.h"
#include "tests/testutil.h"

static void *ctx;
static tl_proto_decoder *dec;
static msgpack_sbuffer sb;
static atomic_int freed;

static void free_payload(void *data, void *hint)
{
    free(data);
    atomic_fetch_add(&freed, 1);
}

/* Waits up to 2 s for the counter to reach n (ZeroMQ may release on another thread). */
static int wait_freed(int n)
{
    for (int i = 0; i < 2000 && atomic_load(&freed) < n; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    return atomic_load(&freed);
}

static void setup(void)
{
    ctx = zmq_ctx_new();
    ck_assert_ptr_nonnull(ctx);
    dec = tl_proto_decoder_new();
    msgpack_sbuffer_init(&sb);
    atomic_store(&freed, 0);
}

static void teardown(void)
{
    msgpack_sbuffer_destroy(&sb);
    tl_proto_decoder_free(dec);
    zmq_ctx_term(ctx);
}

static void *sock(int type, const char *ep, bool bind)
{
    void *s = zmq_socket(ctx, type);
    ck_assert_ptr_nonnull(s);
    int linger = 0, timeo = 5000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeo, sizeof timeo);
    ck_assert_int_eq(bind ? zmq_bind(s, ep) : zmq_connect(s, ep), 0);
    return s;
}

static uint16_t *pattern_u16(size_t n, uint16_t seed)
{
    uint16_t *p = malloc(n * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint16_t)(seed + i * 2654435761u);
    return p;
}

START_TEST(frame_zero_copy)
{
    void *rx = sock(ZMQ_PAIR, "inproc://tl-frame", true);
    void *tx = sock(ZMQ_PAIR, "inproc://tl-frame", false);
    const uint32_t rows = 48, cols = 64;
    uint16_t *px = pattern_u16(rows * cols, 7);
    uint16_t *expect = pattern_u16(rows * cols, 7);
    tl_proto_frame f = {.series = 3,
                        .index = 1234567,
                        .kind = TL_PROTO_PROJ,
                        .dtype = TL_PROTO_U16,
                        .rows = rows,
                        .cols = cols,
                        .has_angle = true,
                        .angle = 1.25,
                        .has_t_acq = true,
                        .t_acq = 1761234567890123456ull};
    ck_assert_int_eq(tl_proto_encode_frame(&sb, &f), 0);
    size_t bytes = rows * cols * sizeof *px;
    ck_assert_int_eq(tl_proto_send(tx, NULL, 0, sb.data, sb.size, px, bytes, free_payload, NULL,
                                   0),
                     0);

    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    tl_proto_error err;
    int n = tl_proto_recv(rx, parts, TL_PROTO_MAX_PARTS, 0, &err);
    ck_assert_int_eq(n, 2);
    tl_proto_msg m;
    tl_proto_err rc = tl_proto_decode_parts(dec, parts, n, TL_PROTO_INGEST, &m, &err);
    ck_assert_msg(rc == TL_PROTO_OK, "%s: %s", tl_proto_err_name(rc), err.message);
    ck_assert_int_eq(m.type, TL_MSG_FRAME);
    ck_assert_uint_eq(m.frame.index, 1234567);
    ck_assert_uint_eq(m.frame.rows, rows);
    ck_assert_uint_eq(m.frame.cols, cols);
    ck_assert(m.frame.angle == 1.25);
    ck_assert_uint_eq(m.frame.t_acq, f.t_acq);
    ck_assert_uint_eq(m.frame.payload_len, bytes);
    ck_assert_mem_eq(m.frame.payload, expect, bytes);
    /* inproc moves the message: the receiver reads the sender's very buffer */
    ck_assert_ptr_eq(m.frame.payload, px);
    ck_assert_int_eq(atomic_load(&freed), 0); /* still in use by the received part */
    tl_proto_close(parts, n);
    ck_assert_int_eq(wait_freed(1), 1); /* released exactly once, when closed */
    free(expect);
    zmq_close(tx);
    zmq_close(rx);
}
END_TEST

START_TEST(frame_copied_payload)
{
    void *rx = sock(ZMQ_PAIR, "inproc://tl-copy", true);
    void *tx = sock(ZMQ_PAIR, "inproc://tl-copy", false);
    uint8_t px[3 * 5];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 17);
    tl_proto_frame f = {.series = 1,
                        .index = 0,
                        .kind = TL_PROTO_DARK,
                        .dtype = TL_PROTO_U8,
                        .rows = 3,
                        .cols = 5};
    ck_assert_int_eq(tl_proto_encode_frame(&sb, &f), 0);
    ck_assert_int_eq(tl_proto_send(tx, NULL, 0, sb.data, sb.size, px, sizeof px, NULL, NULL, 0),
                     0);
    uint8_t sent[sizeof px];
    memcpy(sent, px, sizeof px);
    memset(px, 0xee, sizeof px); /* copied: the sender may reuse its buffer at once */
    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    tl_proto_error err;
    int n = tl_proto_recv(rx, parts, TL_PROTO_MAX_PARTS, 0, &err);
    ck_assert_int_eq(n, 2);
    tl_proto_msg m;
    ck_assert_int_eq(tl_proto_decode_parts(dec, parts, n, TL_PROTO_INGEST, &m, &err), 0);
    ck_assert_int_eq(m.frame.kind, TL_PROTO_DARK);
    ck_assert_mem_eq(m.frame.payload, sent, sizeof sent);
    tl_proto_close(parts, n);
    zmq_close(tx);
    zmq_close(rx);
}
END_TEST

/* Publishes one slice as [topic, header, payload] with a zero-copy float payload. */
static void publish(void *pub, const char *id, uint64_t seq, uint32_t h, uint32_t w)
{
    float *img = malloc((size_t)h * w * sizeof *img);
    ck_assert_ptr_nonnull(img);
    for (size_t i = 0; i < (size_t)h * w; i++)
        img[i] = (float)seq + (float)i * 0.5f;
    tl_proto_slice s = {.id = {id, strlen(id)},
                        .seq = seq,
                        .shape = {h, w},
                        .dtype = TL_PROTO_F32,
                        .orientation = {1, 0, 0, 0, 1, 0, 0, 0, 0},
                        .projections_used = 180,
                        .missing = 2,
                        .window_first = 5,
                        .window_last = 184,
                        .t_acq = 10,
                        .t_pub = 20,
                        .kernel = {"cpu-ref", 7}};
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_slice(&sb, &s), 0);
    char topic[96];
    size_t tn = tl_proto_slice_topic(topic, sizeof topic, id, strlen(id));
    ck_assert_uint_gt(tn, 0);
    ck_assert_int_eq(tl_proto_send(pub, topic, tn, sb.data, sb.size, img,
                                   (size_t)h * w * sizeof *img, free_payload, NULL, 0),
                     0);
}

START_TEST(slice_three_parts_filtered)
{
    void *pub = sock(ZMQ_XPUB, "inproc://tl-slices", true);
    void *sub = sock(ZMQ_SUB, "inproc://tl-slices", false);
    char topic[96];
    size_t tn = tl_proto_slice_topic(topic, sizeof topic, "1", 1);
    ck_assert_int_eq(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, topic, tn), 0);
    /* XPUB reports the subscription: after it arrives, publishing is not lost */
    char note[128];
    int nn = zmq_recv(pub, note, sizeof note, 0);
    ck_assert_int_eq(nn, (int)tn + 1);
    ck_assert_int_eq(note[0], 1);
    ck_assert_mem_eq(note + 1, topic, tn);

    publish(pub, "10", 1, 8, 4); /* nobody wants slice 10: dropped, payload released */
    publish(pub, "1", 2, 8, 4);

    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    tl_proto_error err;
    int n = tl_proto_recv(sub, parts, TL_PROTO_MAX_PARTS, 0, &err);
    ck_assert_int_eq(n, 3);
    tl_proto_msg m;
    tl_proto_err rc = tl_proto_decode_parts(dec, parts, n, TL_MSG_SLICE, &m, &err);
    ck_assert_msg(rc == TL_PROTO_OK, "%s: %s", tl_proto_err_name(rc), err.message);
    ck_assert(tl_proto_str_eq(m.slice.id, "1"));
    ck_assert_uint_eq(m.slice.seq, 2);
    ck_assert_uint_eq(m.slice.shape[0], 8);
    ck_assert_uint_eq(m.slice.shape[1], 4);
    ck_assert_uint_eq(m.slice.missing, 2);
    ck_assert_uint_eq(m.slice.payload_len, 8 * 4 * sizeof(float));
    const float *img = m.slice.payload;
    for (int i = 0; i < 32; i++)
        ck_assert(img[i] == 2.0f + (float)i * 0.5f);
    tl_proto_close(parts, n);
    /* nothing else arrives: slice 10 was filtered out by the terminated topic */
    ck_assert_int_eq(tl_proto_recv(sub, parts, TL_PROTO_MAX_PARTS, ZMQ_DONTWAIT, &err), -1);
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_int_eq(wait_freed(2), 2);
    zmq_close(sub);
    zmq_close(pub);
}
END_TEST

/* The daemon's announcement of a slice in shared memory: [topic "shm/<id>/", header]
 * (tl_proto_send without a payload), taken only by a subscriber of that topic, and a
 * subscriber of "slice/<id>/" does not get it (nor the reverse). */
START_TEST(slice_shm_two_parts_filtered)
{
    void *pub = sock(ZMQ_XPUB, "inproc://tl-shm", true);
    void *shm = sock(ZMQ_SUB, "inproc://tl-shm", false);
    void *tcp = sock(ZMQ_SUB, "inproc://tl-shm", false);
    char st[96], tt[96], note[128];
    size_t sn = tl_proto_shm_topic(st, sizeof st, "1", 1);
    size_t tn = tl_proto_slice_topic(tt, sizeof tt, "1", 1);
    ck_assert_int_eq(zmq_setsockopt(shm, ZMQ_SUBSCRIBE, st, sn), 0);
    ck_assert_int_eq(zmq_setsockopt(tcp, ZMQ_SUBSCRIBE, tt, tn), 0);
    for (int i = 0; i < 2; i++) /* both subscriptions have arrived */
        ck_assert_int_gt(zmq_recv(pub, note, sizeof note, 0), 0);

    tl_proto_slice s = {.id = {"1", 1},
                        .seq = 4,
                        .shape = {8, 4},
                        .dtype = TL_PROTO_F32,
                        .orientation = {1, 0, 0, 0, 1, 0, 0, 0, 0},
                        .t_acq = 10,
                        .t_pub = 20,
                        .kernel = {"cpu-ref", 7},
                        .has_shm = true,
                        .shm_name = {"/tomolive-1-1", 13},
                        .shm_offset = 8192};
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_slice(&sb, &s), 0);
    ck_assert_int_eq(tl_proto_send(pub, st, sn, sb.data, sb.size, NULL, 0, NULL, NULL, 0), 0);
    publish(pub, "1", 4, 8, 4); /* the same slice over TCP */

    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    tl_proto_error err;
    tl_proto_msg m;
    int n = tl_proto_recv(shm, parts, TL_PROTO_MAX_PARTS, 0, &err);
    ck_assert_int_eq(n, 2);
    tl_proto_err rc = tl_proto_decode_parts(dec, parts, n, TL_MSG_SLICE, &m, &err);
    ck_assert_msg(rc == TL_PROTO_OK, "%s: %s", tl_proto_err_name(rc), err.message);
    ck_assert(m.slice.has_shm);
    ck_assert(tl_proto_str_eq(m.slice.shm_name, "/tomolive-1-1"));
    ck_assert_uint_eq(m.slice.shm_offset, 8192);
    ck_assert_uint_eq(m.slice.seq, 4);
    tl_proto_close(parts, n);
    ck_assert_int_eq(tl_proto_recv(shm, parts, TL_PROTO_MAX_PARTS, ZMQ_DONTWAIT, &err), -1);

    n = tl_proto_recv(tcp, parts, TL_PROTO_MAX_PARTS, 0, &err);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(tl_proto_decode_parts(dec, parts, n, TL_MSG_SLICE, &m, &err), TL_PROTO_OK);
    ck_assert(!m.slice.has_shm);
    tl_proto_close(parts, n);
    ck_assert_int_eq(tl_proto_recv(tcp, parts, TL_PROTO_MAX_PARTS, ZMQ_DONTWAIT, &err), -1);
    ck_assert_int_eq(wait_freed(1), 1);
    zmq_close(shm);
    zmq_close(tcp);
    zmq_close(pub);
}
END_TEST

START_TEST(over_long_message_drained)
{
    void *rx = sock(ZMQ_PAIR, "inproc://tl-long", true);
    void *tx = sock(ZMQ_PAIR, "inproc://tl-long", false);
    for (int i = 0; i < 6; i++)
        ck_assert_int_ge(zmq_send(tx, "junk", 4, i < 5 ? ZMQ_SNDMORE : 0), 0);
    tl_proto_end e = {.series = 42};
    ck_assert_int_eq(tl_proto_encode_end(&sb, &e), 0);
    ck_assert_int_eq(tl_proto_send(tx, NULL, 0, sb.data, sb.size, NULL, 0, NULL, NULL, 0), 0);

    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    tl_proto_error err = {TL_PROTO_OK, ""};
    ck_assert_int_eq(tl_proto_recv(rx, parts, TL_PROTO_MAX_PARTS, 0, &err), -2);
    ck_assert_int_eq(err.code, TL_PROTO_E_PARTS);
    ck_assert_ptr_nonnull(strstr(err.message, "6 parts"));
    tl_proto_close(parts, TL_PROTO_MAX_PARTS);
    /* the next receive starts at the next message, not in the middle of the long one */
    int n = tl_proto_recv(rx, parts, TL_PROTO_MAX_PARTS, 0, &err);
    ck_assert_int_eq(n, 1);
    tl_proto_msg m;
    ck_assert_int_eq(tl_proto_decode_parts(dec, parts, n, TL_PROTO_INGEST, &m, &err), 0);
    ck_assert_int_eq(m.type, TL_MSG_END);
    ck_assert_uint_eq(m.end.series, 42);
    tl_proto_close(parts, n);
    zmq_close(tx);
    zmq_close(rx);
}
END_TEST

START_TEST(recv_errors)
{
    void *rx = sock(ZMQ_PAIR, "inproc://tl-empty", true);
    zmq_msg_t parts[2];
    tl_proto_error err;
    ck_assert_int_eq(tl_proto_recv(rx, parts, 2, ZMQ_DONTWAIT, &err), -1);
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_int_eq(tl_proto_recv(rx, parts, 0, 0, &err), -1);
    ck_assert_int_eq(errno, EINVAL);
    zmq_close(rx);
}
END_TEST

/* A failed send releases a zero-copy payload exactly once and leaks no copy. */
START_TEST(send_failure_releases_payload)
{
    void *tx = zmq_socket(ctx, ZMQ_PUSH); /* no peer: a non-blocking send has nowhere to go */
    int linger = 0;
    zmq_setsockopt(tx, ZMQ_LINGER, &linger, sizeof linger);
    ck_assert_int_eq(zmq_bind(tx, "inproc://tl-nopeer"), 0);
    tl_proto_end e = {.series = 1};
    ck_assert_int_eq(tl_proto_encode_end(&sb, &e), 0);

    void *p = malloc(64);
    ck_assert_int_eq(tl_proto_send(tx, NULL, 0, sb.data, sb.size, p, 64, free_payload, NULL,
                                   ZMQ_DONTWAIT),
                     -1);
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_int_eq(wait_freed(1), 1);

    p = malloc(64);
    ck_assert_int_eq(tl_proto_send(tx, "slice/a/", 8, sb.data, sb.size, p, 64, free_payload, NULL,
                                   ZMQ_DONTWAIT),
                     -1);
    ck_assert_int_eq(wait_freed(2), 2);

    uint8_t local[16] = {0};
    ck_assert_int_eq(tl_proto_send(tx, NULL, 0, sb.data, sb.size, local, sizeof local, NULL, NULL,
                                   ZMQ_DONTWAIT),
                     -1);

    p = malloc(64); /* invalid arguments: still released */
    ck_assert_int_eq(tl_proto_send(tx, NULL, 0, NULL, 0, p, 64, free_payload, NULL, 0), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_int_eq(wait_freed(3), 3);
    zmq_close(tx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("proto_zmq");
    TCase *tc = tcase_create("sockets");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, frame_zero_copy);
    tcase_add_test(tc, frame_copied_payload);
    tcase_add_test(tc, slice_three_parts_filtered);
    tcase_add_test(tc, slice_shm_two_parts_filtered);
    tcase_add_test(tc, over_long_message_drained);
    tcase_add_test(tc, recv_errors);
    tcase_add_test(tc, send_failure_releases_payload);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
