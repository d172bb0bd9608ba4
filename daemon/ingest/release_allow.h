/* release_allow.h — which `release` endpoints a scan may name (PROTOCOL.md §8.4, issue #27).
 *
 * A scan's release endpoint makes the daemon connect out. Without a rule any peer that can
 * send a scan could point the daemon at any host and port. An endpoint is allowed when it
 * is ipc:// or inproc:// (this host), or tcp:// to loopback (127.0.0.0/8, ::1, localhost),
 * to the address the scan came from (ZeroMQ's Peer-Address of the scan message), or to a
 * host listed in security.release_hosts (compared as text: names are not resolved, which
 * would block the ingest thread and could be steered by DNS). Anything else (other
 * transports, '*', tcp's source;destination form) is refused with a reason.
 *
 *   char why[256];
 *   if (!tl_release_allowed(endpoint, peer_address, cfg.release_hosts, why, sizeof why))
 *       refuse the scan with why
 */
#ifndef TL_RELEASE_ALLOW_H
#define TL_RELEASE_ALLOW_H

#include <stdbool.h>
#include <stddef.h>

/* peer: the sender's address ("" or NULL when unknown: ipc, inproc); hosts: comma-separated
 * names or addresses ("" for none). */
bool tl_release_allowed(const char *endpoint, const char *peer, const char *hosts, char *why,
                        size_t whylen);

#endif
