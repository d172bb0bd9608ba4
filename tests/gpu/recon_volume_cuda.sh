#!/bin/sh
# tomolive recon out of core on the CUDA backend: a volume cut into slabs (by --slab-rows and
# by a small --gpu-memory) equals the in-core volume (one slab) bit for bit, every slice
# file compared byte for byte (TIFF stack output). Default kernels with slabs of 16 rows (a
# multiple of the multi-slice kernels' 4), and a forced kernel with odd slabs of 7 rows.
# Skips (77) where CUDA is not usable.
set -u
T="${top_builddir:-.}/clients/tomolive"
D=$(mktemp -d "${TMPDIR:-/tmp}/tomolive-recon-cuda-XXXXXX") || exit 99
trap 'rm -rf "$D"' EXIT
"$T" phantom --scan "$D/scan.h5" --projections 180 --size 128 --rows 64 >/dev/null || exit 99
if ! "$T" recon --input "$D/scan.h5" --backend cuda --plan >"$D/plan.txt" 2>&1; then
    echo "SKIP: no usable CUDA device: $(cat "$D/plan.txt")"
    exit 77
fi
fail=0
same() { # $1 $2: directories of slices
    n=0
    for f in "$1"/slice_*.tif; do
        b=$(basename "$f")
        if ! cmp -s "$f" "$2/$b"; then
            echo "FAIL: $1/$b and $2/$b differ"
            fail=1
        fi
        n=$((n + 1))
    done
    [ "$n" -eq 64 ] || { echo "FAIL: $n slices in $1, want 64"; fail=1; }
}
run() { # $1: output dir, then options
    out=$1
    shift
    "$T" recon --input "$D/scan.h5" --backend cuda -v "$@" --output "$out/" \
        >"$out.out" 2>"$out.err" || { echo "FAIL: recon $*: $(cat "$out.err")"; fail=1; }
}
run "$D/in" --slab-rows 64
run "$D/s16" --slab-rows 16
same "$D/in" "$D/s16"
# a GPU budget of the engine for about 20 rows: several slabs, chosen by the planner
run "$D/gpu" --gpu-memory 40M
grep -q "slabs of" "$D/gpu.err" || { echo "FAIL: no plan: $(cat "$D/gpu.err")"; fail=1; }
grep "plan:" "$D/gpu.err"
same "$D/in" "$D/gpu"
K=$(sed -n 's/.*kernel \([^ ,]*\).*/\1/p' "$D/in.err" | tail -1)
echo "default kernel: $K"
run "$D/kin" --slab-rows 64 --kernel "$K"
run "$D/k7" --slab-rows 7 --kernel "$K"
same "$D/kin" "$D/k7"
grep -A7 "^stage" "$D/in.err"
[ $fail -eq 0 ] && echo "PASS: out-of-core CUDA volumes equal the in-core volume"
exit $fail
