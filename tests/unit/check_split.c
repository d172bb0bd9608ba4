/* check_split.c — an engine spanning several devices (gpu/split.c) against one engine, on
 * the CPU backend, where each entry of config.devices is one row partition: CI has no GPU,
 * and the splitting (frames cut by rows, slices routed to the part that owns their row,
 * planes assembled from the parts) is the same whatever computes the parts.
 *
 * Engines of 2, 3 and 13 partitions (one row each, of 13) are fed exactly what one engine
 * is fed (darks, flats, a second flat batch, pitched uint16 frames out of order, one
 * missing, a window that slides) and must give the same slices within float32 rounding
 * (relative L2 1e-5): rows at integer and fractional z, on, next to and between partition
 * boundaries, in (-1, 0) and (H - 1, H), above the detector; ortho-slices X, Y and Z; an
 * oblique plane along z and a tilted plane crossing every partition; several slices in one
 * job; tracked slices after the window slides, after set_center and after reset; the
 * benchmarks. Every compared slice that should show the phantom is checked to be nonzero,
 * so routing a slice to the wrong part (or not shifting it into the part's rows) fails.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "gpu/phantom.h"
#include "tests/testutil.h"

enum { H = 13, W = 40, N = 24, S = 32, NPROJ = 40 };
#define TOL 1e-5

/* Engines compared: one engine, then 2, 3 and H partitions. */
static const uint32_t parts_of_engine[] = {1, 2, 3, H};
#define NENG 4

static tl_engine *make(uint32_t parts)
{
    tl_engine_config c;
    tl_engine_config_init(&c, H, W, N);
    c.backend = TL_BACKEND_CPU;
    c.dtype = TL_DTYPE_U16;
    c.threads = 2;
    if (parts > 1) {
        c.ndevices = parts;
        for (uint32_t k = 0; k < parts; k++)
            c.devices[k] = 0; /* ignored on the CPU: each entry is a partition */
    }
    tl_engine *e = NULL;
    tl_status st = tl_engine_create(&c, &e);
    ck_assert_msg(st == TL_OK, "create with %u partitions: %s", parts, tl_engine_last_error(NULL));
    return e;
}

/* A pitched uint16 camera frame (darks, flats, projections of a Shepp-Logan phantom tall
 * enough to reach every row). */
typedef struct {
    tl_phantom ph;
    tl_camera cam;
    float *li;
    uint16_t *img, *pitched;
    size_t pitch;
} source;

static void source_init(source *s)
{
    ck_assert_int_eq(tl_phantom_shepp_logan(&s->ph, 0.45 * W, (H - 1) / 2.0, 0.8 * H), 0);
    tl_phantom_scale_density(&s->ph, 1.0 / W);
    tl_camera_init(&s->cam);
    s->pitch = (W + 3) * sizeof(uint16_t);
    s->li = malloc((size_t)H * W * sizeof *s->li);
    s->img = malloc((size_t)H * W * sizeof *s->img);
    s->pitched = calloc(H, s->pitch);
    ck_assert(s->li && s->img && s->pitched);
}

static void source_free(source *s)
{
    tl_phantom_free(&s->ph);
    free(s->li);
    free(s->img);
    free(s->pitched);
}

static double angle_of(uint64_t k)
{
    return M_PI * (double)k / N;
}

static void submit(tl_engine **e, source *s, tl_sim_kind kind, uint64_t index)
{
    if (kind == TL_SIM_PROJ)
        tl_phantom_project(&s->ph, angle_of(index), (W - 1) / 2.0, H, W, s->li);
    tl_camera_frame_u16(&s->cam, kind, s->li, H, W, NULL, s->img);
    for (uint32_t r = 0; r < H; r++)
        memcpy((char *)s->pitched + r * s->pitch, s->img + (size_t)r * W, W * sizeof *s->img);
    tl_frame f = {.kind = (tl_frame_kind)kind,
                  .index = index,
                  .angle = angle_of(index),
                  .dtype = TL_DTYPE_U16,
                  .rows = H,
                  .cols = W,
                  .pitch = s->pitch,
                  .data = s->pitched};
    for (int i = 0; i < NENG; i++) {
        tl_status st = tl_engine_submit(e[i], &f);
        ck_assert_msg(st == TL_OK, "engine %d: %s", i, tl_engine_last_error(e[i]));
    }
}

/* Projections first .. first + count - 1, neighbours swapped in pairs, `skip` left out. */
static void feed(tl_engine **e, source *s, uint64_t first, uint64_t count, uint64_t skip)
{
    for (uint64_t k = first; k < first + count; k += 2)
        for (int j = 1; j >= 0; j--)
            if (k + (uint64_t)j < first + count && k + (uint64_t)j != skip)
                submit(e, s, TL_SIM_PROJ, k + (uint64_t)j);
}

static void make_all(tl_engine **e, source *s)
{
    for (int i = 0; i < NENG; i++)
        e[i] = make(parts_of_engine[i]);
    source_init(s);
    for (int k = 0; k < 2; k++)
        submit(e, s, TL_SIM_DARK, 0);
    for (int k = 0; k < 2; k++)
        submit(e, s, TL_SIM_FLAT, 0);
    feed(e, s, 0, 20, 7);
    s->cam.flux *= 1.1; /* a new flat batch: every partition must start it */
    submit(e, s, TL_SIM_FLAT, 0);
    s->cam.flux /= 1.1;
    feed(e, s, 20, NPROJ - 20, 31); /* the window slides past index 16 */
}

static void free_all(tl_engine **e, source *s)
{
    for (int i = 0; i < NENG; i++)
        tl_engine_destroy(e[i]);
    source_free(s);
}

static double norm(const float *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * a[i];
    return sqrt(s);
}

/* got equals ref within TOL; ref nonzero unless zero is expected, and then got is zero. */
static void expect_equal(const char *what, uint32_t parts, const float *got, const float *ref,
                         size_t n, bool zero)
{
    double nr = norm(ref, n);
    if (zero) {
        ck_assert_msg(nr == 0 && norm(got, n) == 0, "%s, %u partitions: expected zeros", what,
                      parts);
        return;
    }
    ck_assert_msg(nr > 0, "%s: the single engine's slice is zero (test data)", what);
    double rel = tl_rel_l2(got, ref, n);
    ck_assert_msg(rel <= TOL, "%s, %u partitions: rel L2 %.3g (limit %.1g)", what, parts, rel,
                  TOL);
}

/* Reconstructs spec on every engine and compares with engine 0. */
static void compare(tl_engine **e, const char *what, const tl_slice_spec *sp, bool zero)
{
    size_t n = (size_t)sp->height * sp->width;
    float *out[NENG];
    for (int i = 0; i < NENG; i++) {
        out[i] = malloc(n * sizeof **out);
        int id;
        ck_assert_int_eq(tl_engine_add_slice(e[i], sp, &id), TL_OK);
        tl_status st = tl_engine_reconstruct(e[i], &id, 1, &out[i], NULL);
        ck_assert_msg(st == TL_OK, "%s: %s", what, tl_engine_last_error(e[i]));
        ck_assert_int_eq(tl_engine_remove_slice(e[i], id), TL_OK);
    }
    for (int i = 1; i < NENG; i++)
        expect_equal(what, parts_of_engine[i], out[i], out[0], n, zero);
    for (int i = 0; i < NENG; i++)
        free(out[i]);
}

/* ---- tests --------------------------------------------------------------------------------- */

START_TEST(partition_rule)
{
    uint32_t a, b;
    tl_engine_split_rows(13, 3, 0, &a, &b);
    ck_assert_uint_eq(a, 0);
    ck_assert_uint_eq(b, 4);
    tl_engine_split_rows(13, 3, 1, &a, &b);
    ck_assert_uint_eq(a, 4);
    ck_assert_uint_eq(b, 8);
    tl_engine_split_rows(13, 3, 2, &a, &b);
    ck_assert_uint_eq(a, 8);
    ck_assert_uint_eq(b, 13);
    tl_engine_split_rows(2048, 2, 1, &a, &b);
    ck_assert_uint_eq(a, 1024);
    ck_assert_uint_eq(b, 2048);
}
END_TEST

START_TEST(rows_match_one_engine)
{
    tl_engine *e[NENG];
    source s;
    make_all(e, &s);
    char what[64];
    for (uint32_t z = 0; z < H; z++) { /* every row, so every boundary of every split */
        tl_slice_spec sp;
        tl_slice_spec_row(&sp, z, S, S);
        snprintf(what, sizeof what, "row z = %u", z);
        compare(e, what, &sp, false);
    }
    /* fractional: around the boundaries 4, 6 and 8 (2 and 3 partitions) and every row of
     * 13, below row 0 and above row H - 1 */
    const double zs[] = {-0.75, -0.001, 0.5,  3.5,    3.999, 4.25,  5.5,   5.999,
                         6.001, 6.5,    7.75, 8.0001, 11.5,  12.25, 12.999};
    for (size_t i = 0; i < sizeof zs / sizeof *zs; i++) {
        tl_slice_spec sp;
        tl_slice_spec_row(&sp, zs[i], S, S);
        snprintf(what, sizeof what, "row z = %g", zs[i]);
        compare(e, what, &sp, false);
    }
    const double outside[] = {-1.0, -3.5, 13.0, 20.25};
    for (size_t i = 0; i < sizeof outside / sizeof *outside; i++) {
        tl_slice_spec sp;
        tl_slice_spec_row(&sp, outside[i], S, S);
        snprintf(what, sizeof what, "row z = %g (off the detector)", outside[i]);
        compare(e, what, &sp, true);
    }
    free_all(e, &s);
}
END_TEST

START_TEST(planes_match_one_engine)
{
    tl_engine *e[NENG];
    source s;
    make_all(e, &s);
    tl_slice_spec sp;
    tl_slice_spec_ortho(&sp, TL_AXIS_X, 3.5, H, S);
    compare(e, "ortho x", &sp, false);
    tl_slice_spec_ortho(&sp, TL_AXIS_Y, -2.5, H, S);
    compare(e, "ortho y", &sp, false);
    tl_slice_spec_ortho(&sp, TL_AXIS_Z, 6.0, S, S);
    compare(e, "ortho z", &sp, false);
    /* half-pixel steps in z: output rows between detector rows, and reaching past both
     * ends of the detector */
    tl_slice_spec_ortho(&sp, TL_AXIS_Y, 1.5, 2 * H + 6, S);
    sp.scale = 0.5 * (H + 3) / H;
    compare(e, "ortho y, z steps of about half a row", &sp, false);
    /* two output rows over the whole height: the middle partition of 3 has none of them
     * (an ortho-slice's rows are dealt out by height, split_route.c) */
    tl_slice_spec_ortho(&sp, TL_AXIS_Y, 0.5, 2, S);
    compare(e, "ortho y of two rows", &sp, false);
    /* an ortho-slice's rows the other way up (z rising down the output rows): the parts'
     * shares then come in the opposite order */
    const float upside[9] = {(float)S, 0, 0, 0, 0, (float)H + 2, -S / 2.0f, 1.5f, -1.0f};
    tl_slice_spec_plane(&sp, upside, H + 3, S);
    compare(e, "ortho-slice upside down", &sp, false);
    /* z along the output rows: per pixel assembly */
    const float ob[9] = {0, 0, (float)H + 2, 0, (float)S, 0, 4.5f - S / 2.0f, -S / 2.0f, -1.5f};
    tl_slice_spec_plane(&sp, ob, S, 29);
    compare(e, "oblique along z", &sp, false);
    const float tilt[9] = {32, 6, 6.3f, -5, 30, 9.1f, -16, -16, -1.2f};
    tl_slice_spec_plane(&sp, tilt, 37, 45);
    compare(e, "tilted", &sp, false);
    free_all(e, &s);
}
END_TEST

/* Rows of every part and planes in one job. */
START_TEST(one_job_many_slices)
{
    tl_engine *e[NENG];
    source s;
    make_all(e, &s);
    enum { NS = 6 };
    tl_slice_spec sp[NS];
    tl_slice_spec_row(&sp[0], 12, S, S);
    tl_slice_spec_ortho(&sp[1], TL_AXIS_X, -1.5, H, S);
    tl_slice_spec_row(&sp[2], 0, S, S);
    tl_slice_spec_row(&sp[3], 6.5, S, S);
    const float tilt[9] = {32, 0, 5.5f, 0, 32, 7, -16, -16, 0.25f};
    tl_slice_spec_plane(&sp[4], tilt, S, S);
    tl_slice_spec_row(&sp[5], 4, S, S);
    float *out[NENG][NS];
    for (int i = 0; i < NENG; i++) {
        int ids[NS];
        tl_slice_info info[NS];
        for (int k = 0; k < NS; k++) {
            ck_assert_int_eq(tl_engine_add_slice(e[i], &sp[k], &ids[k]), TL_OK);
            out[i][k] = malloc((size_t)sp[k].height * sp[k].width * sizeof(float));
        }
        ck_assert_int_eq(tl_engine_reconstruct(e[i], ids, NS, out[i], info), TL_OK);
        for (int k = 0; k < NS; k++)
            ck_assert_str_eq(info[k].kernel, "cpu-f32");
    }
    for (int i = 1; i < NENG; i++)
        for (int k = 0; k < NS; k++) {
            char what[32];
            snprintf(what, sizeof what, "slice %d of one job", k);
            expect_equal(what, parts_of_engine[i], out[i][k], out[0][k],
                         (size_t)sp[k].height * sp[k].width, false);
        }
    for (int i = 0; i < NENG; i++)
        for (int k = 0; k < NS; k++)
            free(out[i][k]);
    free_all(e, &s);
}
END_TEST

/* Tracked slices: built, updated as the window slides, rebuilt after set_center and reset;
 * equal to the single engine's tracked slices and to its from-scratch reconstruction. */
START_TEST(tracked_slices)
{
    tl_engine *e[NENG];
    source s;
    make_all(e, &s);
    enum { NT = 6 };
    tl_slice_spec sp[NT];
    tl_slice_spec_row(&sp[0], 6, S, S);    /* first row of part 1 of 2 */
    tl_slice_spec_row(&sp[1], 3.5, S, S);  /* between parts 0 and 1 of 3 */
    tl_slice_spec_row(&sp[2], 12.5, S, S); /* above the last row */
    tl_slice_spec_ortho(&sp[3], TL_AXIS_X, 2.5, H, S);
    const float tilt[9] = {32, 6, 6.3f, -5, 30, 9.1f, -16, -16, -1.2f};
    tl_slice_spec_plane(&sp[4], tilt, 37, 45);
    tl_slice_spec_ortho(&sp[5], TL_AXIS_Y, 0.5, 2, S); /* no row on the middle part of 3 */
    int tracked[NENG][NT], scratch[NT];
    float *out[NENG][NT], *ref[NT];
    for (int i = 0; i < NENG; i++)
        for (int k = 0; k < NT; k++) {
            ck_assert_int_eq(tl_engine_add_slice(e[i], &sp[k], &tracked[i][k]), TL_OK);
            ck_assert_int_eq(tl_engine_track(e[i], tracked[i][k], true), TL_OK);
            out[i][k] = malloc((size_t)sp[k].height * sp[k].width * sizeof(float));
        }
    for (int k = 0; k < NT; k++) {
        ck_assert_int_eq(tl_engine_add_slice(e[0], &sp[k], &scratch[k]), TL_OK);
        ref[k] = malloc((size_t)sp[k].height * sp[k].width * sizeof(float));
    }
    uint64_t next = NPROJ;
    for (int round = 0; round < 5; round++) {
        const char *stage = round == 0   ? "built"
                            : round == 1 ? "after 10 frames"
                            : round == 2 ? "after 30 more frames"
                            : round == 3 ? "after set_center"
                                         : "after reset";
        if (round == 1 || round == 2) {
            uint64_t count = round == 1 ? 10 : 30;
            feed(e, &s, next, count, next + 3);
            next += count;
        } else if (round == 3) {
            for (int i = 0; i < NENG; i++)
                ck_assert_int_eq(tl_engine_set_center(e[i], (W - 1) / 2.0 + 0.7), TL_OK);
        } else if (round == 4) {
            for (int i = 0; i < NENG; i++)
                ck_assert_int_eq(tl_engine_reset(e[i]), TL_OK);
            submit(e, &s, TL_SIM_DARK, 0);
            submit(e, &s, TL_SIM_FLAT, 0);
            feed(e, &s, next, 12, 0);
            next += 12;
        }
        tl_slice_info info[NENG][NT];
        for (int i = 0; i < NENG; i++)
            ck_assert_int_eq(tl_engine_reconstruct(e[i], tracked[i], NT, out[i], info[i]), TL_OK);
        ck_assert_int_eq(tl_engine_reconstruct(e[0], scratch, NT, ref, NULL), TL_OK);
        for (int k = 0; k < NT; k++) {
            size_t n = (size_t)sp[k].height * sp[k].width;
            char what[80];
            snprintf(what, sizeof what, "tracked slice %d %s vs from scratch", k, stage);
            expect_equal(what, 1, out[0][k], ref[k], n, false);
            for (int i = 1; i < NENG; i++) {
                snprintf(what, sizeof what, "tracked slice %d %s", k, stage);
                expect_equal(what, parts_of_engine[i], out[i][k], out[0][k], n, false);
                ck_assert_str_eq(info[i][k].kernel, info[0][k].kernel);
            }
        }
        if (round == 1 || round == 2)
            ck_assert_str_eq(info[1][0].kernel, "cpu-f32-incremental");
    }
    /* untracking frees the parts' accumulators; tracking again rebuilds */
    for (int i = 0; i < NENG; i++)
        for (int k = 0; k < NT; k++) {
            ck_assert_int_eq(tl_engine_track(e[i], tracked[i][k], false), TL_OK);
            ck_assert_int_eq(tl_engine_track(e[i], tracked[i][k], true), TL_OK);
        }
    for (int i = 0; i < NENG; i++)
        ck_assert_int_eq(tl_engine_reconstruct(e[i], tracked[i], NT, out[i], NULL), TL_OK);
    for (int i = 1; i < NENG; i++)
        for (int k = 0; k < NT; k++)
            expect_equal("tracked again", parts_of_engine[i], out[i][k], out[0][k],
                         (size_t)sp[k].height * sp[k].width, false);
    for (int k = 0; k < NT; k++) {
        free(ref[k]);
        for (int i = 0; i < NENG; i++)
            free(out[i][k]);
    }
    free_all(e, &s);
}
END_TEST

START_TEST(state_and_benchmarks)
{
    tl_engine *e[NENG];
    source s;
    make_all(e, &s);
    tl_engine_state st0, st;
    tl_engine_get_state(e[0], &st0);
    tl_engine_get_state(e[2], &st);
    ck_assert_str_eq(st.backend, "cpu");
    ck_assert_msg(strstr(st.device_name, "3 row partitions") != NULL, "%s", st.device_name);
    ck_assert_uint_eq(st.held, st0.held);
    ck_assert_uint_eq(st.missing, st0.missing);
    ck_assert_uint_eq(st.window_first, st0.window_first);
    ck_assert_uint_gt(st.memory_bytes, 0);
    tl_kernel_info k[8];
    ck_assert_uint_eq(tl_engine_kernels(e[2], k, 8), 1);
    ck_assert_str_eq(k[0].name, "cpu-f32");

    /* rows in two different parts and a plane across all: one timing row */
    tl_slice_spec sp[3];
    tl_slice_spec_row(&sp[0], 1, S, S);
    tl_slice_spec_row(&sp[1], 11, S, S);
    tl_slice_spec_ortho(&sp[2], TL_AXIS_Y, 0.5, H, S);
    int ids[3];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tl_engine_add_slice(e[2], &sp[i], &ids[i]), TL_OK);
    float *before = malloc(S * S * sizeof *before), *after = malloc(S * S * sizeof *after);
    ck_assert_int_eq(tl_engine_reconstruct(e[2], &ids[1], 1, &before, NULL), TL_OK);
    tl_bench_row r[4];
    size_t n = 0;
    ck_assert_int_eq(tl_engine_bench(e[2], ids, 3, 2, r, 4, &n), TL_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(r[0].kernel, "cpu-f32");
    ck_assert(r[0].ms > 0 && r[0].updates_per_s > 0);
    ck_assert_int_eq(tl_engine_bench_kernel(e[2], ids, 2, "cpu-f32", 2, &r[0]), TL_OK);

    tl_phantom_project(&s.ph, 0.2, (W - 1) / 2.0, H, W, s.li);
    tl_camera_frame_u16(&s.cam, TL_SIM_PROJ, s.li, H, W, NULL, s.img);
    tl_frame f = {.kind = TL_FRAME_PROJ,
                  .index = 1000,
                  .angle = 0.2,
                  .dtype = TL_DTYPE_U16,
                  .rows = H,
                  .cols = W,
                  .data = s.img};
    double ms = 0;
    ck_assert_int_eq(tl_engine_bench_store(e[2], &f, 3, &ms), TL_OK);
    ck_assert(ms > 0);
    ck_assert_int_eq(tl_engine_reconstruct(e[2], &ids[1], 1, &after, NULL), TL_OK);
    ck_assert_msg(memcmp(before, after, S * S * sizeof *before) == 0,
                  "bench_store changed the window");
    free(before);
    free(after);
    free_all(e, &s);
}
END_TEST

START_TEST(bad_device_lists)
{
    tl_engine_config c;
    tl_engine *e = NULL;
    tl_engine_config_init(&c, H, W, N);
    ck_assert_uint_eq(c.ndevices, 0);
    c.backend = TL_BACKEND_CPU;
    c.ndevices = TL_ENGINE_MAX_DEVICES + 1;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EINVAL);
    ck_assert_ptr_null(e);
    c.ndevices = H + 1; /* more partitions than rows */
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EINVAL);
    ck_assert(strstr(tl_engine_last_error(NULL), "row") != NULL);
    tl_memory_estimate m;
    c.ndevices = 2;
    ck_assert_int_eq(tl_engine_estimate(&c, &m), TL_OK);
    tl_engine_config one = c;
    one.ndevices = 0;
    tl_memory_estimate m1;
    ck_assert_int_eq(tl_engine_estimate(&one, &m1), TL_OK);
    ck_assert_uint_gt(m.window_bytes, m1.window_bytes); /* the halo row */
    /* one entry: a plain engine */
    c.ndevices = 1;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_OK);
    tl_engine_state st;
    tl_engine_get_state(e, &st);
    ck_assert(strstr(st.device_name, "partition") == NULL);
    tl_engine_destroy(e);
#ifndef HAVE_CUDA
    c.backend = TL_BACKEND_CUDA;
    c.ndevices = 2;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EDEVICE);
#endif
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("split");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, partition_rule);
    tcase_add_test(t, rows_match_one_engine);
    tcase_add_test(t, planes_match_one_engine);
    tcase_add_test(t, one_job_many_slices);
    tcase_add_test(t, tracked_slices);
    tcase_add_test(t, state_and_benchmarks);
    tcase_add_test(t, bad_device_lists);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
