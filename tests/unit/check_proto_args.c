/* check_proto_args.c — the typed map getters (tl_proto_get_*) the daemon uses on request
 * args: each type rule of PROTOCOL.md "Value types", absent optional keys leaving the output
 * untouched, failures leaving it untouched too, and unknown keys being ignored by decoders.
 *
 * The maps are real decoded request args (built from text), so the getters see exactly what
 * msgpack-c produces, e.g. positive values sent in signed encodings.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "protocol/protocol.h"
#include "tests/testutil.h"
#include "tests/unit/check_proto_util.h"

static tl_proto_decoder *dec;
static msgpack_sbuffer sb;
static const msgpack_object *args;

#define ARGS                                                                                      \
    "{\"u\": 7, \"big\": 18446744073709551615, \"u32max\": 4294967295, \"u32over\": 4294967296, " \
    "\"neg\": -7, \"f\": 2.5, \"f32\": f32(0.25), \"nan\": NaN, \"inf\": Infinity, "              \
    "\"s\": \"text\", \"bin\": b\"text\", \"t\": true, \"nil\": null, "                           \
    "\"arr\": [1, 2, 3], \"farr\": [1.5, -2, 3], \"huge\": [1e300], \"map\": {\"a\": 1}, "        \
    "\"dims\": [2, 65536], \"zdims\": [0, 3], \"mixed\": [1, \"2\"]}"

static void setup(void)
{
    dec = tl_proto_decoder_new();
    msgpack_sbuffer_init(&sb);
    char text[2048];
    snprintf(text, sizeof text,
             "{\"v\": 1, \"type\": \"req\", \"id\": 1, \"cmd\": \"x\", "
             "\"args\": %s}",
             ARGS);
    tlt_pack_text(&sb, text);
    tl_proto_msg m;
    tl_proto_error err;
    ck_assert_int_eq(tl_proto_decode(dec, sb.data, sb.size, TL_PROTO_CONTROL, &m, &err), 0);
    args = m.req.args;
    ck_assert_ptr_nonnull(args);
}

static void teardown(void)
{
    tl_proto_decoder_free(dec);
    msgpack_sbuffer_destroy(&sb);
}

/* Asserts rc == want and, on failure, that the message names the key. */
static void is(tl_proto_err rc, tl_proto_err want, const tl_proto_error *err, const char *key)
{
    ck_assert_msg(rc == want, "%s: got %s, want %s", key, tl_proto_err_name(rc),
                  tl_proto_err_name(want));
    if (rc != TL_PROTO_OK)
        ck_assert_msg(strstr(err->message, key), "\"%s\" does not name %s", err->message, key);
}

START_TEST(get_u64)
{
    tl_proto_error err;
    uint64_t v = 99;
    is(tl_proto_get_u64(args, "u", true, &v, &err), TL_PROTO_OK, &err, "u");
    ck_assert_uint_eq(v, 7);
    is(tl_proto_get_u64(args, "big", true, &v, &err), TL_PROTO_OK, &err, "big");
    ck_assert_uint_eq(v, UINT64_MAX);
    v = 99;
    is(tl_proto_get_u64(args, "neg", true, &v, &err), TL_PROTO_E_RANGE, &err, "neg");
    is(tl_proto_get_u64(args, "f", true, &v, &err), TL_PROTO_E_KEY_TYPE, &err, "f");
    is(tl_proto_get_u64(args, "s", true, &v, &err), TL_PROTO_E_KEY_TYPE, &err, "s");
    is(tl_proto_get_u64(args, "t", true, &v, &err), TL_PROTO_E_KEY_TYPE, &err, "t");
    is(tl_proto_get_u64(args, "nil", true, &v, &err), TL_PROTO_E_KEY_TYPE, &err, "nil");
    is(tl_proto_get_u64(args, "absent", true, &v, &err), TL_PROTO_E_MISSING, &err, "absent");
    is(tl_proto_get_u64(args, "absent", false, &v, &err), TL_PROTO_OK, &err, "absent");
    ck_assert_uint_eq(v, 99); /* untouched by failures and by absent optional keys */
}
END_TEST

START_TEST(get_u32)
{
    tl_proto_error err;
    uint32_t v = 99;
    is(tl_proto_get_u32(args, "u32max", true, &v, &err), TL_PROTO_OK, &err, "u32max");
    ck_assert_uint_eq(v, UINT32_MAX);
    v = 99;
    is(tl_proto_get_u32(args, "u32over", true, &v, &err), TL_PROTO_E_RANGE, &err, "u32over");
    is(tl_proto_get_u32(args, "neg", true, &v, &err), TL_PROTO_E_RANGE, &err, "neg");
    is(tl_proto_get_u32(args, "arr", true, &v, &err), TL_PROTO_E_KEY_TYPE, &err, "arr");
    ck_assert_uint_eq(v, 99);
}
END_TEST

START_TEST(get_double)
{
    tl_proto_error err;
    double v = 99;
    is(tl_proto_get_double(args, "f", true, &v, &err), TL_PROTO_OK, &err, "f");
    ck_assert(v == 2.5);
    is(tl_proto_get_double(args, "f32", true, &v, &err), TL_PROTO_OK, &err, "f32");
    ck_assert(v == 0.25);
    is(tl_proto_get_double(args, "u", true, &v, &err), TL_PROTO_OK, &err, "u");
    ck_assert(v == 7.0);
    is(tl_proto_get_double(args, "neg", true, &v, &err), TL_PROTO_OK, &err, "neg");
    ck_assert(v == -7.0);
    v = 99;
    is(tl_proto_get_double(args, "nan", true, &v, &err), TL_PROTO_E_NOT_FINITE, &err, "nan");
    is(tl_proto_get_double(args, "inf", true, &v, &err), TL_PROTO_E_NOT_FINITE, &err, "inf");
    is(tl_proto_get_double(args, "s", true, &v, &err), TL_PROTO_E_KEY_TYPE, &err, "s");
    is(tl_proto_get_double(args, "t", true, &v, &err), TL_PROTO_E_KEY_TYPE, &err, "t");
    ck_assert(v == 99);
}
END_TEST

START_TEST(get_bool_str)
{
    tl_proto_error err;
    bool b = false;
    is(tl_proto_get_bool(args, "t", true, &b, &err), TL_PROTO_OK, &err, "t");
    ck_assert(b);
    is(tl_proto_get_bool(args, "u", true, &b, &err), TL_PROTO_E_KEY_TYPE, &err, "u");
    is(tl_proto_get_bool(args, "nil", true, &b, &err), TL_PROTO_E_KEY_TYPE, &err, "nil");
    is(tl_proto_get_bool(args, "s", true, &b, &err), TL_PROTO_E_KEY_TYPE, &err, "s");
    tl_proto_str s = {"keep", 4};
    is(tl_proto_get_str(args, "s", true, &s, &err), TL_PROTO_OK, &err, "s");
    ck_assert(tl_proto_str_eq(s, "text"));
    s = (tl_proto_str){"keep", 4};
    is(tl_proto_get_str(args, "bin", true, &s, &err), TL_PROTO_E_KEY_TYPE, &err, "bin");
    is(tl_proto_get_str(args, "u", true, &s, &err), TL_PROTO_E_KEY_TYPE, &err, "u");
    is(tl_proto_get_str(args, "map", true, &s, &err), TL_PROTO_E_KEY_TYPE, &err, "map");
    ck_assert(tl_proto_str_eq(s, "keep"));
}
END_TEST

START_TEST(get_arrays)
{
    tl_proto_error err;
    float f[3] = {9, 9, 9};
    is(tl_proto_get_floats(args, "farr", true, f, 3, &err), TL_PROTO_OK, &err, "farr");
    ck_assert(f[0] == 1.5f && f[1] == -2.0f && f[2] == 3.0f);
    f[0] = 9;
    is(tl_proto_get_floats(args, "farr", true, f, 2, &err), TL_PROTO_E_RANGE, &err, "farr");
    is(tl_proto_get_floats(args, "huge", true, f, 1, &err), TL_PROTO_E_RANGE, &err, "huge");
    is(tl_proto_get_floats(args, "mixed", true, f, 2, &err), TL_PROTO_E_KEY_TYPE, &err,
       "mixed[1]");
    is(tl_proto_get_floats(args, "s", true, f, 1, &err), TL_PROTO_E_KEY_TYPE, &err, "s");
    ck_assert(f[0] == 9);

    uint32_t d[2] = {9, 9};
    is(tl_proto_get_dims(args, "dims", true, d, 2, 65536, &err), TL_PROTO_OK, &err, "dims");
    ck_assert(d[0] == 2 && d[1] == 65536);
    d[0] = 9;
    is(tl_proto_get_dims(args, "dims", true, d, 2, 65535, &err), TL_PROTO_E_RANGE, &err,
       "dims[1]");
    is(tl_proto_get_dims(args, "zdims", true, d, 2, 10, &err), TL_PROTO_E_RANGE, &err, "zdims[0]");
    is(tl_proto_get_dims(args, "farr", true, d, 3, 10, &err), TL_PROTO_E_KEY_TYPE, &err,
       "farr[0]");
    is(tl_proto_get_dims(args, "arr", true, d, 2, 10, &err), TL_PROTO_E_RANGE, &err, "arr");
    is(tl_proto_get_dims(args, "map", true, d, 2, 10, &err), TL_PROTO_E_KEY_TYPE, &err, "map");
    is(tl_proto_get_dims(args, "nope", true, d, 2, 10, &err), TL_PROTO_E_MISSING, &err, "nope");
    ck_assert(d[0] == 9);
}
END_TEST

START_TEST(map_get)
{
    ck_assert_ptr_nonnull(tl_proto_map_get(args, "u"));
    ck_assert_ptr_null(tl_proto_map_get(args, "U"));   /* case-sensitive */
    ck_assert_ptr_null(tl_proto_map_get(args, "u32")); /* no prefix match */
    ck_assert_ptr_null(tl_proto_map_get(NULL, "u"));
    const msgpack_object *a = tl_proto_map_get(args, "arr");
    ck_assert_ptr_null(tl_proto_map_get(a, "u")); /* not a map */
    /* a NULL map (request without args) reads as "every key absent" */
    tl_proto_error err;
    uint64_t v = 5;
    is(tl_proto_get_u64(NULL, "z", false, &v, &err), TL_PROTO_OK, &err, "z");
    is(tl_proto_get_u64(NULL, "z", true, &v, &err), TL_PROTO_E_MISSING, &err, "z");
    ck_assert_uint_eq(v, 5);
    /* err may be NULL */
    ck_assert_int_eq(tl_proto_get_u64(args, "neg", true, &v, NULL), TL_PROTO_E_RANGE);
}
END_TEST

/* Unknown keys, even nested and of any type, are ignored by every decoder. */
START_TEST(unknown_keys_ignored)
{
    const char *hdrs[] =
        {"{\"v\": 1, \"type\": \"end\", \"series\": 3, \"future\": {\"x\": [1, {\"y\": null}]}}",
         "{\"comment\": b\"\\0\", \"v\": 1, \"type\": \"frame\", \"series\": 1, \"index\": 2, "
         "\"kind\": \"dark\", \"dtype\": \"u8\", \"shape\": [1, 1], \"exposure\": -1.5}",
         "{\"v\": 1, \"type\": \"req\", \"id\": 1, \"cmd\": \"status\", \"token\": \"abc\"}",
         "{\"v\": 1, \"type\": \"rep\", \"id\": 1, \"ok\": true, \"took_ns\": 12}"};
    const tl_msg_type types[] = {TL_MSG_END, TL_MSG_FRAME, TL_MSG_REQ, TL_MSG_REP};
    for (int i = 0; i < 4; i++) {
        msgpack_sbuffer_clear(&sb);
        tlt_pack_text(&sb, hdrs[i]);
        tl_proto_msg m;
        tl_proto_error err;
        tl_proto_err rc = tl_proto_decode(dec, sb.data, sb.size, ~0u, &m, &err);
        ck_assert_msg(rc == TL_PROTO_OK, "%s: %s", hdrs[i], err.message);
        ck_assert_int_eq(m.type, types[i]);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("proto_args");
    TCase *tc = tcase_create("getters");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, get_u64);
    tcase_add_test(tc, get_u32);
    tcase_add_test(tc, get_double);
    tcase_add_test(tc, get_bool_str);
    tcase_add_test(tc, get_arrays);
    tcase_add_test(tc, map_get);
    tcase_add_test(tc, unknown_keys_ignored);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
