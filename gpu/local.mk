# gpu/ — the reconstruction engine: one API (engine.h), the portable C backend (gpu/cpu/)
# and, when nvcc is found, the CUDA backend (gpu/cuda/, compiled by nvcc into its own
# static library; nvcc rejects libtool's -fPIC, so no libtool here).
noinst_LIBRARIES += gpu/libtlengine.a
gpu_libtlengine_a_SOURCES = \
	gpu/engine.h gpu/engine.c gpu/base/backend.h gpu/base/names.c gpu/geometry/slice.c \
	gpu/window.h gpu/window.c \
	gpu/method/filter.h gpu/method/filter.c \
	gpu/clock.h gpu/pool.h gpu/base/clock.h gpu/base/pool.h gpu/base/pool.c gpu/cpu/cpu_state.h gpu/cpu/cpu_backend.c \
	gpu/split.c \
	gpu/cpu/kernels_impl.h gpu/cpu/kernels_f32.c gpu/cpu/kernels_f64.c \
	gpu/phantom.h gpu/phantom.c \
	gpu/ipc.h gpu/ipc.c \
	gpu/tune.h gpu/tune.c gpu/tune_cache.c
gpu_libtlengine_a_CFLAGS = $(AM_CFLAGS) $(FFTW_CFLAGS) $(JANSSON_CFLAGS)

ENGINE_LIBS = gpu/libtlengine.a
if HAVE_CUDA
noinst_LIBRARIES += gpu/libtlcuda.a
gpu_libtlcuda_a_SOURCES = $(CUDA_SOURCES)
# libtlengine.a once more after libtlcuda.a: the CUDA objects use its helpers (tl_fail, the
# thread pool), and a program that reaches them only through gpu/ipc.h has passed it by then
ENGINE_LIBS += gpu/libtlcuda.a gpu/libtlengine.a $(CUDA_LDFLAGS) $(CUDA_LIBS)
SUFFIXES += .cu
# automake applies per-target flags only to languages it knows: nvcc gets everything here.
NVCC_ALLFLAGS = $(NVCC_GENCODE) -std=c++17 -O3 -lineinfo -Xcompiler -Wall,-Wextra,-Wno-unused-parameter \
	$(NVCCFLAGS) $(DEFS) -I$(top_builddir) -I$(top_srcdir) $(CUDA_CPPFLAGS)
.cu.o:
	$(AM_V_GEN)$(NVCC) $(NVCC_ALLFLAGS) -MMD -MP -c -o $@ $<
-include $(patsubst %.cu,%.d,$(filter %.cu,$(gpu_libtlcuda_a_SOURCES)))
CLEANFILES += gpu/cuda/*.d
endif
ENGINE_LIBS += $(FFTW_LIBS) $(JANSSON_LIBS) -lm
# the CUDA backend's file list (CUDA_SOURCES) and its tests live with it
include gpu/cuda/cuda.mk
