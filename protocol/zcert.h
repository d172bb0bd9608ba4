/* zcert.h — ZeroMQ CURVE certificates as key files, in czmq's zcert text format, and the
 * socket options that use them. Shared by the daemon (its secret key, the clients' public
 * keys) and the clients (their secret key, the daemon's public key).
 *
 * A certificate pair is two files: NAME.key (public: give it away) and NAME.key_secret
 * (public and secret: keep it, mode 0600). czmq's ZPL text, which czmq's zcert_load and
 * pyzmq's zmq.auth.load_certificate read:
 *
 *   #   ZeroMQ CURVE Public Certificate
 *   metadata
 *       role = "viewer"
 *   curve
 *       public-key = "<40 characters of Z85>"
 *       secret-key = "<40 characters of Z85>"     (only in NAME.key_secret)
 *
 * Lines starting with '#' are comments; a name at the start of a line opens a section;
 * indented `name = value` lines are its properties (value quoted with " or ', or bare).
 * The reader takes the sections `metadata` and `curve` and refuses anything it cannot
 * read as such, naming the file and line.
 *
 *   tl_zcert me, server;
 *   if (tl_zcert_load("alice.key_secret", &me, err, sizeof err) != 0 || !me.has_secret ...)
 *   tl_zcert_load("server.key", &server, err, sizeof err);
 *   tl_zcert_client(sock, &me, &server, err, sizeof err);   // before zmq_connect
 */
#ifndef TL_PROTO_ZCERT_H
#define TL_PROTO_ZCERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TL_ZCERT_Z85_LEN 40   /* a key in Z85 text */
#define TL_ZCERT_META_MAX 64  /* longest metadata value kept */

typedef struct {
    char public_txt[TL_ZCERT_Z85_LEN + 1]; /* Z85 */
    char secret_txt[TL_ZCERT_Z85_LEN + 1]; /* Z85, "" without a secret key */
    bool has_secret;
    char role[TL_ZCERT_META_MAX]; /* metadata `role`, "" when absent */
} tl_zcert;

/* A new key pair (zmq_curve_keypair); role may be NULL. 0, or -1 with err (no CURVE in
 * this libzmq). */
int tl_zcert_new(tl_zcert *c, const char *role, char *err, size_t errlen);

/* Reads a public or secret certificate file. Checks that each key is 40 characters of
 * Z85, and that a secret key belongs to the public key. 0, or -1 with "PATH:LINE: why"
 * (or "PATH: why") in err. */
int tl_zcert_load(const char *path, tl_zcert *c, char *err, size_t errlen);

/* Writes BASE.key (public) and BASE.key_secret (mode 0600, refused if it exists unless
 * overwrite). 0, or -1 with err. */
int tl_zcert_save(const tl_zcert *c, const char *base, bool overwrite, char *err, size_t errlen);

/* Makes sock a CURVE client of the server whose public key is server (client must hold a
 * secret key). Before zmq_connect. 0, or -1 with err. */
int tl_zcert_client(void *sock, const tl_zcert *client, const tl_zcert *server, char *err,
                    size_t errlen);

/* Makes sock a CURVE server with the secret key of server. Before zmq_bind. */
int tl_zcert_server(void *sock, const tl_zcert *server, char *err, size_t errlen);

/* Reads the client's secret certificate and the server's public one, either path may be
 * NULL or "" (then the environment's TOMOLIVE_KEY / TOMOLIVE_SERVER_KEY), and applies them
 * to sock with tl_zcert_client. Neither given: nothing to do (plain), 0. Only one given:
 * -1, since a half-configured client would fail with an obscure handshake error. */
int tl_zcert_client_from(void *sock, const char *key_path, const char *server_key_path,
                         char *err, size_t errlen);

#endif
