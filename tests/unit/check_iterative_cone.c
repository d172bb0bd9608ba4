/* check_iterative_cone.c — iterative cone-beam slices through the engine (engine.h,
 * tl_engine_iterate over a stack of planes; issue #28, tomosynthesis as in seed 003: 15
 * views over +-25 degrees) against the float64 reference:
 *   geometry     tl_cone_tomosynthesis_matrices: a rotating detector is the circular
 *                trajectory's limited arc; a stationary one keeps its plane (every voxel of
 *                the isocentre's plane y = sdd - sad projects where the plane meets it), the
 *                line source lies on y = -sad; bad geometries are refused by name;
 *   reference    on three tomosynthesis geometries (arc source with a stationary and with
 *                a rotating detector, line source), SIRT (non-negative) and OS-SART from
 *                zeros: the engine's stack of planes parallel to the detector equals the
 *                reference's voxel volume (tl_iter_cone, matched pair) within the exact
 *                mode, image and residual after every iteration; SIRT with 3-D TV steps
 *                too, and Joseph's ray-driven pair (SIRT, OS-SART) against the reference's;
 *   tomosynthesis  SIRT's residual falls at every iteration, its error against the balls
 *                falls, and it beats FDK of the same limited arc (rotating detector, FDK at
 *                its best scale) by the margin printed; a stationary detector refuses FDK
 *                (its views' intrinsics differ) but iterates;
 *   refusals     cone beam without kept measurements, Joseph's pair on planes that are no
 *                voxel grid: TL_EINVAL;
 *                several devices without kept measurements (FDK runs on one), or on the
 *                CPU backend: TL_EUNSUPPORTED;
 *   devices      (CUDA) the stack split by volume over two and three parts of one GPU, and
 *                over two GPUs where there are two, against the reference as above.
 * Built twice: for the CPU backend (tests/unit) and, with TL_TEST_CUDA, for the CUDA backend
 * (tests/gpu; skips without a device).
 */
#include "config.h"

#if defined(TL_TEST_CUDA) && !defined(HAVE_CUDA)
int main(void)
{
    return 77; /* a build without CUDA */
}
#else
#ifdef TL_TEST_CUDA
#include "tests/gpu/gpu_test.h"
#define BACKEND TL_BACKEND_CUDA
#else
#define BACKEND TL_BACKEND_CPU
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "gpu/geometry/cone.h"
#include "gpu/iterative_ref.h"
#include "tests/testutil.h"

#define NX 32 /* voxels along x (detector columns) */
#define NY 8  /* planes parallel to the detector (depth, y) */
#define NZ 16 /* along z (detector rows) */
#define ROWS 24
#define COLS 48
#define VIEWS 15 /* seed 003's count */
#define SPAN (50 * M_PI / 180)
#define SAD 600.0
#define SDD 650.0
#define PITCH 0.5
#define NVOX (NX * NY * NZ)
#define NMEAS (VIEWS * ROWS * COLS)
#define EXACT_REL 2e-5 /* DESIGN.md §3's exact mode */
#define RESIDUAL_TOL 2e-5

typedef struct {
    tl_cone_tomosynthesis g;
    double P[VIEWS][12], angles[VIEWS];
    tl_cb_volume cb;
    double b[NMEAS];
} scan;

/* Balls of density 1 (radius in voxels) in the reference's layout. */
static void balls(double *vol)
{
    const double c[3][4] = {{-6, -1, 2, 4.5}, {7, 2, -3, 3.5}, {0, 0, 0, 2.5}};
    for (uint32_t k = 0; k < NZ; k++)
        for (uint32_t j = 0; j < NY; j++)
            for (uint32_t i = 0; i < NX; i++) {
                double x = i - (NX - 1) / 2.0, y = j - (NY - 1) / 2.0, z = k - (NZ - 1) / 2.0;
                double v = 0;
                for (int n = 0; n < 3; n++) {
                    double dx = x - c[n][0], dy = y - c[n][1], dz = z - c[n][2];
                    v += dx * dx + dy * dy + dz * dz < c[n][3] * c[n][3] ? 1 : 0;
                }
                vol[((size_t)k * NY + j) * NX + i] = v;
            }
}

/* The scan of `truth` (the reference's layout) through the reference's matched A. */
static void make_scan(scan *s, tl_tomo_source src, tl_tomo_detector det, const double *truth)
{
    s->g = (tl_cone_tomosynthesis){.source = src,
                                   .detector = det,
                                   .span = SPAN,
                                   .sad = SAD,
                                   .sdd = SDD,
                                   .pitch_u = PITCH,
                                   .pitch_v = PITCH,
                                   .rows = ROWS,
                                   .cols = COLS,
                                   .n = VIEWS};
    tl_errbuf eb;
    ck_assert_msg(tl_cone_tomosynthesis_matrices(&s->g, s->P, &eb) == TL_OK, "%s", eb.msg);
    tl_cone_tomosynthesis_angles(&s->g, s->angles);
    s->cb = (tl_cb_volume){.vol = {NX, NY, NZ, PITCH * SAD / SDD},
                           .rows = ROWS,
                           .cols = COLS,
                           .n = VIEWS,
                           .P = (const double(*)[12])s->P};
    ck_assert_int_eq(tl_project_cone(&s->cb, TL_PROJECTOR_MATCHED, truth, s->b, &eb), TL_OK);
}

/* The cone-beam engine configuration of the scan (measurements kept if keep). */
static void config_of(const scan *s, bool keep, tl_engine_config *cfg)
{
    tl_engine_config_init(cfg, ROWS, COLS, VIEWS);
    cfg->backend = BACKEND;
    cfg->dtype = TL_DTYPE_F32;
    cfg->already_linear = true;
    cfg->geometry = TL_GEOMETRY_CONE;
    cfg->cone = (tl_cone_config){.source_origin = SAD,
                                 .source_detector = SDD,
                                 .pixel_u = PITCH,
                                 .pixel_v = PITCH,
                                 .matrices = (const double(*)[12])s->P,
                                 .nmatrices = VIEWS};
    cfg->keep_measurements = keep;
}

/* An engine of configuration cfg holding the scan, frames in reverse order, and the NY
 * planes parallel to the detector at the reference's voxels: plane j at y = j - (NY - 1)
 * / 2 volume units (a voxel each: pitch sad / sdd mm), its rows from +z down. */
static tl_engine *engine_with(const tl_engine_config *cfg, const scan *s, int ids[NY])
{
    tl_engine *e;
    ck_assert_msg(tl_engine_create(cfg, &e) == TL_OK, "%s", tl_engine_last_error(NULL));
    static float frame[ROWS * COLS];
    for (uint32_t n = 0; n < VIEWS; n++) {
        uint32_t k = VIEWS - 1 - n;
        for (size_t i = 0; i < ROWS * COLS; i++)
            frame[i] = (float)s->b[(size_t)k * ROWS * COLS + i];
        tl_frame fr = {.kind = TL_FRAME_PROJ,
                       .index = k,
                       .angle = s->angles[k],
                       .dtype = TL_DTYPE_F32,
                       .rows = ROWS,
                       .cols = COLS,
                       .data = frame};
        ck_assert_int_eq(tl_engine_submit(e, &fr), TL_OK);
    }
    const double v0 = (ROWS - 1) / 2.0;
    for (uint32_t j = 0; j < NY; j++) {
        const float o[9] =
            {NX, 0, 0, 0, 0, NZ, -NX / 2.0f, (float)(j - (NY - 1) / 2.0), (float)(v0 - NZ / 2.0)};
        tl_slice_spec sp;
        tl_slice_spec_plane(&sp, o, NZ, NX);
        ck_assert_int_eq(tl_engine_add_slice(e, &sp, &ids[j]), TL_OK);
    }
    return e;
}

/* engine_with() of the scan's own configuration. */
static tl_engine *engine_of(const scan *s, bool keep, int ids[NY])
{
    tl_engine_config cfg;
    config_of(s, keep, &cfg);
    return engine_with(&cfg, s, ids);
}

/* The engine's stack (plane j, row i from +z down, column i) in the reference's layout. */
static void to_reference(const float *stack, double *vol)
{
    for (uint32_t j = 0; j < NY; j++)
        for (uint32_t r = 0; r < NZ; r++)
            for (uint32_t i = 0; i < NX; i++)
                vol[((size_t)(NZ - 1 - r) * NY + j) * NX + i] =
                    stack[((size_t)j * NZ + r) * NX + i];
}

static double rel_l2(const double *a, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / den);
}

START_TEST(geometry)
{
    tl_cone_tomosynthesis g = {.source = TL_TOMO_ARC,
                               .detector = TL_TOMO_STATIONARY,
                               .span = SPAN,
                               .sad = SAD,
                               .sdd = SDD,
                               .pitch_u = PITCH,
                               .pitch_v = PITCH,
                               .rows = ROWS,
                               .cols = COLS,
                               .n = VIEWS};
    double P[VIEWS][12], angles[VIEWS], C[VIEWS][12];
    tl_errbuf eb;
    tl_cone_tomosynthesis_angles(&g, angles);
    ck_assert_double_eq_tol(angles[0], -SPAN / 2, 1e-12);
    ck_assert_double_eq_tol(angles[VIEWS / 2], 0, 1e-12);
    ck_assert_double_eq_tol(angles[VIEWS - 1], SPAN / 2, 1e-12);
    /* a stationary detector: a point of its plane lands on the same pixel in every view */
    ck_assert_int_eq(tl_cone_tomosynthesis_matrices(&g, P, &eb), TL_OK);
    const double on_plane[3] = {3.25, SDD - SAD, -2.5};
    for (int k = 0; k < VIEWS; k++) {
        double u, v, w;
        ck_assert(tl_cone_project(P[k], on_plane, &u, &v, &w));
        ck_assert_double_eq_tol(u, (COLS - 1) / 2.0 + 3.25 / PITCH, 1e-9);
        ck_assert_double_eq_tol(v, (ROWS - 1) / 2.0 - 2.5 / PITCH, 1e-9);
        double src[3];
        ck_assert_int_eq(tl_cone_matrix_source(P[k], src, &eb), TL_OK);
        ck_assert_double_eq_tol(src[0], -SAD * sin(angles[k]), 1e-6);
        ck_assert_double_eq_tol(src[1], -SAD * cos(angles[k]), 1e-6);
    }
    /* the line source at y = -sad, seen from the isocentre at the arc's angles */
    g.source = TL_TOMO_LINE;
    ck_assert_int_eq(tl_cone_tomosynthesis_matrices(&g, P, &eb), TL_OK);
    for (int k = 0; k < VIEWS; k++) {
        double src[3];
        ck_assert_int_eq(tl_cone_matrix_source(P[k], src, &eb), TL_OK);
        ck_assert_double_eq_tol(src[1], -SAD, 1e-6);
        ck_assert_double_eq_tol(atan2(-src[0], SAD), angles[k], 1e-9);
    }
    /* a rotating detector: the circular trajectory's matrices at the same angles */
    g.source = TL_TOMO_ARC;
    g.detector = TL_TOMO_ROTATING;
    ck_assert_int_eq(tl_cone_tomosynthesis_matrices(&g, P, &eb), TL_OK);
    tl_cone_circular c = {.sad = SAD,
                          .sdd = SDD,
                          .pitch_u = PITCH,
                          .pitch_v = PITCH,
                          .rows = ROWS,
                          .cols = COLS,
                          .n = VIEWS,
                          .angles = angles};
    ck_assert_int_eq(tl_cone_circular_matrices(&c, C, &eb), TL_OK);
    for (int k = 0; k < VIEWS; k++)
        for (int i = 0; i < 12; i++)
            ck_assert_msg(fabs(P[k][i] - C[k][i]) <= 1e-9 * (fabs(C[k][i]) + 1),
                          "view %d entry %d: %.12g vs %.12g", k, i, P[k][i], C[k][i]);
    /* refusals */
    g.source = TL_TOMO_LINE;
    ck_assert_int_eq(tl_cone_tomosynthesis_matrices(&g, P, &eb), TL_EINVAL);
    ck_assert_ptr_nonnull(strstr(eb.msg, "line source with a rotating detector"));
    g.source = TL_TOMO_ARC;
    g.span = M_PI;
    ck_assert_int_eq(tl_cone_tomosynthesis_matrices(&g, P, &eb), TL_EINVAL);
    ck_assert_ptr_nonnull(strstr(eb.msg, "span"));
}
END_TEST

/* o through the engine and through the reference, from zeros, on one geometry. */
/* Iterates the stack on ndev devices (0: the engine's one) and compares with the
 * reference. */
static void on_devices(const char *what, tl_tomo_source src, tl_tomo_detector det,
                       const tl_iter_options *o, uint32_t ndev, const int *devs)
{
    static double truth[NVOX], want[NVOX], got[NVOX];
    static float stack[NVOX];
    static scan s;
    balls(truth);
    make_scan(&s, src, det, truth);
    int ids[NY];
    tl_engine_config cfg;
    config_of(&s, true, &cfg);
    cfg.ndevices = ndev;
    for (uint32_t k = 0; k < ndev; k++)
        cfg.devices[k] = devs[k];
    tl_engine *e = engine_with(&cfg, &s, ids);
    double res_got[16], res_want[16];
    uint32_t done_got, done_want;
    ck_assert_msg(tl_engine_iterate(e, ids, NY, o, NULL, stack, res_got, &done_got, NULL) == TL_OK,
                  "%s: %s", what, tl_engine_last_error(e));
    to_reference(stack, got);
    if (o->projector == TL_PROJECTOR_JOSEPH) /* its lengths in volume units, the reference's
                                                in mm: x comes out per volume unit */
        for (size_t i = 0; i < NVOX; i++)
            got[i] /= s.cb.vol.voxel;
    tl_iter_problem pb;
    tl_iter_cone(&pb, &s.cb, s.b, o->projector);
    memset(want, 0, sizeof want);
    tl_errbuf eb;
    ck_assert_msg(tl_iter_run(&pb, o, want, res_want, &done_want, &eb) == TL_OK, "%s", eb.msg);
    ck_assert_uint_eq(done_got, done_want);
    double l2 = rel_l2(got, want, NVOX), worst = 0;
    for (uint32_t i = 0; i < done_got; i++)
        worst = fmax(worst, fabs(res_got[i] - res_want[i]) / res_want[i]);
    printf("  %-34s %2u iterations: stack rel L2 %.2e, residual %.4f -> %.4f (worst rel diff "
           "%.1e)\n",
           what, done_got, l2, res_want[0], res_want[done_want - 1], worst);
    ck_assert_msg(l2 <= EXACT_REL, "%s: %.3g from the reference", what, l2);
    ck_assert_msg(worst <= RESIDUAL_TOL, "%s: residual %.3g from the reference's", what, worst);
    tl_engine_destroy(e);
}

static void against_reference(const char *what, tl_tomo_source src, tl_tomo_detector det,
                              const tl_iter_options *o)
{
    on_devices(what, src, det, o, 0, NULL);
}

/* The two runs every case compares: non-negative SIRT, and OS-SART of 5 subsets. */
static const tl_iter_options SIRT_8 = {.method = TL_ITER_SIRT,
                                       .iterations = 8,
                                       .relaxation = 1,
                                       .nonneg = true};
static const tl_iter_options OS_SART_3 = {.method = TL_ITER_OS_SART,
                                          .iterations = 3,
                                          .subsets = 5,
                                          .relaxation = 1};

START_TEST(reference)
{
    const tl_iter_options sirt = SIRT_8, os = OS_SART_3;
    against_reference("arc, stationary: SIRT, non-negative", TL_TOMO_ARC, TL_TOMO_STATIONARY,
                      &sirt);
    against_reference("arc, stationary: OS-SART (5)", TL_TOMO_ARC, TL_TOMO_STATIONARY, &os);
    against_reference("arc, rotating: SIRT, non-negative", TL_TOMO_ARC, TL_TOMO_ROTATING, &sirt);
    against_reference("line, stationary: OS-SART (5)", TL_TOMO_LINE, TL_TOMO_STATIONARY, &os);
    tl_iter_options tv = sirt;
    tv.tv_weight = 0.05;
    tv.tv_steps = 5;
    against_reference("arc, stationary: SIRT + TV (3-D)", TL_TOMO_ARC, TL_TOMO_STATIONARY, &tv);
    tl_iter_options joseph = sirt, joseph_os = os;
    joseph.projector = joseph_os.projector = TL_PROJECTOR_JOSEPH;
    against_reference("arc, stationary: SIRT, Joseph", TL_TOMO_ARC, TL_TOMO_STATIONARY, &joseph);
    against_reference("arc, rotating: OS-SART (5), Joseph", TL_TOMO_ARC, TL_TOMO_ROTATING,
                      &joseph_os);
}
END_TEST

/* The least relative L2 error of a x against truth over the scale a. */
static double best_scaled_error(const double *x, const double *truth)
{
    double xt = 0, xx = 0;
    for (size_t i = 0; i < NVOX; i++) {
        xt += x[i] * truth[i];
        xx += x[i] * x[i];
    }
    static double scaled[NVOX];
    for (size_t i = 0; i < NVOX; i++)
        scaled[i] = xx > 0 ? x[i] * xt / xx : 0;
    return rel_l2(scaled, truth, NVOX);
}

START_TEST(tomosynthesis)
{
    static double truth[NVOX], vol[NVOX];
    static float stack[NVOX];
    static scan s;
    balls(truth);
    /* a rotating detector: FDK serves, so SIRT is compared with it */
    make_scan(&s, TL_TOMO_ARC, TL_TOMO_ROTATING, truth);
    int ids[NY];
    tl_engine *e = engine_of(&s, true, ids);
    float *outs[NY];
    for (int j = 0; j < NY; j++)
        outs[j] = stack + (size_t)j * NZ * NX;
    ck_assert_int_eq(tl_engine_reconstruct(e, ids, NY, outs, NULL), TL_OK);
    to_reference(stack, vol);
    double e_fdk = best_scaled_error(vol, truth);
    enum { ITS = 30 };
    double err[ITS], residual[ITS];
    tl_iter_options o = {.method = TL_ITER_SIRT, .iterations = 1, .relaxation = 1, .nonneg = true};
    uint32_t done;
    for (int it = 0; it < ITS; it++) { /* one at a time: the error after each */
        ck_assert_int_eq(tl_engine_iterate(e, ids, NY, &o, it ? stack : NULL, stack, &residual[it],
                                           &done, NULL),
                         TL_OK);
        to_reference(stack, vol);
        err[it] = rel_l2(vol, truth, NVOX);
        if (it > 0) {
            ck_assert_msg(residual[it] < residual[it - 1], "residual rose at %d", it);
            ck_assert_msg(err[it] < err[it - 1], "error rose at %d", it);
        }
    }
    printf("  %d views over +-25 degrees, rotating detector: FDK (best scale) %.4f, SIRT (%d "
           "iterations) %.4f: %.0f %% lower; residual %.4f -> %.4f\n",
           VIEWS, e_fdk, ITS, err[ITS - 1], 100 * (1 - err[ITS - 1] / e_fdk), residual[0],
           residual[ITS - 1]);
    ck_assert_msg(err[ITS - 1] < e_fdk, "SIRT %.4f vs FDK %.4f", err[ITS - 1], e_fdk);
    tl_engine_destroy(e);

    /* a stationary detector: no FDK (the views' intrinsics differ), SIRT converges */
    make_scan(&s, TL_TOMO_ARC, TL_TOMO_STATIONARY, truth);
    e = engine_of(&s, true, ids);
    ck_assert_int_eq(tl_engine_reconstruct(e, ids, NY, outs, NULL), TL_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tl_engine_last_error(e), "intrinsics differ"));
    o.iterations = ITS;
    ck_assert_int_eq(tl_engine_iterate(e, ids, NY, &o, NULL, stack, residual, &done, NULL), TL_OK);
    to_reference(stack, vol);
    double e_sirt = rel_l2(vol, truth, NVOX);
    for (int it = 1; it < ITS; it++)
        ck_assert_msg(residual[it] < residual[it - 1], "stationary: residual rose at %d", it);
    printf("  %d views over +-25 degrees, stationary detector: SIRT (%d iterations) %.4f, "
           "residual %.4f -> %.4f\n",
           VIEWS, ITS, e_sirt, residual[0], residual[ITS - 1]);
    ck_assert_msg(e_sirt < 0.8, "stationary: SIRT error %.4f", e_sirt);
    tl_engine_destroy(e);
}
END_TEST

static void refused(tl_engine *e, const int *ids, const tl_iter_options *o, const char *why)
{
    static float stack[NVOX];
    uint32_t done;
    ck_assert_int_eq(tl_engine_iterate(e, ids, NY, o, NULL, stack, NULL, &done, NULL), TL_EINVAL);
    ck_assert_msg(strstr(tl_engine_last_error(e), why), "'%s' lacks '%s'", tl_engine_last_error(e),
                  why);
}

START_TEST(refusals)
{
    static double truth[NVOX];
    static scan s;
    balls(truth);
    make_scan(&s, TL_TOMO_ARC, TL_TOMO_ROTATING, truth);
    int ids[NY];
    tl_iter_options o = {.method = TL_ITER_SIRT, .iterations = 2, .relaxation = 1};
    tl_engine *e = engine_of(&s, false, ids);
    refused(e, ids, &o, "needs the measurements kept");
    tl_engine_destroy(e);
    /* Joseph's pair walks a voxel grid: planes with a gap are none */
    e = engine_of(&s, true, ids);
    tl_iter_options bad = o;
    bad.projector = TL_PROJECTOR_JOSEPH;
    const int gap[3] = {ids[0], ids[1], ids[3]};
    static float stack[NVOX];
    uint32_t done;
    ck_assert_int_eq(tl_engine_iterate(e, gap, 3, &bad, NULL, stack, NULL, &done, NULL),
                     TL_EINVAL);
    ck_assert_msg(strstr(tl_engine_last_error(e), "slice 2 does not continue it"), "%s",
                  tl_engine_last_error(e));
    tl_engine_destroy(e);
    /* a stationary detector without kept measurements: FDK cannot serve it, so refused */
    make_scan(&s, TL_TOMO_ARC, TL_TOMO_STATIONARY, truth);
    tl_engine_config cfg;
    config_of(&s, false, &cfg);
    ck_assert_int_eq(tl_engine_create(&cfg, &e), TL_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tl_engine_last_error(NULL), "keep_measurements"));
    /* several devices serve iterative problems only: FDK alone is refused */
    make_scan(&s, TL_TOMO_ARC, TL_TOMO_ROTATING, truth);
    config_of(&s, false, &cfg);
    cfg.ndevices = 2;
    ck_assert_int_eq(tl_engine_create(&cfg, &e), TL_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tl_engine_last_error(NULL), "FDK runs on one device"));
#ifndef TL_TEST_CUDA
    config_of(&s, true, &cfg); /* and on the CPU backend not at all */
    cfg.ndevices = 2;
    ck_assert_int_eq(tl_engine_create(&cfg, &e), TL_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tl_engine_last_error(NULL), "CUDA devices only"));
#endif
}
END_TEST

#ifdef TL_TEST_CUDA
/* The stack split by volume over several devices (iterative_cone.cu): two parts on the
 * one GPU every machine has, and on two GPUs where there are two; each against the
 * reference as on one device. */
START_TEST(devices)
{
    const tl_iter_options sirt = SIRT_8, os = OS_SART_3;
    tl_iter_options tv = sirt; /* the TV steps' halos: a middle part has two */
    tv.tv_weight = 0.05;
    tv.tv_steps = 5;
    const int same[] = {0, 0}, three[] = {0, 0, 0}, two[] = {0, 1};
    on_devices("2 parts on GPU 0: SIRT, non-negative", TL_TOMO_ARC, TL_TOMO_STATIONARY, &sirt, 2,
               same);
    on_devices("3 parts on GPU 0: OS-SART (5)", TL_TOMO_ARC, TL_TOMO_ROTATING, &os, 3, three);
    on_devices("3 parts on GPU 0: SIRT + TV (3-D)", TL_TOMO_ARC, TL_TOMO_STATIONARY, &tv, 3,
               three);
    tl_iter_options joseph = os;
    joseph.projector = TL_PROJECTOR_JOSEPH;
    on_devices("3 parts on GPU 0: OS-SART (5), Joseph", TL_TOMO_ARC, TL_TOMO_ROTATING, &joseph, 3,
               three);
    if (tl_backend_device_count(TL_BACKEND_CUDA, NULL, 0) < 2) {
        printf("  one GPU: the two-GPU split is not run here\n");
        return;
    }
    on_devices("GPUs 0 and 1: SIRT, non-negative", TL_TOMO_ARC, TL_TOMO_STATIONARY, &sirt, 2, two);
    on_devices("GPUs 0 and 1: OS-SART (5)", TL_TOMO_LINE, TL_TOMO_STATIONARY, &os, 2, two);
    on_devices("GPUs 0 and 1: SIRT + TV (3-D)", TL_TOMO_ARC, TL_TOMO_STATIONARY, &tv, 2, two);
    on_devices("GPUs 0 and 1: OS-SART (5), Joseph", TL_TOMO_ARC, TL_TOMO_ROTATING, &joseph, 2,
               two);
}
END_TEST
#endif

#ifdef TL_TEST_CUDA
int main(void)
{
    const tl_gt_case cases[] = {
        {"geometry", {geometry, NULL}},
        {"reference", {reference, NULL}},
        {"tomosynthesis", {tomosynthesis, NULL}},
        {"refusals", {refusals, NULL}},
        {"devices", {devices, NULL}},
    };
    return tl_gt_main("iterative_cone", cases, sizeof cases / sizeof *cases);
}
#else
int main(void)
{
    Suite *s = suite_create("iterative_cone");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, geometry);
    tcase_add_test(tc, reference);
    tcase_add_test(tc, tomosynthesis);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return tl_run_suite(s, false);
}
#endif
#endif /* a build without CUDA */
