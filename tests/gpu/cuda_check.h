/* cuda_check.h — what the cases of check_cuda (check_cuda_*.c) share: reconstructing one
 * slice, comparing images, the thresholds of the kernels' quality modes, phantom scans fed
 * to several engines at once, and raw test frames. Each case file exports its Check case
 * (cc_*_case) for check_cuda.c's main.
 */
#ifndef TL_CUDA_CHECK_H
#define TL_CUDA_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/engine.h"
#include "gpu/phantom.h"
#include "tests/gpu/gpu_test.h"

/* Submits f to each of the ne engines (asserting success). */
void cc_submit_all(tl_engine **e, int ne, const tl_frame *f);
/* Reconstructs one slice; *kernel (may be NULL) receives the kernel's name. */
float *cc_recon(tl_engine *e, const tl_slice_spec *sp, const char **kernel);
/* Relative L2 and max/range of got against ref within the bounds (printed). */
void cc_expect_close(const char *what, const float *got, const float *ref, size_t n,
                     double rel_max, double mor_max);
/* Pixel by pixel: |got - ref| <= tol * |ref|. */
void cc_expect_pixels(const char *what, const float *got, const float *ref, size_t n, double tol);

/* Bounds of the exact and fast quality modes against the float64 reference. */
#define EXACT_REL 2e-5
#define EXACT_MOR 1e-4
#define FAST_REL 1e-3
#define FAST_MOR 3e-3

/* The kernels checked against the reference, and whether one is of the fast mode. */
#define CC_NKERNELS 3
extern const char *const cc_all_kernels[CC_NKERNELS];
bool cc_is_fast(const char *kernel);

/* A phantom scan (as tests/unit/check_accuracy.c). */
typedef struct {
    uint32_t rows, cols, nproj;
    uint32_t window; /* 0 = nproj */
    bool nonuniform; /* jittered, non-uniform angles */
    bool offsets;    /* per-projection centre corrections */
    tl_filter filter;
    tl_weights weights;
    double center_shift; /* the data's axis relative to (cols - 1) / 2 */
    double angle0;       /* added to every angle */
} cc_scan;

/* The configuration of an engine for scan s (float32 line integrals). */
tl_engine_config cc_scan_config(const cc_scan *s);
/* The Shepp-Logan phantom of scan s. */
void cc_shepp(tl_phantom *ph, const cc_scan *s, double radius_z);
/* Projections first .. first + count - 1 of the scan, each submitted to every engine. */
void cc_feed(tl_engine **e, int ne, const cc_scan *s, const tl_phantom *ph, uint64_t first,
             uint64_t count);

/* Raw test frames. kind: 0 dark, 1 flat, 2 projection; k the frame's number within its
 * kind. cc_raw_value is the value before dtype scaling; cc_fill_frame writes a frame of
 * dtype dt. */
double cc_raw_value(int kind, int k, uint32_t r, uint32_t c);
void cc_fill_frame(void *buf, tl_dtype dt, uint32_t rows, uint32_t cols, size_t pitch, int kind,
                   int k);
/* Two darks, two flats and n projections, to `plain` from host memory and to `pinned` from
 * page-locked memory. */
void cc_feed_pinned(tl_engine *plain, tl_engine *pinned, uint32_t R, uint32_t W, uint32_t n);

/* The Check cases, one per file. */
tl_gt_case cc_pipeline_case(void); /* check_cuda_pipeline.c */
tl_gt_case cc_kernels_case(void);  /* check_cuda_kernels.c */
tl_gt_case cc_large_case(void);    /* check_cuda_kernels.c */
tl_gt_case cc_engine_case(void);   /* check_cuda_engine.c */
tl_gt_case cc_split_case(void);    /* check_cuda_split.c */

#endif
