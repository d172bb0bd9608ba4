/* check_push.c — `tomolive push` against a PULL socket of the test's own: the message
 * sequence (scan with its fields, darks, flats, projections, end), the pixels (the camera
 * model inverted gives back the phantom's line integrals, scaled to --attenuation, at the
 * right angles and axis), disorder and loss (the drop list is exactly what is missing,
 * the shuffle rate is roughly what was asked, both repeat for a seed), pacing, TIFF input,
 * --turns, frames in row bands (--bands: the same frames, cut into bands that each carry
 * the frame's header) and the usage errors. Frames in GPU memory (--cuda-ipc): where there is no GPU
 * (or no CUDA in the build) push fails at once and says why; on a GPU the test plays the
 * daemon's part (maps the ring, reads each frame, sends releases) and the frames must be
 * byte for byte those of the host path, from the bank and from per-frame uploads.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clients/tiff.h"
#include "gpu/ipc.h"
#include "gpu/phantom.h"
#include "protocol/protocol.h"
#include "tests/integration/clients_util.h"
#include "tests/testutil.h"

typedef struct {
    tl_proto_msg m;
    void *payload; /* a copy */
    size_t len;
} rmsg;

typedef struct {
    rmsg *v;
    size_t n;
} stream;

static char *dir;
static void *ctx, *pull;
static char ep[256];

static void setup(void)
{
    dir = tl_tmpdir("push");
    ck_assert_ptr_nonnull(dir);
    ctx = zmq_ctx_new();
    pull = tl_bind_loopback(ctx, ZMQ_PULL, ep, sizeof ep);
}

static void teardown(void)
{
    zmq_close(pull);
    zmq_ctx_term(ctx);
    tl_rm_rf(dir);
    free(dir);
}

static void free_stream(stream *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].payload);
    free(s->v);
}

/* The next message on pull (one is waiting), decoded into r->m; it must decode. Returns
 * its part count (parts stay open: r->m points into them). */
static int recv_msg(tl_proto_decoder *d, size_t seen, zmq_msg_t *parts, rmsg *r)
{
    tl_proto_error err;
    int np = tl_proto_recv(pull, parts, TL_PROTO_MAX_PARTS, ZMQ_DONTWAIT, &err);
    ck_assert_int_gt(np, 0);
    ck_assert_msg(tl_proto_decode_parts(d, parts, np, TL_PROTO_INGEST, &r->m, &err) == TL_PROTO_OK,
                  "message %zu: %s: %s", seen, tl_proto_err_name(err.code), err.message);
    return np;
}

/* Appends r (its payload already copied out) to s and closes its parts; true at `end`. */
static bool keep_msg(stream *s, size_t *cap, rmsg *r, zmq_msg_t *parts, int np)
{
    r->m.scan.filter = (tl_proto_str){NULL, 0}; /* points into the header: not kept */
    tl_proto_close(parts, np);
    if (s->n == *cap)
        s->v = realloc(s->v, (*cap = *cap ? 2 * *cap : 256) * sizeof *s->v);
    s->v[s->n++] = *r;
    return r->m.type == TL_MSG_END;
}

/* Receives what the pusher pid sends until `end`, or until it has exited and nothing
 * came for two seconds after both its exit and the last message. The pusher's exit means
 * its frames were handed to the network (ZMQ_LINGER -1), not that our socket's I/O thread
 * has read them: on a loaded machine that comes later, so the quiet time counts from the
 * exit, not from the start. Every message must decode. */
static stream collect(pid_t pid)
{
    stream s = {NULL, 0};
    size_t cap = 0;
    tl_proto_decoder *d = tl_proto_decoder_new();
    double quiet_since = tl_now_s(), start = tl_now_s();
    bool exited = false;
    for (;;) {
        ck_assert_msg(tl_now_s() - start < 60, "no end after 60 s (%zu messages)", s.n);
        zmq_pollitem_t it = {pull, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 50) <= 0) {
            if (!exited && !tl_client_running(pid))
                exited = true, quiet_since = tl_now_s();
            else if (exited && tl_now_s() - quiet_since > 2.0)
                break;
            continue;
        }
        quiet_since = tl_now_s();
        zmq_msg_t parts[TL_PROTO_MAX_PARTS];
        rmsg r = {.payload = NULL};
        int np = recv_msg(d, s.n, parts, &r);
        if (r.m.type == TL_MSG_FRAME) {
            r.len = r.m.frame.payload_len;
            r.payload = malloc(r.len ? r.len : 1);
            memcpy(r.payload, r.m.frame.payload, r.len);
            r.m.frame.payload = r.payload;
        }
        if (keep_msg(&s, &cap, &r, parts, np))
            break;
    }
    tl_proto_decoder_free(d);
    return s;
}

static stream push(const char *const *args, int *rc)
{
    const char *argv[64] = {"push", "--endpoint", ep, "--quiet"};
    size_t n = 4;
    for (size_t i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = tl_client_start(dir, argv);
    stream s = collect(pid);
    *rc = tl_client_wait(pid, 60);
    return s;
}

/* Checks the structure: scan, darks 0.., flats 0.., projections, end (when with_end);
 * returns the projections' indices in arrival order. */
static uint64_t *check_sequence(const stream *s, uint64_t series, uint32_t rows, uint32_t cols,
                                tl_proto_dtype dtype, uint32_t ndark, uint32_t nflat,
                                size_t *nproj, bool with_end)
{
    ck_assert_uint_ge(s->n, 1 + ndark + nflat + (with_end ? 1 : 0));
    ck_assert_int_eq(s->v[0].m.type, TL_MSG_SCAN);
    const tl_proto_scan *sc = &s->v[0].m.scan;
    ck_assert_uint_eq(sc->series, series);
    ck_assert_int_eq(sc->geometry, TL_PROTO_PARALLEL);
    ck_assert_uint_eq(sc->rows, rows);
    ck_assert_uint_eq(sc->cols, cols);
    ck_assert_int_eq(sc->dtype, dtype);
    ck_assert_uint_eq(sc->darks, ndark);
    ck_assert_uint_eq(sc->flats, nflat);
    ck_assert_uint_eq(sc->first_index, 0);
    size_t end = s->n - (with_end ? 1 : 0);
    if (with_end) {
        ck_assert_int_eq(s->v[s->n - 1].m.type, TL_MSG_END);
        ck_assert_uint_eq(s->v[s->n - 1].m.end.series, series);
    }
    size_t bytes = (size_t)rows * cols * tl_proto_dtype_size(dtype);
    uint64_t *idx = malloc((end + 1) * sizeof *idx);
    *nproj = 0;
    uint64_t prev_t = 0;
    for (size_t i = 1; i < end; i++) {
        const tl_proto_frame *f = &s->v[i].m.frame;
        ck_assert_int_eq(s->v[i].m.type, TL_MSG_FRAME);
        ck_assert_uint_eq(f->series, series);
        ck_assert_uint_eq(f->rows, rows);
        ck_assert_uint_eq(f->cols, cols);
        ck_assert_int_eq(f->dtype, dtype);
        ck_assert_uint_eq(f->payload_len, bytes);
        ck_assert(f->has_t_acq);
        ck_assert_uint_ge(f->t_acq, prev_t); /* stamped at send, in send order */
        prev_t = f->t_acq;
        tl_proto_kind want = i <= ndark           ? TL_PROTO_DARK
                             : i <= ndark + nflat ? TL_PROTO_FLAT
                                                  : TL_PROTO_PROJ;
        ck_assert_int_eq(f->kind, want);
        if (want == TL_PROTO_DARK)
            ck_assert_uint_eq(f->index, i - 1);
        else if (want == TL_PROTO_FLAT)
            ck_assert_uint_eq(f->index, i - 1 - ndark);
        else
            idx[(*nproj)++] = f->index;
        ck_assert(f->has_angle == (want == TL_PROTO_PROJ));
    }
    return idx;
}

static double sample(const rmsg *r, size_t i)
{
    if (r->m.frame.dtype == TL_PROTO_U16)
        return ((const uint16_t *)r->payload)[i];
    return ((const float *)r->payload)[i];
}

/* The camera model inverted: -log((P - D) / (F - D)) with the received dark and flat
 * must be the phantom's line integrals at the frame's angle and the given axis, times one
 * scale for the whole scan that makes the largest of them about `atten`. */
static void check_pixels(const stream *s, uint32_t rows, uint32_t cols, double center,
                         double atten, double start_deg, uint32_t nproj, double tol)
{
    tl_camera cam;
    tl_camera_init(&cam);
    const rmsg *dark = &s->v[1], *flat = &s->v[2];
    size_t npix = (size_t)rows * cols;
    for (size_t i = 0; i < npix; i++) {
        ck_assert_double_le(fabs(sample(dark, i) - cam.dark), 1.0);
        ck_assert_double_le(fabs(sample(flat, i) - cam.dark - cam.flux),
                            cam.gain_variation * cam.flux + 1.0);
    }
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 0.45 * cols, (rows - 1) / 2.0, 0.45 * rows), 0);
    float *ref = malloc(npix * sizeof *ref), *li = malloc(npix * sizeof *li);
    double scale0 = NAN, maxli = 0;
    for (size_t m = 3; m < s->n && s->v[m].m.type == TL_MSG_FRAME; m++) {
        const tl_proto_frame *f = &s->v[m].m.frame;
        double want = (start_deg + (double)f->index * 180.0 / nproj) * M_PI / 180.0;
        ck_assert_double_eq_tol(f->angle, want, 1e-12);
        tl_phantom_project(&ph, f->angle, center, rows, cols, ref);
        double num = 0, den = 0;
        for (size_t i = 0; i < npix; i++) {
            double d = sample(dark, i);
            li[i] = (float)-log((sample(&s->v[m], i) - d) / (sample(flat, i) - d));
            num += li[i] * (double)ref[i];
            den += (double)ref[i] * ref[i];
            maxli = fmax(maxli, li[i]);
        }
        double scale = num / den;
        for (size_t i = 0; i < npix; i++)
            ref[i] = (float)(ref[i] * scale);
        double rel = tl_rel_l2(li, ref, npix);
        ck_assert_msg(rel <= tol, "projection %llu: relative L2 %.3g vs the phantom",
                      (unsigned long long)f->index, rel);
        if (isnan(scale0))
            scale0 = scale;
        ck_assert_msg(fabs(scale / scale0 - 1) <= 10 * tol, "density scale %g vs %g", scale,
                      scale0);
    }
    ck_assert_msg(maxli > 0.9 * atten && maxli < 1.1 * atten,
                  "largest line integral %g, asked for %g", maxli, atten);
    free(ref);
    free(li);
    tl_phantom_free(&ph);
}

START_TEST(test_push_sequence_and_pixels)
{
    int rc;
    const char *args[] = {"--rows",        "8",  "--cols",   "32",    "--projections", "60",
                          "--darks",       "1",  "--flats",  "1",     "--series",      "7",
                          "--window",      "50", "--center", "14.25", "--angles-deg",  "10:190",
                          "--attenuation", "3",  NULL};
    stream s = push(args, &rc);
    ck_assert_msg(rc == 0, "%s", tl_client_err());
    size_t np;
    uint64_t *idx = check_sequence(&s, 7, 8, 32, TL_PROTO_U16, 1, 1, &np, true);
    ck_assert_uint_eq(np, 60);
    for (size_t k = 0; k < np; k++) /* no shuffle: in order */
        ck_assert_uint_eq(idx[k], k);
    const tl_proto_scan *sc = &s.v[0].m.scan;
    ck_assert_uint_eq(sc->window, 50);
    ck_assert(sc->has_center);
    ck_assert_double_eq(sc->center, 14.25);
    check_pixels(&s, 8, 32, 14.25, 3.0, 10, 60, 5e-3);
    char line[256];
    snprintf(line, sizeof line, "pushed %zu frames (1 darks, 1 flats, 60 projections, 0 dropped)",
             s.n - 2);
    ck_assert_msg(strstr(tl_client_out(), line) != NULL, "%s", tl_client_out());
    free(idx);
    free_stream(&s);

    /* float32 counts, default axis (not sent) and window (the projection count) */
    const char *f32[] = {"--rows",  "4",       "--cols", "24",      "--projections",
                         "30",      "--darks", "1",      "--flats", "1",
                         "--dtype", "f32",     NULL};
    s = push(f32, &rc);
    ck_assert_msg(rc == 0, "%s", tl_client_err());
    idx = check_sequence(&s, 1, 4, 24, TL_PROTO_F32, 1, 1, &np, true);
    ck_assert_uint_eq(np, 30);
    ck_assert(!s.v[0].m.scan.has_center);
    ck_assert_uint_eq(s.v[0].m.scan.window, 30);
    check_pixels(&s, 4, 24, 11.5, 2.0, 0, 30, 1e-4);
    free(idx);
    free_stream(&s);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Pushes 1000 tiny projections with disorder; returns arrival order and the drop list. */
static void disorder_run(const char *seed, const char *shuffle, const char *drop, uint64_t **order,
                         size_t *n, uint64_t **lost, size_t *nlost)
{
    char list[1024];
    snprintf(list, sizeof list, "%s/dropped.txt", dir);
    const char *args[] = {"--rows", "1",           "--cols",    "8",       "--projections",
                          "1000",   "--darks",     "0",         "--flats", "0",
                          "--seed", seed,          "--shuffle", shuffle,   "--drop",
                          drop,     "--drop-list", list,        NULL};
    int rc;
    stream s = push(args, &rc);
    ck_assert_msg(rc == 0, "%s", tl_client_err());
    *order = check_sequence(&s, 1, 1, 8, TL_PROTO_U16, 0, 0, n, true);
    for (size_t i = 1; i + 1 < s.n; i++) { /* each angle belongs to its index */
        const tl_proto_frame *f = &s.v[i].m.frame;
        ck_assert_double_eq_tol(f->angle, (double)f->index * M_PI / 1000, 1e-12);
    }
    free_stream(&s);
    FILE *f = fopen(list, "r");
    ck_assert_ptr_nonnull(f);
    *lost = malloc(1000 * sizeof **lost);
    *nlost = 0;
    unsigned long long v;
    while (fscanf(f, "%llu", &v) == 1)
        (*lost)[(*nlost)++] = v;
    fclose(f);
    char line[256];
    snprintf(line, sizeof line, "(0 darks, 0 flats, %zu projections, %zu dropped)", *n, *nlost);
    ck_assert_msg(strstr(tl_client_out(), line) != NULL, "%s", tl_client_out());
}

START_TEST(test_push_disorder)
{
    uint64_t *order, *lost;
    size_t n, nlost;
    disorder_run("3", "20", "10", &order, &n, &lost, &nlost);
    /* the drop list is exactly the set of indices that never came, each came once */
    uint64_t *sorted = malloc(n * sizeof *sorted);
    memcpy(sorted, order, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_u64);
    ck_assert_uint_eq(n + nlost, 1000);
    size_t a = 0, b = 0;
    for (uint64_t k = 0; k < 1000; k++) {
        bool got = a < n && sorted[a] == k, gone = b < nlost && lost[b] == k;
        ck_assert_msg(got != gone, "index %llu: received %d, in the drop list %d",
                      (unsigned long long)k, got, gone);
        a += got;
        b += gone;
    }
    ck_assert_msg(nlost >= 50 && nlost <= 150, "%zu of 1000 dropped at 10 %%", nlost);
    /* each swap puts one or two projections after a later one */
    size_t descents = 0;
    for (size_t i = 0; i + 1 < n; i++)
        descents += order[i] > order[i + 1];
    ck_assert_msg(descents >= 100 && descents <= 500, "%zu descents at 20 %% shuffle", descents);
    for (size_t i = 0; i < n; i++) /* swaps reach a few positions, not across the scan */
        ck_assert_msg(llabs((long long)order[i] - (long long)sorted[i]) <= 40,
                      "index %llu at position %zu", (unsigned long long)order[i], i);

    /* the same seed gives the same run; another seed another one */
    uint64_t *order2, *lost2;
    size_t n2, nlost2;
    disorder_run("3", "20", "10", &order2, &n2, &lost2, &nlost2);
    ck_assert_uint_eq(n2, n);
    ck_assert_uint_eq(nlost2, nlost);
    ck_assert(!memcmp(order2, order, n * sizeof *order));
    ck_assert(!memcmp(lost2, lost, nlost * sizeof *lost));
    free(order2);
    free(lost2);
    disorder_run("4", "20", "10", &order2, &n2, &lost2, &nlost2);
    ck_assert(n2 != n || memcmp(order2, order, n * sizeof *order) != 0);
    free(order2);
    free(lost2);
    free(order);
    free(lost);
    free(sorted);
}
END_TEST

START_TEST(test_push_rate)
{
    const char *args[] = {"--rows", "2",       "--cols", "16",      "--projections",
                          "50",     "--darks", "0",      "--flats", "0",
                          "--rate", "100",     NULL};
    double t = tl_now_s();
    int rc;
    stream s = push(args, &rc);
    t = tl_now_s() - t;
    ck_assert_msg(rc == 0, "%s", tl_client_err());
    ck_assert_msg(t >= 0.45 && t < 10, "50 frames at 100 fps took %.3f s", t);
    /* deadlines are absolute (t0 + k / rate), so frame k leaves no earlier than k - 1
     * periods after frame 0, however late frame 0 itself went */
    uint64_t t0 = s.v[1].m.frame.t_acq;
    for (size_t k = 1; k + 1 < s.n; k++)
        ck_assert_msg(s.v[k].m.frame.t_acq - t0 + 10000000ull >= (k - 1) * 10000000ull,
                      "frame %zu sent %.3f ms after the first", k - 1,
                      (s.v[k].m.frame.t_acq - t0) * 1e-6);
    double secs = 0;
    const char *p = strstr(tl_client_out(), " in ");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p, " in %lf s", &secs), 1);
    ck_assert_msg(secs >= 0.45, "reported %g s", secs);
    free_stream(&s);
}
END_TEST

START_TEST(test_push_no_end_and_bind)
{
    const char *args[] = {"--rows", "2", "--cols", "4", "--projections", "5", "--no-end", NULL};
    int rc;
    stream s = push(args, &rc);
    ck_assert_msg(rc == 0, "%s", tl_client_err());
    ck_assert_uint_eq(s.n, 1 + 10 + 10 + 5);
    ck_assert_int_eq(s.v[s.n - 1].m.type, TL_MSG_FRAME);
    free_stream(&s);

    /* --bind: the pusher waits for its receiver to connect */
    char bound[64];
    int port = tl_free_port();
    snprintf(bound, sizeof bound, "tcp://127.0.0.1:%d", port);
    const char *bargs[] = {"push", "--bind", "--endpoint", bound,           "--quiet", "--rows",
                           "2",    "--cols", "4",          "--projections", "5",       NULL};
    pid_t pid = tl_client_start(dir, bargs);
    /* it is waiting (bound), and must still be after a while: the 0.2 s is the "while" that
     * it must not give up in, what is tested, not a wait for something to happen */
    tl_client_wait_listening(pid, port, 10);
    usleep(200000);
    ck_assert(tl_client_running(pid));
    void *p2 = zmq_socket(ctx, ZMQ_PULL);
    int linger = 0;
    zmq_setsockopt(p2, ZMQ_LINGER, &linger, sizeof linger);
    ck_assert_int_eq(zmq_connect(p2, bound), 0);
    void *keep = pull;
    pull = p2;
    s = collect(pid);
    pull = keep;
    ck_assert_int_eq(tl_client_wait(pid, 30), 0);
    zmq_close(p2);
    size_t np;
    uint64_t *idx = check_sequence(&s, 1, 2, 4, TL_PROTO_U16, 10, 10, &np, true);
    ck_assert_uint_eq(np, 5);
    free(idx);
    free_stream(&s);
}
END_TEST

static void write_stack(const char *name, tl_dtype t, uint32_t pages, uint32_t rows, uint32_t cols,
                        double base)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tl_tiff_writer w;
    ck_assert_msg(tl_tiff_create(&w, path, 0, err, sizeof err) == 0, "%s", err);
    size_t n = (size_t)rows * cols;
    void *buf = malloc(n * 4);
    for (uint32_t p = 0; p < pages; p++) {
        for (size_t i = 0; i < n; i++) {
            double v = base + p * 7 + i;
            if (t == TL_DTYPE_U16)
                ((uint16_t *)buf)[i] = (uint16_t)v;
            else
                ((float *)buf)[i] = (float)(v + 0.25);
        }
        ck_assert_msg(tl_tiff_write_page(&w, t, buf, rows, cols, err, sizeof err) == 0, "%s", err);
    }
    free(buf);
    ck_assert_msg(tl_tiff_finish(&w, err, sizeof err) == 0, "%s", err);
}

START_TEST(test_push_tiff)
{
    write_stack("p.tif", TL_DTYPE_U16, 6, 3, 5, 1000);
    write_stack("d.tif", TL_DTYPE_F32, 2, 3, 5, 10);
    write_stack("f.tif", TL_DTYPE_U16, 3, 3, 5, 5000);
    char p[1024], d[1024], f[1024], a[1024];
    snprintf(p, sizeof p, "%s/p.tif", dir);
    snprintf(d, sizeof d, "%s/d.tif", dir);
    snprintf(f, sizeof f, "%s/f.tif", dir);
    snprintf(a, sizeof a, "%s/angles.txt", dir);
    FILE *af = fopen(a, "w");
    const double deg[6] = {0, 1, 3, 6, 10, 15}; /* non-uniform */
    for (int i = 0; i < 6; i++)
        fprintf(af, "%g\n", deg[i]);
    fclose(af);
    const char *args[] = {"--tiff", p, "--tiff-darks", d, "--tiff-flats", f, "--angles", a, NULL};
    int rc;
    stream s = push(args, &rc);
    ck_assert_msg(rc == 0, "%s", tl_client_err());
    size_t np;
    /* darks are float32, the rest uint16: everything goes as float32 */
    uint64_t *idx = check_sequence(&s, 1, 3, 5, TL_PROTO_F32, 2, 3, &np, true);
    ck_assert_uint_eq(np, 6);
    ck_assert_uint_eq(s.v[0].m.scan.window, 6);
    for (size_t m = 1; m + 1 < s.n; m++) {
        const tl_proto_frame *fr = &s.v[m].m.frame;
        double base = fr->kind == TL_PROTO_DARK ? 10.25 : fr->kind == TL_PROTO_FLAT ? 5000 : 1000;
        for (size_t i = 0; i < 15; i++)
            ck_assert_double_eq_tol(sample(&s.v[m], i), base + fr->index * 7 + i, 1e-3);
        if (fr->kind == TL_PROTO_PROJ)
            ck_assert_double_eq_tol(fr->angle, deg[fr->index] * M_PI / 180, 1e-12);
    }
    free(idx);
    free_stream(&s);

    /* same dtype everywhere: sent as is; START:STOP takes its count from the pages */
    const char *u16[] = {"--tiff", p, "--tiff-flats", f, "--angles-deg", "0:180", NULL};
    s = push(u16, &rc);
    ck_assert_msg(rc == 0, "%s", tl_client_err());
    idx = check_sequence(&s, 1, 3, 5, TL_PROTO_U16, 0, 3, &np, true);
    ck_assert_uint_eq(np, 6);
    ck_assert_double_eq_tol(s.v[4 + 5].m.frame.angle, 5 * M_PI / 6, 1e-12);
    free(idx);
    free_stream(&s);
}
END_TEST

START_TEST(test_push_errors)
{
    char p[1024], bad[1024];
    write_stack("p.tif", TL_DTYPE_U16, 4, 2, 2, 0);
    snprintf(p, sizeof p, "%s/p.tif", dir);
    snprintf(bad, sizeof bad, "%s/nope.tif", dir);
    const struct {
        int rc;
        const char *phrase;
        const char *args[16];
    } cases[] = {
        {2, "unknown option", {"push", "--frobnicate", NULL}},
        {2, "bad --dtype", {"push", "--dtype", "u8", NULL}},
        {2, "bad --shuffle", {"push", "--shuffle", "101", NULL}},
        {2, "bad --rows", {"push", "--rows", "0", NULL}},
        {2, "needs --angles", {"push", "--tiff", p, NULL}},
        {2,
         "not for --tiff",
         {"push", "--tiff", p, "--angles-deg", "0:180:4", "--rows", "4", NULL}},
        {2, "needs --tiff", {"push", "--tiff-darks", p, NULL}},
        {1, "4 projections", {"push", "--tiff", p, "--angles-deg", "0:180:5", NULL}},
        {1, "nope.tif", {"push", "--tiff", bad, "--angles-deg", "0:180", NULL}},
        {1, "angles for", {"push", "--projections", "10", "--angles-deg", "0:180:9", NULL}},
        {2, "needs --cuda-ipc", {"push", "--ring", "4", NULL}},
        {2, "bad --ring", {"push", "--cuda-ipc", "--ring", "0", NULL}},
        {2,
         "not for --tiff",
         {"push", "--tiff", p, "--angles-deg", "0:180", "--turns", "2", NULL}},
        {2, "bad --bands", {"push", "--bands", "0", NULL}},
        {2, "more bands than the frames' 4 rows", {"push", "--rows", "4", "--bands", "5", NULL}},
        /* the rows of a TIFF source are known once it is open: 2 here */
        {2,
         "more bands than the frames' 2 rows",
         {"push", "--tiff", p, "--angles-deg", "0:180", "--bands", "3", NULL}},
        {2, "--bands is not for --cuda-ipc", {"push", "--cuda-ipc", "--bands", "2", NULL}},
        /* no such GPU, in every build: fails before connecting to anything */
        {1, "--cuda-ipc", {"push", "--cuda-ipc", "--device", "1023", NULL}},
#ifndef HAVE_CUDA
        {1, "need CUDA", {"push", "--cuda-ipc", NULL}},
#endif
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = tl_client_run(dir, cases[i].args, 30);
        ck_assert_msg(rc == cases[i].rc, "case %zu: exit %d; stderr: %s", i, rc, tl_client_err());
        ck_assert_msg(strstr(tl_client_err(), cases[i].phrase) != NULL,
                      "case %zu: stderr lacks '%s': %s", i, cases[i].phrase, tl_client_err());
        ck_assert_msg(!strncmp(tl_client_err(), "tomolive push: ", 15), "%s", tl_client_err());
    }
    const char *help[] = {"push", "--help", NULL};
    ck_assert_int_eq(tl_client_run(dir, help, 30), 0);
    ck_assert(strstr(tl_client_out(), "usage: tomolive push") != NULL);
}
END_TEST

START_TEST(test_push_turns)
{
    /* 2 turns of 5: indices go on, angles repeat bit for bit, the window is one turn */
    const char *args[] = {"--rows",  "2", "--cols",  "8", "--projections", "5",
                          "--darks", "0", "--flats", "0", "--angles-deg",  "0:360",
                          "--turns", "2", NULL};
    int rc;
    stream s = push(args, &rc);
    ck_assert_msg(rc == 0, "%s", tl_client_err());
    size_t np;
    uint64_t *idx = check_sequence(&s, 1, 2, 8, TL_PROTO_U16, 0, 0, &np, true);
    ck_assert_uint_eq(np, 10);
    ck_assert_uint_eq(s.v[0].m.scan.window, 5);
    for (size_t k = 0; k < 10; k++) {
        const tl_proto_frame *f = &s.v[1 + k].m.frame;
        ck_assert_uint_eq(idx[k], k);
        ck_assert_double_eq_tol(f->angle, (double)(k % 5) * 72 * M_PI / 180, 1e-12);
        if (k >= 5) {
            const tl_proto_frame *g = &s.v[1 + k - 5].m.frame;
            ck_assert(!memcmp(&f->angle, &g->angle, sizeof f->angle));
            ck_assert(!memcmp(f->payload, g->payload, f->payload_len));
        }
    }
    free(idx);
    free_stream(&s);
}
END_TEST

/* The header fields that every band of a frame repeats (PROTOCOL.md §8.2). */
static void check_same_header(const tl_proto_frame *a, const tl_proto_frame *b)
{
    ck_assert_uint_eq(a->series, b->series);
    ck_assert_uint_eq(a->index, b->index);
    ck_assert_int_eq(a->kind, b->kind);
    ck_assert_int_eq(a->dtype, b->dtype);
    ck_assert_uint_eq(a->rows, b->rows);
    ck_assert_uint_eq(a->cols, b->cols);
    ck_assert(a->has_angle == b->has_angle);
    ck_assert(!memcmp(&a->angle, &b->angle, sizeof a->angle));
    ck_assert(a->has_center_offset == b->has_center_offset);
    ck_assert(!memcmp(&a->center_offset, &b->center_offset, sizeof a->center_offset));
    ck_assert(a->has_t_acq && b->has_t_acq);
}

START_TEST(test_push_bands)
{
    /* 8 rows in 3 bands: rows 0-1, 2-4, 5-7. Noise and shuffle make every frame its own
     * and the order not the obvious one; --buffer-mb 0 keeps 4 buffers, so a buffer given
     * back before its last band is out would be overwritten under the bands still queued */
    enum { R = 8, C = 20, N = 3 };
    const char *dtypes[2] = {"u16", "f32"};
    for (int t = 0; t < 2; t++) {
        tl_proto_dtype dt = t ? TL_PROTO_F32 : TL_PROTO_U16;
        const char *args[] = {"--rows",      "8",         "--cols",  "20",      "--projections",
                              "12",          "--darks",   "2",       "--flats", "2",
                              "--noise",     "--shuffle", "30",      "--seed",  "5",
                              "--buffer-mb", "0",         "--dtype", dtypes[t], NULL,
                              NULL,          NULL};
        const size_t opt = 19; /* where --bands goes */
        int rc;
        stream whole = push(args, &rc);
        ck_assert_msg(rc == 0, "%s", tl_client_err());
        size_t np;
        free(check_sequence(&whole, 1, R, C, dt, 2, 2, &np, true));
        ck_assert_uint_eq(np, 12);
        char line[256]; /* "pushed N frames (...)": frames, not messages */
        const char *in = strstr(tl_client_out(), " in ");
        ck_assert_ptr_nonnull(in);
        snprintf(line, sizeof line, "%.*s", (int)(in - tl_client_out()), tl_client_out());

        args[opt] = "--bands";
        args[opt + 1] = "3";
        stream banded = push(args, &rc);
        ck_assert_msg(rc == 0, "%s", tl_client_err());
        ck_assert_msg(strstr(tl_client_out(), line) != NULL, "want '%s' in: %s", line,
                      tl_client_out());
        size_t nf = whole.n - 2, row = (size_t)C * tl_proto_dtype_size(dt);
        ck_assert_uint_eq(banded.n, 2 + N * nf);
        ck_assert_int_eq(banded.v[0].m.type, TL_MSG_SCAN);
        ck_assert_uint_eq(banded.v[0].m.scan.rows, R);
        ck_assert_int_eq(banded.v[banded.n - 1].m.type, TL_MSG_END);
        for (size_t i = 1; i + 1 < banded.n; i++)
            ck_assert_int_eq(banded.v[i].m.type, TL_MSG_FRAME);
        uint64_t prev_t = 0;
        for (size_t j = 0; j < nf; j++) {
            const rmsg *w = &whole.v[1 + j];
            ck_assert(!w->m.frame.has_band);
            const rmsg *band[N];
            size_t nb = 0;
            for (size_t i = 1; i + 1 < banded.n; i++) { /* its bands, in arrival order */
                const tl_proto_frame *f = &banded.v[i].m.frame;
                if (f->kind != w->m.frame.kind || f->index != w->m.frame.index)
                    continue;
                ck_assert_msg(nb < N, "kind %d index %llu: more than %d messages", f->kind,
                              (unsigned long long)f->index, N);
                band[nb++] = &banded.v[i];
            }
            ck_assert_msg(nb == N, "kind %d index %llu: %zu messages, want %d", w->m.frame.kind,
                          (unsigned long long)w->m.frame.index, nb, N);
            size_t off = 0;
            for (uint32_t b = 0; b < N; b++) {
                const tl_proto_frame *f = &band[b]->m.frame;
                ck_assert(f->has_band);
                ck_assert_uint_eq(f->band_first, b * R / N); /* in order, disjoint, all */
                ck_assert_uint_eq(f->band_first + f->band_rows, (b + 1) * R / N);
                check_same_header(f, &w->m.frame);
                ck_assert_uint_eq(f->t_acq, band[0]->m.frame.t_acq); /* one frame, one t_acq */
                ck_assert_uint_eq(band[b]->len, f->band_rows * row);
                ck_assert_msg(!memcmp(band[b]->payload, (const char *)w->payload + off,
                                      band[b]->len),
                              "%s: band %u of kind %d index %llu differs from its rows", dtypes[t],
                              b, f->kind, (unsigned long long)f->index);
                off += band[b]->len;
            }
            ck_assert_uint_eq(off, w->len);
            ck_assert_uint_ge(band[0]->m.frame.t_acq, prev_t); /* sent in the same order */
            prev_t = band[0]->m.frame.t_acq;
        }
        free_stream(&banded);

        /* one band is the whole frame, sent as before: no band key */
        args[opt + 1] = "1";
        stream one = push(args, &rc);
        ck_assert_msg(rc == 0, "%s", tl_client_err());
        ck_assert_uint_eq(one.n, whole.n);
        for (size_t i = 1; i + 1 < one.n; i++) {
            const rmsg *a = &one.v[i], *b = &whole.v[i];
            ck_assert(!a->m.frame.has_band);
            check_same_header(&a->m.frame, &b->m.frame);
            ck_assert_uint_eq(a->len, b->len);
            ck_assert(!memcmp(a->payload, b->payload, a->len));
        }
        free_stream(&one);
        free_stream(&whole);
    }
}
END_TEST

/* Plays tomolived's part for frames in GPU memory: connects to the scan's release endpoint,
 * maps the ring once, copies each frame out of it (undoing the row pitch) into the rmsg's
 * payload, as collect() keeps host payloads, and releases it: ok, except the frame at
 * position reject_at (a rejection the producer must report). */
static stream collect_gpu(pid_t pid, size_t reject_at, size_t *pitch_seen)
{
    stream s = {NULL, 0};
    size_t cap = 0;
    tl_proto_decoder *d = tl_proto_decoder_new();
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    void *rel = NULL, *base = NULL;
    uint8_t handle[TL_IPC_HANDLE_BYTES];
    int dev = -1;
    size_t bytes = 0, nframes = 0;
    uint8_t *staging = NULL;
    char why[512], uuid0[TL_IPC_UUID_LEN + 1];
    ck_assert_int_eq(tl_ipc_device_uuid(0, uuid0, why, sizeof why), TL_OK);
    double start = tl_now_s();
    for (;;) {
        ck_assert_msg(tl_now_s() - start < 120, "no end after 120 s (%zu messages)", s.n);
        zmq_pollitem_t it = {pull, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 50) <= 0) {
            ck_assert_msg(tl_client_running(pid), "push ended before its end message: %s",
                          tl_client_err());
            continue;
        }
        zmq_msg_t parts[TL_PROTO_MAX_PARTS];
        rmsg r = {.payload = NULL};
        int np = recv_msg(d, s.n, parts, &r);
        if (r.m.type == TL_MSG_SCAN) {
            const tl_proto_scan *sc = &r.m.scan;
            ck_assert_uint_gt(sc->release.len, 0);
            char ep2[TL_PROTO_MAX_ENDPOINT + 1];
            snprintf(ep2, sizeof ep2, "%.*s", (int)sc->release.len, sc->release.ptr);
            rel = zmq_socket(ctx, ZMQ_PUSH);
            int linger = 2000;
            zmq_setsockopt(rel, ZMQ_LINGER, &linger, sizeof linger);
            ck_assert_int_eq(zmq_connect(rel, ep2), 0);
            r.m.scan.release = (tl_proto_str){NULL, 0};
        } else if (r.m.type == TL_MSG_FRAME) {
            const tl_proto_frame *f = &r.m.frame;
            const tl_proto_ipc *ipc = &f->ipc;
            ck_assert(f->has_ipc);
            ck_assert_int_eq(np, 1); /* the header alone */
            ck_assert_ptr_nonnull(rel);
            char uuid[TL_IPC_UUID_LEN + 1];
            snprintf(uuid, sizeof uuid, "%.*s", (int)ipc->device.len, ipc->device.ptr);
            ck_assert_str_eq(uuid, uuid0);
            ck_assert_uint_eq(ipc->buffer, 0);
            size_t row = (size_t)f->cols * tl_proto_dtype_size(f->dtype);
            ck_assert_uint_ge(ipc->pitch, row);
            ck_assert_uint_eq(ipc->offset, (uint64_t)ipc->slot * f->rows * ipc->pitch);
            ck_assert_uint_le(ipc->offset + (f->rows - 1) * ipc->pitch + row, ipc->size);
            *pitch_seen = ipc->pitch;
            if (!base) { /* one ring, one handle: mapped once */
                ck_assert_int_eq(tl_ipc_device_ordinal(uuid, &dev, why, sizeof why), TL_OK);
                memcpy(handle, ipc->handle, sizeof handle);
                ck_assert_msg(tl_ipc_open(dev, handle, &base, &bytes, why, sizeof why) == TL_OK,
                              "%s", why);
                ck_assert_uint_ge(bytes, ipc->size);
                staging = malloc(ipc->size);
            }
            ck_assert(!memcmp(handle, ipc->handle, sizeof handle));
            size_t span = (f->rows - 1) * ipc->pitch + row;
            ck_assert_msg(tl_ipc_copy(dev, staging, (uint8_t *)base + ipc->offset, span, why,
                                      sizeof why) == TL_OK,
                          "%s", why);
            r.len = (size_t)f->rows * row;
            r.payload = malloc(r.len);
            for (uint32_t v = 0; v < f->rows; v++)
                memcpy((uint8_t *)r.payload + v * row, staging + v * ipc->pitch, row);
            r.m.frame.payload = r.payload;
            r.m.frame.payload_len = r.len;
            r.m.frame.has_ipc = false; /* its pointers point into the header */
            tl_proto_release rl = {.series = f->series,
                                   .index = f->index,
                                   .slot = ipc->slot,
                                   .ok = nframes != reject_at,
                                   .code = TL_PROTO_E_RANGE,
                                   .message = {"test rejection", 14}};
            msgpack_sbuffer_clear(&sb);
            ck_assert_int_eq(tl_proto_encode_release(&sb, &rl), 0);
            ck_assert_int_eq(zmq_send(rel, sb.data, sb.size, 0), (int)sb.size);
            nframes++;
        }
        if (keep_msg(&s, &cap, &r, parts, np))
            break;
    }
    /* as tomolived at the end: unmap, then disconnect (push waits for that) */
    if (base)
        tl_ipc_close(dev, base);
    if (rel)
        zmq_close(rel);
    free(staging);
    msgpack_sbuffer_destroy(&sb);
    tl_proto_decoder_free(d);
    return s;
}

START_TEST(test_push_cuda_ipc)
{
    char uuid[TL_IPC_UUID_LEN + 1], why[512];
    if (tl_ipc_device_uuid(0, uuid, why, sizeof why) != TL_OK) {
        printf("test_push_cuda_ipc: skipped, no GPU here: %s\n", why);
        return;
    }
    /* 50 u16 columns: rows of 100 bytes in a pitch of 512; 2 turns: the bank holds one */
    const char *scan_args[] =
        {"--rows",    "6",       "--cols", "50",           "--projections", "8",       "--darks",
         "2",         "--flats", "2",      "--angles-deg", "0:360",         "--turns", "2",
         "--shuffle", "30",      NULL};
    int rc;
    stream host = push(scan_args, &rc);
    ck_assert_msg(rc == 0, "%s", tl_client_err());
    const char *variants[2][4] = {{"--ring", "3", NULL}, {"--ring", "2", "--bank-mb", "0"}};
    for (int v = 0; v < 2; v++) {
        const char *argv[64] = {"push",       "--endpoint",        ep,  "--quiet",
                                "--cuda-ipc", "--release-timeout", "30"};
        size_t n = 7;
        for (size_t i = 0; i < 4 && variants[v][i]; i++)
            argv[n++] = variants[v][i];
        for (size_t i = 0; scan_args[i]; i++)
            argv[n++] = scan_args[i];
        argv[n] = NULL;
        pid_t pid = tl_client_start(dir, argv);
        size_t pitch = 0;
        stream s = collect_gpu(pid, 5, &pitch);
        rc = tl_client_wait(pid, 60);
        ck_assert_msg(rc == 0, "variant %d: %s", v, tl_client_err());
        ck_assert_uint_eq(pitch, 512);
        ck_assert_uint_eq(s.n, host.n);
        for (size_t i = 0; i < s.n; i++) { /* the same messages, the same pixels */
            ck_assert_int_eq(s.v[i].m.type, host.v[i].m.type);
            if (s.v[i].m.type != TL_MSG_FRAME)
                continue;
            const tl_proto_frame *a = &s.v[i].m.frame, *b = &host.v[i].m.frame;
            ck_assert_uint_eq(a->index, b->index);
            ck_assert_int_eq(a->kind, b->kind);
            ck_assert(!memcmp(&a->angle, &b->angle, sizeof a->angle));
            ck_assert_uint_eq(a->payload_len, b->payload_len);
            ck_assert_msg(!memcmp(a->payload, b->payload, a->payload_len),
                          "variant %d: message %zu (index %llu) differs from the host path", v, i,
                          (unsigned long long)a->index);
        }
        char line[256];
        size_t nf = host.n - 2;
        snprintf(line, sizeof line,
                 "cuda-ipc: %zu frames lent through a ring of %s slots on "
                 "%s: %zu released, 1 rejected (first: E_RANGE: test rejection)",
                 nf, variants[v][1], uuid, nf - 1);
        ck_assert_msg(strstr(tl_client_out(), line) != NULL, "want '%s' in: %s", line,
                      tl_client_out());
        free_stream(&s);
    }
    free_stream(&host);

    /* a consumer that never releases: a clear error after the timeout, not a hang */
    const char *stuck[] = {"push", "--endpoint",        ep,   "--quiet", "--cuda-ipc", "--ring",
                           "2",    "--release-timeout", "1",  "--rows",  "4",          "--cols",
                           "8",    "--projections",     "10", NULL};
    pid_t pid = tl_client_start(dir, stuck);
    stream s = collect(pid);
    ck_assert_int_eq(tl_client_wait(pid, 30), 1);
    ck_assert_msg(strstr(tl_client_err(), "no release for 1.0 s") != NULL &&
                      strstr(tl_client_err(), "no consumer ever connected") != NULL,
                  "%s", tl_client_err());
    ck_assert_uint_eq(s.n, 1 + 2); /* the scan and the two frames the ring holds */
    free_stream(&s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("push");
    TCase *tc = tcase_create("push");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_push_sequence_and_pixels);
    tcase_add_test(tc, test_push_disorder);
    tcase_add_test(tc, test_push_rate);
    tcase_add_test(tc, test_push_no_end_and_bind);
    tcase_add_test(tc, test_push_tiff);
    tcase_add_test(tc, test_push_errors);
    tcase_add_test(tc, test_push_turns);
    tcase_add_test(tc, test_push_bands);
    tcase_add_test(tc, test_push_cuda_ipc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
