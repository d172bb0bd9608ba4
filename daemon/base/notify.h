/* notify.h — tomolived's messages to systemd (sd_notify(3)), for a Type=notify unit.
 *
 *   after the sockets are bound and the engine is warmed up:  tl_notify_ready();
 *   during a long warm-up, before the start timeout:          tl_notify_extend_timeout(usec);
 *   every status_interval:            tl_notify_status("ingesting 1234 fps, 3 slices");
 *   on SIGHUP: tl_notify_reloading(); reload; tl_notify_ready();
 *   on shutdown:                                              tl_notify_stopping();
 *   if tl_notify_watchdog_usec() > 0, call tl_notify_watchdog() every half of it, from
 *   work that proves progress (the loop turning and the engine draining its queue).
 *
 * Each returns what sd_notify returns: > 0 sent, 0 when NOTIFY_SOCKET is unset (not run
 * by systemd; nothing happens), < 0 a negative errno. NOTIFY_SOCKET stays set, so READY=1
 * can be sent again after a reload.
 */
#ifndef TL_DAEMON_NOTIFY_H
#define TL_DAEMON_NOTIFY_H

#include <stdint.h>

int tl_notify_ready(void);
/* RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC now), as systemd >= 253 requires. */
int tl_notify_reloading(void);
int tl_notify_stopping(void);
/* STATUS=line; newlines in line become spaces (one datagram assignment per line). */
int tl_notify_status(const char *line);
int tl_notify_watchdog(void);
/* EXTEND_TIMEOUT_USEC=usec: asks for this much more time to start, reload or stop. */
int tl_notify_extend_timeout(uint64_t usec);
/* The watchdog interval systemd set (WatchdogSec=) for this process, or 0 if none. */
uint64_t tl_notify_watchdog_usec(void);

#endif
