/* ws_client.h — a minimal WebSocket client (RFC 6455, plain TCP to loopback) for the HTTP
 * server's tests: the handshake with any extra headers (an Origin), text and binary
 * messages, the page's JSON replies and preview images.
 *
 *   tl_ws w;
 *   ck_assert_int_eq(tl_ws_open(&w, port, "Origin: http://evil.example\r\n", 0), 101);
 *   tl_ws_send_text(&w, "{\"req\":1,\"cmd\":\"auth\",\"token\":\"...\"}");
 *   json_t *r = tl_ws_reply(&w, 1, 10);            the reply to request 1 (ck-asserted)
 *   tl_ws_close(&w);
 */
#ifndef TL_TEST_WS_CLIENT_H
#define TL_TEST_WS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "daemon/serve/preview.h"

typedef struct {
    int fd;
    uint8_t *buf;
    size_t len, cap;
} tl_ws;

/* Connects to 127.0.0.1:port and asks for /ws (subprotocol tomolive-preview), with headers
 * ("Name: value\r\n" lines, or NULL) added; rcvbuf > 0 sets SO_RCVBUF. Returns the
 * answer's status: 101 (open; the accept key checked), another status (w->buf holds the
 * answer), or 0 when the server closed without one (a refused handshake). Close w anyway. */
int tl_ws_open(tl_ws *w, int port, const char *headers, int rcvbuf);
/* One whole message (continuations joined): its opcode (1 text, 2 binary) and payload
 * (malloc'd, NUL-terminated). false on timeout or close. */
bool tl_ws_recv(tl_ws *w, int *opcode, uint8_t **msg, size_t *n, double timeout);
void tl_ws_send_text(tl_ws *w, const char *text);
void tl_ws_close(tl_ws *w);
/* Reads until the reply to request id comes; returns it (ck-asserted within timeout). */
json_t *tl_ws_reply(tl_ws *w, int id, double timeout);
/* Reads until a text message of this "type" comes; NULL on timeout. */
json_t *tl_ws_text(tl_ws *w, const char *type, double timeout);
/* Reads until an image of view v comes that pred (may be NULL) accepts; false on timeout. */
bool tl_ws_image(tl_ws *w, int v, bool (*pred)(const tl_preview_hdr *, void *), void *ctx,
                 double timeout, tl_preview_hdr *hdr, uint8_t **pixels);

#endif
