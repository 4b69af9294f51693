# zaya.cpp: the two commands are `make demo` and `make test`; each installs its
# Debian packages (tools/install_deps.sh, idempotent) and builds first.
BUILD ?= build
JOBS  ?= $(shell nproc)
PREFIX ?= /usr/local

.PHONY: all deps configure build test demo install bench-report clean fuzz test-asan

all: build

deps:
	@bash tools/install_deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)
	@echo "built $(BUILD)/zaya"

test: build
	cd $(BUILD) && OMP_NUM_THREADS=2 ctest --output-on-failure -j 1

demo: build
	bash scripts/demo.sh $(BUILD)/zaya

install: build
	cmake --install $(BUILD)

bench-report: build
	bash scripts/bench_report.sh $(BUILD)/zaya

clean:
	rm -rf $(BUILD)

# libFuzzer targets (tests/fuzz/, clang + ASan + UBSan, built into build-fuzz/): each one
# replays its seed corpus, then fuzzes until it has run FUZZ_RUNS inputs; not getting there
# within FUZZ_SECONDS, or an input slower than 1 s, is a failure. The counts go to
# bench/results/fuzz-<cpu>.json (docs/reliability.md's table).
FUZZ_RUNS ?= 1000000
FUZZ_SECONDS ?= 3600
fuzz: deps
	FUZZ_TIMEOUT=1 FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_RECORD=1 bash tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

# The GoogleTest suite and the CLI script tests built with -fsanitize=address,undefined
# (build-asan/, -DZAYA_SANITIZE=ON: -O1 -g); any sanitizer report fails its test. The fuzz
# step is left out (it is its own ASan build). Leaks inside the MPI, OpenMP and BLAS
# libraries: tests/fuzz/lsan.supp.
ASAN_BUILD ?= build-asan
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0 \
  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZAYA_SANITIZE=ON
	$(ASAN_ENV) cmake --build $(ASAN_BUILD) -j $(JOBS) --target test_binaries
	cd $(ASAN_BUILD) && $(ASAN_ENV) OMP_NUM_THREADS=2 ctest --output-on-failure -j 1 -E '^script[.]fuzz$$'
