#!/bin/sh
# check_corpus.sh — the checked-in golden headers (tests/fuzz/corpus) are exactly what the
# public encoders write today: gen_corpus writes them afresh into a temporary directory
# and every file must be byte-identical to its checked-in twin, with none missing on
# either side. A difference is a change of the wire format: intended ones are checked in
# with `make fuzz-corpus`.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
gen=$top_builddir/tests/fuzz/gen_corpus
golden=$top_srcdir/tests/fuzz/corpus
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tlcorpus.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
"$gen" "$tmp" || { echo "FAIL: $gen failed"; exit 1; }
failed=0
for f in "$golden"/*.mp "$tmp"/*.mp; do
    name=$(basename "$f")
    if [ ! -f "$golden/$name" ]; then
        echo "FAIL: $name is written by gen_corpus but not checked in"
        failed=1
    elif [ ! -f "$tmp/$name" ]; then
        echo "FAIL: $name is checked in but gen_corpus no longer writes it"
        failed=1
    elif ! cmp -s "$golden/$name" "$tmp/$name"; then
        echo "FAIL: $name differs from what the encoders write now:"
        cmp "$golden/$name" "$tmp/$name"
        failed=1
    fi
done
[ "$failed" -eq 0 ] && echo "$(ls "$golden" | wc -l) golden headers, byte-identical"
exit "$failed"
