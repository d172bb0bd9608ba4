/* gpu_test.c — helpers of the GPU tests (gpu_test.h). */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/gpu/gpu_test.h"
#include "tests/testutil.h"

#define TL_GT_TIMEOUT_S 600 /* per case: the sanitizers slow the kernels down a lot */

tl_engine *tl_gt_engine(const tl_engine_config *base, tl_backend_kind b, tl_precision p,
                        const char *kernel)
{
    tl_engine_config c = *base;
    c.backend = b;
    c.precision = p;
    memset(c.kernel, 0, sizeof c.kernel);
    if (kernel) {
        size_t len = strlen(kernel);
        memcpy(c.kernel, kernel, len < sizeof c.kernel ? len : sizeof c.kernel - 1);
    }
    tl_engine *e = NULL;
    tl_status st = tl_engine_create(&c, &e);
    ck_assert_msg(st == TL_OK, "create %s %s: %s: %s", tl_backend_name(b), kernel ? kernel : "",
                  tl_status_name(st), tl_engine_last_error(NULL));
    return e;
}

tl_engine *tl_gt_cuda(const tl_engine_config *c, const char *kernel)
{
    return tl_gt_engine(c, TL_BACKEND_CUDA, TL_PRECISION_F32, kernel);
}

tl_engine *tl_gt_cpu(const tl_engine_config *c, tl_precision p)
{
    return tl_gt_engine(c, TL_BACKEND_CPU, p, NULL);
}

double tl_gt_angle(uint32_t nproj, bool nonuniform, double angle0, uint64_t k)
{
    double a = M_PI * (double)k / nproj;
    if (nonuniform)
        a = M_PI * pow((double)k / nproj, 1.3) + 0.4 * M_PI / nproj * sin(12.9898 * k);
    return a + angle0;
}

double tl_gt_offset(bool offsets, uint64_t k)
{
    return offsets ? 1.5 * sin(78.233 * (double)k) : 0.0;
}

int tl_gt_main(const char *suite, const tl_gt_case *cases, size_t ncases)
{
    char why[256] = "";
    if (!tl_backend_available(TL_BACKEND_CUDA, why, sizeof why)) {
        printf("SKIP: no usable CUDA device: %s\n", why);
        return 77;
    }
    Suite *s = suite_create(suite);
    for (size_t c = 0; c < ncases; c++) {
        TCase *t = tcase_create(cases[c].name);
        tcase_set_timeout(t, TL_GT_TIMEOUT_S);
        for (int k = 0; k < TL_GT_MAX_TESTS && cases[c].tests[k]; k++)
            tcase_add_test(t, cases[c].tests[k]);
        suite_add_tcase(s, t);
    }
    return tl_run_suite(s, true);
}
