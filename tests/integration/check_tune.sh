#!/bin/sh
# check_tune.sh — `tomolive tune` on the CPU backend with a tiny shape: the ranking and the
# choices are printed and stored; a second run reads the cache; --force tunes again;
# --no-cache writes nothing; TOMOLIVE_TUNE_CACHE is the default path; a corrupt cache is
# an error (exit 1) and is left alone; bad options exit 2. Timings are not judged.
set -u
b=${top_builddir:-.}
tool=$b/clients/tomolive
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tltune.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}
small="--backend cpu --size 48 --window 24 --batch 2 --budget 2"

# tune: exit 0, a ranking row per batch, the choices, the cache file (in a new directory)
cache=$tmp/sub/t.json
out=$("$tool" tune $small --cache "$cache" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "tune: exit status $rc"
n=$(echo "$out" | grep -c '^cpu-f32 *| exact *| *1 *| *[12] *|')
[ "$n" -eq 2 ] || fail "tune: $n ranking rows of cpu-f32, expected 2 (batch 1 and 2)"
echo "$out" | grep -q '^choices for 48x48' || fail "tune: no choices"
for q in exact fast preview; do
    echo "$out" | grep -q "^$q *| cpu-f32 (.* ms) *| cpu-f32 (batch [12]," ||
        fail "tune: no choice line for $q"
done
echo "$out" | grep -q "micro-benchmarks: not available on the cpu backend" ||
    fail "tune: no word on the micro-benchmarks"
echo "$out" | grep -q "stored in $cache" || fail "tune: not stored"
[ -f "$cache" ] || fail "tune: no cache file $cache"

# the second run reads the cache, and prints the same tables
out=$("$tool" tune $small --cache "$cache" --no-rates 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "cached: exit status $rc"
echo "$out" | grep -q "^cached result from $cache (measured " || fail "cached: not from the cache"
echo "$out" | grep -q '^tuning' && fail "cached: tuned again"
echo "$out" | grep -q '^exact *| cpu-f32' || fail "cached: no choices"
echo "$out" | grep -q 'micro-benchmarks' && fail "cached: micro-benchmarks despite --no-rates"

# --force tunes again and stores
out=$("$tool" tune $small --cache "$cache" --force 2>&1)
[ $? -eq 0 ] || fail "force: exit status"
echo "$out" | grep -q '^tuning' || fail "force: did not tune"
echo "$out" | grep -q "stored in $cache" || fail "force: not stored"

# --no-cache: nothing written, not even the default
TOMOLIVE_TUNE_CACHE=$tmp/env.json "$tool" tune $small --no-cache >/dev/null 2>&1 ||
    fail "no-cache: exit status"
[ -e "$tmp/env.json" ] && fail "no-cache: wrote $tmp/env.json"
# the default path
TOMOLIVE_TUNE_CACHE=$tmp/env.json "$tool" tune $small >/dev/null 2>&1 || fail "env: exit status"
[ -f "$tmp/env.json" ] || fail "env: TOMOLIVE_TUNE_CACHE not used"

# a corrupt cache: exit 1, a message naming it, the file untouched
echo "not json" >"$tmp/bad.json"
err=$("$tool" tune $small --cache "$tmp/bad.json" 2>&1 >/dev/null)
rc=$?
[ $rc -eq 1 ] || fail "corrupt: exit status $rc, expected 1"
echo "$err" | grep -q "$tmp/bad.json" || fail "corrupt: message without the path: $err"
[ "$(cat "$tmp/bad.json")" = "not json" ] || fail "corrupt: the file was changed"

# usage errors
for args in "--batch 3" "--size 0" "--window x" "--budget 0" "--budget abc" "--backend gl" \
    "--cache $tmp/x.json --no-cache" "--bogus" "extra" "--cache"; do
    "$tool" tune $args >/dev/null 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "'tune $args': exit status $rc, expected 2"
done
[ $failed -eq 0 ] && echo "PASS"
exit $failed
