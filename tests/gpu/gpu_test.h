/* gpu_test.h — what the GPU tests (check_cuda.c, check_kernels.c) share: engines created
 * through the public API with a backend, a precision and an optional forced kernel (any
 * failure is a test failure), the angles and centre corrections of their test scans, and
 * their main().
 */
#ifndef TL_GPU_TEST_H
#define TL_GPU_TEST_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/engine.h"

/* An engine of configuration base on backend b in precision p, kernel forced when not
 * NULL; asserts that it was created. */
tl_engine *tl_gt_engine(const tl_engine_config *base, tl_backend_kind b, tl_precision p,
                        const char *kernel);
/* The CUDA backend in float32, kernel forced when not NULL. */
tl_engine *tl_gt_cuda(const tl_engine_config *c, const char *kernel);
/* The CPU backend (the float64 reference with TL_PRECISION_F64). */
tl_engine *tl_gt_cpu(const tl_engine_config *c, tl_precision p);

/* Angle of projection k of nproj over 180 degrees, plus angle0; with nonuniform, jittered
 * and unevenly spaced (for angular weights). */
double tl_gt_angle(uint32_t nproj, bool nonuniform, double angle0, uint64_t k);
/* Centre correction of projection k: +-1.5 pixels when offsets, else 0. */
double tl_gt_offset(bool offsets, uint64_t k);

/* A Check case of a GPU test: each runs as its own TCase, so compute-sanitizer can run the
 * cases as parallel processes (CK_RUN_CASE). */
#define TL_GT_MAX_TESTS 12
typedef struct {
    const char *name;
    const TTest *tests[TL_GT_MAX_TESTS]; /* NULL-terminated */
} tl_gt_case;

/* The test program's main: 77 (skip) without a usable CUDA device, else runs the suite
 * of these cases without fork() (CUDA does not survive it) and returns its status. */
int tl_gt_main(const char *suite, const tl_gt_case *cases, size_t ncases);

#endif
