# client tests: protocol/jsonpack (unit) and the built `tomolive` push, sub, ctl, bench and
# recon --window against sockets the tests bind themselves (no daemon needed).
# clients_util runs the binary in the background and binds loopback sockets.
noinst_LIBRARIES += tests/libtlclients.a
tests_libtlclients_a_SOURCES = tests/integration/clients_util.h tests/integration/clients_util.c
tests_libtlclients_a_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(ZMQ_CFLAGS)
CLIENT_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS)
CLIENT_TEST_LIBS = tests/libtlclients.a $(PROTO_LIBS) $(TEST_LIBS)

check_PROGRAMS += tests/unit/check_jsonpack tests/integration/check_push \
	tests/integration/check_sub tests/integration/check_ctl tests/integration/check_bench \
	tests/integration/check_recon_window
TESTS += tests/unit/check_jsonpack tests/integration/check_push \
	tests/integration/check_sub tests/integration/check_ctl tests/integration/check_bench \
	tests/integration/check_recon_window

tests_unit_check_jsonpack_SOURCES = tests/unit/check_jsonpack.c
tests_unit_check_jsonpack_CFLAGS = $(CLIENT_TEST_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_check_jsonpack_LDADD = $(JSONPACK_LIBS) $(PROTO_LIBS) $(TEST_LIBS)

tests_integration_check_push_SOURCES = tests/integration/check_push.c
tests_integration_check_push_CFLAGS = $(CLIENT_TEST_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_push_LDADD = $(CLIENT_TEST_LIBS) $(IMAGE_LIBS) $(ENGINE_LIBS)

tests_integration_check_sub_SOURCES = tests/integration/check_sub.c
tests_integration_check_sub_CFLAGS = $(CLIENT_TEST_CFLAGS) $(TIFF_CFLAGS) $(PNG_CFLAGS)
tests_integration_check_sub_LDADD = $(CLIENT_TEST_LIBS) $(IMAGE_LIBS) $(ENGINE_LIBS)

tests_integration_check_ctl_SOURCES = tests/integration/check_ctl.c
tests_integration_check_ctl_CFLAGS = $(CLIENT_TEST_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_ctl_LDADD = $(CLIENT_TEST_LIBS) $(JSONPACK_LIBS)

tests_integration_check_bench_SOURCES = tests/integration/check_bench.c
tests_integration_check_bench_CFLAGS = $(CLIENT_TEST_CFLAGS)
tests_integration_check_bench_LDADD = $(CLIENT_TEST_LIBS) $(ENGINE_LIBS)

tests_integration_check_recon_window_SOURCES = tests/integration/check_recon_window.c
tests_integration_check_recon_window_CFLAGS = $(CLIENT_TEST_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_recon_window_LDADD = $(CLIENT_TEST_LIBS) $(IMAGE_LIBS) $(ENGINE_LIBS)

# tomolive tune (the autotuner and its cache, CPU backend)
TESTS += tests/integration/check_tune.sh
EXTRA_DIST += tests/integration/check_tune.sh

# cone-beam matrices from files (clients/cone_read.h): our own as text and .npy, ASTRA's
# cone_vec rows and RTK's geometry XML against circular scans, RTK's own example and the
# geometry RTK's documentation describes; the refusals
check_PROGRAMS += tests/unit/check_cone_read tests/unit/check_cone_read_rtk
TESTS += tests/unit/check_cone_read tests/unit/check_cone_read_rtk
CONE_READ_SOURCES = clients/cone_read.h clients/cone_read.c clients/cone_read_rtk.c \
	clients/npy.h clients/npy.c
tests_unit_check_cone_read_SOURCES = tests/unit/check_cone_read.c $(CONE_READ_SOURCES)
tests_unit_check_cone_read_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(LIBXML_CFLAGS)
tests_unit_check_cone_read_LDADD = $(ENGINE_LIBS) $(TEST_LIBS) $(LIBXML_LIBS)
tests_unit_check_cone_read_rtk_SOURCES = tests/unit/check_cone_read_rtk.c $(CONE_READ_SOURCES)
tests_unit_check_cone_read_rtk_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(LIBXML_CFLAGS)
tests_unit_check_cone_read_rtk_LDADD = $(ENGINE_LIBS) $(TEST_LIBS) $(LIBXML_LIBS)

# cone beam through the tools (issue #21): push --geometry cone against the test's socket,
# recon --geometry cone against the sample's density in the orbit's plane, phantom --scan
# --geometry cone through recon
check_PROGRAMS += tests/integration/check_cone_tools
TESTS += tests/integration/check_cone_tools
tests_integration_check_cone_tools_SOURCES = tests/integration/check_cone_tools.c \
	tests/integration/cone_truth.h tests/integration/cone_truth.c \
	clients/cone_opts.h clients/cone_opts.c
tests_integration_check_cone_tools_CFLAGS = $(CLIENT_TEST_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_cone_tools_LDADD = $(CLIENT_TEST_LIBS) $(IMAGE_LIBS) $(ENGINE_LIBS)

# angle lists and the arc they cover (clients/angles.c)
check_PROGRAMS += tests/unit/check_angles
TESTS += tests/unit/check_angles
tests_unit_check_angles_SOURCES = tests/unit/check_angles.c clients/angles.c clients/angles.h
tests_unit_check_angles_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_angles_LDADD = $(TEST_LIBS) -lm

# recon --matrices FILE[:FORMAT] of a circular scan (our matrices as text and .npy, ASTRA
# cone_vec rows, RTK XML) gives the volume of the circular options; the refusals
check_PROGRAMS += tests/integration/check_cone_matrices
TESTS += tests/integration/check_cone_matrices
tests_integration_check_cone_matrices_SOURCES = tests/integration/check_cone_matrices.c \
	clients/cone_opts.h clients/cone_opts.c
tests_integration_check_cone_matrices_CFLAGS = $(CLIENT_TEST_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_cone_matrices_LDADD = $(CLIENT_TEST_LIBS) $(IMAGE_LIBS) $(ENGINE_LIBS)
