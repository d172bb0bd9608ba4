#!/bin/sh
# The streaming benchmark (tomolive bench --stream) runs end to end on the CPU backend with
# tiny frames: it starts its own daemon, pushes at two rates with and without incremental
# updates, and prints one result line per rate and mode. Its numbers are not judged here:
# timing (and loss, which depends on how busy the machine is) belongs in benchmarks.
set -u
b=${top_builddir:-.}
port=$((20000 + $$ % 20000))
out=$("$b/clients/tomolive" bench --stream --backend cpu --rows 16 --cols 32 --window 40 \
    --rate 50 --rate 100 --seconds 1 --connections 2 --port $port 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
for mode in recompute incremental; do
    # result lines: "<mode> | <rate> | ..." (the stage lines say "daemon stage")
    n=$(echo "$out" | grep -E "^$mode *\| +[0-9]" | grep -vc "daemon stage")
    [ "$n" -eq 2 ] || { echo "FAIL: $n result lines for $mode, expected 2"; exit 1; }
done
# --cuda-ipc without that GPU (or without CUDA in the build): a clear error, no daemon
err=$("$b/clients/tomolive" bench --stream --cuda-ipc --device 1023 --rows 16 --cols 32 \
    --rate 50 --seconds 1 --port $port 2>&1 >/dev/null)
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: --cuda-ipc on no GPU: exit status $rc: $err"; exit 1; }
case $err in *"--cuda-ipc: "*) ;; *) echo "FAIL: --cuda-ipc on no GPU says: $err"; exit 1;; esac
echo "PASS"
