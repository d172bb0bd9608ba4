/* check_sub.c — `tomolive sub` against slices published by the test from its own XPUB
 * socket (encoded with tl_proto_encode_slice, as the daemon does): the per-slice lines,
 * the latest-image TIFF and PNG files and the per-sequence TIFFs with the right pixels,
 * gap counting, exact topic filtering, malformed messages counted, --until-final, the
 * timeout (exit 3, and reset by each slice), --all with latency percentiles, Ctrl-C, and
 * the usage errors. With --shm, the test writes the pixels into shared memory through the
 * daemon's own writer (protocol/shm.h) and announces them on "shm/<id>/": the same lines
 * and files as over TCP, and a stale slot or an unreadable object counted as missed.
 */
#include "config.h"

#include <math.h>
#include <png.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "clients/tiff.h"
#include "protocol/protocol.h"
#include "protocol/shm.h"
#include "tests/integration/clients_util.h"
#include "tests/testutil.h"

enum { H = 6, W = 8 };

static char *dir;
static void *ctx, *xpub;
static char ep[256];

static void setup(void)
{
    dir = tl_tmpdir("sub");
    ck_assert_ptr_nonnull(dir);
    ctx = zmq_ctx_new();
    xpub = tl_bind_loopback(ctx, ZMQ_XPUB, ep, sizeof ep);
}

static void teardown(void)
{
    zmq_close(xpub);
    zmq_ctx_term(ctx);
    tl_rm_rf(dir);
    free(dir);
}

static const char *path_in(const char *name)
{
    return tl_path_in(dir, name);
}

/* A new XPUB on a new port: the old one may still hold (un)subscriptions of an earlier
 * subscriber, which wait_subscriptions would take for the next one's. */
static void fresh_xpub(void)
{
    zmq_close(xpub);
    xpub = tl_bind_loopback(ctx, ZMQ_XPUB, ep, sizeof ep);
}

/* Waits until the subscriber has subscribed n topics (XPUB reports each). */
static void wait_subscriptions(int n)
{
    for (int i = 0; i < n; i++) {
        char buf[256];
        int len = zmq_recv(xpub, buf, sizeof buf, 0);
        ck_assert_msg(len > 0 && buf[0] == 1, "no subscription from tomolive sub: %s",
                      tl_client_err());
    }
}

static uint64_t realtime_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The image of slice (id, seq): a ramp down the rows, different for every seq. */
static void image(uint64_t seq, float *img)
{
    for (int i = 0; i < H; i++)
        for (int j = 0; j < W; j++)
            img[i * W + j] = (float)(seq * 1000 + i * W + j);
}

/* Publishes slice id/seq with an acquisition time age_ms ago. */
static void publish(const char *id, uint64_t seq, bool final, double age_ms)
{
    float img[H * W];
    image(seq, img);
    tl_proto_slice s = {.id = {id, strlen(id)},
                        .seq = seq,
                        .shape = {H, W},
                        .dtype = TL_PROTO_F32,
                        .orientation = {W, 0, 0, 0, H, 0, -W / 2.0f, -H / 2.0f, 3},
                        .projections_used = 700 + (uint32_t)seq,
                        .missing = (uint32_t)seq % 3,
                        .window_first = seq,
                        .window_last = seq + 719,
                        .t_acq = realtime_ns() - (uint64_t)(age_ms * 1e6),
                        .t_pub = realtime_ns(),
                        .final = final,
                        .kernel = {"tex-test", 8}};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    ck_assert_int_eq(tl_proto_encode_slice(&sb, &s), 0);
    char topic[128];
    size_t tl = tl_proto_slice_topic(topic, sizeof topic, id, strlen(id));
    ck_assert_int_eq(tl_proto_send(xpub, topic, tl, sb.data, sb.size, img, sizeof img, NULL, NULL,
                                   0),
                     0);
    msgpack_sbuffer_destroy(&sb);
}

/* The header publish() sends, with the pixels in shared memory at off of object name. */
static void publish_shm(const char *id, uint64_t seq, bool final, double age_ms, const char *name,
                        uint64_t off)
{
    tl_proto_slice s = {.id = {id, strlen(id)},
                        .seq = seq,
                        .shape = {H, W},
                        .dtype = TL_PROTO_F32,
                        .orientation = {W, 0, 0, 0, H, 0, -W / 2.0f, -H / 2.0f, 3},
                        .projections_used = 700 + (uint32_t)seq,
                        .missing = (uint32_t)seq % 3,
                        .window_first = seq,
                        .window_last = seq + 719,
                        .t_acq = realtime_ns() - (uint64_t)(age_ms * 1e6),
                        .t_pub = realtime_ns(),
                        .final = final,
                        .kernel = {"tex-test", 8},
                        .has_shm = true,
                        .shm_name = {name, strlen(name)},
                        .shm_offset = off};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    ck_assert_int_eq(tl_proto_encode_slice(&sb, &s), 0);
    char topic[128];
    size_t tl = tl_proto_shm_topic(topic, sizeof topic, id, strlen(id));
    ck_assert_int_eq(tl_proto_send(xpub, topic, tl, sb.data, sb.size, NULL, 0, NULL, NULL, 0), 0);
    msgpack_sbuffer_destroy(&sb);
}

/* Shared-memory object names of this run (the suite's pid): a test that fails ends its
 * process before destroying its object, so the suite unlinks them when done. */
static char shm_name[64], shm_none[64];

static void shm_cleanup(void)
{
    shm_unlink(shm_name);
}

/* Writes image(seq) into the ring's next slot as the daemon does; commit = false leaves
 * the slot "being written". Returns the offset the message gives. */
static uint64_t write_slot(tl_shm_ring *r, uint64_t seq, bool commit)
{
    uint64_t off;
    float *px = tl_shm_ring_begin(r, &off);
    image(seq, px);
    if (commit)
        tl_shm_ring_commit(r, off, seq);
    return off;
}

/* The line sub prints for a slice published by publish(); *lat gets its latency. */
static void check_line(const char *out, const char *id, uint64_t seq, bool final, double min_lat)
{
    char want[256];
    snprintf(want, sizeof want,
             "id=%s seq=%llu shape=%dx%d projections=%u missing=%u "
             "window=%llu..%llu latency_ms=",
             id, (unsigned long long)seq, H, W, 700 + (unsigned)seq, (unsigned)seq % 3,
             (unsigned long long)seq, (unsigned long long)seq + 719);
    const char *p = strstr(out, want);
    ck_assert_msg(p != NULL, "no line '%s...' in:\n%s", want, out);
    double lat;
    char kernel[64], rest[16] = "";
    ck_assert_int_ge(sscanf(p + strlen(want), "%lf kernel=%63s%15[^\n]", &lat, kernel, rest), 2);
    ck_assert_str_eq(kernel, "tex-test");
    ck_assert_str_eq(rest, final ? " final" : "");
    ck_assert_msg(lat >= min_lat && lat < min_lat + 5000, "latency %g ms, at least %g", lat,
                  min_lat);
}

static void check_tiff(const char *path, uint64_t seq)
{
    char err[512];
    tl_tiff_reader r;
    ck_assert_msg(tl_tiff_open(&r, path, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(r.pages, 1);
    ck_assert_uint_eq(r.rows, H);
    ck_assert_uint_eq(r.cols, W);
    ck_assert_int_eq(r.dtype, TL_DTYPE_F32);
    float got[H * W], want[H * W];
    ck_assert_msg(tl_tiff_read_page(&r, 0, got, err, sizeof err) == 0, "%s", err);
    tl_tiff_close(&r);
    image(seq, want);
    ck_assert_msg(!memcmp(got, want, sizeof got), "%s does not hold seq %llu", path,
                  (unsigned long long)seq);
}

START_TEST(test_sub_lines_files_gaps)
{
    const char *out = path_in("out");
    const char *args[] = {"sub",         "--endpoint", ep,  "--out", out,    "--png",
                          "--every-seq", "--count",    "4", "row0",  "row1", NULL};
    pid_t pid = tl_client_start(dir, args);
    wait_subscriptions(2);
    publish("row00", 0, false, 0); /* a prefix of its topic is subscribed: must not match */
    publish("row2", 0, false, 0);
    publish("row0", 0, false, 25);
    publish("row1", 0, false, 25);
    publish("row0", 1, false, 25);
    publish("row1", 3, false, 25); /* 1 and 2 missed */
    ck_assert_int_eq(tl_client_wait(pid, 30), 0);
    const char *o = tl_client_out();
    ck_assert_int_eq(tl_count_lines(o, "id="), 4);
    check_line(o, "row0", 0, false, 25);
    check_line(o, "row1", 0, false, 25);
    check_line(o, "row0", 1, false, 25);
    check_line(o, "row1", 3, false, 25);
    ck_assert(strstr(o, "id=row00") == NULL && strstr(o, "id=row2") == NULL);
    ck_assert_msg(strstr(o, "summary id=row0 received=2 missed=0 last_seq=1\n") != NULL, "%s", o);
    ck_assert_msg(strstr(o, "summary id=row1 received=2 missed=2 last_seq=3\n") != NULL, "%s", o);

    char p[1024];
    snprintf(p, sizeof p, "%s/row0.tif", out);
    check_tiff(p, 1); /* the latest */
    snprintf(p, sizeof p, "%s/row1.tif", out);
    check_tiff(p, 3);
    const uint64_t seqs[2][2] = {{0, 1}, {0, 3}};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 2; i++) {
            snprintf(p, sizeof p, "%s/row%d-%llu.tif", out, k, (unsigned long long)seqs[k][i]);
            check_tiff(p, seqs[k][i]);
        }
    snprintf(p, sizeof p, "%s/row00.tif", out);
    ck_assert(access(p, F_OK) != 0);
    snprintf(p, sizeof p, "%s/.row0.tif.tmp", out);
    ck_assert(access(p, F_OK) != 0);

    /* the preview: H x W, row 0 at the top, darkest first since the ramp goes down */
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    snprintf(p, sizeof p, "%s/row1.png", out);
    ck_assert_msg(png_image_begin_read_from_file(&img, p), "%s", img.message);
    ck_assert_uint_eq(img.height, H);
    ck_assert_uint_eq(img.width, W);
    img.format = PNG_FORMAT_GRAY;
    uint8_t g[H * W];
    ck_assert_msg(png_image_finish_read(&img, NULL, g, 0, NULL), "%s", img.message);
    ck_assert_uint_eq(g[0], 0);
    ck_assert_uint_eq(g[H * W - 1], 255);
    for (int i = 1; i < H * W; i++)
        ck_assert_uint_ge(g[i], g[i - 1]);
}
END_TEST

START_TEST(test_sub_malformed)
{
    const char *args[] = {"sub", "--endpoint", ep, "--count", "2", "row0", NULL};
    pid_t pid = tl_client_start(dir, args);
    wait_subscriptions(1);
    const char *topic = "slice/row0/";
    float img[H * W] = {0};
    /* not msgpack */
    ck_assert_int_eq(tl_proto_send(xpub, topic, strlen(topic), "\xc1junk", 5, img, sizeof img,
                                   NULL, NULL, 0),
                     0);
    /* a valid header for another id under this topic */
    tl_proto_slice s = {.id = {"row1", 4},
                        .shape = {H, W},
                        .dtype = TL_PROTO_F32,
                        .kernel = {"k", 1}};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    ck_assert_int_eq(tl_proto_encode_slice(&sb, &s), 0);
    ck_assert_int_eq(tl_proto_send(xpub, topic, strlen(topic), sb.data, sb.size, img, sizeof img,
                                   NULL, NULL, 0),
                     0);
    /* a payload of the wrong length */
    s.id = (tl_proto_str){"row0", 4};
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_slice(&sb, &s), 0);
    ck_assert_int_eq(tl_proto_send(xpub, topic, strlen(topic), sb.data, sb.size, img,
                                   sizeof img - 4, NULL, NULL, 0),
                     0);
    msgpack_sbuffer_destroy(&sb);
    publish("row0", 0, false, 0);
    publish("row0", 1, false, 0);
    ck_assert_int_eq(tl_client_wait(pid, 30), 0);
    ck_assert_int_eq(tl_count_lines(tl_client_out(), "id=row0 "), 2);
    const char *e = tl_client_err();
    ck_assert_msg(strstr(e, "E_MALFORMED") != NULL, "%s", e);         /* the first, named */
    ck_assert_int_eq(tl_count_lines(e, "tomolive sub: rejected"), 1); /* printed once */
    ck_assert_msg(strstr(e, "3 malformed messages rejected") != NULL, "%s", e);
}
END_TEST

START_TEST(test_sub_until_final)
{
    const char *args[] = {"sub", "--endpoint", ep, "--until-final", "a", "b", NULL};
    pid_t pid = tl_client_start(dir, args);
    wait_subscriptions(2);
    publish("a", 0, false, 0);
    publish("a", 1, true, 0);
    publish("b", 0, false, 0);
    /* it has taken all three (or exited early, which the assertion reports) */
    tl_client_wait_out(pid, "id=b seq=0 ", 30);
    ck_assert_msg(tl_client_running(pid), "exited before b's final slice");
    publish("b", 1, true, 0);
    ck_assert_int_eq(tl_client_wait(pid, 30), 0);
    const char *o = tl_client_out();
    ck_assert_int_eq(tl_count_lines(o, "id="), 4);
    check_line(o, "a", 1, true, 0);
    check_line(o, "b", 0, false, 0);
    check_line(o, "b", 1, true, 0);
}
END_TEST

START_TEST(test_sub_timeout_and_interrupt)
{
    const char *args[] = {"sub", "--endpoint", ep, "--timeout", "0.5", "row0", NULL};
    double t = tl_now_s();
    ck_assert_int_eq(tl_client_run(dir, args, 30), 3);
    t = tl_now_s() - t;
    ck_assert_msg(t >= 0.45 && t < 10, "timed out after %g s", t);
    ck_assert(strstr(tl_client_err(), "no slice") != NULL);
    ck_assert(strstr(tl_client_out(), "summary id=row0 received=0 missed=0 last_seq=-") != NULL);

    /* each slice restarts the timeout: 3 slices 0.6 s apart outlast a 1.5 s timeout */
    fresh_xpub();
    const char *again[] = {"sub",     "--endpoint", ep,     "--timeout", "1.5",
                           "--count", "3",          "row0", NULL};
    pid_t pid = tl_client_start(dir, again);
    wait_subscriptions(1);
    for (int i = 0; i < 3; i++) {
        usleep(600000); /* the gaps between slices are what this tests: no waiting */
        publish("row0", (uint64_t)i, false, 0);
    }
    int rc = tl_client_wait(pid, 30);
    ck_assert_msg(rc == 0, "exit %d: %s%s", rc, tl_client_out(), tl_client_err());

    /* Ctrl-C ends it with the summary */
    fresh_xpub();
    const char *forever[] = {"sub", "--endpoint", ep, "row0", NULL};
    pid = tl_client_start(dir, forever);
    wait_subscriptions(1);
    publish("row0", 7, false, 0);
    ck_assert(tl_client_wait_out(pid, "id=row0 seq=7 ", 30)); /* it has the slice */
    kill(pid, SIGINT);
    ck_assert_int_eq(tl_client_wait(pid, 30), 0);
    ck_assert(strstr(tl_client_out(), "summary id=row0 received=1 missed=0 last_seq=7") != NULL);
}
END_TEST

START_TEST(test_sub_all_latency)
{
    const char *args[] = {"sub", "--endpoint", ep,        "--all", "--count",
                          "3",   "--latency",  "--quiet", NULL};
    pid_t pid = tl_client_start(dir, args);
    wait_subscriptions(1);
    publish("x", 5, false, 40);
    publish("y", 0, false, 40);
    publish("x", 6, false, 80);
    ck_assert_int_eq(tl_client_wait(pid, 30), 0);
    const char *o = tl_client_out();
    ck_assert_int_eq(tl_count_lines(o, "id="), 0);
    const char *x = strstr(o, "summary id=x received=2 missed=0 last_seq=6 latency_ms");
    ck_assert_msg(x != NULL, "%s", o);
    ck_assert(strstr(o, "summary id=y received=1 missed=0 last_seq=0 latency_ms") != NULL);
    double p50, p90, p99, mx;
    ck_assert_int_eq(sscanf(strstr(x, "p50="), "p50=%lf p90=%lf p99=%lf max=%lf", &p50, &p90, &p99,
                            &mx),
                     4);
    ck_assert_msg(p50 >= 40 && p50 <= p90 && p90 <= p99 && p99 <= mx && mx >= 80 && mx < 5080,
                  "%s", x);
}
END_TEST

/* --shm: the same lines and files as over TCP, from pixels in shared memory; a slot being
 * rewritten (stale) and an object that is not there are missed slices, the first
 * unreadable one is said once, and the summary says how many were stale. */
START_TEST(test_sub_shm)
{
    const char *name = shm_name, *none = shm_none;
    char err[512];
    tl_shm_ring r;
    ck_assert_msg(tl_shm_ring_create(&r, name, 5, H * W * sizeof(float), err, sizeof err) == 0,
                  "%s", err);
    const char *out = path_in("shm-out");
    const char *args[] = {"sub",         "--endpoint",    ep,          "--shm", "--out", out,
                          "--every-seq", "--until-final", "--latency", "row0",  NULL};
    pid_t pid = tl_client_start(dir, args);
    char buf[64];
    int len = zmq_recv(xpub, buf, sizeof buf, 0);
    ck_assert_msg(len == 10 && !memcmp(buf, "\1shm/row0/", 10), "subscribed to %.*s", len - 1,
                  buf + 1);
    uint64_t o1 = write_slot(&r, 1, true);
    uint64_t o2 = write_slot(&r, 2, false); /* the daemon is still writing it */
    uint64_t o3 = write_slot(&r, 3, true);
    uint64_t o4 = write_slot(&r, 4, true);
    uint64_t o6 = write_slot(&r, 6, true);
    publish("row0", 1, false, 0); /* over TCP: not subscribed, not received */
    publish_shm("row0", 1, false, 25, name, o1);
    publish_shm("row0", 2, false, 25, name, o2);
    publish_shm("row0", 3, false, 25, name, o3);
    publish_shm("row0", 4, false, 25, name, o4);
    publish_shm("row0", 5, false, 25, none, TL_SHM_PAGE);
    publish_shm("row0", 6, true, 25, name, o6);
    int rc = tl_client_wait(pid, 30);
    const char *o = tl_client_out(), *e = tl_client_err();
    ck_assert_msg(rc == 0, "exit %d:\n%s%s", rc, o, e);
    ck_assert_int_eq(tl_count_lines(o, "id="), 4);
    check_line(o, "row0", 1, false, 25);
    check_line(o, "row0", 3, false, 25);
    check_line(o, "row0", 4, false, 25);
    check_line(o, "row0", 6, true, 25);
    ck_assert_msg(strstr(o, "summary id=row0 received=4 missed=2 last_seq=6 stale=1 "
                            "latency_ms p50=") != NULL,
                  "%s", o);
    ck_assert_int_eq(tl_count_lines(e, "tomolive sub: cannot read a slice from shared memory"), 1);
    ck_assert_msg(strstr(e, none) != NULL, "%s", e);
    ck_assert_msg(strstr(e, "1 slices could not be read from shared memory") != NULL, "%s", e);

    char p[1024];
    snprintf(p, sizeof p, "%s/row0.tif", out);
    check_tiff(p, 6);
    for (uint64_t seq = 1; seq <= 6; seq++) {
        snprintf(p, sizeof p, "%s/row0-%llu.tif", out, (unsigned long long)seq);
        if (seq == 2 || seq == 5)
            ck_assert_msg(access(p, F_OK) != 0, "%s exists", p);
        else
            check_tiff(p, seq);
    }
    tl_shm_ring_destroy(&r);
}
END_TEST

/* --shm --all subscribes to every slice in shared memory, "shm/", and nothing else. */
START_TEST(test_sub_shm_all)
{
    const char *name = shm_name;
    char err[512];
    tl_shm_ring r;
    ck_assert(tl_shm_ring_create(&r, name, 2, H * W * sizeof(float), err, sizeof err) == 0);
    const char *args[] = {"sub",     "--endpoint", ep,        "--shm", "--all",
                          "--count", "2",          "--quiet", NULL};
    pid_t pid = tl_client_start(dir, args);
    char buf[64];
    int len = zmq_recv(xpub, buf, sizeof buf, 0);
    ck_assert_msg(len == 5 && !memcmp(buf, "\1shm/", 5), "subscribed to %.*s", len - 1, buf + 1);
    publish("x", 1, false, 0);
    publish_shm("x", 7, false, 0, name, write_slot(&r, 7, true));
    publish_shm("y", 1, false, 0, name, write_slot(&r, 1, true));
    ck_assert_int_eq(tl_client_wait(pid, 30), 0);
    const char *o = tl_client_out();
    ck_assert_int_eq(tl_count_lines(o, "id="), 0);
    ck_assert_msg(strstr(o, "summary id=x received=1 missed=0 last_seq=7 stale=0\n"), "%s", o);
    ck_assert_msg(strstr(o, "summary id=y received=1 missed=0 last_seq=1 stale=0\n"), "%s", o);
    ck_assert_str_eq(tl_client_err(), "");
    tl_shm_ring_destroy(&r);
}
END_TEST

START_TEST(test_sub_usage)
{
    const struct {
        const char *phrase;
        const char *args[8];
    } cases[] = {
        {"--all", {"sub", NULL}},
        {"bad slice id", {"sub", "a/b", NULL}},
        {"need --out", {"sub", "--png", "row0", NULL}},
        {"bad --timeout", {"sub", "--timeout", "-1", "row0", NULL}},
        {"unknown option", {"sub", "--bogus", "row0", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(tl_client_run(dir, cases[i].args, 30), 2);
        ck_assert_msg(strstr(tl_client_err(), cases[i].phrase) != NULL, "case %zu: %s", i,
                      tl_client_err());
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sub");
    TCase *tc = tcase_create("sub");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_unchecked_fixture(tc, NULL, shm_cleanup);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_sub_lines_files_gaps);
    tcase_add_test(tc, test_sub_malformed);
    tcase_add_test(tc, test_sub_until_final);
    tcase_add_test(tc, test_sub_timeout_and_interrupt);
    tcase_add_test(tc, test_sub_all_latency);
    tcase_add_test(tc, test_sub_shm);
    tcase_add_test(tc, test_sub_shm_all);
    tcase_add_test(tc, test_sub_usage);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    snprintf(shm_name, sizeof shm_name, "/tlt-sub-%d", (int)getpid());
    snprintf(shm_none, sizeof shm_none, "/tlt-sub-%d-none", (int)getpid());
    return tl_run_suite(suite(), false);
}
