/* check_fdk_ref.c — the float64 CPU FDK reference (gpu/fdk_ref.h) on exact cone-beam
 * projections of the 3-D Shepp-Logan phantom (gpu/phantom_cone.h): 180 views over 360
 * degrees of a 96 x 96 detector, reconstructed into 64^3 voxels of 1 mm.
 *
 * FDK is exact only in the mid-plane, and a discretised reconstruction blurs every edge
 * over a few voxels (the skull, 1.0 against 0.2, is under a millimetre thick), so accuracy
 * is asserted where it is defined: at the voxels next to the mid-plane (z = -0.5 and
 * +0.5 mm), within 30 mm of the axis (the phantom plus a margin, inside the field of
 * view), whose 3 x 3 x 3 neighbourhood at +-2 mm holds one phantom value ("interior"
 * voxels). Split into the phantom's inside and the background, with the mean of a
 * uniform region within 1 % (the absolute scale: pi / n, 1 / tau, (d / w)^2). The bounds
 * are about 1.5x the values measured when the test was written (commit message).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/fdk_ref.h"
#include "gpu/geometry/cone.h"
#include "gpu/phantom_cone.h"
#include "tests/testutil.h"

#define NV 180
#define DET 96
#define N 64
#define FOV 30.0   /* mm from the axis */
#define MARGIN 2.0 /* mm: interior voxels */
/* Bounds, about 1.5x the values measured when the test was written (commit message). */
#define REL_L2 0.04  /* inside the phantom: relative L2 */
#define MAX_IN 0.07  /* inside: max |error| (phantom values 0.2 .. 0.4, range 0 .. 1) */
#define MAX_OUT 0.15 /* background: max |error|, view-aliasing streaks of the thin skull */

static double angles[NV];

static tl_cone_circular geom(void)
{
    for (int i = 0; i < NV; i++)
        angles[i] = 2 * M_PI * i / NV;
    tl_cone_circular g = {.sad = 200,
                          .sdd = 400,
                          .pitch_u = 1.5, /* 0.75 mm at the axis */
                          .pitch_v = 1.5,
                          .rows = DET,
                          .cols = DET,
                          .n = NV,
                          .angles = angles};
    return g;
}

/* Whether the phantom is constant over the +-1.5 mm neighbourhood of x. */
static bool interior(const tl_phantom *ph, const double x[3])
{
    double c = tl_phantom_value(ph, x[0], x[1], x[2]);
    for (int dz = -1; dz <= 1; dz++)
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++)
                if (tl_phantom_value(ph, x[0] + MARGIN * dx, x[1] + MARGIN * dy,
                                     x[2] + MARGIN * dz) != c)
                    return false;
    return true;
}

START_TEST(test_shepp_logan_mid_plane)
{
    tl_cone_circular g = geom();
    double(*P)[12] = malloc(NV * sizeof *P);
    double *proj = malloc((size_t)NV * DET * DET * sizeof *proj);
    double *vol = malloc((size_t)N * N * N * sizeof *vol);
    ck_assert(P && proj && vol);
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    tl_phantom ph;
    /* 60 mm across in x (0.69 * 30 mm semi-axis), 55 mm in y, 49 mm in z */
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 30.0, 0.0, 30.0), 0);
    for (int s = 0; s < NV; s++)
        ck_assert_int_eq(tl_phantom_cone_project(&ph, P[s], DET, DET, proj + (size_t)s * DET * DET,
                                                 &eb),
                         TL_OK);
    tl_fdk_volume v = {N, N, N, 1.0};
    ck_assert_msg(tl_fdk_reference((const double(*)[12])P, NV, proj, DET, DET, TL_FILTER_RAMLAK,
                                   &v, vol, &eb) == TL_OK,
                  "%s", eb.msg);

    /* inside: interior voxels of the phantom's inner region (values 0.2 .. 0.4);
     * outside: interior voxels of the background within the field of view */
    double se = 0, sr = 0, maxin = 0, maxout = 0, roi = 0, roi_ref = 0;
    long nin = 0, nout = 0, nroi = 0;
    for (int k = N / 2 - 1; k <= N / 2; k++)
        for (int j = 0; j < N; j++)
            for (int i = 0; i < N; i++) {
                double x[3] = {i - 31.5, j - 31.5, k - 31.5};
                if (hypot(x[0], x[1]) > FOV || !interior(&ph, x))
                    continue;
                double ref = tl_phantom_value(&ph, x[0], x[1], x[2]);
                double got = vol[((size_t)k * N + j) * N + i];
                if (ref > 0.1) {
                    nin++;
                    se += (got - ref) * (got - ref);
                    sr += ref * ref;
                    maxin = fmax(maxin, fabs(got - ref));
                } else { /* outside the skull, and the two dark ellipsoids (value 0) */
                    nout++;
                    maxout = fmax(maxout, fabs(got - ref));
                }
                /* a uniform region: within 6 mm of the centre of the large ellipsoid of
                 * density 0.3 (1 - 0.8 + 0.1, centred at y = 0.35 * 30 = 10.5 mm), which
                 * the mid-plane cuts */
                if (hypot(x[0], x[1] - 10.5) < 6) {
                    roi += got;
                    roi_ref += ref;
                    nroi++;
                }
            }
    double rel = sqrt(se / sr);
    fprintf(stderr,
            "fdk mid-plane: inside %ld voxels rel L2 %.3g max %.3g; outside %ld voxels max "
            "%.3g; ROI %ld voxels mean %.6g (phantom %.6g)\n",
            nin, rel, maxin, nout, maxout, nroi, roi / nroi, roi_ref / nroi);
    ck_assert_msg(nin > 1000 && nout > 500, "only %ld + %ld interior voxels", nin, nout);
    ck_assert_msg(nroi > 50, "only %ld ROI voxels", nroi);
    ck_assert_msg(rel <= REL_L2, "mid-plane inside relative L2 %g", rel);
    ck_assert_msg(maxin <= MAX_IN, "mid-plane inside max error %g", maxin);
    ck_assert_msg(maxout <= MAX_OUT, "mid-plane background max error %g", maxout);
    ck_assert_msg(fabs(roi / nroi - roi_ref / nroi) <= 0.01 * (roi_ref / nroi),
                  "ROI mean %g vs %g", roi / nroi, roi_ref / nroi);
    tl_phantom_free(&ph);
    free(P);
    free(proj);
    free(vol);
}
END_TEST

/* The weights on their own, where the mid-plane test is blind to them (over a full turn
 * the first-order effect of (d / w)^2 cancels between opposite views): one view, no
 * ramp (TL_FILTER_NONE), and data equal to the inverse cosine weight, so the weighted row
 * is the constant 1 and every voxel must get exactly (pi / 1) (d / w)^2 / tau, with
 * tau = d / fu = sad pitch_u / sdd. */
START_TEST(test_weights_single_view)
{
    tl_cone_circular g = geom();
    double P[1][12], b = 0.3;
    g.n = 1;
    g.angles = &b;
    g.offset_u = 4.5; /* an off-centre principal point must not matter */
    g.offset_v = -3;
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    double *proj = malloc(DET * DET * sizeof *proj), out[8 * 8 * 8];
    ck_assert_ptr_nonnull(proj);
    double fu = 400 / 1.5, u0 = 47.5 + 4.5, v0 = 47.5 - 3;
    for (int v = 0; v < DET; v++)
        for (int u = 0; u < DET; u++)
            proj[v * DET + u] =
                sqrt(1 + ((u - u0) / fu) * ((u - u0) / fu) + ((v - v0) / fu) * ((v - v0) / fu));
    tl_fdk_volume vol = {8, 8, 8, 4.0};
    ck_assert_int_eq(tl_fdk_reference((const double(*)[12])P, 1, proj, DET, DET, TL_FILTER_NONE,
                                      &vol, out, &eb),
                     TL_OK);
    double tau = 200 * 1.5 / 400;
    for (int k = 0; k < 8; k++)
        for (int j = 0; j < 8; j++)
            for (int i = 0; i < 8; i++) {
                double x[3] = {(i - 3.5) * 4, (j - 3.5) * 4, (k - 3.5) * 4};
                double w = 200 + x[0] * sin(b) + x[1] * cos(b);
                double want = M_PI * (200 / w) * (200 / w) / tau;
                double got = out[(k * 8 + j) * 8 + i];
                ck_assert_msg(fabs(got - want) <= 1e-12 * want,
                              "voxel (%d, %d, %d): %.15g vs %.15g", i, j, k, got, want);
            }
    free(proj);
}
END_TEST

START_TEST(test_errors)
{
    tl_cone_circular g = geom();
    double(*P)[12] = malloc(NV * sizeof *P), proj[4] = {0}, out[8];
    tl_errbuf eb;
    ck_assert_int_eq(tl_cone_circular_matrices(&g, P, &eb), TL_OK);
    tl_fdk_volume v = {2, 2, 2, 1.0};
    ck_assert_int_eq(tl_fdk_reference((const double(*)[12])P, 1, proj, 2, 2, TL_FILTER_RAMLAK, &v,
                                      out, &eb),
                     TL_OK);
    for (int c = 8; c < 12; c++)
        P[0][c] *= 2; /* not normalised any more */
    ck_assert_int_eq(tl_fdk_reference((const double(*)[12])P, 1, proj, 2, 2, TL_FILTER_RAMLAK, &v,
                                      out, &eb),
                     TL_EINVAL);
    ck_assert_msg(strstr(eb.msg, "view 0:") != NULL, "%s", eb.msg);
    v.voxel = 0;
    ck_assert_int_eq(tl_fdk_reference((const double(*)[12])P + 1, 1, proj, 2, 2, TL_FILTER_RAMLAK,
                                      &v, out, &eb),
                     TL_EINVAL);
    ck_assert_msg(strstr(eb.msg, "voxel size 0") != NULL, "%s", eb.msg);
    free(P);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fdk_ref");
    TCase *tc = tcase_create("fdk_ref");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_shepp_logan_mid_plane);
    tcase_add_test(tc, test_weights_single_view);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
