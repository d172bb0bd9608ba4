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
check_PROGRAMS += tests/unit/check_engine_alloc
TESTS += tests/unit/check_engine_alloc
tests_unit_check_engine_alloc_SOURCES = tests/unit/check_engine_alloc.c
tests_unit_check_engine_alloc_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_engine_alloc_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
# the FP32 rounding trick of the ALU kernels (gpu/cuda/fround.h is plain C outside nvcc)
check_PROGRAMS += tests/unit/check_fround
TESTS += tests/unit/check_fround
tests_unit_check_fround_SOURCES = tests/unit/check_fround.c gpu/cuda/fround.h
tests_unit_check_fround_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_fround_LDADD = $(TEST_LIBS) -lm
check_PROGRAMS += tests/unit/check_tune
TESTS += tests/unit/check_tune
tests_unit_check_tune_SOURCES = tests/unit/check_tune.c
tests_unit_check_tune_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_tune_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
# an engine split over several devices (row partitions), against one engine
check_PROGRAMS += tests/unit/check_split
TESTS += tests/unit/check_split
tests_unit_check_split_SOURCES = tests/unit/check_split.c
tests_unit_check_split_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_split_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
# per-frame corrections (dezinger, Paganin) on the CPU backend, against their definitions
check_PROGRAMS += tests/unit/check_corrections
TESTS += tests/unit/check_corrections
tests_unit_check_corrections_SOURCES = tests/unit/check_corrections.c
tests_unit_check_corrections_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_corrections_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
# the centre of rotation from opposite projections (CPU backend)
check_PROGRAMS += tests/unit/check_center
TESTS += tests/unit/check_center
tests_unit_check_center_SOURCES = tests/unit/check_center.c
tests_unit_check_center_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_center_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
# 360-degree scans with an offset axis (half acquisition)
check_PROGRAMS += tests/unit/check_halfacq
TESTS += tests/unit/check_halfacq
tests_unit_check_halfacq_SOURCES = tests/unit/check_halfacq.c
tests_unit_check_halfacq_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_halfacq_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
