/* decode_ingest.c — the ingest messages: "scan", "frame", "end" (PROTOCOL.md §Ingest).
 *
 * Only what a header alone can prove is checked here: types, ranges, finiteness, names, and
 * that rows * cols * dtype size stays under the frame limit (so no later multiplication can
 * overflow). Whether a frame fits the current scan (same shape, angle present when the scan
 * has no schedule, index inside the series) needs the daemon's state and is checked there.
 */
#include "config.h"

#include <inttypes.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

#define TRY(x) do { tl_proto_err rc_ = (x); if (rc_) return rc_; } while (0)

static tl_proto_err get_shape(const msgpack_object *h, uint32_t *rows, uint32_t *cols,
                              tl_proto_dtype dtype, tl_proto_error *err)
{
    uint32_t s[2];
    size_t bytes;
    TRY(tl_proto_get_dims(h, "shape", true, s, 2, TL_PROTO_MAX_DIM, err));
    TRY(tl_proto_frame_bytes(s[0], s[1], dtype, &bytes, err));
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
    return tl_proto_fail(err, TL_PROTO_E_KIND, "\"%s\": unknown value \"%s\" (expected %s)",
                         key, q, expected);
}

tl_proto_err tlp_decode_scan(const msgpack_object *h, tl_proto_scan *m, tl_proto_error *err)
{
    tl_proto_str s;
    TRY(tl_proto_get_u64(h, "series", true, &m->series, err));
    TRY(get_name(h, "geometry", &s, err));
    if (!tlp_geometry_parse(s.ptr, s.len, &m->geometry))
        return unknown_name("geometry", s, "parallel or cone", err);
    TRY(tlp_get_dtype(h, &m->dtype, err));
    TRY(get_shape(h, &m->rows, &m->cols, m->dtype, err));
    TRY(tl_proto_get_u32(h, "window", true, &m->window, err));
    if (m->window < 1 || m->window > TL_PROTO_MAX_WINDOW)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"window\": %" PRIu32 " is outside 1..%u",
                             m->window, TL_PROTO_MAX_WINDOW);
    TRY(tl_proto_get_u32(h, "darks", false, &m->darks, err));
    TRY(tl_proto_get_u32(h, "flats", false, &m->flats, err));
    TRY(tl_proto_get_u64(h, "first_index", false, &m->first_index, err));
    TRY(tl_proto_get_double(h, "center", false, &m->center, err));
    m->has_center = tl_proto_map_get(h, "center") != NULL;

    bool has_start = tl_proto_map_get(h, "angle_start") != NULL;
    bool has_step = tl_proto_map_get(h, "angle_step") != NULL;
    if (has_start != has_step)
        return tl_proto_fail(err, TL_PROTO_E_MISSING,
                             "missing required key \"%s\": \"angle_start\" and \"angle_step\" "
                             "come together", has_start ? "angle_step" : "angle_start");
    TRY(tl_proto_get_double(h, "angle_start", false, &m->angle_start, err));
    TRY(tl_proto_get_double(h, "angle_step", false, &m->angle_step, err));
    m->has_angles = has_start;

    TRY(tl_proto_get_str(h, "filter", false, &m->filter, err));
    if (tl_proto_map_get(h, "filter") && (m->filter.len < 1 || m->filter.len > TLP_MAX_FILTER))
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"filter\": %zu bytes, expected 1..%d",
                             m->filter.len, TLP_MAX_FILTER);
    TRY(tl_proto_get_bool(h, "already_linear", false, &m->already_linear, err));
    return TL_PROTO_OK;
}

tl_proto_err tlp_decode_frame(const msgpack_object *h, tl_proto_frame *m, tl_proto_error *err)
{
    tl_proto_str s;
    TRY(tl_proto_get_u64(h, "series", true, &m->series, err));
    TRY(tl_proto_get_u64(h, "index", true, &m->index, err));
    TRY(get_name(h, "kind", &s, err));
    if (!tl_proto_kind_parse(s.ptr, s.len, &m->kind))
        return unknown_name("kind", s, "dark, flat or proj", err);
    TRY(tlp_get_dtype(h, &m->dtype, err));
    TRY(get_shape(h, &m->rows, &m->cols, m->dtype, err));
    TRY(tl_proto_get_double(h, "angle", false, &m->angle, err));
    m->has_angle = tl_proto_map_get(h, "angle") != NULL;
    TRY(tl_proto_get_u64(h, "t_acq", false, &m->t_acq, err));
    m->has_t_acq = tl_proto_map_get(h, "t_acq") != NULL;
    TRY(tl_proto_get_double(h, "center_offset", false, &m->center_offset, err));
    m->has_center_offset = tl_proto_map_get(h, "center_offset") != NULL;
    m->payload = NULL;
    m->payload_len = 0;
    return TL_PROTO_OK;
}

tl_proto_err tlp_decode_end(const msgpack_object *h, tl_proto_end *m, tl_proto_error *err)
{
    return tl_proto_get_u64(h, "series", true, &m->series, err);
}
