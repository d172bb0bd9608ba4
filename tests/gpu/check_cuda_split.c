/* check_cuda_split.c — check_cuda's case "split": one engine over row partitions ({0, 0},
 * and {0, 1} with two GPUs) against one GPU within the exact mode (rows, ortho-slices,
 * planes, tracked slices, device frames read peer-to-peer, pinned frames, frames read
 * later, batched filter passes), benchmarks, a device list naming a missing GPU.
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
        tl_frame f = {.kind = (tl_frame_kind)kind,
                      .index = index,
                      .angle = th,
                      .dtype = TL_DTYPE_U16,
                      .rows = rows,
                      .cols = cols,
                      .pitch = pitch,
                      .data = buf};
        cc_submit_all(e, ne, &f);
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
            float *ref = cc_recon(e[0], &sp, &k0), *got = cc_recon(e[1], &sp, &k1);
            snprintf(what, sizeof what, "{%d,%d} row z = %g (%s)", lists[l][0], lists[l][1], z,
                     k1);
            ck_assert_str_eq(k0, k1);
            cc_expect_close(what, got, ref, (size_t)S * S, EXACT_REL, EXACT_MOR);
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
            float *ref = cc_recon(e[0], &sp[i], NULL), *got = cc_recon(e[1], &sp[i], NULL);
            snprintf(what, sizeof what, "{%d,%d} %s", lists[l][0], lists[l][1], names[i]);
            cc_expect_close(what, got, ref, (size_t)sp[i].height * sp[i].width, EXACT_REL,
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
            cc_expect_close(what, out[1][k], out[0][k], (size_t)S * S, EXACT_REL, EXACT_MOR);
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
                cc_expect_close(what, out[1][k], out[0][k], (size_t)S * S, EXACT_REL, EXACT_MOR);
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
            cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, kind, (int)k);
            for (int dev = 0; dev < nl; dev++) {
                ck_assert_int_eq(cudaSetDevice(dev), cudaSuccess);
                ck_assert_int_eq(cudaMemcpy2D(d[dev], dpitch[dev], buf, row, row, R,
                                              cudaMemcpyHostToDevice),
                                 cudaSuccess);
            }
            for (int i = 0; i < ne; i++) {
                tl_frame f = {.kind = (tl_frame_kind)kind,
                              .index = k,
                              .angle = k * M_PI / N,
                              .dtype = TL_DTYPE_U16,
                              .rows = R,
                              .cols = W,
                              .data = buf};
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
        float *ref = cc_recon(e[0], &sp, NULL);
        for (int i = 1; i < ne; i++) {
            float *got = cc_recon(e[i], &sp, NULL);
            char what[96];
            snprintf(what, sizeof what, "device frames from GPU %d, engine %d, z = %g", src_dev[i],
                     i, zs[k]);
            cc_expect_close(what, got, ref, (size_t)S * S, EXACT_REL, EXACT_MOR);
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
        cc_feed_pinned(one, split, R, W, N);
        char what[96];
        tl_slice_spec sp[3];
        tl_slice_spec_row(&sp[0], 5, S, S);
        tl_slice_spec_row(&sp[1], 18, S, S);
        tl_slice_spec_ortho(&sp[2], TL_AXIS_X, 10.5, R, S);
        for (int i = 0; i < 3; i++) {
            float *ref = cc_recon(one, &sp[i], NULL), *got = cc_recon(split, &sp[i], NULL);
            snprintf(what, sizeof what, "{%d,%d} pinned frames, slice %d", lists[l][0],
                     lists[l][1], i);
            cc_expect_close(what, got, ref, (size_t)sp[i].height * sp[i].width, EXACT_REL,
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
            cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, kind, (int)k);
            tl_frame f = {.kind = (tl_frame_kind)kind,
                          .index = k,
                          .angle = k * M_PI / N,
                          .dtype = TL_DTYPE_U16,
                          .rows = R,
                          .cols = W,
                          .data = buf};
            ck_assert_int_eq(tl_engine_submit(e[0], &f), TL_OK);
            uint32_t slot = n % RING;
            for (int i = 1; i < 3; i++) { /* the slot is free once its last frame was read */
                uint64_t done = 0;
                ck_assert_int_eq(tl_engine_frames_done(e[i], fence[i - 1][slot], &done), TL_OK);
                ck_assert_uint_ge(done, fence[i - 1][slot]);
                ck_assert_uint_le(done, tl_engine_frames_queued(e[i]));
            }
            char *d = ring + (size_t)slot * R * dpitch;
            ck_assert_int_eq(cudaMemcpy2DAsync(d, dpitch, buf, row, row, R, cudaMemcpyHostToDevice,
                                               ws),
                             cudaSuccess);
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
    float *ref = cc_recon(e[0], &sp, NULL);
    for (int i = 1; i < 3; i++) {
        float *got = cc_recon(e[i], &sp, NULL);
        cc_expect_close(i == 1 ? "frames read later, one GPU" : "frames read later, split", got,
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
static void feed_backlog(tl_engine **e, int ne, uint32_t R, uint32_t W, uint32_t N, uint32_t first,
                         uint32_t last)
{
    size_t row = W * sizeof(uint16_t);
    uint16_t *buf = malloc(R * row);
    for (uint32_t k = first; k <= last; k++) {
        cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, 2, (int)k);
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = k,
                      .angle = k * M_PI / N,
                      .dtype = TL_DTYPE_U16,
                      .rows = R,
                      .cols = W,
                      .data = buf};
        for (int i = 0; i < ne; i++) {
            f.more = i > 0 && k < last;
            tl_status st = tl_engine_submit(e[i], &f);
            ck_assert_msg(st == TL_OK, "engine %d, frame %u: %s", i, k,
                          tl_engine_last_error(e[i]));
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
        float *ref = cc_recon(e[0], &sp[k], NULL);
        for (int i = 1; i < 3; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s, %s, %s", when, k ? "ortho x" : "row",
                     i == 1 ? "batched" : "batched, split");
            float *got = cc_recon(e[i], &sp[k], NULL);
            /* one GPU: the same kernels on the same numbers, only cuFFT's batch differs */
            cc_expect_close(what, got, ref, n, i == 1 ? 1e-6 : EXACT_REL,
                            i == 1 ? 1e-6 : EXACT_MOR);
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
            cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, kind, k);
            tl_frame f = {.kind = (tl_frame_kind)kind,
                          .dtype = TL_DTYPE_U16,
                          .rows = R,
                          .cols = W,
                          .data = buf};
            cc_submit_all(e, 3, &f);
        }
    /* four frames held: their fences are not reached until the pass runs */
    feed_backlog(e, 3, R, W, N, 0, 4);
    uint64_t done = 0;
    for (int i = 1; i < 3; i++) {
        cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, 2, 5);
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = 5,
                      .angle = 5 * M_PI / N,
                      .dtype = TL_DTYPE_U16,
                      .rows = R,
                      .cols = W,
                      .data = buf,
                      .more = true};
        ck_assert_int_eq(tl_engine_submit(e[i], &f), TL_OK);
        for (uint32_t k = 6; k < 9; k++) {
            cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, 2, (int)k);
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
    cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, 2, 41);
    tl_frame f = {.kind = TL_FRAME_PROJ,
                  .index = 41,
                  .angle = 41 * M_PI / N,
                  .dtype = TL_DTYPE_U16,
                  .rows = R,
                  .cols = W,
                  .data = buf};
    ck_assert_int_eq(tl_engine_submit(e[0], &f), TL_OK);
    f.more = true;
    ck_assert_int_eq(tl_engine_submit(e[1], &f), TL_OK);
    ck_assert_int_eq(tl_engine_submit(e[2], &f), TL_OK);
    ck_assert_uint_eq(tl_engine_frames_queued(e[1]), queued + 1);
    expect_same_slices("held frames at a reconstruction", e, R, W);
    /* and a dark frame in a backlog: the held frames keep the correction they came with */
    feed_backlog(e, 3, R, W, N, 42, 44);
    cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, 0, 7);
    tl_frame dark = {.kind = TL_FRAME_DARK,
                     .dtype = TL_DTYPE_U16,
                     .rows = R,
                     .cols = W,
                     .data = buf};
    f.index = 45;
    f.angle = 45 * M_PI / N;
    cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, 2, 45);
    for (int i = 0; i < 3; i++) {
        f.more = i > 0;
        ck_assert_int_eq(tl_engine_submit(e[i], &f), TL_OK);
    }
    cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, 0, 7);
    cc_submit_all(e, 3, &dark);
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
    tl_frame f = {.kind = TL_FRAME_PROJ,
                  .index = 1000,
                  .dtype = TL_DTYPE_U16,
                  .rows = R,
                  .cols = W,
                  .data = img};
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

tl_gt_case cc_split_case(void)
{
    return (tl_gt_case){"split",
                        {split_matches_one_gpu, split_tracked_slices, split_device_frames,
                         split_pinned_frames, device_frames_read_later,
                         split_bench_and_bad_devices, batched_filter_passes, NULL}};
}

#else
typedef int check_cuda_split_needs_cuda; /* ISO C wants a translation unit to declare something */
#endif /* HAVE_CUDA */
