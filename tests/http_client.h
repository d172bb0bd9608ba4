/* http_client.h — a plain HTTP/1.1 client over TCP for the HTTP server's tests, and a
 * daemon with HTTP on a free loopback port.
 *
 *   tl_fixture f;
 *   int port = tl_hc_start(&f, "http-x");        daemon + http.listen=127.0.0.1:PORT
 *   tl_hc_response r;
 *   tl_hc_get(port, "/metrics", &r);             ck-asserts an answer within 10 s
 *   ... r.status, r.ctype, r.body (r.len bytes, NUL-terminated) ...
 *   free(r.body);
 *
 * tl_hc_exchange sends any bytes (a request the daemon must survive) and reads whatever
 * comes back until the server closes or goes quiet.
 */
#ifndef TL_TEST_HTTP_CLIENT_H
#define TL_TEST_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tests/daemon_fixture.h"

/* The operator token of the daemons tl_hc_start starts (in a file of the test's). */
#define TL_HC_TOKEN "test-operator-token-0123456789abcdef"

/* A loopback port nobody listens on now. */
int tl_hc_free_port(void);
/* Starts the daemon with HTTP on a free loopback port, the page from the source tree,
 * http.token_file holding TL_HC_TOKEN, and extra (more arguments, NULL-terminated, or
 * NULL); returns the port (retries with another port if one was taken meanwhile).
 * tl_hc_start adds http.open_views = true. */
int tl_hc_start_with(tl_fixture *f, const char *tag, const char *const *extra);
int tl_hc_start(tl_fixture *f, const char *tag);
/* The path of the file holding TL_HC_TOKEN (made once, mode 0600). */
const char *tl_hc_token_file(void);
/* A TCP connection to 127.0.0.1:port (ck-asserted). */
int tl_hc_connect(int port);
/* Reads what is there within timeout seconds: -1 on timeout or error, 0 at EOF. */
ssize_t tl_hc_read_some(int fd, void *buf, size_t n, double timeout);

typedef struct {
    int status;
    char ctype[128];
    char *head; /* the status line and headers (malloc'd) */
    char *body; /* malloc'd, NUL-terminated; NULL after tl_hc_exchange with no answer */
    size_t len;
} tl_hc_response;

/* GET path with Connection: close; ck-asserts a well-formed answer within 10 s. */
void tl_hc_get(int port, const char *path, tl_hc_response *r);
/* The same with more headers ("Name: value\r\n" lines, or NULL), and another method. */
void tl_hc_request(int port, const char *method, const char *path, const char *headers,
                   tl_hc_response *r);
/* The value of header name (lower case, without ':') in r->head, malloc'd; NULL if absent. */
char *tl_hc_header(const tl_hc_response *r, const char *name);
/* Sends req (len bytes) on a new connection and reads until the server closes, a whole
 * response (Content-Length) has come, or nothing comes for quiet seconds. Returns true if
 * an HTTP response arrived (r filled; free r->head and r->body), false if the server said
 * nothing (r zeroed). */
bool tl_hc_exchange(int port, const void *req, size_t len, double quiet, tl_hc_response *r);
void tl_hc_free(tl_hc_response *r);

#endif
