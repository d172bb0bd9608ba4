/* check_phantom_cone.c — exact cone-beam line integrals of ellipsoid phantoms
 * (gpu/phantom_cone.h) through the projection matrices of gpu/geometry/cone.h.
 *
 * Independent checks: chords of single spheres known in closed form, and a numeric
 * integral of the point value (tl_phantom_value, which shares only the point-in-ellipsoid
 * test) along the same ray, midpoint rule with step STEP mm. Its error is at most one step
 * times the density jump per boundary crossed, well inside the 1e-3 relative bound for
 * chords of tens of mm.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "gpu/geometry/cone.h"
#include "gpu/phantom_cone.h"
#include "tests/testutil.h"

#define STEP 0.002 /* numeric integration step, mm */

static double angles[8];

static tl_cone_circular geom(void)
{
    for (int i = 0; i < 8; i++)
        angles[i] = 0.3 + 0.8 * i;
    tl_cone_circular g = {.sad = 300,
                          .sdd = 500,
                          .pitch_u = 1.0,
                          .pitch_v = 0.8,
                          .offset_u = 1.5,
                          .offset_v = -2.0,
                          .rows = 160,
                          .cols = 200,
                          .n = 8,
                          .angles = angles};
    return g;
}

START_TEST(test_sphere_through_centre)
{
    tl_cone_circular g = geom();
    double P[8][12];
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    /* a sphere of radius 20 mm, density 0.03 / mm, at the isocentre and off it */
    const double centres[3][3] = {{0, 0, 0}, {12, -7, 5}, {-30, 25, -18}};
    for (int c = 0; c < 3; c++) {
        tl_phantom ph;
        ck_assert_int_eq(tl_phantom_init(&ph, 20.0, 0.0, 20.0), 0);
        tl_ellipsoid e = {.density = 0.03,
                          .a = 1,
                          .b = 1,
                          .c = 1,
                          .x0 = centres[c][0] / 20,
                          .y0 = centres[c][1] / 20,
                          .z0 = centres[c][2] / 20};
        ck_assert_int_eq(tl_phantom_add(&ph, &e), 0);
        for (int i = 0; i < 8; i++) {
            double u, v, w, li;
            ck_assert(tl_cone_project(P[i], centres[c], &u, &v, &w));
            ck_assert_int_eq(tl_phantom_cone_pixel(&ph, P[i], u, v, &li, &eb), TL_OK);
            ck_assert_msg(fabs(li - 2 * 20 * 0.03) <= 1e-12, "centre %d view %d: %.17g", c, i, li);
        }
        tl_phantom_free(&ph);
    }
}
END_TEST

/* A ray at distance h from the sphere's centre sees the chord 2 sqrt(r^2 - h^2): rays
 * through the isocentre's plane, tilted by the cone angle. */
START_TEST(test_sphere_chords)
{
    tl_cone_circular g = geom();
    double P[8][12];
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_init(&ph, 40.0, 0.0, 40.0), 0);
    tl_ellipsoid e = {.density = 1.0, .a = 1, .b = 1, .c = 1};
    ck_assert_int_eq(tl_phantom_add(&ph, &e), 0);
    for (int i = 0; i < 8; i++)
        for (double u = 0; u < 200; u += 7.5)
            for (double v = 0; v < 160; v += 9.5) {
                double s[3], li;
                ck_assert_int_eq(tl_cone_matrix_source(P[i], s, &eb), TL_OK);
                ck_assert_int_eq(tl_phantom_cone_pixel(&ph, P[i], u, v, &li, &eb), TL_OK);
                /* distance from the isocentre to the ray through the source and the
                 * pixel: the pixel's direction from the source, via the detector frame */
                double b = angles[i], r[3] = {sin(b), cos(b), 0}, eu[3] = {cos(b), -sin(b), 0};
                double du = (u - 101.0) * g.pitch_u, dv = (v - 77.5) * g.pitch_v, d[3];
                for (int k = 0; k < 3; k++)
                    d[k] = g.sdd * r[k] + du * eu[k] + (k == 2 ? dv : 0);
                double dd = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
                double along = -(s[0] * d[0] + s[1] * d[1] + s[2] * d[2]) / dd;
                double h2 = s[0] * s[0] + s[1] * s[1] + s[2] * s[2] - along * along;
                double want = h2 < 1600 ? 2 * sqrt(1600 - h2) : 0;
                ck_assert_msg(fabs(li - want) <= 1e-9, "view %d (%g, %g): %.12g vs %.12g", i, u, v,
                              li, want);
            }
    tl_phantom_free(&ph);
}
END_TEST

START_TEST(test_miss_is_zero)
{
    tl_cone_circular g = geom();
    double P[8][12];
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 50.0, 0.0, 50.0), 0);
    /* the phantom's shadow (a 92 mm ellipsoid's outline magnified at most 500/(300 - 69))
     * misses the detector's corners and its top and bottom rows */
    for (int i = 0; i < 8; i++) {
        double li;
        const double px[4][2] = {{0, 0}, {199, 0}, {0, 159}, {199, 159}};
        for (int k = 0; k < 4; k++) {
            ck_assert_int_eq(tl_phantom_cone_pixel(&ph, P[i], px[k][0], px[k][1], &li, &eb),
                             TL_OK);
            ck_assert(li == 0.0);
        }
    }
    /* an ellipsoid wholly behind the source adds nothing; one around it adds its exit
     * chord only */
    tl_phantom behind;
    ck_assert_int_eq(tl_phantom_init(&behind, 10.0, 0.0, 10.0), 0);
    tl_ellipsoid e = {.density = 2.0, .a = 1, .b = 1, .c = 1, .y0 = -40}; /* r 10 at y -400 */
    ck_assert_int_eq(tl_phantom_add(&behind, &e), 0);
    double o[3] = {0, -300, 0}, d[3] = {0, 1, 0}, back[3] = {0, -1, 0};
    ck_assert(tl_phantom_ray_integral(&behind, o, d) == 0.0);
    ck_assert_double_eq_tol(tl_phantom_ray_integral(&behind, o, back), 2 * 10 * 2.0, 1e-12);
    double inside[3] = {0, -395, 0};
    ck_assert_double_eq_tol(tl_phantom_ray_integral(&behind, inside, d), 5 * 2.0, 1e-12);
    ck_assert(tl_phantom_ray_integral(&behind, o, (double[3]){0, 0, 0}) == 0.0);
    tl_phantom_free(&behind);
    tl_phantom_free(&ph);
}
END_TEST

/* Midpoint rule along the ray from the source, to depth 2 sad (past the phantom). */
static double numeric(const tl_phantom *ph, const double s[3], const double d[3], double L)
{
    double n = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]), sum = 0;
    long steps = (long)ceil(L / STEP);
    for (long k = 0; k < steps; k++) {
        double t = (k + 0.5) * STEP;
        sum += tl_phantom_value(ph, s[0] + t * d[0] / n, s[1] + t * d[1] / n, s[2] + t * d[2] / n);
    }
    return sum * STEP;
}

START_TEST(test_shepp_logan_numeric)
{
    tl_cone_circular g = geom();
    double P[8][12];
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 50.0, 0.0, 50.0), 0);
    double worst = 0;
    int rays = 0;
    for (int i = 0; i < 8; i += 3)
        for (double u = 40; u <= 160; u += 20)
            for (double v = 30; v <= 130; v += 25) {
                double li, s[3];
                ck_assert_int_eq(tl_phantom_cone_pixel(&ph, P[i], u, v, &li, &eb), TL_OK);
                ck_assert_int_eq(tl_cone_matrix_source(P[i], s, &eb), TL_OK);
                /* the direction through pixel (u, v): a point projecting there at depth 1 */
                double b = angles[i], r[3] = {sin(b), cos(b), 0}, eu[3] = {cos(b), -sin(b), 0};
                double d[3];
                for (int k = 0; k < 3; k++)
                    d[k] = g.sdd * r[k] + (u - 101.0) * g.pitch_u * eu[k] +
                           (k == 2 ? (v - 77.5) * g.pitch_v : 0);
                double num = numeric(&ph, s, d, 2 * g.sad);
                if (num < 1.0)
                    continue; /* the rim, where the bound would be relative to little */
                rays++;
                worst = fmax(worst, fabs(li - num) / num);
                ck_assert_msg(fabs(li - num) <= 1e-3 * num, "view %d (%g, %g): %.9g vs %.9g", i, u,
                              v, li, num);
            }
    ck_assert_msg(rays >= 60, "only %d rays through the phantom", rays);
    tl_phantom_free(&ph);
}
END_TEST

START_TEST(test_project_and_errors)
{
    tl_cone_circular g = geom();
    double P[8][12];
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 50.0, 0.0, 50.0), 0);
    double *out = malloc(160 * 200 * sizeof *out), li;
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(tl_phantom_cone_project(&ph, P[2], 160, 200, out, &eb), TL_OK);
    for (uint32_t v = 0; v < 160; v += 13)
        for (uint32_t u = 0; u < 200; u += 11) {
            ck_assert_int_eq(tl_phantom_cone_pixel(&ph, P[2], u, v, &li, &eb), TL_OK);
            ck_assert(out[v * 200 + u] == li);
        }
    double A[12] = {1, 0, 0, 10, 0, 0, 1, 20, 0, 0, 0, 1}; /* affine: no source */
    ck_assert_int_eq(tl_phantom_cone_pixel(&ph, A, 0, 0, &li, &eb), TL_EINVAL);
    ck_assert_int_eq(tl_phantom_cone_project(&ph, A, 2, 2, out, &eb), TL_EINVAL);
    free(out);
    tl_phantom_free(&ph);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("phantom_cone");
    TCase *tc = tcase_create("phantom_cone");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_sphere_through_centre);
    tcase_add_test(tc, test_sphere_chords);
    tcase_add_test(tc, test_miss_is_zero);
    tcase_add_test(tc, test_shepp_logan_numeric);
    tcase_add_test(tc, test_project_and_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
