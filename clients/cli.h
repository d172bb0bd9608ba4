/* cli.h — what the tomolive subcommands share: how they report errors and read the clock.
 *
 * Every subcommand prints its errors as "tomolive <name>: <message>" on stderr and returns
 * an exit status (commands.h); each defines `ME` as its name and calls
 *   return tl_cli_fail(ME, 1, "cannot open %s", path);
 */
#ifndef TL_CLI_H
#define TL_CLI_H

#include <stdbool.h>
#include <stddef.h>

/* Prints "<me>: <message>\n" on stderr and returns rc. */
int tl_cli_fail(const char *me, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Formats the message into err (errlen bytes; NULL or 0: dropped) and returns -1: the
 * error convention of the helpers below the subcommands (`return tl_cli_errf(err, errlen,
 * "cannot open %s", path);`). */
int tl_cli_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A whole decimal number in [lo, hi] and nothing else ("12", not "12x", "", "1e3"). */
bool tl_cli_long(const char *s, long lo, long hi, long *out);
/* A finite decimal number and nothing else ("0.5", "1e-3"; not "0.5x", "", "inf"). */
bool tl_cli_double(const char *s, double *out);

/* Seconds on the monotonic clock (for timeouts and rates). */
double tl_cli_now(void);

/* Sorts v[0..n-1] ascending (benchmark times, latencies, angles). */
void tl_cli_sort(double *v, size_t n);
/* The median of v[0..n-1] (n >= 1; the mean of the middle two for even n), sorting v. */
double tl_cli_median(double *v, size_t n);

#endif
