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
# read-out pacing, buffer pool) are a library too, so unit tests can link them.
noinst_LIBRARIES += daemon/libtlcore.a
daemon_libtlcore_a_SOURCES = \
	daemon/stats.h daemon/stats.c \
	daemon/queue.h daemon/queue.c \
	daemon/subs.h daemon/subs.c \
	daemon/slices.h daemon/slices.c \
	daemon/pacing.h daemon/pacing.c \
	daemon/bands.h daemon/bands.c \
	daemon/bufpool.h daemon/bufpool.c
daemon_libtlcore_a_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS)
DAEMON_CORE_LIBS = daemon/libtlcore.a

# The daemon itself (lifecycle.h: start, loop, shutdown) as a library: tomolived is main.c
# and the HTTP server around it, and the HTTP fuzzer (tests/fuzz/fuzz_http.c) links the same
# library around its own instrumented build of http.c.
noinst_LIBRARIES += daemon/libtomolived.a
daemon_libtomolived_a_SOURCES = \
	daemon/daemon.h daemon/lifecycle.h daemon/lifecycle.c \
	daemon/zwatch.h daemon/zwatch.c \
	daemon/adapter.h daemon/adapter_native.c daemon/ingest.c daemon/worker.c daemon/scan.c \
	daemon/tuning.c daemon/slice_shm.c daemon/ipc_frames.h daemon/ipc_frames.c \
	daemon/publisher.h daemon/publisher.c \
	daemon/control.c daemon/commands.c
daemon_libtomolived_a_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) $(UV_CFLAGS) $(INIH_CFLAGS) \
	$(SYSTEMD_CFLAGS) $(LWS_CFLAGS) $(JANSSON_CFLAGS) $(CBOR_CFLAGS) $(LZ4_CFLAGS)
DAEMON_LIBS = daemon/libtomolived.a

sbin_PROGRAMS += daemon/tomolived
daemon_tomolived_SOURCES = daemon/main.c
daemon_tomolived_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) $(UV_CFLAGS) $(INIH_CFLAGS) $(SYSTEMD_CFLAGS)
daemon_tomolived_LDADD = $(DAEMON_LIBS) $(DAEMON_CORE_LIBS) $(DAEMON_UTIL_LIBS) $(PROTO_LIBS) \
	$(ENGINE_LIBS) $(UV_LIBS)

# The HTTP server: the live preview page, /metrics and /api/status (daemon/http.h), with
# libwebsockets on the daemon's libuv loop. Its pure parts — routing, preview images,
# Prometheus text — are a library of their own, so unit tests link them without a daemon.
noinst_LIBRARIES += daemon/libtlhttp.a
daemon_libtlhttp_a_SOURCES = \
	daemon/http.h daemon/http_route.c \
	daemon/preview.h daemon/preview.c \
	daemon/metrics.h daemon/metrics.c
daemon_libtlhttp_a_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS)
HTTP_CORE_LIBS = daemon/libtlhttp.a
daemon_tomolived_SOURCES += daemon/http.c
daemon_tomolived_CPPFLAGS = $(AM_CPPFLAGS) -DTL_WWW_DIR='"$(wwwdir)"'
daemon_tomolived_CFLAGS += $(LWS_CFLAGS) $(JANSSON_CFLAGS)
daemon_tomolived_LDADD += $(HTTP_CORE_LIBS) $(DAEMON_CORE_LIBS) $(PROTO_LIBS) $(JSONPACK_LIBS) $(LWS_LIBS)
# the page: plain HTML/JS/CSS, no build step; http.root (empty) means this directory
wwwdir = $(pkgdatadir)/www
dist_www_DATA = daemon/www/index.html daemon/www/app.js daemon/www/style.css

# man page
dist_man8_MANS = daemon/tomolived.8

# Detectors and viewers: the ingest formats besides tomolive's (daemon/adapter.h: DECTRIS
# Stream V2 and V1, the JSON header + blob presets, tomopackets), what they share
# (adapter_util, bitshuffle/LZ4 decoding) and the RECAST3D viewer link.
daemon_libtomolived_a_SOURCES += \
	daemon/adapter.c daemon/adapter_util.h daemon/adapter_util.c \
	daemon/bitshuffle.h daemon/bitshuffle.c \
	daemon/adapter_dectris2.c daemon/adapter_dectris1.c daemon/adapter_json.c \
	daemon/adapter_tomopackets.c \
	daemon/recast3d.h daemon/recast3d.c
daemon_tomolived_LDADD += $(CBOR_LIBS) $(LZ4_LIBS) $(JANSSON_LIBS)
