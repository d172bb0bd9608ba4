# daemon/ — tomolived, by concern, each folder a layer that uses only those below it:
#   daemon/          main.c, lifecycle (start, loop, stop: wires everything), man page, www/
#   daemon/serve/    what the daemon serves: control socket and commands, HTTP, metrics,
#                    preview images, the RECAST3D link
#   daemon/core/     tl_daemon (core/daemon.h) and its threads: ingest thread, worker, scan,
#                    kernel tuning, slices in shared memory, the publisher
#   daemon/ingest/   stream formats (adapters) and frame sources: bitshuffle, row bands,
#                    frames in GPU memory
#   daemon/base/     settings, log, notify, stats, queue, subscriptions, slice policy,
#                    pacing, buffer pool, outbox, zwatch, zbind
# (and protocol/, gpu/ below them all). Nothing in a folder includes or calls a folder above
# it; the layer above hands down function pointers where it must be called back.

# ---- base/ ----------------------------------------------------------------------------------

# Settings, logging, systemd notification and the MPI link: a convenience library that
# tomolived and the daemon's unit tests link with DAEMON_UTIL_LIBS.
noinst_LIBRARIES += daemon/libtldaemon.a
daemon_libtldaemon_a_SOURCES = \
	daemon/base/settings.h daemon/base/settings.c \
	daemon/base/log.h daemon/base/log.c \
	daemon/base/notify.h daemon/base/notify.c \
	daemon/base/mpilink.h daemon/base/mpilink.c
daemon_libtldaemon_a_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS) $(SYSTEMD_CFLAGS) $(MPI_CFLAGS)
DAEMON_UTIL_LIBS = daemon/libtldaemon.a $(INIH_LIBS) $(SYSTEMD_LIBS) $(MPI_LIBS)

# The rest of base/ (stats, queue, subscriptions, slice policy, read-out pacing, buffer
# pool, outbox, socket watchers and binding), so unit tests can link them. DAEMON_CORE_LIBS adds the frame
# pieces of ingest/ (row bands) that those tests use too.
noinst_LIBRARIES += daemon/libtlcore.a
daemon_libtlcore_a_SOURCES = \
	daemon/base/stats.h daemon/base/stats.c \
	daemon/base/queue.h daemon/base/queue.c \
	daemon/base/subs.h daemon/base/subs.c \
	daemon/base/slices.h daemon/base/slices.c \
	daemon/base/pacing.h daemon/base/pacing.c \
	daemon/base/bufpool.h daemon/base/bufpool.c \
	daemon/base/heap.h daemon/base/heap.c \
	daemon/base/outbox.h daemon/base/outbox.c \
	daemon/base/zwatch.h daemon/base/zwatch.c \
	daemon/base/zbind.h daemon/base/zbind.c \
	daemon/base/auth.h daemon/base/auth.c
daemon_libtlcore_a_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) $(UV_CFLAGS)
DAEMON_CORE_LIBS = daemon/libtlcore.a daemon/ingest/libtlingest.a

# ---- ingest/ --------------------------------------------------------------------------------

# The ingest formats (daemon/ingest/adapter.h: tomolive's own, DECTRIS Stream V2 and V1,
# the JSON header + blob presets, tomopackets), what they share (the stream and scan
# synthesis, the frame pool, the JSON arena, the DECTRIS series, bitshuffle/LZ4 decoding),
# frames sent in row bands and frames in GPU memory: a library of their own, which needs
# no daemon, so tests/unit/check_adapters* feed it messages directly (ADAPTER_LIBS).
noinst_LIBRARIES += daemon/ingest/libtlingest.a
daemon_ingest_libtlingest_a_SOURCES = \
	daemon/ingest/adapter.h daemon/ingest/adapter.c daemon/ingest/adapter_native.c \
	daemon/ingest/adapter_dectris2.c daemon/ingest/adapter_dectris1.c \
	daemon/ingest/adapter_json.c daemon/ingest/adapter_tomopackets.c \
	daemon/ingest/tomopackets.h daemon/ingest/tomopackets_vec.h daemon/ingest/tomopackets_vec.c \
	daemon/ingest/adapter_stream.h daemon/ingest/adapter_stream.c \
	daemon/ingest/framepool.h daemon/ingest/framepool.c \
	daemon/ingest/json_arena.h daemon/ingest/json_arena.c \
	daemon/ingest/det_series.h daemon/ingest/det_series.c \
	daemon/ingest/pixel_mask.h daemon/ingest/pixel_mask.c \
	daemon/ingest/bitshuffle.h daemon/ingest/bitshuffle.c \
	daemon/ingest/bands.h daemon/ingest/bands.c \
	daemon/ingest/ipc_frames.h daemon/ingest/ipc_frames.c \
	daemon/ingest/release_allow.h daemon/ingest/release_allow.c
daemon_ingest_libtlingest_a_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS) \
	$(CBOR_CFLAGS) $(LZ4_CFLAGS)
# gpu/: the cone-beam matrix arithmetic of RECAST3D's ConeVecGeometry (gpu/geometry/cone.h,
# its objects alone: no backend, no FFTW)
ADAPTER_LIBS = daemon/ingest/libtlingest.a $(DAEMON_UTIL_LIBS) $(PROTO_LIBS) $(CBOR_LIBS) \
	$(LZ4_LIBS) $(JANSSON_LIBS) gpu/libtlengine.a gpu/libtlbase.a -lm

# ---- core/, serve/ and the top: the daemon ---------------------------------------------------

# The daemon itself (lifecycle.h: start, loop, shutdown) as a library: tomolived is main.c
# and the HTTP server around it, and the HTTP fuzzer (tests/fuzz/fuzz_http.c) links the same
# library around its own instrumented build of http.c.
noinst_LIBRARIES += daemon/libtomolived.a
daemon_libtomolived_a_SOURCES = \
	daemon/lifecycle.h daemon/lifecycle.c \
	daemon/core/daemon.h daemon/core/ingest.c daemon/core/worker.c daemon/core/scan.c \
	daemon/core/tuning.c daemon/core/slice_shm.c \
	daemon/core/publisher.h daemon/core/publisher.c \
	daemon/serve/control.h daemon/serve/control.c \
	daemon/serve/commands.h daemon/serve/commands.c \
	daemon/serve/recast3d.h daemon/serve/recast3d.c
daemon_libtomolived_a_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) $(UV_CFLAGS) $(INIH_CFLAGS) \
	$(SYSTEMD_CFLAGS) $(LWS_CFLAGS) $(JANSSON_CFLAGS) $(CBOR_CFLAGS) $(LZ4_CFLAGS)
DAEMON_LIBS = daemon/libtomolived.a daemon/ingest/libtlingest.a

sbin_PROGRAMS += daemon/tomolived
daemon_tomolived_SOURCES = daemon/main.c
daemon_tomolived_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) $(UV_CFLAGS) $(INIH_CFLAGS) $(SYSTEMD_CFLAGS)
daemon_tomolived_LDADD = $(DAEMON_LIBS) $(DAEMON_CORE_LIBS) $(DAEMON_UTIL_LIBS) $(PROTO_LIBS) \
	$(ENGINE_LIBS) $(UV_LIBS)

# The HTTP server: the live preview page, /metrics and /api/status (daemon/serve/http.h),
# with libwebsockets on the daemon's libuv loop. Its pure parts — routing, preview images,
# Prometheus text — are a library of their own, so unit tests link them without a daemon.
noinst_LIBRARIES += daemon/libtlhttp.a
daemon_libtlhttp_a_SOURCES = \
	daemon/serve/http.h daemon/serve/http_route.c \
	daemon/serve/preview.h daemon/serve/preview.c \
	daemon/serve/metrics.h daemon/serve/metrics.c
daemon_libtlhttp_a_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS)
HTTP_CORE_LIBS = daemon/libtlhttp.a
daemon_tomolived_SOURCES += daemon/serve/http.c
# a daemon run from the build tree (TL_BUILD_EXE) serves the page of the source tree
daemon_tomolived_CPPFLAGS = $(AM_CPPFLAGS) -DTL_WWW_DIR='"$(wwwdir)"' \
	-DTL_BUILD_EXE='"$(abs_top_builddir)/daemon/tomolived"' \
	-DTL_SOURCE_WWW_DIR='"$(abs_top_srcdir)/daemon/www"'
daemon_tomolived_CFLAGS += $(LWS_CFLAGS) $(JANSSON_CFLAGS)
daemon_tomolived_LDADD += $(HTTP_CORE_LIBS) $(DAEMON_CORE_LIBS) $(PROTO_LIBS) $(JSONPACK_LIBS) \
	$(LWS_LIBS) $(ADAPTER_LIBS)
# the page: plain HTML/JS/CSS, no build step; http.root (empty) means this directory, or
# daemon/www of the source tree for the daemon of the build tree
wwwdir = $(pkgdatadir)/www
dist_www_DATA = daemon/www/index.html daemon/www/app.js daemon/www/style.css

# man page
dist_man8_MANS = daemon/tomolived.8
