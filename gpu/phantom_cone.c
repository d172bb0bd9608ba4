/* phantom_cone.c — exact cone-beam line integrals of ellipsoid phantoms (phantom_cone.h).
 *
 * A pixel's ray starts at the projection's source (the null space of P) and goes through
 * the pixel; phantom.c's tl_phantom_ray_integral cuts it with each ellipsoid, exactly as
 * its parallel-beam line integral does.
 */
#include "config.h"

#include <math.h>

#include "gpu/geometry/cone.h"
#include "gpu/phantom_cone.h"

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
