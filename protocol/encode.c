/* encode.c — packing headers with msgpack-c into a caller-owned msgpack_sbuffer.
 *
 * Encoders write exactly the keys PROTOCOL.md lists, required ones always and optional ones
 * only when set (has_* flags, non-empty strings, non-zero counts), so minimal messages stay
 * minimal and a reader sees no key whose value means "absent". They do not validate: a
 * caller that encodes nonsense gets a header the decoder rejects with a precise code. All
 * integers go through msgpack_pack_uint64, which picks the shortest encoding.
 */
#include "config.h"

#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

#define P(x)           \
    do {               \
        if ((x) != 0)  \
            return -1; \
    } while (0)

int tl_proto_pack_cstr(msgpack_packer *pk, const char *s)
{
    if (!s)
        s = "";
    return msgpack_pack_str_with_body(pk, s, strlen(s));
}

static int pack_pstr(msgpack_packer *pk, tl_proto_str s)
{
    return msgpack_pack_str_with_body(pk, s.len ? s.ptr : "", s.len);
}

int tl_proto_pack_kv_u64(msgpack_packer *pk, const char *key, uint64_t v)
{
    P(tl_proto_pack_cstr(pk, key));
    return msgpack_pack_uint64(pk, v);
}

int tl_proto_pack_kv_double(msgpack_packer *pk, const char *key, double v)
{
    P(tl_proto_pack_cstr(pk, key));
    return msgpack_pack_double(pk, v);
}

int tl_proto_pack_kv_str(msgpack_packer *pk, const char *key, const char *v)
{
    P(tl_proto_pack_cstr(pk, key));
    return tl_proto_pack_cstr(pk, v);
}

int tl_proto_pack_kv_bool(msgpack_packer *pk, const char *key, bool v)
{
    P(tl_proto_pack_cstr(pk, key));
    return v ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
}

/* Opens the header map with n entries and writes "v" and "type" (2 of the n). */
static int envelope(msgpack_packer *pk, size_t n, tl_msg_type t)
{
    P(msgpack_pack_map(pk, n));
    P(tl_proto_pack_kv_u64(pk, "v", TL_PROTO_VERSION));
    return tl_proto_pack_kv_str(pk, "type", tlp_msg_type_name(t));
}

static int kv_shape(msgpack_packer *pk, uint32_t a, uint32_t b)
{
    P(tl_proto_pack_cstr(pk, "shape"));
    P(msgpack_pack_array(pk, 2));
    P(msgpack_pack_uint64(pk, a));
    return msgpack_pack_uint64(pk, b);
}

static int kv_pair(msgpack_packer *pk, const char *key, const double v[2])
{
    P(tl_proto_pack_cstr(pk, key));
    P(msgpack_pack_array(pk, 2));
    P(msgpack_pack_double(pk, v[0]));
    return msgpack_pack_double(pk, v[1]);
}

/* The cone-beam keys (§8.1.1): square pixels as one number, as a person would write them. */
static int pack_cone(msgpack_packer *pk, const tl_proto_scan *m)
{
    P(tl_proto_pack_kv_double(pk, "source_origin", m->source_origin));
    P(tl_proto_pack_kv_double(pk, "source_detector", m->source_detector));
    if (m->pixel_size[0] == m->pixel_size[1])
        P(tl_proto_pack_kv_double(pk, "pixel_size", m->pixel_size[0]));
    else
        P(kv_pair(pk, "pixel_size", m->pixel_size));
    if (m->has_detector_offset)
        P(kv_pair(pk, "detector_offset", m->detector_offset));
    if (m->has_short_scan)
        P(kv_pair(pk, "short_scan", m->short_scan));
    if (m->nmatrices) { /* full float64: a matrix rounded to float32 moves rays by pixels */
        P(tl_proto_pack_cstr(pk, "matrices"));
        P(msgpack_pack_array(pk, m->nmatrices));
        for (uint32_t i = 0; i < m->nmatrices; i++) {
            P(msgpack_pack_array(pk, 12));
            for (int k = 0; k < 12; k++)
                P(msgpack_pack_double(pk, m->matrices[i][k]));
        }
    }
    return 0;
}

int tl_proto_encode_scan(msgpack_sbuffer *buf, const tl_proto_scan *m)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    size_t n = 7 + (m->darks != 0) + (m->flats != 0) + (m->first_index != 0) + m->has_center +
               2 * m->has_angles + (m->filter.len != 0) + m->already_linear +
               (m->release.len != 0) + (m->dezinger != 0) + m->has_paganin + (m->rings.len != 0) +
               m->has_auto_center + m->half_acquisition;
    bool cone = m->geometry == TL_PROTO_CONE;
    n += cone ? 3 + m->has_detector_offset + m->has_short_scan + (m->nmatrices != 0) : 0;
    P(envelope(&pk, n, TL_MSG_SCAN));
    P(tl_proto_pack_kv_u64(&pk, "series", m->series));
    P(tl_proto_pack_kv_str(&pk, "geometry", tl_proto_geometry_name(m->geometry)));
    P(kv_shape(&pk, m->rows, m->cols));
    P(tl_proto_pack_kv_str(&pk, "dtype", tl_proto_dtype_name(m->dtype)));
    P(tl_proto_pack_kv_u64(&pk, "window", m->window));
    if (m->darks)
        P(tl_proto_pack_kv_u64(&pk, "darks", m->darks));
    if (m->flats)
        P(tl_proto_pack_kv_u64(&pk, "flats", m->flats));
    if (m->first_index)
        P(tl_proto_pack_kv_u64(&pk, "first_index", m->first_index));
    if (m->has_center)
        P(tl_proto_pack_kv_double(&pk, "center", m->center));
    if (m->has_angles) {
        P(tl_proto_pack_kv_double(&pk, "angle_start", m->angle_start));
        P(tl_proto_pack_kv_double(&pk, "angle_step", m->angle_step));
    }
    if (m->filter.len) {
        P(tl_proto_pack_cstr(&pk, "filter"));
        P(pack_pstr(&pk, m->filter));
    }
    if (m->already_linear)
        P(tl_proto_pack_kv_bool(&pk, "already_linear", true));
    if (m->release.len) {
        P(tl_proto_pack_cstr(&pk, "release"));
        P(pack_pstr(&pk, m->release));
    }
    if (m->dezinger != 0)
        P(tl_proto_pack_kv_double(&pk, "dezinger", m->dezinger));
    if (m->has_paganin) {
        P(tl_proto_pack_cstr(&pk, "paganin"));
        P(msgpack_pack_array(&pk, 4));
        for (int i = 0; i < 4; i++)
            P(msgpack_pack_float(&pk, m->paganin[i]));
    }
    if (m->rings.len) {
        P(tl_proto_pack_cstr(&pk, "rings"));
        P(pack_pstr(&pk, m->rings));
    }
    if (m->has_auto_center)
        P(tl_proto_pack_kv_bool(&pk, "auto_center", m->auto_center));
    if (m->half_acquisition)
        P(tl_proto_pack_kv_bool(&pk, "half_acquisition", true));
    return cone ? pack_cone(&pk, m) : 0;
}

int tl_proto_encode_frame(msgpack_sbuffer *buf, const tl_proto_frame *m)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    size_t n =
        7 + m->has_angle + m->has_t_acq + m->has_center_offset + 7 * m->has_ipc + m->has_band;
    P(envelope(&pk, n, TL_MSG_FRAME));
    P(tl_proto_pack_kv_u64(&pk, "series", m->series));
    P(tl_proto_pack_kv_u64(&pk, "index", m->index));
    P(tl_proto_pack_kv_str(&pk, "kind", tl_proto_kind_name(m->kind)));
    P(tl_proto_pack_kv_str(&pk, "dtype", tl_proto_dtype_name(m->dtype)));
    P(kv_shape(&pk, m->rows, m->cols));
    if (m->has_angle)
        P(tl_proto_pack_kv_double(&pk, "angle", m->angle));
    if (m->has_t_acq)
        P(tl_proto_pack_kv_u64(&pk, "t_acq", m->t_acq));
    if (m->has_center_offset)
        P(tl_proto_pack_kv_double(&pk, "center_offset", m->center_offset));
    if (m->has_ipc) {
        P(tl_proto_pack_cstr(&pk, "ipc_handle"));
        P(msgpack_pack_bin(&pk, TL_PROTO_IPC_HANDLE));
        P(msgpack_pack_bin_body(&pk, m->ipc.handle, TL_PROTO_IPC_HANDLE));
        P(tl_proto_pack_kv_u64(&pk, "ipc_buffer", m->ipc.buffer));
        P(tl_proto_pack_kv_u64(&pk, "ipc_size", m->ipc.size));
        P(tl_proto_pack_kv_u64(&pk, "ipc_offset", m->ipc.offset));
        P(tl_proto_pack_kv_u64(&pk, "ipc_pitch", m->ipc.pitch));
        P(tl_proto_pack_cstr(&pk, "ipc_device"));
        P(pack_pstr(&pk, m->ipc.device));
        P(tl_proto_pack_kv_u64(&pk, "ipc_slot", m->ipc.slot));
    }
    if (m->has_band) {
        P(tl_proto_pack_cstr(&pk, "band"));
        P(msgpack_pack_array(&pk, 2));
        P(msgpack_pack_uint64(&pk, m->band_first));
        P(msgpack_pack_uint64(&pk, m->band_rows));
    }
    return 0;
}

int tl_proto_encode_release(msgpack_sbuffer *buf, const tl_proto_release *m)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    P(envelope(&pk, m->ok ? 6 : 8, TL_MSG_RELEASE));
    P(tl_proto_pack_kv_u64(&pk, "series", m->series));
    P(tl_proto_pack_kv_u64(&pk, "index", m->index));
    P(tl_proto_pack_kv_u64(&pk, "slot", m->slot));
    P(tl_proto_pack_kv_bool(&pk, "ok", m->ok));
    if (m->ok)
        return 0;
    P(tl_proto_pack_kv_u64(&pk, "code", (uint64_t)m->code));
    P(tl_proto_pack_cstr(&pk, "message"));
    return pack_pstr(&pk, m->message);
}

int tl_proto_encode_end(msgpack_sbuffer *buf, const tl_proto_end *m)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    P(envelope(&pk, 3, TL_MSG_END));
    return tl_proto_pack_kv_u64(&pk, "series", m->series);
}

int tl_proto_encode_slice(msgpack_sbuffer *buf, const tl_proto_slice *m)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
    bool q16 = m->dtype == TL_PROTO_Q16;
    size_t n = 13 + (m->t_recv != 0) + (m->t_done != 0) + m->final + 2 * m->has_shm + 2 * q16 +
               m->lz4 + 2 * (m->iterations != 0) + 2 * (m->planes != 0);
    P(envelope(&pk, n, TL_MSG_SLICE));
    P(tl_proto_pack_cstr(&pk, "id"));
    P(pack_pstr(&pk, m->id));
    P(tl_proto_pack_kv_u64(&pk, "seq", m->seq));
    P(kv_shape(&pk, m->shape[0], m->shape[1]));
    P(tl_proto_pack_kv_str(&pk, "dtype", tl_proto_dtype_name(m->dtype)));
    if (q16) {
        P(tl_proto_pack_kv_double(&pk, "scale", m->scale));
        P(tl_proto_pack_kv_double(&pk, "offset", m->offset));
    }
    if (m->lz4)
        P(tl_proto_pack_kv_str(&pk, "compression", "lz4"));
    P(tl_proto_pack_cstr(&pk, "orientation"));
    P(msgpack_pack_array(&pk, 9));
    for (int i = 0; i < 9; i++) /* float32 on the wire: exactly the struct's precision */
        P(msgpack_pack_float(&pk, m->orientation[i]));
    P(tl_proto_pack_kv_u64(&pk, "projections_used", m->projections_used));
    P(tl_proto_pack_kv_u64(&pk, "missing", m->missing));
    P(tl_proto_pack_cstr(&pk, "window"));
    P(msgpack_pack_array(&pk, 2));
    P(msgpack_pack_uint64(&pk, m->window_first));
    P(msgpack_pack_uint64(&pk, m->window_last));
    P(tl_proto_pack_kv_u64(&pk, "t_acq", m->t_acq));
    P(tl_proto_pack_kv_u64(&pk, "t_pub", m->t_pub));
    if (m->t_recv)
        P(tl_proto_pack_kv_u64(&pk, "t_recv", m->t_recv));
    if (m->t_done)
        P(tl_proto_pack_kv_u64(&pk, "t_done", m->t_done));
    if (m->final)
        P(tl_proto_pack_kv_bool(&pk, "final", true));
    if (m->iterations) {
        P(tl_proto_pack_kv_u64(&pk, "iterations", m->iterations));
        P(tl_proto_pack_kv_double(&pk, "residual", m->residual));
    }
    if (m->planes) {
        P(tl_proto_pack_kv_u64(&pk, "planes", m->planes));
        P(tl_proto_pack_kv_double(&pk, "box_step", m->box_step));
    }
    if (m->has_shm) {
        P(tl_proto_pack_cstr(&pk, "shm_name"));
        P(pack_pstr(&pk, m->shm_name));
        P(tl_proto_pack_kv_u64(&pk, "shm_offset", m->shm_offset));
    }
    P(tl_proto_pack_cstr(&pk, "kernel"));
    return pack_pstr(&pk, m->kernel);
}

int tl_proto_begin_req(msgpack_packer *pk, uint64_t id, const char *cmd, bool has_args)
{
    P(envelope(pk, has_args ? 5 : 4, TL_MSG_REQ));
    P(tl_proto_pack_kv_u64(pk, "id", id));
    P(tl_proto_pack_kv_str(pk, "cmd", cmd));
    if (has_args)
        P(tl_proto_pack_cstr(pk, "args")); /* the caller packs the map next */
    return 0;
}

int tl_proto_begin_rep_ok(msgpack_packer *pk, uint64_t id)
{
    P(envelope(pk, 5, TL_MSG_REP));
    P(tl_proto_pack_kv_u64(pk, "id", id));
    P(tl_proto_pack_kv_bool(pk, "ok", true));
    return tl_proto_pack_cstr(pk, "result"); /* the caller packs the result next (nil: none) */
}

int tl_proto_pack_rep_error(msgpack_packer *pk, uint64_t id, tl_proto_err code,
                            const char *message)
{
    P(envelope(pk, 5, TL_MSG_REP));
    P(tl_proto_pack_kv_u64(pk, "id", id));
    P(tl_proto_pack_kv_bool(pk, "ok", false));
    P(tl_proto_pack_cstr(pk, "error"));
    P(msgpack_pack_map(pk, 2));
    P(tl_proto_pack_kv_u64(pk, "code", (uint64_t)code));
    return tl_proto_pack_kv_str(pk, "message", message);
}
