#!/usr/bin/env bash
# TensorBoard event files (docs/train.md "TensorBoard"), checked by an independent reader
# (tests/tensorboard_reader.py: Debian's python3-protobuf with Event/Summary descriptors written
# after TensorFlow's .proto files, its own TFRecord and CRC32C code):
#  - `zaya train --tensorboard` on a tiny ZAYA1, 12 steps with validation every 4: one event
#    file in OUT/tb whose records' CRCs match, whose first event is the file version and whose
#    scalar events equal metrics.jsonl's step and eval records (steps, tags, float32 values);
#  - the reader rejects the file with one byte flipped (the check can fail);
#  - `[log] tensorboard = true` in the run config writes the events too; without either, no tb/.
#   bash tests/tensorboard.sh <zaya-binary> <build-dir>
set -euo pipefail
ZAYA=${1:?usage: tensorboard.sh <zaya-binary> <build-dir>}
PY=${ZAYA_PYTHON:-/usr/bin/python3}
fail() { echo "FAIL: $*" >&2; exit 1; }
"$PY" -c 'import google.protobuf' 2>/dev/null ||
  fail "python3-protobuf is missing (tools/install_deps.sh installs it)"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$ZAYA" prepare --input tests/data/kjv_sample.txt --out "$T/data" --vocab-size 320 --val-fraction 0.3 >"$T/prepare.log" 2>&1 ||
  { cat "$T/prepare.log"; fail "prepare"; }
source tests/lib/tiny_model.sh
tiny_model_toml tb-tiny >"$T/model.toml"
config() {  # out_dir [log lines...]
  cat <<TOML
[run]
name = "tb"
out_dir = "$1"
seed = 5
[model]
config = "$T/model.toml"
[[data.sources]]
name = "kjv"
dir = "$T/data"
[[phases]]
name = "base"
tokens = $((12 * 4 * 32))
seq_len = 32
[batch]
global_batch = 4
micro_batch = 4
[optimizer]
kind = "adamw"
lr = 3e-3
[eval]
interval = 4
windows = 2
batch = 2
[checkpoint]
interval = 0
async = false
[log]
TOML
  shift
  [ $# -eq 0 ] || printf '%s\n' "$@"
}

# 1. --tensorboard: the events equal metrics.jsonl.
config "$T/flag" >"$T/flag.toml"
OMP_NUM_THREADS=1 "$ZAYA" train --config "$T/flag.toml" --tensorboard --quiet >"$T/flag.log" 2>&1 ||
  { cat "$T/flag.log"; fail "train --tensorboard"; }
files=("$T"/flag/tb/events.out.tfevents.*)
[ ${#files[@]} -eq 1 ] && [ -s "${files[0]}" ] || fail "expected one event file in $T/flag/tb: ${files[*]}"
[[ "$(basename "${files[0]}")" =~ ^events\.out\.tfevents\.[0-9]{10}\..+$ ]] || fail "event file name: ${files[0]}"
"$PY" tests/tensorboard_reader.py "${files[0]}" "$T/flag/metrics.jsonl" || fail "the events differ from metrics.jsonl"

# 2. A flipped byte fails the reader's CRC check.
set +e
"$PY" tests/tensorboard_reader.py --corrupt "${files[0]}" 2>"$T/corrupt.err"
rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "CRC mismatch" "$T/corrupt.err" || { cat "$T/corrupt.err"; fail "a corrupted file was not rejected (rc $rc)"; }

# 3. [log] tensorboard = true; and nothing without it.
config "$T/key" "tensorboard = true" >"$T/key.toml"
OMP_NUM_THREADS=1 "$ZAYA" train --config "$T/key.toml" --steps 4 --quiet >"$T/key.log" 2>&1 || { cat "$T/key.log"; fail "train [log] tensorboard"; }
"$PY" tests/tensorboard_reader.py "$T"/key/tb/events.out.tfevents.* "$T/key/metrics.jsonl" || fail "[log] tensorboard: events"
config "$T/plain" >"$T/plain.toml"
OMP_NUM_THREADS=1 "$ZAYA" train --config "$T/plain.toml" --steps 2 --quiet >"$T/plain.log" 2>&1 || { cat "$T/plain.log"; fail "train"; }
[ ! -e "$T/plain/tb" ] || fail "tb/ written without --tensorboard or [log] tensorboard"
echo "tensorboard: OK"
