#!/bin/sh
# Boxes (set_slice kind "box", tests/integration/check_box_daemon) with tomolived on the
# CUDA backend. Skips (77) where CUDA is not usable.
TL_BOX_BACKEND=cuda exec "${top_builddir:-.}/tests/integration/check_box_daemon"
