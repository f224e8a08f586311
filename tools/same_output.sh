#!/bin/sh
# same_output.sh CLEAVE OUTDIR - record what a cleave binary answers to a fixed set of
# questions, so two builds can be compared byte for byte (`diff -r OUT1 OUT2`).
#
# Why: a restructuring (moving files, splitting functions, new option parsing) must not
# change a single answer. The set is 111 `plan` questions (the PipeDream profiles on 4 to
# 32 devices in even and uneven nodes, every schedule, fixed stage counts, communication
# and replication off, both algorithms; the model files on every cluster preset and every
# optimiser), a `sim --json` replay of each plan file under its own and two other
# schedules, and `cleave demo --quick`'s files. The only lines taken out are the ones
# that report wall-clock time ("planned in ...", "simulated in ...", "done in ..."), and the
# folder a path to a shipped file starts with (it depends on where the binary and checkout are).
#
# Exits 0 when every output was recorded (whatever the answers).
# Run from the repository root (the models and clusters are read from here); the
# PipeDream profiles are read from ../shared/data/pipedream.
set -u
CLEAVE=$1
mkdir -p "$2/plan" "$2/sim" "$2/demo"
# Outputs name the files written, and the demo aligns its list on the longest name: reach
# OUTDIR through a link of fixed length so two runs print the same.
LINK=$(mktemp -d /tmp/same-XXXXXXXX)
trap 'rm -rf "$LINK"' EXIT
ln -s "$(cd "$2" && pwd)" "$LINK/o"
OUT=$LINK/o
PD=../shared/data/pipedream
n=0

# strip_times FILE: drop the lines that carry a wall-clock time.
strip_times() {
    grep -v -e 'planned in' -e 'simulated in' -e ' in [0-9.]* *[mu]*s$' -e '^done in [0-9.]* s;' "$1" |
        sed -e "s|$OUT|OUT|g" -e "s|[^ ,\"]*/profiles/|profiles/|g" > "$1.t" || true
    mv "$1.t" "$1"
}

# q NAME ARGS...: one plan question; stdout, stderr, status and the plan file kept.
q() {
    name=$1; shift
    n=$((n + 1))
    "$CLEAVE" plan "$@" -o "$OUT/plan/$name.json" > "$OUT/plan/$name.out" 2> "$OUT/plan/$name.err"
    echo "status $?" >> "$OUT/plan/$name.out"
    strip_times "$OUT/plan/$name.out"
    strip_times "$OUT/plan/$name.err"
}

for p in alexnet vgg16 resnet18 resnet50 gnmt; do
    q "pd-$p-4" --profile $PD/$p.txt --devices 4
    q "pd-$p-8" --profile $PD/$p.txt --devices 8
    q "pd-$p-16x4" --profile $PD/$p.txt --devices 16 --per-node 4
    q "pd-$p-32x8" --profile $PD/$p.txt --devices 32 --per-node 8
    q "pd-$p-20x4" --profile $PD/$p.txt --devices 20 --per-node 4
    q "pd-$p-8-1f1b" --profile $PD/$p.txt --devices 8 --schedule 1f1b --microbatches 32
    q "pd-$p-16-1f1b" --profile $PD/$p.txt --devices 16 --per-node 4 --schedule 1f1b --microbatches 32
    q "pd-$p-8-nocomm" --profile $PD/$p.txt --devices 8 --comm off
    q "pd-$p-8-norep" --profile $PD/$p.txt --devices 8 --no-replication
    q "pd-$p-8-s3" --profile $PD/$p.txt --devices 8 --stages 3
    q "pd-$p-6-merge" --profile $PD/$p.txt --devices 6 --algo merge
    q "pd-$p-6-exact" --profile $PD/$p.txt --devices 6 --algo exact
done
for s in gpipe 1f1b interleaved zb-h1 pipedream fbp sequential; do
    q "vgg16-v100-$s" --model models/vgg16.json --cluster profiles/clusters/v100-8-pcie.json --schedule $s
done
for m in vgg16 resnet50 fmnist-cnn fmnist-mlp gpt2-1.5b bert-large; do
    for c in cpu-2cores dgx-a100-1node dgx-a100-4nodes h100-8-nvlink v100-16-ethernet v100-8-pcie; do
        q "$m-$c" --model models/$m.json --cluster profiles/clusters/$c.json
    done
done
for o in sgd momentum adam; do
    q "gpt2-h100-$o" --model models/gpt2-1.5b.json --cluster profiles/clusters/h100-8-nvlink.json --optimizer $o
done
q "resnet50-a100-batch256" --model models/resnet50.json --cluster profiles/clusters/dgx-a100-1node.json --batch 256
q "vgg16-quick-v100" --model models/vgg16.json --devices 8 --per-node 4 --device V100-16GB --bandwidth 10e9,1e9
q "bert-v100-m16" --model models/bert-large.json --cluster profiles/clusters/v100-8-pcie.json --microbatches 16
q "gpt3-a100-1024" --model models/gpt3-175b.json --device A100-80GB --devices 1024 --per-node 8 --bandwidth 300e9,25e9 --batch 1536 --optimizer adam
q "vgg16-bad-devices" --model models/vgg16.json --devices 0
echo "$n plan questions" > "$OUT/count"

# Every plan file written above, replayed.
for f in "$OUT"/plan/*.json; do
    [ -s "$f" ] || continue
    b=$(basename "$f" .json)
    for s in plan 1f1b gpipe; do
        if [ $s = plan ]; then
            "$CLEAVE" sim "$f" --json > "$OUT/sim/$b-$s.out" 2> "$OUT/sim/$b-$s.err"
        else
            "$CLEAVE" sim "$f" --json --schedule $s > "$OUT/sim/$b-$s.out" 2> "$OUT/sim/$b-$s.err"
        fi
        echo "status $?" >> "$OUT/sim/$b-$s.out"
        strip_times "$OUT/sim/$b-$s.out"
        strip_times "$OUT/sim/$b-$s.err"
    done
done

# The demo's files (the PNGs are rendered from the same numbers; compared as files too).
"$CLEAVE" demo --quick -o "$OUT/demo" > "$OUT/demo.out" 2>&1
echo "status $?" >> "$OUT/demo.out"
strip_times "$OUT/demo.out"
for f in "$OUT"/demo/*.json "$OUT"/demo/*.csv "$OUT"/demo/*.py; do
    [ -f "$f" ] && strip_times "$f"
done
exit 0
