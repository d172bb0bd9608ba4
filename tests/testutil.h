/* testutil.h — helpers shared by the test programs: error metrics of ARCHITECTURE.md §3.6,
 * GPU presence (for the exit-77 skip), and running a Check suite with the right fork mode.
 *
 * Metrics as in ARCHITECTURE.md §3.6: relative L2 = ||a - b|| / ||b||, and
 * max error over range = max |a - b| / (max b - min b), optionally inside a disk.
 */
#ifndef TL_TESTUTIL_H
#define TL_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

double tl_rel_l2(const float *a, const float *b, size_t n);
double tl_rel_l2_d(const float *a, const double *b, size_t n);
double tl_max_over_range(const float *a, const float *b, size_t n);
/* The same restricted to pixels of an h x w image within radius r of its centre
 * ((w - 1) / 2, (h - 1) / 2). */
double tl_rel_l2_disk(const float *a, const float *b, uint32_t h, uint32_t w, double r);
double tl_max_over_range_disk(const float *a, const float *b, uint32_t h, uint32_t w, double r);

/* A temporary directory for this test (removed by the caller with tl_rm_rf). */
char *tl_tmpdir(const char *tag);
/* "dir/name" in a ring of TL_PATH_RING buffers: a path stays valid for the next
 * TL_PATH_RING - 1 calls, so several can be passed to one call. */
#define TL_PATH_RING 64
const char *tl_path_in(const char *dir, const char *name);
void tl_rm_rf(const char *path);

/* Runs the suite and returns the process exit status (0 or 1). Fork mode off when
 * nofork is set (CUDA does not survive fork). */
int tl_run_suite(Suite *s, bool nofork);

/* The mpirun of a test under MPI: TL_MPIRUN, else `configured` (configure's MPIRUN). Exits
 * 77, saying why, in a build without MPI or where that mpirun is missing; sets Open MPI's
 * variables for root (CI containers) and for containers without ptrace, unless set. */
const char *tl_test_mpirun(const char *configured);

/* 1 in a build under AddressSanitizer: the tests that count allocations by replacing
 * malloc cannot run there (ASan owns the allocator) and skip. */
#if defined(__SANITIZE_ADDRESS__)
#define TL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TL_TEST_ASAN 1
#endif
#endif
#ifndef TL_TEST_ASAN
#define TL_TEST_ASAN 0
#endif

#endif
