#!/bin/bash
# fuzz_all.sh — runs libFuzzer targets (tests/fuzz.mk), FUZZ_JOBS at a time, each for
# FUZZ_SECONDS, and prints one table at the end:
#
#   target  seconds  execs  exec/s  cov  ft  corpus  crashes
#
# cov and ft are libFuzzer's last figures (edges and features covered), execs and exec/s its
# final stats; corpus is the files in the target's run corpus afterwards (seeds are not
# copied there: only what the run kept). Run from the build directory:
#
#   top_srcdir=SRC FUZZ_SECONDS=600 FUZZ_JOBS=4 fuzz_all.sh header control adapter-native ...
#
# Per target, tests/fuzz/run/NAME/ holds corpus/ (new inputs, kept between runs), log
# (libFuzzer's output) and crash-*, leak-*, timeout-*, oom-* (inputs that failed). Exits 1
# if any target crashed or could not run. Leaks inside system libraries that are not ours
# are suppressed, each with its reason, in tests/sanitizers.supp.
set -u
src=${top_srcdir:-.}
seconds=${FUZZ_SECONDS:-600}
jobs=${FUZZ_JOBS:-1}
[ "$#" -gt 0 ] || { echo "usage: fuzz_all.sh TARGET..." >&2; exit 2; }

# The seeds and options of a target.
options() {
    case "$1" in
    header) echo "$src/tests/fuzz/corpus -max_len=70000 -rss_limit_mb=512 -timeout=5" ;;
    control) echo "$src/tests/fuzz/control-corpus $src/tests/fuzz/corpus -max_len=70000 \
        -rss_limit_mb=512 -timeout=5" ;;
    adapter-*)
        local rec=""
        [ -d tests/fuzz/adapters-recorded ] && rec=tests/fuzz/adapters-recorded
        echo "$src/tests/fuzz/adapters-corpus $rec -max_len=1200000 -rss_limit_mb=2048 -timeout=10" ;;
    http) echo "$src/tests/fuzz/http-corpus -max_len=12000 -timeout=20" ;;
    ws) echo "$src/tests/fuzz/ws-corpus -max_len=12000 -timeout=20" ;;
    http-route) echo "$src/tests/fuzz/http-route-corpus -max_len=4096 -timeout=5" ;;
    settings) echo "$src/tests/fuzz/settings-corpus -max_len=16384 -timeout=5" ;;
    tiff) echo "$src/tests/fuzz/tiff-corpus -max_len=65536 -rss_limit_mb=2048 -timeout=10" ;;
    hdf5) echo "$src/tests/fuzz/hdf5-corpus -max_len=65536 -rss_limit_mb=2048 -timeout=10" ;;
    cone-read)
        echo "$src/tests/fuzz/cone-read-corpus -max_len=16384 -rss_limit_mb=2048 -timeout=5" ;;
    *) return 1 ;;
    esac
}

run_one() {
    local name=$1 dir=tests/fuzz/run/$1
    mkdir -p "$dir/corpus"
    touch "$dir/started"
    local opts
    opts=$(options "$name") || { echo "unknown target $name" >"$dir/log"; return 1; }
    # shellcheck disable=SC2086 # opts is a list of words
    top_srcdir=$src LSAN_OPTIONS=suppressions=$src/tests/sanitizers.supp \
        ./tests/fuzz/fuzz_"$name" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$dir/" "$dir/corpus" $opts >"$dir/log" 2>&1
    echo $? >"$dir/status"
}

start=$(date +%s)
for name in "$@"; do
    rm -f tests/fuzz/run/"$name"/status tests/fuzz/run/"$name"/log
    while [ "$(jobs -pr | wc -l)" -ge "$jobs" ]; do wait -n; done
    echo "fuzz: $name for ${seconds}s"
    run_one "$name" &
done
wait

failed=0
printf '\n%-22s %7s %11s %8s %7s %8s %7s %7s\n' target seconds execs exec/s cov ft corpus crashes
for name in "$@"; do
    dir=tests/fuzz/run/$name
    log=$dir/log
    # the last status line: "#N  DONE   cov: C ft: F corp: ..." (or pulse/NEW/REDUCE/INITED)
    last=$(grep -E '^#[0-9]+' "$log" 2>/dev/null | grep 'cov:' | tail -n 1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" 2>/dev/null | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" 2>/dev/null | tail -n 1)
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" 2>/dev/null | tail -n 1)
    corpus=$(find "$dir/corpus" -type f 2>/dev/null | wc -l)
    crashes=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o \
        -name 'timeout-*' -o -name 'oom-*' \) -newer "$dir/started" 2>/dev/null | wc -l)
    status=$(cat "$dir/status" 2>/dev/null || echo 1)
    if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes="exit$status"; fi
    [ "$status" -ne 0 ] && failed=1
    printf '%-22s %7s %11s %8s %7s %8s %7s %7s\n' "$name" "${secs:--}" "${execs:--}" \
        "${rate:--}" "${cov:--}" "${ft:--}" "$corpus" "$crashes"
done
echo "fuzz: $# targets in $(($(date +%s) - start)) s; logs and findings in tests/fuzz/run/TARGET/"
if [ "$failed" -ne 0 ]; then
    for name in "$@"; do
        dir=tests/fuzz/run/$name
        if [ "$(cat "$dir/status" 2>/dev/null || echo 1)" -ne 0 ]; then
            echo "===== $name: $dir/log (last 30 lines)"
            tail -n 30 "$dir/log"
        fi
    done
fi
exit "$failed"
