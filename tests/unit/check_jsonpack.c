/* check_jsonpack.c — protocol/jsonpack: JSON -> msgpack -> JSON round trips (values, key
 * order, integer signedness, embedded NULs), what msgpack values JSON cannot hold become,
 * the key=value rules of `tomolive ctl`, and that a request built from them passes the
 * protocol's own request decoder.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/jsonpack.h"
#include "protocol/protocol.h"
#include "tests/testutil.h"

/* Packs v, unpacks it, converts it back. *type gets the msgpack type of the top object. */
static json_t *round_trip(const json_t *v, msgpack_object_type *type)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ck_assert_int_eq(tl_json_pack(&pk, v), 0);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    ck_assert_int_eq(msgpack_unpack_next(&u, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    ck_assert_uint_eq(off, sb.size); /* exactly one object */
    if (type)
        *type = u.data.type;
    json_t *back = tl_json_from_msgpack(&u.data);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
    ck_assert_ptr_nonnull(back);
    return back;
}

START_TEST(test_round_trips)
{
    const char *texts[] = {
        "{\"a\": 1, \"b\": [1, 2, 3], \"c\": {\"d\": null, \"e\": true, \"f\": false},"
        " \"g\": \"text \\u00fc \\u2211\", \"h\": -5, \"i\": 1.25, \"j\": [], \"k\": {}}",
        "[]",
        "{}",
        "\"str\"",
        "0",
        "9223372036854775807",
        "-9223372036854775808",
        "1e-300",
        "-0.5",
        "[[[[[1]]]]]",
        "\"a\\u0000b\"",
        "{\"z\": 1, \"a\": 2, \"m\": 3}",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        json_error_t je;
        json_t *v = json_loads(texts[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        ck_assert_msg(v != NULL, "%s: %s", texts[i], je.text);
        json_t *back = round_trip(v, NULL);
        char *s = json_dumps(back, JSON_ENCODE_ANY | JSON_COMPACT);
        ck_assert_msg(json_equal(v, back), "%s came back as %s", texts[i], s);
        /* same kinds of number, not just equal values */
        if (json_is_integer(v) || json_is_real(v))
            ck_assert_int_eq(json_typeof(back), json_typeof(v));
        free(s);
        json_decref(back);
        json_decref(v);
    }
    /* key order survives (the daemon may print results in the order it built them) */
    json_t *v = json_loads("{\"z\": 1, \"a\": 2, \"m\": 3}", 0, NULL);
    json_t *back = round_trip(v, NULL);
    char *s1 = json_dumps(v, JSON_COMPACT), *s2 = json_dumps(back, JSON_COMPACT);
    ck_assert_str_eq(s1, s2);
    free(s1);
    free(s2);
    json_decref(back);
    json_decref(v);
    /* integers by sign: unsigned encodings for >= 0 (what u64/u32 keys take), signed below */
    msgpack_object_type t;
    json_t *n = json_integer(5);
    json_decref(round_trip(n, &t));
    ck_assert_int_eq(t, MSGPACK_OBJECT_POSITIVE_INTEGER);
    json_integer_set(n, -5);
    json_decref(round_trip(n, &t));
    ck_assert_int_eq(t, MSGPACK_OBJECT_NEGATIVE_INTEGER);
    json_decref(n);
    n = json_real(2.0);
    json_decref(round_trip(n, &t));
    ck_assert_int_eq(t, MSGPACK_OBJECT_FLOAT64);
    json_decref(n);
}
END_TEST

START_TEST(test_base64)
{
    /* RFC 4648 section 10 */
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *b = tl_base64(in[i], strlen(in[i]));
        ck_assert_str_eq(b, out[i]);
        free(b);
    }
}
END_TEST

/* Converts one msgpack object packed by fn. */
static json_t *from_packed(void (*fn)(msgpack_packer *))
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    fn(&pk);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    ck_assert_int_eq(msgpack_unpack_next(&u, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    json_t *j = tl_json_from_msgpack(&u.data);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
    ck_assert_ptr_nonnull(j);
    return j;
}

static const unsigned char bytes[4] = {0, 1, 2, 255};

static void pack_odd(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 8);
    msgpack_pack_uint64(pk, UINT64_MAX);
    msgpack_pack_double(pk, NAN);
    msgpack_pack_float(pk, INFINITY);
    msgpack_pack_float(pk, 0.5f);
    msgpack_pack_bin_with_body(pk, bytes, sizeof bytes);
    msgpack_pack_ext_with_body(pk, bytes, sizeof bytes, 5);
    msgpack_pack_str_with_body(pk,
                               "\xff\xfe"
                               "ab",
                               4); /* not UTF-8 */
    msgpack_pack_map(pk, 3);
    msgpack_pack_uint64(pk, 7);
    msgpack_pack_true(pk);
    msgpack_pack_array(pk, 2);
    msgpack_pack_uint64(pk, 1);
    msgpack_pack_uint64(pk, 2);
    msgpack_pack_nil(pk);
    msgpack_pack_str_with_body(pk, "k\0ey", 4);
    msgpack_pack_nil(pk);
}

START_TEST(test_msgpack_beyond_json)
{
    json_t *a = from_packed(pack_odd);
    ck_assert(json_is_array(a));
    ck_assert_uint_eq(json_array_size(a), 8);
    json_t *big = json_array_get(a, 0);
    ck_assert(json_is_real(big));
    ck_assert_double_eq(json_real_value(big), (double)UINT64_MAX);
    ck_assert(json_is_null(json_array_get(a, 1)));
    ck_assert(json_is_null(json_array_get(a, 2)));
    ck_assert_double_eq(json_real_value(json_array_get(a, 3)), 0.5);
    char *b64 = tl_base64(bytes, sizeof bytes);
    json_t *bin = json_array_get(a, 4);
    ck_assert_str_eq(json_string_value(json_object_get(bin, "$bin")), b64);
    json_t *ext = json_array_get(a, 5);
    ck_assert_int_eq(json_integer_value(json_object_get(ext, "$ext")), 5);
    ck_assert_str_eq(json_string_value(json_object_get(ext, "$data")), b64);
    free(b64);
    ck_assert_str_eq(json_string_value(json_array_get(a, 6)), "??ab");
    json_t *m = json_array_get(a, 7);
    ck_assert(json_is_true(json_object_get(m, "7")));
    ck_assert(json_is_null(json_object_get(m, "[1,2]")));
    ck_assert(json_is_null(json_object_get(m, "k?ey")));
    /* everything converted prints as valid JSON */
    char *s = json_dumps(a, JSON_COMPACT);
    json_t *again = json_loads(s, 0, NULL);
    ck_assert_msg(again && json_equal(again, a), "%s", s);
    json_decref(again);
    free(s);
    json_decref(a);
}
END_TEST

static json_t *args(int argc, const char *const *argv, char *err)
{
    return tl_json_args(argc, (char *const *)argv, err, 256);
}

START_TEST(test_key_value_rules)
{
    const char *argv[] =
        {"id=row0",      "z=128",          "size=[256,256]", "update={\"every\":10}",
         "q=\"quoted\"", "t=true",         "f=false",        "n=null",
         "e=",           "r=1e3",          "s=[1,",          "a=b=c",
         "w=0128",       "sp=hello world", "neg=-2",         "q2=\"7\""};
    char err[256] = "";
    json_t *o = args(16, argv, err);
    ck_assert_msg(o != NULL, "%s", err);
    ck_assert_uint_eq(json_object_size(o), 16);
    ck_assert_str_eq(json_string_value(json_object_get(o, "id")), "row0");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "z")), 128);
    json_t *size = json_object_get(o, "size");
    ck_assert(json_is_array(size) && json_array_size(size) == 2);
    ck_assert_int_eq(json_integer_value(json_array_get(size, 1)), 256);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(o, "update"), "every")),
                     10);
    ck_assert_str_eq(json_string_value(json_object_get(o, "q")), "quoted");
    ck_assert(json_is_true(json_object_get(o, "t")));
    ck_assert(json_is_false(json_object_get(o, "f")));
    ck_assert(json_is_null(json_object_get(o, "n")));
    ck_assert_str_eq(json_string_value(json_object_get(o, "e")), "");
    ck_assert(json_is_real(json_object_get(o, "r")));
    ck_assert_double_eq(json_real_value(json_object_get(o, "r")), 1000);
    ck_assert_str_eq(json_string_value(json_object_get(o, "s")), "[1,"); /* invalid JSON */
    ck_assert_str_eq(json_string_value(json_object_get(o, "a")), "b=c"); /* first '=' splits */
    ck_assert_str_eq(json_string_value(json_object_get(o, "w")), "0128");
    ck_assert_str_eq(json_string_value(json_object_get(o, "sp")), "hello world");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "neg")), -2);
    ck_assert_str_eq(json_string_value(json_object_get(o, "q2")), "7");
    /* the order of the command line is the order in the map */
    const char *key;
    json_t *val;
    int i = 0;
    json_object_foreach(o, key, val)
    {
        ck_assert_int_eq(strncmp(argv[i], key, strlen(key)), 0);
        ck_assert_int_eq(argv[i][strlen(key)], '=');
        i++;
    }
    json_decref(o);

    /* one JSON object */
    const char *one[] = {" {\"a\": [1, {\"b\": null}], \"c\": \"d\"}"};
    o = args(1, one, err);
    ck_assert_msg(o && json_is_object(o) && json_object_size(o) == 2, "%s", err);
    json_decref(o);
    o = args(0, NULL, err);
    ck_assert(o && json_is_object(o) && json_object_size(o) == 0);
    json_decref(o);

    const struct {
        int argc;
        const char *argv[2];
        const char *phrase;
    } bad[] = {
        {1, {"novalue"}, "not key=value"},  {1, {"=v"}, "not key=value"},
        {2, {"a=1", "a=2"}, "given twice"}, {1, {"{\"a\": 1, \"a\": 2}"}, "not a JSON object"},
        {1, {"{bad"}, "not a JSON object"}, {1, {"[1, 2]"}, "not key=value"},
        {1, {"k=\xff"}, "UTF-8"},           {1, {"\xff=1"}, "UTF-8"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = '\0';
        o = args(bad[k].argc, bad[k].argv, err);
        ck_assert_msg(o == NULL, "case %zu accepted", k);
        ck_assert_msg(strstr(err, bad[k].phrase) != NULL, "case %zu: '%s'", k, err);
    }
}
END_TEST

/* A request built from key=value arguments is one the daemon's decoder accepts, with the
 * typed getters reading what was given. */
START_TEST(test_request_decodes)
{
    const char *argv[] = {"id=row0", "z=128", "size=[256,128]", "center=1023.5", "on=true"};
    char err[256];
    json_t *o = args(5, argv, err);
    ck_assert_ptr_nonnull(o);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ck_assert_int_eq(tl_proto_begin_req(&pk, 42, "set_slice", true), 0);
    ck_assert_int_eq(tl_json_pack(&pk, o), 0);
    json_decref(o);
    tl_proto_decoder *d = tl_proto_decoder_new();
    tl_proto_msg m;
    tl_proto_error e;
    ck_assert_msg(tl_proto_decode(d, sb.data, sb.size, TL_PROTO_CONTROL, &m, &e) == TL_PROTO_OK,
                  "%s: %s", tl_proto_err_name(e.code), e.message);
    ck_assert_uint_eq(m.req.id, 42);
    ck_assert(tl_proto_str_eq(m.req.cmd, "set_slice"));
    tl_proto_str id;
    uint32_t z, dims[2];
    double c;
    bool on;
    ck_assert_int_eq(tl_proto_get_str(m.req.args, "id", true, &id, &e), TL_PROTO_OK);
    ck_assert(tl_proto_str_eq(id, "row0"));
    ck_assert_int_eq(tl_proto_get_u32(m.req.args, "z", true, &z, &e), TL_PROTO_OK);
    ck_assert_uint_eq(z, 128);
    ck_assert_int_eq(tl_proto_get_dims(m.req.args, "size", true, dims, 2, 65536, &e), TL_PROTO_OK);
    ck_assert(dims[0] == 256 && dims[1] == 128);
    ck_assert_int_eq(tl_proto_get_double(m.req.args, "center", true, &c, &e), TL_PROTO_OK);
    ck_assert_double_eq(c, 1023.5);
    ck_assert_int_eq(tl_proto_get_bool(m.req.args, "on", true, &on, &e), TL_PROTO_OK);
    ck_assert(on);
    tl_proto_decoder_free(d);
    msgpack_sbuffer_destroy(&sb);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("jsonpack");
    TCase *tc = tcase_create("jsonpack");
    tcase_add_test(tc, test_round_trips);
    tcase_add_test(tc, test_base64);
    tcase_add_test(tc, test_msgpack_beyond_json);
    tcase_add_test(tc, test_key_value_rules);
    tcase_add_test(tc, test_request_decodes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
