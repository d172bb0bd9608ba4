/* check_adapters_corpus.c — the ingest adapters' fuzz harness (fuzz_adapters.c) without
 * libFuzzer: a `make check` test with the plain build.
 *
 *   - every seed of tests/fuzz/adapters-corpus runs once through the harness and its
 *     properties (a failed one aborts); every message of a seed named ok-* is accepted;
 *   - recorded detector messages are accepted, never refused: DECTRIS's end message
 *     (tests/unit/data/dectris2-end.cbor, vendored) closing a series, and, when shared/data
 *     is there ($TOMOLIVE_TEST_DATA, $top_srcdir/shared/data or $top_srcdir/../shared/data),
 *     the recorded Stream V2 images and end of dectris-stream2-32bit in both settings
 *     variants. Without it, a note says so and those are skipped.
 *
 *   check_adapters_corpus [FILE...]     replays the given inputs instead (a crash-* file)
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/base/log.h"
#include "tests/fuzz/adapters_seeds.h"

static int failures;

static void *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = buf && n > 0 ? (size_t)n : 0;
    return buf;
}

/* Runs an input; with must_accept, every message of it must be accepted. */
static void run(const char *name, const uint8_t *data, size_t len, bool must_accept)
{
    tlt_fz_result res;
    tlt_fz_run(data, len, &res);
    for (int m = 0; must_accept && m < res.nmsgs; m++)
        if (res.rc[m] < 0) {
            printf("FAIL: %s (%s): message %d refused: %s %s\n", name,
                   len ? tlt_fz_format(data[0]) : "-", m + 1, tl_proto_err_name(res.err[m].code),
                   res.err[m].message);
            failures++;
            return;
        }
    if (must_accept && res.nmsgs == 0) {
        printf("FAIL: %s: no message\n", name);
        failures++;
    }
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int corpus(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        printf("FAIL: cannot open %s\n", dir);
        failures++;
        return 0;
    }
    char *names[1024];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 1024)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char path[16384];
        size_t len;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        uint8_t *data = read_file(path, &len);
        if (!data) {
            printf("FAIL: cannot read %s\n", path);
            failures++;
        } else {
            run(names[i], data, len, strncmp(names[i], "ok-", 3) == 0);
        }
        free(data);
        free(names[i]);
    }
    return n;
}

static const char *data_dir(const char *src)
{
    static char dir[4096];
    struct stat st;
    const char *env = getenv("TOMOLIVE_TEST_DATA");
    if (env && *env && stat(env, &st) == 0)
        return env;
    snprintf(dir, sizeof dir, "%s/shared/data", src);
    if (stat(dir, &st) == 0)
        return dir;
    snprintf(dir, sizeof dir, "%s/../shared/data", src);
    if (stat(dir, &st) == 0)
        return dir;
    return NULL;
}

/* start, image (of ours, or recorded), recorded end: each accepted; the image a scan and
 * its frame, the end an end (variant B's first series is a dark one: its end ends no scan). */
static void recorded(const char *name, uint8_t selector, uint32_t rows, uint32_t cols,
                     const void *image, size_t image_len, const void *end, size_t end_len)
{
    tlt_fz_buf in = {0}, msg = {0};
    tlt_fz_begin(&in, selector);
    tlt_d2_start(&msg, 1, rows, cols, 10, 0);
    tlt_fz_msg1(&in, msg.data, msg.len);
    tlt_fz_msg1(&in, image, image_len);
    tlt_fz_msg1(&in, end, end_len);
    tlt_fz_result res;
    tlt_fz_run(in.data, in.len, &res);
    static const char *const what[] = {"start", "image", "end"};
    for (int m = 0; m < 3; m++)
        if (res.rc[m] < 0) {
            printf("FAIL: %s: the %s is refused: %s %s\n", name, what[m],
                   tl_proto_err_name(res.err[m].code), res.err[m].message);
            failures++;
        }
    bool dark = selector & TLT_FZ_VARIANT;
    if (res.nmsgs != 3 || res.rc[1] != 1 || res.nitems[1] != 2 || res.rc[2] != (dark ? 0 : 1)) {
        printf("FAIL: %s (variant %c): not a scan and a frame, then an end\n", name,
               dark ? 'b' : 'a');
        failures++;
    }
    tlt_fz_free(&in);
    tlt_fz_free(&msg);
}

int main(int argc, char **argv)
{
    tl_log_set_level(TL_LOG_ERROR);
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            size_t len;
            uint8_t *data = read_file(argv[i], &len);
            if (!data) {
                perror(argv[i]);
                return 1;
            }
            run(argv[i], data, len, false);
            printf("%s: passes\n", argv[i]);
            free(data);
        }
        return 0;
    }
    const char *src = getenv("top_srcdir");
    if (!src || !*src)
        src = ".";
    char path[8192];
    snprintf(path, sizeof path, "%s/tests/fuzz/adapters-corpus", src);
    int seeds = corpus(path);

    size_t end_len;
    snprintf(path, sizeof path, "%s/tests/unit/data/dectris2-end.cbor", src);
    void *end = read_file(path, &end_len);
    if (!end) {
        printf("FAIL: cannot read %s\n", path);
        return 1;
    }
    uint32_t px[8 * 16] = {0};
    tlt_fz_buf image = {0};
    tlt_d2_image(&image, 1, 0, 8, 16, 70, px, 4, NULL, NULL);
    recorded("dectris2-end.cbor", TLT_FZ_DECTRIS2, 8, 16, image.data, image.len, end, end_len);
    tlt_fz_free(&image);
    free(end);

    const char *dir = data_dir(src);
    int nrecorded = 0;
    if (!dir) {
        printf("note: no shared/data (TOMOLIVE_TEST_DATA): the recorded DECTRIS images are "
               "not checked\n");
    } else {
        static const char *const names[] = {"000001.cbor", "000002.cbor", "000003.cbor"};
        snprintf(path, sizeof path, "%s/dectris-stream2-32bit/000011.cbor", dir);
        end = read_file(path, &end_len);
        for (int i = 0; i < 3 && end; i++) {
            size_t len;
            snprintf(path, sizeof path, "%s/dectris-stream2-32bit/%s", dir, names[i]);
            void *msg = read_file(path, &len);
            if (!msg) {
                printf("FAIL: cannot read %s\n", path);
                failures++;
                continue;
            }
            recorded(names[i], TLT_FZ_DECTRIS2, 514, 1030, msg, len, end, end_len);
            recorded(names[i], TLT_FZ_DECTRIS2 | TLT_FZ_VARIANT, 514, 1030, msg, len, end,
                     end_len);
            nrecorded++;
            free(msg);
        }
        if (!end) {
            printf("FAIL: cannot read %s\n", path);
            failures++;
        }
        free(end);
    }
    printf("%d seeds, the recorded end message and %d recorded images: %s\n", seeds, nrecorded,
           failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
