/* fuzz_http_route.c — libFuzzer target for the pure parts of the HTTP server
 * (daemon/serve/http_route.c): a request path's route, a file's Content-Type, and the
 * http.listen setting split for libwebsockets.
 *
 * An input is a NUL-terminated string (libwebsockets hands the callback a C string; bytes
 * after a NUL are ignored). Properties:
 *   - a path to a file of the page names one segment of [A-Za-z0-9_.-], not starting
 *     with '.', with a known type, inside the input (or the built-in "index.html"): no
 *     path leaves http.root; every other route has no file;
 *   - the Content-Type of a routed file is never the fallback;
 *   - http.listen: 0 with a port in 0..65535 and a host that fits and is a substring of the
 *     input (or "127.0.0.1" for localhost), or -1; a too-small host buffer never overflows.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/serve/http.h"

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "property failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                          \
        }                                                                     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_route(const char *path)
{
    const char *file = "unset";
    tl_http_route r = tl_http_route_path(path, &file);
    CHECK(r >= TL_ROUTE_NOT_FOUND && r <= TL_ROUTE_WS);
    if (r != TL_ROUTE_FILE) {
        CHECK(file == NULL);
        return;
    }
    CHECK(file != NULL);
    size_t n = strlen(file);
    CHECK(n >= 1 && n <= 64);
    CHECK(file[0] != '.' && strchr(file, '/') == NULL);
    CHECK(strspn(file, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n);
    CHECK(strcmp(file, "index.html") == 0 || strstr(path, file) == path + 1);
    CHECK(strcmp(tl_http_mime(file), "application/octet-stream") != 0);
}

static void check_listen(const char *listen)
{
    /* the host in a buffer of exactly its size, and one too small by a byte */
    for (size_t cap = 1; cap <= 256; cap *= 4) {
        char *host = malloc(cap);
        int port = -7;
        CHECK(host != NULL);
        int rc = tl_http_parse_listen(listen, host, cap, &port);
        if (rc == 0) {
            CHECK(port >= 0 && port <= 65535);
            CHECK(memchr(host, '\0', cap) != NULL);
            CHECK(strcmp(host, "127.0.0.1") == 0 || strstr(listen, host) != NULL);
        } else {
            CHECK(rc == -1 && port == -7);
        }
        free(host);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    CHECK(s != NULL);
    memcpy(s, data, size);
    s[size] = '\0';
    check_route(s);
    check_listen(s);
    (void)tl_http_mime(s);
    free(s);
    return 0;
}
