/* check_ipc.c — frames in a producer's GPU memory (CUDA IPC, PROTOCOL.md §8.4) through a real
 * tomolived on the CUDA backend, with the producer in another process.
 *
 * The producer is this very program, re-executed with --producer (a fresh process: CUDA
 * does not survive fork, and a producer must be a process of its own for IPC to mean
 * anything). It allocates a ring of frame slots with gpu/ipc.h, binds a PULL socket for
 * releases, and sends a scan, header-only frames and an end, checking every release it gets.
 * Its exit status tells the test what it saw. Cases:
 *   frames    — a scan read from GPU memory equals the same scan sent as payloads, every
 *               frame is released, the buffers close at the end;
 *   rejects   — a forged handle, a stale one (of a producer that died), a device the daemon
 *               does not see and a size larger than the allocation are each refused with
 *               their code, counted, and released with ok false, while good frames around
 *               them are used;
 *   killed    — a producer killed mid-scan: the daemon notices, ends the series, closes its
 *               mappings, and serves the next producer.
 * Skips (77) without a usable CUDA device.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "gpu/engine.h"
#include "gpu/ipc.h"
#include "protocol/protocol.h"
#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

#define ROWS 4
#define COLS 96
#define WINDOW 60
#define FRAMES 120
#define SLOTS 8
#define PITCH (COLS * 2 + 64) /* padded rows: the pitch path is exercised */
#define KILL_AFTER 30         /* frames the killed producer sends */
#define RELEASE_TIMEOUT_MS 10000

static const char *self_path;

#define SCALE 1000.0 /* u16 line integrals: the disk's reconstruction is SCALE */

/* The u16 frame of every index: the line integrals of a centred disk (already linear), so
 * that the reconstruction is a disk whichever the angle. */
static void make_frame(uint16_t *px)
{
    float p[ROWS * COLS];
    tl_fx_disk_projection(p, ROWS, COLS, 30);
    for (int i = 0; i < ROWS * COLS; i++)
        px[i] = (uint16_t)lrint(SCALE * p[i]);
}

static tl_proto_scan scan_msg(uint64_t series, const char *release)
{
    tl_proto_scan s = {.series = series,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = ROWS,
                       .cols = COLS,
                       .dtype = TL_PROTO_U16,
                       .window = WINDOW,
                       .has_angles = true,
                       .angle_start = 0,
                       .angle_step = M_PI / WINDOW,
                       .already_linear = true};
    if (release)
        s.release = (tl_proto_str){release, strlen(release)};
    return s;
}

/* ---- the producer (a process of its own) ----------------------------------------------- */

typedef struct {
    void *zctx, *push, *pull;
    tl_proto_decoder *dec;
    int device;
    char uuid[TL_IPC_UUID_LEN + 1];
    uint8_t handle[TL_IPC_HANDLE_BYTES];
    char *ring;
    size_t ring_bytes;
    bool busy[SLOTS];
    int outstanding;
} producer;

static int send_header(producer *p, int (*enc)(msgpack_sbuffer *, const void *), const void *m)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc = enc(&sb, m) == 0 && zmq_send(p->push, sb.data, sb.size, 0) == (int)sb.size ? 0 : -1;
    msgpack_sbuffer_destroy(&sb);
    return rc;
}
static int enc_scan(msgpack_sbuffer *b, const void *m)
{
    return tl_proto_encode_scan(b, m);
}
static int enc_frame(msgpack_sbuffer *b, const void *m)
{
    return tl_proto_encode_frame(b, m);
}
static int enc_end(msgpack_sbuffer *b, const void *m)
{
    return tl_proto_encode_end(b, m);
}

/* Waits for one release; returns 1 and fills *r (its message copied into msg), 0 on
 * timeout. */
static int next_release(producer *p, tl_proto_release *r, char *msg, size_t msglen)
{
    zmq_msg_t part;
    zmq_msg_init(&part);
    zmq_pollitem_t it = {p->pull, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, RELEASE_TIMEOUT_MS) != 1 || zmq_msg_recv(&part, p->pull, 0) < 0) {
        zmq_msg_close(&part);
        return 0;
    }
    tl_proto_msg m;
    tl_proto_error err;
    int ok = tl_proto_decode(p->dec, zmq_msg_data(&part), zmq_msg_size(&part), TL_MSG_RELEASE, &m,
                             &err) == TL_PROTO_OK;
    if (ok) {
        *r = m.release;
        snprintf(msg, msglen, "%.*s", (int)r->message.len, r->message.ptr ? r->message.ptr : "");
        r->message = (tl_proto_str){msg, strlen(msg)};
    }
    zmq_msg_close(&part);
    return ok;
}

/* A release that must be ok (the ring's slot comes back). */
static int take_release(producer *p)
{
    tl_proto_release r;
    char msg[512];
    if (!next_release(p, &r, msg, sizeof msg)) {
        fprintf(stderr, "producer: no release within %d ms\n", RELEASE_TIMEOUT_MS);
        return -1;
    }
    if (!r.ok || r.slot >= SLOTS || !p->busy[r.slot]) {
        fprintf(stderr, "producer: unexpected release of frame %" PRIu64 " slot %u ok %d: %s\n",
                r.index, r.slot, r.ok, msg);
        return -1;
    }
    p->busy[r.slot] = false;
    p->outstanding--;
    return 0;
}

static tl_proto_frame ipc_frame(producer *p, uint64_t series, uint64_t index, uint32_t slot)
{
    tl_proto_frame f = {.series = series,
                        .index = index,
                        .kind = TL_PROTO_PROJ,
                        .dtype = TL_PROTO_U16,
                        .rows = ROWS,
                        .cols = COLS,
                        .has_ipc = true};
    f.ipc = (tl_proto_ipc){.handle = p->handle,
                           .buffer = 0,
                           .size = p->ring_bytes,
                           .offset = (uint64_t)slot * ROWS * PITCH,
                           .pitch = PITCH,
                           .device = {p->uuid, strlen(p->uuid)},
                           .slot = slot};
    return f;
}

/* Sends frames [0, n) of series through the ring; after kill_after frames (when > 0) it
 * writes its ring's handle to handle_path and kills itself. Returns 0 when every release was
 * ok. */
static int produce_frames(producer *p, uint64_t series, int n, int kill_after,
                          const char *handle_path)
{
    uint16_t px[ROWS * COLS];
    make_frame(px);
    char why[256];
    for (int i = 0; i < n; i++) {
        while (p->outstanding == SLOTS)
            if (take_release(p) != 0)
                return 1;
        uint32_t slot = 0;
        while (p->busy[slot])
            slot++;
        for (int r = 0; r < ROWS; r++) /* written on the GPU before it is announced */
            if (tl_ipc_copy(p->device, p->ring + (size_t)slot * ROWS * PITCH + (size_t)r * PITCH,
                            px + r * COLS, COLS * 2, why, sizeof why) != TL_OK) {
                fprintf(stderr, "producer: %s\n", why);
                return 1;
            }
        tl_proto_frame f = ipc_frame(p, series, (uint64_t)i, slot);
        if (send_header(p, enc_frame, &f) != 0)
            return 1;
        p->busy[slot] = true;
        p->outstanding++;
        if (kill_after > 0 && i + 1 == kill_after) {
            FILE *hf = fopen(handle_path, "wb");
            if (hf) {
                fwrite(p->handle, 1, sizeof p->handle, hf);
                fclose(hf);
            }
            raise(SIGKILL); /* with frames in flight, no end, handles still exported */
        }
    }
    while (p->outstanding > 0)
        if (take_release(p) != 0)
            return 1;
    return 0;
}

/* The bad frames of the rejects case, each followed by its expected release. */
static int expect_reject(producer *p, tl_proto_frame *f, tl_proto_err code)
{
    if (send_header(p, enc_frame, f) != 0)
        return 1;
    tl_proto_release r;
    char msg[512];
    if (!next_release(p, &r, msg, sizeof msg) || r.ok || r.code != code || r.index != f->index) {
        fprintf(stderr, "producer: frame %" PRIu64 ": expected %s, got ok %d code %s: %s\n",
                f->index, tl_proto_err_name(code), r.ok, tl_proto_err_name(r.code), msg);
        return 1;
    }
    fprintf(stderr, "producer: frame %" PRIu64 " refused as expected: %s: %s\n", f->index,
            tl_proto_err_name(r.code), msg);
    return 0;
}

static int produce_rejects(producer *p, uint64_t series, const char *stale_path)
{
    int bad = produce_frames(p, series, 2, 0, NULL); /* frames 0, 1: good */
    tl_proto_frame f = ipc_frame(p, series, 2, 0);
    uint8_t forged[TL_IPC_HANDLE_BYTES];
    for (int i = 0; i < TL_IPC_HANDLE_BYTES; i++)
        forged[i] = (uint8_t)(i * 37 + 11);
    f.ipc.handle = forged;
    f.ipc.buffer = 5;
    bad |= expect_reject(p, &f, TL_PROTO_E_BAD_ARG);

    /* the ring of a producer that was killed: a stale handle. (A handle of memory that a
     * live producer freed may still open — the driver can keep the memory — so only a
     * dead producer's handle is reliably stale.) */
    uint8_t stale[TL_IPC_HANDLE_BYTES];
    FILE *hf = fopen(stale_path, "rb");
    if (!hf || fread(stale, 1, sizeof stale, hf) != sizeof stale)
        return 1;
    fclose(hf);
    f = ipc_frame(p, series, 3, 0);
    f.ipc.handle = stale;
    f.ipc.buffer = 6;
    bad |= expect_reject(p, &f, TL_PROTO_E_BAD_ARG);

    const char *nowhere = "GPU-00000000-0000-0000-0000-000000000000";
    f = ipc_frame(p, series, 4, 0);
    f.ipc.device = (tl_proto_str){nowhere, strlen(nowhere)};
    bad |= expect_reject(p, &f, TL_PROTO_E_RESOURCE);

    /* a claim larger than the allocation, with the frame beyond its real end */
    f = ipc_frame(p, series, 5, 0);
    f.ipc.size = p->ring_bytes * 4;
    f.ipc.offset = p->ring_bytes * 2;
    bad |= expect_reject(p, &f, TL_PROTO_E_RANGE);

    /* the ring still works after all that */
    for (int i = 6; i < 8 && !bad; i++) {
        f = ipc_frame(p, series, (uint64_t)i, 0);
        if (send_header(p, enc_frame, &f) != 0)
            return 1;
        p->busy[0] = true;
        p->outstanding++;
        bad |= take_release(p);
    }
    return bad;
}

/* check_ipc --producer INGEST RELEASE SERIES MODE HANDLE_FILE, MODE frames | rejects |
 * killed: the killed producer writes its handle to HANDLE_FILE, the rejects one reads it */
static int producer_main(char **argv)
{
    producer p = {0};
    const char *ingest = argv[2], *release = argv[3], *mode = argv[5], *hfile = argv[6];
    uint64_t series = strtoull(argv[4], NULL, 10);
    char why[256];
    p.ring_bytes = (size_t)SLOTS * ROWS * PITCH;
    if (tl_ipc_device_uuid(0, p.uuid, why, sizeof why) != TL_OK ||
        tl_ipc_alloc(0, p.ring_bytes, (void **)&p.ring, p.handle, why, sizeof why) != TL_OK) {
        fprintf(stderr, "producer: %s\n", why);
        return 2;
    }
    int linger = 2000;
    p.zctx = zmq_ctx_new();
    p.push = zmq_socket(p.zctx, ZMQ_PUSH);
    p.pull = zmq_socket(p.zctx, ZMQ_PULL);
    p.dec = tl_proto_decoder_new();
    zmq_setsockopt(p.push, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(p.pull, release) != 0 || zmq_connect(p.push, ingest) != 0) {
        fprintf(stderr, "producer: sockets: %s\n", zmq_strerror(zmq_errno()));
        return 2;
    }
    tl_proto_scan s = scan_msg(series, release);
    int rc = send_header(&p, enc_scan, &s) != 0;
    if (strcmp(mode, "rejects") == 0)
        rc |= produce_rejects(&p, series, hfile);
    else
        rc |= produce_frames(&p, series, FRAMES, strcmp(mode, "killed") == 0 ? KILL_AFTER : 0,
                             hfile);
    tl_proto_end e = {.series = series};
    rc |= send_header(&p, enc_end, &e) != 0;
    zmq_close(p.push);
    zmq_close(p.pull);
    zmq_ctx_term(p.zctx);
    tl_proto_decoder_free(p.dec);
    tl_ipc_free(0, p.ring);
    return rc;
}

/* ---- the test side ---------------------------------------------------------------------- */

/* Runs the producer to its end; its wait status. */
static int run_producer(tl_fixture *f, uint64_t series, const char *mode)
{
    char release[600], s[32], hfile[600];
    snprintf(release, sizeof release, "ipc://%s/release-%" PRIu64, f->dir, series);
    snprintf(hfile, sizeof hfile, "%s/killed-handle", f->dir);
    snprintf(s, sizeof s, "%" PRIu64, series);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self_path, self_path, "--producer", f->ingest, release, s, mode, hfile,
              (char *)NULL);
        _exit(127);
    }
    ck_assert_int_gt(pid, 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return status;
}

static void start(tl_fixture *f, const char *tag)
{
    const char *args[] = {"--backend", "cuda", NULL};
    ck_assert_int_eq(tl_fx_start(f, tag, args), 0);
}

/* The next final slice on sub (ROWS-independent: a COLS x COLS row slice). */
static void final_slice(void *sub, float *out)
{
    tl_proto_decoder *dec = tl_proto_decoder_new();
    double t0 = tl_fx_seconds();
    bool got = false;
    while (!got && tl_fx_seconds() - t0 < 30) {
        zmq_msg_t parts[TL_PROTO_MAX_PARTS];
        tl_proto_error err;
        int n = tl_proto_recv(sub, parts, TL_PROTO_MAX_PARTS, 0, &err);
        if (n < 0)
            continue;
        tl_proto_msg m;
        if (tl_proto_decode_parts(dec, parts, n, TL_MSG_SLICE, &m, &err) == TL_PROTO_OK &&
            m.slice.final) {
            ck_assert_uint_eq(m.slice.payload_len, sizeof(float) * COLS * COLS);
            memcpy(out, m.slice.payload, m.slice.payload_len);
            got = true;
        }
        tl_proto_close(parts, n);
    }
    tl_proto_decoder_free(dec);
    ck_assert_msg(got, "no final slice within 30 s");
}

static void *subscribe(tl_fixture *f)
{
    void *sub = zmq_socket(f->zctx, ZMQ_SUB);
    int timeout = 1000;
    zmq_setsockopt(sub, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq(zmq_connect(sub, f->slices), 0);
    ck_assert_int_eq(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0), 0);
    json_decref(tl_fx_ok(f, "set_slice", "{\"id\":\"row\",\"kind\":\"row\",\"z\":1}"));
    ck_assert(tl_fx_wait_status(f, "slices.wanted", 1, 10));
    return sub;
}

START_TEST(ipc_frames)
{
    tl_fixture f;
    start(&f, "ipc-frames");
    void *sub = subscribe(&f);
    int status = run_producer(&f, 1, "frames");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "producer status %d", status);
    static float gpu[COLS * COLS], host[COLS * COLS];
    final_slice(sub, gpu);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.frames"), FRAMES);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.releases"), FRAMES);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.buffers_opened"), 1);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.buffers_open"), 0); /* closed at end */
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.proj"), FRAMES);

    /* the same scan as payloads: the same slice */
    tl_proto_scan s = scan_msg(2, NULL);
    tl_fx_send_scan(&f, &s);
    uint16_t px[ROWS * COLS];
    make_frame(px);
    tl_proto_frame h = {.series = 2,
                        .kind = TL_PROTO_PROJ,
                        .dtype = TL_PROTO_U16,
                        .rows = ROWS,
                        .cols = COLS};
    for (int i = 0; i < FRAMES; i++) {
        h.index = (uint64_t)i;
        tl_fx_send_frame(&f, &h, px, sizeof px);
    }
    tl_fx_send_end(&f, 2);
    final_slice(sub, host);
    double num = 0, den = 0, centre = host[(COLS / 2) * COLS + COLS / 2];
    for (int i = 0; i < COLS * COLS; i++) {
        num += ((double)gpu[i] - host[i]) * ((double)gpu[i] - host[i]);
        den += (double)host[i] * host[i];
    }
    ck_assert_msg(fabs(centre - SCALE) < 0.05 * SCALE, "the disk is not there (centre %g)",
                  centre);
    ck_assert_msg(sqrt(num / den) < 1e-6, "GPU-memory and payload slices differ: rel L2 %g",
                  sqrt(num / den));
    zmq_close(sub);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

START_TEST(ipc_rejects)
{
    tl_fixture f;
    start(&f, "ipc-rejects");
    int status = run_producer(&f, 2, "killed"); /* leaves a stale handle behind */
    ck_assert_msg(WIFSIGNALED(status), "status %d", status);
    ck_assert(tl_fx_wait_status(&f, "gpu_frames.producers_lost", 1, 15));
    long long frames = tl_fx_status_int(&f, "gpu_frames.frames");
    long long releases = tl_fx_status_int(&f, "gpu_frames.releases");
    status = run_producer(&f, 3, "rejects");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "producer status %d (its stderr says which release was wrong)", status);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.gpu_memory"), 4);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.frames"), frames + 4);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.releases"), releases + 8);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.buffers_open"), 0);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

START_TEST(ipc_killed)
{
    tl_fixture f;
    start(&f, "ipc-killed");
    int status = run_producer(&f, 4, "killed");
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %d", status);
    ck_assert_msg(tl_fx_wait_status(&f, "gpu_frames.producers_lost", 1, 15),
                  "the daemon did not notice the producer's death");
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.buffers_open"), 0);
    long long used = tl_fx_status_int(&f, "gpu_frames.frames");
    ck_assert_msg(used >= 1 && used <= KILL_AFTER, "frames used %lld", used);
    char *log = tl_fx_log(&f);
    ck_assert_ptr_nonnull(strstr(log, "producer_gone"));
    ck_assert_ptr_nonnull(strstr(log, "reason=producer_gone"));
    free(log);
    /* the next producer is served as if nothing had happened */
    status = run_producer(&f, 5, "frames");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "producer status %d", status);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.frames"), used + FRAMES);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.producers_lost"), 1);
    ck_assert(tl_fx_wait_status(&f, "gpu_frames.buffers_open", 0, 10));
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc == 7 && strcmp(argv[1], "--producer") == 0)
        return producer_main(argv);
    char why[256] = "";
    if (!tl_backend_available(TL_BACKEND_CUDA, why, sizeof why)) {
        printf("SKIP: no usable CUDA device: %s\n", why);
        return 77;
    }
    Suite *s = suite_create("ipc");
    TCase *t = tcase_create("ipc");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, ipc_frames);
    tcase_add_test(t, ipc_rejects);
    tcase_add_test(t, ipc_killed);
    suite_add_tcase(s, t);
    return tl_run_suite(s, true);
}
