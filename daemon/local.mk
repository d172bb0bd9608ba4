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

# The daemon. Its pieces that need no sockets (stats, queue, subscriptions, slice policy,
# buffer pool) are a library too, so unit tests can link them.
noinst_LIBRARIES += daemon/libtlcore.a
daemon_libtlcore_a_SOURCES = \
	daemon/stats.h daemon/stats.c \
	daemon/queue.h daemon/queue.c \
	daemon/subs.h daemon/subs.c \
	daemon/slices.h daemon/slices.c \
	daemon/bufpool.h daemon/bufpool.c
daemon_libtlcore_a_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS)
DAEMON_CORE_LIBS = daemon/libtlcore.a

sbin_PROGRAMS += daemon/tomolived
daemon_tomolived_SOURCES = \
	daemon/daemon.h daemon/main.c \
	daemon/zwatch.h daemon/zwatch.c \
	daemon/adapter.h daemon/adapter_native.c daemon/ingest.c daemon/worker.c daemon/scan.c \
	daemon/publisher.h daemon/publisher.c \
	daemon/control.c daemon/commands.c
daemon_tomolived_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) $(UV_CFLAGS) $(INIH_CFLAGS) $(SYSTEMD_CFLAGS)
daemon_tomolived_LDADD = $(DAEMON_CORE_LIBS) $(DAEMON_UTIL_LIBS) $(PROTO_LIBS) $(ENGINE_LIBS) $(UV_LIBS)
