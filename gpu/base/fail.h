/* fail.h — how the engine and its backends report failure: a message buffer that the
 * failing layer fills, naming the failing call, and the status it returns. Nothing in gpu/
 * prints or exits; the caller reads the message (tl_engine_last_error).
 *
 *   if (!p) return tl_fail(eb, TL_ENOMEM, "out of memory for %zu slices", n);
 */
#ifndef TL_FAIL_H
#define TL_FAIL_H

#include "gpu/base/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char msg[512];
} tl_errbuf;

/* Formats the message into eb (when not NULL) and returns st. */
tl_status tl_fail(tl_errbuf *eb, tl_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
