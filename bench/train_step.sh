#!/usr/bin/env bash
# Training-step throughput of zaya1-small (B=8, T=256, 2 threads), fp32 and bf16, beside the
# PyTorch reference on the same shapes in the same run (fp32, and bf16 under autocast).
# Usage: bash bench/train_step.sh [build/zaya] [steps]
set -euo pipefail
ZAYA=${1:-build/zaya}
STEPS=${2:-10}
CFG=configs/zaya1-small.toml
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
PY=${ZAYA_PYTHON:-/usr/bin/python3}
echo "# $($ZAYA info)"
z32=$($ZAYA train-bench --config $CFG --batch 8 --seq 256 --steps "$STEPS" --precision fp32 --json)
z16=$($ZAYA train-bench --config $CFG --batch 8 --seq 256 --steps "$STEPS" --precision bf16 --json)
pt=$($PY tools/reference/bench_torch.py --config $CFG --steps "$STEPS")
$PY - "$z32" "$z16" "$pt" <<'PYEOF'
import json, sys
z32, z16, pt = (json.loads(a.strip().splitlines()[-1]) for a in sys.argv[1:4])
rows = [("zaya fp32", z32["tokens_per_s"]), ("zaya bf16", z16["tokens_per_s"]),
        ("pytorch fp32", pt["fp32_tokens_per_s"]), ("pytorch bf16 (autocast)", pt["bf16_tokens_per_s"])]
print(f"{'zaya1-small B=8 T=256':28s} {'tokens/s':>10s}")
for name, v in rows:
    print(f"{name:28s} {v:10.0f}")
print(f"ratio zaya/pytorch fp32: {z32['tokens_per_s'] / pt['fp32_tokens_per_s']:.2f}x (target >= 3x)")
print(f"ratio zaya/pytorch bf16: {z16['tokens_per_s'] / pt['bf16_tokens_per_s']:.2f}x")
print(f"zaya fp32: step {z32['step_time_s']*1e3:.1f} ms, GEMM {100*z32['gemm_fraction']:.0f}% of step, "
      f"peak RSS {z32['peak_rss_bytes']/2**20:.0f} MiB")
print(f"zaya bf16: step {z16['step_time_s']*1e3:.1f} ms, GEMM {100*z16['gemm_fraction']:.0f}% of step, "
      f"peak RSS {z16['peak_rss_bytes']/2**20:.0f} MiB")
PYEOF
