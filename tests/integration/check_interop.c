/* check_interop.c — the foreign ingest formats end to end, each through a real tomolived
 * (tests/daemon_fixture.h) started with --set ingest.format=...:
 *
 *   one phantom scan (8 x 64 uint16 camera frames, 4 darks, 4 flats, 90 projections over
 *   180 degrees, some swapped out of order, projection 45 lost on the way) is built as each
 *   format's messages from the public field descriptions — DECTRIS Stream V2 as CBOR with
 *   libcbor (raw, lz4 and bslz4 arrays, angles from the goniometer), Stream V1 as JSON
 *   parts with jansson ("<", "lz4<", "bs16-lz4<"), std-daq, concert and array-1.0 JSON
 *   headers with raw blobs, tomopackets packed structs (float32) — and the row and plane
 *   slices each daemon then publishes must equal those of the native protocol's run of
 *   the same frames within relative L2 1e-6, with projections_used 89 and missing 1;
 *   duplicates are counted, not used.
 *
 * Then, per adapter, malformed input (wrong types, declared against actual sizes,
 * decompressed size against shape, a compression bomb, parts, series out of place) must
 * be counted as protocol rejections with the expected error codes, and the daemon must go
 * on serving (status answers, a following good frame is accepted).
 */
#include "config.h"

#include <cbor.h>
#include <jansson.h>
#include <lz4.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/ingest/tomopackets.h"
#include "tests/compress_encode.h"
#include "tests/daemon_fixture.h"
#include "tests/camera_scan.h"
#include "tests/testutil.h"

enum { R = 8, W = 64, N = 90, D = 4, F = 4, LOST = 45, DUP = 10, SERIES = 7 };
#define NPIX ((size_t)R * W)

static uint16_t *darks, *flats, *projs; /* camera frames */
static int order[N];                    /* projections in sending order (LOST left out) */
static int norder;

static void make_scan(void)
{
    if (projs)
        return;
    tl_test_camera_scan(R, W, D, F, N, 5, &darks, &flats, &projs);
    for (int k = 0; k < N; k++)
        if (k != LOST)
            order[norder++] = k;
    for (int i = 3; i + 1 < norder; i += 11) { /* out of order */
        int t = order[i];
        order[i] = order[i + 1];
        order[i + 1] = t;
    }
}

/* Frame k of the whole series (darks, flats, projections): its pixels. */
static const uint16_t *series_frame(int k)
{
    return k < D       ? darks + k * NPIX
           : k < D + F ? flats + (k - D) * NPIX
                       : projs + (k - D - F) * NPIX;
}

/* ---- sending ------------------------------------------------------------------------------ */

static void send_parts(tl_fixture *f, const void *const *parts, const size_t *lens, int n)
{
    ck_assert_int_eq(tl_fx_send_raw(f, parts, lens, n), 0);
}

static void send1(tl_fixture *f, const void *p, size_t len)
{
    send_parts(f, &p, &len, 1);
}

static void send_json(tl_fixture *f, json_t *h, const void *blob, size_t len)
{
    char *s = json_dumps(h, JSON_COMPACT);
    const void *parts[2] = {s, blob};
    size_t lens[2] = {strlen(s), len};
    send_parts(f, parts, lens, blob ? 2 : 1);
    free(s);
    json_decref(h);
}

static void send_cbor(tl_fixture *f, cbor_item_t *item)
{
    unsigned char *buf = NULL;
    size_t cap = 0, len = cbor_serialize_alloc(item, &buf, &cap);
    ck_assert_uint_gt(len, 0);
    send1(f, buf, len);
    free(buf);
    cbor_decref(&item);
}

static void kv(cbor_item_t *map, const char *k, cbor_item_t *v)
{
    ck_assert(
        cbor_map_add(map, (struct cbor_pair){cbor_move(cbor_build_string(k)), cbor_move(v)}));
}

/* ---- slices ------------------------------------------------------------------------------- */

typedef struct {
    float *row, *plane;
    long used, missing;
} result;

static const char *const slice_args[2] = {
    "{\"id\":\"row\",\"kind\":\"row\",\"z\":3}",
    "{\"id\":\"plane\",\"kind\":\"plane\",\"size\":[32,32],"
    "\"orientation\":[48,0,3,0,48,0,-24,-24,1.5]}",
};

static float *fetch(tl_fixture *f, const char *id, size_t n, long *used, long *missing)
{
    void *sub = zmq_socket(f->zctx, ZMQ_SUB);
    int linger = 0;
    zmq_setsockopt(sub, ZMQ_LINGER, &linger, sizeof linger);
    char topic[64];
    snprintf(topic, sizeof topic, "slice/%s/", id);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, topic, strlen(topic));
    zmq_connect(sub, f->slices);
    zmq_pollitem_t it = {sub, 0, ZMQ_POLLIN, 0};
    float *out = NULL;
    tl_proto_decoder *dec = tl_proto_decoder_new();
    for (double t0 = tl_fx_seconds(); !out && tl_fx_seconds() - t0 < 20;) {
        if (zmq_poll(&it, 1, 200) <= 0)
            continue;
        zmq_msg_t parts[4];
        tl_proto_error e;
        int np = tl_proto_recv(sub, parts, 4, 0, &e);
        ck_assert_int_eq(np, 3);
        tl_proto_msg m;
        ck_assert_int_eq(tl_proto_decode_parts(dec, parts, np, TL_MSG_SLICE, &m, &e), TL_PROTO_OK);
        ck_assert_uint_eq(m.slice.payload_len, n * sizeof(float));
        out = malloc(m.slice.payload_len);
        memcpy(out, m.slice.payload, m.slice.payload_len);
        *used = m.slice.projections_used;
        *missing = m.slice.missing;
        tl_proto_close(parts, np);
    }
    tl_proto_decoder_free(dec);
    zmq_close(sub);
    ck_assert_msg(out != NULL, "no slice %s", id);
    return out;
}

/* A daemon with these extra arguments, its two slices registered. */
static void start(tl_fixture *f, const char *tag, const char *const *extra)
{
    ck_assert_msg(tl_fx_start(f, tag, extra) == 0, "daemon did not start (%s)", tag);
    for (int i = 0; i < 2; i++)
        json_decref(tl_fx_ok(f, "set_slice", slice_args[i]));
}

/* After n messages: the slices of the whole window. */
static result collect(tl_fixture *f, long long n)
{
    ck_assert_msg(tl_fx_wait_messages(f, n, 30), "daemon consumed %lld of %lld messages",
                  tl_fx_status_int(f, "frames.messages"), n);
    result r;
    long u2, m2;
    r.row = fetch(f, "row", (size_t)W * W, &r.used, &r.missing);
    r.plane = fetch(f, "plane", 32 * 32, &u2, &m2);
    ck_assert(u2 == r.used && m2 == r.missing);
    return r;
}

static void compare(const result *a, const result *ref, const char *what)
{
    double e1 = tl_rel_l2(a->row, ref->row, (size_t)W * W),
           e2 = tl_rel_l2(a->plane, ref->plane, 32 * 32);
    fprintf(stderr, "%s: row rel L2 %.3g, plane rel L2 %.3g, used %ld missing %ld\n", what, e1, e2,
            a->used, a->missing);
    ck_assert_msg(e1 <= 1e-6 && e2 <= 1e-6, "%s: rel L2 row %g plane %g", what, e1, e2);
    ck_assert_msg(a->used == N - 1 && a->missing == 1, "%s: used %ld missing %ld", what, a->used,
                  a->missing);
}

static void free_result(result *r)
{
    free(r->row);
    free(r->plane);
}

/* The native protocol's run; f32_angles: the angles as float32 (what tomopackets carries). */
static result native(bool f32_angles)
{
    make_scan();
    tl_fixture f;
    start(&f, "native", NULL);
    tl_proto_scan s = {.series = SERIES,
                       .rows = R,
                       .cols = W,
                       .dtype = TL_PROTO_U16,
                       .window = N,
                       .darks = D,
                       .flats = F,
                       .has_angles = true,
                       .angle_start = 0,
                       .angle_step = M_PI / N};
    ck_assert_int_eq(tl_fx_send_scan(&f, &s), 0);
    long long msgs = 1;
    for (int k = 0; k < D + F; k++, msgs++) {
        tl_proto_frame fr = {.series = SERIES,
                             .index = (uint64_t)(k < D ? k : k - D),
                             .kind = k < D ? TL_PROTO_DARK : TL_PROTO_FLAT,
                             .dtype = TL_PROTO_U16,
                             .rows = R,
                             .cols = W};
        ck_assert_int_eq(tl_fx_send_frame(&f, &fr, series_frame(k), NPIX * 2), 0);
    }
    for (int i = 0; i < norder; i++, msgs++) {
        int p = order[i];
        tl_proto_frame fr = {.series = SERIES,
                             .index = (uint64_t)p,
                             .kind = TL_PROTO_PROJ,
                             .dtype = TL_PROTO_U16,
                             .rows = R,
                             .cols = W,
                             .has_angle = f32_angles,
                             .angle = (double)(float)(M_PI * p / N)};
        ck_assert_int_eq(tl_fx_send_frame(&f, &fr, projs + p * NPIX, NPIX * 2), 0);
    }
    ck_assert_int_eq(tl_fx_send_end(&f, SERIES), 0);
    result r = collect(&f, msgs + 1);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
    return r;
}

/* Protocol rejections so far: the total, and per error name. */
static void expect_rejections(tl_fixture *f, long long total, const char *const *names,
                              const long long *counts)
{
    for (double t0 = tl_fx_seconds(); tl_fx_seconds() - t0 < 10; usleep(20000))
        if (tl_fx_status_int(f, "frames.rejected.protocol") >= total)
            break;
    ck_assert_int_eq(tl_fx_status_int(f, "frames.rejected.protocol"), total);
    for (int i = 0; names[i]; i++) {
        char path[96];
        snprintf(path, sizeof path, "frames.rejected_protocol.%s", names[i]);
        ck_assert_msg(tl_fx_status_int(f, path) == counts[i], "%s = %lld, expected %lld", path,
                      tl_fx_status_int(f, path), counts[i]);
    }
    char *log = tl_fx_log(f);
    ck_assert_msg(strstr(log, "message_rejected"), "rejections are logged");
    free(log);
}

/* ---- DECTRIS Stream V2 -------------------------------------------------------------------- */

static cbor_item_t *v2_start(uint64_t series)
{
    cbor_item_t *m = cbor_new_definite_map(8);
    kv(m, "type", cbor_build_string("start"));
    kv(m, "series_id", cbor_build_uint64(series));
    kv(m, "series_unique_id", cbor_build_string("abc"));
    kv(m, "image_size_x", cbor_build_uint32(W));
    kv(m, "image_size_y", cbor_build_uint32(R));
    kv(m, "number_of_images", cbor_build_uint32(D + F + N));
    /* omega of image k = start + k * increment: projection p (image D+F+p) at p * 180/N */
    cbor_item_t *omega = cbor_new_definite_map(2), *gonio = cbor_new_definite_map(2);
    double inc = 180.0 / N;
    kv(omega, "start", cbor_build_float8(-(D + F) * inc));
    kv(omega, "increment", cbor_build_float8(inc));
    cbor_item_t *phi = cbor_new_definite_map(1);
    kv(phi, "start", cbor_build_float8(12));
    kv(gonio, "phi", phi);
    kv(gonio, "omega", omega);
    kv(m, "goniometer", gonio);
    cbor_item_t *ud = cbor_new_definite_map(1);
    kv(ud, "beamline", cbor_build_string("test")); /* not ours: ignored */
    kv(m, "user_data", ud);
    return m;
}

/* An image whose channel array is given (tag 40 [[rows, cols], typed]). */
static cbor_item_t *v2_image_with(uint64_t series, cbor_item_t *id, cbor_item_t *array)
{
    cbor_item_t *m = cbor_new_definite_map(6);
    kv(m, "type", cbor_build_string("image"));
    kv(m, "series_id", cbor_build_uint64(series));
    kv(m, "image_id", id);
    cbor_item_t *data = cbor_new_definite_map(1);
    kv(data, "threshold_1", array);
    kv(m, "data", data);
    kv(m, "series_date",
       cbor_build_tag(0, cbor_move(cbor_build_string("2026-01-02T03:04:05.5+01:00"))));
    cbor_item_t *st = cbor_new_definite_array(2);
    cbor_array_push(st, cbor_move(cbor_build_uint64(1)));
    cbor_array_push(st, cbor_move(cbor_build_uint64(1000)));
    kv(m, "start_time", st);
    return m;
}

/* comp: 0 raw, 1 lz4, 2 bslz4; tag: the typed array tag (69 = uint16 LE). */
static cbor_item_t *v2_array(const void *px, size_t bytes, int comp, uint64_t tag, uint32_t rows,
                             uint32_t cols, uint64_t declared)
{
    static uint8_t buf[1 << 16];
    cbor_item_t *dims = cbor_new_definite_array(2);
    cbor_array_push(dims, cbor_move(cbor_build_uint32(rows)));
    cbor_array_push(dims, cbor_move(cbor_build_uint32(cols)));
    cbor_item_t *typed;
    if (comp == 0) {
        typed = cbor_build_tag(tag, cbor_move(cbor_build_bytestring(px, bytes)));
    } else {
        size_t len = comp == 1 ? tlt_lz4_hdf5(px, bytes, 8192, buf, sizeof buf)
                               : tlt_bslz4(px, bytes / 2, 2, buf);
        if (declared)
            tlt_put_be(buf, declared, 8);
        cbor_item_t *c = cbor_new_definite_array(3);
        cbor_array_push(c, cbor_move(cbor_build_string(comp == 1 ? "lz4" : "bslz4")));
        cbor_array_push(c, cbor_move(cbor_build_uint8(comp == 1 ? 0 : 2)));
        cbor_array_push(c, cbor_move(cbor_build_bytestring(buf, len)));
        typed = cbor_build_tag(tag, cbor_move(cbor_build_tag(56500, cbor_move(c))));
    }
    cbor_item_t *md = cbor_new_definite_array(2);
    cbor_array_push(md, cbor_move(dims));
    cbor_array_push(md, cbor_move(typed));
    return cbor_build_tag(40, cbor_move(md));
}

static cbor_item_t *v2_image(uint64_t series, uint64_t id, int comp)
{
    return v2_image_with(series, cbor_build_uint64(id),
                         v2_array(series_frame((int)id), NPIX * 2, comp, 69, R, W, 0));
}

static cbor_item_t *v2_end(uint64_t series)
{
    cbor_item_t *m = cbor_new_definite_map(2);
    kv(m, "type", cbor_build_string("end"));
    kv(m, "series_id", cbor_build_uint64(series));
    return m;
}

START_TEST(dectris_v2)
{
    result ref = native(false);
    tl_fixture f;
    const char *args[] = {"--set", "ingest.format=dectris-v2", "--set", "ingest.darks=4",
                          "--set", "ingest.flats=4",           NULL};
    start(&f, "dectris2", args);
    send_cbor(&f, v2_start(SERIES));
    long long msgs = 1;
    for (int k = 0; k < D + F; k++, msgs++)
        send_cbor(&f, v2_image(SERIES, (uint64_t)k, k % 3));
    for (int i = 0; i < norder; i++, msgs++)
        send_cbor(&f, v2_image(SERIES, (uint64_t)(D + F + order[i]), i % 3));
    send_cbor(&f, v2_image(SERIES, D + F + DUP, 2)); /* a duplicate: counted, not used */
    send_cbor(&f, v2_end(SERIES));
    result r = collect(&f, msgs + 2);
    compare(&r, &ref, "dectris-v2");
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.duplicate"), 1);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.protocol"), 0);

    /* malformed input */
    const uint8_t junk[] = {0x1c, 0x1d, 0x1e, 0x12}; /* reserved additional information */
    send1(&f, junk, sizeof junk);                    /* E_MALFORMED */
    cbor_item_t *arr = cbor_new_definite_array(1);
    cbor_array_push(arr, cbor_move(cbor_build_uint8(1)));
    send_cbor(&f, arr); /* E_NOT_MAP */
    send_cbor(&f, v2_start(8));
    send_cbor(&f, v2_image_with(8, cbor_build_string("one"), /* E_KEY_TYPE */
                                v2_array(darks, NPIX * 2, 0, 69, R, W, 0)));
    send_cbor(&f, v2_image_with(8, cbor_build_uint64(0), /* E_PAYLOAD: bytes */
                                v2_array(darks, NPIX * 2 - 2, 0, 69, R, W, 0)));
    send_cbor(&f, v2_image_with(8, cbor_build_uint64(0), /* E_PAYLOAD: size */
                                v2_array(darks, NPIX * 2, 2, 69, R, W, NPIX * 2 + 2)));
    uint8_t small[64] = {0};                             /* E_RANGE */
    send_cbor(&f, v2_image_with(8, cbor_build_uint64(0), /* (not 8 x 64) */
                                v2_array(small, 64, 0, 69, 1, 32, 0)));
    {
        /* 64 MiB claimed by 40 bytes:                                     E_LIMIT */
        uint8_t bomb[40] = {0};
        tlt_put_be(bomb, 8192ull * 4096 * 2, 8);
        tlt_put_be(bomb + 8, 8192, 4);
        cbor_item_t *dims = cbor_new_definite_array(2);
        cbor_array_push(dims, cbor_move(cbor_build_uint32(4096)));
        cbor_array_push(dims, cbor_move(cbor_build_uint32(8192)));
        cbor_item_t *c = cbor_new_definite_array(3);
        cbor_array_push(c, cbor_move(cbor_build_string("bslz4")));
        cbor_array_push(c, cbor_move(cbor_build_uint8(2)));
        cbor_array_push(c, cbor_move(cbor_build_bytestring(bomb, sizeof bomb)));
        cbor_item_t *md = cbor_new_definite_array(2);
        cbor_array_push(md, cbor_move(dims));
        cbor_array_push(md,
                        cbor_move(
                            cbor_build_tag(69, cbor_move(cbor_build_tag(56500, cbor_move(c))))));
        send_cbor(&f, v2_image_with(8, cbor_build_uint64(0), cbor_build_tag(40, cbor_move(md))));
    }
    send_cbor(&f, v2_image_with(8, cbor_build_uint64(0), /* E_DTYPE: BE */
                                v2_array(darks, NPIX * 2, 0, 65, R, W, 0)));
    send_cbor(&f, v2_image(99, 0, 0)); /* E_STATE */
    {
        uint8_t corrupt[NPIX * 2];
        size_t len = tlt_bslz4(darks, NPIX, 2, corrupt);
        tlt_put_be(corrupt + 12, 60000, 4); /* a block longer than the payload:   E_MALFORMED */
        cbor_item_t *c = cbor_new_definite_array(3);
        cbor_array_push(c, cbor_move(cbor_build_string("bslz4")));
        cbor_array_push(c, cbor_move(cbor_build_uint8(2)));
        cbor_array_push(c, cbor_move(cbor_build_bytestring(corrupt, len)));
        cbor_item_t *dims = cbor_new_definite_array(2);
        cbor_array_push(dims, cbor_move(cbor_build_uint32(R)));
        cbor_array_push(dims, cbor_move(cbor_build_uint32(W)));
        cbor_item_t *md = cbor_new_definite_array(2);
        cbor_array_push(md, cbor_move(dims));
        cbor_array_push(md,
                        cbor_move(
                            cbor_build_tag(69, cbor_move(cbor_build_tag(56500, cbor_move(c))))));
        send_cbor(&f, v2_image_with(8, cbor_build_uint64(0), cbor_build_tag(40, cbor_move(md))));
    }
    const void *two[2] = {junk, junk}; /* E_PARTS */
    size_t twol[2] = {1, 1};
    send_parts(&f, two, twol, 2);
    const char *names[] = {"E_MALFORMED", "E_NOT_MAP", "E_KEY_TYPE", "E_PAYLOAD", "E_LIMIT",
                           "E_DTYPE",     "E_STATE",   "E_PARTS",    "E_RANGE",   NULL};
    const long long counts[] = {2, 1, 1, 2, 1, 1, 1, 1, 1};
    expect_rejections(&f, 11, names, counts);
    /* still serving: a good image of series 8 opens its scan and is accepted */
    long long darks0 = tl_fx_status_int(&f, "frames.accepted.dark");
    send_cbor(&f, v2_image(8, 0, 2));
    tl_fx_wait_status(&f, "frames.accepted.dark", darks0 + 1, 10);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.dark"), darks0 + 1);
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.series"), 8);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
    free_result(&r);
    free_result(&ref);
}
END_TEST

/* ---- DECTRIS Stream V1 -------------------------------------------------------------------- */

static void v1_header(tl_fixture *f, uint64_t series)
{
    json_t *h = json_pack("{s:s, s:I, s:s}", "htype", "dheader-1.0", "series", (json_int_t)series,
                          "header_detail", "basic");
    double inc = 180.0 / N;
    json_t *c = json_pack("{s:i, s:i, s:i, s:i, s:f, s:f, s:s}", "nimages", D + F + N, "ntrigger",
                          1, "x_pixels_in_detector", W, "y_pixels_in_detector", R, "omega_start",
                          -(D + F) * inc, "omega_increment", inc, "detector", "EIGER");
    char *hs = json_dumps(h, JSON_COMPACT), *cs = json_dumps(c, JSON_COMPACT);
    const void *parts[2] = {hs, cs};
    size_t lens[2] = {strlen(hs), strlen(cs)};
    send_parts(f, parts, lens, 2);
    free(hs);
    free(cs);
    json_decref(h);
    json_decref(c);
}

/* An image: encoding 0 "<", 1 "lz4<" (a bare block), 2 "bs16-lz4<". */
static void v1_image_raw(tl_fixture *f, uint64_t series, uint64_t frame, json_t *dd,
                         const void *blob, size_t len)
{
    json_t *h = json_pack("{s:s, s:I, s:I, s:s}", "htype", "dimage-1.0", "series",
                          (json_int_t)series, "frame", (json_int_t)frame, "hash", "0");
    json_t *cfg = json_pack("{s:s, s:I, s:I, s:I}", "htype", "dconfig-1.0", "start_time",
                            (json_int_t)0, "stop_time", (json_int_t)1, "real_time", (json_int_t)1);
    char *hs = json_dumps(h, JSON_COMPACT), *ds = json_dumps(dd, JSON_COMPACT),
         *cs = json_dumps(cfg, JSON_COMPACT);
    const void *parts[4] = {hs, ds, blob, cs};
    size_t lens[4] = {strlen(hs), strlen(ds), len, strlen(cs)};
    send_parts(f, parts, lens, 4);
    free(hs);
    free(ds);
    free(cs);
    json_decref(h);
    json_decref(dd);
    json_decref(cfg);
}

static void v1_image(tl_fixture *f, uint64_t series, uint64_t frame, int enc)
{
    static uint8_t buf[1 << 16];
    const uint16_t *px = series_frame((int)frame);
    size_t len = NPIX * 2;
    const void *blob = px;
    if (enc == 1) {
        len = (size_t)LZ4_compress_default((const char *)px, (char *)buf, (int)(NPIX * 2),
                                           sizeof buf);
        blob = buf;
    } else if (enc == 2) {
        len = tlt_bslz4(px, NPIX, 2, buf);
        blob = buf;
    }
    static const char *const encs[] = {"<", "lz4<", "bs16-lz4<"};
    json_t *dd = json_pack("{s:s, s:[i,i], s:s, s:s}", "htype", "dimage_d-1.0", "shape", W, R,
                           "type", "uint16", "encoding", encs[enc]);
    v1_image_raw(f, series, frame, dd, blob, len);
}

START_TEST(dectris_v1)
{
    result ref = native(false);
    tl_fixture f;
    const char *args[] = {"--set", "ingest.format=dectris-v1", "--set", "ingest.darks=4",
                          "--set", "ingest.flats=4",           NULL};
    start(&f, "dectris1", args);
    v1_header(&f, SERIES);
    long long msgs = 1;
    for (int k = 0; k < D + F; k++, msgs++)
        v1_image(&f, SERIES, (uint64_t)k, k % 3);
    for (int i = 0; i < norder; i++, msgs++)
        v1_image(&f, SERIES, (uint64_t)(D + F + order[i]), i % 3);
    send_json(&f, json_pack("{s:s, s:i}", "htype", "dseries_end-1.0", "series", SERIES), NULL, 0);
    result r = collect(&f, msgs + 1);
    compare(&r, &ref, "dectris-v1");

    /* malformed input */
    send1(&f, "{not json", 9);                                       /* E_MALFORMED */
    send_json(&f, json_pack("{s:s}", "htype", "dfoo-1.0"), NULL, 0); /* E_TYPE */
    v1_header(&f, 9);
    v1_image_raw(&f, 9, 0,
                 json_pack("{s:s, s:s, s:s}", "htype", "dimage_d-1.0", "shape", "64x8", "type",
                           "uint16"),
                 darks, NPIX * 2); /* E_KEY_TYPE */
    v1_image_raw(&f, 9, 0,
                 json_pack("{s:s, s:[i,i], s:s, s:s}", "htype", "dimage_d-1.0", "shape", W, R,
                           "type", "uint16", "encoding", "<"),
                 darks, NPIX * 2 - 6); /* E_PAYLOAD */
    {
        uint8_t buf[1 << 14];
        size_t len = tlt_bslz4(darks, NPIX, 2, buf);
        tlt_put_be(buf, NPIX * 4, 8); /* E_PAYLOAD: size */
        v1_image_raw(&f, 9, 0,
                     json_pack("{s:s, s:[i,i], s:s, s:s}", "htype", "dimage_d-1.0", "shape", W, R,
                               "type", "uint16", "encoding", "bs16-lz4<"),
                     buf, len);
    }
    v1_image_raw(&f, 9, 0,
                 json_pack("{s:s, s:[i,i], s:s, s:s}", "htype", "dimage_d-1.0", "shape", 8192,
                           4096, "type", "uint16", "encoding", "lz4<"),
                 darks, 32); /* E_LIMIT: bomb */
    v1_image_raw(&f, 9, 0,
                 json_pack("{s:s, s:[i,i], s:s, s:s}", "htype", "dimage_d-1.0", "shape", W, R,
                           "type", "uint16", "encoding", "zstd<"),
                 darks, NPIX * 2); /* E_UNSUPPORTED */
    v1_image_raw(&f, 9, 0,
                 json_pack("{s:s, s:[i,i], s:s, s:s}", "htype", "dimage_d-1.0", "shape", W, R,
                           "type", "int16", "encoding", "<"),
                 darks, NPIX * 2); /* E_DTYPE */
    v1_image(&f, 42, 0, 0);        /* E_STATE */
    const char *names[] = {"E_MALFORMED",   "E_TYPE",  "E_KEY_TYPE", "E_PAYLOAD", "E_LIMIT",
                           "E_UNSUPPORTED", "E_DTYPE", "E_STATE",    NULL};
    const long long counts[] = {1, 1, 1, 2, 1, 1, 1, 1};
    expect_rejections(&f, 9, names, counts);
    long long darks0 = tl_fx_status_int(&f, "frames.accepted.dark");
    v1_image(&f, 9, 0, 2);
    tl_fx_wait_status(&f, "frames.accepted.dark", darks0 + 1, 10);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.dark"), darks0 + 1);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
    free_result(&r);
    free_result(&ref);
}
END_TEST

/* ---- JSON header + blob presets ----------------------------------------------------------- */

/* Frame k of the series as the preset's header. */
static json_t *json_header(const char *preset, int k)
{
    int kind = k < D ? 0 : k < D + F ? 1 : 2, within = k < D ? k : k < D + F ? k - D : k - D - F;
    if (strcmp(preset, "std-daq") == 0)
        return json_pack("{s:i, s:{s:i, s:b}, s:[i,i], s:s, s:s}", "frame", within,
                         "image_attributes", "scan_index", kind, "image_is_complete", 1, "shape",
                         R, W, "type", "uint16", "source", "gigafrost");
    if (strcmp(preset, "concert") == 0)
        return json_pack("{s:s, s:[i,i], s:i, s:f}", "dtype", "uint16", "shape", R, W,
                         "frame_number", k, "timestamp", 1.5);
    return json_pack("{s:s, s:s, s:[i,i], s:i}", "htype", "array-1.0", "type", "uint16", "shape",
                     R, W, "frame", k);
}

static void json_preset(const char *preset)
{
    result ref = native(false);
    tl_fixture f;
    char fmt[64];
    snprintf(fmt, sizeof fmt, "ingest.format=%s", preset);
    const char *args[] = {"--set", fmt,
                          "--set", "ingest.window=90",
                          "--set", "ingest.darks=4",
                          "--set", "ingest.flats=4",
                          NULL};
    start(&f, preset, args);
    long long msgs = 0;
    for (int k = 0; k < D + F; k++, msgs++)
        send_json(&f, json_header(preset, k), series_frame(k), NPIX * 2);
    for (int i = 0; i < norder; i++, msgs++)
        send_json(&f, json_header(preset, D + F + order[i]), series_frame(D + F + order[i]),
                  NPIX * 2);
    bool concert = strcmp(preset, "concert") == 0;
    if (concert)
        send_json(&f, json_pack("{s:b}", "end", 1), NULL, 0), msgs++;
    result r = collect(&f, msgs);
    compare(&r, &ref, preset);
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.series"), 1);

    /* malformed input */
    send1(&f, "[1, 2]", 6); /* E_NOT_MAP */
    send_parts(&f, (const void *[]){"{\"x\":", darks}, (size_t[]){5, NPIX * 2},
               2); /* E_MALFORMED */
    json_t *h = json_header(preset, 0);
    json_object_set_new(h, "shape", json_string("8x64"));
    send_json(&f, h, darks, NPIX * 2);                          /* E_KEY_TYPE */
    send_json(&f, json_header(preset, 0), darks, NPIX * 2 - 2); /* E_PAYLOAD */
    send_json(&f, json_header(preset, 0), NULL, 0);             /* E_PARTS */
    h = json_header(preset, 0);
    json_object_set_new(h, concert ? "dtype" : "type", json_string("float64"));
    send_json(&f, h, darks, NPIX * 2); /* E_DTYPE */
    int expected = 6;
    if (strcmp(preset, "std-daq") == 0) {
        h = json_header(preset, 0);
        json_object_set_new(json_object_get(h, "image_attributes"), "scan_index", json_integer(5));
        send_json(&f, h, darks, NPIX * 2); /* E_KIND */
        h = json_header(preset, 0);
        json_object_del(json_object_get(h, "image_attributes"), "scan_index");
        send_json(&f, h, darks, NPIX * 2); /* E_MISSING */
        expected += 2;
    } else if (strcmp(preset, "array-1.0") == 0) {
        h = json_header(preset, 0);
        json_object_set_new(h, "htype", json_string("array-2.0"));
        send_json(&f, h, darks, NPIX * 2); /* E_TYPE */
        h = json_header(preset, 0);
        json_object_del(h, "frame");
        send_json(&f, h, darks, NPIX * 2); /* E_MISSING */
        expected += 2;
    }
    const char *names[] = {"E_NOT_MAP", "E_MALFORMED", "E_KEY_TYPE", "E_PAYLOAD",
                           "E_PARTS",   "E_DTYPE",     NULL};
    const long long counts[] = {1, 1, 1, 1, 1, 1};
    expect_rejections(&f, expected, names, counts);
    long long msgs0 = tl_fx_status_int(&f, "frames.messages");
    send_json(&f, json_header(preset, D + F + 1), projs + NPIX, NPIX * 2);
    ck_assert(tl_fx_wait_messages(&f, msgs0 + 1, 10));
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.rejected.protocol"), expected);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
    free_result(&r);
    free_result(&ref);
}

START_TEST(std_daq)
{
    json_preset("std-daq");
}
END_TEST

START_TEST(concert)
{
    json_preset("concert");
}
END_TEST

START_TEST(array_1_0)
{
    json_preset("array-1.0");
}
END_TEST

/* ---- tomopackets --------------------------------------------------------------------------- */

/* The wire's scalars, written with the helpers the RECAST3D link writes them with; the
 * packet types stay literal, as the tomopackets sources number them. */
static size_t tp_put(uint8_t *p, int32_t v)
{
    tl_tomop_put_i32(p, v);
    return 4;
}

static size_t tp_putf(uint8_t *p, float f)
{
    tl_tomop_put_f32(p, f);
    return 4;
}

/* Projection packet: type, id, shape, data (the camera counts as float32). */
static size_t tp_projection(uint8_t *p, int type, int id, int rows, int cols, int count,
                            const uint16_t *px)
{
    size_t n = 0;
    n += tp_put(p + n, 0x309);
    n += tp_put(p + n, type);
    n += tp_put(p + n, id);
    n += tp_put(p + n, rows);
    n += tp_put(p + n, cols);
    n += tp_put(p + n, count);
    for (int i = 0; i < count && px; i++)
        n += tp_putf(p + n, (float)px[i]);
    return n;
}

START_TEST(tomopackets)
{
    result ref = native(true);
    tl_fixture f;
    const char *args[] = {"--set", "ingest.format=tomopackets", NULL};
    start(&f, "tomop", args);
    uint8_t *p = malloc(64 + NPIX * 4 + 4 * N);
    size_t n = 0;
    n += tp_put(p + n, 0x301); /* GeometrySpecification */
    n += tp_put(p + n, 0);
    for (int i = 0; i < 6; i++)
        n += tp_putf(p + n, i < 3 ? -1.0f : 1.0f);
    send1(&f, p, n);
    n = 0;
    n += tp_put(p + n, 0x302); /* ScanSettings */
    n += tp_put(p + n, 0);
    n += tp_put(p + n, D);
    n += tp_put(p + n, F);
    p[n++] = 0;
    send1(&f, p, n);
    n = 0;
    n += tp_put(p + n, 0x303); /* ParallelBeamGeometry */
    n += tp_put(p + n, 0);
    n += tp_put(p + n, R);
    n += tp_put(p + n, W);
    n += tp_put(p + n, N);
    n += tp_put(p + n, N);
    for (int k = 0; k < N; k++)
        n += tp_putf(p + n, (float)(M_PI * k / N));
    send1(&f, p, n);
    long long msgs = 3;
    for (int k = 0; k < D + F; k++, msgs++)
        send1(&f, p,
              tp_projection(p, k < D ? 0 : 1, k < D ? k : k - D, R, W, (int)NPIX,
                            series_frame(k)));
    for (int i = 0; i < norder; i++, msgs++)
        send1(&f, p, tp_projection(p, 2, order[i], R, W, (int)NPIX, projs + order[i] * NPIX));
    result r = collect(&f, msgs);
    compare(&r, &ref, "tomopackets");

    /* malformed input */
    send1(&f, p, 2);                                                  /* E_MALFORMED */
    send1(&f, p, tp_projection(p, 2, 1, R, W, (int)NPIX - 1, projs)); /* E_PAYLOAD: count */
    send1(&f, p, tp_projection(p, 7, 1, R, W, (int)NPIX, projs));     /* E_KIND */
    size_t full = tp_projection(p, 2, 1, R, W, (int)NPIX, projs);
    send1(&f, p, full - 4); /* E_PAYLOAD: short */
    tp_put(p, 0x999);
    send1(&f, p, 32); /* E_TYPE */
    tp_put(p, 0x304);
    send1(&f, p, 48); /* E_UNSUPPORTED: ParallelVecGeometry (ConeVec: check_adapters.c) */
    n = 0;
    n += tp_put(p + n, 0x303);
    n += tp_put(p + n, 0);
    n += tp_put(p + n, R);
    n += tp_put(p + n, W);
    n += tp_put(p + n, N);
    n += tp_put(p + n, N - 1);     /* angles count differs from proj_count */
    send1(&f, p, n + 4 * (N - 1)); /* E_PAYLOAD */
    const char *names[] = {"E_MALFORMED", "E_PAYLOAD", "E_KIND", "E_TYPE", "E_UNSUPPORTED", NULL};
    const long long counts[] = {1, 3, 1, 1, 1};
    expect_rejections(&f, 7, names, counts);
    long long proj0 = tl_fx_status_int(&f, "frames.accepted.proj");
    send1(&f, p, tp_projection(p, 2, N + 5, R, W, (int)NPIX, projs)); /* the next turn */
    tl_fx_wait_status(&f, "frames.accepted.proj", proj0 + 1, 10);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.proj"), proj0 + 1);
    free(p);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
    free_result(&r);
    free_result(&ref);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("interop");
    TCase *tc = tcase_create("formats");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, dectris_v2);
    tcase_add_test(tc, dectris_v1);
    tcase_add_test(tc, std_daq);
    tcase_add_test(tc, concert);
    tcase_add_test(tc, array_1_0);
    tcase_add_test(tc, tomopackets);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
