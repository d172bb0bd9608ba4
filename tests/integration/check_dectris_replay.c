/* check_dectris_replay.c — DECTRIS's own recorded Stream V2 messages (shared/data/
 * dectris-stream2-32bit: three images of an EIGER2 500K, 514 x 1030 uint32, three channels,
 * bitshuffle-LZ4, and the set's end message, each as the detector sent it) replayed with
 * `tomolive push --dectris` into a real tomolived (ingest.format=dectris-v2):
 *
 *   - behind a start message of header_detail "all" written here from the specification
 *     (pixel_mask and flatfield per channel, LZ4-compressed inside the typed-array tag, the
 *     correction flags; a few pixels masked): every image accepted, none refused, the mask
 *     applied to each (status.scan.detector: masked_pixels, masked_filled = images x
 *     masked) and the detector's flags reported;
 *   - the directory as published (no start): push synthesises one from the first image,
 *     and again every image is accepted, none refused.
 *
 * Without the data directory ($TOMOLIVE_TEST_DATA, else shared/data or ../shared/data
 * beside the source tree) the test says so and passes: the data is not vendored.
 */
#include "config.h"

#include <cbor.h>
#include <jansson.h>
#include <lz4.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/compress_encode.h"
#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

enum { ROWS = 514, COLS = 1030, IMAGES = 3 };
#define NPIX ((size_t)ROWS * COLS)

static const char *const recorded[] = {"000001.cbor", "000002.cbor", "000003.cbor", "000011.cbor"};
static const char *const channel_names[] = {"threshold_1", "threshold_2", "difference"};
/* the masked pixels of threshold_1 (the channel reconstructed by default) */
static const size_t masked_at[] = {0, 100 * COLS + 200, 100 * COLS + 201, 256 * COLS + 514,
                                   NPIX - 1};
#define NMASKED (sizeof masked_at / sizeof *masked_at)

static const char *data_dir(void)
{
    static char dir[4096];
    struct stat st;
    const char *env = getenv("TOMOLIVE_TEST_DATA"), *src = getenv("top_srcdir");
    if (env && *env && stat(env, &st) == 0)
        return env;
    const char *const where[] = {"%s/shared/data", "%s/../shared/data"};
    for (int i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, where[i], src && *src ? src : ".");
        if (stat(dir, &st) == 0)
            return dir;
    }
    return NULL;
}

static void kv(cbor_item_t *map, const char *k, cbor_item_t *v)
{
    ck_assert(
        cbor_map_add(map, (struct cbor_pair){cbor_move(cbor_build_string(k)), cbor_move(v)}));
}

/* A ROWS x COLS MultiDimArray of 4-byte elements (typed: 70 uint32, 85 float32), its bytes
 * LZ4-compressed (HDF5 framing, one block) in DECTRIS's compression tag. */
static cbor_item_t *lz4_array(uint64_t typed, const void *px)
{
    size_t bytes = NPIX * 4;
    uint8_t *buf = malloc(16 + (size_t)LZ4_compressBound((int)bytes));
    ck_assert_ptr_nonnull(buf);
    size_t len =
        tlt_lz4_hdf5(px, bytes, (uint32_t)bytes, buf, 16 + (size_t)LZ4_compressBound((int)bytes));
    ck_assert_uint_gt(len, 16);
    cbor_item_t *comp = cbor_new_definite_array(3);
    cbor_array_push(comp, cbor_move(cbor_build_string("lz4")));
    cbor_array_push(comp, cbor_move(cbor_build_uint8(4)));
    cbor_array_push(comp, cbor_move(cbor_build_bytestring(buf, len)));
    free(buf);
    cbor_item_t *dims = cbor_new_definite_array(2), *md = cbor_new_definite_array(2);
    cbor_array_push(dims, cbor_move(cbor_build_uint32(ROWS)));
    cbor_array_push(dims, cbor_move(cbor_build_uint32(COLS)));
    cbor_array_push(md, cbor_move(dims));
    cbor_array_push(md,
                    cbor_move(
                        cbor_build_tag(typed, cbor_move(cbor_build_tag(56500, cbor_move(comp))))));
    return cbor_build_tag(40, cbor_move(md));
}

/* The start of the recorded series (series 1) as a header_detail "all" start is written
 * (Stream V2 README, "Start Message"), self-describe tag first, into path. */
static void write_start(const char *path)
{
    uint32_t *mask = calloc(NPIX, 4), *none = calloc(NPIX, 4);
    float *flat = malloc(NPIX * 4);
    ck_assert(mask && none && flat);
    for (size_t i = 0; i < NMASKED; i++)
        mask[masked_at[i]] = 1u << (i % 5); /* gap, dead, cold, hot, noisy */
    for (size_t i = 0; i < NPIX; i++)
        flat[i] = 1.0f;
    cbor_item_t *m = cbor_new_definite_map(16);
    kv(m, "type", cbor_build_string("start"));
    kv(m, "series_id", cbor_build_uint8(1));
    kv(m, "series_unique_id", cbor_build_string("01GRXWYAQ9NN93NRNS0H4S7JYZ"));
    kv(m, "arm_date",
       cbor_build_tag(0, cbor_move(cbor_build_string("2023-02-10T15:51:19.172+01:00"))));
    cbor_item_t *channels = cbor_new_definite_array(3), *pm = cbor_new_definite_map(3),
                *ff = cbor_new_definite_map(3);
    for (int c = 0; c < 3; c++) {
        cbor_array_push(channels, cbor_move(cbor_build_string(channel_names[c])));
        kv(pm, channel_names[c], lz4_array(70, c == 0 ? mask : none));
        kv(ff, channel_names[c], lz4_array(85, flat));
    }
    kv(m, "channels", channels);
    kv(m, "image_size_x", cbor_build_uint16(COLS));
    kv(m, "image_size_y", cbor_build_uint16(ROWS));
    kv(m, "number_of_images", cbor_build_uint8(IMAGES));
    kv(m, "pixel_mask", pm);
    kv(m, "pixel_mask_enabled", cbor_build_bool(true));
    kv(m, "flatfield", ff);
    kv(m, "flatfield_enabled", cbor_build_bool(true));
    kv(m, "countrate_correction_enabled", cbor_build_bool(true));
    kv(m, "user_data", cbor_build_string("replayed by check_dectris_replay"));
    cbor_item_t *msg = cbor_build_tag(55799, cbor_move(m));
    unsigned char *buf = NULL;
    size_t cap = 0, len = cbor_serialize_alloc(msg, &buf, &cap);
    ck_assert_uint_gt(len, 0);
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(buf, 1, len, fp), len);
    fclose(fp);
    free(buf);
    cbor_decref(&msg);
    free(mask);
    free(none);
    free(flat);
}

/* Every frames.rejected.* and frames.rejected_protocol.* count is zero. */
static void assert_none_refused(tl_fixture *f)
{
    json_t *st = tl_fx_ok(f, "status", NULL);
    json_t *frames = json_object_get(st, "frames");
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(frames, "rejected"), key, v)
        ck_assert_msg(json_integer_value(v) == 0, "frames.rejected.%s = %lld", key,
                      (long long)json_integer_value(v));
    json_object_foreach(json_object_get(frames, "rejected_protocol"), key, v)
        ck_assert_msg(0, "frames.rejected_protocol.%s = %lld (see the daemon's log)", key,
                      (long long)json_integer_value(v));
    json_decref(st);
}

static void replay(tl_fixture *f, const char *dir)
{
    char *out = NULL;
    int rc = tl_fx_run(&out, "tomolive push --dectris '%s' --endpoint '%s' --rate 200 --quiet",
                       dir, f->ingest);
    ck_assert_msg(rc == 0, "tomolive push --dectris %s: exit %d: %s", dir, rc, out ? out : "");
    ck_assert_ptr_nonnull(strstr(out, "3 images, 1 end"));
    free(out);
}

START_TEST(replayed)
{
    const char *data = data_dir();
    if (!data) {
        fprintf(stderr, "check_dectris_replay: no shared/data (TOMOLIVE_TEST_DATA): the "
                        "recorded DECTRIS stream is not replayed\n");
        return;
    }
    char set[4200], path[4300], target[4300];
    snprintf(set, sizeof set, "%s/dectris-stream2-32bit", data);
    char *dir = tl_tmpdir("dectris");
    ck_assert_ptr_nonnull(dir);
    snprintf(path, sizeof path, "%s/000000.cbor", dir); /* sorts first */
    write_start(path);
    for (size_t i = 0; i < sizeof recorded / sizeof *recorded; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, recorded[i]);
        snprintf(target, sizeof target, "%s/%s", set, recorded[i]);
        ck_assert_msg(symlink(target, path) == 0, "symlink %s", target);
    }

    tl_fixture f;
    const char *args[] = {"--set", "ingest.format=dectris-v2", NULL};
    ck_assert(tl_fx_start(&f, "dectris", args) == 0);
    /* with the header_detail "all" start: the mask applied to each image */
    replay(&f, dir);
    ck_assert_msg(tl_fx_wait_status(&f, "frames.accepted.proj", IMAGES, 60),
                  "%lld of %d images accepted", tl_fx_status_int(&f, "frames.accepted.proj"),
                  IMAGES);
    ck_assert(tl_fx_wait_status(&f, "frames.messages", 1 + IMAGES + 1, 30));
    /* received is not applied: the worker logs the end once the scan is finished */
    ck_assert(tl_fx_wait_log(&f, "scan_ended", 30));
    assert_none_refused(&f);
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.detector.masked_pixels"), (long long)NMASKED);
    ck_assert_int_eq(tl_fx_status_int(&f, "scan.detector.masked_filled"),
                     (long long)(NMASKED * IMAGES));
    json_t *st = tl_fx_ok(&f, "status", NULL), *scan = json_object_get(st, "scan");
    json_t *det = json_object_get(scan, "detector");
    ck_assert(json_is_true(json_object_get(det, "flatfield_enabled")));
    ck_assert(json_is_true(json_object_get(det, "countrate_correction_enabled")));
    ck_assert(json_is_true(json_object_get(det, "pixel_mask_enabled")));
    ck_assert(json_is_true(json_object_get(scan, "finished"))); /* the recorded end */
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "projections")), IMAGES);
    json_decref(st);

    /* the set as published, without a start: push synthesises one */
    replay(&f, set);
    ck_assert_msg(tl_fx_wait_status(&f, "frames.accepted.proj", 2 * IMAGES, 60),
                  "%lld of %d images accepted", tl_fx_status_int(&f, "frames.accepted.proj"),
                  2 * IMAGES);
    ck_assert(tl_fx_wait_status(&f, "frames.messages", 2 * (1 + IMAGES + 1), 30));
    assert_none_refused(&f);
    st = tl_fx_ok(&f, "status", NULL);
    scan = json_object_get(st, "scan");
    ck_assert(json_is_null(json_object_get(scan, "detector"))); /* the start told nothing */
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "projections")), IMAGES);
    json_decref(st);

    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
    tl_rm_rf(dir);
    free(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dectris_replay");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, replayed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
