/* http.h — tomolived's HTTP server: the live preview page, GET /metrics, GET /api/status.
 *
 * libwebsockets runs on the daemon's own libuv loop (a "foreign loop", through Debian's
 * evlib-uv plugin), so every request, WebSocket message and slice hand-off happens on the
 * loop thread, like the control socket's: no thread of its own, no locks of its own. Daemon
 * state is read as the control commands read it (d->lock held briefly for the scan and the
 * slice registry, atomics for the counters), and the page's actions are control requests
 * run in-process with tl_commands_run.
 *
 * Routes (GET and HEAD; other methods get 405, a request with a body 405 or 413 and its
 * connection closed):
 *   /                  the page (index.html), and any NAME.html|js|css|png|svg under http.root
 *   /metrics           Prometheus text (daemon/serve/metrics.h)
 *   /api/status        the `status` command's result as JSON
 *   /ws                WebSocket, subprotocol "tomolive-preview" (daemon/www/app.js):
 *                      binary preview images (daemon/serve/preview.h) to the page, JSON both ways
 *   anything else      404
 *
 * Access (issue 27). The port is loopback's unless http.listen says otherwise. Every response
 * carries security headers (a Content-Security-Policy allowing the page's own files and
 * WebSocket only, nosniff, no framing, no referrer, no caching; HSTS over TLS). A request or
 * WebSocket handshake whose Origin header is not allowed is refused (403; the handshake is
 * dropped), counted and logged: allowed are the origins of http.origins, or, when it is empty,
 * the page's own (the Origin's host:port is the request's Host, over the same scheme).
 * Browsers always send Origin on a WebSocket handshake, so one without it is no web page
 * (a script, a test): it is let through, and the token still guards what it may do.
 * The operator token (the first line of http.token_file) is compared in constant time and
 * never logged. The page's actions (move, center, reset_views) need it: a page sends
 * {"cmd": "auth", "token": ...} once per connection. Without http.open_views, the images
 * and state (sent only after that auth), /api/status and /metrics (an "Authorization: Bearer
 * TOKEN" header) need it too; the page's files never do (they hold no data). Refusals are
 * counted (tomolive_http_refused_total{reason}, /api/status "http") and logged, rate-limited.
 * With http.tls_cert and http.tls_key the server speaks only HTTPS and WSS.
 *
 * Preview slices: while at least one page is connected and a scan is open, the slices
 * preview-row (a row), preview-x, preview-y and preview-z (ortho-slices through one point)
 * are defined and pinned, so the engine computes them; when the last page leaves they are
 * unpinned (still defined, so their positions survive a page reload) and, being no longer
 * wanted, no longer computed. Each published preview slice is downsampled and quantised
 * once, then handed to every page: latest wins per slice and page, so a slow browser only
 * ever holds one image per view and drops (counts) the rest, and never slows the loop.
 */
#ifndef TL_HTTP_H
#define TL_HTTP_H

#include <stdbool.h>
#include <stddef.h>

struct tl_daemon;

/* Binds http.listen (nothing when it is empty) and serves it on the daemon's loop; call
 * after the publisher is open. Returns 0, or -1 with err set (the port cannot be bound,
 * libwebsockets cannot use libuv, ...): start-up must fail then. */
int tl_http_start(struct tl_daemon *d, char *err, size_t errlen);
/* Closes every connection and the listening socket (loop thread; before the publisher
 * closes). The loop finishes closing libwebsockets' handles. */
void tl_http_stop(struct tl_daemon *d);

/* ---- pure parts (unit-tested) ---------------------------------------------------------- */

typedef enum {
    TL_ROUTE_NOT_FOUND = 0,
    TL_ROUTE_FILE, /* a file of the page under http.root */
    TL_ROUTE_METRICS,
    TL_ROUTE_STATUS,
    TL_ROUTE_WS,
} tl_http_route;

/* The route of a request path (without the query string). For TL_ROUTE_FILE, *file is the
 * file's name in http.root: one path segment of [A-Za-z0-9_.-] ending in a known type and
 * not starting with '.', so no path can leave the directory. */
tl_http_route tl_http_route_path(const char *path, const char **file);
/* The Content-Type of a file of the page (by its extension). */
const char *tl_http_mime(const char *file);

/* Whether a request with this Origin header (NULL: none) may be served: see the top.
 * host is the request's Host header (NULL: none), tls whether it came over TLS, allowed
 * http.origins. Case-insensitive, as origins and host names are. */
bool tl_http_origin_allowed(const char *origin, const char *host, bool tls, const char *allowed);
/* Whether two tokens are equal, in a time that does not depend on where they differ (nor on
 * the given one's content): the token of the daemon is `want`. */
bool tl_http_token_equal(const char *want, size_t want_len, const char *given, size_t given_len);

/* Splits http.listen ("HOST:PORT", "*:PORT", "[::1]:PORT") into an interface for
 * libwebsockets (NULL for every interface) and a port. Returns 0, or -1 if malformed. */
int tl_http_parse_listen(const char *listen, char *host, size_t hostlen, int *port);

#endif
