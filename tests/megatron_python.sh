#!/usr/bin/env bash
# Megatron-LM indexed datasets against an independent Python reader and writer
# (tests/megatron_ref.py, written from Megatron-LM's format definition, standard library only):
#  1. the dataset `zaya prepare --output-format megatron` writes from the KJV sample reads, in
#     Python, as the documents of `zaya prepare`'s shards of the same corpus (sequence by
#     sequence, EOS last), in Megatron's dtype for the vocabulary;
#  2. a dataset the Python writer makes from those shards (train and val) trains: `zaya train`
#     from the Megatron source and from our own shards gives identical step and validation
#     losses, so the two token streams are equal; so does training from the directory
#     `zaya prepare --output-format megatron` wrote (`dir =`, read through its meta.json).
#   usage: tests/megatron_python.sh ZAYA_BIN BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
ZAYA=$(realpath "$1")
W=$(realpath -m "$2/megatron_python")
export OMP_NUM_THREADS=1 ZAYA_LOG=error
rm -rf "$W"
mkdir -p "$W"
fail() { echo "megatron_python: FAIL: $*"; exit 1; }

"$ZAYA" prepare --input tests/data/kjv_sample.txt --out "$W/data" --vocab-size 320 --val-fraction 0.2 \
  >"$W/prepare.log" 2>&1 || { cat "$W/prepare.log"; fail "zaya prepare"; }
"$ZAYA" prepare --input tests/data/kjv_sample.txt --out "$W/mega" --tokenizer "$W/data/tokenizer.model" \
  --val-fraction 0.2 --output-format megatron >"$W/prepare_megatron.log" 2>&1 ||
  { cat "$W/prepare_megatron.log"; fail "zaya prepare --output-format megatron"; }

# 1. zaya writes, Python reads.
for split in train val; do
  python3 tests/megatron_ref.py check "$W/mega/${split}_text_document" "$W/data" $split ||
    fail "Python reader vs zaya's $split dataset"
done

# 2. Python writes, zaya trains.
python3 tests/megatron_ref.py write "$W/data" train "$W/py_train" || fail "Python writer (train)"
python3 tests/megatron_ref.py write "$W/data" val "$W/py_val" || fail "Python writer (val)"
source tests/lib/tiny_model.sh
tiny_model_toml megatron-python >"$W/model.toml"
run_toml() {  # $1 run name, $2 the source's lines
  cat <<TOML
[run]
name = "$1"
out_dir = "$W/$1"
seed = 5
[model]
config = "$W/model.toml"
[data]
tokenizer = "$W/data/tokenizer.model"
[[data.sources]]
name = "kjv"
$2
[[phases]]
name = "base"
tokens = 768
seq_len = 32
[batch]
global_batch = 4
[optimizer]
kind = "adamw"
lr = 3e-3
[eval]
interval = 3
windows = 4
batch = 2
[checkpoint]
interval = 0
async = false
TOML
}
run_toml shards "dir = \"$W/data\"" >"$W/shards.toml"
run_toml megatron "format = \"megatron\"
prefix = \"$W/py_train\"
val_prefix = \"$W/py_val\"" >"$W/megatron.toml"
run_toml mega_dir "dir = \"$W/mega\"" >"$W/mega_dir.toml"
for r in shards megatron mega_dir; do
  "$ZAYA" train --config "$W/$r.toml" --quiet >"$W/$r.log" 2>&1 || { cat "$W/$r.log"; fail "zaya train ($r)"; }
done
for r in megatron mega_dir; do
python3 - "$W/shards/metrics.jsonl" "$W/$r/metrics.jsonl" <<'PY' || fail "losses differ ($r)"
import json, math, sys
def records(path):
    out = []
    for line in open(path):
        r = json.loads(line)
        if r.get("type") in ("step", "eval"):
            keys = [k for k in ("loss", "val_loss") if k in r]
            out.append((r["type"], r.get("step"), [r[k] for k in keys]))
    return out
a, b = records(sys.argv[1]), records(sys.argv[2])
steps = sum(1 for t, _, _ in a if t == "step")
evals = sum(1 for t, _, _ in a if t == "eval")
if steps != 6 or evals < 2:
    print(f"expected 6 step records and at least 2 evals in {sys.argv[1]}, found {steps} and {evals}"); sys.exit(1)
for ra, rb in zip(a, b):
    if not all(isinstance(x, float) and math.isfinite(x) for x in ra[2] + rb[2]) or not ra[2]:
        print(f"not a finite loss: {ra} / {rb}"); sys.exit(1)
if a != b:
    diff = next((ra, rb) for ra, rb in zip(a, b) if ra != rb) if len(a) == len(b) else (len(a), len(b))
    print(f"{sys.argv[1]} vs {sys.argv[2]}: first difference {diff}"); sys.exit(1)
print(f"megatron_python: {steps} steps and {evals} evals, identical losses from shards and from {sys.argv[2]}")
PY
done
