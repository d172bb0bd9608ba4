/* check_cuda_kernels.c — check_cuda's cases "kernels" and "large": each kernel against the
 * float64 reference on analytic phantom data (exact kernels relative L2 <= 2e-5 and
 * max/range <= 1e-4, tex-std 1e-3 and 3e-3), over long windows, odd sizes, zoom and a
 * single projection.
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

/* Every kernel on slice sp against the float64 CPU reference (and, for scale, against the
 * float32 CPU backend). skip_fast leaves tex-std out. */
static void kernels_vs_reference(const char *name, const cc_scan *s, const tl_slice_spec *sp,
                                 bool skip_fast)
{
    tl_engine_config c = cc_scan_config(s);
    tl_phantom ph;
    cc_shepp(&ph, s, 0.45 * s->cols);
    tl_engine *e[2 + CC_NKERNELS];
    e[0] = tl_gt_cpu(&c, TL_PRECISION_F64);
    e[1] = tl_gt_cpu(&c, TL_PRECISION_F32);
    for (int k = 0; k < CC_NKERNELS; k++)
        e[2 + k] = tl_gt_cuda(&c, cc_all_kernels[k]);
    cc_feed(e, 2 + CC_NKERNELS, s, &ph, 0, s->nproj);
    size_t n = (size_t)sp->height * sp->width;
    float *ref = cc_recon(e[0], sp, NULL), *cpu = cc_recon(e[1], sp, NULL);
    char what[160];
    /* the CPU backend's own float32 error, for scale (asserted in check_accuracy) */
    printf("  %-58s rel L2 %.2e  max/range %.2e\n", name, tl_rel_l2(cpu, ref, n),
           tl_max_over_range(cpu, ref, n));
    for (int k = 0; k < CC_NKERNELS; k++) {
        if (skip_fast && cc_is_fast(cc_all_kernels[k]))
            continue;
        const char *used = NULL;
        float *img = cc_recon(e[2 + k], sp, &used);
        ck_assert_str_eq(used, cc_all_kernels[k]);
        snprintf(what, sizeof what, "%s: %s", name, cc_all_kernels[k]);
        if (cc_is_fast(cc_all_kernels[k]))
            cc_expect_close(what, img, ref, n, FAST_REL, FAST_MOR);
        else
            cc_expect_close(what, img, ref, n, EXACT_REL, EXACT_MOR);
        free(img);
    }
    free(ref);
    free(cpu);
    for (int k = 0; k < 2 + CC_NKERNELS; k++)
        tl_engine_destroy(e[k]);
    tl_phantom_free(&ph);
}

/* ---- kernels against the float64 reference ----------------------------------------------- */

START_TEST(kernels_phantom_256)
{
    cc_scan s = {.rows = 3, .cols = 256, .nproj = 180};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 1, 256, 256);
    kernels_vs_reference("256^2 x 180 ram-lak", &s, &sp, false);
}
END_TEST

/* A window longer than tex-std's __constant__ table (2048): several accumulating launches;
 * also more than one ALU caching round per tile. */
START_TEST(kernels_long_window)
{
    cc_scan s = {.rows = 1, .cols = 256, .nproj = 2500};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 0, 256, 256);
    kernels_vs_reference("256^2 x 2500 (window > 2048)", &s, &sp, false);
}
END_TEST

/* A width that is not a multiple of 32, a prime projection count, non-uniform angles with
 * angular weights, per-projection centres. */
START_TEST(kernels_odd_250_181)
{
    cc_scan s = {.rows = 3,
                 .cols = 250,
                 .nproj = 181,
                 .nonuniform = true,
                 .offsets = true,
                 .weights = TL_WEIGHTS_ANGLES,
                 .filter = TL_FILTER_SHEPP_LOGAN};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 1, 250, 250);
    kernels_vs_reference("250^2 x 181 non-uniform, offsets", &s, &sp, false);
}
END_TEST

/* Width 1000 and 1021 projections (more than one ALU round, a prime count), an axis off
 * the middle, a 128 x 250 slice at scale 4 (covers the detector, differs from its width). */
START_TEST(kernels_odd_1000_1021)
{
    cc_scan s = {.rows = 2, .cols = 1000, .nproj = 1021, .center_shift = 3.3};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 1, 128, 250);
    sp.scale = 4.0;
    kernels_vs_reference("1000 wide x 1021, 128 x 250 slice, scale 4", &s, &sp, false);
}
END_TEST

/* A zoomed-in slice (scale 0.5), not square, smaller than the detector. */
START_TEST(kernels_zoom)
{
    cc_scan s = {.rows = 3, .cols = 200, .nproj = 240, .filter = TL_FILTER_HAMMING};
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
    cc_scan s = {.rows = 2, .cols = 250, .nproj = 1, .offsets = true, .angle0 = 0.3};
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 0, 200, 230);
    kernels_vs_reference("250 wide x 1 projection", &s, &sp, true);
}
END_TEST

tl_gt_case cc_kernels_case(void)
{
    return (tl_gt_case){"kernels",
                        {kernels_phantom_256, kernels_long_window, kernels_odd_250_181,
                         kernels_zoom, kernels_single_projection, NULL}};
}

tl_gt_case cc_large_case(void)
{
    return (tl_gt_case){"large", {kernels_odd_1000_1021, NULL}};
}

#else
typedef int
    check_cuda_kernels_needs_cuda; /* ISO C wants a translation unit to declare something */
#endif /* HAVE_CUDA */
