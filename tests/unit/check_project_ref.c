/* check_project_ref.c — the float64 reference projectors (gpu/project_ref.h, issue #28):
 *   adjoint   <A x, y> = <x, A^T y> for both pairs (Joseph, matched) in both geometries,
 *             on random x and y, to float64 rounding (relative 1e-12), with angles that
 *             include the Joseph walk's switch between axes (45 degrees) and the axes;
 *   analytic  Joseph's projections of the pixel-sampled Shepp-Logan phantom against its
 *             exact line integrals (gpu/phantom.h, gpu/phantom_cone.h): within a bound and
 *             converging when the grid is refined (the error of a half-size grid is
 *             below 0.75 times the coarse one's), in parallel and in cone beam (every
 *             axis of the walk: one view looks along z); the matched projector, scaled by
 *             a pixel's area over a bin, within the same bound where pixels are bins;
 *   fdk       the FDK reference (gpu/fdk_ref.c) back-projects through the matched pair's
 *             back projection: covered by check_fdk_ref.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/geometry/cone.h"
#include "gpu/phantom.h"
#include "gpu/phantom_cone.h"
#include "gpu/project_ref.h"
#include "tests/testutil.h"

#define ADJOINT_REL 1e-12
#define CONVERGE 0.75 /* fine-grid error / coarse-grid error, at most */
/* Coarse-grid errors against the exact line integrals, about 1.3x those measured when the
 * test was written (the phantom's skull is thinner than a coarse pixel, so point sampling
 * dominates): parallel 0.069 (Joseph, 64^2; matched 0.068), cone 0.196 (32^3 of 2 mm). */
#define PB_MAX 0.09
#define CB_MAX 0.25

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static double *random_vector(size_t n, uint64_t seed)
{
    double *v = malloc(n * sizeof *v);
    ck_assert(v != NULL);
    tl_rng r;
    tl_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        v[i] = tl_rng_uniform(&r) - 0.5;
    return v;
}

static double rel_l2(const double *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / den);
}

static const char *name(tl_projector p)
{
    return p == TL_PROJECTOR_JOSEPH ? "joseph" : "matched";
}

/* ---- parallel beam ------------------------------------------------------------------------ */

#define PB_N 23

static double pb_theta[PB_N], pb_center[PB_N];

/* Uneven angles over 180 degrees, 0, 45 and 90 among them; centres off the middle. */
static tl_pb_slice pb_geometry(uint32_t nx, uint32_t ny, double pixel, uint32_t cols)
{
    for (int k = 0; k < PB_N; k++) {
        pb_theta[k] = M_PI * k / PB_N + 0.01 * sin(3.0 * k);
        pb_center[k] = (cols - 1) / 2.0 + 0.7 * cos(k);
    }
    pb_theta[0] = 0;
    pb_theta[5] = M_PI / 4;
    pb_theta[11] = M_PI / 2;
    tl_pb_slice g = {.nx = nx,
                     .ny = ny,
                     .pixel = pixel,
                     .cols = cols,
                     .n = PB_N,
                     .theta = pb_theta,
                     .center = pb_center};
    return g;
}

START_TEST(adjoint_parallel)
{
    tl_pb_slice g = pb_geometry(37, 29, 1.3, 53);
    size_t ni = (size_t)g.nx * g.ny, ns = (size_t)g.n * g.cols;
    double *x = random_vector(ni, 1), *y = random_vector(ns, 2);
    double *Ax = malloc(ns * sizeof *Ax), *Aty = malloc(ni * sizeof *Aty);
    ck_assert(Ax && Aty);
    for (int p = 0; p < 2; p++) {
        tl_project_parallel(&g, (tl_projector)p, x, Ax);
        tl_backproject_parallel(&g, (tl_projector)p, y, Aty);
        double lhs = dot(Ax, y, ns), rhs = dot(x, Aty, ni);
        double rel = fabs(lhs - rhs) / fabs(lhs);
        printf("  parallel %s: <Ax, y> %.15g, <x, A^T y> %.15g, relative %.2g\n",
               name((tl_projector)p), lhs, rhs, rel);
        ck_assert_msg(rel <= ADJOINT_REL, "%s: relative %g", name((tl_projector)p), rel);
        ck_assert(fabs(lhs) > 1e-3); /* a walk that links nothing would pass as 0 = 0 */
    }
    free(x);
    free(y);
    free(Ax);
    free(Aty);
}
END_TEST

/* Relative L2 of projector p's sinogram of the phantom sampled on an n x n grid of pixel
 * size 64 / n against the phantom's exact line integrals, on 96 bins. */
static double pb_error(tl_projector p, uint32_t n)
{
    const uint32_t cols = 96;
    const double pixel = 64.0 / n; /* the image spans 64 detector pixels */
    tl_pb_slice g = pb_geometry(n, n, pixel, cols);
    for (int k = 0; k < PB_N; k++)
        pb_center[k] = (cols - 1) / 2.0; /* the phantom's line integrals: one axis */
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 30.0, 0.0, 30.0), 0);
    double *img = malloc((size_t)n * n * sizeof *img);
    double *sino = malloc((size_t)PB_N * cols * sizeof *sino);
    double *exact = malloc((size_t)PB_N * cols * sizeof *exact);
    ck_assert(img && sino && exact);
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t i = 0; i < n; i++)
            img[(size_t)j * n + i] = tl_phantom_value(&ph, (i - (n - 1) / 2.0) * pixel,
                                                      (j - (n - 1) / 2.0) * pixel, 0.0);
    tl_project_parallel(&g, p, img, sino);
    if (p == TL_PROJECTOR_MATCHED) /* a pixel's area spread over bins of width 1 */
        for (size_t k = 0; k < (size_t)PB_N * cols; k++)
            sino[k] *= pixel * pixel;
    for (int k = 0; k < PB_N; k++)
        for (uint32_t u = 0; u < cols; u++)
            exact[(size_t)k * cols + u] =
                tl_phantom_line_integral(&ph, pb_theta[k], u - pb_center[k], 0.0);
    double e = rel_l2(sino, exact, (size_t)PB_N * cols);
    tl_phantom_free(&ph);
    free(img);
    free(sino);
    free(exact);
    return e;
}

START_TEST(analytic_parallel)
{
    double coarse = pb_error(TL_PROJECTOR_JOSEPH, 64), fine = pb_error(TL_PROJECTOR_JOSEPH, 128);
    printf("  parallel joseph vs exact line integrals: rel L2 %.4f (64^2), %.4f (128^2)\n", coarse,
           fine);
    ck_assert_msg(coarse < PB_MAX, "%g", coarse);
    ck_assert_msg(fine < CONVERGE * coarse, "%g then %g", coarse, fine);
    /* the matched (pixel-driven) projector models line integrals only where a pixel is as
     * wide as a bin (smaller pixels alias, larger ones leave gaps): it is there as the back
     * projection's transpose, not as physics, so it is held to the bound at that size */
    double matched = pb_error(TL_PROJECTOR_MATCHED, 64);
    printf("  parallel matched vs exact line integrals: rel L2 %.4f (64^2)\n", matched);
    ck_assert_msg(matched < PB_MAX, "%g", matched);
}
END_TEST

/* ---- cone beam ---------------------------------------------------------------------------- */

#define CB_N 9

/* A circular scan of CB_N - 1 views (one of them at 45 degrees) and one view from below,
 * whose rays run mostly along z, so every axis of the Joseph walk is used. */
static tl_cb_volume cb_geometry(double (*P)[12], uint32_t n, double voxel, uint32_t det)
{
    double angles[CB_N];
    for (int k = 0; k < CB_N; k++)
        angles[k] = 2 * M_PI * k / CB_N + 0.1;
    angles[2] = M_PI / 4;
    tl_cone_circular c = {.sad = 150,
                          .sdd = 300,
                          .pitch_u = 80.0 / det, /* 40 mm at the axis */
                          .pitch_v = 80.0 / det,
                          .offset_u = 0.3,
                          .offset_v = -0.2,
                          .rows = det,
                          .cols = det,
                          .n = CB_N,
                          .angles = angles};
    tl_errbuf eb;
    ck_assert_msg(tl_cone_circular_matrices(&c, P, &eb) == TL_OK, "%s", eb.msg);
    /* the last view from below the volume: central ray r = +z, detector axes x and y
     * (cone.h's matrix with other axes: [f e_u + u0 r, u0 sad; f e_v + v0 r, v0 sad; r, sad]) */
    const double f = c.sdd / c.pitch_u, u0 = (det - 1) / 2.0, v0 = u0, sad = c.sad;
    const double top[12] = {f, 0, u0, u0 * sad, 0, f, v0, v0 * sad, 0, 0, 1, sad};
    memcpy(P[CB_N - 1], top, sizeof top);
    tl_cb_volume g = {.vol = {n, n, n, voxel}, .rows = det, .cols = det, .n = CB_N, .P = P};
    return g;
}

START_TEST(adjoint_cone)
{
    double P[CB_N][12];
    tl_cb_volume g = cb_geometry(P, 11, 2.5, 17);
    g.vol.ny = 9; /* odd, unequal sides */
    g.vol.nz = 7;
    size_t nv = (size_t)g.vol.nx * g.vol.ny * g.vol.nz, np = (size_t)g.n * g.rows * g.cols;
    double *x = random_vector(nv, 3), *y = random_vector(np, 4);
    double *Ax = malloc(np * sizeof *Ax), *Aty = malloc(nv * sizeof *Aty);
    ck_assert(Ax && Aty);
    tl_errbuf eb;
    for (int p = 0; p < 2; p++) {
        ck_assert_msg(tl_project_cone(&g, (tl_projector)p, x, Ax, &eb) == TL_OK, "%s", eb.msg);
        ck_assert_msg(tl_backproject_cone(&g, (tl_projector)p, y, Aty, &eb) == TL_OK, "%s",
                      eb.msg);
        double lhs = dot(Ax, y, np), rhs = dot(x, Aty, nv);
        double rel = fabs(lhs - rhs) / fabs(lhs);
        printf("  cone %s: <Ax, y> %.15g, <x, A^T y> %.15g, relative %.2g\n",
               name((tl_projector)p), lhs, rhs, rel);
        ck_assert_msg(rel <= ADJOINT_REL, "%s: relative %g", name((tl_projector)p), rel);
        ck_assert(fabs(lhs) > 1e-3);
    }
    /* a matrix with no finite source is refused, naming the view */
    double bad[CB_N][12];
    memcpy(bad, P, sizeof bad);
    memset(bad[4], 0, 8 * sizeof(double));
    tl_cb_volume b = g;
    b.P = (const double(*)[12])bad;
    ck_assert_int_eq(tl_project_cone(&b, TL_PROJECTOR_JOSEPH, x, Ax, &eb), TL_EINVAL);
    ck_assert_msg(strstr(eb.msg, "view 4") != NULL, "%s", eb.msg);
    free(x);
    free(y);
    free(Ax);
    free(Aty);
}
END_TEST

/* Relative L2 of Joseph's projections of the phantom sampled on n^3 voxels spanning 64 mm
 * against the exact line integrals, on a 48 x 48 detector. */
static double cb_error(uint32_t n)
{
    double P[CB_N][12];
    tl_cb_volume g = cb_geometry(P, n, 64.0 / n, 48);
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 25.0, 0.0, 25.0), 0);
    size_t nv = (size_t)n * n * n, np = (size_t)g.n * g.rows * g.cols;
    double *vol = malloc(nv * sizeof *vol), *proj = malloc(np * sizeof *proj);
    double *exact = malloc(np * sizeof *exact);
    ck_assert(vol && proj && exact);
    double c = (n - 1) / 2.0, s = g.vol.voxel;
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t j = 0; j < n; j++)
            for (uint32_t i = 0; i < n; i++)
                vol[((size_t)k * n + j) * n + i] =
                    tl_phantom_value(&ph, (i - c) * s, (j - c) * s, (k - c) * s);
    tl_errbuf eb;
    ck_assert_msg(tl_project_cone(&g, TL_PROJECTOR_JOSEPH, vol, proj, &eb) == TL_OK, "%s", eb.msg);
    for (uint32_t v = 0; v < g.n; v++)
        ck_assert_msg(tl_phantom_cone_project(&ph, P[v], g.rows, g.cols,
                                              exact + (size_t)v * g.rows * g.cols, &eb) == TL_OK,
                      "%s", eb.msg);
    double e = rel_l2(proj, exact, np);
    tl_phantom_free(&ph);
    free(vol);
    free(proj);
    free(exact);
    return e;
}

START_TEST(analytic_cone)
{
    double coarse = cb_error(32), fine = cb_error(64);
    printf("  cone joseph vs exact line integrals: rel L2 %.4f (32^3), %.4f (64^3)\n", coarse,
           fine);
    ck_assert_msg(coarse < CB_MAX, "%g", coarse);
    ck_assert_msg(fine < CONVERGE * coarse, "%g then %g", coarse, fine);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("project_ref");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, adjoint_parallel);
    tcase_add_test(tc, analytic_parallel);
    tcase_add_test(tc, adjoint_cone);
    tcase_add_test(tc, analytic_cone);
    suite_add_tcase(s, tc);
    return tl_run_suite(s, false);
}
