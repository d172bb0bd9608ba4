#!/bin/sh
# demo.sh — what `./bootstrap demo` runs (from the build directory): tomolived on loopback,
# three slices (a row, an ortho-slice, an oblique plane), `tomolive sub` watching them and
# the simulated camera pushing a phantom scan; then a summary and PNG previews in demo-out/.
# Every socket of the demo is on 127.0.0.1, the preview page included; the daemon serves
# the page of the source tree (it is the build tree's daemon) and its URL is printed. The
# page asks for the demo's operator token, made at random in demo-out/http.token.
#
#   sh tests/demo.sh [--keep]
#     --keep   after the summary, leave tomolived running with the scan, so that the page can
#              be opened (and its views moved through the reconstructed volume); Ctrl-C ends it
#
# Environment: DEMO_ROWS, DEMO_COLS, DEMO_PROJECTIONS, DEMO_RATE (frames/s), DEMO_BACKEND
# (auto, cpu, cuda), DEMO_PORT (first of four consecutive TCP ports, default 5600: ingest,
# control, slices and the page), DEMO_KEEP=1 (as --keep).
set -eu

keep=${DEMO_KEEP:-0}
for arg in "$@"; do
    case "$arg" in
    --keep) keep=1 ;;
    *)
        echo "usage: sh tests/demo.sh [--keep]" >&2
        exit 2
        ;;
    esac
done
rows=${DEMO_ROWS:-64}
cols=${DEMO_COLS:-256}
nproj=${DEMO_PROJECTIONS:-720}
rate=${DEMO_RATE:-300}
backend=${DEMO_BACKEND:-auto}
port=${DEMO_PORT:-5600}
out=demo-out
PATH="$(pwd)/clients:$(pwd)/daemon:$PATH"
export PATH

ingest=tcp://127.0.0.1:$port
control=tcp://127.0.0.1:$((port + 1))
slices=tcp://127.0.0.1:$((port + 2))
page=127.0.0.1:$((port + 3))
rm -rf "$out"
mkdir -p "$out"
# the operator token the page asks for (http.token_file: its first line; never logged)
(umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$out/http.token" && echo >>"$out/http.token")

tomolived --backend "$backend" --set "ingest.endpoint=$ingest" \
    --set "control.endpoint=$control" --set "slices.endpoint=$slices" \
    --set "http.listen=$page" --set "http.token_file=$(pwd)/$out/http.token" \
    2>"$out/tomolived.log" &
daemon=$!
stop_daemon() {
    kill -TERM "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true
}
trap stop_daemon EXIT INT TERM

ctl() { tomolive ctl --endpoint "$control" --timeout 5 "$@"; }
tries=0
until ctl status >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ $tries -gt 50 ] || ! kill -0 "$daemon" 2>/dev/null; then
        echo "demo: tomolived did not start:" >&2
        cat "$out/tomolived.log" >&2
        exit 1
    fi
    sleep 0.2
done

echo "demo: tomolived on 127.0.0.1 ports $port-$((port + 3)); preview page: http://$page/"
echo "demo: the page asks for the operator token: $(cat "$out/http.token") (in $out/http.token)"
[ "$keep" = 1 ] || echo "demo: (to open it, run the demo with --keep: the daemon then stays up)"

mid=$((rows / 2))
zlo=$((rows / 4))
ctl set_slice id=row kind=row z=$mid >/dev/null
ctl set_slice id=ortho kind=ortho axis=y position=0 >/dev/null
# oblique: tilted about the y axis, climbing half the detector's height across the slice
plane="[$cols,0,$((rows / 2)),0,$cols,0,-$((cols / 2)),-$((cols / 2)),$zlo]"
ctl set_slice id=oblique kind=plane "size=[$cols,$cols]" "orientation=$plane" >/dev/null

tomolive sub --endpoint "$slices" --out "$out" --png --until-final --latency --timeout 120 \
    --quiet row ortho oblique >"$out/sub.txt" 2>&1 &
sub=$!
# the scan is pushed once the subscriber's three subscriptions have reached the daemon
tries=0
until ctl status | grep -q '"subscriptions": 3'; do
    tries=$((tries + 1))
    if [ $tries -gt 100 ] || ! kill -0 "$sub" 2>/dev/null; then
        echo "demo: the subscriber did not subscribe:" >&2
        cat "$out/sub.txt" >&2
        exit 1
    fi
    sleep 0.1
done
echo "demo: pushing $nproj projections of $rows x $cols (and 10 darks, 10 flats) at $rate frames/s"
tomolive push --endpoint "$ingest" --rows "$rows" --cols "$cols" --projections "$nproj" \
    --rate "$rate" --noise --quiet
if ! wait "$sub"; then
    echo "demo: the subscriber failed:" >&2
    cat "$out/sub.txt" >&2
    exit 1
fi
ctl status >"$out/status.json"
if [ "$keep" != 1 ]; then
    stop_daemon
    trap - EXIT
fi

err_row=$(tomolive phantom --rows "$rows" --cols "$cols" --row $mid --compare "$out/row.tif")
err_ortho=$(tomolive phantom --rows "$rows" --cols "$cols" --ortho y:0 --compare "$out/ortho.tif")
err_plane=$(tomolive phantom --rows "$rows" --cols "$cols" --plane "$(echo "$plane" | tr -d '[]')" \
    --size "$cols,$cols" --compare "$out/oblique.tif")

echo
echo "== summary"
echo "slices received by tomolive sub; latency: from the newest frame's acquisition to the"
echo "slice's arrival, over every slice (the first ones, and the final one of each id,"
echo "published when the scan's end arrives, included):"
grep -E '^summary|^latency' "$out/sub.txt" || true
sed -n 's/.*"device": "\(.*\)".*/reconstructed on: \1/p' "$out/status.json" | head -n 1
# which kernel served each slice size, and how it was chosen (status "kernels")
python3 - "$out/status.json" <<'PY' 2>/dev/null || true
import json, sys
k = json.load(open(sys.argv[1]))["kernels"]
for s in k["sizes"]:
    print("kernels for %dx%d: %s (source %s, %.2f s)" % (s["height"], s["width"],
          s["single"]["exact"] or "built-in rule", s["source"], s["seconds"]))
PY
echo "error against the phantom (relative L2, noisy data):"
echo "  row     $err_row"
echo "  ortho   $err_ortho"
echo "  oblique $err_plane"
echo "previews: $out/row.png $out/ortho.png $out/oblique.png (float32 TIFFs beside them)"
echo "daemon log: $out/tomolived.log; status: $out/status.json"
if [ "$keep" = 1 ]; then
    echo
    echo "demo: tomolived keeps running with the scan: open http://$page/ (Ctrl-C stops it)"
    wait "$daemon" || true
fi
