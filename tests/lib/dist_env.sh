# Shared set-up of the distributed training script tests (sourced, not a test itself):
# mpirun flags, a temp dir, the KJV sample prepared with a 384-piece vocabulary, a run config
# of DIST_STEPS steps (20 unless set before sourcing; configs/zaya1-tiny.toml: 8 experts,
# Muon, bias balancing, grad clip, global batch 8 x 32, micro-batch 2, checkpoints every 10
# steps, the last 3 kept) and helpers:
#   train NAME NP [zaya train args...]   run into $T/NAME (NP=1: no mpirun)
#   losses DIR                           the per-step losses from DIR/metrics.jsonl
#   same_losses A B TOL [N]              the N (20) steps B recorded against A's, within TOL,
#                                        every loss a finite number (tests/lib/compare.sh)
# Needs: ZAYA (absolute path to the binary), run from the repository root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
PY=${ZAYA_PYTHON:-/usr/bin/python3}
CMP=tools/ckpt_compare.py
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source tests/lib/compare.sh
DIST_STEPS=${DIST_STEPS:-20}

"$ZAYA" prepare --input tests/data/kjv_sample.txt --out "$T/data" --vocab-size 384 --val-fraction 0.1 > "$T/prep.log" 2>&1 ||
  { cat "$T/prep.log"; fail "prepare"; }
cat > "$T/run.toml" <<TOML
[run]
name = "dist"
out_dir = "$T/unused"
seed = 3
[model]
config = "configs/zaya1-tiny.toml"
vocab_size = 384
[[data.sources]]
name = "kjv"
dir = "$T/data"
[[phases]]
name = "base"
tokens = $((DIST_STEPS * 256))
seq_len = 32
rope_theta = 10000.0
mixture = { kjv = 1.0 }
[batch]
global_batch = 8
micro_batch = 2
[optimizer]
kind = "muon"
lr = 1e-2
grad_clip = 1.0
[schedule]
kind = "cosine"
warmup_steps = 2
[balancing]
method = "bias_adamw"
lr = 1e-2
[eval]
interval = 10
windows = 4
batch = 2
[checkpoint]
interval = 10
keep_last = 3
[parallel]
comm_timeout = 120
TOML

losses() { grep '"type":"step"' "$1/metrics.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
train() {
  local name=$1 np=$2; shift 2
  if [ "$np" = 1 ]; then
    "$ZAYA" train --config "$T/run.toml" --out "$T/$name" --quiet "$@" > "$T/$name.log" 2>&1 ||
      { cat "$T/$name.log"; fail "$name: run failed"; }
  else
    timeout 600 "${MPIRUN[@]}" -np "$np" "$ZAYA" train --config "$T/run.toml" --out "$T/$name" --quiet "$@" \
      > "$T/$name.log" 2>&1 || { cat "$T/$name.log"; fail "$name: run failed"; }
  fi
}
