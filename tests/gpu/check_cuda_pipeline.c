/* check_cuda_pipeline.c — check_cuda's case "pipeline": availability and AUTO, the
 * per-frame path against the CPU backend (dtype conversion, dark/flat batches, flat-field
 * and -log, pitched frames: 1e-6) and every filter (relative L2 1e-5).
 */
#include "config.h"

#ifdef HAVE_CUDA

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "gpu/phantom.h"
#include "tests/gpu/cuda_check.h"
#include "tests/gpu/gpu_test.h"
#include "tests/testutil.h"

/* ---- availability ------------------------------------------------------------------------ */

START_TEST(available_and_auto)
{
    char why[256] = "";
    ck_assert_msg(tl_backend_available(TL_BACKEND_CUDA, why, sizeof why), "%s", why);
    tl_engine_config c;
    tl_engine_config_init(&c, 4, 64, 8);
    tl_engine *e = tl_gt_cuda(&c, NULL);
    tl_engine_state st;
    tl_engine_get_state(e, &st);
    printf("  device: %s, %zu bytes for a 4 x 64 x 8 window\n", st.device_name, st.memory_bytes);
    ck_assert_str_eq(st.backend, "cuda");
    ck_assert_ptr_nonnull(strstr(st.device_name, "sm_"));
    ck_assert_uint_gt(st.memory_bytes, 4 * 64 * 8 * sizeof(float));
    /* the kernels this file forces are listed with their modes (check_kernels.c tests the
     * whole family) */
    tl_kernel_info k[128];
    size_t nk = tl_engine_kernels(e, k, 128);
    ck_assert_uint_ge(nk, 3);
    ck_assert_uint_le(nk, 128);
    const struct {
        const char *name;
        tl_quality q;
        bool planes;
    } want[] = {{"tex-std", TL_QUALITY_FAST, false},
                {"alu-exact", TL_QUALITY_EXACT, false},
                {"plane-exact", TL_QUALITY_EXACT, true}};
    for (size_t w = 0; w < 3; w++) {
        size_t i = 0;
        while (i < nk && strcmp(k[i].name, want[w].name) != 0)
            i++;
        ck_assert_msg(i < nk, "no kernel %s", want[w].name);
        ck_assert_int_eq(k[i].quality, want[w].q);
        ck_assert(k[i].planes == want[w].planes);
        ck_assert_uint_eq(k[i].slices, 1);
        ck_assert_ptr_nonnull(k[i].params);
    }
    tl_engine_destroy(e);

    /* AUTO picks CUDA where a GPU is usable */
    c.backend = TL_BACKEND_AUTO;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_OK);
    tl_engine_get_state(e, &st);
    ck_assert_str_eq(st.backend, "cuda");
    tl_engine_destroy(e);

    /* what cannot run is an error, never a fallback */
    c.backend = TL_BACKEND_CUDA;
    c.device = 1000;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EDEVICE);
    ck_assert_ptr_null(e);
    ck_assert_ptr_nonnull(strstr(tl_engine_last_error(NULL), "device 1000"));
    c.device = 0;
    c.precision = TL_PRECISION_F64;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EUNSUPPORTED);
    c.precision = TL_PRECISION_F32;
    strcpy(c.kernel, "cpu-f32");
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EINVAL);
}
END_TEST

/* ---- preprocessing ----------------------------------------------------------------------- */

/* A row slice as wide as the detector over one projection at angle 0: pixel j is bin j,
 * times pi (the weight of a single projection). The preprocessing tests read projections
 * back this way with plane-exact, whose interpolation at a bin centre returns the bin
 * itself (the fastest row kernels fold the weight and the slope into their caches and are
 * exact only to a few ulps, too coarse for the per-pixel 1e-6 of these tests). */
#define READOUT "plane-exact"
static void project_rows(tl_engine *e, uint32_t rows, uint32_t cols, float *out)
{
    for (uint32_t z = 0; z < rows; z++) {
        tl_slice_spec sp;
        tl_slice_spec_row(&sp, z, 1, cols);
        float *o = cc_recon(e, &sp, NULL);
        for (uint32_t j = 0; j < cols; j++)
            out[z * cols + j] = o[j] / (float)M_PI;
        free(o);
    }
}

/* u8/u16/u32/f32 frames, two darks and two flats, one projection, -log or linear:
 * the CUDA backend equals the CPU backend to 1e-6 and the formula to 1e-5. */
START_TEST(preprocess_all_dtypes)
{
    const uint32_t R = 2, W = 37;
    for (int linear = 0; linear < 2; linear++)
        for (int d = 0; d < 4; d++) {
            tl_dtype dt = (tl_dtype)d;
            tl_engine_config c;
            tl_engine_config_init(&c, R, W, 1);
            c.dtype = dt;
            c.filter = TL_FILTER_NONE;
            c.already_linear = linear;
            tl_engine *e[2] = {tl_gt_cuda(&c, READOUT), tl_gt_cpu(&c, TL_PRECISION_F32)};
            size_t pitch = W * tl_dtype_size(dt);
            void *buf = malloc(R * pitch);
            for (int kind = 0; kind < 3; kind++)
                for (int k = 0; k < (kind == 2 ? 1 : 2); k++) {
                    cc_fill_frame(buf, dt, R, W, pitch, kind, k);
                    tl_frame f = {.kind = (tl_frame_kind)kind,
                                  .index = 0,
                                  .dtype = dt,
                                  .rows = R,
                                  .cols = W,
                                  .data = buf};
                    cc_submit_all(e, 2, &f);
                }
            float got[2 * 37], ref[2 * 37];
            project_rows(e[0], R, W, got);
            project_rows(e[1], R, W, ref);
            char what[64];
            snprintf(what, sizeof what, "dtype %d %s", d, linear ? "linear" : "-log");
            cc_expect_pixels(what, got, ref, R * W, 1e-6);
            /* and the formula of engine.h in double */
            double scale[] = {1, 211, 1000003, 1.37};
            for (uint32_t r = 0; r < R; r++)
                for (uint32_t j = 0; j < W; j++) {
                    double s = scale[d];
                    double D = (cc_raw_value(0, 0, r, j) + cc_raw_value(0, 1, r, j)) * s / 2;
                    double F = (cc_raw_value(1, 0, r, j) + cc_raw_value(1, 1, r, j)) * s / 2;
                    if (dt == TL_DTYPE_F32) { /* the frames hold float-rounded values */
                        D = ((float)(cc_raw_value(0, 0, r, j) * s) +
                             (float)(cc_raw_value(0, 1, r, j) * s)) /
                            2;
                        F = ((float)(cc_raw_value(1, 0, r, j) * s) +
                             (float)(cc_raw_value(1, 1, r, j) * s)) /
                            2;
                    }
                    double I = cc_raw_value(2, 0, r, j) * s;
                    if (dt == TL_DTYPE_F32)
                        I = (float)I;
                    double den = F - D > 1e-6 ? F - D : 1e-6;
                    double t = (I - D) / den;
                    double p = linear ? t : -log(t > 1e-6 ? t : 1e-6);
                    double g = got[r * W + j];
                    ck_assert_msg(fabs(g - p) <= 1e-5 * fmax(1.0, fabs(p)),
                                  "%s row %u col %u: %.9g vs %.9g", what, r, j, g, p);
                }
            free(buf);
            tl_engine_destroy(e[0]);
            tl_engine_destroy(e[1]);
        }
}
END_TEST

/* Batches: interleaved darks and flats form one batch each; a dark after a projection
 * starts a new batch whose average replaces the old one at once; reset keeps the
 * averages. Checked against the CPU backend after every projection. */
START_TEST(calibration_batches_match_cpu)
{
    const uint32_t R = 3, W = 50;
    tl_engine_config c;
    tl_engine_config_init(&c, R, W, 1);
    c.dtype = TL_DTYPE_U16;
    c.filter = TL_FILTER_NONE;
    tl_engine *e[2] = {tl_gt_cuda(&c, READOUT), tl_gt_cpu(&c, TL_PRECISION_F32)};
    uint16_t buf[3 * 50];
    /* the sequence: kind and the frame number fed to fill_frame */
    const int seq[][2] = {{2, 0}, {0, 0}, {1, 0}, {0, 1},  {2, 1}, {0, 2}, {2, 2},
                          {1, 1}, {1, 2}, {2, 3}, {-1, 0}, {2, 4}, {0, 3}, {2, 5}};
    uint64_t index = 0;
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        if (seq[i][0] < 0) {
            ck_assert_int_eq(tl_engine_reset(e[0]), TL_OK);
            ck_assert_int_eq(tl_engine_reset(e[1]), TL_OK);
            continue;
        }
        cc_fill_frame(buf, TL_DTYPE_U16, R, W, W * 2, seq[i][0], seq[i][1]);
        tl_frame f = {.kind = (tl_frame_kind)seq[i][0],
                      .index = index,
                      .dtype = TL_DTYPE_U16,
                      .rows = R,
                      .cols = W,
                      .data = buf};
        cc_submit_all(e, 2, &f);
        if (seq[i][0] != 2)
            continue;
        index++;
        float got[3 * 50], ref[3 * 50];
        project_rows(e[0], R, W, got);
        project_rows(e[1], R, W, ref);
        char what[64];
        snprintf(what, sizeof what, "calibration step %zu", i);
        cc_expect_pixels(what, got, ref, R * W, 1e-6);
    }
    tl_engine_destroy(e[0]);
    tl_engine_destroy(e[1]);
}
END_TEST

/* A frame given with a row pitch equals the packed frame. */
START_TEST(pitched_host_frames)
{
    const uint32_t R = 4, W = 33, P = 41;
    uint16_t big[4 * 41], packed[4 * 33];
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t c = 0; c < P; c++) {
            big[r * P + c] = (uint16_t)(1000 + r * 37 + c * 11);
            if (c >= 3 && c < 3 + W)
                packed[r * W + c - 3] = big[r * P + c];
        }
    tl_engine_config c;
    tl_engine_config_init(&c, R, W, 1);
    c.filter = TL_FILTER_SHEPP_LOGAN;
    float *o[2];
    for (int k = 0; k < 2; k++) {
        tl_engine *e = tl_gt_cuda(&c, READOUT);
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .angle = 0.3,
                      .dtype = TL_DTYPE_U16,
                      .rows = R,
                      .cols = W,
                      .data = k ? (void *)(big + 3) : (void *)packed,
                      .pitch = k ? P * sizeof(uint16_t) : 0};
        ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
        tl_slice_spec sp;
        tl_slice_spec_row(&sp, 2, W, W);
        o[k] = cc_recon(e, &sp, NULL);
        tl_engine_destroy(e);
    }
    ck_assert(memcmp(o[0], o[1], W * W * sizeof(float)) == 0);
    free(o[0]);
    free(o[1]);
}
END_TEST

/* ---- filters ----------------------------------------------------------------------------- */

/* Every filter on one projection (pixel j = filtered bin j) against the CPU backend, and
 * a filter change between two projections. */
START_TEST(filters_match_cpu)
{
    const uint32_t R = 2, W = 300; /* P = 1024 */
    float *img = malloc(R * W * sizeof *img);
    for (uint32_t i = 0; i < R * W; i++) /* a smooth bump, an edge and some texture */
        img[i] = (float)(exp(-pow(((double)(i % W) - 140.0) / 60.0, 2)) +
                         ((i % W) > 200 ? 0.5 : 0) + 0.05 * sin(0.7 * i));
    for (int fi = 0; fi < TL_FILTER_COUNT; fi++) {
        tl_engine_config c;
        tl_engine_config_init(&c, R, W, 1);
        c.dtype = TL_DTYPE_F32;
        c.already_linear = true;
        c.filter = (tl_filter)fi;
        tl_engine *e[2] = {tl_gt_cuda(&c, READOUT), tl_gt_cpu(&c, TL_PRECISION_F32)};
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .dtype = TL_DTYPE_F32,
                      .rows = R,
                      .cols = W,
                      .data = img};
        cc_submit_all(e, 2, &f);
        float got[2 * 300], ref[2 * 300];
        project_rows(e[0], R, W, got);
        project_rows(e[1], R, W, ref);
        char what[64];
        snprintf(what, sizeof what, "filter %s", tl_filter_name(c.filter));
        cc_expect_close(what, got, ref, R * W, 1e-5, 1e-4);
        tl_engine_destroy(e[0]);
        tl_engine_destroy(e[1]);
    }
    /* ram-lak for the first projection, hann from the second on */
    tl_engine_config c;
    tl_engine_config_init(&c, R, W, 2);
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    tl_engine *e[2] = {tl_gt_cuda(&c, READOUT), tl_gt_cpu(&c, TL_PRECISION_F32)};
    tl_frame f = {.kind = TL_FRAME_PROJ, .dtype = TL_DTYPE_F32, .rows = R, .cols = W, .data = img};
    cc_submit_all(e, 2, &f);
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(tl_engine_set_filter(e[k], TL_FILTER_HANN), TL_OK);
    f.index = 1;
    cc_submit_all(e, 2, &f);
    float got[2 * 300], ref[2 * 300];
    project_rows(e[0], R, W, got);
    project_rows(e[1], R, W, ref);
    cc_expect_close("filter change ram-lak -> hann", got, ref, R * W, 1e-5, 1e-4);
    tl_engine_destroy(e[0]);
    tl_engine_destroy(e[1]);
    free(img);
}
END_TEST

tl_gt_case cc_pipeline_case(void)
{
    return (tl_gt_case){"pipeline",
                        {available_and_auto, preprocess_all_dtypes, calibration_batches_match_cpu,
                         pitched_host_frames, filters_match_cpu, NULL}};
}

#else
typedef int
    check_cuda_pipeline_needs_cuda; /* ISO C wants a translation unit to declare something */
#endif /* HAVE_CUDA */
