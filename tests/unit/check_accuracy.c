/* check_accuracy.c — the CPU backend against analytic phantoms (ARCHITECTURE.md §3.6
 * thresholds): float32 against the float64 reference mode, FBP against the true
 * Shepp-Logan slice for every filter, the centroid of a disk against the axis, planes and
 * ortho-slices against stacks of horizontal slices, and the rolling window against a
 * from-scratch reconstruction. Projections are exact line integrals (gpu/phantom.h): no
 * inverse crime.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "gpu/phantom.h"
#include "tests/testutil.h"

typedef struct {
    uint32_t rows, cols, nproj;
    bool nonuniform; /* jittered, non-uniform angles */
    bool offsets;    /* random per-projection centre corrections */
    tl_filter filter;
    tl_precision precision;
    tl_weights weights;
    double center_shift; /* the data's axis relative to (cols - 1) / 2 */
    uint32_t window;     /* 0 = nproj */
    uint64_t first;      /* index of the first projection fed */
} scan;

static double angle_of(const scan *s, uint64_t k)
{
    double a = M_PI * (double)k / s->nproj;
    if (s->nonuniform) /* deterministic jitter up to 0.4 step, and a denser first third */
        a = M_PI * pow((double)k / s->nproj, 1.3) + 0.4 * M_PI / s->nproj * sin(12.9898 * k);
    return a;
}

static double offset_of(const scan *s, uint64_t k)
{
    return s->offsets ? 1.5 * sin(78.233 * (double)k) : 0.0;
}

static tl_engine *make(const scan *s)
{
    tl_engine_config c;
    tl_engine_config_init(&c, s->rows, s->cols, s->window ? s->window : s->nproj);
    c.backend = TL_BACKEND_CPU;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.filter = s->filter;
    c.precision = s->precision;
    c.weights = s->weights;
    c.center = (s->cols - 1) / 2.0 + s->center_shift;
    tl_engine *e;
    ck_assert_msg(tl_engine_create(&c, &e) == TL_OK, "%s", tl_engine_last_error(NULL));
    return e;
}

/* Feeds projections first .. first + count - 1 of the phantom scan. */
static void feed(tl_engine *e, const scan *s, const tl_phantom *ph, uint64_t first, uint64_t count)
{
    float *img = malloc((size_t)s->rows * s->cols * sizeof *img);
    for (uint64_t k = first; k < first + count; k++) {
        double th = angle_of(s, k), off = offset_of(s, k);
        tl_phantom_project(ph, th, (s->cols - 1) / 2.0 + s->center_shift + off, s->rows, s->cols,
                           img);
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = k,
                      .angle = th,
                      .center_offset = off,
                      .dtype = TL_DTYPE_F32,
                      .rows = s->rows,
                      .cols = s->cols,
                      .data = img};
        ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    }
    free(img);
}

static float *recon(tl_engine *e, const tl_slice_spec *sp)
{
    float *out = malloc((size_t)sp->height * sp->width * sizeof *out);
    int id;
    ck_assert_int_eq(tl_engine_add_slice(e, sp, &id), TL_OK);
    ck_assert_msg(tl_engine_reconstruct(e, &id, 1, &out, NULL) == TL_OK, "%s",
                  tl_engine_last_error(e));
    tl_engine_remove_slice(e, id);
    return out;
}

static void shepp(tl_phantom *ph, const scan *s)
{
    ck_assert_int_eq(tl_phantom_shepp_logan(ph, 0.45 * s->cols, (s->rows - 1) / 2.0,
                                            0.45 * s->cols),
                     0);
}

/* The phantom's true slice on the pixel grid of a row slice: each pixel the average of
 * 4 x 4 point samples over its area (what a reconstructed pixel stands for), and, when
 * point is set, the value at the pixel centre. */
static float *truth(const tl_phantom *ph, uint32_t S, double z, bool point)
{
    float *t = malloc((size_t)S * S * sizeof *t);
    int q = point ? 1 : 4;
    for (uint32_t i = 0; i < S; i++)
        for (uint32_t j = 0; j < S; j++) {
            double sum = 0;
            for (int a = 0; a < q; a++)
                for (int b = 0; b < q; b++)
                    sum += tl_phantom_value(ph, j + (a + 0.5) / q - S / 2.0,
                                            S / 2.0 - i - (b + 0.5) / q, z);
            t[i * S + j] = (float)(sum / (q * q));
        }
    return t;
}

/* float32 against the float64 reference: relative L2 <= 2e-5, max error <= 1e-4 of range. */
static void f32_vs_f64(scan s)
{
    tl_phantom ph;
    shepp(&ph, &s);
    double z = (s.rows - 1) / 2.0;
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, z, s.cols, s.cols);
    float *img[2];
    for (int p = 0; p < 2; p++) {
        s.precision = p ? TL_PRECISION_F64 : TL_PRECISION_F32;
        tl_engine *e = make(&s);
        feed(e, &s, &ph, 0, s.nproj);
        img[p] = recon(e, &sp);
        tl_engine_destroy(e);
    }
    double rel = tl_rel_l2(img[0], img[1], (size_t)s.cols * s.cols);
    double mor = tl_max_over_range(img[0], img[1], (size_t)s.cols * s.cols);
    printf("f32 vs f64 %u^2 x %u%s%s: rel L2 %.2e, max/range %.2e\n", s.cols, s.nproj,
           s.nonuniform ? " non-uniform" : "", s.offsets ? " offsets" : "", rel, mor);
    ck_assert_msg(rel <= 2e-5 && mor <= 1e-4, "rel %g max/range %g", rel, mor);
    free(img[0]);
    free(img[1]);
    tl_phantom_free(&ph);
}

START_TEST(f32_vs_f64_256_180)
{
    f32_vs_f64((scan){.rows = 3, .cols = 256, .nproj = 180});
}
END_TEST

START_TEST(f32_vs_f64_512_720)
{
    f32_vs_f64((scan){.rows = 3, .cols = 512, .nproj = 720, .filter = TL_FILTER_HANN});
}
END_TEST

START_TEST(f32_vs_f64_1024_1800)
{
    f32_vs_f64((scan){.rows = 2, .cols = 1024, .nproj = 1800});
}
END_TEST

/* A prime projection count, non-uniform angles with angular weights, random centres. */
START_TEST(f32_vs_f64_nonuniform)
{
    f32_vs_f64((scan){.rows = 3,
                      .cols = 250,
                      .nproj = 181,
                      .nonuniform = true,
                      .offsets = true,
                      .weights = TL_WEIGHTS_ANGLES});
}
END_TEST

/* FBP of the noise-free Shepp-Logan slice against the true phantom, inside the
 * reconstruction circle, for every filter: against the pixel-averaged truth (asserted:
 * ram-lak <= 0.1) and, for scale, against point samples at pixel centres, which charges
 * the sharp phantom edges to the reconstruction (reported only). */
START_TEST(fbp_vs_phantom_all_filters)
{
    scan s = {.rows = 3, .cols = 512, .nproj = 720};
    tl_phantom ph;
    shepp(&ph, &s);
    double z = (s.rows - 1) / 2.0, r = s.cols / 2.0 - 1;
    float *t = truth(&ph, s.cols, z, false), *tp = truth(&ph, s.cols, z, true);
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, z, s.cols, s.cols);
    for (int f = 0; f < TL_FILTER_NONE; f++) {
        s.filter = (tl_filter)f;
        tl_engine *e = make(&s);
        feed(e, &s, &ph, 0, s.nproj);
        float *img = recon(e, &sp);
        double rel = tl_rel_l2_disk(img, t, s.cols, s.cols, r);
        double relp = tl_rel_l2_disk(img, tp, s.cols, s.cols, r);
        printf("FBP vs phantom 512^2 x 720, %-11s: rel L2 in the circle %.4f (pixel-averaged), "
               "%.4f (point-sampled)\n",
               tl_filter_name(s.filter), rel, relp);
        ck_assert_msg(rel < (f == TL_FILTER_RAMLAK ? 0.1 : 0.25), "%s: %g",
                      tl_filter_name(s.filter), rel);
        free(img);
        tl_engine_destroy(e);
    }
    free(t);
    free(tp);
    tl_phantom_free(&ph);
}
END_TEST

/* A centred disk reconstructs with its centroid within 0.05 px of the axis, also when the
 * axis is not the detector's middle column and --center says where it is; a wrong centre
 * is visibly wrong. The centroid is value-weighted over a circle around the axis. (Over a
 * half turn an axis off the half-pixel grid biases it by ~0.03 px along y: the sampling
 * phase of linear interpolation, which cancels over a full turn.) */
static void centroid(const float *img, uint32_t S, double r, double *cx, double *cy)
{
    double m = 0, mx = 0, my = 0;
    for (uint32_t i = 0; i < S; i++)
        for (uint32_t j = 0; j < S; j++) {
            double v = img[i * S + j], x = j + 0.5 - S / 2.0, y = S / 2.0 - i - 0.5;
            if (x * x + y * y > r * r)
                continue;
            m += v;
            mx += v * x;
            my += v * y;
        }
    *cx = mx / m;
    *cy = my / m;
}

START_TEST(disk_centroid)
{
    const double shifts[] = {0.0, 7.3};
    for (int k = 0; k < 2; k++) {
        scan s = {.rows = 1, .cols = 200, .nproj = 360, .center_shift = shifts[k]};
        tl_phantom ph;
        tl_phantom_init(&ph, 1.0, 0.0, 1.0);
        tl_ellipsoid disk = {.density = 1, .a = 30, .b = 30, .c = 1000};
        tl_phantom_add(&ph, &disk);
        tl_slice_spec sp;
        tl_slice_spec_row(&sp, 0, 160, 160);
        tl_engine *e = make(&s);
        feed(e, &s, &ph, 0, s.nproj);
        float *img = recon(e, &sp);
        double cx, cy;
        centroid(img, 160, 40, &cx, &cy);
        printf("disk centroid, axis at middle %+.1f: (%.4f, %.4f)\n", shifts[k], cx, cy);
        ck_assert_msg(fabs(cx) < 0.05 && fabs(cy) < 0.05, "centroid (%g, %g)", cx, cy);
        free(img);
        if (k == 1) { /* reconstructed with the detector's middle as the axis: wrong */
            tl_engine_set_center(e, (s.cols - 1) / 2.0);
            img = recon(e, &sp);
            centroid(img, 160, 40, &cx, &cy);
            printf("the same with the axis assumed at the middle: (%.4f, %.4f)\n", cx, cy);
            ck_assert_msg(hypot(cx, cy) > 1.0, "a 7.3 px centre error should move the disk");
            free(img);
        }
        tl_engine_destroy(e);
        tl_phantom_free(&ph);
    }
}
END_TEST

/* A plane whose orientation is row z equals row z; ortho-slices and an oblique plane whose
 * columns run along z equal the matching pixels of a stack of horizontal slices. */
START_TEST(planes_and_ortho_vs_stack)
{
    scan s = {.rows = 24, .cols = 48, .nproj = 90};
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 0.45 * s.cols, (s.rows - 1) / 2.0, 14), 0);
    tl_engine *e = make(&s);
    feed(e, &s, &ph, 0, s.nproj);
    const uint32_t S = 48, H = s.rows;
    float *stack[24];
    for (uint32_t z = 0; z < H; z++) {
        tl_slice_spec sp;
        tl_slice_spec_row(&sp, z, S, S);
        stack[z] = recon(e, &sp);
    }
    /* plane == row */
    tl_slice_spec row, pl;
    tl_slice_spec_row(&row, 11, S, S);
    float o[9];
    tl_slice_plane(&row, H, o);
    tl_slice_spec_plane(&pl, o, S, S);
    float *p = recon(e, &pl);
    ck_assert(tl_rel_l2(p, stack[11], S * S) <= 1e-6);
    free(p);
    /* ortho X at the x of stack column 30, ortho Y at the y of stack row 17 */
    tl_slice_spec ox, oy;
    tl_slice_spec_ortho(&ox, TL_AXIS_X, 30 + 0.5 - S / 2.0, H, S);
    tl_slice_spec_ortho(&oy, TL_AXIS_Y, S / 2.0 - 17 - 0.5, H, S);
    float *ix = recon(e, &ox), *iy = recon(e, &oy);
    float *ex = malloc(H * S * sizeof *ex), *ey = malloc(H * S * sizeof *ey);
    for (uint32_t i = 0; i < H; i++) /* ortho row i is z = i */
        for (uint32_t j = 0; j < S; j++) {
            ex[i * S + j] = stack[i][(S - 1 - j) * S + 30]; /* ortho column j: y = j + .5 - S/2 */
            ey[i * S + j] = stack[i][17 * S + j];
        }
    double rx = tl_rel_l2(ix, ex, H * S), ry = tl_rel_l2(iy, ey, H * S);
    ck_assert_msg(rx <= 1e-5 && ry <= 1e-5, "ortho x %g, y %g", rx, ry);
    /* oblique: output columns along z (xaxis = (0, 0, H)), rows along -y: exercises the
     * per-pixel interpolation across detector rows */
    const float ob[9] = {0, 0, (float)H, 0, (float)S, 0, 4.5f - S / 2.0f, -(float)S / 2, -0.5f};
    tl_slice_spec_plane(&pl, ob, S, H);
    float *io = recon(e, &pl);
    for (uint32_t i = 0; i < S; i++)
        for (uint32_t j = 0; j < H; j++) /* column j: z = j; row i: y = S/2 - i - .5 */
            ex[i * H + j] = stack[j][i * S + 4];
    double ro = tl_rel_l2(io, ex, H * S);
    ck_assert_msg(ro <= 1e-5, "oblique %g", ro);
    printf("ortho x %.1e, ortho y %.1e, oblique %.1e vs the stack\n", rx, ry, ro);
    free(io);
    free(ix);
    free(iy);
    free(ex);
    free(ey);
    for (uint32_t z = 0; z < H; z++)
        free(stack[z]);
    tl_engine_destroy(e);
    tl_phantom_free(&ph);
}
END_TEST

/* After N + k projections the window holds the last N, and the slice equals a fresh
 * engine fed with just those (<= 1e-6). */
START_TEST(window_equals_from_scratch)
{
    scan s = {.rows = 2, .cols = 128, .nproj = 400, .window = 150};
    tl_phantom ph;
    shepp(&ph, &s);
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 0.5, 128, 128);
    tl_engine *e = make(&s);
    feed(e, &s, &ph, 0, 150 + 137);
    float *a = recon(e, &sp);
    tl_engine *f = make(&s);
    feed(f, &s, &ph, 137, 150);
    float *b = recon(f, &sp);
    double rel = tl_rel_l2(a, b, 128 * 128);
    ck_assert_msg(rel <= 1e-6, "rel %g", rel);
    tl_engine_state st;
    tl_engine_get_state(e, &st);
    ck_assert_uint_eq(st.window_first, 137);
    ck_assert_uint_eq(st.held, 150);
    free(a);
    free(b);
    tl_engine_destroy(e);
    tl_engine_destroy(f);
    tl_phantom_free(&ph);
}
END_TEST

/* With equally spaced angles the angular weights are the uniform ones. */
START_TEST(angle_weights_uniform_case)
{
    scan s = {.rows = 1, .cols = 64, .nproj = 120};
    tl_phantom ph;
    shepp(&ph, &s);
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 0, 64, 64);
    float *img[2];
    for (int k = 0; k < 2; k++) {
        s.weights = k ? TL_WEIGHTS_ANGLES : TL_WEIGHTS_UNIFORM;
        tl_engine *e = make(&s);
        feed(e, &s, &ph, 0, s.nproj);
        img[k] = recon(e, &sp);
        tl_engine_destroy(e);
    }
    ck_assert(tl_rel_l2(img[1], img[0], 64 * 64) <= 1e-6);
    free(img[0]);
    free(img[1]);
    tl_phantom_free(&ph);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("accuracy");
    TCase *t = tcase_create("cpu");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, f32_vs_f64_256_180);
    tcase_add_test(t, f32_vs_f64_512_720);
    tcase_add_test(t, f32_vs_f64_1024_1800);
    tcase_add_test(t, f32_vs_f64_nonuniform);
    tcase_add_test(t, fbp_vs_phantom_all_filters);
    tcase_add_test(t, disk_centroid);
    tcase_add_test(t, planes_and_ortho_vs_stack);
    tcase_add_test(t, window_equals_from_scratch);
    tcase_add_test(t, angle_weights_uniform_case);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
