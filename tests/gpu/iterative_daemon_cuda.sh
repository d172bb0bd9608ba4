#!/bin/sh
# Live iterative slices (tests/integration/check_iterative_daemon) with tomolived on the
# CUDA backend. Skips (77) where CUDA is not usable.
TL_ITER_BACKEND=cuda exec "${top_builddir:-.}/tests/integration/check_iterative_daemon"
