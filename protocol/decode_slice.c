/* decode_slice.c — the header of a published slice (PROTOCOL.md §Slices).
 *
 * The id is checked against the slice id alphabet here, because the topic a subscriber
 * filters on is built from it; that the topic part actually matches is checked by
 * tl_proto_decode_parts, which sees the parts.
 */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

/* The compact encodings (§10.3): q16's mapping, and the payload's compression. */
static tl_proto_err get_encoding(const msgpack_object *h, tl_proto_slice *m, tl_proto_error *err)
{
    bool q16 = m->dtype == TL_PROTO_Q16;
    m->scale = 1;
    m->offset = 0;
    TLP_TRY(tl_proto_get_double(h, "scale", q16, &m->scale, err));
    TLP_TRY(tl_proto_get_double(h, "offset", q16, &m->offset, err));
    if (!(isfinite(m->scale) && m->scale > 0 && isfinite(m->offset)))
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"scale\" %g must be finite and > 0, \"offset\" %g finite", m->scale,
                             m->offset);
    tl_proto_str c = {NULL, 0};
    TLP_TRY(tl_proto_get_str(h, "compression", false, &c, err));
    m->lz4 = c.ptr && c.len == 3 && memcmp(c.ptr, "lz4", 3) == 0;
    if (c.ptr && !m->lz4) {
        char q[40];
        tlp_quote(q, sizeof q, c.ptr, c.len, 32);
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"compression\": unknown \"%s\" (expected lz4)", q);
    }
    return TL_PROTO_OK;
}

tl_proto_err tlp_decode_slice(const msgpack_object *h, tl_proto_slice *m, tl_proto_error *err)
{
    TLP_TRY(tl_proto_get_str(h, "id", true, &m->id, err));
    if (!tlp_slice_id_valid(m->id.ptr, m->id.len)) {
        char q[80];
        tlp_quote(q, sizeof q, m->id.ptr, m->id.len, 70);
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"id\": \"%s\" is not 1..%d bytes of "
                             "[A-Za-z0-9_.-]",
                             q, TL_PROTO_MAX_ID);
    }
    TLP_TRY(tl_proto_get_u64(h, "seq", true, &m->seq, err));
    TLP_TRY(tlp_get_dtype(h, true, &m->dtype, err));
    TLP_TRY(get_encoding(h, m, err));
    TLP_TRY(tl_proto_get_dims(h, "shape", true, m->shape, 2, TL_PROTO_MAX_DIM, err));
    size_t bytes;
    TLP_TRY(tl_proto_frame_bytes(m->shape[0], m->shape[1], m->dtype, &bytes, err));
    TLP_TRY(tl_proto_get_floats(h, "orientation", true, m->orientation, 9, err));
    TLP_TRY(tl_proto_get_u32(h, "projections_used", true, &m->projections_used, err));
    TLP_TRY(tl_proto_get_u32(h, "missing", true, &m->missing, err));
    uint64_t w[2];
    TLP_TRY(tlp_get_u64_pair(h, "window", w, err));
    if (w[0] > w[1])
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"window\": first %" PRIu64 " is after "
                             "last %" PRIu64,
                             w[0], w[1]);
    m->window_first = w[0];
    m->window_last = w[1];
    TLP_TRY(tl_proto_get_u64(h, "t_acq", true, &m->t_acq, err));
    TLP_TRY(tl_proto_get_u64(h, "t_pub", true, &m->t_pub, err));
    TLP_TRY(tl_proto_get_u64(h, "t_recv", false, &m->t_recv, err));
    TLP_TRY(tl_proto_get_u64(h, "t_done", false, &m->t_done, err));
    TLP_TRY(tl_proto_get_str(h, "kernel", true, &m->kernel, err));
    TLP_TRY(tl_proto_get_bool(h, "final", false, &m->final, err));
    /* an iterative slice: both keys or neither */
    m->iterations = 0;
    m->residual = 0;
    TLP_TRY(tl_proto_get_u32(h, "iterations", false, &m->iterations, err));
    TLP_TRY(tl_proto_get_double(h, "residual", m->iterations != 0, &m->residual, err));
    if (m->iterations == 0 && tl_proto_map_get(h, "residual"))
        return tl_proto_fail(err, TL_PROTO_E_MISSING, "\"residual\" without \"iterations\"");
    if (!(m->residual >= 0 && isfinite(m->residual)))
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"residual\" %g must be finite and >= 0",
                             m->residual);
    /* a box: "planes" dividing the image's rows, its "box_step" with it */
    m->planes = 0;
    m->box_step = 0;
    TLP_TRY(tl_proto_get_u32(h, "planes", false, &m->planes, err));
    TLP_TRY(tl_proto_get_double(h, "box_step", m->planes != 0, &m->box_step, err));
    if (m->planes == 0 && tl_proto_map_get(h, "box_step"))
        return tl_proto_fail(err, TL_PROTO_E_MISSING, "\"box_step\" without \"planes\"");
    if (m->planes && m->shape[0] % m->planes)
        return tl_proto_fail(err, TL_PROTO_E_RANGE,
                             "\"planes\": %u planes do not divide the image's %u rows",
                             m->planes, m->shape[0]);
    if (m->planes && !(isfinite(m->box_step) && m->box_step > 0))
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"box_step\" %g must be finite and > 0",
                             m->box_step);
    /* shared memory (§10.1): both keys or neither; the name is one POSIX object name */
    m->has_shm = tl_proto_map_get(h, "shm_name") != NULL;
    TLP_TRY(tl_proto_get_str(h, "shm_name", false, &m->shm_name, err));
    TLP_TRY(tl_proto_get_u64(h, "shm_offset", m->has_shm, &m->shm_offset, err));
    if (!m->has_shm && tl_proto_map_get(h, "shm_offset"))
        return tl_proto_fail(err, TL_PROTO_E_MISSING, "\"shm_offset\" without \"shm_name\"");
    if (m->has_shm) {
        const char *n = m->shm_name.ptr;
        size_t len = m->shm_name.len;
        bool ok = len >= 2 && len <= TL_PROTO_SHM_NAME_MAX && n[0] == '/' &&
                  !memchr(n + 1, '/', len - 1) && !memchr(n, 0, len);
        if (!ok) {
            char q[80];
            tlp_quote(q, sizeof q, n, len, 70);
            return tl_proto_fail(err, TL_PROTO_E_RANGE,
                                 "\"shm_name\": \"%s\" is not \"/name\" "
                                 "(2..%d bytes, one leading '/')",
                                 q, TL_PROTO_SHM_NAME_MAX);
        }
        if (m->shm_offset < TL_PROTO_SHM_ALIGN || m->shm_offset % TL_PROTO_SHM_ALIGN)
            return tl_proto_fail(err, TL_PROTO_E_RANGE,
                                 "\"shm_offset\": %" PRIu64 " is not a "
                                 "positive multiple of %d",
                                 m->shm_offset, TL_PROTO_SHM_ALIGN);
    }
    m->payload = NULL;
    m->payload_len = 0;
    return TL_PROTO_OK;
}
