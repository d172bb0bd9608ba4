/* cone_read.c — cone-beam matrices from files: the FILE[:FORMAT] argument, the rows of
 * numbers (text or .npy), and the conversions of ASTRA's cone_vec rows and RTK's matrices to
 * our conventions (cone_read.h says what each format means; the XML is cone_read_rtk.c).
 *
 * Conversions are closed-form, not fitted: an ASTRA row is a pinhole camera given by its
 * source s and detector frame (pixel (0,0)'s centre D0, column step U, row step V), so
 * x - s = a U + b V + c (D0 - s) gives (a, b) = pixel (u, v) at depth c: P = [M^-1 | -M^-1 s]
 * with M = [U V D0-s] (columns). RTK's matrix is a product of documented factors, and ours
 * is it times a rotation of the world and a pixel scaling on the detector.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clients/cone_read.h"
#include "clients/npy.h"
#include "gpu/geometry/cone.h"

static const char *const format_names[] = {"p", "astra", "rtk"};

const char *tl_cone_file_format_name(tl_cone_file_format f)
{
    return format_names[f];
}

int tl_cone_matrix_spec(const char *arg, tl_cone_matrix_file *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    const char *colon = strrchr(arg, ':');
    size_t len = strlen(arg);
    bool have_format = false;
    if (colon) {
        for (int f = 0; f < 3; f++)
            if (strcmp(colon + 1, format_names[f]) == 0) {
                m->format = (tl_cone_file_format)f;
                have_format = true;
                len = (size_t)(colon - arg);
            }
        /* a colon followed by a word that is no format: a typo, unless it is the file's
         * name (a file of that whole name exists, or a path or an extension follows) */
        if (!have_format && colon[1] && !strchr(colon + 1, '/') && !strchr(colon + 1, '.') &&
            access(arg, F_OK) != 0) {
            snprintf(err, errlen, "bad --matrices '%s': unknown format '%s' (p, astra, rtk)", arg,
                     colon + 1);
            return -1;
        }
    }
    if (len == 0) {
        snprintf(err, errlen, "bad --matrices '%s': need FILE[:p|astra|rtk]", arg);
        return -1;
    }
    if (!(m->path = strndup(arg, len))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (!have_format)
        m->format = len > 4 && strcasecmp(m->path + len - 4, ".xml") == 0 ? TL_CONE_FILE_RTK
                                                                          : TL_CONE_FILE_P;
    return 0;
}

void tl_cone_matrix_file_free(tl_cone_matrix_file *m)
{
    free(m->path);
    m->path = NULL;
}

/* ---- rows of 12 numbers -------------------------------------------------------------- */

static int grow(double (**rows)[12], uint32_t **lines, uint32_t n, uint32_t *cap)
{
    if (n < *cap)
        return 0;
    uint32_t c = *cap ? 2 * *cap : 64;
    double(*r)[12] = realloc(*rows, (size_t)c * sizeof *r);
    if (!r)
        return -1;
    *rows = r;
    uint32_t *l = realloc(*lines, (size_t)c * sizeof *l);
    if (!l)
        return -1;
    *lines = l;
    *cap = c;
    return 0;
}

/* One line's numbers into row; the count, or -1 with why (a bad token). */
static int parse_line(char *s, double row[12], char *why, size_t wlen)
{
    int k = 0;
    for (char *save = NULL, *tok = strtok_r(s, " \t\r\n,", &save); tok;
         tok = strtok_r(NULL, " \t\r\n,", &save)) {
        char *end;
        errno = 0;
        double v = strtod(tok, &end);
        if (end == tok || *end) {
            snprintf(why, wlen, "number %d: '%.40s' is not a number", k + 1, tok);
            return -1;
        }
        if (!isfinite(v)) {
            snprintf(why, wlen, "number %d: '%.40s' is not finite", k + 1, tok);
            return -1;
        }
        if (k < 12)
            row[k] = v;
        k++;
    }
    return k;
}

static int read_text(const char *path, double (**rows)[12], uint32_t **lines, uint32_t *n,
                     char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open matrix file '%s': %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL, why[128];
    size_t cap = 0;
    uint32_t lineno = 0, rcap = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) != -1) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        if (line[strspn(line, " \t\r\n,")] == '\0')
            continue;
        if (grow(rows, lines, *n, &rcap) != 0) {
            snprintf(err, errlen, "out of memory reading '%s'", path);
            rc = -1;
            break;
        }
        int k = parse_line(line, (*rows)[*n], why, sizeof why);
        if (k < 0) {
            snprintf(err, errlen, "'%s' line %u, %s", path, lineno, why);
            rc = -1;
        } else if (k != 12) {
            snprintf(err, errlen, "'%s' line %u: %d numbers, need 12 (one projection per line)",
                     path, lineno, k);
            rc = -1;
        } else {
            (*lines)[(*n)++] = lineno;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc;
}

static int read_npy(const char *path, double (**rows)[12], uint32_t *n, char *err, size_t errlen)
{
    tl_npy a;
    if (tl_npy_read(path, &a, err, errlen) != 0)
        return -1;
    bool shape =
        (a.ndim == 2 && a.shape[1] == 12) || (a.ndim == 3 && a.shape[1] == 3 && a.shape[2] == 4);
    if (!shape || a.shape[0] > UINT32_MAX) {
        char s[96] = "";
        for (uint32_t i = 0; i < a.ndim; i++)
            snprintf(s + strlen(s), sizeof s - strlen(s), "%s%llu", i ? ", " : "",
                     (unsigned long long)a.shape[i]);
        snprintf(err, errlen, "'%s': an array of shape (%s): need (N, 12) or (N, 3, 4)", path, s);
        tl_npy_free(&a);
        return -1;
    }
    *n = (uint32_t)a.shape[0];
    if (*n && !(*rows = malloc((size_t)*n * sizeof **rows))) {
        snprintf(err, errlen, "out of memory reading '%s'", path);
        tl_npy_free(&a);
        return -1;
    }
    if (*n)
        memcpy(*rows, a.data, (size_t)*n * sizeof **rows);
    tl_npy_free(&a);
    for (uint32_t k = 0; k < *n; k++)
        for (int c = 0; c < 12; c++)
            if (!isfinite((*rows)[k][c])) {
                snprintf(err, errlen, "'%s' row %u, number %d: %g is not finite", path, k, c + 1,
                         (*rows)[k][c]);
                return -1;
            }
    return 0;
}

int tl_cone_read_rows(const char *path, double (**rows)[12], uint32_t **lines, uint32_t *n,
                      char *err, size_t errlen)
{
    *rows = NULL;
    *lines = NULL;
    *n = 0;
    int rc = tl_npy_is(path) ? read_npy(path, rows, n, err, errlen)
                             : read_text(path, rows, lines, n, err, errlen);
    if (rc == 0 && *n == 0) {
        snprintf(err, errlen, "'%s' holds no projections (an empty file, or only comments)", path);
        rc = -1;
    }
    if (rc != 0) {
        free(*rows);
        free(*lines);
        *rows = NULL;
        *lines = NULL;
        *n = 0;
    }
    return rc;
}

/* ---- conversions --------------------------------------------------------------------- */

/* Normalised with the isocentre in front, and a finite source (cone.h, shared with the
 * daemon's "matrices"); 0 or -1 with why. */
static int finish(double P[12], char *why, size_t why_len)
{
    tl_errbuf eb;
    if (tl_cone_matrix_prepare(P, &eb) != TL_OK) {
        snprintf(why, why_len, "%s", eb.msg);
        return -1;
    }
    return 0;
}

int tl_cone_from_astra(const double vec[12], const tl_cone_detector *d, double P[12], char *why,
                       size_t why_len)
{
    tl_errbuf eb; /* the arithmetic is cone.h's, which the tomopackets adapter shares */
    if (tl_cone_from_astra_vec(vec, d->rows, d->cols, P, &eb) != TL_OK) {
        snprintf(why, why_len, "%s", eb.msg);
        return -1;
    }
    return 0;
}

void tl_cone_rtk_matrix(const tl_rtk_projection *p, double M[12])
{
    const double deg = M_PI / 180;
    double g = -p->gantry * deg, o = -p->out_of_plane * deg, i = -p->in_plane * deg;
    double Rz[3][3] = {{cos(i), -sin(i), 0}, {sin(i), cos(i), 0}, {0, 0, 1}};
    double Rx[3][3] = {{1, 0, 0}, {0, cos(o), -sin(o)}, {0, sin(o), cos(o)}};
    double Ry[3][3] = {{cos(g), 0, sin(g)}, {0, 1, 0}, {-sin(g), 0, cos(g)}};
    double A[3][3], R[3][3];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            A[r][c] = 0;
            for (int k = 0; k < 3; k++)
                A[r][c] += Rz[r][k] * Rx[k][c];
        }
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            R[r][c] = 0;
            for (int k = 0; k < 3; k++)
                R[r][c] += A[r][k] * Ry[k][c];
        }
    /* the factors applied to q = R x: minus the source offset, the magnification, then the
     * detector's translation (sx - px, sy - py) in the homogeneous plane */
    double sdd = p->sdd, sx = p->source_x, sy = p->source_y;
    for (int c = 0; c < 3; c++) {
        M[8 + c] = R[2][c];
        M[c] = -sdd * R[0][c] + (sx - p->projection_x) * R[2][c];
        M[4 + c] = -sdd * R[1][c] + (sy - p->projection_y) * R[2][c];
    }
    M[11] = -p->sid;
    M[3] = sdd * sx + (sx - p->projection_x) * M[11];
    M[7] = sdd * sy + (sy - p->projection_y) * M[11];
}

int tl_cone_from_rtk(const double M[12], const tl_cone_detector *d, double P[12], char *why,
                     size_t why_len)
{
    if (!(d->pitch_u > 0) || !(d->pitch_v > 0)) {
        snprintf(why, why_len, "RTK geometry needs the detector's pixel pitch (--pixel-size)");
        return -1;
    }
    double cu = 0.5 * (d->cols - 1.0), cv = 0.5 * (d->rows - 1.0);
    for (int r = 0; r < 3; r++) {
        /* our world (x, y, z) is RTK's (x, z, -y): RTK's x = ours, y = our z, z = -our y */
        const double *m = M + 4 * r;
        double *q = P + 4 * r;
        q[0] = m[0];
        q[1] = -m[2];
        q[2] = m[1];
        q[3] = m[3];
    }
    for (int c = 0; c < 4; c++) { /* detector mm to pixel indices about the middle */
        P[c] = P[c] / d->pitch_u + cu * P[8 + c];
        P[4 + c] = P[4 + c] / d->pitch_v + cv * P[8 + c];
    }
    return finish(P, why, why_len);
}

/* ---- the files ----------------------------------------------------------------------- */

int tl_cone_read(const tl_cone_matrix_file *m, const tl_cone_detector *d, double (**P)[12],
                 uint32_t *n, char *err, size_t errlen)
{
    *P = NULL;
    *n = 0;
    if (m->format == TL_CONE_FILE_RTK)
        return tl_cone_read_rtk(m->path, d, P, n, err, errlen);
    double(*rows)[12];
    uint32_t *lines, count;
    if (tl_cone_read_rows(m->path, &rows, &lines, &count, err, errlen) != 0)
        return -1;
    for (uint32_t k = 0; k < count; k++) {
        char why[600];
        int rc = 0;
        if (m->format == TL_CONE_FILE_ASTRA) {
            double vec[12];
            memcpy(vec, rows[k], sizeof vec);
            rc = tl_cone_from_astra(vec, d, rows[k], why, sizeof why);
        } else
            rc = finish(rows[k], why, sizeof why);
        if (rc != 0) {
            char where[48];
            if (lines)
                snprintf(where, sizeof where, "line %u", lines[k]);
            else
                snprintf(where, sizeof where, "row %u", k);
            snprintf(err, errlen, "'%s' %s (projection %u, %s): %s", m->path, where, k,
                     m->format == TL_CONE_FILE_ASTRA ? "ASTRA cone_vec" : "matrix", why);
            free(rows);
            free(lines);
            return -1;
        }
    }
    free(lines);
    *P = rows;
    *n = count;
    return 0;
}
