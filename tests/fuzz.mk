# fuzzing the ingest formats (daemon/ingest/adapter.h): `make fuzz-adapters [FUZZ_SECONDS=600]`
#
# One libFuzzer target, tests/fuzz/fuzz_adapters.c: an input's first byte picks the format
# (tomolive, DECTRIS Stream V2 and V1, std-daq, concert, array-1.0, tomopackets) and the
# settings, the rest is a short stream of multipart messages (tests/fuzz/fuzz_adapters.h).
# Only the harness, the ingest adapters and the protocol decoder are built by clang with
# libFuzzer and the sanitizers; settings and log come from the normal build. Seeds:
# tests/fuzz/adapters-corpus (written by gen_adapters_corpus: `make fuzz-adapters-corpus`),
# plus, when shared/data is there, DECTRIS's recorded Stream V2 messages whole, wrapped
# into inputs at run time; what the fuzzer finds goes to tests/fuzz/adapters-run-corpus.
#
# `make check` runs the same harness over the seeds without libFuzzer
# (check_adapters_corpus), and checks that the recorded messages are accepted.

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
EXTRA_DIST += tests/fuzz/adapters-corpus

# the formats and what they decode with; not the frame sources (row bands, GPU memory)
FUZZ_ADAPTER_SRCS = tests/fuzz/fuzz_adapters.c $(FUZZ_PROTO_SRCS) $(filter-out \
	daemon/ingest/bands.c daemon/ingest/ipc_frames.c, \
	$(filter %.c,$(daemon_ingest_libtlingest_a_SOURCES)))
CLEANFILES += tests/fuzz/fuzz_adapters

tests/fuzz/fuzz_adapters: $(FUZZ_ADAPTER_SRCS:%=$(srcdir)/%) $(srcdir)/tests/fuzz/fuzz_adapters.h \
		$(srcdir)/daemon/ingest/adapter.h $(srcdir)/protocol/protocol.h config.h daemon/libtldaemon.a
	@if test -z "$(FUZZ_CC)" || test "x$(FUZZ_CC)" = xno; then \
	  echo "make fuzz-adapters needs clang with libFuzzer: configure FUZZ_CC=clang" >&2; exit 1; fi
	@$(MKDIR_P) tests/fuzz
	$(AM_V_CC)$(FUZZ_CC) $(FUZZ_FLAGS) -I$(top_srcdir) -I$(top_builddir) $(PROTO_CFLAGS) \
	  $(JANSSON_CFLAGS) $(CBOR_CFLAGS) $(LZ4_CFLAGS) -o $@ $(FUZZ_ADAPTER_SRCS:%=$(srcdir)/%) \
	  $(DAEMON_UTIL_LIBS) $(MSGPACK_LIBS) $(ZMQ_LIBS) $(CBOR_LIBS) $(LZ4_LIBS) $(JANSSON_LIBS) -lm

# the recorded messages (1 MiB each) are seeds too when shared/data is there
FUZZ_TESTDATA = $(firstword $(TOMOLIVE_TEST_DATA) $(wildcard $(abs_top_srcdir)/shared/data \
	$(abs_top_srcdir)/../shared/data))

fuzz-adapters: tests/fuzz/fuzz_adapters tests/fuzz/gen_adapters_corpus$(EXEEXT)
	@$(MKDIR_P) tests/fuzz/adapters-run-corpus tests/fuzz/adapters-recorded
	@if test -n "$(FUZZ_TESTDATA)" && test -d "$(FUZZ_TESTDATA)/dectris-stream2-32bit"; then \
	  ./tests/fuzz/gen_adapters_corpus$(EXEEXT) --wrap $(FUZZ_TESTDATA) tests/fuzz/adapters-recorded; \
	else echo "no shared/data: the recorded DECTRIS messages are not seeds this time"; fi
	./tests/fuzz/fuzz_adapters -max_total_time=$(FUZZ_SECONDS) -max_len=1200000 \
	  -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
	  tests/fuzz/adapters-run-corpus $(srcdir)/tests/fuzz/adapters-corpus \
	  tests/fuzz/adapters-recorded

# Rewrites the checked-in seeds (with shared/data, the cropped recorded image too).
fuzz-adapters-corpus: tests/fuzz/gen_adapters_corpus$(EXEEXT)
	./tests/fuzz/gen_adapters_corpus$(EXEEXT) $(srcdir)/tests/fuzz/adapters-corpus $(srcdir) \
	  $(FUZZ_TESTDATA)

clean-fuzz-adapters:
	rm -rf tests/fuzz/adapters-run-corpus tests/fuzz/adapters-recorded tests/fuzz/fuzz_adapters
clean-fuzz: clean-fuzz-adapters

.PHONY: fuzz-adapters fuzz-adapters-corpus clean-fuzz-adapters
