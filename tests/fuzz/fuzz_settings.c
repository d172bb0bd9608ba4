/* fuzz_settings.c — libFuzzer target for the configuration file parser
 * (daemon/base/settings.c over libinih): an input is a whole tomolived.conf.
 *
 * The input is handed to tl_settings_load as the daemon hands it a file (through a memfd,
 * so nothing touches the disk). Properties:
 *   - load answers 0 or -1; -1 leaves the settings exactly as they were and says why, naming
 *     the file;
 *   - settings that load pass tl_settings_check, and what tl_settings_write makes of them
 *     (with and without help) loads again to the same settings (tl_settings_diff is 0);
 *   - every difference from the defaults that load reports is a key that exists.
 */
#define _GNU_SOURCE
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/base/log.h"
#include "daemon/base/settings.h"

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "property failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                          \
        }                                                                     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tl_log_set_level(TL_LOG_ERROR);
    fd = memfd_create("tomolived.conf", 0);
    CHECK(fd >= 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return 0;
}

/* Loads text over *c as the daemon loads its file. */
static int load(const void *text, size_t len, tl_settings *c, char *err, size_t errlen)
{
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(pwrite(fd, text, len, 0) == (ssize_t)len);
    return tl_settings_load(c, path, err, errlen);
}

static void key_exists(const char *dotted, bool reloadable, void *ctx)
{
    (void)reloadable;
    (void)ctx;
    CHECK(tl_settings_has_key(dotted));
}

static void round_trip(const tl_settings *c, bool with_help)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL);
    tl_settings_write(c, f, with_help);
    CHECK(fclose(f) == 0);
    tl_settings again;
    tl_settings_defaults(&again);
    char err[1024] = "";
    int rc = load(text, len, &again, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "written settings do not load again: %s\n", err);
    CHECK(rc == 0);
    CHECK(tl_settings_diff(c, &again, NULL, NULL) == 0);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0)
        LLVMFuzzerInitialize(NULL, NULL);
    tl_settings c, before;
    tl_settings_defaults(&c);
    before = c;
    char err[1024] = "";
    int rc = load(data, size, &c, err, sizeof err);
    CHECK(rc == 0 || rc == -1);
    if (rc != 0) {
        CHECK(memcmp(&c, &before, sizeof c) == 0);
        CHECK(memchr(err, '\0', sizeof err) != NULL);
        CHECK(strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':');
        return 0;
    }
    CHECK(tl_settings_check(&c, err, sizeof err) == 0);
    tl_settings_diff(&before, &c, key_exists, NULL);
    round_trip(&c, false);
    round_trip(&c, size & 1);
    return 0;
}
