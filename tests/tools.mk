# phantom, image files and tomolive recon tests
check_PROGRAMS += tests/unit/check_phantom tests/unit/check_images tests/integration/check_recon
TESTS += tests/unit/check_phantom tests/unit/check_images tests/integration/check_recon

tests_unit_check_phantom_SOURCES = tests/unit/check_phantom.c
tests_unit_check_phantom_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_phantom_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)

tests_unit_check_images_SOURCES = tests/unit/check_images.c
tests_unit_check_images_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(TIFF_CFLAGS) $(PNG_CFLAGS)
tests_unit_check_images_LDADD = $(IMAGE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

# runs the built clients/tomolive (a bin_PROGRAM, built before the tests run)
tests_integration_check_recon_SOURCES = tests/integration/check_recon.c
tests_integration_check_recon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_recon_LDADD = $(IMAGE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

# the out-of-core planner, a pure function (clients/volume_plan.h)
check_PROGRAMS += tests/unit/check_volume_plan
TESTS += tests/unit/check_volume_plan
tests_unit_check_volume_plan_SOURCES = tests/unit/check_volume_plan.c clients/volume_plan.c \
	clients/cli.c
tests_unit_check_volume_plan_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_volume_plan_LDADD = $(TEST_LIBS)

# the volume output's conversions: the vector paths equal the scalar definitions, bit for bit
check_PROGRAMS += tests/unit/check_volume_convert
TESTS += tests/unit/check_volume_convert
tests_unit_check_volume_convert_SOURCES = tests/unit/check_volume_convert.c clients/volume_convert.c
tests_unit_check_volume_convert_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_volume_convert_LDADD = $(TEST_LIBS) -lm

# the volume output's thread pool: each task once, concurrently, submit without waiting
check_PROGRAMS += tests/unit/check_volume_pool
TESTS += tests/unit/check_volume_pool
tests_unit_check_volume_pool_SOURCES = tests/unit/check_volume_pool.c clients/volume_pool.c
tests_unit_check_volume_pool_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_volume_pool_LDADD = $(TEST_LIBS) -lpthread

# the volume output's threaded writer writes what the serial one does: HDF5 (read back
# by libhdf5, chunk bytes), TIFF stacks and files byte for byte; resume; failures
check_PROGRAMS += tests/unit/check_volume_output
TESTS += tests/unit/check_volume_output
tests_unit_check_volume_output_SOURCES = tests/unit/check_volume_output.c \
	clients/volume_output.c clients/volume_slab.c clients/volume_pool.c clients/volume_convert.c \
	clients/cli.c
tests_unit_check_volume_output_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(TIFF_CFLAGS) \
	$(HDF5_CFLAGS) $(ZLIB_CFLAGS)
tests_unit_check_volume_output_LDADD = $(IMAGE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS) $(HDF5_LIBS) \
	$(ZLIB_LIBS) -lm

# tomolive recon out of core: slabs equal the in-core volume, resume, failures (CPU backend)
check_PROGRAMS += tests/integration/check_recon_volume
TESTS += tests/integration/check_recon_volume
tests_integration_check_recon_volume_SOURCES = tests/integration/check_recon_volume.c
tests_integration_check_recon_volume_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(TIFF_CFLAGS) $(HDF5_CFLAGS) $(ZMQ_CFLAGS)
tests_integration_check_recon_volume_LDADD = tests/libtlclients.a $(IMAGE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS) $(HDF5_LIBS) $(ZMQ_LIBS)

# `tomolive recon` with per-frame corrections
check_PROGRAMS += tests/integration/check_recon_corrections
TESTS += tests/integration/check_recon_corrections
tests_integration_check_recon_corrections_SOURCES = tests/integration/check_recon_corrections.c
tests_integration_check_recon_corrections_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(TIFF_CFLAGS)
tests_integration_check_recon_corrections_LDADD = $(IMAGE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

# cone-beam projection matrices (gpu/geometry/cone.h), issue #21
check_PROGRAMS += tests/unit/check_cone
TESTS += tests/unit/check_cone
tests_unit_check_cone_SOURCES = tests/unit/check_cone.c
tests_unit_check_cone_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_cone_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)

# exact cone-beam projections of the ellipsoid phantoms (gpu/phantom_cone.h), issue #21
check_PROGRAMS += tests/unit/check_phantom_cone
TESTS += tests/unit/check_phantom_cone
tests_unit_check_phantom_cone_SOURCES = tests/unit/check_phantom_cone.c
tests_unit_check_phantom_cone_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_phantom_cone_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)

# the float64 CPU FDK reference (gpu/fdk_ref.h), issue #21
check_PROGRAMS += tests/unit/check_cone_engine
TESTS += tests/unit/check_cone_engine
tests_unit_check_cone_engine_SOURCES = tests/unit/check_cone_engine.c tests/cone_scan.c \
	tests/cone_scan.h
tests_unit_check_cone_engine_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_cone_engine_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)

check_PROGRAMS += tests/unit/check_fdk_ref
TESTS += tests/unit/check_fdk_ref
tests_unit_check_fdk_ref_SOURCES = tests/unit/check_fdk_ref.c
tests_unit_check_fdk_ref_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_fdk_ref_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)

# the float64 reference projectors (gpu/project_ref.h), issue #28
check_PROGRAMS += tests/unit/check_project_ref
TESTS += tests/unit/check_project_ref
tests_unit_check_project_ref_SOURCES = tests/unit/check_project_ref.c
tests_unit_check_project_ref_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_project_ref_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)

# the float64 reference iterative methods (gpu/iterative_ref.h), issue #28
check_PROGRAMS += tests/unit/check_iterative_ref
TESTS += tests/unit/check_iterative_ref
tests_unit_check_iterative_ref_SOURCES = tests/unit/check_iterative_ref.c
tests_unit_check_iterative_ref_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_iterative_ref_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
# iterative slices through the engine against that reference (CPU; the CUDA build of the
# same file is tests/gpu/check_iterative_cuda)
check_PROGRAMS += tests/unit/check_iterative
TESTS += tests/unit/check_iterative
tests_unit_check_iterative_SOURCES = tests/unit/check_iterative.c
tests_unit_check_iterative_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_iterative_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
# iterative cone-beam stacks (tomosynthesis) through the engine against that reference
check_PROGRAMS += tests/unit/check_iterative_cone
TESTS += tests/unit/check_iterative_cone
tests_unit_check_iterative_cone_SOURCES = tests/unit/check_iterative_cone.c
tests_unit_check_iterative_cone_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_iterative_cone_LDADD = $(ENGINE_LIBS) $(TEST_LIBS)
