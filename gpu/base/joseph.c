/* joseph.c — the grid of a cone-beam stack and each view's ray table for Joseph's pair
 * (joseph.h). */
#include "config.h"

#include <string.h>

#include "gpu/base/joseph.h"

#define GRID_TOL 1e-6 /* relative: steps and plane placements that must agree */

static double norm3(const double v[3])
{
    return sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
}

static bool near3(const double a[3], const double b[3], double scale)
{
    const double d[3] = {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
    return norm3(d) <= GRID_TOL * scale;
}

/* The inverse of the 3 x 3 matrix m (row-major); false when singular. */
static bool invert3(const double m[9], double out[9])
{
    const double a = m[0], b = m[1], c = m[2], d = m[3], e = m[4], f = m[5], g = m[6], h = m[7],
                 i = m[8];
    const double A = e * i - f * h, B = f * g - d * i, C = d * h - e * g;
    const double det = a * A + b * B + c * C;
    if (!(fabs(det) > 0) || !isfinite(det))
        return false;
    const double adj[9] = {A, c * h - b * i, b * f - c * e, B, a * i - c * g, c * d - a * f,
                           C, b * g - a * h, a * e - b * d};
    for (int k = 0; k < 9; k++)
        out[k] = adj[k] / det;
    return true;
}

tl_status tl_joseph_grid_of(const tl_it_problem *p, tl_joseph_grid *g, tl_errbuf *eb)
{
    memset(g, 0, sizeof *g);
    const tl_bp_slice *s0 = &p->slices[0];
    const tl_bp_grid first = tl_bp_slice_grid(s0);
    g->n[0] = s0->width;
    g->n[1] = s0->height;
    g->n[2] = p->nslices;
    g->unit_z = p->unit_z > 0 ? p->unit_z : 1.0;
    for (int q = 0; q < 3; q++) {
        g->o[q] = first.p00[q];
        g->e[0][q] = first.dj[q];
        g->e[1][q] = first.di[q];
    }
    if (p->nslices > 1) {
        const tl_bp_grid next = tl_bp_slice_grid(&p->slices[1]);
        for (int q = 0; q < 3; q++)
            g->e[2][q] = next.p00[q] - first.p00[q];
    } else { /* one plane: any step off it will do (no ray walks across it) */
        const double *r = g->e[0], *d = g->e[1];
        const double cross[3] = {r[1] * d[2] - r[2] * d[1], r[2] * d[0] - r[0] * d[2],
                                 r[0] * d[1] - r[1] * d[0]};
        const double len = norm3(cross);
        for (int q = 0; q < 3; q++)
            g->e[2][q] = len > 0 ? cross[q] / len : 0;
    }
    const double scale = norm3(g->e[0]) + norm3(g->e[1]) + norm3(g->e[2]);
    for (uint32_t k = 1; k < p->nslices; k++) {
        const tl_bp_slice *sk = &p->slices[k];
        const tl_bp_grid gk = tl_bp_slice_grid(sk);
        double want[3];
        for (int q = 0; q < 3; q++)
            want[q] = g->o[q] + k * g->e[2][q];
        if (sk->width != s0->width || sk->height != s0->height || !near3(gk.dj, first.dj, scale) ||
            !near3(gk.di, first.di, scale) || !near3(gk.p00, want, scale * (k + 1)))
            return tl_fail(eb, TL_EINVAL,
                           "iterative: Joseph's pair walks a voxel grid, and slice %u does not "
                           "continue it (slices of one shape, in order, each the last moved by "
                           "one step)",
                           k);
    }
    double metric[9]; /* columns: the steps in metric coordinates (z scaled) */
    for (int s = 0; s < 3; s++)
        for (int q = 0; q < 3; q++)
            metric[3 * q + s] = g->e[s][q] * (q == 2 ? g->unit_z : 1.0);
    if (!invert3(metric, g->inv))
        return tl_fail(eb, TL_EINVAL,
                       "iterative: Joseph's pair needs slices that span a volume (their rows, "
                       "columns and plane-to-plane step are degenerate)");
    return TL_OK;
}

bool tl_joseph_view_of(const tl_joseph_grid *g, const double m[12], tl_joseph_view *jv)
{
    double M[9], Mi[9];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            M[3 * r + c] = m[4 * r + c];
    if (!invert3(M, Mi))
        return false;
    double src[3]; /* the source: M src + m[:, 3] = 0 */
    for (int q = 0; q < 3; q++)
        src[q] = -(Mi[3 * q] * m[3] + Mi[3 * q + 1] * m[7] + Mi[3 * q + 2] * m[11]);
    for (int q = 0; q < 9; q++) /* B = S Mi: metric directions */
        jv->B[q] = Mi[q] * (q >= 6 ? g->unit_z : 1.0);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            double sum = 0;
            for (int k = 0; k < 3; k++)
                sum += g->inv[3 * r + k] * jv->B[3 * k + c];
            jv->A[3 * r + c] = sum;
        }
    double rel[3];
    for (int q = 0; q < 3; q++)
        rel[q] = (src[q] - g->o[q]) * (q == 2 ? g->unit_z : 1.0);
    for (int r = 0; r < 3; r++)
        jv->S[r] =
            g->inv[3 * r] * rel[0] + g->inv[3 * r + 1] * rel[1] + g->inv[3 * r + 2] * rel[2];
    return true;
}
