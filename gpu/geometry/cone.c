/* cone.c — cone-beam projection matrices for circular scans, and checks of arbitrary
 * matrices (cone.h gives the conventions).
 *
 * Design choice: singularity is judged by scale-free ratios, not by raw determinants, so a
 * matrix in pixels per mm (entries ~1e4) and one scaled by 1e-6 are judged alike:
 *   rank(P) < 3     when det(P P^T) / (|p1|^2 |p2|^2 |p3|^2) < RANK_EPS^2 (Gram ratio),
 *   M singular      when |det M| / (|m1| |m2| |m3|) < RANK_EPS (Hadamard ratio),
 * both 1 for orthogonal rows and 0 for dependent ones.
 *
 * Matrices from outside (a file, a scan message, a RECAST3D packet) are prepared here, not
 * by each front end, so `tomolive recon` and the daemon normalise them alike.
 */
#include "config.h"

#include <math.h>
#include <stddef.h>

#include "gpu/geometry/cone.h"

#define RANK_EPS 1e-9 /* ratios below this count as singular */
#define NORM_TOL 1e-9 /* |row 3's rotation part| must be 1 within this */

tl_cone_box tl_cone_volume_box(uint32_t nx, uint32_t ny, uint32_t nz, double voxel)
{
    tl_cone_box b;
    double h[3] = {0.5 * nx * voxel, 0.5 * ny * voxel, 0.5 * nz * voxel};
    for (int a = 0; a < 3; a++) {
        b.lo[a] = -h[a];
        b.hi[a] = h[a];
    }
    return b;
}

static tl_status positive(double x, const char *name, tl_errbuf *eb)
{
    if (!isfinite(x) || x <= 0)
        return tl_fail(eb, TL_EINVAL, "cone geometry: %s = %g must be finite and > 0", name, x);
    return TL_OK;
}

tl_status tl_cone_circular_check(const tl_cone_circular *g, tl_errbuf *eb)
{
    tl_status st;
    if ((st = positive(g->sad, "source-axis distance", eb)) != TL_OK ||
        (st = positive(g->sdd, "source-detector distance", eb)) != TL_OK ||
        (st = positive(g->pitch_u, "pixel pitch u", eb)) != TL_OK ||
        (st = positive(g->pitch_v, "pixel pitch v", eb)) != TL_OK)
        return st;
    if (!isfinite(g->offset_u) || !isfinite(g->offset_v))
        return tl_fail(eb, TL_EINVAL,
                       "cone geometry: principal-point offset (%g, %g) px must be finite",
                       g->offset_u, g->offset_v);
    if (g->rows == 0 || g->cols == 0)
        return tl_fail(eb, TL_EINVAL, "cone geometry: detector of %u x %u pixels", g->rows,
                       g->cols);
    if (g->n == 0 || !g->angles)
        return tl_fail(eb, TL_EINVAL, "cone geometry: no projection angles");
    for (uint32_t i = 0; i < g->n; i++)
        if (!isfinite(g->angles[i]))
            return tl_fail(eb, TL_EINVAL, "cone geometry: angle %u = %g is not finite", i,
                           g->angles[i]);
    return TL_OK;
}

tl_status tl_cone_circular_matrices(const tl_cone_circular *g, double (*P)[12], tl_errbuf *eb)
{
    tl_status st = tl_cone_circular_check(g, eb);
    if (st != TL_OK)
        return st;
    double fu = g->sdd / g->pitch_u, fv = g->sdd / g->pitch_v;
    double u0 = 0.5 * (g->cols - 1.0) + g->offset_u, v0 = 0.5 * (g->rows - 1.0) + g->offset_v;
    for (uint32_t i = 0; i < g->n; i++) {
        double s = sin(g->angles[i]), c = cos(g->angles[i]);
        double r[3] = {s, c, 0}, eu[3] = {c, -s, 0}, ev[3] = {0, 0, 1};
        double *p = P[i];
        for (int k = 0; k < 3; k++) {
            p[k] = fu * eu[k] + u0 * r[k];
            p[4 + k] = fv * ev[k] + v0 * r[k];
            p[8 + k] = r[k];
        }
        p[3] = u0 * g->sad;
        p[7] = v0 * g->sad;
        p[11] = g->sad;
    }
    return TL_OK;
}

double tl_cone_circular_magnification(const tl_cone_circular *g)
{
    return g->sdd / g->sad;
}

bool tl_cone_project(const double P[12], const double x[3], double *u, double *v, double *w)
{
    double h[3];
    for (int r = 0; r < 3; r++)
        h[r] = P[4 * r] * x[0] + P[4 * r + 1] * x[1] + P[4 * r + 2] * x[2] + P[4 * r + 3];
    *w = h[2];
    if (!(h[2] > 0))
        return false;
    *u = h[0] / h[2];
    *v = h[1] / h[2];
    return true;
}

static double det3(const double a[3], const double b[3], const double c[3])
{
    return a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0]) +
           a[2] * (b[0] * c[1] - b[1] * c[0]);
}

/* hypot: rows of 1e160 (a matrix scaled by any factor is the same camera) would overflow
 * a sum of squares and read as zero or infinite norms */
static double norm3(const double a[3])
{
    return hypot(hypot(a[0], a[1]), a[2]);
}

/* P scaled by a power of two (exact) so its largest entry lies in [0.5, 1): the same
 * camera, with determinants of 3 x 3 blocks far from overflow and underflow. */
static void unit_scale(const double P[12], double Q[12])
{
    double big = 0;
    for (int k = 0; k < 12; k++)
        big = fmax(big, fabs(P[k]));
    int e = 0;
    if (big > 0)
        (void)frexp(big, &e);
    for (int k = 0; k < 12; k++)
        Q[k] = ldexp(P[k], -e);
}

/* |det M| / (|m1| |m2| |m3|), 0 when a row is zero; the same for every scale of P. */
static double hadamard_ratio(const double P_given[12])
{
    double P[12];
    unit_scale(P_given, P);
    double n = norm3(P) * norm3(P + 4) * norm3(P + 8);
    return n > 0 ? fabs(det3(P, P + 4, P + 8)) / n : 0.0;
}

/* det(P P^T) / (|p1|^2 |p2|^2 |p3|^2), 0 when a row is zero; the same for every scale. */
static double gram_ratio(const double P_given[12])
{
    double P[12], G[3][3];
    unit_scale(P_given, P);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double s = 0;
            for (int k = 0; k < 4; k++)
                s += P[4 * i + k] * P[4 * j + k];
            G[i][j] = s;
        }
    double n = G[0][0] * G[1][1] * G[2][2];
    return n > 0 ? det3(G[0], G[1], G[2]) / n : 0.0;
}

static tl_status finite_entries(const double P[12], tl_errbuf *eb)
{
    for (int k = 0; k < 12; k++)
        if (!isfinite(P[k]))
            return tl_fail(eb, TL_EINVAL, "projection matrix: P[%d][%d] = %g is not finite", k / 4,
                           k % 4, P[k]);
    return TL_OK;
}

tl_status tl_cone_matrix_source(const double P_given[12], double s[3], tl_errbuf *eb)
{
    tl_status st = finite_entries(P_given, eb);
    if (st != TL_OK)
        return st;
    double P[12]; /* the source is the same for every scale of P */
    unit_scale(P_given, P);
    double hr = hadamard_ratio(P);
    if (hr < RANK_EPS)
        return tl_fail(eb, TL_EINVAL,
                       "projection matrix: left 3x3 block is singular (|det| / row norms = %g): "
                       "no finite source",
                       hr);
    /* Cramer's rule on M s = -p4; the columns of M are P[c], P[4 + c], P[8 + c]. */
    const double c0[3] = {P[0], P[4], P[8]}, c1[3] = {P[1], P[5], P[9]},
                 c2[3] = {P[2], P[6], P[10]}, b[3] = {-P[3], -P[7], -P[11]};
    /* det of the matrix with columns (a, b, c) equals det3 of rows (a, b, c) (transpose) */
    double d = det3(c0, c1, c2);
    s[0] = det3(b, c1, c2) / d;
    s[1] = det3(c0, b, c2) / d;
    s[2] = det3(c0, c1, b) / d;
    return TL_OK;
}

tl_status tl_cone_matrix_normalize(double P[12], const double in_front[3], tl_errbuf *eb)
{
    tl_status st = finite_entries(P, eb);
    if (st != TL_OK)
        return st;
    double n = norm3(P + 8);
    if (!(n > 0))
        return tl_fail(eb, TL_EINVAL, "projection matrix: third row's rotation part is zero");
    double w = P[8] * in_front[0] + P[9] * in_front[1] + P[10] * in_front[2] + P[11];
    if (w == 0 || !isfinite(w))
        return tl_fail(eb, TL_EINVAL,
                       "projection matrix: point (%g, %g, %g) lies on the source plane (depth %g)",
                       in_front[0], in_front[1], in_front[2], w);
    double f = (w > 0 ? 1.0 : -1.0) / n;
    for (int k = 0; k < 12; k++)
        P[k] *= f;
    return TL_OK;
}

tl_status tl_cone_matrix_check(const double P[12], const tl_cone_box *b, tl_errbuf *eb)
{
    tl_status st = finite_entries(P, eb);
    if (st != TL_OK)
        return st;
    double gr = gram_ratio(P);
    if (gr < RANK_EPS * RANK_EPS)
        return tl_fail(eb, TL_EINVAL,
                       "projection matrix: rank-deficient (rank < 3; Gram ratio %g)", gr);
    double s[3];
    if ((st = tl_cone_matrix_source(P, s, eb)) != TL_OK)
        return st;
    double n = norm3(P + 8);
    if (fabs(n - 1) > NORM_TOL)
        return tl_fail(eb, TL_EINVAL,
                       "projection matrix: third row's rotation part has norm %.12g, not 1 "
                       "(normalise it so depths are in mm)",
                       n);
    if (s[0] >= b->lo[0] && s[0] <= b->hi[0] && s[1] >= b->lo[1] && s[1] <= b->hi[1] &&
        s[2] >= b->lo[2] && s[2] <= b->hi[2])
        return tl_fail(eb, TL_EINVAL,
                       "projection matrix: source (%g, %g, %g) mm lies inside the volume "
                       "[%g, %g] x [%g, %g] x [%g, %g]",
                       s[0], s[1], s[2], b->lo[0], b->hi[0], b->lo[1], b->hi[1], b->lo[2],
                       b->hi[2]);
    for (int c = 0; c < 8; c++) {
        double x[3] = {c & 1 ? b->hi[0] : b->lo[0], c & 2 ? b->hi[1] : b->lo[1],
                       c & 4 ? b->hi[2] : b->lo[2]};
        double w = P[8] * x[0] + P[9] * x[1] + P[10] * x[2] + P[11];
        if (!(w > 0))
            return tl_fail(eb, TL_EINVAL,
                           "projection matrix: volume corner (%g, %g, %g) mm has depth %g, "
                           "not in front of the source",
                           x[0], x[1], x[2], w);
    }
    return TL_OK;
}

void tl_cone_matrix_intrinsics(const double P[12], double *fu, double *fv, double *u0, double *v0)
{
    const double *m3 = P + 8;
    *u0 = P[0] * m3[0] + P[1] * m3[1] + P[2] * m3[2];
    *v0 = P[4] * m3[0] + P[5] * m3[1] + P[6] * m3[2];
    double a[3], b[3];
    for (int k = 0; k < 3; k++) {
        a[k] = P[k] - *u0 * m3[k];
        b[k] = P[4 + k] - *v0 * m3[k];
    }
    *fu = norm3(a);
    *fv = norm3(b);
}

static void cross3(const double a[3], const double b[3], double c[3])
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

static double dot3(const double a[3], const double b[3])
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

tl_status tl_cone_matrix_prepare(double P[12], tl_errbuf *eb)
{
    static const double iso[3] = {0, 0, 0};
    double s[3];
    tl_status st = tl_cone_matrix_source(P, s, eb);
    if (st != TL_OK || (st = tl_cone_matrix_normalize(P, iso, eb)) != TL_OK)
        return st;
    for (int k = 0; k < 12; k++) /* a row 3 of near-zero norm scales the rest past range */
        if (!isfinite(P[k]))
            return tl_fail(eb, TL_EINVAL,
                           "projection matrix: P[%d][%d] is not finite once normalised (the "
                           "depth row is too small against the others)",
                           k / 4, k % 4);
    if (!(P[11] > 0)) /* a depth that underflows: the isocentre on the source's plane */
        return tl_fail(eb, TL_EINVAL,
                       "projection matrix: the isocentre's depth is %g mm once normalised (on "
                       "the source's plane)",
                       P[11]);
    return TL_OK;
}

tl_status tl_cone_from_astra_vec(const double vec[12], uint32_t rows, uint32_t cols, double P[12],
                                 tl_errbuf *eb)
{
    const double *s = vec, *c = vec + 3, *U = vec + 6, *V = vec + 9;
    double cu = 0.5 * (cols - 1.0), cv = 0.5 * (rows - 1.0), W[3];
    for (int k = 0; k < 3; k++) /* from the source to pixel (0,0)'s centre */
        W[k] = c[k] - cu * U[k] - cv * V[k] - s[k];
    /* [U V W] maps (u, v, 1) to the ray from the source; P = [M | -M s], M its inverse */
    double vw[3], wu[3], uv[3];
    cross3(V, W, vw);
    cross3(W, U, wu);
    cross3(U, V, uv);
    double det = dot3(U, vw), norms = sqrt(dot3(U, U) * dot3(V, V) * dot3(W, W));
    if (!(norms > 0) || !(fabs(det) >= RANK_EPS * norms))
        return tl_fail(eb, TL_EINVAL,
                       "the detector's u (%g, %g, %g) and v (%g, %g, %g) and the "
                       "source (%g, %g, %g) give no camera (a zero or parallel vector, or the "
                       "source in the detector's plane)",
                       U[0], U[1], U[2], V[0], V[1], V[2], s[0], s[1], s[2]);
    const double *inv[3] = {vw, wu, uv}; /* the rows of M^-1, times det */
    for (int r = 0; r < 3; r++) {
        for (int k = 0; k < 3; k++)
            P[4 * r + k] = inv[r][k] / det;
        P[4 * r + 3] = -dot3(inv[r], s) / det;
    }
    return tl_cone_matrix_prepare(P, eb);
}

static double tomosynthesis_angle(const tl_cone_tomosynthesis *g, uint32_t k)
{
    return g->n > 1 ? g->span * ((double)k / (g->n - 1) - 0.5) : 0.0;
}

void tl_cone_tomosynthesis_angles(const tl_cone_tomosynthesis *g, double *angles)
{
    for (uint32_t k = 0; k < g->n; k++)
        angles[k] = tomosynthesis_angle(g, k);
}

static tl_status tomosynthesis_check(const tl_cone_tomosynthesis *g, tl_errbuf *eb)
{
    const double pos[] = {g->sad, g->sdd, g->pitch_u, g->pitch_v};
    for (size_t i = 0; i < sizeof pos / sizeof *pos; i++)
        if (!(isfinite(pos[i]) && pos[i] > 0))
            return tl_fail(eb, TL_EINVAL,
                           "tomosynthesis: sad %g, sdd %g, pitch %g x %g mm: each finite and > 0",
                           g->sad, g->sdd, g->pitch_u, g->pitch_v);
    if (!(g->span >= 0 && g->span < M_PI))
        return tl_fail(eb, TL_EINVAL, "tomosynthesis: span %g rad outside 0 .. < pi", g->span);
    if (g->n == 0 || g->rows == 0 || g->cols == 0)
        return tl_fail(eb, TL_EINVAL, "tomosynthesis: %u views of %u x %u pixels", g->n, g->rows,
                       g->cols);
    if (g->source == TL_TOMO_LINE && g->detector == TL_TOMO_ROTATING)
        return tl_fail(eb, TL_EINVAL,
                       "tomosynthesis: a line source with a rotating detector (a line source "
                       "goes with a stationary detector)");
    return TL_OK;
}

tl_status tl_cone_tomosynthesis_matrices(const tl_cone_tomosynthesis *g, double (*P)[12],
                                         tl_errbuf *eb)
{
    tl_status st = tomosynthesis_check(g, eb);
    for (uint32_t k = 0; st == TL_OK && k < g->n; k++) {
        const double b = tomosynthesis_angle(g, k);
        const double sb = sin(b), cb = cos(b), d = g->sdd - g->sad;
        /* ASTRA's cone_vec: source, detector centre, column step, row step (mm) */
        double vec[12] = {-g->sad * sb, -g->sad * cb, 0, 0, d, 0, g->pitch_u, 0, 0, 0, 0,
                          g->pitch_v};
        if (g->source == TL_TOMO_LINE)
            vec[0] = -g->sad * tan(b), vec[1] = -g->sad;
        if (g->detector == TL_TOMO_ROTATING) { /* the circular trajectory's at angle b */
            vec[3] = d * sb, vec[4] = d * cb;
            vec[6] = g->pitch_u * cb, vec[7] = -g->pitch_u * sb;
        }
        st = tl_cone_from_astra_vec(vec, g->rows, g->cols, P[k], eb);
    }
    return st;
}
