/* joseph.h — Joseph's ray-driven pair for cone-beam stacks (P. M. Joseph, "An improved
 * algorithm for reprojecting rays through pixel images", IEEE TMI 1(3):192-196, 1982, in
 * three dimensions as the float64 reference has it, gpu/project_ref.c joseph_cone): the
 * ray from the source through detector pixel (u, v) steps through the voxel planes of the
 * axis it runs most along and reads the four voxels around its crossing of each, weighed
 * bilinearly times the ray's length per plane. Its transpose spreads a ray's value back
 * with the same weights.
 *
 * The voxels are the stack's pixels (tl_it_problem CONE), which must form a grid: slices
 * of one shape, in order, each the last moved by one step (the stack's planes one voxel
 * apart); the three steps are any non-degenerate vectors (along a row, down the rows, to
 * the next plane). Lengths are in volume units along x and y (a detector column at the
 * axis), z scaled by unit_z (tl_it_problem), so values come out per volume unit as FDK's.
 *
 * Host code builds the grid and a table per view (joseph.c); the walk itself, here, is
 * one inline function for the CPU and the CUDA backends, so both read the same weights:
 *
 *   tl_joseph_grid g;  tl_joseph_grid_of(problem, &g, eb);
 *   tl_joseph_view jv; tl_joseph_view_of(&g, problem->proj[k].cone, &jv);
 *   tl_joseph_ray r;
 *   if (tl_joseph_ray_of(&jv, &g, u, v, &r))
 *       for (uint32_t m = 0; m < r.planes; m++)
 *           if (tl_joseph_taps(&r, &g, m, at, wt)) ... x[at[t]] with weight wt[t], at[t] >= 0
 */
#ifndef TL_JOSEPH_H
#define TL_JOSEPH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpu/base/backend.h"

#ifdef __CUDACC__
#define TL_JOSEPH_FN static __host__ __device__ __forceinline__
#else
#define TL_JOSEPH_FN static inline
#endif

/* The voxel grid of a stack: voxel (j, i, k) (column, row, plane) at o + j e[0] + i e[1] +
 * k e[2], x[(k n[1] + i) n[0] + j]. */
typedef struct {
    uint32_t n[3];
    double o[3], e[3][3];
    double inv[9]; /* metric volume coordinates -> grid steps (3 x 3, row-major) */
    double unit_z;
} tl_joseph_grid;

/* One view's rays: (u, v, 1) -> direction in grid steps (A) and in metric units (B), and
 * the source in grid coordinates (S). */
typedef struct {
    double A[9], B[9], S[3];
} tl_joseph_view;

/* One ray: its direction in grid steps, the axis it walks (a) and the other two (b, c),
 * and its length per step along a. */
typedef struct {
    double S[3], D[3], step;
    int a, b, c;
    uint32_t planes; /* grid planes along a */
} tl_joseph_ray;

#ifdef __cplusplus
extern "C" {
#endif
/* The stack of problem p as a grid (TL_EINVAL, saying why, when its slices are not one). */
tl_status tl_joseph_grid_of(const tl_it_problem *p, tl_joseph_grid *g, tl_errbuf *eb);
/* View matrix m's table on grid g; false when its 3 x 3 block is singular. */
bool tl_joseph_view_of(const tl_joseph_grid *g, const double m[12], tl_joseph_view *jv);
#ifdef __cplusplus
}
#endif

/* The ray through detector pixel (u, v); false when it has no direction. */
TL_JOSEPH_FN bool tl_joseph_ray_of(const tl_joseph_view *jv, const tl_joseph_grid *g, double u,
                                   double v, tl_joseph_ray *r)
{
    double len2 = 0;
    for (int q = 0; q < 3; q++) {
        const double *a = jv->A + 3 * q, *b = jv->B + 3 * q;
        r->D[q] = a[0] * u + a[1] * v + a[2];
        const double d = b[0] * u + b[1] * v + b[2];
        len2 += d * d;
        r->S[q] = jv->S[q];
    }
    r->a = 0;
    for (int q = 1; q < 3; q++)
        if (fabs(r->D[q]) > fabs(r->D[r->a]))
            r->a = q;
    if (!(fabs(r->D[r->a]) > 0))
        return false;
    r->b = (r->a + 1) % 3;
    r->c = (r->a + 2) % 3;
    r->step = sqrt(len2) / fabs(r->D[r->a]);
    r->planes = g->n[r->a];
    return true;
}

/* The four voxels ray r reads on its plane m (at[t] = -1: off the grid) and their
 * weights; false when it reads none there (behind the source, or off the grid). */
TL_JOSEPH_FN bool tl_joseph_taps(const tl_joseph_ray *r, const tl_joseph_grid *g, uint32_t m,
                                 long long at[4], double wt[4])
{
    const double lam = ((double)m - r->S[r->a]) / r->D[r->a];
    if (!(lam > 0))
        return false; /* behind the source */
    const double tb = r->S[r->b] + lam * r->D[r->b], tc = r->S[r->c] + lam * r->D[r->c];
    if (!(tb > -1.0 && tb < (double)g->n[r->b] && tc > -1.0 && tc < (double)g->n[r->c]))
        return false;
    const double fb = floor(tb), fc = floor(tc), gb = tb - fb, gc = tc - fc;
    const long long stride[3] = {1, (long long)g->n[0], (long long)g->n[0] * g->n[1]};
    for (int db = 0; db < 2; db++)
        for (int dc = 0; dc < 2; dc++) {
            const long long ib = (long long)fb + db, ic = (long long)fc + dc;
            const bool on =
                ib >= 0 && ib < (long long)g->n[r->b] && ic >= 0 && ic < (long long)g->n[r->c];
            const int t = 2 * db + dc;
            at[t] = on ? m * stride[r->a] + ib * stride[r->b] + ic * stride[r->c] : -1;
            wt[t] = on ? r->step * (db ? gb : 1 - gb) * (dc ? gc : 1 - gc) : 0.0;
        }
    return true;
}

#endif
