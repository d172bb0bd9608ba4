/* adapter_dectris1.c — DECTRIS Stream V1 ("legacy" SIMPLON stream: multipart JSON headers
 * with an "htype", plus binary blobs) as an ingest format (adapter.h).
 *
 *   series header  [{"htype":"dheader-1.0","series","header_detail"}, detector config?,
 *                   header appendix?]   (header_detail "all" adds flatfield, pixel mask and
 *                   count-rate parts: more than the ingest socket keeps, so use "basic")
 *   image          [{"htype":"dimage-1.0","series","frame","hash"},
 *                   {"htype":"dimage_d-1.0","shape":[x, y],"type","encoding"}, blob,
 *                   {"htype":"dconfig-1.0","start_time","stop_time","real_time"}]
 *   series end     [{"htype":"dseries_end-1.0","series"}]
 *
 * The detector config gives nimages x ntrigger and, for the configured goniometer axis,
 * <axis>_start / <axis>_increment (degrees). Encodings: "<" (raw, sent on zero-copy),
 * "lz4<" (one LZ4 block, or the HDF5 LZ4 framing when the blob starts with its header),
 * "bs8/16/32-lz4<" (bitshuffle + LZ4 in the HDF5 framing). A header appendix that is a JSON
 * object may carry the user keys of Stream V2 (kind, darks, flats, window). Headers parse
 * with jansson into a per-message arena (json_arena.h).
 *
 * A detector sends every image as those four parts (SIMPLON API manual, "dimage" 4 parts).
 * An image with fewer or more, or whose last part is not the dconfig header, is refused
 * and counted — never taken as a projection, which would make the genuine frame of that
 * number a duplicate.
 */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/det_series.h"
#include "daemon/ingest/json_arena.h"
#include "daemon/ingest/bitshuffle.h"

typedef struct {
    tl_adapter_stream st;
    tl_det_series ds;
    void *scratch;
    size_t scratch_cap;
    uint64_t max_frame;
} v1;

static void *v1_create(const tl_settings *c, char *err, size_t errlen)
{
    v1 *a = tl_adapter_alloc(sizeof *a, offsetof(v1, st), c, err, errlen);
    if (!a)
        return NULL;
    a->max_frame = (uint64_t)c->ingest_max_frame_mb << 20;
    return a;
}

static void v1_destroy(void *state)
{
    v1 *a = state;
    tl_adapter_stream_destroy(&a->st);
    free(a->scratch);
    free(a);
}

static int header(v1 *a, json_t *h, zmq_msg_t *parts, int nparts, tl_proto_error *err)
{
    tl_det_start st;
    tl_det_start_init(&st);
    if (tl_json_get_u64(h, "series", &st.id, err) <= 0)
        return err->code
                   ? -1
                   : (tl_proto_fail(err, TL_PROTO_E_MISSING, "dheader without \"series\""), -1);
    const char *detail = "basic";
    if (tl_json_get_str(h, "header_detail", &detail, err) < 0)
        return -1;
    /* the parts after the first stay valid while h is alive: parse them one at a time */
    for (int i = 1; i < nparts && i < 3; i++) {
        if (i == 2 && strcmp(detail, "all") == 0)
            break; /* flatfield and the like, not an appendix */
        json_t *c = tl_json_parse(zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i]),
                                  i == 1 ? "detector config" : "header appendix", err);
        if (!c)
            return -1;
        uint64_t n = 0, trig = 1, x = 0, y = 0;
        double g0 = NAN, dg = NAN;
        int rc = 0;
        if (i == 1) {
            char k0[TL_SETTINGS_TEXT_MAX + 16], k1[TL_SETTINGS_TEXT_MAX + 16];
            snprintf(k0, sizeof k0, "%s_start", a->st.cfg->ingest_goniometer_axis);
            snprintf(k1, sizeof k1, "%s_increment", a->st.cfg->ingest_goniometer_axis);
            if (tl_json_get_u64(c, "nimages", &n, err) < 0 ||
                tl_json_get_u64(c, "ntrigger", &trig, err) < 0 ||
                tl_json_get_u64(c, "x_pixels_in_detector", &x, err) < 0 ||
                tl_json_get_u64(c, "y_pixels_in_detector", &y, err) < 0 ||
                tl_json_get_num(c, k0, &g0, err) < 0 || tl_json_get_num(c, k1, &dg, err) < 0)
                rc = -1;
            if (n && trig && n * trig < (1ull << 40))
                st.nimages = (int64_t)(n * (trig ? trig : 1));
            if (x && x <= TL_PROTO_MAX_DIM && y && y <= TL_PROTO_MAX_DIM) {
                st.size_x = (int64_t)x;
                st.size_y = (int64_t)y;
            }
            st.g_start = g0;
            st.g_step = dg;
        } else {
            const char *kind = NULL;
            uint64_t d = 0, f = 0, w = 0;
            if (tl_json_get_str(c, "kind", &kind, err) < 0 ||
                tl_json_get_u64(c, "darks", &d, err) < 0 ||
                tl_json_get_u64(c, "flats", &f, err) < 0 ||
                tl_json_get_u64(c, "window", &w, err) < 0)
                rc = -1;
            if (d || json_object_get(c, "darks"))
                st.darks = (int64_t)(d < TL_PROTO_MAX_WINDOW ? d : TL_PROTO_MAX_WINDOW);
            if (f || json_object_get(c, "flats"))
                st.flats = (int64_t)(f < TL_PROTO_MAX_WINDOW ? f : TL_PROTO_MAX_WINDOW);
            if (w)
                st.window = (int64_t)(w < TL_PROTO_MAX_WINDOW ? w : TL_PROTO_MAX_WINDOW);
            if (kind) { /* the kind must outlive the arena: resolve it now */
                tl_proto_kind k;
                static const char *const names[] = {"dark", "flat", "proj"};
                st.kind = tl_adapter_kind(kind, strlen(kind), &k) ? names[k] : "?";
                st.kind_len = strlen(st.kind);
            }
        }
        tl_json_done(c);
        if (rc != 0)
            return -1;
    }
    return tl_det_series_start(&a->ds, a->st.cfg, &st, err) == 0 ? 0 : -1;
}

/* The blob of an image into payload: moved as it is, or decoded into the pool. */
static int pixels(v1 *a, const char *encoding, zmq_msg_t *blob, size_t bytes, size_t esize,
                  zmq_msg_t *payload, tl_proto_error *err)
{
    const uint8_t *in = zmq_msg_data(blob);
    size_t len = zmq_msg_size(blob);
    char why[160];
    if (strcmp(encoding, "<") == 0) {
        if (len != bytes)
            return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                                 "blob of %zu bytes, but the shape and "
                                 "type make %zu",
                                 len, bytes),
                   -1;
        zmq_msg_move(payload, blob);
        return 0;
    }
    int bs = 0;
    if (strcmp(encoding, "lz4<") != 0 &&
        (sscanf(encoding, "bs%d-lz4<", &bs) != 1 || (bs != 8 && bs != 16 && bs != 32)))
        return tl_proto_fail(err, TL_PROTO_E_UNSUPPORTED,
                             "encoding \"%s\" is not <, lz4< or "
                             "bs8/bs16/bs32-lz4<",
                             encoding),
               -1;
    if (bs && (size_t)bs / 8 != esize)
        return tl_proto_fail(err, TL_PROTO_E_PAYLOAD, "encoding %s for %zu-byte pixels", encoding,
                             esize),
               -1;
    uint64_t total = 0;
    uint32_t block = 0;
    /* a bare LZ4 block, unless the blob opens with the HDF5 header of exactly this size */
    bool framed = bs || (tl_bitshuffle_header(in, len, &total, &block, why, sizeof why) == 0 &&
                         total == bytes && block > 0 && block <= bytes);
    if (framed) {
        if (tl_bitshuffle_header(in, len, &total, &block, why, sizeof why) != 0)
            return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "%s", why), -1;
        if (total != bytes)
            return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                                 "decompressed size %llu differs from "
                                 "the %zu bytes of the shape",
                                 (unsigned long long)total, bytes),
                   -1;
    }
    if ((uint64_t)bytes > (uint64_t)len * TL_LZ4_MAX_RATIO + 64)
        return tl_proto_fail(err, TL_PROTO_E_LIMIT,
                             "compression bomb: %zu bytes cannot expand "
                             "to %zu",
                             len, bytes),
               -1;
    if (bs) {
        size_t need = tl_bitshuffle_scratch(in, len);
        if (need == 0)
            return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "bitshuffle block size %u is unusable",
                                 block),
                   -1;
        if (need > a->scratch_cap) {
            void *s = realloc(a->scratch, need);
            if (!s)
                return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "out of memory"), -1;
            a->scratch = s;
            a->scratch_cap = need;
        }
    }
    void *out = tl_framepool_payload(a->st.pool, bytes, payload);
    if (!out)
        return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "out of memory for a frame"), -1;
    int rc = bs       ? tl_bitshuffle_decode_bslz4(in, len, esize, out, bytes, a->scratch,
                                                   a->scratch_cap, why, sizeof why)
             : framed ? tl_lz4_decode_hdf5(in, len, out, bytes, why, sizeof why)
                      : tl_lz4_decode_block(in, len, out, bytes, why, sizeof why);
    if (rc != 0) {
        zmq_msg_close(payload);
        zmq_msg_init(payload);
        return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "%s: %s", encoding, why), -1;
    }
    return 0;
}

static int image(v1 *a, json_t *h, zmq_msg_t *parts, int nparts, tl_item *out, tl_proto_error *err)
{
    if (nparts != 4)
        return tl_proto_fail(err, TL_PROTO_E_PARTS,
                             "an image is 4 parts (dimage, dimage_d, blob, dconfig), "
                             "not %d",
                             nparts),
               -1;
    tl_det_image im;
    tl_det_image_init(&im);
    if (tl_json_get_u64(h, "series", &im.series, err) <= 0 ||
        tl_json_get_u64(h, "frame", &im.image_id, err) <= 0)
        return err->code ? -1
                         : (tl_proto_fail(err, TL_PROTO_E_MISSING,
                                          "dimage needs \"series\" "
                                          "and \"frame\""),
                            -1);
    if (!a->ds.active || a->ds.id != im.series) /* refused before any decoding work */
        return tl_det_series_image(&a->ds, &a->st, &im, NULL, out, err);
    json_t *cfg = tl_json_parse(zmq_msg_data(&parts[3]), zmq_msg_size(&parts[3]), "dconfig", err);
    if (!cfg)
        return -1;
    const char *cfg_type = NULL;
    int crc = tl_json_get_str(cfg, "htype", &cfg_type, err);
    bool is_config = crc > 0 && strncmp(cfg_type, "dconfig-", 8) == 0;
    tl_json_done(cfg);
    if (!is_config)
        return err->code
                   ? -1
                   : (tl_proto_fail(err, TL_PROTO_E_TYPE, "part 4 of an image is not dconfig"),
                      -1);
    json_t *d = tl_json_parse(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), "dimage_d", err);
    if (!d)
        return -1;
    const char *htype = NULL, *type = NULL, *encoding = "<";
    uint32_t shape[2];
    int rc = 0;
    if (tl_json_get_str(d, "htype", &htype, err) <= 0 || strncmp(htype, "dimage_d-", 9) != 0)
        rc = err->code ? -1
                       : (tl_proto_fail(err, TL_PROTO_E_TYPE,
                                        "part 2 of an image is not "
                                        "dimage_d"),
                          -1);
    else if (tl_json_get_shape(d, "shape", shape, err) <= 0 ||
             tl_json_get_str(d, "type", &type, err) <= 0 ||
             tl_json_get_str(d, "encoding", &encoding, err) < 0)
        rc = err->code ? -1
                       : (tl_proto_fail(err, TL_PROTO_E_MISSING,
                                        "dimage_d needs \"shape\" "
                                        "and \"type\""),
                          -1);
    else if (!tl_adapter_dtype(type, &im.dtype))
        rc = (tl_proto_fail(err, TL_PROTO_E_DTYPE,
                            "type \"%s\" is not uint8, uint16, uint32 or "
                            "float32",
                            type),
              -1);
    size_t bytes = 0;
    if (rc == 0) {
        im.cols = shape[0]; /* V1 shapes are [x, y] */
        im.rows = shape[1];
        if (tl_proto_frame_bytes(im.rows, im.cols, im.dtype, &bytes, err) != TL_PROTO_OK)
            rc = -1;
        else if (bytes > a->max_frame)
            rc = (tl_proto_fail(err, TL_PROTO_E_LIMIT,
                                "a %u x %u frame is over "
                                "ingest.max_frame_mb",
                                im.rows, im.cols),
                  -1);
    }
    zmq_msg_t payload;
    zmq_msg_init(&payload);
    if (rc == 0)
        rc = pixels(a, encoding, &parts[2], bytes, tl_proto_dtype_size(im.dtype), &payload, err);
    tl_json_done(d);
    if (rc == 0)
        rc = tl_det_series_image(&a->ds, &a->st, &im, &payload, out, err);
    zmq_msg_close(&payload);
    return rc;
}

static int v1_decode(void *state, zmq_msg_t *parts, int nparts, tl_item *out, tl_proto_error *err)
{
    v1 *a = state;
    err->code = TL_PROTO_OK;
    json_t *h = tl_json_parse(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), "part 1", err);
    if (!h)
        return -1;
    const char *htype = NULL;
    int rc;
    if (tl_json_get_str(h, "htype", &htype, err) <= 0) {
        rc = err->code ? -1 : (tl_proto_fail(err, TL_PROTO_E_MISSING, "no \"htype\""), -1);
    } else if (strncmp(htype, "dheader-", 8) == 0) {
        rc = header(a, h, parts, nparts, err);
    } else if (strncmp(htype, "dimage-", 7) == 0) {
        rc = image(a, h, parts, nparts, out, err);
    } else if (strncmp(htype, "dseries_end-", 12) == 0) {
        uint64_t series;
        rc = tl_json_get_u64(h, "series", &series, err) <= 0
                 ? (err->code ? -1
                              : (tl_proto_fail(err, TL_PROTO_E_MISSING,
                                               "dseries_end without "
                                               "\"series\""),
                                 -1))
                 : tl_det_series_end(&a->ds, &a->st, series, out, err);
    } else {
        rc = (tl_proto_fail(err, TL_PROTO_E_TYPE,
                            "htype \"%.40s\" is not dheader, dimage or "
                            "dseries_end",
                            htype),
              -1);
    }
    tl_json_done(h);
    return rc;
}

static int v1_next(void *state, tl_item *out)
{
    return tl_adapter_stream_next(&((v1 *)state)->st, out);
}

const tl_adapter_ops tl_adapter_dectris1 = {
    .name = "dectris-v1",
    .create = v1_create,
    .destroy = v1_destroy,
    .decode = v1_decode,
    .next = v1_next,
};
