/* log.h — tomolived's event log: one line per event on stderr, as `key=value` fields.
 *
 *   level=info event=scan_started series=3 rows=2048 path="/data/run 7"
 *
 * Under systemd (JOURNAL_STREAM names our stderr) each line starts with the sd-daemon
 * priority, `<3>` error, `<4>` warn, `<6>` info, `<7>` debug, and journald adds the time;
 * elsewhere it starts with an ISO-8601 UTC time with milliseconds,
 * `2025-01-31T12:00:00.123Z level=info ...`.
 *
 * Use:
 *   tl_log_init();                      // once at start, before threads (reads JOURNAL_STREAM)
 *   tl_log_set_level(TL_LOG_DEBUG);     // any time, from any thread
 *   tl_log(TL_LOG_INFO, "scan_started", "series=%u rows=%u", s, r);
 *   tl_log(TL_LOG_WARN, "config_error", "error=%s", tl_logq(msg));   // free text: quote it
 *
 * `fmt` produces the tail of the line. Numbers and identifiers go in as they are; any text
 * that may hold spaces, '=', quotes or newlines must go through tl_logq() / tl_log_quote(),
 * which double-quote it with C-style escapes. A newline that still reaches the tail is
 * turned into a space so that one event stays one line. Lines longer than TL_LOG_LINE_MAX
 * are cut and end in "...". tl_log is thread-safe: each line is one write(2) under a mutex.
 *
 * Rate limiting, for events that can repeat per frame (rejected frames, full queues):
 *   static tl_ratelimit rl = TL_RATELIMIT_INIT;
 *   uint64_t n;
 *   if (tl_log_enabled(TL_LOG_WARN) && tl_ratelimit_allow(&rl, 1.0, 10, &n))
 *       tl_log(TL_LOG_WARN, "frame_rejected", "reason=%s suppressed=%" PRIu64, why, n);
 * At most `burst` events pass per `interval_s` window; the next one that passes reports how
 * many were held back since the previous one. Test tl_log_enabled first so that events
 * below the log level do not use up the budget.
 */
#ifndef TL_DAEMON_LOG_H
#define TL_DAEMON_LOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Same order as the names of the daemon.log_level configuration key. */
enum { TL_LOG_ERROR = 0, TL_LOG_WARN, TL_LOG_INFO, TL_LOG_DEBUG };

#define TL_LOG_LINE_MAX 4096 /* PIPE_BUF: one write to a pipe is never interleaved */

/* Re-reads JOURNAL_STREAM and checks it against stderr (an inherited variable whose
 * device:inode is not our stderr is ignored, as systemd.exec(5) advises). Call at start and
 * again after redirecting stderr; without a call, the first tl_log does it. */
void tl_log_init(void);
bool tl_log_journal(void); /* whether lines carry <N> prefixes */

void tl_log_set_level(int level); /* clamped to ERROR..DEBUG; default INFO */
int tl_log_get_level(void);
int tl_log_parse_level(const char *name); /* "error".."debug", or -1 */
const char *tl_log_level_name(int level); /* NULL if out of range */
bool tl_log_enabled(int level);

void tl_log(int level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes s as a log value to dst (size n, always terminated): unchanged if it is a
 * non-empty run of printable characters without space, '=' or '"', else double-quoted with
 * \" \\ \n \r \t \xNN escapes. Returns the length it needed (like snprintf). */
size_t tl_log_quote(char *dst, size_t n, const char *s);
/* The same into one of TL_LOGQ_SLOTS per-thread buffers of TL_LOGQ_SIZE bytes, used in
 * turn, so up to TL_LOGQ_SLOTS values can be quoted in one tl_log call. */
#define TL_LOGQ_SLOTS 8
#define TL_LOGQ_SIZE 1024
const char *tl_logq(const char *s);

typedef struct {
    pthread_mutex_t lock;
    double window_start; /* seconds, CLOCK_MONOTONIC */
    int passed;          /* events passed in the current window */
    uint64_t suppressed; /* events held back since the last one that passed */
    bool started;
} tl_ratelimit;
#define TL_RATELIMIT_INIT                           \
    {                                               \
        PTHREAD_MUTEX_INITIALIZER, 0.0, 0, 0, false \
    }

/* True if this event may be logged. On true, *suppressed (if not NULL) is the number of
 * events held back since the previous true, and the count restarts; on false it is the
 * count so far, this event included. burst < 1 counts as 1. */
bool tl_ratelimit_allow(tl_ratelimit *r, double interval_s, int burst, uint64_t *suppressed);
/* The same with the caller's clock (seconds, monotonic), e.g. the event loop's or a test's. */
bool tl_ratelimit_allow_at(tl_ratelimit *r, double now_s, double interval_s, int burst,
                           uint64_t *suppressed);

#endif
