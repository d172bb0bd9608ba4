/* check_cone.c — cone-beam projection matrices (gpu/geometry/cone.h).
 *
 * The matrices are checked against an independent construction of the same geometry: the
 * source and detector placed in the world and the ray from the source through the point
 * intersected with the detector plane (similar triangles), in double precision, so the
 * tolerances are rounding-level (1e-9 px, 1e-9 mm relative).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/geometry/cone.h"
#include "gpu/phantom.h"
#include "tests/testutil.h"

#define NP 37

static double angles[NP];

static tl_cone_circular geom(void)
{
    for (int i = 0; i < NP; i++)
        angles[i] = -3.0 + 0.19 * i; /* irregular, spans more than a turn, negative too */
    tl_cone_circular g = {.sad = 750,
                          .sdd = 1200,
                          .pitch_u = 0.4,
                          .pitch_v = 0.25,
                          .offset_u = 3.25,
                          .offset_v = -7.5,
                          .rows = 300,
                          .cols = 512,
                          .n = NP,
                          .angles = angles};
    return g;
}

/* The world-space construction: source S, central ray r, detector axes, plane hit. */
static void reference(const tl_cone_circular *g, double b, const double x[3], double *u, double *v,
                      double S[3])
{
    double r[3] = {sin(b), cos(b), 0}, eu[3] = {cos(b), -sin(b), 0}, ev[3] = {0, 0, 1};
    double C[3], d[3], H[3];
    for (int k = 0; k < 3; k++) {
        S[k] = -g->sad * r[k];
        C[k] = S[k] + g->sdd * r[k]; /* the principal point on the detector */
        d[k] = x[k] - S[k];
    }
    double lambda = g->sdd / (d[0] * r[0] + d[1] * r[1] + d[2] * r[2]);
    double hu = 0, hv = 0;
    for (int k = 0; k < 3; k++) {
        H[k] = S[k] + lambda * d[k];
        hu += (H[k] - C[k]) * eu[k];
        hv += (H[k] - C[k]) * ev[k];
    }
    *u = (g->cols - 1) / 2.0 + g->offset_u + hu / g->pitch_u;
    *v = (g->rows - 1) / 2.0 + g->offset_v + hv / g->pitch_v;
}

START_TEST(test_axis_point_hits_principal_point)
{
    tl_cone_circular g = geom();
    double(*P)[12] = malloc(NP * sizeof *P);
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    double u0 = 255.5 + 3.25, v0 = 149.5 - 7.5;
    for (int i = 0; i < NP; i++) {
        /* the isocentre, and every point of the central ray between source and detector */
        for (double t = -700; t <= 1100; t += 150) {
            double x[3] = {t * sin(angles[i]), t * cos(angles[i]), 0}, u, v, w;
            ck_assert(tl_cone_project(P[i], x, &u, &v, &w));
            ck_assert_msg(fabs(u - u0) < 1e-9 && fabs(v - v0) < 1e-9,
                          "view %d t %g: (%.12g, %.12g)", i, t, u, v);
            ck_assert_msg(fabs(w - (750 + t)) < 1e-9, "depth %.12g", w);
        }
    }
    free(P);
}
END_TEST

START_TEST(test_similar_triangles)
{
    tl_cone_circular g = geom();
    double(*P)[12] = malloc(NP * sizeof *P);
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    tl_rng rng;
    tl_rng_seed(&rng, 21);
    double worst = 0;
    for (int i = 0; i < NP; i++)
        for (int k = 0; k < 200; k++) {
            double x[3], u, v, w, ru, rv, S[3];
            for (int a = 0; a < 3; a++)
                x[a] = 300 * (2 * tl_rng_uniform(&rng) - 1);
            ck_assert(tl_cone_project(P[i], x, &u, &v, &w));
            reference(&g, angles[i], x, &ru, &rv, S);
            worst = fmax(worst, fmax(fabs(u - ru), fabs(v - rv)));
            /* depth: distance from the source along the central ray */
            double wr = (x[0] - S[0]) * sin(angles[i]) + (x[1] - S[1]) * cos(angles[i]);
            ck_assert_msg(fabs(w - wr) < 1e-9 * g.sad, "depth %.15g vs %.15g", w, wr);
            /* magnification of the point: pixel offsets scale with sdd / w */
            ck_assert_msg(fabs((v - (149.5 - 7.5)) * g.pitch_v - x[2] * g.sdd / w) < 1e-9,
                          "v magnification");
        }
    ck_assert_msg(worst < 1e-9, "max |matrix - similar triangles| = %g px", worst);
    ck_assert_double_eq_tol(tl_cone_circular_magnification(&g), 1.6, 1e-15);
    free(P);
}
END_TEST

START_TEST(test_source_and_intrinsics)
{
    tl_cone_circular g = geom();
    double(*P)[12] = malloc(NP * sizeof *P);
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    tl_cone_box box = tl_cone_volume_box(256, 256, 200, 1.0);
    for (int i = 0; i < NP; i++) {
        double s[3], b = angles[i];
        ck_assert_int_eq(tl_cone_matrix_source(P[i], s, &eb), TL_OK);
        ck_assert_msg(fabs(s[0] + 750 * sin(b)) < 1e-9 * 750 &&
                          fabs(s[1] + 750 * cos(b)) < 1e-9 * 750 && fabs(s[2]) < 1e-9 * 750,
                      "view %d source (%.12g, %.12g, %.12g)", i, s[0], s[1], s[2]);
        double fu, fv, u0, v0;
        tl_cone_matrix_intrinsics(P[i], &fu, &fv, &u0, &v0);
        ck_assert_double_eq_tol(fu, 1200 / 0.4, 1e-9);
        ck_assert_double_eq_tol(fv, 1200 / 0.25, 1e-9);
        ck_assert_double_eq_tol(u0, 258.75, 1e-9);
        ck_assert_double_eq_tol(v0, 142.0, 1e-9);
        /* the built matrices are usable as they are */
        ck_assert_msg(tl_cone_matrix_check(P[i], &box, &eb) == TL_OK, "%s", eb.msg);
        /* and normalising a scaled (even negated) copy restores them */
        double Q[12], centre[3] = {0, 0, 0};
        for (int k = 0; k < 12; k++)
            Q[k] = -3.7e-3 * P[i][k];
        ck_assert_int_eq(tl_cone_matrix_normalize(Q, centre, &eb), TL_OK);
        for (int k = 0; k < 12; k++)
            ck_assert_double_eq_tol(Q[k], P[i][k], 1e-12 * (1 + fabs(P[i][k])));
    }
    free(P);
}
END_TEST

/* sad = sdd -> infinity, pitch 1 mm: the parallel-beam formula of ARCHITECTURE.md §3.1. */
START_TEST(test_parallel_limit)
{
    double b[3] = {0.0, 0.7, 2.9};
    tl_cone_circular g = {.sad = 1e9,
                          .sdd = 1e9,
                          .pitch_u = 1,
                          .pitch_v = 1,
                          .rows = 64,
                          .cols = 100,
                          .n = 3,
                          .angles = b};
    double P[3][12];
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    for (int i = 0; i < 3; i++) {
        double x[3] = {30, -41, 12}, u, v, w;
        ck_assert(tl_cone_project(P[i], x, &u, &v, &w));
        ck_assert_double_eq_tol(u, 49.5 + 30 * cos(b[i]) + 41 * sin(b[i]), 1e-5);
        ck_assert_double_eq_tol(v, 31.5 + 12, 1e-5);
    }
}
END_TEST

static void expect_error(tl_status st, const tl_errbuf *eb, const char *needle)
{
    ck_assert_int_eq(st, TL_EINVAL);
    ck_assert_msg(strstr(eb->msg, needle) != NULL, "'%s' lacks '%s'", eb->msg, needle);
}

START_TEST(test_bad_circular)
{
    double P[NP][12];
    tl_errbuf eb;
    tl_cone_circular g = geom();
    g.sad = 0;
    expect_error(tl_cone_circular_matrices(&g, P, &eb), &eb, "source-axis distance = 0");
    g = geom();
    g.sdd = -5;
    expect_error(tl_cone_circular_matrices(&g, P, &eb), &eb, "source-detector distance = -5");
    g = geom();
    g.pitch_u = NAN;
    expect_error(tl_cone_circular_matrices(&g, P, &eb), &eb, "pixel pitch u = nan");
    g = geom();
    g.pitch_v = 0;
    expect_error(tl_cone_circular_matrices(&g, P, &eb), &eb, "pixel pitch v = 0");
    g = geom();
    g.sad = INFINITY;
    expect_error(tl_cone_circular_matrices(&g, P, &eb), &eb, "source-axis distance = inf");
    g = geom();
    g.offset_v = INFINITY;
    expect_error(tl_cone_circular_matrices(&g, P, &eb), &eb, "offset (3.25, inf)");
    g = geom();
    g.rows = 0;
    expect_error(tl_cone_circular_matrices(&g, P, &eb), &eb, "0 x 512");
    g = geom();
    g.n = 0;
    expect_error(tl_cone_circular_matrices(&g, P, &eb), &eb, "no projection angles");
    g = geom();
    angles[5] = NAN;
    expect_error(tl_cone_circular_check(&g, &eb), &eb, "angle 5 = nan");
}
END_TEST

START_TEST(test_bad_matrices)
{
    tl_cone_circular g = geom();
    double P[NP][12], Q[12], s[3];
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    tl_cone_box box = tl_cone_volume_box(128, 128, 128, 1.0);

    memcpy(Q, P[3], sizeof Q);
    Q[6] = NAN;
    expect_error(tl_cone_matrix_check(Q, &box, &eb), &eb, "P[1][2] = nan");
    Q[6] = -INFINITY;
    expect_error(tl_cone_matrix_source(Q, s, &eb), &eb, "P[1][2] = -inf");

    /* rank 2: row 3 = row 1 + row 2 */
    memcpy(Q, P[3], sizeof Q);
    for (int k = 0; k < 4; k++)
        Q[8 + k] = Q[k] + Q[4 + k];
    expect_error(tl_cone_matrix_check(Q, &box, &eb), &eb, "rank-deficient");

    /* rank 3 but an affine (parallel) camera: M singular, no finite source */
    double A[12] = {1, 0, 0, 10, 0, 0, 1, 20, 0, 0, 0, 1};
    expect_error(tl_cone_matrix_check(A, &box, &eb), &eb, "singular");
    expect_error(tl_cone_matrix_source(A, s, &eb), &eb, "no finite source");

    /* scaled: depths no longer in mm */
    for (int k = 0; k < 12; k++)
        Q[k] = 2 * P[3][k];
    expect_error(tl_cone_matrix_check(Q, &box, &eb), &eb, "norm 2,");
    for (int k = 0; k < 12; k++) /* far enough that squares overflow: still "scaled" */
        Q[k] = 1e160 * P[3][k];
    expect_error(tl_cone_matrix_check(Q, &box, &eb), &eb, "norm 1e+160,");

    /* the source (at 750 mm) inside a 1600 mm volume */
    tl_cone_box big = tl_cone_volume_box(1600, 1600, 100, 1.0);
    expect_error(tl_cone_matrix_check(P[3], &big, &eb), &eb, "lies inside the volume");

    /* a volume beside the source reaching behind it: the source of view 0 (angle -3) is
     * at (105.8, 742.5, 0) mm; this box covers x in [150, 350], y in [650, 850] */
    tl_cone_box beside = {{150, 650, -10}, {350, 850, 10}};
    expect_error(tl_cone_matrix_check(P[0], &beside, &eb), &eb, "not in front of the source");

    /* normalising about a point on the source plane, or a zero third row */
    double on_plane[3];
    ck_assert_int_eq(tl_cone_matrix_source(P[3], on_plane, &eb), TL_OK);
    memcpy(Q, P[3], sizeof Q);
    expect_error(tl_cone_matrix_normalize(Q, on_plane, &eb), &eb, "source plane");
    Q[8] = Q[9] = Q[10] = 0;
    expect_error(tl_cone_matrix_normalize(Q, (double[3]){0, 0, 0}, &eb), &eb, "is zero");

    /* any scale is the same camera: 1e160 (squares overflow) and 1e-160 (they underflow)
     * normalise to the matrix itself */
    for (int e = -1; e <= 1; e += 2) {
        double R[12];
        for (int k = 0; k < 12; k++)
            R[k] = P[3][k] * pow(10.0, 160 * e);
        ck_assert_msg(tl_cone_matrix_prepare(R, &eb) == TL_OK, "scale 1e%d: %s", 160 * e, eb.msg);
        for (int k = 0; k < 12; k++)
            ck_assert_msg(fabs(R[k] - P[3][k]) <= 1e-12 * (fabs(P[3][k]) + 1),
                          "scale 1e%d: P[%d] %.17g, want %.17g", 160 * e, k, R[k], P[3][k]);
    }

    /* a point behind the source does not project */
    double behind[3] = {2 * on_plane[0], 2 * on_plane[1], 0}, u, v, w;
    ck_assert(!tl_cone_project(P[3], behind, &u, &v, &w));
    ck_assert(w < 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cone");
    TCase *tc = tcase_create("cone");
    tcase_add_test(tc, test_axis_point_hits_principal_point);
    tcase_add_test(tc, test_similar_triangles);
    tcase_add_test(tc, test_source_and_intrinsics);
    tcase_add_test(tc, test_parallel_limit);
    tcase_add_test(tc, test_bad_circular);
    tcase_add_test(tc, test_bad_matrices);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
