/* fail.c — tl_fail (fail.h). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "gpu/base/fail.h"

tl_status tl_fail(tl_errbuf *eb, tl_status st, const char *fmt, ...)
{
    if (eb) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(eb->msg, sizeof eb->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}
