/* auth.c — see auth.h. The client table is read whole into a new array and swapped in only
 * when every file in the directory was good, so a bad edit followed by SIGHUP leaves the
 * daemon with the keys it had. */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "daemon/base/auth.h"
#include "daemon/base/log.h"

static const char *const role_names[] = {"none", "ingest", "viewer", "operator", "admin"};
static const char *const socket_names[TL_AUTH_NSOCKETS] = {"ingest", "control", "slices"};
static const char *const reason_names[TL_AUTH_NREASONS] = {"unknown_key", "wrong_role",
                                                           "handshake", "denied"};
/* The least role each socket lets in. */
static const tl_role socket_role[TL_AUTH_NSOCKETS] = {TL_ROLE_INGEST, TL_ROLE_VIEWER,
                                                      TL_ROLE_VIEWER};

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"

const char *tl_role_name(tl_role r)
{
    return (unsigned)r <= TL_ROLE_ADMIN ? role_names[r] : "none";
}

tl_role tl_role_parse(const char *name)
{
    for (int r = TL_ROLE_INGEST; r <= TL_ROLE_ADMIN; r++)
        if (strcmp(name, role_names[r]) == 0)
            return (tl_role)r;
    return TL_ROLE_NONE;
}

bool tl_role_allows(tl_role have, tl_role need)
{
    if (need == TL_ROLE_INGEST)
        return have == TL_ROLE_INGEST;
    return have >= need && have != TL_ROLE_INGEST;
}

/* ---- the client table -------------------------------------------------------------------- */

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

static int by_name(const void *x, const void *y)
{
    return strcmp(((const tl_auth_client *)x)->name, ((const tl_auth_client *)y)->name);
}

/* Reads every NAME.key of dir into a new array; 0, or -1 with err (nothing allocated). */
static int read_clients(const char *dir, tl_auth_client **out, int *nout, char *err,
                        size_t errlen)
{
    DIR *dh = opendir(dir);
    if (!dh) {
        snprintf(err, errlen, "security.clients %s: %s", dir, strerror(errno));
        return -1;
    }
    tl_auth_client *v = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(dh)) != NULL) {
        const char *f = e->d_name;
        if (f[0] == '.')
            continue;
        if (has_suffix(f, ".key_secret")) {
            snprintf(err, errlen, "security.clients %s holds a secret key, %s: keep secret keys "
                     "with their owners, give the daemon NAME.key only", dir, f);
            rc = -1;
            break;
        }
        if (!has_suffix(f, ".key")) {
            tl_log(TL_LOG_WARN, "clients_file_ignored", "dir=%s file=%s reason=%s", tl_logq(dir),
                   tl_logq(f), tl_logq("not NAME.key"));
            continue;
        }
        size_t namelen = strlen(f) - 4;
        bool name_ok = namelen < sizeof v->name;
        for (size_t i = 0; name_ok && i < namelen; i++)
            name_ok = (f[i] >= 'a' && f[i] <= 'z') || (f[i] >= 'A' && f[i] <= 'Z') ||
                      (f[i] >= '0' && f[i] <= '9') || strchr("_.-", f[i]);
        if (!name_ok) {
            snprintf(err, errlen, "security.clients: \"%s\": a client's name is 1..63 of "
                     "A-Z a-z 0-9 _ . -", f);
            rc = -1;
            break;
        }
        char path[4096], why[600];
        snprintf(path, sizeof path, "%s/%s", dir, f);
        tl_zcert cert;
        if (tl_zcert_load(path, &cert, why, sizeof why) != 0) {
            snprintf(err, errlen, "security.clients: %s", why);
            rc = -1;
            break;
        }
        tl_role role = tl_role_parse(cert.role);
        if (role == TL_ROLE_NONE) {
            snprintf(err, errlen, "security.clients: %s: %s%s%s: give it role = \"ingest\", "
                     "\"viewer\", \"operator\" or \"admin\" in its metadata section", path,
                     cert.role[0] ? "unknown role \"" : "no role", cert.role,
                     cert.role[0] ? "\"" : "");
            rc = -1;
            break;
        }
        for (int i = 0; i < n; i++)
            if (strcmp(v[i].public_txt, cert.public_txt) == 0) {
                snprintf(err, errlen, "security.clients: %s and %.*s.key hold the same public "
                         "key", path, (int)sizeof v->name, v[i].name);
                rc = -1;
            }
        if (rc != 0)
            break;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            tl_auth_client *bigger = realloc(v, (size_t)cap * sizeof *v);
            if (!bigger) {
                snprintf(err, errlen, "out of memory for security.clients");
                rc = -1;
                break;
            }
            v = bigger;
        }
        memset(&v[n], 0, sizeof v[n]);
        memcpy(v[n].name, f, namelen);
        memcpy(v[n].public_txt, cert.public_txt, sizeof v[n].public_txt);
        v[n].role = role;
        n++;
    }
    closedir(dh);
    if (rc != 0) {
        free(v);
        return -1;
    }
    qsort(v, (size_t)n, sizeof *v, by_name);
    *out = v;
    *nout = n;
    return 0;
}

static void log_clients(const tl_auth *a, const char *event)
{
    int per[TL_ROLE_ADMIN + 1] = {0};
    for (int i = 0; i < a->nclients; i++)
        per[a->clients[i].role]++;
    tl_log(a->nclients ? TL_LOG_INFO : TL_LOG_WARN, event,
           "dir=%s keys=%d ingest=%d viewer=%d operator=%d admin=%d%s", tl_logq(a->clients_dir),
           a->nclients, per[TL_ROLE_INGEST], per[TL_ROLE_VIEWER], per[TL_ROLE_OPERATOR],
           per[TL_ROLE_ADMIN], a->nclients ? "" : " note=no_client_can_connect");
}

static const tl_auth_client *find_key(const tl_auth *a, const char *z85)
{
    for (int i = 0; i < a->nclients; i++)
        if (strcmp(a->clients[i].public_txt, z85) == 0)
            return &a->clients[i];
    return NULL;
}

static const tl_auth_client *find_name(const tl_auth *a, const char *name)
{
    for (int i = 0; i < a->nclients; i++)
        if (strcmp(a->clients[i].name, name) == 0)
            return &a->clients[i];
    return NULL;
}

int tl_auth_open(tl_auth *a, const tl_settings *c, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->curve = c->curve;
    if (!a->curve)
        return 0;
    for (int s = 0; s < TL_AUTH_NSOCKETS; s++)
        a->plain[s] = tl_settings_plain(c, socket_names[s]);
    snprintf(a->clients_dir, sizeof a->clients_dir, "%s", c->clients_dir);
    char why[600];
    if (tl_zcert_load(c->server_key, &a->server, why, sizeof why) != 0) {
        snprintf(err, errlen, "security.server_key: %s", why);
        return -1;
    }
    if (!a->server.has_secret) {
        snprintf(err, errlen, "security.server_key %s has no secret-key: give the daemon its "
                 "NAME.key_secret", c->server_key);
        return -1;
    }
    if (read_clients(a->clients_dir, &a->clients, &a->nclients, err, errlen) != 0)
        return -1;
    log_clients(a, "clients_loaded");
    for (int s = 0; s < TL_AUTH_NSOCKETS; s++)
        if (a->plain[s])
            tl_log(TL_LOG_WARN, "socket_plain", "socket=%s note=%s", socket_names[s],
                   tl_logq(s == TL_AUTH_CONTROL ? "security.plain: any peer that reaches it has "
                                                  "every right (admin)"
                                                : "security.plain: any peer that reaches it is "
                                                  "let in"));
    return 0;
}

void tl_auth_reload(tl_auth *a)
{
    if (!a->curve)
        return;
    tl_auth_client *v;
    int n;
    char err[768];
    tl_stats_count(&a->reloads);
    if (read_clients(a->clients_dir, &v, &n, err, sizeof err) != 0) {
        tl_stats_count(&a->reload_failures);
        tl_log(TL_LOG_ERROR, "clients_reload_failed", "error=%s kept=%d", tl_logq(err),
               a->nclients);
        return;
    }
    free(a->clients);
    a->clients = v;
    a->nclients = n;
    log_clients(a, "clients_reloaded");
}

/* ---- refusals ---------------------------------------------------------------------------- */

void tl_auth_refuse(tl_auth *a, tl_auth_socket_id which, tl_auth_reason why, const char *name,
                    const char *what)
{
    tl_stats_count(&a->refused[which][why]);
    static tl_ratelimit rl[TL_AUTH_NREASONS] = {TL_RATELIMIT_INIT, TL_RATELIMIT_INIT,
                                                TL_RATELIMIT_INIT, TL_RATELIMIT_INIT};
    uint64_t suppressed;
    if (tl_ratelimit_allow(&rl[why], 5.0, 5, &suppressed))
        tl_log(TL_LOG_WARN, "client_refused", "socket=%s reason=%s client=%s what=%s "
               "suppressed=%llu", socket_names[which], reason_names[why], tl_logq(name),
               tl_logq(what), (unsigned long long)suppressed);
}

/* ---- the ZAP handler --------------------------------------------------------------------- */

/* user: the client's name, key: its public key (Z85) or NULL, sent as the ZAP metadata
 * property X-Key (the ingest thread reads it from a scan: release_allow.h, ipc_frames.h). */
/* A signal (SIGHUP) can interrupt a send or receive: a ZAP reply cut short would leave the
 * REP socket waiting for its end, and every later handshake with it. So they are retried. */
static int send_part(void *sock, const void *data, size_t len, int flags)
{
    int rc;
    do
        rc = zmq_send(sock, data, len, flags);
    while (rc < 0 && zmq_errno() == EINTR);
    return rc;
}

static int recv_part(zmq_msg_t *m, void *sock)
{
    int rc;
    do
        rc = zmq_msg_recv(m, sock, ZMQ_DONTWAIT);
    while (rc < 0 && zmq_errno() == EINTR);
    return rc;
}

static void zap_reply(void *sock, const zmq_msg_t *request_id, const char *code,
                      const char *text, const char *user, const char *key)
{
    uint8_t meta[64];
    size_t mlen = 0;
    if (key) { /* ZMTP metadata: name length, name, value length (4 bytes, big endian), value */
        size_t klen = strlen(key);
        meta[mlen++] = 5;
        memcpy(meta + mlen, "X-Key", 5);
        mlen += 5;
        meta[mlen++] = 0;
        meta[mlen++] = 0;
        meta[mlen++] = 0;
        meta[mlen++] = (uint8_t)klen;
        memcpy(meta + mlen, key, klen);
        mlen += klen;
    }
    send_part(sock, "1.0", 3, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    send_part(sock, zmq_msg_data((zmq_msg_t *)request_id),
              zmq_msg_size((zmq_msg_t *)request_id), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    send_part(sock, code, strlen(code), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    send_part(sock, text, strlen(text), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    send_part(sock, user, strlen(user), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    send_part(sock, meta, mlen, ZMQ_DONTWAIT);
}

static bool part_is(zmq_msg_t *m, const char *s)
{
    return zmq_msg_size(m) == strlen(s) && memcmp(zmq_msg_data(m), s, strlen(s)) == 0;
}

/* One ZAP request: [version, request id, domain, address, identity, mechanism, creds...]. */
static void on_zap(tl_zwatch *w)
{
    tl_auth *a = w->ctx;
    enum { MAXP = 8 };
    zmq_msg_t p[MAXP];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (recv_part(&m, w->sock) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (n < MAXP)
            p[n++] = m;
        else
            zmq_msg_close(&m);
    }
    if (n < 6) { /* not ZAP: REP still owes an answer */
        if (n >= 2)
            zap_reply(w->sock, &p[1], "500", "malformed ZAP request", "", NULL);
        goto out;
    }
    int which = -1;
    for (int s = 0; s < TL_AUTH_NSOCKETS; s++)
        if (part_is(&p[2], socket_names[s]))
            which = s;
    char address[64];
    snprintf(address, sizeof address, "%.*s", (int)(zmq_msg_size(&p[3]) < 63 ? zmq_msg_size(&p[3]) : 63),
             (const char *)zmq_msg_data(&p[3]));
    if (which < 0) {
        zap_reply(w->sock, &p[1], "400", "unknown ZAP domain", "", NULL);
    } else if (part_is(&p[5], "NULL")) { /* only a socket in security.plain asks for these */
        if (a->plain[which]) {
            tl_stats_count(&a->accepted[which]);
            tl_log(TL_LOG_DEBUG, "client_accepted", "socket=%s client=plain address=%s",
                   socket_names[which], tl_logq(address));
            zap_reply(w->sock, &p[1], "200", "OK", "", NULL);
        } else {
            tl_auth_refuse(a, which, TL_AUTH_HANDSHAKE, "plain", address);
            zap_reply(w->sock, &p[1], "400", "plain peers are not allowed", "", NULL);
        }
    } else if (part_is(&p[5], "CURVE") && n >= 7 && zmq_msg_size(&p[6]) == 32) {
        char z85[TL_ZCERT_Z85_LEN + 1];
        zmq_z85_encode(z85, zmq_msg_data(&p[6]), 32);
        const tl_auth_client *cl = find_key(a, z85);
        char what[160];
        if (!cl) {
            char prefix[16];
            snprintf(prefix, sizeof prefix, "key:%.8s", z85);
            snprintf(what, sizeof what, "address %s", address);
            tl_auth_refuse(a, which, TL_AUTH_UNKNOWN_KEY, prefix, what);
            zap_reply(w->sock, &p[1], "400", "unknown key", "", NULL);
        } else if (!tl_role_allows(cl->role, socket_role[which])) {
            snprintf(what, sizeof what, "role %s on %s from %s", tl_role_name(cl->role),
                     socket_names[which], address);
            tl_auth_refuse(a, which, TL_AUTH_WRONG_ROLE, cl->name, what);
            zap_reply(w->sock, &p[1], "400", "role not allowed on this socket", "", NULL);
        } else {
            tl_stats_count(&a->accepted[which]);
            tl_log(TL_LOG_INFO, "client_accepted", "socket=%s client=%s role=%s address=%s",
                   socket_names[which], tl_logq(cl->name), tl_role_name(cl->role),
                   tl_logq(address));
            zap_reply(w->sock, &p[1], "200", "OK", cl->name, cl->public_txt);
        }
    } else {
        tl_auth_refuse(a, which, TL_AUTH_HANDSHAKE, "", "a mechanism other than CURVE");
        zap_reply(w->sock, &p[1], "400", "mechanism not allowed", "", NULL);
    }
out:
    for (int i = 0; i < n; i++)
        zmq_msg_close(&p[i]);
}

int tl_auth_serve(tl_auth *a, uv_loop_t *loop, void *zctx, char *err, size_t errlen)
{
    if (!a || !a->curve)
        return 0;
    if (a->nzap == 2) {
        snprintf(err, errlen, "more ZeroMQ contexts than ZAP handlers");
        return -1;
    }
    tl_auth_watched *z = &a->zap[a->nzap];
    int zero = 0;
    z->sock = zmq_socket(zctx, ZMQ_REP);
    if (!z->sock || zmq_setsockopt(z->sock, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_bind(z->sock, ZAP_ENDPOINT) != 0) {
        snprintf(err, errlen, "ZAP handler %s: %s", ZAP_ENDPOINT, zmq_strerror(zmq_errno()));
        if (z->sock)
            zmq_close(z->sock);
        z->sock = NULL;
        return -1;
    }
    if (tl_zwatch_start(&z->watch, loop, z->sock, on_zap, a) != 0) {
        snprintf(err, errlen, "cannot watch the ZAP handler");
        return -1;
    }
    a->nzap++;
    return 0;
}

/* ---- sockets and their monitors ---------------------------------------------------------- */

static void monitor_endpoint(tl_auth_socket_id which, char *buf, size_t n)
{
    snprintf(buf, n, "inproc://tl-auth-monitor-%s", socket_names[which]);
}

int tl_auth_socket(tl_auth *a, void *sock, tl_auth_socket_id which, char *err, size_t errlen)
{
    if (!a || !a->curve)
        return 0;
    char why[256], mon[64];
    if (!a->plain[which] && tl_zcert_server(sock, &a->server, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s socket: %s", socket_names[which], why);
        return -1;
    }
    monitor_endpoint(which, mon, sizeof mon);
    const char *domain = socket_names[which];
    if (zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) != 0 ||
        zmq_socket_monitor(sock, mon,
                           ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0) {
        snprintf(err, errlen, "%s socket: ZAP domain or monitor: %s", socket_names[which],
                 zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

/* A handshake failed before ZAP: [event u16 + value u32, endpoint]. */
static void on_monitor(tl_zwatch *w)
{
    tl_auth *a = w->ctx;
    int which = 0;
    for (int s = 0; s < TL_AUTH_NSOCKETS; s++)
        if (&a->monitor[s].watch == w)
            which = s;
    zmq_msg_t ev, ep;
    zmq_msg_init(&ev);
    zmq_msg_init(&ep);
    if (recv_part(&ev, w->sock) >= 0 && zmq_msg_more(&ev))
        recv_part(&ep, w->sock);
    if (zmq_msg_size(&ev) == 6) {
        const uint8_t *b = zmq_msg_data(&ev);
        uint16_t event;
        uint32_t value;
        memcpy(&event, b, 2);
        memcpy(&value, b + 2, 4);
        char what[96];
        snprintf(what, sizeof what, "handshake failed (error 0x%x%s)", (unsigned)value,
                 value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                     ? ": a peer without CURVE keys"
                 : value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC ? ": wrong server key?"
                                                                  : "");
        tl_auth_refuse(a, (tl_auth_socket_id)which, TL_AUTH_HANDSHAKE, "", what);
    }
    zmq_msg_close(&ev);
    zmq_msg_close(&ep);
}

int tl_auth_watch(tl_auth *a, uv_loop_t *loop, void *zctx, tl_auth_socket_id which, char *err,
                  size_t errlen)
{
    if (!a || !a->curve)
        return 0;
    tl_auth_watched *m = &a->monitor[which];
    char mon[64];
    monitor_endpoint(which, mon, sizeof mon);
    int zero = 0;
    m->sock = zmq_socket(zctx, ZMQ_PAIR);
    if (!m->sock || zmq_setsockopt(m->sock, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_connect(m->sock, mon) != 0 ||
        tl_zwatch_start(&m->watch, loop, m->sock, on_monitor, a) != 0) {
        snprintf(err, errlen, "%s socket monitor: %s", socket_names[which],
                 zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

void tl_auth_close(tl_auth *a)
{
    for (int s = 0; s < TL_AUTH_NSOCKETS; s++)
        if (a->monitor[s].sock) {
            tl_zwatch_stop(&a->monitor[s].watch);
            zmq_close(a->monitor[s].sock);
            a->monitor[s].sock = NULL;
        }
    for (int i = 0; i < a->nzap; i++) {
        tl_zwatch_stop(&a->zap[i].watch);
        zmq_close(a->zap[i].sock);
        a->zap[i].sock = NULL;
    }
    a->nzap = 0;
    free(a->clients);
    a->clients = NULL;
    a->nclients = 0;
    memset(&a->server, 0, sizeof a->server); /* the secret key */
}

/* ---- what the sockets ask ---------------------------------------------------------------- */

tl_role tl_auth_role(const tl_auth *a, tl_auth_socket_id which, zmq_msg_t *msg,
                     const char **name)
{
    *name = "";
    if (!a->curve || a->plain[which])
        return TL_ROLE_ADMIN;
    const char *user = zmq_msg_gets(msg, "User-Id");
    if (!user || !*user)
        return TL_ROLE_NONE;
    const tl_auth_client *cl = find_name(a, user);
    *name = cl ? cl->name : "(removed)";
    return cl ? cl->role : TL_ROLE_NONE;
}

void tl_auth_pack_status(const tl_auth *a, msgpack_packer *pk)
{
    msgpack_pack_map(pk, 6);
    tl_proto_pack_cstr(pk, "curve");
    a->curve ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    tl_proto_pack_cstr(pk, "sockets");
    msgpack_pack_map(pk, TL_AUTH_NSOCKETS);
    for (int s = 0; s < TL_AUTH_NSOCKETS; s++) {
        tl_proto_pack_cstr(pk, socket_names[s]);
        tl_proto_pack_cstr(pk, a->curve && !a->plain[s] ? "curve" : "plain");
    }
    tl_proto_pack_cstr(pk, "clients");
    msgpack_pack_map(pk, 4);
    for (int r = TL_ROLE_INGEST; r <= TL_ROLE_ADMIN; r++) {
        uint64_t n = 0;
        for (int i = 0; i < a->nclients; i++)
            n += a->clients[i].role == (tl_role)r;
        tl_proto_pack_kv_u64(pk, role_names[r], n);
    }
    tl_proto_pack_cstr(pk, "accepted");
    msgpack_pack_map(pk, TL_AUTH_NSOCKETS);
    for (int s = 0; s < TL_AUTH_NSOCKETS; s++)
        tl_proto_pack_kv_u64(pk, socket_names[s], tl_stats_get(&a->accepted[s]));
    tl_proto_pack_cstr(pk, "refused");
    msgpack_pack_map(pk, TL_AUTH_NSOCKETS + 1);
    for (int s = 0; s < TL_AUTH_NSOCKETS; s++) {
        tl_proto_pack_cstr(pk, socket_names[s]);
        int nr = s == TL_AUTH_CONTROL ? TL_AUTH_NREASONS : TL_AUTH_DENIED;
        msgpack_pack_map(pk, (size_t)nr);
        for (int r = 0; r < nr; r++)
            tl_proto_pack_kv_u64(pk, reason_names[r], tl_stats_get(&a->refused[s][r]));
    }
    tl_proto_pack_kv_u64(pk, "release", tl_stats_get(&a->release_refused));
    tl_proto_pack_cstr(pk, "reloads");
    msgpack_pack_map(pk, 2);
    tl_proto_pack_kv_u64(pk, "done", tl_stats_get(&a->reloads));
    tl_proto_pack_kv_u64(pk, "failed", tl_stats_get(&a->reload_failures));
}
