/* ws_client.c — see ws_client.h. */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/daemon_fixture.h"
#include "tests/http_client.h"
#include "tests/ws_client.h"

int tl_ws_open(tl_ws *w, int port, const char *headers, int rcvbuf)
{
    memset(w, 0, sizeof *w);
    w->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf)
        setsockopt(w->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert(connect(w->fd, (struct sockaddr *)&a, sizeof a) == 0);
    char req[1024];
    int n =
        snprintf(req, sizeof req,
                 "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: tomolive-preview\r\n"
                 "%s\r\n",
                 port, headers ? headers : "");
    ck_assert(n > 0 && (size_t)n < sizeof req && write(w->fd, req, (size_t)n) == n);
    w->cap = 1 << 20;
    w->buf = malloc(w->cap);
    ck_assert(w->buf);
    char *end = NULL;
    while (!end) {
        ssize_t k = tl_hc_read_some(w->fd, w->buf + w->len, w->cap - w->len - 1, 10);
        if (k <= 0) /* closed (refused) or silent */
            return 0;
        w->len += (size_t)k;
        w->buf[w->len] = 0;
        end = strstr((char *)w->buf, "\r\n\r\n");
    }
    int status = 0;
    ck_assert_msg(sscanf((char *)w->buf, "HTTP/1.1 %d", &status) == 1, "%s", w->buf);
    if (status != 101)
        return status;
    ck_assert_ptr_nonnull(
        strstr((char *)w->buf, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")); /* RFC 6455 1.3 */
    size_t used = (size_t)(end + 4 - (char *)w->buf);
    memmove(w->buf, w->buf + used, w->len - used);
    w->len -= used;
    return 101;
}

/* One whole message (continuations joined): its opcode (1 text, 2 binary) and payload
 * (malloc'd, NUL-terminated). false on timeout. Pings are answered, closes fail. */
bool tl_ws_recv(tl_ws *w, int *opcode, uint8_t **msg, size_t *n, double timeout)
{
    double t0 = tl_fx_seconds();
    uint8_t *out = NULL;
    size_t olen = 0;
    int op = 0;
    for (;;) {
        /* a whole frame in the buffer? */
        if (w->len >= 2) {
            size_t hl = 2, pl = w->buf[1] & 0x7f;
            if (pl == 126)
                hl = 4;
            else if (pl == 127)
                hl = 10;
            if (w->len >= hl) {
                if (pl == 126)
                    pl = (size_t)w->buf[2] << 8 | w->buf[3];
                else if (pl == 127) {
                    pl = 0;
                    for (int i = 0; i < 8; i++)
                        pl = pl << 8 | w->buf[2 + i];
                }
                ck_assert_msg(!(w->buf[1] & 0x80), "a server frame must not be masked");
                if (w->len >= hl + pl) {
                    int fop = w->buf[0] & 0x0f;
                    bool fin = w->buf[0] & 0x80;
                    if (fop == 8) { /* the server closed the WebSocket */
                        free(out);
                        return false;
                    }
                    if (fop != 9 && fop != 10) { /* ping / pong: not ours to answer here */
                        if (fop)
                            op = fop;
                        out = realloc(out, olen + pl + 1);
                        memcpy(out + olen, w->buf + hl, pl);
                        olen += pl;
                    }
                    memmove(w->buf, w->buf + hl + pl, w->len - hl - pl);
                    w->len -= hl + pl;
                    if (fin && op) {
                        out[olen] = 0;
                        *opcode = op;
                        *msg = out;
                        *n = olen;
                        return true;
                    }
                    continue;
                }
            }
        }
        if (w->len == w->cap)
            w->buf = realloc(w->buf, w->cap *= 2);
        double left = timeout - (tl_fx_seconds() - t0);
        ssize_t k = left > 0 ? tl_hc_read_some(w->fd, w->buf + w->len, w->cap - w->len, left) : -1;
        if (k <= 0) {
            free(out);
            return false;
        }
        w->len += (size_t)k;
    }
}

void tl_ws_send_text(tl_ws *w, const char *text)
{
    size_t n = strlen(text);
    ck_assert(n < 65536);
    uint8_t f[8 + 65536];
    size_t h = 0;
    f[h++] = 0x81;
    if (n < 126)
        f[h++] = (uint8_t)(0x80 | n);
    else {
        f[h++] = 0x80 | 126;
        f[h++] = (uint8_t)(n >> 8);
        f[h++] = (uint8_t)n;
    }
    const uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78};
    memcpy(f + h, mask, 4);
    h += 4;
    for (size_t i = 0; i < n; i++)
        f[h + i] = (uint8_t)text[i] ^ mask[i % 4];
    ck_assert(write(w->fd, f, h + n) == (ssize_t)(h + n));
}

void tl_ws_close(tl_ws *w)
{
    close(w->fd);
    free(w->buf);
}

/* Reads until a reply to request id comes; returns it (JSON). */
json_t *tl_ws_reply(tl_ws *w, int id, double timeout)
{
    double t0 = tl_fx_seconds();
    while (tl_fx_seconds() - t0 < timeout) {
        int op;
        uint8_t *m;
        size_t n;
        if (!tl_ws_recv(w, &op, &m, &n, timeout - (tl_fx_seconds() - t0)))
            break;
        if (op == 1) {
            json_t *j = json_loadb((char *)m, n, 0, NULL);
            ck_assert_msg(j != NULL, "text message that is not JSON: %s", m);
            const char *type = json_string_value(json_object_get(j, "type"));
            if (type && strcmp(type, "reply") == 0 &&
                json_integer_value(json_object_get(j, "req")) == id) {
                free(m);
                return j;
            }
            json_decref(j);
        }
        free(m);
    }
    ck_abort_msg("no reply to request %d", id);
    return NULL;
}

/* Reads until an image of view v comes that pred accepts; false on timeout. */
bool tl_ws_image(tl_ws *w, int v, bool (*pred)(const tl_preview_hdr *, void *), void *ctx,
                     double timeout, tl_preview_hdr *hdr, uint8_t **pixels)
{
    double t0 = tl_fx_seconds();
    while (tl_fx_seconds() - t0 < timeout) {
        int op;
        uint8_t *m;
        size_t n;
        if (!tl_ws_recv(w, &op, &m, &n, timeout - (tl_fx_seconds() - t0)))
            return false;
        if (op == 2) {
            tl_preview_hdr h;
            ck_assert_msg(tl_preview_decode(m, n, &h) == 0,
                          "a binary message that is not a preview image");
            if (h.view == v && (!pred || pred(&h, ctx))) {
                *hdr = h;
                if (pixels)
                    *pixels = m;
                else
                    free(m);
                return true;
            }
        }
        free(m);
    }
    return false;
}

json_t *tl_ws_text(tl_ws *w, const char *type, double timeout)
{
    double t0 = tl_fx_seconds();
    while (tl_fx_seconds() - t0 < timeout) {
        int op;
        uint8_t *m;
        size_t n;
        if (!tl_ws_recv(w, &op, &m, &n, timeout - (tl_fx_seconds() - t0)))
            return NULL;
        json_t *j = op == 1 ? json_loadb((char *)m, n, 0, NULL) : NULL;
        free(m);
        const char *t = json_string_value(json_object_get(j, "type"));
        if (t && strcmp(t, type) == 0)
            return j;
        json_decref(j);
    }
    return NULL;
}
