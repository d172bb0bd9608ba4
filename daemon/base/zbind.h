/* zbind.h — binding a daemon socket, refusing an endpoint that another process serves.
 *
 * A TCP port in use makes zmq_bind fail by itself (EADDRINUSE). An ipc:// path does not:
 * libzmq unlinks whatever socket file is there and binds anew, so a second tomolived
 * started on the same ipc:// endpoints would take them over silently, leave the first one
 * deaf, and unlink the paths again when it stopped. tl_zbind first connects to such a
 * path: when a listener answers, it fails with EADDRINUSE as for TCP. A path nobody
 * listens on (the leftover of a daemon that was killed) is bound as before.
 *
 *   if (tl_zbind(sock, endpoint) != 0) ... zmq_strerror(zmq_errno()) says why
 */
#ifndef TL_ZBIND_H
#define TL_ZBIND_H

/* zmq_bind(sock, endpoint), unless endpoint is an ipc:// path with a listener: then -1
 * with errno EADDRINUSE. */
int tl_zbind(void *sock, const char *endpoint);

#endif
