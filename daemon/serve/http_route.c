/* http_route.c — the pure parts of the HTTP server (http.h): which path goes where, the
 * content type of the page's files, http.listen split for libwebsockets, and who may come
 * in (the Origin rule, the token comparison). Apart from http.c so unit tests need neither
 * libwebsockets nor a daemon. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon/serve/http.h"

static const struct {
    const char *ext, *mime;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".png", "image/png"},
    {".svg", "image/svg+xml"},
};
#define NTYPES (sizeof types / sizeof types[0])

static const char *ext_mime(const char *file)
{
    size_t n = strlen(file);
    for (size_t i = 0; i < NTYPES; i++) {
        size_t e = strlen(types[i].ext);
        if (n > e && strcmp(file + n - e, types[i].ext) == 0)
            return types[i].mime;
    }
    return NULL;
}

const char *tl_http_mime(const char *file)
{
    const char *m = ext_mime(file);
    return m ? m : "application/octet-stream";
}

tl_http_route tl_http_route_path(const char *path, const char **file)
{
    *file = NULL;
    if (!path || path[0] != '/')
        return TL_ROUTE_NOT_FOUND;
    const char *p = path + 1;
    if (!*p || strcmp(p, "index.html") == 0) {
        *file = "index.html";
        return TL_ROUTE_FILE;
    }
    if (strcmp(p, "metrics") == 0)
        return TL_ROUTE_METRICS;
    if (strcmp(p, "api/status") == 0)
        return TL_ROUTE_STATUS;
    if (strcmp(p, "ws") == 0)
        return TL_ROUTE_WS;
    /* one segment of safe characters, no leading dot, a known type */
    if (p[0] == '.' || strlen(p) > 64 ||
        strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                  "0123456789_.-") != strlen(p) ||
        !ext_mime(p))
        return TL_ROUTE_NOT_FOUND;
    *file = p;
    return TL_ROUTE_FILE;
}

int tl_http_parse_listen(const char *listen, char *host, size_t hostlen, int *port)
{
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    if (!colon || colon == listen || !colon[1])
        return -1;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535)
        return -1;
    const char *h = listen;
    size_t n = (size_t)(colon - listen);
    if (h[0] == '[') { /* [v6]:port */
        if (n < 3 || h[n - 1] != ']')
            return -1;
        h++;
        n -= 2;
    }
    if (n + 1 > hostlen)
        return -1;
    if (n == 1 && h[0] == '*')
        n = 0; /* every interface */
    memcpy(host, h, n);
    host[n] = 0;
    if (strcmp(host, "localhost") == 0) /* libwebsockets takes addresses and interface names */
        snprintf(host, hostlen, "127.0.0.1");
    *port = (int)p;
    return 0;
}

bool tl_http_origin_allowed(const char *origin, const char *host, bool tls, const char *allowed)
{
    if (!origin)
        return true; /* no browser: see http.h */
    size_t olen = strlen(origin);
    if (allowed && *allowed) {
        for (const char *p = allowed; *p;) {
            size_t len = strcspn(p, ",");
            if (len == olen && strncasecmp(p, origin, len) == 0)
                return true;
            p += len + (p[len] == ',');
        }
        return false;
    }
    const char *scheme = tls ? "https://" : "http://";
    size_t sl = strlen(scheme);
    return host && *host && strncasecmp(origin, scheme, sl) == 0 &&
           strcasecmp(origin + sl, host) == 0;
}

bool tl_http_token_equal(const char *want, size_t want_len, const char *given, size_t given_len)
{
    /* every byte of want is compared (against the given token's, or a zero past its end) */
    volatile unsigned char diff = want_len != given_len || want_len == 0;
    for (size_t i = 0; i < want_len; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)(i < given_len ? given[i] : 0);
    return diff == 0;
}
