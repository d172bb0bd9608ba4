/* check_grid_model.c — the pure parts of `recon --grid` (clients/grid.h, grid_model.h,
 * volume_vds.h): the grid's spelling, the parts' file names, and seed 004's model of a
 * pipelined run (the slowest thread for every slab, the others for one). */
#include "config.h"

#include <math.h>
#include <string.h>

#include "clients/grid.h"
#include "clients/grid_model.h"
#include "clients/volume_vds.h"
#include "tests/testutil.h"

START_TEST(test_parse)
{
    uint32_t r = 0, c = 0;
    ck_assert(tl_grid_parse("2x3", &r, &c) && r == 2 && c == 3);
    ck_assert(tl_grid_parse("4,1", &r, &c) && r == 4 && c == 1);
    const char *bad[] = {"", "2", "x2", "2x", "0x1", "1x0", "2x2x2", "-1x2", "2 x 2", "65537x1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!tl_grid_parse(bad[i], &r, &c), "'%s' accepted", bad[i]);
}
END_TEST

START_TEST(test_part_names)
{
    char b[256];
    tl_volume_vds_part("out/vol.h5", 1, 4, b, sizeof b);
    ck_assert_str_eq(b, "out/vol-part1.h5");
    tl_volume_vds_part("vol.h5", 3, 12, b, sizeof b);
    ck_assert_str_eq(b, "vol-part03.h5");
    tl_volume_vds_part("a.d/vol", 0, 2, b, sizeof b); /* a dot in the directory only */
    ck_assert_str_eq(b, "a.d/vol-part0");
}
END_TEST

START_TEST(test_model_pipeline)
{
    tl_grid_rates r =
        {.load = 1e9, .filter = 4e9, .bp = 1e10, .reduce = 2e9, .store = 1e9, .sync = 0.01};
    tl_grid_work w = {.load = 2e9,
                      .filter = 2e9,
                      .bp = 3e10,
                      .reduce = 1e9,
                      .store = 5e8,
                      .slabs = 10,
                      .syncs = 20};
    tl_grid_stages m;
    tl_grid_model(&w, &r, &m);
    ck_assert(fabs(m.load - 2.0) < 1e-12);
    ck_assert(fabs(m.filter - 0.5) < 1e-12);
    ck_assert(fabs(m.bp - 3.0) < 1e-12);
    ck_assert(fabs(m.reduce - 0.5) < 1e-12);
    ck_assert(fabs(m.store - (0.5 + 20 * 0.01)) < 1e-12);
    ck_assert(m.allgather == 0);
    /* the engine's thread (3.5 s) for every slab, the reader (2 s) and the writer (1.2 s)
     * for one of the ten */
    ck_assert(fabs(m.total - (3.5 + (2.0 + 1.2) / 10)) < 1e-12);
    /* a rank that neither reduces nor stores: no such stages, whatever the rates */
    w.reduce = w.store = 0;
    tl_grid_model(&w, &r, &m);
    ck_assert(m.reduce == 0 && m.store == 0);
    ck_assert(fabs(m.total - (3.5 + 2.0 / 10)) < 1e-12);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("grid_model");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_part_names);
    tcase_add_test(tc, test_model_pipeline);
    suite_add_tcase(s, tc);
    return tl_run_suite(s, false);
}
