/* clients_util.h — what the client tests share: running the built `tomolive` in the
 * background while the test plays the daemon's side of a socket, and binding that socket
 * to a free loopback port.
 *
 * The binary is $top_builddir/clients/tomolive (the test harness sets top_builddir); its
 * stdout and stderr go to files in a directory of the test's, read back when it exits
 * (stdout also while it runs: tl_client_wait_out).
 */
#ifndef TL_CLIENTS_UTIL_H
#define TL_CLIENTS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Starts `tomolive args...` (args NULL-terminated); output files go into dir. */
pid_t tl_client_start(const char *dir, const char *const *args);
/* Starts the program argv[0] (a path; argv NULL-terminated) the same way, e.g. mpirun. */
pid_t tl_client_exec(const char *dir, const char *const *argv);
/* The path of the built tomolive. */
const char *tl_client_binary(void);
/* Waits for it at most timeout_s seconds (killing it after that) and returns its exit
 * status; fails the test if it died of a signal or had to be killed. */
int tl_client_wait(pid_t pid, double timeout_s);
/* Whether it is still running (without reaping it). */
bool tl_client_running(pid_t pid);
/* Waits until what it has printed on stdout so far holds needle (true), or until it has
 * exited or timeout_s seconds have passed (false). For a client that flushes its lines. */
bool tl_client_wait_out(pid_t pid, const char *needle, double timeout_s);
/* start + wait. */
int tl_client_run(const char *dir, const char *const *args, double timeout_s);
/* What the last waited-for run printed (NUL-terminated, valid until the next wait). */
const char *tl_client_out(void);
const char *tl_client_err(void);
/* Number of lines of text that begin with prefix. */
int tl_count_lines(const char *text, const char *prefix);

/* A socket of the given type bound to tcp://127.0.0.1:* (a free port); its endpoint is
 * written into ep. Linger 0 and a 10 s receive timeout, so a test never hangs. */
void *tl_bind_loopback(void *ctx, int type, char *ep, size_t cap);
/* A free loopback TCP port (for a client that binds); racy in principle, fine in tests. */
int tl_free_port(void);
/* Waits until a socket listens on TCP port (IPv4, as /proc/net/tcp shows it): true; false
 * once the client pid has exited or timeout_s seconds have passed. */
bool tl_client_wait_listening(pid_t pid, int port, double timeout_s);

/* Monotonic seconds. */
double tl_now_s(void);

#endif
