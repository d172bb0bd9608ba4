/* http_client.c — see http_client.h. */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/http_client.h"

/* Bind to port 0, read it, close: the daemon's http.listen takes 1..65535, so the test picks
 * one; tl_hc_start retries if somebody takes it meanwhile. */
int tl_hc_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

static char token_path[64];

static void remove_token_file(void)
{
    unlink(token_path);
}

const char *tl_hc_token_file(void)
{
    if (!token_path[0]) {
        snprintf(token_path, sizeof token_path, "/tmp/tomolive-test-token-XXXXXX");
        int fd = mkstemp(token_path); /* 0600 */
        ck_assert(fd >= 0);
        static const char line[] = TL_HC_TOKEN "\n";
        ck_assert(write(fd, line, strlen(line)) == (ssize_t)strlen(line));
        close(fd);
        atexit(remove_token_file);
    }
    return token_path;
}

int tl_hc_start_with(tl_fixture *f, const char *tag, const char *const *extra)
{
    const char *src = getenv("top_srcdir");
    char root[1024], listen[64], token[128];
    snprintf(root, sizeof root, "http.root=%s/daemon/www", src && *src ? src : ".");
    snprintf(token, sizeof token, "http.token_file=%s", tl_hc_token_file());
    for (int attempt = 0; attempt < 3; attempt++) {
        int port = tl_hc_free_port();
        snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
        const char *args[32] = {"--set", listen, "--set", root, "--set", token};
        for (int i = 0; extra && extra[i] && i < 25; i++)
            args[6 + i] = extra[i];
        if (tl_fx_start(f, tag, args) == 0)
            return port;
        tl_fx_cleanup(f);
    }
    ck_abort_msg("the daemon did not start");
    return -1;
}

int tl_hc_start(tl_fixture *f, const char *tag)
{
    const char *open_views[] = {"--set", "http.open_views=true", NULL};
    return tl_hc_start_with(f, tag, open_views);
}

int tl_hc_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert(fd >= 0);
    ck_assert_msg(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s",
                  strerror(errno));
    return fd;
}

ssize_t tl_hc_read_some(int fd, void *buf, size_t n, double timeout)
{
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, (int)(timeout * 1000)) <= 0)
        return -1;
    return read(fd, buf, n);
}

/* Splits a response in buf (len bytes) into r; false if it has no status line and headers. */
static bool parse(char *buf, size_t len, tl_hc_response *r)
{
    char *hend = strstr(buf, "\r\n\r\n");
    if (!hend || sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1)
        return false;
    r->ctype[0] = 0;
    char *ct = strcasestr(buf, "\r\ncontent-type:");
    if (ct && ct < hend) {
        ct += 15;
        while (*ct == ' ')
            ct++;
        snprintf(r->ctype, sizeof r->ctype, "%.*s", (int)strcspn(ct, "\r"), ct);
    }
    r->head = strndup(buf, (size_t)(hend + 2 - buf));
    r->len = len - (size_t)(hend + 4 - buf);
    r->body = malloc(r->len + 1);
    ck_assert(r->head && r->body);
    memcpy(r->body, hend + 4, r->len);
    r->body[r->len] = 0;
    return true;
}

bool tl_hc_exchange(int port, const void *req, size_t len, double quiet, tl_hc_response *r)
{
    memset(r, 0, sizeof *r);
    int fd = tl_hc_connect(port);
    if (len)
        ck_assert(write(fd, req, len) == (ssize_t)len);
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap);
    ck_assert(buf);
    buf[0] = 0;
    long clen = -1;
    for (;;) {
        if (got + 1 >= cap)
            ck_assert((buf = realloc(buf, cap *= 2)) != NULL);
        ssize_t k = tl_hc_read_some(fd, buf + got, cap - got - 1, quiet);
        if (k <= 0) /* closed, reset, or quiet */
            break;
        got += (size_t)k;
        buf[got] = 0;
        char *hend = strstr(buf, "\r\n\r\n");
        if (hend && clen < 0) {
            char *cl = strcasestr(buf, "\r\ncontent-length:");
            if (cl && cl < hend)
                clen = strtol(cl + 17, NULL, 10);
        }
        if (hend && clen >= 0 && got >= (size_t)(hend + 4 - buf) + (size_t)clen)
            break;
    }
    close(fd);
    bool ok = parse(buf, got, r);
    free(buf);
    return ok;
}

void tl_hc_request(int port, const char *method, const char *path, const char *headers,
                   tl_hc_response *r)
{
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s\r\n",
                     method, path, port, headers ? headers : "");
    ck_assert(n > 0 && (size_t)n < sizeof req);
    ck_assert_msg(tl_hc_exchange(port, req, (size_t)n, 10, r), "%s %s: no answer", method, path);
}

void tl_hc_get(int port, const char *path, tl_hc_response *r)
{
    tl_hc_request(port, "GET", path, NULL, r);
}

char *tl_hc_header(const tl_hc_response *r, const char *name)
{
    char needle[128];
    snprintf(needle, sizeof needle, "\r\n%s:", name);
    const char *h = r->head ? strcasestr(r->head, needle) : NULL;
    if (!h)
        return NULL;
    h += strlen(needle);
    while (*h == ' ')
        h++;
    return strndup(h, strcspn(h, "\r"));
}

void tl_hc_free(tl_hc_response *r)
{
    free(r->head);
    free(r->body);
    r->head = r->body = NULL;
}
