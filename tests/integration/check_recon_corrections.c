/* check_recon_corrections.c — `tomolive recon` with per-frame corrections (corr_opts.h):
 * the built binary on a small simulated scan with zingers, its output compared page by
 * page with the engine driven in-process with the same corrections on whole frames (so
 * the options reach the engine and --rows only selects slices), and bad option values
 * refused with a message naming them.
 */
#include "config.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clients/tiff.h"
#include "gpu/engine.h"
#include "tests/testutil.h"

enum { ROWS = 12, COLS = 48, NPROJ = 60 };

static char *dir;
static char err_text[4096];
static uint16_t dark[ROWS * COLS], flat[ROWS * COLS], projs[NPROJ * ROWS * COLS];

static const char *path_in(const char *name)
{
    return tl_path_in(dir, name);
}

static void write_stack(const char *name, const uint16_t *frames, uint32_t n)
{
    char err[512];
    tl_tiff_writer w;
    ck_assert_msg(tl_tiff_create(&w, path_in(name), 0, err, sizeof err) == 0, "%s", err);
    for (uint32_t i = 0; i < n; i++)
        ck_assert_msg(tl_tiff_write_page(&w, TL_DTYPE_U16, frames + (size_t)i * ROWS * COLS, ROWS,
                                         COLS, err, sizeof err) == 0,
                      "%s", err);
    ck_assert_msg(tl_tiff_finish(&w, err, sizeof err) == 0, "%s", err);
}

/* A cylinder off the axis (so its projection moves with the angle), zingers sprinkled. */
static void make_scan(void)
{
    dir = tl_tmpdir("recon-corr");
    ck_assert_ptr_nonnull(dir);
    for (int i = 0; i < ROWS * COLS; i++) {
        dark[i] = 100;
        flat[i] = (uint16_t)(4000 + 13 * (i % 7));
    }
    for (int k = 0; k < NPROJ; k++)
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++) {
                double th = M_PI * k / NPROJ, u = c - (COLS - 1) / 2.0 - 6 * cos(th), R = 9;
                double len = fabs(u) < R ? 2 * sqrt(R * R - u * u) : 0;
                size_t i = (size_t)r * COLS + c;
                uint16_t v = (uint16_t)(100 + (flat[i] - 100) * exp(-0.03 * len));
                if ((k * 7919 + r * 104729 + c * 1299709) % 211 == 0)
                    v += 2500; /* a zinger */
                projs[(size_t)k * ROWS * COLS + i] = v;
            }
    write_stack("d.tif", dark, 1);
    write_stack("f.tif", flat, 1);
    write_stack("p.tif", projs, NPROJ);
}

static void remove_scan(void)
{
    tl_rm_rf(dir);
    free(dir);
}

static int tomolive(const char *const *args)
{
    const char *top = getenv("top_builddir");
    char bin[1024], e[1024];
    snprintf(bin, sizeof bin, "%s/clients/tomolive", top && *top ? top : ".");
    snprintf(e, sizeof e, "%s/stderr.txt", dir);
    char *argv[40];
    size_t n = 0;
    argv[n++] = bin;
    for (; args[n - 1] && n < 39; n++)
        argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fe < 0 || dup2(fe, 2) < 0)
            _exit(127);
        execv(bin, argv);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    FILE *f = fopen(e, "r");
    size_t len = f ? fread(err_text, 1, sizeof err_text - 1, f) : 0;
    err_text[len] = 0;
    if (f)
        fclose(f);
    ck_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* Rows row0 .. row1-1 from the engine in-process, whole frames submitted. */
static float *reconstruct_here(const tl_corrections *k, uint32_t row0, uint32_t row1)
{
    tl_engine_config c;
    tl_engine_config_init(&c, ROWS, COLS, NPROJ);
    c.backend = TL_BACKEND_CPU;
    c.corr = *k;
    tl_engine *e;
    ck_assert_msg(tl_engine_create(&c, &e) == TL_OK, "%s", tl_engine_last_error(NULL));
    tl_frame f = {.kind = TL_FRAME_DARK,
                  .dtype = TL_DTYPE_U16,
                  .rows = ROWS,
                  .cols = COLS,
                  .data = dark};
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    f.kind = TL_FRAME_FLAT;
    f.data = flat;
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    f.kind = TL_FRAME_PROJ;
    for (int i = 0; i < NPROJ; i++) {
        f.index = (uint64_t)i;
        f.angle = i * 180.0 / NPROJ * M_PI / 180.0;
        f.data = projs + (size_t)i * ROWS * COLS;
        ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    }
    size_t per = (size_t)COLS * COLS;
    float *out = malloc((row1 - row0) * per * sizeof *out);
    for (uint32_t z = row0; z < row1; z++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, z, COLS, COLS);
        int id;
        float *o = out + (z - row0) * per;
        ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
        ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &o, NULL), TL_OK);
    }
    tl_engine_destroy(e);
    return out;
}

static float *read_output(const char *p, uint32_t pages)
{
    char err[512];
    tl_tiff_reader r;
    ck_assert_msg(tl_tiff_open(&r, p, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(r.pages, pages);
    size_t per = (size_t)COLS * COLS;
    float *out = malloc(pages * per * sizeof *out);
    for (uint32_t i = 0; i < pages; i++)
        ck_assert_msg(tl_tiff_read_page(&r, i, out + i * per, err, sizeof err) == 0, "%s", err);
    tl_tiff_close(&r);
    return out;
}

START_TEST(dezinger_and_paganin)
{
    const char *args[] = {"recon",
                          "--input",
                          path_in("p.tif"),
                          "--darks",
                          path_in("d.tif"),
                          "--flats",
                          path_in("f.tif"),
                          "--angles-deg",
                          "0:180:60",
                          "--backend",
                          "cpu",
                          "--rows",
                          "3:8",
                          "--dezinger",
                          "800",
                          "--paganin",
                          "20,0.1,2,80",
                          "--rings",
                          "vo:11",
                          "--output",
                          path_in("out.tif"),
                          NULL};
    ck_assert_msg(tomolive(args) == 0, "%s", err_text);
    tl_corrections k = {.dezinger = 800,
                        .energy_kev = 20,
                        .distance_m = 0.1,
                        .pixel_um = 2,
                        .delta_beta = 80,
                        .rings = TL_RINGS_VO,
                        .ring_size = 11};
    float *want = reconstruct_here(&k, 3, 8), *got = read_output(path_in("out.tif"), 5);
    double err = tl_rel_l2(got, want, 5 * COLS * COLS);
    ck_assert_msg(err <= 1e-6, "recon vs the engine in-process: rel L2 %.3g", err);
    /* and the corrections did something: without them the slices differ */
    tl_corrections none = {0};
    float *plain = reconstruct_here(&none, 3, 8);
    ck_assert(tl_rel_l2(got, plain, 5 * COLS * COLS) > 1e-3);
    free(want);
    free(got);
    free(plain);
}
END_TEST

/* --center auto: the centre (the scan's axis is the detector's middle column, 23.5) on
 * stderr as center=C confidence=Q before the reconstruction, and used: the output is a
 * reconstruction with --center C (C as printed, rounded to 0.001 px). */
START_TEST(center_auto)
{
    const char *args[] = {"recon",
                          "--input",
                          path_in("p.tif"),
                          "--darks",
                          path_in("d.tif"),
                          "--flats",
                          path_in("f.tif"),
                          "--angles-deg",
                          "0:180:60",
                          "--backend",
                          "cpu",
                          "--dezinger",
                          "800",
                          "--center",
                          "auto",
                          "--output",
                          path_in("auto.tif"),
                          NULL};
    ck_assert_msg(tomolive(args) == 0, "%s", err_text);
    const char *at = strstr(err_text, "center=");
    ck_assert_msg(at, "no center= on stderr: %s", err_text);
    double c = 0, q = 0;
    ck_assert_int_eq(sscanf(at, "center=%lf confidence=%lf", &c, &q), 2);
    printf("recon --center auto: center=%.3f confidence=%.3f (true 23.5)\n", c, q);
    ck_assert_msg(fabs(c - 23.5) <= 0.1, "center %.3f", c);
    ck_assert(q > 0.5 && q <= 1);
    char cs[32];
    snprintf(cs, sizeof cs, "%.3f", c);
    const char *args2[] = {"recon",
                           "--input",
                           path_in("p.tif"),
                           "--darks",
                           path_in("d.tif"),
                           "--flats",
                           path_in("f.tif"),
                           "--angles-deg",
                           "0:180:60",
                           "--backend",
                           "cpu",
                           "--dezinger",
                           "800",
                           "--center",
                           cs,
                           "--output",
                           path_in("fixed.tif"),
                           NULL};
    ck_assert_msg(tomolive(args2) == 0, "%s", err_text);
    float *a = read_output(path_in("auto.tif"), ROWS),
          *b = read_output(path_in("fixed.tif"), ROWS);
    double d = tl_rel_l2(a, b, (size_t)ROWS * COLS * COLS);
    printf("recon --center auto vs --center %s: rel L2 %.3g\n", cs, d);
    ck_assert(d <= 5e-3); /* the printed centre is rounded to 0.001 px */
    free(a);
    free(b);
}
END_TEST

/* --half-acquisition: a whole turn with the axis at column 40 of 48; the slices default to
 * the stitched width (81) and equal a wide detector's half-turn scan of the same disks. */
START_TEST(half_acquisition)
{
    enum { HN = 120, HC = 48, VC = 81 };
    const double axis = 40;
    static float h[HN * 2 * HC], w[HN / 2 * 2 * VC];
    for (int k = 0; k < HN; k++)
        for (int r = 0; r < 2; r++)
            for (int u = 0; u < HC; u++) {
                double th = 2 * M_PI * k / HN, t = u - axis, d = t - 20 * cos(th);
                h[(k * 2 + r) * HC + u] =
                    (float)((fabs(t) < 38 ? 0.01 * sqrt(38 * 38 - t * t) : 0) +
                            (fabs(d) < 6 ? 0.03 * sqrt(36 - d * d) : 0));
            }
    for (int k = 0; k < HN / 2; k++) /* the wide detector: axis at its middle, 40 */
        for (int r = 0; r < 2; r++)
            for (int u = 0; u < VC; u++) {
                double th = 2 * M_PI * k / HN, t = u - 40.0, d = t - 20 * cos(th);
                w[(k * 2 + r) * VC + u] =
                    (float)((fabs(t) < 38 ? 0.01 * sqrt(38 * 38 - t * t) : 0) +
                            (fabs(d) < 6 ? 0.03 * sqrt(36 - d * d) : 0));
            }
    char err[512];
    tl_tiff_writer tw;
    const struct {
        const char *name;
        const float *px;
        int n, cols;
    } stacks[2] = {{"h.tif", h, HN, HC}, {"w.tif", w, HN / 2, VC}};
    for (int s = 0; s < 2; s++) {
        ck_assert(tl_tiff_create(&tw, path_in(stacks[s].name), 0, err, sizeof err) == 0);
        for (int k = 0; k < stacks[s].n; k++)
            ck_assert(tl_tiff_write_page(&tw, TL_DTYPE_F32, stacks[s].px + k * 2 * stacks[s].cols,
                                         2, stacks[s].cols, err, sizeof err) == 0);
        ck_assert(tl_tiff_finish(&tw, err, sizeof err) == 0);
    }
    const char *a1[] = {"recon",
                        "--input",
                        path_in("h.tif"),
                        "--angles-deg",
                        "0:360:120",
                        "--already-linear",
                        "--backend",
                        "cpu",
                        "--center",
                        "40",
                        "--half-acquisition",
                        "--output",
                        path_in("ha.tif"),
                        NULL};
    ck_assert_msg(tomolive(a1) == 0, "%s", err_text);
    const char *a2[] = {"recon",           "--input",  path_in("w.tif"),
                        "--angles-deg",    "0:180:60", "--already-linear",
                        "--backend",       "cpu",      "--output",
                        path_in("wa.tif"), NULL};
    ck_assert_msg(tomolive(a2) == 0, "%s", err_text);
    char e2[512];
    tl_tiff_reader ra, rb;
    ck_assert(tl_tiff_open(&ra, path_in("ha.tif"), e2, sizeof e2) == 0);
    ck_assert(tl_tiff_open(&rb, path_in("wa.tif"), e2, sizeof e2) == 0);
    ck_assert_uint_eq(ra.rows, VC); /* the stitched width */
    ck_assert_uint_eq(rb.rows, VC);
    static float pa[VC * VC], pb[VC * VC];
    ck_assert(tl_tiff_read_page(&ra, 0, pa, e2, sizeof e2) == 0);
    ck_assert(tl_tiff_read_page(&rb, 0, pb, e2, sizeof e2) == 0);
    tl_tiff_close(&ra);
    tl_tiff_close(&rb);
    double d = tl_rel_l2(pa, pb, VC * VC);
    printf("recon --half-acquisition vs a wide detector: rel L2 %.3g\n", d);
    ck_assert(d <= 1e-5);
    const char *a3[] = {"recon",        "--input",          path_in("h.tif"),
                        "--angles-deg", "0:360:120",        "--half-acquisition",
                        "--output",     path_in("bad.tif"), NULL};
    ck_assert_int_eq(tomolive(a3), 1);
    ck_assert(strstr(err_text, "--half-acquisition needs --center"));
}
END_TEST

/* --center auto --half-acquisition: 256 columns, the axis at 200.3, a whole turn of 360
 * projections of disks with small ones near the axis (where opposite projections
 * overlap: 111 columns): the axis printed within 0.1 px, the slices sized from it
 * (2 x 200.3 + 1 = 401 columns), and the volume equal to that of --center with the
 * printed value. */
START_TEST(half_acquisition_center_auto)
{
    enum { AN = 360, AC = 256 };
    const double axis = 200.3;
    static float h[AN * 2 * AC];
    for (int k = 0; k < AN; k++)
        for (int r = 0; r < 2; r++)
            for (int u = 0; u < AC; u++) {
                double th = 2 * M_PI * k / AN, t = u - axis, p = 0;
                if (fabs(t) < 190)
                    p += 0.002 * sqrt(190 * 190 - t * t);
                for (int j = 0; j < 12; j++) { /* small disks 10..120 px from the axis */
                    double d = t - (10 + 10 * j) * cos(th + 2.4 * j), rad = 2 + j % 4;
                    if (fabs(d) < rad)
                        p += 0.05 * sqrt(rad * rad - d * d);
                }
                h[(k * 2 + r) * AC + u] = (float)p;
            }
    char err[512], e2[512];
    tl_tiff_writer tw;
    ck_assert(tl_tiff_create(&tw, path_in("hw.tif"), 0, err, sizeof err) == 0);
    for (int k = 0; k < AN; k++)
        ck_assert(tl_tiff_write_page(&tw, TL_DTYPE_F32, h + k * 2 * AC, 2, AC, err, sizeof err) ==
                  0);
    ck_assert(tl_tiff_finish(&tw, err, sizeof err) == 0);
    const char *a1[] = {"recon",
                        "--input",
                        path_in("hw.tif"),
                        "--angles-deg",
                        "0:360:360",
                        "--already-linear",
                        "--backend",
                        "cpu",
                        "--center",
                        "auto",
                        "--half-acquisition",
                        "--output",
                        path_in("hwa.tif"),
                        NULL};
    ck_assert_msg(tomolive(a1) == 0, "%s", err_text);
    const char *at = strstr(err_text, "center=");
    ck_assert_ptr_nonnull(at);
    char found[32];
    snprintf(found, sizeof found, "%.3f", atof(at + 7));
    printf("recon --center auto --half-acquisition: center=%s (true %.1f)\n", found, axis);
    ck_assert_msg(fabs(atof(found) - axis) <= 0.1, "%s", err_text);
    const char *a2[] = {"recon",
                        "--input",
                        path_in("hw.tif"),
                        "--angles-deg",
                        "0:360:360",
                        "--already-linear",
                        "--backend",
                        "cpu",
                        "--center",
                        found,
                        "--half-acquisition",
                        "--output",
                        path_in("hwc.tif"),
                        NULL};
    ck_assert_msg(tomolive(a2) == 0, "%s", err_text);
    tl_tiff_reader ra, rb;
    ck_assert(tl_tiff_open(&ra, path_in("hwa.tif"), e2, sizeof e2) == 0);
    ck_assert(tl_tiff_open(&rb, path_in("hwc.tif"), e2, sizeof e2) == 0);
    ck_assert_uint_eq(ra.rows, 401);
    ck_assert_uint_eq(rb.rows, 401);
    static float pa[401 * 401], pb[401 * 401];
    ck_assert(tl_tiff_read_page(&ra, 0, pa, e2, sizeof e2) == 0);
    ck_assert(tl_tiff_read_page(&rb, 0, pb, e2, sizeof e2) == 0);
    tl_tiff_close(&ra);
    tl_tiff_close(&rb);
    double d = tl_rel_l2(pa, pb, 401 * 401);
    printf("  vs --center %s: rel L2 %.3g\n", found, d);
    ck_assert(d <= 1e-3); /* the printed centre is rounded to 0.001 px */
}
END_TEST

/* Out of core: a correction over forced slabs of 5 rows (5, 5, 2) equals one slab of all 12
 * rows bit for bit. Dezinger and Paganin see neighbouring rows: the engine holds whole frames
 * and the slabs only cut the output, so no slab edge has a seam. Ring removal is per row,
 * from a new engine per slab (the ring profile outlives a reset); a tolerance of 1e-12
 * applies every change of the estimate, so no slab skips a rebuild that one tall engine
 * makes. */
START_TEST(slabs_equal_one_slab)
{
    static const struct {
        const char *opt, *value;
    } corr[] = {{"--dezinger", "800"}, {"--paganin", "20,0.1,2,80"}, {"--rings", "vo:11,1e-12"}};
    for (size_t i = 0; i < sizeof corr / sizeof *corr; i++) {
        float *vol[2];
        for (int k = 0; k < 2; k++) {
            const char *out = path_in(k ? "slabs.tif" : "one.tif");
            const char *args[] = {"recon",
                                  "--input",
                                  path_in("p.tif"),
                                  "--darks",
                                  path_in("d.tif"),
                                  "--flats",
                                  path_in("f.tif"),
                                  "--angles-deg",
                                  "0:180:60",
                                  "--backend",
                                  "cpu",
                                  corr[i].opt,
                                  corr[i].value,
                                  "--slab-rows",
                                  k ? "5" : "12",
                                  "--output",
                                  out,
                                  NULL};
            ck_assert_msg(tomolive(args) == 0, "%s %s: %s", corr[i].opt, corr[i].value, err_text);
            vol[k] = read_output(out, ROWS);
        }
        ck_assert_msg(memcmp(vol[0], vol[1], (size_t)ROWS * COLS * COLS * sizeof(float)) == 0,
                      "%s %s: 3 slabs differ from 1 (rel L2 %.3g)", corr[i].opt, corr[i].value,
                      tl_rel_l2(vol[1], vol[0], (size_t)ROWS * COLS * COLS));
        free(vol[0]);
        free(vol[1]);
    }
}
END_TEST

/* --paganin whose whole frames do not fit the GPU budget: refused, naming both numbers. */
START_TEST(whole_frames_over_budget)
{
    const char *args[] = {"recon",
                          "--input",
                          path_in("p.tif"),
                          "--angles-deg",
                          "0:180:60",
                          "--backend",
                          "cpu",
                          "--paganin",
                          "20,0.1,2,80",
                          "--gpu-memory",
                          "1K",
                          "--output",
                          path_in("bad.tif"),
                          NULL};
    ck_assert_int_eq(tomolive(args), 1);
    ck_assert_msg(strstr(err_text, "need whole frames") && strstr(err_text, "over the budget"),
                  "%s", err_text);
    ck_assert(access(path_in("bad.tif"), F_OK) != 0);
}
END_TEST

START_TEST(bad_values)
{
    static const struct {
        const char *opt, *value, *says;
    } bad[] = {
        {"--paganin", "0,0.1,1,100", "energy (keV) must be a positive number"},
        {"--paganin", "20,-0.5,1,100", "distance (m) must be a positive number"},
        {"--paganin", "20,0.5,1", "ENERGY_KEV,DISTANCE_M,PIXEL_UM,DELTA_BETA"},
        {"--dezinger", "-2", "bad --dezinger '-2'"},
        {"--rings", "sorting", "bad --rings 'sorting'"},
        {"--rings", "vo:30", "median width 30 must be odd"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *args[] =
            {"recon",    "--input",    path_in("p.tif"), "--angles-deg",     "0:180:60",
             bad[i].opt, bad[i].value, "--output",       path_in("bad.tif"), NULL};
        ck_assert_int_eq(tomolive(args), 1);
        ck_assert_msg(strstr(err_text, bad[i].says), "%s %s: %s", bad[i].opt, bad[i].value,
                      err_text);
        ck_assert(access(path_in("bad.tif"), F_OK) != 0);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("recon_corrections");
    TCase *t = tcase_create("core");
    tcase_add_unchecked_fixture(t, make_scan, remove_scan);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, dezinger_and_paganin);
    tcase_add_test(t, center_auto);
    tcase_add_test(t, half_acquisition);
    tcase_add_test(t, half_acquisition_center_auto);
    tcase_add_test(t, slabs_equal_one_slab);
    tcase_add_test(t, whole_frames_over_budget);
    tcase_add_test(t, bad_values);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
