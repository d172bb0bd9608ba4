/* check_adapters.c — the ingest formats as a library (daemon/ingest/adapter.h), fed
 * messages directly, without a daemon (check_adapters_util.h): for each format, a short
 * series as the detector or framework sends it (the field layouts tests/integration/
 * check_interop.c sends through a real daemon) must come out as the scan, frames and end
 * the engine would get, pixels untouched; and malformed messages must be refused with
 * their error codes, the adapter then taking the next good message. DECTRIS Stream V2
 * (CBOR, and recorded detector data) is check_adapters_dectris2.c.
 */
#include <config.h>

#include <check.h>
#include <jansson.h>
#include <lz4.h>
#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/tomopackets.h"
#include "gpu/geometry/cone.h"
#include "tests/testutil.h"
#include "tests/unit/check_adapters_util.h"

enum { R = 8, W = 64, SERIES = 7 };
#define NPIX ((size_t)R * W)

static uint16_t pixels[NPIX];

static void make_pixels(void)
{
    for (size_t i = 0; i < NPIX; i++)
        pixels[i] = (uint16_t)(1000 + 7 * i % 4001);
}

/* The compact text of h (consumed), malloc'd. The JSON formats install a jansson allocator
 * whose arena (json_arena.h) is reset by every message they parse on this thread, so a
 * test's own JSON values must all be released before it feeds a message: the text is
 * copied out and h let go here. */
static char *json_text(json_t *h)
{
    json_free_t jfree;
    json_get_alloc_funcs(NULL, &jfree);
    char *s = json_dumps(h, JSON_COMPACT), *copy = strdup(s);
    jfree(s);
    json_decref(h);
    ck_assert_ptr_nonnull(copy);
    return copy;
}

/* Feeds a JSON header (consumed) and an optional blob as one message. */
static int feed_json(tl_afx *f, json_t *h, const void *blob, size_t len)
{
    char *s = json_text(h);
    const void *parts[2] = {s, blob};
    size_t lens[2] = {strlen(s), len};
    int rc = tlt_afx_feed(f, parts, lens, blob ? 2 : 1);
    free(s);
    return rc;
}

static void assert_frame(tl_afx *f, int i, tl_proto_kind kind, uint64_t index)
{
    ck_assert_int_eq(f->items[i].type, TL_MSG_FRAME);
    ck_assert_int_eq(f->items[i].frame.kind, kind);
    ck_assert_uint_eq(f->items[i].frame.index, index);
    ck_assert_uint_eq(f->items[i].frame.rows, R);
    ck_assert_uint_eq(f->items[i].frame.cols, W);
    ck_assert_int_eq(f->items[i].frame.dtype, TL_PROTO_U16);
    ck_assert_uint_eq(tlt_afx_payload_size(f, i), NPIX * 2);
    ck_assert(memcmp(tlt_afx_payload(f, i), pixels, NPIX * 2) == 0);
}

static void assert_rejected(tl_afx *f, int rc, tl_proto_err code)
{
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(f->err.code == code, "expected %s, got %s (%s)", tl_proto_err_name(code),
                  tl_proto_err_name(f->err.code), f->err.message);
    ck_assert_int_eq(f->nitems, 0);
}

/* ---- tomolive's own protocol ------------------------------------------------------------- */

START_TEST(native)
{
    tl_afx f;
    tlt_afx_open(&f, "tomolive", NULL);
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    tl_proto_scan scan = {.series = SERIES,
                          .geometry = TL_PROTO_PARALLEL,
                          .rows = R,
                          .cols = W,
                          .dtype = TL_PROTO_U16,
                          .window = 90,
                          .darks = 1,
                          .has_angles = true,
                          .angle_step = M_PI / 90};
    ck_assert_int_eq(tl_proto_encode_scan(&buf, &scan), 0);
    ck_assert_int_eq(tlt_afx_feed1(&f, buf.data, buf.size), 1);
    ck_assert_int_eq(f.nitems, 1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
    ck_assert_uint_eq(f.items[0].scan.series, SERIES);
    ck_assert_uint_eq(f.items[0].scan.rows, R);
    ck_assert_uint_eq(f.items[0].scan.window, 90);

    msgpack_sbuffer_clear(&buf);
    tl_proto_frame fr = {.series = SERIES,
                         .index = 0,
                         .kind = TL_PROTO_DARK,
                         .dtype = TL_PROTO_U16,
                         .rows = R,
                         .cols = W};
    ck_assert_int_eq(tl_proto_encode_frame(&buf, &fr), 0);
    const void *parts[2] = {buf.data, pixels};
    size_t lens[2] = {buf.size, NPIX * 2};
    ck_assert_int_eq(tlt_afx_feed(&f, parts, lens, 2), 1);
    assert_frame(&f, 0, TL_PROTO_DARK, 0);

    lens[1] = NPIX * 2 - 2; /* the payload does not fit the shape */
    assert_rejected(&f, tlt_afx_feed(&f, parts, lens, 2), TL_PROTO_E_PAYLOAD);
    const uint8_t junk[] = {0xc1}; /* a byte msgpack never uses */
    assert_rejected(&f, tlt_afx_feed1(&f, junk, sizeof junk), TL_PROTO_E_MALFORMED);

    msgpack_sbuffer_clear(&buf);
    ck_assert_int_eq(tl_proto_encode_end(&buf, &(tl_proto_end){.series = SERIES}), 0);
    ck_assert_int_eq(tlt_afx_feed1(&f, buf.data, buf.size), 1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_END);
    ck_assert_uint_eq(f.items[0].end.series, SERIES);
    msgpack_sbuffer_destroy(&buf);
    tlt_afx_close(&f);
}
END_TEST

/* ---- DECTRIS Stream V1 (JSON parts) ------------------------------------------------------ */

static int v1_header(tl_afx *f, uint64_t series, int nimages)
{
    json_t *h = json_pack("{s:s, s:I, s:s}", "htype", "dheader-1.0", "series", (json_int_t)series,
                          "header_detail", "basic");
    json_t *c = json_pack("{s:i, s:i, s:i, s:i, s:f, s:f, s:s}", "nimages", nimages, "ntrigger", 1,
                          "x_pixels_in_detector", W, "y_pixels_in_detector", R, "omega_start", 0.0,
                          "omega_increment", 2.0, "detector", "EIGER");
    char *hs = json_text(h), *cs = json_text(c);
    const void *parts[2] = {hs, cs};
    size_t lens[2] = {strlen(hs), strlen(cs)};
    int rc = tlt_afx_feed(f, parts, lens, 2);
    free(hs);
    free(cs);
    return rc;
}

/* An image: its dimage_d part (consumed) and blob. */
static int v1_image(tl_afx *f, uint64_t series, uint64_t frame, json_t *dd, const void *blob,
                    size_t len)
{
    json_t *h = json_pack("{s:s, s:I, s:I, s:s}", "htype", "dimage-1.0", "series",
                          (json_int_t)series, "frame", (json_int_t)frame, "hash", "0");
    json_t *cfg = json_pack("{s:s, s:I, s:I, s:I}", "htype", "dconfig-1.0", "start_time",
                            (json_int_t)0, "stop_time", (json_int_t)1, "real_time", (json_int_t)1);
    char *hs = json_text(h), *ds = json_text(dd), *cs = json_text(cfg);
    const void *parts[4] = {hs, ds, blob, cs};
    size_t lens[4] = {strlen(hs), strlen(ds), len, strlen(cs)};
    int rc = tlt_afx_feed(f, parts, lens, 4);
    free(hs);
    free(ds);
    free(cs);
    return rc;
}

/* An image of nparts parts: dimage, dimage_d, blob, then (nparts 4) dconfig or (5) dconfig
 * and one more; last_htype replaces the htype of the 4th part. */
static int v1_image_parts(tl_afx *f, uint64_t frame, int nparts, const char *last_htype)
{
    json_t *h = json_pack("{s:s, s:I, s:I, s:s}", "htype", "dimage-1.0", "series",
                          (json_int_t)SERIES, "frame", (json_int_t)frame, "hash", "0");
    json_t *dd = json_pack("{s:s, s:[i,i], s:s, s:s}", "htype", "dimage_d-1.0", "shape", W, R,
                           "type", "uint16", "encoding", "<");
    json_t *cfg = json_pack("{s:s, s:I, s:I, s:I}", "htype", last_htype, "start_time",
                            (json_int_t)0, "stop_time", (json_int_t)1, "real_time", (json_int_t)1);
    char *hs = json_text(h), *ds = json_text(dd), *cs = json_text(cfg);
    const void *parts[5] = {hs, ds, pixels, cs, cs};
    size_t lens[5] = {strlen(hs), strlen(ds), NPIX * 2, strlen(cs), strlen(cs)};
    int rc = tlt_afx_feed(f, parts, lens, nparts);
    free(hs);
    free(ds);
    free(cs);
    return rc;
}

static json_t *v1_dd(const char *encoding)
{
    return json_pack("{s:s, s:[i,i], s:s, s:s}", "htype", "dimage_d-1.0", "shape", W, R, "type",
                     "uint16", "encoding", encoding);
}

START_TEST(dectris_v1)
{
    tl_afx f;
    tlt_afx_open(&f, "dectris-v1", (const char *const[]){"ingest.darks=1", NULL});
    ck_assert_int_eq(v1_header(&f, SERIES, 3), 0); /* a series starts: nothing for the engine */
    /* the first image opens a scan of its shape, then comes itself */
    ck_assert_int_eq(v1_image(&f, SERIES, 0, v1_dd("<"), pixels, NPIX * 2), 1);
    ck_assert_int_eq(f.nitems, 2);
    ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
    ck_assert_uint_eq(f.items[0].scan.rows, R);
    ck_assert_uint_eq(f.items[0].scan.cols, W);
    ck_assert_uint_eq(f.items[0].scan.darks, 1);
    ck_assert_uint_eq(f.items[0].scan.window, 2);
    assert_frame(&f, 1, TL_PROTO_DARK, 0);
    /* an LZ4 block ("lz4<"): decoded into a pooled buffer */
    char lz[LZ4_COMPRESSBOUND(NPIX * 2)];
    int lzn = LZ4_compress_default((const char *)pixels, lz, (int)(NPIX * 2), (int)sizeof lz);
    ck_assert_int_gt(lzn, 0);
    ck_assert_int_eq(v1_image(&f, SERIES, 1, v1_dd("lz4<"), lz, (size_t)lzn), 1);
    ck_assert_int_eq(f.nitems, 1);
    assert_frame(&f, 0, TL_PROTO_PROJ, 0);
    ck_assert(f.items[0].frame.has_angle);
    ck_assert_double_eq_tol(f.items[0].frame.angle, 2.0 * M_PI / 180, 1e-9);

    /* malformed */
    assert_rejected(&f, tlt_afx_feed1(&f, "{not json", 9), TL_PROTO_E_MALFORMED);
    assert_rejected(&f, feed_json(&f, json_pack("{s:s}", "htype", "dfoo-1.0"), NULL, 0),
                    TL_PROTO_E_TYPE);
    assert_rejected(&f, v1_image(&f, SERIES, 2, v1_dd("<"), pixels, NPIX * 2 - 6),
                    TL_PROTO_E_PAYLOAD);
    assert_rejected(&f, v1_image(&f, SERIES, 2, v1_dd("zstd<"), pixels, NPIX * 2),
                    TL_PROTO_E_UNSUPPORTED);
    assert_rejected(&f, v1_image(&f, 42, 0, v1_dd("<"), pixels, NPIX * 2), TL_PROTO_E_STATE);
    /* and on: the series' last image, then its end */
    ck_assert_int_eq(v1_image(&f, SERIES, 2, v1_dd("<"), pixels, NPIX * 2), 1);
    assert_frame(&f, 0, TL_PROTO_PROJ, 1);
    ck_assert_int_eq(feed_json(&f,
                               json_pack("{s:s, s:i}", "htype", "dseries_end-1.0", "series",
                                         SERIES),
                               NULL, 0),
                     1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_END);
    tlt_afx_close(&f);
}
END_TEST

/* A detector sends every image as 4 parts; one that lacks its dconfig part (3 parts), has
 * a part too many, or a 4th part that is not dconfig is refused, counted, and the genuine
 * frame of that number is then taken — not refused as a duplicate of the incomplete one. */
START_TEST(dectris_v1_incomplete)
{
    tl_afx f;
    tlt_afx_open(&f, "dectris-v1", NULL);
    ck_assert_int_eq(v1_header(&f, SERIES, 3), 0);
    assert_rejected(&f, v1_image_parts(&f, 0, 3, "dconfig-1.0"), TL_PROTO_E_PARTS);
    ck_assert_ptr_nonnull(strstr(f.err.message, "not 3"));
    assert_rejected(&f, v1_image_parts(&f, 0, 5, "dconfig-1.0"), TL_PROTO_E_PARTS);
    assert_rejected(&f, v1_image_parts(&f, 0, 4, "dimage_d-1.0"), TL_PROTO_E_TYPE);
    ck_assert_int_eq(v1_image_parts(&f, 0, 4, "dconfig-1.0"), 1); /* the genuine frame 0 */
    ck_assert_int_eq(f.nitems, 2);
    ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
    assert_frame(&f, 1, TL_PROTO_PROJ, 0);
    tlt_afx_close(&f);
}
END_TEST

/* ---- JSON header + blob presets ----------------------------------------------------------- */

/* Frame k (0: the dark, then projections) as the preset's header. */
static json_t *preset_header(const char *preset, int k)
{
    if (strcmp(preset, "std-daq") == 0)
        return json_pack("{s:i, s:{s:i, s:b}, s:[i,i], s:s, s:s}", "frame", k ? k - 1 : 0,
                         "image_attributes", "scan_index", k ? 2 : 0, "image_is_complete", 1,
                         "shape", R, W, "type", "uint16", "source", "gigafrost");
    if (strcmp(preset, "concert") == 0)
        return json_pack("{s:s, s:[i,i], s:i, s:f}", "dtype", "uint16", "shape", R, W,
                         "frame_number", k, "timestamp", 1.5);
    return json_pack("{s:s, s:s, s:[i,i], s:i}", "htype", "array-1.0", "type", "uint16", "shape",
                     R, W, "frame", k);
}

static void json_preset(const char *preset)
{
    tl_afx f;
    tlt_afx_open(&f, preset, (const char *const[]){"ingest.window=4", "ingest.darks=1", NULL});
    ck_assert_int_eq(feed_json(&f, preset_header(preset, 0), pixels, NPIX * 2), 1);
    ck_assert_int_eq(f.nitems, 2); /* a synthesised scan, then the frame */
    ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
    ck_assert_uint_eq(f.items[0].scan.window, 4);
    if (strcmp(preset, "std-daq") != 0) /* std-daq labels each frame's kind itself */
        ck_assert_uint_eq(f.items[0].scan.darks, 1);
    assert_frame(&f, 1, TL_PROTO_DARK, 0);
    ck_assert_int_eq(feed_json(&f, preset_header(preset, 1), pixels, NPIX * 2), 1);
    ck_assert_int_eq(f.nitems, 1);
    assert_frame(&f, 0, TL_PROTO_PROJ, 0);

    assert_rejected(&f, tlt_afx_feed1(&f, "[1, 2]", 6), TL_PROTO_E_NOT_MAP);
    assert_rejected(&f,
                    tlt_afx_feed(&f, (const void *[]){"{\"x\":", pixels}, (size_t[]){5, NPIX * 2},
                                 2),
                    TL_PROTO_E_MALFORMED);
    json_t *h = preset_header(preset, 2);
    json_object_set_new(h, "shape", json_string("8x64"));
    assert_rejected(&f, feed_json(&f, h, pixels, NPIX * 2), TL_PROTO_E_KEY_TYPE);
    assert_rejected(&f, feed_json(&f, preset_header(preset, 2), pixels, NPIX * 2 - 2),
                    TL_PROTO_E_PAYLOAD);
    assert_rejected(&f, feed_json(&f, preset_header(preset, 2), NULL, 0), TL_PROTO_E_PARTS);
    h = preset_header(preset, 2);
    json_object_set_new(h, strcmp(preset, "concert") == 0 ? "dtype" : "type",
                        json_string("float64"));
    assert_rejected(&f, feed_json(&f, h, pixels, NPIX * 2), TL_PROTO_E_DTYPE);
    ck_assert_int_eq(feed_json(&f, preset_header(preset, 2), pixels, NPIX * 2), 1);
    assert_frame(&f, 0, TL_PROTO_PROJ, 1);
    tlt_afx_close(&f);
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

/* ---- tomopackets ---------------------------------------------------------------------------- */

/* The wire's scalars, written with the helpers the RECAST3D link writes them with; the
 * packet types stay literal, as the tomopackets sources number them. */
static size_t tp_put(uint8_t *p, int32_t v)
{
    tl_tomop_put_i32(p, v);
    return 4;
}

static size_t tp_putf(uint8_t *p, float v)
{
    tl_tomop_put_f32(p, v);
    return 4;
}

/* ProjectionData: type (0 dark, 1 flat, 2 projection), id, shape, the pixels as float32. */
static size_t tp_projection(uint8_t *p, int type, int id, int count)
{
    size_t n = 0;
    n += tp_put(p + n, 0x309);
    n += tp_put(p + n, type);
    n += tp_put(p + n, id);
    n += tp_put(p + n, R);
    n += tp_put(p + n, W);
    n += tp_put(p + n, count);
    for (int i = 0; i < count; i++)
        n += tp_putf(p + n, (float)pixels[i]);
    return n;
}

START_TEST(tomopackets)
{
    enum { NPROJ = 4 };
    tl_afx f;
    tlt_afx_open(&f, "tomopackets", NULL);
    uint8_t *p = malloc(64 + NPIX * 4);
    size_t n = 0;
    n += tp_put(p + n, 0x301); /* GeometrySpecification: the volume box */
    n += tp_put(p + n, 0);
    for (int i = 0; i < 6; i++)
        n += tp_putf(p + n, i < 3 ? -1.0f : 1.0f);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, n), 0);
    n = 0;
    n += tp_put(p + n, 0x302); /* ScanSettings: 1 dark, 0 flats */
    n += tp_put(p + n, 0);
    n += tp_put(p + n, 1);
    n += tp_put(p + n, 0);
    p[n++] = 0;
    ck_assert_int_eq(tlt_afx_feed1(&f, p, n), 0);
    n = 0;
    n += tp_put(p + n, 0x303); /* ParallelBeamGeometry: shape, projections, angles */
    n += tp_put(p + n, 0);
    n += tp_put(p + n, R);
    n += tp_put(p + n, W);
    n += tp_put(p + n, NPROJ);
    n += tp_put(p + n, NPROJ);
    for (int k = 0; k < NPROJ; k++)
        n += tp_putf(p + n, (float)(M_PI * k / NPROJ));
    ck_assert_int_eq(tlt_afx_feed1(&f, p, n), 1); /* the geometry completes the scan */
    ck_assert_int_eq(f.nitems, 1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
    ck_assert_uint_eq(f.items[0].scan.rows, R);
    ck_assert_uint_eq(f.items[0].scan.window, NPROJ);
    ck_assert_uint_eq(f.items[0].scan.darks, 1);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_projection(p, 0, 0, (int)NPIX)), 1);
    ck_assert_int_eq(f.nitems, 1);
    ck_assert_uint_eq(f.items[0].type, TL_MSG_FRAME);
    ck_assert_int_eq(f.items[0].frame.kind, TL_PROTO_DARK);
    ck_assert_int_eq(f.items[0].frame.dtype, TL_PROTO_F32);
    ck_assert_uint_eq(tlt_afx_payload_size(&f, 0), NPIX * 4);
    const float *px = tlt_afx_payload(&f, 0);
    for (size_t i = 0; i < NPIX; i++)
        ck_assert_float_eq(px[i], (float)pixels[i]);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_projection(p, 2, 1, (int)NPIX)), 1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_FRAME);
    ck_assert_int_eq(f.items[0].frame.kind, TL_PROTO_PROJ);
    ck_assert_uint_eq(f.items[0].frame.index, 1);

    assert_rejected(&f, tlt_afx_feed1(&f, p, 2), TL_PROTO_E_MALFORMED);
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_projection(p, 2, 1, (int)NPIX - 1)),
                    TL_PROTO_E_PAYLOAD);
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_projection(p, 7, 1, (int)NPIX)), TL_PROTO_E_KIND);
    tp_put(p, 0x999);
    assert_rejected(&f, tlt_afx_feed1(&f, p, 32), TL_PROTO_E_TYPE);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_projection(p, 2, 2, (int)NPIX)), 1);
    ck_assert_uint_eq(f.items[0].frame.index, 2);
    free(p);
    tlt_afx_close(&f);
}
END_TEST

/* ScanSettings in both layouts of cicwi/tomopackets: 1.0.0-rc2 (the published master:
 * scene_id, darks, flats: 16 bytes with the descriptor) and 1.1.0 (+ already_linear: 17);
 * any other size is refused. The counts (and the flag) go into the scan the next
 * ParallelBeamGeometry opens. */
static size_t tp_settings(uint8_t *p, int darks, int flats, int already_linear)
{
    size_t n = 0;
    n += tp_put(p + n, 0x302);
    n += tp_put(p + n, 0);
    n += tp_put(p + n, darks);
    n += tp_put(p + n, flats);
    if (already_linear >= 0)
        p[n++] = (uint8_t)already_linear;
    return n;
}

static size_t tp_geometry(uint8_t *p)
{
    size_t n = 0;
    n += tp_put(p + n, 0x303);
    n += tp_put(p + n, 0);
    n += tp_put(p + n, R);
    n += tp_put(p + n, W);
    n += tp_put(p + n, 2);
    n += tp_put(p + n, 2);
    n += tp_putf(p + n, 0.0f);
    n += tp_putf(p + n, 1.5f);
    return n;
}

START_TEST(tomopackets_scan_settings)
{
    tl_afx f;
    tlt_afx_open(&f, "tomopackets", NULL);
    uint8_t p[64];
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_settings(p, 3, 2, -1)), 0); /* 16 bytes */
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_geometry(p)), 1);
    ck_assert_uint_eq(f.items[0].scan.darks, 3);
    ck_assert_uint_eq(f.items[0].scan.flats, 2);
    ck_assert(!f.items[0].scan.already_linear);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_settings(p, 1, 4, 1)), 0); /* 17 bytes */
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_geometry(p)), 1);
    ck_assert_uint_eq(f.items[0].scan.darks, 1);
    ck_assert_uint_eq(f.items[0].scan.flats, 4);
    ck_assert(f.items[0].scan.already_linear);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_settings(p, 5, 0, -1)), 0); /* back to 16 */
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_geometry(p)), 1);
    ck_assert_uint_eq(f.items[0].scan.darks, 5);
    ck_assert(!f.items[0].scan.already_linear);
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_settings(p, 1, 1, -1) - 1), TL_PROTO_E_PAYLOAD);
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_settings(p, 1, 1, 1) + 1), TL_PROTO_E_PAYLOAD);
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_settings(p, 1, 1, 2)), TL_PROTO_E_RANGE);
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_settings(p, -1, 1, -1)), TL_PROTO_E_RANGE);
    tlt_afx_close(&f);
}
END_TEST

/* A projection must fit the scan it goes into: one of another shape than the geometry
 * declared (or than the projection that opened a synthesised scan) is refused, not put
 * into a scan it does not fit (found by tests/fuzz/fuzz_adapters). */
START_TEST(tomopackets_shape)
{
    for (int geometry = 1; geometry >= 0; geometry--) {
        tl_afx f;
        tlt_afx_open(&f, "tomopackets", (const char *const[]){"ingest.window=2", NULL});
        uint8_t *p = malloc(64 + NPIX * 4);
        if (geometry)
            ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_geometry(p)), 1);
        ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_projection(p, 2, 0, (int)NPIX)), 1);
        size_t n = tp_projection(p, 2, 1, (int)NPIX);
        tp_put(p + 12, W); /* W x R: as many pixels, another shape */
        tp_put(p + 16, R);
        assert_rejected(&f, tlt_afx_feed1(&f, p, n), TL_PROTO_E_RANGE);
        ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_projection(p, 2, 1, (int)NPIX)), 1);
        ck_assert_int_eq(f.items[0].type, TL_MSG_FRAME);
        free(p);
        tlt_afx_close(&f);
    }
}
END_TEST

/* A ParallelBeamGeometry whose detector makes frames over the protocol's frame size limit
 * (2 GiB of float32) opens no scan: E_OVERFLOW, as a native scan of that shape gets (found
 * by tests/fuzz/fuzz_adapters). */
START_TEST(tomopackets_geometry_size)
{
    tl_afx f;
    tlt_afx_open(&f, "tomopackets", NULL);
    uint8_t p[64];
    size_t n = tp_geometry(p);
    tp_put(p + 8, 65536); /* 65536 x 8192 float32: 2 GiB */
    tp_put(p + 12, 8192);
    assert_rejected(&f, tlt_afx_feed1(&f, p, n), TL_PROTO_E_OVERFLOW);
    tp_put(p + 12, 8191); /* just under */
    ck_assert_int_eq(tlt_afx_feed1(&f, p, n), 1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
    tlt_afx_close(&f);
}
END_TEST

/* A geometry refused for an angle that is not finite leaves the open scan's angles as they
 * were: its projections keep their finite angles (found by tests/fuzz/fuzz_adapters: the
 * angles were overwritten up to the bad one). */
START_TEST(tomopackets_bad_angle)
{
    tl_afx f;
    tlt_afx_open(&f, "tomopackets", NULL);
    uint8_t *p = malloc(64 + NPIX * 4);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_geometry(p)), 1);
    size_t n = tp_geometry(p);
    tp_putf(p + 28, NAN); /* angle 1; angle 0 is 0 as before */
    tp_putf(p + 24, 3.0f);
    assert_rejected(&f, tlt_afx_feed1(&f, p, n), TL_PROTO_E_NOT_FINITE);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_projection(p, 2, 0, (int)NPIX)), 1);
    ck_assert(f.items[0].frame.has_angle);
    ck_assert_double_eq(f.items[0].frame.angle, 0.0);
    free(p);
    tlt_afx_close(&f);
}
END_TEST

/* ConeBeamGeometry (RECAST3D's ASTRA "cone"): scene_id, rows, cols, proj_count,
 * source_origin, origin_det, detector_size[2] (mm), angles. */
static size_t tp_cone(uint8_t *p, float so, float od, float du, float dv, int nproj)
{
    size_t n = 0;
    n += tp_put(p + n, 0x305);
    n += tp_put(p + n, 0);
    n += tp_put(p + n, R);
    n += tp_put(p + n, W);
    n += tp_put(p + n, nproj);
    n += tp_putf(p + n, so);
    n += tp_putf(p + n, od);
    n += tp_putf(p + n, du);
    n += tp_putf(p + n, dv);
    n += tp_put(p + n, nproj);
    for (int k = 0; k < nproj; k++)
        n += tp_putf(p + n, 0.5f + (float)k);
    return n;
}

/* A ConeBeamGeometry opens a cone-beam scan (PROTOCOL.md 8.1.1): source_detector is
 * source_origin + origin_det, the pixel pitch detector_size, and the angles ASTRA's
 * negated (adapter_tomopackets.c); bad numbers and the vector geometries are refused,
 * and a refused geometry leaves the open scan's angles alone. */
START_TEST(tomopackets_cone)
{
    tl_afx f;
    tlt_afx_open(&f, "tomopackets", NULL);
    uint8_t *p = malloc(64 + NPIX * 4);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_settings(p, 2, 1, -1)), 0);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_cone(p, 200.0f, 100.0f, 0.25f, 0.5f, 3)), 1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
    const tl_proto_scan *s = &f.items[0].scan;
    ck_assert_int_eq(s->geometry, TL_PROTO_CONE);
    ck_assert_uint_eq(s->rows, R);
    ck_assert_uint_eq(s->cols, W);
    ck_assert_uint_eq(s->window, 3);
    ck_assert_uint_eq(s->darks, 2);
    ck_assert_double_eq(s->source_origin, 200.0);
    ck_assert_double_eq(s->source_detector, 300.0);
    ck_assert_double_eq(s->pixel_size[0], 0.25);
    ck_assert_double_eq(s->pixel_size[1], 0.5);
    ck_assert(!s->has_detector_offset && !s->has_center); /* principal point: the middle */
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_projection(p, 2, 4, (int)NPIX)), 1); /* 4 mod 3 */
    ck_assert(f.items[0].frame.has_angle);
    ck_assert_double_eq(f.items[0].frame.angle, -1.5);

    /* each number finite and > 0 (origin_det may be negative while the sum stays > 0) */
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_cone(p, NAN, 100, 0.25f, 0.5f, 3)),
                    TL_PROTO_E_NOT_FINITE);
    ck_assert(strstr(f.err.message, "source_origin"));
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_cone(p, 200, INFINITY, 0.25f, 0.5f, 3)),
                    TL_PROTO_E_NOT_FINITE);
    ck_assert(strstr(f.err.message, "origin_det"));
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_cone(p, 0, 100, 0.25f, 0.5f, 3)),
                    TL_PROTO_E_RANGE);
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_cone(p, 200, -200, 0.25f, 0.5f, 3)),
                    TL_PROTO_E_RANGE);
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_cone(p, 200, 100, 0.25f, -0.5f, 3)),
                    TL_PROTO_E_RANGE);
    ck_assert(strstr(f.err.message, "detector_size"));
    size_t n = tp_cone(p, 200, 100, 0.25f, 0.5f, 3);
    assert_rejected(&f, tlt_afx_feed1(&f, p, n - 4), TL_PROTO_E_PAYLOAD); /* an angle short */
    assert_rejected(&f, tlt_afx_feed1(&f, p, 36), TL_PROTO_E_PAYLOAD);    /* no angle count */
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_projection(p, 2, 2, (int)NPIX)), 1);
    ck_assert_double_eq(f.items[0].frame.angle, -2.5); /* the open scan's, unchanged */
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_cone(p, 200, -50, 0.25f, 0.25f, 2)), 1);
    ck_assert_double_eq(f.items[0].scan.source_detector, 150.0);

    /* parallel vectors per projection: refused, saying what is served (ConeVec below) */
    tp_put(p, 0x304);
    assert_rejected(&f, tlt_afx_feed1(&f, p, 64), TL_PROTO_E_UNSUPPORTED);
    ck_assert_msg(strstr(f.err.message, "circular scans only"), "%s", f.err.message);
    /* a parallel geometry after a cone one opens a parallel scan again */
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_geometry(p)), 1);
    ck_assert_int_eq(f.items[0].scan.geometry, TL_PROTO_PARALLEL);
    ck_assert_double_eq(f.items[0].scan.source_origin, 0.0);
    free(p);
    tlt_afx_close(&f);
}
END_TEST

/* ConeVecGeometry: scene_id, rows, cols, proj_count, then 12 floats per projection:
 * ASTRA's cone geometry (so, od, du, dv) at angles 0.5 + k made into cone_vec rows as
 * astra_geom_2vec does, with row k's number `bad` replaced by `value` (bad < 0: none). */
static size_t tp_cone_vec(uint8_t *p, float so, float od, float du, float dv, int nproj, int count,
                          int bad, float value)
{
    size_t n = 0;
    n += tp_put(p + n, 0x306);
    n += tp_put(p + n, 0);
    n += tp_put(p + n, R);
    n += tp_put(p + n, W);
    n += tp_put(p + n, nproj);
    n += tp_put(p + n, count);
    for (int k = 0; k < count / 12; k++) {
        double t = 0.5 + k;
        float v[12] = {(float)(sin(t) * so),
                       (float)(-cos(t) * so),
                       0,
                       (float)(-sin(t) * od),
                       (float)(cos(t) * od),
                       0,
                       (float)(cos(t) * du),
                       (float)(sin(t) * du),
                       0,
                       0,
                       0,
                       dv};
        for (int i = 0; i < 12; i++)
            n += tp_putf(p + n, k * 12 + i == bad ? value : v[i]);
    }
    return n;
}

/* A ConeVecGeometry opens a cone-beam scan with one matrix per projection (PROTOCOL.md
 * 8.1.1 "matrices"): the vectors of RECAST3D's circular "cone" geometry give the matrices
 * of our circle at the negated angles (what ConeBeamGeometry opens), the scan's distances
 * and pitches its numbers, and each frame the negated angle; bad packets are refused. */
START_TEST(tomopackets_cone_vec)
{
    tl_afx f;
    tlt_afx_open(&f, "tomopackets", NULL);
    uint8_t *p = malloc(64 + NPIX * 4 + 3 * 48);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_cone_vec(p, 200, 100, 0.25f, 0.5f, 3, 36, -1, 0)), 1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
    tl_proto_scan *s = &f.items[0].scan;
    ck_assert_int_eq(s->geometry, TL_PROTO_CONE);
    ck_assert_uint_eq(s->window, 3);
    ck_assert_uint_eq(s->nmatrices, 3);
    ck_assert_ptr_nonnull(s->matrices);
    ck_assert_double_eq_tol(s->source_origin, 200.0, 1e-4);
    ck_assert_double_eq_tol(s->source_detector, 300.0, 1e-4);
    ck_assert_double_eq_tol(s->pixel_size[0], 0.25, 1e-7);
    ck_assert_double_eq_tol(s->pixel_size[1], 0.5, 1e-7);
    ck_assert(s->has_detector_offset && s->detector_offset[0] == 0);
    ck_assert_double_eq_tol(s->detector_offset[1], 0, 1e-4);
    double angles[3] = {-0.5, -1.5, -2.5}, want[3][12];
    tl_cone_circular g = {.sad = 200,
                          .sdd = 300,
                          .pitch_u = 0.25,
                          .pitch_v = 0.5,
                          .rows = R,
                          .cols = W,
                          .n = 3,
                          .angles = angles};
    ck_assert_int_eq(tl_cone_circular_matrices(&g, want, NULL), TL_OK);
    for (int k = 0; k < 3; k++) /* float32 vectors: equal to their rounding */
        for (int i = 0; i < 12; i++)
            ck_assert_msg(fabs(s->matrices[k][i] - want[k][i]) <= 1e-5 * (fabs(want[k][i]) + 1),
                          "matrix %d [%d]: %.9g, the circle's %.9g", k, i, s->matrices[k][i],
                          want[k][i]);
    tl_proto_scan_free(s);
    ck_assert_int_eq(tlt_afx_feed1(&f, p, tp_projection(p, 2, 1, (int)NPIX)), 1);
    ck_assert(f.items[0].frame.has_angle);
    ck_assert_double_eq_tol(f.items[0].frame.angle, -1.5, 1e-6);

    /* refused: a count that is not 12 per projection, a short packet, a NaN, no camera */
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_cone_vec(p, 200, 100, 0.25f, 0.5f, 3, 24, -1, 0)),
                    TL_PROTO_E_PAYLOAD);
    ck_assert_msg(strstr(f.err.message, "24 numbers for proj_count 3"), "%s", f.err.message);
    size_t n = tp_cone_vec(p, 200, 100, 0.25f, 0.5f, 3, 36, -1, 0);
    assert_rejected(&f, tlt_afx_feed1(&f, p, n - 4), TL_PROTO_E_PAYLOAD);
    assert_rejected(&f,
                    tlt_afx_feed1(&f, p, tp_cone_vec(p, 200, 100, 0.25f, 0.5f, 3, 36, 17, NAN)),
                    TL_PROTO_E_NOT_FINITE);
    ck_assert_msg(strstr(f.err.message, "projection 1, number 5"), "%s", f.err.message);
    assert_rejected(&f, tlt_afx_feed1(&f, p, tp_cone_vec(p, 200, 100, 0, 0.5f, 3, 36, -1, 0)),
                    TL_PROTO_E_RANGE); /* u = 0 */
    ck_assert_msg(strstr(f.err.message, "projection 0") && strstr(f.err.message, "no camera"),
                  "%s", f.err.message);
    free(p);
    tlt_afx_close(&f);
}
END_TEST

START_TEST(unknown_format)
{
    ck_assert_ptr_null(tl_adapter_find("no-such-format"));
    ck_assert_ptr_nonnull(tl_adapter_find("tomolive"));
}
END_TEST

static Suite *suite(void)
{
    make_pixels();
    Suite *s = suite_create("adapters");
    TCase *tc = tcase_create("formats");
    tcase_add_test(tc, native);
    tcase_add_test(tc, dectris_v1);
    tcase_add_test(tc, dectris_v1_incomplete);
    tcase_add_test(tc, std_daq);
    tcase_add_test(tc, concert);
    tcase_add_test(tc, array_1_0);
    tcase_add_test(tc, tomopackets);
    tcase_add_test(tc, tomopackets_scan_settings);
    tcase_add_test(tc, tomopackets_shape);
    tcase_add_test(tc, tomopackets_geometry_size);
    tcase_add_test(tc, tomopackets_bad_angle);
    tcase_add_test(tc, tomopackets_cone);
    tcase_add_test(tc, tomopackets_cone_vec);
    tcase_add_test(tc, unknown_format);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
