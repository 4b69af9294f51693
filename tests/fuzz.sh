#!/usr/bin/env bash
# ctest case script.fuzz: builds the libFuzzer targets (tests/fuzz/, clang + ASan + UBSan,
# only the parser sources) into BUILD/fuzz, replays every seed corpus -- including the
# inputs of every crash found and fixed -- and fuzzes each target for FUZZ_TEST_RUNS inputs
# (default 2000) more, each time from the seed corpus alone (FUZZ_FRESH) with libFuzzer's seed
# FUZZ_SEED (default 1), so the inputs tried do not depend on the machine's speed. Any crash,
# sanitizer report, leak or input slower than 30 s fails it. `make fuzz` is the long run.
#   usage: tests/fuzz.sh ZAYA_BIN BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_FRESH=1 FUZZ_TIMEOUT="${FUZZ_TIMEOUT:-30}" FUZZ_RUNS="${FUZZ_TEST_RUNS:-2000}" FUZZ_SEED="${FUZZ_SEED:-1}" \
  exec bash tests/fuzz/run.sh "$2/fuzz" runs
