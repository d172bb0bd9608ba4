/* check_daemon.c — tomolived end to end on the CPU backend (daemon issue, acceptance):
 * control commands and their errors, scans and counted rejections, a barrage of malformed
 * messages on ingest and control, subscription-driven computation, a subscriber that never
 * reads, systemd notifications, SIGHUP reload and SIGTERM. The phantom scan through the
 * real tools is in check_e2e.c.
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "gpu/engine.h"
#include "tests/daemon_fixture.h"
#include "tests/notify_listener.h"
#include "tests/testutil.h"

static long long code_of(json_t *r)
{
    return json_integer_value(json_object_get(r, "code"));
}

/* Sends a request and asserts the error code of its reply. */
static void expect_error(tl_fixture *f, const char *cmd, const char *args, tl_proto_err code)
{
    json_t *r = tl_fx_request(f, cmd, args);
    ck_assert_msg(r != NULL, "%s: no reply", cmd);
    ck_assert_msg(!json_is_true(json_object_get(r, "ok")) && code_of(r) == code,
                  "%s %s: expected %s, got %s", cmd, args ? args : "", tl_proto_err_name(code),
                  json_dumps(r, 0));
    json_decref(r);
}

/* A scan of rows x cols float32 line integrals (a centred disk of density 1, radius r),
 * frames paced pause_us apart. */
static void send_disk_scan_paced(tl_fixture *f, uint64_t series, uint32_t rows, uint32_t cols,
                                 uint32_t window, uint32_t count, double r, unsigned pause_us)
{
    tl_proto_scan s = {.series = series,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = rows,
                       .cols = cols,
                       .dtype = TL_PROTO_F32,
                       .window = window,
                       .already_linear = true};
    ck_assert_int_eq(tl_fx_send_scan(f, &s), 0);
    float *img = malloc((size_t)rows * cols * sizeof *img);
    tl_fx_disk_projection(img, rows, cols, r);
    for (uint32_t k = 0; k < count; k++) {
        tl_proto_frame h = {.series = series,
                            .index = k,
                            .kind = TL_PROTO_PROJ,
                            .has_angle = true,
                            .angle = M_PI * k / window,
                            .dtype = TL_PROTO_F32,
                            .rows = rows,
                            .cols = cols};
        ck_assert_int_eq(tl_fx_send_frame(f, &h, img, (size_t)rows * cols * 4), 0);
        if (pause_us) /* the pace of a camera: part of what the caller tests, no waiting */
            usleep(pause_us);
    }
    free(img);
}

static void send_disk_scan(tl_fixture *f, uint64_t series, uint32_t rows, uint32_t cols,
                           uint32_t window, uint32_t count, double r)
{
    send_disk_scan_paced(f, series, rows, cols, window, count, r, 0);
}

START_TEST(control_commands)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "ctl", NULL), 0);
    json_t *st = tl_fx_ok(&f, "status", NULL);
    ck_assert(json_is_null(json_object_get(st, "scan")));
    ck_assert_int_eq(json_integer_value(json_object_get(st, "protocol")), 1);
    json_decref(st);
    expect_error(&f, "frobnicate", NULL, TL_PROTO_E_UNKNOWN_CMD);
    expect_error(&f, "set_slice", NULL, TL_PROTO_E_BAD_ARG);
    expect_error(&f, "set_slice", "{\"id\":\"a/b\",\"kind\":\"row\",\"z\":1}", TL_PROTO_E_RANGE);
    expect_error(&f, "set_slice", "{\"id\":\"a\",\"z\":1}", TL_PROTO_E_BAD_ARG);
    expect_error(&f, "set_slice", "{\"id\":\"a\",\"kind\":\"cube\"}", TL_PROTO_E_KIND);
    /* positions outside any volume, or beyond a float (#30: 1e308 became inf) */
    expect_error(&f, "set_slice", "{\"id\":\"a\",\"kind\":\"row\",\"z\":1e308}", TL_PROTO_E_RANGE);
    expect_error(&f, "set_slice",
                 "{\"id\":\"a\",\"kind\":\"ortho\",\"axis\":\"x\",\"position\":-1e300}",
                 TL_PROTO_E_RANGE);
    expect_error(&f, "set_slice", "{\"id\":\"a\",\"kind\":\"row\"}", TL_PROTO_E_BAD_ARG);
    expect_error(&f, "set_slice", "{\"id\":\"a\",\"kind\":\"row\",\"z\":\"3\"}",
                 TL_PROTO_E_KEY_TYPE);
    expect_error(&f, "set_slice",
                 "{\"id\":\"a\",\"kind\":\"ortho\",\"axis\":\"w\",\"position\":0}",
                 TL_PROTO_E_BAD_ARG);
    expect_error(&f, "set_slice",
                 "{\"id\":\"a\",\"kind\":\"plane\",\"orientation\":[1,0,0,0,1,0,0,0,0]}",
                 TL_PROTO_E_BAD_ARG); /* no size */
    expect_error(&f, "set_slice",
                 "{\"id\":\"a\",\"kind\":\"row\",\"z\":1,\"update\":{\"every\":0}}",
                 TL_PROTO_E_BAD_ARG);
    expect_error(&f, "set_slice", "{\"id\":\"a\",\"kind\":\"row\",\"z\":1,\"scale\":-1}",
                 TL_PROTO_E_BAD_ARG);
    expect_error(&f, "set_param", "{\"name\":\"center\",\"value\":3}", TL_PROTO_E_STATE);
    expect_error(&f, "set_param", "{\"name\":\"gain\",\"value\":3}", TL_PROTO_E_BAD_ARG);
    expect_error(&f, "remove_slice", "{\"id\":\"nope\"}", TL_PROTO_E_NOT_FOUND);
    expect_error(&f, "reset", NULL, TL_PROTO_E_STATE);

    json_t *r = tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"r\",\"kind\":\"row\",\"z\":3,\"update\":{\"every\":5}}");
    ck_assert_str_eq(json_string_value(json_object_get(r, "topic")), "slice/r/");
    ck_assert(json_is_null(json_object_get(r, "shape"))); /* no scan yet: size from the scan */
    json_decref(r);
    send_disk_scan(&f, 1, 8, 32, 30, 30, 10);
    ck_assert(tl_fx_wait_messages(&f, 31, 10));
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.held"), 30);
    r = tl_fx_ok(&f, "list_slices", NULL);
    ck_assert_int_eq(json_array_size(r), 1);
    json_t *sl = json_array_get(r, 0);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(sl, "shape"), 0)), 32);
    ck_assert_int_eq(json_array_size(json_object_get(sl, "orientation")), 9);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(sl, "update"), "every")),
                     5);
    json_decref(r);
    /* positions and a centre outside this scan's volume (8 rows, 32 columns) are refused */
    expect_error(&f, "set_slice", "{\"id\":\"r\",\"kind\":\"row\",\"z\":9}", TL_PROTO_E_RANGE);
    expect_error(&f, "set_slice",
                 "{\"id\":\"r\",\"kind\":\"ortho\",\"axis\":\"y\",\"position\":40}",
                 TL_PROTO_E_RANGE);
    expect_error(&f, "set_slice",
                 "{\"id\":\"r\",\"kind\":\"plane\",\"size\":[4,4],"
                 "\"orientation\":[4,0,0,0,4,0,100,0,3]}",
                 TL_PROTO_E_RANGE);
    expect_error(&f, "set_param", "{\"name\":\"center\",\"value\":1e308}", TL_PROTO_E_RANGE);
    expect_error(&f, "set_param", "{\"name\":\"center\",\"value\":-3}", TL_PROTO_E_RANGE);
    r = tl_fx_ok(&f, "list_slices", NULL);
    ck_assert_int_eq(json_array_size(r), 1); /* the refusals changed nothing */
    json_decref(r);
    /* a slice that does not fit the engine is refused and changes nothing */
    expect_error(&f, "set_slice", "{\"id\":\"r\",\"kind\":\"row\",\"z\":3,\"size\":[0,5]}",
                 TL_PROTO_E_RANGE);
    json_decref(tl_fx_ok(&f, "set_param", "{\"name\":\"center\",\"value\":16.5}"));
    r = tl_fx_ok(&f, "status", NULL);
    ck_assert(fabs(json_real_value(json_object_get(json_object_get(r, "scan"), "center")) - 16.5) <
              1e-9);
    json_decref(r);
    json_decref(tl_fx_ok(&f, "set_param", "{\"name\":\"filter\",\"value\":\"hann\"}"));
    expect_error(&f, "set_param", "{\"name\":\"filter\",\"value\":\"gauss\"}", TL_PROTO_E_BAD_ARG);
    json_decref(tl_fx_ok(&f, "reset", NULL));
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.held"), 0);
    json_decref(tl_fx_ok(&f, "remove_slice", "{\"id\":\"r\"}"));
    r = tl_fx_ok(&f, "list_slices", NULL);
    ck_assert_int_eq(json_array_size(r), 0);
    json_decref(r);
    r = tl_fx_ok(&f, "commands", NULL);
    ck_assert_int_ge(json_array_size(r), 6);
    json_decref(r);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A request broken after its id (cmd missing, of the wrong type or too long; args nil or an
 * array) is answered with that id and the decoder's code (PROTOCOL.md §7, §9.2), so a
 * client with several requests in flight can match the error. */
START_TEST(error_replies_keep_ids)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "ids", NULL), 0);
    enum { NO_CMD, CMD_INT, CMD_LONG, ARGS_NIL, ARGS_ARRAY, NCASES };
    static const tl_proto_err want[NCASES] = {TL_PROTO_E_MISSING, TL_PROTO_E_KEY_TYPE,
                                              TL_PROTO_E_RANGE, TL_PROTO_E_KEY_TYPE,
                                              TL_PROTO_E_KEY_TYPE};
    for (int c = 0; c < NCASES; c++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        uint64_t id = 1000 + (uint64_t)c;
        msgpack_pack_map(&pk, c == NO_CMD ? 3 : c <= CMD_LONG ? 4 : 5);
        msgpack_pack_str_with_body(&pk, "v", 1);
        msgpack_pack_uint64(&pk, 1);
        msgpack_pack_str_with_body(&pk, "type", 4);
        msgpack_pack_str_with_body(&pk, "req", 3);
        msgpack_pack_str_with_body(&pk, "id", 2);
        msgpack_pack_uint64(&pk, id);
        if (c != NO_CMD) {
            msgpack_pack_str_with_body(&pk, "cmd", 3);
            if (c == CMD_INT)
                msgpack_pack_int(&pk, 7);
            else if (c == CMD_LONG) {
                char name[100];
                memset(name, 'x', sizeof name);
                msgpack_pack_str_with_body(&pk, name, sizeof name);
            } else
                msgpack_pack_str_with_body(&pk, "status", 6);
        }
        if (c == ARGS_NIL || c == ARGS_ARRAY) {
            msgpack_pack_str_with_body(&pk, "args", 4);
            if (c == ARGS_NIL)
                msgpack_pack_nil(&pk);
            else
                msgpack_pack_array(&pk, 0);
        }
        ck_assert_int_eq(zmq_send(f.ctl, sb.data, sb.size, 0), (int)sb.size);
        msgpack_sbuffer_destroy(&sb);
        zmq_pollitem_t it = {f.ctl, 0, ZMQ_POLLIN, 0};
        ck_assert_msg(zmq_poll(&it, 1, 10000) == 1, "case %d: no reply", c);
        zmq_msg_t m;
        zmq_msg_init(&m);
        ck_assert_int_ge(zmq_msg_recv(&m, f.ctl, 0), 0);
        tl_proto_msg rep;
        tl_proto_error err;
        ck_assert_int_eq(tl_proto_decode(f.dec, zmq_msg_data(&m), zmq_msg_size(&m), TL_MSG_REP,
                                         &rep, &err),
                         TL_PROTO_OK);
        ck_assert_msg(rep.rep.id == id, "case %d: reply id %llu, want %llu", c,
                      (unsigned long long)rep.rep.id, (unsigned long long)id);
        ck_assert(!rep.rep.ok);
        ck_assert_msg(rep.rep.code == want[c], "case %d: %s, want %s", c,
                      tl_proto_err_name(rep.rep.code), tl_proto_err_name(want[c]));
        zmq_msg_close(&m);
    }
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A slice defined before a scan (inside the largest detector) that the scan's volume does
 * not hold is kept, said in the log, and not computed. */
START_TEST(slice_outside_the_scan_not_served)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "outside", NULL), 0);
    json_decref(
        tl_fx_ok(&f, "set_slice", "{\"id\":\"far\",\"kind\":\"row\",\"z\":100,\"pin\":true}"));
    send_disk_scan(&f, 1, 8, 32, 30, 30, 10);
    ck_assert(tl_fx_wait_messages(&f, 31, 10));
    ck_assert(tl_fx_wait_log(&f, "event=slice_not_served id=far", 10));
    json_t *r = tl_fx_ok(&f, "list_slices", NULL);
    ck_assert_int_eq(json_array_size(r), 1);
    ck_assert(json_is_null(json_object_get(json_array_get(r, 0), "shape")));
    json_decref(r);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.computed"), 0);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

START_TEST(scans_and_rejections)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "scans", NULL), 0);
    uint16_t px[4 * 16];
    for (int i = 0; i < 64; i++)
        px[i] = (uint16_t)(1000 + i);
    tl_proto_frame h = {.series = 1,
                        .index = 0,
                        .kind = TL_PROTO_PROJ,
                        .has_angle = true,
                        .dtype = TL_PROTO_U16,
                        .rows = 4,
                        .cols = 16};
    long long sent = 0;
    tl_fx_send_frame(&f, &h, px, sizeof px), sent++; /* no scan yet */
    tl_proto_scan s = {.series = 1,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = 4,
                       .cols = 16,
                       .dtype = TL_PROTO_U16,
                       .window = 10};
    tl_fx_send_scan(&f, &s), sent++;
    for (int k = 0; k < 5; k++) {
        h.index = (uint64_t)k;
        h.angle = 0.1 * k;
        tl_fx_send_frame(&f, &h, px, sizeof px), sent++;
    }
    tl_fx_send_frame(&f, &h, px, sizeof px), sent++; /* duplicate index 4 */
    h.series = 2;
    tl_fx_send_frame(&f, &h, px, sizeof px), sent++; /* another series */
    h.series = 1;
    h.index = 7;
    h.cols = 8;
    tl_fx_send_frame(&f, &h, px, 4 * 8 * 2), sent++; /* shape */
    h.cols = 16;
    h.has_angle = false;
    tl_fx_send_frame(&f, &h, px, sizeof px), sent++; /* no angle, no schedule */
    h.has_angle = true;
    h.index = 20;
    tl_fx_send_frame(&f, &h, px, sizeof px), sent++; /* moves the window to 11..20 */
    h.index = 3;
    tl_fx_send_frame(&f, &h, px, sizeof px), sent++; /* stale */
    tl_fx_send_end(&f, 1), sent++;
    h.index = 21;
    tl_fx_send_frame(&f, &h, px, sizeof px), sent++; /* after the end */
    ck_assert(tl_fx_wait_messages(&f, sent, 10));
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.proj"), 6);
    const char *why[] = {"no_scan", "duplicate", "series", "shape", "angle", "stale", "finished"};
    for (int i = 0; i < 7; i++) {
        char path[64];
        snprintf(path, sizeof path, "frames.rejected.%s", why[i]);
        ck_assert_msg(tl_fx_status_int(&f, path) == 1, "%s", path);
    }
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.missing"), 9); /* 12..19 and 11 */

    /* a new scan of another shape replaces the old one; angles from its schedule */
    tl_proto_scan s2 = {.series = 2,
                        .geometry = TL_PROTO_PARALLEL,
                        .rows = 6,
                        .cols = 24,
                        .dtype = TL_PROTO_F32,
                        .window = 4,
                        .has_angles = true,
                        .angle_start = 0,
                        .angle_step = M_PI / 4,
                        .already_linear = true};
    tl_fx_send_scan(&f, &s2), sent++;
    float fpx[6 * 24] = {0};
    tl_proto_frame h2 = {.series = 2,
                         .kind = TL_PROTO_PROJ,
                         .dtype = TL_PROTO_F32,
                         .rows = 6,
                         .cols = 24};
    for (int k = 0; k < 4; k++) {
        h2.index = (uint64_t)k;
        tl_fx_send_frame(&f, &h2, fpx, sizeof fpx), sent++;
    }
    /* a frame in GPU memory (PROTOCOL.md §8.4) on the CPU backend: well-formed, but only the
     * CUDA backend reads GPU memory — a counted rejection, never a silent drop (the GPU
     * path itself is tests/gpu/check_ipc.c) */
    uint8_t handle[TL_PROTO_IPC_HANDLE] = {0};
    const char *uuid = "GPU-8695f54f-567f-78f5-adb5-abcd659e9ff1";
    h2.index = 4;
    h2.has_ipc = true;
    h2.ipc = (tl_proto_ipc){.handle = handle,
                            .buffer = 1,
                            .size = 1 << 20,
                            .offset = 0,
                            .pitch = 24 * 4,
                            .device = {uuid, strlen(uuid)},
                            .slot = 0};
    msgpack_sbuffer gpu;
    msgpack_sbuffer_init(&gpu);
    ck_assert_int_eq(tl_proto_encode_frame(&gpu, &h2), 0);
    const void *gp[1] = {gpu.data};
    size_t gl[1] = {gpu.size};
    ck_assert_int_eq(tl_fx_send_raw(&f, gp, gl, 1), 0);
    sent++;
    msgpack_sbuffer_destroy(&gpu);
    h2.has_ipc = false;
    ck_assert(tl_fx_wait_messages(&f, sent, 10));
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.gpu_memory"), 1);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.frames"), 0);
    ck_assert_int_eq(tl_fx_status_int(&f, "gpu_frames.buffers_open"), 0);
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.series"), 2);
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.held"), 4);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.angle"), 1);

    /* scans that cannot be served are refused loudly, and their frames are not used: a
     * cone-beam scan with half acquisition (which the engine does not do in cone beam),
     * and one whose window needs more memory than there is */
    tl_proto_scan cone = s2;
    cone.series = 3;
    cone.geometry = TL_PROTO_CONE;
    cone.source_origin = 100;
    cone.source_detector = 150;
    cone.pixel_size[0] = cone.pixel_size[1] = 0.1;
    cone.half_acquisition = true;
    cone.has_center = true;
    cone.center = 3;
    tl_fx_send_scan(&f, &cone), sent++;
    h2.series = 3;
    tl_fx_send_frame(&f, &h2, fpx, sizeof fpx), sent++;
    tl_proto_scan huge = {.series = 4,
                          .geometry = TL_PROTO_PARALLEL,
                          .rows = 30000,
                          .cols = 30000,
                          .dtype = TL_PROTO_U16,
                          .window = 100000};
    tl_fx_send_scan(&f, &huge), sent++;
    ck_assert(tl_fx_wait_messages(&f, sent, 10));
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.scan"), 2);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.no_scan"), 2);
    json_t *st = tl_fx_ok(&f, "status", NULL);
    const char *e = json_string_value(json_object_get(st, "last_scan_error"));
    ck_assert_msg(e && strstr(e, "GiB") && strstr(e, "fewer rows"), "%s", e ? e : "(none)");
    ck_assert(json_is_null(json_object_get(st, "scan")));
    json_decref(st);
    char *log = tl_fx_log(&f);
    ck_assert_msg(strstr(log, "event=scan_refused series=3 ") && strstr(log, "half acquisition"),
                  "%s", log);
    free(log);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* The next message on a slice subscriber, within timeout_ms: returns how many parts came
 * (0: none; the caller closes them with tl_proto_close), and *ok whether they decode as a
 * slice, into *m (valid until they are closed). */
static int recv_slice(void *sub, tl_proto_decoder *dec, long timeout_ms, zmq_msg_t parts[4],
                      tl_proto_msg *m, bool *ok)
{
    tl_proto_error e;
    zmq_pollitem_t it = {sub, 0, ZMQ_POLLIN, 0};
    *ok = false;
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return 0;
    int k = tl_proto_recv(sub, parts, 4, 0, &e);
    *ok = tl_proto_decode_parts(dec, parts, k, TL_MSG_SLICE, m, &e) == TL_PROTO_OK;
    return k;
}

/* The final slice of the open series (NULL after 30 s): its pixels, malloc'd, *n of them. */
static float *final_slice(void *sub, tl_proto_decoder *dec, size_t *n)
{
    for (double t0 = tl_fx_seconds(); tl_fx_seconds() - t0 < 30;) {
        zmq_msg_t parts[4];
        tl_proto_msg m;
        bool ok;
        int k = recv_slice(sub, dec, 500, parts, &m, &ok);
        float *px = NULL;
        if (ok && m.slice.final) {
            *n = m.slice.payload_len / sizeof(float);
            px = malloc(m.slice.payload_len);
            memcpy(px, m.slice.payload, m.slice.payload_len);
        }
        tl_proto_close(parts, k);
        if (px)
            return px;
    }
    return NULL;
}

/* 1,000+ malformed messages on ingest and 300+ on control: the daemon stays up, counts
 * each, answers each control request with an error, and a valid scan afterwards is
 * reconstructed correctly. */
START_TEST(malformed_barrage)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "barrage", NULL), 0);
    srand(1234);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    tl_proto_frame good = {.series = 9,
                           .index = 1,
                           .kind = TL_PROTO_PROJ,
                           .has_angle = true,
                           .dtype = TL_PROTO_U16,
                           .rows = 4,
                           .cols = 4};
    tl_proto_encode_frame(&sb, &good);
    static char big[70000];
    memset(big, 0x90, sizeof big);
    long long ingest_bad = 0;
    for (int i = 0; i < 1200; i++) {
        char junk[64];
        size_t n = 1 + (size_t)(rand() % 63);
        for (size_t k = 0; k < n; k++)
            junk[k] = (char)rand();
        const void *parts[3];
        size_t lens[3];
        int np = 1;
        switch (i % 6) {
            case 0: /* random bytes */ parts[0] = junk, lens[0] = n; break;
            case 1: /* a valid frame header, truncated */
                parts[0] = sb.data, lens[0] = 1 + (size_t)rand() % (sb.size - 1);
                break;
            case 2: /* valid header, payload of the wrong size */
                parts[0] = sb.data, lens[0] = sb.size, parts[1] = junk, lens[1] = 31, np = 2;
                break;
            case 3: /* a map with wrong types: {"v": "1", "type": 7} */
                parts[0] = "\x82\xa1v\xa1\x31\xa4type\x07", lens[0] = 12;
                break;
            case 4: /* oversized header */ parts[0] = big, lens[0] = sizeof big; break;
            default: /* too many parts */
                parts[0] = sb.data, lens[0] = sb.size, parts[1] = junk, lens[1] = 32;
                parts[2] = junk, lens[2] = 3, np = 3;
                break;
        }
        ck_assert_int_eq(tl_fx_send_raw(&f, parts, lens, np), 0);
        ingest_bad++;
    }
    /* control: raw junk, unknown commands, wrong types; each must get an error reply */
    int control_bad = 0;
    for (int i = 0; i < 300; i++) {
        json_t *r;
        if (i % 3 == 0) {
            char junk[32];
            for (int k = 0; k < 32; k++)
                junk[k] = (char)rand();
            zmq_send(f.ctl, junk, 1 + (size_t)(i % 31), 0);
            zmq_msg_t m;
            zmq_msg_init(&m);
            zmq_pollitem_t it = {f.ctl, 0, ZMQ_POLLIN, 0};
            ck_assert_int_eq(zmq_poll(&it, 1, 5000), 1);
            zmq_msg_recv(&m, f.ctl, 0);
            tl_proto_msg msg;
            tl_proto_error e;
            ck_assert_int_eq(tl_proto_decode(f.dec, zmq_msg_data(&m), zmq_msg_size(&m), TL_MSG_REP,
                                             &msg, &e),
                             TL_PROTO_OK);
            ck_assert(!msg.rep.ok && msg.rep.code != TL_PROTO_OK);
            zmq_msg_close(&m);
        } else {
            r = tl_fx_request(&f, i % 3 == 1 ? "no_such_command" : "set_slice",
                              i % 3 == 1 ? NULL : "{\"id\":17,\"kind\":[1]}");
            ck_assert(r && !json_is_true(json_object_get(r, "ok")));
            json_decref(r);
        }
        control_bad++;
    }
    ck_assert(tl_fx_wait_messages(&f, ingest_bad, 20));
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.protocol"), ingest_bad);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected_protocol.E_TOO_BIG"), 200);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected_protocol.E_PARTS"), 200);
    ck_assert_int_ge(tl_fx_status_int(&f, "frames.rejected_protocol.E_PAYLOAD"), 200);
    ck_assert_int_ge(tl_fx_status_int(&f, "requests.errors"), control_bad);
    msgpack_sbuffer_destroy(&sb);

    /* still healthy: a disk reconstructs to density 1 */
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"d\",\"kind\":\"row\",\"z\":1,\"pin\":true,"
                         "\"update\":{\"max_rate\":1000}}"));
    void *sub = zmq_socket(f.zctx, ZMQ_SUB);
    zmq_connect(sub, f.slices);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "slice/d/", 8);
    ck_assert(tl_fx_wait_status(&f, "slices.subscriptions", 1, 10));
    send_disk_scan(&f, 5, 3, 64, 90, 90, 20);
    tl_fx_send_end(&f, 5);
    tl_proto_decoder *dec = tl_proto_decoder_new();
    size_t n = 0;
    float *px = final_slice(sub, dec, &n);
    tl_proto_decoder_free(dec);
    zmq_close(sub);
    ck_assert_msg(px && n == 64 * 64, "no final slice of 64 x 64 (%zu pixels)", n);
    float centre = px[32 * 64 + 32];
    free(px);
    ck_assert_msg(fabs(centre - 1.0) < 0.02, "centre %g", centre);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A slice nobody watches is not computed; a subscriber starts it at once. */
START_TEST(computed_only_when_wanted)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "wanted", NULL), 0);
    json_decref(
        tl_fx_ok(&f, "set_slice",
                 "{\"id\":\"w\",\"kind\":\"row\",\"z\":0,\"update\":{\"max_rate\":1000}}"));
    send_disk_scan(&f, 1, 2, 32, 40, 40, 8);
    ck_assert(tl_fx_wait_messages(&f, 41, 10));
    /* every frame applied: status reads scan.held under the lock that the worker holds from
     * applying frames to deciding which slices are due, so the turn that applied the last
     * one has made its choice (and counted what it computed) */
    ck_assert(tl_fx_wait_status(&f, "scan.held", 40, 10));
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.computed"), 0);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.wanted"), 0);
    void *sub = zmq_socket(f.zctx, ZMQ_SUB);
    zmq_connect(sub, f.slices);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "slice/", 6); /* a prefix wants every slice */
    zmq_pollitem_t it = {sub, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&it, 1, 5000), 1);
    ck_assert_int_ge(tl_fx_status_int(&f, "slices.computed"), 1);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.wanted"), 1);
    zmq_close(sub);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* The scan's final is not held back by the slice's maximum rate: with one read-out per
 * 100 s allowed, the end of a scan still brings the final (holding every projection) at
 * once. Before, it waited out the rate: up to 100 s here, 50-100 ms of the demo's 10 Hz
 * slices, the very slice a control system waits for. */
START_TEST(final_not_held_by_rate)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "finalrate", NULL), 0);
    json_decref(
        tl_fx_ok(&f, "set_slice",
                 "{\"id\":\"q\",\"kind\":\"row\",\"z\":0,\"update\":{\"max_rate\":0.01}}"));
    void *sub = zmq_socket(f.zctx, ZMQ_SUB);
    zmq_connect(sub, f.slices);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "slice/q/", 8);
    ck_assert(tl_fx_wait_status(&f, "slices.subscriptions", 1, 10));
    send_disk_scan(&f, 1, 2, 32, 40, 40, 8);
    ck_assert(tl_fx_wait_status(&f, "scan.held", 40, 10));
    ck_assert_int_eq(tl_fx_send_end(&f, 1), 0);
    ck_assert_msg(tl_fx_wait_log(&f, "slice_final id=q", 20), "no final within 20 s");
    /* the first read-out (the new subscriber's), then the final with all 40 */
    tl_proto_decoder *dec = tl_proto_decoder_new();
    bool final = false;
    uint64_t projections = 0;
    for (int n = 0; !final && n < 4; n++) {
        zmq_pollitem_t it = {sub, 0, ZMQ_POLLIN, 0};
        ck_assert_int_eq(zmq_poll(&it, 1, 5000), 1);
        zmq_msg_t parts[TL_PROTO_MAX_PARTS];
        tl_proto_error e;
        tl_proto_msg m;
        int got = tl_proto_recv(sub, parts, TL_PROTO_MAX_PARTS, 0, &e);
        tl_proto_err rc = tl_proto_decode_parts(dec, parts, got, TL_MSG_SLICE, &m, &e);
        ck_assert_msg(rc == TL_PROTO_OK, "%s: %s", tl_proto_err_name(rc), e.message);
        final = m.slice.final;
        projections = m.slice.projections_used;
        tl_proto_close(parts, got);
    }
    ck_assert(final);
    ck_assert_uint_eq(projections, 40);
    tl_proto_decoder_free(dec);
    zmq_close(sub);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* One subscriber never reads: every frame is taken, the event loop keeps answering,
 * every computed slice is published or superseded (publishing waits for a full subscriber
 * at most slices.stall_ms, then counts a stall), the reading subscriber gets the final
 * slice, and the stalled one shows the slices it missed in its seq numbers. More of this
 * in check_publishing. */
/* Once ingest is idle the daemon gives its free heap back (heap.h), once per idle spell:
 * at start (nothing has come), and again after a scan's frames stop. */
START_TEST(heap_trimmed_when_idle)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "heap", NULL), 0);
    ck_assert(tl_fx_wait_status(&f, "memory.heap_trims", 1, 20));
    send_disk_scan(&f, 1, 8, 256, 60, 60, 100);
    ck_assert(tl_fx_wait_messages(&f, 61, 30));
    ck_assert_msg(tl_fx_wait_status(&f, "memory.heap_trims", 2, 20), "heap_trims %lld",
                  tl_fx_status_int(&f, "memory.heap_trims"));
    ck_assert_int_ge(tl_fx_status_int(&f, "memory.heap_in_use"), 0);
    ck_assert_int_ge(tl_fx_status_int(&f, "memory.heap_free"), 0);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

START_TEST(slow_subscriber)
{
    tl_fixture f;
    const char *args[] = {"--set", "slices.sndhwm=2", NULL};
    ck_assert_int_eq(tl_fx_start(&f, "slowsub", args), 0);
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"s\",\"kind\":\"row\",\"z\":0,\"size\":[24,24],"
                         "\"update\":{\"every\":1,\"max_rate\":1000}}"));
    void *stalled = zmq_socket(f.zctx, ZMQ_SUB), *reader = zmq_socket(f.zctx, ZMQ_SUB);
    int one = 1;
    zmq_setsockopt(stalled, ZMQ_RCVHWM, &one, sizeof one);
    /* the stalled one wants every slice (s is the only one): a prefix of its own, so the
     * daemon's count of distinct prefixes shows when both subscriptions have arrived */
    zmq_connect(stalled, f.slices);
    zmq_setsockopt(stalled, ZMQ_SUBSCRIBE, "slice/", 6);
    zmq_connect(reader, f.slices);
    zmq_setsockopt(reader, ZMQ_SUBSCRIBE, "slice/s/", 8);
    ck_assert(tl_fx_wait_status(&f, "slices.subscriptions", 2, 10));
    const uint32_t N = 600;
    send_disk_scan_paced(&f, 1, 1, 32, 120, N, 6, 2000);
    tl_fx_send_end(&f, 1);
    double t_status = tl_fx_seconds();
    json_decref(tl_fx_ok(&f, "status", NULL)); /* the loop is not stuck behind a subscriber */
    ck_assert(tl_fx_seconds() - t_status < 5);
    tl_proto_decoder *dec = tl_proto_decoder_new();
    bool final = false;
    long got = 0;
    uint64_t last_seq = 0;
    for (double t0 = tl_fx_seconds(); !final && tl_fx_seconds() - t0 < 30;) {
        zmq_msg_t parts[4];
        tl_proto_msg m;
        bool ok;
        int n = recv_slice(reader, dec, 500, parts, &m, &ok);
        if (ok) {
            final = m.slice.final;
            last_seq = m.slice.seq;
            got++;
        }
        tl_proto_close(parts, n);
    }
    ck_assert(final);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.proj"), N);
    long long computed = tl_fx_status_int(&f, "slices.computed");
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.published") +
                         tl_fx_status_int(&f, "slices.superseded"),
                     computed);
    ck_assert_int_ge(tl_fx_status_int(&f, "slices.stalls"), 1);
    /* the stalled subscriber: what it missed shows in its seq numbers, as gaps and as the
     * distance from its last seq to the final one */
    uint64_t prev = 0, missed = 0;
    long held = 0;
    for (;;) {
        zmq_msg_t parts[4];
        tl_proto_msg m;
        bool ok;
        int n = recv_slice(stalled, dec, 200, parts, &m, &ok);
        if (n == 0)
            break; /* nothing more within 200 ms */
        if (ok) {
            missed += prev && m.slice.seq > prev + 1 ? m.slice.seq - prev - 1 : 0;
            prev = m.slice.seq;
            held++;
        }
        tl_proto_close(parts, n);
    }
    missed += last_seq - prev;
    printf(
        "slow subscriber: %lld computed, reader got %ld, stalled one held %ld and missed %llu\n",
        computed, got, held, (unsigned long long)missed);
    ck_assert_int_gt(missed, 0);
    ck_assert_int_lt(held, got);
    tl_proto_decoder_free(dec);
    zmq_close(stalled);
    zmq_close(reader);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* Frames sent in row bands (PROTOCOL.md §8.2): bands out of order and interleaved with the
 * next frame's give the very slice the same frames give whole; a band overlapping rows
 * received is refused and counted; a frame whose bands stop coming is dropped and counted
 * when its series ends, never applied in part. */
START_TEST(frames_in_bands)
{
    enum { R = 4, C = 32, W = 24 };
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "bands", NULL), 0);
    /* a vertical plane: every row of the frames is in it */
    json_decref(tl_fx_ok(&f, "set_slice",
                         "{\"id\":\"b\",\"kind\":\"ortho\",\"axis\":\"x\","
                         "\"position\":2}"));
    void *sub = zmq_socket(f.zctx, ZMQ_SUB);
    zmq_connect(sub, f.slices);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "slice/b/", 8);
    ck_assert(tl_fx_wait_status(&f, "slices.subscriptions", 1, 10));
    /* rows that differ, and frames that differ (a row left unwritten holds an earlier
     * frame's), so a band put in the wrong rows changes the plane */
    float disk[R * C], frames[W][R * C];
    tl_fx_disk_projection(disk, R, C, 9);
    for (int k = 0; k < W; k++)
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++)
                frames[k][r * C + c] = disk[r * C + c] * (float)(1 + 2 * r) * (float)(1 + k % 5);
    static const uint32_t first[3] = {0, 1, 3}, rows[3] = {1, 2, 1};
    static const int order[3] = {2, 0, 1};
    tl_proto_decoder *dec = tl_proto_decoder_new();
    float *slice[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    for (uint64_t series = 1; series <= 2; series++) {
        tl_proto_scan sc = {.series = series,
                            .geometry = TL_PROTO_PARALLEL,
                            .rows = R,
                            .cols = C,
                            .dtype = TL_PROTO_F32,
                            .window = W,
                            .already_linear = true};
        ck_assert_int_eq(tl_fx_send_scan(&f, &sc), 0);
        for (uint32_t k = 0; k < W; k++) {
            tl_proto_frame h = {.series = series,
                                .index = k,
                                .kind = TL_PROTO_PROJ,
                                .has_angle = true,
                                .angle = M_PI * k / W,
                                .dtype = TL_PROTO_F32,
                                .rows = R,
                                .cols = C,
                                .has_t_acq = true,
                                .t_acq = 1000 + k};
            if (series == 1) {
                ck_assert_int_eq(tl_fx_send_frame(&f, &h, frames[k], sizeof frames[k]), 0);
                continue;
            }
            /* series 2: frame k's bands in the order 2, 0, 1, its last band after the next
             * frame's first two (the last frame's at the end) */
            h.has_band = true;
            for (int b = 0; b < 3; b++) {
                uint32_t kk = b < 2 ? k : k - 1;
                if (b == 2 && k == 0)
                    continue;
                int j = order[b];
                tl_proto_frame hb = h;
                hb.index = kk;
                hb.angle = M_PI * kk / W;
                hb.t_acq = 1000 + kk;
                hb.band_first = first[j];
                hb.band_rows = rows[j];
                ck_assert_int_eq(tl_fx_send_frame(&f, &hb, frames[kk] + first[j] * C,
                                                  rows[j] * C * sizeof(float)),
                                 0);
            }
            if (k == W - 1) {
                h.band_first = first[order[2]];
                h.band_rows = rows[order[2]];
                ck_assert_int_eq(tl_fx_send_frame(&f, &h, frames[k] + h.band_first * C,
                                                  h.band_rows * C * sizeof(float)),
                                 0);
            }
        }
        tl_fx_send_end(&f, series);
        slice[series - 1] = final_slice(sub, dec, &n[series - 1]);
        ck_assert_msg(slice[series - 1],
                      "no final slice of series %llu (accepted %lld, band %lld, "
                      "incomplete %lld, protocol %lld, shape %lld, duplicate %lld)",
                      (unsigned long long)series, tl_fx_status_int(&f, "frames.accepted.proj"),
                      tl_fx_status_int(&f, "frames.rejected.band"),
                      tl_fx_status_int(&f, "frames.rejected.incomplete"),
                      tl_fx_status_int(&f, "frames.rejected.protocol"),
                      tl_fx_status_int(&f, "frames.rejected.shape"),
                      tl_fx_status_int(&f, "frames.rejected.duplicate"));
    }
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.proj"), 2 * W);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.band"), 0);
    /* the same frames: equal but for the rounding of incremental updates against a
     * rebuild, whichever the worker's timing chose (a band in the wrong rows: ~1e-1) */
    ck_assert_uint_eq(n[0], n[1]);
    double norm = 0;
    for (size_t i = 0; i < n[0]; i++)
        norm += fabs(slice[0][i]);
    ck_assert(norm > 0);
    double rel = tl_rel_l2(slice[1], slice[0], n[0]);
    ck_assert_msg(rel < 1e-5, "frames in bands vs whole: rel L2 %g", rel);

    /* series 3: an overlapping band (refused), and a frame whose last band never comes */
    tl_proto_scan sc = {.series = 3,
                        .geometry = TL_PROTO_PARALLEL,
                        .rows = R,
                        .cols = C,
                        .dtype = TL_PROTO_F32,
                        .window = W,
                        .already_linear = true};
    ck_assert_int_eq(tl_fx_send_scan(&f, &sc), 0);
    tl_proto_frame h = {.series = 3,
                        .index = 0,
                        .kind = TL_PROTO_PROJ,
                        .has_angle = true,
                        .angle = 0,
                        .dtype = TL_PROTO_F32,
                        .rows = R,
                        .cols = C,
                        .has_band = true,
                        .band_first = 0,
                        .band_rows = 2};
    ck_assert_int_eq(tl_fx_send_frame(&f, &h, frames[0], 2 * C * sizeof(float)), 0);
    h.band_first = 1;
    ck_assert_int_eq(tl_fx_send_frame(&f, &h, frames[0] + C, 2 * C * sizeof(float)), 0);
    ck_assert(tl_fx_wait_status(&f, "frames.rejected.band", 1, 10));
    tl_fx_send_end(&f, 3);
    ck_assert(tl_fx_wait_status(&f, "frames.rejected.incomplete", 1, 10));
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.proj"), 2 * W);
    char *log = tl_fx_log(&f);
    ck_assert_msg(strstr(log, "reason=band") && strstr(log, "reason=incomplete") &&
                      strstr(log, "the series ended first; 2 of its 4 rows came"),
                  "both refusals are logged, the incomplete frame with what it lacked");
    free(log);
    free(slice[0]);
    free(slice[1]);
    tl_proto_decoder_free(dec);
    zmq_close(sub);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    fputs(text, fp);
    fclose(fp);
}

/* READY=1, STATUS= and WATCHDOG=1 through a test NOTIFY_SOCKET; SIGHUP applies what can
 * change at run time and names what needs a restart; a broken file is refused and the
 * daemon keeps running; SIGTERM exits 0 within 2 s. */
START_TEST(systemd_reload_and_stop)
{
    char *dir = tl_tmpdir("notify");
    char sock[600], conf[600], env_notify[700];
    snprintf(sock, sizeof sock, "%s/notify", dir);
    snprintf(conf, sizeof conf, "%s/tomolive.conf", dir);
    snprintf(env_notify, sizeof env_notify, "NOTIFY_SOCKET=%s", sock);
    write_file(conf, "[daemon]\nlog_level = info\nstatus_interval = 0.2\n");
    tl_notify_listener *l = tl_notify_listener_open(sock);
    ck_assert_ptr_nonnull(l);
    const char *env[] = {env_notify, "WATCHDOG_USEC=400000", NULL};
    const char *args[] = {"-c", conf, NULL};
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start_env(&f, "systemd", args, env), 0);
    ck_assert(tl_notify_listener_wait(l, "READY=1", 5000));
    ck_assert(tl_notify_listener_wait(l, "WATCHDOG=1", 2000));
    ck_assert(tl_notify_listener_wait(l, "STATUS=", 2000));

    write_file(conf, "[daemon]\nlog_level = info\nstatus_interval = 0.3\n[ingest]\nqueue = 128\n");
    kill(f.pid, SIGHUP);
    ck_assert(tl_notify_listener_wait(l, "RELOADING=1", 3000));
    ck_assert(tl_notify_listener_wait(l, "READY=1", 3000));
    ck_assert(tl_fx_wait_log(&f, "event=config_reloaded", 3));
    char *log = tl_fx_log(&f);
    ck_assert_msg(strstr(log, "event=config_changed key=daemon.status_interval"), "%s", log);
    ck_assert(strstr(log, "event=config_needs_restart key=ingest.queue"));
    ck_assert(strstr(log, "event=config_reloaded"));
    free(log);
    ck_assert_int_eq(tl_fx_status_int(&f, "queue.capacity"), 64); /* not changed at run time */

    write_file(conf, "[daemon]\nlog_level = loud\n");
    kill(f.pid, SIGHUP);
    ck_assert(tl_notify_listener_wait(l, "READY=1", 3000));
    ck_assert(tl_fx_wait_log(&f, "event=config_reload_failed", 3));
    log = tl_fx_log(&f);
    ck_assert(strstr(log, "event=config_reload_failed") && strstr(log, "tomolive.conf:2"));
    free(log);
    json_decref(tl_fx_ok(&f, "status", NULL)); /* still serving */

    double seconds;
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, &seconds), 0);
    ck_assert_msg(seconds < 2.0, "SIGTERM took %.2f s", seconds);
    ck_assert(tl_notify_listener_wait(l, "STOPPING=1", 1000));
    tl_notify_listener_close(l);
    tl_fx_cleanup(&f);
    tl_rm_rf(dir);
    free(dir);
}
END_TEST

/* SIGTERM while frames stream in: in-flight work finishes, exit 0 within 2 s. */
START_TEST(sigterm_under_load)
{
    tl_fixture f;
    ck_assert_int_eq(tl_fx_start(&f, "term", NULL), 0);
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"t\",\"kind\":\"row\",\"z\":1,\"pin\":true}"));
    send_disk_scan(&f, 1, 4, 128, 360, 360, 30);
    double seconds;
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, &seconds), 0);
    ck_assert_msg(seconds < 2.0, "SIGTERM took %.2f s", seconds);
    char *log = tl_fx_log(&f);
    ck_assert(strstr(log, "event=stopping") && strstr(log, "event=stopped"));
    free(log);
    tl_fx_cleanup(&f);
}
END_TEST

/* Asking for a backend that cannot run is a start-up error, never a silent fallback. */
START_TEST(unusable_backend_refused)
{
    if (tl_backend_available(TL_BACKEND_CUDA, NULL, 0))
        return; /* a GPU is here: nothing to refuse (tests/gpu runs the daemon on it) */
    tl_fixture f;
    const char *args[] = {"--backend", "cuda", NULL};
    ck_assert_int_ne(tl_fx_start(&f, "nocuda", args), 0);
    char *log = tl_fx_log(&f);
    ck_assert_msg(strstr(log, "event=start_failed") &&
                      strstr(log, "backend cuda requested but not usable"),
                  "%s", log);
    free(log);
    tl_fx_cleanup(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("daemon");
    TCase *t = tcase_create("cpu");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, control_commands);
    tcase_add_test(t, error_replies_keep_ids);
    tcase_add_test(t, slice_outside_the_scan_not_served);
    tcase_add_test(t, scans_and_rejections);
    tcase_add_test(t, malformed_barrage);
    tcase_add_test(t, computed_only_when_wanted);
    tcase_add_test(t, final_not_held_by_rate);
    tcase_add_test(t, slow_subscriber);
    tcase_add_test(t, heap_trimmed_when_idle);
    tcase_add_test(t, frames_in_bands);
    tcase_add_test(t, systemd_reload_and_stop);
    tcase_add_test(t, sigterm_under_load);
    tcase_add_test(t, unusable_backend_refused);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tl_run_suite(suite(), true);
}
