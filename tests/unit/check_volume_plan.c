/* check_volume_plan.c — the out-of-core planner (clients/volume_plan.h) as a pure function:
 * a fake engine cost (bytes linear in rows, as the real window is) stands in for the
 * device, so every rule is checked with exact numbers. */
#include "config.h"

#include <string.h>

#include "clients/volume_plan.h"
#include "tests/testutil.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* An engine of h rows: a fixed part plus the window (projections x h x cols x 4). */
typedef struct {
    size_t fixed;
    uint32_t projections, cols;
} fake_engine;

static size_t fake_bytes(void *ctx, uint32_t rows)
{
    const fake_engine *e = ctx;
    return e->fixed + (size_t)e->projections * rows * e->cols * sizeof(float);
}

static fake_engine eng;

static tl_volume_problem problem(uint32_t proj, uint32_t rows, uint32_t cols)
{
    eng = (fake_engine){64 * MiB, proj, cols};
    return (tl_volume_problem){.projections = proj,
                               .darks = 10,
                               .flats = 10,
                               .rows = rows,
                               .cols = cols,
                               .size = cols,
                               .in_sample = 2,
                               .out_sample = 4,
                               .writer_bytes = (size_t)cols * cols * 4,
                               .read_rows = 1,
                               .engine_bytes = fake_bytes,
                               .ctx = &eng};
}

START_TEST(test_everything_fits)
{
    /* small problem, huge budgets: the minimum slab count caps h */
    tl_volume_problem p = problem(180, 64, 128);
    tl_volume_budget b = {64 * GiB, 64 * GiB};
    tl_volume_plan plan;
    char err[256];
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 0, &plan, err, sizeof err), 0);
    ck_assert_uint_eq(plan.slab_rows, 64 / TL_VOLUME_MIN_SLABS);
    ck_assert_uint_eq(plan.slabs, TL_VOLUME_MIN_SLABS);
    ck_assert_uint_eq(plan.last_rows, plan.slab_rows);
    ck_assert_uint_eq(plan.passes, 1);
    ck_assert_int_eq(plan.filtered, TL_VOLUME_FILTERED_GPU);
    /* parallel beam: every row is read, uploaded, downloaded and written once */
    ck_assert_uint_eq(plan.bytes_read, (uint64_t)200 * 64 * 128 * 2);
    ck_assert_uint_eq(plan.bytes_uploaded, plan.bytes_read);
    ck_assert_uint_eq(plan.bytes_downloaded, (uint64_t)64 * 128 * 128 * 4);
    ck_assert_uint_eq(plan.bytes_written, plan.bytes_downloaded);
    /* a fixed slab height: one slab, the in-core case */
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 64, &plan, err, sizeof err), 0);
    ck_assert_uint_eq(plan.slabs, 1);
    ck_assert_uint_eq(plan.slab_rows, 64);
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 1000, &plan, err, sizeof err), 0);
    ck_assert_uint_eq(plan.slab_rows, 64);
}
END_TEST

START_TEST(test_cap_rows)
{
    /* a grid rank's part of 16 rows of a 256-row volume: slabs as tall as the whole
     * volume's (256 / 16), not 16 / 16 = 1 */
    tl_volume_problem p = problem(180, 16, 128);
    p.cap_rows = 256;
    tl_volume_budget b = {64 * GiB, 64 * GiB};
    tl_volume_plan plan;
    char err[256];
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 0, &plan, err, sizeof err), 0);
    ck_assert_uint_eq(plan.slab_rows, 16);
    ck_assert_uint_eq(plan.slabs, 1);
    /* a cap above the part's rows: the rows */
    p.cap_rows = 40 * TL_VOLUME_MIN_SLABS;
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 0, &plan, err, sizeof err), 0);
    ck_assert_uint_eq(plan.slab_rows, 16);
    /* the budgets still rule: an engine of 4 rows at most */
    p.cap_rows = 256;
    b.gpu = fake_bytes(&eng, 4) + (size_t)4 * 128 * 128 * 4;
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 0, &plan, err, sizeof err), 0);
    ck_assert_uint_le(plan.slab_rows, 4);
}
END_TEST

START_TEST(test_gpu_budget)
{
    /* 1200 x 2048^2 -> 2048^3 with an 8 GiB GPU budget: the window is 9.4 MiB per row */
    tl_volume_problem p = problem(1200, 2048, 2048);
    tl_volume_budget b = {8 * GiB, 512 * GiB};
    tl_volume_plan plan;
    char err[256];
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 0, &plan, err, sizeof err), 0);
    uint32_t h = plan.slab_rows;
    ck_assert_uint_le(plan.gpu_bytes, b.gpu);
    ck_assert_uint_eq(plan.gpu_bytes, tl_volume_plan_gpu_bytes(&p, h, plan.batch));
    /* the tallest: one more row would not fit (or the minimum slab count caps it) */
    ck_assert(h == 2048 / TL_VOLUME_MIN_SLABS ||
              tl_volume_plan_gpu_bytes(&p, h + 1, tl_volume_plan_batch(&p, h + 1)) > b.gpu);
    ck_assert_uint_eq(plan.slabs, (2048 + h - 1) / h);
    ck_assert_uint_eq((uint64_t)(plan.slabs - 1) * h + plan.last_rows, 2048);
    ck_assert_uint_eq(plan.batch, h < 64 ? h : 64); /* 1 GiB of 16 MiB slices */
}
END_TEST

START_TEST(test_host_budget)
{
    tl_volume_problem p = problem(1200, 2048, 2048);
    tl_volume_budget b = {512 * GiB, 4 * GiB};
    tl_volume_plan plan;
    char err[256];
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 0, &plan, err, sizeof err), 0);
    ck_assert_uint_le(plan.host_bytes, b.host);
    ck_assert_uint_gt(tl_volume_plan_host_bytes(&p, plan.slab_rows + 1), b.host);
    ck_assert_uint_eq(plan.host_bytes, tl_volume_plan_host_bytes(&p, plan.slab_rows));
}
END_TEST

START_TEST(test_read_granularity)
{
    /* HDF5 chunks of 16 rows: slabs are multiples of 16, reads cover whole chunks */
    tl_volume_problem p = problem(100, 400, 64);
    p.read_rows = 16;
    tl_volume_budget b = {64 * GiB, 64 * GiB};
    tl_volume_plan plan;
    char err[256];
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 0, &plan, err, sizeof err), 0);
    ck_assert_uint_eq(plan.slab_rows % 16, 0);
    ck_assert_uint_eq(plan.slab_rows, 16); /* 400 / 16 = 25, rounded down to 16 */
    ck_assert_uint_eq(plan.bytes_read, plan.bytes_uploaded);
    /* unaligned slabs read whole chunks at both ends */
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 25, &plan, err, sizeof err), 0);
    ck_assert_uint_gt(plan.bytes_read, plan.bytes_uploaded);
}
END_TEST

START_TEST(test_nothing_fits)
{
    tl_volume_problem p = problem(1200, 2048, 2048);
    tl_volume_budget b = {32 * MiB, 64 * GiB};
    tl_volume_plan plan;
    char err[256];
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 0, &plan, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "nothing fits") && strstr(err, "budget 32 MiB"), "%s", err);
    /* both numbers: what one row needs (64 MiB + a window row + a slice) and the budget */
    ck_assert_msg(strstr(err, "needs 89 MiB of GPU memory"), "%s", err);
    b = (tl_volume_budget){64 * GiB, 64 * GiB};
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 2048, &plan, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "slabs of 2048 rows do not fit") && strstr(err, "65536 MiB"), "%s",
                  err);
    p.projections = 0;
    ck_assert_int_eq(tl_volume_plan_make(&p, &b, 0, &plan, err, sizeof err), -1);
}
END_TEST

/* Cone beam's bands: a slab of h rows reads h + 2 x 40 detector rows (a fake cone), at
 * most the detector's. */
static uint32_t fake_band(void *ctx, uint32_t h)
{
    (void)ctx;
    return h + 80 < 2048 ? h + 80 : 2048;
}

START_TEST(test_cone_bands)
{
    tl_volume_problem p = problem(1200, 2048, 2048);
    p.frame_rows = 2048;
    p.chunk_frames = 64;
    p.band_rows = fake_band;
    tl_volume_plan plan;
    char err[256];
    /* whole frames fit 64 GiB (9.4 GiB of window): one pass, kept on the GPU */
    tl_volume_budget big = {64 * GiB, 512 * GiB};
    ck_assert_int_eq(tl_volume_plan_make(&p, &big, 0, &plan, err, sizeof err), 0);
    ck_assert(plan.whole);
    ck_assert_uint_eq(plan.engine_rows, 2048);
    ck_assert_int_eq(plan.filtered, TL_VOLUME_FILTERED_GPU);
    ck_assert_double_eq(plan.passes, 1);
    /* 2 GiB: bands, the tallest that fit, each read and filtered per slab */
    tl_volume_budget small = {2 * GiB, 512 * GiB};
    ck_assert_int_eq(tl_volume_plan_make(&p, &small, 0, &plan, err, sizeof err), 0);
    ck_assert(!plan.whole);
    uint32_t h = plan.slab_rows;
    ck_assert_uint_eq(plan.engine_rows, h + 80);
    ck_assert_int_eq(plan.filtered, TL_VOLUME_FILTERED_RECOMPUTE);
    tl_volume_problem q = p;
    q.frame_rows = 0; /* the byte counts of the band plan */
    ck_assert_uint_le(tl_volume_plan_gpu_bytes(&q, h, plan.batch), small.gpu);
    ck_assert_uint_gt(tl_volume_plan_gpu_bytes(&q, h + 1, tl_volume_plan_batch(&q, h + 1)),
                      small.gpu);
    uint64_t row = (uint64_t)1220 * 2048 * 2;
    ck_assert_uint_eq(plan.bytes_read, row * (h + 80) * plan.slabs);
    ck_assert_uint_eq(plan.bytes_uploaded, plan.bytes_read);
    ck_assert_double_eq_tol(plan.passes, (double)(h + 80) * plan.slabs / 2048, 1e-12);
    ck_assert_double_gt(plan.passes, 1);
    /* dezinger or Paganin (no band_rows): whole frames or nothing */
    p.band_rows = NULL;
    ck_assert_int_eq(tl_volume_plan_make(&p, &small, 0, &plan, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "need whole frames"), "%s", err);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("volume_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, test_everything_fits);
    tcase_add_test(tc, test_cap_rows);
    tcase_add_test(tc, test_gpu_budget);
    tcase_add_test(tc, test_host_budget);
    tcase_add_test(tc, test_read_granularity);
    tcase_add_test(tc, test_nothing_fits);
    tcase_add_test(tc, test_cone_bands);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
