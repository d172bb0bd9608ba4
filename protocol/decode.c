/* decode.c — the decoder object and the checks every header shares: size, msgpack syntax,
 * map with unique string keys, "v" and "type"; then dispatch to decode_<type>.c.
 *
 * Order matters for safety and for the codes a sender sees: size first (E_TOO_BIG), then the
 * byte-level pre-validator (E_MALFORMED / E_LIMIT) so msgpack-c never allocates on an
 * unvalidated count, then msgpack-c into the decoder's zone, then structure (E_NOT_MAP,
 * E_DUP_KEY), the version (E_MISSING / E_KEY_TYPE / E_VERSION), the type (E_TYPE) and the
 * type's own keys. The zone is cleared, never freed, between messages: after the first
 * header its first chunk (TLP_ZONE_CHUNK bytes) serves every ordinary header without a
 * single malloc.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

struct tl_proto_decoder {
    msgpack_zone *zone;
    msgpack_object root;
};

tl_proto_decoder *tl_proto_decoder_new(void)
{
    tl_proto_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->zone = msgpack_zone_new(TLP_ZONE_CHUNK);
    if (!d->zone) {
        free(d);
        return NULL;
    }
    return d;
}

void tl_proto_decoder_free(tl_proto_decoder *d)
{
    if (!d)
        return;
    msgpack_zone_free(d->zone);
    free(d);
}

static tl_proto_err check_version(const msgpack_object *h, tl_proto_error *err)
{
    uint64_t v = 0;
    tl_proto_err rc = tl_proto_get_u64(h, "v", true, &v, err);
    if (rc)
        return rc;
    if (v != TL_PROTO_VERSION)
        return tl_proto_fail(err, TL_PROTO_E_VERSION,
                             "\"v\": major version %" PRIu64 " is not supported (this reader "
                             "speaks %d)",
                             v, TL_PROTO_VERSION);
    return TL_PROTO_OK;
}

static tl_proto_err check_type(const msgpack_object *h, unsigned accept, tl_msg_type *t,
                               tl_proto_error *err)
{
    tl_proto_str s;
    tl_proto_err rc = tl_proto_get_str(h, "type", true, &s, err);
    if (rc)
        return rc;
    char q[40];
    tlp_quote(q, sizeof q, s.ptr, s.len, 32);
    if (!tlp_msg_type_parse(s.ptr, s.len, t))
        return tl_proto_fail(err, TL_PROTO_E_TYPE, "\"type\": unknown message type \"%s\"", q);
    if (!(accept & (unsigned)*t))
        return tl_proto_fail(err, TL_PROTO_E_TYPE,
                             "\"type\": \"%s\" is not accepted on this socket", q);
    return TL_PROTO_OK;
}

tl_proto_err tl_proto_decode(tl_proto_decoder *d, const void *hdr, size_t len, unsigned accept,
                             tl_proto_msg *out, tl_proto_error *err)
{
    if (!d || !out || (!hdr && len))
        return tl_proto_fail(err, TL_PROTO_E_INTERNAL, "tl_proto_decode: NULL argument");
    memset(out, 0, sizeof *out);
    if (len > TL_PROTO_MAX_HEADER)
        return tl_proto_fail(err, TL_PROTO_E_TOO_BIG, "header is %zu bytes, the limit is %u", len,
                             TL_PROTO_MAX_HEADER);
    if (len == 0)
        return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "empty header part");
    tl_proto_err rc = tlp_precheck(hdr, len, err);
    if (rc)
        return rc;

    msgpack_zone_clear(d->zone);
    size_t off = 0;
    switch (msgpack_unpack(hdr, len, &off, d->zone, &d->root)) {
        case MSGPACK_UNPACK_SUCCESS: break;
        case MSGPACK_UNPACK_NOMEM_ERROR:
            return tl_proto_fail(err, TL_PROTO_E_RESOURCE, "out of memory unpacking the header");
        default: /* unreachable after the pre-validator; kept so a msgpack-c change fails safe */
            return tl_proto_fail(err, TL_PROTO_E_MALFORMED, "msgpack-c rejected the header");
    }
    const msgpack_object *h = &d->root;
    if (h->type != MSGPACK_OBJECT_MAP)
        return tl_proto_fail(err, TL_PROTO_E_NOT_MAP, "header is a %s, not a map",
                             tlp_object_type_name(h));
    if ((rc = tlp_check_keys(h, d->zone, "header", err)))
        return rc;
    if ((rc = check_version(h, err)))
        return rc;
    tl_msg_type t;
    if ((rc = check_type(h, accept, &t, err)))
        return rc;

    out->type = t;
    switch (t) {
        case TL_MSG_SCAN: rc = tlp_decode_scan(h, &out->scan, err); break;
        case TL_MSG_FRAME: rc = tlp_decode_frame(h, &out->frame, err); break;
        case TL_MSG_END: rc = tlp_decode_end(h, &out->end, err); break;
        case TL_MSG_REQ: rc = tlp_decode_req(h, d->zone, &out->req, err); break;
        case TL_MSG_REP: rc = tlp_decode_rep(h, &out->rep, err); break;
        case TL_MSG_SLICE: rc = tlp_decode_slice(h, &out->slice, err); break;
        case TL_MSG_RELEASE: rc = tlp_decode_release(h, &out->release, err); break;
    }
    if (rc == TL_PROTO_OK && err) {
        err->code = TL_PROTO_OK;
        err->message[0] = '\0';
    }
    return rc;
}
