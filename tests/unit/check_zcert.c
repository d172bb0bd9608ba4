/* check_zcert.c — CURVE key files (protocol/zcert.h): a pair written and read back, czmq's
 * own text (as czmq 4 writes it), malformed files refused with their line named, and a
 * CURVE handshake through real sockets with the keys read from files.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "protocol/zcert.h"
#include "tests/testutil.h"

static char *dir;

static void setup(void)
{
    dir = tl_tmpdir("zcert");
    ck_assert_ptr_nonnull(dir);
}

static void teardown(void)
{
    tl_rm_rf(dir);
    free(dir);
}

static const char *write_text(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* A real pair, made with libzmq, for the texts below. */
static char pub_txt[41], sec_txt[41];

static void make_pair(void)
{
    ck_assert_int_eq(zmq_curve_keypair(pub_txt, sec_txt), 0);
}

START_TEST(round_trip)
{
    tl_zcert c, pub, sec;
    char err[512], base[512], path[600];
    ck_assert_int_eq(tl_zcert_new(&c, "operator", err, sizeof err), 0);
    snprintf(base, sizeof base, "%s/alice", dir);
    ck_assert_int_eq(tl_zcert_save(&c, base, false, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s.key", base);
    ck_assert_msg(tl_zcert_load(path, &pub, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(pub.public_txt, c.public_txt);
    ck_assert_str_eq(pub.role, "operator");
    ck_assert(!pub.has_secret);
    snprintf(path, sizeof path, "%s.key_secret", base);
    ck_assert_msg(tl_zcert_load(path, &sec, err, sizeof err) == 0, "%s", err);
    ck_assert(sec.has_secret);
    ck_assert_str_eq(sec.secret_txt, c.secret_txt);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    /* never overwrites a key unless asked */
    ck_assert_int_eq(tl_zcert_save(&c, base, false, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "will not overwrite"));
    ck_assert_int_eq(tl_zcert_save(&c, base, true, err, sizeof err), 0);
}
END_TEST

/* The text czmq's zcert_save writes (its header, tab-free four-space indentation). */
START_TEST(reads_czmq_text)
{
    make_pair();
    char text[1024], err[512];
    snprintf(text, sizeof text,
             "#   ****  Generated on 2026-01-01 00:00:00 by CZMQ  ****\n"
             "#   ZeroMQ CURVE **Secret** Certificate\n"
             "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n"
             "metadata\n    name = \"detector-1\"\n    role = \"ingest\"\n"
             "curve\n    public-key = \"%s\"\n    secret-key = \"%s\"\n",
             pub_txt, sec_txt);
    tl_zcert c;
    ck_assert_msg(tl_zcert_load(write_text("czmq.key_secret", text), &c, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_str_eq(c.role, "ingest");
    ck_assert_str_eq(c.public_txt, pub_txt);
    ck_assert(c.has_secret);
    /* CRLF line ends, bare values and a comment after a value are fine */
    snprintf(text, sizeof text, "curve\r\n\tpublic-key = %s   # the key\r\n", pub_txt);
    ck_assert_msg(tl_zcert_load(write_text("crlf.key", text), &c, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_str_eq(c.public_txt, pub_txt);
    ck_assert_str_eq(c.role, "");
}
END_TEST

/* Each malformed file is refused with a message that names what is wrong (and the line). */
START_TEST(malformed)
{
    make_pair();
    char other_pub[41], other_sec[41];
    ck_assert_int_eq(zmq_curve_keypair(other_pub, other_sec), 0);
    struct {
        const char *text, *expect;
    } bad[] = {
        {"", "no public-key"},
        {"# only a comment\n", "no public-key"},
        {"metadata\n    role = \"viewer\"\n", "no public-key"},
        {"curve\n    public-key = \"short\"\n", ":2: public-key is 5 characters"},
        {"curve\n    public-key = \"%s\n", ":2: the value of \"public-key\" is not closed"},
        {"curve\n    public-key = \"%s\" trailing\n", ":2: the value"},
        {"    public-key = \"%s\"\n", ":1: \"public-key\" is indented but no section"},
        {"curve\n    public-key \"%s\"\n", ":2: expected \"public-key = value\""},
        {"curve extra\n", ":1: a section name"},
        {"curve\n    public-key = \"%s\"\n    public-key = \"%s\"\n", ":3: \"public-key\" given twice"},
        {"curve\n    = \"x\"\n", ":2: expected a name"},
        {"curve\n    public-key = \"~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\"\n", "not Z85"},
        {"metadata\n    role = \"\"\ncurve\n    public-key = \"%s\"\n", ":2: role is empty"},
    };
    char text[1024], err[512];
    tl_zcert c;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(text, sizeof text, bad[i].text, pub_txt, pub_txt);
        ck_assert_int_eq(tl_zcert_load(write_text("bad.key", text), &c, err, sizeof err), -1);
        ck_assert_msg(strstr(err, bad[i].expect), "case %zu: \"%s\" lacks \"%s\"", i, err,
                      bad[i].expect);
        ck_assert_str_eq(c.public_txt, ""); /* nothing half-read is left */
    }
    /* a secret key of another pair */
    snprintf(text, sizeof text, "curve\n    public-key = \"%s\"\n    secret-key = \"%s\"\n",
             pub_txt, other_sec);
    ck_assert_int_eq(tl_zcert_load(write_text("mixed.key_secret", text), &c, err, sizeof err),
                     -1);
    ck_assert_ptr_nonnull(strstr(err, "does not belong"));
    /* not there; binary */
    char path[600];
    snprintf(path, sizeof path, "%s/none.key", dir);
    ck_assert_int_eq(tl_zcert_load(path, &c, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "No such file"));
    FILE *f = fopen(path, "w");
    fwrite("curve\n\0\0", 1, 8, f);
    fclose(f);
    ck_assert_int_eq(tl_zcert_load(path, &c, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "binary"));
}
END_TEST

/* Keys from files make a CURVE handshake; a client without them, or with the wrong server
 * key, gets nothing through. */
START_TEST(handshake)
{
    tl_zcert server, client, server_pub, client_sec;
    char err[512], base[512], path[600];
    ck_assert_int_eq(tl_zcert_new(&server, NULL, err, sizeof err), 0);
    ck_assert_int_eq(tl_zcert_new(&client, NULL, err, sizeof err), 0);
    snprintf(base, sizeof base, "%s/server", dir);
    ck_assert_int_eq(tl_zcert_save(&server, base, false, err, sizeof err), 0);
    snprintf(base, sizeof base, "%s/client", dir);
    ck_assert_int_eq(tl_zcert_save(&client, base, false, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/server.key", dir);
    ck_assert_int_eq(tl_zcert_load(path, &server_pub, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/client.key_secret", dir);
    ck_assert_int_eq(tl_zcert_load(path, &client_sec, err, sizeof err), 0);

    void *ctx = zmq_ctx_new();
    void *rx = zmq_socket(ctx, ZMQ_PULL), *tx = zmq_socket(ctx, ZMQ_PUSH);
    int timeo = 5000, zero = 0;
    zmq_setsockopt(rx, ZMQ_RCVTIMEO, &timeo, sizeof timeo);
    zmq_setsockopt(rx, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(tx, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(tl_zcert_server(rx, &server, err, sizeof err), 0);
    ck_assert_int_eq(zmq_bind(rx, "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t eplen = sizeof ep;
    zmq_getsockopt(rx, ZMQ_LAST_ENDPOINT, ep, &eplen);
    /* a public key alone cannot be a client */
    ck_assert_int_eq(tl_zcert_client(tx, &server_pub, &server_pub, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "no secret-key"));
    ck_assert_int_eq(tl_zcert_client(tx, &client_sec, &server_pub, err, sizeof err), 0);
    ck_assert_int_eq(zmq_connect(tx, ep), 0);
    ck_assert_int_eq(zmq_send(tx, "hi", 2, 0), 2);
    char buf[8];
    ck_assert_int_eq(zmq_recv(rx, buf, sizeof buf, 0), 2);
    zmq_close(tx);
    zmq_close(rx);
    zmq_ctx_term(ctx);
}
END_TEST

/* One half of a client's keys is an error, none is plain. */
START_TEST(client_from_env)
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    char err[512];
    unsetenv("TOMOLIVE_KEY");
    unsetenv("TOMOLIVE_SERVER_KEY");
    ck_assert_int_eq(tl_zcert_client_from(s, NULL, NULL, err, sizeof err), 0);
    ck_assert_int_eq(tl_zcert_client_from(s, "/x.key_secret", NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "the server key is missing"));
    setenv("TOMOLIVE_SERVER_KEY", "/nonexistent/server.key", 1);
    ck_assert_int_eq(tl_zcert_client_from(s, "/nonexistent/x.key_secret", NULL, err, sizeof err),
                     -1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.key_secret"));
    unsetenv("TOMOLIVE_SERVER_KEY");
    zmq_close(s);
    zmq_ctx_term(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("zcert");
    TCase *tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, reads_czmq_text);
    tcase_add_test(tc, malformed);
    tcase_add_test(tc, handshake);
    tcase_add_test(tc, client_from_env);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
