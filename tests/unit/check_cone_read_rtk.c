/* check_cone_read_rtk.c — RTK's ThreeDCircularProjectionGeometry XML to cone-beam matrices
 * (clients/cone_read_rtk.c, clients/cone_read.h).
 *
 * Three independent references:
 *   - RTK's own numbers: the example file of RTK's documentation (documentation/docs/
 *     Geometry.md: SID 1000, SDD 1536, two projections with gantry angles near 272 degrees
 *     and projection offsets, and the <Matrix> RTK computed for each), which our
 *     composition must reproduce (RTK's check: each entry within 0.001; here 1e-9
 *     relative);
 *   - our circular scan (tl_cone_circular_matrices): RTK's GantryAngle g is our angle -g,
 *     and ProjectionOffsetX/Y (px, py) put the principal point at (-px, -py) mm from the
 *     detector's origin, i.e. our offset (-px / pitch_u, -py / pitch_v);
 *   - the geometry the documentation describes, built as points and intersected: in the
 *     coordinates rotated by M_R, the source at (sx, sy, SID) and the detector's origin at
 *     (px, py, SID - SDD) with axes x and y; a world point's ray hits the detector at the
 *     (u, v) our matrix must give, for any out-of-plane and in-plane angle (1e-9 px).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cone_read.h"
#include "gpu/geometry/cone.h"
#include "tests/testutil.h"

#define NP 20
#define ROWS 41
#define COLS 64

static char *dir;
static const tl_cone_detector det = {ROWS, COLS, 0.5, 0.4};

static void setup(void)
{
    dir = tl_tmpdir("cone-read-rtk");
    ck_assert_ptr_nonnull(dir);
}

static void teardown(void)
{
    tl_rm_rf(dir);
    free(dir);
}

static const char *write_xml(const char *name, const char *text)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return p;
}

static double (*read_ok(const char *path, uint32_t *n))[12]
{
    double(*P)[12];
    char err[1024];
    ck_assert_msg(tl_cone_read_rtk(path, &det, &P, n, err, sizeof err) == 0, "%s", err);
    return P;
}

/* ---- RTK's own example ----------------------------------------------------------------- */

#define HEAD "<?xml version=\"1.0\"?>\n<!DOCTYPE RTKGEOMETRY>\n"

/* RTK documentation/docs/Geometry.md's example, without its cylindrical detector radius. */
static const char example[] =
    HEAD "<RTKThreeDCircularGeometry version=\"3\">\n"
         "  <SourceToIsocenterDistance>1000</SourceToIsocenterDistance>\n"
         "  <SourceToDetectorDistance>1536</SourceToDetectorDistance>\n"
         "  <Projection>\n"
         "    <GantryAngle>271.847274780273</GantryAngle>\n"
         "    <ProjectionOffsetX>-117.056503295898</ProjectionOffsetX>\n"
         "    <ProjectionOffsetY>-1.01195001602173</ProjectionOffsetY>\n"
         "    <Matrix>\n"
         "          -166.5093078829                   0   -1531.42837748039   -117056.503295898\n"
         "        -1.01142410874151               -1536  0.0326206557691505   -1011.95001602173\n"
         "       -0.999480303105996                   0  0.0322354417240802               -1000\n"
         "    </Matrix>\n"
         "  </Projection>\n"
         "  <Projection>\n"
         "    <GantryAngle>271.852905273438</GantryAngle>\n"
         "    <ProjectionOffsetX>-117.056831359863</ProjectionOffsetX>\n"
         "    <ProjectionOffsetY>-1.01187002658844</ProjectionOffsetY>\n"
         "    <Matrix>\n"
         "        -166.660129424325                   0   -1531.41199650136   -117056.831359863\n"
         "        -1.01134095059569               -1536  0.0327174625589984   -1011.87002658844\n"
         "       -0.999477130482326                   0  0.0323336611415466               -1000\n"
         "    </Matrix>\n"
         "  </Projection>\n"
         "</RTKThreeDCircularGeometry>\n";

START_TEST(rtk_example)
{
    /* the composition against RTK's printed matrices */
    const tl_rtk_projection p = {.sid = 1000,
                                 .sdd = 1536,
                                 .gantry = 271.847274780273,
                                 .projection_x = -117.056503295898,
                                 .projection_y = -1.01195001602173};
    const double rtk[12] = {-166.5093078829,    0,     -1531.42837748039,  -117056.503295898,
                            -1.01142410874151,  -1536, 0.0326206557691505, -1011.95001602173,
                            -0.999480303105996, 0,     0.0322354417240802, -1000};
    double M[12];
    tl_cone_rtk_matrix(&p, M);
    for (int k = 0; k < 12; k++)
        ck_assert_msg(fabs(M[k] - rtk[k]) <= 1e-9 * 117056.5, "entry %d: %.15g, RTK %.15g", k,
                      M[k], rtk[k]);
    uint32_t n;
    double(*P)[12] = read_ok(write_xml("example.xml", example), &n);
    ck_assert_uint_eq(n, 2);
    /* our matrix: normalised, and the source where RTK puts it: (0, 0, SID) rotated */
    double s[3];
    ck_assert_int_eq(tl_cone_matrix_source(P[0], s, NULL), TL_OK);
    double g = 271.847274780273 * M_PI / 180; /* RTK source (sid sin g, 0, sid cos g) */
    ck_assert_double_eq_tol(s[0], 1000 * sin(g), 1e-9);
    ck_assert_double_eq_tol(s[1], -1000 * cos(g), 1e-9); /* ours (x, -z, y) of RTK's */
    ck_assert_double_eq_tol(s[2], 0, 1e-9);
    ck_assert_double_eq_tol(P[0][8] * P[0][8] + P[0][9] * P[0][9] + P[0][10] * P[0][10], 1, 1e-12);
    free(P);

    /* a <Matrix> entry 0.01 off: refused, as RTK refuses it */
    char *bad = strdup(example);
    char *at = strstr(bad, "-1531.42837748039");
    at[14] = '8'; /* -1531.42837748039 -> -1531.42837748839: 8e-9 off, accepted */
    uint32_t m;
    free(read_ok(write_xml("close.xml", bad), &m));
    memcpy(strstr(bad, "-1011.95001602173"), "-1011.96", 8);
    char err[1024];
    double(*Q)[12] = NULL;
    ck_assert_int_ne(tl_cone_read_rtk(write_xml("off.xml", bad), &det, &Q, &m, err, sizeof err),
                     0);
    ck_assert_msg(strstr(err, "line 6, <Projection>: projection 0: <Matrix> and parameters "
                              "disagree") &&
                      strstr(err, "entry [1][3] is -1011.960016 in <Matrix> but -1011.95"),
                  "%s", err);
    fprintf(stderr, "  %s\n", err);
    free(bad);
}
END_TEST

/* ---- a circular scan ------------------------------------------------------------------- */

START_TEST(rtk_circular)
{
    double a[NP];
    for (int i = 0; i < NP; i++)
        a[i] = 2 * M_PI * i / NP + 0.02 * (i % 4);
    double px = 1.3, py = -0.7; /* mm */
    tl_cone_circular g = {.sad = 300,
                          .sdd = 450,
                          .pitch_u = 0.5,
                          .pitch_v = 0.4,
                          .offset_u = -px / 0.5,
                          .offset_v = -py / 0.4,
                          .rows = ROWS,
                          .cols = COLS,
                          .n = NP,
                          .angles = a};
    double(*want)[12] = malloc(NP * sizeof *want);
    ck_assert_int_eq(tl_cone_circular_matrices(&g, want, NULL), TL_OK);
    /* as RTK's writer lays it out: the parameters common to all once, then the angles;
     * the offsets inside the first projection hold for the rest (RTK's reader) */
    char *xml = malloc(65536);
    size_t len = (size_t)sprintf(xml, HEAD "<RTKThreeDCircularGeometry version=\"2\">\n"
                                           "  <SourceToIsocenterDistance>300"
                                           "</SourceToIsocenterDistance>\n"
                                           "  <sourcetodetectordistance>450"
                                           "</sourcetodetectordistance>\n");
    for (int i = 0; i < NP; i++) {
        double deg = fmod(720 - a[i] * 180 / M_PI, 360); /* RTK's g = our -angle */
        len += (size_t)sprintf(xml + len, "  <Projection>\n    <GantryAngle>%.17g</GantryAngle>\n",
                               deg);
        if (i == 0)
            len += (size_t)sprintf(xml + len,
                                   "    <ProjectionOffsetX>%.17g</ProjectionOffsetX>\n"
                                   "    <ProjectionOffsetY> %.17g </ProjectionOffsetY>\n",
                                   px, py);
        len += (size_t)sprintf(xml + len, "  </Projection>\n  <!-- a comment -->\n");
    }
    sprintf(xml + len, "</RTKThreeDCircularGeometry>\n");
    uint32_t n;
    double(*P)[12] = read_ok(write_xml("circle.xml", xml), &n);
    ck_assert_uint_eq(n, NP);
    for (int i = 0; i < NP; i++) {
        double scale = 0; /* 1e-9 of the largest entry */
        for (int k = 0; k < 12; k++)
            scale = fmax(scale, fabs(want[i][k]));
        for (int k = 0; k < 12; k++)
            ck_assert_msg(fabs(P[i][k] - want[i][k]) <= 1e-9 * scale,
                          "projection %d entry %d: %.17g, want %.17g", i, k, P[i][k], want[i][k]);
    }
    free(P);
    free(want);
    free(xml);
}
END_TEST

/* ---- any angles and offsets, against the described geometry ---------------------------- */

/* M_R of RTK's documentation: Rz(-in) Rx(-out) Ry(-gantry), radians. */
static void rotation(double ga, double oa, double ia, double R[3][3])
{
    double z[3][3] = {{cos(-ia), -sin(-ia), 0}, {sin(-ia), cos(-ia), 0}, {0, 0, 1}};
    double x[3][3] = {{1, 0, 0}, {0, cos(-oa), -sin(-oa)}, {0, sin(-oa), cos(-oa)}};
    double y[3][3] = {{cos(-ga), 0, sin(-ga)}, {0, 1, 0}, {-sin(-ga), 0, cos(-ga)}};
    double zx[3][3] = {{0}};
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            R[r][c] = 0;
            for (int k = 0; k < 3; k++)
                zx[r][c] += z[r][k] * x[k][c];
        }
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            for (int k = 0; k < 3; k++)
                R[r][c] += zx[r][k] * y[k][c];
}

START_TEST(rtk_any_angles)
{
    const tl_rtk_projection cases[] = {
        {.sid = 500, .sdd = 800, .gantry = 33, .out_of_plane = 7, .in_plane = -12},
        {.sid = 500,
         .sdd = 800,
         .gantry = 200,
         .out_of_plane = -15,
         .in_plane = 90,
         .source_x = 6,
         .source_y = -4,
         .projection_x = 2.5,
         .projection_y = 9},
        {.sid = 700,
         .sdd = 650,
         .gantry = -80,
         .out_of_plane = 3,
         .in_plane = 1,
         .source_x = -3,
         .projection_x = -7,
         .projection_y = -1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const tl_rtk_projection *p = &cases[c];
        char xml[2048];
        snprintf(xml, sizeof xml,
                 HEAD "<RTKThreeDCircularGeometry version=\"3\"><Projection>"
                      "<SourceToIsocenterDistance>%.17g</SourceToIsocenterDistance>"
                      "<SourceToDetectorDistance>%.17g</SourceToDetectorDistance>"
                      "<GantryAngle>%.17g</GantryAngle><OutOfPlaneAngle>%.17g</OutOfPlaneAngle>"
                      "<InPlaneAngle>%.17g</InPlaneAngle><SourceOffsetX>%.17g</SourceOffsetX>"
                      "<SourceOffsetY>%.17g</SourceOffsetY>"
                      "<ProjectionOffsetX>%.17g</ProjectionOffsetX>"
                      "<ProjectionOffsetY>%.17g</ProjectionOffsetY>"
                      "<CollimationUInf>40</CollimationUInf>"
                      "</Projection></RTKThreeDCircularGeometry>\n",
                 p->sid, p->sdd, p->gantry, p->out_of_plane, p->in_plane, p->source_x, p->source_y,
                 p->projection_x, p->projection_y);
        uint32_t n;
        double(*P)[12] = read_ok(write_xml("any.xml", xml), &n);
        ck_assert_uint_eq(n, 1);
        double R[3][3], d = M_PI / 180;
        rotation(p->gantry * d, p->out_of_plane * d, p->in_plane * d, R);
        for (int t = 0; t < 27; t++) { /* points of a 60 mm cube about the isocentre */
            double xo[3] = {(t % 3 - 1) * 30.0, (t / 3 % 3 - 1) * 30.0, (t / 9 - 1) * 30.0};
            xo[0] += 0.37 * t;                     /* off the grid's symmetries */
            double xr[3] = {xo[0], xo[2], -xo[1]}; /* RTK's world: (x, z, -y) of ours */
            double q[3] = {0, 0, 0};
            for (int r = 0; r < 3; r++)
                for (int k = 0; k < 3; k++)
                    q[r] += R[r][k] * xr[k];
            /* rotated coordinates: source S, detector plane z = sid - sdd */
            double S[3] = {p->source_x, p->source_y, p->sid};
            double lambda = -p->sdd / (q[2] - S[2]);
            double X = S[0] + lambda * (q[0] - S[0]) - p->projection_x;
            double Y = S[1] + lambda * (q[1] - S[1]) - p->projection_y;
            double u_ref = (COLS - 1) / 2.0 + X / det.pitch_u;
            double v_ref = (ROWS - 1) / 2.0 + Y / det.pitch_v;
            double u, v, w;
            ck_assert(tl_cone_project(P[0], xo, &u, &v, &w));
            ck_assert_msg(fabs(u - u_ref) < 1e-9 && fabs(v - v_ref) < 1e-9,
                          "case %zu point %d: (%.12g, %.12g), geometry (%.12g, %.12g)", c, t, u, v,
                          u_ref, v_ref);
            /* w: the depth along the detector's normal from the source, in mm */
            ck_assert_double_eq_tol(w, S[2] - q[2], 1e-9);
        }
        free(P);
    }
}
END_TEST

/* ---- refusals -------------------------------------------------------------------------- */

START_TEST(rtk_refusals)
{
#define ROOT HEAD "<RTKThreeDCircularGeometry version=\"3\">\n"
#define SID "<SourceToIsocenterDistance>300</SourceToIsocenterDistance>\n"
#define SDD "<SourceToDetectorDistance>450</SourceToDetectorDistance>\n"
#define END "</RTKThreeDCircularGeometry>\n"
    const struct {
        const char *xml, *phrase;
    } cases[] = {
        {"<RTKThreeDCircularGeometry version=\"3\">\n<Projection>", "line 2: not XML"},
        {HEAD "<Geometry version=\"3\"/>\n", "the root element is <Geometry>"},
        {HEAD "<RTKThreeDCircularGeometry version=\"1\">" END, "version '1'"},
        {HEAD "<RTKThreeDCircularGeometry>" END, "version '(none)'"},
        {ROOT SID SDD END, "holds no <Projection>"},
        {ROOT SID "<Projection><GantryAngle>3</GantryAngle></Projection>\n" END,
         "line 5, <Projection>: projection 0: SourceToDetectorDistance is 0"},
        {ROOT SID SDD "<Projection><GantryAngle>3x</GantryAngle></Projection>\n" END,
         "line 6, <GantryAngle>: '3x' is not a number"},
        {ROOT SID SDD "<Projection><GantryAngle>nan</GantryAngle></Projection>\n" END,
         "'nan' is not finite"},
        {ROOT SID SDD "<Projection><GantryAngle>1 2</GantryAngle></Projection>\n" END,
         "<GantryAngle>: 2 numbers, need 1"},
        {ROOT SID SDD "<Projection><GantryAngle></GantryAngle></Projection>\n" END,
         "<GantryAngle>: 0 numbers, need 1"},
        {ROOT SID SDD "<Projection><Tilt>3</Tilt></Projection>\n" END,
         "<Tilt>: not a parameter of RTK's ThreeDCircularProjectionGeometry"},
        {ROOT SID SDD "<RadiusCylindricalDetector>450</RadiusCylindricalDetector>"
                      "<Projection/>\n" END,
         "RadiusCylindricalDetector 450: a cylindrical detector"},
        {ROOT SID SDD "<Projection><Matrix>1 2 3</Matrix></Projection>\n" END,
         "<Matrix>: 3 numbers, need 12"},
        {ROOT SID SDD "<Matrix>1 2 3 4 5 6 7 8 9 10 11 12</Matrix>\n" END,
         "a <Matrix> outside a <Projection>"},
        {ROOT SID SDD "<Projection><Projection/></Projection>\n" END,
         "a <Projection> inside a <Projection>"},
        /* the source at the isocentre: no depth for it */
        {ROOT "<SourceToIsocenterDistance>0</SourceToIsocenterDistance>" SDD "<Projection/>" END,
         "lies on the source plane"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[32], err[1024];
        snprintf(name, sizeof name, "bad%zu.xml", i);
        double(*P)[12] = NULL;
        uint32_t n = 0;
        int rc = tl_cone_read_rtk(write_xml(name, cases[i].xml), &det, &P, &n, err, sizeof err);
        ck_assert_msg(rc != 0, "case %zu read", i);
        ck_assert_ptr_null(P);
        ck_assert_msg(strstr(err, cases[i].phrase) != NULL, "case %zu: '%s' lacks '%s'", i, err,
                      cases[i].phrase);
        fprintf(stderr, "  %s\n", err);
    }
    char err[512];
    double(*P)[12];
    uint32_t n;
    ck_assert_int_ne(tl_cone_read_rtk("/nonexistent/g.xml", &det, &P, &n, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cannot open RTK geometry"), "%s", err);
    /* the pitch is needed to reach pixels */
    tl_cone_detector nopitch = {ROWS, COLS, 0, 0};
    ck_assert_int_ne(tl_cone_read_rtk(write_xml("ok.xml", ROOT SID SDD "<Projection/>" END),
                                      &nopitch, &P, &n, err, sizeof err),
                     0);
    ck_assert_msg(strstr(err, "pixel pitch (--pixel-size)"), "%s", err);
#undef ROOT
#undef SID
#undef SDD
#undef END
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cone_read_rtk");
    TCase *tc = tcase_create("rtk");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, rtk_example);
    tcase_add_test(tc, rtk_circular);
    tcase_add_test(tc, rtk_any_angles);
    tcase_add_test(tc, rtk_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
