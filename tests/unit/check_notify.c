/* check_notify.c — daemon/notify against tests/notify_listener: each call sends the datagram
 * systemd expects to NOTIFY_SOCKET, nothing happens without it, and the watchdog interval
 * is read as sd_watchdog_enabled defines it. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/base/notify.h"
#include "tests/notify_listener.h"
#include "tests/testutil.h"

static char *tmpdir;
static char sock[512];
static tl_notify_listener *l;

static void setup(void)
{
    static int n;
    snprintf(sock, sizeof sock, "%s/notify%d", tmpdir, n++);
    l = tl_notify_listener_open(sock);
    ck_assert_ptr_nonnull(l);
    setenv("NOTIFY_SOCKET", sock, 1);
}

static void teardown(void)
{
    tl_notify_listener_close(l);
    l = NULL;
}

static uint64_t mono_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

START_TEST(test_ready_stopping_watchdog)
{
    ck_assert_int_gt(tl_notify_ready(), 0);
    ck_assert(tl_notify_listener_wait(l, "READY=1", 2000));
    ck_assert_str_eq(tl_notify_listener_last(l), "READY=1");
    ck_assert_int_gt(tl_notify_watchdog(), 0);
    ck_assert(tl_notify_listener_wait(l, "WATCHDOG=1", 2000));
    ck_assert_int_gt(tl_notify_stopping(), 0);
    ck_assert(tl_notify_listener_wait(l, "STOPPING=1", 2000));
    ck_assert_int_gt(tl_notify_extend_timeout(30000000), 0);
    ck_assert(tl_notify_listener_wait(l, "EXTEND_TIMEOUT_USEC=30000000", 2000));
}
END_TEST

START_TEST(test_reloading)
{
    uint64_t before = mono_usec();
    ck_assert_int_gt(tl_notify_reloading(), 0);
    uint64_t after = mono_usec();
    ck_assert_int_gt(tl_notify_ready(), 0);
    /* in order, RELOADING=1 with the time in the same datagram, then READY=1 */
    ck_assert(tl_notify_listener_wait(l, "RELOADING=1", 2000));
    uint64_t t = 0;
    const char *m = strstr(tl_notify_listener_last(l), "\nMONOTONIC_USEC=");
    ck_assert_msg(m && sscanf(m, "\nMONOTONIC_USEC=%" SCNu64, &t) == 1, "%s",
                  tl_notify_listener_last(l));
    ck_assert_uint_ge(t, before);
    ck_assert_uint_le(t, after);
    ck_assert(tl_notify_listener_wait(l, "READY=1", 2000));
}
END_TEST

START_TEST(test_status)
{
    ck_assert_int_gt(tl_notify_status("ingesting 1234 fps, 3 slices watched"), 0);
    ck_assert(tl_notify_listener_wait(l, "STATUS=ingesting 1234 fps, 3 slices watched", 2000));
    /* a newline would end the assignment early and start a bogus one */
    ck_assert_int_gt(tl_notify_status("two\nREADY=1"), 0);
    ck_assert(tl_notify_listener_wait(l, "STATUS=", 2000));
    ck_assert_str_eq(tl_notify_listener_last(l), "STATUS=two READY=1");
}
END_TEST

/* The listener's contract, which the end-to-end tests rely on. */
START_TEST(test_listener)
{
    ck_assert_int_gt(tl_notify_watchdog(), 0);
    ck_assert_int_gt(tl_notify_ready(), 0);
    ck_assert(tl_notify_listener_wait(l, "READY=1", 2000));
    /* passed over on the way to READY=1: not found again */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert(!tl_notify_listener_wait(l, "WATCHDOG=1", 200));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    ck_assert_msg(waited >= 0.19 && waited < 2.0, "waited %.3f s", waited);
    ck_assert_str_eq(tl_notify_listener_received(l), "WATCHDOG=1\n--\nREADY=1\n--\n");
    /* a whole line, not a substring */
    ck_assert_int_gt(tl_notify_status("READY=1"), 0);
    ck_assert(!tl_notify_listener_wait(l, "READY=1", 200));
}
END_TEST

START_TEST(test_abstract_socket)
{
    char name[64];
    snprintf(name, sizeof name, "@tomolive-check-notify-%ld", (long)getpid());
    tl_notify_listener *a = tl_notify_listener_open(name);
    ck_assert_ptr_nonnull(a);
    setenv("NOTIFY_SOCKET", name, 1);
    ck_assert_int_gt(tl_notify_ready(), 0);
    ck_assert(tl_notify_listener_wait(a, "READY=1", 2000));
    tl_notify_listener_close(a);
}
END_TEST

/* Not under systemd: every call is a no-op returning 0. */
START_TEST(test_without_socket)
{
    unsetenv("NOTIFY_SOCKET");
    ck_assert_int_eq(tl_notify_ready(), 0);
    ck_assert_int_eq(tl_notify_reloading(), 0);
    ck_assert_int_eq(tl_notify_status("x"), 0);
    ck_assert_int_eq(tl_notify_watchdog(), 0);
    ck_assert_int_eq(tl_notify_stopping(), 0);
    ck_assert(!tl_notify_listener_wait(l, "READY=1", 100));
    /* a socket that is gone: an error to report, not a crash */
    char gone[600];
    snprintf(gone, sizeof gone, "%s/none", tmpdir);
    setenv("NOTIFY_SOCKET", gone, 1);
    ck_assert_int_lt(tl_notify_ready(), 0);
}
END_TEST

START_TEST(test_watchdog_usec)
{
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    ck_assert_uint_eq(tl_notify_watchdog_usec(), 0);
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    setenv("WATCHDOG_USEC", "10000000", 1);
    setenv("WATCHDOG_PID", pid, 1);
    ck_assert_uint_eq(tl_notify_watchdog_usec(), 10000000);
    /* meant for another process (inherited): not ours */
    snprintf(pid, sizeof pid, "%ld", (long)getppid());
    setenv("WATCHDOG_PID", pid, 1);
    ck_assert_uint_eq(tl_notify_watchdog_usec(), 0);
    unsetenv("WATCHDOG_PID");
    ck_assert_uint_eq(tl_notify_watchdog_usec(), 10000000);
    setenv("WATCHDOG_USEC", "bogus", 1);
    ck_assert_uint_eq(tl_notify_watchdog_usec(), 0);
}
END_TEST

static Suite *notify_suite(void)
{
    Suite *s = suite_create("notify");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_ready_stopping_watchdog);
    tcase_add_test(tc, test_reloading);
    tcase_add_test(tc, test_status);
    tcase_add_test(tc, test_listener);
    tcase_add_test(tc, test_abstract_socket);
    tcase_add_test(tc, test_without_socket);
    tcase_add_test(tc, test_watchdog_usec);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    tmpdir = tl_tmpdir("notify");
    if (!tmpdir)
        return 99;
    int rc = tl_run_suite(notify_suite(), false);
    tl_rm_rf(tmpdir);
    return rc;
}
