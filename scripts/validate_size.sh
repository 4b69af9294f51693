#!/usr/bin/env bash
# Validates `zaya size`'s predicted training step time against `zaya train-bench` on this
# machine, zone by zone, for configs/size-check-{a,b,c}.toml and zaya1-small (B=8, T=256), in
# fp32 and bf16 (the bf16 engine the trainer picks here; skipped on a CPU without bf16 GEMMs).
#
#   scripts/validate_size.sh [BUILD_DIR] [OUT_DIR]
#
# 1. Measures each config's step: zaya train-bench --profile --json, REPS runs, the run with the
#    median step kept. Its skip_share (routing choices that took the skip class) is given to
#    zaya size below: like batch and sequence, the routing is the run's, not the machine's,
#    and the experts' rows follow it.
# 2. Measures a profile of this machine into OUT_DIR/bench: STREAM (zaya bench mem), exp / erf
#    rates, parallel-region cost, kernel bandwidth and AdamW rates (zaya size
#    --measure-elementwise, interleaved rounds, median), and every kernel the configs' steps
#    run (zaya size --kernel-shapes, then one `zaya bench kernels` process per dtype: all
#    shapes in interleaved rounds, the median kept, disagreeing shapes measured again;
#    kernels-<dtype>.csv/.json).
# 3. Predicts each step by zone (zaya size --profile-from OUT_DIR/bench --json).
# 4. Prints predicted / measured per zone and for the step; writes OUT_DIR/validate.json and
#    bench/results/size_validate-<cpu>.json (the record docs/size.md's table is made from).
#    Exits 1 when a step is outside 1 +/- 0.10 or a zone of 10% or more of the step outside
#    1 +/- 0.25, 2 when train-bench is absent.
# Environment: STEPS (train-bench steps, 6), REPS (train-bench runs, 3), ROUNDS (kernel rounds,
# 5), DTYPES ("fp32 bf16"), RECORD (1: write the bench/results record), OMP_NUM_THREADS (all
# cores), ONLY (config names to run, default all). Run it on a quiet machine: the load average
# is recorded beside the figures.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
OUT=${2:-$BUILD/size-validate}
ZAYA=$BUILD/zaya
STEPS=${STEPS:-6}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-5}
DTYPES=${DTYPES:-fp32 bf16}
RECORD=${RECORD:-1}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
# config file:batch:seq
CASES=("size-check-a:4:128" "size-check-b:8:64" "size-check-c:2:256" "zaya1-small:8:256")
if [ -n "${ONLY:-}" ]; then
  kept=()
  for c in "${CASES[@]}"; do [[ " $ONLY " == *" ${c%%:*} "* ]] && kept+=("$c"); done
  CASES=("${kept[@]}")
fi

[ -x "$ZAYA" ] || { echo "validate_size: $ZAYA not found (build first)" >&2; exit 1; }
if ! "$ZAYA" info 2>/dev/null | grep -q 'avx512_bf16=1\|amx_bf16=1'; then
  DTYPES=${DTYPES//bf16/}
  echo "      this CPU has no bf16 GEMM: fp32 only"
fi
mkdir -p "$OUT/bench"
rm -f "$OUT/bench/"*.csv "$OUT/bench/"*.json
load_start=$(cut -d' ' -f1 /proc/loadavg)

have_train_bench=0
"$ZAYA" --help 2>/dev/null | grep -q '^ *train-bench ' && have_train_bench=1

echo "[1/3] measuring the steps (zaya train-bench --profile, $STEPS steps, $REPS runs, load $load_start)"
for dt in $DTYPES; do
  for c in "${CASES[@]}"; do
    IFS=: read -r name b s <<< "$c"
    echo 0 > "$OUT/skip-$name-$dt.txt"
    if [ "$have_train_bench" != 1 ]; then
      echo '{}' > "$OUT/measured-$name-$dt.json"
      continue
    fi
    for ((rep = 0; rep < REPS; rep++)); do
      "$ZAYA" train-bench --config "$ROOT/configs/$name.toml" --batch "$b" --seq "$s" --steps "$STEPS" \
        --precision "$dt" --profile --json > "$OUT/measured-$name-$dt.$rep.json"
    done
    # The run with the median step: its zones add up to a step that happened.
    "$PY" - "$OUT/measured-$name-$dt.json" "$OUT"/measured-"$name-$dt".[0-9]*.json > "$OUT/skip-$name-$dt.txt" <<'PYEOF'
import json, sys
runs = sorted((json.load(open(p)) for p in sys.argv[2:]), key=lambda r: r["step_time_s"])
json.dump(runs[len(runs) // 2], open(sys.argv[1], "w"))
print(runs[len(runs) // 2].get("skip_share", 0))
PYEOF
    rm -f "$OUT"/measured-"$name-$dt".[0-9]*.json
  done
done

echo "[2/3] measuring this machine into $OUT/bench ($OMP_NUM_THREADS threads, load $(cut -d' ' -f1 /proc/loadavg))"
"$ZAYA" bench mem --csv "$OUT/bench/mem.csv" --peak-json "$OUT/bench/peak.json" > "$OUT/mem.log"
"$ZAYA" size --measure-elementwise "$OUT/bench" > "$OUT/elementwise.log"
for dt in $DTYPES; do
  shapes="$OUT/shapes-$dt.txt"
  : > "$shapes"
  for c in "${CASES[@]}"; do
    IFS=: read -r name b s <<< "$c"
    "$ZAYA" size --config "$ROOT/configs/$name.toml" --kernel-shapes --micro-batch "$b" --seq "$s" --dtype "$dt" \
      --skip-share "$(cat "$OUT/skip-$name-$dt.txt")" >> "$shapes"
  done
  sort -u "$shapes" -o "$shapes"
  "$ZAYA" bench kernels --shapes "$shapes" --dtype "$dt" --rounds "$ROUNDS" --csv "$OUT/bench/kernels-$dt.csv" \
    --json "$OUT/bench/kernels-$dt.json" > "$OUT/kernels-$dt.log"
  echo "      $dt: $(($(wc -l < "$OUT/bench/kernels-$dt.csv") - 1)) kernel rows," \
    "$(grep -c FLAGGED "$OUT/kernels-$dt.log" || true) flagged"
done

echo "[3/3] predicting (zaya size --profile-from $OUT/bench)"
results="$OUT/results.txt"
: > "$results"
for dt in $DTYPES; do
  for c in "${CASES[@]}"; do
    IFS=: read -r name b s <<< "$c"
    "$ZAYA" size --config "$ROOT/configs/$name.toml" --profile-from "$OUT/bench" --micro-batch "$b" --seq "$s" \
      --dtype "$dt" --attention full --skip-share "$(cat "$OUT/skip-$name-$dt.txt")" --json \
      > "$OUT/predicted-$name-$dt.json"
    echo "$name $dt $b $s $OUT/predicted-$name-$dt.json $OUT/measured-$name-$dt.json" >> "$results"
  done
done
load_end=$(cut -d' ' -f1 /proc/loadavg)

"$PY" "$ROOT/scripts/size_compare.py" "$results" "$OUT/validate.json" "$have_train_bench" "$load_start" "$load_end" \
  "$OUT/bench/kernels-fp32.json" "$STEPS" "$REPS" "$ROUNDS" "$RECORD" "$ROOT/bench/results"
