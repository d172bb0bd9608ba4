/* fuzz_hdf5.c — libFuzzer target for the HDF5 scan reader of `tomolive recon` and `push
 * --file` (clients/hdf5.c over libhdf5): an input is a whole file.
 *
 * The input is opened by path as the command opens a file: one temporary file, rewritten
 * for each input (libhdf5 does not open a memfd's /proc path, and its core driver would
 * not be the path the command takes). Properties: open answers 0 or -1 with a message naming the file; an
 * opened scan has projections, a shape and a sample type, an angle per projection when it
 * has angles, and the first and last frame of each kind read into a buffer of exactly rows x cols
 * samples, or fail with a message: never a write past it (ASan); a frame past the count is
 * refused; after close (or a failed open) no HDF5 object of ours is left open (recon and
 * push open file after file). Scans whose frame would exceed 16 MiB are opened but not read.
 *
 * Only clients/hdf5.c is instrumented: a crash inside libhdf5 on a malformed file is
 * libhdf5's (Debian's build), and shows as a crash in its frames.
 */
#define _GNU_SOURCE
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "clients/hdf5.h"

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "property failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                          \
        }                                                                     \
    } while (0)

#define MAX_FRAME_BYTES (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[4096];

static void remove_file(void)
{
    unlink(path);
}

static void check_message(const char *err, size_t cap)
{
    CHECK(memchr(err, '\0', cap) != NULL);
    CHECK(strstr(err, path) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/tl-fuzz-hdf5-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        fd = mkstemp(path);
        CHECK(fd >= 0);
        atexit(remove_file);
    }
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
    tl_hdf5_reader r;
    char err[512] = "";
    if (tl_hdf5_open(&r, path, err, sizeof err) != 0) {
        check_message(err, sizeof err);
        CHECK(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0); /* nothing left open */
        return 0;
    }
    CHECK(r.count[TL_FRAME_PROJ] >= 1);
    CHECK(r.dtype == TL_DTYPE_U8 || r.dtype == TL_DTYPE_U16 || r.dtype == TL_DTYPE_U32 ||
          r.dtype == TL_DTYPE_F32);
    volatile double sum = 0; /* one angle per projection, each readable (ASan) */
    for (uint32_t j = 0; r.angles && j < r.count[TL_FRAME_PROJ]; j++)
        sum += r.angles[j];
    (void)sum;
    size_t sample = r.dtype == TL_DTYPE_U8 ? 1 : r.dtype == TL_DTYPE_U16 ? 2 : 4;
    size_t bytes = (size_t)r.rows * r.cols * sample;
    if (bytes > 0 && bytes <= MAX_FRAME_BYTES) {
        void *buf = malloc(bytes);
        CHECK(buf != NULL);
        for (int k = TL_FRAME_DARK; k <= TL_FRAME_PROJ; k++) {
            uint32_t n = r.count[k];
            uint32_t which[2] = {0, n ? n - 1 : 0};
            for (int w = 0; w < 2 && n; w++)
                if (tl_hdf5_read(&r, (tl_frame_kind)k, which[w], buf, err, sizeof err) != 0)
                    check_message(err, sizeof err);
            CHECK(tl_hdf5_read(&r, (tl_frame_kind)k, n, buf, err, sizeof err) != 0);
            check_message(err, sizeof err);
        }
        free(buf);
    }
    tl_hdf5_close(&r);
    CHECK(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0);
    return 0;
}
