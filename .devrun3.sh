mkdir -p .devbundle && tar xJf .devbundle.txz -C .devbundle && . .devbundle/env.sh
export top_builddir=$PWD/.devbundle CK_FORK=no
timeout 300 check_iterative_cuda > $OUT/it.log 2>&1; echo "it rc=$?"; grep -E "SART|Checks|F:" $OUT/it.log
timeout 300 compute-sanitizer --tool racecheck check_iterative_cuda > $OUT/race.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|Checks' $OUT/race.log | tr '\n' ' ')"
timeout 300 compute-sanitizer --tool memcheck check_iterative_cuda > $OUT/mem.log 2>&1; echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|Checks' $OUT/mem.log | tr '\n' ' ')"
