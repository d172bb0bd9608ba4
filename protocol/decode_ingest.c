/* decode_ingest.c — the ingest messages: "scan", "frame", "end", and the "release" a
 * daemon sends back to the producer of frames in GPU memory (PROTOCOL.md §8).
 *
 * Only what a header alone can prove is checked here: types, ranges, finiteness, names, and
 * that rows * cols * dtype size stays under the frame limit (so no later multiplication can
 * overflow). Whether a frame fits the current scan (same shape, angle present when the scan
 * has no schedule, index inside the series) needs the daemon's state and is checked there.
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

static tl_proto_err get_shape(const msgpack_object *h, uint32_t *rows, uint32_t *cols,
                              tl_proto_dtype dtype, tl_proto_error *err)
{
    uint32_t s[2];
    size_t bytes;
    TLP_TRY(tl_proto_get_dims(h, "shape", true, s, 2, TL_PROTO_MAX_DIM, err));
    TLP_TRY(tl_proto_frame_bytes(s[0], s[1], dtype, &bytes, err));
    *rows = s[0];
    *cols = s[1];
    return TL_PROTO_OK;
}

static tl_proto_err get_name(const msgpack_object *h, const char *key, tl_proto_str *s,
                             tl_proto_error *err)
{
    return tl_proto_get_str(h, key, true, s, err);
}

static tl_proto_err unknown_name(const char *key, tl_proto_str s, const char *expected,
                                 tl_proto_error *err)
{
    char q[40];
    tlp_quote(q, sizeof q, s.ptr, s.len, 32);
    return tl_proto_fail(err, TL_PROTO_E_KIND, "\"%s\": unknown value \"%s\" (expected %s)", key,
                         q, expected);
}

tl_proto_err tlp_decode_scan(const msgpack_object *h, tl_proto_scan *m, tl_proto_error *err)
{
    tl_proto_str s;
    TLP_TRY(tl_proto_get_u64(h, "series", true, &m->series, err));
    TLP_TRY(get_name(h, "geometry", &s, err));
    if (!tlp_geometry_parse(s.ptr, s.len, &m->geometry))
        return unknown_name("geometry", s, "parallel or cone", err);
    TLP_TRY(tlp_get_dtype(h, false, &m->dtype, err));
    TLP_TRY(get_shape(h, &m->rows, &m->cols, m->dtype, err));
    TLP_TRY(tl_proto_get_u32(h, "window", true, &m->window, err));
    if (m->window < 1 || m->window > TL_PROTO_MAX_WINDOW)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"window\": %" PRIu32 " is outside 1..%u",
                             m->window, TL_PROTO_MAX_WINDOW);
    TLP_TRY(tl_proto_get_u32(h, "darks", false, &m->darks, err));
    TLP_TRY(tl_proto_get_u32(h, "flats", false, &m->flats, err));
    TLP_TRY(tl_proto_get_u64(h, "first_index", false, &m->first_index, err));
    TLP_TRY(tl_proto_get_double(h, "center", false, &m->center, err));
    m->has_center = tl_proto_map_get(h, "center") != NULL;

    bool has_start = tl_proto_map_get(h, "angle_start") != NULL;
    bool has_step = tl_proto_map_get(h, "angle_step") != NULL;
    if (has_start != has_step)
        return tl_proto_fail(err, TL_PROTO_E_MISSING,
                             "missing required key \"%s\": \"angle_start\" and \"angle_step\" "
                             "come together",
                             has_start ? "angle_step" : "angle_start");
    TLP_TRY(tl_proto_get_double(h, "angle_start", false, &m->angle_start, err));
    TLP_TRY(tl_proto_get_double(h, "angle_step", false, &m->angle_step, err));
    m->has_angles = has_start;

    TLP_TRY(tl_proto_get_str(h, "filter", false, &m->filter, err));
    if (tl_proto_map_get(h, "filter") && (m->filter.len < 1 || m->filter.len > TLP_MAX_FILTER))
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"filter\": %zu bytes, expected 1..%d",
                             m->filter.len, TLP_MAX_FILTER);
    TLP_TRY(tl_proto_get_bool(h, "already_linear", false, &m->already_linear, err));
    TLP_TRY(tl_proto_get_double(h, "dezinger", false, &m->dezinger, err));
    if (m->dezinger < 0)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"dezinger\": %g is negative", m->dezinger);
    TLP_TRY(tl_proto_get_floats(h, "paganin", false, m->paganin, 4, err));
    m->has_paganin = tl_proto_map_get(h, "paganin") != NULL;
    TLP_TRY(tl_proto_get_bool(h, "half_acquisition", false, &m->half_acquisition, err));
    TLP_TRY(tl_proto_get_bool(h, "auto_center", false, &m->auto_center, err));
    m->has_auto_center = tl_proto_map_get(h, "auto_center") != NULL;
    TLP_TRY(tl_proto_get_str(h, "rings", false, &m->rings, err));
    if (tl_proto_map_get(h, "rings") && (m->rings.len < 1 || m->rings.len > TLP_MAX_FILTER))
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"rings\": %zu bytes, expected 1..%d",
                             m->rings.len, TLP_MAX_FILTER);
    TLP_TRY(tl_proto_get_str(h, "release", false, &m->release, err));
    if (tl_proto_map_get(h, "release") &&
        (m->release.len < 1 || m->release.len > TL_PROTO_MAX_ENDPOINT))
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"release\": %zu bytes, expected 1..%d",
                             m->release.len, TL_PROTO_MAX_ENDPOINT);
    return tlp_decode_cone(h, m, err);
}

/* "GPU-" and 8-4-4-4-12 hexadecimal digits. */
static bool uuid_valid(tl_proto_str s)
{
    if (s.len != TL_PROTO_UUID_LEN || memcmp(s.ptr, "GPU-", 4) != 0)
        return false;
    for (size_t i = 4; i < s.len; i++) {
        char c = s.ptr[i];
        bool dash = i == 12 || i == 17 || i == 22 || i == 27;
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (dash ? c != '-' : !hex)
            return false;
    }
    return true;
}

/* The ipc_* keys of a frame in GPU memory: all of them or none (E_MISSING naming the first
 * absent one); the handle is 64 bytes of bin; the rows fit in the allocation (E_RANGE),
 * with every product overflow-checked. */
static tl_proto_err decode_ipc(const msgpack_object *h, tl_proto_frame *m, tl_proto_error *err)
{
    static const char *const keys[] = {"ipc_handle", "ipc_buffer", "ipc_size", "ipc_offset",
                                       "ipc_pitch",  "ipc_device", "ipc_slot"};
    int present = 0;
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        present += tl_proto_map_get(h, keys[k]) != NULL;
    m->has_ipc = present > 0;
    if (!m->has_ipc)
        return TL_PROTO_OK;
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        if (!tl_proto_map_get(h, keys[k]))
            return tl_proto_fail(err, TL_PROTO_E_MISSING,
                                 "missing required key \"%s\": the "
                                 "ipc_* keys of a frame in GPU memory come together",
                                 keys[k]);
    tl_proto_ipc *ipc = &m->ipc;
    const msgpack_object *o = tl_proto_map_get(h, "ipc_handle");
    if (o->type != MSGPACK_OBJECT_BIN)
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"ipc_handle\": expected bin, got %s",
                             tlp_object_type_name(o));
    if (o->via.bin.size != TL_PROTO_IPC_HANDLE)
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"ipc_handle\": %" PRIu32 " bytes, a "
                             "CUDA IPC handle has %d",
                             o->via.bin.size, TL_PROTO_IPC_HANDLE);
    ipc->handle = (const uint8_t *)o->via.bin.ptr;
    TLP_TRY(tl_proto_get_u64(h, "ipc_buffer", true, &ipc->buffer, err));
    TLP_TRY(tl_proto_get_u64(h, "ipc_size", true, &ipc->size, err));
    TLP_TRY(tl_proto_get_u64(h, "ipc_offset", true, &ipc->offset, err));
    TLP_TRY(tl_proto_get_u64(h, "ipc_pitch", true, &ipc->pitch, err));
    TLP_TRY(tl_proto_get_str(h, "ipc_device", true, &ipc->device, err));
    TLP_TRY(tl_proto_get_u32(h, "ipc_slot", true, &ipc->slot, err));
    if (!uuid_valid(ipc->device)) {
        char q[64];
        tlp_quote(q, sizeof q, ipc->device.ptr, ipc->device.len, 48);
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"ipc_device\": \"%s\" is not a GPU "
                             "UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                             q);
    }
    uint64_t row = (uint64_t)m->cols * tl_proto_dtype_size(m->dtype); /* < 2^31: shape checked */
    if (ipc->pitch < row)
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"ipc_pitch\": %" PRIu64 " bytes, less "
                             "than a row of %" PRIu64,
                             ipc->pitch, row);
    /* offset + (rows - 1) * pitch + row <= size, without overflow */
    uint64_t rows1 = m->rows - 1u, span;
    if ((ipc->pitch != 0 && rows1 > (UINT64_MAX - row) / ipc->pitch) ||
        (span = rows1 * ipc->pitch + row) > ipc->size || ipc->offset > ipc->size - span)
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"ipc_offset\" %" PRIu64 ", \"ipc_pitch\" "
                             "%" PRIu64 ": %" PRIu32 " rows do not fit in the %" PRIu64 " bytes "
                             "of \"ipc_size\"",
                             ipc->offset, ipc->pitch, m->rows, ipc->size);
    return TL_PROTO_OK;
}

/* "band": [first_row, rows] of a frame sent in row bands, inside the shape; not for a
 * frame in GPU memory, whose rows are all in place already. */
static tl_proto_err decode_band(const msgpack_object *h, tl_proto_frame *m, tl_proto_error *err)
{
    m->has_band = tl_proto_map_get(h, "band") != NULL;
    m->band_first = 0;
    m->band_rows = m->rows;
    if (!m->has_band)
        return TL_PROTO_OK;
    if (m->has_ipc)
        return tl_proto_fail(err, TL_PROTO_E_UNSUPPORTED,
                             "\"band\": a frame in GPU memory "
                             "is read whole, not in row bands");
    uint64_t b[2];
    TLP_TRY(tlp_get_u64_pair(h, "band", b, err));
    if (b[1] < 1 || b[0] >= m->rows || b[1] > m->rows - b[0])
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"band\": rows %" PRIu64 " + %" PRIu64
                             " do not lie inside the %" PRIu32 " rows of \"shape\"",
                             b[0], b[1], m->rows);
    m->band_first = (uint32_t)b[0];
    m->band_rows = (uint32_t)b[1];
    return TL_PROTO_OK;
}

tl_proto_err tlp_decode_frame(const msgpack_object *h, tl_proto_frame *m, tl_proto_error *err)
{
    tl_proto_str s;
    TLP_TRY(tl_proto_get_u64(h, "series", true, &m->series, err));
    TLP_TRY(tl_proto_get_u64(h, "index", true, &m->index, err));
    TLP_TRY(get_name(h, "kind", &s, err));
    if (!tl_proto_kind_parse(s.ptr, s.len, &m->kind))
        return unknown_name("kind", s, "dark, flat or proj", err);
    TLP_TRY(tlp_get_dtype(h, false, &m->dtype, err));
    TLP_TRY(get_shape(h, &m->rows, &m->cols, m->dtype, err));
    TLP_TRY(tl_proto_get_double(h, "angle", false, &m->angle, err));
    m->has_angle = tl_proto_map_get(h, "angle") != NULL;
    TLP_TRY(tl_proto_get_u64(h, "t_acq", false, &m->t_acq, err));
    m->has_t_acq = tl_proto_map_get(h, "t_acq") != NULL;
    TLP_TRY(tl_proto_get_double(h, "center_offset", false, &m->center_offset, err));
    m->has_center_offset = tl_proto_map_get(h, "center_offset") != NULL;
    TLP_TRY(decode_ipc(h, m, err));
    TLP_TRY(decode_band(h, m, err));
    m->payload = NULL;
    m->payload_len = 0;
    return TL_PROTO_OK;
}

tl_proto_err tlp_decode_end(const msgpack_object *h, tl_proto_end *m, tl_proto_error *err)
{
    return tl_proto_get_u64(h, "series", true, &m->series, err);
}

tl_proto_err tlp_decode_release(const msgpack_object *h, tl_proto_release *m, tl_proto_error *err)
{
    TLP_TRY(tl_proto_get_u64(h, "series", true, &m->series, err));
    TLP_TRY(tl_proto_get_u64(h, "index", true, &m->index, err));
    TLP_TRY(tl_proto_get_u32(h, "slot", true, &m->slot, err));
    TLP_TRY(tl_proto_get_bool(h, "ok", true, &m->ok, err));
    if (m->ok)
        return TL_PROTO_OK;
    uint64_t code;
    TLP_TRY(tl_proto_get_u64(h, "code", true, &code, err));
    if (code < 1 || code > TL_PROTO_E_DENIED)
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"code\": %" PRIu64 " is not an error "
                             "code",
                             code);
    m->code = (tl_proto_err)code;
    return tl_proto_get_str(h, "message", true, &m->message, err);
}
