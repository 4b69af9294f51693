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
#   PEER_THREADS (2), PEER_PROMPT (64), PEER_STEPS (32 timed tokens, after 4 untimed),
#   PEER_ZAYA (a ZAYA1-base bf16 directory, with DIR-q8_0 / DIR-q4_k beside it as
#   `bench_zaya1_base --dir DIR --keep --quant TYPE` leaves them: zaya's decode of each format,
#   `bench_zaya1_base --decode-only`, then runs right after llama.cpp's in every round, and the
#   table adds zaya's columns and the ratio of the two engines' bytes per second).
# The peer is the llama.cpp of node-llama-cpp 3.21.1: its prebuilt CPU libraries (the ggml
# CPU backend matching this CPU is picked at run time, and printed), installed by
# tools/npm_packages.sh into ${ZAYA_CACHE:-$HOME/.cache/zaya}/npm-llama-cpp, driven by
# bench/peer/llama_decode.cpp as llama-bench's "tg" test does: llama_decode of one token a
# step with the LM head's logits, no sampling (through node-llama-cpp's own generator, its
# sampling and thread hand-offs added 3-4 ms a token), the mean of the timed tokens, as
# llama-bench and bench_zaya1_base report.
set -euo pipefail
BUILD=${1:-build}
DIR=${PEER_DIR:-/tmp/zaya_llama_peer}
TYPES=${PEER_TYPES:-bf16 q8_0 q4_k}
ROUNDS=${PEER_ROUNDS:-3}
THREADS=${PEER_THREADS:-2}
PROMPT=${PEER_PROMPT:-64}
STEPS=${PEER_STEPS:-32}
ZAYA=${PEER_ZAYA:-}
for v in ROUNDS THREADS PROMPT STEPS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "llama_cpp_peer.sh: PEER_$v='${!v}': expected a positive integer" >&2; exit 1; }
done
zaya_dir() {  # format -> zaya's model directory of it (bf16: PEER_ZAYA itself)
  if [ "$1" = bf16 ]; then echo "$ZAYA"; else echo "$ZAYA-$1"; fi
}
if [ -n "$ZAYA" ]; then
  for t in $TYPES; do
    d=$(zaya_dir "$t")
    [ -f "$d/config.json" ] || { echo "llama_cpp_peer.sh: PEER_ZAYA: $d is not a model directory (bench_zaya1_base --keep --quant $t leaves it)" >&2; exit 1; }
  done
fi
for t in $TYPES; do
  case $t in bf16 | q8_0 | q4_k) ;; *) echo "llama_cpp_peer.sh: PEER_TYPES: '$t' is not bf16, q8_0 or q4_k" >&2; exit 1 ;; esac
done
for b in zaya bench_llama_gguf bench_zaya1_base; do
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
trap 'rm -f "$OUT" "$OUT.info"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $THREADS threads, prompt $PROMPT, $STEPS timed tokens, $ROUNDS rounds;" \
  "CPU flags: $(grep -m1 -o -w -E 'avx2|avx512f|avx512_vnni|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
show() {  # the last record: round, format, engine, GB, triads, ms
  read -r r t e gb b a ms < <(tail -n 1 "$OUT")
  python3 -c 'import sys; r,t,e,gb,b,a,ms=sys.argv[1:]; tr=(float(b)+float(a))/2
print(f"round {r} {t:5s} {e:9s} {float(ms):6.1f} ms/token, {float(gb):.3f} GB/token, triad {float(b):.1f} / {float(a):.1f} GB/s -> roofline ratio {float(gb)/tr*1e3/float(ms):.2f}")' \
    "$r" "$t" "$e" "$gb" "$b" "$a" "$ms"
}
for r in $(seq "$ROUNDS"); do
  order=$TYPES
  [ $((r % 2)) -eq 0 ] && order=$(echo "$TYPES" | tr ' ' '\n' | tac | tr '\n' ' ')
  for t in $order; do
    before=$(triad)
    line=$("$DRIVER" "$BINS" "$DIR/$t.gguf" "$THREADS" "$PROMPT" "$STEPS" 4)
    after=$(triad)
    [ -f "$OUT.info" ] || echo "$line" >"$OUT.info"
    ms=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ms_per_token"])' "$line")
    echo "$r $t llama.cpp $(cat "$DIR/$t.bytes") $before $after $ms" >>"$OUT"
    show
    if [ -n "$ZAYA" ]; then  # zaya's decode of ZAYA1-base in the same format, right after
      zl=$(OMP_NUM_THREADS=$THREADS "$BUILD/bench_zaya1_base" --dir "$(zaya_dir "$t")" --decode-only --prompt "$PROMPT" \
             --steps "$STEPS" --threads "$THREADS" | grep ' ms/token), ')
      # "NAME load .. decode X tokens/s (Y ms/token), Z GB weights/token, triad W GB/s -> ..."
      read -r zms zgb ztriad < <(echo "$zl" | sed -E 's/.*\(([0-9.]+) ms\/token\), ([0-9.]+) GB weights\/token, triad ([0-9.]+) GB\/s.*/\1 \2 \3/')
      echo "$r $t zaya $zgb $ztriad $ztriad $zms" >>"$OUT"
      show
    fi
  done
done
python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = {}
for ln in open(sys.argv[1]):
    r, t, eng, gb, b, a, ms = ln.split()
    rows.setdefault(eng, {}).setdefault(t, {})[int(r)] = (float(gb), (float(b) + float(a)) / 2, float(ms))
j0 = json.loads(open(sys.argv[1] + ".info").read())
print(f"# llama.cpp of node-llama-cpp 3.21.1 (its prebuilt libraries, tag v0.4.0), CPU backend {j0['cpu_backend']}: "
      f"{j0['system_info']}")
print("# medians (ranges) over the rounds of: mean ms per token; roofline ratio = (weight GB per token / triad) /")
print("# time per token; vs bf16 = the engine's bf16 ms / this format's ms in the same round")
med = statistics.median
def fmt(v, f="{:.2f}", unit=""):
    return f"{f.format(med(v))}{unit} ({f.format(min(v))}-{f.format(max(v))})"
engines = [e for e in ("llama.cpp", "zaya") if e in rows]
both = len(engines) == 2
print("| format | " + " | ".join(f"{e} GB / token | {e} ms / token | {e} roofline ratio | {e} vs bf16" for e in engines)
      + (" | zaya / llama.cpp, bytes per second |" if both else " |"))
print("|---|" + "---|---|---|---|" * len(engines) + ("---|" if both else ""))
for t in rows[engines[0]]:
    cells = []
    for e in engines:
        v = rows[e][t]
        sp = [rows[e]["bf16"][r][2] / x[2] for r, x in v.items() if "bf16" in rows[e] and r in rows[e]["bf16"]]
        cells += [f"{next(iter(v.values()))[0]:.3f}", fmt([x[2] for x in v.values()], "{:.1f}"),
                  fmt([x[0] / x[1] * 1e3 / x[2] for x in v.values()]), fmt(sp, unit="x") if sp and t != "bf16" else "-"]
    if both:
        z, l = rows["zaya"][t], rows["llama.cpp"][t]
        cells.append(fmt([(z[r][0] / z[r][2]) / (l[r][0] / l[r][2]) for r in z if r in l], unit="x"))
    print(f"| {t} | " + " | ".join(cells) + " |")
EOF
