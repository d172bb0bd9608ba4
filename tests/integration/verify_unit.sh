#!/bin/sh
# verify_unit.sh — lints the generated etc/tomolived.service with `systemd-analyze verify`.
# systemd-analyze exits 0 even on unknown keys, so any output at all is a failure. The copy
# it checks runs /bin/true instead of tomolived, which need not be installed (verify
# rejects an ExecStart= whose program is missing). Exit 77 (skip) without systemd-analyze.
set -u
: "${top_builddir:=.}"
unit="$top_builddir/etc/tomolived.service"

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "SKIP: systemd-analyze is not installed"
    exit 77
fi
if [ ! -f "$unit" ]; then
    echo "FAIL: $unit is missing (make builds it)"
    exit 1
fi
if grep -n '@[a-z_]*@' "$unit"; then
    echo "FAIL: $unit has unsubstituted @variables@"
    exit 1
fi
grep -q '^ExecStart=/.*/tomolived -c /.*/tomolive/tomolive.conf$' "$unit" || {
    echo "FAIL: ExecStart= of $unit is not an absolute tomolived -c CONF"; exit 1; }
grep -q '^Type=notify$' "$unit" || { echo "FAIL: $unit is not Type=notify"; exit 1; }

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
sed 's|^ExecStart=[^ ]*|ExecStart=/bin/true|' "$unit" > "$tmp/tomolived.service"
out=$(cd "$tmp" && SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$tmp/tomolived.service" 2>&1)
rc=$?
if [ $rc -ne 0 ] || [ -n "$out" ]; then
    echo "FAIL: systemd-analyze verify (exit $rc) said:"
    printf '%s\n' "$out"
    exit 1
fi
echo "PASS: systemd-analyze verify has nothing to say about $unit"
