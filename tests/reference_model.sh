#!/usr/bin/env bash
# Checks the C++ model against the independent PyTorch reference (tools/reference/zaya_ref.py).
#
#   bash tests/reference_model.sh <path-to-zaya-binary> <build-dir>     (run from the repo root)
#
# 1. `zaya_ref.py selftest`: the reference's own finite-difference gradient check and invariants.
# 2. For top-k 1 and 2: `zaya dev reference-case` writes a random tiny model (HF format, fp32),
#    token ids, and zaya's own fp32 logits/loss/gradients; the reference recomputes them in float64
#    and compare.py checks every tensor at rtol 1e-4.
#
# Why rtol 1e-4: zaya accumulates in fp32 while the reference runs in fp64. Each value is a chain of
# dot products over at most D <= 512 terms (plus softmax/norm reductions), so the fp32 relative
# error is ~1e-7 * (a few to sqrt(D)) per stage, compounded over the sub-layers and the backward
# pass: ~1e-6..1e-5 observed/expected, relative to each tensor's largest entry. 1e-4 leaves margin
# for that while still catching any real semantic difference (those show up as O(1e-2..1)).
# A routing decision that flips between fp32 and fp64 (a near-tie) would also fail; the seed and
# the random balancing biases are chosen by the case generator so that this does not happen.
#
# Missing python3-torch is a FAILURE, not a skip: this is the model's correctness check.
set -euo pipefail

ZAYA=${1:?usage: reference_model.sh <zaya-binary> <build-dir>}
BUILD=${2:?usage: reference_model.sh <zaya-binary> <build-dir>}
REF=tools/reference

# Debian's python3-torch lives in /usr/lib/python3/dist-packages, which a pyenv/venv python3 on the
# PATH does not see, so try ZAYA_PYTHON, then /usr/bin/python3, then python3.
PY=""
for cand in "${ZAYA_PYTHON:-}" /usr/bin/python3 python3; do
  [ -n "$cand" ] || continue
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import torch, numpy' >/dev/null 2>&1; then
    PY=$cand
    break
  fi
done
if [ -z "$PY" ]; then
  echo "FAIL: no python3 with torch and numpy found (tried \$ZAYA_PYTHON, /usr/bin/python3, python3)." >&2
  echo "      Install Debian's python3-torch and python3-numpy (apt-get install python3-torch python3-numpy)," >&2
  echo "      or point ZAYA_PYTHON at an interpreter that has them." >&2
  exit 1
fi
echo "reference_model: using $PY ($("$PY" -c 'import torch; print("torch", torch.__version__)'))"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

echo "== reference self-test"
"$PY" "$REF/zaya_ref.py" selftest

WORK="$BUILD/reference_model"
rm -rf "$WORK"
mkdir -p "$WORK"

status=0
for K in 1 2; do
  DIR="$WORK/topk$K"
  echo "== top-k $K: zaya dev reference-case -> $DIR"
  if ! "$ZAYA" dev reference-case --config configs/zaya1-tiny.toml --out "$DIR" \
        --batch 2 --seq 16 --seed 7 --topk "$K"; then
    echo "FAIL: '$ZAYA dev reference-case' failed (does the command exist in this build?)" >&2
    exit 1
  fi
  for f in config.json model.safetensors ids.txt zaya.safetensors; do
    [ -f "$DIR/$f" ] || { echo "FAIL: reference-case did not write $DIR/$f" >&2; exit 1; }
  done
  "$PY" "$REF/zaya_ref.py" grads --model "$DIR" --ids "$DIR/ids.txt" \
        --out "$DIR/reference.safetensors" --dtype float64
  if "$PY" "$REF/compare.py" "$DIR/zaya.safetensors" "$DIR/reference.safetensors" --rtol 1e-4; then
    echo "== top-k $K: PASS"
  else
    echo "== top-k $K: FAIL (files kept in $DIR)"
    status=1
  fi
done
exit $status
