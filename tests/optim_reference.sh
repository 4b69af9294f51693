#!/usr/bin/env bash
# Checks zaya's AdamW and Muon against PyTorch (tools/reference/optim_ref.py).
#
#   bash tests/optim_reference.sh <path-to-zaya-binary> <build-dir>     (run from the repo root)
#
# For each optimizer, `zaya optim-case` takes 5 steps on the tiny model with its real
# gradients (a varying learning rate, weight decay 0.1 on the decayed tensors) and writes the
# starting weights, every step's gradients and its final weights; the reference replays the
# same gradients with torch.optim.AdamW (and a Muon written from the published algorithm) and
# compares per tensor max|zaya - torch| / max|torch - start|.
#
# Tolerances: both sides compute in fp32. AdamW is elementwise: the only differences are
# rounding in a different operation order, ~1e-7 relative per step, so 5e-5 of the total
# movement is generous (observed ~3e-6). Muon adds 5 Newton-Schulz iterations of fp32 GEMMs
# (OpenBLAS vs torch's BLAS, different summation orders) whose rounding the iteration
# amplifies a little: observed ~2e-5, tolerance 2e-4. A wrong formula (a missing bias
# correction, the RMS scale, Nesterov, decay on the wrong tensors) shows up as O(1e-2..1).
#
# Missing python3-torch is a FAILURE, not a skip.
set -euo pipefail

ZAYA=${1:?usage: optim_reference.sh <zaya-binary> <build-dir>}
BUILD=${2:?usage: optim_reference.sh <zaya-binary> <build-dir>}

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
  exit 1
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

WORK="$BUILD/optim_reference"
rm -rf "$WORK"
mkdir -p "$WORK"
status=0
for case in "adamw 5e-5" "muon 2e-4"; do
  set -- $case
  OPT=$1 TOL=$2
  echo "== $OPT"
  "$ZAYA" optim-case --config configs/zaya1-tiny.toml --optimizer "$OPT" --steps 5 --out "$WORK/$OPT"
  if ! "$PY" tools/reference/optim_ref.py "$WORK/$OPT" --tol "$TOL"; then
    echo "== $OPT: FAIL (files kept in $WORK/$OPT)"
    status=1
  fi
done
exit $status
