/* fuzz_cone_read.c — libFuzzer target for the cone-beam matrix readers of `tomolive recon
 * --matrices` (clients/cone_read.h: text, .npy, ASTRA rows, RTK XML through libxml2).
 *
 * An input is a format byte (mod 3: p, astra, rtk) then a whole file, opened by path as the
 * command opens it (a memfd's /proc path: nothing touches the disk). Properties: the reader
 * answers 0 with n >= 1 matrices, each finite and normalised (row 3's rotation part of unit
 * norm, the isocentre at positive depth), or -1 with no matrices and a message naming the
 * file (or saying it ran out of memory); never a read or write out of bounds (ASan).
 */
#define _GNU_SOURCE
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clients/cone_read.h"

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "property failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                          \
        }                                                                     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (fd < 0) {
        fd = memfd_create("matrices", 0);
        CHECK(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(pwrite(fd, data + 1, size - 1, 0) == (ssize_t)(size - 1));
    tl_cone_matrix_file m = {.path = path, .format = (tl_cone_file_format)(data[0] % 3)};
    tl_cone_detector d = {16, 24, 0.5, 0.4};
    double(*P)[12] = NULL;
    uint32_t n = 7;
    char err[1024];
    memset(err, 'x', sizeof err);
    if (tl_cone_read(&m, &d, &P, &n, err, sizeof err) != 0) {
        CHECK(P == NULL && n == 0);
        CHECK(memchr(err, '\0', sizeof err) != NULL);
        CHECK(strstr(err, path) != NULL || strstr(err, "out of memory") != NULL);
        return 0;
    }
    CHECK(P != NULL && n >= 1);
    for (uint32_t i = 0; i < n; i++) {
        for (int k = 0; k < 12; k++)
            CHECK(isfinite(P[i][k]));
        double norm = sqrt(P[i][8] * P[i][8] + P[i][9] * P[i][9] + P[i][10] * P[i][10]);
        CHECK(fabs(norm - 1) <= 1e-9);
        CHECK(P[i][11] > 0); /* the isocentre's depth */
    }
    free(P);
    return 0;
}
