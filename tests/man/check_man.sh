#!/bin/sh
# check_man.sh — the man pages tomolived(8), tomolive(1) and tomolive.conf(5):
#   - groff renders each one without a warning (-ww: every warning category);
#   - they cannot drift from the programs: every long option of `tomolived --help` is in
#     tomolived.8, every command of `tomolive --help` has its section in tomolive.1 and
#     every long option of its `tomolive CMD --help` is in the page, and the KEYS section
#     of the generated tomolive.conf.5 lists exactly the keys of `tomolived
#     --print-config`, section by section, in order.
# Skipped (exit 77) without groff (Debian: groff-base).
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
if ! command -v groff >/dev/null 2>&1; then
    echo "SKIP: no groff (Debian: groff-base)"
    exit 77
fi
daemon=$top_builddir/daemon/tomolived
tool=$top_builddir/clients/tomolive
p8=$top_srcdir/daemon/tomolived.8
p1=$top_srcdir/clients/tomolive.1
p5=$top_builddir/etc/tomolive.conf.5
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tlman.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}

for page in "$p8" "$p1" "$p5"; do
    if [ ! -f "$page" ]; then
        fail "$page is missing"
        continue
    fi
    if ! groff -man -Tutf8 -ww -z "$page" >"$tmp/warn" 2>&1 || [ -s "$tmp/warn" ]; then
        fail "groff warns about $page:"
        cat "$tmp/warn"
    fi
    lines=$(groff -man -Tutf8 "$page" 2>/dev/null | wc -l)
    echo "$page: renders to $lines lines"
    [ "$lines" -gt 20 ] || fail "$page renders to almost nothing"
done

# The page's source as plain text: \- is '-', font escapes and \& go.
plain() {
    sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g' "$1"
}

# Every long option in a help text ($2: the file holding it) must be in page $1.
options_in() {
    for opt in $(grep -o -- '--[a-z][a-z0-9-]*' "$2" | sort -u); do
        grep -q -- "$opt\\([^a-z0-9-]\\|\$\\)" "$tmp/plain" || fail "$1 lacks $opt ($3)"
    done
}

plain "$p8" >"$tmp/plain"
"$daemon" --help >"$tmp/help" || fail "tomolived --help failed"
options_in "$p8" "$tmp/help" "tomolived --help"

plain "$p1" >"$tmp/plain"
"$tool" --help >"$tmp/help" || fail "tomolive --help failed"
cmds=$(sed -n '/^commands:/,$p' "$tmp/help" | awk 'NR > 1 && NF { print $1 }')
[ -n "$cmds" ] || fail "no commands in tomolive --help"
for cmd in $cmds; do
    upper=$(echo "$cmd" | tr '[:lower:]' '[:upper:]')
    grep -q "^\\.SH $upper\$" "$p1" || fail "$p1 has no section $upper for 'tomolive $cmd'"
    "$tool" "$cmd" --help >"$tmp/help" 2>&1 || fail "tomolive $cmd --help failed"
    options_in "$p1" "$tmp/help" "tomolive $cmd --help"
done
# a mode with a help of its own
if "$tool" bench --stream --help >"$tmp/help" 2>&1; then
    options_in "$p1" "$tmp/help" "tomolive bench --stream --help"
fi
echo "tomolive commands: $(echo $cmds)"

# tomolive.conf.5: section.key of every entry under KEYS, against the daemon's own list.
"$daemon" --print-config | awk '
    /^\[[a-z0-9_.-]+\]$/ { s = substr($0, 2, length($0) - 2); next }
    /^#?[a-z0-9_]+ = / { k = $1; sub(/^#/, "", k); print s "." k }' >"$tmp/want"
awk '
    /^\.SH / { keys = ($2 == "KEYS") }
    keys && /^\.SS \[[a-z0-9_.-]+\]$/ { s = substr($2, 2, length($2) - 2) }
    keys && prev == ".TP" && /^\.B / { print s "." $2 }
    { prev = $0 }' "$p5" >"$tmp/have"
if ! diff -u "$tmp/want" "$tmp/have" >"$tmp/diff"; then
    fail "the KEYS of $p5 differ from tomolived --print-config:"
    cat "$tmp/diff"
fi
echo "tomolive.conf.5: $(wc -l <"$tmp/have") keys"
[ -s "$tmp/have" ] || fail "$p5 documents no keys"
exit $failed
