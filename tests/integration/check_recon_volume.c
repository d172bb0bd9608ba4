/* check_recon_volume.c — `tomolive recon` out of core (CPU backend): a volume cut into
 * slabs by small --gpu-memory / --host-memory budgets equals the in-core volume (one slab)
 * bit for bit, rows on both sides of every slab edge included; TIFF stacks and HDF5 in and
 * out; the same file for any --write-threads; --resume after a run killed (SIGKILL) once
 * its first slab was durable, and after
 * SIGINT; and the failures: truncated and inconsistent inputs, a full disk (a file-size
 * limit, RLIMIT_FSIZE, through `ulimit -f`: this machine cannot mount a small tmpfs), an
 * unwritable output, nothing fits.
 */
#include "config.h"

#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clients/tiff.h"
#include "gpu/phantom.h"
#include "tests/integration/clients_util.h"
#include "tests/testutil.h"

enum { ROWS = 40, COLS = 64, NPROJ = 90, NDARK = 4, NFLAT = 4 };

static char *dir;

static const char *path_in(const char *name)
{
    return tl_path_in(dir, name);
}

/* The scan: uint16 counts of a Shepp-Logan phantom, as an HDF5 Data Exchange file and as
 * TIFF stacks (a directory of single-page projections, multi-page darks and flats). */
static void make_scan(void)
{
    dir = tl_tmpdir("recon_volume");
    ck_assert_ptr_nonnull(dir);
    tl_phantom ph;
    ck_assert_int_eq(tl_phantom_shepp_logan(&ph, 0.45 * COLS, (ROWS - 1) / 2.0, 0.45 * ROWS), 0);
    size_t npix = (size_t)ROWS * COLS;
    uint16_t *proj = malloc(NPROJ * npix * 2), *dark = malloc(NDARK * npix * 2),
             *flat = malloc(NFLAT * npix * 2);
    float *li = malloc(npix * sizeof *li);
    double theta[NPROJ];
    for (int i = 0; i < NPROJ; i++) {
        theta[i] = 180.0 * i / NPROJ;
        tl_phantom_project(&ph, M_PI * i / NPROJ, (COLS - 1) / 2.0, ROWS, COLS, li);
        for (size_t k = 0; k < npix; k++)
            proj[i * npix + k] = (uint16_t)(100 + 3000 * exp(-0.02 * li[k]));
    }
    for (size_t k = 0; k < NDARK * npix; k++)
        dark[k] = (uint16_t)(100 + k % 7);
    for (size_t k = 0; k < NFLAT * npix; k++)
        flat[k] = (uint16_t)(3100 + k % 13);
    /* HDF5 */
    hid_t f = H5Fcreate(path_in("scan.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    hid_t g = H5Gcreate2(f, "/exchange", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    struct {
        const char *name;
        const uint16_t *v;
        hsize_t n;
    } sets[3] = {{"/exchange/data", proj, NPROJ},
                 {"/exchange/data_dark", dark, NDARK},
                 {"/exchange/data_white", flat, NFLAT}};
    for (int s = 0; s < 3; s++) {
        hsize_t dims[3] = {sets[s].n, ROWS, COLS}, chunk[3] = {1, 8, COLS};
        hid_t sp = H5Screate_simple(3, dims, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_chunk(pl, 3, chunk);
        hid_t d = H5Dcreate2(f, sets[s].name, H5T_STD_U16LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
        ck_assert_int_ge(H5Dwrite(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, sets[s].v),
                         0);
        H5Dclose(d);
        H5Pclose(pl);
        H5Sclose(sp);
    }
    hsize_t n = NPROJ;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "/exchange/theta", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, theta);
    H5Dclose(d);
    H5Sclose(sp);
    H5Gclose(g);
    H5Fclose(f);
    /* TIFF stacks */
    char err[512];
    mkdir(path_in("proj"), 0777);
    for (int i = 0; i < NPROJ; i++) {
        char name[64];
        snprintf(name, sizeof name, "proj/p_%04d.tif", i);
        tl_tiff_writer w;
        ck_assert_msg(tl_tiff_create(&w, path_in(name), 0, err, sizeof err) == 0, "%s", err);
        ck_assert(tl_tiff_write_page(&w, TL_DTYPE_U16, proj + i * npix, ROWS, COLS, err,
                                     sizeof err) == 0);
        ck_assert(tl_tiff_finish(&w, err, sizeof err) == 0);
    }
    const char *names[2] = {"dark.tif", "flat.tif"};
    const uint16_t *v[2] = {dark, flat};
    for (int s = 0; s < 2; s++) {
        tl_tiff_writer w;
        ck_assert(tl_tiff_create(&w, path_in(names[s]), 0, err, sizeof err) == 0);
        for (int i = 0; i < (s ? NFLAT : NDARK); i++)
            ck_assert(tl_tiff_write_page(&w, TL_DTYPE_U16, v[s] + i * npix, ROWS, COLS, err,
                                         sizeof err) == 0);
        ck_assert(tl_tiff_finish(&w, err, sizeof err) == 0);
    }
    free(proj);
    free(dark);
    free(flat);
    free(li);
    tl_phantom_free(&ph);
}

/* Runs `tomolive recon ...` (NULL-terminated) to the end; its exit status. */
#define RECON(...) tl_client_run(dir, (const char *const[]){"recon", __VA_ARGS__, NULL}, 120)

/* /volume of an HDF5 output as floats (malloc'ed), with its row count; rows_done too. */
static float *read_volume(const char *path, uint32_t *rows, uint64_t *done)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_msg(f >= 0, "cannot open %s", path);
    hid_t d = H5Dopen2(f, "/volume", H5P_DEFAULT);
    ck_assert_int_ge(d, 0);
    hid_t s = H5Dget_space(d);
    hsize_t dims[3];
    H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    float *v = malloc(dims[0] * dims[1] * dims[2] * sizeof *v);
    ck_assert_int_ge(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), 0);
    hid_t a = H5Aopen(d, "tomolive_rows_done", H5P_DEFAULT);
    ck_assert_int_ge(a, 0);
    H5Aread(a, H5T_NATIVE_UINT64, done);
    H5Aclose(a);
    H5Dclose(d);
    H5Fclose(f);
    *rows = (uint32_t)dims[0];
    return v;
}

static uint64_t rows_done(const char *path)
{
    uint32_t rows;
    uint64_t done;
    free(read_volume(path, &rows, &done));
    return done;
}

/* The two volumes are identical, bit for bit; slab edges (every `slab` rows) named. */
static void assert_same(const char *a, const char *b, uint32_t slab)
{
    uint32_t ra, rb;
    uint64_t da, db;
    float *va = read_volume(a, &ra, &da), *vb = read_volume(b, &rb, &db);
    ck_assert_uint_eq(ra, rb);
    ck_assert_uint_eq(da, ra);
    ck_assert_uint_eq(db, rb);
    size_t per = (size_t)COLS * COLS;
    for (uint32_t z = 0; z < ra; z++) {
        bool edge = slab && (z % slab == 0 || z % slab == slab - 1);
        ck_assert_msg(memcmp(va + z * per, vb + z * per, per * sizeof(float)) == 0,
                      "%s and %s differ in row %u%s", a, b, z, edge ? " (a slab edge)" : "");
    }
    /* not trivially equal: the phantom is there */
    double sum = 0;
    for (size_t i = 0; i < (size_t)ra * per; i++)
        sum += fabs(va[i]);
    ck_assert(sum > 0);
    free(va);
    free(vb);
}

static char H5[1024];
static void setup(void)
{
    make_scan();
    snprintf(H5, sizeof H5, "%s", path_in("scan.h5"));
}

static void teardown(void)
{
    if (!getenv("TL_KEEP_TMP")) /* kept for a look at a failure */
        tl_rm_rf(dir);
}

START_TEST(test_out_of_core_equals_in_core)
{
    /* in core: one slab of every row */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--slab-rows", "40", "--output",
                           path_in("in.h5")),
                     0);
    ck_assert_int_eq(tl_count_lines(tl_client_out(), "progress slab=1/1 "), 1);
    /* the plan with a GPU budget too small for one slab: several, printed */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--gpu-memory", "6M", "--plan"), 0);
    ck_assert_msg(strstr(tl_client_out(), "plan: ") && strstr(tl_client_out(), "slabs of"), "%s",
                  tl_client_out());
    ck_assert(access(path_in("ooc.h5"), F_OK) != 0);
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--gpu-memory", "6M",
                           "--host-memory", "64M", "-v", "--output", path_in("ooc.h5")),
                     0);
    uint32_t slab = 0;
    const char *p = strstr(tl_client_err(), "slabs of ");
    ck_assert_msg(p && sscanf(p, "slabs of %u rows", &slab) == 1 && slab < ROWS, "%s",
                  tl_client_err());
    ck_assert_msg(strstr(tl_client_err(), "overlap"), "-v prints no stage table: %s",
                  tl_client_err());
    assert_same(path_in("in.h5"), path_in("ooc.h5"), slab);
    /* --quality fast: the CPU backend's kernels are all exact, so the same volume */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--quality", "fast", "--slab-rows",
                           "40", "--output", path_in("fast.h5")),
                     0);
    assert_same(path_in("in.h5"), path_in("fast.h5"), 40);
    /* a host budget alone, odd slabs (7 rows: the last is shorter) */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--slab-rows", "7", "--output",
                           path_in("s7.h5")),
                     0);
    ck_assert_int_eq(tl_count_lines(tl_client_out(), "progress slab="), 6);
    assert_same(path_in("in.h5"), path_in("s7.h5"), 7);
    /* TIFF stack in (a directory of single-page files) equals HDF5 in */
    ck_assert_int_eq(RECON("--input", path_in("proj"), "--darks", path_in("dark.tif"), "--flats",
                           path_in("flat.tif"), "--angles-deg", "0:180:90", "--backend", "cpu",
                           "--slab-rows", "9", "--output", path_in("tif.h5")),
                     0);
    assert_same(path_in("in.h5"), path_in("tif.h5"), 9);
    /* TIFF stack out: one float32 file per slice, equal to the HDF5 rows */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--slab-rows", "16", "--output",
                           path_in("stack/")),
                     0);
    uint32_t rows;
    uint64_t done;
    float *v = read_volume(path_in("in.h5"), &rows, &done);
    for (uint32_t z = 0; z < ROWS; z += 13) {
        char name[64], err[512];
        snprintf(name, sizeof name, "stack/slice_%05u.tif", z);
        tl_tiff_reader r;
        ck_assert_msg(tl_tiff_open(&r, path_in(name), err, sizeof err) == 0, "%s", err);
        float *s = malloc((size_t)COLS * COLS * sizeof *s);
        ck_assert(tl_tiff_read_page(&r, 0, s, err, sizeof err) == 0);
        ck_assert(memcmp(s, v + (size_t)z * COLS * COLS, (size_t)COLS * COLS * 4) == 0);
        free(s);
        tl_tiff_close(&r);
    }
    free(v);
    /* uint16 and float16 with their scale; deflate */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--output-dtype", "uint16",
                           "--compress", "deflate:6", "--slab-rows", "5", "--output",
                           path_in("u16.h5")),
                     0);
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--output-dtype", "float16",
                           "--output", path_in("f16.h5")),
                     0);
    float *vin = read_volume(path_in("in.h5"), &rows, &done);
    float *vh = read_volume(path_in("f16.h5"), &rows, &done);
    for (size_t i = 0; i < (size_t)ROWS * COLS * COLS; i++)
        ck_assert_msg(fabsf(vh[i] - vin[i]) <= 1e-3f * fabsf(vin[i]) + 1e-6f, "%zu: %g vs %g", i,
                      vh[i], vin[i]);
    free(vh);
    hid_t f = H5Fopen(path_in("u16.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/volume", H5P_DEFAULT);
    double scale = 0, offset = 0;
    hid_t a = H5Aopen(d, "scale", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_DOUBLE, &scale);
    H5Aclose(a);
    a = H5Aopen(d, "offset", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_DOUBLE, &offset);
    H5Aclose(a);
    uint16_t *u = malloc((size_t)ROWS * COLS * COLS * 2);
    H5Dread(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, u);
    H5Dclose(d);
    H5Fclose(f);
    ck_assert(scale > 0);
    for (size_t i = 0; i < (size_t)5 * COLS * COLS;
         i++) /* the first slab (5 rows) sets the range */
        ck_assert_msg(fabs(u[i] / scale + offset - vin[i]) <= 1.0 / scale, "%zu", i);
    free(u);
    free(vin);
    /* the writer's thread count changes nothing in the file: chunks deflated in parallel
     * are stored in slice order, byte for byte, at the same places */
    const char *threads[2] = {"1", "5"}, *name[2] = {"w1.h5", "w5.h5"};
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--output-dtype", "float16",
                               "--compress", "deflate:1", "--slab-rows", "9", "--write-threads",
                               threads[i], "--output", path_in(name[i])),
                         0);
    assert_same(path_in(name[0]), path_in(name[1]), 9);
    hid_t fw[2], dw[2];
    for (int i = 0; i < 2; i++) {
        fw[i] = H5Fopen(path_in(name[i]), H5F_ACC_RDONLY, H5P_DEFAULT);
        dw[i] = H5Dopen2(fw[i], "/volume", H5P_DEFAULT);
        ck_assert(fw[i] >= 0 && dw[i] >= 0);
    }
    for (hsize_t z = 0; z < ROWS; z++) {
        hsize_t at[3] = {z, 0, 0}, size[2];
        haddr_t addr[2];
        unsigned mask[2];
        char *c[2];
        for (int i = 0; i < 2; i++) {
            ck_assert_int_ge(H5Dget_chunk_info_by_coord(dw[i], at, &mask[i], &addr[i], &size[i]),
                             0);
            c[i] = malloc(size[i]);
            uint32_t m;
            ck_assert_int_ge(H5Dread_chunk(dw[i], H5P_DEFAULT, at, &m, c[i]), 0);
        }
        ck_assert_msg(addr[0] == addr[1] && size[0] == size[1] && mask[0] == mask[1] &&
                          memcmp(c[0], c[1], size[0]) == 0,
                      "row %llu: the chunks differ", (unsigned long long)z);
        free(c[0]);
        free(c[1]);
    }
    for (int i = 0; i < 2; i++) {
        H5Dclose(dw[i]);
        H5Fclose(fw[i]);
    }
}
END_TEST

START_TEST(test_resume_after_kill)
{
    /* slow enough to kill half-way: big slices, one row per slab */
    const char *args[] = {"recon",         "--input",     H5,  "--backend", "cpu",  "--size",
                          "384",           "--slab-rows", "1", "--rows",    "0:12", "--output",
                          path_in("k.h5"), NULL};
    unlink(path_in("stdout.txt")); /* the last run's lines are not this one's */
    pid_t pid = tl_client_start(dir, args);
    ck_assert_msg(tl_client_wait_out(pid, "progress slab=1/", 60), "no first slab");
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    uint64_t done = rows_done(path_in("k.h5"));
    ck_assert_uint_ge(done, 1);
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--size", "384", "--slab-rows", "1",
                           "--rows", "0:12", "--resume", "--output", path_in("k.h5")),
                     0);
    ck_assert_msg(strstr(tl_client_err(), "resuming at row"), "%s", tl_client_err());
    /* only the rest was computed */
    ck_assert_int_eq(tl_count_lines(tl_client_out(), "progress slab="), (int)(12 - done));
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--size", "384", "--rows", "0:12",
                           "--output", path_in("k_ref.h5")),
                     0);
    uint32_t ra, rb;
    uint64_t da, db;
    float *va = read_volume(path_in("k.h5"), &ra, &da),
          *vb = read_volume(path_in("k_ref.h5"), &rb, &db);
    ck_assert_uint_eq(da, 12);
    ck_assert(memcmp(va, vb, (size_t)12 * 384 * 384 * 4) == 0);
    free(va);
    free(vb);
    /* SIGINT: a clean stop, exit 130, resumable */
    unlink(path_in("stdout.txt"));
    pid = tl_client_start(dir, args);
    ck_assert(tl_client_wait_out(pid, "progress slab=1/", 60));
    kill(pid, SIGINT);
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0) { /* it may have finished first */
        ck_assert_int_eq(WEXITSTATUS(status), 130);
        ck_assert_uint_lt(rows_done(path_in("k.h5")), 12);
    }
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--size", "384", "--slab-rows", "1",
                           "--rows", "0:12", "--resume", "--output", path_in("k.h5")),
                     0);
    va = read_volume(path_in("k.h5"), &ra, &da);
    vb = read_volume(path_in("k_ref.h5"), &rb, &db);
    ck_assert(memcmp(va, vb, (size_t)12 * 384 * 384 * 4) == 0);
    free(va);
    free(vb);
    /* another job does not resume into it */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--size", "384", "--rows", "0:11",
                           "--resume", "--output", path_in("k.h5")),
                     1);
    ck_assert_msg(strstr(tl_client_err(), "another job"), "%s", tl_client_err());
}
END_TEST

static void copy_truncated(const char *from, const char *to, long keep)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    ck_assert(a && b);
    char buf[4096];
    long left = keep;
    size_t n;
    while (left > 0 && (n = fread(buf, 1, left < 4096 ? (size_t)left : 4096, a)) > 0) {
        fwrite(buf, 1, n, b);
        left -= (long)n;
    }
    fclose(a);
    fclose(b);
}

START_TEST(test_failures)
{
    struct stat st;
    ck_assert_int_eq(stat(H5, &st), 0);
    /* truncated HDF5: the data ends early */
    copy_truncated(H5, path_in("trunc.h5"), st.st_size * 2 / 3);
    int rc =
        RECON("--input", path_in("trunc.h5"), "--backend", "cpu", "--output", path_in("t.h5"));
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(tl_client_err(), "trunc.h5"), "%s", tl_client_err());
    ck_assert_int_eq(tl_count_lines(tl_client_out(), "progress"), 0);
    ck_assert_msg(access(path_in("t.h5"), F_OK) != 0, "a failed run left its output");
    /* an inconsistent TIFF stack: one file of another shape */
    mkdir(path_in("bad"), 0777);
    char err[512];
    uint16_t px[8 * 8] = {0};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "bad/p_%d.tif", i);
        tl_tiff_writer w;
        ck_assert(tl_tiff_create(&w, path_in(name), 0, err, sizeof err) == 0);
        ck_assert(tl_tiff_write_page(&w, TL_DTYPE_U16, px, i == 2 ? 4 : 8, 8, err, sizeof err) ==
                  0);
        ck_assert(tl_tiff_finish(&w, err, sizeof err) == 0);
    }
    ck_assert_int_eq(RECON("--input", path_in("bad"), "--angles-deg", "0:180:3", "--backend",
                           "cpu", "--output", path_in("b.h5")),
                     1);
    ck_assert_msg(strstr(tl_client_err(), "differ"), "%s", tl_client_err());
    /* --write-threads out of range */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--write-threads", "0", "--output",
                           path_in("w0.h5")),
                     1);
    ck_assert_msg(strstr(tl_client_err(), "--write-threads"), "%s", tl_client_err());
    ck_assert(access(path_in("w0.h5"), F_OK) != 0);
    /* --quality: exact or fast; a volume is not a preview */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--quality", "preview", "--output",
                           path_in("q.h5")),
                     1);
    ck_assert_msg(strstr(tl_client_err(), "bad --quality 'preview' (exact, fast)"), "%s",
                  tl_client_err());
    /* an unwritable output */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--output", path_in("no/dir/x.h5")),
                     1);
    ck_assert_msg(strstr(tl_client_err(), "cannot create"), "%s", tl_client_err());
    /* nothing fits: both numbers */
    ck_assert_int_eq(RECON("--input", H5, "--backend", "cpu", "--gpu-memory", "1K", "--output",
                           path_in("n.h5")),
                     1);
    ck_assert_msg(strstr(tl_client_err(), "nothing fits") &&
                      strstr(tl_client_err(), "budget 0 MiB"),
                  "%s", tl_client_err());
    ck_assert(access(path_in("n.h5"), F_OK) != 0);
    /* a full disk: files may not pass 200 KiB (the volume is 640 KiB) */
    char cmd[4096];
    const char *top = getenv("top_builddir");
    snprintf(cmd, sizeof cmd,
             "ulimit -f 200; exec %s/clients/tomolive recon --input %s --backend cpu "
             "--slab-rows 8 --output %s >%s 2>%s",
             top && *top ? top : ".", H5, path_in("full.h5"), path_in("full.out"),
             path_in("full.err"));
    int status = system(cmd);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 1);
    FILE *fe = fopen(path_in("full.err"), "r");
    char msg[2048] = "";
    size_t n = fread(msg, 1, sizeof msg - 1, fe);
    msg[n] = 0;
    fclose(fe);
    ck_assert_msg(strstr(msg, "cannot"), "%s", msg);
    /* what the file records as done is what was written before the limit, never all */
    if (access(path_in("full.h5"), F_OK) == 0) {
        hid_t f = H5Fopen(path_in("full.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f >= 0) {
            uint32_t rows;
            uint64_t done;
            H5Fclose(f);
            free(read_volume(path_in("full.h5"), &rows, &done));
            ck_assert_uint_lt(done, ROWS);
        }
    }
}
END_TEST

START_TEST(test_bench_end_to_end)
{
    /* bench --volume grows the planner: a baseline and a budget-forced run, stage tables */
    ck_assert_int_eq(tl_client_run(dir,
                                   (const char *const[]){"bench", "--volume", "--shape", "32x45",
                                                         "--backend", "cpu", "--slab-rows", "3",
                                                         NULL},
                                   120),
                     0);
    const char *out = tl_client_out();
    ck_assert_msg(strstr(out, "baseline") && strstr(out, "slabs of 3 rows") &&
                      strstr(out, "overlap (sum / wall)") && strstr(out, "out-of-core overhead"),
                  "%s", out);
    /* cone beam: whole frames for the baseline, bands where they do not fit the budget */
    ck_assert_int_eq(tl_client_run(dir,
                                   (const char *const[]){"bench", "--volume", "--shape", "32x45",
                                                         "--backend", "cpu", "--geometry", "cone",
                                                         "--source-origin", "300",
                                                         "--source-detector", "450",
                                                         "--pixel-size", "0.5", "--gpu-memory",
                                                         "200K", NULL},
                                   120),
                     0);
    out = tl_client_out();
    ck_assert_msg(strstr(out, "cone-beam projections") && strstr(out, "plan: whole frames of 32") &&
                      strstr(out, "plan: bands of") && strstr(out, "out-of-core overhead"),
                  "%s", out);
    /* bench --volume-write: a row per form and dtype (and deflated HDF5), both writers,
     * its files gone */
    mkdir(path_in("wb"), 0777);
    ck_assert_int_eq(tl_client_run(dir,
                                   (const char *const[]){"bench", "--volume-write", "--size", "24",
                                                         "--slab-rows", "3", "--slabs", "2",
                                                         "--reps", "1", "--form",
                                                         "hdf5,tiff,pages", "--threads", "3",
                                                         "--dir", path_in("wb"), NULL},
                                   120),
                     0);
    out = tl_client_out();
    ck_assert_int_eq(tl_count_lines(out, "hdf5  |       0 |"), 3);
    ck_assert_int_eq(tl_count_lines(out, "hdf5  |       4 |"), 3);
    ck_assert_int_eq(tl_count_lines(out, "tiff  |       0 |"), 2);
    ck_assert_int_eq(tl_count_lines(out, "pages |       0 |"), 2);
    ck_assert_msg(strstr(out, "serial GB/s") && strstr(out, "3 threads GB/s"), "%s", out);
    ck_assert_int_eq(rmdir(path_in("wb")), 0); /* empty */
}
END_TEST

/* phantom --scan with one thread: its frame buffer (two frames per thread) once held
 * fewer than the 4 darks and flats written from it (a heap overflow: ASan). The darks and
 * flats read back uniform, the projections not all zero. */
START_TEST(test_phantom_one_thread)
{
    const char *p = path_in("one.h5");
    ck_assert_int_eq(tl_client_run(dir,
                                   (const char *const[]){"phantom", "--scan", p, "--projections",
                                                         "6", "--size", "16", "--rows", "3",
                                                         "--threads", "1", NULL},
                                   60),
                     0);
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert(f >= 0);
    static const struct {
        const char *name;
        int frames, value; /* value < 0: any, not all zero */
    } sets[] = {{"/exchange/data_dark", 4, 100},
                {"/exchange/data_white", 4, 4000},
                {"/exchange/data", 6, -1}};
    for (size_t i = 0; i < 3; i++) {
        uint16_t v[6 * 3 * 16];
        hid_t d = H5Dopen2(f, sets[i].name, H5P_DEFAULT);
        ck_assert(d >= 0);
        ck_assert(H5Dread(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
        H5Dclose(d);
        size_t n = (size_t)sets[i].frames * 3 * 16, nonzero = 0;
        for (size_t k = 0; k < n; k++) {
            if (sets[i].value >= 0)
                ck_assert_msg(v[k] == sets[i].value, "%s[%zu] = %u", sets[i].name, k, v[k]);
            nonzero += v[k] != 0;
        }
        ck_assert(nonzero > 0);
    }
    H5Fclose(f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("recon_volume");
    TCase *tc = tcase_create("volume");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_out_of_core_equals_in_core);
    tcase_add_test(tc, test_resume_after_kill);
    tcase_add_test(tc, test_failures);
    tcase_add_test(tc, test_bench_end_to_end);
    tcase_add_test(tc, test_phantom_one_thread);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return tl_run_suite(suite(), false);
}
