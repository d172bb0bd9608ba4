#!/bin/sh
# tomolived --mpi on the CUDA backend: four ranks sharing the host's GPU (on a one-GPU
# machine all four on it) serve the slices one daemon with four partitions on that GPU
# serves: tests/mpi/check_live_mpi with TL_LIVE_BACKEND=cuda. Skips (77) without a usable
# CUDA device, MPI or mpirun (TL_MPIRUN, else PATH's: the GPU machine's is carried,
# tests/mpi/bundle-openmpi.sh).
set -u
top="${top_builddir:-.}"
T="$top/clients/tomolive"
D=$(mktemp -d "${TMPDIR:-/tmp}/tomolive-live-cuda-XXXXXX") || exit 99
trap 'rm -rf "$D"' EXIT
"$T" phantom --scan "$D/scan.h5" --projections 16 --size 32 --rows 8 >/dev/null || exit 99
if ! "$T" recon --input "$D/scan.h5" --backend cuda --plan >"$D/plan.txt" 2>&1; then
    echo "SKIP: no usable CUDA device: $(cat "$D/plan.txt")"
    exit 77
fi
[ -n "${TL_MPIRUN:-}" ] || TL_MPIRUN=$(command -v mpirun || echo /usr/bin/mpirun)
export TL_MPIRUN
TL_LIVE_BACKEND=cuda exec "$top/tests/mpi/check_live_mpi"
