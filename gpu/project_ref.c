/* project_ref.c — the float64 reference projectors (project_ref.h).
 *
 * Each pair is written once as a walk over (ray or pixel, tap, weight) triples: `gather`
 * reads the taps (A, or the back projection), `scatter` adds into them (the transpose). A
 * projector and its transpose then visit the same triples in the same order, so they are
 * adjoint by construction and the adjoint test checks the walk, not two codes that were
 * meant to agree.
 */
#include "config.h"

#include "gpu/project_ref.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "gpu/geometry/cone.h"

/* Linear interpolation at position t on a grid of n points (floor-based: ARCHITECTURE.md
 * §3.1's rule): taps i0 (weight 1 - f) and i0 + 1 (weight f), each only when on the grid.
 * False when t is off the grid altogether. */
static bool taps(double t, uint32_t n, long *i0, double *f)
{
    if (!(t > -1.0 && t < (double)n))
        return false;
    double fl = floor(t);
    *i0 = (long)fl;
    *f = t - fl;
    return true;
}

static bool on(long i, uint32_t n)
{
    return i >= 0 && i < (long)n;
}

/* One weighted link between an image element and a projection element: gather adds
 * w * from into *acc, scatter adds w * value into *to. */
typedef struct {
    bool transpose; /* scatter (A^T for a forward walk, A for a back projection walk) */
} walk;

/* a[k] += w * b[m] (gather) or b[m] += w * a[k] (scatter), for a link between a and b. */
static inline void link(const walk *wk, double *a, size_t k, double *b, size_t m, double w)
{
    if (wk->transpose)
        b[m] += w * a[k];
    else
        a[k] += w * b[m];
}

/* ---- parallel beam ------------------------------------------------------------------------ */

/* Joseph's walk: every (projection, bin) ray through the image; ray elements in sino,
 * pixels in image. gather: sino = A image; scatter: image = A^T sino. */
static void joseph_parallel(const tl_pb_slice *g, const walk *wk, double *sino, double *image)
{
    const double cx = 0.5 * (g->nx - 1.0), cy = 0.5 * (g->ny - 1.0), s = g->pixel;
    for (uint32_t k = 0; k < g->n; k++) {
        const double c = cos(g->theta[k]), sn = sin(g->theta[k]);
        const bool along_y = fabs(c) >= fabs(sn); /* r = (sin, cos): mostly along y */
        const double step = s / (along_y ? fabs(c) : fabs(sn)); /* path between planes */
        for (uint32_t u = 0; u < g->cols; u++) {
            const double t = u - g->center[k]; /* the ray: t e_u + l r */
            const size_t ray = (size_t)k * g->cols + u;
            uint32_t planes = along_y ? g->ny : g->nx;
            for (uint32_t m = 0; m < planes; m++) {
                long i0;
                double f;
                if (along_y) { /* row m at y: l from -t sin + l cos = y */
                    double y = (m - cy) * s, l = (y + t * sn) / c, x = t * c + l * sn;
                    if (!taps(x / s + cx, g->nx, &i0, &f))
                        continue;
                    for (int d = 0; d < 2; d++)
                        if (on(i0 + d, g->nx))
                            link(wk, sino, ray, image, (size_t)m * g->nx + (size_t)(i0 + d),
                                 step * (d ? f : 1 - f));
                } else { /* column m at x: l from t cos + l sin = x */
                    double x = (m - cx) * s, l = (x - t * c) / sn, y = -t * sn + l * c;
                    if (!taps(y / s + cy, g->ny, &i0, &f))
                        continue;
                    for (int d = 0; d < 2; d++)
                        if (on(i0 + d, g->ny))
                            link(wk, sino, ray, image, (size_t)(i0 + d) * g->nx + m,
                                 step * (d ? f : 1 - f));
                }
            }
        }
    }
}

/* The pixel-driven walk of the back projection: every (pixel, projection) link to the two
 * bins around u. gather: image = BP sino; scatter: sino = BP^T image. */
static void pixel_parallel(const tl_pb_slice *g, const walk *wk, double *image, double *sino)
{
    const double cx = 0.5 * (g->nx - 1.0), cy = 0.5 * (g->ny - 1.0), s = g->pixel;
    for (uint32_t j = 0; j < g->ny; j++)
        for (uint32_t i = 0; i < g->nx; i++) {
            const double x = (i - cx) * s, y = (j - cy) * s;
            const size_t px = (size_t)j * g->nx + i;
            for (uint32_t k = 0; k < g->n; k++) {
                long i0;
                double f;
                double u = g->center[k] + x * cos(g->theta[k]) - y * sin(g->theta[k]);
                if (!taps(u, g->cols, &i0, &f))
                    continue;
                for (int d = 0; d < 2; d++)
                    if (on(i0 + d, g->cols))
                        link(wk, image, px, sino, (size_t)k * g->cols + (size_t)(i0 + d),
                             d ? f : 1 - f);
            }
        }
}

void tl_project_parallel(const tl_pb_slice *g, tl_projector p, const double *image,
                         double *sinogram)
{
    memset(sinogram, 0, (size_t)g->n * g->cols * sizeof *sinogram);
    if (p == TL_PROJECTOR_JOSEPH)
        joseph_parallel(g, &(walk){false}, sinogram, (double *)image);
    else
        pixel_parallel(g, &(walk){true}, (double *)image, sinogram);
}

void tl_backproject_parallel(const tl_pb_slice *g, tl_projector p, const double *sinogram,
                             double *image)
{
    memset(image, 0, (size_t)g->nx * g->ny * sizeof *image);
    if (p == TL_PROJECTOR_JOSEPH)
        joseph_parallel(g, &(walk){true}, (double *)sinogram, image);
    else
        pixel_parallel(g, &(walk){false}, image, (double *)sinogram);
}

/* ---- cone beam ---------------------------------------------------------------------------- */

/* M^-1 of P = [M | p4] into Mi (row-major 3x3); false when singular. */
static bool inverse3(const double P[12], double Mi[9])
{
    const double a = P[0], b = P[1], c = P[2], d = P[4], e = P[5], f = P[6], g = P[8], h = P[9],
                 i = P[10];
    const double A = e * i - f * h, B = -(d * i - f * g), C = d * h - e * g;
    const double det = a * A + b * B + c * C;
    if (!(fabs(det) > 0) || !isfinite(det))
        return false;
    const double m[9] = {A, -(b * i - c * h), b * f - c * e, B, a * i - c * g, -(a * f - c * d),
                         C, -(a * h - b * g), a * e - b * d};
    for (int k = 0; k < 9; k++)
        Mi[k] = m[k] / det;
    return true;
}

/* Every matrix checked against the volume (as fdk_ref.c does). */
static tl_status check(const tl_cb_volume *g, tl_errbuf *eb)
{
    tl_cone_box box = tl_cone_volume_box(g->vol.nx, g->vol.ny, g->vol.nz, g->vol.voxel);
    for (uint32_t s = 0; s < g->n; s++) {
        double Mi[9];
        tl_status st = tl_cone_matrix_check(g->P[s], &box, eb);
        if (st == TL_OK && !inverse3(g->P[s], Mi))
            st = tl_fail(eb, TL_EINVAL, "singular left 3x3 block");
        if (st != TL_OK) {
            char why[sizeof eb->msg];
            memcpy(why, eb->msg, sizeof why);
            return tl_fail(eb, st, "projector: view %u: %s", s, why);
        }
    }
    return TL_OK;
}

/* Joseph's walk in 3-D: the ray from the source through detector pixel (u, v) steps
 * through the voxel planes of its dominant axis, bilinear within each plane. */
static void joseph_cone(const tl_cb_volume *g, const walk *wk, double *proj, double *vol)
{
    const uint32_t n3[3] = {g->vol.nx, g->vol.ny, g->vol.nz};
    const double vx = g->vol.voxel;
    const double c3[3] = {0.5 * (n3[0] - 1.0), 0.5 * (n3[1] - 1.0), 0.5 * (n3[2] - 1.0)};
    const size_t stride[3] = {1, n3[0], (size_t)n3[0] * n3[1]};
    for (uint32_t s = 0; s < g->n; s++) {
        double Mi[9], src[3];
        (void)inverse3(g->P[s], Mi);                     /* check() accepted it */
        (void)tl_cone_matrix_source(g->P[s], src, NULL); /* the same */
        for (uint32_t v = 0; v < g->rows; v++)
            for (uint32_t u = 0; u < g->cols; u++) {
                double d[3];
                for (int r = 0; r < 3; r++)
                    d[r] = Mi[3 * r] * u + Mi[3 * r + 1] * v + Mi[3 * r + 2];
                int a = 0; /* the dominant axis, then the other two */
                for (int r = 1; r < 3; r++)
                    if (fabs(d[r]) > fabs(d[a]))
                        a = r;
                const int b = (a + 1) % 3, c = (a + 2) % 3;
                const double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
                const double step = vx * len / fabs(d[a]);
                const size_t ray = ((size_t)s * g->rows + v) * g->cols + u;
                for (uint32_t m = 0; m < n3[a]; m++) {
                    double lam = ((m - c3[a]) * vx - src[a]) / d[a];
                    if (!(lam > 0))
                        continue; /* behind the source: the check keeps the volume in front */
                    long ib, ic;
                    double fb, fc;
                    if (!taps((src[b] + lam * d[b]) / vx + c3[b], n3[b], &ib, &fb) ||
                        !taps((src[c] + lam * d[c]) / vx + c3[c], n3[c], &ic, &fc))
                        continue;
                    for (int db = 0; db < 2; db++)
                        for (int dc = 0; dc < 2; dc++)
                            if (on(ib + db, n3[b]) && on(ic + dc, n3[c]))
                                link(wk, proj, ray, vol,
                                     m * stride[a] + (size_t)(ib + db) * stride[b] +
                                         (size_t)(ic + dc) * stride[c],
                                     step * (db ? fb : 1 - fb) * (dc ? fc : 1 - fc));
                }
            }
    }
}

/* The voxel-driven walk of FDK's back projection (gpu/fdk_ref.h, step 3): every (voxel,
 * projection) link to the four detector pixels around (u, v), weighed (d / w)^2. */
static void voxel_cone(const tl_cb_volume *g, const walk *wk, double *vol, double *proj)
{
    const tl_fdk_volume *V = &g->vol;
    const double cx = 0.5 * (V->nx - 1.0), cy = 0.5 * (V->ny - 1.0), cz = 0.5 * (V->nz - 1.0);
    for (uint32_t k = 0; k < V->nz; k++)
        for (uint32_t j = 0; j < V->ny; j++)
            for (uint32_t i = 0; i < V->nx; i++) {
                const double x[3] = {(i - cx) * V->voxel, (j - cy) * V->voxel,
                                     (k - cz) * V->voxel};
                const size_t vox = ((size_t)k * V->ny + j) * V->nx + i;
                for (uint32_t s = 0; s < g->n; s++) {
                    double u, v, w, fu, fv;
                    long iu, iv;
                    if (!tl_cone_project(g->P[s], x, &u, &v, &w) || !taps(u, g->cols, &iu, &fu) ||
                        !taps(v, g->rows, &iv, &fv))
                        continue;
                    const double dw = g->P[s][11] / w, wt = dw * dw;
                    for (int dv = 0; dv < 2; dv++)
                        for (int du = 0; du < 2; du++)
                            if (on(iu + du, g->cols) && on(iv + dv, g->rows))
                                link(wk, vol, vox, proj,
                                     ((size_t)s * g->rows + (size_t)(iv + dv)) * g->cols +
                                         (size_t)(iu + du),
                                     wt * (du ? fu : 1 - fu) * (dv ? fv : 1 - fv));
                }
            }
}

tl_status tl_project_cone(const tl_cb_volume *g, tl_projector p, const double *volume,
                          double *proj, tl_errbuf *eb)
{
    tl_status st = check(g, eb);
    if (st != TL_OK)
        return st;
    memset(proj, 0, (size_t)g->n * g->rows * g->cols * sizeof *proj);
    if (p == TL_PROJECTOR_JOSEPH)
        joseph_cone(g, &(walk){false}, proj, (double *)volume);
    else
        voxel_cone(g, &(walk){true}, (double *)volume, proj);
    return TL_OK;
}

tl_status tl_backproject_cone(const tl_cb_volume *g, tl_projector p, const double *proj,
                              double *volume, tl_errbuf *eb)
{
    tl_status st = check(g, eb);
    if (st != TL_OK)
        return st;
    memset(volume, 0, (size_t)g->vol.nx * g->vol.ny * g->vol.nz * sizeof *volume);
    if (p == TL_PROJECTOR_JOSEPH)
        joseph_cone(g, &(walk){true}, (double *)proj, volume);
    else
        voxel_cone(g, &(walk){false}, volume, (double *)proj);
    return TL_OK;
}
