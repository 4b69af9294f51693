#!/usr/bin/env bash
# Trained versus random on the KJV verse-completion task (tests/data/eval/kjv, 300 items),
# on a fresh clone: a small ZAYA1 is trained here (about a minute on 2 cores) on the task's
# own verses, each context followed by its right ending, so a working eval must rank the
# endings the model saw first: acc_norm beats chance (0.25) by >= 5 standard errors; the
# same recipe untrained stays within 3 of chance. A scorer that misplaces the continuation,
# mixes up choices or returns NaN fails one side or the other. (`make demo` runs the same
# two checks on the demo model, trained on the whole Bible.)
#   bash tests/eval_kjv.sh <zaya-binary> <build-dir>
set -euo pipefail
cd "$(dirname "$0")/.."
ZAYA=$(realpath "$1")
W=$(realpath -m "$2/eval_kjv")
export OMP_NUM_THREADS=1 ZAYA_LOG=error  # a model this small spends its time in barriers with 2
die() { echo "eval_kjv: FAIL: $*" >&2; exit 1; }
rm -rf "$W" && mkdir -p "$W"
TASKS="--task-file tests/data/eval/kjv/kjv_verse.json --task-file tests/data/eval/kjv/kjv_word.json"

# The corpus: every item's context and its right ending, a verse per line, three times over
# (prepare holds out its validation split from the end).
python3 - tests/data/eval/kjv/kjv_verse/validation.jsonl "$W/verses.txt" <<'PY'
import json, sys
items = [json.loads(line) for line in open(sys.argv[1])]
lines = [f"{d['ctx']} {d['endings'][d['label']]}" for d in items]
open(sys.argv[2], "w").write("\n".join(lines * 3) + "\n")
PY
"$ZAYA" prepare --input "$W/verses.txt" --out "$W/data" --vocab-size 1024 >"$W/prepare.log" 2>&1 ||
  { cat "$W/prepare.log"; die "prepare"; }
cat >"$W/run.toml" <<TOML
[run]
name = "eval-kjv"
out_dir = "$W/run"
seed = 1
[model]
name = "eval-kjv"
model_type = "zaya"
hidden_size = 128
vocab_size = 1024
num_attention_heads = 4
cca_num_q_heads = 2
num_query_groups_list = 1
zaya_layers = ["a", 4, "a", 4]
ffn_hidden_size_list = 256
zaya_mlp_expansion = 32
moe_router_topk = 1
zaya_use_mod = true
zaya_use_eda = true
partial_rotary_factor = 0.5
max_position_embeddings = 256
[[data.sources]]
name = "verses"
dir = "$W/data"
[[phases]]
name = "base"
tokens = 196_608
seq_len = 64
[batch]
global_batch = 16
micro_batch = 16
[optimizer]
kind = "muon"
lr = 1e-2
weight_decay = 0.0
grad_clip = 1.0
[schedule]
kind = "cosine"
warmup_steps = 10
min_lr_ratio = 0.1
[balancing]
method = "bias_adamw"
lr = 1e-2
[eval]
interval = 0
windows = 4
batch = 4
[checkpoint]
interval = 1000
TOML
"$ZAYA" train --config "$W/run.toml" --quiet >"$W/train.log" 2>&1 || { cat "$W/train.log"; die "train"; }
"$ZAYA" eval --ckpt "$W/run" $TASKS --output "$W/trained.json" --quiet >/dev/null || die "eval (trained)"
sed -e "s|^out_dir = .*|out_dir = \"$W/init\"|" "$W/run.toml" >"$W/init.toml"
"$ZAYA" train --config "$W/init.toml" --steps 0 --quiet >"$W/init.log" 2>&1 || { cat "$W/init.log"; die "train --steps 0"; }
"$ZAYA" eval --ckpt "$W/init" $TASKS --output "$W/init.json" --quiet >/dev/null || die "eval (untrained)"
python3 scripts/eval_chance.py "$W/trained.json" kjv_verse acc_norm 0.25 --above 5 --min-n 300 || die "trained"
python3 scripts/eval_chance.py "$W/init.json" kjv_verse acc_norm 0.25 --within 3 --min-n 300 || die "untrained"
