/* check_adapters_dectris2.c — the DECTRIS Stream V2 adapter (daemon/ingest/
 * adapter_dectris2.c) fed CBOR messages directly, without a daemon:
 *
 *   - a series built with libcbor as the Stream V2 README describes it (start, images with
 *     raw and LZ4-compressed uint16 arrays, end): the synthesised scan, frames with their
 *     pixels and goniometer angles, the end; and malformed messages refused with their
 *     codes (check_interop.c sends the same through a daemon);
 *   - recorded detector data (shared/data/dectris-stream2-32bit: DECTRIS's published test
 *     set, 514 x 1030 uint32, bitshuffle-LZ4, three channels, exactly as the detector sent
 *     it, each message opening with CBOR's self-describe tag 55799), after a start message
 *     written from the specification (the set has none): each channel decodes, the set's
 *     end message closes the series, and the detector's "difference" channel is
 *     threshold_1 minus threshold_2 pixel for pixel (all ones where that is negative), an
 *     independent check of the bitshuffle-LZ4 decoding on real data. Without the data
 *     directory this case says so and passes. The set's end message is vendored
 *     (tests/unit/data/dectris2-end.cbor, 69 bytes as recorded) and always checked;
 *   - what real detectors send beyond our own producer: user_data of any CBOR type
 *     (nested, tagged, indefinite), date-time tags (tag 0 text, tag 1 epoch), typed arrays
 *     of 8, 16 and 32 bits and float32, raw and inside DECTRIS's compression tag, several
 *     channels (ingest.channel), and a header_detail "all" start: its pixel mask applied
 *     (masked pixels filled from their neighbours, counted), its flags reported.
 */
#include <config.h>

#include <cbor.h>
#include <check.h>
#include <lz4.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/compress_encode.h"
#include "tests/testutil.h"
#include "tests/unit/check_adapters_util.h"

enum { R = 8, W = 64, SERIES = 7 };
#define NPIX ((size_t)R * W)

static uint16_t pixels[NPIX];

static void kv(cbor_item_t *map, const char *k, cbor_item_t *v)
{
    ck_assert(
        cbor_map_add(map, (struct cbor_pair){cbor_move(cbor_build_string(k)), cbor_move(v)}));
}

/* Feeds one CBOR item (consumed) as a one-part message. */
static int feed_cbor(tl_afx *f, cbor_item_t *item)
{
    unsigned char *buf = NULL;
    size_t cap = 0, len = cbor_serialize_alloc(item, &buf, &cap);
    ck_assert_uint_gt(len, 0);
    int rc = tlt_afx_feed1(f, buf, len);
    free(buf);
    cbor_decref(&item);
    return rc;
}

static cbor_item_t *start_msg(uint64_t series, uint32_t rows, uint32_t cols, uint32_t nimages,
                              bool gonio)
{
    cbor_item_t *m = cbor_new_definite_map(20); /* room for the tests' extra keys */
    kv(m, "type", cbor_build_string("start"));
    kv(m, "series_id", cbor_build_uint64(series));
    kv(m, "series_unique_id", cbor_build_string("01GRXWYAQ9NN93NRNS0H4S7JYZ"));
    kv(m, "image_size_x", cbor_build_uint32(cols));
    kv(m, "image_size_y", cbor_build_uint32(rows));
    kv(m, "number_of_images", cbor_build_uint32(nimages));
    if (gonio) { /* omega from 0 in 2-degree steps */
        cbor_item_t *omega = cbor_new_definite_map(2), *g = cbor_new_definite_map(1);
        kv(omega, "start", cbor_build_float8(0));
        kv(omega, "increment", cbor_build_float8(2));
        kv(g, "omega", omega);
        kv(m, "goniometer", g);
    }
    return m;
}

/* A channel: tag 40 [[rows, cols], typed array] with the typed array (tag 69: uint16 LE)
 * raw, or (lz4) inside DECTRIS's compression tag 56500 ["lz4", 0, HDF5-framed LZ4]. */
static cbor_item_t *channel(const void *px, size_t bytes, bool lz4, uint64_t tag)
{
    static uint8_t buf[LZ4_COMPRESSBOUND(1 << 14) + 16];
    cbor_item_t *dims = cbor_new_definite_array(2);
    cbor_array_push(dims, cbor_move(cbor_build_uint32(R)));
    cbor_array_push(dims, cbor_move(cbor_build_uint32(W)));
    cbor_item_t *typed;
    if (!lz4) {
        typed = cbor_build_tag(tag, cbor_move(cbor_build_bytestring(px, bytes)));
    } else {
        size_t len = tlt_lz4_hdf5(px, bytes, 8192, buf, sizeof buf);
        ck_assert_uint_gt(len, 16);
        cbor_item_t *comp = cbor_new_definite_array(3);
        cbor_array_push(comp, cbor_move(cbor_build_string("lz4")));
        cbor_array_push(comp, cbor_move(cbor_build_uint8(0)));
        cbor_array_push(comp, cbor_move(cbor_build_bytestring(buf, len)));
        typed = cbor_build_tag(tag, cbor_move(cbor_build_tag(56500, cbor_move(comp))));
    }
    cbor_item_t *md = cbor_new_definite_array(2);
    cbor_array_push(md, cbor_move(dims));
    cbor_array_push(md, cbor_move(typed));
    return cbor_build_tag(40, cbor_move(md));
}

/* ---- building the arrays real detectors send ---------------------------------------------- */

enum { RAW, LZ4, BSLZ4 };

/* tag 40 [[rows, cols], tag(typed) (bytes | tag 56500 [algorithm, element size, bytes])]:
 * a MultiDimArray as DECTRIS sends it, the compression tag inside the typed-array tag. */
static cbor_item_t *md_array(uint32_t rows, uint32_t cols, uint64_t typed, const void *px,
                             size_t elem, int comp)
{
    size_t bytes = (size_t)rows * cols * elem;
    uint8_t *buf = malloc(2 * bytes + 4096);
    cbor_item_t *content;
    if (comp == RAW) {
        content = cbor_build_bytestring(px, bytes);
    } else {
        size_t n;
        if (comp == LZ4) {
            n = tlt_lz4_hdf5(px, bytes, 8192, buf, bytes + 2048 + 16);
            ck_assert_uint_gt(n, 16);
        } else {
            n = tlt_bslz4(px, (size_t)rows * cols, elem, buf);
        }
        cbor_item_t *comp_arr = cbor_new_definite_array(3);
        cbor_array_push(comp_arr, cbor_move(cbor_build_string(comp == LZ4 ? "lz4" : "bslz4")));
        cbor_array_push(comp_arr, cbor_move(cbor_build_uint8((uint8_t)elem)));
        cbor_array_push(comp_arr, cbor_move(cbor_build_bytestring(buf, n)));
        content = cbor_build_tag(56500, cbor_move(comp_arr));
    }
    free(buf);
    cbor_item_t *dims = cbor_new_definite_array(2);
    cbor_array_push(dims, cbor_move(cbor_build_uint32(rows)));
    cbor_array_push(dims, cbor_move(cbor_build_uint32(cols)));
    cbor_item_t *md = cbor_new_definite_array(2);
    cbor_array_push(md, cbor_move(dims));
    cbor_array_push(md, cbor_move(cbor_build_tag(typed, cbor_move(content))));
    return cbor_build_tag(40, cbor_move(md));
}

static cbor_item_t *image_msg(uint64_t series, cbor_item_t *id, cbor_item_t *chan)
{
    cbor_item_t *m = cbor_new_definite_map(8);
    kv(m, "type", cbor_build_string("image"));
    kv(m, "series_id", cbor_build_uint64(series));
    kv(m, "image_id", id);
    cbor_item_t *data = cbor_new_definite_map(1);
    kv(data, "threshold_1", chan);
    kv(m, "data", data);
    return m;
}

static cbor_item_t *end_msg(uint64_t series)
{
    cbor_item_t *m = cbor_new_definite_map(2);
    kv(m, "type", cbor_build_string("end"));
    kv(m, "series_id", cbor_build_uint64(series));
    return m;
}

static void assert_pixels(tl_afx *f, int i)
{
    ck_assert_int_eq(f->items[i].type, TL_MSG_FRAME);
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
}

START_TEST(series)
{
    tl_afx f;
    tlt_afx_open(&f, "dectris-v2", (const char *const[]){"ingest.darks=1", NULL});
    ck_assert_int_eq(feed_cbor(&f, start_msg(SERIES, R, W, 3, true)), 0);
    ck_assert_int_eq(feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(0),
                                             channel(pixels, NPIX * 2, false, 69))),
                     1);
    ck_assert_int_eq(f.nitems, 2);
    ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
    ck_assert_uint_eq(f.items[0].scan.rows, R);
    ck_assert_uint_eq(f.items[0].scan.window, 2);
    ck_assert_uint_eq(f.items[0].scan.darks, 1);
    assert_pixels(&f, 1);
    ck_assert_int_eq(f.items[1].frame.kind, TL_PROTO_DARK);
    ck_assert_int_eq(feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(1),
                                             channel(pixels, NPIX * 2, true, 69))),
                     1);
    ck_assert_int_eq(f.nitems, 1);
    assert_pixels(&f, 0);
    ck_assert_int_eq(f.items[0].frame.kind, TL_PROTO_PROJ);
    ck_assert_uint_eq(f.items[0].frame.index, 0);
    ck_assert(f.items[0].frame.has_angle); /* omega of image 1: 2 degrees */
    ck_assert_double_eq_tol(f.items[0].frame.angle, 2.0 * M_PI / 180, 1e-9);

    /* malformed */
    const uint8_t junk[] = {0x1c, 0x1d, 0x1e, 0x12}; /* reserved additional information */
    assert_rejected(&f, tlt_afx_feed1(&f, junk, sizeof junk), TL_PROTO_E_MALFORMED);
    cbor_item_t *arr = cbor_new_definite_array(1);
    cbor_array_push(arr, cbor_move(cbor_build_uint8(1)));
    assert_rejected(&f, feed_cbor(&f, arr), TL_PROTO_E_NOT_MAP);
    assert_rejected(&f,
                    feed_cbor(&f, image_msg(SERIES, cbor_build_string("two"),
                                            channel(pixels, NPIX * 2, false, 69))),
                    TL_PROTO_E_KEY_TYPE);
    assert_rejected(&f,
                    feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(2),
                                            channel(pixels, NPIX * 2 - 2, false, 69))),
                    TL_PROTO_E_PAYLOAD);
    assert_rejected(&f,
                    feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(2), /* big endian */
                                            channel(pixels, NPIX * 2, false, 65))),
                    TL_PROTO_E_DTYPE);
    assert_rejected(&f,
                    feed_cbor(&f, image_msg(99, cbor_build_uint64(0),
                                            channel(pixels, NPIX * 2, false, 69))),
                    TL_PROTO_E_STATE);
    const void *two[2] = {junk, junk};
    assert_rejected(&f, tlt_afx_feed(&f, two, (size_t[]){1, 1}, 2), TL_PROTO_E_PARTS);
    /* and on */
    ck_assert_int_eq(feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(2),
                                             channel(pixels, NPIX * 2, false, 69))),
                     1);
    assert_pixels(&f, 0);
    ck_assert_uint_eq(f.items[0].frame.index, 1);
    ck_assert_int_eq(feed_cbor(&f, end_msg(SERIES)), 1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_END);
    tlt_afx_close(&f);
}
END_TEST

/* ---- what real detectors send ---------------------------------------------------------------- */

/* user_data: any type, skipped whole — nested containers, tags, indefinite lengths, keys
 * that are not text — in start and image messages, as real images carry [1, "💙"]. */
static cbor_item_t *odd_user_data(void)
{
    cbor_item_t *inner = cbor_new_definite_map(2), *list = cbor_new_indefinite_array();
    ck_assert(
        cbor_array_push(list, cbor_move(cbor_build_tag(1, cbor_move(cbor_build_float8(1.5))))));
    ck_assert(cbor_array_push(list, cbor_move(cbor_build_bytestring((const uint8_t *)"\0\1", 2))));
    ck_assert(cbor_array_push(list, cbor_move(cbor_new_null())));
    ck_assert(
        cbor_map_add(inner, (struct cbor_pair){cbor_move(cbor_build_uint8(1)), cbor_move(list)}));
    kv(inner, "kindly", cbor_build_tag(32, cbor_move(cbor_build_string("http://x"))));
    cbor_item_t *ud = cbor_new_definite_array(4);
    cbor_array_push(ud, cbor_move(cbor_build_uint8(1)));
    cbor_array_push(ud, cbor_move(cbor_build_string("\xf0\x9f\x92\x99")));
    cbor_array_push(ud, cbor_move(inner));
    cbor_array_push(ud, cbor_move(cbor_build_bool(true)));
    return ud;
}

START_TEST(user_data_any)
{
    tl_afx f;
    tlt_afx_open(&f, "dectris-v2", NULL);
    cbor_item_t *st = start_msg(SERIES, R, W, 2, false);
    kv(st, "user_data", odd_user_data());
    ck_assert_int_eq(feed_cbor(&f, st), 0);
    cbor_item_t *im =
        image_msg(SERIES, cbor_build_uint64(0), channel(pixels, NPIX * 2, false, 69));
    kv(im, "user_data", odd_user_data());
    int rc = feed_cbor(&f, im);
    ck_assert_msg(rc == 1, "%s", f.err.message);
    assert_pixels(&f, 1);
    im = image_msg(SERIES, cbor_build_uint64(1), channel(pixels, NPIX * 2, false, 69));
    kv(im, "user_data", cbor_build_tag(55799, cbor_move(cbor_build_float4(2.5f))));
    ck_assert_int_eq(feed_cbor(&f, im), 1);
    assert_pixels(&f, 0);
    tlt_afx_close(&f);
}
END_TEST

/* DateTime: series_date as tag 0 + RFC 3339 text (the recorded images) and as tag 1 +
 * seconds since the epoch, an integer or a float; arm_date on the start. With start_time
 * each gives the acquisition time. */
START_TEST(date_time_tags)
{
    tl_afx f;
    tlt_afx_open(&f, "dectris-v2", NULL);
    cbor_item_t *st = start_msg(SERIES, R, W, 3, false);
    kv(st, "arm_date",
       cbor_build_tag(0, cbor_move(cbor_build_string("2023-02-10T15:51:19.172+01:00"))));
    ck_assert_int_eq(feed_cbor(&f, st), 0);
    cbor_item_t *dates[3] = {
        cbor_build_tag(0, cbor_move(cbor_build_string("2023-02-10T14:51:19Z"))),
        cbor_build_tag(1, cbor_move(cbor_build_uint32(1676040679))),
        cbor_build_tag(1, cbor_move(cbor_build_float8(1676040679.25))),
    };
    const uint64_t want[3] = {1676040679500000000ull, 1676040679500000000ull,
                              1676040679750000000ull};
    for (int i = 0; i < 3; i++) {
        cbor_item_t *im = image_msg(SERIES, cbor_build_uint64((uint64_t)i),
                                    channel(pixels, NPIX * 2, false, 69));
        kv(im, "series_date", dates[i]);
        cbor_item_t *t = cbor_new_definite_array(2); /* start_time 1/2 s */
        cbor_array_push(t, cbor_move(cbor_build_uint8(1)));
        cbor_array_push(t, cbor_move(cbor_build_uint8(2)));
        kv(im, "start_time", t);
        int rc = feed_cbor(&f, im);
        ck_assert_msg(rc == 1, "date %d: %s", i, f.err.message);
        const tl_proto_frame *fr = &f.items[f.nitems - 1].frame;
        ck_assert(fr->has_t_acq);
        ck_assert_msg(fr->t_acq / 1000 == want[i] / 1000, "date %d: %llu", i,
                      (unsigned long long)fr->t_acq);
    }
    cbor_item_t *im =
        image_msg(SERIES, cbor_build_uint64(2), channel(pixels, NPIX * 2, false, 69));
    kv(im, "series_date", cbor_build_tag(0, cbor_move(cbor_new_definite_array(0))));
    assert_rejected(&f, feed_cbor(&f, im), TL_PROTO_E_KEY_TYPE);
    tlt_afx_close(&f);
}
END_TEST

/* Typed arrays of 8 (tags 64, 68), 16 (69) and 32 bits (70) and float32 (85), each raw and
 * inside the compression tag (lz4, bslz4 with its element size), decode to the pixels. */
START_TEST(typed_arrays)
{
    static const struct {
        uint64_t tag;
        tl_proto_dtype dtype;
        size_t elem;
    } types[] = {{64, TL_PROTO_U8, 1},
                 {68, TL_PROTO_U8, 1},
                 {69, TL_PROTO_U16, 2},
                 {70, TL_PROTO_U32, 4},
                 {85, TL_PROTO_F32, 4}};
    uint8_t px[NPIX * 4];
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        for (size_t i = 0; i < NPIX; i++) {
            uint32_t v = (uint32_t)(i * 2654435761u >> (types[t].elem == 1 ? 24 : 8));
            float fv = (float)(i % 97) * 0.5f;
            if (types[t].dtype == TL_PROTO_F32)
                memcpy(px + i * 4, &fv, 4);
            else
                for (size_t b = 0; b < types[t].elem; b++)
                    px[i * types[t].elem + b] = (uint8_t)(v >> (8 * b));
        }
        for (int comp = RAW; comp <= BSLZ4; comp++) {
            tl_afx f;
            tlt_afx_open(&f, "dectris-v2", NULL);
            ck_assert_int_eq(feed_cbor(&f, start_msg(SERIES, R, W, 2, false)), 0);
            int rc =
                feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(0),
                                        md_array(R, W, types[t].tag, px, types[t].elem, comp)));
            ck_assert_msg(rc == 1, "tag %llu comp %d: %s", (unsigned long long)types[t].tag, comp,
                          f.err.message);
            ck_assert_int_eq(f.items[1].frame.dtype, types[t].dtype);
            ck_assert_uint_eq(tlt_afx_payload_size(&f, 1), NPIX * types[t].elem);
            ck_assert(memcmp(tlt_afx_payload(&f, 1), px, NPIX * types[t].elem) == 0);
            tlt_afx_close(&f);
        }
    }
}
END_TEST

/* An image of three channels: the first by default, the one ingest.channel names, and a
 * counted refusal that names a channel the image lacks. */
static cbor_item_t *three_channels(const uint16_t *a, const uint16_t *b, const uint16_t *c)
{
    cbor_item_t *m = cbor_new_definite_map(4);
    kv(m, "type", cbor_build_string("image"));
    kv(m, "series_id", cbor_build_uint64(SERIES));
    kv(m, "image_id", cbor_build_uint8(0));
    cbor_item_t *data = cbor_new_definite_map(3);
    kv(data, "threshold_1", md_array(R, W, 69, a, 2, BSLZ4));
    kv(data, "threshold_2", md_array(R, W, 69, b, 2, RAW));
    kv(data, "difference", md_array(R, W, 69, c, 2, LZ4));
    kv(m, "data", data);
    return m;
}

START_TEST(channels)
{
    static uint16_t ch[3][NPIX];
    for (size_t i = 0; i < NPIX; i++)
        for (int k = 0; k < 3; k++)
            ch[k][i] = (uint16_t)(100 * (k + 1) + i % 50);
    const char *sets[] = {NULL, "ingest.channel=threshold_2", "ingest.channel=difference",
                          "ingest.channel=threshold_1"};
    const int pick[] = {0, 1, 2, 0};
    for (int s = 0; s < 4; s++) {
        tl_afx f;
        tlt_afx_open(&f, "dectris-v2", (const char *const[]){sets[s], NULL});
        ck_assert_int_eq(feed_cbor(&f, start_msg(SERIES, R, W, 2, false)), 0);
        int rc = feed_cbor(&f, three_channels(ch[0], ch[1], ch[2]));
        ck_assert_msg(rc == 1, "%s: %s", sets[s] ? sets[s] : "default", f.err.message);
        ck_assert(memcmp(tlt_afx_payload(&f, 1), ch[pick[s]], NPIX * 2) == 0);
        tlt_afx_close(&f);
    }
    tl_afx f;
    tlt_afx_open(&f, "dectris-v2", (const char *const[]){"ingest.channel=threshold_3", NULL});
    ck_assert_int_eq(feed_cbor(&f, start_msg(SERIES, R, W, 2, false)), 0);
    assert_rejected(&f, feed_cbor(&f, three_channels(ch[0], ch[1], ch[2])), TL_PROTO_E_MISSING);
    ck_assert_ptr_nonnull(strstr(f.err.message, "threshold_3"));
    tlt_afx_close(&f);
}
END_TEST

/* ---- header_detail "all": the pixel mask and the detector's flags ---------------------------- */

enum { GAP_ROW = 2, GAP_COL = 5, DEAD_ROW = 5 };

/* The masked pixels of channel threshold_1: (0, 0), a 2-pixel gap (GAP_ROW, GAP_COL and
 * GAP_COL + 1), and row DEAD_ROW whole; threshold_2 masks (1, 1) alone. */
static void make_mask(uint32_t *mask, int which)
{
    memset(mask, 0, NPIX * 4);
    if (which == 1) {
        mask[1 * W + 1] = 4;
        return;
    }
    mask[0] = 1;                     /* bit 0: a gap */
    mask[GAP_ROW * W + GAP_COL] = 2; /* dead */
    mask[GAP_ROW * W + GAP_COL + 1] = 1u << 31;
    for (int c = 0; c < W; c++)
        mask[DEAD_ROW * W + c] = 8;
}

/* A header_detail "all" start: pixel_mask, flatfield per channel (two channels), the
 * count-rate table and the flags. */
static cbor_item_t *start_all(uint32_t rows, uint32_t cols, int comp)
{
    static uint32_t m1[NPIX], m2[NPIX];
    static float flat[NPIX];
    make_mask(m1, 0);
    make_mask(m2, 1);
    for (size_t i = 0; i < NPIX; i++)
        flat[i] = 1.0f + (float)(i % 3) * 0.01f;
    cbor_item_t *st = start_msg(SERIES, R, W, 3, false);
    cbor_item_t *mask = cbor_new_definite_map(2), *ff = cbor_new_definite_map(2);
    kv(mask, "threshold_1", md_array(rows, cols, 70, m1, 4, comp));
    kv(mask, "threshold_2", md_array(rows, cols, 70, m2, 4, comp));
    kv(ff, "threshold_1", md_array(R, W, 85, flat, 4, RAW));
    kv(ff, "threshold_2", md_array(R, W, 85, flat, 4, BSLZ4));
    kv(st, "pixel_mask", mask);
    kv(st, "flatfield", ff);
    kv(st, "flatfield_enabled", cbor_build_bool(true));
    kv(st, "countrate_correction_enabled", cbor_build_bool(false));
    kv(st, "pixel_mask_enabled", cbor_build_bool(true));
    kv(st, "countrate_correction_lookup_table",
       cbor_build_tag(70, cbor_move(cbor_build_bytestring((const uint8_t *)"\0\0\0\0", 4))));
    cbor_item_t *ch = cbor_new_definite_array(2);
    cbor_array_push(ch, cbor_move(cbor_build_string("threshold_1")));
    cbor_array_push(ch, cbor_move(cbor_build_string("threshold_2")));
    kv(st, "channels", ch);
    return st;
}

static uint16_t lerp(uint16_t a, uint16_t b, float wa)
{
    return (uint16_t)lround(wa * (double)a + (1.0 - wa) * (double)b);
}

/* The frame threshold_1's mask makes of pixels: each masked pixel from its row's nearest
 * unmasked pixels on either side (the corner from its one neighbour), the dead row from
 * the rows above and below. */
static void masked_expected(uint16_t *want)
{
    memcpy(want, pixels, sizeof pixels);
    want[0] = pixels[1];
    const uint16_t *gap = pixels + GAP_ROW * W;
    want[GAP_ROW * W + GAP_COL] = lerp(gap[GAP_COL - 1], gap[GAP_COL + 2], 2.0f / 3.0f);
    want[GAP_ROW * W + GAP_COL + 1] = lerp(gap[GAP_COL - 1], gap[GAP_COL + 2], 1.0f / 3.0f);
    for (int c = 0; c < W; c++)
        want[DEAD_ROW * W + c] =
            lerp(pixels[(DEAD_ROW - 1) * W + c], pixels[(DEAD_ROW + 1) * W + c], 0.5f);
}

static cbor_item_t *image_threshold_2(uint64_t id)
{
    cbor_item_t *im = cbor_new_definite_map(4);
    kv(im, "type", cbor_build_string("image"));
    kv(im, "series_id", cbor_build_uint64(id));
    kv(im, "image_id", cbor_build_uint8(0));
    cbor_item_t *data = cbor_new_definite_map(1);
    kv(data, "threshold_2", md_array(R, W, 69, pixels, 2, RAW));
    kv(im, "data", data);
    return im;
}

START_TEST(pixel_mask)
{
    static uint16_t want[NPIX];
    masked_expected(want);
    const size_t nmasked = 3 + W;
    for (int comp = RAW; comp <= BSLZ4; comp += BSLZ4) {
        tl_afx f;
        tlt_afx_open(&f, "dectris-v2", NULL);
        int rc = feed_cbor(&f, start_all(R, W, comp));
        ck_assert_msg(rc == 0, "%s", f.err.message);
        for (uint64_t k = 0; k < 2; k++) {
            rc = feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(k),
                                         k ? channel(pixels, NPIX * 2, true, 69)
                                           : md_array(R, W, 69, pixels, 2, RAW)));
            ck_assert_msg(rc == 1, "%s", f.err.message);
            int fi = f.nitems - 1;
            if (k == 0) { /* the scan reports what the detector said */
                const tl_item_detector *det = &f.items[0].detector;
                ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
                ck_assert(det->told);
                ck_assert(det->flatfield_enabled);
                ck_assert(!det->countrate_correction_enabled);
                ck_assert(det->pixel_mask_enabled);
                ck_assert_uint_eq(det->masked_pixels, nmasked);
            }
            ck_assert_uint_eq(f.items[fi].masked_filled, nmasked);
            const uint16_t *got = tlt_afx_payload(&f, fi);
            for (size_t i = 0; i < NPIX; i++)
                ck_assert_msg(got[i] == want[i], "image %llu pixel (%zu, %zu): %u, want %u",
                              (unsigned long long)k, i / W, i % W, got[i], want[i]);
        }
        tlt_afx_close(&f);
    }
    /* threshold_2's mask for that channel */
    tl_afx f;
    tlt_afx_open(&f, "dectris-v2", (const char *const[]){"ingest.channel=threshold_2", NULL});
    ck_assert_int_eq(feed_cbor(&f, start_all(R, W, RAW)), 0);
    ck_assert_int_eq(feed_cbor(&f, image_threshold_2(SERIES)), 1);
    ck_assert_uint_eq(f.items[1].masked_filled, 1);
    const uint16_t *got = tlt_afx_payload(&f, 1);
    ck_assert_uint_eq(got[1 * W + 1], lerp(pixels[1 * W], pixels[1 * W + 2], 0.5f));
    ck_assert_uint_eq(got[0], pixels[0]);
    /* a mask that is not the images' size, or masks everything: the start is refused */
    assert_rejected(&f, feed_cbor(&f, start_all(R, W / 2, RAW)), TL_PROTO_E_RANGE);
    static uint32_t all[NPIX];
    for (size_t i = 0; i < NPIX; i++)
        all[i] = 1;
    cbor_item_t *st = start_msg(SERIES + 1, R, W, 3, false), *mask = cbor_new_definite_map(1);
    kv(mask, "threshold_2", md_array(R, W, 70, all, 4, RAW));
    kv(st, "pixel_mask", mask);
    assert_rejected(&f, feed_cbor(&f, st), TL_PROTO_E_RANGE);
    assert_rejected(&f, feed_cbor(&f, image_threshold_2(SERIES + 1)), TL_PROTO_E_STATE);
    tlt_afx_close(&f);
    /* a start without a mask (header_detail "basic"): nothing filled */
    tlt_afx_open(&f, "dectris-v2", NULL);
    ck_assert_int_eq(feed_cbor(&f, start_all(R, W, RAW)), 0);
    ck_assert_int_eq(feed_cbor(&f, end_msg(SERIES)), 0);
    ck_assert_int_eq(feed_cbor(&f, start_msg(SERIES + 2, R, W, 3, false)), 0);
    ck_assert_int_eq(feed_cbor(&f, image_msg(SERIES + 2, cbor_build_uint64(0),
                                             channel(pixels, NPIX * 2, false, 69))),
                     1);
    ck_assert(!f.items[0].detector.told); /* it said nothing */
    ck_assert_uint_eq(f.items[0].detector.masked_pixels, 0);
    ck_assert_uint_eq(f.items[1].masked_filled, 0);
    assert_pixels(&f, 1);
    tlt_afx_close(&f);
}
END_TEST

/* Containers that declare more items than the message has bytes are refused (E_LIMIT)
 * before their count is used: a skipped map of 2^62 + pairs overflowed 2 * count, a signed
 * overflow (undefined behaviour, found by tests/fuzz/fuzz_adapters under UBSan; issue 27).
 * A plain build wraps it and still refuses, so this case fails only under
 * -fsanitize=undefined before the fix; it keeps the refusal itself. */
START_TEST(huge_counts)
{
    tl_afx f;
    tlt_afx_open(&f, "dectris-v2", NULL);
    for (int kind = 0; kind < 3; kind++) {
        uint8_t m[64];
        size_t n = 0;
        m[n++] = 0xa2; /* {"type": "start", "other": ...} */
        memcpy(m + n, "\x64type\x65start\x65other", 17);
        n += 17;
        static const uint8_t heads[] = {0xbb, 0x9b, 0xbb}; /* map, array, map of 2^64 - 1 */
        m[n++] = heads[kind];
        for (int i = 0; i < 8; i++)
            m[n++] = kind == 2 ? 0xff : i == 0 ? 0x65 : 0x69;
        assert_rejected(&f, tlt_afx_feed1(&f, m, n), TL_PROTO_E_LIMIT);
    }
    tlt_afx_close(&f);
}
END_TEST

/* The images of a series that declares no image size go into the scan its first image
 * opened: a later image of another shape or dtype is refused, not put into a scan it does
 * not fit (found by tests/fuzz/fuzz_adapters). */
START_TEST(image_shape)
{
    tl_afx f;
    tlt_afx_open(&f, "dectris-v2", NULL);
    cbor_item_t *start = cbor_new_definite_map(3);
    kv(start, "type", cbor_build_string("start"));
    kv(start, "series_id", cbor_build_uint64(SERIES));
    kv(start, "number_of_images", cbor_build_uint32(3));
    ck_assert_int_eq(feed_cbor(&f, start), 0);
    ck_assert_int_eq(feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(0),
                                             md_array(R, W, 69, pixels, 2, RAW))),
                     1);
    ck_assert_int_eq(f.nitems, 2);
    ck_assert_uint_eq(f.items[0].scan.rows, R);
    int rc = feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(1),
                                     md_array(2 * R, W / 2, 69, pixels, 2, RAW)));
    ck_assert_msg(rc == -1, "an image of another shape is accepted");
    ck_assert_int_eq(f.err.code, TL_PROTO_E_RANGE);
    rc = feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(1),
                                 md_array(R, W / 2, 70, pixels, 4, RAW)));
    ck_assert_msg(rc == -1, "an image of another dtype is accepted");
    ck_assert_int_eq(f.err.code, TL_PROTO_E_RANGE);
    ck_assert_int_eq(feed_cbor(&f, image_msg(SERIES, cbor_build_uint64(1),
                                             md_array(R, W, 69, pixels, 2, RAW))),
                     1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_FRAME);
    tlt_afx_close(&f);
}
END_TEST

/* ---- recorded detector data ----------------------------------------------------------------- */

enum { REC_ROWS = 514, REC_COLS = 1030, REC_SERIES = 1, REC_IMAGES = 10 };

/* Decodes recorded image file name (under dectris-stream2-32bit/) through an adapter that
 * reads channel; returns its pixels (malloc'd) after the checks every channel passes. */
static uint32_t *recorded_channel(const char *dir, const char *name, const char *channel)
{
    char path[4096], set[96];
    snprintf(path, sizeof path, "%s/dectris-stream2-32bit/%s", dir, name);
    snprintf(set, sizeof set, "ingest.channel=%s", channel);
    size_t len;
    void *msg = tlt_read_file(path, &len);
    ck_assert_msg(msg != NULL, "cannot read %s", path);
    tl_afx f;
    tlt_afx_open(&f, "dectris-v2", (const char *const[]){set, NULL});
    ck_assert_int_eq(feed_cbor(&f, start_msg(REC_SERIES, REC_ROWS, REC_COLS, REC_IMAGES, false)),
                     0);
    int rc = tlt_afx_feed1(&f, msg, len);
    ck_assert_msg(rc == 1, "%s (%s): %s %s", name, channel, tl_proto_err_name(f.err.code),
                  f.err.message);
    ck_assert_int_eq(f.nitems, 2);
    ck_assert_int_eq(f.items[0].type, TL_MSG_SCAN);
    ck_assert_uint_eq(f.items[0].scan.rows, REC_ROWS);
    ck_assert_uint_eq(f.items[0].scan.cols, REC_COLS);
    ck_assert_int_eq(f.items[0].scan.dtype, TL_PROTO_U32);
    ck_assert_uint_eq(f.items[0].scan.window, REC_IMAGES);
    ck_assert_int_eq(f.items[1].type, TL_MSG_FRAME);
    ck_assert_int_eq(f.items[1].frame.kind, TL_PROTO_PROJ);
    size_t bytes = (size_t)REC_ROWS * REC_COLS * 4;
    ck_assert_uint_eq(tlt_afx_payload_size(&f, 1), bytes);
    uint32_t *px = malloc(bytes);
    memcpy(px, tlt_afx_payload(&f, 1), bytes);
    free(msg);
    /* the set's end message closes the series */
    snprintf(path, sizeof path, "%s/dectris-stream2-32bit/000011.cbor", dir);
    msg = tlt_read_file(path, &len);
    ck_assert_ptr_nonnull(msg);
    ck_assert_int_eq(tlt_afx_feed1(&f, msg, len), 1);
    ck_assert_int_eq(f.items[0].type, TL_MSG_END);
    ck_assert_uint_eq(f.items[0].end.series, REC_SERIES);
    free(msg);
    tlt_afx_close(&f);
    return px;
}

/* The set's end message, vendored (69 bytes, exactly as recorded, self-describe tag and
 * all): it closes a series that a start and an image of ours opened. */
START_TEST(recorded_end)
{
    const char *src = getenv("top_srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/unit/data/dectris2-end.cbor", src && *src ? src : ".");
    size_t len;
    void *msg = tlt_read_file(path, &len);
    ck_assert_msg(msg != NULL, "cannot read %s", path);
    ck_assert_uint_eq(len, 69);
    tl_afx f;
    tlt_afx_open(&f, "dectris-v2", NULL);
    ck_assert_int_eq(feed_cbor(&f, start_msg(REC_SERIES, R, W, 2, false)), 0);
    ck_assert_int_eq(feed_cbor(&f, image_msg(REC_SERIES, cbor_build_uint64(0),
                                             channel(pixels, NPIX * 2, false, 69))),
                     1);
    int rc = tlt_afx_feed1(&f, msg, len);
    ck_assert_msg(rc == 1, "%s: %s", tl_proto_err_name(f.err.code), f.err.message);
    ck_assert_int_eq(f.items[0].type, TL_MSG_END);
    ck_assert_uint_eq(f.items[0].end.series, REC_SERIES);
    free(msg);
    tlt_afx_close(&f);
}
END_TEST

START_TEST(recorded)
{
    const char *dir = tlt_test_data_dir();
    if (!dir) {
        fprintf(stderr, "check_adapters_dectris2: no shared/data (TOMOLIVE_TEST_DATA): the "
                        "recorded DECTRIS data is not checked\n");
        return;
    }
    static const char *const images[] = {"000001.cbor", "000002.cbor", "000003.cbor"};
    size_t n = (size_t)REC_ROWS * REC_COLS;
    for (int i = 0; i < 3; i++) {
        uint32_t *t1 = recorded_channel(dir, images[i], "threshold_1");
        uint32_t *t2 = recorded_channel(dir, images[i], "threshold_2");
        uint32_t *diff = recorded_channel(dir, images[i], "difference");
        size_t counts = 0, mismatches = 0;
        for (size_t k = 0; k < n; k++) {
            counts += t1[k] != 0;
            /* the detector marks a negative difference invalid (all ones) */
            uint32_t want = t1[k] >= t2[k] ? t1[k] - t2[k] : UINT32_MAX;
            mismatches += diff[k] != want;
        }
        ck_assert_msg(counts > 0, "%s: threshold_1 is all zero", images[i]);
        ck_assert_msg(mismatches == 0, "%s: difference != threshold_1 - threshold_2 at %zu pixels",
                      images[i], mismatches);
        free(t1);
        free(t2);
        free(diff);
    }
}
END_TEST

static Suite *suite(void)
{
    for (size_t i = 0; i < NPIX; i++)
        pixels[i] = (uint16_t)(1000 + 7 * i % 4001);
    Suite *s = suite_create("adapters_dectris2");
    TCase *tc = tcase_create("dectris2");
    tcase_add_test(tc, series);
    tcase_add_test(tc, user_data_any);
    tcase_add_test(tc, date_time_tags);
    tcase_add_test(tc, typed_arrays);
    tcase_add_test(tc, channels);
    tcase_add_test(tc, pixel_mask);
    tcase_add_test(tc, image_shape);
    tcase_add_test(tc, huge_counts);
    tcase_add_test(tc, recorded_end);
    tcase_add_test(tc, recorded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
