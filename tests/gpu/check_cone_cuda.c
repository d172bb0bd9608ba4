/* check_cone_cuda.c — cone beam on the CUDA backend (issue #21), against the float64
 * references, through the public engine API:
 *   (a) the test scan of tests/cone_scan.h (odd 37 x 53 detector, principal point off
 *       centre in u and v, 72 views) into a 41 x 39 x 21 volume against gpu/fdk_ref.c,
 *       with every exact-mode cone-beam kernel the backend lists, each forced (exact:
 *       relative L2 <= 2e-5, max/range <= 1e-4; DESIGN.md §3);
 *   (m) every kernel the backend lists, each forced, on a detector of the size
 *       check_kernels checks parallel beam at (96 x 197, 181 views at non-uniform angles,
 *       angular weights) into 16 rows of 181 x 181 against the CPU backend's float64
 *       mode, held to the mode it declares (exact as above; fast: 1e-3, 3e-3; preview:
 *       5e-2);
 *   (b) a larger scan (96 x 128, 200 views) against the CPU backend's float64 mode, for
 *       a row, an ortho-slice and an oblique plane: exact mode again;
 *   (c) tracked slices (the incremental path, accumulate.cu) after the window rolled
 *       over the scan more than twice equal the same slices from scratch;
 *   (d) a short scan (Parker's weights in correct_kernel) against the CPU backend's
 *       float64 mode, exact;
 *   (e) a stack of 140 rows reconstructed at once (a sub-volume: column passes of 64, 64
 *       and 12 slices, tiles cut by the volume's edges), against the CPU backend's float64
 *       mode: the built-in choice is the column kernel, and every column kernel, forced,
 *       is exact;
 *   (f) out of core (issue #22): slabs of that volume from band engines (tl_engine_rows_read,
 *       tl_engine_config_band: only the detector rows a slab reads, the geometry re-based)
 *       equal the whole detector's engine, exact, with the built-in kernels (a stack of 40
 *       rows and single rows);
 *   (g) the z-mirror kernels (cone-colmir16, iFDK §4.2.2) on a scan whose source plane
 *       meets the detector in its middle row: 129 rows symmetric about it, at once,
 *       against the CPU backend's float64 mode, fast (1e-3, 3e-3), each forced and as the
 *       built-in choice; forced on rows without their mirrors, or on a scan whose
 *       principal row is off the middle, they refuse and say why;
 *   (h) a tracked stack of rows that differ only in height (one launch for all:
 *       acc_cone_stack_kernel, across a register tile, rising then falling) equals, bit for
 *       bit, the same rows tracked one by one (a tracked ortho-slice between each), after
 *       the window rolled, and the rows from scratch (exact): on the circle (the orbit's
 *       per-column arithmetic) and with the detector rolled (u moves with z: the general
 *       arithmetic).
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

#include "gpu/geometry/cone.h"
#include "tests/cone_scan.h"
#include "tests/gpu/gpu_test.h"
#include "tests/testutil.h"

#define EXACT_REL 2e-5
#define EXACT_MOR 1e-4
#define FAST_REL 1e-3
#define FAST_MOR 3e-3
#define PREVIEW_REL 5e-2

/* Whether got is within mode q of ref (printed either way). */
static bool within_mode(const char *what, tl_quality q, const float *got, const float *ref,
                        size_t n)
{
    double l2 = tl_rel_l2(got, ref, n), mor = tl_max_over_range(got, ref, n);
    double rel_max = q == TL_QUALITY_EXACT  ? EXACT_REL
                     : q == TL_QUALITY_FAST ? FAST_REL
                                            : PREVIEW_REL;
    double mor_max = q == TL_QUALITY_EXACT  ? EXACT_MOR
                     : q == TL_QUALITY_FAST ? FAST_MOR
                                            : INFINITY;
    bool ok = l2 <= rel_max && mor <= mor_max;
    printf("  %s (%s): rel L2 %.3g, max/range %.3g%s\n", what, tl_quality_name(q), l2, mor,
           ok ? "" : "  OUTSIDE ITS MODE");
    return ok;
}

static void expect_mode(const char *what, tl_quality q, const float *got, const float *ref,
                        size_t n)
{
    ck_assert_msg(within_mode(what, q, got, ref, n), "%s: outside its mode", what);
}

static void expect_exact(const char *what, const float *got, const float *ref, size_t n)
{
    expect_mode(what, TL_QUALITY_EXACT, got, ref, n);
}

START_TEST(volume_vs_reference)
{
    enum { NX = 41, NY = 39, NZ = 21 };
    tl_cone_scan s;
    ck_assert_int_eq(tl_cone_scan_make(&s, 37, 53, 72, 2.5, -1.5, false), 0);
    size_t nvox = (size_t)NX * NY * NZ;
    float *vol = malloc(nvox * sizeof *vol), *ref = malloc(nvox * sizeof *ref);
    double *ref_d = malloc(nvox * sizeof *ref_d);
    ck_assert(vol && ref && ref_d);
    tl_engine_config c = tl_cone_scan_config(&s, TL_BACKEND_CUDA);
    ck_assert_int_eq(tl_cone_scan_reference(&s, NX, NY, NZ, ref_d), TL_OK);
    for (size_t k = 0; k < nvox; k++)
        ref[k] = (float)ref_d[k];
    tl_engine *e = tl_gt_cuda(&c, NULL);
    tl_kernel_info kern[32];
    size_t nk = tl_engine_kernels(e, kern, 32);
    tl_engine_destroy(e);
    ck_assert_uint_ge(nk, 4); /* cone-exact, cone-tex and their z-batch twins */
    for (size_t k = 0; k < nk && k < 32; k++) {
        ck_assert_msg(strncmp(kern[k].name, "cone-", 5) == 0, "a cone engine lists %s",
                      kern[k].name);
        if (kern[k].quality != TL_QUALITY_EXACT)
            continue; /* (m) holds them to their modes, at a realistic sampling */
        snprintf(c.kernel, sizeof c.kernel, "%s", kern[k].name);
        ck_assert_int_eq(tl_cone_scan_engine(&s, &c, NX, NY, NZ, vol), TL_OK);
        char what[80];
        snprintf(what, sizeof what, "%s volume vs fdk reference", kern[k].name);
        expect_mode(what, kern[k].quality, vol, ref, nvox);
    }
    free(vol);
    free(ref);
    free(ref_d);
    tl_cone_scan_free(&s);
}
END_TEST

START_TEST(kernel_modes)
{
    enum { NX = 181, NY = 181, NZ = 16 };
    tl_cone_scan s;
    ck_assert_int_eq(tl_cone_scan_make(&s, 96, 197, 181, 3.5, -2.0, true), 0);
    size_t nvox = (size_t)NX * NY * NZ;
    float *vol = malloc(nvox * sizeof *vol), *ref = malloc(nvox * sizeof *ref);
    ck_assert(vol && ref);
    tl_engine_config c = tl_cone_scan_config(&s, TL_BACKEND_CPU);
    c.weights = TL_WEIGHTS_ANGLES;
    c.precision = TL_PRECISION_F64;
    c.threads = 0;
    ck_assert_int_eq(tl_cone_scan_engine(&s, &c, NX, NY, NZ, ref), TL_OK);
    c.backend = TL_BACKEND_CUDA;
    c.precision = TL_PRECISION_F32;
    c.quality = TL_QUALITY_FAST; /* the texture kernels' projection stack */
    tl_engine *e = tl_gt_cuda(&c, NULL);
    tl_kernel_info kern[32];
    size_t nk = tl_engine_kernels(e, kern, 32);
    tl_engine_destroy(e);
    int bad = 0; /* every kernel is measured before the verdict */
    for (size_t k = 0; k < nk && k < 32; k++) {
        if (strncmp(kern[k].name, "cone-colmir", 11) == 0)
            continue; /* this scan's principal row is off the middle: (g) holds them */
        snprintf(c.kernel, sizeof c.kernel, "%s", kern[k].name);
        ck_assert_int_eq(tl_cone_scan_engine(&s, &c, NX, NY, NZ, vol), TL_OK);
        char what[80];
        snprintf(what, sizeof what, "%s at 96 x 197, 181 views", kern[k].name);
        bad += !within_mode(what, kern[k].quality, vol, ref, nvox);
    }
    ck_assert_msg(bad == 0, "%d kernels outside their modes", bad);
    free(vol);
    free(ref);
    tl_cone_scan_free(&s);
}
END_TEST

START_TEST(planes_vs_cpu_f64)
{
    tl_cone_scan s;
    ck_assert_int_eq(tl_cone_scan_make(&s, 96, 128, 200, -4.0, 3.0, true), 0);
    tl_engine_config c = tl_cone_scan_config(&s, TL_BACKEND_CUDA);
    c.weights = TL_WEIGHTS_ANGLES;
    tl_engine *g = tl_gt_cuda(&c, NULL), *r = tl_gt_cpu(&c, TL_PRECISION_F64);
    ck_assert_int_eq(tl_cone_scan_submit(&s, g, 0, s.nv), TL_OK);
    ck_assert_int_eq(tl_cone_scan_submit(&s, r, 0, s.nv), TL_OK);
    tl_slice_spec spec[3];
    tl_slice_spec_row(&spec[0], 61.25, 120, 124);
    tl_slice_spec_ortho(&spec[1], TL_AXIS_Y, -7.5, 90, 128);
    const float plane[9] = {100, 30, 10, -20, 60, 70, -50, -30, 10};
    tl_slice_spec_plane(&spec[2], plane, 101, 97);
    const char *what[3] = {"cone row 61.25", "cone ortho y -7.5", "cone oblique plane"};
    for (int k = 0; k < 3; k++) {
        size_t n = (size_t)spec[k].height * spec[k].width;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        ck_assert(a && b);
        int ia, ib;
        tl_slice_info info;
        ck_assert_int_eq(tl_engine_add_slice(g, &spec[k], &ia), TL_OK);
        ck_assert_int_eq(tl_engine_add_slice(r, &spec[k], &ib), TL_OK);
        ck_assert_int_eq(tl_engine_reconstruct(g, &ia, 1, &a, &info), TL_OK);
        ck_assert_int_eq(tl_engine_reconstruct(r, &ib, 1, &b, NULL), TL_OK);
        /* the z-batch kernel serves the row, the general one the others */
        ck_assert_str_eq(info.kernel, k == 0 ? "cone-zb/8" : "cone-exact");
        expect_exact(what[k], a, b, n);
        free(a);
        free(b);
    }
    tl_engine_destroy(g);
    tl_engine_destroy(r);
    tl_cone_scan_free(&s);
}
END_TEST

START_TEST(incremental_equals_scratch)
{
    tl_cone_scan s;
    ck_assert_int_eq(tl_cone_scan_make(&s, 64, 80, 90, 1.0, -0.5, false), 0);
    tl_engine_config c = tl_cone_scan_config(&s, TL_BACKEND_CUDA);
    c.window = 45; /* half a turn: the window rolls */
    tl_engine *e = tl_gt_cuda(&c, NULL);
    tl_slice_spec spec[3];
    tl_slice_spec_row(&spec[0], 30.5, 70, 76);
    tl_slice_spec_ortho(&spec[1], TL_AXIS_X, 3.0, 60, 72);
    const float plane[9] = {60, 10, 0, 0, 30, 40, -30, -12, 8};
    tl_slice_spec_plane(&spec[2], plane, 55, 61);
    int tracked[3], fresh[3];
    float *a = malloc(76 * 70 * sizeof *a), *b = malloc(76 * 70 * sizeof *b);
    ck_assert(a && b);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(tl_engine_add_slice(e, &spec[k], &tracked[k]), TL_OK);
        ck_assert_int_eq(tl_engine_add_slice(e, &spec[k], &fresh[k]), TL_OK);
        ck_assert_int_eq(tl_engine_track(e, tracked[k], true), TL_OK);
    }
    ck_assert_int_eq(tl_cone_scan_submit(&s, e, 0, 10), TL_OK);
    for (int k = 0; k < 3; k++) /* built: from here on updated projection by projection */
        ck_assert_int_eq(tl_engine_reconstruct(e, &tracked[k], 1, &a, NULL), TL_OK);
    ck_assert_int_eq(tl_cone_scan_submit(&s, e, 10, 200), TL_OK);
    for (int k = 0; k < 3; k++) {
        tl_slice_info ia, ib;
        ck_assert_int_eq(tl_engine_reconstruct(e, &tracked[k], 1, &a, &ia), TL_OK);
        ck_assert_int_eq(tl_engine_reconstruct(e, &fresh[k], 1, &b, &ib), TL_OK);
        size_t n = (size_t)spec[k].height * spec[k].width;
        double l2 = tl_rel_l2(a, b, n);
        printf("  cone tracked slice %d (%s) vs scratch (%s): rel L2 %.3g\n", k, ia.kernel,
               ib.kernel, l2);
        ck_assert_str_eq(ia.kernel, "delta-cone-exact");
        /* exact mode: the scratch slice and the tracked slice's rebuild may come from
         * different exact kernels (a row: cone-zb/8, which divides once per column) */
        ck_assert_msg(l2 <= EXACT_REL, "slice %d: rel L2 %g", k, l2);
    }
    free(a);
    free(b);
    tl_engine_destroy(e);
    tl_cone_scan_free(&s);
}
END_TEST

START_TEST(short_scan_vs_cpu_f64)
{
    enum { NS = 150, NX = 181, NY = 181 };
    tl_cone_scan s;
    double angles[NS], start = -0.4, range = 4.0; /* 229 degrees; the fan is 11 */
    for (int i = 0; i < NS; i++)
        angles[i] = start + range * (i + 0.5) / NS;
    ck_assert_int_eq(tl_cone_scan_make_angles(&s, 96, 197, NS, -2.0, 1.0, angles), 0);
    tl_engine_config c = tl_cone_scan_config(&s, TL_BACKEND_CPU);
    c.cone.scan_start = start;
    c.cone.scan_range = range;
    c.precision = TL_PRECISION_F64;
    c.threads = 0;
    size_t n = (size_t)NX * NY * 4;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    ck_assert(a && b);
    ck_assert_int_eq(tl_cone_scan_engine(&s, &c, NX, NY, 4, b), TL_OK);
    c.backend = TL_BACKEND_CUDA;
    c.precision = TL_PRECISION_F32;
    ck_assert_int_eq(tl_cone_scan_engine(&s, &c, NX, NY, 4, a), TL_OK);
    expect_exact("short scan (Parker) vs cpu f64", a, b, n);
    free(a);
    free(b);
    tl_cone_scan_free(&s);
}
END_TEST

/* The NZ rows of an NX x NY volume of scan s, reconstructed by e in one call. */
static void stack_rows(const tl_cone_scan *s, tl_engine *e, int nx, int ny, int nz, float *vol,
                       tl_slice_info *info)
{
    int *ids = malloc((size_t)nz * sizeof *ids);
    float **out = malloc((size_t)nz * sizeof *out);
    ck_assert(ids && out);
    for (int k = 0; k < nz; k++) {
        tl_slice_spec spec;
        tl_cone_scan_slice(s, (uint32_t)nx, (uint32_t)ny, (uint32_t)nz, (uint32_t)k, &spec);
        ck_assert_int_eq(tl_engine_add_slice(e, &spec, &ids[k]), TL_OK);
        out[k] = vol + (size_t)k * nx * ny;
    }
    ck_assert_int_eq(tl_engine_reconstruct(e, ids, (size_t)nz, out, info), TL_OK);
    for (int k = 0; k < nz; k++)
        ck_assert_int_eq(tl_engine_remove_slice(e, ids[k]), TL_OK);
    free(ids);
    free(out);
}

/* The same rows by the CPU backend's float64 mode: the reference. */
static void reference_rows(const tl_cone_scan *s, const tl_engine_config *c, int nx, int ny,
                           int nz, float *vol)
{
    tl_engine *r = tl_gt_cpu(c, TL_PRECISION_F64);
    ck_assert_int_eq(tl_cone_scan_submit(s, r, 0, s->nv), TL_OK);
    stack_rows(s, r, nx, ny, nz, vol, NULL);
    tl_engine_destroy(r);
}

START_TEST(stack_vs_cpu_f64)
{
    enum { NX = 45, NY = 38, NZ = 140 }; /* tiles of 8 x 4 columns cut at both edges */
    tl_cone_scan s;
    ck_assert_int_eq(tl_cone_scan_make(&s, 96, 128, 120, 1.5, -2.5, true), 0);
    tl_engine_config c = tl_cone_scan_config(&s, TL_BACKEND_CUDA);
    size_t n = (size_t)NX * NY * NZ;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    tl_slice_info *info = malloc(NZ * sizeof *info);
    ck_assert(a && b && info);
    reference_rows(&s, &c, NX, NY, NZ, b);
    const char *kernels[] = {NULL,          "cone-col/32",   "cone-col/64",
                             "cone-col/32x4", "cone-col/64x4", "cone-colq/64x4"};
    for (size_t k = 0; k < sizeof kernels / sizeof *kernels; k++) {
        tl_engine *g = tl_gt_cuda(&c, kernels[k]);
        ck_assert_int_eq(tl_cone_scan_submit(&s, g, 0, s.nv), TL_OK);
        memset(a, 0xff, n * sizeof *a); /* NaN: a slice left unwritten fails */
        stack_rows(&s, g, NX, NY, NZ, a, info);
        tl_engine_destroy(g);
        if (!kernels[k]) /* the built-in choice for a stack of an exact engine: a column
                          * kernel, the quad stack's where the volume is dense */
            for (int z = 0; z < NZ; z++)
                ck_assert_msg(strcmp(info[z].kernel, "cone-col/64x4") == 0 ||
                                  strcmp(info[z].kernel, "cone-colq/64x4") == 0,
                              "slice %d: %s", z, info[z].kernel);
        char what[80];
        snprintf(what, sizeof what, "%s, 140 rows at once, vs cpu f64", info[0].kernel);
        expect_exact(what, a, b, n);
    }
    free(a);
    free(b);
    free(info);
    tl_cone_scan_free(&s);
}
END_TEST

/* Whether engine e, given rows [first, first + count) of an nx x ny x nz volume of scan s
 * in one call, fails saying `says`. */
static bool refuses(const tl_cone_scan *s, tl_engine *e, int nx, int ny, int nz, int first,
                    int count, const char *says)
{
    int ids[8];
    float *out[8];
    float *vol = malloc((size_t)count * nx * ny * sizeof *vol);
    ck_assert(vol && count <= 8);
    for (int k = 0; k < count; k++) {
        tl_slice_spec spec;
        tl_cone_scan_slice(s, (uint32_t)nx, (uint32_t)ny, (uint32_t)nz, (uint32_t)(first + k),
                           &spec);
        ck_assert_int_eq(tl_engine_add_slice(e, &spec, &ids[k]), TL_OK);
        out[k] = vol + (size_t)k * nx * ny;
    }
    const bool failed = tl_engine_reconstruct(e, ids, (size_t)count, out, NULL) != TL_OK;
    const char *why = failed ? tl_engine_last_error(e) : "";
    printf("  refused: %s\n", failed ? why : "(it served)");
    free(vol);
    return failed && strstr(why, says) != NULL;
}

START_TEST(mirror_vs_cpu_f64)
{
    enum { NX = 45, NY = 38, NZ = 129 }; /* odd: the middle row is its own mirror */
    tl_cone_scan s;
    ck_assert_int_eq(tl_cone_scan_make(&s, 96, 128, 120, 1.5, 0.0, true), 0);
    tl_engine_config c = tl_cone_scan_config(&s, TL_BACKEND_CUDA);
    size_t n = (size_t)NX * NY * NZ;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    tl_slice_info *info = malloc(NZ * sizeof *info);
    ck_assert(a && b && info);
    reference_rows(&s, &c, NX, NY, NZ, b);
    c.quality = TL_QUALITY_FAST; /* the mirror stack is a `fast` engine's */
    const char *kernels[] = {NULL, "cone-colmir16/64x4", "cone-colmir16/128x4"};
    for (size_t k = 0; k < sizeof kernels / sizeof *kernels; k++) {
        tl_engine *g = tl_gt_cuda(&c, kernels[k]);
        ck_assert_int_eq(tl_cone_scan_submit(&s, g, 0, s.nv), TL_OK);
        memset(a, 0xff, n * sizeof *a); /* NaN: a slice (or a mirror) left unwritten fails */
        stack_rows(&s, g, NX, NY, NZ, a, info);
        if (kernels[k]) /* rows whose mirrors are not in the call */
            ck_assert(refuses(&s, g, NX, NY, NZ, 100, 4, "mirror image"));
        tl_engine_destroy(g);
        for (int z = 0; z < NZ && !kernels[k]; z++) /* the built-in choice */
            ck_assert_msg(strncmp(info[z].kernel, "cone-colmir16/", 14) == 0, "slice %d: %s", z,
                          info[z].kernel);
        char what[80];
        snprintf(what, sizeof what, "%s, 129 rows at once, vs cpu f64", info[0].kernel);
        expect_mode(what, TL_QUALITY_FAST, a, b, n);
    }
    tl_cone_scan_free(&s);
    /* the principal row 2.5 rows off the middle: no mirror images on the detector */
    ck_assert_int_eq(tl_cone_scan_make(&s, 96, 128, 120, 1.5, -2.5, true), 0);
    c = tl_cone_scan_config(&s, TL_BACKEND_CUDA);
    c.quality = TL_QUALITY_FAST;
    tl_engine *g = tl_gt_cuda(&c, "cone-colmir16/64x4");
    ck_assert_int_eq(tl_cone_scan_submit(&s, g, 0, s.nv), TL_OK);
    ck_assert(refuses(&s, g, NX, NY, NZ, 62, 5, "middle row"));
    tl_engine_destroy(g);
    free(a);
    free(b);
    free(info);
    tl_cone_scan_free(&s);
}
END_TEST

START_TEST(bands_equal_whole)
{
    enum { N = 45, NZ = 64, SLAB = 40 };
    tl_cone_scan s;
    ck_assert_int_eq(tl_cone_scan_make(&s, 96, 128, 120, 1.5, -2.5, true), 0);
    tl_engine_config c = tl_cone_scan_config(&s, TL_BACKEND_CUDA);
    size_t n = (size_t)N * N * NZ;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    ck_assert(a && b);
    uint32_t band;
    ck_assert_int_eq(tl_cone_scan_bands(&s, &c, N, NZ, SLAB, a, b, &band), TL_OK);
    ck_assert_uint_lt(band, s.rows); /* bands, not the detector */
    char what[96];
    snprintf(what, sizeof what, "slabs of %d rows from bands of <= %u rows vs whole frames", SLAB,
             band);
    expect_exact(what, b, a, n);
    free(a);
    free(b);
    tl_cone_scan_free(&s);
}
END_TEST

/* The test scan's matrices for frame indices [0, n) (index i at the angle of view i mod
 * nv), the detector rolled by `roll` radians about its principal point: u then moves with
 * z, so an incremental update takes the general arithmetic (acc_cone_value) where the
 * circle's matrices take the orbit's (acc_orbit). */
static double (*rolled_matrices(const tl_cone_scan *s, uint32_t n, double roll))[12]
{
    double *angles = malloc(n * sizeof *angles);
    double(*P)[12] = malloc(n * sizeof *P);
    ck_assert(angles && P);
    for (uint32_t i = 0; i < n; i++)
        angles[i] = s->angles[i % s->nv];
    const tl_cone_circular g = {.sad = TL_CONE_SCAN_SAD,
                                .sdd = TL_CONE_SCAN_SDD,
                                .pitch_u = s->pitch,
                                .pitch_v = s->pitch,
                                .offset_u = s->center - 0.5 * (s->cols - 1.0),
                                .offset_v = s->offset_v,
                                .rows = s->rows,
                                .cols = s->cols,
                                .n = n,
                                .angles = angles};
    tl_errbuf eb = {0};
    ck_assert_msg(tl_cone_circular_matrices(&g, P, &eb) == TL_OK, "%s", eb.msg);
    const double u0 = s->center, v0 = 0.5 * (s->rows - 1.0) + s->offset_v;
    const double c = cos(roll), sn = sin(roll);
    for (uint32_t i = 0; i < n; i++) /* (u, v) - (u0, v0) turned by roll; w unchanged */
        for (int e = 0; e < 4; e++) {
            const double ru = P[i][e], rv = P[i][4 + e], rw = P[i][8 + e];
            P[i][e] = c * ru - sn * rv + (u0 - c * u0 + sn * v0) * rw;
            P[i][4 + e] = sn * ru + c * rv + (v0 - sn * u0 - c * v0) * rw;
        }
    free(angles);
    return P;
}

/* Case (h) on one trajectory (matrices NULL: the circle). */
static void tracked_stack_on(const double (*matrices)[12], uint32_t nmatrices, const char *what)
{
    enum { NPL = 21, H = 70, W = 76 };
    const size_t npx = (size_t)H * W;
    tl_cone_scan s;
    ck_assert_int_eq(tl_cone_scan_make(&s, 64, 80, 90, 1.0, -0.5, false), 0);
    tl_engine_config c = tl_cone_scan_config(&s, TL_BACKEND_CUDA);
    c.window = 45; /* half a turn: the window rolls */
    c.cone.matrices = matrices;
    c.cone.nmatrices = nmatrices;
    tl_engine *stacked = tl_gt_cuda(&c, NULL), *alone = tl_gt_cuda(&c, NULL);
    int in_stack[NPL], by_one[NPL], fresh[NPL];
    float *a = malloc(NPL * npx * sizeof *a), *b = malloc(NPL * npx * sizeof *b),
          *f = malloc(npx * sizeof *f);
    float *outa[NPL], *outb[NPL];
    ck_assert(a && b && f);
    for (int k = 0; k < NPL; k++) {
        /* up 0.7 rows a plane (a new detector row most steps), then down 0.45 (often the
         * same row): every path of the row cache */
        double z = k < 11 ? 12.25 + 0.7 * k : 30.0 - 0.45 * (k - 11);
        tl_slice_spec row, between;
        tl_slice_spec_row(&row, z, H, W);
        tl_slice_spec_ortho(&between, TL_AXIS_X, k - 10.0, H, W);
        int sep;
        ck_assert_int_eq(tl_engine_add_slice(stacked, &row, &in_stack[k]), TL_OK);
        ck_assert_int_eq(tl_engine_add_slice(stacked, &row, &fresh[k]), TL_OK);
        ck_assert_int_eq(tl_engine_add_slice(alone, &row, &by_one[k]), TL_OK);
        ck_assert_int_eq(tl_engine_add_slice(alone, &between, &sep), TL_OK);
        ck_assert_int_eq(tl_engine_track(stacked, in_stack[k], true), TL_OK);
        ck_assert_int_eq(tl_engine_track(alone, by_one[k], true), TL_OK);
        ck_assert_int_eq(tl_engine_track(alone, sep, true), TL_OK);
        outa[k] = a + k * npx;
        outb[k] = b + k * npx;
    }
    ck_assert_int_eq(tl_cone_scan_submit(&s, stacked, 0, 10), TL_OK);
    ck_assert_int_eq(tl_cone_scan_submit(&s, alone, 0, 10), TL_OK);
    /* built: from here on updated projection by projection */
    ck_assert_int_eq(tl_engine_reconstruct(stacked, in_stack, NPL, outa, NULL), TL_OK);
    ck_assert_int_eq(tl_engine_reconstruct(alone, by_one, NPL, outb, NULL), TL_OK);
    ck_assert_int_eq(tl_cone_scan_submit(&s, stacked, 10, 200), TL_OK);
    ck_assert_int_eq(tl_cone_scan_submit(&s, alone, 10, 200), TL_OK);
    tl_slice_info info[NPL];
    ck_assert_int_eq(tl_engine_reconstruct(stacked, in_stack, NPL, outa, info), TL_OK);
    ck_assert_int_eq(tl_engine_reconstruct(alone, by_one, NPL, outb, NULL), TL_OK);
    double worst = 0, biggest = 0;
    for (int k = 0; k < NPL; k++) {
        ck_assert_str_eq(info[k].kernel, "delta-cone-exact");
        ck_assert_msg(memcmp(outa[k], outb[k], npx * sizeof *a) == 0,
                      "%s, plane %d: the stack and the slice-by-slice update differ", what, k);
        ck_assert_int_eq(tl_engine_reconstruct(stacked, &fresh[k], 1, &f, NULL), TL_OK);
        double l2 = tl_rel_l2(outa[k], f, npx);
        worst = l2 > worst ? l2 : worst;
        ck_assert_msg(l2 <= EXACT_REL, "%s, plane %d: tracked vs scratch rel L2 %g", what, k, l2);
        for (size_t p = 0; p < npx; p++)
            biggest = fabs(f[p]) > biggest ? fabs(f[p]) : biggest;
    }
    ck_assert_msg(biggest > 1e-2, "%s: the planes see the phantom (max |f| %g)", what, biggest);
    printf("  cone tracked stack of %d, %s: equal to one by one, bit for bit; vs scratch "
           "worst rel L2 %.3g\n",
           NPL, what, worst);
    free(a);
    free(b);
    free(f);
    tl_engine_destroy(stacked);
    tl_engine_destroy(alone);
    tl_cone_scan_free(&s);
}

START_TEST(tracked_stack_bitwise)
{
    tracked_stack_on(NULL, 0, "circular orbit");
    tl_cone_scan s;
    ck_assert_int_eq(tl_cone_scan_make(&s, 64, 80, 90, 1.0, -0.5, false), 0);
    enum { FRAMES = 210 }; /* tracked_stack_on's 10 + 200 */
    double(*P)[12] = rolled_matrices(&s, FRAMES, 0.05);
    tl_cone_scan_free(&s);
    tracked_stack_on((const double(*)[12])P, FRAMES, "detector rolled 0.05 rad");
    free(P);
}
END_TEST

int main(void)
{
    const tl_gt_case cases[] = {
        {"reference", {volume_vs_reference, NULL}},
        {"modes", {kernel_modes, NULL}},
        {"planes", {planes_vs_cpu_f64, NULL}},
        {"incremental", {incremental_equals_scratch, NULL}},
        {"short", {short_scan_vs_cpu_f64, NULL}},
        {"stack", {stack_vs_cpu_f64, NULL}},
        {"bands", {bands_equal_whole, NULL}},
        {"mirror", {mirror_vs_cpu_f64, NULL}},
        {"tracked-stack", {tracked_stack_bitwise, NULL}},
    };
    return tl_gt_main("cone", cases, sizeof cases / sizeof *cases);
}

#endif /* HAVE_CUDA */
