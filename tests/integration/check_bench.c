/* check_bench.c — `tomolive bench` on the CPU backend with tiny problems: the header
 * (device, what the time covers, the problem), one table row per kernel and slice count
 * with consistent numbers (the rate is updates / time) and the autotuner's choice marks,
 * the per-frame pipeline line, and the errors. Timing values themselves are not judged:
 * benchmarks do not fail CI.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "tests/integration/clients_util.h"
#include "tests/testutil.h"

static char *dir;

static void setup(void)
{
    dir = tl_tmpdir("bench");
    ck_assert_ptr_nonnull(dir);
}

static void teardown(void)
{
    tl_rm_rf(dir);
    free(dir);
}

/* How many kernels a CPU engine has for row slices. */
static size_t cpu_kernels(void)
{
    tl_engine_config c;
    tl_engine_config_init(&c, 1, 16, 4);
    c.backend = TL_BACKEND_CPU;
    tl_engine *e;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_OK);
    tl_kernel_info k[64];
    size_t n = tl_engine_kernels(e, k, 64);
    tl_engine_destroy(e);
    return n;
}

/* Checks every table row of the output (lines with at least 10 '|' that are not the
 * heading) and returns how many rows there were with each slice count in counts[].
 * Columns: kernel | mode | slices/pass | slice | proj | slices | ms | G updates/s |
 * x baseline | choice | params. On the CPU (one kernel) the choice marks are known: the
 * one-slice row is the latency choice of every mode, and exactly one row of the problem
 * (*batch_rows counts them) is the throughput choice of every mode. */
static int check_rows(const char *out, int size, int proj, const int *counts, int ncounts,
                      int *batch_rows)
{
    int rows = 0;
    *batch_rows = 0;
    for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        int bars = 0;
        for (size_t i = 0; i < len; i++)
            bars += p[i] == '|';
        if (bars < 10 || !strncmp(p, "kernel", 6) || p[0] == '-')
            continue;
        char kernel[64], mode[16], shape[32], choice[128];
        int per, pr, sl;
        double ms, gups, ratio;
        ck_assert_int_eq(sscanf(p, "%63s | %15s | %d | %31s | %d | %d | %lf | %lf | %lf | %127s",
                                kernel, mode, &per, shape, &pr, &sl, &ms, &gups, &ratio, choice),
                         10);
        char want[32];
        snprintf(want, sizeof want, "%dx%d", size, size);
        if (strcmp(shape, want) != 0)
            continue; /* another problem's row */
        tl_quality q;
        ck_assert_msg(tl_quality_parse(mode, &q), "mode '%s'", mode);
        ck_assert_msg(per == 1 || per == 2 || per == 4, "slices/pass %d", per);
        ck_assert_int_eq(pr, proj);
        bool known = false;
        for (int i = 0; i < ncounts; i++)
            known |= sl == counts[i];
        ck_assert_msg(known, "slice count %d", sl);
        ck_assert(ms > 0 && ratio > 0);
        double expect = (double)size * size * proj * sl / (ms * 1e-3) * 1e-9;
        /* ms printed with 3 decimals, the rate with 2: allow both roundings */
        ck_assert_msg(gups >= 0 && fabs(gups - expect) <= expect * 0.0005 / ms + 0.006,
                      "%g G updates/s for %g ms (expected %g)", gups, ms, expect);
        if (!strcmp(kernel, "cpu-f32")) {
            bool single = strstr(choice, "single:exact,single:fast,single:preview") != NULL;
            ck_assert_msg(single == (sl == 1), "choice '%s' for %d slices", choice, sl);
            if (strstr(choice, "batch:exact,batch:fast,batch:preview"))
                ++*batch_rows;
            else
                ck_assert_msg(single || !strcmp(choice, "-"), "choice '%s'", choice);
        }
        rows++;
    }
    return rows;
}

START_TEST(test_bench_cpu_table)
{
    const char *args[] = {"bench", "--backend", "cpu", "--shape",       "64x90",      "--slices",
                          "1,2",   "--reps",    "3",   "--no-pipeline", "--no-rates", NULL};
    ck_assert_msg(tl_client_run(dir, args, 120) == 0, "%s", tl_client_err());
    const char *o = tl_client_out();
    ck_assert_msg(strstr(o, "device: ") != NULL, "%s", o);
    ck_assert(strstr(o, "back projection only") != NULL);
    ck_assert(strstr(o, "median of 3 calls") != NULL);
    ck_assert(strstr(o, "64x64 row slices from 90 projections") != NULL);
    ck_assert(strstr(o, "baseline") != NULL);
    ck_assert(strstr(o, "per-frame pipeline") == NULL);
    const int counts[] = {1, 2};
    int batch_rows;
    ck_assert_int_eq(check_rows(o, 64, 90, counts, 2, &batch_rows), (int)(2 * cpu_kernels()));
    ck_assert_int_eq(batch_rows, 1);
    ck_assert(strstr(o, "| choice ") != NULL && strstr(o, "| params") != NULL);
    ck_assert(strstr(o, "micro-benchmarks") == NULL); /* none on the CPU */

    /* two problems, the pipeline on a small detector */
    const char *two[] = {"bench", "--backend", "cpu", "--shape", "48x30", "--shape",
                         "32x20", "--slices",  "3",   "--reps",  "2",     "--pipeline-shape",
                         "64x96", NULL};
    ck_assert_msg(tl_client_run(dir, two, 120) == 0, "%s", tl_client_err());
    o = tl_client_out();
    const int three[] = {3};
    ck_assert_int_eq(check_rows(o, 48, 30, three, 1, &batch_rows), (int)cpu_kernels());
    ck_assert_int_eq(batch_rows, 1); /* no one-slice rows: no latency choice */
    ck_assert_int_eq(check_rows(o, 32, 20, three, 1, &batch_rows), (int)cpu_kernels());
    ck_assert_int_eq(batch_rows, 1);
    const char *pl = strstr(o, "per-frame pipeline 64x96 u16 (");
    ck_assert_msg(pl != NULL, "%s", o);
    double ms, fps, gbs;
    ck_assert_int_eq(sscanf(strstr(pl, "): ") + 3, "%lf ms median, %lf frames/s, %lf GB/s", &ms,
                            &fps, &gbs),
                     3);
    ck_assert(ms > 0);
    ck_assert_double_eq_tol(fps, 1e3 / ms, 0.06 + 1e3 / ms * 0.0005 / ms);
}
END_TEST

/* `bench --cone`: the built-in choice's line names a kernel whose row follows, and every
 * row's two rates agree (GUPS in 10^9 and in 2^30); --incremental's line names the
 * incremental kernel, and its frame time, rate and updates agree. */
START_TEST(test_bench_cone_cpu)
{
    const char *args[] = {"bench", "--cone", "--backend", "cpu", "--shape", "48x32x48x8",
                          "--batch", "4", "--reps", "1", "--incremental", NULL};
    ck_assert_msg(tl_client_run(dir, args, 120) == 0, "%s", tl_client_err());
    const char *o = tl_client_out();
    ck_assert_msg(strstr(o, "48x48 detector, 32 projections -> 48^2 x 8") != NULL, "%s", o);
    const char *line = strstr(o, "built-in choice (fast engine): ");
    ck_assert_msg(line != NULL, "%s", o);
    char builtin[64] = "";
    ck_assert_int_eq(sscanf(line + strlen("built-in choice (fast engine): "), "%63[^,\n]",
                            builtin),
                     1);
    int rows = 0;
    bool named = false;
    for (const char *p = strstr(line, "----"); p; p = strchr(p + 1, '\n')) {
        char name[64], mode[16];
        double secs, gups, gups30;
        if (sscanf(p, " %63s | %15s | %lf | %lf | %lf", name, mode, &secs, &gups, &gups30) != 5)
            continue;
        rows++;
        named = named || strcmp(name, builtin) == 0;
        ck_assert_msg(secs >= 0 && isfinite(gups) && fabs(gups30 * 1.073741824 - gups) <= 0.05 + 1e-3 * gups, "%s",
                      p);
    }
    ck_assert_msg(rows > 0 && named, "%d rows, built-in %s: %s", rows, builtin, o);
    const char *inc = strstr(o, "incremental (");
    ck_assert_msg(inc != NULL, "%s", o);
    char kernel[64];
    double ms, fps, gups;
    ck_assert_msg(sscanf(inc, "incremental (%63[^,], the volume tracked): a frame %lf ms "
                              "(median of 3 runs of 200), %lf frames/s, %lf GUPS",
                         kernel, &ms, &fps, &gups) == 4,
                  "%s", inc);
    ck_assert_msg(strstr(kernel, "incremental") != NULL, "%s", inc);
    ck_assert_msg(ms > 0 && fabs(fps - 1e3 / ms) <= 0.5 + 1e-3 * fps, "%s", inc);
    ck_assert_msg(fabs(gups - 2.0 * 48 * 48 * 8 / (ms * 1e-3) / 1e9) <= 0.05 + 1e-3 * gups, "%s",
                  inc);
}
END_TEST

START_TEST(test_bench_errors)
{
    const struct {
        int rc;
        const char *phrase;
        const char *args[8];
    } cases[] = {
        {2, "bad --shape", {"bench", "--shape", "64", NULL}},
        {2, "bad --slices", {"bench", "--slices", "1,,2", NULL}},
        {2, "unknown backend", {"bench", "--backend", "opencl", NULL}},
        {2, "bad --reps", {"bench", "--reps", "0", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(tl_client_run(dir, cases[i].args, 30), cases[i].rc);
        ck_assert_msg(strstr(tl_client_err(), cases[i].phrase) != NULL, "case %zu: %s", i,
                      tl_client_err());
    }
    if (!tl_backend_available(TL_BACKEND_CUDA, NULL, 0)) { /* fails loudly, no fallback */
        const char *cuda[] = {"bench", "--backend", "cuda", "--no-pipeline", NULL};
        ck_assert_int_eq(tl_client_run(dir, cuda, 30), 1);
        ck_assert(strstr(tl_client_err(), "not available") != NULL);
        ck_assert_str_eq(tl_client_out(), "");
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("bench");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_bench_cpu_table);
    tcase_add_test(tc, test_bench_cone_cpu);
    tcase_add_test(tc, test_bench_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
