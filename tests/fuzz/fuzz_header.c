/* fuzz_header.c — libFuzzer target for the header decoder (tl_proto_decode), every message
 * type accepted.
 *
 * Beyond "no crash, no leak, no UB" (ASan + UBSan) it checks properties:
 *   - a failure sets err to the same code with a non-empty, terminated message;
 *   - a decoded message re-encodes with the public encoders and decodes again to the same
 *     fields (the codec is its own oracle);
 *   - the map getters accept or reject every key of req args / rep results with a valid code
 *     and never write their output on failure;
 *   - tl_proto_decode_parts agrees with tl_proto_decode on a one-part message: the same
 *     error, or the layout the type asks for (a slice never has one part, whether its topic
 *     is slice/ or shm/; a frame has one only when its pixels are in GPU memory; a part
 *     that starts like a topic, slice/ or shm/, is one, and a topic needs a header after it).
 * Run with `make fuzz`; state (decoders, buffers) is reused across inputs, as in the daemon.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/protocol.h"

#define ALL                                                                             \
    (TL_MSG_SCAN | TL_MSG_FRAME | TL_MSG_END | TL_MSG_REQ | TL_MSG_REP | TL_MSG_SLICE | \
     TL_MSG_RELEASE)
#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "property failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                          \
        }                                                                     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tl_proto_decoder *dec, *dec2;
static msgpack_sbuffer sb;

static bool str_same(tl_proto_str a, tl_proto_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* A decoder's codes: the protocol errors, and E_UNSUPPORTED for well-formed keys that do
 * not go together (a row band of a CUDA IPC frame, PROTOCOL.md §8.2; a cone-beam key in a
 * parallel-beam scan, §8.1.1). */
static bool valid_code(tl_proto_err rc)
{
    return (rc >= TL_PROTO_E_PARTS && rc <= TL_PROTO_E_PAYLOAD) || rc == TL_PROTO_E_UNSUPPORTED;
}

static void check_err(tl_proto_err rc, const tl_proto_error *err)
{
    CHECK(valid_code(rc));
    CHECK(err->code == rc);
    CHECK(memchr(err->message, '\0', sizeof err->message) != NULL);
    CHECK(err->message[0] != '\0');
}

/* Every getter on every string key of map (a bounded number of them). */
static void poke_getters(const msgpack_object *map)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return;
    for (uint32_t i = 0; i < map->via.map.size && i < 32; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        char key[64];
        if (k->type != MSGPACK_OBJECT_STR || k->via.str.size >= sizeof key ||
            memchr(k->via.str.ptr, '\0', k->via.str.size))
            continue;
        memcpy(key, k->via.str.ptr, k->via.str.size);
        key[k->via.str.size] = '\0';
        /* the first entry with this key (result maps may repeat keys; args may not) */
        const msgpack_object *v = tl_proto_map_get(map, key);
        CHECK(v != NULL);
        tl_proto_error err;
        tl_proto_err rc;
        uint64_t u64 = 0xdead;
        uint32_t u32 = 0xdead;
        double d = 0xdead;
        bool b = false;
        tl_proto_str s = {"x", 1};
        rc = tl_proto_get_u64(map, key, true, &u64, &err);
        CHECK(rc ? u64 == 0xdead : true);
        rc = tl_proto_get_u32(map, key, true, &u32, &err);
        CHECK(rc ? u32 == 0xdead : true);
        rc = tl_proto_get_double(map, key, true, &d, &err);
        CHECK(rc ? d == 0xdead : true);
        if (rc == TL_PROTO_OK)
            CHECK(d - d == 0); /* finite */
        rc = tl_proto_get_bool(map, key, false, &b, &err);
        CHECK(rc == TL_PROTO_OK || rc == TL_PROTO_E_KEY_TYPE);
        rc = tl_proto_get_str(map, key, true, &s, &err);
        CHECK(rc ? s.len == 1 : s.ptr == v->via.str.ptr);
        if (v->type == MSGPACK_OBJECT_ARRAY && v->via.array.size <= 16) {
            float f[16];
            uint32_t dims[16];
            size_t n = v->via.array.size;
            rc = tl_proto_get_floats(map, key, true, f, n, &err);
            if (rc)
                check_err(rc, &err);
            rc = tl_proto_get_dims(map, key, true, dims, n, TL_PROTO_MAX_DIM, &err);
            if (rc)
                check_err(rc, &err);
            for (size_t j = 0; rc == TL_PROTO_OK && j < n; j++)
                CHECK(dims[j] >= 1 && dims[j] <= TL_PROTO_MAX_DIM);
        }
    }
}

/* Packs m again with the public encoders; false when it cannot be expressed (a str with a
 * NUL byte where the API takes a C string). */
static bool reencode(const tl_proto_msg *m)
{
    static char cbuf[TL_PROTO_MAX_HEADER + 1];
    msgpack_sbuffer_clear(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    switch (m->type) {
        case TL_MSG_SCAN: return tl_proto_encode_scan(&sb, &m->scan) == 0;
        case TL_MSG_FRAME: return tl_proto_encode_frame(&sb, &m->frame) == 0;
        case TL_MSG_END: return tl_proto_encode_end(&sb, &m->end) == 0;
        case TL_MSG_SLICE: return tl_proto_encode_slice(&sb, &m->slice) == 0;
        case TL_MSG_RELEASE:
            if (!m->release.ok && m->release.message.len &&
                memchr(m->release.message.ptr, '\0', m->release.message.len))
                return false;
            return tl_proto_encode_release(&sb, &m->release) == 0;
        case TL_MSG_REQ:
            if (memchr(m->req.cmd.ptr, '\0', m->req.cmd.len))
                return false;
            memcpy(cbuf, m->req.cmd.ptr, m->req.cmd.len);
            cbuf[m->req.cmd.len] = '\0';
            CHECK(tl_proto_begin_req(&pk, m->req.id, cbuf, m->req.args != NULL) == 0);
            if (m->req.args)
                CHECK(msgpack_pack_object(&pk, *m->req.args) == 0);
            return true;
        case TL_MSG_REP:
            if (m->rep.ok) {
                CHECK(tl_proto_begin_rep_ok(&pk, m->rep.id) == 0);
                if (m->rep.result)
                    return msgpack_pack_object(&pk, *m->rep.result) == 0;
                return msgpack_pack_nil(&pk) == 0;
            }
            if (m->rep.message.len && memchr(m->rep.message.ptr, '\0', m->rep.message.len))
                return false;
            memcpy(cbuf, m->rep.message.ptr, m->rep.message.len);
            cbuf[m->rep.message.len] = '\0';
            return tl_proto_pack_rep_error(&pk, m->rep.id, m->rep.code, cbuf) == 0;
    }
    return false;
}

#define SAME(f) CHECK(a->f == b->f)

/* What a decoded message owns (a scan's matrices). */
static void release(tl_proto_msg *m)
{
    if (m->type == TL_MSG_SCAN)
        tl_proto_scan_free(&m->scan);
}

static void compare(const tl_proto_msg *x, const tl_proto_msg *y)
{
    CHECK(x->type == y->type);
    switch (x->type) {
        case TL_MSG_SCAN: {
            const tl_proto_scan *a = &x->scan, *b = &y->scan;
            SAME(series);
            SAME(geometry);
            SAME(rows);
            SAME(cols);
            SAME(dtype);
            SAME(window);
            SAME(darks);
            SAME(flats);
            SAME(first_index);
            SAME(has_center);
            SAME(center);
            SAME(has_angles);
            SAME(angle_start);
            SAME(angle_step);
            SAME(already_linear);
            CHECK(str_same(a->filter, b->filter));
            SAME(nmatrices);
            for (uint32_t i = 0; i < a->nmatrices; i++) /* float64 both ways: bit for bit */
                CHECK(memcmp(a->matrices[i], b->matrices[i], sizeof a->matrices[i]) == 0);
            break;
        }
        case TL_MSG_FRAME: {
            const tl_proto_frame *a = &x->frame, *b = &y->frame;
            SAME(series);
            SAME(index);
            SAME(kind);
            SAME(has_angle);
            SAME(angle);
            SAME(dtype);
            SAME(rows);
            SAME(cols);
            SAME(has_t_acq);
            SAME(t_acq);
            SAME(has_center_offset);
            SAME(center_offset);
            break;
        }
        case TL_MSG_END: CHECK(x->end.series == y->end.series); break;
        case TL_MSG_RELEASE: {
            const tl_proto_release *a = &x->release, *b = &y->release;
            SAME(series);
            SAME(index);
            SAME(slot);
            SAME(ok);
            if (!a->ok) {
                SAME(code);
                CHECK(str_same(a->message, b->message));
            }
            break;
        }
        case TL_MSG_REQ: {
            const tl_proto_req *a = &x->req, *b = &y->req;
            SAME(id);
            CHECK(str_same(a->cmd, b->cmd));
            CHECK((a->args == NULL) == (b->args == NULL));
            if (a->args)
                CHECK(a->args->via.map.size == b->args->via.map.size);
            break;
        }
        case TL_MSG_REP: {
            const tl_proto_rep *a = &x->rep, *b = &y->rep;
            SAME(id);
            SAME(ok);
            SAME(code);
            CHECK((a->result == NULL) == (b->result == NULL));
            CHECK(str_same(a->message, b->message));
            break;
        }
        case TL_MSG_SLICE: {
            const tl_proto_slice *a = &x->slice, *b = &y->slice;
            CHECK(str_same(a->id, b->id));
            SAME(seq);
            SAME(shape[0]);
            SAME(shape[1]);
            SAME(dtype);
            SAME(projections_used);
            SAME(missing);
            SAME(window_first);
            SAME(window_last);
            SAME(t_acq);
            SAME(t_pub);
            SAME(t_recv);
            SAME(t_done);
            SAME(final);
            CHECK(memcmp(a->orientation, b->orientation, sizeof a->orientation) == 0);
            CHECK(str_same(a->kernel, b->kernel));
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dec) {
        dec = tl_proto_decoder_new();
        dec2 = tl_proto_decoder_new();
        msgpack_sbuffer_init(&sb);
        CHECK(dec && dec2);
    }
    tl_proto_msg m;
    tl_proto_error err;
    tl_proto_err rc = tl_proto_decode(dec, data, size, ALL, &m, &err);

    /* one-part framing must agree (constant message: no copy, nothing to free) */
    zmq_msg_t part;
    zmq_msg_init_data(&part, (void *)data, size, NULL, NULL);
    tl_proto_msg pm;
    tl_proto_error perr;
    tl_proto_err prc = tl_proto_decode_parts(dec2, &part, 1, ALL, &pm, &perr);
    zmq_msg_close(&part);
    if (prc == TL_PROTO_OK) /* else pm may be untouched (a refusal owns nothing) */
        release(&pm);

    /* a part starting with a topic prefix is a topic to decode_parts (never a header: a
     * header starts with a map byte), and a topic alone lacks its header */
    bool topic = (size >= 6 && memcmp(data, "slice/", 6) == 0) ||
                 (size >= 4 && memcmp(data, "shm/", 4) == 0);
    if (rc != TL_PROTO_OK) {
        check_err(rc, &err);
        CHECK(prc == (topic ? TL_PROTO_E_PARTS : rc));
        return 0;
    }
    CHECK(!topic);
    bool one_part = m.type != TL_MSG_SLICE && (m.type != TL_MSG_FRAME || m.frame.has_ipc);
    if (prc != (one_part ? TL_PROTO_OK : TL_PROTO_E_PARTS))
        fprintf(stderr, "decode_parts: %s: %s\n", tl_proto_err_name(prc), perr.message);
    CHECK(prc == (one_part ? TL_PROTO_OK : TL_PROTO_E_PARTS));

    if (m.type == TL_MSG_REQ)
        poke_getters(m.req.args);
    if (m.type == TL_MSG_REP)
        poke_getters(m.rep.result);
    if (m.type == TL_MSG_FRAME)
        CHECK(tl_proto_check_payload(m.frame.rows, m.frame.cols, m.frame.dtype, size, &err) ==
                  TL_PROTO_OK ||
              err.code == TL_PROTO_E_PAYLOAD);

    if (reencode(&m)) {
        tl_proto_msg m2;
        tl_proto_err rc2 = tl_proto_decode(dec2, sb.data, sb.size, ALL, &m2, &err);
        if (rc2 == TL_PROTO_E_TOO_BIG) { /* re-encoding may grow a header near the limit */
            release(&m);
            return 0;
        }
        if (rc2 != TL_PROTO_OK)
            fprintf(stderr, "re-decode: %s: %s\n", tl_proto_err_name(rc2), err.message);
        CHECK(rc2 == TL_PROTO_OK);
        compare(&m, &m2);
        release(&m2);
    }
    release(&m);
    return 0;
}
