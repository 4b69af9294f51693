#!/usr/bin/env bash
# llama.cpp as the peer of zaya's quantized decode (docs/infer.md, "llama.cpp on the same
# machine"): llama.cpp cannot run a ZAYA model, so it decodes a dense llama-architecture
# model with ZAYA1-base's bytes per step (bench/llama_gguf.cpp: the tied 262,272 x 2048 head
# and 21 layers holding as many weights as the attention and routed expert of ZAYA1-base's
# 80 sub-layers), in each format with zaya quantize's mix: bf16, q8_0, q4_k (q6_k head). The
# figure both engines are held to is the one the targets use: the fraction of the STREAM
# triad roofline (weight bytes per step / triad bandwidth, over the measured ms per token),
# with the triad measured right before and after each decode (their mean), and the speed-up
# over bf16 in the same round.
#
# Usage: bash bench/llama_cpp_peer.sh [BUILD]            (from the repo root; BUILD: build)
# Environment: PEER_DIR (/tmp/zaya_llama_peer: the GGUF files, ~4.8 GB, kept and reused),
#   PEER_TYPES ("bf16 q8_0 q4_k"), PEER_ROUNDS (3: the types' order alternates by round),
#   PEER_THREADS (2), PEER_PROMPT (64), PEER_STEPS (32 timed tokens, after 4 untimed).
# The peer is the llama.cpp of node-llama-cpp 3.21.1: its prebuilt CPU libraries (the ggml
# CPU backend matching this CPU is picked at run time, and printed), installed by
# tools/npm_packages.sh into ${ZAYA_CACHE:-$HOME/.cache/zaya}/npm-llama-cpp, driven by
# bench/peer/llama_decode.cpp as llama-bench's "tg" test does: llama_decode of one token a
# step with the LM head's logits, no sampling (through node-llama-cpp's own generator, its
# sampling and thread hand-offs added 3-4 ms a token), the median of the timed tokens, as
# bench_zaya1_base times zaya's decode steps.
set -euo pipefail
BUILD=${1:-build}
DIR=${PEER_DIR:-/tmp/zaya_llama_peer}
TYPES=${PEER_TYPES:-bf16 q8_0 q4_k}
ROUNDS=${PEER_ROUNDS:-3}
THREADS=${PEER_THREADS:-2}
PROMPT=${PEER_PROMPT:-64}
STEPS=${PEER_STEPS:-32}
for v in ROUNDS THREADS PROMPT STEPS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "llama_cpp_peer.sh: PEER_$v='${!v}': expected a positive integer" >&2; exit 1; }
done
for t in $TYPES; do
  case $t in bf16 | q8_0 | q4_k) ;; *) echo "llama_cpp_peer.sh: PEER_TYPES: '$t' is not bf16, q8_0 or q4_k" >&2; exit 1 ;; esac
done
for b in zaya bench_llama_gguf; do
  [ -x "$BUILD/$b" ] || { echo "llama_cpp_peer.sh: $BUILD/$b missing: run make build first" >&2; exit 1; }
done

ROOT=$(bash tools/npm_packages.sh llama-cpp)
# The decode loop (bench/peer/llama_decode.cpp), built against the llama.h of the package's
# own llama.cpp source bundle and linked with its prebuilt libraries.
BINS="$ROOT/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
DRIVER="$ROOT/llama_decode"
if [ ! -x "$DRIVER" ] || [ bench/peer/llama_decode.cpp -nt "$DRIVER" ]; then
  hdr="$ROOT/llama-headers"
  if [ ! -f "$hdr/include/llama.h" ]; then
    src=$(mktemp -d)
    git clone --quiet --no-checkout "$ROOT/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$src/llama.cpp" 2>/dev/null
    mkdir -p "$hdr"
    git -C "$src/llama.cpp" archive HEAD include ggml/include | tar -x -C "$hdr"
    rm -rf "$src"
  fi
  g++ -O2 -std=c++17 -I"$hdr/include" -I"$hdr/ggml/include" bench/peer/llama_decode.cpp \
    "$BINS/libllama.v0.4.0.so" "$BINS/libggml.v0.4.0.so" "$BINS/libggml-base.so" -Wl,-rpath,"$BINS" -o "$DRIVER"
fi

mkdir -p "$DIR"
for t in $TYPES; do
  if [ ! -f "$DIR/$t.gguf" ] || [ ! -f "$DIR/$t.bytes" ]; then
    "$BUILD/bench_llama_gguf" "$DIR/$t.gguf" --type "$t" | tee "$DIR/$t.log"
    sed -n 's/.*: \([0-9.]*\) GB weights read per decode step.*/\1/p' "$DIR/$t.log" >"$DIR/$t.bytes"
  fi
done

triad() {  # best triad GB/s over 3 arrays of 256 MB, as bench_zaya1_base measures it
  local j
  j=$(mktemp)
  OMP_NUM_THREADS=$THREADS "$BUILD/zaya" bench mem --threads "$THREADS" --array-bytes 268435456 --json "$j" >/dev/null
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kernels"]["triad"]["best_MBps"] / 1e3)' "$j"
  rm -f "$j"
}

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $THREADS threads, prompt $PROMPT, $STEPS timed tokens, $ROUNDS rounds;" \
  "CPU flags: $(grep -m1 -o -w -E 'avx2|avx512f|avx512_vnni|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for r in $(seq "$ROUNDS"); do
  order=$TYPES
  [ $((r % 2)) -eq 0 ] && order=$(echo "$TYPES" | tr ' ' '\n' | tac | tr '\n' ' ')
  for t in $order; do
    before=$(triad)
    line=$("$DRIVER" "$BINS" "$DIR/$t.gguf" "$THREADS" "$PROMPT" "$STEPS" 4)
    after=$(triad)
    echo "$r $t $(cat "$DIR/$t.bytes") $before $after $line" >>"$OUT"
    python3 - "$r" "$t" "$(cat "$DIR/$t.bytes")" "$before" "$after" "$line" <<'EOF'
import json, sys
r, t, gb, b, a, line = sys.argv[1:]
j = json.loads(line)
triad = (float(b) + float(a)) / 2
print(f"round {r} {t:5s} {j['ms_per_token']:6.1f} ms/token ({j['tokens_per_s']:5.1f} tokens/s, fastest {j['ms_per_token_min']:.1f}), "
      f"{float(gb):.3f} GB/token, triad {float(b):.1f} / {float(a):.1f} GB/s -> roofline ratio "
      f"{float(gb) / triad * 1e3 / j['ms_per_token']:.2f}; prefill {j['prefill_s']:.2f} s; backend {j['cpu_backend']}")
EOF
  done
done
python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = {}
for ln in open(sys.argv[1]):
    r, t, gb, b, a, line = ln.split(" ", 5)
    j = json.loads(line)
    rows.setdefault(int(r), {})[t] = (float(gb), (float(b) + float(a)) / 2, j)
types = list(next(iter(rows.values())).keys())
j0 = next(iter(rows.values()))[types[0]][2]
print(f"# llama.cpp of node-llama-cpp 3.21.1 (its prebuilt libraries, tag v0.4.0), CPU backend {j0['cpu_backend']}: {j0['system_info']}")
print("| format | GB / token | ms / token | tokens/s | roofline ratio | vs bf16, same round |")
print("|---|---|---|---|---|---|")
for t in types:
    ms = [rows[r][t][2]["ms_per_token"] for r in rows]
    rr = [rows[r][t][0] / rows[r][t][1] * 1e3 / rows[r][t][2]["ms_per_token"] for r in rows]
    sp = [rows[r]["bf16"][2]["ms_per_token"] / rows[r][t][2]["ms_per_token"] for r in rows if "bf16" in rows[r]]
    med = statistics.median
    spd = f"{med(sp):.2f}x ({min(sp):.2f}-{max(sp):.2f})" if sp and t != "bf16" else "-"
    print(f"| {t} | {rows[1][t][0]:.3f} | {med(ms):.1f} ({min(ms):.1f}-{max(ms):.1f}) | {1e3 / med(ms):.1f} | "
          f"{med(rr):.2f} ({min(rr):.2f}-{max(rr):.2f}) | {spd} |")
EOF
