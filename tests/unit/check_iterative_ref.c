/* check_iterative_ref.c — the float64 reference iterative methods (gpu/iterative_ref.h,
 * issue #28) on the analytic Shepp-Logan phantom, from its exact line integrals (no
 * inverse crime: the data are not made by the projector that reconstructs them):
 *   few views    30 and 15 parallel views over 180 degrees of a 64^2 slice: SIRT's
 *                residual falls at every one of 100 iterations and its error against the
 *                phantom over the first 50 (it then levels off, and with 30 views rises
 *                again after about 70: the data are exact line integrals, not the model's
 *                — semi-convergence); non-negative SIRT beats FBP of the same data (the CPU
 *                engine's float64 mode; the margin is printed: plain SIRT comes within a
 *                few % of FBP either way); OS-SART (5 subsets) reaches in 10 iterations
 *                what SIRT does in 50;
 *   TV           15 views: SIRT with TV steps beats SIRT alone;
 *   limited arc  a +-25 degree arc (tomosynthesis-like, 21 views), non-negative SIRT
 *                beats FBP;
 *   OS-EM        counts with Poisson noise: OS-EM's error falls over the first
 *                iterations, and x stays positive;
 *   cone beam    30 views of a 32^3 volume: SIRT's error falls over 30 iterations;
 *                non-negative OS-SART beats FDK (gpu/fdk_ref.h) of the same data;
 *   options      bad options and an OS-EM start at 0 are refused, naming the value.
 * Errors are relative L2 against the phantom's mean over each pixel (voxel), inside the
 * reconstruction circle (cylinder) where every method sees the object; the phantom is the
 * Shepp-Logan layout with features at least 3 pixels thick (thick_phantom).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "gpu/fdk_ref.h"
#include "gpu/geometry/cone.h"
#include "gpu/iterative_ref.h"
#include "gpu/phantom.h"
#include "gpu/phantom_cone.h"
#include "tests/testutil.h"

#define N 64             /* slice side */
#define COLS 96          /* detector bins */
#define MAXV 64          /* views, at most */
#define RADIUS 28        /* phantom radius, pixels */
#define SIRT_MONOTONE 50 /* iterations over which SIRT's error must fall */

/* The Shepp-Logan layout with its features at least 3 pixels (voxels) thick: the real
 * one's 0.8-pixel skull and 1-pixel dots are aliased by sampling the truth at pixel
 * centres, which would measure the sampling, not the method. In phantom.h's normalised
 * coordinates (radius, radius_z). */
static int thick_phantom(tl_phantom *p, double radius, double radius_z)
{
    static const tl_ellipsoid e[] = {
        /* density  a  b  c  x0  y0  z0  phi  theta  psi */
        {1.0, .690, .920, .810, 0, 0, 0, 0, 0, 0},
        {-.6, .560, .780, .680, 0, -.0184, 0, 0, 0, 0},
        {-.2, .130, .310, .220, .22, 0, 0, -18, 0, 10},
        {-.2, .160, .410, .280, -.22, 0, 0, 18, 0, 10},
        {.2, .210, .250, .410, 0, .35, -.15, 0, 0, 0},
        {.3, .120, .120, .120, 0, -.45, .1, 0, 0, 0},
    };
    if (tl_phantom_init(p, radius, 0.0, radius_z) != 0)
        return -1;
    for (size_t i = 0; i < sizeof e / sizeof *e; i++)
        if (tl_phantom_add(p, &e[i]) != 0) {
            tl_phantom_free(p);
            return -1;
        }
    return 0;
}

#define SUPER 4 /* truth samples per pixel side */

/* The phantom's mean over the pixel (voxel, with cube) of side s centred at (x, y, z): a
 * reconstruction from line integrals estimates that, not the value at the centre. */
static double pixel_mean(const tl_phantom *ph, double x, double y, double z, double s, bool cube)
{
    double sum = 0;
    int nz = cube ? SUPER : 1;
    for (int c = 0; c < nz; c++)
        for (int b = 0; b < SUPER; b++)
            for (int a = 0; a < SUPER; a++)
                sum += tl_phantom_value(ph, x + s * ((a + 0.5) / SUPER - 0.5),
                                        y + s * ((b + 0.5) / SUPER - 0.5),
                                        cube ? z + s * ((c + 0.5) / SUPER - 0.5) : z);
    return sum / (SUPER * SUPER * nz);
}

typedef struct {
    double theta[MAXV], center[MAXV];
    tl_pb_slice g;
    double *b, *truth;
    tl_phantom ph;
} pb_case;

/* n views from theta0 over arc (radians), exact line integrals of the phantom. */
static void pb_make(pb_case *c, uint32_t n, double theta0, double arc)
{
    ck_assert_int_le(n, MAXV);
    ck_assert_int_eq(thick_phantom(&c->ph, RADIUS, RADIUS), 0);
    for (uint32_t k = 0; k < n; k++) {
        c->theta[k] = theta0 + arc * k / n;
        c->center[k] = (COLS - 1) / 2.0;
    }
    c->g = (tl_pb_slice){.nx = N,
                         .ny = N,
                         .pixel = 1.0,
                         .cols = COLS,
                         .n = n,
                         .theta = c->theta,
                         .center = c->center};
    c->b = malloc((size_t)n * COLS * sizeof *c->b);
    c->truth = malloc((size_t)N * N * sizeof *c->truth);
    ck_assert(c->b && c->truth);
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t u = 0; u < COLS; u++)
            c->b[(size_t)k * COLS + u] =
                tl_phantom_line_integral(&c->ph, c->theta[k], u - c->center[k], 0.0);
    for (uint32_t j = 0; j < N; j++)
        for (uint32_t i = 0; i < N; i++)
            c->truth[(size_t)j * N + i] =
                pixel_mean(&c->ph, i - (N - 1) / 2.0, j - (N - 1) / 2.0, 0.0, 1.0, false);
}

static void pb_free(pb_case *c)
{
    tl_phantom_free(&c->ph);
    free(c->b);
    free(c->truth);
}

/* Relative L2 of x against truth inside the circle of radius r (pixels) of an n^2 slice,
 * over nz slices of the same circle. */
static double error_in_circle(const double *x, const double *truth, uint32_t n, uint32_t nz,
                              double r)
{
    double num = 0, den = 0, c = (n - 1) / 2.0;
    for (uint32_t k = 0; k < nz; k++)
        for (uint32_t j = 0; j < n; j++)
            for (uint32_t i = 0; i < n; i++) {
                if ((i - c) * (i - c) + (j - c) * (j - c) > r * r)
                    continue;
                size_t v = ((size_t)k * n + j) * n + i;
                num += (x[v] - truth[v]) * (x[v] - truth[v]);
                den += truth[v] * truth[v];
            }
    return sqrt(num / den);
}

/* FBP of the case by the CPU engine in float64 (Shepp-Logan filter, angular weights), in
 * the reference's layout (its rows from -y up; the engine's from +y down). */
static void pb_fbp(const pb_case *c, double *out)
{
    tl_engine_config cfg;
    tl_engine_config_init(&cfg, 1, COLS, c->g.n);
    cfg.backend = TL_BACKEND_CPU;
    cfg.precision = TL_PRECISION_F64;
    cfg.dtype = TL_DTYPE_F32;
    cfg.already_linear = true;
    cfg.center = c->center[0];
    cfg.filter = TL_FILTER_SHEPP_LOGAN;
    cfg.weights = TL_WEIGHTS_ANGLES;
    tl_engine *e;
    ck_assert_int_eq(tl_engine_create(&cfg, &e), TL_OK);
    float row[COLS];
    for (uint32_t k = 0; k < c->g.n; k++) {
        for (uint32_t u = 0; u < COLS; u++)
            row[u] = (float)c->b[(size_t)k * COLS + u];
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = k,
                      .angle = c->theta[k],
                      .dtype = TL_DTYPE_F32,
                      .rows = 1,
                      .cols = COLS,
                      .data = row};
        ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    }
    tl_slice_spec s;
    tl_slice_spec_row(&s, 0, N, N);
    int id;
    float img[N * N];
    float *outp = img;
    ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
    ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &outp, NULL), TL_OK);
    tl_engine_destroy(e);
    for (uint32_t j = 0; j < N; j++)
        for (uint32_t i = 0; i < N; i++)
            out[(size_t)j * N + i] = img[(size_t)(N - 1 - j) * N + i];
}

/* Runs o from zeros; errors[i] after iteration i (iterations entries). */
static void pb_run(const pb_case *c, const tl_iter_options *o, double *x, double *errors)
{
    tl_iter_problem pb;
    tl_iter_parallel(&pb, &c->g, c->b, TL_PROJECTOR_JOSEPH);
    double residual[1];
    uint32_t done;
    tl_errbuf eb;
    tl_iter_options one = *o;
    one.iterations = 1; /* one at a time, to see the error after each */
    for (uint32_t i = 0; i < o->iterations; i++) {
        ck_assert_msg(tl_iter_run(&pb, &one, x, residual, &done, &eb) == TL_OK, "%s", eb.msg);
        errors[i] = error_in_circle(x, c->truth, N, 1, RADIUS + 2);
    }
}

static void few_views(uint32_t n)
{
    pb_case c;
    pb_make(&c, n, 0.0, M_PI);
    double x[N * N] = {0}, fbp[N * N], errors[100], residual[100];
    pb_fbp(&c, fbp);
    double e_fbp = error_in_circle(fbp, c.truth, N, 1, RADIUS + 2);
    /* SIRT from zeros, 100 iterations at once: the residual falls at every one */
    tl_iter_problem pb;
    tl_iter_parallel(&pb, &c.g, c.b, TL_PROJECTOR_JOSEPH);
    tl_iter_options o = {.method = TL_ITER_SIRT, .iterations = 100, .relaxation = 1.0};
    uint32_t done;
    tl_errbuf eb;
    ck_assert_msg(tl_iter_run(&pb, &o, x, residual, &done, &eb) == TL_OK, "%s", eb.msg);
    ck_assert_uint_eq(done, 100);
    for (int i = 1; i < 100; i++)
        ck_assert_msg(residual[i] < residual[i - 1], "%u views: residual rose at %d: %g -> %g", n,
                      i, residual[i - 1], residual[i]);
    /* the error after each iteration (run again one by one): falls over the first 50 (the
     * data are not the model's, so it levels off and rises later: semi-convergence) */
    memset(x, 0, sizeof x);
    pb_run(&c, &o, x, errors);
    int best = 0;
    for (int i = 1; i < 100; i++) {
        if (i < SIRT_MONOTONE)
            ck_assert_msg(errors[i] < errors[i - 1], "%u views: error rose at %d: %g -> %g", n, i,
                          errors[i - 1], errors[i]);
        best = errors[i] < errors[best] ? i : best;
    }
    /* non-negative SIRT, 100 iterations, against FBP */
    double xn[N * N] = {0}, en[100];
    o.nonneg = true;
    pb_run(&c, &o, xn, en);
    printf("  %u views: FBP %.4f; SIRT %.4f (50), %.4f (100; least %.4f at %d), residual %.4f "
           "-> %.4f; non-negative SIRT %.4f (100): %.0f %% below FBP\n",
           n, e_fbp, errors[49], errors[99], errors[best], best + 1, residual[0], residual[99],
           en[99], 100 * (1 - en[99] / e_fbp));
    ck_assert_msg(en[99] < e_fbp, "%u views: SIRT %g, FBP %g", n, en[99], e_fbp);
    /* OS-SART, 5 subsets: 10 iterations reach SIRT's 50 */
    tl_iter_options os = {.method = TL_ITER_OS_SART,
                          .iterations = 10,
                          .subsets = 5,
                          .relaxation = 1.0};
    double xo[N * N] = {0}, eo[10];
    pb_run(&c, &os, xo, eo);
    printf("  %u views: OS-SART (5 subsets) after 10 iterations %.4f, SIRT after 50 %.4f\n", n,
           eo[9], errors[49]);
    ck_assert_msg(eo[9] <= errors[49], "%u views: OS-SART %g, SIRT %g", n, eo[9], errors[49]);
    pb_free(&c);
}

START_TEST(thirty_views)
{
    few_views(30);
}
END_TEST

START_TEST(fifteen_views)
{
    few_views(15);
}
END_TEST

START_TEST(tv_helps)
{
    pb_case c;
    pb_make(&c, 15, 0.0, M_PI);
    double x[N * N] = {0}, xt[N * N] = {0}, e[60], et[60];
    tl_iter_options o = {.method = TL_ITER_SIRT,
                         .iterations = 60,
                         .relaxation = 1.0,
                         .nonneg = true};
    pb_run(&c, &o, x, e);
    o.tv_weight = 0.05;
    o.tv_steps = 10;
    pb_run(&c, &o, xt, et);
    printf("  15 views, 60 iterations: SIRT %.4f, SIRT + TV (0.05, 10 steps) %.4f\n", e[59],
           et[59]);
    ck_assert_msg(et[59] < e[59], "TV %g, none %g", et[59], e[59]);
    pb_free(&c);
}
END_TEST

START_TEST(limited_arc)
{
    pb_case c;
    pb_make(&c, 21, -25.0 * M_PI / 180, 50.0 * M_PI / 180);
    double x[N * N] = {0}, fbp[N * N], e[50];
    pb_fbp(&c, fbp);
    double e_fbp = error_in_circle(fbp, c.truth, N, 1, RADIUS + 2);
    tl_iter_options o = {.method = TL_ITER_SIRT,
                         .iterations = 50,
                         .relaxation = 1.0,
                         .nonneg = true};
    pb_run(&c, &o, x, e);
    printf("  +-25 degrees, 21 views: FBP %.4f, non-negative SIRT 50 iterations %.4f\n", e_fbp,
           e[49]);
    ck_assert_msg(e[49] < e_fbp, "SIRT %g, FBP %g", e[49], e_fbp);
    ck_assert_msg(e[49] < e[0], "no progress: %g -> %g", e[0], e[49]);
    pb_free(&c);
}
END_TEST

START_TEST(osem_counts)
{
    pb_case c;
    pb_make(&c, 30, 0.0, M_PI);
    const double scale = 50.0; /* counts per unit of line integral */
    tl_rng r;
    tl_rng_seed(&r, 7);
    for (size_t i = 0; i < 30 * COLS; i++)
        c.b[i] = (double)tl_rng_poisson(&r, scale * c.b[i]) / scale;
    double x[N * N], e[8];
    for (size_t i = 0; i < N * N; i++)
        x[i] = 0.1;
    tl_iter_options o = {.method = TL_ITER_OSEM, .iterations = 8, .subsets = 5};
    pb_run(&c, &o, x, e);
    printf("  OS-EM (5 subsets), Poisson counts: error %.4f -> %.4f -> %.4f (iterations 1, 4, "
           "8)\n",
           e[0], e[3], e[7]);
    for (int i = 1; i < 4; i++)
        ck_assert_msg(e[i] < e[i - 1], "error rose at %d: %g -> %g", i, e[i - 1], e[i]);
    for (size_t i = 0; i < N * N; i++)
        ck_assert_msg(x[i] >= 0, "pixel %zu: %g", i, x[i]);
    pb_free(&c);
}
END_TEST

START_TEST(cone_sirt)
{
    enum { NC = 32, NV = 30, DET = 48 };
    double angles[NV], P[NV][12];
    for (int k = 0; k < NV; k++)
        angles[k] = 2 * M_PI * k / NV;
    /* 4 mm pixels: 96 mm at the axis, the whole 64 mm cube in view from every angle */
    tl_cone_circular cc = {.sad = 150,
                           .sdd = 300,
                           .pitch_u = 4.0,
                           .pitch_v = 4.0,
                           .rows = DET,
                           .cols = DET,
                           .n = NV,
                           .angles = angles};
    tl_errbuf eb;
    ck_assert_msg(tl_cone_circular_matrices(&cc, P, &eb) == TL_OK, "%s", eb.msg);
    tl_phantom ph;
    ck_assert_int_eq(thick_phantom(&ph, 25.0, 25.0), 0);
    const double voxel = 64.0 / NC;
    size_t nv = (size_t)NC * NC * NC, np = (size_t)NV * DET * DET;
    double *b = malloc(np * sizeof *b), *truth = malloc(nv * sizeof *truth);
    double *x = calloc(nv, sizeof *x), *fdk = malloc(nv * sizeof *fdk);
    ck_assert(b && truth && x && fdk);
    for (int k = 0; k < NV; k++)
        ck_assert_msg(tl_phantom_cone_project(&ph, P[k], DET, DET, b + (size_t)k * DET * DET,
                                              &eb) == TL_OK,
                      "%s", eb.msg);
    double c = (NC - 1) / 2.0;
    for (uint32_t k = 0; k < NC; k++)
        for (uint32_t j = 0; j < NC; j++)
            for (uint32_t i = 0; i < NC; i++)
                truth[((size_t)k * NC + j) * NC + i] =
                    pixel_mean(&ph, (i - c) * voxel, (j - c) * voxel, (k - c) * voxel, voxel,
                               true);
    tl_fdk_volume vol = {NC, NC, NC, voxel};
    ck_assert_msg(tl_fdk_reference((const double(*)[12])P, NV, b, DET, DET, TL_FILTER_SHEPP_LOGAN,
                                   &vol, fdk, &eb) == TL_OK,
                  "%s", eb.msg);
    tl_cb_volume g = {.vol = vol, .rows = DET, .cols = DET, .n = NV, .P = (const double(*)[12])P};
    tl_iter_problem pb;
    tl_iter_cone(&pb, &g, b, TL_PROJECTOR_JOSEPH);
    tl_iter_options o = {.method = TL_ITER_SIRT, .iterations = 1, .relaxation = 1.0};
    double e[30], residual[1];
    uint32_t done;
    for (int i = 0; i < 30; i++) {
        ck_assert_msg(tl_iter_run(&pb, &o, x, residual, &done, &eb) == TL_OK, "%s", eb.msg);
        e[i] = error_in_circle(x, truth, NC, NC, 0.45 * NC);
    }
    for (int i = 1; i < 30; i++)
        ck_assert_msg(e[i] < e[i - 1], "error rose at %d: %g -> %g", i, e[i - 1], e[i]);
    /* non-negative OS-SART, 5 subsets, 10 iterations, against FDK */
    memset(x, 0, nv * sizeof *x);
    tl_iter_options os = {.method = TL_ITER_OS_SART,
                          .iterations = 10,
                          .subsets = 5,
                          .relaxation = 1.0,
                          .nonneg = true};
    double res[10];
    ck_assert_msg(tl_iter_run(&pb, &os, x, res, &done, &eb) == TL_OK, "%s", eb.msg);
    double e_os = error_in_circle(x, truth, NC, NC, 0.45 * NC);
    double e_fdk = error_in_circle(fdk, truth, NC, NC, 0.45 * NC);
    printf("  cone, 30 views of 32^3: FDK %.4f; SIRT %.4f (1), %.4f (10), %.4f (30); "
           "non-negative OS-SART (5 subsets) %.4f (10): %.0f %% below FDK\n",
           e_fdk, e[0], e[9], e[29], e_os, 100 * (1 - e_os / e_fdk));
    ck_assert_msg(e_os < e_fdk, "OS-SART %g, FDK %g", e_os, e_fdk);
    tl_phantom_free(&ph);
    free(b);
    free(truth);
    free(x);
    free(fdk);
}
END_TEST

START_TEST(bad_options)
{
    pb_case c;
    pb_make(&c, 15, 0.0, M_PI);
    tl_iter_problem pb;
    tl_iter_parallel(&pb, &c.g, c.b, TL_PROJECTOR_MATCHED);
    double x[N * N] = {0}, residual[4];
    uint32_t done;
    tl_errbuf eb;
    const struct {
        tl_iter_options o;
        const char *phrase;
    } cases[] = {
        {{.method = TL_ITER_SIRT, .iterations = 0, .relaxation = 1}, "iterations 0"},
        {{.method = TL_ITER_SIRT, .iterations = 4, .relaxation = 2.5}, "relaxation 2.5"},
        {{.method = TL_ITER_OS_SART, .iterations = 4, .subsets = 16, .relaxation = 1},
         "16 subsets of 15 views"},
        {{.method = TL_ITER_OSEM, .iterations = 4, .subsets = 3}, "start above 0 (pixel 0"},
        {{.method = TL_ITER_SIRT, .iterations = 4, .relaxation = 1, .tv_weight = -1},
         "TV weight -1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ck_assert_int_eq(tl_iter_run(&pb, &cases[i].o, x, residual, &done, &eb), TL_EINVAL);
        ck_assert_msg(strstr(eb.msg, cases[i].phrase) != NULL, "case %zu: %s", i, eb.msg);
        ck_assert_uint_eq(done, 0);
    }
    pb_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("iterative_ref");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, thirty_views);
    tcase_add_test(tc, fifteen_views);
    tcase_add_test(tc, tv_helps);
    tcase_add_test(tc, limited_arc);
    tcase_add_test(tc, osem_counts);
    tcase_add_test(tc, cone_sirt);
    tcase_add_test(tc, bad_options);
    suite_add_tcase(s, tc);
    return tl_run_suite(s, false);
}
