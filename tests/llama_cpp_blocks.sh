#!/usr/bin/env bash
# zaya's GGUF block formats read by llama.cpp itself: for each type zaya writes (bf16, q8_0,
# q4_0, q4_k, q6_k), a small llama model whose layers add nothing (bench_llama_gguf
# --zero-layers: the tied embedding in that type, written by zaya's GgufWriter and block
# quantizers, as `zaya quantize` writes it) is run by llama.cpp (node-llama-cpp 3.21.1's
# prebuilt CPU build, tools/npm_packages.sh). tests/llama_cpp_blocks_check.py decodes the
# embedding as tools/reference/gguf_reader.py does from the formats' definitions, and requires
# - the decoded values to be the fp32 values the writer was given, up to the format's
#   rounding (a writer that misplaces values fails: pairing q4_0's nibbles j, j + 1 instead
#   of j, j + 16 gave an rms error of 1.36 against at most 0.13);
# - llama.cpp's next-token log-probabilities to equal those computed in double from the
#   decoded embedding, within the error of llama.cpp's 8-bit (bf16) activations: 0.03 nats
#   (measured 2.7e-3 to 9.6e-3), where the same embedding with each block's elements reversed
#   misses by 0.89-1.04 (a control: it must miss by 10x the tolerance).
# No node, or no package and no way to fetch it, is a FAILURE, not a skip.
#
#   bash tests/llama_cpp_blocks.sh <path-to-zaya-binary> <build-dir>     (from the repo root)
set -euo pipefail
BUILD=${2:?usage: llama_cpp_blocks.sh <zaya-binary> <build-dir>}
GEN="$BUILD/bench_llama_gguf"
[ -x "$GEN" ] || { echo "FAIL: $GEN missing (built with the benchmarks)" >&2; exit 1; }
ROOT=$(bash tools/npm_packages.sh llama-cpp)
WORK="$BUILD/llama_cpp_blocks"
rm -rf "$WORK"
mkdir -p "$WORK"
status=0
# Each format's rms rounding error relative to the values (uniform weights), with 1.8x
# to 2.5x over what they measure (bf16 1.7e-3, q8_0 3.8e-3, q6_k 1.3e-2, q4_k 5.6e-2, q4_0 6.5e-2).
declare -A REL=([bf16]=0.003 [q8_0]=0.01 [q6_k]=0.025 [q4_k]=0.1 [q4_0]=0.13)
for t in bf16 q8_0 q4_0 q4_k q6_k; do
  "$GEN" "$WORK/$t.gguf" --type bf16 --embedding-type "$t" --zero-layers --layers 1 --hidden 256 --ffn 256 \
    --heads 2 --kv-heads 1 --vocab 512 --seed 3 --dump-embedding "$WORK/$t.f32" >/dev/null
  node tests/llama_cpp_blocks.mjs "$ROOT" "$WORK/$t.gguf" 300 6 >"$WORK/$t.jsonl"
  n=$(wc -l <"$WORK/$t.jsonl")
  [ "$n" -eq 6 ] || { echo "FAIL $t.gguf: llama.cpp gave $n of 6 steps"; status=1; continue; }
  python3 tests/llama_cpp_blocks_check.py "$WORK/$t.gguf" "$WORK/$t.jsonl" 0.03 "$WORK/$t.f32" "${REL[$t]}" || status=1
done
[ $status -eq 0 ] && echo "PASS: llama.cpp reads zaya's bf16, q8_0, q4_0, q4_k and q6_k blocks as their definitions say"
exit $status
