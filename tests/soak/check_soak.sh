#!/bin/sh
# check_soak.sh — the soak and fault suite (tests/soak/soak, whose top comment says what
# it injects and checks) for 2 minutes, run by `make check` and so by CI: every fault at
# least once (twice, mostly), frames counted, growth judged on a short run. A person runs
# the hour: `nice tests/soak/soak --minutes 60 --out soak-out`. SOAK_MINUTES changes the
# length here.
#
# The interpreter is the one configure found ($PYTHON3, /usr/bin/python3 first); the suite
# needs only its standard library (and uses the Python client too where python3-zmq,
# -msgpack, -numpy are there). The logs of a failed run are kept; the path is printed.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=.}"
export top_srcdir top_builddir
py=${PYTHON3:-/usr/bin/python3}
if ! command -v "$py" >/dev/null 2>&1; then
    echo "SKIP: no Python 3 interpreter ('$py'); configure looks for python3 (PYTHON3=...)"
    exit 77
fi
# the sources may be read-only (make distcheck): no __pycache__ next to them
export PYTHONDONTWRITEBYTECODE=1
# Smaller scans than the hour's (128 x 128, 94 frames at 60 frames/s: about 2 s of frames),
# so that every fault comes round even on a loaded CI machine.
exec "$py" "$top_srcdir/tests/soak/soak" --minutes "${SOAK_MINUTES:-2}" \
    --size 128 --projections 90 --darks 2 --rate 60
