#!/usr/bin/env bash
# Two zaya binaries' training steps compared fairly on a machine whose speed drifts (a VM's
# throughput here moves by a quarter from minute to minute): fresh processes, A and B
# alternated round by round (A B A B ...), each run `zaya train-bench --json`, then per binary
# the median and the best tokens/s and the ratio B / A of each. A change is real when both
# ratios agree; one run of each, or runs of one binary back to back, compare minutes, not code.
#
# Usage: bash bench/ab_step.sh A B [rounds]          (rounds: runs of each binary, default 6)
# Environment: AB_PRECISION (fp32), AB_THREADS (2), AB_CONFIG (configs/zaya1-small.toml),
#   AB_STEPS (timed steps per run, 4), AB_ARGS (more train-bench options, e.g. "--batch 2 --seq 1024").
set -euo pipefail
A=${1:?usage: bash bench/ab_step.sh A B [rounds]}
B=${2:?usage: bash bench/ab_step.sh A B [rounds]}
ROUNDS=${3:-6}
PREC=${AB_PRECISION:-fp32}
THREADS=${AB_THREADS:-2}
CONFIG=${AB_CONFIG:-configs/zaya1-small.toml}
STEPS=${AB_STEPS:-4}
for bin in "$A" "$B"; do
  [ -x "$bin" ] || { echo "ab_step.sh: $bin is not an executable" >&2; exit 1; }
done
[ -f "$CONFIG" ] || { echo "ab_step.sh: AB_CONFIG=$CONFIG: no such file" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "ab_step.sh: rounds '$ROUNDS': expected a positive integer" >&2; exit 1; }

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
run() {  # binary tag round
  # shellcheck disable=SC2086  # AB_ARGS is a list of options
  OMP_NUM_THREADS=$THREADS "$1" train-bench --config "$CONFIG" --precision "$PREC" --warmup 1 --steps "$STEPS" \
    ${AB_ARGS:-} --json >"$OUT/$2.$3.log" 2>&1 || { cat "$OUT/$2.$3.log" >&2; exit 1; }
  python3 -c 'import json,sys; print(json.loads(sys.stdin.readlines()[-1])["tokens_per_s"])' \
    <"$OUT/$2.$3.log" >>"$OUT/$2.tps"
}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg); $CONFIG $PREC," \
  "$THREADS threads, $STEPS timed steps per run${AB_ARGS:+ ($AB_ARGS)}, $ROUNDS rounds of A B"
for r in $(seq "$ROUNDS"); do
  run "$A" a "$r"
  run "$B" b "$r"
  echo "# round $r: A $(tail -n 1 "$OUT/a.tps" | cut -d. -f1) B $(tail -n 1 "$OUT/b.tps" | cut -d. -f1) tokens/s"
done
python3 - "$OUT" "$A" "$B" <<'PYEOF'
import statistics, sys
out, a, b = sys.argv[1:]
va = [float(x) for x in open(f"{out}/a.tps")]
vb = [float(x) for x in open(f"{out}/b.tps")]
for tag, name, v in (("A", a, va), ("B", b, vb)):
    print(f"{tag} {name}: median {statistics.median(v):,.0f} tokens/s, best {max(v):,.0f}, "
          f"runs {' '.join(f'{x:.0f}' for x in v)}")
print(f"B / A: median {statistics.median(vb) / statistics.median(va):.3f}x, best {max(vb) / max(va):.3f}x")
PYEOF
