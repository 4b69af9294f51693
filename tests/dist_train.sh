#!/usr/bin/env bash
# `zaya train` distributed (issue 4), under mpirun --oversubscribe, on real data (the KJV
# sample, a SentencePiece vocabulary of 384) and configs/zaya1-tiny.toml with 8 experts,
# Muon, bias balancing, grad clip, 2 micro-batches per rank, 20 steps of 8 x 32 tokens:
#   1. world 1 vs DP=2 (ZeRO-1), EP=2, CP=2, DP=2 x EP=2 and EP=2 x CP=2: per-step loss within 1e-5,
#      final weights within 1e-4 (why not exact: the gradient sums run in another order, see
#      tests/dist_check.sh; the losses stay ~1e-7 apart).
#   2. Exact resume of a DP=2 run: 10 steps, stop, resume to 20: weights and optimizer
#      state bit-identical to the uninterrupted DP=2 run, and the same losses.
#   3. Checkpoint layout: one manifest, per-rank files, every tensor tiled by its slices.
#   4. bf16 (split master weights): DP=2, EP=2, CP=2 against world 1, and an exact DP=2 resume.
#   5. A rank killed or hung at step 5: the job exits non-zero (a hang: on the comm timeout), no
#      rank logs step 5.
#   bash tests/dist_train.sh <zaya-binary> <build-dir>
set -euo pipefail
ZAYA=$(realpath "${1:?usage: dist_train.sh <zaya-binary> <build-dir>}")
source tests/lib/dist_env.sh

train w1 1
[ "$(losses "$T/w1" | wc -l)" -eq 20 ] || fail "w1: expected 20 step records"
for spec in "dp2 2" "ep2 2 --ep 2" "cp2 2 --cp 2" "dp2xep2 4 --ep 2" "ep2xcp2 4 --ep 2 --cp 2"; do
  set -- $spec
  name=$1
  train "$@"
  same_losses w1 "$name" 1e-5
  "$PY" $CMP "$T/w1" "$T/$name" --tol 1e-4 || fail "$name: final weights differ from world 1"
done

# The DP=2 x EP=2 checkpoint: per-rank files, one manifest, slices tile every tensor.
"$ZAYA" ckpt verify "$T/dp2xep2" > /dev/null || fail "dp2xep2 checkpoint does not verify"
for r in 0 1 2 3; do
  [ -f "$T/dp2xep2/ckpt/step_00000020/params-r0000$r.safetensors" ] || fail "dp2xep2: rank $r wrote no params file"
done
grep -Eq '"ep": ?2' "$T/dp2xep2/ckpt/step_00000020/manifest.json" || fail "dp2xep2: manifest has no layout"

# Exact resume at DP=2.
train dp2r 2 --steps 10
[ "$(losses "$T/dp2r" | wc -l)" -eq 10 ] || fail "dp2r: expected 10 steps before the stop"
train dp2r 2 --resume
same_losses dp2 dp2r 0
"$PY" $CMP "$T/dp2" "$T/dp2r" --exact || fail "DP=2 resume: weights not bit-identical"
"$PY" $CMP "$T/dp2" "$T/dp2r" --prefix optim. --exact || fail "DP=2 resume: optimizer state not bit-identical"

# bf16, whose master weights are stored split in place (each row: its bf16 values, then the
# low halves; ZeRO-1 cuts between rows and all-gathers them as they are): DP=2, EP=2 and CP=2
# against world 1 (bf16 rounding of weights ~1e-7 apart amplifies the order differences: 1e-3), and an
# exact DP=2 resume. Skipped on a CPU without a bf16 GEMM.
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
  train b16w1 1 --precision bf16
  for spec in "b16dp2 2" "b16ep2 2 --ep 2" "b16cp2 2 --cp 2"; do
    set -- $spec
    train "$@" --precision bf16
    same_losses b16w1 "$1" 1e-3
  done
  train b16dp2r 2 --precision bf16 --steps 10
  train b16dp2r 2 --precision bf16 --resume
  same_losses b16dp2 b16dp2r 0
  "$PY" $CMP "$T/b16dp2" "$T/b16dp2r" --exact || fail "bf16 DP=2 resume: weights not bit-identical"
  "$PY" $CMP "$T/b16dp2" "$T/b16dp2r" --prefix optim. --exact || fail "bf16 DP=2 resume: optimizer state not bit-identical"
else
  echo "no AVX512-BF16 / AMX: bf16 runs skipped"
fi

# A rank that dies (SIGKILL before step 5) or hangs there: the job ends non-zero, never hangs.
# The verdict follows from the injection: the fault fired on rank 1 at step 5, no rank logged
# step 5, and with a hang rank 0 ended on its own comm timeout (10 s here). ctest's timeout,
# not this script, bounds a regression that hangs.
sed 's/^comm_timeout = .*/comm_timeout = 10/' "$T/run.toml" > "$T/run_short.toml"
for fault in kill hang; do
  rc=0
  "${MPIRUN[@]}" -np 2 "$ZAYA" train --config "$T/run_short.toml" --out "$T/fault" --quiet \
    --inject "$fault:rank=1,step=5" > "$T/fault.log" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || fail "$fault: the job exited 0"
  grep -q "inject: rank 1 step 5: $fault:rank=1,step=5" "$T/fault.log" || { cat "$T/fault.log"; fail "$fault: not injected at step 5"; }
  last=$(grep '"type":"step"' "$T/fault/metrics.jsonl" 2>/dev/null | tail -1 | sed 's/.*"step":\([0-9]*\).*/\1/')
  [ "${last:-0}" -lt 5 ] || fail "$fault: step $last logged after rank 1 stopped before step 5"
  if [ "$fault" = hang ]; then
    grep -q 'timed out after 10 s' "$T/fault.log" || { cat "$T/fault.log"; fail "hang: rank 0 did not end on its comm timeout"; }
  fi
  echo "$fault at step 5: job ended with code $rc, last logged step ${last:-none}"
  rm -rf "$T/fault"
done
echo "dist_train: OK"
