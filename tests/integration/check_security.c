/* check_security.c — tomolived with [security] curve = true (issue #27): keys per role
 * made with protocol/zcert.h, and for each socket a peer without keys, with an unknown
 * key and with the wrong role refused (the client sees the handshake fail through a socket
 * monitor; the daemon counts it in status.security and logs it); each role runs exactly
 * the commands it may and gets E_DENIED above them; the plain exception; a key added and
 * SIGHUP; `tomolive ctl --key`; a release endpoint outside the allowed hosts refused.
 * Tests wait for states (monitor events, status counters, log lines), never for time.
 */
#include "config.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "protocol/zcert.h"
#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

static char *keys; /* server, admin, operator, viewer, det (ingest), stranger; clients/ */
static char clients_dir[600];
static tl_fixture f;

static const char *key_path(const char *name, bool secret)
{
    static char buf[4][700];
    static int turn;
    char *p = buf[turn++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s.%s", keys, name, secret ? "key_secret" : "key");
    return p;
}

/* A pair NAME in keys/, its public half in clients/ when listed. */
static void make_key(const char *name, const char *role, bool listed)
{
    tl_zcert c;
    char err[600], base[700];
    ck_assert_int_eq(tl_zcert_new(&c, role, err, sizeof err), 0);
    snprintf(base, sizeof base, "%s/%s", keys, name);
    ck_assert_msg(tl_zcert_save(&c, base, false, err, sizeof err) == 0, "%s", err);
    if (listed) {
        snprintf(base, sizeof base, "%s/%s", clients_dir, name);
        ck_assert_int_eq(tl_zcert_save(&c, base, false, err, sizeof err), 0);
        strcat(base, ".key_secret");
        ck_assert_int_eq(unlink(base), 0);
    }
}

static void setup(void)
{
    keys = tl_tmpdir("security-keys");
    ck_assert_ptr_nonnull(keys);
    snprintf(clients_dir, sizeof clients_dir, "%s/clients", keys);
    ck_assert_int_eq(mkdir(clients_dir, 0700), 0);
    make_key("server", NULL, false);
    make_key("admin", "admin", true);
    make_key("operator", "operator", true);
    make_key("viewer", "viewer", true);
    make_key("det", "ingest", true);
    make_key("stranger", "admin", false);
}

static void teardown(void)
{
    tl_fx_cleanup(&f);
    tl_rm_rf(keys);
    free(keys);
}

/* The daemon, curve on, its fixture sockets with the admin and det keys; plain: the
 * security.plain value or NULL; more: one more --set or NULL. */
static void start(const char *tag, const char *plain, const char *more)
{
    char set_key[800], set_clients[800], set_plain[200];
    snprintf(set_key, sizeof set_key, "security.server_key=%s", key_path("server", true));
    snprintf(set_clients, sizeof set_clients, "security.clients=%s", clients_dir);
    snprintf(set_plain, sizeof set_plain, "security.plain=%s", plain ? plain : "");
    const char *extra[] = {"--set", "security.curve=true", "--set", set_key, "--set",
                           set_clients, "--set", set_plain, more ? "--set" : NULL, more, NULL};
    ck_assert_msg(tl_fx_start_keys(&f, tag, extra, NULL, key_path("server", false),
                                   key_path("admin", true), key_path("det", true)) == 0,
                  "daemon did not start; log:\n%s", tl_fx_log(&f));
}

/* A socket of type in the fixture's context with NAME's keys (NULL: plain), monitored
 * (*mon gets the monitor's PAIR), connected to ep. */
static void *client(int type, const char *ep, const char *name, void **mon)
{
    static int serial;
    void *s = zmq_socket(f.zctx, type);
    ck_assert_ptr_nonnull(s);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    char err[600], monep[64];
    if (name)
        ck_assert_msg(tl_zcert_client_from(s, key_path(name, true), key_path("server", false),
                                           err, sizeof err) == 0,
                      "%s", err);
    snprintf(monep, sizeof monep, "inproc://check-security-%d", serial++);
    ck_assert_int_eq(zmq_socket_monitor(s, monep, ZMQ_EVENT_ALL), 0);
    *mon = zmq_socket(f.zctx, ZMQ_PAIR);
    zmq_setsockopt(*mon, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_connect(*mon, monep), 0);
    ck_assert_int_eq(zmq_connect(s, ep), 0);
    return s;
}

/* The monitor stops first: a socket that closes still reports events (disconnected,
 * closed), and a monitor whose reader has gone blocks the I/O thread that reports them,
 * and with it every other socket of the context. */
static void close_client(void *s, void *mon)
{
    zmq_socket_monitor(s, NULL, 0);
    zmq_close(s);
    zmq_close(mon);
}

/* Waits for one of the events in mask on a monitor; returns it, 0 after 10 s. */
static int wait_event(void *mon, int mask)
{
    double t0 = tl_fx_seconds();
    while (tl_fx_seconds() - t0 < 10) {
        zmq_pollitem_t it = {mon, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) <= 0)
            continue;
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        zmq_msg_init(&addr);
        zmq_msg_recv(&ev, mon, 0);
        zmq_msg_recv(&addr, mon, 0);
        uint16_t event = 0;
        if (zmq_msg_size(&ev) >= 2)
            memcpy(&event, zmq_msg_data(&ev), 2);
        zmq_msg_close(&ev);
        zmq_msg_close(&addr);
        if (event & mask)
            return event;
    }
    return 0;
}

#define HANDSHAKE_FAILED                                                                   \
    (ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |                \
     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)

/* Waits until the status integer at path is at least want. */
static bool wait_at_least(const char *path, long long want)
{
    double t0 = tl_fx_seconds();
    while (tl_fx_seconds() - t0 < 15)
        if (tl_fx_status_int(&f, path) >= want)
            return true;
    return false;
}

static const char *status_str(const char *a, const char *b, const char *c)
{
    static char buf[64];
    json_t *st = tl_fx_ok(&f, "status", NULL);
    json_t *v = json_object_get(json_object_get(json_object_get(st, a), b), c);
    snprintf(buf, sizeof buf, "%s", json_is_string(v) ? json_string_value(v) : "?");
    json_decref(st);
    return buf;
}

/* A request on sock; the error name of the reply, or "ok". */
static const char *outcome(void *sock, const char *cmd, const char *args)
{
    static char buf[64];
    json_t *r = tl_fx_request_on(&f, sock, cmd, args);
    ck_assert_msg(r != NULL, "no reply to %s", cmd);
    if (json_is_true(json_object_get(r, "ok")))
        snprintf(buf, sizeof buf, "ok");
    else
        snprintf(buf, sizeof buf, "%s", json_string_value(json_object_get(r, "name")));
    json_decref(r);
    return buf;
}

START_TEST(plain_peers_refused)
{
    start("sec-plain", NULL, NULL);
    ck_assert_str_eq(status_str("security", "sockets", "ingest"), "curve");
    ck_assert_str_eq(status_str("security", "sockets", "control"), "curve");
    ck_assert_str_eq(status_str("security", "sockets", "slices"), "curve");
    void *mon;
    /* control: the handshake fails, the daemon counts it, nothing is answered */
    void *ctl = client(ZMQ_DEALER, f.control, NULL, &mon);
    zmq_send(ctl, "x", 1, ZMQ_DONTWAIT);
    ck_assert_int_ne(wait_event(mon, HANDSHAKE_FAILED), 0);
    ck_assert(wait_at_least("security.refused.control.handshake", 1));
    close_client(ctl, mon);
    /* ingest: nothing arrives */
    void *push = client(ZMQ_PUSH, f.ingest, NULL, &mon);
    zmq_send(push, "x", 1, ZMQ_DONTWAIT);
    ck_assert_int_ne(wait_event(mon, HANDSHAKE_FAILED), 0);
    ck_assert(wait_at_least("security.refused.ingest.handshake", 1));
    close_client(push, mon);
    /* slices */
    void *sub = client(ZMQ_SUB, f.slices, NULL, &mon);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "slice/", 6);
    ck_assert_int_ne(wait_event(mon, HANDSHAKE_FAILED), 0);
    ck_assert(wait_at_least("security.refused.slices.handshake", 1));
    close_client(sub, mon);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.messages"), 0);
    ck_assert(tl_fx_wait_log(&f, "event=client_refused socket=control reason=handshake", 5));
}
END_TEST

START_TEST(unknown_key_refused)
{
    start("sec-unknown", NULL, NULL);
    void *mon;
    void *ctl = client(ZMQ_DEALER, f.control, "stranger", &mon);
    zmq_send(ctl, "x", 1, ZMQ_DONTWAIT);
    ck_assert_int_eq(wait_event(mon, HANDSHAKE_FAILED), ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    ck_assert(wait_at_least("security.refused.control.unknown_key", 1));
    close_client(ctl, mon);
    /* logged with the first characters of its public key */
    tl_zcert stranger;
    char err[600], needle[64];
    ck_assert_int_eq(tl_zcert_load(key_path("stranger", false), &stranger, err, sizeof err), 0);
    snprintf(needle, sizeof needle, "key:%.8s", stranger.public_txt);
    ck_assert(tl_fx_wait_log(&f, "reason=unknown_key", 5));
    char *log = tl_fx_log(&f);
    ck_assert_msg(strstr(log, needle), "log lacks %s", needle);
    free(log);
    /* with the right key, the same socket type works */
    void *ok = client(ZMQ_PUSH, f.ingest, "det", &mon);
    ck_assert_int_eq(wait_event(mon, ZMQ_EVENT_HANDSHAKE_SUCCEEDED | HANDSHAKE_FAILED),
                     ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
    close_client(ok, mon);
}
END_TEST

/* Each role runs what it may; one step above is E_DENIED (counted); a command it may run
 * fails only for its own reasons (E_STATE without a scan). */
START_TEST(roles_on_control)
{
    start("sec-roles", NULL, NULL);
    void *mon;
    void *viewer = client(ZMQ_DEALER, f.control, "viewer", &mon);
    ck_assert_str_eq(outcome(viewer, "status", NULL), "ok");
    ck_assert_str_eq(outcome(viewer, "list_slices", NULL), "ok");
    ck_assert_str_eq(outcome(viewer, "commands", NULL), "ok");
    ck_assert_str_eq(outcome(viewer, "resend", NULL), "ok");
    ck_assert_str_eq(outcome(viewer, "set_slice", "{\"id\":\"a\",\"kind\":\"row\",\"z\":1}"),
                     "E_DENIED");
    ck_assert_str_eq(outcome(viewer, "remove_slice", "{\"id\":\"a\"}"), "E_DENIED");
    close_client(viewer, mon);

    void *op = client(ZMQ_DEALER, f.control, "operator", &mon);
    ck_assert_str_eq(outcome(op, "set_slice", "{\"id\":\"a\",\"kind\":\"row\",\"z\":1}"), "ok");
    ck_assert_str_eq(outcome(op, "set_param", "{\"name\":\"center\",\"value\":3}"), "E_STATE");
    ck_assert_str_eq(outcome(op, "remove_slice", "{\"id\":\"a\"}"), "ok");
    ck_assert_str_eq(outcome(op, "reset", NULL), "E_DENIED");
    ck_assert_str_eq(outcome(op, "tune", NULL), "E_DENIED");
    close_client(op, mon);

    /* the fixture's own socket holds the admin key */
    json_t *r = tl_fx_request(&f, "reset", NULL);
    ck_assert_str_eq(json_string_value(json_object_get(r, "name")), "E_STATE");
    json_decref(r);
    r = tl_fx_request(&f, "tune", NULL);
    ck_assert_str_eq(json_string_value(json_object_get(r, "name")), "E_STATE");
    json_decref(r);
    ck_assert_int_eq(tl_fx_status_int(&f, "security.refused.control.denied"), 4);
    ck_assert(tl_fx_wait_log(&f, "reason=denied client=viewer what=\"set_slice", 5));

    /* the ingest role cannot use control at all */
    void *det = client(ZMQ_DEALER, f.control, "det", &mon);
    zmq_send(det, "x", 1, ZMQ_DONTWAIT);
    ck_assert_int_eq(wait_event(mon, HANDSHAKE_FAILED), ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    ck_assert(wait_at_least("security.refused.control.wrong_role", 1));
    close_client(det, mon);
}
END_TEST

/* ingest: the ingest role only; slices: viewer and up, not ingest. */
START_TEST(roles_on_ingest_and_slices)
{
    start("sec-sockets", NULL, NULL);
    void *mon;
    void *push = client(ZMQ_PUSH, f.ingest, "viewer", &mon);
    zmq_send(push, "x", 1, ZMQ_DONTWAIT);
    ck_assert_int_eq(wait_event(mon, HANDSHAKE_FAILED), ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    ck_assert(wait_at_least("security.refused.ingest.wrong_role", 1));
    close_client(push, mon);
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.messages"), 0);
    /* the fixture's PUSH holds the det key: its message arrives (and is rejected as the
     * malformed header it is) */
    const void *part[] = {"x"};
    size_t len[] = {1};
    ck_assert_int_eq(tl_fx_send_raw(&f, part, len, 1), 0);
    ck_assert(tl_fx_wait_messages(&f, 1, 15));

    void *sub = client(ZMQ_SUB, f.slices, "viewer", &mon);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "slice/", 6);
    ck_assert_int_eq(wait_event(mon, ZMQ_EVENT_HANDSHAKE_SUCCEEDED | HANDSHAKE_FAILED),
                     ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
    ck_assert(wait_at_least("security.accepted.slices", 1));
    close_client(sub, mon);
    sub = client(ZMQ_SUB, f.slices, "det", &mon);
    ck_assert_int_eq(wait_event(mon, HANDSHAKE_FAILED), ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    ck_assert(wait_at_least("security.refused.slices.wrong_role", 1));
    close_client(sub, mon);
}
END_TEST

/* security.plain = ingest: a peer without keys sends frames; control stays closed to it. */
START_TEST(plain_exception)
{
    start("sec-exception", "ingest", NULL);
    ck_assert_str_eq(status_str("security", "sockets", "ingest"), "plain");
    ck_assert_str_eq(status_str("security", "sockets", "control"), "curve");
    void *mon;
    void *push = client(ZMQ_PUSH, f.ingest, NULL, &mon);
    ck_assert_int_eq(zmq_send(push, "x", 1, 0), 1);
    ck_assert(tl_fx_wait_messages(&f, 1, 15));
    close_client(push, mon);
    void *ctl = client(ZMQ_DEALER, f.control, NULL, &mon);
    zmq_send(ctl, "x", 1, ZMQ_DONTWAIT);
    ck_assert_int_ne(wait_event(mon, HANDSHAKE_FAILED), 0);
    close_client(ctl, mon);
    ck_assert(tl_fx_wait_log(&f, "event=socket_plain socket=ingest", 5));
}
END_TEST

/* A key added to security.clients counts after SIGHUP. */
START_TEST(sighup_reads_new_key)
{
    start("sec-sighup", NULL, NULL);
    make_key("late", "viewer", false);
    void *mon;
    void *ctl = client(ZMQ_DEALER, f.control, "late", &mon);
    zmq_send(ctl, "x", 1, ZMQ_DONTWAIT);
    ck_assert_int_eq(wait_event(mon, HANDSHAKE_FAILED), ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    close_client(ctl, mon);

    char src[800], dst[800];
    snprintf(src, sizeof src, "%s", key_path("late", false));
    snprintf(dst, sizeof dst, "%s/late.key", clients_dir);
    ck_assert_int_eq(link(src, dst), 0);
    ck_assert_int_eq(kill(f.pid, SIGHUP), 0);
    ck_assert(tl_fx_wait_log(&f, "event=clients_reloaded", 10));
    ck_assert(tl_fx_wait_log(&f, "keys=5 ingest=1 viewer=2 operator=1 admin=1", 5));
    ck_assert_int_eq(tl_fx_status_int(&f, "security.reloads.done"), 1);
    ctl = client(ZMQ_DEALER, f.control, "late", &mon);
    ck_assert_str_eq(outcome(ctl, "status", NULL), "ok");
    close_client(ctl, mon);

    /* a bad file: the reload fails loudly and the keys stay */
    FILE *bad = fopen(dst, "w");
    fputs("curve\n    public-key = \"short\"\n", bad);
    fclose(bad);
    ck_assert_int_eq(kill(f.pid, SIGHUP), 0);
    ck_assert(tl_fx_wait_log(&f, "event=clients_reload_failed", 10));
    ck_assert_int_eq(tl_fx_status_int(&f, "security.reloads.failed"), 1);
    ctl = client(ZMQ_DEALER, f.control, "viewer", &mon);
    ck_assert_str_eq(outcome(ctl, "status", NULL), "ok");
    close_client(ctl, mon);
}
END_TEST

/* tomolive ctl with keys: runs what the role may, E_DENIED (exit 1) above it. */
START_TEST(ctl_tool_with_keys)
{
    start("sec-ctl", NULL, NULL);
    char *out = NULL;
    int rc = tl_fx_run(&out, "tomolive ctl --endpoint %s --key %s --server-key %s status",
                       f.control, key_path("viewer", true), key_path("server", false));
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(strstr(out, "\"security\""));
    free(out);
    rc = tl_fx_run(&out,
                   "TOMOLIVE_KEY=%s TOMOLIVE_SERVER_KEY=%s tomolive ctl --endpoint %s reset "
                   "2>&1",
                   key_path("viewer", true), key_path("server", false), f.control);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(out, "E_DENIED (39)"), "%s", out);
    free(out);
    rc = tl_fx_run(&out, "tomolive ctl --endpoint %s --key %s status 2>&1", f.control,
                   key_path("viewer", true));
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(out, "the server key is missing"), "%s", out);
    free(out);
}
END_TEST

/* A scan with a release endpoint (no frames follow). */
static void send_scan(uint64_t series, const char *release)
{
    tl_proto_scan s = {.series = series,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = 4,
                       .cols = 16,
                       .dtype = TL_PROTO_F32,
                       .window = 8,
                       .already_linear = true,
                       .release = {release, strlen(release)}};
    ck_assert_int_eq(tl_fx_send_scan(&f, &s), 0);
}

/* release endpoints: loopback and listed hosts only, also with curve off (the default). */
START_TEST(release_endpoint_allow_list)
{
    ck_assert_int_eq(tl_fx_start(&f, "sec-release", NULL), 0);
    send_scan(1, "tcp://192.0.2.1:7000"); /* TEST-NET-1: nobody's producer */
    ck_assert(wait_at_least("security.refused.release", 1));
    /* the ingest thread counts it; the worker then refuses the scan */
    ck_assert(tl_fx_wait_log(&f, "event=scan_refused series=1", 15));
    json_t *st = tl_fx_ok(&f, "status", NULL);
    const char *e = json_string_value(json_object_get(st, "last_scan_error"));
    ck_assert_msg(e && strstr(e, "not the scan's sender"), "%s", e ? e : "(nil)");
    ck_assert(json_is_null(json_object_get(st, "scan")));
    json_decref(st);
    ck_assert(tl_fx_wait_log(&f, "event=release_refused series=1", 5));
    send_scan(2, "tcp://[::1]:7000");
    ck_assert(tl_fx_wait_status(&f, "scan.series", 2, 15));
    send_scan(3, "pgm://192.0.2.1;239.192.1.1:5555");
    ck_assert(wait_at_least("security.refused.release", 2));
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);

    const char *extra[] = {"--set", "security.release_hosts=gpu-1,192.0.2.1", NULL};
    ck_assert_int_eq(tl_fx_start(&f, "sec-release-hosts", extra), 0);
    send_scan(4, "tcp://192.0.2.1:7000");
    ck_assert(tl_fx_wait_status(&f, "scan.series", 4, 15));
    ck_assert_int_eq(tl_fx_status_int(&f, "security.refused.release"), 0);
}
END_TEST

/* With curve on, the release socket is a CURVE client of the sender's key (from ZAP). */
START_TEST(release_with_curve)
{
    start("sec-release-curve", NULL, NULL);
    send_scan(1, "tcp://127.0.0.1:7000");
    ck_assert(tl_fx_wait_status(&f, "scan.series", 1, 15));
    char *log = tl_fx_log(&f);
    ck_assert_msg(!strstr(log, "release_unavailable"), "%s", log);
    free(log);
}
END_TEST

/* Start-up fails loudly, naming the problem: a server key that is not there, a client's
 * certificate without a role. (tomolived run directly: it exits before binding.) */
START_TEST(bad_keys_stop_startup)
{
    char path[800], *out = NULL;
    snprintf(path, sizeof path, "%s/norole.key", clients_dir);
    FILE *fh = fopen(path, "w");
    tl_zcert c;
    char err[600];
    ck_assert_int_eq(tl_zcert_new(&c, NULL, err, sizeof err), 0);
    fprintf(fh, "curve\n    public-key = \"%s\"\n", c.public_txt);
    fclose(fh);
    const char *common = "tomolived --backend cpu --set http.listen= --set security.curve=true";
    int rc = tl_fx_run(&out, "%s --set ingest.endpoint=ipc://%s/i --set slices.endpoint=ipc://%s/s "
                       "--set control.endpoint=ipc://%s/c --set security.clients=%s "
                       "--set security.server_key=/nonexistent/s.key_secret 2>&1",
                       common, keys, keys, keys, clients_dir);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(out, "security.server_key: /nonexistent/s.key_secret: No such file"),
                  "%s", out);
    free(out);
    rc = tl_fx_run(&out, "%s --set ingest.endpoint=ipc://%s/i --set slices.endpoint=ipc://%s/s "
                   "--set control.endpoint=ipc://%s/c --set security.clients=%s "
                   "--set security.server_key=%s 2>&1",
                   common, keys, keys, keys, clients_dir, key_path("server", true));
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(out, "norole.key: no role: give it role ="), "%s", out);
    free(out);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("security");
    TCase *tc = tcase_create("curve");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, plain_peers_refused);
    tcase_add_test(tc, unknown_key_refused);
    tcase_add_test(tc, roles_on_control);
    tcase_add_test(tc, roles_on_ingest_and_slices);
    tcase_add_test(tc, plain_exception);
    tcase_add_test(tc, sighup_reads_new_key);
    tcase_add_test(tc, ctl_tool_with_keys);
    tcase_add_test(tc, release_endpoint_allow_list);
    tcase_add_test(tc, release_with_curve);
    tcase_add_test(tc, bad_keys_stop_startup);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
