/* check_http_expo.h — a strict checker of the Prometheus text exposition format (0.0.4), for
 * the tests of /metrics (tests/unit/check_metrics.c, tests/integration/check_http_daemon.c).
 *
 * Stricter than Prometheus itself, so that what passes here any scraper takes:
 *   - every line ends in '\n' (no '\r', no blank lines), and is `# HELP name text`,
 *     `# TYPE name type` or a sample `name{label="value",...} value [timestamp]`;
 *   - names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*, label values
 *     are quoted with only \\, \" and \n escaped, values are floats, +Inf, -Inf or NaN;
 *   - each family has one HELP and one TYPE, before its samples, and its samples follow
 *     them without another family in between; counters end in _total and are >= 0;
 *     no series appears twice;
 *   - histograms: per label set, `_bucket` lines with strictly increasing `le` ending in
 *     "+Inf", cumulative counts that never decrease, the +Inf count equal to `_count`, and a
 *     `_sum`.
 */
#ifndef TL_CHECK_HTTP_EXPO_H
#define TL_CHECK_HTTP_EXPO_H

#include <stdbool.h>
#include <stddef.h>

/* 0 when text is valid; otherwise -1 with "line N: what" in err. */
int tl_expo_check(const char *text, char *err, size_t errlen);

/* The value of the sample whose name and labels are exactly `series` as written in the text
 * (e.g. "tomolive_frames_accepted_total{kind=\"proj\"}"); false when there is none. */
bool tl_expo_value(const char *text, const char *series, double *value);

#endif
