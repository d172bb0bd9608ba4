/* check_cuda_engine.c — check_cuda's case "engine": planes and ortho-slices against the
 * CPU, quality modes, device-resident and pinned frames, the rolling window against a fresh
 * engine, refusal of a scan larger than the card, benchmarks, empty windows and tracked
 * slices.
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

/* ---- planes -------------------------------------------------------------------------------- */

START_TEST(planes_match_cpu)
{
    cc_scan s = {.rows = 24, .cols = 48, .nproj = 90};
    tl_engine_config c = cc_scan_config(&s);
    tl_phantom ph;
    cc_shepp(&ph, &s, 14);
    /* 0 cpu-f32, 1 cuda auto, 2.. cuda forced */
    tl_engine *e[2 + CC_NKERNELS];
    e[0] = tl_gt_cpu(&c, TL_PRECISION_F32);
    e[1] = tl_gt_cuda(&c, NULL);
    for (int k = 0; k < CC_NKERNELS; k++)
        e[2 + k] = tl_gt_cuda(&c, cc_all_kernels[k]);
    cc_feed(e, 2 + CC_NKERNELS, &s, &ph, 0, s.nproj);
    const uint32_t S = 48, H = s.rows;

    /* plane == row, kernel by kernel (bit-identical: the same job) */
    tl_slice_spec row, pl;
    tl_slice_spec_row(&row, 11, S, S);
    float o[9];
    tl_slice_plane(&row, H, o);
    tl_slice_spec_plane(&pl, o, S, S);
    float *rows_k[CC_NKERNELS];
    for (int k = 0; k < CC_NKERNELS; k++) {
        rows_k[k] = cc_recon(e[2 + k], &row, NULL);
        float *p = cc_recon(e[2 + k], &pl, NULL);
        char what[64];
        snprintf(what, sizeof what, "plane == row, %s", cc_all_kernels[k]);
        cc_expect_close(what, p, rows_k[k], S * S, 1e-6, 1e-6);
        free(p);
    }
    /* plane-exact and alu-exact put every pixel at the same u: equal on rows */
    cc_expect_close("plane-exact == alu-exact on a row", rows_k[1], rows_k[0], S * S, 1e-6, 1e-6);
    for (int k = 0; k < CC_NKERNELS; k++)
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
        float *ref = cc_recon(e[0], &sp[i], NULL), *got = cc_recon(e[1], &sp[i], &used);
        ck_assert_str_eq(used, "plane-exact");
        char what[64];
        snprintf(what, sizeof what, "%s vs cpu", names[i]);
        cc_expect_close(what, got, ref, (size_t)sp[i].height * sp[i].width, EXACT_REL, EXACT_MOR);
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
    float *r0 = cc_recon(e[0], &row, NULL), *r1 = cc_recon(e[0], &sp[0], NULL);
    cc_expect_close("two-slice job: row", out[0], r0, S * S, EXACT_REL, EXACT_MOR);
    cc_expect_close("two-slice job: ortho x", out[1], r1, H * S, EXACT_REL, EXACT_MOR);
    free(out[0]);
    free(out[1]);
    free(r0);
    free(r1);
    for (int k = 0; k < 2 + CC_NKERNELS; k++)
        tl_engine_destroy(e[k]);
    tl_phantom_free(&ph);
}
END_TEST

/* Quality FAST lets horizontal rows use a row kernel of mode fast or better; planes still
 * go to plane-exact. */
START_TEST(quality_selects_kernels)
{
    cc_scan s = {.rows = 4, .cols = 64, .nproj = 60};
    tl_engine_config c = cc_scan_config(&s);
    c.quality = TL_QUALITY_FAST;
    tl_phantom ph;
    cc_shepp(&ph, &s, 20);
    tl_engine *e = tl_gt_cuda(&c, NULL);
    cc_feed(&e, 1, &s, &ph, 0, s.nproj);
    tl_slice_spec row, ortho;
    tl_slice_spec_row(&row, 2, 64, 64);
    tl_slice_spec_ortho(&ortho, TL_AXIS_Y, 0.5, 4, 64);
    const char *used = NULL;
    free(cc_recon(e, &row, &used));
    tl_kernel_info k[128];
    size_t nk = tl_engine_kernels(e, k, 128), i = 0;
    while (i < nk && strcmp(k[i].name, used) != 0)
        i++;
    ck_assert_msg(i < nk && !k[i].planes && k[i].quality <= TL_QUALITY_FAST, "row kernel %s",
                  used);
    free(cc_recon(e, &ortho, &used));
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
            cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, kind, (int)k);
            tl_frame f = {.kind = (tl_frame_kind)kind,
                          .index = k,
                          .angle = k * M_PI / N,
                          .dtype = TL_DTYPE_U16,
                          .rows = R,
                          .cols = W,
                          .data = buf};
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
    float *a = cc_recon(host, &sp, NULL), *b = cc_recon(dev, &sp, NULL);
    cc_expect_close("device frames vs host frames", b, a, 64 * 64, 1e-6, 1e-6);
    free(a);
    free(b);
    /* a host pointer that claims to be device memory is refused (last: the window has
     * already moved on for it when the backend refuses) */
    tl_frame bad = {.kind = TL_FRAME_PROJ,
                    .index = N,
                    .dtype = TL_DTYPE_U16,
                    .rows = R,
                    .cols = W,
                    .data = buf,
                    .memory = TL_MEMORY_DEVICE};
    ck_assert_int_eq(tl_engine_submit(dev, &bad), TL_EINVAL);
    ck_assert_ptr_nonnull(strstr(tl_engine_last_error(dev), "device memory"));
    tl_engine_destroy(host);
    tl_engine_destroy(dev);
}
END_TEST

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
    cc_feed_pinned(host, pin, R, W, N);
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 3, 64, 64);
    float *a = cc_recon(host, &sp, NULL), *b = cc_recon(pin, &sp, NULL);
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
    cc_scan s = {.rows = 2, .cols = 128, .nproj = 400, .window = 150};
    tl_engine_config c = cc_scan_config(&s);
    tl_phantom ph;
    cc_shepp(&ph, &s, 0.45 * s.cols);
    tl_engine *roll[CC_NKERNELS], *fresh[CC_NKERNELS];
    for (int k = 0; k < CC_NKERNELS; k++) {
        roll[k] = tl_gt_cuda(&c, cc_all_kernels[k]);
        fresh[k] = tl_gt_cuda(&c, cc_all_kernels[k]);
    }
    tl_engine *cpu = tl_gt_cpu(&c, TL_PRECISION_F32);
    cc_feed(roll, CC_NKERNELS, &s, &ph, 0, 137);
    tl_engine *both[2 * CC_NKERNELS + 1];
    for (int k = 0; k < CC_NKERNELS; k++) {
        both[k] = roll[k];
        both[CC_NKERNELS + k] = fresh[k];
    }
    both[2 * CC_NKERNELS] = cpu;
    cc_feed(both, 2 * CC_NKERNELS + 1, &s, &ph, 137, 150);
    tl_slice_spec sp, half;
    tl_slice_spec_row(&sp, 1, 128, 128);
    tl_slice_spec_row(&half, 0.5, 128, 128);
    float *ref = cc_recon(cpu, &sp, NULL);
    for (int k = 0; k < CC_NKERNELS; k++) {
        float *a = cc_recon(roll[k], &sp, NULL), *b = cc_recon(fresh[k], &sp, NULL);
        char what[64];
        snprintf(what, sizeof what, "rolling == fresh, %s", cc_all_kernels[k]);
        cc_expect_close(what, a, b, 128 * 128, 1e-6, 1e-6);
        if (!cc_is_fast(cc_all_kernels[k])) {
            snprintf(what, sizeof what, "rolling %s vs cpu", cc_all_kernels[k]);
            cc_expect_close(what, a, ref, 128 * 128, EXACT_REL, EXACT_MOR);
        }
        free(a);
        free(b);
        tl_engine_state st;
        tl_engine_get_state(roll[k], &st);
        ck_assert_uint_eq(st.window_first, 137);
        ck_assert_uint_eq(st.held, 150);
    }
    /* z = 0.5: interpolated between detector rows */
    float *a = cc_recon(roll[1], &half, NULL), *b = cc_recon(fresh[1], &half, NULL);
    cc_expect_close("rolling == fresh, plane-exact at z = 0.5", a, b, 128 * 128, 1e-6, 1e-6);
    free(a);
    free(b);
    free(ref);
    for (int k = 0; k < CC_NKERNELS; k++) {
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
                      strstr(msg, "cuda"),
                  "%s", msg);
}
END_TEST

START_TEST(bench_and_bench_store)
{
    cc_scan s = {.rows = 3, .cols = 96, .nproj = 64};
    tl_engine_config c = cc_scan_config(&s);
    tl_phantom ph;
    cc_shepp(&ph, &s, 0.45 * s.cols);
    tl_engine *e = tl_gt_cuda(&c, NULL);
    cc_feed(&e, 1, &s, &ph, 0, s.nproj);
    tl_slice_spec row, ortho;
    tl_slice_spec_row(&row, 1, 96, 96);
    tl_slice_spec_ortho(&ortho, TL_AXIS_X, 3.5, 3, 96);
    float *before = cc_recon(e, &row, NULL);
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
    tl_frame f = {.kind = TL_FRAME_PROJ,
                  .index = 1000,
                  .angle = 0.1,
                  .dtype = TL_DTYPE_F32,
                  .rows = s.rows,
                  .cols = s.cols,
                  .data = img};
    double ms = 0;
    ck_assert_int_eq(tl_engine_bench_store(e, &f, 3, &ms), TL_OK);
    printf("  bench_store %.4f ms\n", ms);
    ck_assert(ms > 0);
    float *after = cc_recon(e, &row, NULL);
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
    cc_scan s = {.rows = 2, .cols = 40, .nproj = 10};
    tl_engine_config c = cc_scan_config(&s);
    tl_phantom ph;
    cc_shepp(&ph, &s, 10);
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 1, 33, 35);
    for (int k = 0; k < CC_NKERNELS; k++) {
        tl_engine *e = tl_gt_cuda(&c, cc_all_kernels[k]);
        for (int pass = 0; pass < 2; pass++) {
            float *o = cc_recon(e, &sp, NULL);
            for (size_t i = 0; i < 33 * 35; i++)
                ck_assert_msg(o[i] == 0.f, "%s pass %d pixel %zu: %g", cc_all_kernels[k], pass, i,
                              o[i]);
            free(o);
            cc_feed(&e, 1, &s, &ph, 0, s.nproj);
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
    cc_scan sc = {.rows = R, .cols = W, .nproj = 2 * N, .window = N};
    tl_engine_config c = cc_scan_config(&sc);
    tl_engine *e = tl_gt_cuda(&c, NULL);
    tl_phantom ph;
    cc_shepp(&ph, &sc, 0.45 * W);
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
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = idx,
                      .angle = M_PI * k / N,
                      .dtype = TL_DTYPE_F32,
                      .rows = R,
                      .cols = W,
                      .data = proj + (size_t)k * R * W};
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
           "%.2e over %d read-outs, %d incremental\n",
           N, worst, reads, incremental);
    ck_assert_msg(worst <= 2e-5, "worst %g", worst);
    ck_assert_int_eq(incremental, reads - 2); /* the first read-out of each slice builds it */
    free(a);
    free(b);
    free(proj);
    tl_phantom_free(&ph);
    tl_engine_destroy(e);
}
END_TEST

tl_gt_case cc_engine_case(void)
{
    return (tl_gt_case){"engine",
                        {planes_match_cpu, quality_selects_kernels,
                         device_frames_equal_host_frames, pinned_host_frames,
                         rolling_window_equals_fresh, memory_refusal, bench_and_bench_store,
                         empty_window_is_zero, incremental_matches_scratch, NULL}};
}

#else
typedef int check_cuda_engine_needs_cuda; /* ISO C wants a translation unit to declare something */
#endif /* HAVE_CUDA */
