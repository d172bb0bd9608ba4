/* push_socket.c — see push_socket.h. */
#include "config.h"

#include <errno.h>
#include <zmq.h>

#include "clients/cli.h"
#include "clients/push_socket.h"
#include "protocol/zcert.h"

#define ME "tomolive push"

int tl_push_socket_open(const char *endpoint, bool bind, int sndhwm, const char *key,
                        const char *server_key, void **ctx, void **sock)
{
    char kerr[600];
    *ctx = zmq_ctx_new();
    *sock = *ctx ? zmq_socket(*ctx, ZMQ_PUSH) : NULL;
    int linger = -1, immediate = 1;
    if (!*sock || zmq_setsockopt(*sock, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm) ||
        zmq_setsockopt(*sock, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(*sock, ZMQ_IMMEDIATE, &immediate, sizeof immediate))
        return tl_cli_fail(ME, 1, "cannot create the socket: %s", zmq_strerror(errno));
    if (!bind && tl_zcert_client_from(*sock, key, server_key, kerr, sizeof kerr) != 0)
        return tl_cli_fail(ME, 2, "%s", kerr);
    if ((bind ? zmq_bind(*sock, endpoint) : zmq_connect(*sock, endpoint)) != 0)
        return tl_cli_fail(ME, bind && errno != EINVAL ? 1 : 2, "cannot %s '%s': %s",
                           bind ? "bind" : "connect to", endpoint, zmq_strerror(errno));
    return 0;
}

void tl_push_socket_close(void *ctx, void *sock, bool failed)
{
    if (sock) {
        if (failed) { /* a failed run must not wait for delivery */
            int zero = 0;
            zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
        }
        zmq_close(sock);
    }
    if (ctx)
        zmq_ctx_term(ctx); /* waits until every message is out */
}
