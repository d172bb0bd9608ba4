/* release_allow.c — see release_allow.h. */
#include <config.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "daemon/ingest/release_allow.h"

static bool is_loopback(const char *host)
{
    return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
           strcasecmp(host, "localhost") == 0;
}

/* Peer-Address of an IPv4 peer on a dual-stack socket reads ::ffff:a.b.c.d. */
static const char *plain_address(const char *a)
{
    return strncasecmp(a, "::ffff:", 7) == 0 && strchr(a + 7, '.') ? a + 7 : a;
}

static bool listed(const char *host, const char *hosts)
{
    size_t n = strlen(host);
    for (const char *p = hosts; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncasecmp(p, host, n) == 0)
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}

bool tl_release_allowed(const char *endpoint, const char *peer, const char *hosts, char *why,
                        size_t whylen)
{
    if (strncmp(endpoint, "ipc://", 6) == 0 || strncmp(endpoint, "inproc://", 9) == 0)
        return true;
    if (strncmp(endpoint, "tcp://", 6) != 0) {
        snprintf(why, whylen, "release endpoint \"%s\": only tcp://, ipc:// and inproc:// are "
                 "allowed", endpoint);
        return false;
    }
    const char *host = endpoint + 6, *colon = strrchr(host, ':');
    if (!colon || colon == host || strchr(host, ';')) {
        snprintf(why, whylen, "release endpoint \"%s\": expected tcp://HOST:PORT", endpoint);
        return false;
    }
    char name[256];
    size_t len = (size_t)(colon - host);
    if (host[0] == '[' && len >= 2 && host[len - 1] == ']') { /* [IPv6] */
        host++;
        len -= 2;
    }
    if (len >= sizeof name) {
        snprintf(why, whylen, "release endpoint \"%s\": host too long", endpoint);
        return false;
    }
    memcpy(name, host, len);
    name[len] = 0;
    if (is_loopback(name) || (peer && *peer && strcasecmp(name, plain_address(peer)) == 0) ||
        listed(name, hosts))
        return true;
    snprintf(why, whylen, "release endpoint \"%s\" names host %s, which is not the scan's "
             "sender (%s), loopback, or in security.release_hosts", endpoint, name,
             peer && *peer ? plain_address(peer) : "unknown");
    return false;
}
