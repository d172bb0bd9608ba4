/* check_corrections.c — the per-frame corrections (tl_corrections, gpu/base/types.h) on the
 * CPU backend: zingers at known pixels found and replaced, and counted; Paganin phase
 * retrieval against its analytic Fourier-space definition (a direct 2-D DFT in double,
 * the edge padding of gpu/base/phase.h, Paganin et al. 2002 Eq. 10) in float64 mode;
 * bad parameters refused with a message naming them.
 */
#include "config.h"

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/base/rings.h"
#include "gpu/engine.h"
#include "tests/testutil.h"

static tl_engine_config config(uint32_t rows, uint32_t cols, tl_precision p)
{
    tl_engine_config c;
    tl_engine_config_init(&c, rows, cols, 1);
    c.backend = TL_BACKEND_CPU;
    c.filter = TL_FILTER_NONE;
    c.precision = p;
    c.threads = 2;
    return c;
}

static tl_engine *make(const tl_engine_config *c)
{
    tl_engine *e = NULL;
    ck_assert_msg(tl_engine_create(c, &e) == TL_OK, "create: %s", tl_engine_last_error(NULL));
    return e;
}

static void submit(tl_engine *e, tl_frame_kind kind, const uint16_t *px, uint32_t rows,
                   uint32_t cols)
{
    tl_frame f = {.kind = kind, .dtype = TL_DTYPE_U16, .rows = rows, .cols = cols, .data = px};
    ck_assert_msg(tl_engine_submit(e, &f) == TL_OK, "submit: %s", tl_engine_last_error(e));
}

/* The stored projection (filter none, one projection at angle 0): a row slice as wide as
 * the detector puts output pixel j on bin j, weight pi. */
static void stored(tl_engine *e, uint32_t rows, uint32_t cols, float *out)
{
    for (uint32_t r = 0; r < rows; r++) {
        tl_slice_spec s;
        tl_slice_spec_row(&s, r, 1, cols);
        int id;
        float *row = out + (size_t)r * cols;
        ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
        ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &row, NULL), TL_OK);
        ck_assert_int_eq(tl_engine_remove_slice(e, id), TL_OK);
        for (uint32_t j = 0; j < cols; j++)
            row[j] /= (float)M_PI;
    }
}

/* ---- dezinger ----------------------------------------------------------------------------- */

/* The 3 x 3 median at (r, c), the neighbourhood mirrored at the edges without repeating
 * the edge pixel (types.h), written out independently of the engine. */
static double median3x3(const uint16_t *img, int rows, int cols, int r, int c)
{
    double v[9];
    int n = 0;
    for (int dr = -1; dr <= 1; dr++)
        for (int dc = -1; dc <= 1; dc++) {
            int y = r + dr, x = c + dc;
            y = y < 0 ? 1 : y >= rows ? rows - 2 : y;
            x = x < 0 ? 1 : x >= cols ? cols - 2 : x;
            v[n++] = img[y * cols + x];
        }
    for (int i = 1; i < 9; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[4];
}

/* A ramp with zingers at known pixels,
 * corners and edges included, a dark outlier (not a zinger: left alone) and a bright
 * pixel just under the threshold (left alone). */
START_TEST(dezinger_known_pixels)
{
    enum { R = 9, C = 13, NZ = 5 };
    const double threshold = 200;
    uint16_t img[R * C];
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t c = 0; c < C; c++)
            img[r * C + c] = (uint16_t)(1000 + 7 * c + 3 * r);
    const uint32_t zr[NZ] = {0, 4, 8, 2, 6}, zc[NZ] = {0, 6, 12, 12, 1};
    for (int k = 0; k < NZ; k++)
        img[zr[k] * C + zc[k]] += 900;
    img[5 * C + 9] -= 600;                      /* dark outlier */
    img[1 * C + 4] += (uint16_t)threshold - 20; /* under the threshold */
    for (int p = 0; p < 2; p++) {
        tl_engine_config c = config(R, C, p ? TL_PRECISION_F64 : TL_PRECISION_F32);
        c.already_linear = true;
        c.corr.dezinger = threshold;
        tl_engine *e = make(&c);
        submit(e, TL_FRAME_PROJ, img, R, C);
        float out[R * C];
        stored(e, R, C, out);
        for (uint32_t r = 0; r < R; r++)
            for (uint32_t col = 0; col < C; col++) {
                bool zinger = false;
                for (int k = 0; k < NZ; k++)
                    zinger |= zr[k] == r && zc[k] == col;
                double want = zinger ? median3x3(img, R, C, (int)r, (int)col) : img[r * C + col];
                ck_assert_msg(fabs(out[r * C + col] - want) <= 1e-3, "(%u, %u): %g, want %g", r,
                              col, out[r * C + col], want);
            }
        tl_engine_corr_state cs;
        ck_assert_int_eq(tl_engine_corrections(e, &cs), TL_OK);
        ck_assert_uint_eq(cs.dezinger_replaced, NZ);
        ck_assert(cs.corr.dezinger == threshold);
        tl_engine_destroy(e);
    }
}
END_TEST

/* ---- Paganin ------------------------------------------------------------------------------- */

/* The analytic definition, independent of the engine's code: the transmission
 * t = (I - D) / (F - D), padded by edge replication to powers of two at least
 * n + ceil(pi lambda z / px^2) (the frame at ((P - n) / 2)), its 2-D DFT times
 * H = 1 / (1 + pi lambda z (delta/beta) |f|^2), the inverse DFT, the frame's part,
 * -log. Direct DFTs in double (the sizes are small). */
static void paganin_reference(const double *t, uint32_t rows, uint32_t cols,
                              const tl_corrections *k, double *p)
{
    double lambda = 1.239841984e-6 / (k->energy_kev * 1e3), px = k->pixel_um * 1e-6;
    double reach = ceil(M_PI * lambda * k->distance_m / (px * px));
    uint32_t PR = 1, PC = 1;
    while (PR < rows + reach)
        PR *= 2;
    while (PC < cols + reach)
        PC *= 2;
    uint32_t top = (PR - rows) / 2, left = (PC - cols) / 2;
    double *pad = malloc(sizeof(double) * PR * PC);
    double complex *tmp = malloc(sizeof(double complex) * PR * PC);
    double complex *spec = malloc(sizeof(double complex) * PR * PC);
    for (uint32_t r = 0; r < PR; r++)
        for (uint32_t c = 0; c < PC; c++) {
            long sr = (long)r - top, sc = (long)c - left;
            sr = sr < 0 ? 0 : sr >= (long)rows ? rows - 1 : sr;
            sc = sc < 0 ? 0 : sc >= (long)cols ? cols - 1 : sc;
            pad[r * PC + c] = t[sr * cols + sc];
        }
    /* forward: rows then columns */
    for (uint32_t r = 0; r < PR; r++)
        for (uint32_t kx = 0; kx < PC; kx++) {
            double complex s = 0;
            for (uint32_t c = 0; c < PC; c++)
                s += pad[r * PC + c] * cexp(-2 * M_PI * I * (double)kx * c / PC);
            tmp[r * PC + kx] = s;
        }
    for (uint32_t ky = 0; ky < PR; ky++)
        for (uint32_t kx = 0; kx < PC; kx++) {
            double complex s = 0;
            for (uint32_t r = 0; r < PR; r++)
                s += tmp[r * PC + kx] * cexp(-2 * M_PI * I * (double)ky * r / PR);
            double fy = (ky <= PR / 2 ? (double)ky : (double)ky - PR) / (PR * px);
            double fx = (kx <= PC / 2 ? (double)kx : (double)kx - PC) / (PC * px);
            double H =
                1 / (1 + M_PI * lambda * k->distance_m * k->delta_beta * (fx * fx + fy * fy));
            spec[ky * PC + kx] = s * H;
        }
    /* inverse, only the frame's pixels */
    for (uint32_t ky = 0; ky < PR; ky++)
        for (uint32_t c = 0; c < cols; c++) {
            double complex s = 0;
            for (uint32_t kx = 0; kx < PC; kx++)
                s += spec[ky * PC + kx] * cexp(2 * M_PI * I * (double)kx * (c + left) / PC);
            tmp[ky * PC + c] = s;
        }
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            double complex s = 0;
            for (uint32_t ky = 0; ky < PR; ky++)
                s += tmp[ky * PC + c] * cexp(2 * M_PI * I * (double)ky * (r + top) / PR);
            double v = creal(s) / ((double)PR * PC);
            p[r * cols + c] = -log(v > 1e-6 ? v : 1e-6);
        }
    free(pad);
    free(tmp);
    free(spec);
}

/* A smooth object with a sharp edge (where phase contrast fringes would be). */
static void paganin_frames(uint32_t rows, uint32_t cols, uint16_t *img, uint16_t *dark,
                           uint16_t *flat)
{
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            double x = (c - cols / 2.0) / cols, y = (r - rows / 2.0) / rows;
            double att = x * x + y * y < 0.12 ? 0.55 : 0.9 - 0.2 * x;
            dark[r * cols + c] = (uint16_t)(100 + (r + c) % 3);
            flat[r * cols + c] = (uint16_t)(4000 + 37 * ((r * 7 + c * 3) % 5));
            img[r * cols + c] =
                (uint16_t)(100 + att * (flat[r * cols + c] - 100) + (c == cols / 3 ? 300 : 0));
        }
}

START_TEST(paganin_fourier_definition)
{
    enum { R = 12, C = 20 };
    tl_corrections k = {.energy_kev = 20, .distance_m = 0.05, .pixel_um = 1, .delta_beta = 100};
    uint16_t img[R * C], dark[R * C], flat[R * C];
    paganin_frames(R, C, img, dark, flat);
    double t[R * C], want[R * C];
    for (int i = 0; i < R * C; i++)
        t[i] = ((double)img[i] - dark[i]) / ((double)flat[i] - dark[i]);
    paganin_reference(t, R, C, &k, want);

    tl_engine_config c = config(R, C, TL_PRECISION_F64);
    c.corr = k;
    tl_engine *e = make(&c);
    submit(e, TL_FRAME_DARK, dark, R, C);
    submit(e, TL_FRAME_FLAT, flat, R, C);
    submit(e, TL_FRAME_PROJ, img, R, C);
    float got[R * C];
    stored(e, R, C, got);
    double err = tl_rel_l2_d(got, want, R * C);
    ck_assert_msg(err <= 1e-5, "Paganin vs its Fourier definition: rel L2 %.3g", err);
    /* the filter did something: the plain -log differs by far more */
    double plain[R * C];
    for (int i = 0; i < R * C; i++)
        plain[i] = -log(t[i]);
    ck_assert(tl_rel_l2_d(got, plain, R * C) > 1e-2);
    tl_engine_destroy(e);

    /* float32 mode within the preprocessing tolerance of the reference */
    c.precision = TL_PRECISION_F32;
    e = make(&c);
    submit(e, TL_FRAME_DARK, dark, R, C);
    submit(e, TL_FRAME_FLAT, flat, R, C);
    submit(e, TL_FRAME_PROJ, img, R, C);
    stored(e, R, C, got);
    err = tl_rel_l2_d(got, want, R * C);
    ck_assert_msg(err <= 1e-5, "float32 Paganin: rel L2 %.3g", err);
    tl_engine_destroy(e);
}
END_TEST

/* Dezinger then Paganin then the filter: the stages compose (the float64 result equals
 * the reference of the dezingered frame). */
START_TEST(corrections_compose)
{
    enum { R = 10, C = 16 };
    tl_corrections k = {.dezinger = 2000,
                        .energy_kev = 25,
                        .distance_m = 0.1,
                        .pixel_um = 2,
                        .delta_beta = 50};
    uint16_t img[R * C], dark[R * C], flat[R * C];
    paganin_frames(R, C, img, dark, flat);
    uint16_t zinged[R * C];
    memcpy(zinged, img, sizeof img);
    zinged[3 * C + 7] += 3000; /* inside the disk, away from the bright column */
    tl_engine_config c = config(R, C, TL_PRECISION_F64);
    c.corr = k;
    tl_engine *a = make(&c);
    c.corr.dezinger = 0;
    tl_engine *b = make(&c);
    submit(a, TL_FRAME_DARK, dark, R, C);
    submit(a, TL_FRAME_FLAT, flat, R, C);
    submit(b, TL_FRAME_DARK, dark, R, C);
    submit(b, TL_FRAME_FLAT, flat, R, C);
    submit(a, TL_FRAME_PROJ, zinged, R, C);
    /* b sees what the dezinger should have made of the zinger: the median of its 3 x 3 */
    uint16_t v[9], fixed[R * C];
    memcpy(fixed, img, sizeof img);
    int n = 0;
    for (int dr = -1; dr <= 1; dr++)
        for (int dc = -1; dc <= 1; dc++)
            v[n++] = zinged[(3 + dr) * C + 7 + dc];
    for (int i = 1; i < 9; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint16_t x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    fixed[3 * C + 7] = v[4];
    submit(b, TL_FRAME_PROJ, fixed, R, C);
    float ga[R * C], gb[R * C];
    stored(a, R, C, ga);
    stored(b, R, C, gb);
    double err = tl_rel_l2(ga, gb, R * C);
    ck_assert_msg(err <= 1e-12, "dezinger + Paganin vs Paganin of the repaired frame: %g", err);
    tl_engine_corr_state cs;
    ck_assert_int_eq(tl_engine_corrections(a, &cs), TL_OK);
    ck_assert_uint_eq(cs.dezinger_replaced, 1);
    /* each stage timed once for a's frame; b ran Paganin only */
    tl_stage_time t[8];
    size_t nt = 0;
    ck_assert_int_eq(tl_engine_stage_times(a, t, 8, &nt), TL_OK);
    ck_assert_uint_eq(nt, 2);
    ck_assert_int_eq(t[0].stage, TL_STAGE_DEZINGER);
    ck_assert_int_eq(t[1].stage, TL_STAGE_PAGANIN);
    ck_assert(t[0].seconds >= 0 && t[1].seconds > 0);
    ck_assert_str_eq(tl_stage_name(TL_STAGE_PAGANIN), "paganin");
    ck_assert_int_eq(tl_engine_stage_times(a, t, 8, &nt), TL_OK);
    ck_assert_uint_eq(nt, 0); /* read once */
    ck_assert_int_eq(tl_engine_stage_times(b, t, 1, &nt), TL_OK);
    ck_assert_uint_eq(nt, 1);
    ck_assert_int_eq(t[0].stage, TL_STAGE_PAGANIN);
    tl_engine_destroy(a);
    tl_engine_destroy(b);
}
END_TEST

/* ---- rings ---------------------------------------------------------------------------------- */

/* A 512-column detector: stripes 1-2 % of transmission on an object of realistic
 * proportions. The estimate works on the column profile (the mean projection), so what
 * is narrow in it is taken for a stripe: where the mean projection is curved (a bias of
 * about mu h^2 / 2R for a disk of radius R and a median of half-width h: small for R of
 * hundreds of pixels, as on real detectors) and where an off-axis feature dwells at its
 * turning point in a 180-degree window (a bump as wide as the feature: a 60-pixel disk of
 * mu 0.01 made one of 0.016, as large as the stripes; this 12-pixel one 0.004). */
enum { RR = 3, RC = 512, RN = 90, RS = 256 };

/* Line integrals at angle theta of two disks (one off the axis), already linear. */
static double disks(double u, double theta)
{
    const double cx[2] = {0, 90}, cy[2] = {0, -60}, rad[2] = {200, 6}, mu[2] = {0.004, 0.02};
    double p = 0;
    for (int k = 0; k < 2; k++) {
        double d = u - (cx[k] * cos(theta) - cy[k] * sin(theta));
        if (fabs(d) < rad[k])
            p += 2 * mu[k] * sqrt(rad[k] * rad[k] - d * d);
    }
    return p;
}

/* Stripes of known strength: full stripes (a detector pixel's constant offset). */
static double stripe(uint32_t c)
{
    static const uint32_t at[] = {156, 209, 269, 297, 346};
    static const double amp[] = {0.02, -0.015, 0.018, 0.02, -0.012};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++)
        if (c == at[i])
            return amp[i];
    return 0;
}

/* Streams `turns` windows of frames (striped or not) into an engine with rings `r`, the
 * row slice RR/2 tracked and read every 7 frames (incremental updates in between);
 * returns the tracked slice at the end and, in fresh, the same slice from scratch. */
static void stream_rings(tl_rings r, bool striped, int turns, tl_precision p, float *tracked,
                         float *fresh, tl_engine_corr_state *cs)
{
    tl_engine_config c;
    tl_engine_config_init(&c, RR, RC, RN);
    c.backend = TL_BACKEND_CPU;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.precision = p;
    c.threads = 2;
    c.corr.rings = r;
    tl_engine *e = make(&c);
    tl_slice_spec s;
    tl_slice_spec_row(&s, RR / 2, RS, RS);
    int id, id2;
    ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
    ck_assert_int_eq(tl_engine_track(e, id, true), TL_OK);
    float img[RR * RC];
    for (uint64_t k = 0; k < (uint64_t)turns * RN; k++) {
        double th = M_PI * (double)(k % RN) / RN;
        for (uint32_t row = 0; row < RR; row++)
            for (uint32_t col = 0; col < RC; col++)
                img[row * RC + col] =
                    (float)(disks(col - (RC - 1) / 2.0, th) + (striped ? stripe(col) : 0));
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = k,
                      .angle = th,
                      .dtype = TL_DTYPE_F32,
                      .rows = RR,
                      .cols = RC,
                      .data = img};
        ck_assert_msg(tl_engine_submit(e, &f) == TL_OK, "%s", tl_engine_last_error(e));
        if (k % 7 == 0)
            ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &tracked, NULL), TL_OK);
    }
    ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &tracked, NULL), TL_OK);
    ck_assert_int_eq(tl_engine_add_slice(e, &s, &id2), TL_OK);
    ck_assert_int_eq(tl_engine_reconstruct(e, &id2, 1, &fresh, NULL), TL_OK);
    ck_assert_int_eq(tl_engine_corrections(e, cs), TL_OK);
    tl_engine_destroy(e);
}

/* Stripes of known strength: the ring residual (slice minus the stripe-free slice,
 * inside the disk of the reconstruction) after removal vs before; the incrementally kept
 * slice equals the slice from scratch after every window update. */
START_TEST(rings_remove_stripes)
{
    float clean[RS * RS], before[RS * RS], after[RS * RS], fresh[RS * RS];
    tl_engine_corr_state cs;
    stream_rings(TL_RINGS_NONE, false, 2, TL_PRECISION_F64, clean, fresh, &cs);
    stream_rings(TL_RINGS_NONE, true, 2, TL_PRECISION_F64, before, fresh, &cs);
    double res_before = tl_rel_l2_disk(before, clean, RS, RS, RS / 2.0 - 2);
    for (int m = TL_RINGS_VO; m <= TL_RINGS_FW; m++)
        for (int p = 0; p < 2; p++) {
            tl_precision prec = p ? TL_PRECISION_F64 : TL_PRECISION_F32;
            stream_rings((tl_rings)m, true, 3, prec, after, fresh, &cs);
            double res_after = tl_rel_l2_disk(after, clean, RS, RS, RS / 2.0 - 2);
            double exact = tl_rel_l2(after, fresh, RS * RS);
            printf("rings %s %s: residual %.4f before, %.4f after; tracked vs scratch %.2g; "
                   "%llu updates, %llu rebuilds\n",
                   tl_rings_name((tl_rings)m), p ? "f64" : "f32", res_before, res_after, exact,
                   (unsigned long long)cs.ring_updates, (unsigned long long)cs.ring_rebuilds);
            ck_assert_msg(res_after <= 0.35 * res_before, "%s: residual %.4f after, %.4f before",
                          tl_rings_name((tl_rings)m), res_after, res_before);
            ck_assert_msg(exact <= 1e-6, "tracked vs scratch %.3g", exact);
            ck_assert_uint_eq(cs.ring_updates, 3 * RN / tl_rings_interval(RN));
            ck_assert_uint_gt(cs.ring_rebuilds, 0);
        }
    /* without stripes the removal leaves the object nearly alone */
    stream_rings(TL_RINGS_VO, false, 3, TL_PRECISION_F64, after, fresh, &cs);
    double harm = tl_rel_l2_disk(after, clean, RS, RS, RS / 2.0 - 2);
    printf("rings vo on stripe-free data: %.4f\n", harm);
    ck_assert_msg(harm <= 0.35 * res_before, "vo changes a stripe-free slice by %.4f", harm);
}
END_TEST

/* ---- bad parameters ------------------------------------------------------------------------ */

static void refused(const tl_corrections *k, bool linear, tl_status want, const char *words)
{
    tl_engine_config c = config(8, 8, TL_PRECISION_F32);
    c.corr = *k;
    c.already_linear = linear;
    tl_engine *e = NULL;
    ck_assert_int_eq(tl_engine_create(&c, &e), want);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(tl_engine_last_error(NULL), words), "message \"%s\" lacks \"%s\"",
                  tl_engine_last_error(NULL), words);
}

START_TEST(bad_parameters)
{
    tl_corrections ok = {.energy_kev = 20, .distance_m = 0.1, .pixel_um = 1, .delta_beta = 100};
    tl_corrections k = ok;
    k.distance_m = -0.1;
    refused(&k, false, TL_EINVAL, "distance (m) must be a positive number");
    k = ok;
    k.energy_kev = 0;
    refused(&k, false, TL_EINVAL, "energy (keV) must be a positive number");
    k = ok;
    k.pixel_um = NAN;
    refused(&k, false, TL_EINVAL, "pixel size");
    k = (tl_corrections){.delta_beta = 100}; /* the rest missing */
    refused(&k, false, TL_EINVAL, "energy");
    refused(&ok, true, TL_EINVAL, "not already linear");
    k = (tl_corrections){.dezinger = -1};
    refused(&k, false, TL_EINVAL, "dezinger threshold");
    k = ok;
    k.distance_m = 1e6; /* the blur reaches beyond any padding */
    refused(&k, false, TL_EINVAL, "Fresnel blur");
    k = (tl_corrections){.rings = TL_RINGS_VO, .ring_size = 30};
    refused(&k, false, TL_EINVAL, "must be odd");
    k = (tl_corrections){.rings = TL_RINGS_FW, .ring_level = 40};
    refused(&k, false, TL_EINVAL, "wavelet levels");
    tl_engine_config c = config(8, 8, TL_PRECISION_F32);
    c.corr.dezinger = 10;
    c.ndevices = 2;
    c.devices[0] = c.devices[1] = 0;
    tl_engine *e = NULL;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EUNSUPPORTED);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("corrections");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, dezinger_known_pixels);
    tcase_add_test(t, paganin_fourier_definition);
    tcase_add_test(t, corrections_compose);
    tcase_add_test(t, rings_remove_stripes);
    tcase_add_test(t, bad_parameters);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
