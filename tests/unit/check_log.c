/* check_log.c — daemon/log: line format, quoting, level filter, journal mode, one line per
 * event from several threads, and the rate limiter. stderr is captured by pointing fd 2 at a
 * temporary file. */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/log.h"
#include "tests/testutil.h"

static char *tmpdir;
static char cap_path[1024];
static int saved_fd = -1;

/* Points stderr at a fresh file until capture_end, which returns what was written. */
static void capture_begin(void)
{
    static int n;
    snprintf(cap_path, sizeof cap_path, "%s/stderr%d", tmpdir, n++);
    int fd = open(cap_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    ck_assert_int_ge(fd, 0);
    saved_fd = dup(STDERR_FILENO);
    ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
    close(fd);
}

static char *capture_end(void)
{
    dup2(saved_fd, STDERR_FILENO);
    close(saved_fd);
    FILE *f = fopen(cap_path, "r");
    ck_assert_ptr_nonnull(f);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int ch;
    while ((ch = fgetc(f)) != EOF)
        fputc(ch, m);
    fclose(f);
    fclose(m);
    return buf;
}

static bool matches(const char *text, const char *re)
{
    regex_t r;
    ck_assert_int_eq(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
    bool ok = regexec(&r, text, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

START_TEST(test_format)
{
    unsetenv("JOURNAL_STREAM");
    tl_log_init();
    tl_log_set_level(TL_LOG_INFO);
    time_t before = time(NULL);
    capture_begin();
    ck_assert(!tl_log_journal());
    tl_log(TL_LOG_INFO, "scan_started", "series=%d rows=%d", 3, 2048);
    tl_log(TL_LOG_WARN, "bare", "%s", "");
    tl_log(TL_LOG_ERROR, "free_text", "msg=%s path=%s", tl_logq("a\nb"), tl_logq("/data/run 7"));
    char *out = capture_end();
    ck_assert_msg(matches(out,
                          "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                          "level=info event=scan_started series=3 rows=2048\n"
                          "[0-9T:.-]{23}Z level=warn event=bare\n"
                          "[0-9T:.-]{23}Z level=error event=free_text msg=\"a\\\\nb\" "
                          "path=\"/data/run 7\"\n$"),
                  "%s", out);
    /* the time is UTC and now */
    struct tm tm = {0};
    ck_assert_ptr_nonnull(strptime(out, "%Y-%m-%dT%H:%M:%S", &tm));
    time_t t = timegm(&tm);
    ck_assert_int_ge(t, before - 1);
    ck_assert_int_le(t, time(NULL) + 1);
    free(out);
}
END_TEST

START_TEST(test_quote)
{
    static const char *const cases[][2] = {
        {"plain", "plain"},
        {"/path/without-spaces", "/path/without-spaces"},
        {"back\\slash", "back\\slash"},
        {"", "\"\""},
        {"two words", "\"two words\""},
        {"k=v", "\"k=v\""},
        {"say \"hi\"", "\"say \\\"hi\\\"\""},
        {"a\\b c", "\"a\\\\b c\""},
        {"tab\there", "\"tab\\there\""},
        {"nl\nand\rcr", "\"nl\\nand\\rcr\""},
        {"bell\a", "\"bell\\x07\""},
        {"caf\xc3\xa9", "caf\xc3\xa9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_str_eq(tl_logq(cases[i][0]), cases[i][1]);

    char small[8];
    ck_assert_uint_eq(tl_log_quote(small, sizeof small, "two words"), 11);
    ck_assert_str_eq(small, "\"two wo"); /* cut, terminated, and the needed length returned */

    /* every one of TL_LOGQ_SLOTS values in one call stays intact */
    const char *q[TL_LOGQ_SLOTS];
    char in[TL_LOGQ_SLOTS][16];
    for (int i = 0; i < TL_LOGQ_SLOTS; i++) {
        snprintf(in[i], sizeof in[i], "v %d", i);
        q[i] = tl_logq(in[i]);
    }
    for (int i = 0; i < TL_LOGQ_SLOTS; i++) {
        char want[16];
        snprintf(want, sizeof want, "\"v %d\"", i);
        ck_assert_str_eq(q[i], want);
    }

    /* too long for a slot: cut with "..." and the closing quote kept */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[10] = ' ';
    const char *b = tl_logq(big);
    ck_assert_uint_eq(strlen(b), TL_LOGQ_SIZE - 1);
    ck_assert_str_eq(b + TL_LOGQ_SIZE - 5, "...\"");
    big[10] = 'x';
    b = tl_logq(big);
    ck_assert_uint_eq(strlen(b), TL_LOGQ_SIZE - 1);
    ck_assert_str_eq(b + TL_LOGQ_SIZE - 4, "...");
}
END_TEST

START_TEST(test_one_line)
{
    unsetenv("JOURNAL_STREAM");
    tl_log_init();
    capture_begin();
    /* a newline that bypasses tl_logq does not split the event */
    tl_log(TL_LOG_INFO, "raw", "msg=%s", "first\nsecond\r");
    /* an over-long line is cut to TL_LOG_LINE_MAX, still ending in a newline */
    char *big = malloc(10000);
    memset(big, 'y', 9999);
    big[9999] = '\0';
    tl_log(TL_LOG_INFO, "big", "v=%s", big);
    free(big);
    char *out = capture_end();
    char *nl = strchr(out, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_msg(matches(out, "event=raw msg=first second \n"), "%s", out);
    char *second = nl + 1;
    size_t len = strlen(second);
    ck_assert_uint_eq(len, TL_LOG_LINE_MAX - 1);
    ck_assert_int_eq(second[len - 1], '\n');
    ck_assert_ptr_eq(strchr(second, '\n'), second + len - 1);
    ck_assert(strncmp(second + len - 4, "...\n", 4) == 0);
    free(out);
}
END_TEST

START_TEST(test_levels)
{
    ck_assert_int_eq(tl_log_parse_level("error"), TL_LOG_ERROR);
    ck_assert_int_eq(tl_log_parse_level("warn"), TL_LOG_WARN);
    ck_assert_int_eq(tl_log_parse_level("info"), TL_LOG_INFO);
    ck_assert_int_eq(tl_log_parse_level("debug"), TL_LOG_DEBUG);
    ck_assert_int_eq(tl_log_parse_level("warning"), -1);
    ck_assert_int_eq(tl_log_parse_level(NULL), -1);
    ck_assert_str_eq(tl_log_level_name(TL_LOG_WARN), "warn");
    ck_assert_ptr_null(tl_log_level_name(4));
    tl_log_set_level(99);
    ck_assert_int_eq(tl_log_get_level(), TL_LOG_DEBUG);
    tl_log_set_level(-5);
    ck_assert_int_eq(tl_log_get_level(), TL_LOG_ERROR);

    unsetenv("JOURNAL_STREAM");
    tl_log_init();
    tl_log_set_level(TL_LOG_WARN);
    ck_assert(tl_log_enabled(TL_LOG_ERROR));
    ck_assert(tl_log_enabled(TL_LOG_WARN));
    ck_assert(!tl_log_enabled(TL_LOG_INFO));
    ck_assert(!tl_log_enabled(TL_LOG_DEBUG));
    ck_assert(!tl_log_enabled(7));
    capture_begin();
    tl_log(TL_LOG_DEBUG, "d", "n=1");
    tl_log(TL_LOG_INFO, "i", "n=2");
    tl_log(TL_LOG_WARN, "w", "n=3");
    tl_log(TL_LOG_ERROR, "e", "n=4");
    tl_log_set_level(TL_LOG_DEBUG);
    tl_log(TL_LOG_DEBUG, "d", "n=5");
    char *out = capture_end();
    ck_assert_msg(matches(out, "^[^\n]* level=warn event=w n=3\n[^\n]* level=error event=e n=4\n"
                               "[^\n]* level=debug event=d n=5\n$"),
                  "%s", out);
    free(out);
}
END_TEST

START_TEST(test_journal)
{
    capture_begin();
    struct stat st;
    ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);
    char js[64];
    snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    tl_log_init();
    bool journal = tl_log_journal();
    tl_log_set_level(TL_LOG_DEBUG);
    tl_log(TL_LOG_ERROR, "a", "n=%d", 1);
    tl_log(TL_LOG_WARN, "b", "n=%d", 2);
    tl_log(TL_LOG_INFO, "scan_started", "series=%d path=%s", 3, tl_logq("x y"));
    tl_log(TL_LOG_DEBUG, "d", "%s", "");

    /* inherited by a process whose stderr is elsewhere: plain lines again */
    snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + 1);
    setenv("JOURNAL_STREAM", js, 1);
    tl_log_init();
    bool journal2 = tl_log_journal();
    tl_log(TL_LOG_INFO, "plain", "n=5");
    char *out = capture_end();
    ck_assert(journal);
    ck_assert(!journal2);
    ck_assert_msg(matches(out, "^<3>level=error event=a n=1\n"
                               "<4>level=warn event=b n=2\n"
                               "<6>level=info event=scan_started series=3 path=\"x y\"\n"
                               "<7>level=debug event=d\n"
                               "[0-9T:.-]{23}Z level=info event=plain n=5\n$"),
                  "%s", out);
    free(out);
}
END_TEST

#define NTHREADS 4
#define NLINES 2000

static void *log_many(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < NLINES; i++)
        tl_log(TL_LOG_INFO, "frame", "thread=%d i=%d pad=%0300d", id, i, 0);
    return NULL;
}

/* Lines written by several threads at once never interleave. */
START_TEST(test_threads)
{
    unsetenv("JOURNAL_STREAM");
    tl_log_init();
    tl_log_set_level(TL_LOG_INFO);
    capture_begin();
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, log_many, (void *)(intptr_t)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    char *out = capture_end();
    int count[NTHREADS] = {0}, lines = 0;
    char pad[301];
    memset(pad, '0', 300);
    pad[300] = '\0';
    for (char *l = out, *next; *l; l = next) {
        next = strchr(l, '\n');
        ck_assert_ptr_nonnull(next);
        *next++ = '\0';
        int id, i;
        char p[400];
        const char *f = strstr(l, " level=");
        ck_assert_msg(f && f - l == 24 &&
                          sscanf(f + 1, "level=info event=frame thread=%d i=%d pad=%399s", &id, &i,
                                 p) == 3,
                      "mangled: %s", l);
        ck_assert_str_eq(p, pad);
        ck_assert_int_eq(i, count[id]++); /* each thread's lines in its own order */
        lines++;
    }
    ck_assert_int_eq(lines, NTHREADS * NLINES);
    free(out);
}
END_TEST

START_TEST(test_ratelimit)
{
    tl_ratelimit r = TL_RATELIMIT_INIT;
    uint64_t n = 99;
    /* a burst of 3 per second passes */
    for (int i = 0; i < 3; i++) {
        ck_assert(tl_ratelimit_allow_at(&r, 10.0 + 0.1 * i, 1.0, 3, &n));
        ck_assert_uint_eq(n, 0);
    }
    /* the rest of the window is held back and counted */
    for (int i = 1; i <= 5; i++) {
        ck_assert(!tl_ratelimit_allow_at(&r, 10.3 + 0.1 * i, 1.0, 3, &n));
        ck_assert_uint_eq(n, i);
    }
    /* the next window: the first event reports how many were held back, once */
    ck_assert(tl_ratelimit_allow_at(&r, 11.0, 1.0, 3, &n));
    ck_assert_uint_eq(n, 5);
    ck_assert(tl_ratelimit_allow_at(&r, 11.1, 1.0, 3, NULL));
    ck_assert(tl_ratelimit_allow_at(&r, 11.2, 1.0, 3, &n));
    ck_assert_uint_eq(n, 0);
    ck_assert(!tl_ratelimit_allow_at(&r, 11.3, 1.0, 3, &n));

    /* burst < 1 counts as 1 */
    tl_ratelimit r2 = TL_RATELIMIT_INIT;
    ck_assert(tl_ratelimit_allow_at(&r2, 0.0, 1.0, 0, &n));
    ck_assert(!tl_ratelimit_allow_at(&r2, 0.5, 1.0, 0, &n));

    /* on the real clock */
    tl_ratelimit r3 = TL_RATELIMIT_INIT;
    ck_assert(tl_ratelimit_allow(&r3, 0.2, 2, &n));
    ck_assert(tl_ratelimit_allow(&r3, 0.2, 2, &n));
    ck_assert(!tl_ratelimit_allow(&r3, 0.2, 2, &n));
    ck_assert(!tl_ratelimit_allow(&r3, 0.2, 2, &n));
    /* what is tested: the real clock moving on past the 0.2 s window, no waiting */
    nanosleep(&(struct timespec){0, 250000000}, NULL);
    ck_assert(tl_ratelimit_allow(&r3, 0.2, 2, &n));
    ck_assert_uint_eq(n, 2);
}
END_TEST

static tl_ratelimit shared_rl = TL_RATELIMIT_INIT;
static int passed[NTHREADS];

static void *hammer(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 20000; i++)
        passed[id] += tl_ratelimit_allow_at(&shared_rl, 1.0, 1000.0, 100, NULL);
    return NULL;
}

/* Under contention exactly `burst` pass and every other event is counted. */
START_TEST(test_ratelimit_threads)
{
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, hammer, (void *)(intptr_t)i);
    int total = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        total += passed[i];
    }
    ck_assert_int_eq(total, 100);
    uint64_t n;
    ck_assert(tl_ratelimit_allow_at(&shared_rl, 2000.0, 1000.0, 100, &n));
    ck_assert_uint_eq(n, NTHREADS * 20000 - 100);
}
END_TEST

static Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_format);
    tcase_add_test(tc, test_quote);
    tcase_add_test(tc, test_one_line);
    tcase_add_test(tc, test_levels);
    tcase_add_test(tc, test_journal);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_ratelimit);
    tcase_add_test(tc, test_ratelimit_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    tmpdir = tl_tmpdir("log");
    if (!tmpdir)
        return 99;
    int rc = tl_run_suite(log_suite(), false);
    tl_rm_rf(tmpdir);
    return rc;
}
