/* check_engine.c — the engine's bookkeeping and preprocessing on the CPU backend:
 * the rolling window (stale, duplicate, out of order, missing), the dark/flat batch rule,
 * flat-field correction and -log, dtype conversion, filter design, memory refusal, and
 * the geometry of a single bin (ARCHITECTURE.md §3.1 conventions). Accuracy against analytic
 * phantoms is in check_accuracy.c.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "gpu/method/filter.h"
#include "gpu/window.h"
#include "tests/testutil.h"

static tl_engine *make(uint32_t rows, uint32_t cols, uint32_t window, tl_dtype dt,
                       tl_filter filter, bool linear)
{
    tl_engine_config c;
    tl_engine_config_init(&c, rows, cols, window);
    c.backend = TL_BACKEND_CPU;
    c.dtype = dt;
    c.filter = filter;
    c.already_linear = linear;
    c.threads = 2;
    tl_engine *e = NULL;
    tl_status st = tl_engine_create(&c, &e);
    ck_assert_msg(st == TL_OK, "create: %s", tl_engine_last_error(NULL));
    return e;
}

static tl_frame frame(tl_frame_kind kind, uint64_t index, double angle, tl_dtype dt, uint32_t rows,
                      uint32_t cols, const void *data)
{
    tl_frame f = {.kind = kind,
                  .index = index,
                  .angle = angle,
                  .dtype = dt,
                  .rows = rows,
                  .cols = cols,
                  .data = data};
    return f;
}

/* ---- window ------------------------------------------------------------------------------ */

START_TEST(window_in_and_out_of_order)
{
    tl_window w;
    ck_assert_int_eq(tl_window_init(&w, 4, 10), 0);
    uint32_t slot;
    ck_assert_int_eq(tl_window_place(&w, 9, &slot, NULL, NULL), TL_ESTALE); /* before first */
    ck_assert_int_eq(tl_window_place(&w, 12, &slot, NULL, NULL), TL_OK);
    tl_window_hold(&w, slot, 12);
    ck_assert_uint_eq(tl_window_missing(&w), 2); /* 10, 11 */
    ck_assert_int_eq(tl_window_place(&w, 12, &slot, NULL, NULL), TL_EDUPLICATE);
    ck_assert_int_eq(tl_window_place(&w, 10, &slot, NULL, NULL), TL_OK);
    tl_window_hold(&w, slot, 10);
    ck_assert_int_eq(tl_window_place(&w, 15, &slot, NULL, NULL), TL_OK); /* window -> 12..15 */
    tl_window_hold(&w, slot, 15);
    ck_assert_uint_eq(tl_window_first(&w), 12);
    ck_assert_uint_eq(w.nheld, 2); /* 10 evicted */
    uint64_t miss[8];
    ck_assert_uint_eq(tl_window_missing_list(&w, miss, 8), 2);
    ck_assert_uint_eq(miss[0], 13);
    ck_assert_uint_eq(miss[1], 14);
    ck_assert_int_eq(tl_window_place(&w, 11, &slot, NULL, NULL), TL_ESTALE);
    ck_assert_int_eq(tl_window_place(&w, 100, &slot, NULL, NULL), TL_OK); /* jump: all evicted */
    ck_assert_uint_eq(w.nheld, 0);
    tl_window_hold(&w, slot, 100);
    ck_assert_uint_eq(tl_window_missing(&w), 3); /* 97..99 */
    tl_window_free(&w);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* 5% of frames swapped out of order and 1% dropped: the missing count stays exact at every
 * step, against a brute-force recount. */
START_TEST(window_missing_exact_under_shuffle)
{
    const uint32_t N = 180, total = 1000;
    uint64_t *order = malloc(total * sizeof *order);
    bool *drop = calloc(total, 1);
    for (uint32_t i = 0; i < total; i++)
        order[i] = i;
    srand(7);
    for (uint32_t i = 0; i + 3 < total; i++)
        if (rand() % 100 < 5) { /* swap with a frame up to 3 later */
            uint32_t j = i + 1 + (uint32_t)(rand() % 3);
            uint64_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    for (uint32_t i = 0; i < total; i++)
        drop[i] = rand() % 100 == 0;
    tl_engine *e = make(1, 8, N, TL_DTYPE_F32, TL_FILTER_NONE, true);
    float px[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t *held = malloc(total * sizeof *held);
    size_t nheld = 0, stale = 0;
    uint64_t last = 0;
    for (uint32_t k = 0; k < total; k++) {
        uint64_t idx = order[k];
        if (drop[idx])
            continue;
        tl_frame f = frame(TL_FRAME_PROJ, idx, 0.01 * idx, TL_DTYPE_F32, 1, 8, px);
        tl_status st = tl_engine_submit(e, &f);
        if (idx > last)
            last = idx;
        uint64_t first = last >= N - 1 ? last - N + 1 : 0;
        if (idx < first) {
            ck_assert_int_eq(st, TL_ESTALE);
            stale++;
            continue;
        }
        ck_assert_int_eq(st, TL_OK);
        held[nheld++] = idx;
        /* brute force: indices of [first, last] not received */
        qsort(held, nheld, sizeof *held, cmp_u64);
        uint32_t present = 0;
        for (size_t i = 0; i < nheld; i++)
            present += held[i] >= first && held[i] <= last;
        tl_engine_state s;
        tl_engine_get_state(e, &s);
        ck_assert_uint_eq(s.missing, (uint32_t)(last - first + 1) - present);
        ck_assert_uint_eq(s.held, present);
        ck_assert_uint_eq(s.window_first, first);
    }
    tl_engine_state s;
    tl_engine_get_state(e, &s);
    ck_assert_uint_eq(s.stale, stale);
    uint64_t miss[256];
    size_t nm = tl_engine_missing(e, miss, 256);
    ck_assert_uint_eq(nm, s.missing);
    for (size_t i = 0; i < nm && i < 256; i++)
        ck_assert(drop[miss[i]]);
    free(order);
    free(drop);
    free(held);
    tl_engine_destroy(e);
}
END_TEST

START_TEST(rejections_counted)
{
    tl_engine *e = make(2, 4, 3, TL_DTYPE_U16, TL_FILTER_RAMLAK, false);
    uint16_t px[8] = {100, 100, 100, 100, 100, 100, 100, 100};
    tl_frame f = frame(TL_FRAME_PROJ, 5, 0, TL_DTYPE_U16, 2, 4, px);
    uint64_t done = 99;
    ck_assert_int_eq(tl_engine_frames_done(e, 0, &done), TL_OK);
    ck_assert_uint_eq(done, 0);
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    /* fences count the frames the backend took; the CPU backend is done when it returns */
    ck_assert_uint_eq(tl_engine_frames_queued(e), 1);
    ck_assert_int_eq(tl_engine_frames_done(e, 1, &done), TL_OK);
    ck_assert_uint_eq(done, 1);
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_EDUPLICATE);
    f.index = 1;
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_ESTALE);
    f.index = 6;
    f.cols = 5;
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_ESHAPE);
    f.cols = 4;
    f.dtype = TL_DTYPE_U8;
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_ESHAPE);
    f.dtype = TL_DTYPE_U16;
    f.angle = NAN;
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_EINVAL);
    f.angle = 0;
    f.memory = TL_MEMORY_DEVICE;
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_EUNSUPPORTED);
    ck_assert(strstr(tl_engine_last_error(e), "host memory") != NULL);
    /* refused before the backend (duplicate, stale, shape, angle): no number; the device
     * frame reached the backend, which refused it: numbered, and done */
    ck_assert_uint_eq(tl_engine_frames_queued(e), 2);
    ck_assert_int_eq(tl_engine_frames_done(e, 0, &done), TL_OK);
    ck_assert_uint_eq(done, 2);
    tl_engine_state s;
    tl_engine_get_state(e, &s);
    ck_assert_uint_eq(s.duplicate, 1);
    ck_assert_uint_eq(s.stale, 1);
    ck_assert_uint_eq(s.shape, 2);
    ck_assert_uint_eq(s.accepted[TL_FRAME_PROJ], 1);
    tl_engine_destroy(e);
}
END_TEST

/* ---- preprocessing ------------------------------------------------------------------------ */

/* Filter NONE, one projection at angle 0 and a row slice as wide as the detector: output
 * pixel j sits exactly on bin j, so the slice is pi * p[j] (weight pi / N with N = 1). */
static void project_row(tl_engine *e, uint32_t cols, float *out)
{
    tl_slice_spec s;
    tl_slice_spec_row(&s, 0, 1, cols);
    int id;
    ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
    ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &out, NULL), TL_OK);
    ck_assert_int_eq(tl_engine_remove_slice(e, id), TL_OK);
    for (uint32_t j = 0; j < cols; j++)
        out[j] /= (float)M_PI;
}

START_TEST(flat_field_and_log)
{
    const uint32_t W = 6;
    tl_engine *e = make(1, W, 1, TL_DTYPE_U16, TL_FILTER_NONE, false);
    uint16_t d1[6] = {100, 100, 100, 100, 100, 100}, d2[6] = {110, 110, 110, 90, 90, 90};
    uint16_t f1[6] = {1100, 2100, 600, 1100, 1100, 100},
             f2[6] = {1100, 2100, 600, 1100, 1100, 100};
    uint16_t img[6] = {600, 600, 350, 100, 50, 400};
    tl_frame f = frame(TL_FRAME_DARK, 0, 0, TL_DTYPE_U16, 1, W, d1);
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    f.data = d2;
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    f = frame(TL_FRAME_FLAT, 0, 0, TL_DTYPE_U16, 1, W, f1);
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    f.data = f2;
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    tl_engine_state s;
    tl_engine_get_state(e, &s);
    ck_assert_uint_eq(s.dark_batch, 2);
    ck_assert_uint_eq(s.flat_batch, 2);
    f = frame(TL_FRAME_PROJ, 0, 0, TL_DTYPE_U16, 1, W, img);
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    float out[6];
    project_row(e, W, out);
    for (uint32_t j = 0; j < W; j++) {
        double D = (d1[j] + d2[j]) / 2.0, F = (f1[j] + f2[j]) / 2.0;
        double den = F - D > 1e-6 ? F - D : 1e-6;
        double t = (img[j] - D) / den;
        double p = -log(t > 1e-6 ? t : 1e-6);
        ck_assert_msg(fabs(out[j] - p) <= 1e-5 * fmax(1.0, fabs(p)), "col %u: %g vs %g", j, out[j],
                      p);
    }
    /* columns 3..5: I <= D clamps to -log(1e-6); F <= D clamps the denominator */
    ck_assert_float_eq_tol(out[4], -log(1e-6), 1e-4);
    tl_engine_destroy(e);
}
END_TEST

/* A dark after a projection starts a new batch that replaces the old average at once;
 * darks and flats interleaved before the projections form one batch each. */
START_TEST(calibration_batches)
{
    const uint32_t W = 4;
    tl_engine *e = make(1, W, 1, TL_DTYPE_F32, TL_FILTER_NONE, true);
    float a[4] = {10, 10, 10, 10}, b[4] = {20, 20, 20, 20}, fl[4] = {110, 110, 110, 110};
    float one[4] = {60, 60, 60, 60};
    tl_frame f = frame(TL_FRAME_DARK, 0, 0, TL_DTYPE_F32, 1, W, a);
    tl_engine_submit(e, &f);
    f = frame(TL_FRAME_FLAT, 0, 0, TL_DTYPE_F32, 1, W, fl);
    tl_engine_submit(e, &f);
    f = frame(TL_FRAME_DARK, 1, 0, TL_DTYPE_F32, 1, W, b);
    tl_engine_submit(e, &f);
    tl_engine_state s;
    tl_engine_get_state(e, &s);
    ck_assert_uint_eq(s.dark_batch, 2); /* interleaved: still one batch, D = 15 */
    f = frame(TL_FRAME_PROJ, 0, 0, TL_DTYPE_F32, 1, W, one);
    ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    float out[4];
    project_row(e, W, out);
    ck_assert_float_eq_tol(out[1], (60.0 - 15.0) / (110.0 - 15.0), 1e-6); /* linear: no log */
    /* a new dark after the projection: new batch, D = 20 from now on */
    f = frame(TL_FRAME_DARK, 2, 0, TL_DTYPE_F32, 1, W, b);
    tl_engine_submit(e, &f);
    tl_engine_get_state(e, &s);
    ck_assert_uint_eq(s.dark_batch, 1);
    tl_engine_destroy(e);
    e = make(1, W, 1, TL_DTYPE_F32, TL_FILTER_NONE, true);
    f = frame(TL_FRAME_DARK, 0, 0, TL_DTYPE_F32, 1, W, a);
    tl_engine_submit(e, &f);
    f = frame(TL_FRAME_PROJ, 0, 0, TL_DTYPE_F32, 1, W, one);
    tl_engine_submit(e, &f);
    f = frame(TL_FRAME_DARK, 1, 0, TL_DTYPE_F32, 1, W, b);
    tl_engine_submit(e, &f);
    f = frame(TL_FRAME_PROJ, 1, 0, TL_DTYPE_F32, 1, W, one);
    tl_engine_submit(e, &f);
    project_row(e, W, out);
    ck_assert_float_eq_tol(out[2], 60.0 - 20.0, 1e-5); /* no flats: F - D = 1 */
    tl_engine_destroy(e);
}
END_TEST

/* The same counts in u8, u16, u32 and f32 give identical slices. */
START_TEST(dtype_conversion)
{
    const uint32_t R = 3, W = 40, N = 7;
    float ref[40 * 40];
    for (int d = 0; d < 4; d++) {
        tl_dtype dt = (tl_dtype)d;
        tl_engine *e = make(R, W, N, dt, TL_FILTER_SHEPP_LOGAN, false);
        void *buf = malloc(R * W * 4);
        for (int kind = 0; kind < 3; kind++)
            for (uint32_t p = 0; p < (kind == 2 ? N : 2); p++) {
                for (uint32_t i = 0; i < R * W; i++) {
                    uint32_t v = kind == 0   ? 5 + i % 3
                                 : kind == 1 ? 250 - i % 5
                                             : 40 + (i * 7 + p * 13) % 200;
                    switch (dt) {
                        case TL_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
                        case TL_DTYPE_U16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
                        case TL_DTYPE_U32: ((uint32_t *)buf)[i] = v; break;
                        case TL_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
                    }
                }
                tl_frame f = frame((tl_frame_kind)kind, p, p * M_PI / N, dt, R, W, buf);
                ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
            }
        tl_slice_spec s;
        tl_slice_spec_row(&s, 1, W, W);
        int id;
        tl_engine_add_slice(e, &s, &id);
        float out[40 * 40], *o = out;
        ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &o, NULL), TL_OK);
        if (d == 0)
            memcpy(ref, out, sizeof ref);
        else
            ck_assert_msg(memcmp(ref, out, sizeof ref) == 0, "dtype %d differs", d);
        free(buf);
        tl_engine_destroy(e);
    }
}
END_TEST

/* A frame given with a row pitch (a region of a larger image) equals the packed frame. */
START_TEST(pitched_frames)
{
    const uint32_t R = 4, W = 16;
    uint16_t big[4 * 20], packed[4 * 16];
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t c = 0; c < 20; c++) {
            big[r * 20 + c] = (uint16_t)(1000 + r * 37 + c * 11);
            if (c >= 2 && c < 18)
                packed[r * W + c - 2] = big[r * 20 + c];
        }
    float o1[16 * 16], o2[16 * 16], *p1 = o1, *p2 = o2;
    for (int k = 0; k < 2; k++) {
        tl_engine *e = make(R, W, 1, TL_DTYPE_U16, TL_FILTER_RAMLAK, false);
        tl_frame f =
            frame(TL_FRAME_PROJ, 0, 0.3, TL_DTYPE_U16, R, W, k ? (void *)(big + 2) : packed);
        f.pitch = k ? 20 * sizeof(uint16_t) : 0;
        ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
        tl_slice_spec s;
        tl_slice_spec_row(&s, 2, W, W);
        int id;
        tl_engine_add_slice(e, &s, &id);
        ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, k ? &p2 : &p1, NULL), TL_OK);
        tl_engine_destroy(e);
    }
    ck_assert(memcmp(o1, o2, sizeof o1) == 0);
}
END_TEST

/* ---- filters ------------------------------------------------------------------------------ */

START_TEST(filter_design)
{
    size_t P = tl_filter_padded_length(300);
    ck_assert_uint_eq(P, 1024);
    ck_assert_uint_eq(tl_filter_padded_length(512), 1024);
    double *H = malloc((P / 2 + 1) * sizeof *H);
    ck_assert_int_eq(tl_filter_response(TL_FILTER_RAMLAK, P, H), TL_OK);
    /* spatial design: small positive DC (no cupping), ramp |k|/P in between */
    ck_assert(H[0] > 0 && H[0] < 1.0 / P);
    for (size_t k = P / 16; k <= P / 2 - P / 16; k += 7)
        ck_assert_msg(fabs(H[k] - (double)k / P) < 0.01 * k / P, "k=%zu %g", k, H[k]);
    double ramp_nyq = H[P / 2];
    struct {
        tl_filter f;
        double nyq; /* window at w = 1 */
    } w[] = {{TL_FILTER_SHEPP_LOGAN, 2 / M_PI},
             {TL_FILTER_COSINE, 0},
             {TL_FILTER_HAMMING, 0.08},
             {TL_FILTER_HANN, 0},
             {TL_FILTER_PARZEN, 0}};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
        ck_assert_int_eq(tl_filter_response(w[i].f, P, H), TL_OK);
        ck_assert_msg(fabs(H[P / 2] - w[i].nyq * ramp_nyq) < 1e-12, "%s", tl_filter_name(w[i].f));
    }
    tl_filter f;
    ck_assert(tl_filter_parse("ramp", &f) && f == TL_FILTER_RAMLAK);
    ck_assert(tl_filter_parse("parzen", &f) && f == TL_FILTER_PARZEN);
    ck_assert(!tl_filter_parse("gaussian", &f));
    free(H);
}
END_TEST

/* ---- geometry ----------------------------------------------------------------------------- */

/* One non-zero bin back-projects onto the line center + x cos - y sin = t0: the brightest
 * pixel of every output row lies within 0.5 px of it, for plain and ramp-filtered data,
 * with a per-projection centre correction. */
START_TEST(single_bin_line)
{
    const uint32_t W = 96, S = 80;
    const double angles[] = {0.3, 1.1, 2.0, 2.9};
    for (int filt = 0; filt < 2; filt++)
        for (size_t a = 0; a < 4; a++) {
            tl_engine *e =
                make(1, W, 1, TL_DTYPE_F32, filt ? TL_FILTER_RAMLAK : TL_FILTER_NONE, true);
            float px[96] = {0};
            const uint32_t t0 = 53;
            px[t0] = 1;
            tl_frame f = frame(TL_FRAME_PROJ, 0, angles[a], TL_DTYPE_F32, 1, W, px);
            f.center_offset = 1.75;
            ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
            tl_slice_spec s;
            tl_slice_spec_row(&s, 0, S, S);
            int id;
            tl_engine_add_slice(e, &s, &id);
            float *out = malloc(S * S * sizeof *out);
            ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &out, NULL), TL_OK);
            double c = (W - 1) / 2.0 + 1.75, ct = cos(angles[a]), st = sin(angles[a]);
            int checked = 0;
            for (uint32_t i = 0; i < S; i++) {
                double y = S / 2.0 - i - 0.5;
                uint32_t best = 0;
                for (uint32_t j = 1; j < S; j++)
                    if (out[i * S + j] > out[i * S + best])
                        best = j;
                double x = best + 0.5 - S / 2.0;
                double line_x = (t0 - c + y * st) / ct; /* where the line crosses this row */
                if (fabs(line_x) > S / 2.0 - 2 || out[i * S + best] <= 0)
                    continue;
                double d = c + x * ct - y * st - t0; /* detector distance of the pixel */
                ck_assert_msg(fabs(d) <= 0.5 + 1e-6, "angle %g row %u: %g px off", angles[a], i,
                              d);
                checked++;
            }
            ck_assert_int_gt(checked, 10);
            free(out);
            tl_engine_destroy(e);
        }
}
END_TEST

/* A row slice of the projections [first, first + n) of a scan of `total` at `angles`,
 * weighed by their angular shares: as a part of the whole scan (ref) or on their own. */
static void part_slice(const double *angles, uint32_t total, uint32_t first, uint32_t n,
                       const double *ref, const float *sino, uint32_t cols, float *out)
{
    tl_engine_config c;
    tl_engine_config_init(&c, 1, cols, total);
    c.backend = TL_BACKEND_CPU;
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.threads = 2;
    c.weights = TL_WEIGHTS_ANGLES;
    c.weight_angles = ref;
    c.nweight_angles = ref ? total : 0;
    tl_engine *e = NULL;
    ck_assert_msg(tl_engine_create(&c, &e) == TL_OK, "%s", tl_engine_last_error(NULL));
    for (uint32_t i = first; i < first + n; i++) {
        tl_frame f = frame(TL_FRAME_PROJ, i, angles[i], TL_DTYPE_F32, 1, cols, sino + i * cols);
        ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    }
    tl_slice_spec s;
    tl_slice_spec_row(&s, 0, cols, cols);
    int id;
    ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
    ck_assert_int_eq(tl_engine_reconstruct(e, &id, 1, &out, NULL), TL_OK);
    tl_engine_destroy(e);
}

START_TEST(angular_weights_of_a_part)
{
    /* 61 unevenly spaced views (denser at the ends), split 30 + 31 as recon --grid's two
     * columns split them: weighed as parts of the whole scan (weight_angles) their slices
     * sum to the whole scan's; weighed on their own they do not */
    enum { N = 61, W = 48 };
    double angles[N];
    float *sino = malloc(N * W * sizeof *sino);
    for (uint32_t i = 0; i < N; i++) {
        double t = (double)i / N;
        angles[N - 1 - i] = M_PI * (t - 0.15 * sin(2 * M_PI * t)); /* any order */
    }
    for (uint32_t i = 0; i < N * W; i++)
        sino[i] = (float)(1 + cos(0.3 * (i % W)) * sin(0.07 * i));
    float *whole = malloc(W * W * sizeof *whole), *a = malloc(W * W * sizeof *a),
          *b = malloc(W * W * sizeof *b), *sum = malloc(W * W * sizeof *sum);
    part_slice(angles, N, 0, N, NULL, sino, W, whole);
    part_slice(angles, N, 0, 30, angles, sino, W, a);
    part_slice(angles, N, 30, 31, angles, sino, W, b);
    for (uint32_t i = 0; i < W * W; i++)
        sum[i] = a[i] + b[i];
    double rel = tl_rel_l2(sum, whole, W * W);
    ck_assert_msg(rel < 1e-6, "parts weighed as the whole scan's: rel L2 %g", rel);
    /* the whole scan's own weights with ref equal those without */
    part_slice(angles, N, 0, N, angles, sino, W, a);
    ck_assert(tl_rel_l2(a, whole, W * W) < 1e-7);
    /* each part weighed on its own: its shares of pi, not of the scan's */
    part_slice(angles, N, 0, 30, NULL, sino, W, a);
    part_slice(angles, N, 30, 31, NULL, sino, W, b);
    for (uint32_t i = 0; i < W * W; i++)
        sum[i] = a[i] + b[i];
    ck_assert(tl_rel_l2(sum, whole, W * W) > 0.1);
    /* a reference needs ANGLES weights */
    tl_engine_config c;
    tl_engine_config_init(&c, 1, W, N);
    c.backend = TL_BACKEND_CPU;
    c.weight_angles = angles;
    c.nweight_angles = N;
    tl_engine *e = NULL;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EINVAL);
    free(sino);
    free(whole);
    free(a);
    free(b);
    free(sum);
}
END_TEST

START_TEST(plane_conventions)
{
    tl_slice_spec s;
    float o[9];
    tl_slice_spec_row(&s, 7, 4, 6);
    tl_slice_plane(&s, 10, o);
    const float row[9] = {6, 0, 0, 0, 4, 0, -3, -2, 7};
    ck_assert(memcmp(o, row, sizeof o) == 0);
    tl_slice_spec_ortho(&s, TL_AXIS_X, 2.5, 10, 6);
    tl_slice_plane(&s, 10, o);
    const float ox[9] = {0, 6, 0, 0, 0, -10, 2.5f, -3, 9.5f};
    ck_assert(memcmp(o, ox, sizeof o) == 0);
}
END_TEST

/* Slices and the centre inside the volume (rows x cols), finite even as floats. */
START_TEST(slices_inside_the_volume)
{
    tl_slice_spec s;
    tl_slice_spec_row(&s, 10, 4, 6);
    ck_assert(tl_slice_inside(&s, 10, 16));
    tl_slice_spec_row(&s, 10.1, 4, 6);
    ck_assert(!tl_slice_inside(&s, 10, 16));
    tl_slice_spec_row(&s, -1.1, 4, 6);
    ck_assert(!tl_slice_inside(&s, 10, 16));
    tl_slice_spec_row(&s, 1e308, 4, 6); /* finite as a double, inf as a float */
    ck_assert(!tl_slice_inside(&s, 65536, 65536));
    tl_slice_spec_ortho(&s, TL_AXIS_Y, -16, 10, 6);
    ck_assert(tl_slice_inside(&s, 10, 16));
    tl_slice_spec_ortho(&s, TL_AXIS_Y, -16.5, 10, 6);
    ck_assert(!tl_slice_inside(&s, 10, 16));
    const float far[9] = {4, 0, 0, 0, 4, 0, 100, 0, 3};
    tl_slice_spec_plane(&s, far, 4, 4);
    ck_assert(!tl_slice_inside(&s, 10, 16));

    tl_engine *e = make(10, 16, 8, TL_DTYPE_U16, TL_FILTER_RAMLAK, false);
    int id;
    tl_slice_spec_row(&s, 1e308, 16, 16); /* the engine samples any finite plane */
    ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_EINVAL);
    tl_slice_spec_row(&s, 5, 16, 16);
    ck_assert_int_eq(tl_engine_add_slice(e, &s, &id), TL_OK);
    ck_assert_int_eq(tl_engine_set_center(e, 1e308), TL_EINVAL);
    ck_assert_int_eq(tl_engine_set_center(e, -1), TL_EINVAL);
    ck_assert_int_eq(tl_engine_set_center(e, 15.5), TL_OK);
    tl_engine_destroy(e);
}
END_TEST

START_TEST(memory_refusal)
{
    tl_engine_config c;
    tl_engine_config_init(&c, 65536, 65536, 100000);
    c.backend = TL_BACKEND_CPU;
    tl_memory_estimate m;
    ck_assert_int_eq(tl_engine_estimate(&c, &m), TL_OK);
    ck_assert(m.window_bytes == (size_t)65536 * 65536 * 100000 * 4);
    tl_engine *e;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_ENOMEM);
    ck_assert(e == NULL);
    const char *msg = tl_engine_last_error(NULL);
    ck_assert_msg(strstr(msg, "GiB") && strstr(msg, "free") && strstr(msg, "fewer rows"), "%s",
                  msg);
}
END_TEST

START_TEST(bad_configs)
{
    tl_engine_config c;
    tl_engine *e;
    tl_engine_config_init(&c, 4, 4, 0);
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EINVAL);
    tl_engine_config_init(&c, 4, 4, 4);
    c.geometry = TL_GEOMETRY_CONE; /* without its distances (check_cone_engine: the rest) */
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EINVAL);
    ck_assert(strstr(tl_engine_last_error(NULL), "source-axis distance") != NULL);
#ifndef HAVE_CUDA
    tl_engine_config_init(&c, 4, 4, 4);
    c.backend = TL_BACKEND_CUDA;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_EDEVICE);
    ck_assert(strstr(tl_engine_last_error(NULL), "CUDA") != NULL);
#endif
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, window_in_and_out_of_order);
    tcase_add_test(t, window_missing_exact_under_shuffle);
    tcase_add_test(t, rejections_counted);
    tcase_add_test(t, flat_field_and_log);
    tcase_add_test(t, calibration_batches);
    tcase_add_test(t, dtype_conversion);
    tcase_add_test(t, pitched_frames);
    tcase_add_test(t, filter_design);
    tcase_add_test(t, single_bin_line);
    tcase_add_test(t, angular_weights_of_a_part);
    tcase_add_test(t, plane_conventions);
    tcase_add_test(t, slices_inside_the_volume);
    tcase_add_test(t, memory_refusal);
    tcase_add_test(t, bad_configs);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
