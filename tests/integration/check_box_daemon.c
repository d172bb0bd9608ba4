/* check_box_daemon.c — boxes (set_slice kind "box", issue #21: axis-aligned sub-volumes)
 * through tomolived on the CPU backend (TL_BOX_BACKEND=cuda: on the CUDA backend,
 * tests/gpu/box_daemon_cuda.sh):
 *   - a box is its planes: in parallel and in cone beam, each plane of a box's final image
 *     equals the plane slice of the same orientation read out beside it (incremental
 *     updates off: one computation each), bit for bit on the CPU backend and within the
 *     exact mode's bounds on CUDA, whose stack kernels serve the box and whose single-slice
 *     kernels the planes; the header says planes and box_step, and its orientation is
 *     plane 0's;
 *   - kept incrementally while the scan streams, a box's final equals the same box asked
 *     for after the end (from the whole window at once) within the exact mode's bounds
 *     (DESIGN.md §3); a box of no size or centre is the whole volume, whose plane k is
 *     row slice z = k;
 *   - what a box cannot be is refused, naming why: iterative, a size of two numbers, too
 *     many planes, outside the volume.
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "gpu/engine.h"
#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

enum { ROWS = 16, COLS = 48, VIEWS = 90, DEPTH = 5, BH = 20, BW = 24, MAXS = 8 };
#define CX 3.0
#define CY -2.0
#define CZ 7.5 /* planes at z 5.5 .. 9.5 */
#define BOX                                                                                   \
    "\"kind\":\"box\",\"size\":[5,20,24],\"center\":[3,-2,7.5],\"pin\":true"

/* The backend under test (TL_BOX_BACKEND: cpu, the default, or cuda). */
static const char *backend_name(void)
{
    const char *be = getenv("TL_BOX_BACKEND");
    return be && *be ? be : "cpu";
}

/* Whether n pixels of got equal want: bit for bit on the CPU backend; on CUDA, where a
 * box's stack and a single plane are served by different kernels, within the exact
 * mode's bounds (DESIGN.md §3). */
static bool same_pixels(const float *got, const float *want, size_t n)
{
    if (strcmp(backend_name(), "cpu") == 0)
        return memcmp(got, want, n * sizeof *got) == 0;
    double rel = tl_rel_l2(got, want, n), mor = tl_max_over_range(got, want, n);
    printf("  %s: relative L2 %.3g, max %.3g of the range\n", backend_name(), rel, mor);
    return rel <= 2e-5 && mor <= 1e-4;
}

typedef struct {
    char id[16];
    char kernel[32];
    bool final;
    uint32_t h, w, planes;
    double box_step;
    float orientation[9];
    float *px;
} got_slice;

static void send_scan_start(tl_fixture *f, bool cone)
{
    tl_proto_scan s = {.series = 1,
                       .geometry = cone ? TL_PROTO_CONE : TL_PROTO_PARALLEL,
                       .rows = ROWS,
                       .cols = COLS,
                       .dtype = TL_PROTO_F32,
                       .window = VIEWS,
                       .already_linear = true,
                       .source_origin = 300,
                       .source_detector = 450,
                       .pixel_size = {0.5, 0.5}};
    ck_assert_int_eq(tl_fx_send_scan(f, &s), 0);
}

/* Views first .. last - 1 of the scan (a cylinder whose density grows with the row, so
 * that the planes differ), then its end if `end`. */
static void send_views(tl_fixture *f, bool cone, int first, int last, bool end)
{
    static float img[ROWS * COLS];
    tl_fx_disk_projection(img, ROWS, COLS, 15.0);
    for (uint32_t r = 0; r < ROWS; r++)
        for (uint32_t c = 0; c < COLS; c++)
            img[r * COLS + c] *= 1.0f + (float)r / ROWS;
    tl_proto_frame h = {.series = 1,
                        .kind = TL_PROTO_PROJ,
                        .dtype = TL_PROTO_F32,
                        .rows = ROWS,
                        .cols = COLS,
                        .has_angle = true};
    for (int k = first; k < last; k++) {
        h.index = (uint64_t)k;
        h.angle = (cone ? 2 * M_PI : M_PI) * k / VIEWS;
        ck_assert_int_eq(tl_fx_send_frame(f, &h, img, sizeof img), 0);
    }
    if (end)
        ck_assert_int_eq(tl_fx_send_end(f, 1), 0);
}

static void send_scan(tl_fixture *f, bool cone)
{
    send_scan_start(f, cone);
    send_views(f, cone, 0, VIEWS, true);
}

/* Takes slice messages for up to 60 s until each of the n ids has its final (or, with
 * first, any message) in out[k]. */
static void take(tl_fixture *f, void *sub, const char *const *ids, int n, bool first,
                 got_slice *out)
{
    int have = 0;
    for (int k = 0; k < n; k++)
        out[k].final = false;
    for (double t0 = tl_fx_seconds(); have < n && tl_fx_seconds() - t0 < 60;) {
        zmq_msg_t parts[TL_PROTO_MAX_PARTS];
        tl_proto_msg m;
        int np = tl_fx_recv_slice(f, sub, 100, parts, &m);
        if (np == 0)
            continue;
        const tl_proto_slice *s = &m.slice;
        for (int k = 0; k < n; k++) {
            if (!tl_proto_str_eq(s->id, ids[k]) || out[k].final || !(first || s->final))
                continue;
            got_slice *g = &out[k];
            snprintf(g->id, sizeof g->id, "%s", ids[k]);
            g->final = true;
            snprintf(g->kernel, sizeof g->kernel, "%.*s", (int)s->kernel.len, s->kernel.ptr);
            g->h = s->shape[0];
            g->w = s->shape[1];
            g->planes = s->planes;
            g->box_step = s->box_step;
            memcpy(g->orientation, s->orientation, sizeof g->orientation);
            free(g->px);
            g->px = malloc(s->payload_len);
            ck_assert_ptr_nonnull(g->px);
            memcpy(g->px, s->payload, s->payload_len);
            have++;
        }
        tl_proto_close(parts, np);
    }
    ck_assert_msg(have == n, "%d of %d slices came", have, n);
}

static void release(got_slice *g, int n)
{
    for (int k = 0; k < n; k++) {
        free(g[k].px);
        g[k].px = NULL;
    }
}

/* The plane slice (set_slice kind "plane") of the box's plane k. */
static void plane_spec(char *buf, size_t len, int k)
{
    double z = CZ + (k - (DEPTH - 1) / 2.0);
    snprintf(buf, len,
             "{\"id\":\"p%d\",\"kind\":\"plane\",\"size\":[%d,%d],\"pin\":true,"
             "\"orientation\":[%d,0,0,0,%d,0,%.17g,%.17g,%.17g]}",
             k, BH, BW, BW, BH, CX - BW / 2.0, CY - BH / 2.0, z);
}

static void box_is_its_planes(bool cone)
{
    tl_fixture f;
    const char *args[] = {"--backend", backend_name(), "--set", "slices.incremental=false",
                          NULL};
    ck_assert_int_eq(tl_fx_start(&f, cone ? "box-cone" : "box", args), 0);
    const char *ids[DEPTH + 1] = {"box", "p0", "p1", "p2", "p3", "p4"};
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"box\"," BOX "}"));
    for (int k = 0; k < DEPTH; k++) {
        char spec[256];
        plane_spec(spec, sizeof spec, k);
        json_decref(tl_fx_ok(&f, "set_slice", spec));
    }
    void *sub = tl_fx_subscribe(&f, "slice/");
    send_scan(&f, cone);
    static got_slice got[DEPTH + 1];
    take(&f, sub, ids, DEPTH + 1, false, got);
    const got_slice *box = &got[0];
    ck_assert_uint_eq(box->planes, DEPTH);
    ck_assert(box->box_step == 1.0);
    ck_assert_uint_eq(box->h, DEPTH * BH);
    ck_assert_uint_eq(box->w, BW);
    for (int i = 0; i < 9; i++)
        ck_assert_msg(box->orientation[i] == got[1].orientation[i], "orientation[%d]", i);
    const size_t plane = (size_t)BH * BW;
    for (int k = 0; k < DEPTH; k++) {
        ck_assert_uint_eq(got[1 + k].planes, 0);
        ck_assert_msg(same_pixels(box->px + k * plane, got[1 + k].px, plane),
                      "%s: the box's plane %d differs from its plane slice", cone ? "cone" : "parallel",
                      k);
    }
    /* the planes are different planes: the density grows with z */
    double rel = tl_rel_l2(got[1].px, got[DEPTH].px, plane);
    ck_assert_msg(rel > 0.05, "planes 0 and %d alike (%.3g)", DEPTH - 1, rel);
    zmq_close(sub);
    release(got, DEPTH + 1);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}

START_TEST(box_equals_its_planes)
{
    box_is_its_planes(false);
    box_is_its_planes(true);
}
END_TEST

/* The relative L2 error of b against a and the largest difference over a's range. */
static void compare(const got_slice *a, const got_slice *b, double *rel_l2, double *max_rel)
{
    ck_assert_uint_eq(a->h, b->h);
    ck_assert_uint_eq(a->w, b->w);
    double worst = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < (size_t)a->h * a->w; i++) {
        worst = fmax(worst, fabs((double)b->px[i] - a->px[i]));
        lo = fmin(lo, a->px[i]);
        hi = fmax(hi, a->px[i]);
    }
    *rel_l2 = tl_rel_l2(b->px, a->px, (size_t)a->h * a->w);
    *max_rel = worst / (hi - lo);
}

START_TEST(incremental_box_and_whole_volume)
{
    tl_fixture f;
    const char *args[] = {"--backend", backend_name(), NULL};
    ck_assert_int_eq(tl_fx_start(&f, "box-inc", args), 0);
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"watch\"," BOX "}"));
    void *sub = tl_fx_subscribe(&f, "slice/");
    ck_assert(tl_fx_wait_status(&f, "slices.wanted", 1, 10));
    /* half the views, a read-out of them (the box's accumulators built), the rest: the
     * final is the first read-out's sums plus the other half's updates */
    static got_slice watch[1], late[3];
    const char *wid[] = {"watch"};
    send_scan_start(&f, false);
    send_views(&f, false, 0, VIEWS / 2, false);
    take(&f, sub, wid, 1, true, watch);
    send_views(&f, false, VIEWS / 2, VIEWS, true);
    take(&f, sub, wid, 1, false, watch);
    /* the incremental kernels: cpu-f32-incremental on the CPU backend, delta-* on CUDA */
    ck_assert_msg(strstr(watch[0].kernel, "incremental") || strstr(watch[0].kernel, "delta-"),
                  "the box's final came from %s", watch[0].kernel);
    /* after the end: the same box, a whole-volume box and one of its rows, each
     * reconstructed from the whole window at once */
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"late\"," BOX "}"));
    json_t *all = tl_fx_ok(&f, "set_slice", "{\"id\":\"all\",\"kind\":\"box\",\"pin\":true}");
    ck_assert_str_eq(json_string_value(json_object_get(all, "kind")), "box");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(all, "box"), "planes")),
                     ROWS);
    json_decref(all);
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"row5\",\"kind\":\"row\",\"z\":5,\"pin\":true}"));
    const char *lid[] = {"late", "all", "row5"};
    take(&f, sub, lid, 3, true, late);
    double rel_l2, max_rel;
    compare(&late[0], &watch[0], &rel_l2, &max_rel);
    printf("box kept incrementally (%s) vs from the whole window (%s): relative L2 %.3g, max "
           "%.3g of the range\n",
           watch[0].kernel, late[0].kernel, rel_l2, max_rel);
    ck_assert_msg(rel_l2 <= 2e-5 && max_rel <= 1e-4, "incremental box: %.3g, %.3g", rel_l2,
                  max_rel);
    ck_assert_uint_eq(late[1].planes, ROWS);
    ck_assert_uint_eq(late[1].h, ROWS * COLS);
    ck_assert_uint_eq(late[1].w, COLS);
    const size_t plane = (size_t)COLS * COLS;
    ck_assert_msg(same_pixels(late[1].px + 5 * plane, late[2].px, plane),
                  "the whole volume's plane 5 is not row slice 5");
    zmq_close(sub);
    release(watch, 1);
    release(late, 3);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A set_slice that must fail with error `name`, its message holding why. */
static void refused(tl_fixture *f, const char *args, const char *name, const char *why)
{
    json_t *r = tl_fx_request(f, "set_slice", args);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(json_is_false(json_object_get(r, "ok")), "%s accepted", args);
    ck_assert_str_eq(json_string_value(json_object_get(r, "name")), name);
    const char *msg = json_string_value(json_object_get(r, "message"));
    ck_assert_msg(strstr(msg, why), "'%s' lacks '%s'", msg, why);
    json_decref(r);
}

START_TEST(refusals)
{
    tl_fixture f;
    const char *args[] = {"--set", "engine.iterative=true", NULL};
    ck_assert_int_eq(tl_fx_start(&f, "box-no", args), 0);
    refused(&f, "{\"id\":\"b\"," BOX ",\"method\":\"sirt\"}", "E_BAD_ARG",
            "a box is reconstructed by FBP");
    refused(&f, "{\"id\":\"b\",\"kind\":\"box\",\"size\":[4,4]}", "E_RANGE", "size");
    refused(&f, "{\"id\":\"b\",\"kind\":\"box\",\"size\":[2000,4,4]}", "E_RANGE",
            "at most 1024 planes");
    refused(&f, "{\"id\":\"b\",\"kind\":\"box\",\"center\":[0,0,1e6]}", "E_RANGE",
            "outside the volume");
    send_scan(&f, false);
    ck_assert(tl_fx_wait_status(&f, "scan.held", VIEWS, 30));
    /* planes 5.5 .. 18.5: the top ones above the detector's 16 rows */
    refused(&f, "{\"id\":\"b\",\"kind\":\"box\",\"size\":[14,4,4],\"center\":[0,0,12]}",
            "E_RANGE", "outside the volume");
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.defined"), 0);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

int main(void)
{
    tl_backend_kind b;
    char why[256];
    if (!tl_backend_parse(backend_name(), &b) || !tl_backend_available(b, why, sizeof why)) {
        printf("SKIP: backend %s is not usable here\n", backend_name());
        return 77;
    }
    Suite *s = suite_create("box");
    TCase *tc = tcase_create("box");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, box_equals_its_planes);
    tcase_add_test(tc, incremental_box_and_whole_volume);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return tl_run_suite(s, false);
}
