/* notify.c — see notify.h. */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "daemon/base/notify.h"

int tl_notify_ready(void)
{
    return sd_notify(0, "READY=1");
}

int tl_notify_reloading(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t usec = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    return sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64, usec);
}

int tl_notify_stopping(void)
{
    return sd_notify(0, "STOPPING=1");
}

int tl_notify_status(const char *line)
{
    char buf[512];
    snprintf(buf, sizeof buf, "STATUS=%s", line ? line : "");
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r') /* a newline would start a new assignment */
            *p = ' ';
    return sd_notify(0, buf);
}

int tl_notify_watchdog(void)
{
    return sd_notify(0, "WATCHDOG=1");
}

int tl_notify_extend_timeout(uint64_t usec)
{
    return sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%" PRIu64, usec);
}

uint64_t tl_notify_watchdog_usec(void)
{
    uint64_t usec = 0;
    /* > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, is this process */
    return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}
