# engine tests (CPU backend; the GPU tests are in tests/gpu.mk)
check_PROGRAMS += tests/unit/check_engine tests/unit/check_accuracy
TESTS += tests/unit/check_engine tests/unit/check_accuracy
tests_unit_check_engine_SOURCES = tests/unit/check_engine.c
tests_unit_check_engine_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_engine_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
tests_unit_check_accuracy_SOURCES = tests/unit/check_accuracy.c
tests_unit_check_accuracy_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_accuracy_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
check_PROGRAMS += tests/unit/check_incremental
TESTS += tests/unit/check_incremental
tests_unit_check_incremental_SOURCES = tests/unit/check_incremental.c
tests_unit_check_incremental_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_incremental_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
