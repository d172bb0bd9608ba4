/* check_bands.c — frames sent in row bands, put back together (daemon/bands.h): bands out
 * of order and interleaved, refused bands that change nothing, incomplete frames dropped
 * (room, timeout, series end) with what they lacked, and large bands copied by threads.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ingest/bands.h"
#include "tests/testutil.h"

enum { BR = 7, BC = 5 }; /* a frame of 7 rows of 5 uint16 */

static void band_frame(uint64_t index, uint16_t *px)
{
    for (int k = 0; k < BR * BC; k++)
        px[k] = (uint16_t)(1000 * index + (uint64_t)k);
}

/* Band [first, first + rows) of frame index, its payload pointing into px. */
static tl_proto_frame band(uint64_t index, uint32_t first, uint32_t rows, const uint16_t *px)
{
    tl_proto_frame f = {.series = 3,
                        .index = index,
                        .kind = TL_PROTO_PROJ,
                        .has_angle = true,
                        .angle = 0.25 * (double)index,
                        .dtype = TL_PROTO_U16,
                        .rows = BR,
                        .cols = BC,
                        .has_t_acq = true,
                        .t_acq = 77 + index,
                        .has_band = true,
                        .band_first = first,
                        .band_rows = rows};
    f.payload = px + (size_t)first * BC;
    f.payload_len = (size_t)rows * BC * sizeof *px;
    return f;
}

/* The frames dropped, as the assembly reports them. */
typedef struct {
    int n;
    uint64_t index[8];
    uint32_t rows_in[8];
    char why[8][160];
} drops;

static void on_drop(void *ctx, const tl_proto_frame *f, uint32_t rows_in, const char *why)
{
    drops *d = ctx;
    ck_assert_int_lt(d->n, 8);
    d->index[d->n] = f->index;
    d->rows_in[d->n] = rows_in;
    snprintf(d->why[d->n], sizeof d->why[0], "%s", why);
    d->n++;
}

START_TEST(bands_assemble)
{
    tl_bands b;
    drops dr = {0};
    tl_bands_init(&b, 2, TL_BACKEND_CPU, on_drop, &dr);
    uint16_t a[BR * BC], c[BR * BC];
    band_frame(10, a);
    band_frame(11, c);
    tl_bands_frame *done;
    char why[256];
    /* two frames' bands interleaved and out of order: 10 = [4,3] [0,2] [2,2]; 11 = [0,7] */
    tl_proto_frame f = band(10, 4, 3, a);
    ck_assert_int_eq(tl_bands_add(&b, &f, 100, 1000, &done, why, sizeof why), 0);
    f = band(10, 0, 2, a);
    ck_assert_int_eq(tl_bands_add(&b, &f, 101, 1001, &done, why, sizeof why), 0);
    ck_assert_int_eq(tl_bands_pending(&b), 1);
    f = band(11, 0, BR, c);
    ck_assert_int_eq(tl_bands_add(&b, &f, 102, 1002, &done, why, sizeof why), 1);
    ck_assert_uint_eq(done->frame.index, 11);
    ck_assert_mem_eq(done->data, c, sizeof c);
    tl_bands_free(&b, done);
    /* refused, and nothing changes: a band overlapping rows already in, one whose header
     * differs, one whose payload is not its rows */
    f = band(10, 1, 2, a);
    ck_assert_int_eq(tl_bands_add(&b, &f, 103, 1003, &done, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "overlaps row 1"), "%s", why);
    f = band(10, 2, 2, a);
    f.t_acq++;
    ck_assert_int_eq(tl_bands_add(&b, &f, 103, 1003, &done, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "header differs"), "%s", why);
    f = band(10, 2, 2, a);
    f.payload_len -= 2;
    ck_assert_int_eq(tl_bands_add(&b, &f, 103, 1003, &done, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "payload of 18 bytes, not 20"), "%s", why);
    f = band(10, 2, 2, a);
    ck_assert_int_eq(tl_bands_add(&b, &f, 104, 1004, &done, why, sizeof why), 1);
    ck_assert_uint_eq(done->frame.index, 10);
    ck_assert(!done->frame.has_band && done->frame.band_rows == BR && !done->frame.payload);
    ck_assert_uint_eq(done->frame.t_acq, 87);
    ck_assert_uint_eq(done->t_recv, 104); /* its last band's */
    ck_assert_mem_eq(done->data, a, sizeof a);
    tl_bands_free(&b, done);
    ck_assert_int_eq(tl_bands_pending(&b), 0);
    ck_assert_int_eq(dr.n, 0);
    tl_bands_destroy(&b);
}
END_TEST

START_TEST(bands_incomplete_dropped)
{
    tl_bands b;
    drops dr = {0};
    tl_bands_init(&b, 2, TL_BACKEND_CPU, on_drop, &dr);
    uint16_t px[BR * BC];
    band_frame(1, px);
    tl_bands_frame *done;
    char why[256];
    /* three frames begun, room for two: the oldest (1) goes */
    for (uint64_t k = 1; k <= 3; k++) {
        tl_proto_frame f = band(k, 0, 1, px);
        ck_assert_int_eq(tl_bands_add(&b, &f, k, 1000 * k, &done, why, sizeof why), 0);
    }
    ck_assert_int_eq(dr.n, 1);
    ck_assert_uint_eq(dr.index[0], 1);
    ck_assert_uint_eq(dr.rows_in[0], 1);
    ck_assert_msg(strstr(dr.why[0], "band_frames"), "%s", dr.why[0]);
    ck_assert_int_eq(tl_bands_pending(&b), 2);
    /* frame 1 is gone: its next band begins it anew and pushes out frame 2 */
    tl_proto_frame f = band(1, 1, 6, px);
    ck_assert_int_eq(tl_bands_add(&b, &f, 4, 4000, &done, why, sizeof why), 0);
    ck_assert_int_eq(dr.n, 2);
    ck_assert_uint_eq(dr.index[1], 2);
    /* frame 3 began at 3000, frame 1 at 4000: a timeout of 1500 at 4600 drops only 3 */
    ck_assert_int_eq(tl_bands_expire(&b, 4600, 1500), 1);
    ck_assert_uint_eq(dr.index[2], 3);
    ck_assert_msg(strstr(dr.why[2], "band_timeout_ms"), "%s", dr.why[2]);
    ck_assert_int_eq(tl_bands_pending(&b), 1);
    ck_assert_int_eq(tl_bands_clear(&b, "the series ended"), 1);
    ck_assert_uint_eq(dr.index[3], 1);
    ck_assert_uint_eq(dr.rows_in[3], 6);
    ck_assert_str_eq(dr.why[3], "the series ended");
    ck_assert_int_eq(tl_bands_pending(&b), 0);
    ck_assert_int_eq(dr.n, 4);
    tl_bands_destroy(&b);
}
END_TEST

/* Bands of 1 MB and more are copied by several threads: every byte lands in its place. */
START_TEST(bands_large_copy)
{
    enum { LR = 1024, LC = 1024 };
    tl_bands b;
    tl_bands_init(&b, 1, TL_BACKEND_CPU, NULL, NULL);
    uint16_t *px = malloc((size_t)LR * LC * sizeof *px);
    ck_assert_ptr_nonnull(px);
    for (size_t k = 0; k < (size_t)LR * LC; k++)
        px[k] = (uint16_t)(k * 2654435761u >> 7);
    tl_proto_frame f = {.series = 1,
                        .index = 5,
                        .kind = TL_PROTO_PROJ,
                        .dtype = TL_PROTO_U16,
                        .rows = LR,
                        .cols = LC,
                        .has_band = true,
                        .band_rows = LR / 2};
    tl_bands_frame *done;
    char why[256];
    for (int half = 1; half >= 0; half--) {
        f.band_first = (uint32_t)half * (LR / 2);
        f.payload = px + (size_t)f.band_first * LC;
        f.payload_len = (size_t)f.band_rows * LC * sizeof *px;
        ck_assert_int_eq(tl_bands_add(&b, &f, 1, 1, &done, why, sizeof why), half == 0);
    }
    ck_assert_mem_eq(done->data, px, (size_t)LR * LC * sizeof *px);
    tl_bands_destroy(&b);
    free(px);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bands");
    TCase *t = tcase_create("bands");
    tcase_add_test(t, bands_assemble);
    tcase_add_test(t, bands_incomplete_dropped);
    tcase_add_test(t, bands_large_copy);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tl_run_suite(suite(), false);
}
