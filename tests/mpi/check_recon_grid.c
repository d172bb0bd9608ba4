/* check_recon_grid.c — `mpirun -n R*C tomolive recon --grid RxC` (clients/grid.h) against
 * the one-process run of the same scan:
 *   - grids 1x1, 4x1, 1x4 and 2x2 (HDF5 output: parts and their virtual dataset): with one
 *     grid column the slices are the same computation in the same order, so the volume is
 *     equal bit for bit on the CPU backend; with several columns each slice is a sum of C
 *     partial sums, so it is within the exact mode's bounds (DESIGN.md §3: relative L2
 *     <= 2e-5, max error <= 1e-4 of the range);
 *   - a TIFF stack written by 2x2 ranks, slice files numbered as one stack;
 *   - cone beam (FDK, bands of detector rows per grid row) on 2x2;
 *   - columns whose own plans would differ (a host budget between them) take the same
 *     slabs, which their reduction needs;
 *   - --center auto on 2x2, estimated once by rank 0;
 *   - non-uniform --angles on 2x2, each column's views weighed as shares of the whole scan;
 *   - a 2x2 run stopped with SIGINT, then --resume, equals one process;
 *   - what a grid refuses, said once, and a rank count that does not match the grid;
 *   - a rank killed (SIGKILL) mid-run ends the job within seconds, saying so.
 * The backend is TL_GRID_BACKEND (default cpu; tests/gpu/recon_grid_cuda.sh: cuda, where
 * every comparison takes the tolerance: the kernels chosen may differ with the slab), and
 * mpirun is configure's or TL_MPIRUN.
 * Skips (77) without MPI (configure) or mpirun.
 */
#include "config.h"

#include <dirent.h>
#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clients/tiff.h"
#include "tests/integration/clients_util.h"
#include "tests/testutil.h"

enum { ROWS = 40, COLS = 64, NPROJ = 90 };

static char *dir;
static const char *backend = "cpu";
static const char *mpirun = MPIRUN; /* TL_MPIRUN overrides (a carried Open MPI) */

static const char *path_in(const char *name)
{
    return tl_path_in(dir, name);
}

/* Runs `tomolive args...` (NULL-terminated), one process; its exit status. */
#define RECON(...) tl_client_run(dir, (const char *const[]){"recon", __VA_ARGS__, NULL}, 120)

/* Starts `mpirun -n ranks tomolive recon args...` in the background. */
static pid_t mpi_start(int ranks, const char *const *args)
{
    char n[16];
    snprintf(n, sizeof n, "%d", ranks);
    const char *argv[96] = {mpirun, "--oversubscribe", "-n", n, tl_client_binary(), "recon"};
    size_t k = 6;
    for (size_t i = 0; args[i] && k < 95; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    /* In the sanitizer build (.ci/run), Open MPI's plugins leak from modules that
     * MPI_Finalize unloads, where LeakSanitizer can name no library to suppress: the ranks
     * run without the leak check (the one-process runs keep it); ASan and UBSan stay on. */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL, opts[1024];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", asan ? asan : "", asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    pid_t pid = tl_client_exec(dir, argv);
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    return pid;
}

#define MPI_RECON(ranks, ...) \
    tl_client_wait(mpi_start(ranks, (const char *const[]){__VA_ARGS__, NULL}), 120)

/* /volume of an HDF5 file (a virtual dataset too) as floats, malloc'ed. */
static float *read_volume(const char *path, hsize_t dims[3])
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_msg(f >= 0, "cannot open %s", path);
    hid_t d = H5Dopen2(f, "/volume", H5P_DEFAULT);
    ck_assert_int_ge(d, 0);
    hid_t s = H5Dget_space(d);
    H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    float *v = malloc(dims[0] * dims[1] * dims[2] * sizeof *v);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_ge(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), 0);
    H5Dclose(d);
    H5Fclose(f);
    return v;
}

/* b equals a: bit for bit when `exact`, else within the exact mode's bounds. */
static void assert_close(const char *what, const float *a, const float *b, size_t n, bool exact)
{
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
    double rel = tl_rel_l2(b, a, n), maxrel = tl_max_over_range(b, a, n);
    printf("%s: %zu of %zu values differ, relative L2 %.3g, max %.3g of the range\n", what, differ,
           n, rel, maxrel);
    if (exact)
        ck_assert_msg(differ == 0, "%s: %zu values differ from the one-process volume", what,
                      differ);
    ck_assert_msg(rel <= 2e-5 && maxrel <= 1e-4,
                  "%s: relative L2 %.3g (bound 2e-5), max %.3g of the range (bound 1e-4)", what,
                  rel, maxrel);
}

/* The HDF5 volumes `one` (one process) and `grid` have one shape and are within the exact
 * mode's bounds of each other. */
static void same_volume(const char *what, const char *one, const char *grid)
{
    hsize_t da[3], db[3];
    float *a = read_volume(path_in(one), da), *b = read_volume(path_in(grid), db);
    ck_assert(da[0] == db[0] && da[1] == db[1] && da[2] == db[2]);
    assert_close(what, a, b, da[0] * da[1] * da[2], false);
    free(a);
    free(b);
}

static bool cpu(void)
{
    return strcmp(backend, "cpu") == 0;
}

/* `tomolive phantom --scan NAME`: a parallel-beam scan of proj views of rows x size. */
static void phantom_scan(const char *name, unsigned proj, unsigned size, unsigned rows)
{
    char p[16], s[16], r[16];
    snprintf(p, sizeof p, "%u", proj);
    snprintf(s, sizeof s, "%u", size);
    snprintf(r, sizeof r, "%u", rows);
    ck_assert_int_eq(tl_client_run(dir,
                                   (const char *const[]){"phantom", "--scan", path_in(name),
                                                         "--projections", p, "--size", s, "--rows",
                                                         r, NULL},
                                   120),
                     0);
}

/* A scan long enough to be mid-run when a test stops a rank (one row per slab). */
enum { LONG_PROJ = 720, LONG_SIZE = 192, LONG_ROWS = 128 };

static void setup(void)
{
    dir = tl_tmpdir("recon_grid");
    ck_assert_ptr_nonnull(dir);
    phantom_scan("scan.h5", NPROJ, COLS, ROWS);
    ck_assert_int_eq(RECON("--input", path_in("scan.h5"), "--backend", backend, "--output",
                           path_in("one.h5")),
                     0);
}

static void teardown(void)
{
    if (!getenv("TL_KEEP_TMP"))
        tl_rm_rf(dir);
}

START_TEST(test_grids_equal_one_process)
{
    /* --plan: the plan and seed 004's model from a sample run, nothing written */
    int prc = MPI_RECON(4, "--grid", "2x2", "--input", path_in("scan.h5"), "--backend", backend,
                        "--plan", "--output", path_in("plan.h5"));
    ck_assert_msg(prc == 0, "--plan: exit %d: %s", prc, tl_client_err());
    ck_assert_msg(strstr(tl_client_out(), "plan: ") &&
                      strstr(tl_client_out(), "model (seed 004") &&
                      strstr(tl_client_out(), "back projection"),
                  "%s", tl_client_out());
    ck_assert(access(path_in("plan.h5"), F_OK) != 0 &&
              access(path_in("plan-part0.h5"), F_OK) != 0);
    hsize_t d1[3];
    float *one = read_volume(path_in("one.h5"), d1);
    const struct {
        const char *grid;
        int ranks, parts;
    } runs[] = {{"1x1", 1, 1}, {"4x1", 4, 4}, {"1x4", 4, 1}, {"2x2", 4, 2}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char out[64], ranks[16];
        snprintf(out, sizeof out, "grid%s.h5", runs[i].grid);
        snprintf(ranks, sizeof ranks, "%d", runs[i].ranks);
        int rc = MPI_RECON(runs[i].ranks, "--grid", runs[i].grid, "--input", path_in("scan.h5"),
                           "--backend", backend, "-v", "--output", path_in(out));
        ck_assert_msg(rc == 0, "--grid %s: exit %d: %s", runs[i].grid, rc, tl_client_err());
        ck_assert_msg(strstr(tl_client_err(), "model (seed 004") &&
                          strstr(tl_client_err(), "run (pipelined)"),
                      "--grid %s -v prints no model beside the stages: %s", runs[i].grid,
                      tl_client_err());
        /* a part per grid row beside the output, when there are several */
        char part[96];
        snprintf(part, sizeof part, "grid%s-part%d.h5", runs[i].grid, runs[i].parts - 1);
        ck_assert_msg((runs[i].parts > 1) == (access(path_in(part), F_OK) == 0),
                      "--grid %s: part file %s %s", runs[i].grid, part,
                      runs[i].parts > 1 ? "missing" : "written for one grid row");
        hsize_t d[3];
        float *v = read_volume(path_in(out), d);
        ck_assert(d[0] == d1[0] && d[1] == d1[1] && d[2] == d1[2]);
        bool one_column = strchr(runs[i].grid, 'x')[1] == '1';
        assert_close(runs[i].grid, one, v, d[0] * d[1] * d[2], one_column && cpu());
        free(v);
    }
    free(one);
}
END_TEST

/* A slice of a TIFF stack as floats. */
static void read_slice(const char *path, float *buf)
{
    tl_tiff_reader r;
    char err[512];
    ck_assert_msg(tl_tiff_open(&r, path, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(tl_tiff_read_page(&r, 0, buf, err, sizeof err) == 0, "%s", err);
    tl_tiff_close(&r);
}

START_TEST(test_tiff_stack_in_parts)
{
    ck_assert_int_eq(RECON("--input", path_in("scan.h5"), "--backend", backend, "--output",
                           path_in("one/")),
                     0);
    int rc = MPI_RECON(4, "--grid", "2x2", "--input", path_in("scan.h5"), "--backend", backend,
                       "--output", path_in("grid/"));
    ck_assert_msg(rc == 0, "exit %d: %s", rc, tl_client_err());
    size_t npx = (size_t)COLS * COLS;
    float *a = malloc(ROWS * npx * sizeof *a), *b = malloc(ROWS * npx * sizeof *b);
    for (int z = 0; z < ROWS; z++) {
        char name[64];
        snprintf(name, sizeof name, "one/slice_%05d.tif", z);
        read_slice(path_in(name), a + z * npx);
        snprintf(name, sizeof name, "grid/slice_%05d.tif", z);
        read_slice(path_in(name), b + z * npx);
    }
    char extra[64];
    snprintf(extra, sizeof extra, "grid/slice_%05d.tif", ROWS);
    ck_assert_msg(access(path_in(extra), F_OK) != 0, "a slice past the volume was written");
    /* each grid row keeps its own progress record */
    ck_assert(access(path_in("grid/tomolive-progress-part0"), F_OK) == 0);
    ck_assert(access(path_in("grid/tomolive-progress-part1"), F_OK) == 0);
    assert_close("TIFF stack 2x2", a, b, ROWS * npx, false);
    free(a);
    free(b);
}
END_TEST

START_TEST(test_cone_beam)
{
    const char *cone[] = {"--geometry",        "cone", "--source-origin", "200",
                          "--source-detector", "400",  "--pixel-size",    "0.5"};
    ck_assert_int_eq(tl_client_run(dir,
                                   (const char *const[]){"phantom", "--scan", path_in("cone.h5"),
                                                         "--projections", "72", "--size", "48",
                                                         "--rows", "32", cone[0], cone[1], cone[2],
                                                         cone[3], cone[4], cone[5], cone[6],
                                                         cone[7], NULL},
                                   60),
                     0);
    ck_assert_int_eq(RECON("--input", path_in("cone.h5"), "--backend", backend, cone[0], cone[1],
                           cone[2], cone[3], cone[4], cone[5], cone[6], cone[7], "--output",
                           path_in("cone1.h5")),
                     0);
    /* a GPU budget below whole frames: each grid row reads bands of the detector */
    int rc = MPI_RECON(4, "--grid", "2x2", "--input", path_in("cone.h5"), "--backend", backend,
                       cone[0], cone[1], cone[2], cone[3], cone[4], cone[5], cone[6], cone[7],
                       "--gpu-memory", "400K", "-v", "--output", path_in("cone22.h5"));
    ck_assert_msg(rc == 0, "exit %d: %s", rc, tl_client_err());
    ck_assert_msg(strstr(tl_client_err(), "plan: bands of"), "no bands: %s", tl_client_err());
    same_volume("cone 2x2", "cone1.h5", "cone22.h5");
}
END_TEST

/* The slab height a plan of `scan` (with a window of 91) takes under a host budget. */
static uint32_t planned_rows(const char *scan, long budget)
{
    char b[32];
    snprintf(b, sizeof b, "%ld", budget);
    int rc = RECON("--input", path_in(scan), "--backend", "cpu", "--window", "91", "--host-memory",
                   b, "--write-threads", "1", "--plan");
    const char *p = strstr(tl_client_out(), "slabs of ");
    uint32_t h = 0;
    return rc == 0 && p && sscanf(p, "slabs of %u rows", &h) == 1 ? h : 0;
}

START_TEST(test_columns_take_the_same_slabs)
{
    /* 91 projections in two columns: 45 and 46. Find a host budget under which the
     * column of 46 plans shorter slabs than the column of 45 on its own */
    phantom_scan("s45.h5", 45, COLS, ROWS);
    phantom_scan("s46.h5", 46, COLS, ROWS);
    phantom_scan("s91.h5", 91, COLS, ROWS);
    long lo = 50000, hi = 400000; /* the 46 column: 1 row at lo, more at hi */
    ck_assert_uint_eq(planned_rows("s46.h5", lo), 1);
    ck_assert_uint_gt(planned_rows("s46.h5", hi), 1);
    while (hi - lo > 8) {
        long mid = (lo + hi) / 2;
        *(planned_rows("s46.h5", mid) > 1 ? &hi : &lo) = mid;
    }
    uint32_t h45 = planned_rows("s45.h5", lo), h46 = planned_rows("s46.h5", lo);
    printf("host budget %ld: a column of 45 plans %u rows, of 46 %u\n", lo, h45, h46);
    ck_assert_uint_gt(h45, h46);
    /* the grid row reduces slab by slab: both take the shorter; the volume is the one
     * process's */
    char budget[32];
    snprintf(budget, sizeof budget, "%ld", lo);
    ck_assert_int_eq(RECON("--input", path_in("s91.h5"), "--backend", backend, "--output",
                           path_in("s91-one.h5")),
                     0);
    int rc = MPI_RECON(2, "--grid", "1x2", "--input", path_in("s91.h5"), "--backend", backend,
                       "--host-memory", budget, "--write-threads", "1", "--output",
                       path_in("s91-grid.h5"));
    ck_assert_msg(rc == 0, "exit %d: %s", rc, tl_client_err());
    same_volume("1x2 with unequal plans", "s91-one.h5", "s91-grid.h5");
}
END_TEST

START_TEST(test_center_auto)
{
    /* --center auto: rank 0 estimates for every rank, said once; the one process's axis */
    ck_assert_int_eq(RECON("--input", path_in("scan.h5"), "--backend", backend, "--center", "auto",
                           "--output", path_in("auto-one.h5")),
                     0);
    int rc = MPI_RECON(4, "--grid", "2x2", "--input", path_in("scan.h5"), "--backend", backend,
                       "--center", "auto", "--output", path_in("auto-grid.h5"));
    ck_assert_msg(rc == 0, "exit %d: %s", rc, tl_client_err());
    ck_assert_int_eq(tl_count_lines(tl_client_err(), "center="), 1);
    same_volume("2x2 --center auto", "auto-one.h5", "auto-grid.h5");
}
END_TEST

START_TEST(test_non_uniform_angles)
{
    /* --angles FILE, unevenly spaced: every projection weighs its share of the whole
     * scan's range, in each grid column too (engine weight_angles) */
    FILE *f = fopen(path_in("angles.txt"), "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < NPROJ; i++) {
        double t = (double)i / NPROJ;
        fprintf(f, "%.12f\n", 180.0 * (t - 0.12 * sin(2 * M_PI * t)));
    }
    fclose(f);
    ck_assert_int_eq(RECON("--input", path_in("scan.h5"), "--backend", backend, "--angles",
                           path_in("angles.txt"), "--output", path_in("ang-one.h5")),
                     0);
    int rc = MPI_RECON(4, "--grid", "2x2", "--input", path_in("scan.h5"), "--backend", backend,
                       "--angles", path_in("angles.txt"), "--output", path_in("ang-grid.h5"));
    ck_assert_msg(rc == 0, "exit %d: %s", rc, tl_client_err());
    same_volume("2x2 non-uniform angles", "ang-one.h5", "ang-grid.h5");
}
END_TEST

static int children(pid_t parent, pid_t *out, int cap);

START_TEST(test_resume)
{
    /* a 2x2 run stopped (SIGINT to every rank) once slabs are written, then --resume: the
     * one-process volume */
    phantom_scan("mid.h5", LONG_PROJ, LONG_SIZE, LONG_ROWS);
    ck_assert_int_eq(RECON("--input", path_in("mid.h5"), "--backend", backend, "--output",
                           path_in("mid-one.h5")),
                     0);
    const char *const args[] = {"--grid",      "2x2",
                                "--input",     path_in("mid.h5"),
                                "--backend",   backend,
                                "--slab-rows", "1",
                                "--output",    path_in("mid-grid.h5"),
                                NULL};
    pid_t job = mpi_start(4, args);
    ck_assert_msg(tl_client_wait_out(job, "progress slab=3/", 60), "no slab written");
    /* as Ctrl-C on a terminal, to every rank (mpirun signalled alone ends the job with
     * SIGKILL to its own process group: this test's, here) */
    pid_t ranks[8];
    int n = children(job, ranks, 8);
    ck_assert_int_eq(n, 4);
    for (int i = 0; i < n; i++)
        kill(ranks[i], SIGINT);
    int rc = tl_client_wait(job, 30);
    ck_assert_int_ne(rc, 0);
    int rr = MPI_RECON(4, "--grid", "2x2", "--input", path_in("mid.h5"), "--backend", backend,
                       "--slab-rows", "1", "--resume", "--output", path_in("mid-grid.h5"));
    ck_assert_msg(rr == 0, "--resume: exit %d: %s", rr, tl_client_err());
    ck_assert_msg(strstr(tl_client_err(), "this grid row's part: resuming at row "), "%s",
                  tl_client_err());
    unsigned at = 0;
    const char *p = strstr(tl_client_err(), "resuming at row ");
    ck_assert(p && sscanf(p, "resuming at row %u", &at) == 1);
    printf("resumed at row %u of a grid row's part\n", at);
    same_volume("2x2 resumed", "mid-one.h5", "mid-grid.h5");
}
END_TEST

START_TEST(test_refusals)
{
    /* several grid columns sum partial volumes: an iterative method is no such sum */
    int rc = MPI_RECON(4, "--grid", "2x2", "--input", path_in("scan.h5"), "--backend", backend,
                       "--method", "sirt", "--output", path_in("no.h5"));
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(tl_client_err(), "--method (not a sum over projections) needs one grid "
                                          "column (--grid 4x1)"),
                  "%s", tl_client_err());
    ck_assert(access(path_in("no.h5"), F_OK) != 0);
    /* the job's ranks must be the grid's, said once */
    rc = MPI_RECON(3, "--grid", "2x2", "--input", path_in("scan.h5"), "--backend", backend,
                   "--output", path_in("no.h5"));
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(tl_count_lines(tl_client_err(), "tomolive recon: --grid 2x2 needs 4 ranks, "
                                                  "and the job has 3") == 1,
                  "%s", tl_client_err());
    /* a multi-page TIFF cannot be written in parts */
    rc = MPI_RECON(2, "--grid", "2x1", "--input", path_in("scan.h5"), "--backend", backend,
                   "--output", path_in("no.tif"));
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(tl_client_err(), "cannot be written in parts"), "%s", tl_client_err());
    /* without mpirun's grid: a plain run refuses --gpus-per-node */
    ck_assert_int_eq(RECON("--input", path_in("scan.h5"), "--gpus-per-node", "2", "--output",
                           path_in("no.h5")),
                     1);
    ck_assert_msg(strstr(tl_client_err(), "--gpus-per-node: only with --grid"), "%s",
                  tl_client_err());
}
END_TEST

/* The ranks mpirun started (its children running tomolive). */
static int children(pid_t parent, pid_t *out, int cap)
{
    DIR *d = opendir("/proc");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        char path[300], comm[64] = "";
        int pid = atoi(e->d_name), ppid = 0;
        if (pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fscanf(f, "%*d (%63[^)]) %*c %d", comm, &ppid) == 2 && ppid == parent &&
            strcmp(comm, "tomolive") == 0)
            out[n++] = pid;
        fclose(f);
    }
    closedir(d);
    return n;
}

START_TEST(test_killed_rank_ends_the_job)
{
    if (!cpu()) { /* mpirun's part, whatever the backend; a GPU would finish first */
        printf("killed rank: on the CPU backend only\n");
        return;
    }
    phantom_scan("big.h5", LONG_PROJ, LONG_SIZE, LONG_ROWS);
    pid_t job = mpi_start(4, (const char *const[]){"--grid", "2x2", "--input", path_in("big.h5"),
                                                   "--backend", backend, "--slab-rows", "1",
                                                   "--output", path_in("big-out.h5"), NULL});
    /* mid-run: rank 0 has written its first slab's progress line */
    ck_assert_msg(tl_client_wait_out(job, "progress slab=1/", 60), "the job never started");
    pid_t ranks[8];
    int n = children(job, ranks, 8);
    ck_assert_int_eq(n, 4);
    ck_assert(tl_client_running(job));
    double t0 = tl_now_s();
    kill(ranks[n - 1], SIGKILL);
    int rc = tl_client_wait(job, 30);
    double took = tl_now_s() - t0;
    printf("a killed rank ended the job in %.2f s (exit %d)\n", took, rc);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(took < 10, "the job took %.1f s to end", took);
    ck_assert_msg(strstr(tl_client_err(), "signal 9") || strstr(tl_client_err(), "Killed"),
                  "mpirun did not say a rank was killed: %s", tl_client_err());
}
END_TEST

int main(void)
{
    mpirun = tl_test_mpirun(MPIRUN);
    const char *b = getenv("TL_GRID_BACKEND");
    backend = b && *b ? b : "cpu";
    Suite *s = suite_create("recon_grid");
    TCase *tc = tcase_create("grid");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_grids_equal_one_process);
    tcase_add_test(tc, test_tiff_stack_in_parts);
    tcase_add_test(tc, test_cone_beam);
    tcase_add_test(tc, test_columns_take_the_same_slabs);
    tcase_add_test(tc, test_center_auto);
    tcase_add_test(tc, test_non_uniform_angles);
    tcase_add_test(tc, test_resume);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_killed_rank_ends_the_job);
    suite_add_tcase(s, tc);
    return tl_run_suite(s, false);
}
