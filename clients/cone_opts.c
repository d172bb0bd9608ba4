/* cone_opts.c — cone-beam options and the simulated cone-beam sample (cone_opts.h). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cone_opts.h"
#include "gpu/geometry/cone.h"
#include "gpu/phantom_cone.h"

static const char *const names[] = {"geometry", "source-origin", "source-detector",
                                    "pixel-size", "offset",        "matrices"};

bool tl_cone_opt_is(const char *name)
{
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

/* n numbers separated by commas, each finite (and > 0 when positive); false otherwise. */
static bool numbers(const char *s, double *v, int n, bool positive)
{
    const char *p = s;
    for (int i = 0; i < n; i++) {
        char *end;
        v[i] = strtod(p, &end);
        if (end == p || !isfinite(v[i]) || (positive && !(v[i] > 0)))
            return false;
        if (i + 1 < n && *end != ',')
            return false;
        if (i + 1 == n && *end)
            return false;
        p = end + 1;
    }
    return true;
}

bool tl_cone_opt(tl_cone_opts *o, const char *name, const char *value, char *why,
                 size_t why_len)
{
    double v[2] = {0, 0};
    if (strcmp(name, "geometry") == 0) {
        if (strcmp(value, "cone") && strcmp(value, "parallel")) {
            snprintf(why, why_len, "bad --geometry '%s': parallel or cone", value);
            return false;
        }
        o->cone = strcmp(value, "cone") == 0;
        return true;
    }
    o->given = strcmp(name, "source-origin") == 0     ? "source-origin"
               : strcmp(name, "source-detector") == 0 ? "source-detector"
               : strcmp(name, "pixel-size") == 0      ? "pixel-size"
               : strcmp(name, "offset") == 0          ? "offset"
                                                      : "matrices";
    bool ok = true;
    if (strcmp(name, "source-origin") == 0 && (ok = numbers(value, v, 1, true)))
        o->source_origin = v[0];
    else if (strcmp(name, "source-detector") == 0 && (ok = numbers(value, v, 1, true)))
        o->source_detector = v[0];
    else if (strcmp(name, "pixel-size") == 0 &&
             (ok = numbers(value, v, 1, true) || numbers(value, v, 2, true))) {
        o->pixel_u = v[0];
        o->pixel_v = strchr(value, ',') ? v[1] : v[0];
    } else if (strcmp(name, "offset") == 0 && (ok = numbers(value, v, 2, false))) {
        o->has_offset = true;
        o->offset_u = v[0];
        o->offset_v = v[1];
    } else if (strcmp(name, "matrices") == 0) {
        o->matrices = value;
    }
    if (!ok)
        snprintf(why, why_len, "bad --%s '%s': need %s", name, value,
                 strcmp(name, "offset") == 0       ? "U,V in pixels (finite numbers)"
                 : strcmp(name, "pixel-size") == 0 ? "MM or MM,MM, each > 0"
                                                   : "a distance in mm > 0");
    return ok;
}

bool tl_cone_opts_check(const tl_cone_opts *o, bool has_center, char *why, size_t why_len)
{
    if (!o->cone) {
        if (o->given)
            snprintf(why, why_len, "--%s is for --geometry cone", o->given);
        return !o->given;
    }
    const char *missing = !(o->source_origin > 0)     ? "--source-origin"
                          : !(o->source_detector > 0) ? "--source-detector"
                          : !(o->pixel_u > 0)         ? "--pixel-size"
                                                      : NULL;
    if (missing) {
        snprintf(why, why_len,
                 "--geometry cone needs --source-origin, --source-detector and --pixel-size "
                 "(%s is missing)",
                 missing);
        return false;
    }
    if (o->matrices && (has_center || (o->has_offset && o->offset_u != 0))) {
        snprintf(why, why_len,
                 "--matrices '%s' places the detector: %s is not for given matrices (--offset "
                 "0,V may still place the volume's rows)",
                 o->matrices, has_center ? "--center" : "--offset with U");
        return false;
    }
    if (has_center && o->has_offset && o->offset_u != 0) {
        snprintf(why, why_len,
                 "--center and --offset %g,%g both place the axis column: give --center, or "
                 "--offset with U",
                 o->offset_u, o->offset_v);
        return false;
    }
    return true;
}

double tl_cone_opts_center(const tl_cone_opts *o, uint32_t cols, bool has_center, double center)
{
    if (has_center)
        return center;
    return (cols - 1) / 2.0 + (o->cone && o->has_offset ? o->offset_u : 0);
}

void tl_cone_opts_engine(const tl_cone_opts *o, bool has_center, double center,
                         tl_engine_config *c)
{
    if (!o->cone)
        return;
    c->geometry = TL_GEOMETRY_CONE;
    c->cone = (tl_cone_config){.source_origin = o->source_origin,
                               .source_detector = o->source_detector,
                               .pixel_u = o->pixel_u,
                               .pixel_v = o->pixel_v,
                               .offset_v = o->has_offset ? o->offset_v : 0};
    c->center = tl_cone_opts_center(o, c->cols, has_center, center);
}

void tl_cone_opts_scan(const tl_cone_opts *o, tl_proto_scan *s)
{
    if (!o->cone)
        return;
    s->geometry = TL_PROTO_CONE;
    s->source_origin = o->source_origin;
    s->source_detector = o->source_detector;
    s->pixel_size[0] = o->pixel_u;
    s->pixel_size[1] = o->pixel_v;
    s->has_detector_offset = o->has_offset;
    s->detector_offset[0] = o->offset_u;
    s->detector_offset[1] = o->offset_v;
}

void tl_cone_opts_describe(const tl_cone_opts *o, char *buf, size_t len)
{
    if (!o->cone) {
        snprintf(buf, len, "%s", "");
        return;
    }
    snprintf(buf, len,
             " geometry=cone source_origin=%.17g source_detector=%.17g pixel=%.17g,%.17g "
             "offset_v=%.17g%s%s",
             o->source_origin, o->source_detector, o->pixel_u, o->pixel_v,
             o->has_offset ? o->offset_v : 0.0, o->matrices ? " matrices=" : "",
             o->matrices ? o->matrices : "");
}

/* ---- the simulated cone-beam sample ------------------------------------------------------ */

tl_status tl_cone_opts_matrix(const tl_cone_opts *o, uint32_t rows, uint32_t cols, double center,
                              double angle, double P[12], tl_errbuf *eb)
{
    tl_cone_circular g = {.sad = o->source_origin,
                          .sdd = o->source_detector,
                          .pitch_u = o->pixel_u,
                          .pitch_v = o->pixel_v,
                          .offset_u = center - (cols - 1) / 2.0,
                          .offset_v = o->has_offset ? o->offset_v : 0,
                          .rows = rows,
                          .cols = cols,
                          .n = 1,
                          .angles = &angle};
    return tl_cone_circular_matrices(&g, (double(*)[12])P, eb);
}

tl_status tl_cone_opts_view(const tl_cone_opts *o, const tl_phantom *ph, uint32_t rows,
                            uint32_t cols, double center, double angle, const double *P, float *li,
                            double *scratch, tl_errbuf *eb)
{
    double circle[12];
    if (!P) {
        tl_status st = tl_cone_opts_matrix(o, rows, cols, center, angle, circle, eb);
        if (st != TL_OK)
            return st;
        P = circle;
    }
    tl_status st = tl_phantom_cone_project(ph, P, rows, cols, scratch, eb);
    for (size_t k = 0; st == TL_OK && k < (size_t)rows * cols; k++)
        li[k] = (float)scratch[k];
    return st;
}

double tl_cone_opts_unit(const tl_cone_opts *o)
{
    return o->pixel_u * o->source_origin / o->source_detector;
}

/* The largest line integral over 8 angles of a turn, 9 rows across the phantom's height
 * (the middle one, where it is thickest, included) and every column. */
static int max_line_integral(const tl_cone_opts *o, const tl_phantom *ph, uint32_t rows,
                             uint32_t cols, double center, double v0, double half_v,
                             double *m, char *why, size_t why_len)
{
    *m = 0;
    for (int a = 0; a < 8; a++) {
        double P[12], li;
        tl_errbuf eb = {0};
        if (tl_cone_opts_matrix(o, rows, cols, center, a * M_PI / 4, P, &eb) != TL_OK)
            return snprintf(why, why_len, "%s", eb.msg), -1;
        for (int r = 0; r < 9; r++)
            for (uint32_t u = 0; u < cols; u++) {
                if (tl_phantom_cone_pixel(ph, P, u, v0 + (r - 4) / 4.0 * half_v, &li, &eb) !=
                    TL_OK)
                    return snprintf(why, why_len, "%s", eb.msg), -1;
                *m = fmax(*m, li);
            }
    }
    return 0;
}

int tl_cone_opts_phantom(const tl_cone_opts *o, uint32_t rows, uint32_t cols, double center,
                         double attenuation, tl_phantom *ph, char *why, size_t why_len)
{
    double sad = o->source_origin, sdd = o->source_detector;
    double v0 = (rows - 1) / 2.0 + (o->has_offset ? o->offset_v : 0);
    /* room on the detector around the principal point, mm, 10% kept free */
    double room_u = 0.9 * fmin(center + 0.5, cols - 0.5 - center) * o->pixel_u;
    double room_v = 0.9 * fmin(v0 + 0.5, rows - 0.5 - v0) * o->pixel_v;
    if (!(room_u > 0 && room_v > 0)) {
        snprintf(why, why_len,
                 "the principal point (column %g, row %g) is off the %u x %u detector: no "
                 "phantom fits",
                 center, v0, rows, cols);
        return -1;
    }
    /* a ball of radius R projects to sdd R / sqrt(sad^2 - R^2) around the principal point:
     * R = k sad / sqrt(1 + k^2) fills room_u (k = room_u / sdd); heights are magnified
     * by at most sdd / (sad - R), at the point nearest the source */
    double k = room_u / sdd, radius = k * sad / sqrt(1 + k * k);
    double radius_z = room_v * (sad - radius) / sdd;
    if (tl_phantom_shepp_logan(ph, radius, 0.0, radius_z) != 0) {
        snprintf(why, why_len, "out of memory for the phantom");
        return -1;
    }
    double m;
    double half_v = 0.9 * radius_z * sdd / (sad * o->pixel_v); /* the body, in rows */
    if (max_line_integral(o, ph, rows, cols, center, v0, half_v, &m, why, why_len) != 0) {
        tl_phantom_free(ph);
        return -1;
    }
    if (m > 0) /* densities per mm: scaled so the sample transmits */
        tl_phantom_scale_density(ph, attenuation / m);
    return 0;
}
