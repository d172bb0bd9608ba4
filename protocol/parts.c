/* parts.c — the part layout of a whole multipart message (PROTOCOL.md §Framing).
 *
 *   scan, end, req, rep, release:  [header]
 *   frame:                         [header, payload], or [header] for a frame in GPU
 *                                  memory (its ipc_* keys say where the pixels are)
 *   slice:                         [topic "slice/<id>/", header, payload]
 *                                  [topic "shm/<id>/", header]: pixels in shared memory
 *
 * A slice is recognised by its first part starting with "slice/" or "shm/" (only where
 * slices are accepted): a header always starts with a map byte (0x80-0x8f, 0xde, 0xdf) and
 * never with 's', so the two cannot be confused. The type decides the part count, so the header is
 * decoded before the count is checked; a topic that does not name the header's id is
 * E_PARTS, the same code as a part in the wrong place.
 */
#include "config.h"

#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

static bool has_payload(const tl_proto_msg *m)
{
    return (m->type == TL_MSG_SLICE && !m->slice.has_shm) ||
           (m->type == TL_MSG_FRAME && !m->frame.has_ipc);
}

static int parts_for(const tl_proto_msg *m)
{
    return (m->type == TL_MSG_SLICE) + (has_payload(m) ? 2 : 1);
}

static const char *layout(const tl_proto_msg *m)
{
    return m->type == TL_MSG_SLICE
               ? (has_payload(m) ? "topic, header, payload"
                                 : "topic, header: its pixels are in shared memory")
           : has_payload(m)          ? "header, payload"
           : m->type == TL_MSG_FRAME ? "header only: its pixels are in GPU memory"
                                     : "header";
}

static bool starts_with(zmq_msg_t *p, const char *prefix)
{
    size_t n = zmq_msg_size(p), k = strlen(prefix);
    return n >= k && memcmp(zmq_msg_data(p), prefix, k) == 0;
}

static bool is_topic(zmq_msg_t *p)
{
    return starts_with(p, "slice/") || starts_with(p, "shm/");
}

tl_proto_err tl_proto_decode_parts(tl_proto_decoder *d, zmq_msg_t *parts, int nparts,
                                   unsigned accept, tl_proto_msg *out, tl_proto_error *err)
{
    if (!parts || nparts < 1)
        return tl_proto_fail(err, TL_PROTO_E_PARTS, "message has no parts");
    if (nparts > TL_PROTO_MAX_PARTS)
        return tl_proto_fail(err, TL_PROTO_E_PARTS,
                             "message has %d parts, at most %d are "
                             "allowed",
                             nparts, TL_PROTO_MAX_PARTS);
    bool topic = (accept & TL_MSG_SLICE) && is_topic(&parts[0]);
    int h = topic ? 1 : 0;
    if (h >= nparts)
        return tl_proto_fail(err, TL_PROTO_E_PARTS, "topic part without a header part");
    tl_proto_err rc =
        tl_proto_decode(d, zmq_msg_data(&parts[h]), zmq_msg_size(&parts[h]), accept, out, err);
    if (rc)
        return rc;

    const char *name = tlp_msg_type_name(out->type);
    if ((out->type == TL_MSG_SLICE) != topic)
        return tl_proto_fail(err, TL_PROTO_E_PARTS,
                             topic ? "a topic part precedes a \"%s\" "
                                     "header"
                                   : "a \"%s\" header must follow a topic part",
                             name);
    int want = parts_for(out);
    if (nparts != want)
        return tl_proto_fail(err, TL_PROTO_E_PARTS, "\"%s\" needs %d part%s (%s), got %d", name,
                             want, want > 1 ? "s" : "", layout(out), nparts);

    if (out->type == TL_MSG_FRAME && !out->frame.has_ipc) {
        tl_proto_frame *f = &out->frame;
        f->payload_len = zmq_msg_size(&parts[1]);
        if ((rc = tl_proto_check_payload(f->band_rows, f->cols, f->dtype, f->payload_len, err)))
            return rc;
        f->payload = zmq_msg_data(&parts[1]);
    } else if (out->type == TL_MSG_SLICE) {
        tl_proto_slice *s = &out->slice;
        char want_topic[TL_PROTO_MAX_ID + 16] = "";
        size_t n = s->has_shm
                       ? tl_proto_shm_topic(want_topic, sizeof want_topic, s->id.ptr, s->id.len)
                       : tl_proto_slice_topic(want_topic, sizeof want_topic, s->id.ptr, s->id.len);
        if (n == 0 || zmq_msg_size(&parts[0]) != n ||
            memcmp(zmq_msg_data(&parts[0]), want_topic, n) != 0) {
            char q[96];
            tlp_quote(q, sizeof q, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), 80);
            return tl_proto_fail(err, TL_PROTO_E_PARTS,
                                 "topic \"%s\" does not match the "
                                 "header's id (expected \"%s\")",
                                 q, want_topic);
        }
        if (s->has_shm)
            return TL_PROTO_OK; /* the reader checks the pixels' place (protocol/shm.h) */
        s->payload_len = zmq_msg_size(&parts[2]);
        rc = s->lz4
                 ? tl_proto_check_lz4_payload(s->shape[0], s->shape[1], s->dtype, s->payload_len,
                                              err)
                 : tl_proto_check_payload(s->shape[0], s->shape[1], s->dtype, s->payload_len, err);
        if (rc)
            return rc;
        s->payload = zmq_msg_data(&parts[2]);
    }
    return TL_PROTO_OK;
}
