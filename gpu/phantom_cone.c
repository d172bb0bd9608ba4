/* phantom_cone.c — exact cone-beam line integrals of ellipsoid phantoms (phantom_cone.h).
 *
 * Design choice: as in phantom.c, each ellipsoid is a unit sphere seen through an affine
 * map; the ray is carried into the sphere's frame (q = diag(1/a, 1/b, 1/c) R^T v) and cut
 * there. The chord uses the cross-product form of the discriminant, D = |w1|^2 -
 * |w0 x w1|^2, which does not cancel when the source is far from the ellipsoid; only a
 * chord that starts behind the source (source inside the ellipsoid) needs the root
 * itself. The sphere-frame map is repeated here rather than exported from phantom.c, so
 * phantom.h keeps its parallel-beam API.
 */
#include "config.h"

#include <math.h>

#include "gpu/geometry/cone.h"
#include "gpu/phantom_cone.h"

static void to_sphere(const tl_phantom *p, size_t i, const double v[3], double q[3])
{
    const double *R = p->rot[i];
    const tl_ellipsoid *e = &p->e[i];
    q[0] = (R[0] * v[0] + R[3] * v[1] + R[6] * v[2]) / e->a;
    q[1] = (R[1] * v[0] + R[4] * v[1] + R[7] * v[2]) / e->b;
    q[2] = (R[2] * v[0] + R[5] * v[1] + R[8] * v[2]) / e->c;
}

double tl_phantom_ray_integral(const tl_phantom *p, const double origin[3], const double dir[3])
{
    double len = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
    if (!(len > 0))
        return 0.0;
    /* origin and unit direction in normalised coordinates (the direction keeps the world
     * length per unit of t, so chords come out in world units) */
    double base[3] = {origin[0] / p->radius, origin[1] / p->radius,
                      (origin[2] - p->z_center) / p->radius_z};
    double d[3] = {dir[0] / len / p->radius, dir[1] / len / p->radius, dir[2] / len / p->radius_z};
    double sum = 0;
    for (size_t i = 0; i < p->n; i++) {
        const tl_ellipsoid *e = &p->e[i];
        double v[3] = {base[0] - e->x0, base[1] - e->y0, base[2] - e->z0};
        double w0[3], w1[3];
        to_sphere(p, i, v, w0);
        to_sphere(p, i, d, w1);
        double aa = w1[0] * w1[0] + w1[1] * w1[1] + w1[2] * w1[2];
        double cx = w0[1] * w1[2] - w0[2] * w1[1];
        double cy = w0[2] * w1[0] - w0[0] * w1[2];
        double cz = w0[0] * w1[1] - w0[1] * w1[0];
        double D = aa - (cx * cx + cy * cy + cz * cz);
        if (!(D > 0 && aa > 0))
            continue;
        double sq = sqrt(D), bb = w0[0] * w1[0] + w0[1] * w1[1] + w0[2] * w1[2];
        double t1 = (-bb - sq) / aa, t2 = (-bb + sq) / aa, chord;
        if (t1 >= 0)
            chord = 2.0 * sq / aa; /* the whole chord lies ahead of the origin */
        else if (t2 > 0)
            chord = t2; /* the origin is inside: from it to the exit */
        else
            continue; /* behind the origin */
        sum += e->density * chord;
    }
    return sum;
}

/* The source and the adjugate-based inverse of M, computed once per matrix. */
typedef struct {
    double s[3];
    double inv[9]; /* M^-1, row-major */
} ray_frame;

static tl_status frame_of(const double P[12], ray_frame *f, tl_errbuf *eb)
{
    tl_status st = tl_cone_matrix_source(P, f->s, eb);
    if (st != TL_OK)
        return st;
    const double *a = P, *b = P + 4, *c = P + 8;
    /* columns of the adjugate are the cross products of the rows: M^-1 = [b x c, c x a,
     * a x b] / det (as columns) */
    double bc[3] = {b[1] * c[2] - b[2] * c[1], b[2] * c[0] - b[0] * c[2],
                    b[0] * c[1] - b[1] * c[0]};
    double ca[3] = {c[1] * a[2] - c[2] * a[1], c[2] * a[0] - c[0] * a[2],
                    c[0] * a[1] - c[1] * a[0]};
    double ab[3] = {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                    a[0] * b[1] - a[1] * b[0]};
    double det = a[0] * bc[0] + a[1] * bc[1] + a[2] * bc[2];
    for (int r = 0; r < 3; r++) {
        f->inv[3 * r] = bc[r] / det;
        f->inv[3 * r + 1] = ca[r] / det;
        f->inv[3 * r + 2] = ab[r] / det;
    }
    return TL_OK;
}

static double frame_pixel(const tl_phantom *p, const ray_frame *f, double u, double v)
{
    /* M d = (u, v, 1): points S + t d, t > 0, project to (u, v) at depth t */
    double d[3];
    for (int r = 0; r < 3; r++)
        d[r] = f->inv[3 * r] * u + f->inv[3 * r + 1] * v + f->inv[3 * r + 2];
    return tl_phantom_ray_integral(p, f->s, d);
}

tl_status tl_phantom_cone_pixel(const tl_phantom *p, const double P[12], double u, double v,
                                double *out, tl_errbuf *eb)
{
    ray_frame f;
    tl_status st = frame_of(P, &f, eb);
    if (st != TL_OK)
        return st;
    *out = frame_pixel(p, &f, u, v);
    return TL_OK;
}

tl_status tl_phantom_cone_project(const tl_phantom *p, const double P[12], uint32_t rows,
                                  uint32_t cols, double *out, tl_errbuf *eb)
{
    ray_frame f;
    tl_status st = frame_of(P, &f, eb);
    if (st != TL_OK)
        return st;
    for (uint32_t v = 0; v < rows; v++)
        for (uint32_t u = 0; u < cols; u++)
            out[(size_t)v * cols + u] = frame_pixel(p, &f, u, v);
    return TL_OK;
}
