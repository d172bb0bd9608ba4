/* adapter_json.c — "JSON header + blob" streams as ingest formats (adapter.h), one adapter
 * per preset:
 *
 *   std-daq    PSI std_daq / GigaFRoST, what RECASTX reads: {"frame": n, "image_attributes":
 *              {"scan_index": 0 dark | 1 flat | 2 projection, "image_is_complete"?},
 *              "shape": [rows, cols], "type": "uint16"?} + pixels. frame counts within its
 *              kind and is the frame's index. A dark or flat after projections starts a new
 *              acquisition (a new scan), as RECASTX discards old darks and flats then.
 *   concert    KIT Concert: {"dtype", "shape": [rows, cols], free metadata, "frame_number"?}
 *              + pixels; {"end": true} alone ends the scan. Frame k of a scan (frame_number,
 *              else arrival order) is a dark below ingest.darks, a flat below darks + flats,
 *              else projection k - darks - flats.
 *   array-1.0  PSI / UFO arrays: {"htype": "array-1.0", "type", "shape" (slowest first),
 *              "frame"} + pixels; frames classified like concert's by "frame".
 *
 * None of them carries angles or a projection count: angles follow ingest.angle_start and
 * ingest.angle_step, the window is ingest.window (checked at start-up). A scan is
 * synthesised before the first frame and whenever the shape or dtype changes. The blob
 * moves on zero-copy; the header parses into the jansson arena (json_arena.h).
 */
#include <config.h>

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/adapter_stream.h"
#include "daemon/ingest/json_arena.h"

typedef enum { STD_DAQ, CONCERT, ARRAY10 } preset;

typedef struct {
    preset p;
    tl_adapter_stream st;
    uint64_t arrived; /* frames since the scan opened (concert without frame_number) */
} jad;

static void *create(preset p, const tl_settings *c, char *err, size_t errlen)
{
    jad *a = tl_adapter_alloc(sizeof *a, offsetof(jad, st), c, err, errlen);
    if (!a)
        return NULL;
    a->p = p;
    return a;
}

static void *std_daq_create(const tl_settings *c, char *err, size_t errlen)
{
    return create(STD_DAQ, c, err, errlen);
}

static void *concert_create(const tl_settings *c, char *err, size_t errlen)
{
    return create(CONCERT, c, err, errlen);
}

static void *array10_create(const tl_settings *c, char *err, size_t errlen)
{
    return create(ARRAY10, c, err, errlen);
}

static void destroy(void *state)
{
    jad *a = state;
    tl_adapter_stream_destroy(&a->st);
    free(a);
}

static int missing(tl_proto_error *err, const char *what)
{
    if (err->code == TL_PROTO_OK)
        tl_proto_fail(err, TL_PROTO_E_MISSING, "no \"%s\"", what);
    return -1;
}

/* The frame's header fields; -1 with err. */
static int read_header(jad *a, json_t *h, tl_proto_frame *f, bool *new_acq, tl_proto_error *err)
{
    const char *type = NULL;
    uint64_t k = 0;
    *new_acq = false;
    uint32_t shape[2];
    if (tl_json_get_shape(h, "shape", shape, err) <= 0)
        return missing(err, "shape");
    f->rows = shape[0]; /* slowest first: [rows, cols] */
    f->cols = shape[1];
    switch (a->p) {
        case STD_DAQ: {
            uint64_t scan_index;
            bool complete = true;
            type = "uint16"; /* RECASTX's default */
            if (tl_json_get_u64(h, "frame", &f->index, err) <= 0)
                return missing(err, "frame");
            if (tl_json_get_u64(h, "image_attributes.scan_index", &scan_index, err) <= 0)
                return missing(err, "image_attributes.scan_index");
            if (tl_json_get_bool(h, "image_attributes.image_is_complete", &complete, err) < 0 ||
                tl_json_get_str(h, "type", &type, err) < 0)
                return -1;
            if (scan_index > 2)
                return tl_proto_fail(err, TL_PROTO_E_KIND,
                                     "scan_index %llu is not 0 (dark), 1 (flat) "
                                     "or 2 (projection)",
                                     (unsigned long long)scan_index),
                       -1;
            if (!complete)
                return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                                     "frame %llu: image_is_complete is false "
                                     "(packets lost)",
                                     (unsigned long long)f->index),
                       -1;
            f->kind = (tl_proto_kind)scan_index; /* 0 dark, 1 flat, 2 projection: the same order */
            *new_acq = f->kind != TL_PROTO_PROJ && a->st.scan_has_proj;
            break;
        }
        case CONCERT:
            if (tl_json_get_str(h, "dtype", &type, err) <= 0)
                return missing(err, "dtype");
            if (tl_json_get_u64(h, "frame_number", &k, err) < 0)
                return -1;
            if (!json_object_get(h, "frame_number"))
                k = UINT64_MAX; /* arrival order, once the scan is known */
            break;
        case ARRAY10: {
            const char *htype = NULL;
            if (tl_json_get_str(h, "htype", &htype, err) <= 0)
                return missing(err, "htype");
            if (strcmp(htype, "array-1.0") != 0)
                return tl_proto_fail(err, TL_PROTO_E_TYPE, "htype \"%.40s\" is not array-1.0",
                                     htype),
                       -1;
            if (tl_json_get_str(h, "type", &type, err) <= 0)
                return missing(err, "type");
            if (tl_json_get_u64(h, "frame", &k, err) <= 0)
                return missing(err, "frame");
            break;
        }
    }
    if (!tl_adapter_dtype(type, &f->dtype))
        return tl_proto_fail(err, TL_PROTO_E_DTYPE,
                             "type \"%.40s\" is not uint8, uint16, uint32 "
                             "or float32",
                             type),
               -1;
    if (a->p != STD_DAQ)
        f->index = k;
    return 0;
}

static int decode(void *state, zmq_msg_t *parts, int nparts, tl_item *out, tl_proto_error *err)
{
    jad *a = state;
    const tl_settings *c = a->st.cfg;
    err->code = TL_PROTO_OK;
    json_t *h = tl_json_parse(zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), "the header", err);
    if (!h)
        return -1;
    int rc = -1;
    bool end = false;
    if (a->p == CONCERT && tl_json_get_bool(h, "end", &end, err) < 0)
        goto done;
    if (end) {
        rc = nparts == 1
                 ? tl_adapter_stream_end(&a->st, out)
                 : (tl_proto_fail(err, TL_PROTO_E_PARTS, "the end message has no payload"), -1);
        goto done;
    }
    if (nparts != 2) {
        tl_proto_fail(err, TL_PROTO_E_PARTS, "a frame is a header and a payload, not %d parts",
                      nparts);
        goto done;
    }
    tl_proto_frame f = {0};
    bool new_acq;
    if (read_header(a, h, &f, &new_acq, err) != 0)
        goto done;
    if (tl_proto_check_payload(f.rows, f.cols, f.dtype, zmq_msg_size(&parts[1]), err) !=
        TL_PROTO_OK)
        goto done;
    tl_proto_scan scan, *open_first = NULL;
    if (new_acq || !tl_adapter_stream_fits(&a->st, f.rows, f.cols, f.dtype)) {
        tl_adapter_scan_init(c, &scan, a->st.next_series++, f.rows, f.cols, f.dtype, 0);
        if (a->p == STD_DAQ)
            scan.darks = scan.flats = 0; /* labelled, not counted */
        open_first = &scan;
        a->arrived = 0;
    }
    if (a->p != STD_DAQ) {
        uint64_t k = f.index == UINT64_MAX ? a->arrived : f.index;
        a->arrived++;
        tl_adapter_classify(k, (uint32_t)c->ingest_darks, (uint32_t)c->ingest_flats, &f.kind,
                            &f.index);
    }
    f.series = open_first ? open_first->series : a->st.scan.series;
    zmq_msg_t payload;
    zmq_msg_init(&payload);
    zmq_msg_move(&payload, &parts[1]); /* the pixels travel zero-copy */
    rc = tl_adapter_stream_emit(&a->st, open_first, &f, &payload, out);
    zmq_msg_close(&payload);
done:
    tl_json_done(h);
    return rc;
}

static int next(void *state, tl_item *out)
{
    return tl_adapter_stream_next(&((jad *)state)->st, out);
}

const tl_adapter_ops tl_adapter_std_daq = {
    .name = "std-daq",
    .create = std_daq_create,
    .destroy = destroy,
    .decode = decode,
    .next = next,
};
const tl_adapter_ops tl_adapter_concert = {
    .name = "concert",
    .create = concert_create,
    .destroy = destroy,
    .decode = decode,
    .next = next,
};
const tl_adapter_ops tl_adapter_array10 = {
    .name = "array-1.0",
    .create = array10_create,
    .destroy = destroy,
    .decode = decode,
    .next = next,
};
