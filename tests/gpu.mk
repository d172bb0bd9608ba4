# GPU tests: the CUDA backend against the CPU backend and the float64 reference, through
# the public engine API. They exit 77 (automake: SKIP) where no CUDA device is usable and
# in builds without CUDA (then the program only returns 77). Check runs without fork()
# (CUDA does not survive it).
noinst_LIBRARIES += tests/libtlgputest.a
tests_libtlgputest_a_SOURCES = tests/gpu/gpu_test.h tests/gpu/gpu_test.c
tests_libtlgputest_a_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
GPU_TEST_LIBS = tests/libtlgputest.a $(ENGINE_LIBS) $(TEST_LIBS)

check_PROGRAMS += tests/gpu/check_cuda
TESTS += tests/gpu/check_cuda
# one program, a file per case (cuda_check.c: what they share)
tests_gpu_check_cuda_SOURCES = tests/gpu/check_cuda.c tests/gpu/cuda_check.h tests/gpu/cuda_check.c \
	tests/gpu/check_cuda_pipeline.c tests/gpu/check_cuda_kernels.c \
	tests/gpu/check_cuda_engine.c tests/gpu/check_cuda_split.c
tests_gpu_check_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_check_cuda_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_cuda_LDADD = $(GPU_TEST_LIBS)
# every kernel the CUDA backend lists, generically, against the float64 reference
check_PROGRAMS += tests/gpu/check_kernels
TESTS += tests/gpu/check_kernels
tests_gpu_check_kernels_SOURCES = tests/gpu/check_kernels.c
tests_gpu_check_kernels_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_check_kernels_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_kernels_LDADD = $(GPU_TEST_LIBS)

# the daemon end to end on the CUDA backend (skips without a GPU)
TESTS += tests/gpu/e2e_cuda.sh
EXTRA_DIST += tests/gpu/e2e_cuda.sh
# live iterative slices on the CUDA backend (skips without a GPU)
TESTS += tests/gpu/iterative_daemon_cuda.sh
EXTRA_DIST += tests/gpu/iterative_daemon_cuda.sh
# boxes (axis-aligned sub-volumes) through the daemon on the CUDA backend
TESTS += tests/gpu/box_daemon_cuda.sh
EXTRA_DIST += tests/gpu/box_daemon_cuda.sh
# tomolive recon out of core equals in core, bit for bit, on the CUDA backend
TESTS += tests/gpu/recon_volume_cuda.sh
EXTRA_DIST += tests/gpu/recon_volume_cuda.sh
# tomolive recon --grid on the CUDA backend, ranks sharing the GPUs (skips without a GPU or MPI)
TESTS += tests/gpu/recon_grid_cuda.sh
EXTRA_DIST += tests/gpu/recon_grid_cuda.sh
# tomolived --mpi on the CUDA backend, ranks sharing the GPU (skips without a GPU or MPI)
TESTS += tests/gpu/live_mpi_cuda.sh
EXTRA_DIST += tests/gpu/live_mpi_cuda.sh

# frames in a producer's GPU memory (CUDA IPC) through the daemon, the producer a process of
# its own (the test re-executes itself); skips without a GPU
check_PROGRAMS += tests/gpu/check_ipc
TESTS += tests/gpu/check_ipc
tests_gpu_check_ipc_SOURCES = tests/gpu/check_ipc.c
tests_gpu_check_ipc_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_gpu_check_ipc_LDADD = $(FIXTURE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)
# the per-frame corrections (dezinger, Paganin) against the float64 CPU reference
# cone beam (FDK) against the float64 references
check_PROGRAMS += tests/gpu/check_cone_cuda
TESTS += tests/gpu/check_cone_cuda
tests_gpu_check_cone_cuda_SOURCES = tests/gpu/check_cone_cuda.c tests/cone_scan.c tests/cone_scan.h
tests_gpu_check_cone_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_check_cone_cuda_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_cone_cuda_LDADD = $(GPU_TEST_LIBS)

check_PROGRAMS += tests/gpu/check_corrections
TESTS += tests/gpu/check_corrections
tests_gpu_check_corrections_SOURCES = tests/gpu/check_corrections.c
tests_gpu_check_corrections_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_check_corrections_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_corrections_LDADD = $(GPU_TEST_LIBS)
# iterative slices (tests/unit/check_iterative.c, built for the CUDA backend)
check_PROGRAMS += tests/gpu/check_iterative_cuda
TESTS += tests/gpu/check_iterative_cuda
tests_gpu_check_iterative_cuda_SOURCES = tests/unit/check_iterative.c
tests_gpu_check_iterative_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -DTL_TEST_CUDA
tests_gpu_check_iterative_cuda_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_iterative_cuda_LDADD = $(GPU_TEST_LIBS)
# iterative cone-beam stacks (tests/unit/check_iterative_cone.c, built for the CUDA backend)
check_PROGRAMS += tests/gpu/check_iterative_cone_cuda
TESTS += tests/gpu/check_iterative_cone_cuda
tests_gpu_check_iterative_cone_cuda_SOURCES = tests/unit/check_iterative_cone.c
tests_gpu_check_iterative_cone_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) -DTL_TEST_CUDA
tests_gpu_check_iterative_cone_cuda_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_iterative_cone_cuda_LDADD = $(GPU_TEST_LIBS)
