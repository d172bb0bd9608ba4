/* check_phantom.c — the analytic phantom, its line integrals, the random generator and the
 * camera model (gpu/phantom.h).
 *
 * Line integrals are checked against an independent evaluation: marching along the same
 * ray through tl_phantom_value, locating every change of density by bisection and summing
 * density x length exactly. That shares only the point-in-ellipsoid test with the code
 * under test, not the chord formula, and is accurate to ~1e-11 px except for chords
 * shorter than the marching step (grazing rays), which the tolerances treat separately.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/phantom.h"
#include "tests/testutil.h"

#define STEP 0.02 /* marching step, px */

typedef struct {
    const tl_phantom *p;
    double c, s, t, z;
} ray;

static double value_at(const ray *r, double u)
{
    return tl_phantom_value(r->p, r->t * r->c + u * r->s, -r->t * r->s + u * r->c, r->z);
}

/* Integral of the density along the ray for path parameter in [-L, L]. */
static double numeric_integral(const tl_phantom *p, double theta, double t, double z, double L)
{
    ray r = {p, cos(theta), sin(theta), t, z};
    double sum = 0, seg_start = -L, a = -L, cur = value_at(&r, -L);
    long steps = (long)ceil(2 * L / STEP);
    for (long k = 1; k <= steps; k++) {
        double b = k == steps ? L : -L + k * STEP;
        while (value_at(&r, b) != cur) {
            /* a boundary lies in (a, b]: bisect to 1e-11 px */
            double lo = a, hi = b;
            while (hi - lo > 1e-11) {
                double m = 0.5 * (lo + hi);
                if (value_at(&r, m) == cur)
                    lo = m;
                else
                    hi = m;
            }
            sum += cur * (hi - seg_start);
            seg_start = a = hi;
            cur = value_at(&r, hi);
        }
        a = b;
    }
    return sum + cur * (L - seg_start);
}

/* Single ellipsoids: rays aimed at the ellipsoid's shadow. Interior rays (chord at least
 * 5 % of the longest) must agree to 1e-6 relative; grazing rays, where the chord is
 * ill-conditioned in the ray offset, to 1e-6 of the longest chord's integral. */
static void check_single(const tl_ellipsoid *el, double radius, double zc, double rz,
                         double *worst_rel)
{
    tl_phantom p;
    ck_assert_int_eq(tl_phantom_init(&p, radius, zc, rz), 0);
    ck_assert_int_eq(tl_phantom_add(&p, el), 0);
    tl_rng rng;
    tl_rng_seed(&rng, 1234);
    double ext = fmax(el->a, fmax(el->b, el->c));
    enum { NRAYS = 200 };
    double th[NRAYS], tt[NRAYS], zz[NRAYS], an[NRAYS], nu[NRAYS], peak = 0;
    for (int i = 0; i < NRAYS; i++) {
        /* the centre's offset on the detector at this angle, then a ray through the
         * ellipsoid's bounding box (most hit it, some graze it, a few miss) */
        th[i] = 2 * M_PI * tl_rng_uniform(&rng);
        double xc = el->x0 * radius, yc = el->y0 * radius;
        double t0 = xc * cos(th[i]) - yc * sin(th[i]);
        tt[i] = t0 + (2 * tl_rng_uniform(&rng) - 1) * 0.8 * ext * radius;
        zz[i] = zc + (el->z0 + (2 * tl_rng_uniform(&rng) - 1) * 0.8 * el->c) * rz;
        an[i] = tl_phantom_line_integral(&p, th[i], tt[i], zz[i]);
        nu[i] = numeric_integral(&p, th[i], tt[i], zz[i], 1.2 * radius);
        peak = fmax(peak, fabs(nu[i]));
    }
    int interior = 0;
    for (int i = 0; i < NRAYS; i++) {
        if (fabs(nu[i]) >= 0.05 * peak) {
            interior++;
            double rel = fabs(an[i] - nu[i]) / fabs(nu[i]);
            if (rel > *worst_rel)
                *worst_rel = rel;
            ck_assert_msg(rel <= 1e-6, "theta %.4f t %.4f z %.4f: analytic %.12g numeric %.12g",
                          th[i], tt[i], zz[i], an[i], nu[i]);
        } else {
            ck_assert_msg(fabs(an[i] - nu[i]) <= 1e-6 * peak,
                          "edge ray: analytic %.12g numeric %.12g", an[i], nu[i]);
        }
    }
    ck_assert_msg(interior >= 100, "only %d interior rays", interior);
    tl_phantom_free(&p);
}

START_TEST(test_line_integrals_single)
{
    tl_phantom sl;
    ck_assert_int_eq(tl_phantom_shepp_logan(&sl, 40.0, 20.0, 30.0), 0);
    ck_assert_uint_eq(sl.n, 10);
    double worst = 0;
    for (size_t i = 0; i < sl.n; i++)
        check_single(&sl.e[i], 40.0, 20.0, 30.0, &worst);
    /* and an ellipsoid turned by all three Euler angles, off centre */
    tl_ellipsoid tilted = {0.7, 0.4, 0.15, 0.25, 0.2, -0.1, 0.15, 30, 50, -20};
    check_single(&tilted, 40.0, 20.0, 30.0, &worst);
    printf("single ellipsoids: worst relative error of interior rays %.3g\n", worst);
    tl_phantom_free(&sl);
}
END_TEST

START_TEST(test_line_integrals_shepp_logan)
{
    /* the whole phantom: rays through the head at random angles, offsets and rows */
    const double radius = 50.0, zc = 31.5, rz = 28.8;
    tl_phantom p;
    ck_assert_int_eq(tl_phantom_shepp_logan(&p, radius, zc, rz), 0);
    tl_rng rng;
    tl_rng_seed(&rng, 99);
    double peak = 0, worst = 0;
    double an[300], nu[300];
    for (int i = 0; i < 300; i++) {
        double theta = M_PI * tl_rng_uniform(&rng);
        double t = (2 * tl_rng_uniform(&rng) - 1) * 0.75 * radius;
        double z = zc + (2 * tl_rng_uniform(&rng) - 1) * 0.8 * rz;
        an[i] = tl_phantom_line_integral(&p, theta, t, z);
        nu[i] = numeric_integral(&p, theta, t, z, 1.1 * radius);
        peak = fmax(peak, fabs(nu[i]));
    }
    int compared = 0;
    for (int i = 0; i < 300; i++) {
        double tol = 1e-6 * fmax(fabs(nu[i]), 1e-3 * peak);
        ck_assert_msg(fabs(an[i] - nu[i]) <= tol, "ray %d: analytic %.12g numeric %.12g", i, an[i],
                      nu[i]);
        if (fabs(nu[i]) >= 1e-3 * peak) {
            compared++;
            worst = fmax(worst, fabs(an[i] - nu[i]) / fabs(nu[i]));
        }
    }
    ck_assert_int_ge(compared, 200);
    printf("Shepp-Logan: %d rays, worst relative error %.3g (peak integral %.4g)\n", compared,
           worst, peak);
    tl_phantom_free(&p);
}
END_TEST

START_TEST(test_sphere_projection)
{
    /* a centred sphere of radius R: p(t, z) = 2 rho sqrt(R^2 - t^2 - (z - zc)^2) */
    const uint32_t rows = 33, cols = 64;
    const double radius = 20.0, zc = 16.0, rho = 0.7, R = 0.9 * radius, center = 31.5;
    tl_phantom p;
    ck_assert_int_eq(tl_phantom_init(&p, radius, zc, radius), 0);
    tl_ellipsoid s = {rho, 0.9, 0.9, 0.9, 0, 0, 0, 0, 0, 0};
    ck_assert_int_eq(tl_phantom_add(&p, &s), 0);
    float *out = malloc(sizeof(float) * rows * cols);
    const double angles[] = {0.0, 0.3, 1.0, M_PI / 2, 2.5, 4.0};
    double worst = 0;
    for (size_t a = 0; a < sizeof angles / sizeof angles[0]; a++) {
        tl_phantom_project(&p, angles[a], center, rows, cols, out);
        for (uint32_t v = 0; v < rows; v++)
            for (uint32_t u = 0; u < cols; u++) {
                double t = u - center, dz = v - zc, q = R * R - t * t - dz * dz;
                double want = q > 0 ? 2 * rho * sqrt(q) : 0.0;
                double got = out[(size_t)v * cols + u];
                ck_assert_msg(fabs(got - want) <= 1e-6 * 2 * rho * R,
                              "theta %.2f (v %u, u %u): %.9g, want %.9g", angles[a], v, u, got,
                              want);
                worst = fmax(worst, fabs(got - want) / (2 * rho * R));
            }
    }
    /* the projection is not trivially zero */
    ck_assert_double_eq_tol(out[(size_t)16 * cols + 31], 2 * rho * sqrt(R * R - 0.25), 1e-4);
    printf("sphere: worst error %.3g of the central chord\n", worst);
    free(out);
    tl_phantom_free(&p);
}
END_TEST

START_TEST(test_symmetry)
{
    /* theta + pi sees the mirror image: the ray (theta + pi, t) is the ray (theta, -t) */
    const uint32_t rows = 24, cols = 96;
    const double center = (cols - 1) / 2.0;
    tl_phantom p;
    ck_assert_int_eq(tl_phantom_shepp_logan(&p, 0.45 * cols, (rows - 1) / 2.0, 0.45 * rows), 0);
    float *a = malloc(sizeof(float) * rows * cols), *b = malloc(sizeof(float) * rows * cols);
    double peak = 0;
    for (int k = 0; k < 7; k++) {
        double theta = 0.37 * k;
        tl_phantom_project(&p, theta, center, rows, cols, a);
        tl_phantom_project(&p, theta + M_PI, center, rows, cols, b);
        for (uint32_t v = 0; v < rows; v++)
            for (uint32_t u = 0; u < cols; u++) {
                double x = a[(size_t)v * cols + u], y = b[(size_t)v * cols + (cols - 1 - u)];
                peak = fmax(peak, x);
                ck_assert_msg(fabs(x - y) <= 1e-6 * fmax(fabs(x), 1.0), "theta %.2f v %u u %u",
                              theta, v, u);
            }
    }
    ck_assert(peak > 10); /* a real projection was compared */
    free(a);
    free(b);
    tl_phantom_free(&p);
}
END_TEST

START_TEST(test_orientation)
{
    /* Euler angles: phi turns about z, theta about the new x; the table's densities add up */
    const double R = 50, zc = 10, Rz = 40;
    tl_phantom p;
    ck_assert_int_eq(tl_phantom_init(&p, R, zc, Rz), 0);
    tl_ellipsoid needle = {1.0, 0.5, 0.05, 0.05, 0, 0, 0, 90, 0, 0}; /* x-needle turned to y */
    ck_assert_int_eq(tl_phantom_add(&p, &needle), 0);
    ck_assert_double_eq(tl_phantom_value(&p, 0, 0.4 * R, zc), 1.0);
    ck_assert_double_eq(tl_phantom_value(&p, 0.4 * R, 0, zc), 0.0);
    /* theta = 0 rays run along y: the long chord; theta = pi/2 along x: the short one */
    ck_assert_double_eq_tol(tl_phantom_line_integral(&p, 0, 0, zc), 2 * 0.5 * R, 1e-9);
    ck_assert_double_eq_tol(tl_phantom_line_integral(&p, M_PI / 2, 0, zc), 2 * 0.05 * R, 1e-9);
    tl_phantom_free(&p);

    ck_assert_int_eq(tl_phantom_init(&p, R, zc, Rz), 0);
    tl_ellipsoid pillar = {1.0, 0.05, 0.5, 0.05, 0, 0, 0, 0, 90, 0}; /* y-needle tilted to z */
    ck_assert_int_eq(tl_phantom_add(&p, &pillar), 0);
    ck_assert_double_eq(tl_phantom_value(&p, 0, 0, zc + 0.4 * Rz), 1.0);
    ck_assert_double_eq(tl_phantom_value(&p, 0, 0.4 * R, zc), 0.0);
    tl_phantom_free(&p);

    /* Shepp-Logan: skull minus brain at the centre; the top ellipsoid adds 0.1 */
    ck_assert_int_eq(tl_phantom_shepp_logan(&p, R, zc, Rz), 0);
    ck_assert_double_eq_tol(tl_phantom_value(&p, 0, 0, zc), 0.2, 1e-12);
    ck_assert_double_eq_tol(tl_phantom_value(&p, 0, 0.35 * R, zc - 0.15 * Rz), 0.3, 1e-12);
    ck_assert_double_eq_tol(tl_phantom_value(&p, 0, 0.9 * R, zc), 1.0, 1e-12);
    ck_assert_double_eq(tl_phantom_value(&p, 0.8 * R, 0.8 * R, zc), 0.0);
    tl_phantom_free(&p);
}
END_TEST

START_TEST(test_rng)
{
    /* xoshiro256** from state {1, 2, 3, 4}: first output rotl(2 * 5, 7) * 9 = 11520; the
     * update makes s[1] = 2 ^ (3 ^ 1) = 0, so the second is 0 */
    tl_rng r = {{1, 2, 3, 4}};
    ck_assert_uint_eq(tl_rng_next(&r), 11520);
    ck_assert_uint_eq(tl_rng_next(&r), 0);
    tl_rng a, b;
    tl_rng_seed(&a, 7);
    tl_rng_seed(&b, 7);
    for (int i = 0; i < 100; i++)
        ck_assert_uint_eq(tl_rng_next(&a), tl_rng_next(&b));
    tl_rng_seed(&b, 8);
    ck_assert_uint_ne(tl_rng_next(&a), tl_rng_next(&b));
    double sum = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        double u = tl_rng_uniform(&a);
        ck_assert(u >= 0 && u < 1);
        sum += u;
    }
    /* mean of U(0,1): sd 1/sqrt(12 n) */
    ck_assert_double_eq_tol(sum / n, 0.5, 5 / sqrt(12.0 * n));
}
END_TEST

/* Mean and variance of n draws within 5 standard errors (var of the sample variance of a
 * Poisson(m) is (m + 2 m^2) / n), and a chi-square test of the histogram where it fits in
 * the bins. */
static void check_poisson(double m, uint64_t seed)
{
    const int n = 1000000;
    tl_rng r;
    tl_rng_seed(&r, seed);
    double *x = malloc(sizeof(double) * n), sum = 0;
    enum { BINS = 64 };
    long hist[BINS] = {0};
    for (int i = 0; i < n; i++) {
        x[i] = (double)tl_rng_poisson(&r, m);
        sum += x[i];
        if (x[i] < BINS)
            hist[(int)x[i]]++;
    }
    double mean = sum / n, ss = 0;
    for (int i = 0; i < n; i++)
        ss += (x[i] - mean) * (x[i] - mean);
    double var = ss / (n - 1);
    printf("poisson(%g): mean %.6g var %.6g\n", m, mean, var);
    ck_assert_msg(fabs(mean - m) <= 5 * sqrt(m / n), "mean %g for %g", mean, m);
    ck_assert_msg(fabs(var - m) <= 5 * sqrt((m + 2 * m * m) / n), "variance %g for %g", var, m);
    if (m < 100) {
        /* bins with an expected count of at least 5 stand alone, the rest are pooled */
        double chi2 = 0, pk = exp(-m), expected_rest = n, observed_rest = n;
        int bins = 0;
        for (int k = 0; k < BINS; k++, pk *= m / k) {
            double e = n * pk;
            if (e < 5)
                continue;
            chi2 += (hist[k] - e) * (hist[k] - e) / e;
            expected_rest -= e;
            observed_rest -= hist[k];
            bins++;
        }
        if (expected_rest >= 5) {
            chi2 +=
                (observed_rest - expected_rest) * (observed_rest - expected_rest) / expected_rest;
            bins++;
        }
        int dof = bins - 1;
        printf("poisson(%g): chi2 %.2f on %d degrees of freedom\n", m, chi2, dof);
        ck_assert_int_ge(dof, 4);
        ck_assert_msg(chi2 <= dof + 5 * sqrt(2.0 * dof), "chi2 %g dof %d", chi2, dof);
    }
    free(x);
}

START_TEST(test_poisson)
{
    check_poisson(0.5, 11);
    check_poisson(10, 12); /* the first mean on the rejection path */
    check_poisson(40, 13);
    check_poisson(1e4, 14);
    tl_rng r;
    tl_rng_seed(&r, 1);
    ck_assert_uint_eq(tl_rng_poisson(&r, 0.0), 0);
    ck_assert_uint_eq(tl_rng_poisson(&r, -3.0), 0);
}
END_TEST

START_TEST(test_camera)
{
    const uint32_t rows = 32, cols = 48;
    const size_t n = (size_t)rows * cols;
    tl_camera cam;
    tl_camera_init(&cam);
    ck_assert_double_eq(cam.flux, 10000);
    ck_assert_double_eq(cam.dark, 100);
    ck_assert_double_eq(cam.gain_variation, 0.1);
    ck_assert(!cam.noise);
    uint16_t *u = malloc(n * sizeof *u), *d = malloc(n * sizeof *d);
    float *f = malloc(n * sizeof *f), *li = malloc(n * sizeof *li), *pf = malloc(n * sizeof *pf);

    tl_camera_frame_u16(&cam, TL_SIM_DARK, NULL, rows, cols, NULL, d);
    for (size_t k = 0; k < n; k++)
        ck_assert_uint_eq(d[k], 100);

    /* flat = gain * flux + dark, gain within 1 +- gain_variation and not constant */
    tl_camera_frame_f32(&cam, TL_SIM_FLAT, NULL, rows, cols, NULL, f);
    tl_camera_frame_u16(&cam, TL_SIM_FLAT, NULL, rows, cols, NULL, u);
    double lo = INFINITY, hi = -INFINITY;
    for (size_t k = 0; k < n; k++) {
        double g = (f[k] - cam.dark) / cam.flux;
        ck_assert(g >= 1 - cam.gain_variation - 1e-6 && g <= 1 + cam.gain_variation + 1e-6);
        ck_assert(fabs((double)u[k] - f[k]) <= 0.5 + 1e-3);
        lo = fmin(lo, g);
        hi = fmax(hi, g);
    }
    ck_assert_msg(hi - lo > 0.5 * cam.gain_variation, "gain range %g .. %g", lo, hi);

    /* projections: -log((I - D) / (F - D)) gives back the line integrals */
    tl_phantom p;
    ck_assert_int_eq(tl_phantom_shepp_logan(&p, 0.45 * cols, (rows - 1) / 2.0, 0.45 * rows), 0);
    tl_phantom_project(&p, 0.4, (cols - 1) / 2.0, rows, cols, li);
    for (size_t k = 0; k < n; k++)
        li[k] *= 0.05f; /* densities are per pixel: scale to a transmissive sample */
    tl_camera_frame_f32(&cam, TL_SIM_PROJ, li, rows, cols, NULL, pf);
    tl_camera_frame_u16(&cam, TL_SIM_PROJ, li, rows, cols, NULL, u);
    double maxli = 0;
    for (size_t k = 0; k < n; k++) {
        double flat = f[k] - cam.dark;
        double pf_li = -log((pf[k] - cam.dark) / flat);
        double pu_li = -log(((double)u[k] - cam.dark) / flat);
        ck_assert_msg(fabs(pf_li - li[k]) <= 1e-5, "f32 %g vs %g", pf_li, li[k]);
        /* u16 rounding: at most half a count of the transmitted intensity */
        double counts = pf[k] - cam.dark;
        ck_assert_msg(fabs(pu_li - li[k]) <= 0.5 / counts + 1e-6, "u16 %g vs %g", pu_li, li[k]);
        maxli = fmax(maxli, li[k]);
    }
    ck_assert(maxli > 0.2);

    /* noise: standardised residuals of a flat have mean 0 and variance 1 */
    cam.noise = true;
    tl_rng r;
    tl_rng_seed(&r, 5);
    tl_camera_frame_u16(&cam, TL_SIM_FLAT, NULL, rows, cols, &r, u);
    double s1 = 0, s2 = 0;
    for (size_t k = 0; k < n; k++) {
        double z = ((double)u[k] - f[k]) / sqrt(f[k]);
        s1 += z;
        s2 += z * z;
    }
    double zm = s1 / n, zv = s2 / n - zm * zm;
    ck_assert_msg(fabs(zm) <= 5 / sqrt((double)n), "noise mean %g", zm);
    ck_assert_msg(fabs(zv - 1) <= 5 * sqrt(2.0 / n), "noise variance %g", zv);

    /* clamping to the dtype range */
    cam.noise = false;
    cam.flux = 1e6;
    tl_camera_frame_u16(&cam, TL_SIM_FLAT, NULL, rows, cols, NULL, u);
    for (size_t k = 0; k < n; k++)
        ck_assert_uint_eq(u[k], 65535);
    tl_phantom_free(&p);
    free(u);
    free(d);
    free(f);
    free(li);
    free(pf);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("phantom");
    TCase *tc = tcase_create("phantom");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_sphere_projection);
    tcase_add_test(tc, test_orientation);
    tcase_add_test(tc, test_symmetry);
    tcase_add_test(tc, test_line_integrals_single);
    tcase_add_test(tc, test_line_integrals_shepp_logan);
    tcase_add_test(tc, test_rng);
    tcase_add_test(tc, test_poisson);
    tcase_add_test(tc, test_camera);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
