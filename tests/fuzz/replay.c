/* replay.c — a libFuzzer target's harness without libFuzzer: a `make check` test with the
 * plain build, so every target's seed corpus and properties are checked on every run, where
 * clang or libFuzzer are missing too.
 *
 *   replay_NAME              every file of $top_srcdir/tests/fuzz/TLT_REPLAY_CORPUS (the
 *                            target's checked-in seeds; the define names the directory)
 *   replay_NAME FILE|DIR...  those instead (a crash-* file, a run corpus)
 *
 * Each input goes once through LLVMFuzzerTestOneInput, after LLVMFuzzerInitialize when the
 * harness has one, as libFuzzer would run it; a property that fails aborts (the test fails
 * with the input's name printed just before). Inputs run in name order, so a failure
 * reproduces.
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int inputs;

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *more = realloc(buf, cap *= 2);
            if (!more)
                free(buf);
            buf = more;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return -1;
    }
    /* an exact-size copy, so that a read past the input's end is past an allocation */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    fprintf(stderr, "input %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    inputs++;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path);
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **more = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!more)
                break;
            names = more;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char file[8192];
        snprintf(file, sizeof file, "%s/%s", path, names[i]);
        if (run_file(file) != 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    int rc = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            if (run_path(argv[i]) != 0)
                rc = 1;
    } else {
        const char *src = getenv("top_srcdir");
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/tests/fuzz/%s", src && *src ? src : ".", TLT_REPLAY_CORPUS);
        if (run_path(dir) != 0)
            rc = 1;
    }
    if (inputs == 0) {
        fprintf(stderr, "no input\n");
        rc = 1;
    }
    printf("%d inputs: %s\n", inputs, rc ? "FAIL" : "PASS");
    return rc;
}
