/* check_engine_alloc.c — the engine's per-frame path allocates nothing: after warm-up, a
 * stream of uint16 projections (converted, flat-field corrected, filtered, stored), with
 * tracked slices updated per projection (add the new, subtract the evicted) and read out
 * every few frames next to an untracked slice reconstructed from scratch, makes no heap
 * allocation at all (CPU backend; counted, not assumed).
 *
 * malloc/calloc/realloc are interposed in this executable (glibc exports the real ones as
 * __libc_*), so allocations inside FFTW and the thread pool count too. Under valgrind the
 * counters stay at zero; a probe allocation detects that and the count is then skipped.
 */
#include "config.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/engine.h"
#include "tests/testutil.h"

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);

static atomic_bool counting;
static atomic_long n_allocs;

#if !TL_TEST_ASAN /* ASan owns the allocator: main skips */
void *malloc(size_t n)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add(&n_allocs, 1);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add(&n_allocs, 1);
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add(&n_allocs, 1);
    return __libc_realloc(p, n);
}
#endif

enum { R = 8, W = 128, N = 90, S = 96 };

/* Feeds count frames; returns how many engine calls failed. No ck_assert in here: Check
 * records every assertion's location, and that allocates. */
static int frames(tl_engine *e, uint16_t *img, uint64_t first, uint64_t count, int *ids,
                  float **out, int readout)
{
    int failed = 0;
    for (uint64_t i = first; i < first + count; i++) {
        for (size_t k = 0; k < (size_t)R * W; k++)
            img[k] = (uint16_t)(2000 + (k * 7 + i * 13) % 1000);
        tl_frame f = {.kind = TL_FRAME_PROJ,
                      .index = i,
                      .angle = M_PI * (double)i / N,
                      .dtype = TL_DTYPE_U16,
                      .rows = R,
                      .cols = W,
                      .data = img};
        failed += tl_engine_submit(e, &f) != TL_OK;
        if (i % (uint64_t)readout == 0) {
            tl_slice_info info[3];
            failed += tl_engine_reconstruct(e, ids, 3, out, info) != TL_OK;
        }
    }
    return failed;
}

START_TEST(per_frame_path_allocates_nothing)
{
    tl_engine_config c;
    tl_engine_config_init(&c, R, W, N);
    c.backend = TL_BACKEND_CPU;
    c.threads = 2;
    tl_engine *e;
    ck_assert_int_eq(tl_engine_create(&c, &e), TL_OK);
    uint16_t *img = malloc((size_t)R * W * sizeof *img);
    for (int kind = 0; kind < 2; kind++) { /* a dark and a flat */
        for (size_t k = 0; k < (size_t)R * W; k++)
            img[k] = (uint16_t)(kind ? 4000 : 100);
        tl_frame f = {.kind = kind ? TL_FRAME_FLAT : TL_FRAME_DARK,
                      .dtype = TL_DTYPE_U16,
                      .rows = R,
                      .cols = W,
                      .data = img};
        ck_assert_int_eq(tl_engine_submit(e, &f), TL_OK);
    }
    tl_slice_spec row, ortho, plane;
    tl_slice_spec_row(&row, 3, S, S);
    tl_slice_spec_ortho(&ortho, TL_AXIS_X, 5.5, R, S);
    const float o[9] = {S, 0, 4, 0, S, 0, -S / 2.0f, -S / 2.0f, 1.5f};
    tl_slice_spec_plane(&plane, o, S, S);
    int ids[3];
    ck_assert_int_eq(tl_engine_add_slice(e, &row, &ids[0]), TL_OK);
    ck_assert_int_eq(tl_engine_add_slice(e, &ortho, &ids[1]), TL_OK);
    ck_assert_int_eq(tl_engine_add_slice(e, &plane, &ids[2]), TL_OK);
    ck_assert_int_eq(tl_engine_track(e, ids[0], true), TL_OK);
    ck_assert_int_eq(tl_engine_track(e, ids[1], true), TL_OK); /* the plane stays untracked */
    float *out[3];
    for (int k = 0; k < 3; k++)
        out[k] = malloc((size_t)S * S * sizeof *out[k]);

    ck_assert_int_eq(frames(e, img, 0, 2 * N, ids, out, 7), 0); /* warm-up: scratch sizes */
    atomic_store(&n_allocs, 0);
    atomic_store(&counting, true);
    void *volatile probe = malloc(16); /* is this allocator ours? (volatile: not elided) */
    free(probe);
    bool interposed = atomic_load(&n_allocs) == 1;
    atomic_store(&n_allocs, 0);
    int failed = frames(e, img, 2 * N, 2000, ids, out, 7);
    atomic_store(&counting, false);
    ck_assert_int_eq(failed, 0);
    long n = atomic_load(&n_allocs);
    printf("2000 frames (3 slices, 2 tracked, read out every 7 frames): %ld allocations%s\n", n,
           interposed ? "" : " (not counted: the allocator is not interposed)");
    if (interposed)
        ck_assert_int_eq(n, 0);
    for (int k = 0; k < 3; k++)
        free(out[k]);
    free(img);
    tl_engine_destroy(e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine alloc");
    TCase *t = tcase_create("cpu");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, per_frame_path_allocates_nothing);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    if (TL_TEST_ASAN) {
        puts("skipped: AddressSanitizer owns the allocator this test counts");
        return 77;
    }
    return tl_run_suite(suite(), true); /* no fork: the counters live in this process */
}
