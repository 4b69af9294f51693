#!/usr/bin/env bash
# Training-step throughput of zaya beside its PyTorch peer, in one run (bench/README.md, "The
# PyTorch peer and bench/train_step.sh"):
#   - zaya1-small  B=8 T=256,  1 and 2 threads, STEPS timed steps (default 10);
#   - zaya1-medium B=2 T=1024, 2 threads, MEDIUM_STEPS timed steps (default 4);
#   each: zaya fp32 and bf16 (`zaya train-bench`), PyTorch fp32 and bf16 under autocast
#   (tools/reference/bench_torch.py), 2 untimed warm-up steps, fresh random tokens every step,
#   median step time; run zaya, torch, torch, zaya (ABBA) so that load drifts hit both alike;
#   - the GEMM peak of this machine (`zaya bench gemm --peak`, 2 threads) and the CPU flags:
#     searched once at the start, and again for its precision right before and right after
#     each zaya run (a VM's speed drifts from minute to minute: one search here read 0.417
#     TFLOP/s fp32 where searches minutes later read 0.373-0.391);
#   - ratio 1: zaya's best precision / PyTorch's best; ratio 2: training FLOP/s (FLOP per token
#     from `zaya size`) / the GEMM peak of the same precision measured around the run (the mean
#     of the searches before and after it; the target is checked against this), also shown
#     against the highest peak any search of the run read; peak RSS of each zaya run.
# About 12 minutes on 2 idle cores at the defaults. On a CPU without a bf16 GEMM (no AVX512-BF16,
# no AMX) only fp32 runs: zaya's bf16 would multiply in fp32 and torch's autocast emulates bf16.
#
# Usage: bash bench/train_step.sh [build/zaya] [steps]
# Environment: MEDIUM_STEPS (timed steps of zaya1-medium, default 4), ZAYA_PYTHON (python with
# torch, default /usr/bin/python3), TRAIN_STEP_SMALL / TRAIN_STEP_MEDIUM ("CONFIG B T THREADS...";
# TRAIN_STEP_MEDIUM= skips medium), TRAIN_STEP_KEEP=DIR keeps every JSON and log there.
set -euo pipefail
ZAYA=${1:-build/zaya}
STEPS=${2:-10}
MEDIUM_STEPS=${MEDIUM_STEPS:-4}
WARMUP=2
PY=${ZAYA_PYTHON:-/usr/bin/python3}
SMALL=${TRAIN_STEP_SMALL-configs/zaya1-small.toml 8 256 1 2}
MEDIUM=${TRAIN_STEP_MEDIUM-configs/zaya1-medium.toml 2 1024 2}
PEAK_THREADS=2
HW_FOR_FLOPS=configs/hardware/h100-sxm.toml  # `zaya size` wants a profile; FLOP counts ignore it

[ -x "$ZAYA" ] || { echo "train_step.sh: $ZAYA is not an executable" >&2; exit 1; }
if [ -n "${TRAIN_STEP_KEEP:-}" ]; then
  OUT=$TRAIN_STEP_KEEP
  mkdir -p "$OUT"
else
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
fi
T_START=$(date +%s)

flag() { grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -qx "$1" && echo yes || echo no; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); avx512f=$(flag avx512f) avx512_bf16=$(flag avx512_bf16) amx_bf16=$(flag amx_bf16)"
"$ZAYA" info | sed 's/^/# zaya: /'

# Without a bf16 GEMM (no AVX512-BF16, no AMX) zaya's bf16 runs its products in fp32 and
# torch's bf16 autocast emulates bf16 (minutes per step): both precisions are fp32 there.
if "$ZAYA" info | grep -q 'bf16 engine=unavailable'; then
  PAIRS=("zaya fp32" "torch fp32")
  echo "# this CPU has no bf16 GEMM: fp32 only (zaya's bf16 would run fp32 products, torch's autocast emulates bf16)"
else
  PAIRS=("zaya fp32" "torch fp32" "torch bf16" "zaya bf16")
fi
echo "# PyTorch peer check (tools/reference/zaya_fast.py against zaya_ref.py, fp32):"
"$PY" tools/reference/zaya_fast.py check | sed 's/^/#   /'

echo "# GEMM peak, $PEAK_THREADS threads (zaya bench gemm --peak) ..."
OMP_NUM_THREADS=$PEAK_THREADS "$ZAYA" bench gemm --peak --threads $PEAK_THREADS --peak-json "$OUT/peak.json" \
  >"$OUT/peak.log" 2>&1 || { cat "$OUT/peak.log" >&2; exit 1; }
grep '^peak ' "$OUT/peak.log" | sed 's/^/#   /'

peak_search() {  # dtype json
  OMP_NUM_THREADS=$PEAK_THREADS "$ZAYA" bench gemm --peak --dtype "$1" --threads $PEAK_THREADS --peak-json "$2" \
    >"$2.log" 2>&1 || { cat "$2.log" >&2; exit 1; }
}
run_zaya() {  # cfg B T threads steps precision out
  peak_search "$6" "$7.peak_before"
  OMP_NUM_THREADS=$4 "$ZAYA" train-bench --config "$1" --batch "$2" --seq "$3" --steps "$5" \
    --warmup $WARMUP --precision "$6" --json >"$7.log" 2>&1 || { cat "$7.log" >&2; exit 1; }
  tail -n 1 "$7.log" >"$7"
  peak_search "$6" "$7.peak_after"
}
run_torch() {
  OMP_NUM_THREADS=$4 "$PY" tools/reference/bench_torch.py --config "$1" --batch "$2" --seq "$3" \
    --threads "$4" --steps "$5" --warmup $WARMUP --modes "$6" >"$7.log" 2>&1 || { cat "$7.log" >&2; exit 1; }
  tail -n 1 "$7.log" >"$7"
}
tps() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(round(d.get("tokens_per_s") or d[sys.argv[2]+"_tokens_per_s"]))' "$1" "$2"; }

: >"$OUT/runs.txt"
bench_shape() {  # "cfg B T threads..." steps tag
  local cfg b t steps=$2 tag=$3 th
  read -r cfg b t threads <<<"$1"
  "$ZAYA" size --config "$cfg" --hw $HW_FOR_FLOPS --seq "$t" --micro-batch "$b" --dtype fp32 --json \
    >"$OUT/size_$tag.json"
  for th in $threads; do
    for pair in "${PAIRS[@]}"; do
      set -- $pair
      local f="$OUT/${tag}_t${th}_$1_$2.json" t0=$SECONDS
      "run_$1" "$cfg" "$b" "$t" "$th" "$steps" "$2" "$f"
      echo "# $(date -u +%H:%M:%S) $tag B=$b T=$t threads=$th $1 $2: $(tps "$f" "$2") tokens/s ($((SECONDS - t0)) s)"
      echo "$tag $cfg $b $t $th $steps $1 $2 $f" >>"$OUT/runs.txt"
    done
  done
}
[ -n "$SMALL" ] && bench_shape "$SMALL" "$STEPS" small
[ -n "$MEDIUM" ] && bench_shape "$MEDIUM" "$MEDIUM_STEPS" medium

"$PY" - "$OUT" "$(flag avx512_bf16)" "$(flag amx_bf16)" "$(($(date +%s) - T_START))" <<'PYEOF'
import json, os, sys
out, has_bf16, has_amx, elapsed = sys.argv[1], sys.argv[2] == "yes", sys.argv[3] == "yes", int(sys.argv[4])
peak = json.load(open(os.path.join(out, "peak.json")))
highest = dict(peak)  # the highest figure any search of the run read, per precision
runs = {}
for line in open(os.path.join(out, "runs.txt")):
    tag, cfg, b, t, th, steps, who, prec, f = line.split()
    d = json.load(open(f))
    if who == "zaya":  # the searches right before and after this run
        d["peaks_around"] = [json.load(open(f"{f}.peak_{w}"))[f"{prec}_tflops"] for w in ("before", "after")]
        highest[f"{prec}_tflops"] = max([highest[f"{prec}_tflops"]] + d["peaks_around"])
    runs.setdefault((tag, cfg, int(b), int(t), int(steps)), {}).setdefault(int(th), {})[(who, prec)] = d
around = lambda d: sum(d["peaks_around"]) / 2
if has_amx:
    r1_target, r1_why, bf16_target, bf16_why = 3.0, "AMX", 0.40, "AMX"
elif has_bf16:
    r1_target, r1_why, bf16_target, bf16_why = 2.0, "AVX512-BF16, no AMX", 0.50, "AVX512-BF16 alone"
else:
    r1_target, r1_why, bf16_target, bf16_why = None, "no AVX512-BF16: no target set", None, "no bf16 units"
fp32_target = 0.70
met = lambda v, tgt: "" if tgt is None else ("  [target met]" if v >= tgt else "  [BELOW target]")
print(f"\nGEMM peak (2 threads), the search at the start: fp32 {peak['fp32_tflops']:.4f} TFLOP/s, "
      f"bf16 {peak['bf16_tflops']:.4f} TFLOP/s; the highest of all searches in the run: fp32 "
      f"{highest['fp32_tflops']:.4f}, bf16 {highest['bf16_tflops']:.4f}. '% peak': zaya rows against the "
      f"searches around each run (column 'peak around'), PyTorch rows against the start's.")
first_torch = None
for (tag, cfg, B, T, steps), by_th in runs.items():
    size = json.load(open(os.path.join(out, f"size_{tag}.json")))
    fpt = size["flops_per_token"]["training"]
    print(f"\n== {os.path.basename(cfg)}  B={B} T={T}  {steps} timed steps (median), 2 warm-up, "
          f"training {fpt / 1e6:.1f} MFLOP/token (zaya size)")
    print(f"{'':24s} {'thr':>3s} {'tokens/s':>10s} {'step ms':>9s} {'TFLOP/s':>8s} {'% peak':>7s} "
          f"{'peak RSS':>9s} {'GEMM %':>7s}  {'peak around (before / after)':>28s}")
    for th, r in sorted(by_th.items()):
        scale = th / 2  # the peak was measured at 2 threads
        for who, prec in (("zaya", "fp32"), ("zaya", "bf16"), ("torch", "fp32"), ("torch", "bf16")):
            d = r.get((who, prec))
            if d is None:
                continue
            tp = d.get("tokens_per_s") or d[f"{prec}_tokens_per_s"]
            step = d.get("step_time_s") or d[f"{prec}_step_s"]
            fl = tp * fpt / 1e12
            pk = (around(d) if who == "zaya" else peak[f"{prec}_tflops"]) * scale
            rss = f"{d['peak_rss_bytes'] / 2**20:.0f} MiB" if "peak_rss_bytes" in d else ""
            gf = f"{100 * d['gemm_fraction']:.0f}%" if "gemm_fraction" in d else ""
            pa = f"{around(d):.4f} ({d['peaks_around'][0]:.4f} / {d['peaks_around'][1]:.4f})" if who == "zaya" else ""
            name = f"{who} {prec}" + (" (autocast)" if who == "torch" and prec == "bf16" else "")
            print(f"{name:24s} {th:3d} {tp:10.1f} {step * 1e3:9.1f} {fl:8.4f} {100 * fl / pk:6.1f}% {rss:>9s} {gf:>7s}"
                  f"  {pa:>28s}")
            if who == "torch" and (first_torch is None or first_torch.get("bf16_gemm") is None):
                first_torch = d
        ran = lambda who: [p for p in ("fp32", "bf16") if (who, p) in r]
        zb = max(ran("zaya"), key=lambda p: r[("zaya", p)]["tokens_per_s"])
        tb = max(ran("torch"), key=lambda p: r[("torch", p)][f"{p}_tokens_per_s"])
        z, t = r[("zaya", zb)]["tokens_per_s"], r[("torch", tb)][f"{tb}_tokens_per_s"]
        ratio = z / t
        print(f"  ratio 1, {th} thread{'s' if th > 1 else ''}: zaya {zb} / PyTorch {tb} = {ratio:.2f}x"
              + (f" (target >= {r1_target:.1f}x: {r1_why})" if r1_target else f" ({r1_why})")
              + met(ratio, r1_target))
        note = "" if th == 2 else f" (against {scale:.1f} x the 2-thread peak)"
        for prec, tgt, why in (("bf16", bf16_target, bf16_why), ("fp32", fp32_target, "")):
            if ("zaya", prec) not in r:
                continue
            d = r[("zaya", prec)]
            fl = d["tokens_per_s"] * fpt / 1e12
            frac = fl / (around(d) * scale)
            tgt_s = f" (target >= {100 * tgt:.0f}%{', ' + why if why else ''})" if tgt else f" ({why})"
            print(f"  ratio 2, {th} thread{'s' if th > 1 else ''}: zaya {prec} training {fl:.4f} TFLOP/s = "
                  f"{100 * frac:.1f}% of the {prec} GEMM peak measured around it{note}{tgt_s}" + met(frac, tgt)
                  + f"; {100 * fl / (highest[f'{prec}_tflops'] * scale):.1f}% of the run's highest")
if first_torch:
    d = first_torch
    print(f"\nPyTorch {d['torch']}: model {d['model']}; BLAS {d['blas_library']} "
          f"(via {' -> '.join(d.get('libblas_so_3_alternatives', []))}), core {d['blas_core_before']} -> "
          f"{d['blas_core']} (OPENBLAS_CORETYPE={d['openblas_coretype_env']}), ATen "
          f"{d['aten_cpu_capability_before']} -> {d['aten_cpu_capability']}; bf16 GEMM {d.get('bf16_gemm')}; "
          f"malloc {d.get('malloc', 'glibc defaults')}")
print(f"train_step.sh: {elapsed} s")
PYEOF
