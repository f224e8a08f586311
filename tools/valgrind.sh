#!/bin/sh
# tools/valgrind.sh [BUILD_DIR] - valgrind memcheck of the main commands.
#
# Runs, each under `valgrind --error-exitcode=1 --leak-check=full`:
#   cleave plan      a zoo model (models/fmnist-cnn.json) on 4 quick-cluster devices, -o
#   cleave sim       that plan, with a trace
#   cleave export    that plan, torch settings
#   cleave train     a short --synthetic run (conv, batchnorm, dropout: the
#                    checkpoint fixture model) with a log, weights, checkpoints,
#                    stopped by SIGTERM once its first checkpoint exists
#   cleave train     the same resumed from that checkpoint to the end
#   cleave train     --plan: a 2-stage 1F1B plan pipelined on threads, with
#                    checkpoints, stopped by SIGTERM, then resumed
# and two runs that fail on purpose (an infeasible plan, a corrupt
# checkpoint), whose error paths must not leak either.  Exits 1 when any
# run reports an error or leak, or ends with another status than expected.
#
# OPENBLAS_CORETYPE is set so the executor does not re-execute itself to pick
# an AVX-512 kernel (valgrind 3.19 has no AVX-512; the re-executed process
# would run unchecked).  tests/valgrind.supp holds suppressions for
# third-party libraries only (none needed so far with the pthread OpenBLAS).
# MPI is not run here: Open MPI under valgrind needs its own suppressions and
# mpirun; the sanitizer builds cover the MPI paths (tests/lsan.supp).
set -u
cd "$(dirname "$0")/.." || exit 2 # fixtures are relative to the repository root
BUILD=${1:-build}
BIN=$BUILD/cleave
[ -x "$BIN" ] || { echo "valgrind.sh: $BIN not found (hint: make BUILD=$BUILD)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind not found (hint: apt-get install valgrind)" >&2; exit 2; }
T=$(mktemp -d /tmp/cleave-valgrind-XXXXXX)
trap 'rm -rf "$T"' EXIT
export OPENBLAS_CORETYPE=Haswell
fail=0
start=$(date +%s)

VG="valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,possible
    --suppressions=tests/valgrind.supp --trace-children=no --quiet"

# check WANT STATUS SECONDS ARGS...: report one run (WANT may be "0|143")
check() {
    want=$1 st=$2 dt=$3
    shift 3
    case "|$want|" in *"|$st|"*) ok=1 ;; *) ok=0 ;; esac
    if [ $ok = 0 ] || grep -q '^==[0-9]*==' "$T/err"; then
        echo "FAIL ($st, expected $want; ${dt} s): cleave $*"
        cat "$T/err"
        fail=1
    else
        echo "ok   ($st, ${dt} s): cleave $*"
    fi
}

# run EXPECTED_STATUS ARGS...
run() {
    want=$1
    shift
    t0=$(date +%s)
    $VG "$BIN" "$@" >"$T/out" 2>"$T/err"
    st=$?
    check "$want" $st $(( $(date +%s) - t0 )) "$@"
}

# stop EXPECTED_STATUS FILE ARGS...: run in the background, SIGTERM it once
# FILE exists (0 is also accepted: it may finish first)
stop() {
    want=$1 file=$2
    shift 2
    t0=$(date +%s)
    $VG "$BIN" "$@" >"$T/out" 2>"$T/err" &
    pid=$!
    while kill -0 $pid 2>/dev/null && [ ! -s "$file" ]; do sleep 0.05; done
    kill -TERM $pid 2>/dev/null
    wait $pid
    st=$?
    check "$want" $st $(( $(date +%s) - t0 )) "$@" "(SIGTERM)"
}

M=tests/data/ckpt/tiny.json
TRAIN="train --model $M --synthetic 512 --epochs 2 --batch 16 --seed 3"
run 0 plan --model models/fmnist-cnn.json --device A100-80GB --devices 4 -o "$T/plan.json"
run 0 sim "$T/plan.json" --trace "$T/trace.json"
run 0 export "$T/plan.json" --to torch -o "$T/plan.py"
stop "143|0" "$T/run.ckpt" $TRAIN --checkpoint "$T/run.ckpt" --checkpoint-every 8 --log "$T/log.csv" --save-weights "$T/w.bin"
run 0 $TRAIN --resume "$T/run.ckpt" --checkpoint "$T/run.ckpt" --log "$T/log.csv" --save-weights "$T/w.bin"
PTRAIN="train --plan tests/data/pipe/tiny2-1f1b.json --synthetic 256 --iterations 12"
stop "143|0" "$T/p.ckpt" $PTRAIN --checkpoint "$T/p.ckpt" --checkpoint-every 2 --save-weights "$T/wp.bin"
run 0 $PTRAIN --resume "$T/p.ckpt" --save-weights "$T/wp.bin"
run 2 plan --model models/fmnist-cnn.json --cluster tests/data/absurd/cluster-tiny-memory.json -o "$T/none.json"
head -c 100 "$T/run.ckpt" >"$T/cut.ckpt"
run 2 $TRAIN --resume "$T/cut.ckpt"
echo "valgrind.sh: $(( $(date +%s) - start )) s, $([ $fail = 0 ] && echo clean || echo FAILED)"
exit $fail
