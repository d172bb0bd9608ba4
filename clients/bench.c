/* bench.c — `tomolive bench`: how fast this machine back-projects, kernel by kernel, and
 * how long one detector frame takes through the per-frame pipeline.
 *
 * Each problem (slice size x projections) and slice count gets an engine holding a full
 * window of phantom projections (line integrals, so no -log; the preprocessing is not
 * what is timed), then tl_engine_bench times every kernel able to serve that many row
 * slices. Rates are updates per second (pixels x projections x slices / time,
 * ARCHITECTURE.md §4.1) and every row is compared with a baseline measured in the same
 * run: the standard texture kernel "tex-std" of the same problem and slice count. The
 * choice column applies the autotuner's rule (tl_tune_choose) to each problem's table, so
 * a benchmark shows what `tomolive tune` and the daemon would pick from the same numbers.
 *
 * With --gpus, the per-frame pipeline runs on an engine whose detector rows are split
 * across those GPUs (each stores its rows of every frame at once: the ingest capacity),
 * and, with two or more, first on the first GPU alone, the baseline of the same run. The
 * kernel tables and micro-benchmarks describe one card and run on the first GPU.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/bench_engine.h"
#include "clients/cli.h"
#include "clients/commands.h"
#include "gpu/engine.h"
#include "gpu/ipc.h"
#include "gpu/phantom.h"
#include "gpu/tune.h"

#define ME "tomolive bench"
#define MAX_SHAPES 16
#define MAX_COUNTS 16
#define MAX_KERNELS 64
/* The engine the micro-benchmarks run on: they measure the device, not a problem. */
#define RATES_ROWS 1
#define RATES_COLS 64
#define RATES_WINDOW 4

static const char usage_text[] =
    "usage: tomolive bench [--backend auto|cpu|cuda] [--device N] [--gpus LIST]\n"
    "                      [--shape SIZExPROJ ...] [--slices 1,2,4] [--reps 20]\n"
    "                      [--no-pipeline] [--pipeline-shape ROWSxCOLS]\n"
    "       tomolive bench --stream ...   the daemon under a stream (--stream --help)\n"
    "       tomolive bench --volume ...   a whole volume, every row (--volume --help)\n"
    "       tomolive bench --cone ...     cone-beam back projection (--cone --help)\n"
    "       tomolive bench --iterative ... iterative slices against FBP (--iterative --help)\n"
    "       tomolive bench --tomosynthesis ...  an iterative tomosynthesis stack\n"
    "                                           (--tomosynthesis --help)\n"
    "       tomolive bench --volume-write ...   recon's volume output alone\n"
    "                                           (--volume-write --help)\n"
    "\n"
    "Times every back-projection kernel of the backend on SIZE x SIZE row slices from a\n"
    "window of PROJ projections (default 1024x1024 and 2048x2048 on CUDA, 512x720 on the\n"
    "CPU), for each slice count, and the per-frame pipeline on one uint16 frame.\n"
    "\n"
    "      --backend NAME       cpu, cuda or auto (default: cuda when available)\n"
    "      --device N           CUDA device ordinal (default 0)\n"
    "      --gpus LIST          the pipeline on these GPUs, rows split across them\n"
    "                           (0,1 or all; with 2+, also on the first alone, to compare);\n"
    "                           the kernel tables run on the first\n"
    "      --shape SIZExPROJ    a problem; repeat for several\n"
    "      --slices LIST        slices reconstructed together (default 1,2,4)\n"
    "      --reps R             timed calls per measurement, after warm-up (default 20)\n"
    "      --no-pipeline        skip the per-frame pipeline\n"
    "      --pipeline-shape RxC detector of the pipeline measurement (default 2048x2048)\n"
    "\n"
    "Exit status: 0 done, 1 failed (no such backend, out of memory, ...), 2 usage error.\n";

typedef struct {
    tl_backend_kind backend;
    int device, reps;
    tl_bench_gpus gpus; /* --gpus (n = 0: --device alone) */
    bool pipeline, rates;
    uint32_t size[MAX_SHAPES], proj[MAX_SHAPES];
    size_t nshapes;
    uint32_t counts[MAX_COUNTS];
    size_t ncounts;
    uint32_t prow, pcol;
} options;

#define fail(rc, ...) tl_cli_fail(ME, (rc), __VA_ARGS__)

/* "AxB" with 1 <= A, B <= max. */
static bool parse_pair(const char *s, uint32_t max, uint32_t *a, uint32_t *b)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(s, &end, 10);
    if (end == s || *end != 'x' || *s == '-')
        return false;
    const char *p = end + 1;
    unsigned long y = strtoul(p, &end, 10);
    if (end == p || *end || errno || *p == '-' || x < 1 || y < 1 || x > max || y > max)
        return false;
    *a = (uint32_t)x;
    *b = (uint32_t)y;
    return true;
}

/* "1,2,4". */
static bool parse_counts(const char *s, options *o)
{
    o->ncounts = 0;
    for (const char *p = s;; p++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > 256 || o->ncounts == MAX_COUNTS)
            return false;
        o->counts[o->ncounts++] = (uint32_t)v;
        if (*end == '\0')
            return true;
        if (*end != ',')
            return false;
        p = end;
    }
}

/* ---- back projection ------------------------------------------------------------------ */

/* One table row: a kernel timed on `count` slices. Names and params are static strings. */
typedef struct {
    tl_bench_row row;
    uint32_t count, slices; /* slices in the call, the kernel's slices per pass */
    double updates_per_s;   /* of the whole call: pixels x projections x count / time */
    const char *params;
    const tl_bench_row *base; /* the baseline of the same count */
} timing;

static void print_header(const tl_engine *e, const options *o, bool *printed)
{
    if (*printed)
        return;
    *printed = true;
    tl_engine_state st;
    tl_engine_get_state(e, &st);
    printf("device: %s (backend %s)\n", st.device_name, st.backend);
    printf("time: back projection only, window %s, median of %d calls after warm-up\n",
           o->backend == TL_BACKEND_CPU ? "in host memory (CPU backend)" : "on the device",
           o->reps);
}

/* The marks of t in the choice column: "single:exact,batch:fast", "-" for none. The
 * autotuner's rule (tl_tune_choose) picks kernels; a batch choice marks that kernel's row
 * of highest throughput, which is the row that won. */
static void choice_marks(const tl_tune_result *r, const timing *t, const timing *all, size_t n,
                         char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int kind = 0; kind < 2; kind++)
        for (int q = 0; q < TL_QUALITY_COUNT; q++) {
            const char *name = kind == 0 ? r->choice.single[q] : r->choice.batch[q];
            if (strcmp(name, t->row.kernel) != 0)
                continue;
            bool mine = kind == 0 ? t->count == 1 : true;
            for (size_t i = 0; kind == 1 && i < n; i++) {
                const timing *u = &all[i];
                if (u != t && !strcmp(u->row.kernel, name) &&
                    (u->updates_per_s > t->updates_per_s ||
                     (u->updates_per_s == t->updates_per_s && u->count < t->count)))
                    mine = false;
            }
            if (mine && used < len)
                used += (size_t)snprintf(buf + used, len - used, "%s%s:%s", used ? "," : "",
                                         kind == 0 ? "single" : "batch",
                                         tl_quality_name((tl_quality)q));
        }
    if (!buf[0])
        snprintf(buf, len, "-");
}

static void print_table(uint32_t size, uint32_t proj, const timing *t, size_t n)
{
    /* the choice the autotuner would make from these timings (as the daemon would use) */
    tl_tune_result r = {0};
    r.shape = (tl_tune_shape){.height = size, .width = size, .window = proj};
    for (size_t i = 0; i < n && r.nentries < TL_TUNE_MAX_ENTRIES; i++) {
        tl_tune_entry *x = &r.entries[r.nentries++];
        snprintf(x->kernel, sizeof x->kernel, "%s", t[i].row.kernel);
        x->quality = t[i].row.quality;
        x->slices = t[i].slices;
        x->batch = t[i].count;
        x->ms = t[i].row.ms;
        x->updates_per_s = t[i].updates_per_s;
    }
    tl_tune_choose(&r);
    printf("%-16s | %-7s | %11s | %-11s | %6s | %6s | %11s | %11s | %10s | %-38s | %s\n", "kernel",
           "mode", "slices/pass", "slice", "proj", "slices", "ms (median)", "G updates/s",
           "x baseline", "choice", "params");
    printf("-----------------+---------+-------------+-------------+--------+--------+-------"
           "------+-------------+------------+----------------------------------------+-------\n");
    char shape[32], marks[160];
    snprintf(shape, sizeof shape, "%ux%u", size, size);
    for (size_t i = 0; i < n; i++) {
        choice_marks(&r, &t[i], t, n, marks, sizeof marks);
        printf("%-16s | %-7s | %11u | %-11s | %6u | %6u | %11.3f | %11.2f | %10.2f | %-38s | "
               "%s\n",
               t[i].row.kernel, tl_quality_name(t[i].row.quality), t[i].slices, shape, proj,
               t[i].count, t[i].row.ms, t[i].updates_per_s * 1e-9, t[i].base->ms / t[i].row.ms,
               marks, t[i].params);
    }
    fflush(stdout);
}

/* One problem: a table with a row per kernel and slice count, printed once every count is
 * timed, so that the choice column can weigh them all. */
static int bench_problem(const options *o, uint32_t size, uint32_t proj, bool *printed)
{
    int rc = 0;
    size_t cap = o->ncounts * MAX_KERNELS, n = 0;
    timing *all = calloc(cap, sizeof *all);
    tl_bench_row *rows = calloc(cap, sizeof *rows); /* the bases point in here */
    if (!all || !rows)
        rc = fail(1, "out of memory");
    bool no_base = false;
    for (size_t ci = 0; rc == 0 && ci < o->ncounts; ci++) {
        uint32_t count = o->counts[ci];
        int *ids = calloc(count, sizeof *ids);
        tl_engine *e = NULL;
        rc = ids ? tl_bench_engine(ME, o->backend, o->device, size, proj, count, &e, ids)
                 : fail(1, "out of memory");
        tl_bench_row *r = rows + ci * MAX_KERNELS;
        size_t nk = 0;
        tl_status st = TL_OK;
        if (rc == 0 &&
            (st = tl_engine_bench(e, ids, count, o->reps, r, MAX_KERNELS, &nk)) != TL_OK)
            rc = fail(1, "benchmark of %ux%u x %u slices failed: %s (%s)", size, size, count,
                      tl_engine_last_error(e), tl_status_name(st));
        if (rc == 0 && nk == 0)
            rc = fail(1, "no kernel can serve %u row slices of %ux%u", count, size, size);
        if (nk > MAX_KERNELS)
            nk = MAX_KERNELS;
        const tl_bench_row *base = NULL;
        for (size_t k = 0; rc == 0 && k < nk; k++)
            if (!strcmp(r[k].kernel, "tex-std"))
                base = &r[k];
        if (rc == 0 && !base) {
            no_base = true;
            base = &r[0];
        }
        for (size_t k = 0; rc == 0 && k < nk; k++) {
            timing *t = &all[n++];
            t->row = r[k];
            t->count = count;
            t->updates_per_s = (double)size * size * proj * count / (r[k].ms * 1e-3);
            t->base = base;
            tl_bench_kernel_info(e, r[k].kernel, &t->slices, &t->params);
        }
        if (rc == 0)
            print_header(e, o, printed);
        tl_engine_destroy(e);
        free(ids);
    }
    if (n > 0) { /* also what was timed before a failure */
        printf("\nproblem: %ux%u row slices from %u projections (detector %u columns, "
               "float32 line integrals)\n",
               size, size, proj, size);
        if (no_base)
            printf("baseline: n/a (no tex-std kernel on this backend): ratios are to the "
                   "first kernel\n");
        print_table(size, proj, all, n);
    }
    free(all);
    free(rows);
    return rc;
}

/* The device's micro-benchmarks, on backends that have them. */
static int bench_rates(const options *o)
{
    tl_engine_config c;
    tl_engine_config_init(&c, RATES_ROWS, RATES_COLS, RATES_WINDOW);
    c.backend = o->backend;
    c.device = o->device;
    tl_engine *e;
    tl_status st = tl_engine_create(&c, &e);
    if (st != TL_OK)
        return fail(1, "cannot create an engine for the micro-benchmarks: %s (%s)",
                    tl_engine_last_error(NULL), tl_status_name(st));
    bool unsupported;
    int rc = tl_bench_print_rates(ME, e, &unsupported);
    tl_engine_destroy(e);
    return rc;
}

/* ---- per-frame pipeline --------------------------------------------------------------- */

#define STREAM_SECONDS 0.3 /* each run of the ingest-capacity measurement, about */

/* Ingest capacity: frames submitted back to back as a stream delivers them (indices
 * rising, the window sliding; frames in GPU memory read later, as the daemon takes a CUDA
 * IPC producer's; with backlog, each but a run's last marked `more`, as the daemon marks a
 * frame with others queued behind it, so short frames are filtered in batches), timed from
 * the first submit until the engine's fences say the last one is stored. ms is one frame's
 * time (it sets how many frames make a run). Three runs, the median; *fps in frames per
 * second. */
static tl_status stream_rate(tl_engine *e, tl_frame *fp, double ms, bool backlog, double *fps)
{
    tl_frame f = *fp;
    double want = STREAM_SECONDS / (ms * 1e-3);
    uint64_t n = want < 20 ? 20 : want > 20000 ? 20000 : (uint64_t)want;
    double t[3];
    f.kind = TL_FRAME_PROJ;
    f.read_later = f.memory == TL_MEMORY_DEVICE;
    for (int run = 0; run < 3; run++) {
        uint64_t done;
        double t0 = tl_cli_now();
        for (uint64_t k = 0; k < n; k++) {
            f.index++;
            f.more = backlog && k + 1 < n;
            tl_status st = tl_engine_submit(e, &f);
            if (st != TL_OK)
                return st;
        }
        tl_status st = tl_engine_frames_done(e, tl_engine_frames_queued(e), &done);
        if (st != TL_OK)
            return st;
        t[run] = (double)n / (tl_cli_now() - t0);
    }
    fp->index = f.index; /* a later run goes on from here: the window has moved */
    *fps = tl_cli_median(t, 3);
    return TL_OK;
}

/* stream_rate with the streaming benchmark's four slices (stream_bench.c) tracked, so that
 * every frame also updates them: a row slice at the middle row, ortho-slices x = 0, y = 0
 * and z at the middle. They are built first, as the daemon builds a slice at its first
 * read-out. */
static int tracked_rate(tl_engine *e, tl_frame *f, double ms, double *fps)
{
    const tl_engine_config *c = tl_engine_get_config(e);
    uint32_t R = c->rows, C = c->cols;
    tl_slice_spec sp[4];
    tl_slice_spec_row(&sp[0], R / 2, C, C);
    tl_slice_spec_ortho(&sp[1], TL_AXIS_X, 0, R, C);
    tl_slice_spec_ortho(&sp[2], TL_AXIS_Y, 0, R, C);
    tl_slice_spec_ortho(&sp[3], TL_AXIS_Z, R / 2 + 0.5, C, C);
    int ids[4], n = 0;
    float *out[4] = {NULL};
    tl_status st = TL_OK;
    for (; n < 4 && st == TL_OK; n++) {
        st = tl_engine_add_slice(e, &sp[n], &ids[n]);
        if (st == TL_OK)
            st = tl_engine_track(e, ids[n], true);
        if (st == TL_OK && !(out[n] = malloc((size_t)sp[n].height * sp[n].width * sizeof(float))))
            st = TL_ENOMEM;
    }
    if (st == TL_OK)
        st = tl_engine_reconstruct(e, ids, 4, out, NULL);
    if (st == TL_OK)
        st = stream_rate(e, f, ms, true, fps);
    int rc = st == TL_OK ? 0
                         : fail(1, "pipeline with four tracked slices: %s (%s)",
                                tl_engine_last_error(e), tl_status_name(st));
    for (int k = 0; k < n; k++) {
        tl_engine_remove_slice(e, ids[k]);
        free(out[k]);
    }
    return rc;
}

/* The pipeline on the first nd devices of --gpus (nd = 0: on --device); *ms its median,
 * *fps the ingest capacity (stream_rate, as a backlog), *fps_alone the same with every
 * frame filtered alone (no batches: the in-run baseline), *fps_tracked the backlog's with
 * four tracked slices (CUDA only).
 * gpu_frames: the frame waits in GPU memory of the first device (as a CUDA IPC producer's
 * would), so nothing is uploaded; other GPUs copy their rows from there. */
static int pipeline_once(const options *o, uint32_t nd, bool gpu_frames, double *ms, double *fps,
                         double *fps_alone, double *fps_tracked)
{
    uint32_t R = o->prow, C = o->pcol;
    tl_engine_config c;
    tl_engine_config_init(&c, R, C, 4);
    c.backend = o->backend;
    c.device = o->device;
    c.dtype = TL_DTYPE_U16;
    tl_bench_use_gpus(&c, &o->gpus, nd);
    char where[160] = "";
    if (nd > 0)
        tl_bench_gpus_label(&o->gpus, nd, where, sizeof where);
    if (nd > 1) {
        size_t n = strlen(where);
        if (R % nd == 0)
            snprintf(where + n, sizeof where - n, ", %u rows each", R / nd);
        else
            snprintf(where + n, sizeof where - n, ", %u or %u rows each", R / nd, R / nd + 1);
    }
    tl_engine *e;
    tl_status st = tl_engine_create(&c, &e);
    if (st != TL_OK)
        return fail(1, "cannot create the pipeline engine (%ux%u u16%s%s): %s (%s)", R, C,
                    where[0] ? ", " : "", where, tl_engine_last_error(NULL), tl_status_name(st));
    tl_engine_state es;
    tl_engine_get_state(e, &es);
    size_t npix = (size_t)R * C;
    uint16_t *frame = malloc(npix * sizeof *frame);
    void *dframe = NULL; /* gpu_frames: the frame in GPU memory */
    float *li = malloc(npix * sizeof *li);
    tl_phantom ph;
    int rc = frame && li && tl_phantom_shepp_logan(&ph, 0.45 * C, (R - 1) / 2.0, 0.45 * R) == 0
                 ? 0
                 : fail(1, "out of memory for a %ux%u frame", R, C);
    if (rc == 0) {
        /* a transmissive sample: a few units of attenuation at most */
        tl_phantom_scale_density(&ph, 1.0 / C);
        tl_phantom_project(&ph, 0.3, c.center, R, C, li);
        tl_phantom_free(&ph);
        tl_camera cam;
        tl_camera_init(&cam);
        const tl_sim_kind kinds[3] = {TL_SIM_DARK, TL_SIM_FLAT, TL_SIM_PROJ};
        for (int k = 0; rc == 0 && k < 3; k++) {
            tl_camera_frame_u16(&cam, kinds[k], li, R, C, NULL, frame);
            tl_frame f = {.kind = (tl_frame_kind)k,
                          .index = 0,
                          .angle = 0.3,
                          .dtype = TL_DTYPE_U16,
                          .rows = R,
                          .cols = C,
                          .data = frame};
            if (k == 2 && gpu_frames) {
                char why[256];
                int dev = nd > 0 ? o->gpus.dev[0] : o->device;
                uint8_t handle[TL_IPC_HANDLE_BYTES];
                if (tl_ipc_alloc(dev, npix * sizeof *frame, &dframe, handle, why, sizeof why) !=
                        TL_OK ||
                    tl_ipc_copy(dev, dframe, frame, npix * sizeof *frame, why, sizeof why) !=
                        TL_OK) {
                    rc = fail(1, "pipeline: a frame in GPU memory: %s", why);
                    break;
                }
                f.data = dframe;
                f.memory = TL_MEMORY_DEVICE;
            }
            st = k < 2 ? tl_engine_submit(e, &f) : tl_engine_bench_store(e, &f, o->reps, ms);
            if (st == TL_OK && k == 2)
                st = stream_rate(e, &f, *ms, false, fps_alone);
            if (st == TL_OK && k == 2)
                st = stream_rate(e, &f, *ms, true, fps);
            if (st != TL_OK)
                rc = fail(1, "pipeline %s: %s (%s)", k < 2 ? "calibration frame" : "benchmark",
                          tl_engine_last_error(e), tl_status_name(st));
            else if (k == 2)
                printf("\nper-frame pipeline %ux%u u16 (%sconvert + correct + filter + "
                       "store%s): %.3f ms median, %.1f frames/s, %.2f GB/s; on %s%s%s%s\n",
                       R, C,
                       gpu_frames                      ? "frame in GPU memory: no upload, + "
                       : o->backend == TL_BACKEND_CUDA ? "upload from pinned memory + "
                                                       : "",
                       nd > 1 ? ", every GPU its rows at once, the slowest timed" : "", *ms,
                       1e3 / *ms, (double)npix * sizeof *frame / (*ms * 1e-3) * 1e-9,
                       es.device_name, where[0] ? " (" : "", where, where[0] ? ")" : "");
            if (rc == 0 && k == 2)
                printf("ingest capacity, frames back to back%s: %.0f frames/s, %.2f GB/s "
                       "(each frame filtered alone: %.0f frames/s)\n",
                       gpu_frames ? " (each read later, as from a CUDA IPC producer)" : "", *fps,
                       *fps * (double)npix * sizeof *frame * 1e-9, *fps_alone);
            if (rc == 0 && k == 2 && o->backend == TL_BACKEND_CUDA) {
                rc = tracked_rate(e, &f, *ms, fps_tracked);
                if (rc == 0)
                    printf("  the same with the streaming benchmark's four slices updating "
                           "(row %u^2, ortho x, y, z): %.0f frames/s, %.2f GB/s\n",
                           C, *fps_tracked, *fps_tracked * (double)npix * sizeof *frame * 1e-9);
            }
        }
    }
    free(frame);
    free(li);
    tl_engine_destroy(e);
    tl_ipc_free(nd > 0 ? o->gpus.dev[0] : o->device, dframe);
    return rc;
}

/* The pipeline on --device or --gpus; with several GPUs, first on the first one alone. On
 * the CUDA backend, again for frames already in GPU memory (CUDA IPC sources), where
 * no upload hides how the GPU work itself scales. */
static int bench_pipeline(const options *o)
{
    for (int gpu_frames = 0; gpu_frames <= (o->backend == TL_BACKEND_CUDA); gpu_frames++) {
        double one = 0, all = 0, fps_one = 0, fps_all = 0, tr_one = 0, tr_all = 0;
        double al_one = 0, al_all = 0;
        if (o->gpus.n < 2) {
            if (pipeline_once(o, o->gpus.n, gpu_frames, &one, &fps_one, &al_one, &tr_one) != 0)
                return 1;
            continue;
        }
        if (pipeline_once(o, 1, gpu_frames, &one, &fps_one, &al_one, &tr_one) != 0 ||
            pipeline_once(o, o->gpus.n, gpu_frames, &all, &fps_all, &al_all, &tr_all) != 0)
            return 1;
        char label[96];
        tl_bench_gpus_label(&o->gpus, o->gpus.n, label, sizeof label);
        printf("per-frame pipeline%s on %s, against GPU %d alone: one frame %.2f x as fast; "
               "ingest capacity %.2f x (each frame filtered alone %.2f x), with four slices "
               "updating %.2f x\n",
               gpu_frames ? " (frames in GPU memory)" : "", label, o->gpus.dev[0], one / all,
               fps_all / fps_one, al_one > 0 ? al_all / al_one : 0.0,
               tr_one > 0 ? tr_all / tr_one : 0.0);
    }
    return 0;
}

/* ---- the command ---------------------------------------------------------------------- */

static int parse_options(int argc, char **argv, options *o)
{
    enum {
        O_BACKEND = 256,
        O_DEVICE,
        O_SHAPE,
        O_SLICES,
        O_REPS,
        O_NOPIPE,
        O_PSHAPE,
        O_NORATES,
        O_GPUS
    };
    static const struct option longopts[] = {
        {"backend", required_argument, NULL, O_BACKEND},
        {"device", required_argument, NULL, O_DEVICE},
        {"gpus", required_argument, NULL, O_GPUS},
        {"shape", required_argument, NULL, O_SHAPE},
        {"slices", required_argument, NULL, O_SLICES},
        {"reps", required_argument, NULL, O_REPS},
        {"no-pipeline", no_argument, NULL, O_NOPIPE},
        {"pipeline-shape", required_argument, NULL, O_PSHAPE},
        {"no-rates", no_argument, NULL, O_NORATES},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->reps = 20;
    o->pipeline = o->rates = true;
    o->counts[0] = 1, o->counts[1] = 2, o->counts[2] = 4, o->ncounts = 3;
    o->prow = o->pcol = 2048;
    optind = 1;
    opterr = 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
            case O_BACKEND:
                if (!tl_backend_parse(optarg, &o->backend))
                    return fail(2, "unknown backend '%s' (cpu, cuda, auto)", optarg);
                break;
            case O_DEVICE:
                if (!tl_cli_long(optarg, 0, 1024, &v))
                    return fail(2, "bad --device '%s': need a device ordinal", optarg);
                o->device = (int)v;
                break;
            case O_GPUS: {
                int rc = tl_bench_parse_gpus(ME, optarg, &o->gpus);
                if (rc != 0)
                    return rc;
                break;
            }
            case O_SHAPE:
                if (o->nshapes == MAX_SHAPES ||
                    !parse_pair(optarg, 65536, &o->size[o->nshapes], &o->proj[o->nshapes]))
                    return fail(2, "bad --shape '%s': need SIZExPROJ, e.g. 2048x2048 (at most %d)",
                                optarg, MAX_SHAPES);
                o->nshapes++;
                break;
            case O_SLICES:
                if (!parse_counts(optarg, o))
                    return fail(2, "bad --slices '%s': need counts 1..256 like 1,2,4", optarg);
                break;
            case O_REPS:
                if (!tl_cli_long(optarg, 1, 100000, &v))
                    return fail(2, "bad --reps '%s': need a whole number >= 1", optarg);
                o->reps = (int)v;
                break;
            case O_NOPIPE: o->pipeline = false; break;
            case O_NORATES: o->rates = false; break;
            case O_PSHAPE:
                if (!parse_pair(optarg, 65536, &o->prow, &o->pcol))
                    return fail(2, "bad --pipeline-shape '%s': need ROWSxCOLS", optarg);
                break;
            case 'h': fputs(usage_text, stdout); return 0;
            default:
                return fail(2, "%s '%s' (see tomolive bench --help)",
                            c == ':' ? "option needs a value" : "unknown option",
                            argv[optind - 1]);
        }
    }
    if (optind < argc)
        return fail(2, "unexpected argument '%s' (see tomolive bench --help)", argv[optind]);
    if (o->gpus.n > 0)
        o->device = o->gpus.dev[0]; /* the kernel tables and micro-benchmarks: one card */
    return -1;
}

int tl_cmd_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--stream") == 0)
            return tl_cmd_stream_bench(argc, argv);
        else if (strcmp(argv[i], "--volume") == 0)
            return tl_cmd_volume_bench(argc, argv);
        else if (strcmp(argv[i], "--volume-write") == 0)
            return tl_cmd_volume_write_bench(argc, argv);
        else if (strcmp(argv[i], "--cone") == 0)
            return tl_cmd_cone_bench(argc, argv);
        else if (strcmp(argv[i], "--iterative") == 0)
            return tl_cmd_iterative_bench(argc, argv);
        else if (strcmp(argv[i], "--tomosynthesis") == 0)
            return tl_cmd_tomosynthesis_bench(argc, argv);
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    /* auto is resolved here, so the defaults and the table say which backend ran */
    char why[256] = "";
    if (o.backend == TL_BACKEND_AUTO)
        o.backend =
            tl_backend_available(TL_BACKEND_CUDA, NULL, 0) ? TL_BACKEND_CUDA : TL_BACKEND_CPU;
    else if (!tl_backend_available(o.backend, why, sizeof why))
        return fail(1, "backend %s is not available: %s", tl_backend_name(o.backend), why);
    if (o.nshapes == 0 && o.backend == TL_BACKEND_CUDA) {
        o.size[0] = o.proj[0] = 1024;
        o.size[1] = o.proj[1] = 2048;
        o.nshapes = 2;
    } else if (o.nshapes == 0) {
        o.size[0] = 512;
        o.proj[0] = 720;
        o.nshapes = 1;
    }
    bool printed = false;
    for (size_t i = 0; rc < 0 && i < o.nshapes; i++)
        if (bench_problem(&o, o.size[i], o.proj[i], &printed) != 0)
            rc = 1;
    if (rc < 0 && o.pipeline && bench_pipeline(&o) != 0)
        rc = 1;
    if (rc < 0 && o.rates && bench_rates(&o) != 0)
        rc = 1;
    return rc < 0 ? 0 : rc;
}
