/* push_socket.h — the PUSH socket that every mode of `tomolive push` sends on (frames it
 * makes or reads, recorded DECTRIS messages), set up the one way a camera's stream needs:
 * nothing queued for a connection that is not up (ZMQ_IMMEDIATE: sends block instead), and
 * a close that waits until every message is out, except after a failure.
 *
 *   void *ctx, *sock;
 *   int rc = tl_push_socket_open(endpoint, bind, sndhwm, key, server_key, &ctx, &sock);
 *                                                               0, or an exit status
 *   ... send ...                                                          (the error said)
 *   tl_push_socket_close(ctx, sock, rc != 0);
 */
#ifndef TL_PUSH_SOCKET_H
#define TL_PUSH_SOCKET_H

#include <stdbool.h>

/* Creates a context and its PUSH socket, bound or connected to endpoint. Returns 0, or 1
 * (cannot create, cannot bind) or 2 (a bad endpoint) after saying why; *ctx and *sock are
 * then what exists (NULL or to be closed). */
/* key, server_key: CURVE certificates of a connecting socket (protocol/zcert.h:
 * tl_zcert_client_from; NULL: the environment's, if any). */
int tl_push_socket_open(const char *endpoint, bool bind, int sndhwm, const char *key,
                        const char *server_key, void **ctx, void **sock);
/* Closes sock (NULL: none) and terminates ctx (NULL: none): waits until every message is
 * delivered, unless the run failed. */
void tl_push_socket_close(void *ctx, void *sock, bool failed);

#endif
