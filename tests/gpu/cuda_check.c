/* cuda_check.c — the helpers of check_cuda's cases (cuda_check.h). */
#include "config.h"

#ifdef HAVE_CUDA

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "gpu/phantom.h"
#include "tests/gpu/cuda_check.h"
#include "tests/gpu/gpu_test.h"
#include "tests/testutil.h"

void cc_submit_all(tl_engine **e, int ne, const tl_frame *f)
{
    for (int i = 0; i < ne; i++) {
        tl_status st = tl_engine_submit(e[i], f);
        ck_assert_msg(st == TL_OK, "submit to engine %d: %s: %s", i, tl_status_name(st),
                      tl_engine_last_error(e[i]));
    }
}

/* Reconstructs one slice; *kernel (may be NULL) receives the kernel's name. */
float *cc_recon(tl_engine *e, const tl_slice_spec *sp, const char **kernel)
{
    float *out = malloc((size_t)sp->height * sp->width * sizeof *out);
    ck_assert_ptr_nonnull(out);
    int id;
    ck_assert_int_eq(tl_engine_add_slice(e, sp, &id), TL_OK);
    tl_slice_info info;
    tl_status st = tl_engine_reconstruct(e, &id, 1, &out, &info);
    ck_assert_msg(st == TL_OK, "reconstruct: %s: %s", tl_status_name(st), tl_engine_last_error(e));
    if (kernel)
        *kernel = info.kernel;
    ck_assert_int_eq(tl_engine_remove_slice(e, id), TL_OK);
    return out;
}

void cc_expect_close(const char *what, const float *got, const float *ref, size_t n,
                     double rel_max, double mor_max)
{
    double rel = tl_rel_l2(got, ref, n), mor = tl_max_over_range(got, ref, n);
    printf("  %-58s rel L2 %.2e  max/range %.2e\n", what, rel, mor);
    fflush(stdout);
    ck_assert_msg(rel <= rel_max && mor <= mor_max,
                  "%s: rel L2 %.3g (limit %.3g), max/range %.3g (limit %.3g)", what, rel, rel_max,
                  mor, mor_max);
}

/* Pixel by pixel: |got - ref| <= tol * |ref| (+ a denormal floor for exact zeros). */
void cc_expect_pixels(const char *what, const float *got, const float *ref, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)got[i] - ref[i]) <= tol * fabs((double)ref[i]) + 1e-30,
                      "%s: pixel %zu: %.9g vs %.9g", what, i, got[i], ref[i]);
}

const char *const cc_all_kernels[CC_NKERNELS] = {"alu-exact", "plane-exact", "tex-std"};

bool cc_is_fast(const char *kernel)
{
    return strcmp(kernel, "tex-std") == 0;
}

/* ---- phantom scans (as tests/unit/check_accuracy.c) --------------------------------------- */

static double angle_of(const cc_scan *s, uint64_t k)
{
    return tl_gt_angle(s->nproj, s->nonuniform, s->angle0, k);
}

static double offset_of(const cc_scan *s, uint64_t k)
{
    return tl_gt_offset(s->offsets, k);
}

tl_engine_config cc_scan_config(const cc_scan *s)
{
    tl_engine_config c;
    tl_engine_config_init(&c, s->rows, s->cols, s->window ? s->window : s->nproj);
    c.dtype = TL_DTYPE_F32;
    c.already_linear = true;
    c.filter = s->filter;
    c.weights = s->weights;
    c.center = (s->cols - 1) / 2.0 + s->center_shift;
    return c;
}

void cc_shepp(tl_phantom *ph, const cc_scan *s, double radius_z)
{
    ck_assert_int_eq(tl_phantom_shepp_logan(ph, 0.45 * s->cols, (s->rows - 1) / 2.0, radius_z), 0);
}

/* Projections first .. first + count - 1 of the scan, each submitted to every engine. */
void cc_feed(tl_engine **e, int ne, const cc_scan *s, const tl_phantom *ph, uint64_t first,
             uint64_t count)
{
    float *img = malloc((size_t)s->rows * s->cols * sizeof *img);
    ck_assert_ptr_nonnull(img);
    for (uint64_t k = first; k < first + count; k++) {
        double th = angle_of(s, k), off = offset_of(s, k);
        tl_phantom_project(ph, th, (s->cols - 1) / 2.0 + s->center_shift + off, s->rows, s->cols,
                           img);
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = k,
                      .angle = th,
                      .center_offset = off,
                      .dtype = TL_DTYPE_F32,
                      .rows = s->rows,
                      .cols = s->cols,
                      .data = img};
        cc_submit_all(e, ne, &f);
    }
    free(img);
}

/* Raw values of a test frame, in range for every dtype once scaled. kind: 0 dark, 1 flat,
 * 2 projection; k the frame's number within its kind. Column 5 has a flat at or below the
 * dark (gain clamp), column 7 a projection below the dark (ratio clamp). */
double cc_raw_value(int kind, int k, uint32_t r, uint32_t c)
{
    switch (kind) {
        case 0: return 5 + (c * 3 + r * 5 + k * 2) % 7;
        case 1: return c == 5 ? 6 : 120 + (c * 11 + r * 17 + k * 5) % 130;
        default: return c == 7 ? 1 : 20 + (c * 29 + r * 13 + k * 41) % 200;
    }
}

void cc_fill_frame(void *buf, tl_dtype dt, uint32_t rows, uint32_t cols, size_t pitch, int kind,
                   int k)
{
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            double v = cc_raw_value(kind, k, r, c);
            char *row = (char *)buf + r * pitch;
            switch (dt) {
                case TL_DTYPE_U8: ((uint8_t *)row)[c] = (uint8_t)v; break;
                case TL_DTYPE_U16: ((uint16_t *)row)[c] = (uint16_t)(v * 211); break;
                case TL_DTYPE_U32: ((uint32_t *)row)[c] = (uint32_t)(v * 1000003); break;
                case TL_DTYPE_F32: ((float *)row)[c] = (float)(v * 1.37); break;
            }
        }
}

/* Two darks, two flats and n projections of R x W uint16 (fill_frame), each submitted to
 * `plain` from a host buffer and to `pinned` from one page-locked buffer, which is
 * overwritten at once after each submit (it is read when submit returns). */
void cc_feed_pinned(tl_engine *plain, tl_engine *pinned, uint32_t R, uint32_t W, uint32_t n)
{
    size_t row = W * sizeof(uint16_t);
    void *p = NULL;
    char why[256];
    ck_assert_int_eq(tl_host_alloc(TL_BACKEND_CUDA, R * row, &p, why, sizeof why), TL_OK);
    uint16_t *buf = malloc(R * row);
    for (int kind = 0; kind < 3; kind++)
        for (uint32_t k = 0; k < (kind == 2 ? n : 2); k++) {
            cc_fill_frame(buf, TL_DTYPE_U16, R, W, row, kind, (int)k);
            tl_frame f = {.kind = (tl_frame_kind)kind,
                          .index = k,
                          .angle = k * M_PI / n,
                          .dtype = TL_DTYPE_U16,
                          .rows = R,
                          .cols = W,
                          .data = buf};
            ck_assert_int_eq(tl_engine_submit(plain, &f), TL_OK);
            memcpy(p, buf, R * row);
            f.data = p;
            f.pinned = true;
            tl_status st = tl_engine_submit(pinned, &f);
            ck_assert_msg(st == TL_OK, "%s", tl_engine_last_error(pinned));
            memset(p, 0xff, R * row); /* the caller's to reuse now */
        }
    free(buf);
    tl_host_free(TL_BACKEND_CUDA, p);
}

#else
typedef int cuda_check_needs_cuda; /* ISO C wants a translation unit to declare something */
#endif /* HAVE_CUDA */
