/* adapter_dectris2.c — DECTRIS Stream V2 (single-part CBOR: start / image / end) as an
 * ingest format (adapter.h; field list: dectris/documentation stream_v2/README.md).
 *
 * The CBOR is walked with libcbor's streaming decoder one data item at a time (a pull
 * parser over cbor_stream_decode), so nothing is allocated per message and byte strings
 * stay where they arrived. An image's channel is a MultiDimArray (tag 40: [[rows, cols],
 * typed array]) whose typed array (tags 64/68 uint8, 69 uint16 LE, 70 uint32 LE, 85
 * float32 LE) is a byte string — sent on zero-copy, wrapped in the received message — or a
 * DECTRIS compression tag 56500 ["bslz4" | "lz4", element size, bytes], decoded into a
 * pooled buffer (bitshuffle.h). Of several channels (thresholds) the one ingest.channel
 * names is taken, else the first; an image without that channel is refused. Series, kinds,
 * angles and scans: det_series.h. Every defect (types, sizes, shapes, compression) is a
 * rejection with its reason. Messages open with the self-describe tag 55799 (as detectors
 * send them) or not; keys of the specification that tomolive does not use, and user_data
 * of any type, are skipped whole.
 *
 * What the detector tells in its start message is used: with header_detail "all" it
 * carries a pixel mask per channel (that of the chosen channel is applied to every image
 * of the series: masked pixels filled from their neighbours, pixel_mask.h), and its
 * flags flatfield_enabled, countrate_correction_enabled and pixel_mask_enabled go with
 * the scan the series opens (tl_item_detector), for status.
 */
#include <config.h>

#include <cbor.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/ingest/det_series.h"
#include "daemon/ingest/bitshuffle.h"
#include "daemon/ingest/pixel_mask.h"
#include "daemon/base/log.h"

/* ---- a pull parser over libcbor's streaming decoder ------------------------------------ */

typedef enum {
    CB_UINT,
    CB_NEG,
    CB_BYTES,
    CB_TEXT,
    CB_ARRAY,
    CB_MAP,
    CB_TAG,
    CB_FLOAT,
    CB_BOOL,
    CB_NULL,
    CB_INDEF,
    CB_BREAK
} cb_type;

typedef struct {
    cb_type t;
    uint64_t u; /* UINT, NEG (-1 - u), ARRAY/MAP count, TAG number, BOOL */
    double f;
    const uint8_t *p; /* BYTES, TEXT */
    size_t n;
} cb_item;

typedef struct {
    const uint8_t *p, *end;
} cb_reader;

/* One callback a line: they read as the table they are. */
/* clang-format off */
#define CB_SET(field_type, ...) do { cb_item *it_ = ctx; it_->t = field_type; __VA_ARGS__; } while (0)
static void cb_u8(void *ctx, uint8_t v) { CB_SET(CB_UINT, it_->u = v); }
static void cb_u16(void *ctx, uint16_t v) { CB_SET(CB_UINT, it_->u = v); }
static void cb_u32(void *ctx, uint32_t v) { CB_SET(CB_UINT, it_->u = v); }
static void cb_u64(void *ctx, uint64_t v) { CB_SET(CB_UINT, it_->u = v); }
static void cb_n8(void *ctx, uint8_t v) { CB_SET(CB_NEG, it_->u = v); }
static void cb_n16(void *ctx, uint16_t v) { CB_SET(CB_NEG, it_->u = v); }
static void cb_n32(void *ctx, uint32_t v) { CB_SET(CB_NEG, it_->u = v); }
static void cb_n64(void *ctx, uint64_t v) { CB_SET(CB_NEG, it_->u = v); }
static void cb_bytes(void *ctx, cbor_data d, size_t n) { CB_SET(CB_BYTES, it_->p = d; it_->n = n); }
static void cb_text(void *ctx, cbor_data d, size_t n) { CB_SET(CB_TEXT, it_->p = d; it_->n = n); }
static void cb_indef(void *ctx) { CB_SET(CB_INDEF, (void)0); }
static void cb_array(void *ctx, size_t n) { CB_SET(CB_ARRAY, it_->u = n); }
static void cb_map(void *ctx, size_t n) { CB_SET(CB_MAP, it_->u = n); }
static void cb_tag(void *ctx, uint64_t v) { CB_SET(CB_TAG, it_->u = v); }
static void cb_f4(void *ctx, float v) { CB_SET(CB_FLOAT, it_->f = v); }
static void cb_f8(void *ctx, double v) { CB_SET(CB_FLOAT, it_->f = v); }
static void cb_null(void *ctx) { CB_SET(CB_NULL, (void)0); }
static void cb_bool(void *ctx, bool v) { CB_SET(CB_BOOL, it_->u = v); }
static void cb_break(void *ctx) { CB_SET(CB_BREAK, (void)0); }
/* clang-format on */

static const struct cbor_callbacks callbacks = {
    .uint8 = cb_u8,
    .uint16 = cb_u16,
    .uint32 = cb_u32,
    .uint64 = cb_u64,
    .negint8 = cb_n8,
    .negint16 = cb_n16,
    .negint32 = cb_n32,
    .negint64 = cb_n64,
    .byte_string = cb_bytes,
    .byte_string_start = cb_indef,
    .string = cb_text,
    .string_start = cb_indef,
    .array_start = cb_array,
    .indef_array_start = cb_indef,
    .map_start = cb_map,
    .indef_map_start = cb_indef,
    .tag = cb_tag,
    .float2 = cb_f4,
    .float4 = cb_f4,
    .float8 = cb_f8,
    .undefined = cb_null,
    .null = cb_null,
    .boolean = cb_bool,
    .indef_break = cb_break,
};

static int cb_next(cb_reader *r, cb_item *it, tl_proto_error *err)
{
    if (r->p >= r->end)
        return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "CBOR message truncated"), -1;
    struct cbor_decoder_result res =
        cbor_stream_decode(r->p, (size_t)(r->end - r->p), &callbacks, it);
    if (res.status != CBOR_DECODER_FINISHED || res.read == 0)
        return tl_proto_fail(err, TL_PROTO_E_MALFORMED,
                             res.status == CBOR_DECODER_NEDATA ? "CBOR message truncated"
                                                               : "not CBOR (malformed data item)"),
               -1;
    r->p += res.read;
    return 0;
}

/* Skips the rest of a data item whose head is it (nested containers, tags, indefinite
 * lengths), up to 32 levels deep. */
static int cb_skip_rest(cb_reader *r, const cb_item *head, tl_proto_error *err)
{
    int64_t left[32];
    int depth = 0;
    cb_item it = *head;
    for (;;) {
        /* a container's count is bounded by the bytes left before it is counted with: a
         * map's 2 * count of a declared 2^63 would overflow (issue 27) */
        if ((it.t == CB_ARRAY || it.t == CB_MAP) && it.u > (uint64_t)(r->end - r->p))
            return tl_proto_fail(err, TL_PROTO_E_LIMIT,
                                 "CBOR container of %llu items in %zu "
                                 "bytes",
                                 (unsigned long long)it.u, (size_t)(r->end - r->p)),
                   -1;
        int64_t push = it.t == CB_ARRAY   ? (int64_t)it.u
                       : it.t == CB_MAP   ? 2 * (int64_t)it.u
                       : it.t == CB_TAG   ? 1
                       : it.t == CB_INDEF ? -1
                                          : 0;
        if (it.t == CB_BREAK) {
            if (depth == 0 || left[depth - 1] != -1)
                return tl_proto_fail(err, TL_PROTO_E_MALFORMED,
                                     "CBOR break outside an "
                                     "indefinite-length item"),
                       -1;
            depth--;
        } else if (push != 0) {
            if (depth == 32)
                return tl_proto_fail(err, TL_PROTO_E_LIMIT, "CBOR nested deeper than 32"), -1;
            left[depth++] = push;
            goto next; /* the container's first item is not one of its parent's */
        }
        while (depth > 0 && left[depth - 1] > 0 && --left[depth - 1] == 0)
            depth--;
        if (depth == 0)
            return 0;
    next:
        if (cb_next(r, &it, err) != 0)
            return -1;
    }
}

static int cb_skip(cb_reader *r, tl_proto_error *err)
{
    cb_item it;
    return cb_next(r, &it, err) == 0 ? cb_skip_rest(r, &it, err) : -1;
}

/* The next item, after any tags in front of it (DateTime is tag 0 + text, and so on). */
static int cb_value(cb_reader *r, cb_item *it, tl_proto_error *err)
{
    do
        if (cb_next(r, it, err) != 0)
            return -1;
    while (it->t == CB_TAG);
    return 0;
}

static bool text_is(const cb_item *it, const char *s)
{
    return it->t == CB_TEXT && it->n == strlen(s) && memcmp(it->p, s, it->n) == 0;
}

static int want_type(const cb_item *it, cb_type t, const char *key, const char *what,
                     tl_proto_error *err)
{
    if (it->t == t)
        return 0;
    tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be %s", key, what);
    return -1;
}

static int get_uint(cb_reader *r, const char *key, uint64_t *out, tl_proto_error *err)
{
    cb_item it;
    if (cb_value(r, &it, err) != 0 ||
        want_type(&it, CB_UINT, key, "an unsigned integer", err) != 0)
        return -1;
    *out = it.u;
    return 0;
}

static int get_number(cb_reader *r, const char *key, double *out, tl_proto_error *err)
{
    cb_item it;
    if (cb_value(r, &it, err) != 0)
        return -1;
    if (it.t == CB_UINT)
        *out = (double)it.u;
    else if (it.t == CB_NEG)
        *out = -1.0 - (double)it.u;
    else if (it.t == CB_FLOAT)
        *out = it.f;
    else
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"%s\" must be a number", key), -1;
    if (!isfinite(*out))
        return tl_proto_fail(err, TL_PROTO_E_NOT_FINITE, "\"%s\" is not finite", key), -1;
    return 0;
}

/* ---- one message ----------------------------------------------------------------------- */

enum { COMP_NONE = 0, COMP_BSLZ4, COMP_LZ4 };

/* A MultiDimArray as it lies in the message: dimensions, typed-array tag, and its bytes
 * (compressed or not). */
typedef struct {
    uint64_t dims[2];
    uint64_t tag;
    int comp;
    uint64_t elem;
    const uint8_t *bytes;
    size_t nbytes;
} v2array;

typedef struct {
    cb_item type;
    bool has_series, has_image, has_data, has_mask;
    uint64_t series, image_id;
    tl_det_start start;
    tl_det_image image;
    v2array data; /* image: the chosen channel */
    v2array mask; /* start: the chosen channel's pixel mask */
    tl_item_detector detector;
    /* acquisition time: series_date (RFC 3339 text, or seconds since the epoch) */
    cb_item date;
    bool date_epoch;
    double epoch;
    bool has_start_time;
    uint64_t st_num, st_den;
} v2msg;

typedef struct {
    tl_adapter_stream st;
    tl_det_series ds;
    void *scratch;
    size_t scratch_cap;
    uint64_t max_frame;
    tl_pixel_mask mask; /* of the running series (none: 0 x 0) */
    void *mask_buf;     /* a compressed mask, decoded (once per start) */
    size_t mask_buf_cap;
} v2;

/* goniometer: {axis: {start, increment}, ...}; only the configured axis counts. */
static int parse_goniometer(v2 *a, cb_reader *r, v2msg *m, tl_proto_error *err)
{
    cb_item it;
    if (cb_value(r, &it, err) != 0 || want_type(&it, CB_MAP, "goniometer", "a map", err) != 0)
        return -1;
    for (uint64_t i = 0; i < it.u; i++) {
        cb_item k;
        if (cb_value(r, &k, err) != 0 ||
            want_type(&k, CB_TEXT, "goniometer", "keyed by text", err))
            return -1;
        if (!text_is(&k, a->st.cfg->ingest_goniometer_axis)) {
            if (cb_skip(r, err) != 0)
                return -1;
            continue;
        }
        cb_item ax;
        if (cb_value(r, &ax, err) != 0 || want_type(&ax, CB_MAP, "goniometer axis", "a map", err))
            return -1;
        for (uint64_t j = 0; j < ax.u; j++) {
            cb_item f;
            if (cb_value(r, &f, err) != 0 ||
                want_type(&f, CB_TEXT, "goniometer axis", "keyed by text", err))
                return -1;
            int rc = text_is(&f, "start")
                         ? get_number(r, "goniometer start", &m->start.g_start, err)
                     : text_is(&f, "increment")
                         ? get_number(r, "goniometer increment", &m->start.g_step, err)
                         : cb_skip(r, err);
            if (rc != 0)
                return -1;
        }
    }
    return 0;
}

/* user_data: a map may carry kind, darks, flats, window (start) and kind, angle, index
 * (image); anything else, and user data that is not a map, is ignored. */
static int parse_user_data(cb_reader *r, v2msg *m, tl_proto_error *err)
{
    cb_item it;
    if (cb_value(r, &it, err) != 0)
        return -1;
    if (it.t != CB_MAP)
        return cb_skip_rest(r, &it, err);
    for (uint64_t i = 0; i < it.u; i++) {
        cb_item k;
        if (cb_value(r, &k, err) != 0)
            return -1;
        if (k.t != CB_TEXT) { /* not ours: skip the key's rest and the value */
            if (cb_skip_rest(r, &k, err) != 0 || cb_skip(r, err) != 0)
                return -1;
            continue;
        }
        uint64_t u;
        int rc = 0;
        if (text_is(&k, "kind")) {
            cb_item v;
            rc = cb_value(r, &v, err) || want_type(&v, CB_TEXT, "user_data.kind", "text", err);
            if (rc == 0) {
                m->start.kind = m->image.kind = (const char *)v.p;
                m->start.kind_len = m->image.kind_len = v.n;
            }
        } else if (text_is(&k, "darks") || text_is(&k, "flats") || text_is(&k, "window") ||
                   text_is(&k, "index")) {
            char key[24];
            snprintf(key, sizeof key, "user_data.%.*s", (int)k.n, (const char *)k.p);
            rc = get_uint(r, key, &u, err);
            if (rc == 0 && u > TL_PROTO_MAX_WINDOW * 64ull)
                rc = (tl_proto_fail(err, TL_PROTO_E_RANGE, "%s = %llu is out of range", key,
                                    (unsigned long long)u),
                      -1);
            int64_t v = (int64_t)u;
            if (rc == 0)
                *(k.p[0] == 'd'   ? &m->start.darks
                  : k.p[0] == 'f' ? &m->start.flats
                  : k.p[0] == 'w' ? &m->start.window
                                  : &m->image.index) = v;
        } else if (text_is(&k, "angle")) {
            rc = get_number(r, "user_data.angle", &m->image.angle_deg, err);
        } else {
            rc = cb_skip(r, err);
        }
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* A MultiDimArray: tag 40 [[rows, cols], typed array]; the typed array a byte string or a
 * compression tag 56500 [algorithm, element size, bytes]. */
static int parse_array(cb_reader *r, v2array *arr, tl_proto_error *err)
{
    cb_item it;
    if (cb_next(r, &it, err) != 0)
        return -1;
    if (it.t != CB_TAG || it.u != 40)
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE,
                             "image data must be a multi-dimensional "
                             "array (tag 40)"),
               -1;
    if (cb_next(r, &it, err) != 0)
        return -1;
    if (it.t != CB_ARRAY || it.u != 2)
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "tag 40 must hold [dimensions, array]"), -1;
    if (cb_next(r, &it, err) != 0)
        return -1;
    if (it.t != CB_ARRAY || it.u != 2)
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "image dimensions must be [rows, cols]"),
               -1;
    for (int i = 0; i < 2; i++)
        if (get_uint(r, "image dimensions", &arr->dims[i], err) != 0)
            return -1;
    if (cb_next(r, &it, err) != 0)
        return -1;
    if (it.t != CB_TAG || it.u < 64 || it.u > 87)
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE,
                             "image array must be a typed array "
                             "(tags 64..87)"),
               -1;
    arr->tag = it.u;
    if (cb_next(r, &it, err) != 0)
        return -1;
    if (it.t == CB_TAG && it.u == 56500) {
        cb_item alg, bytes;
        if (cb_next(r, &it, err) != 0)
            return -1;
        if (it.t != CB_ARRAY || it.u != 3)
            return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE,
                                 "compression tag 56500 must hold "
                                 "[algorithm, element size, bytes]"),
                   -1;
        if (cb_next(r, &alg, err) != 0 ||
            want_type(&alg, CB_TEXT, "compression algorithm", "text", err) ||
            get_uint(r, "compression element size", &arr->elem, err) != 0 ||
            cb_next(r, &bytes, err) != 0 ||
            want_type(&bytes, CB_BYTES, "compressed data", "a byte string", err))
            return -1;
        if (text_is(&alg, "bslz4"))
            arr->comp = COMP_BSLZ4;
        else if (text_is(&alg, "lz4"))
            arr->comp = COMP_LZ4;
        else
            return tl_proto_fail(err, TL_PROTO_E_UNSUPPORTED,
                                 "compression \"%.*s\" is not bslz4 "
                                 "or lz4",
                                 (int)(alg.n < 16 ? alg.n : 16), (const char *)alg.p),
                   -1;
        it = bytes;
    } else if (it.t != CB_BYTES) {
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "typed array must hold a byte string"), -1;
    }
    arr->bytes = it.p;
    arr->nbytes = it.n;
    return 0;
}

/* key ("data", "pixel_mask"): {channel: MultiDimArray}; the channel ingest.channel names,
 * or the first. *found says whether it was there (else a refusal that names it). */
static int parse_channels(v2 *a, cb_reader *r, const char *key, v2array *arr, bool *found,
                          tl_proto_error *err)
{
    cb_item it;
    if (cb_value(r, &it, err) != 0 || want_type(&it, CB_MAP, key, "a map of channels", err))
        return -1;
    const char *want = a->st.cfg->ingest_channel;
    for (uint64_t i = 0; i < it.u; i++) {
        cb_item k;
        if (cb_value(r, &k, err) != 0 ||
            want_type(&k, CB_TEXT, key, "keyed by channel names", err))
            return -1;
        bool take = !*found && (!*want || text_is(&k, want));
        if ((take ? parse_array(r, arr, err) : cb_skip(r, err)) != 0)
            return -1;
        *found |= take;
    }
    if (!*found)
        return tl_proto_fail(err, TL_PROTO_E_MISSING,
                             *want ? "no channel \"%s\" in %s (ingest.channel)"
                                   : "%s%s has no channel",
                             want, key),
               -1;
    return 0;
}

static int get_bool(cb_reader *r, const char *key, bool *out, tl_proto_error *err)
{
    cb_item it;
    if (cb_value(r, &it, err) != 0 || want_type(&it, CB_BOOL, key, "a boolean", err) != 0)
        return -1;
    *out = it.u != 0;
    return 0;
}

/* series_date: DateTime (tag 0 + RFC 3339 text) or, as RFC 8949 also allows, tag 1 +
 * seconds since the epoch. */
static int parse_date(cb_reader *r, v2msg *m, tl_proto_error *err)
{
    if (cb_value(r, &m->date, err) != 0)
        return -1;
    if (m->date.t == CB_TEXT)
        return 0;
    m->date_epoch = true;
    if (m->date.t == CB_UINT)
        m->epoch = (double)m->date.u;
    else if (m->date.t == CB_FLOAT && isfinite(m->date.f))
        m->epoch = m->date.f;
    else
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE,
                             "\"series_date\" must be a date-time (text, or seconds "
                             "since the epoch)"),
               -1;
    return 0;
}

static int parse(v2 *a, const uint8_t *buf, size_t len, v2msg *m, tl_proto_error *err)
{
    cb_reader r = {buf, buf + len};
    cb_item it;
    if (cb_next(&r, &it, err) != 0)
        return -1;
    /* DECTRIS detectors open every message with the self-describe tag (RFC 8949 §3.4.6) */
    if (it.t == CB_TAG && it.u == 55799 && cb_next(&r, &it, err) != 0)
        return -1;
    if (it.t != CB_MAP)
        return tl_proto_fail(err, TL_PROTO_E_NOT_MAP,
                             "a DECTRIS Stream V2 message is a CBOR "
                             "map"),
               -1;
    static const char *const known[] = {"type",
                                        "series_id",
                                        "image_id",
                                        "image_size_x",
                                        "image_size_y",
                                        "number_of_images",
                                        "goniometer",
                                        "user_data",
                                        "data",
                                        "series_date",
                                        "start_time",
                                        "pixel_mask",
                                        "flatfield_enabled",
                                        "countrate_correction_enabled",
                                        "pixel_mask_enabled"};
    unsigned seen = 0;
    for (uint64_t i = 0; i < it.u; i++) {
        cb_item k;
        if (cb_next(&r, &k, err) != 0)
            return -1;
        if (k.t != CB_TEXT)
            return tl_proto_fail(err, TL_PROTO_E_NOT_MAP, "a key is not a text string"), -1;
        size_t w = 0;
        while (w < sizeof known / sizeof *known && !text_is(&k, known[w]))
            w++;
        if (w < sizeof known / sizeof *known) {
            if (seen & (1u << w))
                return tl_proto_fail(err, TL_PROTO_E_DUP_KEY, "key \"%s\" appears twice",
                                     known[w]),
                       -1;
            seen |= 1u << w;
        }
        uint64_t u;
        int rc;
        switch (w) {
            case 0:
                rc = cb_value(&r, &m->type, err) ||
                     want_type(&m->type, CB_TEXT, "type", "text", err);
                break;
            case 1:
                rc = get_uint(&r, "series_id", &m->series, err);
                m->has_series = true;
                break;
            case 2:
                rc = get_uint(&r, "image_id", &m->image_id, err);
                m->has_image = true;
                break;
            case 3:
            case 4:
            case 5:
                rc = get_uint(&r, known[w], &u, err);
                if (rc == 0 && (w < 5 ? u > TL_PROTO_MAX_DIM : u > (1ull << 40)))
                    rc = (tl_proto_fail(err, TL_PROTO_E_RANGE, "%s = %llu is out of range",
                                        known[w], (unsigned long long)u),
                          -1);
                if (rc == 0)
                    *(w == 3   ? &m->start.size_x
                      : w == 4 ? &m->start.size_y
                               : &m->start.nimages) = (int64_t)u;
                break;
            case 6: rc = parse_goniometer(a, &r, m, err); break;
            case 7: rc = parse_user_data(&r, m, err); break;
            case 8: rc = parse_channels(a, &r, "data", &m->data, &m->has_data, err); break;
            case 9: rc = parse_date(&r, m, err); break;
            case 10: {
                cb_item arr;
                rc = cb_value(&r, &arr, err) ||
                     want_type(&arr, CB_ARRAY, "start_time", "[numerator, denominator]", err);
                if (rc == 0 && arr.u != 2)
                    rc = (tl_proto_fail(err, TL_PROTO_E_KEY_TYPE,
                                        "start_time must be [numerator, "
                                        "denominator]"),
                          -1);
                if (rc == 0)
                    rc = get_uint(&r, "start_time", &m->st_num, err) ||
                         get_uint(&r, "start_time", &m->st_den, err);
                m->has_start_time = rc == 0 && m->st_den > 0;
                break;
            }
            case 11: rc = parse_channels(a, &r, "pixel_mask", &m->mask, &m->has_mask, err); break;
            case 12: rc = get_bool(&r, known[w], &m->detector.flatfield_enabled, err); break;
            case 13:
                rc = get_bool(&r, known[w], &m->detector.countrate_correction_enabled, err);
                break;
            case 14: rc = get_bool(&r, known[w], &m->detector.pixel_mask_enabled, err); break;
            default: rc = cb_skip(&r, err); break;
        }
        if (rc != 0)
            return -1;
        m->detector.told |= w >= 11 && w <= 14; /* the detector says what it did */
    }
    if (r.p != r.end)
        return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "%zu bytes after the message's map",
                             (size_t)(r.end - r.p)),
               -1;
    if (!(seen & 1))
        return tl_proto_fail(err, TL_PROTO_E_MISSING, "no \"type\""), -1;
    return 0;
}

/* series_date (RFC 3339: 2022-03-07T12:34:56.789+01:00, or epoch seconds) + start_time,
 * in ns since the epoch; false when absent or unreadable. */
static bool acquisition_time(const v2msg *m, uint64_t *ns)
{
    double since = m->has_start_time ? (double)m->st_num / (double)m->st_den : 0;
    if (m->date_epoch && m->has_start_time && m->epoch + since > 0 && m->epoch + since < 1e10) {
        *ns = (uint64_t)((m->epoch + since) * 1e9);
        return true;
    }
    if (m->date.t != CB_TEXT || m->date.n < 19 || m->date.n > 40 || !m->has_start_time)
        return false;
    char s[48];
    memcpy(s, m->date.p, m->date.n);
    s[m->date.n] = 0;
    struct tm tm = {0};
    int used = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &used) != 6)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    double frac = 0;
    const char *p = s + used;
    if (*p == '.') {
        char *end;
        frac = strtod(p, &end);
        p = end;
    }
    long off = 0;
    if (*p == '+' || *p == '-') {
        int hh, mm;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
            return false;
        off = (*p == '+' ? 1 : -1) * (hh * 3600L + mm * 60L);
    } else if (*p != 'Z' && *p != 'z') {
        return false;
    }
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return false;
    double sec = (double)(t - off) + frac + (double)m->st_num / (double)m->st_den;
    if (!(sec > 0 && sec < 1e10))
        return false;
    *ns = (uint64_t)(sec * 1e9);
    return true;
}

/* The dtype of a typed-array tag, or false (big-endian and signed arrays are refused). */
static bool tag_dtype(uint64_t tag, tl_proto_dtype *t)
{
    switch (tag) {
        case 64:
        case 68: *t = TL_PROTO_U8; return true;
        case 69: *t = TL_PROTO_U16; return true;
        case 70: *t = TL_PROTO_U32; return true;
        case 85: *t = TL_PROTO_F32; return true;
        default: return false;
    }
}

/* The dtype and shape of an array (rows, cols, *bytes); checks them against the limits. */
static int array_shape(v2 *a, const v2array *arr, const char *what, tl_proto_dtype *dtype,
                       uint32_t *rows, uint32_t *cols, size_t *bytes, tl_proto_error *err)
{
    if (!tag_dtype(arr->tag, dtype))
        return tl_proto_fail(err, TL_PROTO_E_DTYPE,
                             "%s: typed array tag %llu is not uint8 (64, 68), "
                             "uint16 LE (69), uint32 LE (70) or float32 LE (85)",
                             what, (unsigned long long)arr->tag),
               -1;
    if (arr->dims[0] < 1 || arr->dims[0] > TL_PROTO_MAX_DIM || arr->dims[1] < 1 ||
        arr->dims[1] > TL_PROTO_MAX_DIM)
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "%s: dimensions %llu x %llu out of range 1..%u", what,
                             (unsigned long long)arr->dims[0], (unsigned long long)arr->dims[1],
                             TL_PROTO_MAX_DIM),
               -1;
    *rows = (uint32_t)arr->dims[0];
    *cols = (uint32_t)arr->dims[1];
    if (tl_proto_frame_bytes(*rows, *cols, *dtype, bytes, err) != TL_PROTO_OK)
        return -1;
    if (*bytes > a->max_frame)
        return tl_proto_fail(err, TL_PROTO_E_LIMIT,
                             "%s: a %u x %u array is %zu MiB, over "
                             "ingest.max_frame_mb",
                             what, *rows, *cols, *bytes >> 20),
               -1;
    return 0;
}

/* Checks a compressed array against the bytes its shape makes (and sizes the bslz4
 * scratch); 0 or -1 with err. */
static int check_compressed(v2 *a, const v2array *arr, size_t bytes, size_t esize,
                            tl_proto_error *err)
{
    char why[160];
    uint64_t total;
    uint32_t block;
    if (tl_bitshuffle_header(arr->bytes, arr->nbytes, &total, &block, why, sizeof why) != 0)
        return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "%s", why), -1;
    if (total != bytes)
        return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                             "decompressed size %llu differs from %llu x "
                             "%llu x %zu = %zu",
                             (unsigned long long)total, (unsigned long long)arr->dims[0],
                             (unsigned long long)arr->dims[1], esize, bytes),
               -1;
    if ((uint64_t)bytes > (uint64_t)arr->nbytes * TL_LZ4_MAX_RATIO + 64)
        return tl_proto_fail(err, TL_PROTO_E_LIMIT,
                             "compression bomb: %zu bytes cannot expand to "
                             "%zu",
                             arr->nbytes, bytes),
               -1;
    if (arr->comp != COMP_BSLZ4)
        return 0;
    if (arr->elem != esize)
        return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                             "bslz4 element size %llu, but the "
                             "array's elements are %zu bytes",
                             (unsigned long long)arr->elem, esize),
               -1;
    size_t need = tl_bitshuffle_scratch(arr->bytes, arr->nbytes);
    if (need == 0)
        return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "bslz4 block size %u is unusable", block),
               -1;
    if (need > a->scratch_cap) { /* once per new block size */
        void *sc = realloc(a->scratch, need);
        if (!sc)
            return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "out of memory"), -1;
        a->scratch = sc;
        a->scratch_cap = need;
    }
    return 0;
}

/* Decompresses a checked array (check_compressed) into out. */
static int decompress(v2 *a, const v2array *arr, size_t esize, void *out, size_t bytes,
                      tl_proto_error *err)
{
    char why[160];
    int rc = arr->comp == COMP_BSLZ4
                 ? tl_bitshuffle_decode_bslz4(arr->bytes, arr->nbytes, esize, out, bytes,
                                              a->scratch, a->scratch_cap, why, sizeof why)
                 : tl_lz4_decode_hdf5(arr->bytes, arr->nbytes, out, bytes, why, sizeof why);
    if (rc != 0)
        return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "%s: %s",
                             arr->comp == COMP_BSLZ4 ? "bslz4" : "lz4", why),
               -1;
    return 0;
}

/* The pixels of an image message into payload: zero-copy, or decoded into the pool. */
static int image_pixels(v2 *a, zmq_msg_t *part, const v2array *arr, tl_det_image *im,
                        zmq_msg_t *payload, tl_proto_error *err)
{
    size_t bytes, esize;
    if (array_shape(a, arr, "image", &im->dtype, &im->rows, &im->cols, &bytes, err) != 0)
        return -1;
    esize = tl_proto_dtype_size(im->dtype);
    if (arr->comp == COMP_NONE) {
        if (arr->nbytes != bytes)
            return tl_proto_fail(err, TL_PROTO_E_PAYLOAD,
                                 "array of %zu bytes, but %u x %u x %zu "
                                 "= %zu",
                                 arr->nbytes, im->rows, im->cols, esize, bytes),
                   -1;
        if (tl_framepool_wrap(a->st.pool, part, arr->bytes, bytes, payload) != 0)
            return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "out of memory"), -1;
        return 0;
    }
    if (check_compressed(a, arr, bytes, esize, err) != 0)
        return -1;
    void *out = tl_framepool_payload(a->st.pool, bytes, payload);
    if (!out)
        return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "out of memory for a %zu-byte frame",
                             bytes),
               -1;
    if (decompress(a, arr, esize, out, bytes, err) != 0) {
        zmq_msg_close(payload);
        zmq_msg_init(payload);
        return -1;
    }
    return 0;
}

/* A start's pixel mask (header_detail "all"), or none: the fills of the series' frames
 * (pixel_mask.h). The mask must match the declared image size. */
static int series_mask(v2 *a, const v2msg *m, tl_proto_error *err)
{
    tl_pixel_mask_clear(&a->mask);
    if (!m->has_mask)
        return 0;
    tl_proto_dtype dtype;
    uint32_t rows, cols;
    size_t bytes;
    if (array_shape(a, &m->mask, "pixel_mask", &dtype, &rows, &cols, &bytes, err) != 0)
        return -1;
    if (dtype == TL_PROTO_F32)
        return tl_proto_fail(err, TL_PROTO_E_DTYPE,
                             "pixel_mask must be an unsigned integer array"),
               -1;
    if ((m->start.size_x > 0 && m->start.size_x != cols) ||
        (m->start.size_y > 0 && m->start.size_y != rows))
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "pixel_mask of %u x %u (rows x cols) for images of %lld x %lld", rows,
                             cols, (long long)m->start.size_y, (long long)m->start.size_x),
               -1;
    size_t esize = tl_proto_dtype_size(dtype);
    const void *mask = m->mask.bytes;
    if (m->mask.comp == COMP_NONE && m->mask.nbytes != bytes)
        return tl_proto_fail(err, TL_PROTO_E_PAYLOAD, "pixel_mask of %zu bytes, but %u x %u x %zu",
                             m->mask.nbytes, rows, cols, esize),
               -1;
    if (m->mask.comp != COMP_NONE) {
        if (check_compressed(a, &m->mask, bytes, esize, err) != 0)
            return -1;
        if (bytes > a->mask_buf_cap) { /* once per larger mask, at a series start */
            void *buf = realloc(a->mask_buf, bytes);
            if (!buf)
                return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "out of memory"), -1;
            a->mask_buf = buf;
            a->mask_buf_cap = bytes;
        }
        if (decompress(a, &m->mask, esize, a->mask_buf, bytes, err) != 0)
            return -1;
        mask = a->mask_buf;
    }
    char why[160];
    if (tl_pixel_mask_build(&a->mask, mask, esize, rows, cols, why, sizeof why) != 0)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "pixel_mask: %s", why), -1;
    return 0;
}

static void *v2_create(const tl_settings *c, char *err, size_t errlen)
{
    v2 *a = tl_adapter_alloc(sizeof *a, offsetof(v2, st), c, err, errlen);
    if (!a)
        return NULL;
    a->max_frame = (uint64_t)c->ingest_max_frame_mb << 20;
    return a;
}

static void v2_destroy(void *state)
{
    v2 *a = state;
    tl_adapter_stream_destroy(&a->st);
    tl_pixel_mask_free(&a->mask);
    free(a->mask_buf);
    free(a->scratch);
    free(a);
}

static int v2_start(v2 *a, v2msg *m, tl_proto_error *err)
{
    m->start.id = m->series;
    if (series_mask(a, m, err) != 0 || tl_det_series_start(&a->ds, a->st.cfg, &m->start, err) != 0)
        return -1;
    m->detector.masked_pixels = a->mask.n;
    a->st.detector = m->detector; /* reported by the scan this series opens */
    if (a->mask.n)
        tl_log(TL_LOG_INFO, "pixel_mask", "series=%llu masked=%zu rows=%u cols=%u",
               (unsigned long long)m->series, a->mask.n, a->mask.rows, a->mask.cols);
    return 0;
}

static int v2_decode(void *state, zmq_msg_t *parts, int nparts, tl_item *out, tl_proto_error *err)
{
    v2 *a = state;
    if (nparts != 1)
        return tl_proto_fail(err, TL_PROTO_E_PARTS,
                             "a DECTRIS Stream V2 message is one part, "
                             "not %d",
                             nparts),
               -1;
    v2msg m;
    memset(&m, 0, sizeof m);
    tl_det_start_init(&m.start);
    tl_det_image_init(&m.image);
    if (parse(a, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &m, err) != 0)
        return -1;
    bool start = text_is(&m.type, "start"), image = text_is(&m.type, "image"),
         end = text_is(&m.type, "end");
    if (!start && !image && !end)
        return tl_proto_fail(err, TL_PROTO_E_TYPE, "type \"%.*s\" is not start, image or end",
                             (int)(m.type.n < 16 ? m.type.n : 16), (const char *)m.type.p),
               -1;
    if (!m.has_series)
        return tl_proto_fail(err, TL_PROTO_E_MISSING, "no \"series_id\""), -1;
    if (start)
        return v2_start(a, &m, err) == 0 ? 0 : -1;
    if (end)
        return tl_det_series_end(&a->ds, &a->st, m.series, out, err);
    if (!m.has_image)
        return tl_proto_fail(err, TL_PROTO_E_MISSING, "no \"image_id\""), -1;
    if (!m.has_data)
        return tl_proto_fail(err, TL_PROTO_E_MISSING, "no \"data\""), -1;
    m.image.series = m.series;
    m.image.image_id = m.image_id;
    m.image.has_t_acq = acquisition_time(&m, &m.image.t_acq);
    if (!a->ds.active || a->ds.id != m.series) /* refused before any decoding work */
        return tl_det_series_image(&a->ds, &a->st, &m.image, NULL, out, err);
    zmq_msg_t payload;
    zmq_msg_init(&payload);
    int rc = image_pixels(a, &parts[0], &m.data, &m.image, &payload, err);
    if (rc == 0 && a->mask.n && (a->mask.rows != m.image.rows || a->mask.cols != m.image.cols))
        rc = (tl_proto_fail(err, TL_PROTO_E_RANGE,
                            "image of %u x %u (rows x cols), but the series' pixel_mask is "
                            "%u x %u",
                            m.image.rows, m.image.cols, a->mask.rows, a->mask.cols),
              -1);
    /* the pixels are this adapter's now (a pool buffer, or the received message) */
    if (rc == 0)
        a->st.masked_filled = tl_pixel_mask_apply(&a->mask, zmq_msg_data(&payload), m.image.dtype);
    if (rc == 0)
        rc = tl_det_series_image(&a->ds, &a->st, &m.image, &payload, out, err);
    a->st.masked_filled = 0;
    zmq_msg_close(&payload); /* empty unless refused */
    return rc;
}

static int v2_next(void *state, tl_item *out)
{
    return tl_adapter_stream_next(&((v2 *)state)->st, out);
}

const tl_adapter_ops tl_adapter_dectris2 = {
    .name = "dectris-v2",
    .create = v2_create,
    .destroy = v2_destroy,
    .decode = v2_decode,
    .next = v2_next,
};
