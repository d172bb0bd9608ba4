/* gpu_test.c — helpers of the GPU tests (gpu_test.h). */
#include "config.h"

#include <check.h>
#include <math.h>
#include <string.h>

#include "tests/gpu/gpu_test.h"

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
