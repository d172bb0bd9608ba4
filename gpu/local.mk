# gpu/ — the reconstruction engine, in layers (each folder uses only those below it):
#   gpu/            the engine: the public API (engine.h) and its modules (engine_impl.h
#                   lists them), the multi-device split backend and its parts on other
#                   ranks (remote.h), tuning, phantoms, IPC;
#   gpu/geometry/   what a projection and a slice mean (parallel beam);
#   gpu/method/     how the window becomes a slice (FBP: filters, weights);
#   gpu/cpu/        the portable C backend;
#   gpu/cuda/       the CUDA backend, when nvcc is found (compiled by nvcc into its own
#                   static library; nvcc rejects libtool's -fPIC, so no libtool here);
#   gpu/base/       what all of them share: types, tl_fail, the backend table, pool, clock.
# Libraries are linked top down, each once: libtlengine.a, libtlcuda.a, libtlbase.a.
noinst_LIBRARIES += gpu/libtlengine.a gpu/libtlbase.a
gpu_libtlengine_a_SOURCES = \
	gpu/engine.h gpu/engine_bench.h gpu/engine_impl.h \
	gpu/engine.c gpu/backends.c gpu/host.c gpu/frames.c gpu/slices.c gpu/track.c \
	gpu/reconstruct.c gpu/iterate.c gpu/choices.c gpu/bench.c gpu/center.c gpu/halfacq.c gpu/bands.c \
	gpu/window.h gpu/window.c \
	gpu/split.h gpu/split_impl.h gpu/split.c gpu/split_route.c gpu/split_acc.c gpu/split_bench.c gpu/split_iterative.c \
	gpu/remote.h gpu/remote_impl.h gpu/remote.c gpu/remote_codec.c gpu/remote_serve.c \
	gpu/phantom.h gpu/phantom.c gpu/phantom_cone.h gpu/phantom_cone.c \
	gpu/fdk_ref.h gpu/fdk_ref.c gpu/project_ref.h gpu/project_ref.c gpu/iterative_ref.h gpu/iterative_ref.c \
	gpu/ipc.h gpu/ipc.c \
	gpu/tune.h gpu/tune.c gpu/tune_cache.c \
	gpu/geometry/slice.h gpu/geometry/slice.c \
	gpu/geometry/geometry.h gpu/geometry/geometry.c gpu/geometry/parallel.c gpu/geometry/cone_beam.c \
	gpu/geometry/cone.h gpu/geometry/cone.c \
	gpu/method/method.h gpu/method/method.c gpu/method/fbp.c \
	gpu/method/filter.h gpu/method/filter.c \
	gpu/method/weights.h gpu/method/weights.c \
	gpu/method/paganin.h gpu/method/paganin.c \
	gpu/method/iterative.h gpu/method/iterative.c \
	gpu/cpu/cpu_backend.h gpu/cpu/cpu_state.h gpu/cpu/cpu_backend.c \
	gpu/cpu/kernels_impl.h gpu/cpu/kernels_f32.c gpu/cpu/kernels_f64.c \
	gpu/cpu/corrections.c gpu/cpu/rings.c gpu/cpu/profile.c gpu/cpu/iterative.c \
	gpu/cpu/iterative_cone.c
gpu_libtlengine_a_CFLAGS = $(AM_CFLAGS) $(FFTW_CFLAGS) $(JANSSON_CFLAGS)
gpu_libtlbase_a_SOURCES = \
	gpu/base/types.h gpu/base/names.c \
	gpu/base/fail.h gpu/base/fail.c \
	gpu/base/backend.h gpu/base/joseph.h gpu/base/joseph.c \
	gpu/base/clock.h gpu/base/pool.h gpu/base/pool.c gpu/base/sort.h gpu/base/sort.c \
	gpu/base/phase.h gpu/base/phase.c gpu/base/rings.h gpu/base/parker.h \
	gpu/base/link.h gpu/base/wire.h gpu/base/wire.c
gpu_libtlbase_a_CFLAGS = $(AM_CFLAGS)

ENGINE_LIBS = gpu/libtlengine.a
if HAVE_CUDA
noinst_LIBRARIES += gpu/libtlcuda.a
gpu_libtlcuda_a_SOURCES = $(CUDA_SOURCES)
ENGINE_LIBS += gpu/libtlcuda.a
ENGINE_CUDA_LIBS = $(CUDA_LDFLAGS) $(CUDA_LIBS)
SUFFIXES += .cu
# automake applies per-target flags only to languages it knows: nvcc gets everything here.
NVCC_ALLFLAGS = $(NVCC_GENCODE) -std=c++17 -O3 -lineinfo -Xcompiler -Wall,-Wextra,-Wno-unused-parameter \
	$(NVCCFLAGS) $(DEFS) -I$(top_builddir) -I$(top_srcdir) $(CUDA_CPPFLAGS)
.cu.o:
	$(AM_V_GEN)$(NVCC) $(NVCC_ALLFLAGS) -MMD -MP -c -o $@ $<
-include $(patsubst %.cu,%.d,$(filter %.cu,$(gpu_libtlcuda_a_SOURCES)))
CLEANFILES += gpu/cuda/*.d
endif
ENGINE_LIBS += gpu/libtlbase.a $(ENGINE_CUDA_LIBS) $(FFTW_LIBS) $(JANSSON_LIBS) -lm
# the CUDA backend's file list (CUDA_SOURCES) and its tests live with it
include gpu/cuda/cuda.mk
