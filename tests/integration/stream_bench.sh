#!/bin/sh
# The streaming benchmark (tomolive bench --stream) runs end to end on the CPU backend with
# tiny frames: it starts its own daemon, pushes at two rates with and without incremental
# updates, and prints one result line per rate and mode with no frame lost at a low rate.
# Numbers are not judged here (timing belongs in benchmarks, not tests).
set -u
b=${top_builddir:-.}
port=$((20000 + $$ % 20000))
out=$("$b/clients/tomolive" bench --stream --backend cpu --rows 16 --cols 32 --window 40 \
    --rate 50 --rate 100 --seconds 1 --connections 2 --port $port 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
for mode in recompute incremental; do
    n=$(echo "$out" | grep -c "^$mode *|")
    [ "$n" -eq 2 ] || { echo "FAIL: $n result lines for $mode, expected 2"; exit 1; }
    # at 50 frames/s of 16 x 32 nothing may be lost: columns 6 (lost)
    lost=$(echo "$out" | grep "^$mode *| *50 " | awk -F'|' '{gsub(/ /, "", $6); print $6}')
    [ "$lost" = "0" ] || { echo "FAIL: $mode lost $lost frames at 50/s"; exit 1; }
done
echo "PASS"
