/* check_halfacq.c — 360-degree scans with an offset axis (half acquisition, gpu/halfacq.c)
 * on the CPU backend: an object wider than the detector, scanned over a whole turn with
 * the axis near one edge (right, then left), streamed frame by frame with a tracked slice,
 * reconstructs the full field: the slice equals, within the disk of the stitched field of
 * view, the slice of a half-turn scan by a detector wide enough for the whole object (to
 * rounding: with opposite angles aligned and analytic data a projection and its opposite
 * add up exactly to the wide detector's projection, and FBP is linear), and
 * the tracked slice equals one from scratch; what the plain engine makes of the same
 * frames is far off; bad configurations are refused.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

START_TEST(refused)
{
    tl_engine_config c;
    tl_engine_config_init(&c, 2, 100, 16);
    c.backend = TL_BACKEND_CPU;
    c.half_acquisition = true;
    c.center = 120;
    tl_engine *e = NULL;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EINVAL);
    c.center = 90;
    c.center_auto = true;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EUNSUPPORTED);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("halfacq");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, full_field);
    tcase_add_test(t, refused);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
