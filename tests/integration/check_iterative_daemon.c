/* check_iterative_daemon.c — live iterative slices (set_slice "method", PROTOCOL.md §10 and
 * §12; issue #28) from a real tomolived on the CPU backend, with engine.iterative on:
 *
 *   live       a slice watched while 15 views of a cylinder stream in is published as
 *              SIRT ("kernel" sirt), its "iterations" growing from message to message,
 *              its residual falling while it refines after the data is complete, and its
 *              final comes once it has converged (max_iterations since the last change);
 *              every frame is accepted;
 *   late       a slice first wanted after the end starts from the FBP of the whole window
 *              and runs exactly max_iterations in read-outs of `iterations` each (the last
 *              one shorter): its final equals the engine's own FBP + SIRT run in this
 *              process, and is nearer the cylinder than the FBP slice's final (few views:
 *              the iterations remove FBP's streaks); list_slices and status report it;
 *   cone stack a cone-beam slice iterated as the middle of a stack of 5 planes (one
 *              problem, "planes" and "spacing"): its final equals the same stack solved
 *              in this process (on CUDA with two GPUs, the daemon's split over both);
 *   refusals   unknown methods, OS-EM from an FBP start, options without a method, and an
 *              iterative slice on a scan whose engine keeps no measurements
 *              (engine.iterative off): E_BAD_ARG saying why.
 * TL_ITER_BACKEND=cuda runs the daemon and the in-process engine on the CUDA backend
 * (tests/gpu/iterative_daemon_cuda.sh), equal within the exact mode instead of to 1e-6.
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

enum { ROWS = 2, COLS = 64, VIEWS = 15, MAX_IT = 20, STEP = 3 };
#define RADIUS 20.0

/* The backend under test (TL_ITER_BACKEND: cpu, the default, or cuda). */
static const char *backend_name(void)
{
    const char *be = getenv("TL_ITER_BACKEND");
    return be && *be ? be : "cpu";
}

/* One slice's messages as a subscriber saw them. */
typedef struct {
    long messages;
    uint32_t last_iterations;
    double last_residual;
    uint32_t last_projections; /* the last message's projections_used */
    long iterations_fell; /* a message with fewer iterations than the one before */
    long residual_rose;   /* refinement after the last frame: residual above the one before */
    bool final;
    uint32_t final_iterations;
    const char *kernel_seen; /* "sirt", or the first other kernel name seen */
    float px[COLS * COLS];
} seen;

/* Takes one message, if one comes within 100 ms, into the record of its id (ids[k]). */
static bool take(void *sock, tl_proto_decoder *dec, const char *const *ids, seen *rec, int n)
{
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 100) <= 0)
        return false;
    zmq_msg_t parts[TL_PROTO_MAX_PARTS];
    tl_proto_error e;
    tl_proto_msg m;
    int np = tl_proto_recv(sock, parts, TL_PROTO_MAX_PARTS, 0, &e);
    tl_proto_err rc = tl_proto_decode_parts(dec, parts, np, TL_MSG_SLICE, &m, &e);
    ck_assert_msg(rc == TL_PROTO_OK, "%s: %s", tl_proto_err_name(rc), e.message);
    int k = 0;
    while (k < n && !tl_proto_str_eq(m.slice.id, ids[k]))
        k++;
    ck_assert_int_lt(k, n);
    seen *s = &rec[k];
    const tl_proto_slice *h = &m.slice;
    if (s->messages && h->iterations < s->last_iterations)
        s->iterations_fell++;
    /* refinement: both messages of the whole window (the first with the last view may
     * rise above one of a view fewer, whose b lacked that view) */
    if (s->messages && h->iterations && h->residual > s->last_residual * (1 + 1e-9) &&
        s->last_projections == VIEWS && h->projections_used == VIEWS &&
        h->iterations > s->last_iterations)
        s->residual_rose++;
    if (!s->kernel_seen || strcmp(s->kernel_seen, "sirt") == 0)
        s->kernel_seen = tl_proto_str_eq(h->kernel, "sirt") ? "sirt" : "other";
    s->messages++;
    s->last_iterations = h->iterations;
    s->last_residual = h->residual;
    s->last_projections = h->projections_used;
    if (h->final) {
        s->final = true;
        s->final_iterations = h->iterations;
        ck_assert_uint_le(h->shape[0] * h->shape[1], COLS * COLS); /* cone: CCOLS^2 */
        ck_assert_uint_eq(h->payload_len, h->shape[0] * h->shape[1] * sizeof *s->px);
        memcpy(s->px, h->payload, h->payload_len);
    }
    tl_proto_close(parts, np);
    return true;
}

/* Reads until every one of the n slices has its final (false after 60 s). */
static bool read_finals(void *sock, tl_proto_decoder *dec, const char *const *ids, seen *rec,
                        int n)
{
    for (double t0 = tl_fx_seconds(); tl_fx_seconds() - t0 < 60;) {
        int done = 0;
        for (int k = 0; k < n; k++)
            done += rec[k].final;
        if (done == n)
            return true;
        take(sock, dec, ids, rec, n);
    }
    return false;
}

static void send_scan(tl_fixture *f, uint64_t series)
{
    tl_proto_scan s = {.series = series,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = ROWS,
                       .cols = COLS,
                       .dtype = TL_PROTO_F32,
                       .window = VIEWS,
                       .already_linear = true};
    ck_assert_int_eq(tl_fx_send_scan(f, &s), 0);
}

/* The same views in an engine of configuration c made here. */
static tl_engine *engine_holding(const tl_engine_config *c, const float *img, int n, double arc)
{
    tl_engine *e;
    ck_assert_msg(tl_engine_create(c, &e) == TL_OK, "%s", tl_engine_last_error(NULL));
    for (int k = 0; k < n; k++) {
        tl_frame fr = {.kind = TL_FRAME_PROJ,
                       .index = (uint64_t)k,
                       .angle = arc * k / n,
                       .dtype = TL_DTYPE_F32,
                       .rows = c->rows,
                       .cols = c->cols,
                       .data = img};
        ck_assert_int_eq(tl_engine_submit(e, &fr), TL_OK);
    }
    return e;
}

/* The views of a cylinder (every one the same: a centred disk), then the end. */
static void send_views(tl_fixture *f, uint64_t series)
{
    static float img[ROWS * COLS];
    tl_fx_disk_projection(img, ROWS, COLS, RADIUS);
    ck_assert_int_eq(tl_fx_send_views(f, series, img, ROWS, COLS, VIEWS, M_PI), 0);
}

static void set_slice(tl_fixture *f, const char *id, const char *method)
{
    char args[512];
    snprintf(args, sizeof args,
             "{\"id\":\"%s\",\"kind\":\"row\",\"z\":0,\"size\":[%d,%d],"
             "\"update\":{\"every\":1,\"max_rate\":1000}%s}",
             id, COLS, COLS, method);
    json_decref(tl_fx_ok(f, "set_slice", args));
}

#define SIRT                                                                      \
    ",\"method\":\"sirt\",\"iterative\":{\"iterations\":3,\"max_iterations\":20," \
    "\"nonneg\":true}"

/* The engine's own FBP + MAX_IT iterations of non-negative SIRT of the same scan. */
static void in_process(float *fbp, float *out)
{
    tl_engine_config cfg;
    tl_engine_config_init(&cfg, ROWS, COLS, VIEWS);
    ck_assert(tl_backend_parse(backend_name(), &cfg.backend));
    cfg.dtype = TL_DTYPE_F32;
    cfg.already_linear = true;
    cfg.keep_measurements = true;
    static float img[ROWS * COLS];
    tl_fx_disk_projection(img, ROWS, COLS, RADIUS);
    tl_engine *e = engine_holding(&cfg, img, VIEWS, M_PI);
    tl_slice_spec sp;
    tl_slice_spec_row(&sp, 0, COLS, COLS);
    int id;
    ck_assert_int_eq(tl_engine_add_slice(e, &sp, &id), TL_OK);
    ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &fbp, NULL), TL_OK);
    tl_iter_options o = {.method = TL_ITER_SIRT,
                         .iterations = MAX_IT,
                         .relaxation = 1,
                         .nonneg = true};
    uint32_t done;
    ck_assert_int_eq(tl_engine_iterate(e, &id, 1, &o, fbp, out, NULL, &done, NULL), TL_OK);
    ck_assert_uint_eq(done, MAX_IT);
    tl_engine_destroy(e);
}

/* Relative L2 distance of img from the cylinder's slice (1 inside the disk). */
static double phantom_error(const float *img)
{
    double num = 0, den = 0, c = (COLS - 1) / 2.0;
    for (int i = 0; i < COLS; i++)
        for (int j = 0; j < COLS; j++) {
            double r2 = (i - c) * (i - c) + (j - c) * (j - c);
            double want = r2 < RADIUS * RADIUS ? 1 : 0, d = img[i * COLS + j] - want;
            num += d * d;
            den += want * want;
        }
    return sqrt(num / den);
}

START_TEST(live_and_late)
{
    tl_fixture f;
    const char *args[] = {"--backend", backend_name(), "--set", "engine.iterative=true", NULL};
    ck_assert_int_eq(tl_fx_start(&f, "iter", args), 0);
    set_slice(&f, "live", SIRT);
    set_slice(&f, "late", SIRT);
    set_slice(&f, "fbp", "");
    const char *const ids[] = {"live", "late", "fbp"};
    static seen rec[3];
    void *sub = tl_fx_subscribe(&f, "slice/live/");
    /* the subscription reaches the daemon before the scan: wanted from the first frame */
    ck_assert(tl_fx_wait_status(&f, "slices.wanted", 1, 10));
    send_scan(&f, 1);
    send_views(&f, 1);
    ck_assert(read_finals(sub, f.dec, ids, rec, 1));
    ck_assert_int_eq(tl_fx_status_int(&f, "frames.accepted.proj"), VIEWS);
    ck_assert_str_eq(rec[0].kernel_seen, "sirt");
    ck_assert_int_gt(rec[0].messages, 2);
    ck_assert_int_eq(rec[0].iterations_fell, 0);
    ck_assert_int_eq(rec[0].residual_rose, 0);
    ck_assert_uint_ge(rec[0].final_iterations, MAX_IT);
    printf("  live: %ld messages, the final after %u iterations, residual %.4f\n", rec[0].messages,
           rec[0].final_iterations, rec[0].last_residual);

    /* late: wanted only now, after the end: FBP of the whole window, then MAX_IT */
    ck_assert_int_eq(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "slice/late/", 11), 0);
    ck_assert_int_eq(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "slice/fbp/", 10), 0);
    ck_assert(read_finals(sub, f.dec, ids, rec, 3));
    ck_assert_uint_eq(rec[1].final_iterations, MAX_IT);
    ck_assert_int_eq(rec[1].messages, (MAX_IT + STEP - 1) / STEP);
    static float fbp[COLS * COLS], want[COLS * COLS];
    in_process(fbp, want);
    double num = 0, den = 0;
    for (size_t i = 0; i < COLS * COLS; i++) {
        num += (rec[1].px[i] - want[i]) * (rec[1].px[i] - want[i]);
        den += want[i] * want[i];
    }
    /* the CPU backend is deterministic; the GPU's sums may differ in order */
    double tol = strcmp(backend_name(), "cpu") == 0 ? 1e-6 : 2e-5;
    ck_assert_msg(sqrt(num / den) < tol, "late: %g from the engine's own run", sqrt(num / den));
    double e_fbp = phantom_error(rec[2].px), e_it = phantom_error(rec[1].px);
    printf("  15 views of a cylinder: FBP %.4f, FBP + %d SIRT iterations %.4f from the slice\n",
           e_fbp, MAX_IT, e_it);
    ck_assert_msg(e_it < 0.8 * e_fbp, "SIRT %.4f vs FBP %.4f", e_it, e_fbp);

    json_t *list = tl_fx_ok(&f, "list_slices", NULL);
    size_t i;
    json_t *v;
    int iterative = 0;
    json_array_foreach(list, i, v)
    {
        const char *method = json_string_value(json_object_get(v, "method"));
        json_t *it = json_object_get(v, "iterative");
        if (strcmp(method, "sirt") != 0) {
            ck_assert_str_eq(method, "fbp");
            ck_assert_ptr_null(it);
            continue;
        }
        iterative++;
        ck_assert(json_is_true(json_object_get(it, "converged")));
        ck_assert_int_eq(json_integer_value(json_object_get(it, "max_iterations")), MAX_IT);
        ck_assert_str_eq(json_string_value(json_object_get(it, "start")), "fbp");
    }
    ck_assert_int_eq(iterative, 2);
    json_decref(list);
    ck_assert_int_ge(tl_fx_status_int(&f, "slices.iterations"),
                     (long long)rec[0].final_iterations + MAX_IT);
    ck_assert_int_eq(tl_fx_status_int(&f, "slices.failed"), 0);
    zmq_close(sub);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* ---- cone beam: a stack around the slice ---------------------------------------------- */

enum { CROWS = 12, CCOLS = 24, CVIEWS = 12, CPLANES = 5, CMAX = 6 };
#define CONE_SIRT                                                                \
    ",\"method\":\"sirt\",\"iterative\":{\"iterations\":3,\"max_iterations\":6," \
    "\"nonneg\":true,\"start\":\"zero\",\"planes\":5,\"spacing\":1.5}"

/* A smooth blob, the same in every view of the cone scan. */
static void cone_view(float *img)
{
    for (int v = 0; v < CROWS; v++)
        for (int u = 0; u < CCOLS; u++) {
            double dv = v - (CROWS - 1) / 2.0, du = u - (CCOLS - 1) / 2.0;
            img[v * CCOLS + u] = (float)exp(-(du * du + dv * dv) / 30.0);
        }
}

static tl_engine_config cone_config(void)
{
    tl_engine_config c;
    tl_engine_config_init(&c, CROWS, CCOLS, CVIEWS);
    ck_assert(tl_backend_parse(backend_name(), &c.backend));
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.geometry = TL_GEOMETRY_CONE;
    c.cone = (tl_cone_config){.source_origin = 300,
                              .source_detector = 450,
                              .pixel_u = 0.5,
                              .pixel_v = 0.5};
    c.keep_measurements = true;
    return c;
}

/* The daemon's cone-beam scan, the views, the end. */
static void send_cone_scan(tl_fixture *f, uint64_t series)
{
    tl_proto_scan sc = {.series = series,
                        .geometry = TL_PROTO_CONE,
                        .rows = CROWS,
                        .cols = CCOLS,
                        .dtype = TL_PROTO_F32,
                        .window = CVIEWS,
                        .already_linear = true,
                        .source_origin = 300,
                        .source_detector = 450,
                        .pixel_size = {0.5, 0.5}};
    ck_assert_int_eq(tl_fx_send_scan(f, &sc), 0);
    static float img[CROWS * CCOLS];
    cone_view(img);
    ck_assert_int_eq(tl_fx_send_views(f, series, img, CROWS, CCOLS, CVIEWS, 2 * M_PI), 0);
}

/* The same stack in this process: CPLANES planes around the middle row, CMAX SIRT
 * iterations from zeros; the middle plane into out. */
static void cone_in_process(float *out)
{
    tl_engine_config c = cone_config();
    static float img[CROWS * CCOLS];
    cone_view(img);
    tl_engine *e = engine_holding(&c, img, CVIEWS, 2 * M_PI);
    tl_slice_spec row;
    tl_slice_spec_row(&row, (CROWS - 1) / 2.0, CCOLS, CCOLS);
    int ids[CPLANES];
    for (uint32_t k = 0; k < CPLANES; k++) {
        tl_slice_spec plane;
        tl_slice_spec_stacked(&row, CROWS, k, CPLANES, 1.5, &plane);
        ck_assert_int_eq(tl_engine_add_slice(e, &plane, &ids[k]), TL_OK);
    }
    tl_iter_options o = {.method = TL_ITER_SIRT,
                         .iterations = CMAX,
                         .relaxation = 1,
                         .nonneg = true};
    static float stack[CPLANES * CCOLS * CCOLS];
    uint32_t done;
    ck_assert_msg(tl_engine_iterate(e, ids, CPLANES, &o, NULL, stack, NULL, &done, NULL) == TL_OK,
                  "%s", tl_engine_last_error(e));
    memcpy(out, stack + (CPLANES / 2) * CCOLS * CCOLS, sizeof(float) * CCOLS * CCOLS);
    tl_engine_destroy(e);
}

/* A cone-beam slice iterated as the middle of a stack of 5 planes (one problem), its
 * final equal to the same stack solved in this process; planes on a parallel-beam scan
 * refused. */
START_TEST(cone_stack)
{
    tl_fixture f;
    /* on CUDA with two GPUs the daemon splits the stack over both (daemon.gpus) */
    const bool two = strcmp(backend_name(), "cuda") == 0 &&
                     tl_backend_device_count(TL_BACKEND_CUDA, NULL, 0) >= 2;
    const char *args[] =
        {"--backend",          backend_name(),    "--set", "engine.iterative=true",
         two ? "--set" : NULL, "daemon.gpus=0,1", NULL};
    ck_assert_int_eq(tl_fx_start(&f, "iter-cone", args), 0);
    char sargs[512];
    snprintf(sargs, sizeof sargs,
             "{\"id\":\"stack\",\"kind\":\"row\",\"z\":%g,\"size\":[%d,%d],"
             "\"update\":{\"every\":1,\"max_rate\":1000}" CONE_SIRT "}",
             (CROWS - 1) / 2.0, CCOLS, CCOLS);
    json_decref(tl_fx_ok(&f, "set_slice", sargs));
    /* wanted only after the end, as "late" above: x starts from the whole window */
    send_cone_scan(&f, 1);
    ck_assert(tl_fx_wait_status(&f, "frames.accepted.proj", CVIEWS, 10));
    if (two)
        ck_assert(tl_fx_wait_log(&f, "event=cone_iterative_gpus series=1 gpus=2", 10));
    void *sub = tl_fx_subscribe(&f, "slice/stack/");
    const char *const ids[] = {"stack"};
    static seen rec[1];
    ck_assert(read_finals(sub, f.dec, ids, rec, 1));
    ck_assert_uint_eq(rec[0].final_iterations, CMAX);
    static float want[CCOLS * CCOLS];
    cone_in_process(want);
    double num = 0, den = 0;
    for (size_t i = 0; i < CCOLS * CCOLS; i++) {
        num += (rec[0].px[i] - want[i]) * (rec[0].px[i] - want[i]);
        den += want[i] * want[i];
    }
    double tol = strcmp(backend_name(), "cpu") == 0 ? 1e-6 : 2e-5;
    printf("  cone beam, a stack of %d planes%s: %ld messages, final after %u iterations, "
           "%.2e from the engine's own run\n",
           CPLANES, two ? " on two GPUs" : "", rec[0].messages, rec[0].final_iterations,
           sqrt(num / den));
    ck_assert_msg(den > 0 && sqrt(num / den) < tol, "stack: %g from the engine's own run",
                  sqrt(num / den));
    zmq_close(sub);
    ck_assert_int_eq(tl_fx_stop(&f, SIGTERM, NULL), 0);
    tl_fx_cleanup(&f);
}
END_TEST

/* A set_slice that must fail with E_BAD_ARG, its message holding why. */
static void bad_slice(tl_fixture *f, const char *method, const char *why)
{
    char args[512];
    snprintf(args, sizeof args, "{\"id\":\"x\",\"kind\":\"row\",\"z\":0%s}", method);
    json_t *r = tl_fx_request(f, "set_slice", args);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(json_is_false(json_object_get(r, "ok")), "%s accepted", method);
    ck_assert_str_eq(json_string_value(json_object_get(r, "name")), "E_BAD_ARG");
    const char *msg = json_string_value(json_object_get(r, "message"));
    ck_assert_msg(strstr(msg, why), "'%s' lacks '%s'", msg, why);
    json_decref(r);
}

START_TEST(refusals)
{
    tl_fixture f;
    const char *args[] = {"--backend", backend_name(), NULL};
    ck_assert_int_eq(tl_fx_start(&f, "iter-no", args), 0);
    bad_slice(&f, ",\"method\":\"art\"", "expected fbp, sirt, sart, os-sart or osem");
    bad_slice(&f, ",\"method\":\"osem\",\"iterative\":{\"start\":\"fbp\"}", "OS-EM starts");
    bad_slice(&f, ",\"iterative\":{\"iterations\":2}", "need an iterative \"method\"");
    bad_slice(&f, ",\"method\":\"sirt\",\"iterative\":{\"iterations\":0}", "iterations must be");
    bad_slice(&f, ",\"method\":\"os-sart\",\"iterative\":{\"relaxation\":2}", "relaxation");
    /* the engine's own option checks (tl_iter_options_check) */
    bad_slice(&f, ",\"method\":\"os-sart\",\"iterative\":{\"subsets\":0}", "subsets must be >= 1");
    bad_slice(&f, ",\"method\":\"sirt\",\"iterative\":{\"tv\":-1}", "TV weight -1");
    bad_slice(&f, ",\"method\":\"sirt\",\"iterative\":{\"tolerance\":-0.5}", "tolerance -0.5");
    bad_slice(&f, ",\"method\":\"sirt\",\"iterative\":{\"projector\":\"siddon\"}", "joseph");
    /* before a scan: accepted; the scan without measurements cannot serve it (logged) */
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"early\",\"kind\":\"row\",\"z\":0" SIRT "}"));
    send_scan(&f, 1);
    ck_assert(tl_fx_wait_log(&f, "event=slice_not_served", 10));
    char *log = tl_fx_log(&f);
    ck_assert_msg(strstr(log, "engine.iterative = true"), "%s", log);
    free(log);
    bad_slice(&f, SIRT, "engine.iterative = true");
    bad_slice(&f, ",\"method\":\"sirt\",\"iterative\":{\"planes\":0}", "planes must be 1..1024");
    bad_slice(&f, ",\"method\":\"sirt\",\"iterative\":{\"spacing\":-1}", "spacing must be");
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
    Suite *s = suite_create("iterative_daemon");
    TCase *tc = tcase_create("daemon");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, live_and_late);
    tcase_add_test(tc, cone_stack);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return tl_run_suite(s, true); /* no fork: CUDA, once used, does not survive one */
}
