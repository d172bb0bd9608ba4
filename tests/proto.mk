# protocol tests (the fuzz target of the header decoder is in tests/fuzz.mk)
#
# Unit tests (Check): round trips (check_proto), malformed input with one code per defect
# (check_proto_bad), map getters (check_proto_args), real ZeroMQ sockets (check_proto_zmq),
# measured allocation behaviour (check_proto_alloc), and slices in shared memory: the
# daemon's writer ring and a subscriber's reader (check_shm). check_proto_util.c builds test
# headers from JSON-like text. tests/fuzz/gen_corpus writes the golden headers that are
# checked in under tests/fuzz/corpus (they seed the fuzzer, check_proto decodes them, and
# check_corpus.sh checks that the encoders still write them byte for byte).

PROTO_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS)
PROTO_TEST_LDADD = $(PROTO_LIBS) $(TEST_LIBS)
PROTO_TEST_UTIL = tests/unit/check_proto_util.h tests/unit/check_proto_util.c

check_PROGRAMS += tests/unit/check_proto tests/unit/check_proto_bad tests/unit/check_proto_args \
	tests/unit/check_proto_zmq tests/unit/check_proto_alloc tests/unit/check_shm \
	tests/unit/check_pixels tests/fuzz/gen_corpus
TESTS += tests/unit/check_proto tests/unit/check_proto_bad tests/unit/check_proto_args \
	tests/unit/check_proto_zmq tests/unit/check_proto_alloc tests/unit/check_shm \
	tests/unit/check_pixels

tests_unit_check_proto_SOURCES = tests/unit/check_proto.c $(PROTO_TEST_UTIL)
tests_unit_check_proto_CFLAGS = $(PROTO_TEST_CFLAGS)
tests_unit_check_proto_LDADD = $(PROTO_TEST_LDADD)
tests_unit_check_proto_bad_SOURCES = tests/unit/check_proto_bad.c $(PROTO_TEST_UTIL)
tests_unit_check_proto_bad_CFLAGS = $(PROTO_TEST_CFLAGS)
tests_unit_check_proto_bad_LDADD = $(PROTO_TEST_LDADD)
tests_unit_check_proto_args_SOURCES = tests/unit/check_proto_args.c $(PROTO_TEST_UTIL)
tests_unit_check_proto_args_CFLAGS = $(PROTO_TEST_CFLAGS)
tests_unit_check_proto_args_LDADD = $(PROTO_TEST_LDADD)
tests_unit_check_proto_zmq_SOURCES = tests/unit/check_proto_zmq.c
tests_unit_check_proto_zmq_CFLAGS = $(PROTO_TEST_CFLAGS)
tests_unit_check_proto_zmq_LDADD = $(PROTO_TEST_LDADD)
tests_unit_check_proto_alloc_SOURCES = tests/unit/check_proto_alloc.c
tests_unit_check_proto_alloc_CFLAGS = $(PROTO_TEST_CFLAGS)
tests_unit_check_proto_alloc_LDADD = $(PROTO_TEST_LDADD)
tests_unit_check_shm_SOURCES = tests/unit/check_shm.c
tests_unit_check_shm_CFLAGS = $(PROTO_TEST_CFLAGS)
tests_unit_check_shm_LDADD = $(PROTO_TEST_LDADD)
tests_unit_check_pixels_SOURCES = tests/unit/check_pixels.c $(PROTO_TEST_UTIL)
tests_unit_check_pixels_CFLAGS = $(PROTO_TEST_CFLAGS)
tests_unit_check_pixels_LDADD = $(PROTO_TEST_LDADD)
tests_fuzz_gen_corpus_SOURCES = tests/fuzz/gen_corpus.c
tests_fuzz_gen_corpus_CFLAGS = $(AM_CFLAGS) $(PROTO_CFLAGS)
tests_fuzz_gen_corpus_LDADD = $(PROTO_LIBS)
# the golden headers are byte for byte what gen_corpus writes now
TESTS += tests/fuzz/check_corpus.sh
EXTRA_DIST += tests/fuzz/check_corpus.sh

# CURVE key files (protocol/zcert.h): read, written, malformed, used in a handshake
check_PROGRAMS += tests/unit/check_zcert
TESTS += tests/unit/check_zcert
tests_unit_check_zcert_SOURCES = tests/unit/check_zcert.c
tests_unit_check_zcert_CFLAGS = $(PROTO_TEST_CFLAGS)
tests_unit_check_zcert_LDADD = $(PROTO_TEST_LDADD)
