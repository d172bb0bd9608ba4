/* check_volume_output.c — the volume output's threaded writer (clients/volume_slab.c) writes
 * what the single-threaded writer of before writes (spec.serial, kept as the reference).
 *
 * A small volume (23 slices of 37 x 37: odd sizes, so the vector conversions' tails and a
 * short last slab are exercised) holding the conversions' hard cases (NaN, infinities,
 * signed zeros, half overflow and subnormals, rounding ties) and one slice of random bit
 * patterns (an incompressible chunk) is written in slabs of 5 by both writers, the new one
 * with 1 and 3 threads, for each form and dtype, with deflate on and off, and compared:
 *   HDF5        what libhdf5 reads back, as native floats and in the file's type, bit for
 *               bit; each chunk's stored bytes, size and filter mask (the new writer stores
 *               chunks itself: H5Dwrite_chunk, zlib); the attributes (scale, offset, rows
 *               done); and a few samples against the values they must decode to;
 *   TIFF        every file byte for byte (a stack of slices; one multi-page file).
 * Resume: a run stopped after two slabs and resumed (by the new writer, from its own file
 * and from the serial writer's) equals an uninterrupted one. Failures: a slice file that
 * cannot be created and a file-size limit end the write with a message, not a hang.
 */
#include "config.h"

#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "clients/volume_output.h"
#include "tests/testutil.h"

enum { ROWS = 23, SIZE = 37, SLAB = 5, NPX = SIZE * SIZE, RANDOM_SLICE = 7 };

static float *vol;
static char *dir;

static float f_of(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The hard cases, every slice at its own pixels. */
static const uint32_t special[] = {
    0x7fc00000, 0xffc00000, 0x7fc02000, 0x7f800001, /* NaNs, payloads */
    0x7f800000, 0xff800000, 0x00000000, 0x80000000, /* infinities, signed zeros */
    0x477ff000, 0x477fefff, 0x477fe000,             /* 65520 (half overflow tie), 65504 */
    0x33000000, 0x33000001, 0x33800000, 0x387fe000, /* half subnormal ties and edges */
    0x00000001, 0x807fffff, 0x3f801000, 0x3f803000, /* float subnormals, half ties */
    0x3f000000, 0x3fc00000, 0x40200000,             /* 0.5, 1.5, 2.5: uint16 ties at scale 1 */
};
#define NSPECIAL (sizeof special / sizeof special[0])

static void make_volume(void)
{
    vol = malloc((size_t)ROWS * NPX * sizeof *vol);
    ck_assert_ptr_nonnull(vol);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (uint32_t z = 0; z < ROWS; z++)
        for (uint32_t i = 0; i < NPX; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            float *v = &vol[(size_t)z * NPX + i];
            if (z == RANDOM_SLICE)
                *v = f_of((uint32_t)(x >> 32));
            else
                *v = (float)(0.01 + 0.01 * sin(0.1 * i + z) + 1e-4 * (double)(x >> 40) * 0x1p-24);
        }
    for (uint32_t z = 0; z < ROWS; z++)
        for (uint32_t k = 0; k < NSPECIAL; k++)
            vol[(size_t)z * NPX + (k * 53 + z * 7) % NPX] = f_of(special[k]);
}

static const char *path_in(const char *name)
{
    return tl_path_in(dir, name);
}

typedef struct {
    tl_out_dtype dtype;
    int deflate;
    bool range;
} kind;

/* Writes rows [from-the-record, until) in slabs of SLAB and closes (DONE at the end, KEEP
 * before); asserts success. */
static void write_volume(const char *path, kind k, bool serial, unsigned threads, bool resume,
                         uint32_t until)
{
    tl_volume_output_spec spec = {.path = path,
                                  .rows = ROWS,
                                  .size = SIZE,
                                  .dtype = k.dtype,
                                  .deflate = k.deflate,
                                  .have_range = k.range,
                                  .lo = 0.0,
                                  .hi = 0.02,
                                  .job = "check_volume_output",
                                  .resume = resume,
                                  .threads = threads,
                                  .serial = serial};
    tl_volume_output o;
    char err[1024];
    ck_assert_msg(tl_volume_output_open(&o, &spec, err, sizeof err) == 0, "%s: %s", path, err);
    if (resume)
        ck_assert_uint_eq(o.rows_done, 2 * SLAB);
    for (uint32_t z0 = o.rows_done; z0 < until; z0 += SLAB) {
        uint32_t h = ROWS - z0 < SLAB ? ROWS - z0 : SLAB;
        ck_assert_msg(tl_volume_output_write(&o, z0, h, vol + (size_t)z0 * NPX, err,
                                             sizeof err) == 0,
                      "%s: %s", path, err);
    }
    ck_assert_msg(tl_volume_output_close(&o, until >= ROWS ? TL_OUTPUT_DONE : TL_OUTPUT_KEEP,
                                         err, sizeof err) == 0,
                  "%s: %s", path, err);
}

/* ---- HDF5 ----------------------------------------------------------------------------- */

typedef struct {
    hid_t f, d;
} h5;

static h5 h5_open(const char *path)
{
    h5 h = {H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), -1};
    ck_assert_msg(h.f >= 0, "cannot open %s", path);
    h.d = H5Dopen2(h.f, "/volume", H5P_DEFAULT);
    ck_assert_int_ge(h.d, 0);
    return h;
}

static void h5_close(h5 h)
{
    H5Dclose(h.d);
    H5Fclose(h.f);
}

/* /volume read through libhdf5 into mem_type (-1: the file's own type). */
static void *h5_read(h5 h, hid_t mem_type, size_t *bytes)
{
    hid_t t = mem_type >= 0 ? mem_type : H5Dget_type(h.d);
    *bytes = (size_t)ROWS * NPX * H5Tget_size(t);
    void *v = malloc(*bytes);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_ge(H5Dread(h.d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), 0);
    if (mem_type < 0)
        H5Tclose(t);
    return v;
}

static double attr_double(h5 h, const char *name, double none)
{
    double v = none;
    if (H5Aexists(h.d, name) > 0) {
        hid_t a = H5Aopen(h.d, name, H5P_DEFAULT);
        H5Aread(a, H5T_NATIVE_DOUBLE, &v);
        H5Aclose(a);
    }
    return v;
}

static uint64_t attr_u64(h5 h, const char *name)
{
    uint64_t v = 0;
    hid_t a = H5Aopen(h.d, name, H5P_DEFAULT);
    ck_assert_int_ge(a, 0);
    H5Aread(a, H5T_NATIVE_UINT64, &v);
    H5Aclose(a);
    return v;
}

/* a and b hold the same volume: data, chunks, attributes; chunk places too if asked (two
 * runs of the new writer store its chunks in the same order). */
static void same_h5(const char *a, const char *b, bool same_places)
{
    h5 ha = h5_open(a), hb = h5_open(b);
    hid_t ta = H5Dget_type(ha.d), tb = H5Dget_type(hb.d);
    ck_assert_int_gt(H5Tequal(ta, tb), 0);
    H5Tclose(ta);
    H5Tclose(tb);
    hid_t types[2] = {H5T_NATIVE_FLOAT, -1};
    for (int i = 0; i < 2; i++) {
        size_t na, nb;
        uint8_t *va = h5_read(ha, types[i], &na), *vb = h5_read(hb, types[i], &nb);
        ck_assert_uint_eq(na, nb);
        for (size_t j = 0; j < na; j++)
            if (va[j] != vb[j])
                ck_abort_msg("%s and %s differ (read as %s) at byte %zu: slice %zu", a, b,
                             i ? "the file's type" : "float", j, j / (na / ROWS));
        free(va);
        free(vb);
    }
    for (hsize_t z = 0; z < ROWS; z++) {
        hsize_t at[3] = {z, 0, 0}, sa = 0, sb = 0;
        haddr_t pa, pb;
        unsigned ma = 99, mb = 99;
        ck_assert_int_ge(H5Dget_chunk_info_by_coord(ha.d, at, &ma, &pa, &sa), 0);
        ck_assert_int_ge(H5Dget_chunk_info_by_coord(hb.d, at, &mb, &pb, &sb), 0);
        ck_assert_msg(sa == sb && ma == mb && (!same_places || pa == pb),
                      "slice %llu: %llu bytes, mask %u at %llu in %s; %llu, %u at %llu in %s",
                      (unsigned long long)z, (unsigned long long)sa, ma, (unsigned long long)pa,
                      a, (unsigned long long)sb, mb, (unsigned long long)pb, b);
        uint8_t *ca = malloc(sa), *cb = malloc(sb);
        uint32_t fa, fb;
        ck_assert_int_ge(H5Dread_chunk(ha.d, H5P_DEFAULT, at, &fa, ca), 0);
        ck_assert_int_ge(H5Dread_chunk(hb.d, H5P_DEFAULT, at, &fb, cb), 0);
        ck_assert_msg(memcmp(ca, cb, sa) == 0, "slice %llu: the chunks of %s and %s differ",
                      (unsigned long long)z, a, b);
        free(ca);
        free(cb);
    }
    ck_assert(attr_double(ha, "scale", -1) == attr_double(hb, "scale", -1));
    ck_assert(attr_double(ha, "offset", -1) == attr_double(hb, "offset", -1));
    ck_assert_uint_eq(attr_u64(ha, "tomolive_rows_done"), ROWS);
    ck_assert_uint_eq(attr_u64(hb, "tomolive_rows_done"), ROWS);
    h5_close(ha);
    h5_close(hb);
}

/* The samples of special[] decode as they must: libhdf5 reads our half type as IEEE
 * binary16 and the uint16 scale as stated. */
static void expected_values(const char *path, kind k)
{
    h5 h = h5_open(path);
    size_t n;
    float *v = h5_read(h, H5T_NATIVE_FLOAT, &n);
    double scale = attr_double(h, "scale", 1), offset = attr_double(h, "offset", 0);
    h5_close(h);
    for (uint32_t z = 0; z < ROWS; z++)
        for (uint32_t s = 0; s < NSPECIAL; s++) {
            size_t i = (size_t)z * NPX + (s * 53 + z * 7) % NPX;
            float in = f_of(special[s]), out = v[i], want;
            if (k.dtype == TL_OUT_F32)
                want = in;
            else if (k.dtype == TL_OUT_F16)
                want = (float)(_Float16)in; /* the compiler's IEEE half: round to even */
            else { /* uint16 reads back as the stored integer */
                double q = nearbyint(((double)in - offset) * scale);
                want = (float)(uint16_t)(q >= 0 ? q <= 65535 ? q : 65535 : 0);
            }
            uint32_t bits;
            memcpy(&bits, &out, 4);
            if (isnan(want) ? !isnan(out) : memcmp(&want, &out, 4) != 0)
                ck_abort_msg("%s slice %u: 0x%08x read back as %.9g (0x%08x), not %.9g", path, z,
                             special[s], out, bits, want);
        }
    free(v);
}

static const kind h5_kinds[] = {
    {TL_OUT_F32, 0, false}, {TL_OUT_F16, 0, false}, {TL_OUT_U16, 0, false},
    {TL_OUT_U16, 0, true},  {TL_OUT_F32, 6, false}, {TL_OUT_F16, 1, false},
    {TL_OUT_U16, 9, false},
};

START_TEST(test_hdf5_same_as_serial)
{
    const kind k = h5_kinds[_i];
    write_volume(path_in("serial.h5"), k, true, 0, false, ROWS);
    write_volume(path_in("t1.h5"), k, false, 1, false, ROWS);
    write_volume(path_in("t3.h5"), k, false, 3, false, ROWS);
    same_h5(path_in("serial.h5"), path_in("t1.h5"), false);
    same_h5(path_in("t1.h5"), path_in("t3.h5"), true);
    if (k.dtype == TL_OUT_U16 && !k.range) /* the first slab's range, as the serial writer */
        expected_values(path_in("serial.h5"), k);
    else
        expected_values(path_in("t3.h5"), k);
}
END_TEST

/* ---- TIFF ----------------------------------------------------------------------------- */

static void same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    ck_assert_msg(fa && fb, "cannot open %s or %s", a, b);
    long at = 0;
    int ca, cb;
    do {
        ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb)
            ck_abort_msg("%s and %s differ at byte %ld", a, b, at);
        at++;
    } while (ca != EOF);
    fclose(fa);
    fclose(fb);
    ck_assert_int_gt(at, NPX * 2);
}

static void same_stack(const char *a, const char *b)
{
    for (uint32_t z = 0; z < ROWS; z++) {
        char name[64];
        snprintf(name, sizeof name, "/slice_%05u.tif", z);
        char pa[1100], pb[1100];
        snprintf(pa, sizeof pa, "%s%s", a, name);
        snprintf(pb, sizeof pb, "%s%s", b, name);
        same_file(pa, pb);
    }
}

static const kind tiff_kinds[] = {{TL_OUT_F32, 0, false}, {TL_OUT_U16, 0, false},
                                  {TL_OUT_U16, 0, true}};

START_TEST(test_tiff_same_as_serial)
{
    const kind k = tiff_kinds[_i];
    write_volume(path_in("serial/"), k, true, 0, false, ROWS);
    write_volume(path_in("t1/"), k, false, 1, false, ROWS);
    write_volume(path_in("t3/"), k, false, 3, false, ROWS);
    same_stack(path_in("serial"), path_in("t1"));
    same_stack(path_in("serial"), path_in("t3"));
    write_volume(path_in("serial.tif"), k, true, 0, false, ROWS);
    write_volume(path_in("t1.tif"), k, false, 1, false, ROWS);
    write_volume(path_in("t3.tif"), k, false, 3, false, ROWS);
    same_file(path_in("serial.tif"), path_in("t1.tif"));
    same_file(path_in("serial.tif"), path_in("t3.tif"));
}
END_TEST

/* ---- resume --------------------------------------------------------------------------- */

static const kind resume_kinds[] = {{TL_OUT_U16, 0, false}, {TL_OUT_F16, 4, false},
                                    {TL_OUT_F32, 0, false}};

START_TEST(test_resume)
{
    const kind k = resume_kinds[_i];
    write_volume(path_in("whole.h5"), k, false, 2, false, ROWS);
    /* stopped after two slabs, resumed: by the new writer from its own file, and from the
     * serial writer's (the same format: either resumes the other) */
    write_volume(path_in("new.h5"), k, false, 2, false, 2 * SLAB);
    write_volume(path_in("new.h5"), k, false, 3, true, ROWS);
    write_volume(path_in("old.h5"), k, true, 0, false, 2 * SLAB);
    write_volume(path_in("old.h5"), k, false, 3, true, ROWS);
    same_h5(path_in("whole.h5"), path_in("new.h5"), k.deflate == 0);
    same_h5(path_in("whole.h5"), path_in("old.h5"), false);
    if (k.dtype != TL_OUT_F16) { /* a TIFF stack */
        write_volume(path_in("whole/"), k, false, 2, false, ROWS);
        write_volume(path_in("part/"), k, false, 2, false, 2 * SLAB);
        write_volume(path_in("part/"), k, false, 3, true, ROWS);
        same_stack(path_in("whole"), path_in("part"));
    }
    /* a resume that fails (another job's file) says so, and leaves nothing of libhdf5
     * open, nor changes the file */
    tl_volume_output_spec spec = {.path = path_in("new.h5"),
                                  .rows = ROWS,
                                  .size = SIZE,
                                  .dtype = k.dtype,
                                  .job = "another job",
                                  .resume = true,
                                  .threads = 2};
    tl_volume_output o;
    char err[1024];
    ck_assert_int_eq(tl_volume_output_open(&o, &spec, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "another job"), "%s", err);
    ck_assert_int_eq(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
    same_h5(path_in("whole.h5"), path_in("new.h5"), k.deflate == 0);
}
END_TEST

/* ---- failures ------------------------------------------------------------------------- */

START_TEST(test_failures)
{
    char err[1024];
    tl_volume_output o;
    /* a TIFF stack whose slice 7 cannot be created (a directory is in its place) */
    kind k = {TL_OUT_U16, 0, true};
    tl_volume_output_spec spec = {.path = path_in("stack"),
                                  .rows = ROWS,
                                  .size = SIZE,
                                  .dtype = k.dtype,
                                  .have_range = true,
                                  .hi = 1,
                                  .job = "check_volume_output",
                                  .threads = 3};
    mkdir(path_in("stack"), 0777);
    ck_assert_int_eq(mkdir(path_in("stack/slice_00007.tif"), 0777), 0);
    ck_assert_int_eq(tl_volume_output_open(&o, &spec, err, sizeof err), 0);
    ck_assert_int_eq(tl_volume_output_write(&o, 0, SLAB, vol, err, sizeof err), 0);
    ck_assert_int_eq(tl_volume_output_write(&o, SLAB, SLAB, vol + SLAB * NPX, err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "slice_00007.tif"), "%s", err);
    ck_assert_uint_eq(o.rows_done, SLAB); /* the record still says one slab */
    tl_volume_output_close(&o, TL_OUTPUT_KEEP, NULL, 0);
    /* HDF5 past a file-size limit: the chunk write fails, in order, and the ring stops */
    signal(SIGXFSZ, SIG_IGN);
    for (int deflate = 0; deflate <= 1; deflate++) {
        spec = (tl_volume_output_spec){.path = path_in(deflate ? "big1.h5" : "big0.h5"),
                                       .rows = ROWS,
                                       .size = SIZE,
                                       .dtype = TL_OUT_F16,
                                       .deflate = deflate,
                                       .job = "check_volume_output",
                                       .threads = 3};
        ck_assert_int_eq(tl_volume_output_open(&o, &spec, err, sizeof err), 0);
        struct stat st;
        ck_assert_int_eq(stat(spec.path, &st), 0);
        /* the limit is on offsets: uncompressed chunks have their places already (half
         * way: slice 11 or so); deflated ones are appended (about one slab more) */
        rlim_t at = deflate ? (rlim_t)st.st_size + SLAB * NPX * 2 + 8192 : (rlim_t)st.st_size / 2;
        struct rlimit lim = {at, RLIM_INFINITY};
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
        int rc = 0;
        for (uint32_t z0 = 0; rc == 0 && z0 < ROWS; z0 += SLAB)
            rc = tl_volume_output_write(&o, z0, ROWS - z0 < SLAB ? ROWS - z0 : SLAB,
                                        vol + (size_t)z0 * NPX, err, sizeof err);
        ck_assert_int_eq(rc, -1);
        ck_assert_msg(strstr(err, "cannot") && strstr(err, spec.path), "%s", err);
        ck_assert_uint_lt(o.rows_done, ROWS);
        tl_volume_output_close(&o, TL_OUTPUT_REMOVE, NULL, 0);
        lim.rlim_cur = RLIM_INFINITY;
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    }
}
END_TEST

static void setup(void)
{
    make_volume();
    dir = tl_tmpdir("volume_output");
    ck_assert_ptr_nonnull(dir);
}

static void teardown(void)
{
    if (!getenv("TL_KEEP_TMP"))
        tl_rm_rf(dir);
    free(dir);
    free(vol);
}

static Suite *suite(void)
{
    Suite *s = suite_create("volume_output");
    TCase *tc = tcase_create("output");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_hdf5_same_as_serial, 0, sizeof h5_kinds / sizeof h5_kinds[0]);
    tcase_add_loop_test(tc, test_tiff_same_as_serial, 0,
                        sizeof tiff_kinds / sizeof tiff_kinds[0]);
    tcase_add_loop_test(tc, test_resume, 0, sizeof resume_kinds / sizeof resume_kinds[0]);
    tcase_add_test(tc, test_failures);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    H5dont_atexit(); /* as recon: libhdf5 1.10.8 crashes at exit on a file whose close failed */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return tl_run_suite(suite(), false);
}
