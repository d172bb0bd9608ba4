# interop tests: detectors, files and viewers.
#   check_bitshuffle  unit: bslz4 / LZ4 decoding, bit-exact against liblz4 + a reference
#                     shuffle, and the refusals (sizes, corruption, bombs)
#   check_interop     a real tomolived per stream format (DECTRIS Stream V2 and V1, std-daq,
#                     concert, array-1.0, tomopackets), a phantom scan through each compared
#                     with the native protocol's slices, and malformed input per adapter
#   check_recast3d    a fake RECAST3D (REP + PUB) gets a scene, sets a slice, receives SliceData
#   check_hdf5        tomolive recon on a Data Exchange HDF5 file equals the TIFF path
#   check_dectris_replay  DECTRIS's recorded Stream V2 messages (shared/data, when present)
#                     replayed with tomolive push --dectris: every image accepted, the mask
#                     of a header_detail "all" start applied
check_PROGRAMS += tests/unit/check_bitshuffle tests/integration/check_interop \
	tests/integration/check_recast3d tests/integration/check_hdf5 \
	tests/integration/check_dectris_replay
TESTS += tests/unit/check_bitshuffle tests/integration/check_interop \
	tests/integration/check_recast3d tests/integration/check_hdf5 \
	tests/integration/check_dectris_replay

TEST_COMPRESS = tests/compress_encode.h tests/compress_encode.c
tests_unit_check_bitshuffle_SOURCES = tests/unit/check_bitshuffle.c $(TEST_COMPRESS) \
	daemon/ingest/bitshuffle.h daemon/ingest/bitshuffle.c
tests_unit_check_bitshuffle_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(LZ4_CFLAGS)
tests_unit_check_bitshuffle_LDADD = $(TEST_LIBS) $(LZ4_LIBS)

INTEROP_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
INTEROP_TEST_LIBS = $(FIXTURE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

tests_integration_check_interop_SOURCES = tests/integration/check_interop.c $(TEST_COMPRESS)
tests_integration_check_interop_CFLAGS = $(INTEROP_TEST_CFLAGS) $(CBOR_CFLAGS) $(LZ4_CFLAGS)
tests_integration_check_interop_LDADD = $(SCAN_LIBS) $(INTEROP_TEST_LIBS) $(CBOR_LIBS) $(LZ4_LIBS)

tests_integration_check_dectris_replay_SOURCES = tests/integration/check_dectris_replay.c \
	$(TEST_COMPRESS)
tests_integration_check_dectris_replay_CFLAGS = $(INTEROP_TEST_CFLAGS) $(CBOR_CFLAGS) $(LZ4_CFLAGS)
tests_integration_check_dectris_replay_LDADD = $(INTEROP_TEST_LIBS) $(CBOR_LIBS) $(LZ4_LIBS)

tests_integration_check_recast3d_SOURCES = tests/integration/check_recast3d.c
tests_integration_check_recast3d_CFLAGS = $(INTEROP_TEST_CFLAGS)
tests_integration_check_recast3d_LDADD = $(INTEROP_TEST_LIBS)

tests_integration_check_hdf5_SOURCES = tests/integration/check_hdf5.c
tests_integration_check_hdf5_CFLAGS = $(INTEROP_TEST_CFLAGS) $(HDF5_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_hdf5_LDADD = $(SCAN_LIBS) $(FIXTURE_LIBS) $(IMAGE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS) $(HDF5_LIBS)

# the ingest formats as a library (daemon/ingest/libtlingest.a), fed messages without a
# daemon: each format's accept path and its refusals (check_adapters), DECTRIS Stream V2
# CBOR and the recorded detector data of shared/data when present (check_adapters_dectris2)
noinst_LIBRARIES += tests/libtladapters.a
tests_libtladapters_a_SOURCES = tests/unit/check_adapters_util.h tests/unit/check_adapters_util.c
tests_libtladapters_a_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS)
ADAPTER_TEST_LIBS = tests/libtladapters.a $(ADAPTER_LIBS) $(TEST_LIBS)

check_PROGRAMS += tests/unit/check_adapters tests/unit/check_adapters_dectris2
TESTS += tests/unit/check_adapters tests/unit/check_adapters_dectris2
tests_unit_check_adapters_SOURCES = tests/unit/check_adapters.c
tests_unit_check_adapters_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS) \
	$(LZ4_CFLAGS)
tests_unit_check_adapters_LDADD = $(ADAPTER_TEST_LIBS) -lm
tests_unit_check_adapters_dectris2_SOURCES = tests/unit/check_adapters_dectris2.c $(TEST_COMPRESS)
tests_unit_check_adapters_dectris2_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) \
	$(CBOR_CFLAGS) $(LZ4_CFLAGS)
tests_unit_check_adapters_dectris2_LDADD = $(ADAPTER_TEST_LIBS) -lm
# one recorded message is small enough to keep: DECTRIS's end message (69 bytes)
EXTRA_DIST += tests/unit/data/dectris2-end.cbor
