/* check_live_mpi.c — `mpirun -n 4 tomolived --mpi` (issue 23 item 3, gpu/remote.h) against
 * one daemon, on CPU ranks:
 *   - same slices: a scan streamed into the 4-rank daemon gives the same slices as one
 *     daemon whose rows are split into 4 partitions on its own host (daemon.gpus, CPU
 *     partitions): bit for bit where a slice is back-projected at once (the same
 *     computation on the same rows in the same order), to float rounding where it was kept
 *     incrementally (the updates are batched as read-outs fall, which timing decides); and the same as one unsplit daemon within the exact mode's bounds
 *     (DESIGN.md §3: relative L2 <= 2e-5, max error <= 1e-4 of the range). The slices are
 *     a row in rank 0's rows, one in rank 2's, one at a boundary between ranks, and an
 *     ortho-slice through every rank (assembled on rank 0), each watched while the scan
 *     streams (kept incrementally on its rank) and read at the end; then, asked for after
 *     the end, an ortho-slice back-projected from the whole window at once and an
 *     iterative (SIRT) row slice in rank 2's rows, which rank 2 solves;
 *   - a serving rank killed (SIGKILL) ends the job within seconds, mpirun saying so;
 *   - a cone-beam scan on the 4 ranks is served by rank 0 alone, saying so.
 * The backend is TL_LIVE_BACKEND (default cpu; tests/gpu/live_mpi_cuda.sh: cuda, every rank
 * on the one GPU, compared with the unsplit daemon alone: daemon.gpus names a GPU once). Skips (77) without MPI (configure) or mpirun; TL_MPIRUN overrides
 * configure's mpirun.
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/daemon_fixture.h"
#include "tests/testutil.h"

enum { ROWS = 32, COLS = 64, VIEWS = 90, RANKS = 4, NSLICES = 4, LATE = NSLICES, ITER, ALL };
#define RADIUS 20.0

static const char *mpirun = MPIRUN;
static const char *backend = "cpu"; /* TL_LIVE_BACKEND */

/* The slices: ids and set_slice arguments. Rows 0..7 are rank 0's, 16..23 rank 2's;
 * z = 8.5 lies between rank 1's first rows, 23.5 between ranks 2 and 3 (rank 2 holds
 * row 24 as its halo). */
static const char *const ids[ALL] = {"low", "high", "edge", "side", "late", "iter"};
static const char *const specs[ALL] =
    {"{\"id\":\"low\",\"kind\":\"row\",\"z\":3}",
     "{\"id\":\"high\",\"kind\":\"row\",\"z\":20}",
     "{\"id\":\"edge\",\"kind\":\"row\",\"z\":23.5}",
     "{\"id\":\"side\",\"kind\":\"ortho\",\"axis\":\"y\",\"position\":2}",

     "{\"id\":\"late\",\"kind\":\"ortho\",\"axis\":\"x\",\"position\":-3}",
     "{\"id\":\"iter\",\"kind\":\"row\",\"z\":18,\"method\":\"sirt\",\"iterative\":"
     "{\"iterations\":3,\"max_iterations\":12,\"nonneg\":true}}"};

typedef struct {
    bool final;
    char kernel[32]; /* what made it */
    uint32_t h, w;
    float px[COLS * COLS];
} final_slice;

/* Starts the daemon: on RANKS ranks with mpi, else alone with extra arguments. */
static void start(tl_fixture *f, const char *tag, bool mpi, const char *const *extra)
{
    /* mpirun forwards SIGTERM, then sleeps this long (default 1 s) and kills what is
     * left: the time rank 0 has to stop the others and MPI, and a loaded test machine may
     * need more */
    static const char *const env[] = {"OMPI_MCA_odls_base_sigkill_timeout=3",
                                      "OMPI_MCA_btl_vader_single_copy_mechanism=none", NULL};
    char n[16];
    snprintf(n, sizeof n, "%d", RANKS);
    const char *const launcher[] = {mpirun, "--oversubscribe", "-n", n, NULL};
    /* the measurements kept for the iterative slice */
    const char *args[10] = {"--backend", backend, "--set", "engine.iterative=true"};
    int n_args = 4;
    if (mpi)
        args[n_args++] = "--mpi";
    for (int i = 0; extra && extra[i] && n_args < 9; i++)
        args[n_args++] = extra[i];
    int rc = mpi ? tl_fx_start_launched(f, tag, launcher, args, env)
                 : tl_fx_start_env(f, tag, args, env);
    ck_assert_msg(rc == 0, "daemon %s did not start", tag);
}

/* The projection of a cylinder whose density grows with the row (1 + row / ROWS), so that
 * a slice computed from the wrong rows differs. */
static void projection(float *img)
{
    tl_fx_disk_projection(img, ROWS, COLS, RADIUS);
    for (uint32_t r = 0; r < ROWS; r++)
        for (uint32_t c = 0; c < COLS; c++)
            img[r * COLS + c] *= 1.0f + (float)r / ROWS;
}

static void send_scan(tl_fixture *f)
{
    tl_proto_scan s = {.series = 1,
                       .geometry = TL_PROTO_PARALLEL,
                       .rows = ROWS,
                       .cols = COLS,
                       .dtype = TL_PROTO_F32,
                       .window = VIEWS,
                       .already_linear = true};
    ck_assert_int_eq(tl_fx_send_scan(f, &s), 0);
    static float img[ROWS * COLS];
    projection(img);
    ck_assert_int_eq(tl_fx_send_views(f, 1, img, ROWS, COLS, VIEWS, M_PI), 0);
}

/* What take() keeps of a slice: its final, its first message, or its first message of so
 * many iterations (an iterative slice asked for after the end has no final). */
typedef enum { FINAL = 0, FIRST = 1, MAX_IT = 12 } keep_rule;

/* Takes slice messages for up to 60 s until `want` of them are kept in out, by rule; the
 * count kept. */
static int take(tl_fixture *f, void *sub, final_slice *out, int want, keep_rule rule)
{
    int kept = 0;
    for (double t0 = tl_fx_seconds(); kept < want && tl_fx_seconds() - t0 < 60;) {
        zmq_msg_t parts[TL_PROTO_MAX_PARTS];
        tl_proto_msg m;
        int np = tl_fx_recv_slice(f, sub, 100, parts, &m);
        if (np == 0)
            continue;
        int k = 0;
        while (k < ALL && !tl_proto_str_eq(m.slice.id, ids[k]))
            k++;
        ck_assert_int_lt(k, ALL);
        const tl_proto_slice *s = &m.slice;
        bool keep = rule == FINAL   ? s->final
                    : rule == FIRST ? true
                                    : s->iterations == (uint32_t)rule;
        if (keep && !out[k].final) {
            ck_assert_uint_le(s->shape[0] * s->shape[1], COLS * COLS);
            ck_assert_uint_eq(s->payload_len, s->shape[0] * s->shape[1] * sizeof(float));
            out[k].final = true;
            snprintf(out[k].kernel, sizeof out[k].kernel, "%.*s", (int)s->kernel.len,
                     s->kernel.ptr);
            out[k].h = s->shape[0];
            out[k].w = s->shape[1];
            memcpy(out[k].px, s->payload, s->payload_len);
            kept++;
        }
        tl_proto_close(parts, np);
    }
    return kept;
}

/* Watches the slices, streams the scan, and keeps each slice's final; then asks for two
 * more: late, back-projected from the whole window at once, and iter, SIRT from the whole
 * window's FBP (each the same computation however the frames came). */
static void run_scan(tl_fixture *f, final_slice *out)
{
    for (int k = 0; k < NSLICES; k++)
        json_decref(tl_fx_ok(f, "set_slice", specs[k]));
    void *sub = tl_fx_subscribe(f, "slice/");
    /* wanted once subscribed: every slice is kept from the first frame on */
    ck_assert(tl_fx_wait_status(f, "slices.wanted", NSLICES, 10));
    send_scan(f);
    ck_assert_int_eq(take(f, sub, out, NSLICES, FINAL), NSLICES);
    ck_assert_int_eq(tl_fx_status_int(f, "frames.accepted.proj"), VIEWS);
    json_decref(tl_fx_ok(f, "set_slice", specs[LATE]));
    ck_assert_int_eq(take(f, sub, out, 1, FIRST), 1);
    ck_assert(out[LATE].final);
    /* from the whole window's FBP, max_iterations (MAX_IT) of SIRT */
    json_decref(tl_fx_ok(f, "set_slice", specs[ITER]));
    ck_assert_int_eq(take(f, sub, out, 1, MAX_IT), 1);
    ck_assert(out[ITER].final);
    zmq_close(sub);
}

/* The relative L2 error of b against a, and the largest difference over a's range. */
static void compare(const final_slice *a, const final_slice *b, double *rel_l2, double *max_rel)
{
    ck_assert_uint_eq(a->h, b->h);
    ck_assert_uint_eq(a->w, b->w);
    double num = 0, den = 0, worst = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < (size_t)a->h * a->w; i++) {
        double d = (double)b->px[i] - a->px[i];
        num += d * d;
        den += (double)a->px[i] * a->px[i];
        worst = fmax(worst, fabs(d));
        lo = fmin(lo, a->px[i]);
        hi = fmax(hi, a->px[i]);
    }
    *rel_l2 = sqrt(num / den);
    *max_rel = worst / (hi - lo);
}

START_TEST(same_slices_as_one_daemon)
{
    static final_slice ranks[ALL], parts[ALL], one[ALL];
    tl_fixture f;
    start(&f, "live-mpi", true, NULL);
    ck_assert(tl_fx_wait_log(&f, "event=mpi_ranks ranks=4", 10));
    run_scan(&f, ranks);
    ck_assert(tl_fx_wait_log(&f, "over 4 MPI ranks", 5)); /* the scan's device line */
    ck_assert(tl_fx_stop(&f, SIGTERM, NULL) >= 0);
    /* rank 0 stopped every serving rank before MPI ended */
    ck_assert(tl_fx_wait_log(&f, "event=mpi_served rank=3", 1));
    tl_fx_cleanup(&f);

    /* four partitions of one host (CPU partitions; daemon.gpus names a GPU once, so on
     * CUDA the ranks are held to one daemon's bounds alone) */
    const bool cpu = strcmp(backend, "cpu") == 0;
    const char *const split[] = {"--set", "daemon.gpus=0,1,2,3", NULL};
    if (cpu) {
        start(&f, "live-parts", false, split);
        run_scan(&f, parts);
        tl_fx_stop(&f, SIGTERM, NULL);
        tl_fx_cleanup(&f);
    }

    start(&f, "live-one", false, NULL);
    run_scan(&f, one);
    tl_fx_stop(&f, SIGTERM, NULL);
    tl_fx_cleanup(&f);

    /* kept incrementally while the scan streamed: the same sums, but batched as the
     * read-outs fell, so equal to float rounding; read from the whole window at once:
     * the same computation, equal bit for bit */
    for (int k = 0; k < ALL; k++) {
        double rel_l2, max_rel;
        if (cpu) {
            compare(&parts[k], &ranks[k], &rel_l2, &max_rel);
            if (k == LATE)
                ck_assert_msg(memcmp(ranks[k].px, parts[k].px,
                                     (size_t)ranks[k].h * ranks[k].w * sizeof(float)) == 0,
                              "slice %s: 4 ranks differ from 4 partitions of one host (%.3g, "
                              "%.3g)",
                              ids[k], rel_l2, max_rel);
            else
                ck_assert_msg(rel_l2 <= 1e-6 && max_rel <= 1e-5,
                              "slice %s: 4 ranks vs 4 partitions: relative L2 %.3g, max %.3g",
                              ids[k], rel_l2, max_rel);
        }
        compare(&one[k], &ranks[k], &rel_l2, &max_rel);
        ck_assert_msg(rel_l2 <= 2e-5 && max_rel <= 1e-4,
                      "slice %s: 4 ranks vs one daemon: relative L2 %.3g, max %.3g of the range",
                      ids[k], rel_l2, max_rel);
    }
    ck_assert_str_eq(ranks[ITER].kernel, "sirt"); /* solved by rank 2 */
    /* the rows weigh differently: a slice from the wrong rows would not be the same */
    double rel_l2, max_rel;
    compare(&one[0], &one[1], &rel_l2, &max_rel);
    ck_assert_double_gt(rel_l2, 0.1);
}
END_TEST

/* The pid a serving rank logged (event=mpi_serving rank=R ... pid=P), or 0. */
static pid_t serving_pid(tl_fixture *f, int rank)
{
    char needle[64];
    snprintf(needle, sizeof needle, "event=mpi_serving rank=%d ", rank);
    char *log = tl_fx_log(f);
    const char *line = log ? strstr(log, needle) : NULL;
    const char *pid = line ? strstr(line, " pid=") : NULL;
    pid_t p = pid ? (pid_t)atol(pid + 5) : 0;
    free(log);
    return p;
}

START_TEST(killed_rank_ends_the_job)
{
    tl_fixture f;
    start(&f, "live-kill", true, NULL);
    ck_assert(tl_fx_wait_log(&f, "event=mpi_serving rank=2 ", 10));
    pid_t victim = serving_pid(&f, 2);
    ck_assert_int_gt(victim, 1);
    ck_assert_int_eq(kill(victim, SIGKILL), 0);
    /* mpirun ends every rank, saying so */
    double t0 = tl_fx_seconds();
    ck_assert(tl_fx_wait_log(&f, "the job has been aborted", 10));
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(f.pid, &status, WNOHANG)) == 0 && tl_fx_seconds() - t0 < 10)
        usleep(20000);
    ck_assert_msg(done == f.pid, "mpirun still running 10 s after a rank died");
    f.pid = 0;
    ck_assert(!WIFEXITED(status) || WEXITSTATUS(status) != 0);
    tl_fx_cleanup(&f);
}
END_TEST

START_TEST(cone_beam_on_rank_zero)
{
    tl_fixture f;
    start(&f, "live-cone", true, NULL);
    json_decref(tl_fx_ok(&f, "set_slice", "{\"id\":\"mid\",\"kind\":\"row\",\"z\":16}"));
    tl_proto_scan s = {.series = 1,
                       .geometry = TL_PROTO_CONE,
                       .rows = ROWS,
                       .cols = COLS,
                       .dtype = TL_PROTO_F32,
                       .window = 36,
                       .already_linear = true,
                       .source_origin = 500,
                       .source_detector = 1000,
                       .pixel_size = {1, 1}};
    ck_assert_int_eq(tl_fx_send_scan(&f, &s), 0);
    ck_assert(tl_fx_wait_log(&f, "event=cone_one_rank series=1 ranks=4", 10));
    ck_assert(tl_fx_wait_log(&f, "event=scan_started series=1 geometry=cone", 10));
    tl_fx_stop(&f, SIGTERM, NULL);
    tl_fx_cleanup(&f);
}
END_TEST

int main(void)
{
    mpirun = tl_test_mpirun(MPIRUN);
    const char *b = getenv("TL_LIVE_BACKEND");
    backend = b && *b ? b : "cpu";
    Suite *s = suite_create("live_mpi");
    TCase *tc = tcase_create("live");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, same_slices_as_one_daemon);
    tcase_add_test(tc, killed_rank_ends_the_job);
    tcase_add_test(tc, cone_beam_on_rank_zero);
    suite_add_tcase(s, tc);
    return tl_run_suite(s, false);
}
