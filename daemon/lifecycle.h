/* lifecycle.h — a tomolived's life: init, configuration, start, the loop, shutdown.
 *
 *   static tl_daemon d;             (large: static or heap, zero-initialised)
 *   tl_daemon_init(&d);
 *   d.overrides = ...;              ("key=value" from the command line, kept for reloads)
 *   if (tl_daemon_load_config(&d, &d.cfg, err, sizeof err) != 0 ||
 *       tl_daemon_start(&d, err, sizeof err) != 0) ... fail loudly
 *   uv_run(&d.loop, UV_RUN_DEFAULT);          (SIGTERM/SIGINT: tl_daemon_shutdown; SIGHUP: reload)
 *   tl_daemon_destroy(&d);
 *
 * main.c does exactly this; the HTTP fuzzer runs the loop itself (UV_RUN_NOWAIT between
 * inputs) around the same calls, so it exercises the daemon as it runs in production.
 */
#ifndef TL_DAEMON_LIFECYCLE_H
#define TL_DAEMON_LIFECYCLE_H

#include <stddef.h>

#include "daemon/core/daemon.h"

/* Locks, the slice registry and the loop of a zeroed daemon; started_ns is now. */
void tl_daemon_init(tl_daemon *d);
/* Defaults, then the file (d->config_path, may be NULL), then d->overrides, then the
 * cross-key checks, into c. 0, or -1 with err. */
int tl_daemon_load_config(tl_daemon *d, tl_settings *c, char *err, size_t errlen);
/* All or nothing: the backend, the sockets, the HTTP server, the worker, signals and
 * timers; then READY=1. 0, or -1 with err (the caller exits non-zero). */
int tl_daemon_start(tl_daemon *d, char *err, size_t errlen);
/* Stops ingest, lets the worker finish within the stop budget, publishes, closes the
 * loop's handles so uv_run returns. Idempotent; loop thread. */
void tl_daemon_shutdown(tl_daemon *d);
/* After uv_run has returned: frees what is left and logs "stopped". */
void tl_daemon_destroy(tl_daemon *d);

#endif
