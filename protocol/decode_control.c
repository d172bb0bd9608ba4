/* decode_control.c — the control envelope: "req" and "rep" (PROTOCOL.md §Control).
 *
 * Only the envelope is checked here; what a command's args mean is the daemon's business,
 * which reads them with the tl_proto_get_* getters. Because those look keys up by name, an
 * args map must have string keys and no duplicates, checked here once for every command.
 * A reply's result is free-form and left as is.
 */
#include "config.h"

#include <inttypes.h>
#include <stdint.h>

#include "protocol/protocol.h"
#include "protocol/proto_internal.h"

tl_proto_err tlp_decode_req(const msgpack_object *h, msgpack_zone *zone, tl_proto_req *m,
                            tl_proto_error *err)
{
    TLP_TRY(tl_proto_get_u64(h, "id", true, &m->id, err));
    TLP_TRY(tl_proto_get_str(h, "cmd", true, &m->cmd, err));
    if (m->cmd.len < 1 || m->cmd.len > TLP_MAX_CMD)
        return tl_proto_fail(err, TL_PROTO_E_RANGE, "\"cmd\": %zu bytes, expected 1..%d",
                             m->cmd.len, TLP_MAX_CMD);
    const msgpack_object *a = tl_proto_map_get(h, "args");
    m->args = NULL;
    if (a) {
        if (a->type != MSGPACK_OBJECT_MAP)
            return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"args\": expected map, got %s",
                                 tlp_object_type_name(a));
        TLP_TRY(tlp_check_keys(a, zone, "\"args\"", err));
        m->args = a;
    }
    return TL_PROTO_OK;
}

tl_proto_err tlp_decode_rep(const msgpack_object *h, tl_proto_rep *m, tl_proto_error *err)
{
    TLP_TRY(tl_proto_get_u64(h, "id", true, &m->id, err));
    TLP_TRY(tl_proto_get_bool(h, "ok", true, &m->ok, err));
    m->result = NULL;
    m->code = TL_PROTO_OK;
    m->message = (tl_proto_str){"", 0};
    if (m->ok) {
        const msgpack_object *r = tl_proto_map_get(h, "result");
        if (r && r->type != MSGPACK_OBJECT_NIL) /* nil and absent both mean "no result" */
            m->result = r;
        return TL_PROTO_OK;
    }
    const msgpack_object *e = tl_proto_map_get(h, "error");
    if (!e)
        return tl_proto_fail(err, TL_PROTO_E_MISSING,
                             "missing required key \"error\" (\"ok\" is false)");
    if (e->type != MSGPACK_OBJECT_MAP)
        return tl_proto_fail(err, TL_PROTO_E_KEY_TYPE, "\"error\": expected map, got %s",
                             tlp_object_type_name(e));
    uint32_t code = 0;
    tl_proto_err rc = tl_proto_get_u32(e, "code", true, &code, err);
    if (!rc && code > INT32_MAX) /* must stay representable as a tl_proto_err */
        rc = tl_proto_fail(err, TL_PROTO_E_RANGE, "\"code\": %" PRIu32 " exceeds %" PRId32, code,
                           INT32_MAX);
    if (!rc)
        rc = tl_proto_get_str(e, "message", true, &m->message, err);
    if (rc) {
        tlp_err_prefix(err, "\"error\": ");
        return rc;
    }
    m->code = (tl_proto_err)code;
    return TL_PROTO_OK;
}
