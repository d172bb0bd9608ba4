/* fuzz_control.c — libFuzzer target for a control request as the control socket takes it
 * (daemon/serve/control.c), up to the point where a command would act: decoding, no daemon.
 *
 * An input is one request body (the part after ROUTER's routing envelope). What runs:
 *   - tl_proto_decode with TL_PROTO_CONTROL (only "req" is accepted there);
 *   - a refusal is answered as control.c answers it: an error reply with the request's id
 *     when it could be read (else 0), the decoder's code and message; that reply must
 *     decode as a "rep" with the same id, code and message;
 *   - an accepted request's args are read as the commands read them (daemon/serve/
 *     commands.c: set_slice's kind, size, z, axis, position, orientation, scale and update
 *     map, pin; remove_slice's and resend's id; set_param's name and value; the wire
 *     format's dtype and compression; tune's size) with the getters, each of which must
 *     answer OK or a named error with a message, and leave its output alone on failure.
 * The commands themselves (they need a daemon) are the integration tests' business.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/protocol.h"

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "property failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                          \
        }                                                                     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tl_proto_decoder *dec, *rep_dec;
static msgpack_sbuffer reply;

static void check_err(tl_proto_err rc, const tl_proto_error *err)
{
    CHECK(rc != TL_PROTO_OK);
    CHECK(err->code == rc);
    CHECK(strcmp(tl_proto_err_name(rc), "E_?") != 0);
    CHECK(memchr(err->message, '\0', sizeof err->message) != NULL);
    CHECK(err->message[0] != '\0');
}

/* A getter's answer: OK, or a named error and the output as it was. */
#define GET(call, out, sentinel)                                  \
    do {                                                          \
        tl_proto_error e_;                                        \
        out = sentinel;                                           \
        tl_proto_err rc_ = call;                                  \
        if (rc_ != TL_PROTO_OK) {                                 \
            check_err(rc_, &e_);                                  \
            CHECK(out == sentinel);                               \
        }                                                         \
    } while (0)

static void read_args(const msgpack_object *a)
{
    tl_proto_error e;
    tl_proto_str s;
    double d;
    uint32_t u32;
    bool b;
    /* the strings commands read: kind, axis, id, name, value, dtype, compression */
    static const char *const strs[] = {"kind", "axis", "id", "name", "value", "dtype",
                                       "compression"};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        s = (tl_proto_str){"x", 1};
        tl_proto_err rc = tl_proto_get_str(a, strs[i], true, &s, &e);
        if (rc != TL_PROTO_OK) {
            check_err(rc, &e);
            CHECK(s.len == 1 && s.ptr[0] == 'x');
        } else {
            CHECK(s.len == 0 || s.ptr != NULL);
            (void)tl_proto_str_eq(s, "row"); /* as commands compare them */
        }
    }
    static const char *const doubles[] = {"z", "position", "scale", "value"};
    for (size_t i = 0; i < sizeof doubles / sizeof *doubles; i++) {
        GET(tl_proto_get_double(a, doubles[i], true, &d, &e_), d, 0xdead);
        if (d != 0xdead)
            CHECK(isfinite(d));
    }
    GET(tl_proto_get_bool(a, "pin", false, &b, &e_), b, false);
    uint32_t size[2] = {7, 7};
    tl_proto_err rc = tl_proto_get_dims(a, "size", false, size, 2, TL_PROTO_MAX_DIM, &e);
    if (rc != TL_PROTO_OK)
        check_err(rc, &e);
    else
        for (int i = 0; i < 2; i++)
            CHECK(size[i] == 7 || (size[i] >= 1 && size[i] <= TL_PROTO_MAX_DIM));
    float o[9];
    rc = tl_proto_get_floats(a, "orientation", true, o, 9, &e);
    if (rc != TL_PROTO_OK)
        check_err(rc, &e);
    else
        for (int i = 0; i < 9; i++)
            CHECK(isfinite(o[i]));
    const msgpack_object *u = tl_proto_map_get(a, "update");
    if (u && u->type == MSGPACK_OBJECT_MAP) {
        GET(tl_proto_get_u32(u, "every", false, &u32, &e_), u32, 0xdead);
        GET(tl_proto_get_bool(u, "on_complete", false, &b, &e_), b, false);
        GET(tl_proto_get_double(u, "max_rate", false, &d, &e_), d, 0xdead);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dec) {
        dec = tl_proto_decoder_new();
        rep_dec = tl_proto_decoder_new();
        msgpack_sbuffer_init(&reply);
        CHECK(dec && rep_dec);
    }
    tl_proto_msg m;
    memset(&m, 0, sizeof m); /* as control.c: the id of a refused request may be read */
    tl_proto_error err;
    tl_proto_err rc = tl_proto_decode(dec, data, size, TL_PROTO_CONTROL, &m, &err);
    if (rc == TL_PROTO_OK) {
        CHECK(m.type == TL_MSG_REQ);
        CHECK(m.req.cmd.len >= 1 && m.req.cmd.ptr != NULL);
        CHECK(!m.req.args || m.req.args->type == MSGPACK_OBJECT_MAP);
        if (m.req.args)
            read_args(m.req.args);
        return 0;
    }
    check_err(rc, &err);
    /* the error reply control.c sends, read back as a client reads it */
    uint64_t id = m.type == TL_MSG_REQ ? m.req.id : 0;
    msgpack_sbuffer_clear(&reply);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &reply, msgpack_sbuffer_write);
    CHECK(tl_proto_pack_rep_error(&pk, id, err.code, err.message) == 0);
    tl_proto_msg r;
    tl_proto_error rerr;
    tl_proto_err rrc = tl_proto_decode(rep_dec, reply.data, reply.size, TL_MSG_REP, &r, &rerr);
    if (rrc != TL_PROTO_OK)
        fprintf(stderr, "error reply: %s: %s\n", tl_proto_err_name(rrc), rerr.message);
    CHECK(rrc == TL_PROTO_OK);
    CHECK(r.type == TL_MSG_REP && !r.rep.ok && r.rep.id == id && r.rep.code == err.code);
    CHECK(r.rep.message.len == strlen(err.message) &&
          memcmp(r.rep.message.ptr, err.message, r.rep.message.len) == 0);
    return 0;
}
