/* check_cone_read.c — cone-beam matrices from files (clients/cone_read.h, clients/npy.h):
 * our own matrices as text and .npy, and ASTRA's cone_vec rows; the RTK XML is
 * check_cone_read_rtk.c.
 *
 * The references are independent of the readers: the matrices of a circular scan from
 * tl_cone_circular_matrices (gpu/geometry/cone.c), and ASTRA rows made from ASTRA's own
 * cone -> cone_vec conversion (astra_geom_2vec.m: source (sin t, -cos t, 0) x
 * DistanceOriginSource, detector centre (-sin t, cos t, 0) x DistanceOriginDetector, u =
 * (cos t, sin t, 0) x DetectorSpacingX, v = (0, 0, DetectorSpacingY)), which must read as
 * our circular scan at angle -t (the tomopackets adapter's negation). Agreement is
 * rounding-level: 1e-9 of the largest entry of each matrix.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cone_read.h"
#include "clients/npy.h"
#include "gpu/geometry/cone.h"
#include "tests/testutil.h"

#define NP 24
#define ROWS 41
#define COLS 64

static char *dir;
static double angles[NP];

static void setup(void)
{
    dir = tl_tmpdir("cone-read");
    ck_assert_ptr_nonnull(dir);
    for (int i = 0; i < NP; i++)
        angles[i] = 2 * M_PI * i / NP + 0.01 * (i % 3); /* not quite uniform */
}

static void teardown(void)
{
    tl_rm_rf(dir);
    free(dir);
}

static tl_cone_circular circle(double ou, double ov, const double *a)
{
    return (tl_cone_circular){.sad = 300,
                              .sdd = 450,
                              .pitch_u = 0.5,
                              .pitch_v = 0.4,
                              .offset_u = ou,
                              .offset_v = ov,
                              .rows = ROWS,
                              .cols = COLS,
                              .n = NP,
                              .angles = a};
}

static const tl_cone_detector det = {ROWS, COLS, 0.5, 0.4};

static char *path_of(const char *name)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void write_file(const char *name, const void *data, size_t len)
{
    FILE *f = fopen(path_of(name), "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Every entry within 1e-9 of the largest entry of its matrix. */
static void assert_same(double (*got)[12], double (*want)[12], uint32_t n, double tol)
{
    for (uint32_t i = 0; i < n; i++) {
        double scale = 0;
        for (int k = 0; k < 12; k++)
            scale = fmax(scale, fabs(want[i][k]));
        for (int k = 0; k < 12; k++)
            ck_assert_msg(fabs(got[i][k] - want[i][k]) <= tol * scale,
                          "matrix %u entry %d: %.17g, want %.17g", i, k, got[i][k], want[i][k]);
    }
}

/* Reads arg ("FILE[:FORMAT]" in dir) for det; n must be NP. */
static double (*read_ok(const char *arg))[12]
{
    char spec[1100], err[1024];
    snprintf(spec, sizeof spec, "%s/%s", dir, arg);
    tl_cone_matrix_file m;
    ck_assert_msg(tl_cone_matrix_spec(spec, &m, err, sizeof err) == 0, "%s", err);
    double(*P)[12];
    uint32_t n;
    ck_assert_msg(tl_cone_read(&m, &det, &P, &n, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(n, NP);
    tl_cone_matrix_file_free(&m);
    return P;
}

/* The error of reading arg, which must fail. */
static const char *read_err(const char *arg)
{
    static char err[1024];
    char spec[1100];
    snprintf(spec, sizeof spec, "%s/%s", dir, arg);
    tl_cone_matrix_file m;
    if (tl_cone_matrix_spec(spec, &m, err, sizeof err) != 0)
        return err;
    double(*P)[12] = NULL;
    uint32_t n = 0;
    ck_assert_msg(tl_cone_read(&m, &det, &P, &n, err, sizeof err) != 0, "'%s' read", arg);
    ck_assert_ptr_null(P);
    tl_cone_matrix_file_free(&m);
    return err;
}

#define ASSERT_ERR(arg, phrase)                                                              \
    do {                                                                                     \
        const char *e_ = read_err(arg);                                                      \
        ck_assert_msg(strstr(e_, phrase) != NULL, "'%s': '%s' lacks '%s'", arg, e_, phrase); \
        fprintf(stderr, "  %s\n", e_);                                                       \
    } while (0)

/* ---- our matrices ---------------------------------------------------------------------- */

START_TEST(text_round_trip)
{
    tl_cone_circular g = circle(2.25, -3.5, angles);
    double(*want)[12] = malloc(NP * sizeof *want);
    ck_assert_int_eq(tl_cone_circular_matrices(&g, want, NULL), TL_OK);
    /* comments, blank lines, commas, and a matrix scaled by -2.5 (normalised on reading) */
    FILE *f = fopen(path_of("m.txt"), "w");
    fprintf(f, "# circular scan\n\n");
    for (int i = 0; i < NP; i++) {
        double s = i == 5 ? -2.5 : 1;
        for (int k = 0; k < 12; k++)
            fprintf(f, "%.17g%s", s * want[i][k], k == 11 ? "" : i == 3 ? ", " : " ");
        fprintf(f, i == 7 ? "  # the eighth\n" : "\n");
    }
    fclose(f);
    double(*P)[12] = read_ok("m.txt");
    assert_same(P, want, NP, 1e-12);
    free(P);
    P = read_ok("m.txt:p");
    assert_same(P, want, NP, 1e-12);
    free(P);
    free(want);
}
END_TEST

/* A .npy of NP matrices: version 1 or 2 header, float64 or float32, shape (N, 12) or
 * (N, 3, 4); descr and order as given (for the refusals). */
static void write_npy(const char *name, int version, const char *descr, const char *order,
                      const char *shape, double (*m)[12], uint32_t n, int item)
{
    char dict[256];
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
                      descr, order, shape);
    int pre = version == 1 ? 10 : 12;
    int hlen = ((pre + dl + 1 + 63) / 64) * 64 - pre; /* padded to 64 with spaces + '\n' */
    size_t total = (size_t)pre + hlen + (size_t)n * 12 * item;
    unsigned char *b = calloc(1, total);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)version;
    b[7] = 0;
    for (int i = 0; i < (version == 1 ? 2 : 4); i++)
        b[8 + i] = (unsigned char)(hlen >> (8 * i));
    memset(b + pre, ' ', hlen);
    memcpy(b + pre, dict, dl);
    b[pre + hlen - 1] = '\n';
    unsigned char *d = b + pre + hlen;
    for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 12; k++, d += item) {
            if (item == 8) {
                memcpy(d, &m[i][k], 8); /* the test hosts are little-endian, like numpy's */
            } else {
                float x = (float)m[i][k];
                memcpy(d, &x, 4);
            }
        }
    write_file(name, b, total);
    free(b);
}

START_TEST(npy_round_trip)
{
    tl_cone_circular g = circle(-1.5, 0.75, angles);
    double(*want)[12] = malloc(NP * sizeof *want);
    ck_assert_int_eq(tl_cone_circular_matrices(&g, want, NULL), TL_OK);
    write_npy("a.npy", 1, "<f8", "False", "(24, 12)", want, NP, 8);
    write_npy("b.npy", 2, "<f8", "False", "(24, 3, 4)", want, NP, 8);
    write_npy("c.npy", 1, "<f4", "False", "(24, 12)", want, NP, 4);
    double(*P)[12] = read_ok("a.npy");
    assert_same(P, want, NP, 1e-12);
    free(P);
    P = read_ok("b.npy");
    assert_same(P, want, NP, 1e-12);
    free(P);
    P = read_ok("c.npy"); /* float32: 6e-8 relative per entry */
    assert_same(P, want, NP, 1e-6);
    free(P);
    free(want);
}
END_TEST

START_TEST(npy_refusals)
{
    double m[NP][12] = {{0}};
    write_npy("be.npy", 1, ">f8", "False", "(24, 12)", m, NP, 8);
    write_npy("int.npy", 1, "<i8", "False", "(24, 12)", m, NP, 8);
    write_npy("fortran.npy", 1, "<f8", "True", "(24, 12)", m, NP, 8);
    write_npy("shape.npy", 1, "<f8", "False", "(24, 11)", m, NP, 8); /* data of 24 x 12 */
    write_npy("short.npy", 1, "<f8", "False", "(25, 12)", m, NP, 8);
    write_npy("flat.npy", 1, "<f8", "False", "(288,)", m, NP, 8);
    write_npy("empty.npy", 1, "<f8", "False", "(0, 12)", m, 0, 8);
    write_file("junk.npy", "\x93NUMPY\x01\x00\x10\x00{'descr': '<f8'}", 26);
    ASSERT_ERR("be.npy", "big-endian");
    ASSERT_ERR("int.npy", "dtype '<i8': need float64 or float32");
    ASSERT_ERR("fortran.npy", "Fortran order");
    ASSERT_ERR("shape.npy", "bytes of data after the header");
    ASSERT_ERR("short.npy", "bytes of data after the header");
    ASSERT_ERR("flat.npy", "shape (288): need (N, 12) or (N, 3, 4)");
    ASSERT_ERR("empty.npy", "holds no projections");
    ASSERT_ERR("junk.npy", "newline");
    /* a matrix of NaN in a well-formed file */
    m[2][7] = NAN;
    write_npy("nan.npy", 1, "<f8", "False", "(24, 12)", m, NP, 8);
    ASSERT_ERR("nan.npy", "row 2, number 8: nan is not finite");
}
END_TEST

START_TEST(text_refusals)
{
    const char *ok = "1 0 0 0  0 1 0 0  0 0 1 100\n";
    char buf[512];
    write_file("empty.txt", "", 0);
    write_file("comments.txt", "# nothing\n\n   # here\n", 22);
    snprintf(buf, sizeof buf, "%s%s1 0 0 0 0 1 0 0 0 0 1\n", ok, ok);
    write_file("short.txt", buf, strlen(buf));
    snprintf(buf, sizeof buf, "%s1 0 0 0 abc 1 0 0 0 0 1 100\n", ok);
    write_file("word.txt", buf, strlen(buf));
    snprintf(buf, sizeof buf, "%s1 0 0 0 0 1 0 0 0 0 1 inf\n", ok);
    write_file("inf.txt", buf, strlen(buf));
    /* rank-deficient left block: row 2 = row 1 */
    snprintf(buf, sizeof buf, "%s%s%s1 0 0 0  1 0 0 0  0 0 1 100\n", ok, ok, ok);
    write_file("singular.txt", buf, strlen(buf));
    /* the isocentre on the source's plane: depth row (0 1 0 0) */
    snprintf(buf, sizeof buf, "1 0 0 0  0 0 1 0  0 1 0 0\n");
    write_file("plane.txt", buf, strlen(buf));
    /* scales past double's range once normalised: a depth that underflows to 0 (found by
     * fuzz_cone_read), and entries that overflow */
    snprintf(buf, sizeof buf, "1 0 0 0  0 1 0 0  0 0 1e150 1e-310\n");
    write_file("underflow.txt", buf, strlen(buf));
    snprintf(buf, sizeof buf, "1e154 0 0 0  0 1e154 0 0  0 0 1e-155 1e-155\n");
    write_file("overflow.txt", buf, strlen(buf));
    ASSERT_ERR("empty.txt", "holds no projections");
    ASSERT_ERR("comments.txt", "holds no projections");
    ASSERT_ERR("short.txt", "line 3: 11 numbers, need 12");
    ASSERT_ERR("word.txt", "line 2, number 5: 'abc' is not a number");
    ASSERT_ERR("inf.txt", "line 2, number 12: 'inf' is not finite");
    ASSERT_ERR("singular.txt", "line 4 (projection 3, matrix)");
    ASSERT_ERR("singular.txt", "singular");
    ASSERT_ERR("plane.txt", "lies on the source plane");
    ASSERT_ERR("underflow.txt", "the isocentre's depth is 0 mm once normalised");
    ASSERT_ERR("overflow.txt", "P[0][0] is not finite once normalised");
    ASSERT_ERR("absent.txt", "cannot open");
}
END_TEST

/* ---- ASTRA ----------------------------------------------------------------------------- */

/* astra_geom_2vec of a "cone" geometry at angles t, with the detector centre moved by
 * (du, dv) pixels along u and v. */
static void astra_rows(const char *name, double du, double dv)
{
    double dso = 300, dod = 450 - 300, sx = 0.5, sy = 0.4;
    FILE *f = fopen(path_of(name), "w");
    fprintf(f, "# ASTRA cone_vec, from astra_geom_2vec\n");
    for (int i = 0; i < NP; i++) {
        double t = angles[i], v[12];
        v[0] = sin(t) * dso;
        v[1] = -cos(t) * dso;
        v[2] = 0;
        v[3] = -sin(t) * dod;
        v[4] = cos(t) * dod;
        v[5] = 0;
        v[6] = cos(t) * sx;
        v[7] = sin(t) * sx;
        v[8] = 0;
        v[9] = 0;
        v[10] = 0;
        v[11] = sy;
        for (int k = 0; k < 3; k++)
            v[3 + k] += du * v[6 + k] + dv * v[9 + k];
        for (int k = 0; k < 12; k++)
            fprintf(f, "%.17g%c", v[k], k == 11 ? '\n' : ' ');
    }
    fclose(f);
}

START_TEST(astra_circular)
{
    double neg[NP];
    for (int i = 0; i < NP; i++)
        neg[i] = -angles[i];
    double(*want)[12] = malloc(NP * sizeof *want);
    tl_cone_circular g = circle(0, 0, neg);
    ck_assert_int_eq(tl_cone_circular_matrices(&g, want, NULL), TL_OK);
    astra_rows("astra.txt", 0, 0);
    double(*P)[12] = read_ok("astra.txt:astra");
    assert_same(P, want, NP, 1e-9);
    free(P);
    /* the detector moved by (-2.5, +1.25) pixels: the principal point is then 2.5 columns
     * right of the middle and 1.25 rows above it */
    g = circle(2.5, -1.25, neg);
    ck_assert_int_eq(tl_cone_circular_matrices(&g, want, NULL), TL_OK);
    astra_rows("astra2.txt", -2.5, 1.25);
    P = read_ok("astra2.txt:astra");
    assert_same(P, want, NP, 1e-9);
    free(P);
    /* the same rows as .npy */
    double(*rows)[12];
    uint32_t *lines, n;
    char err[512];
    ck_assert_msg(tl_cone_read_rows(path_of("astra2.txt"), &rows, &lines, &n, err, sizeof err) ==
                      0,
                  "%s", err);
    ck_assert_uint_eq(n, NP);
    ck_assert_uint_eq(lines[0], 2); /* after the comment */
    write_npy("astra.npy", 1, "<f8", "False", "(24, 12)", rows, NP, 8);
    P = read_ok("astra.npy:astra");
    assert_same(P, want, NP, 1e-9);
    free(P);
    free(rows);
    free(lines);
    free(want);
}
END_TEST

START_TEST(astra_refusals)
{
    /* u parallel to v; then the source in the detector's plane (z = 0 plane, u, v in it) */
    const char *par = "0 -300 0  0 150 0  0.5 0 0  0.4 0 0\n";
    const char *flat = "0 -300 0  0 150 0  0.5 0 0  0 0.4 0\n";
    write_file("par.txt", par, strlen(par));
    write_file("flat.txt", flat, strlen(flat));
    ASSERT_ERR("par.txt:astra", "line 1 (projection 0, ASTRA cone_vec): the detector's u");
    ASSERT_ERR("flat.txt:astra", "give no camera");
}
END_TEST

START_TEST(spec)
{
    tl_cone_matrix_file m;
    char err[256];
    const struct {
        const char *arg, *path;
        tl_cone_file_format f;
    } ok[] = {
        {"m.txt", "m.txt", TL_CONE_FILE_P},
        {"geo.XML", "geo.XML", TL_CONE_FILE_RTK},
        {"v.npy:astra", "v.npy", TL_CONE_FILE_ASTRA},
        {"geo.xml:p", "geo.xml", TL_CONE_FILE_P},
        {"a:b/c.txt:rtk", "a:b/c.txt", TL_CONE_FILE_RTK},
        {"run:2.txt", "run:2.txt", TL_CONE_FILE_P},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        ck_assert_msg(tl_cone_matrix_spec(ok[i].arg, &m, err, sizeof err) == 0, "%s", err);
        ck_assert_str_eq(m.path, ok[i].path);
        ck_assert_int_eq(m.format, ok[i].f);
        tl_cone_matrix_file_free(&m);
    }
    ck_assert_int_ne(tl_cone_matrix_spec("m.txt:astr", &m, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "unknown format 'astr' (p, astra, rtk)"), "%s", err);
    ck_assert_int_ne(tl_cone_matrix_spec(":astra", &m, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "need FILE[:p|astra|rtk]"), "%s", err);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cone_read");
    TCase *tc = tcase_create("read");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, text_round_trip);
    tcase_add_test(tc, npy_round_trip);
    tcase_add_test(tc, npy_refusals);
    tcase_add_test(tc, text_refusals);
    tcase_add_test(tc, astra_circular);
    tcase_add_test(tc, astra_refusals);
    tcase_add_test(tc, spec);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
