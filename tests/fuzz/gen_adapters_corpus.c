/* gen_adapters_corpus.c — writes the seeds of the ingest adapters' fuzzer
 * (tests/fuzz/adapters-corpus; fuzz_adapters.h says what an input is).
 *
 *   gen_adapters_corpus OUTDIR SRCDIR [DATADIR]     (`make fuzz-adapters-corpus`)
 *       one short valid stream per format (and settings variant) from the formats' own
 *       rules; DECTRIS's recorded end message (SRCDIR/tests/unit/data/dectris2-end.cbor)
 *       closing a series of ours; and, with DATADIR (shared/data), a recorded image made
 *       small: its header bytes as the detector sent them, its three channels cropped to
 *       24 x 100 and bitshuffle-LZ4 compressed again in the detector's own structure
 *       (tags 55799, 40, 70, 56500 "bslz4", 8 KiB blocks).
 *   gen_adapters_corpus --wrap DATADIR OUTDIR       (`make fuzz-adapters`, at run time)
 *       the recorded messages of DATADIR/dectris-stream2-32bit whole (1 MiB each, too big
 *       to check in), each after a start message, for both settings variants.
 * Seeds named ok-* are streams every message of which must be accepted: the replay driver
 * (check_adapters_corpus) checks that, so the seeds stay deep ones.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "daemon/base/log.h"
#include "daemon/base/settings.h"
#include "daemon/ingest/adapter.h"
#include "daemon/ingest/tomopackets.h"
#include "protocol/protocol.h"
#include "tests/fuzz/adapters_seeds.h"

enum { R = 4, W = 6, NPIX = R * W };

static const char *outdir;
static tlt_fz_buf in, msg, comp;
static uint16_t px16[NPIX];
static float pxf[NPIX];

static void put(const char *name)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    tlt_fz_write(&in, path);
}

static void msg_done(void) /* msg as the input's next one-part message */
{
    tlt_fz_msg1(&in, msg.data, msg.len);
    tlt_fz_clear(&msg);
}

static void text1(const char *json)
{
    tlt_fz_msg1(&in, json, strlen(json));
}

static void *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = buf ? (size_t)n : 0;
    return buf;
}

/* ---- tomolive's own ------------------------------------------------------------------------- */

static void native(void)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    tlt_fz_begin(&in, TLT_FZ_NATIVE);
    tl_proto_encode_scan(&sb, &(tl_proto_scan){.series = 3,
                                               .rows = R,
                                               .cols = W,
                                               .dtype = TL_PROTO_U16,
                                               .window = 2,
                                               .darks = 1,
                                               .has_angles = true,
                                               .angle_step = M_PI / 2});
    tlt_fz_msg1(&in, sb.data, sb.size);
    msgpack_sbuffer_clear(&sb);
    tl_proto_encode_frame(&sb, &(tl_proto_frame){.series = 3,
                                                 .kind = TL_PROTO_DARK,
                                                 .dtype = TL_PROTO_U16,
                                                 .rows = R,
                                                 .cols = W});
    tlt_fz_msg(&in, 2, (const void *[]){sb.data, px16}, (size_t[]){sb.size, sizeof px16});
    /* a projection in two row bands */
    for (uint32_t first = 0; first < R; first += R / 2) {
        msgpack_sbuffer_clear(&sb);
        tl_proto_encode_frame(&sb, &(tl_proto_frame){.series = 3,
                                                     .index = 0,
                                                     .kind = TL_PROTO_PROJ,
                                                     .has_angle = true,
                                                     .angle = 0.5,
                                                     .dtype = TL_PROTO_U16,
                                                     .rows = R,
                                                     .cols = W,
                                                     .has_t_acq = true,
                                                     .t_acq = 1700000000000000000ull,
                                                     .has_band = true,
                                                     .band_first = first,
                                                     .band_rows = R / 2});
        tlt_fz_msg(&in, 2, (const void *[]){sb.data, px16 + first * W},
                   (size_t[]){sb.size, sizeof px16 / 2});
    }
    /* a projection in another process's GPU memory: no payload part */
    static const uint8_t handle[TL_PROTO_IPC_HANDLE] = {1, 2, 3};
    const char *uuid = "GPU-12345678-abcd-ef01-2345-6789abcdef01";
    msgpack_sbuffer_clear(&sb);
    tl_proto_encode_frame(&sb, &(tl_proto_frame){.series = 3,
                                                 .index = 1,
                                                 .kind = TL_PROTO_PROJ,
                                                 .dtype = TL_PROTO_U16,
                                                 .rows = R,
                                                 .cols = W,
                                                 .has_ipc = true,
                                                 .ipc = {.handle = handle,
                                                         .buffer = 7,
                                                         .size = 4096,
                                                         .offset = 0,
                                                         .pitch = 64,
                                                         .device = {uuid, strlen(uuid)},
                                                         .slot = 2}});
    tlt_fz_msg1(&in, sb.data, sb.size);
    msgpack_sbuffer_clear(&sb);
    tl_proto_encode_end(&sb, &(tl_proto_end){.series = 3});
    tlt_fz_msg1(&in, sb.data, sb.size);
    put("ok-native-series");
    msgpack_sbuffer_destroy(&sb);
}

/* ---- DECTRIS Stream V2 ------------------------------------------------------------------- */

static void d2_end(uint64_t series)
{
    tlt_cb_head(&msg, 6, 55799);
    tlt_cb_head(&msg, 5, 3);
    tlt_cb_text(&msg, "type");
    tlt_cb_text(&msg, "end");
    tlt_cb_text(&msg, "series_id");
    tlt_cb_head(&msg, 0, series);
    tlt_cb_text(&msg, "series_unique_id");
    tlt_cb_text(&msg, "01GRXWYAQ9NN93NRNS0H4S7JYZ");
    msg_done();
}

static void dectris2(const char *srcdir)
{
    uint32_t px32[NPIX];
    for (int i = 0; i < NPIX; i++)
        px32[i] = (uint32_t)i * 977u;
    /* a series: goniometer angles, a date-time, raw, lz4 and bslz4 images, end */
    tlt_fz_begin(&in, TLT_FZ_DECTRIS2);
    tlt_d2_start(&msg, 5, R, W, 3, 2);
    tlt_cb_text(&msg, "goniometer");
    tlt_cb_head(&msg, 5, 1);
    tlt_cb_text(&msg, "omega");
    tlt_cb_head(&msg, 5, 2);
    tlt_cb_text(&msg, "start");
    tlt_cb_double(&msg, 10);
    tlt_cb_text(&msg, "increment");
    tlt_cb_double(&msg, 0.5);
    tlt_cb_text(&msg, "user_data"); /* anything: skipped whole */
    tlt_cb_head(&msg, 4, 2);
    tlt_cb_head(&msg, 0, 1);
    tlt_cb_text(&msg, "\xf0\x9f\x92\x99");
    msg_done();
    tlt_d2_image(&msg, 5, 0, R, W, 69, px16, 2, NULL, NULL);
    msg_done();
    tlt_lz4_hdf5(px16, sizeof px16, 32, &comp); /* several blocks */
    tlt_d2_image(&msg, 5, 1, R, W, 69, NULL, 2, "lz4", &comp);
    msg_done();
    tlt_bslz4(px16, NPIX, 2, 16, &comp); /* a full block, a short one, raw rest */
    tlt_d2_image(&msg, 5, 2, R, W, 69, NULL, 2, "bslz4", &comp);
    msg_done();
    d2_end(5);
    put("ok-dectris2-series");

    /* header_detail "all": a pixel mask, the detector's flags, user_data kind and window;
     * float32 images with a date and start time; uint32 bslz4 mask */
    tlt_fz_begin(&in, TLT_FZ_DECTRIS2);
    tlt_d2_start(&msg, 6, R, W, 2, 4);
    uint32_t mask[NPIX] = {0};
    mask[7] = 1;
    mask[W * 2 + 5] = 4;
    tlt_bslz4(mask, NPIX, 4, 8, &comp);
    tlt_cb_text(&msg, "pixel_mask");
    tlt_cb_head(&msg, 5, 1);
    tlt_cb_text(&msg, "threshold_1");
    tlt_d2_array(&msg, R, W, 70, NULL, 4, "bslz4", &comp);
    tlt_cb_text(&msg, "pixel_mask_enabled");
    tlt_cb_head(&msg, 7, 21); /* true */
    tlt_cb_text(&msg, "flatfield_enabled");
    tlt_cb_head(&msg, 7, 20); /* false */
    tlt_cb_text(&msg, "user_data");
    tlt_cb_head(&msg, 5, 2);
    tlt_cb_text(&msg, "kind");
    tlt_cb_text(&msg, "proj");
    tlt_cb_text(&msg, "window");
    tlt_cb_head(&msg, 0, 2);
    msg_done();
    for (int k = 0; k < 2; k++) {
        tlt_cb_head(&msg, 6, 55799);
        tlt_cb_head(&msg, 5, 7);
        tlt_cb_text(&msg, "type");
        tlt_cb_text(&msg, "image");
        tlt_cb_text(&msg, "series_id");
        tlt_cb_head(&msg, 0, 6);
        tlt_cb_text(&msg, "image_id");
        tlt_cb_head(&msg, 0, (uint64_t)k);
        tlt_cb_text(&msg, "series_date");
        tlt_cb_head(&msg, 6, 0);
        tlt_cb_text(&msg, "2023-02-10T15:51:19.172+01:00");
        tlt_cb_text(&msg, "start_time");
        tlt_cb_head(&msg, 4, 2);
        tlt_cb_head(&msg, 0, (uint64_t)k * 5000000);
        tlt_cb_head(&msg, 0, 50000000);
        tlt_cb_text(&msg, "user_data");
        tlt_cb_head(&msg, 5, 1);
        tlt_cb_text(&msg, "angle");
        tlt_cb_double(&msg, 90.0 * k);
        tlt_cb_text(&msg, "data");
        tlt_cb_head(&msg, 5, 1);
        tlt_cb_text(&msg, "threshold_1");
        tlt_d2_array(&msg, R, W, 85, pxf, 4, NULL, NULL);
        msg_done();
    }
    d2_end(6);
    put("ok-dectris2-mask");

    /* two channels, the second configured (variant B: ingest.channel=threshold_2), uint8 */
    uint8_t px8[NPIX];
    for (int i = 0; i < NPIX; i++)
        px8[i] = (uint8_t)(i * 7);
    tlt_fz_begin(&in, TLT_FZ_DECTRIS2 | TLT_FZ_VARIANT);
    tlt_d2_start(&msg, 8, R, W, 4, 0);
    msg_done();
    for (int k = 0; k < 3; k++) { /* a dark, a flat, a projection */
        tlt_cb_head(&msg, 5, 4);
        tlt_cb_text(&msg, "type");
        tlt_cb_text(&msg, "image");
        tlt_cb_text(&msg, "series_id");
        tlt_cb_head(&msg, 0, 8);
        tlt_cb_text(&msg, "image_id");
        tlt_cb_head(&msg, 0, (uint64_t)k);
        tlt_cb_text(&msg, "data");
        tlt_cb_head(&msg, 5, 2);
        tlt_cb_text(&msg, "threshold_1");
        tlt_d2_array(&msg, R, W, 64, px8, 1, NULL, NULL);
        tlt_cb_text(&msg, "threshold_2");
        tlt_d2_array(&msg, R, W, 68, px8, 1, NULL, NULL);
        msg_done();
    }
    d2_end(8);
    put("ok-dectris2-channels");

    /* DECTRIS's recorded end message closes a series of ours */
    char path[8192];
    snprintf(path, sizeof path, "%s/tests/unit/data/dectris2-end.cbor", srcdir);
    size_t len;
    void *end = read_file(path, &len);
    if (!end) {
        perror(path);
        exit(1);
    }
    tlt_fz_begin(&in, TLT_FZ_DECTRIS2);
    tlt_d2_start(&msg, 1, R, W, 10, 0);
    msg_done();
    tlt_d2_image(&msg, 1, 0, R, W, 70, px32, 4, NULL, NULL);
    msg_done();
    tlt_fz_msg1(&in, end, len);
    put("ok-dectris2-recorded-end");
    free(end);
}

/* ---- DECTRIS Stream V1 ------------------------------------------------------------------- */

static void v1_image(uint64_t frame, const char *encoding, const void *blob, size_t len)
{
    char h[160], dd[160];
    const char *cfg =
        "{\"htype\":\"dconfig-1.0\",\"start_time\":0,\"stop_time\":1,\"real_time\":1}";
    snprintf(h, sizeof h, "{\"htype\":\"dimage-1.0\",\"series\":4,\"frame\":%llu,\"hash\":\"0\"}",
             (unsigned long long)frame);
    snprintf(dd, sizeof dd,
             "{\"htype\":\"dimage_d-1.0\",\"shape\":[%d,%d],\"type\":\"uint16\","
             "\"encoding\":\"%s\"}",
             W, R, encoding);
    tlt_fz_msg(&in, 4, (const void *[]){h, dd, blob, cfg},
               (size_t[]){strlen(h), strlen(dd), len, strlen(cfg)});
}

static void dectris1(void)
{
    tlt_fz_begin(&in, TLT_FZ_DECTRIS1);
    const char *h = "{\"htype\":\"dheader-1.0\",\"series\":4,\"header_detail\":\"basic\"}";
    char c[256];
    snprintf(c, sizeof c,
             "{\"nimages\":5,\"ntrigger\":1,\"x_pixels_in_detector\":%d,"
             "\"y_pixels_in_detector\":%d,\"omega_start\":0.0,\"omega_increment\":2.0,"
             "\"detector\":\"EIGER\"}",
             W, R);
    const char *app = "{\"kind\":\"proj\",\"darks\":1,\"flats\":0}";
    tlt_fz_msg(&in, 3, (const void *[]){h, c, app}, (size_t[]){strlen(h), strlen(c), strlen(app)});
    v1_image(0, "<", px16, sizeof px16);
    tlt_lz4_hdf5(px16, sizeof px16, 16, &comp);
    v1_image(1, "lz4<", comp.data, comp.len); /* the HDF5 framing */
    tlt_lz4_hdf5(px16, sizeof px16, sizeof px16, &comp);
    v1_image(2, "lz4<", comp.data + 16, comp.len - 16); /* a bare block */
    tlt_bslz4(px16, NPIX, 2, 16, &comp);
    v1_image(3, "bs16-lz4<", comp.data, comp.len);
    text1("{\"htype\":\"dseries_end-1.0\",\"series\":4}");
    put("ok-dectris1-series");
}

/* ---- the JSON header + blob presets ------------------------------------------------------- */

static void json_frame(const char *header)
{
    tlt_fz_msg(&in, 2, (const void *[]){header, px16}, (size_t[]){strlen(header), sizeof px16});
}

static void json_presets(void)
{
    char h[256];
    tlt_fz_begin(&in, TLT_FZ_STD_DAQ);
    for (int k = 0; k < 4; k++) { /* dark, flat, projection, and a dark again: a new scan */
        snprintf(h, sizeof h,
                 "{\"frame\":%d,\"image_attributes\":{\"scan_index\":%d,"
                 "\"image_is_complete\":true},\"shape\":[%d,%d],\"type\":\"uint16\","
                 "\"source\":\"gigafrost\"}",
                 k, k % 3, R, W);
        json_frame(h);
    }
    put("ok-stddaq-frames");

    tlt_fz_begin(&in, TLT_FZ_CONCERT | TLT_FZ_VARIANT);
    for (int k = 0; k < 3; k++) {
        snprintf(h, sizeof h, "{\"dtype\":\"uint16\",\"shape\":[%d,%d],%s\"timestamp\":1.5}", R, W,
                 k == 2 ? ""
                 : k    ? "\"frame_number\":1,"
                        : "\"frame_number\":0,");
        json_frame(h);
    }
    text1("{\"end\":true}");
    put("ok-concert-frames");

    tlt_fz_begin(&in, TLT_FZ_ARRAY10);
    for (int k = 0; k < 2; k++) {
        snprintf(h, sizeof h,
                 "{\"htype\":\"array-1.0\",\"type\":\"<u2\",\"shape\":[%d,%d],\"frame\":%d}", R, W,
                 k);
        json_frame(h);
    }
    put("ok-array10-frames");
}

/* ---- tomopackets ---------------------------------------------------------------------------- */

static void tomop_projection(int type, int id)
{
    uint8_t p[24 + NPIX * 4];
    tl_tomop_put_i32(p, TL_TOMOP_PROJECTION);
    tl_tomop_put_i32(p + 4, type);
    tl_tomop_put_i32(p + 8, id);
    tl_tomop_put_i32(p + 12, R);
    tl_tomop_put_i32(p + 16, W);
    tl_tomop_put_i32(p + 20, NPIX);
    memcpy(p + 24, pxf, sizeof pxf);
    tlt_fz_msg1(&in, p, sizeof p);
}

static void tomopackets(void)
{
    tlt_fz_begin(&in, TLT_FZ_TOMOPACKETS);
    uint8_t spec[32] = {0}, settings[17] = {0}, geom[24 + 3 * 4];
    tl_tomop_put_i32(spec, TL_TOMOP_GEOMETRY_SPECIFICATION);
    tlt_fz_msg1(&in, spec, sizeof spec);
    tl_tomop_put_i32(settings, TL_TOMOP_SCAN_SETTINGS);
    tl_tomop_put_i32(settings + 8, 1);
    tl_tomop_put_i32(settings + 12, 1);
    settings[16] = 1;
    tlt_fz_msg1(&in, settings, sizeof settings);
    tl_tomop_put_i32(geom, TL_TOMOP_PARALLEL_BEAM_GEOMETRY);
    tl_tomop_put_i32(geom + 4, 0);
    tl_tomop_put_i32(geom + 8, R);
    tl_tomop_put_i32(geom + 12, W);
    tl_tomop_put_i32(geom + 16, 3);
    tl_tomop_put_i32(geom + 20, 3);
    for (int i = 0; i < 3; i++)
        tl_tomop_put_f32(geom + 24 + 4 * i, (float)(i * M_PI / 3));
    tlt_fz_msg1(&in, geom, sizeof geom);
    tomop_projection(0, 0);
    tomop_projection(1, 0);
    tomop_projection(2, 0);
    tomop_projection(2, 4); /* the second pass: angle 1 */
    put("ok-tomopackets-scan");

    /* projections before any geometry: a scan from ingest.window (variant B) */
    tlt_fz_begin(&in, TLT_FZ_TOMOPACKETS | TLT_FZ_VARIANT);
    tl_tomop_put_i32(settings + 8, 0);
    tlt_fz_msg1(&in, settings, 16); /* tomopackets 1.0: no already_linear */
    tomop_projection(1, 0);
    tomop_projection(2, 1);
    put("ok-tomopackets-nogeometry");

    /* a circular cone-beam scan (ConeBeamGeometry: distances and pitch in mm) */
    tlt_fz_begin(&in, TLT_FZ_TOMOPACKETS);
    uint8_t cone[40 + 3 * 4];
    memcpy(cone, geom, 20); /* scene_id, rows, cols, proj_count */
    tl_tomop_put_i32(cone, TL_TOMOP_CONE_BEAM_GEOMETRY);
    tl_tomop_put_f32(cone + 20, 400.0f); /* source_origin */
    tl_tomop_put_f32(cone + 24, 200.0f); /* origin_det */
    tl_tomop_put_f32(cone + 28, 0.1f);   /* detector_size: u, v */
    tl_tomop_put_f32(cone + 32, 0.1f);
    tl_tomop_put_i32(cone + 36, 3);
    for (int i = 0; i < 3; i++)
        tl_tomop_put_f32(cone + 40 + 4 * i, (float)(i * 2 * M_PI / 3));
    tlt_fz_msg1(&in, cone, sizeof cone);
    tomop_projection(2, 0);
    tomop_projection(2, 2);
    put("ok-tomopackets-cone");
}

/* ---- recorded DECTRIS data ---------------------------------------------------------------- */

static const char *const channels[] = {"threshold_1", "threshold_2", "difference"};
enum {
    REC_ROWS = 514,
    REC_COLS = 1030,
    CROP_ROW = 200,
    CROP_COL = 300,
    CROP_R = 24,
    CROP_W = 100
};

static void message(zmq_msg_t *m, const void *data, size_t len)
{
    zmq_msg_init_size(m, len);
    memcpy(zmq_msg_data(m), data, len);
}

/* The pixels of channel of a recorded image (uint32, malloc'd), decoded by the adapter. */
static uint32_t *recorded_pixels(const void *image, size_t len, const char *channel)
{
    tl_settings cfg;
    char err[256];
    tl_settings_defaults(&cfg);
    if (tl_settings_set(&cfg, "ingest.channel", channel, err, sizeof err) != 0)
        exit(99);
    const tl_adapter_ops *ops = tl_adapter_find("dectris-v2");
    void *st = ops->create(&cfg, err, sizeof err);
    tl_item it;
    memset(&it, 0, sizeof it);
    zmq_msg_init(&it.payload);
    tl_proto_error perr = {0};
    zmq_msg_t part;
    tlt_fz_clear(&msg);
    tlt_d2_start(&msg, 1, REC_ROWS, REC_COLS, 10, 0);
    message(&part, msg.data, msg.len);
    int rc = ops->decode(st, &part, 1, &it, &perr);
    zmq_msg_close(&part);
    tlt_fz_clear(&msg);
    message(&part, image, len);
    if (rc == 0)
        rc = ops->decode(st, &part, 1, &it, &perr);
    zmq_msg_close(&part);
    if (rc != 1 || !ops->next(st, &it) || zmq_msg_size(&it.payload) != REC_ROWS * REC_COLS * 4) {
        fprintf(stderr, "gen_adapters_corpus: the recorded image (%s) does not decode: %s %s\n",
                channel, tl_proto_err_name(perr.code), perr.message);
        exit(1);
    }
    uint32_t *px = malloc(zmq_msg_size(&it.payload));
    memcpy(px, zmq_msg_data(&it.payload), zmq_msg_size(&it.payload));
    zmq_msg_close(&it.payload);
    ops->destroy(st);
    return px;
}

/* The recorded image 000001 with its channels cropped: the detector's bytes up to its
 * "data" map, then that map again with 24 x 100 of each channel, bslz4 as recorded. */
static void recorded_crop(const char *datadir, const char *srcdir)
{
    char path[8192];
    size_t len, endlen;
    snprintf(path, sizeof path, "%s/dectris-stream2-32bit/000001.cbor", datadir);
    uint8_t *image = read_file(path, &len);
    snprintf(path, sizeof path, "%s/tests/unit/data/dectris2-end.cbor", srcdir);
    void *end = read_file(path, &endlen);
    if (!image || !end) {
        perror(path);
        exit(1);
    }
    size_t at = 0; /* the key "data" (text of 4), then a map of 3 channels */
    while (at + 6 <= len && memcmp(image + at,
                                   "\x64"
                                   "data\xa3",
                                   6) != 0)
        at++;
    if (at + 6 > len) {
        fprintf(stderr, "gen_adapters_corpus: no \"data\" map in %s\n", path);
        exit(1);
    }
    tlt_fz_buf crop = {0};
    tlt_fz_put(&crop, image, at + 5);
    tlt_cb_head(&crop, 5, 3);
    size_t counts = 0;
    for (int c = 0; c < 3; c++) {
        uint32_t *px = recorded_pixels(image, len, channels[c]), part[CROP_R * CROP_W];
        for (int r = 0; r < CROP_R; r++)
            memcpy(part + r * CROP_W, px + (size_t)(CROP_ROW + r) * REC_COLS + CROP_COL,
                   CROP_W * 4);
        for (int i = 0; i < CROP_R * CROP_W; i++)
            counts += c == 0 && part[i] != 0;
        tlt_bslz4(part, CROP_R * CROP_W, 4, 2048, &comp); /* 8 KiB blocks, as recorded */
        tlt_cb_text(&crop, channels[c]);
        tlt_d2_array(&crop, CROP_R, CROP_W, 70, NULL, 4, "bslz4", &comp);
        free(px);
    }
    fprintf(stderr, "gen_adapters_corpus: recorded crop: %zu of %d threshold_1 pixels counted\n",
            counts, CROP_R * CROP_W);
    tlt_fz_begin(&in, TLT_FZ_DECTRIS2);
    tlt_d2_start(&msg, 1, CROP_R, CROP_W, 10, 0);
    msg_done();
    tlt_fz_msg1(&in, crop.data, crop.len);
    tlt_fz_msg1(&in, end, endlen);
    put("ok-dectris2-recorded-crop");
    tlt_fz_free(&crop);
    free(image);
    free(end);
}

/* The whole recorded messages, each image after a start, the end after the last. */
static int wrap(const char *datadir)
{
    static const char *const names[] = {"000001.cbor", "000002.cbor", "000003.cbor"};
    char path[8192];
    size_t endlen;
    snprintf(path, sizeof path, "%s/dectris-stream2-32bit/000011.cbor", datadir);
    void *end = read_file(path, &endlen);
    for (int i = 0; i < 3; i++) {
        size_t len;
        snprintf(path, sizeof path, "%s/dectris-stream2-32bit/%s", datadir, names[i]);
        void *image = read_file(path, &len);
        if (!image || !end) {
            perror(path);
            return 1;
        }
        for (int var = 0; var < 2; var++) {
            tlt_fz_begin(&in, TLT_FZ_DECTRIS2 | (var ? TLT_FZ_VARIANT : 0));
            tlt_d2_start(&msg, 1, REC_ROWS, REC_COLS, 10, 0);
            msg_done();
            tlt_fz_msg1(&in, image, len);
            tlt_fz_msg1(&in, end, endlen);
            char name[64];
            snprintf(name, sizeof name, "recorded-%.6s-%c", names[i], var ? 'b' : 'a');
            put(name);
        }
        free(image);
    }
    free(end);
    return 0;
}

int main(int argc, char **argv)
{
    tl_log_set_level(TL_LOG_ERROR);
    for (int i = 0; i < NPIX; i++) {
        px16[i] = (uint16_t)(1000 + 37 * i);
        pxf[i] = 0.25f * (float)i;
    }
    if (argc == 4 && strcmp(argv[1], "--wrap") == 0) {
        outdir = argv[3];
        return wrap(argv[2]);
    }
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s OUTDIR SRCDIR [DATADIR]\n       %s --wrap DATADIR OUTDIR\n",
                argv[0], argv[0]);
        return 2;
    }
    outdir = argv[1];
    native();
    dectris2(argv[2]);
    dectris1();
    json_presets();
    tomopackets();
    if (argc == 4)
        recorded_crop(argv[3], argv[2]);
    tlt_fz_free(&in);
    tlt_fz_free(&msg);
    tlt_fz_free(&comp);
    return 0;
}
