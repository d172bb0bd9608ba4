/* check_ctl.c — `tomolive ctl` against a ROUTER socket of the test's own that plays the
 * daemon: the request on the wire (REQ-style envelope, id, cmd, args built from key=value
 * pairs or one JSON object), an ok reply printed as JSON, an error reply (exit 1, code
 * name and message), a reply to another request skipped, no reply (exit 3), and usage
 * errors (exit 2).
 */
#include "config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/jsonpack.h"
#include "protocol/protocol.h"
#include "tests/integration/clients_util.h"
#include "tests/testutil.h"

static char *dir;
static void *ctx, *router;
static char ep[256];
static tl_proto_decoder *dec;

static void setup(void)
{
    dir = tl_tmpdir("ctl");
    ck_assert_ptr_nonnull(dir);
    ctx = zmq_ctx_new();
    router = tl_bind_loopback(ctx, ZMQ_ROUTER, ep, sizeof ep);
    dec = tl_proto_decoder_new();
}

static void teardown(void)
{
    tl_proto_decoder_free(dec);
    zmq_close(router);
    zmq_ctx_term(ctx);
    tl_rm_rf(dir);
    free(dir);
}

/* One request: [identity, "", header]. The identity and the header bytes are kept in
 * the caller's messages (the decoded request points into the header). */
typedef struct {
    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    int n;
    tl_proto_req req;
} request;

static void receive_request(request *r)
{
    tl_proto_error err;
    r->n = tl_proto_recv(router, r->parts, TL_PROTO_MAX_PARTS, 0, &err);
    ck_assert_msg(r->n == 3, "request of %d parts; ctl stderr: %s", r->n, tl_client_err());
    ck_assert_uint_eq(zmq_msg_size(&r->parts[1]), 0); /* the delimiter REQ would send */
    tl_proto_msg m;
    ck_assert_msg(tl_proto_decode(dec, zmq_msg_data(&r->parts[2]), zmq_msg_size(&r->parts[2]),
                                  TL_PROTO_CONTROL, &m, &err) == TL_PROTO_OK,
                  "%s: %s", tl_proto_err_name(err.code), err.message);
    r->req = m.req;
}

/* Sends a reply to r: ok with result (a JSON value, packed through jsonpack; NULL for
 * none), or an error. id_delta != 0 answers a different request id. */
static void reply(request *r, int64_t id_delta, const json_t *result, tl_proto_err code,
                  const char *message)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    uint64_t id = r->req.id + (uint64_t)id_delta;
    if (code == TL_PROTO_OK) {
        ck_assert_int_eq(tl_proto_begin_rep_ok(&pk, id), 0);
        ck_assert_int_eq(result ? tl_json_pack(&pk, result) : msgpack_pack_nil(&pk), 0);
    } else {
        ck_assert_int_eq(tl_proto_pack_rep_error(&pk, id, code, message), 0);
    }
    ck_assert_int_ge(zmq_send(router, zmq_msg_data(&r->parts[0]), zmq_msg_size(&r->parts[0]),
                              ZMQ_SNDMORE),
                     0);
    ck_assert_int_ge(zmq_send(router, "", 0, ZMQ_SNDMORE), 0);
    ck_assert_int_ge(zmq_send(router, sb.data, sb.size, 0), 0);
    msgpack_sbuffer_destroy(&sb);
}

static void done(request *r)
{
    tl_proto_close(r->parts, r->n);
}

START_TEST(test_ctl_key_value_and_ok)
{
    const char *args[] = {"ctl",
                          "--endpoint",
                          ep,
                          "--timeout",
                          "20",
                          "set_slice",
                          "id=row0",
                          "z=128",
                          "size=[256,256]",
                          "update={\"every\":10}",
                          "name=\"42\"",
                          "on=true",
                          "note=hello world",
                          "x=-1.5",
                          NULL};
    pid_t pid = tl_client_start(dir, args);
    request r;
    receive_request(&r);
    ck_assert(tl_proto_str_eq(r.req.cmd, "set_slice"));
    const msgpack_object *a = r.req.args;
    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq(a->via.map.size, 8);
    tl_proto_error err;
    tl_proto_str s;
    uint64_t u;
    uint32_t dims[2];
    bool b;
    double x;
    ck_assert_int_eq(tl_proto_get_str(a, "id", true, &s, &err), TL_PROTO_OK);
    ck_assert(tl_proto_str_eq(s, "row0"));
    ck_assert_int_eq(tl_proto_get_u64(a, "z", true, &u, &err), TL_PROTO_OK);
    ck_assert_uint_eq(u, 128);
    ck_assert_int_eq(tl_proto_get_dims(a, "size", true, dims, 2, 65536, &err), TL_PROTO_OK);
    ck_assert(dims[0] == 256 && dims[1] == 256);
    const msgpack_object *upd = tl_proto_map_get(a, "update");
    ck_assert(upd && upd->type == MSGPACK_OBJECT_MAP);
    ck_assert_int_eq(tl_proto_get_u64(upd, "every", true, &u, &err), TL_PROTO_OK);
    ck_assert_uint_eq(u, 10);
    ck_assert_int_eq(tl_proto_get_str(a, "name", true, &s, &err), TL_PROTO_OK);
    ck_assert(tl_proto_str_eq(s, "42")); /* quoted: a string, not a number */
    ck_assert_int_eq(tl_proto_get_bool(a, "on", true, &b, &err), TL_PROTO_OK);
    ck_assert(b);
    ck_assert_int_eq(tl_proto_get_str(a, "note", true, &s, &err), TL_PROTO_OK);
    ck_assert(tl_proto_str_eq(s, "hello world"));
    ck_assert_int_eq(tl_proto_get_double(a, "x", true, &x, &err), TL_PROTO_OK);
    ck_assert_double_eq(x, -1.5);

    /* a reply to some other request first: skipped */
    json_t *other = json_pack("{s:s}", "not", "ours");
    reply(&r, 1, other, TL_PROTO_OK, NULL);
    json_t *res = json_pack("{s:s, s:i, s:[f, s, b], s:n, s:{s:i}}", "state", "running", "slices",
                            3, "list", 1.5, "x", 1, "none", "nested", "a", -7);
    reply(&r, 0, res, TL_PROTO_OK, NULL);
    done(&r);
    ck_assert_int_eq(tl_client_wait(pid, 30), 0);
    json_error_t je;
    json_t *printed = json_loads(tl_client_out(), 0, &je);
    ck_assert_msg(printed != NULL, "stdout is not JSON (%s): %s", je.text, tl_client_out());
    ck_assert_msg(json_equal(printed, res), "printed %s", tl_client_out());
    ck_assert_msg(strchr(tl_client_out(), '\n') != strrchr(tl_client_out(), '\n'),
                  "not pretty-printed: %s", tl_client_out());
    json_decref(printed);
    json_decref(res);
    json_decref(other);
}
END_TEST

START_TEST(test_ctl_json_object_and_no_args)
{
    const char *args[] = {"ctl",
                          "--endpoint",
                          ep,
                          "set_slice",
                          "{\"id\": \"r\", \"plane\": [1, 0, 0, 0, 1, 0, 0.5, 0.5, 3]}",
                          NULL};
    pid_t pid = tl_client_start(dir, args);
    request r;
    receive_request(&r);
    float plane[9];
    tl_proto_error err;
    ck_assert_int_eq(tl_proto_get_floats(r.req.args, "plane", true, plane, 9, &err), TL_PROTO_OK);
    ck_assert(plane[6] == 0.5f && plane[8] == 3.0f);
    reply(&r, 0, NULL, TL_PROTO_OK, NULL);
    done(&r);
    ck_assert_int_eq(tl_client_wait(pid, 30), 0);
    ck_assert_str_eq(tl_client_out(), ""); /* no result, nothing printed */

    const char *none[] = {"ctl", "--endpoint", ep, "status", NULL};
    pid = tl_client_start(dir, none);
    receive_request(&r);
    ck_assert(tl_proto_str_eq(r.req.cmd, "status"));
    ck_assert_ptr_null(r.req.args);
    json_t *res = json_pack("[i, i]", 1, 2);
    reply(&r, 0, res, TL_PROTO_OK, NULL);
    done(&r);
    ck_assert_int_eq(tl_client_wait(pid, 30), 0);
    json_t *printed = json_loads(tl_client_out(), 0, NULL);
    ck_assert(printed && json_equal(printed, res));
    json_decref(printed);
    json_decref(res);
}
END_TEST

START_TEST(test_ctl_error_reply)
{
    const char *args[] = {"ctl", "--endpoint", ep, "remove_slice", "id=row9", NULL};
    pid_t pid = tl_client_start(dir, args);
    request r;
    receive_request(&r);
    const char *msg = "no slice \"row9\"";
    reply(&r, 0, NULL, TL_PROTO_E_NOT_FOUND, msg);
    done(&r);
    ck_assert_int_eq(tl_client_wait(pid, 30), 1);
    char want[256];
    snprintf(want, sizeof want, "tomolive ctl: error %s (%d): %s\n",
             tl_proto_err_name(TL_PROTO_E_NOT_FOUND), (int)TL_PROTO_E_NOT_FOUND, msg);
    ck_assert_str_eq(tl_client_err(), want);
    ck_assert_str_eq(tl_client_out(), "");
}
END_TEST

START_TEST(test_ctl_timeout)
{
    /* the request arrives, no reply comes */
    const char *args[] = {"ctl", "--endpoint", ep, "--timeout", "0.5", "status", NULL};
    pid_t pid = tl_client_start(dir, args);
    request r;
    receive_request(&r);
    done(&r);
    double t = tl_now_s();
    ck_assert_int_eq(tl_client_wait(pid, 30), 3);
    ck_assert_msg(tl_now_s() - t < 10, "took %g s", tl_now_s() - t);
    ck_assert(strstr(tl_client_err(), "no reply") != NULL);

    /* nobody there at all */
    char nobody[64];
    snprintf(nobody, sizeof nobody, "tcp://127.0.0.1:%d", tl_free_port());
    const char *gone[] = {"ctl", "--endpoint", nobody, "--timeout", "0.3", "status", NULL};
    ck_assert_int_eq(tl_client_run(dir, gone, 30), 3);
}
END_TEST

START_TEST(test_ctl_usage)
{
    const struct {
        const char *phrase;
        const char *args[8];
    } cases[] = {
        {"missing the command", {"ctl", NULL}},
        {"not key=value", {"ctl", "status", "verbose", NULL}},
        {"given twice", {"ctl", "status", "a=1", "a=2", NULL}},
        {"not a JSON object", {"ctl", "status", "{\"a\": }", NULL}},
        {"bad --timeout", {"ctl", "--timeout", "0", "status", NULL}},
        {"unknown option", {"ctl", "--bogus", "status", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(tl_client_run(dir, cases[i].args, 30), 2);
        ck_assert_msg(strstr(tl_client_err(), cases[i].phrase) != NULL, "case %zu: %s", i,
                      tl_client_err());
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ctl");
    TCase *tc = tcase_create("ctl");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ctl_key_value_and_ok);
    tcase_add_test(tc, test_ctl_json_object_and_no_args);
    tcase_add_test(tc, test_ctl_error_reply);
    tcase_add_test(tc, test_ctl_timeout);
    tcase_add_test(tc, test_ctl_usage);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
