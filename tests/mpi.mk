# MPI: `mpirun -n R*C tomolive recon --grid RxC` against one process (clients/grid.h), and
# `mpirun -n 4 tomolived --mpi` against one daemon, on CPU ranks with --oversubscribe; skipped (77) in builds without MPI or where mpirun is missing.
# The GPU variant is tests/gpu/recon_grid_cuda.sh; bundle-openmpi.sh carries Open MPI to a
# machine without it (the GPU machine).
EXTRA_DIST += tests/mpi/bundle-openmpi.sh
check_PROGRAMS += tests/mpi/check_recon_grid
TESTS += tests/mpi/check_recon_grid
tests_mpi_check_recon_grid_SOURCES = tests/mpi/check_recon_grid.c
tests_mpi_check_recon_grid_CPPFLAGS = $(AM_CPPFLAGS) -DMPIRUN='"$(MPIRUN)"'
tests_mpi_check_recon_grid_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(TIFF_CFLAGS) $(HDF5_CFLAGS) \
	$(ZMQ_CFLAGS)
tests_mpi_check_recon_grid_LDADD = tests/libtlclients.a $(IMAGE_LIBS) $(ENGINE_LIBS) \
	$(TEST_LIBS) $(HDF5_LIBS) $(ZMQ_LIBS)

# the pure parts: the grid's spelling, the parts' names, the model's arithmetic (no MPI run)
check_PROGRAMS += tests/unit/check_grid_model
TESTS += tests/unit/check_grid_model
tests_unit_check_grid_model_SOURCES = tests/unit/check_grid_model.c clients/grid.c \
	clients/grid_model.c clients/volume_vds.c clients/cli.c
tests_unit_check_grid_model_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(HDF5_CFLAGS) $(MPI_CFLAGS)
tests_unit_check_grid_model_LDADD = $(ENGINE_LIBS) $(TEST_LIBS) $(HDF5_LIBS) $(MPI_LIBS) -lm

# `mpirun -n 4 tomolived --mpi` (gpu/remote.h) against one daemon, on CPU ranks
check_PROGRAMS += tests/mpi/check_live_mpi
TESTS += tests/mpi/check_live_mpi
tests_mpi_check_live_mpi_SOURCES = tests/mpi/check_live_mpi.c
tests_mpi_check_live_mpi_CPPFLAGS = $(AM_CPPFLAGS) -DMPIRUN='"$(MPIRUN)"'
tests_mpi_check_live_mpi_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_mpi_check_live_mpi_LDADD = $(FIXTURE_LIBS) $(TEST_LIBS)
