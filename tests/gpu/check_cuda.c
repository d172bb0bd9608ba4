/* check_cuda.c — the CUDA backend against the CPU backend and the float64 reference mode,
 * through the public engine API only (engine.h; kernels are forced with config.kernel).
 *
 * What is checked (thresholds of DESIGN.md §3 and seed-000-001.md §6.1):
 *   - dtype conversion, dark/flat batches, flat-field and -log against the CPU (1e-6);
 *   - every filter against the CPU (relative L2 1e-5), also after set_filter;
 *   - each kernel against the float64 reference on analytic phantom data: exact kernels
 *     relative L2 <= 2e-5 and max/range <= 1e-4, tex-std (fast) 1e-3 and 3e-3 (AC-2/AC-3);
 *   - a window longer than the texture kernel's constant table (2500 projections);
 *   - odd sizes: widths 250 and 1000, 181 and 1021 projections, a single projection,
 *     non-uniform angles with angular weights, per-projection centres, slices of other
 *     sizes than the detector, scale != 1;
 *   - planes: plane == row (same kernel, 1e-6), plane-exact == alu-exact on rows, ortho
 *     and oblique planes and non-integer z against the CPU, mixed-kernel jobs;
 *   - device-resident frames (a cudaMallocPitch buffer) == host frames;
 *   - the rolling window after N + k projections == a fresh engine of the last N (1e-6);
 *   - refusal of a scan larger than the card (TL_ENOMEM, the engine's message);
 *   - several GPUs (case "split"): row partitions on {0, 0} and, with two GPUs, {0, 1}
 *     against one GPU within the exact mode (rows, ortho-slices, planes, tracked slices,
 *     device frames read peer-to-peer), benchmarks, a device list naming a missing GPU;
 *   - availability, AUTO picking CUDA, the kernel list, benchmarks, empty windows.
 * Sizes are small (each case well under a second on an H100; the whole binary stays
 * practical under compute-sanitizer memcheck and racecheck), inputs deterministic.
 * Exit 77 (skip) without a usable CUDA device or in builds without CUDA; Check runs
 * without fork(), which CUDA does not survive.
 */
#include "config.h"

#ifndef HAVE_CUDA
int main(void)
{
    return 77; /* this build has no CUDA backend: skip */
}
#else

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "gpu/phantom.h"
#include "tests/gpu/gpu_test.h"
#include "tests/testutil.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static void submit_all(tl_engine **e, int ne, const tl_frame *f)
{
    for (int i = 0; i < ne; i++) {
        tl_status st = tl_engine_submit(e[i], f);
        ck_assert_msg(st == TL_OK, "submit to engine %d: %s: %s", i, tl_status_name(st),
                      tl_engine_last_error(e[i]));
    }
}

/* Reconstructs one slice; *kernel (may be NULL) receives the kernel's name. */
static float *recon(tl_engine *e, const tl_slice_spec *sp, const char **kernel)
{
    float *out = malloc((size_t)sp->height * sp->width * sizeof *out);
    ck_assert_ptr_nonnull(out);
    int id;
    ck_assert_int_eq(tl_engine_add_slice(e, sp, &id), TL_OK);
    tl_slice_info info;
    tl_status st = tl_engine_reconstruct(e, &id, 1, &out, &info);
    ck_assert_msg(st == TL_OK, "reconstruct: %s: %s", tl_status_name(st), tl_engine_last_error(e));
    if (kernel)
        *kernel = info.kernel;
    ck_assert_int_eq(tl_engine_remove_slice(e, id), TL_OK);
    return out;
}

static void expect_close(const char *what, const float *got, const float *ref, size_t n,
                         double rel_max, double mor_max)
{
    double rel = tl_rel_l2(got, ref, n), mor = tl_max_over_range(got, ref, n);
    printf("  %-58s rel L2 %.2e  max/range %.2e\n", what, rel, mor);
    fflush(stdout);
    ck_assert_msg(rel <= rel_max && mor <= mor_max,
                  "%s: rel L2 %.3g (limit %.3g), max/range %.3g (limit %.3g)", what, rel, rel_max,
                  mor, mor_max);
}

/* Pixel by pixel: |got - ref| <= tol * |ref| (+ a denormal floor for exact zeros). */
static void expect_pixels(const char *what, const float *got, const float *ref, size_t n,
                          double tol)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)got[i] - ref[i]) <= tol * fabs((double)ref[i]) + 1e-30,
                      "%s: pixel %zu: %.9g vs %.9g", what, i, got[i], ref[i]);
}

#define EXACT_REL 2e-5
#define EXACT_MOR 1e-4
#define FAST_REL 1e-3
#define FAST_MOR 3e-3

static const char *const all_kernels[] = {"alu-exact", "plane-exact", "tex-std"};
#define NKERNELS 3

static bool is_fast(const char *kernel)
{
    return strcmp(kernel, "tex-std") == 0;
}

/* ---- phantom scans (as tests/unit/check_accuracy.c) --------------------------------------- */

typedef struct {
    uint32_t rows, cols, nproj;
    uint32_t window;     /* 0 = nproj */
    bool nonuniform;     /* jittered, non-uniform angles */
    bool offsets;        /* per-projection centre corrections */
    tl_filter filter;
    tl_weights weights;
    double center_shift; /* the data's axis relative to (cols - 1) / 2 */
    double angle0;       /* added to every angle */
} scan;

static double angle_of(const scan *s, uint64_t k)
{
    return tl_gt_angle(s->nproj, s->nonuniform, s->angle0, k);
}

static double offset_of(const scan *s, uint64_t k)
{
    return tl_gt_offset(s->offsets, k);
}

static tl_engine_config scan_config(const scan *s)
{
    tl_engine_config c;
    tl_engine_config_init(&c, s->rows, s->cols, s->window ? s->window : s->nproj);
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.filter = s->filter;
    c.weights = s->weights;
    c.center = (s->cols - 1) / 2.0 + s->center_shift;
    return c;
}

static void shepp(tl_phantom *ph, const scan *s, double radius_z)
{
    ck_assert_int_eq(tl_phantom_shepp_logan(ph, 0.45 * s->cols, (s->rows - 1) / 2.0, radius_z), 0);
}

/* Projections first .. first + count - 1 of the scan, each submitted to every engine. */
static void feed(tl_engine **e, int ne, const scan *s, const tl_phantom *ph, uint64_t first,
                 uint64_t count)
{
    float *img = malloc((size_t)s->rows * s->cols * sizeof *img);
    ck_assert_ptr_nonnull(img);
    for (uint64_t k = first; k < first + count; k++) {
        double th = angle_of(s, k), off = offset_of(s, k);
        tl_phantom_project(ph, th, (s->cols - 1) / 2.0 + s->center_shift + off, s->rows, s->cols,
                           img);
        tl_frame f = {.kind = TL_FRAME_PROJ, .index = k, .angle = th, .center_offset = off,
                      .dtype = TL_DTYPE_F32, .rows = s->rows, .cols = s->cols, .data = img};
        submit_all(e, ne, &f);
    }
    free(img);
}

/* Every kernel on slice sp against the float64 CPU reference (and, for scale, against the
 * float32 CPU backend). skip_fast leaves tex-std out. */
static void kernels_vs_reference(const char *name, const scan *s, const tl_slice_spec *sp,
                                 bool skip_fast)
{
    tl_engine_config c = scan_config(s);
    tl_phantom ph;
    shepp(&ph, s, 0.45 * s->cols);
    tl_engine *e[2 + NKERNELS];
    e[0] = tl_gt_cpu(&c, TL_PRECISION_F64);
    e[1] = tl_gt_cpu(&c, TL_PRECISION_F32);
    for (int k = 0; k < NKERNELS; k++)
        e[2 + k] = tl_gt_cuda(&c, all_kernels[k]);
    feed(e, 2 + NKERNELS, s, &ph, 0, s->nproj);
    size_t n = (size_t)sp->height * sp->width;
    float *ref = recon(e[0], sp, NULL), *cpu = recon(e[1], sp, NULL);
    char what[160];
    /* the CPU backend's own float32 error, for scale (asserted in check_accuracy) */
    printf("  %-58s rel L2 %.2e  max/range %.2e\n", name, tl_rel_l2(cpu, ref, n),
           tl_max_over_range(cpu, ref, n));
    for (int k = 0; k < NKERNELS; k++) {
        if (skip_fast && is_fast(all_kernels[k]))
            continue;
        const char *used = NULL;
        float *img = recon(e[2 + k], sp, &used);
        ck_assert_str_eq(used, all_kernels[k]);
        snprintf(what, sizeof what, "%s: %s", name, all_kernels[k]);
        if (is_fast(all_kernels[k]))
            expect_close(what, img, ref, n, FAST_REL, FAST_MOR);
        else
            expect_close(what, img, ref, n, EXACT_REL, EXACT_MOR);
        free(img);
    }
    free(ref);
    free(cpu);
    for (int k = 0; k < 2 + NKERNELS; k++)
        tl_engine_destroy(e[k]);
    tl_phantom_free(&ph);
}

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

/* Raw values of a test frame, in range for every dtype once scaled. kind: 0 dark, 1 flat,
 * 2 projection; k the frame's number within its kind. Column 5 has a flat at or below the
 * dark (gain clamp), column 7 a projection below the dark (ratio clamp). */
static double raw_value(int kind, int k, uint32_t r, uint32_t c)
{
    switch (kind) {
    case 0:
        return 5 + (c * 3 + r * 5 + k * 2) % 7;
    case 1:
        return c == 5 ? 6 : 120 + (c * 11 + r * 17 + k * 5) % 130;
    default:
        return c == 7 ? 1 : 20 + (c * 29 + r * 13 + k * 41) % 200;
    }
}

static void fill_frame(void *buf, tl_dtype dt, uint32_t rows, uint32_t cols, size_t pitch,
                       int kind, int k)
{
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            double v = raw_value(kind, k, r, c);
            char *row = (char *)buf + r * pitch;
            switch (dt) {
            case TL_DTYPE_U8: ((uint8_t *)row)[c] = (uint8_t)v; break;
            case TL_DTYPE_U16: ((uint16_t *)row)[c] = (uint16_t)(v * 211); break;
            case TL_DTYPE_U32: ((uint32_t *)row)[c] = (uint32_t)(v * 1000003); break;
            case TL_DTYPE_F32: ((float *)row)[c] = (float)(v * 1.37); break;
            }
        }
}

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
        float *o = recon(e, &sp, NULL);
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
                    fill_frame(buf, dt, R, W, pitch, kind, k);
                    tl_frame f = {.kind = (tl_frame_kind)kind, .index = 0, .dtype = dt,
                                  .rows = R, .cols = W, .data = buf};
                    submit_all(e, 2, &f);
                }
            float got[2 * 37], ref[2 * 37];
            project_rows(e[0], R, W, got);
            project_rows(e[1], R, W, ref);
            char what[64];
            snprintf(what, sizeof what, "dtype %d %s", d, linear ? "linear" : "-log");
            expect_pixels(what, got, ref, R * W, 1e-6);
            /* and the formula of engine.h in double */
            double scale[] = {1, 211, 1000003, 1.37};
            for (uint32_t r = 0; r < R; r++)
                for (uint32_t j = 0; j < W; j++) {
                    double s = scale[d];
                    double D = (raw_value(0, 0, r, j) + raw_value(0, 1, r, j)) * s / 2;
                    double F = (raw_value(1, 0, r, j) + raw_value(1, 1, r, j)) * s / 2;
                    if (dt == TL_DTYPE_F32) { /* the frames hold float-rounded values */
                        D = ((float)(raw_value(0, 0, r, j) * s) + (float)(raw_value(0, 1, r, j) * s)) / 2;
                        F = ((float)(raw_value(1, 0, r, j) * s) + (float)(raw_value(1, 1, r, j) * s)) / 2;
                    }
                    double I = raw_value(2, 0, r, j) * s;
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
    const int seq[][2] = {{2, 0}, {0, 0}, {1, 0}, {0, 1}, {2, 1}, {0, 2}, {2, 2},
                          {1, 1}, {1, 2}, {2, 3}, {-1, 0}, {2, 4}, {0, 3}, {2, 5}};
    uint64_t index = 0;
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        if (seq[i][0] < 0) {
            ck_assert_int_eq(tl_engine_reset(e[0]), TL_OK);
            ck_assert_int_eq(tl_engine_reset(e[1]), TL_OK);
            continue;
        }
        fill_frame(buf, TL_DTYPE_U16, R, W, W * 2, seq[i][0], seq[i][1]);
        tl_frame f = {.kind = (tl_frame_kind)seq[i][0], .index = index, .dtype = TL_DTYPE_U16,
                      .rows = R, .cols = W, .data = buf};
        submit_all(e, 2, &f);
        if (seq[i][0] != 2)
            continue;
        index++;
        float got[3 * 50], ref[3 * 50];
        project_rows(e[0], R, W, got);
        project_rows(e[1], R, W, ref);
        char what[64];
        snprintf(what, sizeof what, "calibration step %zu", i);
        expect_pixels(what, got, ref, R * W, 1e-6);
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
        tl_frame f = {.kind = TL_FRAME_PROJ, .angle = 0.3, .dtype = TL_DTYPE_U16, .rows = R,
                      .cols = W, .data = k ? (void *)(big + 3) : (void *)packed,
                      .pitch = k ? P * sizeof(uint16_t) : 0};
        ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
        tl_slice_spec sp;
        tl_slice_spec_row(&sp, 2, W, W);
        o[k] = recon(e, &sp, NULL);
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
        img[i] = (float)(exp(-pow(((double)(i % W) - 140.0) / 60.0, 2)) + ((i % W) > 200 ? 0.5 : 0) +
                         0.05 * sin(0.7 * i));
    for (int fi = 0; fi < TL_FILTER_COUNT; fi++) {
        tl_engine_config c;
        tl_engine_config_init(&c, R, W, 1);
        c.dtype = TL_DTYPE_F32;
        c.already_linear = true;
        c.filter = (tl_filter)fi;
        tl_engine *e[2] = {tl_gt_cuda(&c, READOUT), tl_gt_cpu(&c, TL_PRECISION_F32)};
        tl_frame f = {.kind = TL_FRAME_PROJ, .dtype = TL_DTYPE_F32, .rows = R, .cols = W,
                      .data = img};
        submit_all(e, 2, &f);
        float got[2 * 300], ref[2 * 300];
        project_rows(e[0], R, W, got);
        project_rows(e[1], R, W, ref);
        char what[64];
        snprintf(what, sizeof what, "filter %s", tl_filter_name(c.filter));
        expect_close(what, got, ref, R * W, 1e-5, 1e-4);
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
    submit_all(e, 2, &f);
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(tl_engine_set_filter(e[k], TL_FILTER_HANN), TL_OK);
    f.index = 1;
    submit_all(e, 2, &f);
    float got[2 * 300], ref[2 * 300];
    project_rows(e[0], R, W, got);
    project_rows(e[1], R, W, ref);
    expect_close("filter change ram-lak -> hann", got, ref, R * W, 1e-5, 1e-4);
    tl_engine_destroy(e[0]);
    tl_engine_destroy(e[1]);
    free(img);
}
END_TEST

/* ---- kernels against the float64 reference ----------------------------------------------- */

START_TEST(kernels_phantom_256)
{
    scan s = {.rows = 3, .cols = 256, .nproj = 180};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 1, 256, 256);
    kernels_vs_reference("256^2 x 180 ram-lak", &s, &sp, false);
}
END_TEST

/* A window longer than tex-std's __constant__ table (2048): several accumulating launches;
 * also more than one ALU caching round per tile. */
START_TEST(kernels_long_window)
{
    scan s = {.rows = 1, .cols = 256, .nproj = 2500};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 0, 256, 256);
    kernels_vs_reference("256^2 x 2500 (window > 2048)", &s, &sp, false);
}
END_TEST

/* A width that is not a multiple of 32, a prime projection count, non-uniform angles with
 * angular weights, per-projection centres. */
START_TEST(kernels_odd_250_181)
{
    scan s = {.rows = 3, .cols = 250, .nproj = 181, .nonuniform = true, .offsets = true,
              .weights = TL_WEIGHTS_ANGLES, .filter = TL_FILTER_SHEPP_LOGAN};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 1, 250, 250);
    kernels_vs_reference("250^2 x 181 non-uniform, offsets", &s, &sp, false);
}
END_TEST

/* Width 1000 and 1021 projections (more than one ALU round, a prime count), an axis off
 * the middle, a 128 x 250 slice at scale 4 (covers the detector, differs from its width). */
START_TEST(kernels_odd_1000_1021)
{
    scan s = {.rows = 2, .cols = 1000, .nproj = 1021, .center_shift = 3.3};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 1, 128, 250);
    sp.scale = 4.0;
    kernels_vs_reference("1000 wide x 1021, 128 x 250 slice, scale 4", &s, &sp, false);
}
END_TEST

/* A zoomed-in slice (scale 0.5), not square, smaller than the detector. */
START_TEST(kernels_zoom)
{
    scan s = {.rows = 3, .cols = 200, .nproj = 240, .filter = TL_FILTER_HAMMING};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 2, 150, 210);
    sp.scale = 0.5;
    kernels_vs_reference("200 wide x 240, 150 x 210 slice, scale 0.5", &s, &sp, false);
}
END_TEST

/* Exactly one projection. tex-std is left out: with a single projection nothing averages
 * its 8-bit interpolation weights, and AC-3's thresholds are for full scans. */
START_TEST(kernels_single_projection)
{
    scan s = {.rows = 2, .cols = 250, .nproj = 1, .offsets = true, .angle0 = 0.3};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 0, 200, 230);
    kernels_vs_reference("250 wide x 1 projection", &s, &sp, true);
}
END_TEST

/* ---- planes -------------------------------------------------------------------------------- */

START_TEST(planes_match_cpu)
{
    scan s = {.rows = 24, .cols = 48, .nproj = 90};
    tl_engine_config c = scan_config(&s);
    tl_phantom ph;
    shepp(&ph, &s, 14);
    /* 0 cpu-f32, 1 cuda auto, 2.. cuda forced */
    tl_engine *e[2 + NKERNELS];
    e[0] = tl_gt_cpu(&c, TL_PRECISION_F32);
    e[1] = tl_gt_cuda(&c, NULL);
    for (int k = 0; k < NKERNELS; k++)
        e[2 + k] = tl_gt_cuda(&c, all_kernels[k]);
    feed(e, 2 + NKERNELS, &s, &ph, 0, s.nproj);
    const uint32_t S = 48, H = s.rows;

    /* plane == row, kernel by kernel (bit-identical: the same job) */
    tl_slice_spec row, pl;
    tl_slice_spec_row(&row, 11, S, S);
    float o[9];
    tl_slice_plane(&row, H, o);
    tl_slice_spec_plane(&pl, o, S, S);
    float *rows_k[NKERNELS];
    for (int k = 0; k < NKERNELS; k++) {
        rows_k[k] = recon(e[2 + k], &row, NULL);
        float *p = recon(e[2 + k], &pl, NULL);
        char what[64];
        snprintf(what, sizeof what, "plane == row, %s", all_kernels[k]);
        expect_close(what, p, rows_k[k], S * S, 1e-6, 1e-6);
        free(p);
    }
    /* plane-exact and alu-exact put every pixel at the same u: equal on rows */
    expect_close("plane-exact == alu-exact on a row", rows_k[1], rows_k[0], S * S, 1e-6, 1e-6);
    for (int k = 0; k < NKERNELS; k++)
        free(rows_k[k]);

    /* ortho-slices, a non-integer row, an oblique plane with columns along z, and a tilted
     * plane reaching above and below the detector: plane-exact against the CPU */
    tl_slice_spec sp[5];
    tl_slice_spec_ortho(&sp[0], TL_AXIS_X, 30 + 0.5 - S / 2.0, H, S);
    tl_slice_spec_ortho(&sp[1], TL_AXIS_Y, S / 2.0 - 17 - 0.5, H, S);
    tl_slice_spec_row(&sp[2], 11.3, S, S);
    const float ob[9] = {0, 0, (float)H, 0, (float)S, 0, 4.5f - S / 2.0f, -(float)S / 2, -0.5f};
    tl_slice_spec_plane(&sp[3], ob, S, H);
    const float tilt[9] = {40, 6, 13, -5, 38, 21, -20, -22, -3.7f};
    tl_slice_spec_plane(&sp[4], tilt, 37, 45);
    const char *names[5] = {"ortho x", "ortho y", "row z = 11.3", "oblique along z", "tilted"};
    for (int i = 0; i < 5; i++) {
        const char *used = NULL;
        float *ref = recon(e[0], &sp[i], NULL), *got = recon(e[1], &sp[i], &used);
        ck_assert_str_eq(used, "plane-exact");
        char what[64];
        snprintf(what, sizeof what, "%s vs cpu", names[i]);
        expect_close(what, got, ref, (size_t)sp[i].height * sp[i].width, EXACT_REL, EXACT_MOR);
        free(ref);
        free(got);
    }

    /* a forced row kernel cannot serve a plane */
    int id;
    ck_assert_int_eq(tl_engine_add_slice(e[2], &sp[0], &id), TL_OK);
    float *tmp = malloc(H * S * sizeof *tmp);
    ck_assert_int_eq(tl_engine_reconstruct(e[2], &id, 1, &tmp, NULL), TL_EINVAL);
    ck_assert_ptr_nonnull(strstr(tl_engine_last_error(e[2]), "horizontal"));
    free(tmp);

    /* one job, two kernels: a row (a row kernel) and an ortho slice (plane-exact) */
    int ids[2];
    ck_assert_int_eq(tl_engine_add_slice(e[1], &row, &ids[0]), TL_OK);
    ck_assert_int_eq(tl_engine_add_slice(e[1], &sp[0], &ids[1]), TL_OK);
    float *out[2] = {malloc(S * S * sizeof(float)), malloc(H * S * sizeof(float))};
    tl_slice_info info[2];
    ck_assert_int_eq(tl_engine_reconstruct(e[1], ids, 2, out, info), TL_OK);
    /* each slice names its own kernel: the row an exact row kernel, the ortho plane-exact */
    ck_assert_str_ne(info[0].kernel, "plane-exact");
    ck_assert_str_ne(info[0].kernel, "mixed");
    ck_assert_str_eq(info[1].kernel, "plane-exact");
    float *r0 = recon(e[0], &row, NULL), *r1 = recon(e[0], &sp[0], NULL);
    expect_close("two-slice job: row", out[0], r0, S * S, EXACT_REL, EXACT_MOR);
    expect_close("two-slice job: ortho x", out[1], r1, H * S, EXACT_REL, EXACT_MOR);
    free(out[0]);
    free(out[1]);
    free(r0);
    free(r1);
    for (int k = 0; k < 2 + NKERNELS; k++)
        tl_engine_destroy(e[k]);
    tl_phantom_free(&ph);
}
END_TEST

/* Quality FAST lets horizontal rows use a row kernel of mode fast or better; planes still
 * go to plane-exact. */
START_TEST(quality_selects_kernels)
{
    scan s = {.rows = 4, .cols = 64, .nproj = 60};
    tl_engine_config c = scan_config(&s);
    c.quality = TL_QUALITY_FAST;
    tl_phantom ph;
    shepp(&ph, &s, 20);
    tl_engine *e = tl_gt_cuda(&c, NULL);
    feed(&e, 1, &s, &ph, 0, s.nproj);
    tl_slice_spec row, ortho;
    tl_slice_spec_row(&row, 2, 64, 64);
    tl_slice_spec_ortho(&ortho, TL_AXIS_Y, 0.5, 4, 64);
    const char *used = NULL;
    free(recon(e, &row, &used));
    tl_kernel_info k[128];
    size_t nk = tl_engine_kernels(e, k, 128), i = 0;
    while (i < nk && strcmp(k[i].name, used) != 0)
        i++;
    ck_assert_msg(i < nk && !k[i].planes && k[i].quality <= TL_QUALITY_FAST, "row kernel %s",
                  used);
    free(recon(e, &ortho, &used));
    ck_assert_str_eq(used, "plane-exact");
    tl_engine_destroy(e);
    tl_phantom_free(&ph);
}
END_TEST

/* ---- device-resident input ------------------------------------------------------------------ */

START_TEST(device_frames_equal_host_frames)
{
    const uint32_t R = 5, W = 70, N = 6;
    tl_engine_config c;
    tl_engine_config_init(&c, R, W, N);
    c.dtype = TL_DTYPE_U16;
    tl_engine *host = tl_gt_cuda(&c, NULL), *dev = tl_gt_cuda(&c, NULL);
    size_t row = W * sizeof(uint16_t), dpitch = 0;
    void *d = NULL;
    ck_assert_int_eq(cudaMallocPitch(&d, &dpitch, row, R), cudaSuccess);
    ck_assert_uint_ge(dpitch, row);
    uint16_t buf[5 * 70];
    for (int kind = 0; kind < 3; kind++)
        for (uint32_t k = 0; k < (kind == 2 ? N : 2); k++) {
            fill_frame(buf, TL_DTYPE_U16, R, W, row, kind, (int)k);
            tl_frame f = {.kind = (tl_frame_kind)kind, .index = k, .angle = k * M_PI / N,
                          .dtype = TL_DTYPE_U16, .rows = R, .cols = W, .data = buf};
            ck_assert_int_eq(tl_engine_submit(host, &f), TL_OK);
            ck_assert_int_eq(cudaMemcpy2D(d, dpitch, buf, row, row, R, cudaMemcpyHostToDevice),
                             cudaSuccess);
            f.data = d;
            f.pitch = dpitch;
            f.memory = TL_MEMORY_DEVICE;
            tl_status st = tl_engine_submit(dev, &f);
            ck_assert_msg(st == TL_OK, "%s", tl_engine_last_error(dev));
        }
    ck_assert_int_eq(cudaFree(d), cudaSuccess);
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 3, 64, 64);
    float *a = recon(host, &sp, NULL), *b = recon(dev, &sp, NULL);
    expect_close("device frames vs host frames", b, a, 64 * 64, 1e-6, 1e-6);
    free(a);
    free(b);
    /* a host pointer that claims to be device memory is refused (last: the window has
     * already moved on for it when the backend refuses) */
    tl_frame bad = {.kind = TL_FRAME_PROJ, .index = N, .dtype = TL_DTYPE_U16, .rows = R,
                    .cols = W, .data = buf, .memory = TL_MEMORY_DEVICE};
    ck_assert_int_eq(tl_engine_submit(dev, &bad), TL_EINVAL);
    ck_assert_ptr_nonnull(strstr(tl_engine_last_error(dev), "device memory"));
    tl_engine_destroy(host);
    tl_engine_destroy(dev);
}
END_TEST

/* Two darks, two flats and n projections of R x W uint16 (fill_frame), each submitted to
 * `plain` from a host buffer and to `pinned` from one page-locked buffer, which is
 * overwritten at once after each submit (it is read when submit returns). */
static void feed_pinned(tl_engine *plain, tl_engine *pinned, uint32_t R, uint32_t W, uint32_t n)
{
    size_t row = W * sizeof(uint16_t);
    void *p = NULL;
    char why[256];
    ck_assert_int_eq(tl_host_alloc(TL_BACKEND_CUDA, R * row, &p, why, sizeof why), TL_OK);
    uint16_t *buf = malloc(R * row);
    for (int kind = 0; kind < 3; kind++)
        for (uint32_t k = 0; k < (kind == 2 ? n : 2); k++) {
            fill_frame(buf, TL_DTYPE_U16, R, W, row, kind, (int)k);
            tl_frame f = {.kind = (tl_frame_kind)kind, .index = k, .angle = k * M_PI / n,
                          .dtype = TL_DTYPE_U16, .rows = R, .cols = W, .data = buf};
            ck_assert_int_eq(tl_engine_submit(plain, &f), TL_OK);
            memcpy(p, buf, R * row);
            f.data = p;
            f.pinned = true;
            tl_status st = tl_engine_submit(pinned, &f);
            ck_assert_msg(st == TL_OK, "%s", tl_engine_last_error(pinned));
            memset(p, 0xff, R * row); /* the caller's to reuse now */
        }
    free(buf);
    tl_host_free(TL_BACKEND_CUDA, p);
}

/* Host frames in page-locked memory (tl_frame.pinned, as the daemon assembles frames sent
 * in row bands) are uploaded from where they are, and read before submit returns: they
 * give what plain host frames give. */
START_TEST(pinned_host_frames)
{
    const uint32_t R = 5, W = 70, N = 6;
    tl_engine_config c;
    tl_engine_config_init(&c, R, W, N);
    c.dtype = TL_DTYPE_U16;
    tl_engine *host = tl_gt_cuda(&c, NULL), *pin = tl_gt_cuda(&c, NULL);
    feed_pinned(host, pin, R, W, N);
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 3, 64, 64);
    float *a = recon(host, &sp, NULL), *b = recon(pin, &sp, NULL);
    ck_assert(memcmp(a, b, 64 * 64 * sizeof(float)) == 0);
    free(a);
    free(b);
    tl_engine_destroy(host);
    tl_engine_destroy(pin);
}
END_TEST

/* ---- rolling window ----------------------------------------------------------------------- */

/* After N + k projections the window holds the last N: equal to a fresh engine fed with
 * just those, kernel by kernel (same slots, same order: bit-identical in practice). */
START_TEST(rolling_window_equals_fresh)
{
    scan s = {.rows = 2, .cols = 128, .nproj = 400, .window = 150};
    tl_engine_config c = scan_config(&s);
    tl_phantom ph;
    shepp(&ph, &s, 0.45 * s.cols);
    tl_engine *roll[NKERNELS], *fresh[NKERNELS];
    for (int k = 0; k < NKERNELS; k++) {
        roll[k] = tl_gt_cuda(&c, all_kernels[k]);
        fresh[k] = tl_gt_cuda(&c, all_kernels[k]);
    }
    tl_engine *cpu = tl_gt_cpu(&c, TL_PRECISION_F32);
    feed(roll, NKERNELS, &s, &ph, 0, 137);
    tl_engine *both[2 * NKERNELS + 1];
    for (int k = 0; k < NKERNELS; k++) {
        both[k] = roll[k];
        both[NKERNELS + k] = fresh[k];
    }
    both[2 * NKERNELS] = cpu;
    feed(both, 2 * NKERNELS + 1, &s, &ph, 137, 150);
    tl_slice_spec sp, half;
    tl_slice_spec_row(&sp, 1, 128, 128);
    tl_slice_spec_row(&half, 0.5, 128, 128);
    float *ref = recon(cpu, &sp, NULL);
    for (int k = 0; k < NKERNELS; k++) {
        float *a = recon(roll[k], &sp, NULL), *b = recon(fresh[k], &sp, NULL);
        char what[64];
        snprintf(what, sizeof what, "rolling == fresh, %s", all_kernels[k]);
        expect_close(what, a, b, 128 * 128, 1e-6, 1e-6);
        if (!is_fast(all_kernels[k])) {
            snprintf(what, sizeof what, "rolling %s vs cpu", all_kernels[k]);
            expect_close(what, a, ref, 128 * 128, EXACT_REL, EXACT_MOR);
        }
        free(a);
        free(b);
        tl_engine_state st;
        tl_engine_get_state(roll[k], &st);
        ck_assert_uint_eq(st.window_first, 137);
        ck_assert_uint_eq(st.held, 150);
    }
    /* z = 0.5: interpolated between detector rows */
    float *a = recon(roll[1], &half, NULL), *b = recon(fresh[1], &half, NULL);
    expect_close("rolling == fresh, plane-exact at z = 0.5", a, b, 128 * 128, 1e-6, 1e-6);
    free(a);
    free(b);
    free(ref);
    for (int k = 0; k < NKERNELS; k++) {
        tl_engine_destroy(roll[k]);
        tl_engine_destroy(fresh[k]);
    }
    tl_engine_destroy(cpu);
    tl_phantom_free(&ph);
}
END_TEST

/* ---- memory, benchmarks, empty windows ---------------------------------------------------- */

START_TEST(memory_refusal)
{
    tl_engine_config c;
    tl_engine_config_init(&c, 8192, 8192, 1u << 20);
    c.backend = TL_BACKEND_CUDA;
    tl_memory_estimate m;
    ck_assert_int_eq(tl_engine_estimate(&c, &m), TL_OK);
    ck_assert(m.window_bytes >= (size_t)8192 * 8192 * (1u << 20) * sizeof(float));
    ck_assert_uint_gt(m.available_bytes, 0);
    ck_assert_uint_gt(m.total_bytes, m.available_bytes);
    tl_engine *e = NULL;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_ENOMEM);
    ck_assert_ptr_null(e);
    const char *msg = tl_engine_last_error(NULL);
    printf("  refusal: %s\n", msg);
    ck_assert_msg(strstr(msg, "GiB") && strstr(msg, "free") && strstr(msg, "fewer rows") &&
                      strstr(msg, "cuda"), "%s", msg);
}
END_TEST

START_TEST(bench_and_bench_store)
{
    scan s = {.rows = 3, .cols = 96, .nproj = 64};
    tl_engine_config c = scan_config(&s);
    tl_phantom ph;
    shepp(&ph, &s, 0.45 * s.cols);
    tl_engine *e = tl_gt_cuda(&c, NULL);
    feed(&e, 1, &s, &ph, 0, s.nproj);
    tl_slice_spec row, ortho;
    tl_slice_spec_row(&row, 1, 96, 96);
    tl_slice_spec_ortho(&ortho, TL_AXIS_X, 3.5, 3, 96);
    float *before = recon(e, &row, NULL);
    int id[2];
    ck_assert_int_eq(tl_engine_add_slice(e, &row, &id[0]), TL_OK);
    ck_assert_int_eq(tl_engine_add_slice(e, &ortho, &id[1]), TL_OK);
    tl_bench_row r[128];
    size_t n = 0;
    ck_assert_int_eq(tl_engine_bench(e, &id[0], 1, 3, r, 128, &n), TL_OK);
    tl_kernel_info k[128];
    ck_assert_uint_eq(n, tl_engine_kernels(e, k, 128)); /* every kernel serves a row */
    for (size_t i = 0; i < n; i++) {
        printf("  bench %-16s %.4f ms %.3g updates/s\n", r[i].kernel, r[i].ms, r[i].updates_per_s);
        ck_assert(r[i].ms > 0 && r[i].updates_per_s > 0);
    }
    ck_assert_int_eq(tl_engine_bench(e, id, 2, 2, r, 128, &n), TL_OK);
    ck_assert_uint_eq(n, 1); /* only plane-exact serves the ortho slice */
    ck_assert_str_eq(r[0].kernel, "plane-exact");

    float *img = malloc(s.rows * s.cols * sizeof *img);
    tl_phantom_project(&ph, 0.1, (s.cols - 1) / 2.0, s.rows, s.cols, img);
    tl_frame f = {.kind = TL_FRAME_PROJ, .index = 1000, .angle = 0.1, .dtype = TL_DTYPE_F32,
                  .rows = s.rows, .cols = s.cols, .data = img};
    double ms = 0;
    ck_assert_int_eq(tl_engine_bench_store(e, &f, 3, &ms), TL_OK);
    printf("  bench_store %.4f ms\n", ms);
    ck_assert(ms > 0);
    float *after = recon(e, &row, NULL);
    ck_assert_msg(memcmp(before, after, 96 * 96 * sizeof(float)) == 0,
                  "bench_store changed the window");
    free(img);
    free(before);
    free(after);
    tl_engine_destroy(e);
    tl_phantom_free(&ph);
}
END_TEST

/* An empty window reconstructs as zeros with every kernel, before any frame and after a
 * reset. */
START_TEST(empty_window_is_zero)
{
    scan s = {.rows = 2, .cols = 40, .nproj = 10};
    tl_engine_config c = scan_config(&s);
    tl_phantom ph;
    shepp(&ph, &s, 10);
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 1, 33, 35);
    for (int k = 0; k < NKERNELS; k++) {
        tl_engine *e = tl_gt_cuda(&c, all_kernels[k]);
        for (int pass = 0; pass < 2; pass++) {
            float *o = recon(e, &sp, NULL);
            for (size_t i = 0; i < 33 * 35; i++)
                ck_assert_msg(o[i] == 0.f, "%s pass %d pixel %zu: %g", all_kernels[k], pass, i, o[i]);
            free(o);
            feed(&e, 1, &s, &ph, 0, s.nproj);
            ck_assert_int_eq(tl_engine_reset(e), TL_OK);
        }
        tl_engine_destroy(e);
    }
    tl_phantom_free(&ph);
}
END_TEST

/* Tracked slices (tl_engine_track) on the GPU: 20000 frames sliding through a window of
 * 360, with frames out of order and missing; every 239 frames each tracked slice (a row,
 * built by alu-exact at the first read-out, and an oblique plane) equals its from-scratch
 * twin within the exact mode. With the default refresh (0: never) the float64 accumulators
 * are never rebuilt, so every read-out after the first is incremental state (delta-exact). */
START_TEST(incremental_matches_scratch)
{
    const uint32_t R = 4, W = 256, N = 360, S = 256;
    scan sc = {.rows = R, .cols = W, .nproj = 2 * N, .window = N};
    tl_engine_config c = scan_config(&sc);
    tl_engine *e = tl_gt_cuda(&c, NULL);
    tl_phantom ph;
    shepp(&ph, &sc, 0.45 * W);
    float *proj = malloc((size_t)2 * N * R * W * sizeof *proj);
    for (uint32_t k = 0; k < 2 * N; k++)
        tl_phantom_project(&ph, M_PI * k / N, (W - 1) / 2.0, R, W, proj + (size_t)k * R * W);
    tl_slice_spec row, plane;
    tl_slice_spec_row(&row, 2, S, S);
    const float o[9] = {(float)S, 0, 2.5f, 0, (float)S, 0, -S / 2.0f, -S / 2.0f, 0.3f};
    tl_slice_spec_plane(&plane, o, S, S);
    int tracked[2], scratch[2];
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(tl_engine_add_slice(e, k ? &plane : &row, &tracked[k]), TL_OK);
        ck_assert_int_eq(tl_engine_add_slice(e, k ? &plane : &row, &scratch[k]), TL_OK);
        ck_assert_int_eq(tl_engine_track(e, tracked[k], true), TL_OK);
    }
    float *a = malloc((size_t)S * S * sizeof *a), *b = malloc((size_t)S * S * sizeof *b);
    double worst = 0;
    int incremental = 0, reads = 0;
    srand(11);
    for (uint64_t i = 0; i < 20000; i++) {
        int r = rand() % 100;
        uint64_t idx = r < 3 ? i + 2 : r < 4 ? (i > 30 ? i - 30 : 0) : i;
        if (r == 99)
            continue; /* lost */
        uint32_t k = (uint32_t)(idx % (2 * N));
        tl_frame f = {.kind = TL_FRAME_PROJ, .index = idx, .angle = M_PI * k / N,
                      .dtype = TL_DTYPE_F32, .rows = R, .cols = W, .data = proj + (size_t)k * R * W};
        tl_status st = tl_engine_submit(e, &f);
        ck_assert_msg(st == TL_OK || st == TL_ESTALE || st == TL_EDUPLICATE, "%s",
                      tl_engine_last_error(e));
        if (i % 239 != 238)
            continue;
        for (int s2 = 0; s2 < 2; s2++) {
            tl_slice_info ia;
            ck_assert_int_eq(tl_engine_reconstruct(e, &tracked[s2], 1, &a, &ia), TL_OK);
            ck_assert_int_eq(tl_engine_reconstruct(e, &scratch[s2], 1, &b, NULL), TL_OK);
            double rel = tl_rel_l2(a, b, (size_t)S * S);
            worst = rel > worst ? rel : worst;
            incremental += strcmp(ia.kernel, "delta-exact") == 0;
            reads++;
        }
    }
    printf("  incremental vs from scratch, 20000 frames, window %u, never rebuilt: worst rel L2 "
           "%.2e over %d read-outs, %d incremental\n", N, worst, reads, incremental);
    ck_assert_msg(worst <= 2e-5, "worst %g", worst);
    ck_assert_int_eq(incremental, reads - 2); /* the first read-out of each slice builds it */
    free(a);
    free(b);
    free(proj);
    tl_phantom_free(&ph);
    tl_engine_destroy(e);
}
END_TEST

/* ---- several GPUs (gpu/split.c) ------------------------------------------------------------ */

/* The device lists of the split tests: {0, 0} (two row partitions on one GPU, which any
 * machine with a GPU can run) and, where there are two GPUs, {0, 1}. Returns how many. */
static int split_lists(int lists[2][2])
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        n = 0;
    lists[0][0] = lists[0][1] = 0;
    lists[1][0] = 0;
    lists[1][1] = 1;
    return n >= 2 ? 2 : 1;
}

static tl_engine_config with_devices(const tl_engine_config *base, const int devs[2])
{
    tl_engine_config c = *base;
    c.ndevices = 2;
    c.devices[0] = devs[0];
    c.devices[1] = devs[1];
    return c;
}

/* uint16 camera frames of a phantom tall enough to reach every row: two darks, two flats,
 * then projections [first, first + count) over 180 degrees in nproj steps, host memory
 * with a pitch, each submitted to every engine. */
static void feed_camera(tl_engine **e, int ne, uint32_t rows, uint32_t cols, uint32_t nproj,
                        uint64_t first, uint64_t count, bool calibrate)
{
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 0.45 * cols, (rows - 1) / 2.0, 0.8 * rows), 0);
    tl_phantom_scale_density(&ph, 1.0 / cols);
    tl_camera cam;
    tl_camera_init(&cam);
    size_t pitch = (cols + 8) * sizeof(uint16_t);
    float *li = malloc((size_t)rows * cols * sizeof *li);
    uint16_t *img = malloc((size_t)rows * cols * sizeof *img);
    char *buf = malloc(rows * pitch);
    for (uint64_t k = calibrate ? 0 : 4; k < 4 + count; k++) {
        tl_sim_kind kind = k < 2 ? TL_SIM_DARK : k < 4 ? TL_SIM_FLAT : TL_SIM_PROJ;
        uint64_t index = k < 4 ? 0 : first + k - 4;
        double th = M_PI * (double)index / nproj;
        if (kind == TL_SIM_PROJ)
            tl_phantom_project(&ph, th, (cols - 1) / 2.0, rows, cols, li);
        tl_camera_frame_u16(&cam, kind, li, rows, cols, NULL, img);
        for (uint32_t r = 0; r < rows; r++)
            memcpy(buf + r * pitch, img + (size_t)r * cols, cols * sizeof *img);
        tl_frame f = {.kind = (tl_frame_kind)kind, .index = index, .angle = th,
                      .dtype = TL_DTYPE_U16, .rows = rows, .cols = cols, .pitch = pitch,
                      .data = buf};
        submit_all(e, ne, &f);
    }
    free(li);
    free(img);
    free(buf);
    tl_phantom_free(&ph);
}

/* Two partitions against one GPU, within the exact mode: rows at every integer z (both
 * sides of the boundary at 12) and at fractional z, ortho-slices, a tilted plane across the
 * boundary, and one job of rows from both parts (the batched kernels). */
START_TEST(split_matches_one_gpu)
{
    const uint32_t R = 24, W = 96, N = 90, S = 96;
    int lists[2][2], nl = split_lists(lists);
    for (int l = 0; l < nl; l++) {
        tl_engine_config c;
        tl_engine_config_init(&c, R, W, N);
        tl_engine_config cs = with_devices(&c, lists[l]);
        tl_engine *e[2] = {tl_gt_cuda(&c, NULL), tl_gt_cuda(&cs, NULL)};
        feed_camera(e, 2, R, W, N, 0, N + 30, true); /* the window slides by 30 */
        tl_engine_state st;
        tl_engine_get_state(e[1], &st);
        printf("  split engine on devices {%d, %d}: %s, %.1f MiB\n", lists[l][0], lists[l][1],
               st.device_name, st.memory_bytes / 1048576.0);
        char what[96];
        for (int k = 0; k < (int)R + 6; k++) {
            const double frac[6] = {-0.5, 11.5, 11.999, 12.25, 22.75, 23.5};
            double z = k < (int)R ? k : frac[k - R];
            tl_slice_spec sp;
            tl_slice_spec_row(&sp, z, S, S);
            const char *k0 = NULL, *k1 = NULL;
            float *ref = recon(e[0], &sp, &k0), *got = recon(e[1], &sp, &k1);
            snprintf(what, sizeof what, "{%d,%d} row z = %g (%s)", lists[l][0], lists[l][1], z, k1);
            ck_assert_str_eq(k0, k1);
            expect_close(what, got, ref, (size_t)S * S, EXACT_REL, EXACT_MOR);
            free(ref);
            free(got);
        }
        tl_slice_spec sp[3];
        tl_slice_spec_ortho(&sp[0], TL_AXIS_X, 10.5, R, S);
        tl_slice_spec_ortho(&sp[1], TL_AXIS_Y, -20.5, R, S);
        const float tilt[9] = {80, 6, 9.5f, -5, 70, 14, -40, -40, -1.2f};
        tl_slice_spec_plane(&sp[2], tilt, 61, 75);
        const char *names[3] = {"ortho x", "ortho y", "tilted"};
        for (int i = 0; i < 3; i++) {
            float *ref = recon(e[0], &sp[i], NULL), *got = recon(e[1], &sp[i], NULL);
            snprintf(what, sizeof what, "{%d,%d} %s", lists[l][0], lists[l][1], names[i]);
            expect_close(what, got, ref, (size_t)sp[i].height * sp[i].width, EXACT_REL,
                         EXACT_MOR);
            free(ref);
            free(got);
        }
        /* one job: rows of both parts, batched where a multi-slice kernel is chosen */
        const double zs[6] = {3, 15, 11, 12, 4, 16};
        float *out[2][6];
        for (int i = 0; i < 2; i++) {
            int ids[6];
            for (int k = 0; k < 6; k++) {
                tl_slice_spec row;
                tl_slice_spec_row(&row, zs[k], S, S);
                ck_assert_int_eq(tl_engine_add_slice(e[i], &row, &ids[k]), TL_OK);
                out[i][k] = malloc((size_t)S * S * sizeof(float));
            }
            ck_assert_msg(tl_engine_reconstruct(e[i], ids, 6, out[i], NULL) == TL_OK, "%s",
                          tl_engine_last_error(e[i]));
        }
        for (int k = 0; k < 6; k++) {
            snprintf(what, sizeof what, "{%d,%d} six-row job, z = %g", lists[l][0], lists[l][1],
                     zs[k]);
            expect_close(what, out[1][k], out[0][k], (size_t)S * S, EXACT_REL, EXACT_MOR);
            free(out[0][k]);
            free(out[1][k]);
        }
        tl_engine_destroy(e[0]);
        tl_engine_destroy(e[1]);
    }
}
END_TEST

/* Tracked slices (a row at the boundary, a row between parts, a tilted plane) as the window
 * slides, after set_center: equal to one GPU's. */
START_TEST(split_tracked_slices)
{
    const uint32_t R = 16, W = 128, N = 120, S = 128;
    int lists[2][2], nl = split_lists(lists);
    for (int l = 0; l < nl; l++) {
        tl_engine_config c;
        tl_engine_config_init(&c, R, W, N);
        tl_engine_config cs = with_devices(&c, lists[l]);
        tl_engine *e[2] = {tl_gt_cuda(&c, NULL), tl_gt_cuda(&cs, NULL)};
        tl_slice_spec sp[3];
        tl_slice_spec_row(&sp[0], 8, S, S);
        tl_slice_spec_row(&sp[1], 7.5, S, S);
        const float tilt[9] = {(float)S, 0, 6.5f, 0, (float)S, 5, -S / 2.0f, -S / 2.0f, 2.25f};
        tl_slice_spec_plane(&sp[2], tilt, S, S);
        int ids[2][3];
        float *out[2][3];
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 3; k++) {
                ck_assert_int_eq(tl_engine_add_slice(e[i], &sp[k], &ids[i][k]), TL_OK);
                ck_assert_int_eq(tl_engine_track(e[i], ids[i][k], true), TL_OK);
                out[i][k] = malloc((size_t)S * S * sizeof(float));
            }
        feed_camera(e, 2, R, W, N, 0, N, true);
        for (int round = 0; round < 3; round++) {
            if (round == 1)
                feed_camera(e, 2, R, W, N, N, 45, false);
            if (round == 2)
                for (int i = 0; i < 2; i++)
                    ck_assert_int_eq(tl_engine_set_center(e[i], (W - 1) / 2.0 - 0.6), TL_OK);
            tl_slice_info info[2][3];
            for (int i = 0; i < 2; i++)
                ck_assert_msg(tl_engine_reconstruct(e[i], ids[i], 3, out[i], info[i]) == TL_OK,
                              "%s", tl_engine_last_error(e[i]));
            for (int k = 0; k < 3; k++) {
                char what[96];
                snprintf(what, sizeof what, "{%d,%d} tracked %d, round %d (%s)", lists[l][0],
                         lists[l][1], k, round, info[1][k].kernel);
                expect_close(what, out[1][k], out[0][k], (size_t)S * S, EXACT_REL, EXACT_MOR);
                if (round == 1)
                    ck_assert_str_eq(info[1][k].kernel, "delta-exact");
            }
        }
        for (int i = 0; i < 2; i++) {
            for (int k = 0; k < 3; k++)
                free(out[i][k]);
            tl_engine_destroy(e[i]);
        }
    }
}
END_TEST

/* Frames in device memory: on device 0, submitted to split engines (on {0, 1} the second
 * part copies its rows from GPU 0), and, with two GPUs, a frame on device 1 submitted to an
 * engine on device 0; equal to host frames on one GPU. */
START_TEST(split_device_frames)
{
    const uint32_t R = 10, W = 70, N = 6, S = 64;
    int lists[2][2], nl = split_lists(lists);
    tl_engine_config c;
    tl_engine_config_init(&c, R, W, N);
    c.dtype = TL_DTYPE_U16;
    /* engines: 0 host frames on one GPU, then device frames on each list, then (two
     * GPUs) device frames from GPU 1 on one engine on GPU 0 */
    tl_engine *e[4];
    int ne = 0, src_dev[4];
    e[ne] = tl_gt_cuda(&c, NULL);
    src_dev[ne++] = -1;
    for (int l = 0; l < nl; l++) {
        tl_engine_config cs = with_devices(&c, lists[l]);
        e[ne] = tl_gt_cuda(&cs, NULL);
        src_dev[ne++] = 0;
    }
    if (nl == 2) {
        e[ne] = tl_gt_cuda(&c, NULL);
        src_dev[ne++] = 1;
    }
    size_t row = W * sizeof(uint16_t), dpitch[2] = {0, 0};
    void *d[2] = {NULL, NULL};
    for (int dev = 0; dev < nl; dev++) {
        ck_assert_int_eq(cudaSetDevice(dev), cudaSuccess);
        ck_assert_int_eq(cudaMallocPitch(&d[dev], &dpitch[dev], row, R), cudaSuccess);
    }
    uint16_t *buf = malloc(R * row);
    for (int kind = 0; kind < 3; kind++)
        for (uint32_t k = 0; k < (kind == 2 ? N + 2 : 2); k++) {
            fill_frame(buf, TL_DTYPE_U16, R, W, row, kind, (int)k);
            for (int dev = 0; dev < nl; dev++) {
                ck_assert_int_eq(cudaSetDevice(dev), cudaSuccess);
                ck_assert_int_eq(cudaMemcpy2D(d[dev], dpitch[dev], buf, row, row, R,
                                              cudaMemcpyHostToDevice), cudaSuccess);
            }
            for (int i = 0; i < ne; i++) {
                tl_frame f = {.kind = (tl_frame_kind)kind, .index = k, .angle = k * M_PI / N,
                              .dtype = TL_DTYPE_U16, .rows = R, .cols = W, .data = buf};
                if (src_dev[i] >= 0) {
                    f.data = d[src_dev[i]];
                    f.pitch = dpitch[src_dev[i]];
                    f.memory = TL_MEMORY_DEVICE;
                }
                tl_status st = tl_engine_submit(e[i], &f);
                ck_assert_msg(st == TL_OK, "engine %d: %s", i, tl_engine_last_error(e[i]));
            }
        }
    for (int dev = 0; dev < nl; dev++) {
        ck_assert_int_eq(cudaSetDevice(dev), cudaSuccess);
        ck_assert_int_eq(cudaFree(d[dev]), cudaSuccess);
    }
    free(buf);
    const double zs[4] = {4, 5, 4.5, 9.5};
    for (int k = 0; k < 4; k++) {
        tl_slice_spec sp;
        tl_slice_spec_row(&sp, zs[k], S, S);
        float *ref = recon(e[0], &sp, NULL);
        for (int i = 1; i < ne; i++) {
            float *got = recon(e[i], &sp, NULL);
            char what[96];
            snprintf(what, sizeof what, "device frames from GPU %d, engine %d, z = %g",
                     src_dev[i], i, zs[k]);
            expect_close(what, got, ref, (size_t)S * S, EXACT_REL, EXACT_MOR);
            free(got);
        }
        free(ref);
    }
    for (int i = 0; i < ne; i++)
        tl_engine_destroy(e[i]);
}
END_TEST

/* Pinned host frames (row-band assembly in the daemon) on a split engine: each part
 * uploads its rows from the caller's page-locked buffer, and the slices equal one GPU's. */
START_TEST(split_pinned_frames)
{
    const uint32_t R = 24, W = 96, N = 12, S = 96;
    int lists[2][2], nl = split_lists(lists);
    for (int l = 0; l < nl; l++) {
        tl_engine_config c;
        tl_engine_config_init(&c, R, W, N);
        c.dtype = TL_DTYPE_U16;
        tl_engine_config cs = with_devices(&c, lists[l]);
        tl_engine *one = tl_gt_cuda(&c, NULL), *split = tl_gt_cuda(&cs, NULL);
        feed_pinned(one, split, R, W, N);
        char what[96];
        tl_slice_spec sp[3];
        tl_slice_spec_row(&sp[0], 5, S, S);
        tl_slice_spec_row(&sp[1], 18, S, S);
        tl_slice_spec_ortho(&sp[2], TL_AXIS_X, 10.5, R, S);
        for (int i = 0; i < 3; i++) {
            float *ref = recon(one, &sp[i], NULL), *got = recon(split, &sp[i], NULL);
            snprintf(what, sizeof what, "{%d,%d} pinned frames, slice %d", lists[l][0],
                     lists[l][1], i);
            expect_close(what, got, ref, (size_t)sp[i].height * sp[i].width, EXACT_REL,
                         EXACT_MOR);
            free(ref);
            free(got);
        }
        tl_engine_destroy(one);
        tl_engine_destroy(split);
    }
}
END_TEST

/* e[0], e[1]: R x W uint16 engines with window N on one GPU; e[2] the same split across
 * two GPUs where there are two (else two partitions of GPU 0). */
static void two_and_split(uint32_t R, uint32_t W, uint32_t N, tl_engine *e[3])
{
    int lists[2][2], nl = split_lists(lists);
    tl_engine_config c;
    tl_engine_config_init(&c, R, W, N);
    c.dtype = TL_DTYPE_U16;
    tl_engine_config cs = with_devices(&c, lists[nl - 1]);
    e[0] = tl_gt_cuda(&c, NULL);
    e[1] = tl_gt_cuda(&c, NULL);
    e[2] = tl_gt_cuda(&cs, NULL);
}

/* Frames read later (tl_frame.read_later), as the daemon takes a CUDA IPC producer's: a
 * ring of three device buffers, each rewritten (on a stream that does not wait for the
 * engine's) only once the engine's fences say the frame in it was read; on one GPU and on a
 * split engine, whose every part must have read its rows. The slices equal those of host
 * frames, and the fence numbers follow the frames the backend took. */
START_TEST(device_frames_read_later)
{
    enum { RING = 3 };
    const uint32_t R = 48, W = 320, N = 6, S = 96, P = N + 9;
    tl_engine *e[3];
    two_and_split(R, W, N, e);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    cudaStream_t ws;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&ws, cudaStreamNonBlocking), cudaSuccess);
    size_t row = W * sizeof(uint16_t), dpitch = 0;
    char *ring = NULL;
    ck_assert_int_eq(cudaMallocPitch((void **)&ring, &dpitch, row, (size_t)R * RING), cudaSuccess);
    uint64_t fence[2][RING] = {{0}}; /* per read-later engine: the number of each slot's frame */
    uint16_t *buf = malloc(R * row);
    uint32_t n = 0;
    for (int kind = 0; kind < 3; kind++)
        for (uint32_t k = 0; k < (kind == 2 ? P : 2); k++, n++) {
            fill_frame(buf, TL_DTYPE_U16, R, W, row, kind, (int)k);
            tl_frame f = {.kind = (tl_frame_kind)kind, .index = k, .angle = k * M_PI / N,
                          .dtype = TL_DTYPE_U16, .rows = R, .cols = W, .data = buf};
            ck_assert_int_eq(tl_engine_submit(e[0], &f), TL_OK);
            uint32_t slot = n % RING;
            for (int i = 1; i < 3; i++) { /* the slot is free once its last frame was read */
                uint64_t done = 0;
                ck_assert_int_eq(tl_engine_frames_done(e[i], fence[i - 1][slot], &done), TL_OK);
                ck_assert_uint_ge(done, fence[i - 1][slot]);
                ck_assert_uint_le(done, tl_engine_frames_queued(e[i]));
            }
            char *d = ring + (size_t)slot * R * dpitch;
            ck_assert_int_eq(cudaMemcpy2DAsync(d, dpitch, buf, row, row, R,
                                               cudaMemcpyHostToDevice, ws), cudaSuccess);
            ck_assert_int_eq(cudaStreamSynchronize(ws), cudaSuccess);
            f.data = d;
            f.pitch = dpitch;
            f.memory = TL_MEMORY_DEVICE;
            f.read_later = true;
            for (int i = 1; i < 3; i++) {
                tl_status st = tl_engine_submit(e[i], &f);
                ck_assert_msg(st == TL_OK, "engine %d: %s", i, tl_engine_last_error(e[i]));
                fence[i - 1][slot] = tl_engine_frames_queued(e[i]);
                ck_assert_uint_eq(fence[i - 1][slot], n + 1); /* every frame got a number */
            }
        }
    for (int i = 1; i < 3; i++) {
        uint64_t done = 0;
        ck_assert_int_eq(tl_engine_frames_done(e[i], n, &done), TL_OK);
        ck_assert_uint_eq(done, n);
    }
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(cudaFree(ring), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(ws), cudaSuccess);
    free(buf);
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, R / 2 + 0.5, S, S);
    float *ref = recon(e[0], &sp, NULL);
    for (int i = 1; i < 3; i++) {
        float *got = recon(e[i], &sp, NULL);
        expect_close(i == 1 ? "frames read later, one GPU" : "frames read later, split", got,
                     ref, (size_t)S * S, EXACT_REL, EXACT_MOR);
        free(got);
    }
    free(ref);
    for (int i = 0; i < 3; i++)
        tl_engine_destroy(e[i]);
}
END_TEST

/* Frames of engine e[0] submitted one by one; those of e[1..ne) with `more` set (a backlog),
 * so that their filtering is held and run in batches (gpu/cuda/store.cu), except frame
 * `last`. Projections [first, last] of R x W uint16 (fill_frame). */
static void feed_backlog(tl_engine **e, int ne, uint32_t R, uint32_t W, uint32_t N,
                         uint32_t first, uint32_t last)
{
    size_t row = W * sizeof(uint16_t);
    uint16_t *buf = malloc(R * row);
    for (uint32_t k = first; k <= last; k++) {
        fill_frame(buf, TL_DTYPE_U16, R, W, row, 2, (int)k);
        tl_frame f = {.kind = TL_FRAME_PROJ, .index = k, .angle = k * M_PI / N,
                      .dtype = TL_DTYPE_U16, .rows = R, .cols = W, .data = buf};
        for (int i = 0; i < ne; i++) {
            f.more = i > 0 && k < last;
            tl_status st = tl_engine_submit(e[i], &f);
            ck_assert_msg(st == TL_OK, "engine %d, frame %u: %s", i, k, tl_engine_last_error(e[i]));
        }
    }
    free(buf);
}

/* The slices of e[1..3) against e[0]'s: a row between two rows and an ortho-slice. */
static void expect_same_slices(const char *when, tl_engine **e, uint32_t R, uint32_t W)
{
    tl_slice_spec sp[2];
    tl_slice_spec_row(&sp[0], R / 2 + 0.5, W, W);
    tl_slice_spec_ortho(&sp[1], TL_AXIS_X, 3.0, R, W);
    for (int k = 0; k < 2; k++) {
        size_t n = (size_t)sp[k].height * sp[k].width;
        float *ref = recon(e[0], &sp[k], NULL);
        for (int i = 1; i < 3; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s, %s, %s", when, k ? "ortho x" : "row",
                     i == 1 ? "batched" : "batched, split");
            float *got = recon(e[i], &sp[k], NULL);
            /* one GPU: the same kernels on the same numbers, only cuFFT's batch differs */
            expect_close(what, got, ref, n, i == 1 ? 1e-6 : EXACT_REL, i == 1 ? 1e-6 : EXACT_MOR);
            free(got);
        }
        free(ref);
    }
}

/* Projections submitted with `more` are filtered in batches: the slices are what frame by
 * frame filtering gives, also where the window is shorter than a batch (a slot comes round
 * again inside one), where a reconstruction or a calibration frame cuts a batch short, and
 * on a split engine. The fences of held frames are not reached until their pass runs:
 * tl_engine_flush, or waiting for them. */
START_TEST(batched_filter_passes)
{
    const uint32_t R = 40, W = 96, N = 5; /* 40 rows: 8 frames a pass (20-21 per part: 8) */
    tl_engine *e[3];
    two_and_split(R, W, N, e);
    size_t row = W * sizeof(uint16_t);
    uint16_t *buf = malloc(R * row);
    for (int kind = 0; kind < 2; kind++)
        for (int k = 0; k < 2; k++) {
            fill_frame(buf, TL_DTYPE_U16, R, W, row, kind, k);
            tl_frame f = {.kind = (tl_frame_kind)kind, .dtype = TL_DTYPE_U16, .rows = R,
                          .cols = W, .data = buf};
            submit_all(e, 3, &f);
        }
    /* four frames held: their fences are not reached until the pass runs */
    feed_backlog(e, 3, R, W, N, 0, 4);
    uint64_t done = 0;
    for (int i = 1; i < 3; i++) {
        fill_frame(buf, TL_DTYPE_U16, R, W, row, 2, 5);
        tl_frame f = {.kind = TL_FRAME_PROJ, .index = 5, .angle = 5 * M_PI / N,
                      .dtype = TL_DTYPE_U16, .rows = R, .cols = W, .data = buf, .more = true};
        ck_assert_int_eq(tl_engine_submit(e[i], &f), TL_OK);
        for (uint32_t k = 6; k < 9; k++) {
            fill_frame(buf, TL_DTYPE_U16, R, W, row, 2, (int)k);
            f.index = k;
            f.angle = k * M_PI / N;
            ck_assert_int_eq(tl_engine_submit(e[i], &f), TL_OK);
        }
        ck_assert_int_eq(tl_engine_frames_done(e[i], 0, &done), TL_OK);
        ck_assert_uint_le(done, tl_engine_frames_queued(e[i]) - 4);
        if (i == 1) /* flushing reaches them; so does waiting for them alone (i = 2) */
            ck_assert_int_eq(tl_engine_flush(e[i]), TL_OK);
        ck_assert_int_eq(tl_engine_frames_done(e[i], tl_engine_frames_queued(e[i]), &done), TL_OK);
        ck_assert_uint_eq(done, tl_engine_frames_queued(e[i]));
    }
    feed_backlog(e, 1, R, W, N, 5, 8); /* e[0] catches up, frame by frame */
    expect_same_slices("after a flush", e, R, W);
    /* frames held when a reconstruction comes: it runs them first */
    feed_backlog(e, 3, R, W, N, 9, 40);
    uint64_t queued = tl_engine_frames_queued(e[1]);
    fill_frame(buf, TL_DTYPE_U16, R, W, row, 2, 41);
    tl_frame f = {.kind = TL_FRAME_PROJ, .index = 41, .angle = 41 * M_PI / N,
                  .dtype = TL_DTYPE_U16, .rows = R, .cols = W, .data = buf};
    ck_assert_int_eq(tl_engine_submit(e[0], &f), TL_OK);
    f.more = true;
    ck_assert_int_eq(tl_engine_submit(e[1], &f), TL_OK);
    ck_assert_int_eq(tl_engine_submit(e[2], &f), TL_OK);
    ck_assert_uint_eq(tl_engine_frames_queued(e[1]), queued + 1);
    expect_same_slices("held frames at a reconstruction", e, R, W);
    /* and a dark frame in a backlog: the held frames keep the correction they came with */
    feed_backlog(e, 3, R, W, N, 42, 44);
    fill_frame(buf, TL_DTYPE_U16, R, W, row, 0, 7);
    tl_frame dark = {.kind = TL_FRAME_DARK, .dtype = TL_DTYPE_U16, .rows = R, .cols = W,
                     .data = buf};
    f.index = 45;
    f.angle = 45 * M_PI / N;
    fill_frame(buf, TL_DTYPE_U16, R, W, row, 2, 45);
    for (int i = 0; i < 3; i++) {
        f.more = i > 0;
        ck_assert_int_eq(tl_engine_submit(e[i], &f), TL_OK);
    }
    fill_frame(buf, TL_DTYPE_U16, R, W, row, 0, 7);
    submit_all(e, 3, &dark);
    feed_backlog(e, 3, R, W, N, 46, 52);
    expect_same_slices("a dark frame in a backlog", e, R, W);
    free(buf);
    for (int i = 0; i < 3; i++)
        tl_engine_destroy(e[i]);
}
END_TEST

/* Benchmarks on a split engine (every part at once), and a device list naming a GPU that
 * does not exist. */
START_TEST(split_bench_and_bad_devices)
{
    const uint32_t R = 8, W = 96, N = 64;
    tl_engine_config c;
    tl_engine_config_init(&c, R, W, N);
    const int zero[2] = {0, 0};
    tl_engine_config cs = with_devices(&c, zero);
    tl_engine *e = tl_gt_cuda(&cs, NULL);
    feed_camera(&e, 1, R, W, N, 0, N, true);
    int ids[2];
    tl_slice_spec row;
    tl_slice_spec_row(&row, 1, W, W);
    ck_assert_int_eq(tl_engine_add_slice(e, &row, &ids[0]), TL_OK);
    tl_slice_spec_row(&row, 6, W, W);
    ck_assert_int_eq(tl_engine_add_slice(e, &row, &ids[1]), TL_OK);
    tl_bench_row r[128];
    size_t n = 0;
    ck_assert_int_eq(tl_engine_bench(e, ids, 2, 3, r, 128, &n), TL_OK);
    ck_assert_uint_gt(n, 0);
    for (size_t i = 0; i < n; i++)
        ck_assert(r[i].ms > 0 && r[i].updates_per_s > 0);
    uint16_t *img = calloc((size_t)R * W, sizeof *img);
    for (size_t i = 0; i < (size_t)R * W; i++)
        img[i] = (uint16_t)(1000 + i % 700);
    tl_frame f = {.kind = TL_FRAME_PROJ, .index = 1000, .dtype = TL_DTYPE_U16, .rows = R,
                  .cols = W, .data = img};
    double ms = 0;
    ck_assert_int_eq(tl_engine_bench_store(e, &f, 3, &ms), TL_OK);
    printf("  split {0,0}: bench %s %.4f ms, bench_store %.4f ms\n", r[0].kernel, r[0].ms, ms);
    ck_assert(ms > 0);
    free(img);
    tl_engine_destroy(e);

    int count = 0;
    ck_assert_int_eq(cudaGetDeviceCount(&count), cudaSuccess);
    const int bad[2] = {0, count};
    cs = with_devices(&c, bad);
    cs.backend = TL_BACKEND_CUDA;
    e = NULL;
    ck_assert_int_eq(tl_engine_create(&cs, &e), TL_EDEVICE);
    ck_assert_ptr_null(e);
    printf("  refusal: %s\n", tl_engine_last_error(NULL));
    ck_assert_ptr_nonnull(strstr(tl_engine_last_error(NULL), "CUDA device"));
}
END_TEST

int main(void)
{
    /* cases, so compute-sanitizer can run them as parallel processes (CK_RUN_CASE) */
    const tl_gt_case cases[] = {
        {"pipeline", {available_and_auto, preprocess_all_dtypes, calibration_batches_match_cpu,
                      pitched_host_frames, filters_match_cpu, NULL}},
        {"kernels", {kernels_phantom_256, kernels_long_window, kernels_odd_250_181, kernels_zoom,
                     kernels_single_projection, NULL}},
        {"large", {kernels_odd_1000_1021, NULL}},
        {"engine", {planes_match_cpu, quality_selects_kernels, device_frames_equal_host_frames,
                    pinned_host_frames, rolling_window_equals_fresh, memory_refusal, bench_and_bench_store,
                    empty_window_is_zero, incremental_matches_scratch, NULL}},
        {"split", {split_matches_one_gpu, split_tracked_slices, split_device_frames,
                   split_pinned_frames, device_frames_read_later, split_bench_and_bad_devices,
                   batched_filter_passes, NULL}},
    };
    return tl_gt_main("cuda", cases, sizeof cases / sizeof *cases);
}

#endif /* HAVE_CUDA */
