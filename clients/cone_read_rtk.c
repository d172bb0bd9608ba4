/* cone_read_rtk.c — RTK's ThreeDCircularProjectionGeometry XML to cone-beam matrices
 * (cone_read.h says what the format means and how its axes map to ours).
 *
 * Parsed with libxml2 (no network, no DTD, entities left alone), then walked in document
 * order the way RTK's SAX reader (rtkThreeDCircularProjectionGeometryXMLFileReader.cxx)
 * consumes it: each parameter element sets the current value, wherever it stands, and each
 * <Projection> ends with a projection of the current values. So a parameter before the
 * projections is global and one inside a projection holds for it and those after, as in
 * RTK. Element names compare case-insensitively, as in RTK; "Angle" is RTK's old name of
 * GantryAngle. Unlike RTK, an element this reader does not know is an error rather than
 * skipped, so a parameter of a later RTK is never silently dropped.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "clients/cone_read.h"

#define RTK_MATRIX_TOL 1e-3 /* RTK's own check of <Matrix> against the parameters */

enum {
    SID,
    SDD,
    GANTRY,
    OUT_OF_PLANE,
    IN_PLANE,
    SOURCE_X,
    SOURCE_Y,
    PROJECTION_X,
    PROJECTION_Y,
    RADIUS,
    COLLIMATION, /* the four Collimation* share a slot: read, not used */
    NPARAM
};

static const struct {
    const char *name;
    int slot;
} params[] = {
    {"SourceToIsocenterDistance", SID},
    {"SourceToDetectorDistance", SDD},
    {"GantryAngle", GANTRY},
    {"Angle", GANTRY},
    {"OutOfPlaneAngle", OUT_OF_PLANE},
    {"InPlaneAngle", IN_PLANE},
    {"SourceOffsetX", SOURCE_X},
    {"SourceOffsetY", SOURCE_Y},
    {"ProjectionOffsetX", PROJECTION_X},
    {"ProjectionOffsetY", PROJECTION_Y},
    {"RadiusCylindricalDetector", RADIUS},
    {"CollimationUInf", COLLIMATION},
    {"CollimationUSup", COLLIMATION},
    {"CollimationVInf", COLLIMATION},
    {"CollimationVSup", COLLIMATION},
};

typedef struct {
    const char *path;
    const tl_cone_detector *d;
    double v[NPARAM];
    double (*P)[12];
    uint32_t n, cap;
    char *err;
    size_t errlen;
} walk;

static int fail_at(walk *w, const xmlNode *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_at(walk *w, const xmlNode *e, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(w->err, w->errlen, "'%s' line %ld, <%s>: %s", w->path, xmlGetLineNo(e),
             (const char *)e->name, msg);
    return -1;
}

static int param_slot(const xmlNode *e)
{
    for (size_t i = 0; i < sizeof params / sizeof *params; i++)
        if (xmlStrcasecmp(e->name, (const xmlChar *)params[i].name) == 0)
            return params[i].slot;
    return -1;
}

/* The element's text as `want` numbers (1, or 12 for <Matrix>); 0 or -1 with the error. */
static int numbers(walk *w, const xmlNode *e, double *v, int want)
{
    xmlChar *text = xmlNodeGetContent(e);
    if (!text)
        return fail_at(w, e, "out of memory");
    char *p = (char *)text;
    int k = 0, rc = 0;
    for (;;) {
        p += strspn(p, " \t\r\n");
        if (!*p)
            break;
        char *end;
        double x = strtod(p, &end);
        size_t tl = strcspn(p, " \t\r\n");
        char tok[48];
        snprintf(tok, sizeof tok, "%.*s", (int)(tl < 40 ? tl : 40), p);
        if (end == p || (*end && !strchr(" \t\r\n", *end))) {
            rc = fail_at(w, e, "'%s' is not a number", tok);
            break;
        }
        if (!isfinite(x)) {
            rc = fail_at(w, e, "'%s' is not finite", tok);
            break;
        }
        if (k < want)
            v[k] = x;
        k++;
        p = end;
    }
    if (rc == 0 && k != want)
        rc = fail_at(w, e, "%d numbers, need %d", k, want);
    xmlFree(text);
    return rc;
}

/* The current values as projection number w->n, checked against the <Matrix> given. */
static int projection(walk *w, const xmlNode *e, const double *given)
{
    if (w->v[SDD] == 0)
        return fail_at(w, e,
                       "projection %u: SourceToDetectorDistance is 0 (missing, or RTK's "
                       "parallel geometry): cone beam needs a source-detector distance",
                       w->n);
    if (w->v[RADIUS] != 0)
        return fail_at(w, e,
                       "projection %u: RadiusCylindricalDetector %g: a cylindrical detector "
                       "has no 3x4 projection matrix (flat panels only)",
                       w->n, w->v[RADIUS]);
    tl_rtk_projection p = {.sid = w->v[SID],
                           .sdd = w->v[SDD],
                           .gantry = w->v[GANTRY],
                           .out_of_plane = w->v[OUT_OF_PLANE],
                           .in_plane = w->v[IN_PLANE],
                           .source_x = w->v[SOURCE_X],
                           .source_y = w->v[SOURCE_Y],
                           .projection_x = w->v[PROJECTION_X],
                           .projection_y = w->v[PROJECTION_Y]};
    double M[12];
    tl_cone_rtk_matrix(&p, M);
    for (int k = 0; given && k < 12; k++)
        if (fabs(given[k] - M[k]) > RTK_MATRIX_TOL)
            return fail_at(w, e,
                           "projection %u: <Matrix> and parameters disagree (RTK refuses this "
                           "too): entry [%d][%d] is %.10g in <Matrix> but %.10g from SID %g, "
                           "SDD %g, GantryAngle %g, OutOfPlaneAngle %g, InPlaneAngle %g, "
                           "SourceOffset %g,%g, ProjectionOffset %g,%g",
                           w->n, k / 4, k % 4, given[k], M[k], p.sid, p.sdd, p.gantry,
                           p.out_of_plane, p.in_plane, p.source_x, p.source_y, p.projection_x,
                           p.projection_y);
    if (w->n == w->cap) {
        uint32_t c = w->cap ? 2 * w->cap : 64;
        double(*q)[12] = realloc(w->P, (size_t)c * sizeof *q);
        if (!q)
            return fail_at(w, e, "out of memory");
        w->P = q;
        w->cap = c;
    }
    char why[600];
    if (tl_cone_from_rtk(M, w->d, w->P[w->n], why, sizeof why) != 0)
        return fail_at(w, e, "projection %u: %s", w->n, why);
    w->n++;
    return 0;
}

/* The children of e (the root, or a <Projection> when in_projection). */
static int children(walk *w, const xmlNode *e, bool in_projection)
{
    double matrix[12];
    bool have_matrix = false;
    for (const xmlNode *c = e->children; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE)
            continue;
        int slot = param_slot(c);
        if (slot >= 0) {
            if (numbers(w, c, &w->v[slot], 1) != 0)
                return -1;
        } else if (xmlStrcasecmp(c->name, (const xmlChar *)"Matrix") == 0) {
            if (!in_projection)
                return fail_at(w, c, "a <Matrix> outside a <Projection>");
            if (numbers(w, c, matrix, 12) != 0)
                return -1;
            have_matrix = true;
        } else if (xmlStrcasecmp(c->name, (const xmlChar *)"Projection") == 0) {
            if (in_projection)
                return fail_at(w, c, "a <Projection> inside a <Projection>");
            if (children(w, c, true) != 0)
                return -1;
        } else {
            return fail_at(w, c,
                           "not a parameter of RTK's ThreeDCircularProjectionGeometry that this "
                           "reader knows (refused rather than ignored)");
        }
    }
    return in_projection ? projection(w, e, have_matrix ? matrix : NULL) : 0;
}

static int check_root(walk *w, const xmlNode *root)
{
    if (!root || xmlStrcmp(root->name, (const xmlChar *)"RTKThreeDCircularGeometry") != 0) {
        snprintf(w->err, w->errlen,
                 "'%s': the root element is <%s>, not RTK's <RTKThreeDCircularGeometry>", w->path,
                 root ? (const char *)root->name : "");
        return -1;
    }
    xmlChar *version = xmlGetProp(root, (const xmlChar *)"version");
    bool ok = version && (xmlStrcmp(version, (const xmlChar *)"2") == 0 ||
                          xmlStrcmp(version, (const xmlChar *)"3") == 0);
    if (!ok)
        snprintf(w->err, w->errlen,
                 "'%s' line %ld: RTK geometry version '%s': versions 2 and 3 are read (as by "
                 "RTK)",
                 w->path, xmlGetLineNo(root), version ? (const char *)version : "(none)");
    xmlFree(version);
    return ok ? 0 : -1;
}

int tl_cone_read_rtk(const char *path, const tl_cone_detector *d, double (**P)[12], uint32_t *n,
                     char *err, size_t errlen)
{
    *P = NULL;
    *n = 0;
    FILE *f = fopen(path, "r"); /* libxml2's own message for this is vague */
    if (!f) {
        snprintf(err, errlen, "cannot open RTK geometry '%s': %m", path);
        return -1;
    }
    fclose(f);
    xmlParserCtxtPtr ctx = xmlNewParserCtxt();
    if (!ctx) {
        snprintf(err, errlen, "out of memory for the XML parser");
        return -1;
    }
    xmlDocPtr doc = xmlCtxtReadFile(ctx, path, NULL,
                                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc) {
        xmlErrorPtr e = xmlCtxtGetLastError(ctx);
        char msg[300];
        snprintf(msg, sizeof msg, "%s", e && e->message ? e->message : "unreadable");
        msg[strcspn(msg, "\n")] = '\0';
        snprintf(err, errlen, "'%s' line %d: not XML: %s", path, e ? e->line : 0, msg);
        xmlFreeParserCtxt(ctx);
        return -1;
    }
    walk w = {.path = path, .d = d, .err = err, .errlen = errlen};
    const xmlNode *root = xmlDocGetRootElement(doc);
    int rc = check_root(&w, root);
    if (rc == 0)
        rc = children(&w, root, false);
    if (rc == 0 && w.n == 0) {
        snprintf(err, errlen, "'%s' holds no <Projection>", path);
        rc = -1;
    }
    xmlFreeDoc(doc);
    xmlFreeParserCtxt(ctx);
    if (rc != 0) {
        free(w.P);
        return -1;
    }
    *P = w.P;
    *n = w.n;
    return 0;
}
