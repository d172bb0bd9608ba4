/* log.c — see log.h. */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/log.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const char level_prio[] = {'3', '4', '6',
                                  '7'}; /* LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */

/* Atomics: the level is changed on reload by the loop thread and read by the ingest thread. */
static atomic_int cur_level = TL_LOG_INFO;
static atomic_int journal_mode = -1; /* -1: not decided yet */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

void tl_log_init(void)
{
    int journal = 0;
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0)
        journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
    atomic_store(&journal_mode, journal);
}

bool tl_log_journal(void)
{
    if (atomic_load(&journal_mode) < 0)
        tl_log_init();
    return atomic_load(&journal_mode) == 1;
}

void tl_log_set_level(int level)
{
    if (level < TL_LOG_ERROR)
        level = TL_LOG_ERROR;
    if (level > TL_LOG_DEBUG)
        level = TL_LOG_DEBUG;
    atomic_store(&cur_level, level);
}

int tl_log_get_level(void)
{
    return atomic_load(&cur_level);
}

int tl_log_parse_level(const char *name)
{
    for (int i = 0; name && i <= TL_LOG_DEBUG; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

const char *tl_log_level_name(int level)
{
    return level >= TL_LOG_ERROR && level <= TL_LOG_DEBUG ? level_names[level] : NULL;
}

bool tl_log_enabled(int level)
{
    return level >= TL_LOG_ERROR && level <= atomic_load(&cur_level);
}

size_t tl_log_quote(char *dst, size_t n, const char *s)
{
    if (!s)
        s = "(null)";
    bool plain = *s != '\0';
    for (const unsigned char *p = (const unsigned char *)s; plain && *p; p++)
        plain = *p > ' ' && *p != '=' && *p != '"' && *p != 0x7f;
    if (plain)
        return (size_t)snprintf(dst, n, "%s", s);

    size_t len = 0;
#define PUT(ch)              \
    do {                     \
        if (len + 1 < n)     \
            dst[len] = (ch); \
        len++;               \
    } while (0)
    PUT('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        static const char hex[] = "0123456789abcdef";
        switch (*p) {
            case '"':
                PUT('\\');
                PUT('"');
                break;
            case '\\':
                PUT('\\');
                PUT('\\');
                break;
            case '\n':
                PUT('\\');
                PUT('n');
                break;
            case '\r':
                PUT('\\');
                PUT('r');
                break;
            case '\t':
                PUT('\\');
                PUT('t');
                break;
            default:
                if (*p < ' ' || *p == 0x7f) {
                    PUT('\\');
                    PUT('x');
                    PUT(hex[*p >> 4]);
                    PUT(hex[*p & 15]);
                } else {
                    PUT((char)*p); /* UTF-8 bytes pass through */
                }
        }
    }
    PUT('"');
#undef PUT
    if (n)
        dst[len < n ? len : n - 1] = '\0';
    return len;
}

const char *tl_logq(const char *s)
{
    static _Thread_local char bufs[TL_LOGQ_SLOTS][TL_LOGQ_SIZE];
    static _Thread_local unsigned next;
    char *b = bufs[next++ % TL_LOGQ_SLOTS];
    if (tl_log_quote(b, TL_LOGQ_SIZE, s) >= TL_LOGQ_SIZE) {
        if (b[0] == '"')
            memcpy(b + TL_LOGQ_SIZE - 5, "...\"", 5); /* cut, but keep the quotes balanced */
        else
            memcpy(b + TL_LOGQ_SIZE - 4, "...", 4);
    }
    return b;
}

/* Writes all of buf; a pipe or the journal's stream socket may take it in pieces. */
static void write_all(const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(STDERR_FILENO, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere left to report it */
        buf += w;
        len -= (size_t)w;
    }
}

void tl_log(int level, const char *event, const char *fmt, ...)
{
    if (!tl_log_enabled(level))
        return;
    char line[TL_LOG_LINE_MAX];
    size_t len;
    if (tl_log_journal()) {
        len = (size_t)snprintf(line, sizeof line, "<%c>", level_prio[level]);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        len = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
        len += (size_t)snprintf(line + len, sizeof line - len, ".%03ldZ ", ts.tv_nsec / 1000000);
    }
    len += (size_t)snprintf(line + len, sizeof line - len, "level=%s event=%s", level_names[level],
                            event ? event : "unknown");
    size_t tail = len;
    if (fmt && len + 1 < sizeof line) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(line + len + 1, sizeof line - len - 1, fmt, ap);
        va_end(ap);
        if (k > 0) { /* no trailing space after an empty tail */
            line[len] = ' ';
            len += 1 + (size_t)k;
        }
    }
    if (len > sizeof line - 2) { /* leave room for the newline */
        len = sizeof line - 2;
        memcpy(line + len - 3, "...", 3);
    }
    for (size_t i = tail; i < len; i++) /* one event, one line */
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[len++] = '\n';

    pthread_mutex_lock(&write_lock);
    write_all(line, len);
    pthread_mutex_unlock(&write_lock);
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool tl_ratelimit_allow(tl_ratelimit *r, double interval_s, int burst, uint64_t *suppressed)
{
    return tl_ratelimit_allow_at(r, mono_now(), interval_s, burst, suppressed);
}

/* A fixed window (as systemd's own ratelimit): the first event opens a window of
 * interval_s, in which burst events pass; the first event after it opens the next one. */
bool tl_ratelimit_allow_at(tl_ratelimit *r, double now_s, double interval_s, int burst,
                           uint64_t *suppressed)
{
    if (burst < 1)
        burst = 1;
    pthread_mutex_lock(&r->lock);
    if (!r->started || now_s - r->window_start >= interval_s || now_s < r->window_start) {
        r->started = true;
        r->window_start = now_s;
        r->passed = 0;
    }
    bool ok = r->passed < burst;
    uint64_t n;
    if (ok) {
        r->passed++;
        n = r->suppressed;
        r->suppressed = 0;
    } else {
        n = ++r->suppressed;
    }
    pthread_mutex_unlock(&r->lock);
    if (suppressed)
        *suppressed = n;
    return ok;
}
