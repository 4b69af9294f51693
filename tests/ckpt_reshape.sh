#!/usr/bin/env bash
# Checkpoint reshaping (issue 7), on the run of tests/lib/dist_env.sh made 30 steps long
# (checkpoints at 10, 20, 30): train DP=2 to step 30 (run a), then continue its step-10
# checkpoint to 30
#   (a) unchanged (DP=2), (b) reshaped to DP=1, (c) to DP=4 (oversubscribed), and
#   (d) train EP=2 to step 10 and continue at EP=1;
# the 20 losses each continued run computes itself (steps 11-30: its metrics hold nothing
# else) and its final weights agree with run a's within the fp32 tolerance of the distributed
# tests (losses 1e-5, weights 1e-4: the gradient sums run in another order per layout). Load-time
# resharding (zaya train --resume under another world) and the offline
# `zaya ckpt reshape` must give bit-identical runs, and the offline result verifies, has one
# params file per new rank and refuses bad layouts without writing anything.
#   bash tests/ckpt_reshape.sh <zaya-binary> <build-dir>
set -euo pipefail
ZAYA=$(realpath "${1:?usage: ckpt_reshape.sh <zaya-binary> <build-dir>}")
DIST_STEPS=30
source tests/lib/dist_env.sh

train a 2
[ "$(losses "$T/a" | wc -l)" -eq 30 ] || fail "a: expected 30 step records"
continue_from() {  # name src-run np [args]: the src run's step-10 checkpoint, continued to 30
  local name=$1 src=$2 np=$3; shift 3
  mkdir -p "$T/$name/ckpt"
  cp -r "$T/$src/ckpt/step_00000010" "$T/$name/ckpt/"
  echo step_00000010 > "$T/$name/ckpt/latest"
  train "$name" "$np" --resume "$@"
  grep -q "resharded from dp" "$T/$name.log" || [ "$name" = a2 ] || fail "$name: no reshard message"
  # Only what this run computed: steps 11-30, none copied from the source run.
  [ "$(step_losses "$T/$name" | cut -d' ' -f1 | tr '\n' ' ')" = "$(seq -s ' ' 11 30) " ] ||
    fail "$name: metrics should hold exactly steps 11-30"
}
continue_from a2 a 2 # (a) itself, through a resume: exact
same_losses a a2 0
"$PY" $CMP "$T/a" "$T/a2" --exact || fail "(a) resume not exact"
continue_from b a 1
same_losses a b 1e-5
"$PY" $CMP "$T/a" "$T/b" --tol 1e-4 || fail "(b) DP=2 -> DP=1 weights"
continue_from c a 4
same_losses a c 1e-5
"$PY" $CMP "$T/a" "$T/c" --tol 1e-4 || fail "(c) DP=2 -> DP=4 weights"
train ep 2 --ep 2 --steps 10
continue_from d ep 1
same_losses a d 1e-5
"$PY" $CMP "$T/a" "$T/d" --tol 1e-4 || fail "(d) EP=2 -> EP=1 weights"

# Offline: DP=2 step 10 -> DP=4 x EP=1, then resume at DP=4: identical to (c).
"$ZAYA" ckpt reshape "$T/a/ckpt/step_00000010" "$T/off/ckpt" --dp 4 > "$T/reshape.log" || { cat "$T/reshape.log"; fail "reshape"; }
cat "$T/reshape.log"
"$ZAYA" ckpt verify "$T/off/ckpt/latest" > /dev/null || fail "reshaped checkpoint does not verify"
[ "$(ls "$T/off/ckpt/step_00000010"/params-r*.safetensors | wc -l)" -eq 4 ] || fail "reshape: expected 4 params files"
train off 4 --resume
same_losses c off 0
"$PY" $CMP "$T/c" "$T/off" --exact || fail "offline reshape vs load-time resharding: not bit-identical"
"$PY" $CMP "$T/c" "$T/off" --prefix optim. --exact || fail "offline reshape: optimizer state differs"
# And EP: DP=2 -> EP=2 offline, expert tensors split over two files.
# (SRC named by its `latest` pointer file, as every checkpoint argument may be.)
"$ZAYA" ckpt reshape "$T/a/ckpt/latest" "$T/ep2" --dp 1 --ep 2 > /dev/null || fail "reshape to ep 2"
"$PY" $CMP "$T/a/ckpt/latest" "$T/ep2/latest" --exact --prefix "" || fail "reshape to ep 2 changed values"

# Bad layouts and destinations: one line, non-zero, nothing written.
for bad in "--ep 3" "--dp 0"; do
  if "$ZAYA" ckpt reshape "$T/a/ckpt" "$T/bad" $bad > "$T/bad.log" 2>&1; then fail "reshape $bad succeeded"; fi
  [ "$(wc -l < "$T/bad.log")" -le 2 ] || { cat "$T/bad.log"; fail "reshape $bad: not a short error"; }
  [ ! -e "$T/bad" ] || [ -z "$(ls -A "$T/bad")" ] || fail "reshape $bad left files in the destination"
done
if "$ZAYA" ckpt reshape "$T/a/ckpt" "$T/off/ckpt" --dp 2 > "$T/bad.log" 2>&1; then fail "reshape over a checkpoint succeeded"; fi
grep -q "already holds a checkpoint" "$T/bad.log" || fail "reshape over a checkpoint: unclear error"
echo "ckpt_reshape: OK"
