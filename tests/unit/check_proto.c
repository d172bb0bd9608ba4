/* check_proto.c — protocol round trips: every message type is encoded with the public
 * encoders, decoded, and compared field by field with what went in; plus the name tables,
 * the slice topics ("slice/<id>/", and "shm/<id>/" for slices in shared memory), the frame
 * size arithmetic, and the checked-in golden headers (tests/fuzz/corpus, which also seed
 * the fuzzer) all decoding.
 *
 * Values are chosen to exercise encodings (integers above 2^32, negative and fractional
 * doubles, float32 orientation entries that are not exact in decimal), not just defaults.
 */
#include "config.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "protocol/protocol.h"
#include "tests/testutil.h"
#include "tests/unit/check_proto_util.h"

#define ALL                                                                             \
    (TL_MSG_SCAN | TL_MSG_FRAME | TL_MSG_END | TL_MSG_REQ | TL_MSG_REP | TL_MSG_SLICE | \
     TL_MSG_RELEASE)

static tl_proto_decoder *dec;
static msgpack_sbuffer sb;

static void setup(void)
{
    dec = tl_proto_decoder_new();
    ck_assert_ptr_nonnull(dec);
    msgpack_sbuffer_init(&sb);
}

static void teardown(void)
{
    tl_proto_decoder_free(dec);
    msgpack_sbuffer_destroy(&sb);
}

/* Decodes sb with every type accepted and fails the test with the decoder's message. */
static tl_proto_msg decode_ok(tl_msg_type want)
{
    tl_proto_msg m;
    tl_proto_error err;
    tl_proto_err rc = tl_proto_decode(dec, sb.data, sb.size, ALL, &m, &err);
    ck_assert_msg(rc == TL_PROTO_OK, "decode: %s: %s", tl_proto_err_name(rc), err.message);
    ck_assert_int_eq(err.code, TL_PROTO_OK);
    ck_assert_int_eq(m.type, want);
    return m;
}

static void assert_str(tl_proto_str s, const char *want)
{
    ck_assert_msg(tl_proto_str_eq(s, want), "got \"%.*s\", want \"%s\"", (int)s.len, s.ptr, want);
}

/* ---- scan ------------------------------------------------------------------------------ */

static void check_scan(const tl_proto_scan *in)
{
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_scan(&sb, in), 0);
    tl_proto_msg m = decode_ok(TL_MSG_SCAN);
    const tl_proto_scan *o = &m.scan;
    ck_assert_uint_eq(o->series, in->series);
    ck_assert_int_eq(o->geometry, in->geometry);
    ck_assert_uint_eq(o->rows, in->rows);
    ck_assert_uint_eq(o->cols, in->cols);
    ck_assert_int_eq(o->dtype, in->dtype);
    ck_assert_uint_eq(o->window, in->window);
    ck_assert_uint_eq(o->darks, in->darks);
    ck_assert_uint_eq(o->flats, in->flats);
    ck_assert_uint_eq(o->first_index, in->first_index);
    ck_assert_int_eq(o->has_center, in->has_center);
    if (in->has_center)
        ck_assert(o->center == in->center);
    ck_assert_int_eq(o->has_angles, in->has_angles);
    if (in->has_angles) {
        ck_assert(o->angle_start == in->angle_start);
        ck_assert(o->angle_step == in->angle_step);
    }
    ck_assert_uint_eq(o->filter.len, in->filter.len);
    if (in->filter.len)
        ck_assert_mem_eq(o->filter.ptr, in->filter.ptr, in->filter.len);
    ck_assert_int_eq(o->already_linear, in->already_linear);
    ck_assert(o->dezinger == in->dezinger);
    ck_assert_int_eq(o->has_paganin, in->has_paganin);
    if (in->has_paganin)
        for (int i = 0; i < 4; i++)
            ck_assert(o->paganin[i] == in->paganin[i]);
    ck_assert_int_eq(o->half_acquisition, in->half_acquisition);
    ck_assert_int_eq(o->has_auto_center, in->has_auto_center);
    ck_assert_int_eq(o->auto_center, in->auto_center);
    ck_assert_uint_eq(o->rings.len, in->rings.len);
    if (in->rings.len)
        ck_assert_mem_eq(o->rings.ptr, in->rings.ptr, in->rings.len);
    bool cone = in->geometry == TL_PROTO_CONE; /* the cone keys travel with cone only */
    ck_assert(o->source_origin == (cone ? in->source_origin : 0));
    ck_assert(o->source_detector == (cone ? in->source_detector : 0));
    for (int i = 0; i < 2; i++)
        ck_assert(o->pixel_size[i] == (cone ? in->pixel_size[i] : 0));
    ck_assert_int_eq(o->has_detector_offset, cone && in->has_detector_offset);
    for (int i = 0; cone && in->has_detector_offset && i < 2; i++)
        ck_assert(o->detector_offset[i] == in->detector_offset[i]);
    ck_assert_int_eq(o->has_short_scan, cone && in->has_short_scan);
    for (int i = 0; cone && in->has_short_scan && i < 2; i++)
        ck_assert(o->short_scan[i] == in->short_scan[i]);
    ck_assert_uint_eq(o->nmatrices, cone ? in->nmatrices : 0);
    ck_assert((o->matrices != NULL) == (o->nmatrices != 0));
    for (uint32_t i = 0; i < o->nmatrices; i++) /* bit for bit: float64 on the wire */
        ck_assert_mem_eq(o->matrices[i], in->matrices[i], sizeof o->matrices[i]);
    tl_proto_scan_free(&m.scan);
    ck_assert_ptr_null(m.scan.matrices);
    tl_proto_scan_free(&m.scan); /* twice is harmless */
}

START_TEST(scan_required_only)
{
    tl_proto_scan s = {.series = 1,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = 2048,
                       .cols = 2560,
                       .dtype = TL_PROTO_U16,
                       .window = 1800};
    check_scan(&s);
}
END_TEST

START_TEST(scan_all_optional)
{
    const char *filt = "shepp-logan";
    tl_proto_scan s = {.series = 0x123456789abull,
                       .geometry = TL_PROTO_CONE,
                       .rows = 7,
                       .cols = 65536,
                       .dtype = TL_PROTO_F32,
                       .window = TL_PROTO_MAX_WINDOW,
                       .darks = 20,
                       .flats = 4000000000u,
                       .first_index = 1ull << 40,
                       .has_center = true,
                       .center = 1279.25,
                       .has_angles = true,
                       .angle_start = -M_PI / 3,
                       .angle_step = M_PI / 1800,
                       .filter = {filt, strlen(filt)},
                       .already_linear = true,
                       .dezinger = 250.5,
                       .has_paganin = true,
                       .paganin = {30.0f, 0.25f, 6.5f, 300.0f},
                       .rings = {"fw:4,0.002", 10},
                       .half_acquisition = true,
                       .has_auto_center = true,
                       .auto_center = false,
                       .source_origin = 512.5,
                       .source_detector = 1024.25,
                       .pixel_size = {0.075, 0.15},
                       .has_detector_offset = true,
                       .detector_offset = {0, -3.25}}; /* u 0: with center */
    check_scan(&s);
}
END_TEST

/* Cone beam (PROTOCOL.md 8.1.1): square pixels go as one number, others as [u, v]; the
 * offset only when set; a parallel scan carries none of the keys, whatever the struct
 * holds. */
START_TEST(scan_cone)
{
    tl_proto_scan s = {.series = 9,
                       .geometry = TL_PROTO_CONE,
                       .rows = 96,
                       .cols = 128,
                       .dtype = TL_PROTO_U16,
                       .window = 360,
                       .source_origin = 300,
                       .source_detector = 450,
                       .pixel_size = {0.2, 0.2}};
    check_scan(&s);
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_scan(&sb, &s), 0);
    size_t square = sb.size;
    s.pixel_size[1] = 0.25;
    s.has_detector_offset = true;
    s.detector_offset[0] = 2.5; /* no center: the offset places the principal column */
    s.detector_offset[1] = -1.75;
    s.has_short_scan = true;
    s.short_scan[0] = -0.25;
    s.short_scan[1] = 3.75;
    check_scan(&s);
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_scan(&sb, &s), 0);
    ck_assert_uint_gt(sb.size, square); /* [u, v] and the offset: more bytes */
    s.geometry = TL_PROTO_PARALLEL;     /* the same struct as parallel: no cone key goes out */
    check_scan(&s);
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_scan(&sb, &s), 0);
    ck_assert(!memmem(sb.data, sb.size, "source_origin", 13));
    ck_assert(!memmem(sb.data, sb.size, "pixel_size", 10));
}
END_TEST

/* n matrices that differ in every number (so a swapped row or matrix shows). */
static double (*some_matrices(uint32_t n))[12]
{
    double(*P)[12] = malloc(n * sizeof *P);
    ck_assert_ptr_nonnull(P);
    for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 12; k++)
            P[i][k] = (k % 5 == 0 ? 700.0 : 0.0) + i * 0.001 + k / 3.0 - 1.0 / (i + 7.0);
    return P;
}

/* Arbitrary trajectories (PROTOCOL.md 8.1.1 "matrices"): float64 both ways, the count
 * kept; a parallel scan carries none even when the struct holds some. */
START_TEST(scan_matrices)
{
    tl_proto_scan s = {.series = 11,
                       .geometry = TL_PROTO_CONE,
                       .rows = 96,
                       .cols = 128,
                       .dtype = TL_PROTO_U16,
                       .window = 3,
                       .first_index = 5,
                       .source_origin = 300,
                       .source_detector = 450,
                       .pixel_size = {0.2, 0.2},
                       .has_detector_offset = true,
                       .detector_offset = {0, 1.5}, /* v stays: the isocentre's row */
                       .nmatrices = 3};
    s.matrices = some_matrices(3);
    check_scan(&s);
    s.geometry = TL_PROTO_PARALLEL;
    check_scan(&s);
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_scan(&sb, &s), 0);
    ck_assert(!memmem(sb.data, sb.size, "matrices", 8));
    free(s.matrices);
}
END_TEST

/* The limit: TL_PROTO_MAX_MATRICES fit a header that has every other key at its longest;
 * one more is refused, naming the count, and the scan then holds nothing. */
START_TEST(scan_matrices_limit)
{
    char release[TL_PROTO_MAX_ENDPOINT + 1], name[33];
    memset(release, 'r', TL_PROTO_MAX_ENDPOINT);
    memset(name, 'f', 32);
    tl_proto_scan s = {.series = UINT64_MAX,
                       .geometry = TL_PROTO_CONE,
                       .rows = 65536,
                       .cols = 8192,
                       .dtype = TL_PROTO_U16,
                       .window = TL_PROTO_MAX_WINDOW,
                       .darks = UINT32_MAX,
                       .flats = UINT32_MAX,
                       .first_index = UINT64_MAX - TL_PROTO_MAX_MATRICES,
                       .has_angles = true,
                       .angle_start = -M_PI / 3,
                       .angle_step = M_PI / 1800,
                       .filter = {name, 32},
                       .already_linear = true,
                       .release = {release, TL_PROTO_MAX_ENDPOINT},
                       .dezinger = 250.5,
                       .has_paganin = true,
                       .paganin = {30.0f, 0.25f, 6.5f, 300.0f},
                       .rings = {name, 32},
                       .half_acquisition = true,
                       .has_auto_center = true,
                       .source_origin = 512.5,
                       .source_detector = 1024.25,
                       .pixel_size = {0.075, 0.15},
                       .has_detector_offset = true,
                       .detector_offset = {0, -3.25},
                       .nmatrices = TL_PROTO_MAX_MATRICES};
    s.matrices = some_matrices(TL_PROTO_MAX_MATRICES + 1);
    check_scan(&s);
    ck_assert_uint_le(sb.size, TL_PROTO_MAX_HEADER);
    s.nmatrices++;
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_scan(&sb, &s), 0);
    tl_proto_msg m;
    tl_proto_error err;
    ck_assert_int_eq(tl_proto_decode(dec, sb.data, sb.size, ALL, &m, &err), TL_PROTO_E_RANGE);
    ck_assert_msg(strstr(err.message, "513") && strstr(err.message, "matrices"), "%s",
                  err.message);
    ck_assert_ptr_null(m.scan.matrices);
    free(s.matrices);
}
END_TEST

/* ---- frame ----------------------------------------------------------------------------- */

/* One loop iteration per (kind, dtype); odd iterations also carry every optional key. */
START_TEST(frame_each_kind_dtype)
{
    tl_proto_kind kind = (tl_proto_kind)(_i / 4);
    tl_proto_dtype dtype = (tl_proto_dtype)(_i % 4);
    bool opt = _i % 2;
    tl_proto_frame f = {.series = 9,
                        .index = (uint64_t)_i * 1000003u + (1ull << 33),
                        .kind = kind,
                        .dtype = dtype,
                        .rows = 3 + (uint32_t)_i,
                        .cols = 5,
                        .has_angle = opt,
                        .angle = opt ? -0.7853981633974483 : 0,
                        .has_t_acq = opt,
                        .t_acq = opt ? 1761234567890123456ull : 0,
                        .has_center_offset = opt,
                        .center_offset = opt ? -0.375 : 0};
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_frame(&sb, &f), 0);
    tl_proto_msg m = decode_ok(TL_MSG_FRAME);
    const tl_proto_frame *o = &m.frame;
    ck_assert_uint_eq(o->series, f.series);
    ck_assert_uint_eq(o->index, f.index);
    ck_assert_int_eq(o->kind, kind);
    ck_assert_int_eq(o->dtype, dtype);
    ck_assert_uint_eq(o->rows, f.rows);
    ck_assert_uint_eq(o->cols, f.cols);
    ck_assert_int_eq(o->has_angle, opt);
    ck_assert(o->angle == f.angle);
    ck_assert_int_eq(o->has_t_acq, opt);
    ck_assert_uint_eq(o->t_acq, f.t_acq);
    ck_assert_int_eq(o->has_center_offset, opt);
    ck_assert(o->center_offset == f.center_offset);
    ck_assert_ptr_null(o->payload); /* header-only decode */
    ck_assert_uint_eq(o->payload_len, 0);
}
END_TEST

/* A frame in GPU memory: the ipc_* keys round-trip, the handle byte for byte, and the whole
 * message is one part (no payload). */
START_TEST(frame_band_roundtrip)
{
    tl_proto_frame f = {.series = 3,
                        .index = 9,
                        .kind = TL_PROTO_DARK,
                        .dtype = TL_PROTO_U16,
                        .rows = 2048,
                        .cols = 2048,
                        .has_band = true,
                        .band_first = 1536,
                        .band_rows = 512};
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_frame(&sb, &f), 0);
    tl_proto_msg m = decode_ok(TL_MSG_FRAME);
    ck_assert(m.frame.has_band);
    ck_assert_uint_eq(m.frame.band_first, 1536);
    ck_assert_uint_eq(m.frame.band_rows, 512);
    ck_assert_uint_eq(m.frame.rows, 2048);
    f.has_band = false; /* without: no key, and the band is the whole frame */
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_frame(&sb, &f), 0);
    m = decode_ok(TL_MSG_FRAME);
    ck_assert(!m.frame.has_band);
    ck_assert_uint_eq(m.frame.band_first, 0);
    ck_assert_uint_eq(m.frame.band_rows, 2048);
}
END_TEST

START_TEST(frame_in_gpu_memory)
{
    uint8_t handle[TL_PROTO_IPC_HANDLE];
    for (int i = 0; i < TL_PROTO_IPC_HANDLE; i++)
        handle[i] = (uint8_t)(i * 37 + 11);
    const char *uuid = "GPU-8695f54f-567f-78f5-adb5-abcd659e9ff1";
    tl_proto_frame f = {.series = 3,
                        .index = 1ull << 35,
                        .kind = TL_PROTO_PROJ,
                        .dtype = TL_PROTO_U16,
                        .rows = 2048,
                        .cols = 2048,
                        .has_angle = true,
                        .angle = 1.25,
                        .has_ipc = true,
                        .ipc = {.handle = handle,
                                .buffer = 1ull << 40,
                                .size = 64ull << 20,
                                .offset = 8ull << 20,
                                .pitch = 4608,
                                .device = {uuid, strlen(uuid)},
                                .slot = 77}};
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_frame(&sb, &f), 0);
    tl_proto_msg m = decode_ok(TL_MSG_FRAME);
    const tl_proto_frame *o = &m.frame;
    ck_assert(o->has_ipc);
    ck_assert_mem_eq(o->ipc.handle, handle, TL_PROTO_IPC_HANDLE);
    ck_assert_uint_eq(o->ipc.buffer, f.ipc.buffer);
    ck_assert_uint_eq(o->ipc.size, f.ipc.size);
    ck_assert_uint_eq(o->ipc.offset, f.ipc.offset);
    ck_assert_uint_eq(o->ipc.pitch, f.ipc.pitch);
    assert_str(o->ipc.device, uuid);
    ck_assert_uint_eq(o->ipc.slot, 77);
    ck_assert_uint_eq(o->rows, 2048);

    zmq_msg_t part;
    zmq_msg_init_size(&part, sb.size);
    memcpy(zmq_msg_data(&part), sb.data, sb.size);
    tl_proto_error err;
    tl_proto_err rc = tl_proto_decode_parts(dec, &part, 1, TL_PROTO_INGEST, &m, &err);
    ck_assert_msg(rc == TL_PROTO_OK, "%s", err.message);
    ck_assert(m.frame.has_ipc);
    ck_assert_ptr_null(m.frame.payload);
    zmq_msg_close(&part);
}
END_TEST

START_TEST(release_roundtrip)
{
    const char *ep = "ipc:///run/camera/release";
    tl_proto_scan sc = {.series = 3,
                        .geometry = TL_PROTO_PARALLEL,
                        .rows = 8,
                        .cols = 8,
                        .dtype = TL_PROTO_U16,
                        .window = 10,
                        .release = {ep, strlen(ep)}};
    msgpack_sbuffer_clear(&sb);
    ck_assert_int_eq(tl_proto_encode_scan(&sb, &sc), 0);
    tl_proto_msg m = decode_ok(TL_MSG_SCAN);
    assert_str(m.scan.release, ep);

    for (int ok = 0; ok < 2; ok++) {
        const char *why = "frame 9: not supported";
        tl_proto_release r = {.series = UINT64_MAX,
                              .index = 9,
                              .slot = 4000000000u,
                              .ok = ok,
                              .code = TL_PROTO_E_UNSUPPORTED,
                              .message = {why, strlen(why)}};
        msgpack_sbuffer_clear(&sb);
        ck_assert_int_eq(tl_proto_encode_release(&sb, &r), 0);
        m = decode_ok(TL_MSG_RELEASE);
        ck_assert_uint_eq(m.release.series, UINT64_MAX);
        ck_assert_uint_eq(m.release.index, 9);
        ck_assert_uint_eq(m.release.slot, 4000000000u);
        ck_assert_int_eq(m.release.ok, ok);
        if (!ok) {
            ck_assert_int_eq(m.release.code, TL_PROTO_E_UNSUPPORTED);
            assert_str(m.release.message, why);
        }
    }
}
END_TEST

START_TEST(end_roundtrip)
{
    tl_proto_end e = {.series = UINT64_MAX};
    ck_assert_int_eq(tl_proto_encode_end(&sb, &e), 0);
    tl_proto_msg m = decode_ok(TL_MSG_END);
    ck_assert_uint_eq(m.end.series, UINT64_MAX);
}
END_TEST

/* ---- control --------------------------------------------------------------------------- */

START_TEST(req_without_args)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ck_assert_int_eq(tl_proto_begin_req(&pk, 77, "status", false), 0);
    tl_proto_msg m = decode_ok(TL_MSG_REQ);
    ck_assert_uint_eq(m.req.id, 77);
    assert_str(m.req.cmd, "status");
    ck_assert_ptr_null(m.req.args);
}
END_TEST

START_TEST(req_with_args)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ck_assert_int_eq(tl_proto_begin_req(&pk, 1ull << 50, "set_slice", true), 0);
    msgpack_pack_map(&pk, 4);
    tl_proto_pack_kv_str(&pk, "id", "z-top.1");
    tl_proto_pack_kv_u64(&pk, "z", 1023);
    tl_proto_pack_kv_double(&pk, "gain", -2.5e-3);
    tl_proto_pack_kv_bool(&pk, "pinned", true);
    tl_proto_msg m = decode_ok(TL_MSG_REQ);
    ck_assert_uint_eq(m.req.id, 1ull << 50);
    assert_str(m.req.cmd, "set_slice");
    ck_assert_ptr_nonnull(m.req.args);
    ck_assert_int_eq(m.req.args->type, MSGPACK_OBJECT_MAP);

    tl_proto_error err;
    tl_proto_str id;
    uint32_t z;
    double gain;
    bool pinned;
    ck_assert_int_eq(tl_proto_get_str(m.req.args, "id", true, &id, &err), TL_PROTO_OK);
    assert_str(id, "z-top.1");
    ck_assert_int_eq(tl_proto_get_u32(m.req.args, "z", true, &z, &err), TL_PROTO_OK);
    ck_assert_uint_eq(z, 1023);
    ck_assert_int_eq(tl_proto_get_double(m.req.args, "gain", true, &gain, &err), TL_PROTO_OK);
    ck_assert(gain == -2.5e-3);
    ck_assert_int_eq(tl_proto_get_bool(m.req.args, "pinned", true, &pinned, &err), TL_PROTO_OK);
    ck_assert(pinned);
}
END_TEST

START_TEST(rep_ok_with_result)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ck_assert_int_eq(tl_proto_begin_rep_ok(&pk, 12), 0);
    msgpack_pack_map(&pk, 2);
    tl_proto_pack_kv_u64(&pk, "frames", 123456789012ull);
    tl_proto_pack_cstr(&pk, "versions");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint64(&pk, 1);
    tl_proto_msg m = decode_ok(TL_MSG_REP);
    ck_assert_uint_eq(m.rep.id, 12);
    ck_assert(m.rep.ok);
    ck_assert_ptr_nonnull(m.rep.result);
    uint64_t frames;
    tl_proto_error err;
    ck_assert_int_eq(tl_proto_get_u64(m.rep.result, "frames", true, &frames, &err), 0);
    ck_assert_uint_eq(frames, 123456789012ull);
    const msgpack_object *v = tl_proto_map_get(m.rep.result, "versions");
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->type, MSGPACK_OBJECT_ARRAY);
    ck_assert_uint_eq(v->via.array.size, 1);
    ck_assert_uint_eq(v->via.array.ptr[0].via.u64, TL_PROTO_VERSION);
}
END_TEST

START_TEST(rep_ok_nil_result)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ck_assert_int_eq(tl_proto_begin_rep_ok(&pk, 3), 0);
    msgpack_pack_nil(&pk);
    tl_proto_msg m = decode_ok(TL_MSG_REP);
    ck_assert(m.rep.ok);
    ck_assert_ptr_null(m.rep.result);
}
END_TEST

START_TEST(rep_error)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    const char *msg = "no slice \"z9\"";
    ck_assert_int_eq(tl_proto_pack_rep_error(&pk, 99, TL_PROTO_E_NOT_FOUND, msg), 0);
    tl_proto_msg m = decode_ok(TL_MSG_REP);
    ck_assert_uint_eq(m.rep.id, 99);
    ck_assert(!m.rep.ok);
    ck_assert_int_eq(m.rep.code, TL_PROTO_E_NOT_FOUND);
    assert_str(m.rep.message, msg);
    ck_assert_ptr_null(m.rep.result);
}
END_TEST

/* ---- slice ----------------------------------------------------------------------------- */

START_TEST(slice_roundtrip)
{
    bool opt = _i == 1;
    const char *id = opt ? "ortho_x.0-A" : "z";
    const char *kern = "cpu-ref";
    tl_proto_slice s = {.id = {id, strlen(id)},
                        .seq = 1ull << 35,
                        .shape = {512, 384},
                        .dtype = TL_PROTO_F32,
                        .orientation = {1.0f, 0, 0, 0, 0.1f, -1.0f / 3, -256.5f, 1e-7f, 3e7f},
                        .projections_used = 1799,
                        .missing = 1,
                        .window_first = 100,
                        .window_last = 1899,
                        .t_acq = 1761234567890123456ull,
                        .t_pub = 1761234567899999999ull,
                        .t_recv = opt ? 1761234567891ull : 0,
                        .t_done = opt ? 1761234567898ull : 0,
                        .final = opt,
                        .kernel = {kern, strlen(kern)},
                        .iterations = opt ? 7 : 0, /* an iterative slice's keys */
                        .residual = opt ? 0.03125 : 0,
                        .planes = opt ? 4 : 0, /* a box's keys: 4 planes of 128 rows */
                        .box_step = opt ? 1.5 : 0};
    ck_assert_int_eq(tl_proto_encode_slice(&sb, &s), 0);
    tl_proto_msg m = decode_ok(TL_MSG_SLICE);
    const tl_proto_slice *o = &m.slice;
    assert_str(o->id, id);
    ck_assert_uint_eq(o->seq, s.seq);
    ck_assert_uint_eq(o->shape[0], 512);
    ck_assert_uint_eq(o->shape[1], 384);
    ck_assert_int_eq(o->dtype, TL_PROTO_F32);
    for (int i = 0; i < 9; i++)
        ck_assert_msg(o->orientation[i] == s.orientation[i], "orientation[%d]", i);
    ck_assert_uint_eq(o->projections_used, 1799);
    ck_assert_uint_eq(o->missing, 1);
    ck_assert_uint_eq(o->window_first, 100);
    ck_assert_uint_eq(o->window_last, 1899);
    ck_assert_uint_eq(o->t_acq, s.t_acq);
    ck_assert_uint_eq(o->t_pub, s.t_pub);
    ck_assert_uint_eq(o->t_recv, s.t_recv);
    ck_assert_uint_eq(o->t_done, s.t_done);
    ck_assert_int_eq(o->final, opt);
    assert_str(o->kernel, kern);
    ck_assert_uint_eq(o->iterations, s.iterations);
    ck_assert(o->residual == s.residual);
    ck_assert_uint_eq(o->planes, s.planes);
    ck_assert(o->box_step == s.box_step);
    ck_assert(!o->has_shm); /* no shm keys were written (check_corpus.sh: byte for byte) */
}
END_TEST

/* A slice in shared memory (PROTOCOL.md 10.1): name and offset come back; the message is
 * [topic "shm/<id>/", header], and decode_parts takes it with 2 parts and no payload. */
START_TEST(slice_shm_roundtrip)
{
    char name[TL_PROTO_SHM_NAME_MAX + 1] = "/tomolive-z0-3";
    if (_i == 1) { /* the longest name, and an offset beyond 4 GiB */
        memset(name + 1, 'n', TL_PROTO_SHM_NAME_MAX - 1);
        name[TL_PROTO_SHM_NAME_MAX] = 0;
    }
    uint64_t offset = _i == 1 ? (5ull << 32) + 4096 : 4096;
    tl_proto_slice s = {.id = {"z0", 2},
                        .seq = 12,
                        .shape = {256, 128},
                        .dtype = TL_PROTO_F32,
                        .orientation = {256, 0, 0, 0, 128, 0, -128, -64, 3},
                        .projections_used = 90,
                        .window_last = 89,
                        .t_acq = 1,
                        .t_pub = 2,
                        .final = _i == 1,
                        .kernel = {"cpu-ref", 7},
                        .has_shm = true,
                        .shm_name = {name, strlen(name)},
                        .shm_offset = offset};
    ck_assert_int_eq(tl_proto_encode_slice(&sb, &s), 0);
    tl_proto_msg m = decode_ok(TL_MSG_SLICE);
    ck_assert(m.slice.has_shm);
    assert_str(m.slice.shm_name, name);
    ck_assert_uint_eq(m.slice.shm_offset, offset);
    ck_assert_uint_eq(m.slice.seq, 12);
    ck_assert_int_eq(m.slice.final, _i == 1);
    assert_str(m.slice.kernel, "cpu-ref");
    ck_assert_ptr_null(m.slice.payload);
    ck_assert_uint_eq(m.slice.payload_len, 0);

    char topic[80];
    size_t tn = tl_proto_shm_topic(topic, sizeof topic, "z0", 2);
    zmq_msg_t parts[2];
    zmq_msg_init_data(&parts[0], topic, tn, NULL, NULL);
    zmq_msg_init_data(&parts[1], sb.data, sb.size, NULL, NULL);
    tl_proto_msg p;
    tl_proto_error err;
    tl_proto_err rc = tl_proto_decode_parts(dec, parts, 2, TL_MSG_SLICE, &p, &err);
    ck_assert_msg(rc == TL_PROTO_OK, "%s: %s", tl_proto_err_name(rc), err.message);
    ck_assert(p.slice.has_shm);
    assert_str(p.slice.id, "z0");
    assert_str(p.slice.shm_name, name);
    ck_assert_uint_eq(p.slice.shm_offset, offset);
    ck_assert_uint_eq(p.slice.payload_len, 0);
    tl_proto_close(parts, 2);
}
END_TEST

/* ---- names, topic, sizes ---------------------------------------------------------------- */

START_TEST(names)
{
    const char *dn[] = {"u8", "u16", "u32", "f32"};
    const size_t ds[] = {1, 2, 4, 4};
    for (int i = 0; i < 4; i++) {
        tl_proto_dtype t;
        ck_assert_str_eq(tl_proto_dtype_name((tl_proto_dtype)i), dn[i]);
        ck_assert_uint_eq(tl_proto_dtype_size((tl_proto_dtype)i), ds[i]);
        ck_assert(tl_proto_dtype_parse(dn[i], strlen(dn[i]), &t));
        ck_assert_int_eq(t, i);
    }
    const char *kn[] = {"dark", "flat", "proj"};
    for (int i = 0; i < 3; i++) {
        tl_proto_kind k;
        ck_assert_str_eq(tl_proto_kind_name((tl_proto_kind)i), kn[i]);
        ck_assert(tl_proto_kind_parse(kn[i], strlen(kn[i]), &k));
        ck_assert_int_eq(k, i);
    }
    ck_assert_str_eq(tl_proto_geometry_name(TL_PROTO_PARALLEL), "parallel");
    ck_assert_str_eq(tl_proto_geometry_name(TL_PROTO_CONE), "cone");
    tl_proto_dtype t;
    ck_assert(!tl_proto_dtype_parse("u1", 2, &t));    /* prefix of u16 */
    ck_assert(!tl_proto_dtype_parse("u16 ", 4, &t));  /* trailing space */
    ck_assert(!tl_proto_dtype_parse("u8\0x", 4, &t)); /* embedded NUL */
    ck_assert_str_eq(tl_proto_dtype_name((tl_proto_dtype)9), "?");
    ck_assert_uint_eq(tl_proto_dtype_size((tl_proto_dtype)9), 0);

    /* every error code has its own name */
    const tl_proto_err codes[] =
        {TL_PROTO_OK,        TL_PROTO_E_PARTS,       TL_PROTO_E_TOO_BIG,  TL_PROTO_E_MALFORMED,
         TL_PROTO_E_LIMIT,   TL_PROTO_E_NOT_MAP,     TL_PROTO_E_DUP_KEY,  TL_PROTO_E_VERSION,
         TL_PROTO_E_TYPE,    TL_PROTO_E_MISSING,     TL_PROTO_E_KEY_TYPE, TL_PROTO_E_NOT_FINITE,
         TL_PROTO_E_RANGE,   TL_PROTO_E_DTYPE,       TL_PROTO_E_KIND,     TL_PROTO_E_OVERFLOW,
         TL_PROTO_E_PAYLOAD, TL_PROTO_E_UNKNOWN_CMD, TL_PROTO_E_BAD_ARG,  TL_PROTO_E_NOT_FOUND,
         TL_PROTO_E_STATE,   TL_PROTO_E_UNSUPPORTED, TL_PROTO_E_RESOURCE, TL_PROTO_E_INTERNAL,
         TL_PROTO_E_DENIED};
    size_t nc = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < nc; i++) {
        ck_assert_str_ne(tl_proto_err_name(codes[i]), "E_?");
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(tl_proto_err_name(codes[i]), tl_proto_err_name(codes[j]));
    }
    ck_assert_str_eq(tl_proto_err_name((tl_proto_err)17), "E_?");
    ck_assert_str_eq(tl_proto_err_name(TL_PROTO_E_PAYLOAD), "E_PAYLOAD");

    tl_proto_error err;
    ck_assert_int_eq(tl_proto_fail(&err, TL_PROTO_E_RANGE, "x=%d", 5), TL_PROTO_E_RANGE);
    ck_assert_int_eq(err.code, TL_PROTO_E_RANGE);
    ck_assert_str_eq(err.message, "x=5");
    ck_assert_int_eq(tl_proto_fail(NULL, TL_PROTO_E_KIND, "ignored"), TL_PROTO_E_KIND);
}
END_TEST

START_TEST(slice_topic)
{
    char a[80], b[80];
    size_t na = tl_proto_slice_topic(a, sizeof a, "1", 1);
    size_t nb = tl_proto_slice_topic(b, sizeof b, "10", 2);
    ck_assert_uint_eq(na, strlen("slice/1/"));
    ck_assert_str_eq(a, "slice/1/");
    ck_assert_str_eq(b, "slice/10/");
    /* prefix-free: a subscription to slice 1 must not match slice 10 */
    ck_assert(nb < na || memcmp(a, b, na) != 0);
    ck_assert_uint_eq(tl_proto_slice_topic(a, na, "1", 1), 0); /* no room for the NUL */
    ck_assert_uint_eq(tl_proto_slice_topic(a, na + 1, "1", 1), na);
    ck_assert_uint_eq(tl_proto_slice_topic(a, sizeof a, "", 0), 0); /* invalid ids */
    ck_assert_uint_eq(tl_proto_slice_topic(a, sizeof a, "a/b", 3), 0);
    ck_assert_uint_eq(tl_proto_slice_topic(a, sizeof a, "a b", 3), 0);
    char id[TL_PROTO_MAX_ID + 2];
    memset(id, 'x', sizeof id);
    ck_assert_uint_eq(tl_proto_slice_topic(a, sizeof a, id, TL_PROTO_MAX_ID), 7 + 64);
    ck_assert_uint_eq(tl_proto_slice_topic(a, sizeof a, id, TL_PROTO_MAX_ID + 1), 0);
}
END_TEST

START_TEST(shm_topic)
{
    char a[80];
    ck_assert_uint_eq(tl_proto_shm_topic(a, sizeof a, "1", 1), strlen("shm/1/"));
    ck_assert_str_eq(a, "shm/1/");
    ck_assert_uint_eq(tl_proto_shm_topic(a, sizeof a, "row.0_x-1", 9), strlen("shm/row.0_x-1/"));
    ck_assert_str_eq(a, "shm/row.0_x-1/");
    ck_assert_uint_eq(tl_proto_shm_topic(a, 6, "1", 1), 0); /* no room for the NUL */
    ck_assert_uint_eq(tl_proto_shm_topic(a, 7, "1", 1), 6);
    ck_assert_uint_eq(tl_proto_shm_topic(a, sizeof a, "", 0), 0); /* invalid ids */
    ck_assert_uint_eq(tl_proto_shm_topic(a, sizeof a, "a/b", 3), 0);
    char id[TL_PROTO_MAX_ID + 1];
    memset(id, 'x', sizeof id);
    ck_assert_uint_eq(tl_proto_shm_topic(a, sizeof a, id, TL_PROTO_MAX_ID), 5 + 64);
    ck_assert_uint_eq(tl_proto_shm_topic(a, sizeof a, id, TL_PROTO_MAX_ID + 1), 0);
    /* neither kind of topic is a prefix of the other: a subscriber gets one delivery */
    char b[80];
    size_t ns = tl_proto_slice_topic(b, sizeof b, "1", 1);
    ck_assert(memcmp(a, b, 4) != 0 && ns > 0);
}
END_TEST

START_TEST(frame_bytes)
{
    size_t n = 0;
    tl_proto_error err;
    ck_assert_int_eq(tl_proto_frame_bytes(2048, 2560, TL_PROTO_U16, &n, &err), TL_PROTO_OK);
    ck_assert_uint_eq(n, 2048u * 2560u * 2u);
    /* the limit is exclusive: 2^31 - 65536 fits, 2^31 does not */
    ck_assert_int_eq(tl_proto_frame_bytes(32767, 65536, TL_PROTO_U8, &n, &err), TL_PROTO_OK);
    ck_assert_uint_eq(n, 32767u * 65536u);
    ck_assert_int_eq(tl_proto_frame_bytes(32768, 65536, TL_PROTO_U8, &n, &err),
                     TL_PROTO_E_OVERFLOW);
    ck_assert_int_eq(tl_proto_frame_bytes(65536, 65536, TL_PROTO_F32, &n, &err),
                     TL_PROTO_E_OVERFLOW);
    /* 64-bit wrap-around: (2^32-1)^2 * 4 overflows uint64 */
    ck_assert_int_eq(tl_proto_frame_bytes(UINT32_MAX, UINT32_MAX, TL_PROTO_F32, &n, &err),
                     TL_PROTO_E_OVERFLOW);
    ck_assert_int_eq(tl_proto_frame_bytes(0, 5, TL_PROTO_U8, &n, &err), TL_PROTO_E_RANGE);
    ck_assert_int_eq(tl_proto_frame_bytes(5, 5, (tl_proto_dtype)7, &n, &err), TL_PROTO_E_DTYPE);
    ck_assert_int_eq(tl_proto_check_payload(3, 5, TL_PROTO_U32, 60, &err), TL_PROTO_OK);
    ck_assert_int_eq(tl_proto_check_payload(3, 5, TL_PROTO_U32, 59, &err), TL_PROTO_E_PAYLOAD);
    ck_assert_int_eq(tl_proto_check_payload(3, 5, TL_PROTO_U32, 61, &err), TL_PROTO_E_PAYLOAD);
    ck_assert_ptr_nonnull(strstr(err.message, "61"));
}
END_TEST

/* Headers of exactly the limit are accepted (the unknown filler key is ignored). */
START_TEST(header_at_limit)
{
    static char filler[TL_PROTO_MAX_HEADER];
    tlt_pack_text(&sb, "{\"v\": 1, \"type\": \"end\", \"series\": 4, \"pad\": \"\"}");
    size_t base = sb.size - 1;                   /* without the empty str */
    size_t pad = TL_PROTO_MAX_HEADER - base - 3; /* str16 header is 3 bytes */
    memset(filler, 'p', pad);
    msgpack_sbuffer_clear(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 4);
    tl_proto_pack_kv_u64(&pk, "v", 1);
    tl_proto_pack_kv_str(&pk, "type", "end");
    tl_proto_pack_kv_u64(&pk, "series", 4);
    tl_proto_pack_cstr(&pk, "pad");
    msgpack_pack_str_with_body(&pk, filler, pad);
    ck_assert_uint_eq(sb.size, TL_PROTO_MAX_HEADER);
    tl_proto_msg m = decode_ok(TL_MSG_END);
    ck_assert_uint_eq(m.end.series, 4);
}
END_TEST

/* The checked-in golden headers (also the fuzz seed corpus) all decode. */
START_TEST(golden_corpus)
{
    const char *top = getenv("top_srcdir");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus", top ? top : ".");
    DIR *dp = opendir(dir);
    ck_assert_msg(dp != NULL, "cannot open %s", dir);
    int files = 0, types = 0, shm = 0, matrices = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.')
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        ck_assert_ptr_nonnull(f);
        static char buf[TL_PROTO_MAX_HEADER + 1];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        tl_proto_msg m;
        tl_proto_error err;
        tl_proto_err rc = tl_proto_decode(dec, buf, n, ALL, &m, &err);
        ck_assert_msg(rc == TL_PROTO_OK, "%s: %s: %s", e->d_name, tl_proto_err_name(rc),
                      err.message);
        types |= m.type;
        files++;
        shm += m.type == TL_MSG_SLICE && m.slice.has_shm;
        if (m.type == TL_MSG_SCAN) {
            matrices += m.scan.nmatrices == 4 && m.scan.matrices[3][11] == 400;
            tl_proto_scan_free(&m.scan);
        }
    }
    closedir(dp);
    ck_assert_int_ge(files, 6);
    ck_assert_msg(matrices == 1, "%d golden scans with matrices", matrices);
    ck_assert_msg(shm == 1, "%d golden slices in shared memory", shm);
    ck_assert_int_eq(types, ALL); /* every type has a golden header */
}
END_TEST

/* Many decodes on one decoder: results of each are right although the zone is reused. */
START_TEST(decoder_reuse)
{
    for (uint64_t i = 0; i < 1000; i++) {
        msgpack_sbuffer_clear(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        tl_proto_begin_req(&pk, i, i % 2 ? "status" : "get", true);
        msgpack_pack_map(&pk, 1);
        tl_proto_pack_kv_u64(&pk, "n", i * 3);
        tl_proto_msg m = decode_ok(TL_MSG_REQ);
        uint64_t n = 0;
        ck_assert_int_eq(tl_proto_get_u64(m.req.args, "n", true, &n, NULL), TL_PROTO_OK);
        ck_assert_uint_eq(n, i * 3);
        ck_assert_uint_eq(m.req.id, i);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("proto");
    TCase *tc = tcase_create("roundtrip");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, scan_required_only);
    tcase_add_test(tc, scan_all_optional);
    tcase_add_test(tc, scan_cone);
    tcase_add_test(tc, scan_matrices);
    tcase_add_test(tc, scan_matrices_limit);
    tcase_add_loop_test(tc, frame_each_kind_dtype, 0, 12);
    tcase_add_test(tc, end_roundtrip);
    tcase_add_test(tc, frame_band_roundtrip);
    tcase_add_test(tc, frame_in_gpu_memory);
    tcase_add_test(tc, release_roundtrip);
    tcase_add_test(tc, req_without_args);
    tcase_add_test(tc, req_with_args);
    tcase_add_test(tc, rep_ok_with_result);
    tcase_add_test(tc, rep_ok_nil_result);
    tcase_add_test(tc, rep_error);
    tcase_add_loop_test(tc, slice_roundtrip, 0, 2);
    tcase_add_loop_test(tc, slice_shm_roundtrip, 0, 2);
    suite_add_tcase(s, tc);
    TCase *tm = tcase_create("misc");
    tcase_add_checked_fixture(tm, setup, teardown);
    tcase_add_test(tm, names);
    tcase_add_test(tm, slice_topic);
    tcase_add_test(tm, shm_topic);
    tcase_add_test(tm, frame_bytes);
    tcase_add_test(tm, header_at_limit);
    tcase_add_test(tm, golden_corpus);
    tcase_add_test(tm, decoder_reuse);
    suite_add_tcase(s, tm);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
