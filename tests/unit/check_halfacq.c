/* check_halfacq.c — 360-degree scans with an offset axis (half acquisition, gpu/halfacq.c)
 * on the CPU backend: an object wider than the detector, scanned over a whole turn with
 * the axis near one edge (right, then left), streamed frame by frame with a tracked slice,
 * reconstructs the full field: the slice equals, within the disk of the stitched field of
 * view, the slice of a half-turn scan by a detector wide enough for the whole object (to
 * rounding: with opposite angles aligned and analytic data a projection and its opposite
 * add up exactly to the wide detector's projection, and FBP is linear), and
 * the tracked slice equals one from scratch; what the plain engine makes of the same
 * frames is far off; the axis estimated (at 2048 columns) and applied live by
 * center_auto; set_center within the virtual detector's margin; bad configurations are
 * refused.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "tests/testutil.h"

enum { ROWS = 2, COLS = 160, N = 240, S = 256 };

/* Line integrals at angle θ, at signed distance t from the axis, of disks of the field. */
static double field(double t, double th)
{
    static const double cx[] = {0, 70, -40, 20, -95}, cy[] = {0, 30, -80, 100, -10},
                        r[] = {125, 18, 25, 10, 15}, mu[] = {0.004, 0.01, -0.002, 0.02, 0.012};
    double p = 0;
    for (size_t k = 0; k < sizeof cx / sizeof *cx; k++) {
        double d = t - (cx[k] * cos(th) - cy[k] * sin(th));
        if (fabs(d) < r[k])
            p += 2 * mu[k] * sqrt(r[k] * r[k] - d * d);
    }
    return p;
}

/* Streams nproj frames of `cols` columns with the axis at `axis`, angles turn k / nproj,
 * into an engine (window nproj); returns the slice (tracked: read every 9 frames) and
 * optionally the slice from scratch. */
static void scan(uint32_t cols, double axis, bool half, uint32_t nproj, double turn, float *out,
                 float *fresh)
{
    tl_engine_config c;
    tl_engine_config_init(&c, ROWS, cols, nproj);
    c.backend = TL_BACKEND_CPU;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.center = axis;
    c.half_acquisition = half;
    c.threads = 2;
    c.precision = TL_PRECISION_F64;
    tl_engine *e = NULL;
    ck_assert_msg(tl_engine_create(&c, &e) == TL_OK, "%s", tl_engine_last_error(NULL));
    tl_slice_spec s;
    tl_slice_spec_row(&s, 0, S, S);
    int id;
    ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
    ck_assert_int_eq(tl_engine_track(e, id, true), TL_OK);
    float *img = malloc((size_t)ROWS * cols * sizeof *img);
    for (uint32_t k = 0; k < nproj; k++) {
        double th = turn * k / nproj;
        for (uint32_t r = 0; r < ROWS; r++)
            for (uint32_t u = 0; u < cols; u++)
                img[r * cols + u] = (float)field(u - axis, th);
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = k,
                      .angle = th,
                      .dtype = TL_DTYPE_F32,
                      .rows = ROWS,
                      .cols = cols,
                      .data = img};
        ck_assert_msg(tl_engine_submit(e, &f) == TL_OK, "%s", tl_engine_last_error(e));
        if (k % 9 == 0)
            ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &out, NULL), TL_OK);
    }
    ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &out, NULL), TL_OK);
    if (fresh) {
        int id2;
        ck_assert_int_eq(tl_engine_add_slice(e, &s, &id2), TL_OK);
        ck_assert_int_eq(tl_engine_reconstruct(e, &id2, 1, &fresh, NULL), TL_OK);
    }
    free(img);
    tl_engine_destroy(e);
}

START_TEST(full_field)
{
    const double axes[] = {140.0, 19.5}; /* near the right edge, near the left one */
    for (int i = 0; i < 2; i++) {
        double axis = axes[i];
        /* the reference: a detector twice as wide, centred, half a turn */
        uint32_t vcols = i == 0 ? 281 : 280;
        float *ref = malloc(S * S * 4), *got = malloc(S * S * 4), *fresh = malloc(S * S * 4),
              *plain = malloc(S * S * 4);
        scan(vcols, (vcols - 1) / 2.0, false, N, M_PI, ref, NULL);
        scan(COLS, axis, true, 2 * N, 2 * M_PI, got, fresh);
        scan(COLS, axis, false, 2 * N, 2 * M_PI, plain, NULL);
        double r = 120, err = tl_rel_l2_disk(got, ref, S, S, r);
        double inc = tl_rel_l2(got, fresh, S * S), off = tl_rel_l2_disk(plain, ref, S, S, r);
        printf("half acquisition, axis %.1f of %u columns: vs the wide half-turn scan %.2g "
               "(plain 360: %.3f), tracked vs scratch %.2g\n",
               axis, COLS, err, off, inc);
        ck_assert_msg(err <= 1e-6, "rel L2 %.3g", err); /* linear: exact but for rounding */
        ck_assert(off > 10 * err);
        ck_assert(inc <= 1e-9);
        free(ref);
        free(got);
        free(fresh);
        free(plain);
    }
}
END_TEST

/* Streams a whole turn and a half (exact opposite pairs) of a 2048-column detector with
 * the axis 300 px from its right edge and an object 1400 px in radius (so the detector
 * sees less than half of it; small detail near the axis: texture), into an engine started with the axis guessed `guess` px
 * off, center_auto on, a 64 x 64 slice tracked; returns the engine and the slice. */
enum { WIDE = 2048, TURN = 360, WIDE_FRAMES = 540, SMALL = 64 };
static const double WIDE_AXIS = WIDE - 1 - 300 + 0.37, WIDE_SCALE = 11.2;

static void wide_frames(tl_engine *e, int *id, uint32_t from, uint32_t to);

/* Small disks (radius 3-9 px) within 280 px of the axis, where a projection and its
 * opposite overlap: the detail a sample has there and the smooth disks of field lack. */
static double texture(double t, double th)
{
    double p = 0;
    for (int k = 0; k < 24; k++) {
        double rr = 20 + 11 * k, ang = 2.39996 * k, r = 3 + (k * 7) % 7;
        double d = t - rr * cos(th + ang);
        if (fabs(d) < r)
            p += 0.02 * sqrt(r * r - d * d);
    }
    return p;
}

static tl_engine *wide_scan(double axis_at_start, bool automatic, int *id)
{
    tl_engine_config c;
    tl_engine_config_init(&c, ROWS, WIDE, TURN);
    c.backend = TL_BACKEND_CPU;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.center = axis_at_start;
    c.half_acquisition = true;
    c.center_estimate = true;
    c.center_auto = automatic;
    c.threads = 2;
    c.precision = TL_PRECISION_F64;
    tl_engine *e = NULL;
    ck_assert_msg(tl_engine_create(&c, &e) == TL_OK, "%s", tl_engine_last_error(NULL));
    tl_slice_spec s;
    tl_slice_spec_row(&s, 0, SMALL, SMALL);
    ck_assert_int_eq(tl_engine_add_slice(e, &s, id), TL_OK);
    ck_assert_int_eq(tl_engine_track(e, *id, true), TL_OK);
    wide_frames(e, id, 0, WIDE_FRAMES);
    return e;
}

/* Frames from .. to - 1 of the wide scan (a whole turn every TURN frames). */
static void wide_frames(tl_engine *e, int *id, uint32_t from, uint32_t to)
{
    float *img = malloc((size_t)ROWS * WIDE * sizeof *img), *out = malloc(SMALL * SMALL * 4);
    for (uint32_t k = from; k < to; k++) {
        double th = 2 * M_PI * k / TURN;
        for (uint32_t r = 0; r < ROWS; r++)
            for (uint32_t u = 0; u < WIDE; u++)
                img[r * WIDE + u] = (float)(WIDE_SCALE * field((u - WIDE_AXIS) / WIDE_SCALE, th) +
                                            texture(u - WIDE_AXIS, th));
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = k,
                      .angle = th,
                      .dtype = TL_DTYPE_F32,
                      .rows = ROWS,
                      .cols = WIDE,
                      .data = img};
        ck_assert_msg(tl_engine_submit(e, &f) == TL_OK, "%s", tl_engine_last_error(e));
        if (k % 30 == 0)
            ck_assert_int_eq(tl_engine_reconstruct(e, id, 1, &out, NULL), TL_OK);
    }
    free(img);
    free(out);
}

/* The axis of a half-acquisition scan found from the real detector's columns within
 * 0.1 px at 2048 columns, applied live by center_auto (from a guess 6 px off). The
 * overlap's weights follow the axis for the projections that come after a move (those
 * in the window keep theirs, as with set_filter): a whole turn later, the slice equals
 * that of an engine started with the final centre. */
START_TEST(center_auto_2048)
{
    int id, id2;
    tl_engine *e = wide_scan(WIDE_AXIS + 6, true, &id);
    tl_center_estimate est;
    ck_assert_int_eq(tl_engine_center(e, &est), TL_OK);
    tl_engine_state st;
    tl_engine_get_state(e, &st);
    printf("half acquisition, 2048 columns, axis %.3f, started at %.3f: found %.4f (error "
           "%.4f px), confidence %.3f, %u pairs, %llu applied; engine centre %.4f\n",
           WIDE_AXIS, WIDE_AXIS + 6, est.center, est.center - WIDE_AXIS, est.confidence, est.pairs,
           (unsigned long long)est.applied, st.center);
    ck_assert_msg(fabs(est.center - WIDE_AXIS) <= 0.1, "centre %.4f", est.center);
    ck_assert(est.applied >= 1);
    ck_assert_msg(fabs(st.center - WIDE_AXIS) <= 0.1, "engine centre %.4f", st.center);
    const tl_engine_config *ec = tl_engine_get_config(e);
    ck_assert_uint_eq(ec->cols, WIDE); /* the real detector, as given */
    ck_assert(ec->center == st.center);
    ck_assert_int_eq(tl_engine_set_center_auto(e, false), TL_OK);
    wide_frames(e, &id, WIDE_FRAMES, WIDE_FRAMES + TURN);
    float *a = malloc(SMALL * SMALL * 4), *b = malloc(SMALL * SMALL * 4);
    ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &a, NULL), TL_OK);
    tl_engine *f = wide_scan(st.center, false, &id2);
    wide_frames(f, &id2, WIDE_FRAMES, WIDE_FRAMES + TURN);
    ck_assert_int_eq(tl_engine_reconstruct(f, &id2, 1, &b, NULL), TL_OK);
    double d = tl_rel_l2(a, b, SMALL * SMALL);
    printf("  a turn after the last move vs an engine started there: rel L2 %.3g\n", d);
    ck_assert_msg(d <= 1e-6, "rel L2 %.3g", d);
    free(a);
    free(b);
    tl_engine_destroy(f);
    tl_engine_destroy(e);
}
END_TEST

/* set_center takes a column of the real detector; with estimation the virtual detector
 * leaves the axis 16 columns to move outwards (without, none); beyond, or to the other
 * half, is refused, the centre kept. */
START_TEST(set_center_margin)
{
    tl_engine_config c;
    tl_engine_config_init(&c, ROWS, COLS, 16);
    c.backend = TL_BACKEND_CPU;
    c.half_acquisition = true;
    c.center = 140;
    tl_engine *e = NULL;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_OK);
    ck_assert_int_eq(tl_engine_set_center(e, 130), TL_OK);
    ck_assert_int_eq(tl_engine_set_center(e, 141), TL_EINVAL);
    tl_engine_destroy(e);
    c.center_estimate = true;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_OK);
    ck_assert_int_eq(tl_engine_set_center(e, 140 + 15.5), TL_OK);
    ck_assert(tl_engine_get_config(e)->center == 155.5);
    ck_assert_int_eq(tl_engine_set_center(e, 130), TL_OK); /* inwards: a narrower field */
    ck_assert_int_eq(tl_engine_set_center(e, 140 + 17), TL_EINVAL);
    ck_assert(strstr(tl_engine_last_error(e), "margin"));
    ck_assert_int_eq(tl_engine_set_center(e, 60), TL_EINVAL);  /* the other half */
    ck_assert_int_eq(tl_engine_set_center(e, 170), TL_EINVAL); /* off the detector */
    tl_engine_state st;
    tl_engine_get_state(e, &st);
    ck_assert(st.center == 130);
    tl_engine_destroy(e);
}
END_TEST

START_TEST(refused)
{
    tl_engine_config c;
    tl_engine_config_init(&c, 2, 100, 16);
    c.backend = TL_BACKEND_CPU;
    c.half_acquisition = true;
    c.center = 120;
    tl_engine *e = NULL;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EINVAL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("halfacq");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, full_field);
    tcase_add_test(t, center_auto_2048);
    tcase_add_test(t, set_center_margin);
    tcase_add_test(t, refused);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
