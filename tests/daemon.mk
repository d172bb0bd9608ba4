# daemon tests (config, notify, logs, end to end)

# Daemons that tests start without naming a tuning cache (tomolive bench --stream, the
# tools' tests) keep their kernel timings in the build tree, not in the user's ~/.cache.
AM_TESTS_ENVIRONMENT += TOMOLIVE_TUNE_CACHE='$(abs_top_builddir)/tests/tune-cache.json'; export TOMOLIVE_TUNE_CACHE;
CLEANFILES += tests/tune-cache.json

# A fake systemd notification socket (AF_UNIX datagrams), for check_notify and the
# end-to-end tests: link NOTIFY_LISTENER_LIBS.
noinst_LIBRARIES += tests/libtlnotify.a
tests_libtlnotify_a_SOURCES = tests/notify_listener.h tests/notify_listener.c
tests_libtlnotify_a_CFLAGS = $(AM_CFLAGS)
NOTIFY_LISTENER_LIBS = tests/libtlnotify.a

check_PROGRAMS += tests/unit/check_config tests/unit/check_log tests/unit/check_notify
TESTS += tests/unit/check_config tests/unit/check_log tests/unit/check_notify

tests_unit_check_config_SOURCES = tests/unit/check_config.c
tests_unit_check_config_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_config_LDADD = $(DAEMON_UTIL_LIBS) $(TEST_LIBS)

tests_unit_check_log_SOURCES = tests/unit/check_log.c
tests_unit_check_log_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_log_LDADD = $(DAEMON_UTIL_LIBS) $(TEST_LIBS)

tests_unit_check_notify_SOURCES = tests/unit/check_notify.c
tests_unit_check_notify_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(SYSTEMD_CFLAGS)
tests_unit_check_notify_LDADD = $(NOTIFY_LISTENER_LIBS) $(DAEMON_UTIL_LIBS) $(TEST_LIBS)

# systemd-analyze verify on the generated unit (skips without systemd-analyze).
TESTS += tests/integration/verify_unit.sh
EXTRA_DIST += tests/integration/verify_unit.sh

# the daemon's pieces that need no sockets, one test program per module (daemon/base/,
# daemon/ingest/bands.h)
DAEMON_CORE_TESTS = tests/unit/check_slices tests/unit/check_pacing tests/unit/check_subs \
	tests/unit/check_queue tests/unit/check_bufpool tests/unit/check_heap tests/unit/check_outbox tests/unit/check_stats \
	tests/unit/check_bands
check_PROGRAMS += $(DAEMON_CORE_TESTS)
TESTS += $(DAEMON_CORE_TESTS)
DAEMON_CORE_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS)
DAEMON_CORE_TEST_LIBS = $(DAEMON_CORE_LIBS) $(PROTO_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)
tests_unit_check_slices_SOURCES = tests/unit/check_slices.c
tests_unit_check_slices_CFLAGS = $(DAEMON_CORE_TEST_CFLAGS)
tests_unit_check_slices_LDADD = $(DAEMON_CORE_TEST_LIBS)
tests_unit_check_pacing_SOURCES = tests/unit/check_pacing.c
tests_unit_check_pacing_CFLAGS = $(DAEMON_CORE_TEST_CFLAGS)
tests_unit_check_pacing_LDADD = $(DAEMON_CORE_TEST_LIBS)
tests_unit_check_outbox_SOURCES = tests/unit/check_outbox.c
tests_unit_check_outbox_CFLAGS = $(DAEMON_CORE_TEST_CFLAGS)
tests_unit_check_outbox_LDADD = $(DAEMON_CORE_TEST_LIBS)
tests_unit_check_subs_SOURCES = tests/unit/check_subs.c
tests_unit_check_subs_CFLAGS = $(DAEMON_CORE_TEST_CFLAGS)
tests_unit_check_subs_LDADD = $(DAEMON_CORE_TEST_LIBS)
tests_unit_check_queue_SOURCES = tests/unit/check_queue.c
tests_unit_check_queue_CFLAGS = $(DAEMON_CORE_TEST_CFLAGS)
tests_unit_check_queue_LDADD = $(DAEMON_CORE_TEST_LIBS)
tests_unit_check_heap_SOURCES = tests/unit/check_heap.c
tests_unit_check_heap_CFLAGS = $(DAEMON_CORE_TEST_CFLAGS)
tests_unit_check_heap_LDADD = $(DAEMON_CORE_TEST_LIBS)
tests_unit_check_bufpool_SOURCES = tests/unit/check_bufpool.c
tests_unit_check_bufpool_CFLAGS = $(DAEMON_CORE_TEST_CFLAGS)
tests_unit_check_bufpool_LDADD = $(DAEMON_CORE_TEST_LIBS)
tests_unit_check_stats_SOURCES = tests/unit/check_stats.c
tests_unit_check_stats_CFLAGS = $(DAEMON_CORE_TEST_CFLAGS)
tests_unit_check_stats_LDADD = $(DAEMON_CORE_TEST_LIBS)
tests_unit_check_bands_SOURCES = tests/unit/check_bands.c
tests_unit_check_bands_CFLAGS = $(DAEMON_CORE_TEST_CFLAGS)
tests_unit_check_bands_LDADD = $(DAEMON_CORE_TEST_LIBS)

# a real tomolived for integration tests (tests/daemon_fixture.h)
noinst_LIBRARIES += tests/libtlfixture.a
tests_libtlfixture_a_SOURCES = tests/daemon_fixture.h tests/daemon_fixture.c protocol/jsonpack.h protocol/jsonpack.c
tests_libtlfixture_a_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
FIXTURE_LIBS = tests/libtlfixture.a $(PROTO_LIBS) $(JANSSON_LIBS)

check_PROGRAMS += tests/integration/check_backpressure
TESTS += tests/integration/check_backpressure
tests_integration_check_backpressure_SOURCES = tests/integration/check_backpressure.c
tests_integration_check_backpressure_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_backpressure_LDADD = $(FIXTURE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

check_PROGRAMS += tests/integration/check_daemon
TESTS += tests/integration/check_daemon
tests_integration_check_daemon_SOURCES = tests/integration/check_daemon.c
tests_integration_check_daemon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_daemon_LDADD = $(FIXTURE_LIBS) $(NOTIFY_LISTENER_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

check_PROGRAMS += tests/integration/check_e2e
TESTS += tests/integration/check_e2e
tests_integration_check_e2e_SOURCES = tests/integration/check_e2e.c
tests_integration_check_e2e_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_e2e_LDADD = $(SCAN_LIBS) $(FIXTURE_LIBS) $(IMAGE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

# cone beam through the daemon (issue #21): push --geometry cone, sub, the orbit plane
# against the sample; one device; a bad cone scan refused by the protocol
check_PROGRAMS += tests/integration/check_cone_daemon
TESTS += tests/integration/check_cone_daemon
tests_integration_check_cone_daemon_SOURCES = tests/integration/check_cone_daemon.c \
	tests/integration/cone_truth.h tests/integration/cone_truth.c \
	clients/cone_opts.h clients/cone_opts.c
tests_integration_check_cone_daemon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) \
	$(JANSSON_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_cone_daemon_LDADD = $(FIXTURE_LIBS) $(IMAGE_LIBS) $(ENGINE_LIBS) \
	$(TEST_LIBS)

# arbitrary cone-beam trajectories over the wire (PROTOCOL.md 8.1.1 "matrices"): push
# --matrices of the circle's own matrices equals the circular scan; a singular one refused
check_PROGRAMS += tests/integration/check_cone_daemon_matrices
TESTS += tests/integration/check_cone_daemon_matrices
tests_integration_check_cone_daemon_matrices_SOURCES = \
	tests/integration/check_cone_daemon_matrices.c clients/cone_opts.h clients/cone_opts.c \
	clients/angles.h clients/angles.c tests/integration/cone_truth.h tests/integration/cone_truth.c
tests_integration_check_cone_daemon_matrices_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) \
	$(PROTO_CFLAGS) $(JANSSON_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_cone_daemon_matrices_LDADD = $(FIXTURE_LIBS) $(IMAGE_LIBS) \
	$(ENGINE_LIBS) $(TEST_LIBS)

# RECAST3D's ConeVecGeometry through the daemon equals its ConeBeamGeometry (tomopackets)
check_PROGRAMS += tests/integration/check_cone_tomopackets
TESTS += tests/integration/check_cone_tomopackets
tests_integration_check_cone_tomopackets_SOURCES = \
	tests/integration/check_cone_tomopackets.c clients/cone_opts.h clients/cone_opts.c \
	tests/integration/cone_truth.h tests/integration/cone_truth.c
tests_integration_check_cone_tomopackets_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) \
	$(PROTO_CFLAGS) $(JANSSON_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_cone_tomopackets_LDADD = $(FIXTURE_LIBS) $(IMAGE_LIBS) \
	$(ENGINE_LIBS) $(TEST_LIBS)

# slices through shared memory (slices.shm): pixels equal to TCP, objects unlinked,
# `tomolive sub --shm`, and nothing for shm/ subscribers when it is off (CPU backend)
check_PROGRAMS += tests/integration/check_publishing
TESTS += tests/integration/check_publishing
tests_integration_check_publishing_SOURCES = tests/integration/check_publishing.c
tests_integration_check_publishing_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_publishing_LDADD = $(FIXTURE_LIBS) $(TEST_LIBS)
check_PROGRAMS += tests/integration/check_shm_slices
TESTS += tests/integration/check_shm_slices
tests_integration_check_shm_slices_SOURCES = tests/integration/check_shm_slices.c
tests_integration_check_shm_slices_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_shm_slices_LDADD = $(FIXTURE_LIBS) $(TEST_LIBS)

# the streaming benchmark runs (tomolive bench --stream, tiny frames, CPU)
TESTS += tests/integration/stream_bench.sh
EXTRA_DIST += tests/integration/stream_bench.sh

# the kernel autotuner in the daemon: engine.tune auto/cached/off, a corrupt cache, the
# tune command, kernels in status and slice headers (CPU backend)
check_PROGRAMS += tests/integration/check_tune_daemon
TESTS += tests/integration/check_tune_daemon
tests_integration_check_tune_daemon_SOURCES = tests/integration/check_tune_daemon.c
tests_integration_check_tune_daemon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_tune_daemon_LDADD = $(FIXTURE_LIBS) $(TEST_LIBS)

# [security] curve = true: peers without keys, unknown keys and wrong roles refused on each
# socket, commands per role (E_DENIED), the plain exception, SIGHUP, release endpoints
check_PROGRAMS += tests/integration/check_security
TESTS += tests/integration/check_security
tests_integration_check_security_SOURCES = tests/integration/check_security.c
tests_integration_check_security_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_security_LDADD = $(FIXTURE_LIBS) $(TEST_LIBS)

# live iterative slices: improving read-outs, the converged final, refusals
check_PROGRAMS += tests/integration/check_iterative_daemon
TESTS += tests/integration/check_iterative_daemon
tests_integration_check_iterative_daemon_SOURCES = tests/integration/check_iterative_daemon.c
tests_integration_check_iterative_daemon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_iterative_daemon_LDADD = $(FIXTURE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

# boxes (set_slice kind "box"): a box is its planes, parallel and cone beam; incremental
# equals from scratch; the whole volume; refusals
check_PROGRAMS += tests/integration/check_box_daemon
TESTS += tests/integration/check_box_daemon
tests_integration_check_box_daemon_SOURCES = tests/integration/check_box_daemon.c
tests_integration_check_box_daemon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_box_daemon_LDADD = $(FIXTURE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

# per-frame corrections through the daemon: scan keys, status, latency histograms
check_PROGRAMS += tests/integration/check_corrections_daemon
TESTS += tests/integration/check_corrections_daemon
tests_integration_check_corrections_daemon_SOURCES = tests/integration/check_corrections_daemon.c
tests_integration_check_corrections_daemon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_corrections_daemon_LDADD = $(FIXTURE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)
