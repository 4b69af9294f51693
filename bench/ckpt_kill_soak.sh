#!/usr/bin/env bash
# Kill soak (a benchmark, not a test): SIGKILL of `zaya train` at random moments of a run that
# checkpoints every step, KILLS times; after each kill `latest` must verify and the next
# --resume picks up from it. Where a kill lands depends on the machine's speed, so this lives
# here; tests/ft_ckpt_faults.sh kills at every point of a save through the injector instead.
# Prints the seed, the kills that landed during a save, and the last checkpoint.
#   bash bench/ckpt_kill_soak.sh <zaya-binary> [KILLS=20] [SEED=1]
set -euo pipefail
ZAYA=$(realpath "${1:?usage: ckpt_kill_soak.sh <zaya-binary> [kills] [seed]}")
KILLS=${2:-20}
SEED=${3:-1}
cd "$(dirname "$0")/.."
source tests/ft/lib.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ft_setup "$ZAYA" "$T" 100000 1
echo "ckpt_kill_soak: $KILLS kills, seed $SEED"
mapfile -t DELAYS < <("$PY" -c 'import random, sys
r = random.Random(int(sys.argv[2]))
for _ in range(int(sys.argv[1])): print(f"{r.uniform(0, 0.8):.3f}")' "$KILLS" "$SEED")
mid_save=0
for i in $(seq 1 "$KILLS"); do
  rm -f "$T/hb/rank-0.json"
  "$ZAYA" train --config "$T/run.toml" --out "$T/out" --quiet --resume --heartbeat-dir "$T/hb" > "$T/run.log" 2>&1 &
  pid=$!
  # Past start-up (however loaded the machine), then a random moment of training and saving.
  for _ in $(seq 1 600); do grep -q '"stage":"step"' "$T/hb/rank-0.json" 2>/dev/null && break; sleep 0.1; done
  sleep "${DELAYS[$((i - 1))]}"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  ls -A "$T/out/ckpt" 2>/dev/null | grep -q '^\.tmp-' && mid_save=$((mid_save + 1))
  [ -e "$T/out/ckpt/latest" ] || continue
  "$ZAYA" ckpt verify "$T/out/ckpt" > "$T/verify.log" 2>&1 ||
    { cat "$T/verify.log"; fail "kill #$i (seed $SEED): latest ($(cat "$T/out/ckpt/latest")) does not verify"; }
done
last=$(cat "$T/out/ckpt/latest" 2>/dev/null) || fail "no checkpoint after $KILLS kills"
echo "ckpt_kill_soak: $KILLS kills ($mid_save during a save), latest verified after each; last $last"
