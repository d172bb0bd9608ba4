# gpu/cuda/ — the CUDA backend (compiled by nvcc; see gpu/local.mk). One .cu per concern:
# the operation table and device state, the per-frame path (staging, preprocessing, cuFFT
# filter), the back-projection kernel family (kernels.cuh) and its selection, and the
# benchmarks.
CUDA_SOURCES = \
	gpu/cuda/cuda_backend.cu \
	gpu/cuda/store.cu \
	gpu/cuda/preprocess.cu \
	gpu/cuda/dezinger.cu \
	gpu/cuda/paganin.cu \
	gpu/cuda/stages.cu \
	gpu/cuda/rings.cu \
	gpu/cuda/profile.cu \
	gpu/cuda/filter.cu \
	gpu/cuda/backproject.cu \
	gpu/cuda/bp_texture.cu \
	gpu/cuda/bp_alu.cu \
	gpu/cuda/bp_plane.cu \
	gpu/cuda/bp_cone.cu \
	gpu/cuda/bp_cone_column.cu \
	gpu/cuda/cone_stack.cu \
	gpu/cuda/bp_hybrid.cu \
	gpu/cuda/bp_oversample.cu \
	gpu/cuda/bp_state.cu \
	gpu/cuda/bench.cu \
	gpu/cuda/microbench.cu \
	gpu/cuda/accumulate.cu \
	gpu/cuda/iterative.cu \
	gpu/cuda/iterative_cone.cu \
	gpu/cuda/iterative_sweep.cu \
	gpu/cuda/ipc.cu
# The headers are listed here, not in CUDA_SOURCES: gpu/local.mk includes
# $(CUDA_SOURCES:.cu=.d) as nvcc's dependency files, and a header in that list would be
# read as a makefile. Header dependencies come from those .d files (nvcc -MMD).
noinst_HEADERS += \
	gpu/cuda/check.cuh \
	gpu/cuda/cuda_state.cuh \
	gpu/cuda/bp_common.cuh \
	gpu/cuda/bp_alu.cuh \
	gpu/cuda/kernels.cuh \
	gpu/cuda/iterative.cuh \
	gpu/cuda/iterative_slice.cuh \
	gpu/cuda/fround.h \
	gpu/cuda/cuda_backend.h
