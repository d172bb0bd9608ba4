/* decode_slice.c — the header of a published slice (PROTOCOL.md §Slices).
 *
 * The id is checked against the slice id alphabet here, because the topic a subscriber
 * filters on is built from it; that the topic part actually matches is checked by
 * tl_proto_decode_parts, which sees the parts.
 */
#include "config.h"

#include <inttypes.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

#define TRY(x) do { tl_proto_err rc_ = (x); if (rc_) return rc_; } while (0)

tl_proto_err tlp_decode_slice(const msgpack_object *h, tl_proto_slice *m, tl_proto_error *err)
{
    TRY(tl_proto_get_str(h, "id", true, &m->id, err));
    if (!tlp_slice_id_valid(m->id.ptr, m->id.len)) {
        char q[80];
        tlp_quote(q, sizeof q, m->id.ptr, m->id.len, 70);
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"id\": \"%s\" is not 1..%d bytes of "
                             "[A-Za-z0-9_.-]", q, TL_PROTO_MAX_ID);
    }
    TRY(tl_proto_get_u64(h, "seq", true, &m->seq, err));
    TRY(tlp_get_dtype(h, &m->dtype, err));
    TRY(tl_proto_get_dims(h, "shape", true, m->shape, 2, TL_PROTO_MAX_DIM, err));
    size_t bytes;
    TRY(tl_proto_frame_bytes(m->shape[0], m->shape[1], m->dtype, &bytes, err));
    TRY(tl_proto_get_floats(h, "orientation", true, m->orientation, 9, err));
    TRY(tl_proto_get_u32(h, "projections_used", true, &m->projections_used, err));
    TRY(tl_proto_get_u32(h, "missing", true, &m->missing, err));
    uint64_t w[2];
    TRY(tlp_get_u64_pair(h, "window", w, err));
    if (w[0] > w[1])
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"window\": first %" PRIu64 " is after "
                             "last %" PRIu64, w[0], w[1]);
    m->window_first = w[0];
    m->window_last = w[1];
    TRY(tl_proto_get_u64(h, "t_acq", true, &m->t_acq, err));
    TRY(tl_proto_get_u64(h, "t_pub", true, &m->t_pub, err));
    TRY(tl_proto_get_u64(h, "t_recv", false, &m->t_recv, err));
    TRY(tl_proto_get_u64(h, "t_done", false, &m->t_done, err));
    TRY(tl_proto_get_str(h, "kernel", true, &m->kernel, err));
    TRY(tl_proto_get_bool(h, "final", false, &m->final, err));
    m->payload = NULL;
    m->payload_len = 0;
    return TL_PROTO_OK;
}
