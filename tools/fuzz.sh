#!/bin/sh
# fuzz.sh - run every libFuzzer target for a while (docs/testing.md, "Fuzzing").
#
#   tools/fuzz.sh [BUILD_DIR [TARGET...]]      (make fuzz calls it)
#
# BUILD_DIR (default build-fuzz) holds the fuzz_<target> binaries from
# `make fuzz-build`; TARGETs (model, cluster, ...) default to all of them.
# Environment: FUZZ_SECONDS (default 60) per target, FUZZ_ARGS extra
# libFuzzer flags (e.g. "-runs=100000" or "-max_len=65536").
#
# One process per target, one after the other (no -jobs/-workers), each with
# libFuzzer's per-input limits: 10 s and 2048 MB, so an input that makes a
# loader slow or huge counts as a failure like a crash.  Seeds come from
# tests/fuzz/corpus/<target>/ (never written); inputs that add coverage
# collect in BUILD_DIR/corpus/<target>/ and carry over to the next run;
# failing inputs land in BUILD_DIR/crashes/<target>/, logs in BUILD_DIR/logs/.
#
# Prints one line per target (executions, exec/s, corpus size, result) and
# a total; exits 1 if any target failed.
set -u

cd "$(dirname "$0")/.." || exit 2
build=${1:-build-fuzz}
[ $# -gt 0 ] && shift
secs=${FUZZ_SECONDS:-60}
case $secs in ''|*[!0-9]*) echo "fuzz.sh: FUZZ_SECONDS=$secs is not a whole number of seconds" >&2; exit 2;; esac

if [ $# -gt 0 ]; then
    targets=$*
else
    targets=$(for b in "$build"/fuzz_*; do [ -x "$b" ] && basename "$b" | sed 's/^fuzz_//'; done)
fi
if [ -z "$targets" ]; then
    echo "fuzz.sh: no fuzz targets in $build (hint: make fuzz-build)" >&2
    exit 2
fi

mkdir -p "$build/logs"
failed=0
total=0
printf '%-10s %8s %12s %10s %8s  %s\n' target seconds executions exec/s corpus result
for t in $targets; do
    bin=$build/fuzz_$t
    seeds=tests/fuzz/corpus/$t
    work=$build/corpus/$t
    crashes=$build/crashes/$t/
    log=$build/logs/$t.log
    if [ ! -x "$bin" ]; then
        echo "fuzz.sh: $bin missing (hint: make fuzz-build)" >&2
        failed=1
        continue
    fi
    mkdir -p "$work" "$crashes"
    dict=
    [ -f "tests/fuzz/$t.dict" ] && dict=-dict=tests/fuzz/$t.dict
    [ -d "$seeds" ] || seeds=
    start=$(date +%s)
    # shellcheck disable=SC2086 # FUZZ_ARGS and dict are word lists
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$crashes" $dict ${FUZZ_ARGS:-} \
        "$work" $seeds >"$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    runs=${runs:-0}
    total=$((total + runs))
    rate=$((runs / (took > 0 ? took : 1)))
    size=$(find "$work" -type f | wc -l)
    if [ $rc -eq 0 ]; then
        result=ok
    else
        failed=1
        art=$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)
        result="FAILED (exit $rc): ${art:-see $log}"
    fi
    printf '%-10s %8s %12s %10s %8s  %s\n' "$t" "$took" "$runs" "$rate" "$size" "$result"
done
printf '%-10s %8s %12s\n' total "" "$total"
if [ $failed -ne 0 ]; then
    echo "fuzz.sh: a target failed; reproduce with $build/fuzz_<target> <file>, fix the loader, then keep the input as tests/fuzz/regress/<target>/bad-<what>.<ext> (see docs/testing.md)" >&2
fi
exit $failed
