/* check_corrections.c — the CUDA backend's per-frame corrections (gpu/cuda/dezinger.cu,
 * gpu/cuda/paganin.cu) against the CPU backend in float64 (the reference, itself checked
 * against the definitions in tests/unit/check_corrections.c), through the public API:
 *   (a) dezinger on raw counts (already_linear, filter none): the stored projections
 *       agree to float rounding of the read-out (a median is a value of the set, so
 *       the same pixels are replaced) and the replaced-pixel counts are equal;
 *   (b) dezinger + dark/flat + −log, odd sizes: stored projections rel L2 <= 1e-6 (the
 *       preprocessing tolerance of ARCHITECTURE.md §3.6);
 *   (c) Paganin, frames 45 x 70 and 1024 x 1024 (padded 2048 x 2048): stored projections
 *       rel L2 <= 1e-5 (a filter's tolerance, §3.6);
 *   (d) everything on, ram-lak, 24 projections submitted with `more` (the batched filter
 *       pass), a slice: exact mode, rel L2 <= 2e-5 and max/range <= 1e-4 (AC-2);
 *   (e) ring removal vo and fw on a striped stream of three windows (the estimate updated
 *       and the window rebuilt every window/16 frames), a tracked slice read every 7
 *       frames: exact mode against the reference, and a ring update timed;
 *   (f) the centre of rotation from opposite projections (gpu/cuda/profile.cu feeding
 *       gpu/center.c), 2048 columns, axis 7.31 px off the middle: within 0.1 px of the
 *       truth and within 0.01 px of the CPU backend's estimate;
 *   (g) half acquisition (gpu/halfacq.c: the column weights in correct_kernel), axis 140
 *       of 160 columns, a whole turn of 480 projections: exact mode against the
 *       reference.
 * Exit 77 without a usable CUDA device or in builds without CUDA.
 */
#include "config.h"

#ifndef HAVE_CUDA
int main(void)
{
    return 77;
}
#else

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/gpu_test.h"
#include "tests/testutil.h"

static void submit(tl_engine *e, tl_frame_kind kind, uint64_t index, double angle,
                   const uint16_t *px, uint32_t rows, uint32_t cols, bool more)
{
    tl_frame f = {.kind = kind,
                  .index = index,
                  .angle = angle,
                  .dtype = TL_DTYPE_U16,
                  .rows = rows,
                  .cols = cols,
                  .data = px,
                  .more = more};
    tl_status st = tl_engine_submit(e, &f);
    ck_assert_msg(st == TL_OK, "submit: %s", tl_engine_last_error(e));
}

/* The stored projection of a window of 1 at angle 0 with filter none: row slices as wide
 * as the detector (tests/unit/check_engine.c, project_row). */
static void stored(tl_engine *e, uint32_t rows, uint32_t cols, float *out)
{
    for (uint32_t r = 0; r < rows; r++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, r, 1, cols);
        int id;
        float *row = out + (size_t)r * cols;
        ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
        ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &row, NULL), TL_OK);
        ck_assert_int_eq(tl_engine_remove_slice(e, id), TL_OK);
    }
}

/* Deterministic frames: an attenuating disk and a ramp, zingers every `zinger_every`
 * pixels (0: none), dark and flat. */
static void frames(uint32_t rows, uint32_t cols, uint32_t zinger_every, double phase,
                   uint16_t *img, uint16_t *dark, uint16_t *flat)
{
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            size_t i = (size_t)r * cols + c;
            double x = (c - cols / 2.0) / cols - 0.1 * sin(phase), y = (r - rows / 2.0) / rows;
            double att = x * x + y * y < 0.1 ? 0.5 : 0.85 - 0.2 * x;
            dark[i] = (uint16_t)(100 + (r + c) % 5);
            flat[i] = (uint16_t)(5000 + 41 * ((r * 7 + c * 3) % 7));
            img[i] = (uint16_t)(dark[i] + att * (flat[i] - dark[i]));
            if (zinger_every && (i * 2654435761u) % zinger_every == 0)
                img[i] += 4000;
        }
}

typedef struct {
    uint32_t rows, cols;
    tl_corrections corr;
    bool linear;   /* no darks, flats, -log */
    double max_l2; /* stored projections, CUDA vs reference */
} stored_case;

static void compare_stored(const stored_case *k)
{
    size_t n = (size_t)k->rows * k->cols;
    uint16_t *img = malloc(n * 2), *dark = malloc(n * 2), *flat = malloc(n * 2);
    float *got = malloc(n * 4), *want = malloc(n * 4);
    frames(k->rows, k->cols, k->corr.dezinger > 0 ? 97 : 0, 0, img, dark, flat);
    tl_engine_config c;
    tl_engine_config_init(&c, k->rows, k->cols, 1);
    c.filter = TL_FILTER_NONE;
    c.already_linear = k->linear;
    c.corr = k->corr;
    tl_engine *g = tl_gt_cuda(&c, NULL), *ref = tl_gt_cpu(&c, TL_PRECISION_F64);
    tl_engine *both[2] = {g, ref};
    for (int b = 0; b < 2; b++) {
        if (!k->linear) {
            submit(both[b], TL_FRAME_DARK, 0, 0, dark, k->rows, k->cols, false);
            submit(both[b], TL_FRAME_FLAT, 0, 0, flat, k->rows, k->cols, false);
        }
        submit(both[b], TL_FRAME_PROJ, 0, 0, img, k->rows, k->cols, false);
    }
    stored(g, k->rows, k->cols, got);
    stored(ref, k->rows, k->cols, want);
    double err = tl_rel_l2(got, want, n);
    printf("  %u x %u dezinger %g paganin %s: rel L2 %.3g\n", k->rows, k->cols, k->corr.dezinger,
           k->corr.delta_beta > 0 ? "on" : "off", err);
    ck_assert_msg(err <= k->max_l2, "rel L2 %.3g > %.3g", err, k->max_l2);
    tl_engine_corr_state cg, cr;
    ck_assert_int_eq(tl_engine_corrections(g, &cg), TL_OK);
    ck_assert_int_eq(tl_engine_corrections(ref, &cr), TL_OK);
    ck_assert_uint_eq(cg.dezinger_replaced, cr.dezinger_replaced);
    if (k->corr.dezinger > 0)
        ck_assert_uint_gt(cr.dezinger_replaced, 0);
    tl_engine_destroy(g);
    tl_engine_destroy(ref);
    free(img);
    free(dark);
    free(flat);
    free(got);
    free(want);
}

START_TEST(dezinger_counts)
{
    stored_case k = {.rows = 37,
                     .cols = 53,
                     .corr = {.dezinger = 1000},
                     .linear = true,
                     .max_l2 = 1e-7};
    compare_stored(&k);
}
END_TEST

START_TEST(dezinger_flat_log)
{
    stored_case k = {.rows = 33, .cols = 130, .corr = {.dezinger = 1000}, .max_l2 = 1e-6};
    compare_stored(&k);
}
END_TEST

START_TEST(paganin_small)
{
    stored_case k =
        {.rows = 45,
         .cols = 70,
         .corr = {.energy_kev = 20, .distance_m = 0.2, .pixel_um = 3, .delta_beta = 200},
         .max_l2 = 1e-5};
    compare_stored(&k);
}
END_TEST

START_TEST(paganin_large)
{
    stored_case k = {.rows = 1024,
                     .cols = 1024,
                     .corr = {.dezinger = 1000,
                              .energy_kev = 30,
                              .distance_m = 0.5,
                              .pixel_um = 6.5,
                              .delta_beta = 300},
                     .max_l2 = 1e-5};
    compare_stored(&k);
}
END_TEST

START_TEST(all_on_batched_slice)
{
    enum { R = 16, C = 96, N = 24, S = 96 };
    size_t n = (size_t)R * C;
    uint16_t *img = malloc(n * 2), *dark = malloc(n * 2), *flat = malloc(n * 2);
    tl_engine_config c;
    tl_engine_config_init(&c, R, C, N);
    c.corr = (tl_corrections){.dezinger = 1000,
                              .energy_kev = 25,
                              .distance_m = 0.3,
                              .pixel_um = 4,
                              .delta_beta = 150};
    tl_engine *g = tl_gt_cuda(&c, NULL), *ref = tl_gt_cpu(&c, TL_PRECISION_F64);
    tl_engine *both[2] = {g, ref};
    frames(R, C, 0, 0, img, dark, flat);
    for (int b = 0; b < 2; b++) {
        submit(both[b], TL_FRAME_DARK, 0, 0, dark, R, C, false);
        submit(both[b], TL_FRAME_FLAT, 0, 0, flat, R, C, false);
    }
    for (uint64_t k = 0; k < N; k++) {
        frames(R, C, 89, (double)k, img, dark, flat);
        for (int b = 0; b < 2; b++)
            submit(both[b], TL_FRAME_PROJ, k, M_PI * k / N, img, R, C, b == 0 && k + 1 < N);
    }
    ck_assert_int_eq(tl_engine_flush(g), TL_OK);
    tl_slice_spec s;
    tl_slice_spec_row(&s, R / 2, S, S);
    int ig, ir;
    ck_assert_int_eq(tl_engine_add_slice(g, &s, &ig), TL_OK);
    ck_assert_int_eq(tl_engine_add_slice(ref, &s, &ir), TL_OK);
    float *got = malloc(S * S * 4), *want = malloc(S * S * 4);
    ck_assert_int_eq(tl_engine_reconstruct(g, &ig, 1, &got, NULL), TL_OK);
    ck_assert_int_eq(tl_engine_reconstruct(ref, &ir, 1, &want, NULL), TL_OK);
    double l2 = tl_rel_l2(got, want, S * S), mor = tl_max_over_range(got, want, S * S);
    printf("  all corrections, batched, %u x %u slice: rel L2 %.3g, max/range %.3g\n", S, S, l2,
           mor);
    ck_assert_msg(l2 <= 2e-5 && mor <= 1e-4, "rel L2 %.3g, max/range %.3g", l2, mor);
    tl_engine_corr_state cg, cr;
    ck_assert_int_eq(tl_engine_corrections(g, &cg), TL_OK);
    ck_assert_int_eq(tl_engine_corrections(ref, &cr), TL_OK);
    ck_assert_uint_eq(cg.dezinger_replaced, cr.dezinger_replaced);
    /* the reconstruction waited for every frame: all 24 frames' two stages are timed */
    tl_stage_time t[2 * N + 1];
    size_t nt = 0, per[TL_STAGE_COUNT] = {0};
    ck_assert_int_eq(tl_engine_stage_times(g, t, 2 * N + 1, &nt), TL_OK);
    for (size_t i = 0; i < nt; i++) {
        per[t[i].stage]++;
        ck_assert(t[i].seconds > 0 && t[i].seconds < 1);
    }
    printf("  stage times: %zu dezinger, %zu paganin (first %.3g ms, %.3g ms)\n",
           per[TL_STAGE_DEZINGER], per[TL_STAGE_PAGANIN], nt ? t[0].seconds * 1e3 : 0,
           nt > 1 ? t[1].seconds * 1e3 : 0);
    ck_assert_uint_eq(per[TL_STAGE_DEZINGER], N);
    ck_assert_uint_eq(per[TL_STAGE_PAGANIN], N);
    tl_engine_destroy(g);
    tl_engine_destroy(ref);
    free(img);
    free(dark);
    free(flat);
    free(got);
    free(want);
}
END_TEST

/* (e) as tests/unit/check_corrections.c, rings_remove_stripes */
enum { RR = 3, RC = 512, RN = 90, RS = 256 };

static double disks(double u, double theta)
{
    const double cx[2] = {0, 90}, cy[2] = {0, -60}, rad[2] = {200, 6}, mu[2] = {0.004, 0.02};
    double p = 0;
    for (int k = 0; k < 2; k++) {
        double d = u - (cx[k] * cos(theta) - cy[k] * sin(theta));
        if (fabs(d) < rad[k])
            p += 2 * mu[k] * sqrt(rad[k] * rad[k] - d * d);
    }
    return p;
}

static double stripe(uint32_t c)
{
    static const uint32_t at[] = {156, 209, 269, 297, 346};
    static const double amp[] = {0.02, -0.015, 0.018, 0.02, -0.012};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++)
        if (c == at[i])
            return amp[i];
    return 0;
}

static void rings_case(tl_rings r)
{
    tl_engine_config c;
    tl_engine_config_init(&c, RR, RC, RN);
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.corr.rings = r;
    c.corr.ring_tolerance = 1e-12; /* both rebuild at every update: same cadence */
    tl_engine *g = tl_gt_cuda(&c, NULL), *ref = tl_gt_cpu(&c, TL_PRECISION_F64);
    tl_engine *both[2] = {g, ref};
    tl_slice_spec s;
    tl_slice_spec_row(&s, RR / 2, RS, RS);
    int id[2];
    float *out[2] = {malloc(RS * RS * 4), malloc(RS * RS * 4)};
    static float img[RR * RC];
    for (int b = 0; b < 2; b++) {
        ck_assert_int_eq(tl_engine_add_slice(both[b], &s, &id[b]), TL_OK);
        ck_assert_int_eq(tl_engine_track(both[b], id[b], true), TL_OK);
    }
    for (uint64_t k = 0; k < 3 * RN; k++) {
        double th = M_PI * (double)(k % RN) / RN;
        for (uint32_t row = 0; row < RR; row++)
            for (uint32_t col = 0; col < RC; col++)
                img[row * RC + col] = (float)(disks(col - (RC - 1) / 2.0, th) + stripe(col));
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = k,
                      .angle = th,
                      .dtype = TL_DTYPE_F32,
                      .rows = RR,
                      .cols = RC,
                      .data = img};
        for (int b = 0; b < 2; b++) {
            ck_assert_msg(tl_engine_submit(both[b], &f) == TL_OK, "%s",
                          tl_engine_last_error(both[b]));
            if (k % 7 == 0)
                ck_assert_int_eq(tl_engine_reconstruct(both[b], &id[b], 1, &out[b], NULL), TL_OK);
        }
    }
    for (int b = 0; b < 2; b++)
        ck_assert_int_eq(tl_engine_reconstruct(both[b], &id[b], 1, &out[b], NULL), TL_OK);
    double l2 = tl_rel_l2(out[0], out[1], RS * RS),
           mor = tl_max_over_range(out[0], out[1], RS * RS);
    tl_engine_corr_state cg, cr;
    ck_assert_int_eq(tl_engine_corrections(g, &cg), TL_OK);
    ck_assert_int_eq(tl_engine_corrections(ref, &cr), TL_OK);
    tl_stage_time t[3 * 64];
    size_t nt = 0, nrings = 0;
    ck_assert_int_eq(tl_engine_stage_times(g, t, 3 * 64, &nt), TL_OK);
    for (size_t i = 0; i < nt; i++)
        if (t[i].stage == TL_STAGE_RINGS) {
            nrings++;
            printf("  ring update: %.3f ms\n", t[i].seconds * 1e3);
        }
    printf("  rings %s: rel L2 %.3g, max/range %.3g; updates %llu/%llu, rebuilds %llu/%llu\n",
           tl_rings_name(r), l2, mor, (unsigned long long)cg.ring_updates,
           (unsigned long long)cr.ring_updates, (unsigned long long)cg.ring_rebuilds,
           (unsigned long long)cr.ring_rebuilds);
    ck_assert_uint_eq(cg.ring_updates, cr.ring_updates);
    ck_assert_uint_eq(cg.ring_rebuilds, cr.ring_rebuilds);
    ck_assert_uint_eq(nrings, 1); /* the last update's time, once */
    ck_assert_msg(l2 <= 2e-5 && mor <= 1e-4, "rings %s: rel L2 %.3g, max/range %.3g",
                  tl_rings_name(r), l2, mor);
    tl_engine_destroy(g);
    tl_engine_destroy(ref);
    free(out[0]);
    free(out[1]);
}

START_TEST(rings_vo)
{
    rings_case(TL_RINGS_VO);
}
END_TEST

START_TEST(rings_fw)
{
    rings_case(TL_RINGS_FW);
}
END_TEST

static double center_phantom(double u, double theta, double axis)
{
    static const double cx[] = {0, 0.35, -0.2, 0.1}, cy[] = {0, 0.1, -0.4, 0.5},
                        rad[] = {0.8, 0.12, 0.2, 0.08}, mu[] = {0.3, 0.8, -0.2, 1.0};
    double p = 0, scale = 0.45 * 2048;
    for (size_t k = 0; k < sizeof cx / sizeof *cx; k++) {
        double d = (u - axis) / scale - (cx[k] * cos(theta) - cy[k] * sin(theta));
        if (fabs(d) < rad[k])
            p += 2 * mu[k] * sqrt(rad[k] * rad[k] - d * d);
    }
    return p * scale * 1e-3;
}

START_TEST(center_2048)
{
    enum { R = 4, C = 2048, N = 180 };
    const double axis = 1023.5 + 7.31;
    tl_engine_config c;
    tl_engine_config_init(&c, R, C, N);
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.center_estimate = true;
    tl_engine *g = tl_gt_cuda(&c, NULL), *ref = tl_gt_cpu(&c, TL_PRECISION_F64);
    tl_engine *both[2] = {g, ref};
    static float img[R * C];
    for (uint64_t k = 0; k < 2 * N + 40; k++) {
        double th = M_PI * (double)k / N;
        for (uint32_t r = 0; r < R; r++)
            for (uint32_t u = 0; u < C; u++)
                img[r * C + u] = (float)center_phantom(u, th, axis);
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = k,
                      .angle = th,
                      .dtype = TL_DTYPE_F32,
                      .rows = R,
                      .cols = C,
                      .data = img,
                      .more = k % 3 != 0};
        for (int b = 0; b < 2; b++)
            ck_assert_msg(tl_engine_submit(both[b], &f) == TL_OK, "%s",
                          tl_engine_last_error(both[b]));
    }
    ck_assert_int_eq(tl_engine_flush(g), TL_OK);
    tl_center_estimate eg, er;
    ck_assert_int_eq(tl_engine_center_estimate_now(g, &eg), TL_OK);
    ck_assert_int_eq(tl_engine_center_estimate_now(ref, &er), TL_OK);
    printf("  centre: GPU %.4f, CPU %.4f, true %.4f; confidence %.4f / %.4f\n", eg.center,
           er.center, axis, eg.confidence, er.confidence);
    ck_assert(fabs(eg.center - axis) <= 0.1);
    ck_assert(fabs(eg.center - er.center) <= 0.01);
    tl_engine_destroy(g);
    tl_engine_destroy(ref);
}
END_TEST

START_TEST(half_acquisition)
{
    enum { R = 2, C = 160, N = 480, S = 256 };
    const double axis = 140;
    tl_engine_config c;
    tl_engine_config_init(&c, R, C, N);
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.center = axis;
    c.half_acquisition = true;
    tl_engine *g = tl_gt_cuda(&c, NULL), *ref = tl_gt_cpu(&c, TL_PRECISION_F64);
    tl_engine *both[2] = {g, ref};
    static float img[R * C];
    for (uint64_t k = 0; k < N; k++) {
        double th = 2 * M_PI * (double)k / N;
        for (uint32_t r = 0; r < R; r++)
            for (uint32_t u = 0; u < C; u++) {
                double t = u - axis, d = t - 60 * cos(th), p = 0;
                p += fabs(t) < 125 ? 0.008 * sqrt(125 * 125 - t * t) : 0;
                p += fabs(d) < 15 ? 0.02 * sqrt(15 * 15 - d * d) : 0;
                img[r * C + u] = (float)p;
            }
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = k,
                      .angle = th,
                      .dtype = TL_DTYPE_F32,
                      .rows = R,
                      .cols = C,
                      .data = img,
                      .more = k % 4 != 0};
        for (int b = 0; b < 2; b++)
            ck_assert_msg(tl_engine_submit(both[b], &f) == TL_OK, "%s",
                          tl_engine_last_error(both[b]));
    }
    ck_assert_int_eq(tl_engine_flush(g), TL_OK);
    tl_slice_spec s;
    tl_slice_spec_row(&s, 0, S, S);
    int ig, ir;
    float *got = malloc(S * S * 4), *want = malloc(S * S * 4);
    ck_assert_int_eq(tl_engine_add_slice(g, &s, &ig), TL_OK);
    ck_assert_int_eq(tl_engine_add_slice(ref, &s, &ir), TL_OK);
    ck_assert_int_eq(tl_engine_reconstruct(g, &ig, 1, &got, NULL), TL_OK);
    ck_assert_int_eq(tl_engine_reconstruct(ref, &ir, 1, &want, NULL), TL_OK);
    double l2 = tl_rel_l2(got, want, S * S), mor = tl_max_over_range(got, want, S * S);
    printf("  half acquisition: rel L2 %.3g, max/range %.3g\n", l2, mor);
    ck_assert(l2 <= 2e-5 && mor <= 1e-4);
    tl_engine_destroy(g);
    tl_engine_destroy(ref);
    free(got);
    free(want);
}
END_TEST

int main(void)
{
    const tl_gt_case cases[] = {
        {"halfacq", {half_acquisition, NULL}},
        {"center", {center_2048, NULL}},
        {"rings", {rings_vo, rings_fw, NULL}},
        {"dezinger", {dezinger_counts, dezinger_flat_log, NULL}},
        {"paganin", {paganin_small, paganin_large, NULL}},
        {"pipeline", {all_on_batched_slice, NULL}},
    };
    return tl_gt_main("corrections", cases, sizeof cases / sizeof *cases);
}

#endif /* HAVE_CUDA */
