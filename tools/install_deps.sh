#!/usr/bin/env bash
# Installs the Debian 12 packages zaya.cpp needs. Idempotent: packages already
# present are skipped, and apt is not touched at all when nothing is missing.
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config git
  libopenblas-openmp-dev libdnnl-dev
  libopenmpi-dev openmpi-bin
  libsentencepiece-dev sentencepiece
  nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libxxhash-dev
  libsimdjson-dev zlib1g-dev libzstd-dev libsnappy-dev  # corpora: JSON lines, gzip, zstd, Parquet pages
  libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev libjs-chart.js  # zaya dashboard: HTTP server, the page's charts
  chromium  # tests/dashboard.sh: the page in a headless browser
  python3 python3-torch python3-numpy python3-matplotlib
  python3-protobuf  # tests/tensorboard.sh: the independent reader of the event files
  bible-kjv
  nodejs
  clang-14 lld-14 libclang-rt-14-dev libfuzzer-14-dev  # tests/fuzz: libFuzzer, ASan, UBSan
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm (tests/hf_tokenizer_ref.sh): Debian's package, unless the installed nodejs bundles it
# (NodeSource's does, and conflicts with Debian's npm).
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "[deps] installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "[deps] done"
