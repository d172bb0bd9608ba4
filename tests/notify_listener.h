/* notify_listener.h — a stand-in for systemd's end of NOTIFY_SOCKET, for tests.
 *
 * It binds an AF_UNIX datagram socket at a path (a leading '@' means the abstract
 * namespace, as in NOTIFY_SOCKET) and reads the datagrams that sd_notify sends there:
 *
 *   tl_notify_listener *l = tl_notify_listener_open("/tmp/t/notify");
 *   setenv("NOTIFY_SOCKET", "/tmp/t/notify", 1);        // or in the daemon's environment
 *   ... start the daemon ...
 *   ck_assert(tl_notify_listener_wait(l, "READY=1", 10000));
 *   ck_assert(tl_notify_listener_wait(l, "WATCHDOG=1", 5000));
 *   tl_notify_listener_close(l);                         // closes and unlinks
 *
 * wait() reads datagrams in order of arrival and returns true at the first one that holds
 * the assignment as one of its lines ("READY=1"); an assignment ending in '=' ("STATUS=")
 * matches any value. Datagrams before the match are passed over, so consecutive waits check
 * an order (RELOADING=1, then READY=1); a datagram that arrived earlier and was passed over
 * is not found again. Every datagram received is kept for diagnostics.
 */
#ifndef TL_TESTS_NOTIFY_LISTENER_H
#define TL_TESTS_NOTIFY_LISTENER_H

#include <stdbool.h>

typedef struct tl_notify_listener tl_notify_listener;

/* Removes a stale socket file at path first. NULL on error (errno set). */
tl_notify_listener *tl_notify_listener_open(const char *path);
void tl_notify_listener_close(tl_notify_listener *l);

bool tl_notify_listener_wait(tl_notify_listener *l, const char *assignment, int timeout_ms);
/* The whole datagram that the last successful wait matched ("" before any). */
const char *tl_notify_listener_last(const tl_notify_listener *l);
/* Every datagram received so far, each followed by "\n--\n". */
const char *tl_notify_listener_received(const tl_notify_listener *l);
int tl_notify_listener_fd(const tl_notify_listener *l);

#endif
