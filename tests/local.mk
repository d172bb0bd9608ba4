# tests/ — unit tests (Check), integration tests (daemon end to end), GPU tests (skip with
# exit 77 without a GPU) and fuzz targets. Each area lists its tests in its own fragment.
noinst_LIBRARIES += tests/libtltest.a
tests_libtltest_a_SOURCES = tests/testutil.h tests/testutil.c
tests_libtltest_a_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
TEST_LIBS = tests/libtltest.a $(CHECK_LIBS)

include tests/proto.mk
include tests/engine.mk
include tests/tools.mk
include tests/daemon.mk
include tests/gpu.mk
include tests/clients.mk
include tests/interop.mk
include tests/python.mk
include tests/http.mk
include tests/fuzz.mk
include tests/soak.mk
include tests/mpi.mk

# a simulated camera scan shared by integration tests (links the engine: list it first)
noinst_LIBRARIES += tests/libtlscan.a
tests_libtlscan_a_SOURCES = tests/camera_scan.h tests/camera_scan.c
tests_libtlscan_a_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
SCAN_LIBS = tests/libtlscan.a

# the dependency rules of the tree (tests/layering.conf), checked against every #include and
# every symbol one object file takes from another: no circle, no arrow against the layering
TESTS += tests/check_layering.py
EXTRA_DIST += tests/check_layering.py tests/layering.conf
