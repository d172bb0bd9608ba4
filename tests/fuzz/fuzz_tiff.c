/* fuzz_tiff.c — libFuzzer target for the TIFF stack reader of `tomolive recon`
 * (clients/tiff.c over libtiff): an input is a whole file.
 *
 * The input is opened by path as the command opens a file (a memfd's /proc path: nothing
 * touches the disk). Properties: open answers 0 or -1 with a message naming the file; an
 * opened stack has pages, a shape and a sample type, and every page (the first 8) reads into
 * a buffer of exactly rows x cols samples, or fails with a message: never a write past it
 * (ASan). Stacks whose page would exceed 16 MiB are opened but not read (a 40-byte file can
 * claim any size; recon would fail to allocate, which is not the reader's business).
 */
#define _GNU_SOURCE
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clients/tiff.h"

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "property failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                          \
        }                                                                     \
    } while (0)

#define MAX_PAGE_BYTES (16u << 20)
#define MAX_PAGES 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[64];

static void check_message(const char *err, size_t cap)
{
    CHECK(memchr(err, '\0', cap) != NULL);
    CHECK(strstr(err, path) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0) {
        fd = memfd_create("stack.tif", 0);
        CHECK(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
    tl_tiff_reader r;
    char err[512] = "";
    if (tl_tiff_open(&r, path, err, sizeof err) != 0) {
        check_message(err, sizeof err);
        return 0;
    }
    CHECK(r.pages >= 1);
    CHECK(r.dtype == TL_DTYPE_U8 || r.dtype == TL_DTYPE_U16 || r.dtype == TL_DTYPE_U32 ||
          r.dtype == TL_DTYPE_F32);
    size_t sample = r.dtype == TL_DTYPE_U8 ? 1 : r.dtype == TL_DTYPE_U16 ? 2 : 4;
    size_t bytes = (size_t)r.rows * r.cols * sample;
    if (bytes > 0 && bytes <= MAX_PAGE_BYTES) {
        void *buf = malloc(bytes);
        CHECK(buf != NULL);
        for (uint32_t p = 0; p < r.pages && p < MAX_PAGES; p++)
            if (tl_tiff_read_page(&r, p, buf, err, sizeof err) != 0)
                check_message(err, sizeof err);
        free(buf);
    }
    tl_tiff_close(&r);
    return 0;
}
