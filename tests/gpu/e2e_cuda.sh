#!/bin/sh
# The daemon's end-to-end test (tests/integration/check_e2e) with tomolived on the CUDA
# backend: slices must equal tomolive recon's (CPU) within the kernels' exact mode. Skips
# (77) where CUDA is not usable.
TL_E2E_BACKEND=cuda exec "${top_builddir:-.}/tests/integration/check_e2e"
