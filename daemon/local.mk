# daemon/ — tomolived.

# Configuration, logging and systemd notification: a convenience library that tomolived and
# the daemon's unit tests link with DAEMON_UTIL_LIBS.
noinst_LIBRARIES += daemon/libtldaemon.a
daemon_libtldaemon_a_SOURCES = \
	daemon/config.h daemon/config.c \
	daemon/log.h daemon/log.c \
	daemon/notify.h daemon/notify.c
daemon_libtldaemon_a_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS) $(SYSTEMD_CFLAGS)
DAEMON_UTIL_LIBS = daemon/libtldaemon.a $(INIH_LIBS) $(SYSTEMD_LIBS)
