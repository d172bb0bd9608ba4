# fuzzing every decoder: one libFuzzer target per decoder, each its own binary (so each has
# its own executions and coverage), tests/fuzz/fuzz_NAME:
#
#   header               the native header decoder (protocol/decode*.c, parts.c)
#   control              a control request as the control socket takes it (decode, the
#                        args getters of the commands, the error reply)
#   adapter-FORMAT       one ingest adapter (daemon/ingest/adapter.h): native, dectris2
#                        (CBOR, bitshuffle/LZ4), dectris1, stddaq, concert, array10,
#                        tomopackets; fuzz_adapters.c built once per format
#   http                 bytes from a TCP peer against a whole daemon's HTTP server
#   ws                   the preview page's WebSocket messages against a whole daemon
#   http-route           the pure HTTP parts: routing, MIME types, http.listen
#   settings             the configuration file parser (daemon/base/settings.c, inih)
#   tiff, hdf5           the readers of `tomolive recon` (clients/tiff.c, clients/hdf5.c)
#   cone-read            recon's --matrices readers (clients/cone_read.h: text, .npy, ASTRA,
#                        RTK XML through libxml2)
#
# Seeds: one checked-in directory per target, tests/fuzz/NAME-corpus (the adapters share
# adapters-corpus, the header's is tests/fuzz/corpus; gen_fuzz_seeds writes control, ws,
# http-route, settings, tiff, hdf5 and cone-read: `make fuzz-seeds`). What a run finds goes to
# tests/fuzz/run/NAME/corpus in the build tree (ignored by git), crashes to
# tests/fuzz/run/NAME/crash-*. With shared/data, DECTRIS's recorded Stream V2 messages are
# seeds of the adapters too (wrapped into inputs at run time: tests/fuzz/adapters-recorded).
# Leaks inside system libraries are suppressed, each with its reason, in tests/sanitizers.supp.
#
#   make fuzz [FUZZ_SECONDS=600] [FUZZ_JOBS=1] [FUZZ_TARGETS="header control ..."]
#       builds and runs the targets, FUZZ_JOBS at a time, then prints one table: target,
#       seconds, executions, exec/s, cov and ft (libFuzzer's final figures), corpus size,
#       crashes (tests/fuzz/fuzz_all.sh). Fails if any target crashed.
#   make fuzz-smoke      every target for 15 s, two at a time (CI: .ci/run)
#   make fuzz-header, fuzz-control, fuzz-adapters (the seven formats), fuzz-http, ...
#
# Only the harness and the code it tests are built by clang with libFuzzer, ASan and UBSan;
# the rest (settings, log, the daemon around the HTTP server) comes from the normal build.
# `make check` runs every harness over its seeds without libFuzzer (tests/fuzz/replay.c, and
# check_adapters_corpus for the adapters), so seeds and properties are checked everywhere.

FUZZ_SECONDS = 600
FUZZ_JOBS = 1
FUZZ_ADAPTER_FORMATS = native dectris2 dectris1 stddaq concert array10 tomopackets
FUZZ_TARGETS = header control $(FUZZ_ADAPTER_FORMATS:%=adapter-%) http ws http-route \
	settings tiff hdf5 cone-read
FUZZ_FLAGS = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1
FUZZ_PROTO_SRCS = $(filter %.c,$(protocol_libtlproto_a_SOURCES))
FUZZ_CHECK_CC = @if test -z "$(FUZZ_CC)" || test "x$(FUZZ_CC)" = xno; then \
	  echo "make fuzz needs clang with libFuzzer: configure FUZZ_CC=clang" >&2; exit 1; fi; \
	  $(MKDIR_P) tests/fuzz
FUZZ_COMPILE = $(AM_V_CC)$(FUZZ_CC) $(FUZZ_FLAGS) -I$(top_srcdir) -I$(top_builddir)

EXTRA_DIST += tests/fuzz/fuzz_all.sh tests/fuzz/corpus \
	tests/fuzz/control-corpus tests/fuzz/ws-corpus tests/fuzz/http-route-corpus \
	tests/fuzz/settings-corpus tests/fuzz/tiff-corpus tests/fuzz/hdf5-corpus \
	tests/fuzz/cone-read-corpus \
	tests/fuzz/http-corpus tests/fuzz/adapters-corpus
CLEANFILES += $(FUZZ_TARGETS:%=tests/fuzz/fuzz_%)

# ---- header, control ------------------------------------------------------------------------
FUZZ_HEADER_SRCS = tests/fuzz/fuzz_header.c $(FUZZ_PROTO_SRCS)
tests/fuzz/fuzz_header: $(FUZZ_HEADER_SRCS:%=$(srcdir)/%) $(srcdir)/protocol/protocol.h \
		$(srcdir)/protocol/proto_internal.h config.h
	$(FUZZ_CHECK_CC)
	$(FUZZ_COMPILE) $(PROTO_CFLAGS) -o $@ $(FUZZ_HEADER_SRCS:%=$(srcdir)/%) $(PROTO_LIBS:protocol/libtlproto.a=)

FUZZ_CONTROL_SRCS = tests/fuzz/fuzz_control.c $(FUZZ_PROTO_SRCS)
tests/fuzz/fuzz_control: $(FUZZ_CONTROL_SRCS:%=$(srcdir)/%) $(srcdir)/protocol/protocol.h \
		$(srcdir)/protocol/proto_internal.h config.h
	$(FUZZ_CHECK_CC)
	$(FUZZ_COMPILE) $(PROTO_CFLAGS) -o $@ $(FUZZ_CONTROL_SRCS:%=$(srcdir)/%) $(PROTO_LIBS:protocol/libtlproto.a=)

# ---- the ingest adapters: fuzz_adapters.c once per format ----------------------------------
# An input's first byte picks the format (fuzz_adapters.h); built with TLT_FZ_ONLY, the
# binary keeps the byte's settings variant but always runs its own format.
FUZZ_ADAPTER_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS) $(CBOR_CFLAGS) $(LZ4_CFLAGS)
FUZZ_ADAPTER_SEEDS = tests/fuzz/adapters_seeds.h tests/fuzz/adapters_seeds.c \
	tests/fuzz/fuzz_adapters.h

check_PROGRAMS += tests/fuzz/check_adapters_corpus tests/fuzz/gen_adapters_corpus
TESTS += tests/fuzz/check_adapters_corpus
tests_fuzz_check_adapters_corpus_SOURCES = tests/fuzz/check_adapters_corpus.c \
	tests/fuzz/fuzz_adapters.c $(FUZZ_ADAPTER_SEEDS)
tests_fuzz_check_adapters_corpus_CFLAGS = $(FUZZ_ADAPTER_CFLAGS)
tests_fuzz_check_adapters_corpus_LDADD = $(ADAPTER_LIBS) -lm
tests_fuzz_gen_adapters_corpus_SOURCES = tests/fuzz/gen_adapters_corpus.c $(FUZZ_ADAPTER_SEEDS)
tests_fuzz_gen_adapters_corpus_CFLAGS = $(FUZZ_ADAPTER_CFLAGS)
tests_fuzz_gen_adapters_corpus_LDADD = $(ADAPTER_LIBS) -lm

# the formats and what they decode with; not the frame sources (row bands, GPU memory)
FUZZ_ADAPTER_SRCS = tests/fuzz/fuzz_adapters.c $(FUZZ_PROTO_SRCS) $(filter-out \
	daemon/ingest/bands.c daemon/ingest/ipc_frames.c, \
	$(filter %.c,$(daemon_ingest_libtlingest_a_SOURCES))) \
	gpu/geometry/cone.c gpu/base/fail.c
FUZZ_FORMAT_native = TLT_FZ_NATIVE
FUZZ_FORMAT_dectris2 = TLT_FZ_DECTRIS2
FUZZ_FORMAT_dectris1 = TLT_FZ_DECTRIS1
FUZZ_FORMAT_stddaq = TLT_FZ_STD_DAQ
FUZZ_FORMAT_concert = TLT_FZ_CONCERT
FUZZ_FORMAT_array10 = TLT_FZ_ARRAY10
FUZZ_FORMAT_tomopackets = TLT_FZ_TOMOPACKETS

tests/fuzz/fuzz_adapter-%: $(FUZZ_ADAPTER_SRCS:%=$(srcdir)/%) \
		$(srcdir)/tests/fuzz/fuzz_adapters.h $(srcdir)/daemon/ingest/adapter.h \
		$(srcdir)/protocol/protocol.h config.h daemon/libtldaemon.a
	$(FUZZ_CHECK_CC)
	$(FUZZ_COMPILE) -DTLT_FZ_ONLY=$(FUZZ_FORMAT_$*) $(PROTO_CFLAGS) $(JANSSON_CFLAGS) \
	  $(CBOR_CFLAGS) $(LZ4_CFLAGS) -o $@ $(FUZZ_ADAPTER_SRCS:%=$(srcdir)/%) \
	  $(DAEMON_UTIL_LIBS) $(MSGPACK_LIBS) $(ZMQ_LIBS) $(CBOR_LIBS) $(LZ4_LIBS) $(JANSSON_LIBS) -lm

# the recorded messages (1 MiB each) are seeds too when shared/data is there
FUZZ_TESTDATA = $(firstword $(TOMOLIVE_TEST_DATA) $(wildcard $(abs_top_srcdir)/shared/data \
	$(abs_top_srcdir)/../shared/data))
fuzz-adapters-recorded: tests/fuzz/gen_adapters_corpus$(EXEEXT)
	@$(MKDIR_P) tests/fuzz/adapters-recorded
	@if test -n "$(FUZZ_TESTDATA)" && test -d "$(FUZZ_TESTDATA)/dectris-stream2-32bit"; then \
	  ./tests/fuzz/gen_adapters_corpus$(EXEEXT) --wrap $(FUZZ_TESTDATA) tests/fuzz/adapters-recorded; \
	else echo "no shared/data: the recorded DECTRIS messages are not seeds this time"; fi

# Rewrites the checked-in seeds (with shared/data, the cropped recorded image too).
fuzz-adapters-corpus: tests/fuzz/gen_adapters_corpus$(EXEEXT)
	./tests/fuzz/gen_adapters_corpus$(EXEEXT) $(srcdir)/tests/fuzz/adapters-corpus $(srcdir) \
	  $(FUZZ_TESTDATA)

# ---- HTTP and WebSocket: a whole daemon in the fuzzer's process -----------------------------
# Only http.c and the harness are instrumented; fuzz_http.c says how an input is served.
# Built with TLT_FUZZ_WS it opens the preview's WebSocket first and sends the input as
# its messages (fuzz_http.c).
FUZZ_HTTP_SRCS = tests/fuzz/fuzz_http.c daemon/serve/http.c
FUZZ_HTTP_DEPS = $(FUZZ_HTTP_SRCS:%=$(srcdir)/%) $(srcdir)/daemon/serve/http.h \
	$(srcdir)/daemon/lifecycle.h $(srcdir)/daemon/core/daemon.h $(DAEMON_LIBS) \
	$(HTTP_CORE_LIBS) $(DAEMON_CORE_LIBS) daemon/libtldaemon.a
FUZZ_HTTP_CFLAGS = -DTL_WWW_DIR='"$(wwwdir)"' \
	-DTL_BUILD_EXE='"$(abs_top_builddir)/daemon/tomolived"' \
	-DTL_SOURCE_WWW_DIR='"$(abs_top_srcdir)/daemon/www"' $(PROTO_CFLAGS) $(UV_CFLAGS) $(LWS_CFLAGS) \
	$(JANSSON_CFLAGS)
FUZZ_HTTP_LIBS = $(DAEMON_LIBS) $(HTTP_CORE_LIBS) $(DAEMON_CORE_LIBS) $(DAEMON_UTIL_LIBS) \
	$(PROTO_LIBS) $(JSONPACK_LIBS) $(ENGINE_LIBS) $(UV_LIBS) $(LWS_LIBS) $(CBOR_LIBS) \
	$(LZ4_LIBS) $(JANSSON_LIBS) -lstdc++
tests/fuzz/fuzz_http: $(FUZZ_HTTP_DEPS)
	$(FUZZ_CHECK_CC)
	$(FUZZ_COMPILE) $(FUZZ_HTTP_CFLAGS) -o $@ $(FUZZ_HTTP_SRCS:%=$(srcdir)/%) $(FUZZ_HTTP_LIBS)
tests/fuzz/fuzz_ws: $(FUZZ_HTTP_DEPS)
	$(FUZZ_CHECK_CC)
	$(FUZZ_COMPILE) -DTLT_FUZZ_WS $(FUZZ_HTTP_CFLAGS) -o $@ $(FUZZ_HTTP_SRCS:%=$(srcdir)/%) \
	  $(FUZZ_HTTP_LIBS)

FUZZ_ROUTE_SRCS = tests/fuzz/fuzz_http_route.c daemon/serve/http_route.c
tests/fuzz/fuzz_http-route: $(FUZZ_ROUTE_SRCS:%=$(srcdir)/%) $(srcdir)/daemon/serve/http.h config.h
	$(FUZZ_CHECK_CC)
	$(FUZZ_COMPILE) -o $@ $(FUZZ_ROUTE_SRCS:%=$(srcdir)/%)

# ---- the configuration file, the readers of tomolive recon ---------------------------------
FUZZ_SETTINGS_SRCS = tests/fuzz/fuzz_settings.c daemon/base/settings.c
tests/fuzz/fuzz_settings: $(FUZZ_SETTINGS_SRCS:%=$(srcdir)/%) \
		$(srcdir)/daemon/base/settings.h config.h daemon/libtldaemon.a
	$(FUZZ_CHECK_CC)
	$(FUZZ_COMPILE) $(INIH_CFLAGS) -o $@ $(FUZZ_SETTINGS_SRCS:%=$(srcdir)/%) $(DAEMON_UTIL_LIBS) -lm

FUZZ_TIFF_SRCS = tests/fuzz/fuzz_tiff.c clients/tiff.c gpu/base/names.c
tests/fuzz/fuzz_tiff: $(FUZZ_TIFF_SRCS:%=$(srcdir)/%) $(srcdir)/clients/tiff.h config.h
	$(FUZZ_CHECK_CC)
	$(FUZZ_COMPILE) $(TIFF_CFLAGS) -o $@ $(FUZZ_TIFF_SRCS:%=$(srcdir)/%) $(TIFF_LIBS)

FUZZ_HDF5_SRCS = tests/fuzz/fuzz_hdf5.c clients/hdf5.c
tests/fuzz/fuzz_hdf5: $(FUZZ_HDF5_SRCS:%=$(srcdir)/%) $(srcdir)/clients/hdf5.h config.h
	$(FUZZ_CHECK_CC)
	$(FUZZ_COMPILE) $(HDF5_CFLAGS) -o $@ $(FUZZ_HDF5_SRCS:%=$(srcdir)/%) $(HDF5_LIBS) -lm

FUZZ_CONE_READ_SRCS = tests/fuzz/fuzz_cone_read.c clients/cone_read.c clients/cone_read_rtk.c \
	clients/npy.c gpu/geometry/cone.c gpu/base/fail.c
tests/fuzz/fuzz_cone-read: $(FUZZ_CONE_READ_SRCS:%=$(srcdir)/%) $(srcdir)/clients/cone_read.h \
		$(srcdir)/clients/npy.h config.h
	$(FUZZ_CHECK_CC)
	$(FUZZ_COMPILE) $(LIBXML_CFLAGS) -o $@ $(FUZZ_CONE_READ_SRCS:%=$(srcdir)/%) $(LIBXML_LIBS) -lm

# ---- the harnesses without libFuzzer, over their seeds: `make check` ------------------------
FUZZ_REPLAYS = tests/fuzz/replay_header tests/fuzz/replay_control tests/fuzz/replay_http \
	tests/fuzz/replay_ws tests/fuzz/replay_http_route tests/fuzz/replay_settings \
	tests/fuzz/replay_tiff tests/fuzz/replay_hdf5 tests/fuzz/replay_cone_read
check_PROGRAMS += $(FUZZ_REPLAYS) tests/fuzz/gen_fuzz_seeds
TESTS += $(FUZZ_REPLAYS)
tests_fuzz_replay_header_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_header.c
tests_fuzz_replay_header_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) -DTLT_REPLAY_CORPUS='"corpus"'
tests_fuzz_replay_header_LDADD = $(PROTO_LIBS)
tests_fuzz_replay_control_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_control.c
tests_fuzz_replay_control_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) \
	-DTLT_REPLAY_CORPUS='"control-corpus"'
tests_fuzz_replay_control_LDADD = $(PROTO_LIBS)
tests_fuzz_replay_http_SOURCES = tests/fuzz/replay.c $(FUZZ_HTTP_SRCS)
tests_fuzz_replay_http_CFLAGS = $(AM_CFLAGS) $(FUZZ_HTTP_CFLAGS) -DTLT_REPLAY_CORPUS='"http-corpus"'
tests_fuzz_replay_http_LDADD = $(FUZZ_HTTP_LIBS)
tests_fuzz_replay_ws_SOURCES = tests/fuzz/replay.c $(FUZZ_HTTP_SRCS)
tests_fuzz_replay_ws_CFLAGS = $(AM_CFLAGS) $(FUZZ_HTTP_CFLAGS) -DTLT_FUZZ_WS \
	-DTLT_REPLAY_CORPUS='"ws-corpus"'
tests_fuzz_replay_ws_LDADD = $(FUZZ_HTTP_LIBS)
tests_fuzz_replay_http_route_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_http_route.c
tests_fuzz_replay_http_route_CFLAGS = $(AM_CFLAGS) -DTLT_REPLAY_CORPUS='"http-route-corpus"'
tests_fuzz_replay_http_route_LDADD = $(HTTP_CORE_LIBS)
tests_fuzz_replay_settings_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_settings.c
tests_fuzz_replay_settings_CFLAGS = $(AM_CFLAGS) -DTLT_REPLAY_CORPUS='"settings-corpus"'
tests_fuzz_replay_settings_LDADD = $(DAEMON_UTIL_LIBS) -lm
tests_fuzz_replay_tiff_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_tiff.c
tests_fuzz_replay_tiff_CFLAGS = $(AM_CFLAGS) $(TIFF_CFLAGS) -DTLT_REPLAY_CORPUS='"tiff-corpus"'
tests_fuzz_replay_tiff_LDADD = $(IMAGE_LIBS) $(ENGINE_LIBS)
tests_fuzz_replay_hdf5_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_hdf5.c clients/hdf5.c
tests_fuzz_replay_hdf5_CFLAGS = $(AM_CFLAGS) $(HDF5_CFLAGS) -DTLT_REPLAY_CORPUS='"hdf5-corpus"'
tests_fuzz_replay_hdf5_LDADD = $(HDF5_LIBS) -lm
tests_fuzz_replay_cone_read_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_cone_read.c \
	clients/cone_read.c clients/cone_read_rtk.c clients/npy.c
tests_fuzz_replay_cone_read_CFLAGS = $(AM_CFLAGS) $(LIBXML_CFLAGS) \
	-DTLT_REPLAY_CORPUS='"cone-read-corpus"'
tests_fuzz_replay_cone_read_LDADD = $(ENGINE_LIBS) $(LIBXML_LIBS)
# writes the seeds of control, ws, http-route, settings, tiff, hdf5 and cone-read
tests_fuzz_gen_fuzz_seeds_SOURCES = tests/fuzz/gen_fuzz_seeds.c
tests_fuzz_gen_fuzz_seeds_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS) $(TIFF_CFLAGS) $(HDF5_CFLAGS)
tests_fuzz_gen_fuzz_seeds_LDADD = $(IMAGE_LIBS) $(ENGINE_LIBS) $(DAEMON_UTIL_LIBS) $(PROTO_LIBS) $(HDF5_LIBS) -lm

# ---- running them -----------------------------------------------------------------------------
fuzz: $(FUZZ_TARGETS:%=tests/fuzz/fuzz_%) fuzz-adapters-recorded
	top_srcdir=$(abs_top_srcdir) FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) \
	  $(SHELL) $(srcdir)/tests/fuzz/fuzz_all.sh $(FUZZ_TARGETS)

# CI: every target briefly (15 s each, two at a time: about 2 minutes after the build)
# (skipped, saying so, where configure found no clang that links libFuzzer)
fuzz-smoke:
	@if test -z "$(FUZZ_CC)" || test "x$(FUZZ_CC)" = xno; then \
	  echo "fuzz-smoke: skipped: no clang with libFuzzer (Debian: clang libclang-rt-14-dev)"; \
	else $(MAKE) $(AM_MAKEFLAGS) fuzz FUZZ_SECONDS=15 FUZZ_JOBS=2; fi

fuzz-header fuzz-control fuzz-http fuzz-ws fuzz-http-route fuzz-settings fuzz-tiff fuzz-hdf5 \
		fuzz-cone-read:
	$(MAKE) $(AM_MAKEFLAGS) fuzz FUZZ_TARGETS=$(@:fuzz-%=%)
fuzz-adapters:
	$(MAKE) $(AM_MAKEFLAGS) fuzz FUZZ_TARGETS="$(FUZZ_ADAPTER_FORMATS:%=adapter-%)"

# Rewrites the checked-in seeds (the only rules that write into the source tree).
fuzz-corpus: tests/fuzz/gen_corpus$(EXEEXT)
	./tests/fuzz/gen_corpus$(EXEEXT) $(srcdir)/tests/fuzz/corpus
fuzz-seeds: tests/fuzz/gen_fuzz_seeds$(EXEEXT)
	./tests/fuzz/gen_fuzz_seeds$(EXEEXT) $(srcdir)/tests/fuzz

clean-fuzz:
	rm -rf tests/fuzz/run tests/fuzz/adapters-recorded $(FUZZ_TARGETS:%=tests/fuzz/fuzz_%)

.PHONY: fuzz fuzz-smoke fuzz-header fuzz-control fuzz-adapters fuzz-http fuzz-ws \
	fuzz-http-route fuzz-settings fuzz-tiff fuzz-hdf5 fuzz-cone-read fuzz-corpus fuzz-seeds \
	fuzz-adapters-corpus fuzz-adapters-recorded clean-fuzz
