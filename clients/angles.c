/* angles.c — projection angles and frame indices from option values and text files
 * (see angles.h). One line reader serves both file kinds; only the parsing of a value
 * differs. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/angles.h"

bool tl_angles_parse_deg(const char *s, uint32_t default_count, double **out, uint32_t *n)
{
    char *end;
    double start = strtod(s, &end);
    if (end == s || *end != ':')
        return false;
    const char *p = end + 1;
    double stop = strtod(p, &end);
    if (end == p || (*end != ':' && !(*end == '\0' && default_count > 0)))
        return false;
    long long count = default_count;
    if (*end == ':') {
        p = end + 1;
        errno = 0;
        count = strtoll(p, &end, 10);
        if (end == p || *end || errno)
            return false;
    }
    if (count < 1 || count > 10000000 || !isfinite(start) || !isfinite(stop) || start == stop)
        return false;
    double *a = malloc((size_t)count * sizeof *a);
    if (!a)
        return false;
    for (long long i = 0; i < count; i++)
        a[i] = (start + (double)i * (stop - start) / (double)count) * M_PI / 180.0;
    *out = a;
    *n = (uint32_t)count;
    return true;
}

/* Parses one value (the rest of the line is blank) into dst; false if it is not one. */
typedef bool (*parse_fn)(const char *tok, void *dst);

bool tl_angles_arc(const double *a, uint32_t n, double *start, double *range, bool *full)
{
    if (n < 2)
        return false;
    for (uint32_t i = 1; i < n; i++)
        if (!(a[i] > a[i - 1]))
            return false;
    double step = (a[n - 1] - a[0]) / (n - 1);
    *start = a[0] - 0.5 * step;
    *range = n * step;
    *full = *range >= 2 * M_PI - 0.5 * step;
    return true;
}

static bool parse_degrees(const char *tok, void *dst)
{
    char *end;
    double deg = strtod(tok, &end);
    if (end == tok || end[strspn(end, " \t\r\n")] || !isfinite(deg))
        return false;
    *(double *)dst = deg * M_PI / 180.0;
    return true;
}

static bool parse_index(const char *tok, void *dst)
{
    if (*tok < '0' || *tok > '9') /* strtoull would take "-1" as a huge number */
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(tok, &end, 10);
    if (end == tok || errno || end[strspn(end, " \t\r\n")])
        return false;
    *(uint64_t *)dst = v;
    return true;
}

/* Reads one value per line into a malloc'ed array of elements of size elem. what: "angles"
 * or "indices"; expected: what a line should hold, for messages. */
static int read_list(const char *path, size_t elem, parse_fn parse, const char *what,
                     const char *expected, void **out, uint32_t *n, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open %s file '%s': %s", what, path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0, count = 0, alloc = 0, lineno = 0;
    unsigned char *a = NULL;
    int rc = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *p = line + strspn(line, " \t\r\n");
        if (!*p)
            continue;
        if (count == alloc) {
            alloc = alloc ? 2 * alloc : 1024;
            unsigned char *na = alloc <= UINT32_MAX ? realloc(a, alloc * elem) : NULL;
            if (!na) {
                snprintf(err, errlen, "out of memory reading '%s'", path);
                rc = -1;
                break;
            }
            a = na;
        }
        if (!parse(p, a + count * elem)) {
            p[strcspn(p, "\r\n")] = '\0';
            snprintf(err, errlen, "%s file '%s' line %zu: not %s: '%s'", what, path, lineno,
                     expected, p);
            rc = -1;
            break;
        }
        count++;
    }
    free(line);
    fclose(f);
    if (rc == 0 && count == 0) {
        snprintf(err, errlen, "%s file '%s' holds no %s", what, path, what);
        rc = -1;
    }
    if (rc) {
        free(a);
        return rc;
    }
    *out = a;
    *n = (uint32_t)count;
    return 0;
}

int tl_angles_read_file(const char *path, double **out, uint32_t *n, char *err, size_t errlen)
{
    void *a;
    if (read_list(path, sizeof(double), parse_degrees, "angles", "an angle in degrees", &a, n, err,
                  errlen) != 0)
        return -1;
    *out = a;
    return 0;
}

int tl_indices_read_file(const char *path, uint64_t **out, uint32_t *n, char *err, size_t errlen)
{
    void *a;
    if (read_list(path, sizeof(uint64_t), parse_index, "indices", "a frame index", &a, n, err,
                  errlen) != 0)
        return -1;
    *out = a;
    return 0;
}
