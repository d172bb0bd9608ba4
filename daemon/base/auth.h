/* auth.h — who may use the daemon's ZeroMQ sockets: CURVE keys, roles and the ZAP handler
 * (ZeroMQ RFC 27), for [security] curve = true (issue #27).
 *
 * The daemon's sockets are CURVE servers with its secret key (security.server_key). A
 * client connects with a key pair of its own; libzmq asks the ZAP handler here, over
 * inproc://zeromq.zap.01 in the socket's context, whether its public key may in. The
 * handler finds the key among the certificates of security.clients (one file NAME.key per
 * client, `role` in its metadata), checks the role against the socket (ZMQ_ZAP_DOMAIN
 * names it: ingest, control or slices) and answers with the client's name as ZAP User-Id
 * and its public key as the metadata property X-Key, which every message of that
 * connection then carries (zmq_msg_gets "User-Id", "X-Key": the release socket of a scan
 * authenticates its producer with it, ipc_frames.h); the
 * control socket looks up the role per request (tl_auth_role) and refuses commands above
 * it. Refusals are counted per socket and reason and logged with the client's name (an
 * unknown key: the first 8 characters of its Z85 public key), rate-limited.
 *
 * The handler runs on the event loop (one REP socket per ZeroMQ context: the daemon's and
 * the publisher's), so the client table needs no lock: SIGHUP re-reads it on the loop too.
 * A handshake waits while the loop is busy, which is fine for connections (rare) and
 * never delays messages of connections already made. A peer that fails before ZAP (a
 * plain peer on a CURVE socket, or one with the wrong server key) is seen through a
 * socket monitor per socket and counted as `handshake`.
 *
 * libzmq 4.3 lets every CURVE client in when no ZAP handler is bound, so tl_auth_serve
 * must run before the sockets bind, and stay until they are closed.
 *
 *   tl_auth_open(&a, &cfg, err, n);                 // keys, clients (loud errors)
 *   tl_auth_serve(&a, loop, zctx, err, n);          // per context, before binding
 *   tl_auth_socket(&a, sock, TL_AUTH_CONTROL, err, n);  // per socket, before zmq_bind
 *   tl_auth_watch(&a, loop, zctx, TL_AUTH_CONTROL, err, n); // its monitor, on the loop
 *   ... SIGHUP: tl_auth_reload(&a);
 *   tl_auth_close(&a);                              // after the sockets closed
 *
 * With curve off every call is a no-op and every peer is admin (as before #27).
 */
#ifndef TL_DAEMON_AUTH_H
#define TL_DAEMON_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "daemon/base/settings.h"
#include "daemon/base/stats.h"
#include "daemon/base/zwatch.h"
#include "protocol/protocol.h"
#include "protocol/zcert.h"

/* Roles, by rights: ingest may send frames and nothing else; viewer < operator < admin. */
typedef enum {
    TL_ROLE_NONE = 0,
    TL_ROLE_INGEST,
    TL_ROLE_VIEWER,
    TL_ROLE_OPERATOR,
    TL_ROLE_ADMIN
} tl_role;
const char *tl_role_name(tl_role r);
tl_role tl_role_parse(const char *name); /* TL_ROLE_NONE when unknown */
/* Whether a client of role have may do what needs role need. */
bool tl_role_allows(tl_role have, tl_role need);

typedef enum { TL_AUTH_INGEST = 0, TL_AUTH_CONTROL, TL_AUTH_SLICES, TL_AUTH_NSOCKETS } tl_auth_socket_id;

/* Why a peer was refused. */
typedef enum {
    TL_AUTH_UNKNOWN_KEY = 0, /* its public key is not in security.clients */
    TL_AUTH_WRONG_ROLE,      /* its role may not use this socket */
    TL_AUTH_HANDSHAKE,       /* no CURVE handshake: a plain peer, or the wrong server key */
    TL_AUTH_DENIED,          /* control: a command above its role */
    TL_AUTH_NREASONS
} tl_auth_reason;

typedef struct {
    char name[64];
    char public_txt[TL_ZCERT_Z85_LEN + 1];
    tl_role role;
} tl_auth_client;

typedef struct {
    void *sock;
    tl_zwatch watch;
} tl_auth_watched;

typedef struct {
    bool curve;
    bool plain[TL_AUTH_NSOCKETS]; /* security.plain */
    tl_zcert server;              /* security.server_key */
    char clients_dir[TL_SETTINGS_ENDPOINT_MAX];
    tl_auth_client *clients; /* read from clients_dir (loop thread) */
    int nclients;
    tl_auth_watched zap[2]; /* the ZAP handlers, one per context */
    int nzap;
    tl_auth_watched monitor[TL_AUTH_NSOCKETS];
    tl_counter refused[TL_AUTH_NSOCKETS][TL_AUTH_NREASONS];
    tl_counter accepted[TL_AUTH_NSOCKETS]; /* connections let in by ZAP */
    tl_counter release_refused;            /* release endpoints not allowed (release_allow.h) */
    tl_counter reloads, reload_failures;
} tl_auth;

/* Reads the server key and the clients (curve on); 0, or -1 with a message for start-up. */
int tl_auth_open(tl_auth *a, const tl_settings *c, char *err, size_t errlen);
/* Binds and watches the ZAP handler of context zctx on loop. */
int tl_auth_serve(tl_auth *a, uv_loop_t *loop, void *zctx, char *err, size_t errlen);
/* Makes sock a CURVE server (or, listed in security.plain, a plain socket whose peers still
 * pass the ZAP handler, which logs them) with its ZAP domain, and starts its monitor. On
 * the thread that owns sock, before zmq_bind. */
int tl_auth_socket(tl_auth *a, void *sock, tl_auth_socket_id which, char *err, size_t errlen);
/* Watches the monitor of that socket on loop (zctx: the socket's context). */
int tl_auth_watch(tl_auth *a, uv_loop_t *loop, void *zctx, tl_auth_socket_id which, char *err,
                  size_t errlen);
/* SIGHUP: reads security.clients again; on error the old table stays (logged). Loop thread. */
void tl_auth_reload(tl_auth *a);
/* Closes the ZAP handlers and monitors (after the sockets) and frees the table. */
void tl_auth_close(tl_auth *a);

/* The role of the peer that sent msg on socket which (loop thread): admin with curve off or
 * on a plain socket, else the current role of its User-Id (TL_ROLE_NONE for a client
 * removed since it connected). *name gets the client's name ("" for a plain peer). */
tl_role tl_auth_role(const tl_auth *a, tl_auth_socket_id which, zmq_msg_t *msg,
                     const char **name);
/* Counts and logs a refusal by the daemon (control: a command above the role). */
void tl_auth_refuse(tl_auth *a, tl_auth_socket_id which, tl_auth_reason why, const char *name,
                    const char *what);

/* status: the "security" map. */
void tl_auth_pack_status(const tl_auth *a, msgpack_packer *pk);

#endif
