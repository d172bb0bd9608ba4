mkdir -p .devbundle && tar xJf .devbundle.txz -C .devbundle && . .devbundle/env.sh
D=$(mktemp -d)
tomolived --backend cuda --set ingest.endpoint=ipc://$D/i --set control.endpoint=ipc://$D/c --set slices.endpoint=ipc://$D/s --set http.listen= --set engine.tune=auto --set engine.tune_cache=$D/t.json --set engine.tune_budget=3 --log-level debug 2> $D/log &
P=$!
for i in $(seq 50); do tomolive ctl --endpoint ipc://$D/c status >/dev/null 2>&1 && break; sleep 0.2; done
tomolive ctl --endpoint ipc://$D/c set_slice id=mid kind=row z=128 pin=true
tomolive push --endpoint ipc://$D/i --geometry cone --source-origin 300 --source-detector 450 --pixel-size 0.5 --rows 256 --cols 256 --projections 360 --rate 200 --quiet
for i in $(seq 100); do grep -q "source=tuned\|source=failed" $D/log && break; sleep 0.2; done
grep -E "kernel_choice|tune|scan_ended|error" $D/log | cut -c1-300 | head -20
tomolive ctl --endpoint ipc://$D/c status | python3 -c 'import json,sys; k=json.load(sys.stdin)["kernels"]; print(json.dumps(k)[:1500])'
kill $P; wait $P
