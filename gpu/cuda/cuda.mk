# gpu/cuda/ — the CUDA backend (compiled by nvcc; see gpu/local.mk)
CUDA_SOURCES =
