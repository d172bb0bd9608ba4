/* check_shm_slices.c — slices through shared memory (slices.shm, topic "shm/<id>/") from a
 * real tomolived on the CPU backend:
 *
 *   - one subscriber on "slice/<id>/" and one on "shm/<id>/": the shm messages arrive with
 *     no payload, name an object "/<prefix>-<daemon pid>-<id>-<n>", and their pixels (tl_shm_read) equal
 *     the TCP payload of the same seq byte for byte; status counts them (shared_memory)
 *     and no failures (shm_failed); a new slice size makes a new object and unlinks the
 *     old one; remove_slice unlinks the slice's object, and daemon shutdown the others;
 *   - `tomolive sub --shm` and `tomolive sub` side by side on one scan: the same lines
 *     (but the latency) and the same TIFF files for every seq both received;
 *   - a daemon without slices.shm: a subscriber of "shm/<id>/" gets nothing and does not
 *     make the slice wanted (nothing computed), while "slice/<id>/" still works;
 *   - a subscriber that joins over one channel after the scan ended, while the other
 *     channel wants the slice, gets it at once (no resend needed).
 *
 * Object names carry the test's pid, so parallel runs never meet in /dev/shm.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "protocol/shm.h"
#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

enum { MAXSEQ = 4096 }; /* more publications than a test scan makes */

/* ---- helpers ------------------------------------------------------------------------------ */

/* Waits until the subscriptions (TCP and shared memory alike) have reached the daemon:
 * status.slices.subscriptions, the distinct prefixes, is `subscriptions` (a slice wanted
 * over both counts once in slices.wanted, so that alone could be reached with one of its
 * two subscriptions still on the way), and status.slices.wanted is `wanted`. */
static void wait_wanted(tl_fixture *f, long long wanted, long long subscriptions)
{
    ck_assert(tl_fx_wait_status(f, "slices.subscriptions", subscriptions, 10));
    tl_fx_wait_status(f, "slices.wanted", wanted, 10);
    ck_assert_int_eq(tl_fx_status_int(f, "slices.wanted"), wanted);
}

static bool object_exists(const char *name)
{
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    ck_assert_msg(errno == ENOENT, "shm_open %s: %s", name, strerror(errno));
    return false;
}

/* What one subscriber got: the pixels of each seq (NULL: not received), and the final's. */
typedef struct {
    float *px[MAXSEQ];
    size_t bytes[MAXSEQ];
    uint64_t final_seq;
    long received, stale;
    char name[TL_PROTO_SHM_NAME_MAX + 1]; /* shm: the object of the last slice */
} got;

static void got_free(got *g)
{
    for (int i = 0; i < MAXSEQ; i++)
        free(g->px[i]);
}

/* Records one slice message: the payload over TCP, or the pixels out of shared memory. */
static void take(void *sock, bool shm, const char *prefix, tl_shm_reader *rd,
                 tl_proto_decoder *dec, got *g)
{
    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    tl_proto_error e;
    tl_proto_msg m;
    int n = tl_proto_recv(sock, parts, TL_PROTO_MAX_PARTS, 0, &e);
    ck_assert_int_eq(n, shm ? 2 : 3);
    tl_proto_err rc = tl_proto_decode_parts(dec, parts, n, TL_MSG_SLICE, &m, &e);
    ck_assert_msg(rc == TL_PROTO_OK, "%s: %s", tl_proto_err_name(rc), e.message);
    const tl_proto_slice *s = &m.slice;
    ck_assert_int_eq(s->has_shm, shm);
    ck_assert_uint_lt(s->seq, MAXSEQ);
    size_t bytes = (size_t)s->shape[0] * s->shape[1] * sizeof(float);
    float *px = malloc(bytes);
    ck_assert_ptr_nonnull(px);
    int r = 0;
    if (shm) {
        char want[128], want_id[96], err[512];
        snprintf(want, sizeof want, "/%s-", prefix);
        snprintf(want_id, sizeof want_id, "-%.*s-", (int)s->id.len, s->id.ptr);
        snprintf(g->name, sizeof g->name, "%.*s", (int)s->shm_name.len, s->shm_name.ptr);
        ck_assert_msg(strncmp(g->name, want, strlen(want)) == 0 && strstr(g->name, want_id),
                      "object %s, expected %s<pid>%s<n>", g->name, want, want_id);
        r = tl_shm_read(rd, s, px, err, sizeof err);
        ck_assert_msg(r == 0 || r == TL_SHM_STALE, "seq %llu: %s", (unsigned long long)s->seq,
                      err);
    } else {
        ck_assert_uint_eq(s->payload_len, bytes);
        memcpy(px, s->payload, bytes);
    }
    if (r == TL_SHM_STALE) { /* fell behind by slices.shm_slots: possible, but not expected */
        g->stale++;
        free(px);
    } else {
        free(g->px[s->seq]);
        g->px[s->seq] = px;
        g->bytes[s->seq] = bytes;
        g->received++;
    }
    if (s->final)
        g->final_seq = s->seq;
    tl_proto_close(parts, n);
}

/* The two subscribers of one slice, and what each has got so far. */
typedef struct {
    void *tcp, *shm;
    const char *prefix;
    tl_shm_reader rd;
    tl_proto_decoder *dec;
    got *gt, *gs;
} receiver;

/* Takes what arrives within ms milliseconds (0: what is there now). Called between frames
 * as well: a subscriber that only read once the scan was sent would find every slot but
 * the last few reused (stale), which is the daemon working as intended, not a test. */
static void pump(receiver *rc, long ms)
{
    zmq_pollitem_t it[2] = {{rc->tcp, 0, ZMQ_POLLIN, 0}, {rc->shm, 0, ZMQ_POLLIN, 0}};
    while (zmq_poll(it, 2, ms) > 0) {
        if (it[1].revents & ZMQ_POLLIN) /* the shared memory first: its slots get reused */
            take(rc->shm, true, rc->prefix, &rc->rd, rc->dec, rc->gs);
        if (it[0].revents & ZMQ_POLLIN)
            take(rc->tcp, false, rc->prefix, &rc->rd, rc->dec, rc->gt);
        ms = 0;
    }
}

/* Receives until both subscribers have had the final slice of the scan. */
static void collect(receiver *rc)
{
    for (double t0 = tl_fx_seconds();
         (!rc->gt->final_seq || !rc->gs->final_seq) && tl_fx_seconds() - t0 < 30;)
        pump(rc, 200);
    ck_assert_msg(rc->gt->final_seq && rc->gs->final_seq, "final slice over TCP %llu, shm %llu",
                  (unsigned long long)rc->gt->final_seq, (unsigned long long)rc->gs->final_seq);
}

/* A fresh pair of results for the next scan. */
static void restart(receiver *rc)
{
    rc->gt = calloc(1, sizeof *rc->gt);
    rc->gs = calloc(1, sizeof *rc->gs);
    ck_assert(rc->gt && rc->gs);
}

/* A scan of rows x cols float32 line integrals of a centred disk of radius r, and its end.
 * With rc, slices are received for pause_ms after each frame, so they are published and
 * read while it streams. */
static void send_disk_scan(tl_fixture *f, uint64_t series, uint32_t rows, uint32_t cols,
                           uint32_t count, double r, receiver *rc, long pause_ms)
{
    tl_proto_scan s = {.series = series,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = rows,
                       .cols = cols,
                       .dtype = TL_PROTO_F32,
                       .window = count,
                       .already_linear = true};
    ck_assert_int_eq(tl_fx_send_scan(f, &s), 0);
    float *img = malloc((size_t)rows * cols * sizeof *img);
    tl_fx_disk_projection(img, rows, cols, r);
    for (uint32_t k = 0; k < count; k++) {
        tl_proto_frame h = {.series = series,
                            .index = k,
                            .kind = TL_PROTO_PROJ,
                            .has_angle = true,
                            .angle = M_PI * k / count,
                            .dtype = TL_PROTO_F32,
                            .rows = rows,
                            .cols = cols};
        ck_assert_int_eq(tl_fx_send_frame(f, &h, img, (size_t)rows * cols * 4), 0);
        if (rc)
            pump(rc, pause_ms);
    }
    free(img);
    ck_assert_int_eq(tl_fx_send_end(f, series), 0);
}

/* Every seq both received has the same pixels, byte for byte; returns how many. */
static int compare(const got *gt, const got *gs)
{
    int both = 0;
    for (int i = 0; i < MAXSEQ; i++) {
        if (!gt->px[i] || !gs->px[i])
            continue;
        ck_assert_uint_eq(gt->bytes[i], gs->bytes[i]);
        ck_assert_msg(!memcmp(gt->px[i], gs->px[i], gt->bytes[i]),
                      "seq %d: the shared memory's pixels differ from the TCP payload", i);
        both++;
    }
    return both;
}

static void prefix_for(char *buf, size_t cap, const char *tag)
{
    snprintf(buf, cap, "tlt-%s-%d", tag, (int)getpid());
}

/* ---- tests -------------------------------------------------------------------------------- */

START_TEST(shm_equals_tcp)
{
    char prefix[64], set[96];
    prefix_for(prefix, sizeof prefix, "eq");
    snprintf(set, sizeof set, "slices.shm=%s", prefix);
    const char *args[] = {"--set", set, "--set", "slices.shm_slots=3", NULL};
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "shmeq", args), 0);
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"a\",\"kind\":\"row\",\"z\":1,"
                         "\"update\":{\"max_rate\":1000}}"));
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"b\",\"kind\":\"row\",\"z\":0,"
                         "\"update\":{\"max_rate\":1000}}"));
    receiver rc = {.tcp = tl_fx_subscribe(&f, "slice/a/"),
                   .shm = tl_fx_subscribe(&f, "shm/a/"),
                   .prefix = prefix,
                   .dec = tl_proto_decoder_new()};
    void *shm_b = tl_fx_subscribe(&f, "shm/b/");
    wait_wanted(&f, 2, 3); /* a over both, b through shared memory only */

    restart(&rc);
    got *gt = rc.gt, *gs = rc.gs;
    send_disk_scan(&f, 1, 3, 64, 90, 20, &rc, 2);
    collect(&rc);
    int both = compare(gt, gs);
    printf("shm vs tcp: %ld slices over TCP, %ld through shared memory (%ld stale), %d "
           "compared, final seq %llu\n",
           gt->received, gs->received, gs->stale, both, (unsigned long long)gs->final_seq);
    ck_assert_int_ge(both, 1);
    ck_assert_uint_eq(gt->final_seq, gs->final_seq);
    ck_assert_ptr_nonnull(gs->px[gs->final_seq]); /* the final one, read from its slot */
    ck_assert_uint_eq(gs->bytes[gs->final_seq], 64 * 64 * sizeof(float));
    long long shared = tl_fx_status_int(&f, "slices.shared_memory");
    ck_assert_int_ge(shared, gs->received + gs->stale);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.shm_failed"), 0);
    char name_a[sizeof gs->name];
    snprintf(name_a, sizeof name_a, "%s", gs->name);
    ck_assert(object_exists(name_a));

    /* a new size: a new object under a new name, the old one unlinked */
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"a\",\"kind\":\"row\",\"z\":1,"
                         "\"size\":[32,48],\"update\":{\"max_rate\":1000}}"));
    restart(&rc);
    got *gt2 = rc.gt, *gs2 = rc.gs;
    send_disk_scan(&f, 2, 3, 64, 30, 20, &rc, 2);
    collect(&rc);
    ck_assert_int_ge(compare(gt2, gs2), 1);
    ck_assert_uint_eq(gs2->bytes[gs2->final_seq], 32 * 48 * sizeof(float));
    ck_assert_str_ne(gs2->name, name_a);
    ck_assert(!object_exists(name_a));
    snprintf(name_a, sizeof name_a, "%s", gs2->name);
    ck_assert(object_exists(name_a));

    /* b went through shared memory only, unread until now: only its last slices are
     * still in their slots, the others stale; its object is there too */
    got *gb = calloc(1, sizeof *gb);
    tl_shm_reader rb = {0};
    zmq_pollitem_t it = {shm_b, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&it, 1, 200) > 0)
        take(shm_b, true, prefix, &rb, rc.dec, gb);
    ck_assert_int_ge(gb->received, 1);
    ck_assert_int_le(gb->received, 3); /* slices.shm_slots */
    ck_assert_int_ge(gb->stale, 1);
    char name_b[sizeof gb->name];
    snprintf(name_b, sizeof name_b, "%s", gb->name);
    ck_assert(object_exists(name_b));

    /* remove_slice unlinks a's object (b's stays); shutdown unlinks b's */
    json_decref(tl_fx_ok(&f, "remove_slice", "{\"id\":\"a\"}"));
    ck_assert(!object_exists(name_a));
    ck_assert(object_exists(name_b));
    zmq_close(rc.tcp);
    zmq_close(rc.shm);
    zmq_close(shm_b);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    ck_assert(!object_exists(name_b));
    tl_shm_reader_close(&rc.rd);
    tl_proto_decoder_free(rc.dec);
    tl_shm_reader_close(&rb);
    got *all[] = {gt, gs, gt2, gs2, gb};
    for (int i = 0; i < 5; i++) {
        got_free(all[i]);
        free(all[i]);
    }
    tl_fx_cleanup(&f);
}
END_TEST

/* The per-slice line of `tomolive sub` for seq, without its latency (which differs). */
static bool line_of(const char *out, unsigned long long seq, char *line, size_t cap)
{
    char key[64];
    snprintf(key, sizeof key, "id=a seq=%llu ", seq);
    const char *p = strstr(out, key);
    if (!p || (p != out && p[-1] != '\n'))
        return false;
    size_t n = strcspn(p, "\n");
    const char *lat = strstr(p, "latency_ms="), *kern = strstr(p, " kernel=");
    ck_assert(lat && kern && kern < p + n);
    snprintf(line, cap, "%.*s%.*s", (int)(lat - p), p, (int)(p + n - kern), kern);
    return true;
}

static char *slurp(const char *dir, const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    char *buf = malloc(1 << 20);
    *len = fread(buf, 1, 1 << 20, fp);
    buf[*len < (1 << 20) ? *len : (1 << 20) - 1] = 0;
    fclose(fp);
    return buf;
}

/* `tomolive sub --shm` beside `tomolive sub`: the same lines and the same files. */
START_TEST(sub_shm_tool)
{
    char prefix[64], set[96];
    prefix_for(prefix, sizeof prefix, "sub");
    snprintf(set, sizeof set, "slices.shm=%s", prefix);
    /* slots enough that a subscriber slowed by a loaded machine does not fall behind */
    const char *args[] = {"--set", set, "--set", "slices.shm_slots=64", NULL};
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "shmsub", args), 0);
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"a\",\"kind\":\"row\",\"z\":4,"
                         "\"update\":{\"max_rate\":1000}}"));
    /* both in the background, each leaving its exit status in a file; the scan is pushed
     * once both subscriptions have reached the daemon */
    char *out = NULL;
    ck_assert_int_eq(tl_fx_run(NULL,
                               "cd '%s' || exit 1; "
                               "{ tomolive sub --endpoint '%s' --shm --until-final --timeout 60 "
                               "--out shmv --every-seq --latency a > shm.txt 2> shm.err; "
                               "echo $? > shm.rc; } < /dev/null > /dev/null 2>&1 & "
                               "{ tomolive sub --endpoint '%s' --until-final --timeout 60 "
                               "--out tcpv --every-seq a > tcp.txt 2> tcp.err; "
                               "echo $? > tcp.rc; } < /dev/null > /dev/null 2>&1 &",
                               f.dir, f.slices, f.slices),
                     0);
    double t0 = tl_fx_seconds();
    while (tl_fx_status_int(&f, "slices.subscriptions") < 2 && tl_fx_seconds() - t0 < 30)
        usleep(20000);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.subscriptions"), 2);
    int rc = tl_fx_run(&out,
                       "tomolive push --endpoint '%s' --rows 8 --cols 64 --projections 90 "
                       "--darks 2 --flats 2 --rate 200 --quiet 2>&1",
                       f.ingest);
    ck_assert_msg(rc == 0, "push failed (%d):\n%s", rc, out);
    free(out);
    size_t len;
    char *rs = NULL, *rt = NULL;
    for (t0 = tl_fx_seconds(); tl_fx_seconds() - t0 < 90; usleep(50000)) {
        free(rs);
        free(rt);
        rs = slurp(f.dir, "shm.rc", &len);
        rt = slurp(f.dir, "tcp.rc", &len);
        if (rs && rt && strchr(rs, '\n') && strchr(rt, '\n'))
            break;
    }
    size_t ne;
    char *es = slurp(f.dir, "shm.err", &ne), *et = slurp(f.dir, "tcp.err", &ne);
    ck_assert_msg(rs && rt && !strcmp(rs, "0\n") && !strcmp(rt, "0\n"),
                  "sub --shm exit %s (%s), sub exit %s (%s)", rs ? rs : "-", es ? es : "",
                  rt ? rt : "-", et ? et : "");
    ck_assert_msg(!*es && !*et, "sub said: %s%s", es, et); /* no error */
    free(rs);
    free(rt);
    free(es);
    free(et);
    size_t ls, lt;
    char *so = slurp(f.dir, "shm.txt", &ls), *to = slurp(f.dir, "tcp.txt", &lt);
    ck_assert(so && to);
    /* the shm summary: the TCP one's keys, then stale (some of the missed) */
    const char *sum = strstr(so, "summary id=a received=");
    unsigned long long recv, missed, last, stale;
    ck_assert_msg(sum && sscanf(sum,
                                "summary id=a received=%llu missed=%llu last_seq=%llu "
                                "stale=%llu latency_ms p50=",
                                &recv, &missed, &last, &stale) == 4,
                  "%.300s", sum ? sum : so);
    ck_assert_msg(recv >= 1 && stale <= missed && recv + missed <= last,
                  "received %llu missed %llu last_seq %llu stale %llu", recv, missed, last, stale);
    ck_assert_msg(strstr(to, "summary id=a received=") && !strstr(to, "stale="), "%.300s",
                  strstr(to, "summary") ? strstr(to, "summary") : to);

    int both = 0;
    bool final_seen = false;
    for (unsigned long long seq = 1; seq < MAXSEQ; seq++) {
        char a[512], b[512];
        if (!line_of(so, seq, a, sizeof a) || !line_of(to, seq, b, sizeof b))
            continue;
        ck_assert_str_eq(a, b);
        final_seen |= strstr(a, " final") != NULL;
        char name[64];
        size_t na, nb;
        snprintf(name, sizeof name, "shmv/a-%llu.tif", seq);
        char *fa = slurp(f.dir, name, &na);
        snprintf(name, sizeof name, "tcpv/a-%llu.tif", seq);
        char *fb = slurp(f.dir, name, &nb);
        ck_assert_msg(fa && fb && na == nb && na > 0 && !memcmp(fa, fb, na), "a-%llu.tif differs",
                      seq);
        free(fa);
        free(fb);
        both++;
    }
    printf("tomolive sub --shm and over TCP: %d slices compared\n", both);
    ck_assert_int_ge(both, 1);
    ck_assert(final_seen);
    size_t na, nb;
    char *fa = slurp(f.dir, "shmv/a.tif", &na), *fb = slurp(f.dir, "tcpv/a.tif", &nb);
    ck_assert(fa && fb && na == nb && !memcmp(fa, fb, na)); /* the latest: the final one */
    free(fa);
    free(fb);
    free(so);
    free(to);
    ck_assert_int_gt(tl_fx_status_int(&f, "slices.shared_memory"), 0);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.shm_failed"), 0);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* Without slices.shm, "shm/<id>/" is just a topic nobody publishes: no slice is computed
 * for its subscriber, and nothing arrives; "slice/<id>/" works as ever. */
START_TEST(shm_off)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "shmoff", NULL), 0);
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"a\",\"kind\":\"row\",\"z\":0,"
                         "\"update\":{\"max_rate\":1000}}"));
    void *shm = tl_fx_subscribe(&f, "shm/a/");
    /* the subscription has reached the daemon (and changed nothing) */
    ck_assert(tl_fx_wait_status(&f, "slices.subscriptions", 1, 10));
    send_disk_scan(&f, 1, 2, 32, 40, 8, NULL, 0);
    ck_assert(tl_fx_wait_messages(&f, 42, 10));
    zmq_pollitem_t it = {shm, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&it, 1, 500), 0);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.wanted"), 0);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.computed"), 0);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.shared_memory"), 0);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.shm_failed"), 0);
    /* the slice is there for a TCP subscriber, which gets it at once */
    void *tcp = tl_fx_subscribe(&f, "slice/a/");
    it.socket = tcp;
    ck_assert_int_eq(zmq_poll(&it, 1, 5000), 1);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.wanted"), 1);
    it.socket = shm;
    ck_assert_int_eq(zmq_poll(&it, 1, 200), 0);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.shared_memory"), 0);
    zmq_close(shm);
    zmq_close(tcp);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A subscriber joining over one channel after the scan has ended, while the slice is
 * wanted over the other already, gets the slice at once, with no resend: the newest read-out
 * went over the other channel only, and the ended scan publishes nothing more by itself.
 * (A shared-memory viewer restarted near a scan's end used to wait for the next scan.) The
 * late read-out has the final's pixels: the window has not changed since. */
START_TEST(late_channel)
{
    char prefix[64], set[96];
    prefix_for(prefix, sizeof prefix, "late");
    snprintf(set, sizeof set, "slices.shm=%s", prefix);
    const char *args[] = {"--set", set, NULL};
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "shmlate", args), 0);
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"a\",\"kind\":\"row\",\"z\":0,"
                         "\"update\":{\"max_rate\":1000}}"));
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"b\",\"kind\":\"row\",\"z\":1,"
                         "\"update\":{\"max_rate\":1000}}"));
    receiver rc = {.tcp = tl_fx_subscribe(&f, "slice/a/"), .prefix = prefix,
                   .dec = tl_proto_decoder_new()};
    void *shm_b = tl_fx_subscribe(&f, "shm/b/");
    wait_wanted(&f, 2, 2);
    restart(&rc);
    send_disk_scan(&f, 1, 2, 32, 40, 8, NULL, 0);
    zmq_pollitem_t it = {rc.tcp, 0, ZMQ_POLLIN, 0};
    for (double t0 = tl_fx_seconds(); !rc.gt->final_seq && tl_fx_seconds() - t0 < 30;)
        if (zmq_poll(&it, 1, 200) > 0)
            take(rc.tcp, false, prefix, &rc.rd, rc.dec, rc.gt);
    ck_assert_uint_ne(rc.gt->final_seq, 0);
    got *gb = calloc(1, sizeof *gb); /* b's final goes out through shared memory */
    ck_assert_ptr_nonnull(gb);
    it.socket = shm_b;
    for (double t0 = tl_fx_seconds(); !gb->final_seq && tl_fx_seconds() - t0 < 30;)
        if (zmq_poll(&it, 1, 200) > 0)
            take(shm_b, true, prefix, &rc.rd, rc.dec, gb);
    ck_assert_uint_ne(gb->final_seq, 0);

    rc.shm = tl_fx_subscribe(&f, "shm/a/");
    wait_wanted(&f, 2, 3);
    it.socket = rc.shm;
    ck_assert_msg(zmq_poll(&it, 1, 10000) == 1, "the late shared-memory subscriber got nothing");
    take(rc.shm, true, prefix, &rc.rd, rc.dec, rc.gs);
    uint64_t late = rc.gs->final_seq ? rc.gs->final_seq : 0;
    for (int i = 0; i < MAXSEQ && !late; i++)
        if (rc.gs->px[i])
            late = (uint64_t)i;
    ck_assert_uint_gt(late, rc.gt->final_seq);
    ck_assert_mem_eq(rc.gs->px[late], rc.gt->px[rc.gt->final_seq], 32 * 32 * sizeof(float));

    /* and the other way round: b, wanted through shared memory only during the scan, gets
     * a TCP subscriber after its end */
    void *tcp_b = tl_fx_subscribe(&f, "slice/b/");
    wait_wanted(&f, 2, 4);
    it.socket = tcp_b;
    ck_assert_msg(zmq_poll(&it, 1, 10000) == 1, "the late TCP subscriber got nothing");
    zmq_close(tcp_b);
    zmq_close(shm_b);
    zmq_close(rc.tcp);
    zmq_close(rc.shm);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_shm_reader_close(&rc.rd);
    tl_proto_decoder_free(rc.dec);
    got_free(rc.gt);
    got_free(rc.gs);
    free(rc.gt);
    free(rc.gs);
    got_free(gb);
    free(gb);
    tl_fx_cleanup(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_slices");
    TCase *t = tcase_create("daemon");
    tcase_set_timeout(t, 180);
    tcase_add_test(t, shm_equals_tcp);
    tcase_add_test(t, sub_shm_tool);
    tcase_add_test(t, shm_off);
    tcase_add_test(t, late_channel);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
