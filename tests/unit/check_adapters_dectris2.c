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
 *     directory this case says so and passes.
 */
#include <config.h>

#include <cbor.h>
#include <check.h>
#include <lz4.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    cbor_item_t *m = cbor_new_definite_map(7);
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

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
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
        put_be(buf, bytes, 8);
        put_be(buf + 8, 8192, 4);
        int c = LZ4_compress_default(px, (char *)buf + 16, (int)bytes, (int)sizeof buf - 16);
        ck_assert_int_gt(c, 0);
        put_be(buf + 12, (uint64_t)c, 4);
        cbor_item_t *comp = cbor_new_definite_array(3);
        cbor_array_push(comp, cbor_move(cbor_build_string("lz4")));
        cbor_array_push(comp, cbor_move(cbor_build_uint8(0)));
        cbor_array_push(comp, cbor_move(cbor_build_bytestring(buf, 16 + (size_t)c)));
        typed = cbor_build_tag(tag, cbor_move(cbor_build_tag(56500, cbor_move(comp))));
    }
    cbor_item_t *md = cbor_new_definite_array(2);
    cbor_array_push(md, cbor_move(dims));
    cbor_array_push(md, cbor_move(typed));
    return cbor_build_tag(40, cbor_move(md));
}

static cbor_item_t *image_msg(uint64_t series, cbor_item_t *id, cbor_item_t *chan)
{
    cbor_item_t *m = cbor_new_definite_map(4);
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
    tcase_add_test(tc, recorded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
