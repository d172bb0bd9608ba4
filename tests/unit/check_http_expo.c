/* check_http_expo.c — see check_http_expo.h. */
#include "config.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_http_expo.h"

#define MAX_SERIES 4096
#define MAX_GROUPS 64

typedef struct {
    char key[512]; /* the series' labels without le */
    double last_le;
    double last_count;
    bool inf, count, sum;
    double inf_count, count_value;
} group;

typedef struct {
    char name[128], type[16];
    bool help, typed;
    group g[MAX_GROUPS];
    int ng;
} family;

typedef struct {
    int line;
    char *err;
    size_t errlen;
} ctx;

static int __attribute__((format(printf, 2, 3))) bad(ctx *c, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "line %d: %s", c->line, msg);
    return -1;
}

static size_t name_len(const char *s, bool colon)
{
    size_t n = 0;
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_' || (colon && s[0] == ':')))
        return 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_' || (colon && s[n] == ':'))
        n++;
    return n;
}

/* A float as Go's strconv.ParseFloat takes it, minus hex: [+-]digits[.digits][e[+-]digits]. */
static bool parse_value(const char *s, size_t n, double *v)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = 0;
    if (strcmp(buf, "+Inf") == 0 || strcmp(buf, "-Inf") == 0 || strcmp(buf, "NaN") == 0) {
        *v = buf[0] == 'N' ? NAN : buf[0] == '+' ? INFINITY : -INFINITY;
        return true;
    }
    const char *p = buf;
    if (*p == '+' || *p == '-')
        p++;
    size_t digits = strspn(p, "0123456789");
    p += digits;
    if (*p == '.') {
        size_t frac = strspn(p + 1, "0123456789");
        digits += frac;
        p += 1 + frac;
    }
    if (!digits)
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        size_t e = strspn(p, "0123456789");
        if (!e)
            return false;
        p += e;
    }
    if (*p)
        return false;
    *v = strtod(buf, NULL);
    return true;
}

static int end_family(ctx *c, family *f)
{
    if (strcmp(f->type, "histogram") != 0)
        return 0;
    for (int i = 0; i < f->ng; i++) {
        group *g = &f->g[i];
        if (!g->inf)
            return bad(c, "histogram %s{%s} has no le=\"+Inf\" bucket", f->name, g->key);
        if (!g->count || !g->sum)
            return bad(c, "histogram %s{%s} lacks _count or _sum", f->name, g->key);
        if (g->inf_count != g->count_value)
            return bad(c, "histogram %s{%s}: +Inf bucket %g != _count %g", f->name, g->key,
                       g->inf_count, g->count_value);
    }
    return 0;
}

static group *find_group(family *f, const char *key)
{
    for (int i = 0; i < f->ng; i++)
        if (strcmp(f->g[i].key, key) == 0)
            return &f->g[i];
    if (f->ng == MAX_GROUPS)
        return NULL;
    group *g = &f->g[f->ng++];
    memset(g, 0, sizeof *g);
    snprintf(g->key, sizeof g->key, "%s", key);
    g->last_le = -INFINITY;
    return g;
}

/* One sample line. */
static int sample(ctx *c, family *f, const char *s, size_t n, char **seen, int *nseen)
{
    size_t nl = name_len(s, true);
    if (!nl)
        return bad(c, "not a metric name");
    char name[128];
    if (nl >= sizeof name)
        return bad(c, "name too long");
    memcpy(name, s, nl);
    name[nl] = 0;
    size_t i = nl;
    char key[512] = "", le[256] = "";
    bool has_le = false;
    if (i < n && s[i] == '{') {
        i++;
        bool first = true;
        while (i < n && s[i] != '}') {
            if (!first) {
                if (s[i] != ',')
                    return bad(c, "expected ',' between labels");
                i++;
            }
            first = false;
            size_t ln = name_len(s + i, false);
            if (!ln || i + ln + 1 >= n || s[i + ln] != '=' || s[i + ln + 1] != '"')
                return bad(c, "expected label=\"value\"");
            char lname[64];
            snprintf(lname, sizeof lname, "%.*s", (int)ln, s + i);
            i += ln + 2;
            char val[256];
            size_t vn = 0;
            for (;;) {
                if (i >= n)
                    return bad(c, "unterminated label value");
                if (s[i] == '"')
                    break;
                if (s[i] == '\\') {
                    if (i + 1 >= n || !strchr("\\\"n", s[i + 1]))
                        return bad(c, "bad escape in a label value");
                    if (vn + 2 < sizeof val) {
                        val[vn++] = s[i];
                        val[vn++] = s[i + 1];
                    }
                    i += 2;
                    continue;
                }
                if (vn + 1 < sizeof val)
                    val[vn++] = s[i];
                i++;
            }
            val[vn] = 0;
            i++; /* closing quote */
            if (strcmp(lname, "le") == 0) {
                has_le = true;
                snprintf(le, sizeof le, "%s", val);
            } else {
                size_t k = strlen(key);
                snprintf(key + k, sizeof key - k, "%s%s=\"%s\"", k ? "," : "", lname, val);
            }
        }
        if (i >= n)
            return bad(c, "unterminated label set");
        i++;
    }
    if (i >= n || s[i] != ' ')
        return bad(c, "expected a space before the value");
    i++;
    size_t vstart = i;
    while (i < n && s[i] != ' ')
        i++;
    double v;
    if (!parse_value(s + vstart, i - vstart, &v))
        return bad(c, "\"%.*s\" is not a value", (int)(i - vstart), s + vstart);
    if (i < n) { /* a timestamp: an integer */
        i++;
        size_t t = i + (i < n && s[i] == '-');
        if (t >= n || strspn(s + t, "0123456789") != n - t)
            return bad(c, "bad timestamp");
    }

    /* which family, and its rules */
    if (!f->typed || !f->help)
        return bad(c, "sample %s before the HELP and TYPE of its family", name);
    const char *suffix = NULL;
    if (strncmp(name, f->name, strlen(f->name)) == 0)
        suffix = name + strlen(f->name);
    bool hist = strcmp(f->type, "histogram") == 0;
    if (!suffix ||
        (hist ? strcmp(suffix, "_bucket") && strcmp(suffix, "_sum") && strcmp(suffix, "_count")
              : *suffix != 0))
        return bad(c, "sample %s does not belong to family %s (%s)", name, f->name, f->type);
    if (strcmp(f->type, "counter") == 0 && !(v >= 0))
        return bad(c, "counter %s is negative or NaN", name);
    if (has_le != (hist && strcmp(suffix, "_bucket") == 0))
        return bad(c, "le is a label of histogram buckets only");

    char series[700];
    snprintf(series, sizeof series, "%s{%s%s%s}", name, key, has_le ? ",le=" : "", le);
    for (int k = 0; k < *nseen; k++)
        if (strcmp(seen[k], series) == 0)
            return bad(c, "series %s appears twice", series);
    if (*nseen == MAX_SERIES)
        return bad(c, "too many series");
    seen[(*nseen)++] = strdup(series);

    if (hist) {
        group *g = find_group(f, key);
        if (!g)
            return bad(c, "too many label sets");
        if (strcmp(suffix, "_bucket") == 0) {
            double b;
            if (!parse_value(le, strlen(le), &b) || isnan(b))
                return bad(c, "le=\"%s\" is not a bound", le);
            if (g->inf)
                return bad(c, "a bucket after le=\"+Inf\"");
            if (!(b > g->last_le))
                return bad(c, "le=\"%s\" does not increase", le);
            if (v < g->last_count)
                return bad(c, "bucket count %g below the previous bucket's %g", v, g->last_count);
            g->last_le = b;
            g->last_count = v;
            if (isinf(b)) {
                if (strcmp(le, "+Inf") != 0)
                    return bad(c, "the last bound must be written \"+Inf\"");
                g->inf = true;
                g->inf_count = v;
            }
        } else if (strcmp(suffix, "_count") == 0) {
            g->count = true;
            g->count_value = v;
        } else {
            g->sum = true;
        }
    }
    return 0;
}

int tl_expo_check(const char *text, char *err, size_t errlen)
{
    ctx c = {0, err, errlen};
    static family fams[256];
    int nf = 0;
    family *cur = NULL;
    char **seen = calloc(MAX_SERIES, sizeof *seen);
    int nseen = 0, rc = 0;
    if (!seen)
        return -1;
    const char *p = text;
    if (!*p)
        rc = bad(&c, "empty");
    while (rc == 0 && *p) {
        c.line++;
        const char *nl = strchr(p, '\n');
        if (!nl) {
            rc = bad(&c, "the last line does not end in a newline");
            break;
        }
        size_t n = (size_t)(nl - p);
        if (n == 0) {
            rc = bad(&c, "blank line");
        } else if (memchr(p, '\r', n)) {
            rc = bad(&c, "carriage return");
        } else if (p[0] == '#') {
            bool help = n > 7 && strncmp(p, "# HELP ", 7) == 0;
            bool type = n > 7 && strncmp(p, "# TYPE ", 7) == 0;
            if (!help && !type) {
                rc = bad(&c, "a comment that is neither HELP nor TYPE");
            } else {
                const char *q = p + 7;
                size_t ln = name_len(q, true);
                char name[128];
                if (!ln || ln >= sizeof name || (q + ln < nl && q[ln] != ' ')) {
                    rc = bad(&c, "bad metric name");
                } else {
                    snprintf(name, sizeof name, "%.*s", (int)ln, q);
                    const char *rest = q + ln < nl ? q + ln + 1 : nl;
                    family *f = NULL;
                    for (int i = 0; i < nf; i++)
                        if (strcmp(fams[i].name, name) == 0)
                            f = &fams[i];
                    if (!f) {
                        if (cur && (rc = end_family(&c, cur)) != 0)
                            break;
                        if (nf == 256) {
                            rc = bad(&c, "too many families");
                            break;
                        }
                        f = &fams[nf++];
                        memset(f, 0, sizeof *f);
                        snprintf(f->name, sizeof f->name, "%s", name);
                        cur = f;
                    } else if (f != cur) {
                        rc = bad(&c, "family %s is split", name);
                        break;
                    }
                    if (help) {
                        if (f->help)
                            rc = bad(&c, "second HELP for %s", name);
                        f->help = true;
                        for (const char *h = rest; rc == 0 && h < nl; h++)
                            if (*h == '\\' && (h + 1 >= nl || !strchr("\\n", h[1])))
                                rc = bad(&c, "bad escape in HELP");
                            else if (*h == '\\')
                                h++;
                    } else {
                        size_t tn = (size_t)(nl - rest);
                        static const char *const types[] = {"counter", "gauge", "histogram",
                                                            "summary", "untyped"};
                        bool ok = false;
                        for (int i = 0; i < 5; i++)
                            if (tn == strlen(types[i]) && strncmp(rest, types[i], tn) == 0)
                                ok = true;
                        if (f->typed)
                            rc = bad(&c, "second TYPE for %s", name);
                        else if (!ok)
                            rc = bad(&c, "unknown type \"%.*s\"", (int)tn, rest);
                        else if (tn == 7 && strncmp(rest, "counter", 7) == 0 &&
                                 (strlen(name) < 6 ||
                                  strcmp(name + strlen(name) - 6, "_total") != 0))
                            rc = bad(&c, "counter %s does not end in _total", name);
                        else {
                            f->typed = true;
                            snprintf(f->type, sizeof f->type, "%.*s", (int)tn, rest);
                        }
                    }
                }
            }
        } else {
            rc = cur ? sample(&c, cur, p, n, seen, &nseen) : bad(&c, "a sample before any TYPE");
        }
        p = nl + 1;
    }
    if (rc == 0 && cur)
        rc = end_family(&c, cur);
    for (int i = 0; i < nseen; i++)
        free(seen[i]);
    free(seen);
    return rc;
}

bool tl_expo_value(const char *text, const char *series, double *value)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ') {
            const char *v = p + n + 1;
            size_t len = strcspn(v, " \n");
            return parse_value(v, len, value);
        }
    }
    return false;
}
