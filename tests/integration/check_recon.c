/* check_recon.c — `tomolive recon` end to end: the built binary on a simulated scan.
 *
 * A Shepp-Logan scan is written as uint16 TIFF stacks (darks, flats with a gain pattern,
 * projections), the binary reconstructs it, and every output page is compared with the
 * same engine driven in-process from the same frames (so the command is shown to feed the
 * engine exactly: rows, pitch, angles, centre, filter, weights) and with the phantom itself
 * (so the whole chain is shown to produce the object). Every error path runs the binary
 * and checks its exit status and message.
 */
#include "config.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clients/tiff.h"
#include "gpu/engine.h"
#include "gpu/phantom.h"
#include "tests/testutil.h"

enum { ROWS = 64, COLS = 128, NPROJ = 180, NDARK = 8, NFLAT = 8 };
#define DENSITY_SCALE 0.05 /* per-pixel densities: a transmissive sample (peak ~ 1.3) */

static char *dir;
static tl_phantom phantom;
static uint16_t *darks, *flats, *projs;

/* A path in the scan's directory; the ring is long enough for every path one test
 * holds at once. */
static const char *path_in(const char *name)
{
    return tl_path_in(dir, name);
}

static void write_stack(const char *name, tl_dtype t, const void *frames, uint32_t n,
                        uint32_t rows, uint32_t cols)
{
    char err[512];
    tl_tiff_writer w;
    size_t bytes = (size_t)rows * cols * tl_dtype_size(t);
    ck_assert_msg(tl_tiff_create(&w, path_in(name), 0, err, sizeof err) == 0, "%s", err);
    for (uint32_t i = 0; i < n; i++)
        ck_assert_msg(tl_tiff_write_page(&w, t, (const uint8_t *)frames + i * bytes, rows, cols,
                                         err, sizeof err) == 0,
                      "%s", err);
    ck_assert_msg(tl_tiff_finish(&w, err, sizeof err) == 0, "%s", err);
}

/* Once for the test case (in the parent, before the tests fork). */
static void make_scan(void)
{
    dir = tl_tmpdir("recon");
    ck_assert_ptr_nonnull(dir);
    ck_assert_int_eq(tl_phantom_shepp_logan(&phantom, 0.45 * COLS, (ROWS - 1) / 2.0, 0.45 * ROWS),
                     0);
    for (size_t i = 0; i < phantom.n; i++)
        phantom.e[i].density *= DENSITY_SCALE;
    size_t npix = (size_t)ROWS * COLS;
    darks = malloc(NDARK * npix * sizeof *darks);
    flats = malloc(NFLAT * npix * sizeof *flats);
    projs = malloc(NPROJ * npix * sizeof *projs);
    float *li = malloc(NPROJ * npix * sizeof *li), *counts = malloc(NPROJ * npix * sizeof *li);
    tl_camera cam;
    tl_camera_init(&cam);
    cam.noise = true; /* darks and flats vary frame to frame, as they do; averaging matters */
    tl_rng rng;
    tl_rng_seed(&rng, 2024);
    for (int i = 0; i < NDARK; i++)
        tl_camera_frame_u16(&cam, TL_SIM_DARK, NULL, ROWS, COLS, &rng, darks + i * npix);
    for (int i = 0; i < NFLAT; i++)
        tl_camera_frame_u16(&cam, TL_SIM_FLAT, NULL, ROWS, COLS, &rng, flats + i * npix);
    cam.noise = false; /* noise-free projections, so the phantom comparison means something */
    for (int i = 0; i < NPROJ; i++) {
        tl_phantom_project(&phantom, i * M_PI / NPROJ, (COLS - 1) / 2.0, ROWS, COLS,
                           li + i * npix);
        tl_camera_frame_u16(&cam, TL_SIM_PROJ, li + i * npix, ROWS, COLS, NULL, projs + i * npix);
    }
    for (size_t k = 0; k < NPROJ * npix; k++)
        counts[k] = projs[k];
    write_stack("darks.tif", TL_DTYPE_U16, darks, NDARK, ROWS, COLS);
    write_stack("flats.tif", TL_DTYPE_U16, flats, NFLAT, ROWS, COLS);
    write_stack("proj.tif", TL_DTYPE_U16, projs, NPROJ, ROWS, COLS);
    /* the same counts as float32 (mixed with uint16 darks and flats), and the exact line
     * integrals (for --already-linear) */
    write_stack("proj_f32.tif", TL_DTYPE_F32, counts, NPROJ, ROWS, COLS);
    write_stack("proj_li.tif", TL_DTYPE_F32, li, NPROJ, ROWS, COLS);
    free(li);
    free(counts);
    /* a dark stack of the wrong shape, and the angles as a file with comments */
    write_stack("darks_small.tif", TL_DTYPE_U16, darks, 2, ROWS / 2, COLS);
    FILE *f = fopen(path_in("angles.txt"), "w");
    fprintf(f, "# angles of proj.tif, degrees\n\n");
    for (int i = 0; i < NPROJ; i++)
        fprintf(f, i % 10 ? "%.17g\n" : "  %.17g   # every tenth has a comment\n",
                i * 180.0 / NPROJ);
    fclose(f);
    f = fopen(path_in("angles_bad.txt"), "w");
    fprintf(f, "0\n1\nzero point five\n");
    fclose(f);
}

static void drop_scan(void)
{
    tl_rm_rf(dir);
    free(dir);
    free(darks);
    free(flats);
    free(projs);
    tl_phantom_free(&phantom);
}

/* ---- running the binary ------------------------------------------------------------- */

static char out_text[65536], err_text[65536];

static void slurp(const char *p, char *buf, size_t cap)
{
    FILE *f = fopen(p, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* Runs tomolive with args (NULL-terminated); returns its exit status, stdout and stderr
 * in out_text and err_text. */
static int tomolive(const char *const *args)
{
    const char *top = getenv("top_builddir");
    char bin[1024];
    snprintf(bin, sizeof bin, "%s/clients/tomolive", top && *top ? top : ".");
    ck_assert_msg(access(bin, X_OK) == 0, "%s is not built", bin);
    char *argv[64];
    size_t n = 0;
    argv[n++] = bin;
    for (; args[n - 1] && n < 63; n++)
        argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    char o[1024], e[1024];
    snprintf(o, sizeof o, "%s/stdout.txt", dir);
    snprintf(e, sizeof e, "%s/stderr.txt", dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(127);
        execv(bin, argv);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    slurp(o, out_text, sizeof out_text);
    slurp(e, err_text, sizeof err_text);
    ck_assert_msg(WIFEXITED(status), "tomolive died of a signal; stderr: %s", err_text);
    return WEXITSTATUS(status);
}

/* ---- the reference: the engine in-process ------------------------------------------- */

typedef struct {
    uint32_t row0, row1, size;
    double center;
    tl_filter filter;
    tl_weights weights;
    const tl_iter_options *iterative; /* NULL: FBP */
    bool warm;                        /* iterative: each slice from its FBP (ram-lak) */
} recon_params;

/* Slices of rows row0 .. row1-1 (size x size each, consecutive in the result). */
static float *reconstruct_here(const recon_params *p)
{
    float *start = NULL;
    if (p->iterative && p->warm) {
        recon_params fbp = *p;
        fbp.filter = TL_FILTER_RAMLAK;
        fbp.iterative = NULL;
        start = reconstruct_here(&fbp);
    }
    uint32_t nrows = p->row1 - p->row0;
    tl_engine_config c;
    tl_engine_config_init(&c, nrows, COLS, NPROJ);
    c.backend = TL_BACKEND_CPU;
    c.dtype = TL_DTYPE_U16;
    c.center = p->center;
    c.filter = p->filter;
    c.weights = p->weights;
    tl_engine *e;
    ck_assert_msg(tl_engine_create(&c, &e) == TL_OK, "%s", tl_engine_last_error(NULL));
    size_t npix = (size_t)ROWS * COLS, pitch = COLS * sizeof(uint16_t);
    struct {
        const uint16_t *f;
        int n;
        tl_frame_kind k;
    } stacks[3] = {{darks, NDARK, TL_FRAME_DARK},
                   {flats, NFLAT, TL_FRAME_FLAT},
                   {projs, NPROJ, TL_FRAME_PROJ}};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < stacks[s].n; i++) {
            tl_frame f = {.kind = stacks[s].k,
                          .index = (uint64_t)i,
                          .angle = i * 180.0 / NPROJ * M_PI / 180.0,
                          .dtype = TL_DTYPE_U16,
                          .rows = nrows,
                          .cols = COLS,
                          .pitch = pitch,
                          .data = stacks[s].f + i * npix + (size_t)p->row0 * COLS};
            ck_assert_msg(tl_engine_submit(e, &f) == TL_OK, "%s", tl_engine_last_error(e));
        }
    size_t per = (size_t)p->size * p->size;
    float *out = malloc(nrows * per * sizeof *out);
    for (uint32_t z = 0; z < nrows; z++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, z, p->size, p->size);
        int id;
        ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
        float *o = out + z * per;
        uint32_t done;
        const float *from = start ? start + z * per : NULL;
        tl_status st = p->iterative
                           ? tl_engine_iterate(e, &id, 1, p->iterative, from, o, NULL, &done, NULL)
                           : tl_engine_reconstruct(e, &id, 1, &o, NULL);
        ck_assert_msg(st == TL_OK, "%s", tl_engine_last_error(e));
        ck_assert_int_eq(tl_engine_remove_slice(e, id), TL_OK);
    }
    tl_engine_destroy(e);
    free(start);
    return out;
}

/* Reads every page of a float32 TIFF; checks the page count and shape. */
static float *read_output(const char *p, uint32_t pages, uint32_t size)
{
    char err[512];
    tl_tiff_reader r;
    ck_assert_msg(tl_tiff_open(&r, p, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(r.pages, pages);
    ck_assert_uint_eq(r.rows, size);
    ck_assert_uint_eq(r.cols, size);
    ck_assert_int_eq(r.dtype, TL_DTYPE_F32);
    size_t per = (size_t)size * size;
    float *out = malloc(pages * per * sizeof *out);
    for (uint32_t i = 0; i < pages; i++)
        ck_assert_msg(tl_tiff_read_page(&r, i, out + i * per, err, sizeof err) == 0, "%s", err);
    tl_tiff_close(&r);
    return out;
}

static void compare_pages(const float *got, const float *want, uint32_t pages, uint32_t size,
                          double *worst)
{
    size_t per = (size_t)size * size;
    *worst = 0;
    for (uint32_t i = 0; i < pages; i++) {
        double rel = tl_rel_l2(got + i * per, want + i * per, per);
        ck_assert_msg(rel <= 1e-6, "page %u: relative L2 %.3g vs the in-process engine", i, rel);
        *worst = fmax(*worst, rel);
    }
}

/* Relative L2 of a COLS x COLS slice at row z vs the phantom (x and y scaled by sx, sy = +-1
 * to compare with its mirror images), inside the reconstruction disk. */
static double phantom_rel_l2(const float *slice, double z, int sx, int sy)
{
    float *truth = malloc((size_t)COLS * COLS * sizeof *truth);
    for (uint32_t i = 0; i < COLS; i++)
        for (uint32_t j = 0; j < COLS; j++)
            truth[i * COLS + j] = (float)tl_phantom_value(&phantom, sx * (j - (COLS - 1) / 2.0),
                                                          sy * ((COLS - 1) / 2.0 - i), z);
    double rel = tl_rel_l2_disk(slice, truth, COLS, COLS, COLS / 2.0 - 1);
    free(truth);
    return rel;
}

START_TEST(test_recon_matches_engine_and_phantom)
{
    const char *out = path_in("slices.tif");
    const char *args[] = {"recon",
                          "--input",
                          path_in("proj.tif"),
                          "--darks",
                          path_in("darks.tif"),
                          "--flats",
                          path_in("flats.tif"),
                          "--angles-deg",
                          "0:180:180",
                          "--rows",
                          "24:40",
                          "--backend",
                          "cpu",
                          "-v",
                          "--output",
                          out,
                          NULL};
    int rc = tomolive(args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_text);
    ck_assert_msg(strstr(err_text, "backend cpu") != NULL, "-v says no backend: %s", err_text);
    float *got = read_output(out, 16, COLS);
    recon_params p = {24,   40,   COLS, (COLS - 1) / 2.0, TL_FILTER_RAMLAK, TL_WEIGHTS_UNIFORM,
                      NULL, false};
    float *want = reconstruct_here(&p);
    double worst;
    compare_pages(got, want, 16, COLS, &worst);
    printf("recon vs in-process engine: worst relative L2 %.3g over 16 pages\n", worst);

    /* the object: the phantom sampled at the pixel centres, inside the reconstruction disk;
     * its mirror images fit worse, so the orientation is right end to end */
    double sum = 0, worst_ph = 0, sum_xm = 0, sum_yf = 0;
    for (uint32_t k = 0; k < 16; k++) {
        double z = 24 + k, rel = phantom_rel_l2(got + k * (size_t)COLS * COLS, z, 1, 1);
        printf("row %2.0f: relative L2 vs phantom %.4f\n", z, rel);
        ck_assert_msg(rel <= 0.3, "row %.0f: relative L2 %.3f vs the phantom", z, rel);
        sum += rel;
        worst_ph = fmax(worst_ph, rel);
        sum_xm += phantom_rel_l2(got + k * (size_t)COLS * COLS, z, -1, 1);
        sum_yf += phantom_rel_l2(got + k * (size_t)COLS * COLS, z, 1, -1);
    }
    printf("recon vs phantom: mean relative L2 %.4f, worst %.4f (x-mirrored %.4f, y-flipped "
           "%.4f)\n",
           sum / 16, worst_ph, sum_xm / 16, sum_yf / 16);
    ck_assert_msg(sum_xm > 1.1 * sum && sum_yf > 1.1 * sum, "orientation: %.4f %.4f vs %.4f",
                  sum_xm / 16, sum_yf / 16, sum / 16);
    free(got);
    free(want);
}
END_TEST

START_TEST(test_recon_options)
{
    /* size, centre and filter are passed through; default rows are all of them */
    const char *out = path_in("opts.tif");
    const char *args[] = {"recon",
                          "-i",
                          path_in("proj.tif"),
                          "--darks",
                          path_in("darks.tif"),
                          "--flats",
                          path_in("flats.tif"),
                          "--angles-deg",
                          "0:180:180",
                          "--rows",
                          "30:34",
                          "--size",
                          "96",
                          "--center",
                          "63.2",
                          "--filter",
                          "hann",
                          "--backend",
                          "cpu",
                          "-o",
                          out,
                          NULL};
    int rc = tomolive(args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_text);
    float *got = read_output(out, 4, 96);
    recon_params p = {30, 34, 96, 63.2, TL_FILTER_HANN, TL_WEIGHTS_UNIFORM, NULL, false};
    float *want = reconstruct_here(&p);
    double worst;
    compare_pages(got, want, 4, 96, &worst);
    free(got);
    free(want);

    const char *all[] = {"recon",  "-i", path_in("proj.tif"), "--angles-deg", "0:180:180",
                         "--size", "16", "--backend",         "cpu",          "-o",
                         out,      NULL};
    rc = tomolive(all);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_text);
    free(read_output(out, ROWS, 16));
    /* stderr is not a terminal here: no progress output */
    ck_assert_str_eq(err_text, "");
}
END_TEST

/* The residuals `recon` printed after each iteration (of the middle row, here row 31);
 * how many. */
static int residual_curve(double *out, int cap)
{
    const char *curve = strstr(err_text, "residual of row 31 after each iteration:");
    ck_assert_msg(curve, "no residual curve: %s", err_text);
    curve = strchr(curve, ':') + 1;
    int n = 0, used;
    while (n < cap && sscanf(curve, "%lf%n", &out[n], &used) == 1) {
        curve += used;
        n++;
    }
    return n;
}

/* --method: each slice by tl_engine_iterate, as the engine in-process gives it; the
 * residual of the middle row printed after each iteration, falling; the object found; the
 * iterative options refused without --method, --filter refused with it;
 * --start zero, then fbp. */
START_TEST(test_recon_iterative)
{
    const char *out = path_in("sirt.tif");
    const char *args[] = {"recon",
                          "-i",
                          path_in("proj.tif"),
                          "--darks",
                          path_in("darks.tif"),
                          "--flats",
                          path_in("flats.tif"),
                          "--angles-deg",
                          "0:180:180",
                          "--rows",
                          "30:33",
                          "--backend",
                          "cpu",
                          "--method",
                          "os-sart",
                          "--iterations",
                          "12",
                          "--nonneg",
                          "--start",
                          "zero", /* START: fbp below */
                          "-o",
                          out,
                          NULL};
    const size_t START = 19;
    int rc = tomolive(args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_text);
    float *got = read_output(out, 3, COLS);
    tl_iter_options o = {.method = TL_ITER_OS_SART,
                         .iterations = 12,
                         .subsets = 8,
                         .relaxation = 1,
                         .nonneg = true};
    recon_params p = {30, 33,   COLS, (COLS - 1) / 2.0, TL_FILTER_NONE, TL_WEIGHTS_UNIFORM,
                      &o, false};
    float *want = reconstruct_here(&p);
    double worst;
    compare_pages(got, want, 3, COLS, &worst);
    for (uint32_t k = 0; k < 3; k++) {
        double rel = phantom_rel_l2(got + k * (size_t)COLS * COLS, 30 + k, 1, 1);
        printf("os-sart row %u: relative L2 vs phantom %.4f\n", 30 + k, rel);
        ck_assert_msg(rel <= 0.3, "row %u: relative L2 %.3f vs the phantom", 30 + k, rel);
    }
    free(got);
    free(want);
    double cold[16], warm[16];
    int n = residual_curve(cold, 16);
    ck_assert_int_eq(n, 12);
    for (int i = 1; i < n; i++)
        ck_assert_msg(cold[i] < cold[i - 1], "residual rose at iteration %d: %g -> %g", i + 1,
                      cold[i - 1], cold[i]);
    ck_assert_msg(strstr(err_text, "os-sart, 3 slices, 12..12 iterations"), "%s", err_text);

    /* --start fbp: each slice from its FBP, as the in-process engines give it; the first
     * iteration's residual is below the start from zeros' */
    ck_assert_str_eq(args[START], "zero");
    args[START] = "fbp";
    rc = tomolive(args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_text);
    got = read_output(out, 3, COLS);
    p.warm = true;
    want = reconstruct_here(&p);
    compare_pages(got, want, 3, COLS, &worst);
    free(got);
    free(want);
    ck_assert_int_eq(residual_curve(warm, 16), 12);
    printf("os-sart, first iteration's residual: from zeros %.4f, from FBP %.4f\n", cold[0],
           warm[0]);
    ck_assert_msg(warm[0] < cold[0], "from FBP %g, from zeros %g", warm[0], cold[0]);

    const char *filtered[] = {"recon",    "-i",   path_in("proj.tif"), "--angles-deg", "0:180:180",
                              "--method", "sart", "--filter",          "hann",         "-o",
                              out,        NULL};
    ck_assert_int_eq(tomolive(filtered), 1);
    ck_assert_msg(strstr(err_text, "--filter is FBP's"), "%s", err_text);
    const char *orphan[] =
        {"recon", "-i", path_in("proj.tif"), "--angles-deg", "0:180:180", "--tv", "0.1", "-o",
         out,     NULL};
    ck_assert_int_eq(tomolive(orphan), 1);
    ck_assert_msg(strstr(err_text, "need --method"), "%s", err_text);
    const char *bad[] = {"recon",
                         "-i",
                         path_in("proj.tif"),
                         "--angles-deg",
                         "0:180:180",
                         "--method",
                         "sirt",
                         "--relaxation",
                         "2",
                         "-o",
                         out,
                         NULL};
    ck_assert_int_eq(tomolive(bad), 1);
    ck_assert_msg(strstr(err_text, "bad --relaxation '2'"), "%s", err_text);
}
END_TEST

START_TEST(test_recon_angles_file)
{
    const char *out = path_in("file.tif");
    const char *args[] = {"recon",
                          "--input",
                          path_in("proj.tif"),
                          "--darks",
                          path_in("darks.tif"),
                          "--flats",
                          path_in("flats.tif"),
                          "--angles",
                          path_in("angles.txt"),
                          "--rows",
                          "31:33",
                          "--backend",
                          "cpu",
                          "--output",
                          out,
                          NULL};
    int rc = tomolive(args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_text);
    float *got = read_output(out, 2, COLS);
    recon_params p = {31,   33,   COLS, (COLS - 1) / 2.0, TL_FILTER_RAMLAK, TL_WEIGHTS_ANGLES,
                      NULL, false};
    float *want = reconstruct_here(&p);
    double worst;
    compare_pages(got, want, 2, COLS, &worst);
    free(got);
    free(want);
}
END_TEST

START_TEST(test_recon_float_and_linear)
{
    /* float32 projections with uint16 darks and flats: converted, same numbers */
    const char *out = path_in("f32.tif");
    const char *args[] = {"recon",
                          "--input",
                          path_in("proj_f32.tif"),
                          "--darks",
                          path_in("darks.tif"),
                          "--flats",
                          path_in("flats.tif"),
                          "--angles-deg",
                          "0:180:180",
                          "--rows",
                          "31:33",
                          "--backend",
                          "cpu",
                          "--output",
                          out,
                          NULL};
    int rc = tomolive(args);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_text);
    float *got = read_output(out, 2, COLS);
    recon_params p = {31,   33,   COLS, (COLS - 1) / 2.0, TL_FILTER_RAMLAK, TL_WEIGHTS_UNIFORM,
                      NULL, false};
    float *want = reconstruct_here(&p);
    double worst;
    compare_pages(got, want, 2, COLS, &worst);

    /* exact line integrals with --already-linear: the phantom without the camera */
    const char *lin[] = {"recon",
                         "--input",
                         path_in("proj_li.tif"),
                         "--already-linear",
                         "--angles-deg",
                         "0:180:180",
                         "--rows",
                         "31:33",
                         "--backend",
                         "cpu",
                         "--output",
                         out,
                         NULL};
    rc = tomolive(lin);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err_text);
    float *li = read_output(out, 2, COLS);
    double cam = tl_rel_l2(li, want, 2 * (size_t)COLS * COLS);
    double ph = phantom_rel_l2(li, 31, 1, 1);
    printf("already-linear: relative L2 %.3g vs the camera data's slices, %.4f vs phantom\n", cam,
           ph);
    /* the camera adds only uint16 rounding and dark/flat noise to the same line integrals */
    ck_assert_msg(cam <= 0.05, "already-linear vs camera data: %.3g", cam);
    ck_assert_msg(ph <= 0.3, "already-linear vs phantom: %.3f", ph);
    free(li);
    free(got);
    free(want);
}
END_TEST

typedef struct {
    const char *what;
    int status;
    const char *phrase;
    const char *args[24];
} error_case;

START_TEST(test_recon_errors)
{
    const char *P = path_in("proj.tif"), *D = path_in("darks.tif"), *F = path_in("flats.tif");
    const char *small = path_in("darks_small.tif");
    const char *out = path_in("never.tif");
    /* shorthands for the arguments most cases share */
#define ANGLES "--angles-deg", "0:180:180"
#define OUTPUT "--output", out
    const error_case cases[] = {
        {"missing input",
         1,
         "cannot open",
         {"recon", "--input", path_in("nope.tif"), ANGLES, OUTPUT}},
        {"missing darks",
         1,
         "cannot open",
         {"recon", "--input", P, "--darks", path_in("nope.tif"), ANGLES, OUTPUT}},
        {"darks shape",
         1,
         "shape mismatch",
         {"recon", "--input", P, "--darks", small, ANGLES, OUTPUT}},
        {"flats shape",
         1,
         "shape mismatch",
         {"recon", "--input", P, "--darks", D, "--flats", small, ANGLES, OUTPUT}},
        {"angle count",
         1,
         "page count mismatch",
         {"recon", "--input", P, "--flats", F, "--angles-deg", "0:180:179", OUTPUT}},
        {"angle file count",
         1,
         "page count mismatch",
         {"recon", "--input", D, "--angles", path_in("angles.txt"), OUTPUT}},
        {"output not writable",
         1,
         "cannot create",
         {"recon", "--input", P, ANGLES, "--rows", "0:1", "--output", path_in("no/dir/x.tif")}},
        {"output is an input",
         1,
         "also an input",
         {"recon", "--input", P, "--darks", D, ANGLES, "--output", D}},
        {"unknown filter",
         1,
         "unknown filter",
         {"recon", "--input", P, ANGLES, "--filter", "gauss", OUTPUT}},
        {"rows reversed",
         1,
         "bad --rows",
         {"recon", "--input", P, ANGLES, "--rows", "40:30", OUTPUT}},
        {"rows too far",
         1,
         "bad --rows",
         {"recon", "--input", P, ANGLES, "--rows", "0:65", OUTPUT}},
        {"rows empty", 1, "bad --rows", {"recon", "--input", P, ANGLES, "--rows", "7:7", OUTPUT}},
        {"rows junk", 1, "bad --rows", {"recon", "--input", P, ANGLES, "--rows", "ten", OUTPUT}},
        {"no output", 1, "missing required option --output", {"recon", "--input", P, ANGLES}},
        {"no input", 1, "missing required option --input", {"recon", ANGLES, OUTPUT}},
        {"no angles", 1, "missing required option --angles", {"recon", "--input", P, OUTPUT}},
        {"both angles",
         1,
         "not both",
         {"recon", "--input", P, ANGLES, "--angles", path_in("angles.txt"), OUTPUT}},
        {"bad angles-deg",
         1,
         "bad --angles-deg",
         {"recon", "--input", P, "--angles-deg", "0:180", OUTPUT}},
        {"angles file missing",
         1,
         "cannot open angles file",
         {"recon", "--input", P, "--angles", path_in("nope.txt"), OUTPUT}},
        {"angles file junk",
         1,
         "line 3",
         {"recon", "--input", P, "--angles", path_in("angles_bad.txt"), OUTPUT}},
        {"unknown backend",
         1,
         "unknown backend",
         {"recon", "--input", P, ANGLES, "--backend", "opencl", OUTPUT}},
        {"bad size", 1, "bad --size", {"recon", "--input", P, ANGLES, "--size", "0", OUTPUT}},
        {"bad center",
         1,
         "bad --center",
         {"recon", "--input", P, ANGLES, "--center", "middle", OUTPUT}},
        {"unknown option",
         2,
         "unknown option '--bogus'",
         {"recon", "--input", P, "--bogus", OUTPUT}},
        {"option without value", 2, "needs a value", {"recon", OUTPUT, "--input"}},
        {"stray argument", 2, "unexpected argument", {"recon", "--input", P, "extra.tif", OUTPUT}},
        {"unknown command", 2, "unknown command 'reconstruct'", {"reconstruct", "--input", P}},
    };
#undef ANGLES
#undef OUTPUT
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = tomolive(cases[i].args);
        ck_assert_msg(rc == cases[i].status, "%s: exit %d, want %d; stderr: %s", cases[i].what, rc,
                      cases[i].status, err_text);
        ck_assert_msg(strstr(err_text, cases[i].phrase) != NULL, "%s: stderr lacks '%s': %s",
                      cases[i].what, cases[i].phrase, err_text);
        /* every message is prefixed with who said it */
        ck_assert_msg(strncmp(err_text, "tomolive", 8) == 0, "%s: %s", cases[i].what, err_text);
        ck_assert_msg(access(out, F_OK) != 0, "%s left an output file", cases[i].what);
    }

    tl_tiff_reader r;
    char err[512];
    ck_assert_msg(tl_tiff_open(&r, D, err, sizeof err) == 0, "the darks were damaged: %s", err);
    ck_assert_uint_eq(r.pages, NDARK);
    tl_tiff_close(&r);

    /* a backend that cannot run fails loudly instead of falling back */
    if (!tl_backend_available(TL_BACKEND_CUDA, NULL, 0)) {
        const char *cuda[] = {"recon", "--input",   P,      "--angles-deg", "0:180:180", "--rows",
                              "0:2",   "--backend", "cuda", "--output",     out,         NULL};
        ck_assert_int_eq(tomolive(cuda), 1);
        ck_assert_msg(strstr(err_text, "cannot create the engine") != NULL, "%s", err_text);
        ck_assert(access(out, F_OK) != 0);
    }
}
END_TEST

START_TEST(test_tomolive_program)
{
    const char *version[] = {"--version", NULL};
    ck_assert_int_eq(tomolive(version), 0);
    ck_assert_msg(strstr(out_text, PACKAGE_VERSION) != NULL, "%s", out_text);
    const char *help[] = {"--help", NULL};
    ck_assert_int_eq(tomolive(help), 0);
    ck_assert_msg(strstr(out_text, "recon") != NULL, "%s", out_text);
    const char *none[] = {NULL};
    ck_assert_int_eq(tomolive(none), 2);
    ck_assert_msg(strstr(err_text, "usage") != NULL, "%s", err_text);
    const char *rhelp[] = {"recon", "--help", NULL};
    ck_assert_int_eq(tomolive(rhelp), 0);
    ck_assert_msg(strstr(out_text, "usage: tomolive recon") != NULL, "%s", out_text);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("recon");
    TCase *tc = tcase_create("recon");
    tcase_add_unchecked_fixture(tc, make_scan, drop_scan);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_tomolive_program);
    tcase_add_test(tc, test_recon_matches_engine_and_phantom);
    tcase_add_test(tc, test_recon_options);
    tcase_add_test(tc, test_recon_iterative);
    tcase_add_test(tc, test_recon_angles_file);
    tcase_add_test(tc, test_recon_float_and_linear);
    tcase_add_test(tc, test_recon_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
