/* zcert.c — see zcert.h. The reader is the small subset of ZPL (ZeroMQ RFC 4) that czmq's
 * certificates use: one level of sections and their properties. */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "protocol/zcert.h"

#define MAX_FILE 65536

static int __attribute__((format(printf, 3, 4))) fail(char *err, size_t errlen, const char *fmt,
                                                      ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static bool z85_key_ok(const char *txt)
{
    uint8_t bin[32];
    return strlen(txt) == TL_ZCERT_Z85_LEN && zmq_z85_decode(bin, txt) != NULL;
}

int tl_zcert_new(tl_zcert *c, const char *role, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    if (zmq_curve_keypair(c->public_txt, c->secret_txt) != 0)
        return fail(err, errlen, "cannot make a CURVE key pair: %s (libzmq without CURVE?)",
                    zmq_strerror(zmq_errno()));
    c->has_secret = true;
    if (role)
        snprintf(c->role, sizeof c->role, "%s", role);
    return 0;
}

/* The value of `name = value`: quoted (the quote must close) or bare up to a blank.
 * Returns the value's length, or -1. */
static int parse_value(const char *s, const char **val)
{
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == '"' || *s == '\'') {
        const char *end = strchr(s + 1, *s);
        if (!end)
            return -1;
        for (const char *p = end + 1; *p; p++)
            if (*p == '#')
                break;
            else if (*p != ' ' && *p != '\t')
                return -1;
        *val = s + 1;
        return (int)(end - s - 1);
    }
    /* bare: up to a blank (Z85 has '#', so a comment must follow a blank) */
    const char *end = s;
    while (*end && *end != ' ' && *end != '\t')
        end++;
    for (const char *p = end; *p && *p != '#'; p++)
        if (*p != ' ' && *p != '\t')
            return -1;
    *val = s;
    return (int)(end - s);
}

typedef enum { SEC_NONE, SEC_METADATA, SEC_CURVE, SEC_OTHER } section;

/* One property line of the sections we read. */
static int take(tl_zcert *c, section sec, const char *name, size_t nlen, const char *val,
                int vlen, const char *path, int line, char *err, size_t errlen)
{
    char *dst = NULL;
    size_t cap = 0;
    if (sec == SEC_CURVE && nlen == 10 && strncmp(name, "public-key", 10) == 0)
        dst = c->public_txt, cap = sizeof c->public_txt;
    else if (sec == SEC_CURVE && nlen == 10 && strncmp(name, "secret-key", 10) == 0)
        dst = c->secret_txt, cap = sizeof c->secret_txt;
    else if (sec == SEC_METADATA && nlen == 4 && strncmp(name, "role", 4) == 0)
        dst = c->role, cap = sizeof c->role;
    if (!dst)
        return 0; /* other metadata (czmq writes e.g. name, email) */
    if (*dst)
        return fail(err, errlen, "%s:%d: \"%.*s\" given twice", path, line, (int)nlen, name);
    if (dst != c->role && vlen != TL_ZCERT_Z85_LEN)
        return fail(err, errlen, "%s:%d: %.*s is %d characters, a Z85 key has 40", path, line,
                    (int)nlen, name, vlen);
    if ((size_t)vlen >= cap)
        return fail(err, errlen, "%s:%d: %.*s is longer than %zu characters", path, line,
                    (int)nlen, name, cap - 1);
    if (vlen == 0)
        return fail(err, errlen, "%s:%d: %.*s is empty", path, line, (int)nlen, name);
    memcpy(dst, val, (size_t)vlen);
    dst[vlen] = 0;
    if (dst != c->role && !z85_key_ok(dst))
        return fail(err, errlen, "%s:%d: %.*s is not Z85 text", path, line, (int)nlen, name);
    return 0;
}

static int parse(const char *text, const char *path, tl_zcert *c, char *err, size_t errlen)
{
    section sec = SEC_NONE;
    int line = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char buf[512];
        line++;
        if (len >= sizeof buf)
            return fail(err, errlen, "%s:%d: line longer than %zu characters", path, line,
                        sizeof buf - 1);
        memcpy(buf, p, len);
        buf[len] = 0;
        p += len + (eol ? 1 : 0);
        if (len && buf[len - 1] == '\r')
            buf[--len] = 0;
        const char *s = buf;
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s || *s == '#')
            continue;
        const char *name = s;
        while (*s && (isalnum((unsigned char)*s) || strchr("$-_@.&+/", *s)))
            s++;
        size_t nlen = (size_t)(s - name);
        if (nlen == 0)
            return fail(err, errlen, "%s:%d: expected a name, found '%c'", path, line, *s);
        while (*s == ' ' || *s == '\t')
            s++;
        if (name == buf) { /* a section */
            if (*s && *s != '#')
                return fail(err, errlen, "%s:%d: a section name (\"%.*s\") stands alone", path,
                            line, (int)nlen, name);
            sec = nlen == 8 && strncmp(name, "metadata", 8) == 0 ? SEC_METADATA
                  : nlen == 5 && strncmp(name, "curve", 5) == 0  ? SEC_CURVE
                                                                 : SEC_OTHER;
            continue;
        }
        if (sec == SEC_NONE)
            return fail(err, errlen, "%s:%d: \"%.*s\" is indented but no section is open", path,
                        line, (int)nlen, name);
        if (*s != '=')
            return fail(err, errlen, "%s:%d: expected \"%.*s = value\"", path, line, (int)nlen,
                        name);
        const char *val;
        int vlen = parse_value(s + 1, &val);
        if (vlen < 0)
            return fail(err, errlen, "%s:%d: the value of \"%.*s\" is not closed by its quote "
                        "or has text after it", path, line, (int)nlen, name);
        if (take(c, sec, name, nlen, val, vlen, path, line, err, errlen) != 0)
            return -1;
    }
    if (!c->public_txt[0])
        return fail(err, errlen, "%s: no public-key in a curve section: not a ZeroMQ "
                    "certificate", path);
    c->has_secret = c->secret_txt[0] != 0;
    if (c->has_secret) {
        char derived[TL_ZCERT_Z85_LEN + 1];
        if (zmq_curve_public(derived, c->secret_txt) != 0 || strcmp(derived, c->public_txt) != 0)
            return fail(err, errlen, "%s: the secret-key does not belong to the public-key",
                        path);
    }
    return 0;
}

int tl_zcert_load(const char *path, tl_zcert *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(err, errlen, "%s: %s", path, strerror(errno));
    char *text = malloc(MAX_FILE + 1);
    size_t n = text ? fread(text, 1, MAX_FILE + 1, f) : 0;
    bool bad = text && ferror(f);
    fclose(f);
    if (!text)
        return fail(err, errlen, "%s: out of memory", path);
    int rc;
    if (bad)
        rc = fail(err, errlen, "%s: cannot read it", path);
    else if (n > MAX_FILE)
        rc = fail(err, errlen, "%s: larger than %d bytes: not a certificate", path, MAX_FILE);
    else if (memchr(text, 0, n))
        rc = fail(err, errlen, "%s: a binary file, not a certificate", path);
    else {
        text[n] = 0;
        rc = parse(text, path, c, err, errlen);
    }
    free(text);
    if (rc != 0)
        memset(c, 0, sizeof *c);
    return rc;
}

static int write_file(const char *path, const tl_zcert *c, bool secret, bool overwrite, char *err,
                      size_t errlen)
{
    int flags = O_WRONLY | O_CREAT | O_TRUNC | (overwrite ? 0 : O_EXCL);
    int fd = open(path, flags, secret ? 0600 : 0644);
    if (fd < 0)
        return fail(err, errlen, "%s: %s%s", path, strerror(errno),
                    errno == EEXIST ? " (will not overwrite a key)" : "");
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return fail(err, errlen, "%s: %s", path, strerror(errno));
    }
    char when[64];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
    fprintf(f, "#   ****  Generated on %s by tomolive keygen  ****\n", when);
    if (secret)
        fprintf(f, "#   ZeroMQ CURVE **Secret** Certificate\n"
                   "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n");
    else
        fprintf(f, "#   ZeroMQ CURVE Public Certificate\n"
                   "#   Exchange securely, or use a secure mechanism to verify the contents\n"
                   "#   of this file after exchange.\n\n");
    fprintf(f, "metadata\n");
    if (c->role[0])
        fprintf(f, "    role = \"%s\"\n", c->role);
    fprintf(f, "curve\n    public-key = \"%s\"\n", c->public_txt);
    if (secret)
        fprintf(f, "    secret-key = \"%s\"\n", c->secret_txt);
    if (fclose(f) != 0)
        return fail(err, errlen, "%s: %s", path, strerror(errno));
    return 0;
}

int tl_zcert_save(const tl_zcert *c, const char *base, bool overwrite, char *err, size_t errlen)
{
    char pub[4096], sec[4096];
    if ((size_t)snprintf(pub, sizeof pub, "%s.key", base) >= sizeof pub ||
        (size_t)snprintf(sec, sizeof sec, "%s.key_secret", base) >= sizeof sec)
        return fail(err, errlen, "%s: path too long", base);
    if (!c->has_secret)
        return fail(err, errlen, "%s: no secret key to save", base);
    if (!overwrite && access(pub, F_OK) == 0)
        return fail(err, errlen, "%s: exists (will not overwrite a key)", pub);
    if (write_file(sec, c, true, overwrite, err, errlen) != 0)
        return -1;
    return write_file(pub, c, false, overwrite, err, errlen);
}

int tl_zcert_client(void *sock, const tl_zcert *client, const tl_zcert *server, char *err,
                    size_t errlen)
{
    if (!client->has_secret)
        return fail(err, errlen, "the client key has no secret-key (give NAME.key_secret, "
                    "not NAME.key)");
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server->public_txt, TL_ZCERT_Z85_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, client->public_txt, TL_ZCERT_Z85_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, client->secret_txt, TL_ZCERT_Z85_LEN) != 0)
        return fail(err, errlen, "cannot set the CURVE keys: %s", zmq_strerror(zmq_errno()));
    return 0;
}

int tl_zcert_server(void *sock, const tl_zcert *server, char *err, size_t errlen)
{
    int one = 1;
    if (!server->has_secret)
        return fail(err, errlen, "the server key has no secret-key");
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, server->secret_txt, TL_ZCERT_Z85_LEN) != 0)
        return fail(err, errlen, "cannot make a CURVE server: %s", zmq_strerror(zmq_errno()));
    return 0;
}

int tl_zcert_client_from(void *sock, const char *key_path, const char *server_key_path,
                         char *err, size_t errlen)
{
    if (!key_path || !*key_path)
        key_path = getenv("TOMOLIVE_KEY");
    if (!server_key_path || !*server_key_path)
        server_key_path = getenv("TOMOLIVE_SERVER_KEY");
    bool have_key = key_path && *key_path, have_server = server_key_path && *server_key_path;
    if (!have_key && !have_server)
        return 0;
    if (!have_key || !have_server)
        return fail(err, errlen, "CURVE needs both a client key (--key, TOMOLIVE_KEY) and the "
                    "server's public key (--server-key, TOMOLIVE_SERVER_KEY); %s is missing",
                    have_key ? "the server key" : "the client key");
    tl_zcert me, server;
    if (tl_zcert_load(key_path, &me, err, errlen) != 0 ||
        tl_zcert_load(server_key_path, &server, err, errlen) != 0)
        return -1;
    if (!me.has_secret)
        return fail(err, errlen, "%s has no secret-key (give NAME.key_secret)", key_path);
    return tl_zcert_client(sock, &me, &server, err, errlen);
}
