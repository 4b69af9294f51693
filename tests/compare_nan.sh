#!/usr/bin/env bash
# Negative controls of the comparators the distributed tests trust: each gets agreeing input
# (must pass) and the same input with one NaN or infinity (must fail), so a comparator that
# lets NaN through (`NaN > tol` is false, max(x, NaN) keeps x, awk reads "nan" as 0) fails
# this test:
#   compare_losses / same_losses (tests/lib/compare.sh: dist_check.sh, dist_train.sh,
#   ckpt_reshape.sh), tools/ckpt_compare.py, `zaya dist-check --compare`, the Python helpers of
#   the script tests (tests/lib/checks.py, with and without -O), and tests/ft/lib.sh's
#   ft_same_weights (two runs holding the same NaN weights have equal checksums).
# Also: ckpt_compare.py takes a `latest` pointer file. No MPI; a few seconds.
#   bash tests/compare_nan.sh <zaya-binary> <build-dir>
set -euo pipefail
ZAYA=$(realpath "${1:?usage: compare_nan.sh <zaya-binary> <build-dir>}")
PY=${ZAYA_PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source tests/lib/compare.sh
passes() { "$@" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "should pass: $*"; }; }
fails() { if "$@" > "$T/out.txt" 2>&1; then cat "$T/out.txt"; fail "should fail: $*"; fi; }

# --- compare_losses: "a b" lines.
cl() { printf "$1" | compare_losses ctl "$2" "$3"; }
passes cl '2.5 2.5\n2.4 2.4000001\n' 1e-6 2
fails cl '2.5 2.5\n2.4 2.5\n' 1e-6 2       # over the tolerance
fails cl '2.5 2.5\n' 1e-6 2                # too few steps
for bad in nan -nan NaN inf -inf null '' 1e999; do
  fails cl "2.5 2.5\n$bad 2.4\n" 1e-6 2
  fails cl "2.5 2.5\n2.4 $bad\n" 1e-6 2
done
fails cl '2.5 2.5\nnan nan\n' 1e-6 2       # the same NaN in both runs is a diverged run

# --- same_losses: metrics.jsonl step records; a NaN loss is written as null. (A subshell:
# same_losses calls `fail`, which exits.)
sl() { (same_losses "$@"); }
metrics() {  # dir first-step losses...
  local dir=$T/$1 s=$2; shift 2
  mkdir -p "$dir"
  : > "$dir/metrics.jsonl"
  for l in "$@"; do
    echo "{\"aux_loss\":0.1,\"loss\":$l,\"lr\":0.01,\"step\":$s,\"step_s\":0.5,\"type\":\"step\"}" >> "$dir/metrics.jsonl"
    echo "{\"step\":$s,\"type\":\"eval\",\"val_loss\":9.0}" >> "$dir/metrics.jsonl"
    s=$((s + 1))
  done
}
metrics full 1 3.0 2.9 2.8 2.7
metrics cont 3 2.8 2.7
passes sl full cont 0 2
metrics cont_off 3 2.8 2.6
fails sl full cont_off 1e-6 2
metrics cont_nan 3 2.8 null
fails sl full cont_nan 1e-6 2
metrics full_nan 1 3.0 2.9 null 2.7
fails sl full_nan cont 1e-6 2
metrics both_nan 3 null 2.7
fails sl full_nan both_nan 1e-6 2
metrics cont_gap 3 2.8 2.7
echo '{"aux_loss":0.1,"loss":2.5,"lr":0.01,"step":9,"step_s":0.5,"type":"step"}' >> "$T/cont_gap/metrics.jsonl"
fails sl full cont_gap 1e-6 3     # a step the reference run does not have

# --- tools/ckpt_compare.py: two one-tensor checkpoints; B's values are replaced one by one.
mkckpt() {  # dir values (Python list of floats)
  "$PY" - "$T/$1" "$2" <<'PY'
import json, os, sys
import numpy as np
root, vals = sys.argv[1], np.array(eval(sys.argv[2]), dtype=np.float32)
d = os.path.join(root, "step_00000001")
os.makedirs(d)
vals.tofile(os.path.join(d, "params.bin"))
m = {"format": "zaya.ckpt.v1", "step": 1, "layout": {"dp": 1},
     "tensors": [{"name": "param/w", "numel": int(vals.size),
                  "slices": [{"file": "params.bin", "start": 0, "numel": int(vals.size),
                              "byte_begin": 0, "byte_end": int(vals.nbytes)}]}]}
json.dump(m, open(os.path.join(d, "manifest.json"), "w"))
open(os.path.join(root, "latest"), "w").write("step_00000001\n")
PY
}
mkckpt a '[1.0, 2.0, 3.0]'
mkckpt b '[1.0, 2.0, 3.0]'
mkckpt near '[1.0, 2.0, 3.00001]'
passes "$PY" tools/ckpt_compare.py "$T/a" "$T/b" --exact
passes "$PY" tools/ckpt_compare.py "$T/a/latest" "$T/near/latest" --tol 1e-4
fails "$PY" tools/ckpt_compare.py "$T/a" "$T/near" --tol 1e-6
for v in nan inf; do
  mkckpt "b_$v" "[1.0, float('$v'), 3.0]"
  fails "$PY" tools/ckpt_compare.py "$T/a" "$T/b_$v" --tol 1e9
  fails "$PY" tools/ckpt_compare.py "$T/b_$v" "$T/a" --tol 1e9
  fails "$PY" tools/ckpt_compare.py "$T/b_$v" "$T/b_$v" --exact  # bit-identical NaNs still fail
  grep -q "NaN or infinite" "$T/out.txt" || { cat "$T/out.txt"; fail "ckpt_compare: no NaN message"; }
done

# --- zaya dist-check --compare: a one-step run against its own weights, then with one NaN.
passes "$ZAYA" dist-check --steps 1 --batch 2 --seq 8 --out "$T/w.bin"
passes "$ZAYA" dist-check --steps 1 --batch 2 --seq 8 --compare "$T/w.bin" --tol 1e-5
for v in nan inf; do
  "$PY" -c "import numpy as np, sys; w = np.fromfile(sys.argv[1], np.float32); w[len(w) // 2] = float('$v'); \
w.tofile(sys.argv[2])" "$T/w.bin" "$T/w_$v.bin"
  fails "$ZAYA" dist-check --steps 1 --batch 2 --seq 8 --compare "$T/w_$v.bin" --tol 1e9
  grep -q "1 weights are NaN or infinite" "$T/out.txt" || { cat "$T/out.txt"; fail "dist-check: no NaN message"; }
done
# --- tests/lib/checks.py: its own negative controls (NaN, +inf, -inf, None on either side),
# also under -O, where an assert would vanish.
passes "$PY" tests/lib/checks.py
passes "$PY" -O tests/lib/checks.py

# --- ft_same_weights: a 4-step run against itself passes; two checkpoints holding the same
# NaN (imported from one HF export with one weight set to NaN: equal checksums) fail.
source tests/ft/lib.sh
ft_setup "$ZAYA" "$T/ft" 4 2
"$ZAYA" train --config "$T/ft/run-sync.toml" --out "$T/ft/ref" --quiet > "$T/ft/train.log" 2>&1 ||
  { cat "$T/ft/train.log"; fail "ft: training the reference run"; }
fsw() { (ft_same_weights "$@"); }
passes fsw "$T/ft/ref" "$T/ft/ref" self
"$ZAYA" ckpt export-hf "$T/ft/ref" "$T/ft/hf" --dtype fp32 --no-hf-check > /dev/null
import_run() {  # run-name: the HF export as RUN/ckpt/step_00000000, named by RUN/ckpt/latest
  "$ZAYA" ckpt import-hf "$T/ft/hf" "$T/ft/$1/ckpt/step_00000000" > /dev/null 2>&1
  echo step_00000000 > "$T/ft/$1/ckpt/latest"
}
for r in clean1 clean2; do import_run $r; done
passes fsw "$T/ft/clean1" "$T/ft/clean2" imported  # the same import twice: equal and finite
"$PY" - "$T/ft/hf/model.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
b = bytearray(open(path, "rb").read())
n = struct.unpack_from("<Q", b, 0)[0]
h = json.loads(b[8:8 + n])
name = sorted(k for k in h if k != "__metadata__" and h[k]["dtype"] == "F32")[0]
struct.pack_into("<f", b, 8 + n + h[name]["data_offsets"][0], float("nan"))
open(path, "wb").write(bytes(b))
PY
for r in nan1 nan2; do import_run $r; done
fails fsw "$T/ft/nan1" "$T/ft/nan2" nan
grep -q "final weights are not finite" "$T/out.txt" || { cat "$T/out.txt"; fail "ft_same_weights: no NaN message"; }
"$PY" tests/lib/ft_incidents.py --selftest || fail "ft_incidents: a negative control passed"
echo "compare_nan: every comparator fails on NaN and passes on agreement"
