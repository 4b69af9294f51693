#!/usr/bin/env bash
# Installs node-llama-cpp (pinned; its prebuilt x64 CPU build of llama.cpp only) with npm into
# ${ZAYA_CACHE:-$HOME/.cache/zaya}/npm-llama-cpp once, and prints that directory (the root
# whose node_modules the .mjs peers import from). Used by bench/llama_cpp_peer.sh and
# tests/llama_cpp_blocks.sh; llama.cpp is a peer and an oracle there, never on zaya's path.
#   root=$(bash tools/npm_llama_cpp.sh)
set -euo pipefail
PKG=node-llama-cpp@3.21.1
PKG_BIN=@node-llama-cpp/linux-x64@3.21.1
CACHE=${ZAYA_CACHE:-$HOME/.cache/zaya}/npm-llama-cpp
[ "$(uname -m)" = x86_64 ] || { echo "npm_llama_cpp.sh: the pinned llama.cpp build is for x86_64, not $(uname -m)" >&2; exit 1; }
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "npm_llama_cpp.sh: node and npm are missing: install the Debian packages nodejs and npm (tools/install_deps.sh)" >&2; exit 1; }
if [ ! -f "$CACHE/.zaya-stamp" ] || [ "$(cat "$CACHE/.zaya-stamp")" != "$PKG $PKG_BIN" ]; then
  echo "installing $PKG (prebuilt CPU binaries only) into $CACHE" >&2
  mkdir -p "$(dirname "$CACHE")"
  tmp=$(mktemp -d "$CACHE.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # --omit=optional leaves out the CUDA, Vulkan and other-OS builds (~600 MB); the x64 CPU
  # build is named instead. The package's postinstall step only checks for a binary.
  if ! (cd "$tmp" && npm install --silent --no-save --no-package-lock --omit=optional --ignore-scripts \
          "$PKG" "$PKG_BIN" >npm.log 2>&1); then
    cat "$tmp/npm.log" >&2 || true
    echo "npm_llama_cpp.sh: cannot install $PKG with npm (no registry access?) and there is no cached copy in $CACHE" >&2
    exit 1
  fi
  echo "$PKG $PKG_BIN" >"$tmp/.zaya-stamp"
  rm -rf "$CACHE"
  mv "$tmp" "$CACHE"
fi
echo "$CACHE"
