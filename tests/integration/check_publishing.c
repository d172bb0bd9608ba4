/* check_publishing.c — what every slice subscriber is promised (PROTOCOL.md §10.2), from a
 * real tomolived on the CPU backend:
 *
 *   - one subscriber of "slice/" watching many slices, reading all along, gets every
 *     slice's final of every scan, and each slice's seqs only ever grow; once the slices
 *     are removed, their buffers are freed (status.slices.buffers drops to 0);
 *   - a subscriber that pauses (its receive high-water mark 1) and then reads again ends
 *     with the newest of each slice, its final, not the oldest: on its own while the daemon
 *     waits for it (a pause shorter than slices.stall_ms), and after it was taken as
 *     stalled by reading what it has queued and asking for a resend;
 *   - a second subscriber that never reads changes nothing for the first: every final, in
 *     order, once, and the daemon counts the stall;
 *   - the same through shared memory: a paused "shm/" subscriber still reads the final of
 *     the scan before, pixels intact, while the next scan's slices rotate the other slots;
 *   - compact encodings (§10.3): f16 + LZ4 and q16 slices within their precision of f32.
 *
 * Each of these failed before the publisher kept slices in its outbox (the daemon lost
 * finals at ZeroMQ's high-water mark and left a slow reader with the oldest slices).
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protocol/pixels.h"
#include "protocol/shm.h"
#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

enum { NSLICES = 12, ROWS = 4, COLS = 64, FRAMES = 150 };

/* What a subscriber got of one slice. */
typedef struct {
    long messages, finals;
    uint64_t last_seq, final_seq;
    bool last_final;     /* the last message it got was a final */
    long out_of_order;   /* a seq below one received before (a repeat's equal seq is fine) */
    long shm_unreadable; /* shm: the pixels were rewritten before they were read */
} per_slice;

typedef struct {
    per_slice s[NSLICES];
    tl_shm_reader rd;
    float *px;
} record;

static void *subscribe(tl_fixture *f, const char *topic, int rcvhwm)
{
    void *s = zmq_socket(f->zctx, ZMQ_SUB);
    ck_assert_ptr_nonnull(s);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (rcvhwm)
        zmq_setsockopt(s, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    ck_assert_int_eq(zmq_connect(s, f->slices), 0);
    ck_assert_int_eq(zmq_setsockopt(s, ZMQ_SUBSCRIBE, topic, strlen(topic)), 0);
    return s;
}

/* NSLICES row slices "s0".."s11", every one updated with each frame. */
static void define_slices(tl_fixture *f)
{
    for (int k = 0; k < NSLICES; k++) {
        char args[256];
        snprintf(args, sizeof args,
                 "{\"id\":\"s%d\",\"kind\":\"row\",\"z\":%d,\"size\":[64,64],"
                 "\"update\":{\"every\":1,\"max_rate\":1000}}",
                 k, k % ROWS);
        json_decref(tl_fx_ok(f, "set_slice", args));
    }
}

/* Takes one message, if one comes within ms, into r. Returns whether one came. */
static bool take(void *sock, tl_proto_decoder *dec, long ms, record *r)
{
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, ms) <= 0)
        return false;
    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    tl_proto_error e;
    tl_proto_msg m;
    int n = tl_proto_recv(sock, parts, TL_PROTO_MAX_PARTS, 0, &e);
    tl_proto_err rc = tl_proto_decode_parts(dec, parts, n, TL_MSG_SLICE, &m, &e);
    ck_assert_msg(rc == TL_PROTO_OK, "%s: %s", tl_proto_err_name(rc), e.message);
    int k = atoi(m.slice.id.ptr + 1);
    ck_assert(k >= 0 && k < NSLICES);
    per_slice *p = &r->s[k];
    if (m.slice.seq < p->last_seq)
        p->out_of_order++;
    if (m.slice.has_shm) {
        char err[256];
        int got = tl_shm_read(&r->rd, &m.slice, r->px, err, sizeof err);
        ck_assert_msg(got == 0 || got == TL_SHM_STALE, "%s", err);
        p->shm_unreadable += got == TL_SHM_STALE && m.slice.final;
    }
    p->messages++;
    p->last_seq = m.slice.seq;
    p->last_final = m.slice.final;
    if (m.slice.final) {
        p->finals++;
        p->final_seq = m.slice.seq;
    }
    tl_proto_close(parts, n);
    return true;
}

/* Reads until nothing has come for quiet_ms. */
static void drain(void *sock, tl_proto_decoder *dec, long quiet_ms, record *r)
{
    while (take(sock, dec, quiet_ms, r))
        ;
}

/* Reads until every slice has had `finals` finals (false after 30 s). */
static bool read_finals(void *sock, tl_proto_decoder *dec, long finals, record *r)
{
    for (double t0 = tl_fx_seconds(); tl_fx_seconds() - t0 < 30;) {
        int done = 0;
        for (int k = 0; k < NSLICES; k++)
            done += r->s[k].finals >= finals;
        if (done == NSLICES)
            return true;
        take(sock, dec, 100, r);
    }
    return false;
}

/* One scan of FRAMES frames, paced pause_us apart; with a reader, it reads meanwhile. */
static void send_scan(tl_fixture *f, uint64_t series, bool end, unsigned pause_us, void *reader,
                      tl_proto_decoder *dec, record *r)
{
    tl_proto_scan s = {.series = series,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = ROWS,
                       .cols = COLS,
                       .dtype = TL_PROTO_F32,
                       .window = FRAMES,
                       .already_linear = true};
    ck_assert_int_eq(tl_fx_send_scan(f, &s), 0);
    float img[ROWS * COLS];
    tl_fx_disk_projection(img, ROWS, COLS, 20);
    for (uint32_t i = 0; i < FRAMES; i++) {
        tl_proto_frame h = {.series = series,
                            .index = i,
                            .kind = TL_PROTO_PROJ,
                            .has_angle = true,
                            .angle = M_PI * i / FRAMES,
                            .dtype = TL_PROTO_F32,
                            .rows = ROWS,
                            .cols = COLS};
        ck_assert_int_eq(tl_fx_send_frame(f, &h, img, sizeof img), 0);
        if (reader)
            while (take(reader, dec, 0, r))
                ;
        if (pause_us) /* a camera's pace: part of what is tested */
            usleep(pause_us);
    }
    if (end)
        tl_fx_send_end(f, series);
}

/* Waits until the worker has posted every slice's final (the log says so per slice). */
static void wait_finals_posted(tl_fixture *f)
{
    for (int k = 0; k < NSLICES; k++) {
        char needle[64];
        snprintf(needle, sizeof needle, "slice_final id=s%d seq", k);
        ck_assert_msg(tl_fx_wait_log(f, needle, 30), "no final for s%d", k);
    }
}

static void check_ends_with_finals(const record *r, const char *who)
{
    for (int k = 0; k < NSLICES; k++) {
        const per_slice *p = &r->s[k];
        ck_assert_msg(p->last_final && p->final_seq == p->last_seq,
                      "%s: s%d ends with seq %llu (final %d), not its final", who, k,
                      (unsigned long long)p->last_seq, p->last_final);
        ck_assert_msg(p->out_of_order == 0, "%s: s%d got %ld older after newer", who, k,
                      p->out_of_order);
    }
}

START_TEST(every_final_to_one_subscriber)
{
    tl_fixture f;
    const char *args[] = {"--set", "slices.sndhwm=1", NULL};
    ck_assert_int_eq(tl_fx_start(&f, "pubfinals", args), 0);
    define_slices(&f);
    void *sub = subscribe(&f, "slice/", 0);
    ck_assert(tl_fx_wait_status(&f, "slices.wanted", NSLICES, 10));
    tl_proto_decoder *dec = tl_proto_decoder_new();
    record r = {0};
    for (uint64_t series = 1; series <= 3; series++) {
        send_scan(&f, series, true, 0, sub, dec, &r);
        ck_assert_msg(read_finals(sub, dec, (long)series, &r), "scan %llu: finals missing",
                      (unsigned long long)series);
    }
    for (int k = 0; k < NSLICES; k++) {
        ck_assert_int_eq(r.s[k].finals, 3);
        ck_assert_int_eq(r.s[k].out_of_order, 0);
    }
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.finals_lost"), 0);
    printf("one subscriber, %d slices, 3 scans: every final; superseded %lld\n", NSLICES,
           tl_fx_status_int(&f, "slices.superseded"));
    /* the buffers: at least the final kept for each slice (resend), then, the slices
     * removed and nobody subscribed, every one freed by the pool's trim (bufpool.h) */
    long long buffers = tl_fx_status_int(&f, "slices.buffers");
    ck_assert_int_ge(buffers, NSLICES);
    ck_assert_int_ge(tl_fx_status_int(&f, "slices.buffer_bytes"), NSLICES * 64 * 64 * 4);
    zmq_close(sub);
    for (int k = 0; k < NSLICES; k++) {
        char which[64];
        snprintf(which, sizeof which, "{\"id\":\"s%d\"}", k);
        json_decref(tl_fx_ok(&f, "remove_slice", which));
    }
    ck_assert_msg(tl_fx_wait_status(&f, "slices.buffers", 0, 40),
                  "%lld of %lld slice buffers still there 40 s after the slices went",
                  tl_fx_status_int(&f, "slices.buffers"), buffers);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.buffer_bytes"), 0);
    tl_proto_decoder_free(dec);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A subscriber with receive high-water mark 1 that reads only after the scan, as a control
 * loop that fell behind. stall_ms decides the path: longer than the pause, the daemon waits
 * for it; shorter, it is taken as stalled, and catches up with a resend. */
static void paused_subscriber(const char *stall_ms, bool expect_stall)
{
    tl_fixture f;
    char stall[64];
    snprintf(stall, sizeof stall, "slices.stall_ms=%s", stall_ms);
    const char *args[] = {"--set", "slices.sndhwm=2", "--set", stall, NULL};
    ck_assert_int_eq(tl_fx_start(&f, "pubpause", args), 0);
    define_slices(&f);
    void *sub = subscribe(&f, "slice/", 1);
    ck_assert(tl_fx_wait_status(&f, "slices.wanted", NSLICES, 10));
    send_scan(&f, 1, true, 2000, NULL, NULL, NULL);
    wait_finals_posted(&f);
    if (expect_stall) /* the pause outlasted stall_ms */
        ck_assert(tl_fx_status_int(&f, "slices.stalls") >= 1);
    tl_proto_decoder *dec = tl_proto_decoder_new();
    record r = {0};
    if (expect_stall) { /* what it has queued, then the newest of each (PROTOCOL.md §10.2) */
        drain(sub, dec, 300, &r);
        json_t *res = tl_fx_ok(&f, "resend", NULL);
        ck_assert_int_ge(json_integer_value(json_object_get(res, "messages")), NSLICES);
        json_decref(res);
    }
    ck_assert(read_finals(sub, dec, 1, &r));
    drain(sub, dec, 300, &r); /* anything after the finals would be older: none may come */
    check_ends_with_finals(&r, "paused subscriber");
    long got = 0;
    for (int k = 0; k < NSLICES; k++)
        got += r.s[k].messages;
    long long computed = tl_fx_status_int(&f, "slices.computed");
    printf("paused subscriber (stall_ms %s): %ld of %lld computed, ends with every final; "
           "stalls %lld, resent %lld\n",
           stall_ms, got, computed, tl_fx_status_int(&f, "slices.stalls"),
           tl_fx_status_int(&f, "slices.resent"));
    ck_assert_int_lt(got, computed); /* not the backlog: the newest of each */
    if (!expect_stall)
        ck_assert_int_eq(tl_fx_status_int(&f, "slices.stalls"), 0);
    tl_proto_decoder_free(dec);
    zmq_close(sub);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}

START_TEST(paused_subscriber_waited_for)
{
    paused_subscriber("60000", false);
}
END_TEST

START_TEST(paused_subscriber_caught_up)
{
    paused_subscriber("100", true);
}
END_TEST

START_TEST(never_reading_subscriber_changes_nothing)
{
    tl_fixture f;
    const char *args[] = {"--set", "slices.sndhwm=2", "--set", "slices.stall_ms=200", NULL};
    ck_assert_int_eq(tl_fx_start(&f, "pubstall", args), 0);
    define_slices(&f);
    void *reader = subscribe(&f, "slice/", 0);
    void *stuck = subscribe(&f, "slice/s", 1); /* a prefix of its own: two subscriptions */
    ck_assert(tl_fx_wait_status(&f, "slices.subscriptions", 2, 10));
    tl_proto_decoder *dec = tl_proto_decoder_new();
    record r = {0};
    for (uint64_t series = 1; series <= 3; series++) {
        send_scan(&f, series, true, 1000, reader, dec, &r);
        ck_assert_msg(read_finals(reader, dec, (long)series, &r), "scan %llu: finals missing",
                      (unsigned long long)series);
    }
    drain(reader, dec, 300, &r);
    check_ends_with_finals(&r, "reader beside a stalled one");
    for (int k = 0; k < NSLICES; k++)
        ck_assert_int_eq(r.s[k].finals, 3);
    ck_assert_int_ge(tl_fx_status_int(&f, "slices.stalls"), 1);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.finals_lost"), 0);
    double t_status = tl_fx_seconds();
    json_decref(tl_fx_ok(&f, "status", NULL)); /* the loop is not stuck behind it */
    ck_assert(tl_fx_seconds() - t_status < 5);
    tl_proto_decoder_free(dec);
    zmq_close(stuck);
    zmq_close(reader);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* Through shared memory: a subscriber paused across the end of one scan and the start of
 * the next reads, when it resumes, the first scan's final (pixels intact: its slot was
 * kept) and then the newest of the second. */
START_TEST(paused_shm_subscriber_gets_the_final)
{
    tl_fixture f;
    char shm[64], stall[] = "slices.stall_ms=60000";
    snprintf(shm, sizeof shm, "slices.shm=tlpub%d", (int)getpid());
    const char *args[] = {"--set", shm, "--set", "slices.sndhwm=1", "--set", stall, NULL};
    ck_assert_int_eq(tl_fx_start(&f, "pubshm", args), 0);
    define_slices(&f);
    void *sub = subscribe(&f, "shm/", 1);
    ck_assert(tl_fx_wait_status(&f, "slices.wanted", NSLICES, 10));
    send_scan(&f, 1, true, 1000, NULL, NULL, NULL);
    wait_finals_posted(&f);
    send_scan(&f, 2, false, 1000, NULL, NULL, NULL); /* rotates the slots many times */
    ck_assert(tl_fx_wait_messages(&f, (FRAMES + 2) + (FRAMES + 1), 30)); /* scan, frames, end */
    tl_proto_decoder *dec = tl_proto_decoder_new();
    record r = {.px = malloc(64 * 64 * sizeof(float))};
    ck_assert(read_finals(sub, dec, 1, &r));
    drain(sub, dec, 300, &r);
    for (int k = 0; k < NSLICES; k++) {
        ck_assert_msg(r.s[k].shm_unreadable == 0, "s%d: the final's slot was rewritten", k);
        ck_assert_int_eq(r.s[k].out_of_order, 0);
        ck_assert_uint_gt(r.s[k].last_seq, r.s[k].final_seq); /* then the second scan's */
    }
    tl_fx_send_end(&f, 2);
    ck_assert(read_finals(sub, dec, 2, &r));
    check_ends_with_finals(&r, "paused shm subscriber");
    tl_shm_reader_close(&r.rd);
    free(r.px);
    tl_proto_decoder_free(dec);
    zmq_close(sub);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* The finals of slices ids[0..2] as float32 (decoded from whatever each was sent as), with
 * their headers, whatever order they come in; false after 30 s. */
static bool finals_of(void *sub, tl_proto_decoder *dec, const char *const ids[3], float *px[3],
                      tl_proto_slice got[3])
{
    int have = 0;
    for (double t0 = tl_fx_seconds(); have < 3 && tl_fx_seconds() - t0 < 30;) {
        zmq_pollitem_t it = {sub, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 200) <= 0)
            continue;
        zmq_msg_t parts[TL_PROTO_MAX_PARTS];
        tl_proto_error e;
        tl_proto_msg m;
        int n = tl_proto_recv(sub, parts, TL_PROTO_MAX_PARTS, 0, &e);
        tl_proto_err rc = tl_proto_decode_parts(dec, parts, n, TL_MSG_SLICE, &m, &e);
        ck_assert_msg(rc == TL_PROTO_OK, "%s: %s", tl_proto_err_name(rc), e.message);
        for (int k = 0; k < 3 && m.slice.final; k++) {
            if (px[k] || m.slice.id.len != strlen(ids[k]) ||
                memcmp(m.slice.id.ptr, ids[k], m.slice.id.len) != 0)
                continue;
            px[k] = malloc((size_t)m.slice.shape[0] * m.slice.shape[1] * sizeof(float));
            ck_assert_msg(tl_proto_pixels_decode(&m.slice, px[k], &e) == TL_PROTO_OK, "%s",
                          e.message);
            got[k] = m.slice;
            got[k].payload = NULL; /* the message is closed below */
            have++;
        }
        tl_proto_close(parts, n);
    }
    return have == 3;
}

/* Compact encodings (§10.3): the same plane as f32, f16 + LZ4 and q16, each within its
 * precision of the f32 one, in fewer bytes; list_slices says how each goes; bad names are
 * refused. */
START_TEST(compact_encodings)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "pubcompact", NULL), 0);
    const char *plane = "\"kind\":\"row\",\"z\":1,\"size\":[64,64]";
    char args[256];
    snprintf(args, sizeof args, "{\"id\":\"f\",%s}", plane);
    json_decref(tl_fx_ok(&f, "set_slice", args));
    snprintf(args, sizeof args, "{\"id\":\"h\",%s,\"dtype\":\"f16\",\"compression\":\"lz4\"}",
             plane);
    json_t *r = tl_fx_ok(&f, "set_slice", args);
    ck_assert_str_eq(json_string_value(json_object_get(r, "dtype")), "f16");
    ck_assert_str_eq(json_string_value(json_object_get(r, "compression")), "lz4");
    json_decref(r);
    snprintf(args, sizeof args, "{\"id\":\"q\",%s,\"dtype\":\"q16\"}", plane);
    json_decref(tl_fx_ok(&f, "set_slice", args));
    r = tl_fx_request(&f, "set_slice",
                      "{\"id\":\"x\",\"kind\":\"row\",\"z\":1,\"dtype\":\"u16\"}");
    ck_assert_int_eq(json_integer_value(json_object_get(r, "code")), TL_PROTO_E_DTYPE);
    json_decref(r);
    r = tl_fx_request(&f, "set_slice",
                      "{\"id\":\"x\",\"kind\":\"row\",\"z\":1,\"compression\":\"gzip\"}");
    ck_assert_int_eq(json_integer_value(json_object_get(r, "code")), TL_PROTO_E_RANGE);
    json_decref(r);
    void *sub = subscribe(&f, "slice/", 0);
    ck_assert(tl_fx_wait_status(&f, "slices.wanted", 3, 10));
    send_scan(&f, 1, true, 0, NULL, NULL, NULL);
    tl_proto_decoder *dec = tl_proto_decoder_new();
    const char *const ids[3] = {"f", "h", "q"};
    float *px[3] = {NULL, NULL, NULL};
    tl_proto_slice hdr[3];
    ck_assert(finals_of(sub, dec, ids, px, hdr));
    float *pf = px[0], *ph = px[1], *pq = px[2];
    tl_proto_slice hf = hdr[0], hh = hdr[1], hq = hdr[2];
    ck_assert_int_eq(hf.dtype, TL_PROTO_F32);
    ck_assert(hh.dtype == TL_PROTO_F16 && hh.lz4);
    ck_assert(hq.dtype == TL_PROTO_Q16 && !hq.lz4);
    ck_assert_uint_eq(hf.payload_len, 64 * 64 * 4);
    ck_assert_uint_lt(hh.payload_len, 64 * 64 * 2);
    ck_assert_uint_eq(hq.payload_len, 64 * 64 * 2);
    double peak = 0;
    for (int i = 0; i < 64 * 64; i++)
        peak = fmax(peak, fabs(pf[i]));
    ck_assert(peak > 0);
    for (int i = 0; i < 64 * 64; i++) {
        ck_assert_msg(fabs(ph[i] - pf[i]) <= ldexp(fabs(pf[i]), -11) + 6e-8, "f16 pixel %d", i);
        ck_assert_msg(fabs(pq[i] - pf[i]) <= hq.scale * 0.5 + 1e-6 * peak, "q16 pixel %d", i);
    }
    free(pf);
    free(ph);
    free(pq);
    tl_proto_decoder_free(dec);
    zmq_close(sub);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("publishing");
    TCase *t = tcase_create("publishing");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, every_final_to_one_subscriber);
    tcase_add_test(t, paused_subscriber_waited_for);
    tcase_add_test(t, paused_subscriber_caught_up);
    tcase_add_test(t, never_reading_subscriber_changes_nothing);
    tcase_add_test(t, paused_shm_subscriber_gets_the_final);
    tcase_add_test(t, compact_encodings);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
