#!/bin/sh
# The streaming benchmark (tomolive bench --stream) runs end to end on the CPU backend with
# tiny frames: it starts its own daemon, pushes at two rates with and without incremental
# updates, and prints one result line per rate and mode (--repeat 1: no spread line); by
# default each rate runs 3 times, a line each, then a spread line (min-max of p50, p99,
# loss and rate over the repeats). Its numbers are not judged here: timing (and loss, which
# depends on how busy the machine is) belongs in benchmarks.
set -u
b=${top_builddir:-.}
port=$((20000 + $$ % 20000))
out=$("$b/clients/tomolive" bench --stream --backend cpu --rows 16 --cols 32 --window 40 \
    --rate 50 --rate 100 --seconds 1 --connections 2 --port $port --repeat 1 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
for mode in recompute incremental; do
    # result lines: "<mode> | <rate> | ..." (the stage lines say "daemon stage")
    n=$(echo "$out" | grep -E "^$mode *\| +[0-9]" | grep -vc "daemon stage")
    [ "$n" -eq 2 ] || { echo "FAIL: $n result lines for $mode, expected 2"; exit 1; }
done
echo "$out" | grep -q "| spread " && { echo "FAIL: a spread line with --repeat 1"; exit 1; }
# the default: 3 repeats of the rate, then their spread
out=$("$b/clients/tomolive" bench --stream --backend cpu --rows 16 --cols 32 --window 40 \
    --rate 50 --seconds 1 --connections 2 --port $port --incremental on 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: repeats: exit status $rc"; exit 1; }
echo "$out" | grep -q "1 s per rate x 3 repeats" || { echo "FAIL: no repeats in the header"; exit 1; }
n=$(echo "$out" | grep -E "^incremental *\| +50 *\|" | grep -vc "daemon stage")
[ "$n" -eq 3 ] || { echo "FAIL: $n result lines for 3 repeats, expected 3"; exit 1; }
num='[0-9]+\.[0-9]+'
spread="^incremental *\| spread  \| 50 frames/s, min-max of 3 repeats: p50 $num-$num ms, p99 $num-$num ms, lost [0-9]+-[0-9]+, achieved $num-$num frames/s\$"
n=$(echo "$out" | grep -cE "$spread")
[ "$n" -eq 1 ] || { echo "FAIL: $n spread lines, expected 1"; exit 1; }
# the spread is the range of the repeats' own figures: p50 from the smallest to the largest
echo "$out" | awk -F'|' -v want="$spread" '
    $1 ~ /^incremental/ && $2 ~ /^ +50 +$/ { p = $9 + 0; lo = (n == 0 || p < lo) ? p : lo; hi = (n == 0 || p > hi) ? p : hi; n++ }
    $2 ~ /spread/ { match($3, /p50 [0-9.]+-[0-9.]+/); split(substr($3, RSTART + 4, RLENGTH - 4), r, "-")
                    if (sprintf("%.2f", lo) != r[1] || sprintf("%.2f", hi) != r[2]) { print "FAIL: p50 spread " r[1] "-" r[2] " but the lines say " lo "-" hi; bad = 1 } }
    END { exit bad }' || exit 1
for args in "--repeat 0" "--repeat 101" "--repeat x"; do
    "$b/clients/tomolive" bench --stream $args >/dev/null 2>&1
    rc=$?
    [ $rc -eq 2 ] || { echo "FAIL: '$args': exit status $rc, expected 2"; exit 1; }
done
# one slice over TCP as f16 + LZ4 (PROTOCOL.md 10.3): received and decoded, none lost
out=$("$b/clients/tomolive" bench --stream --backend cpu --rows 16 --cols 32 --window 40 \
    --rate 50 --seconds 1 --connections 2 --port $port --incremental on --repeat 1 \
    --delivery tcp --slices 1 --encoding f16 --lz4 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: --encoding f16 --lz4: exit status $rc"; exit 1; }
echo "$out" | grep -q "1 row 32^2 + 0 ortho.*slices by TCP as f16 + LZ4" ||
    { echo "FAIL: the header does not say one slice as f16 + LZ4"; exit 1; }
# the result line: slices received (decoded), none stale (not decodable)
echo "$out" | awk -F'|' '$1 ~ /^incremental/ && $2 ~ /^ +50 +$/ { n++; if ($13 + 0 < 1 || $14 + 0 != 0) bad = 1 }
    END { exit !(n == 1 && !bad) }' || { echo "FAIL: compact slices not received and decoded"; exit 1; }
for args in "--encoding u16 --delivery tcp" "--lz4" "--slices 5"; do
    "$b/clients/tomolive" bench --stream $args >/dev/null 2>&1
    rc=$?
    [ $rc -eq 2 ] || { echo "FAIL: '$args': exit status $rc, expected 2"; exit 1; }
done
# --cuda-ipc without that GPU (or without CUDA in the build): a clear error, no daemon
err=$("$b/clients/tomolive" bench --stream --cuda-ipc --device 1023 --rows 16 --cols 32 \
    --rate 50 --seconds 1 --port $port 2>&1 >/dev/null)
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: --cuda-ipc on no GPU: exit status $rc: $err"; exit 1; }
case $err in *"--cuda-ipc: "*) ;; *) echo "FAIL: --cuda-ipc on no GPU says: $err"; exit 1;; esac
echo "PASS"
