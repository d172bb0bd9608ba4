/* testutil.c — see testutil.h. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

double tl_rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double tl_rel_l2_d(const float *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static bool in_disk(size_t k, uint32_t h, uint32_t w, double r)
{
    double x = (double)(k % w) - (w - 1) / 2.0, y = (double)(k / w) - (h - 1) / 2.0;
    return r <= 0 || x * x + y * y <= r * r;
}

static void metrics(const float *a, const float *b, uint32_t h, uint32_t w, double r, double *rel,
                    double *mor)
{
    double num = 0, den = 0, maxd = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t k = 0; k < (size_t)h * w; k++) {
        if (!in_disk(k, h, w, r))
            continue;
        double d = (double)a[k] - (double)b[k];
        num += d * d;
        den += (double)b[k] * (double)b[k];
        if (fabs(d) > maxd)
            maxd = fabs(d);
        if (b[k] < lo)
            lo = b[k];
        if (b[k] > hi)
            hi = b[k];
    }
    *rel = den > 0 ? sqrt(num / den) : sqrt(num);
    *mor = hi > lo ? maxd / (hi - lo) : maxd;
}

double tl_max_over_range(const float *a, const float *b, size_t n)
{
    double rel, mor;
    metrics(a, b, 1, (uint32_t)n, 0, &rel, &mor);
    return mor;
}

double tl_rel_l2_disk(const float *a, const float *b, uint32_t h, uint32_t w, double r)
{
    double rel, mor;
    metrics(a, b, h, w, r, &rel, &mor);
    return rel;
}

double tl_max_over_range_disk(const float *a, const float *b, uint32_t h, uint32_t w, double r)
{
    double rel, mor;
    metrics(a, b, h, w, r, &rel, &mor);
    return mor;
}

const char *tl_path_in(const char *dir, const char *name)
{
    static char buf[TL_PATH_RING][1024];
    static int k;
    k = (k + 1) % TL_PATH_RING;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

char *tl_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/tomolive-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

void tl_rm_rf(const char *path)
{
    if (!path || !*path)
        return;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", path);
}

int tl_run_suite(Suite *s, bool nofork)
{
    SRunner *sr = srunner_create(s);
    if (nofork)
        srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_VERBOSE);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

const char *tl_test_mpirun(const char *configured)
{
#ifndef HAVE_MPI
    (void)configured;
    printf("SKIP: built without MPI (./configure --with-mpi; Debian: libopenmpi-dev)\n");
    exit(77);
#else
    const char *m = getenv("TL_MPIRUN");
    const char *mpirun = m && *m ? m : configured;
    if (access(mpirun, X_OK) != 0) {
        printf("SKIP: no mpirun at '%s' (Debian: openmpi-bin)\n", mpirun);
        exit(77);
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    return mpirun;
#endif
}
