#!/bin/sh
# check_python.sh — the Python client's tests (clients/python, package tomolive), run by
# `make check`: protocol checks without a daemon, then the client, the example and the
# progress display of `tomolive push`/`sub` against the built tomolived.
#
# The interpreter is the one configure found ($PYTHON3, /usr/bin/python3 first: Debian's,
# which has python3-zmq, -msgpack and -numpy; another python3 on PATH may not). Without
# it or its modules the tests are skipped (exit 77) with the reason.
# Keep a failed run's daemon directory with TL_KEEP=1.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=.}"
export top_srcdir top_builddir
py=${PYTHON3:-/usr/bin/python3}
if ! command -v "$py" >/dev/null 2>&1; then
    echo "SKIP: no Python 3 interpreter ('$py'); configure looks for python3 (PYTHON3=...)"
    exit 77
fi
if ! why=$("$py" -c 'import zmq, msgpack, numpy' 2>&1); then
    echo "SKIP: $py cannot import zmq, msgpack and numpy (Debian: python3-zmq" \
        "python3-msgpack python3-numpy): $(printf '%s\n' "$why" | tail -n 1)"
    exit 77
fi
# the sources may be read-only (make distcheck): no __pycache__ next to them
export PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$top_srcdir/tests/python:$top_srcdir/clients/python${PYTHONPATH:+:$PYTHONPATH}"
export MPLBACKEND=Agg
"$py" --version
exec "$py" -m unittest -v test_protocol test_client test_tools test_security
