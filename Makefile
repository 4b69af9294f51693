# zaya.cpp: the two commands are `make demo` and `make test`; each installs its
# Debian packages (tools/install_deps.sh, idempotent) and builds first.
BUILD ?= build
JOBS  ?= $(shell nproc)
PREFIX ?= /usr/local

.PHONY: all deps configure build test demo install bench-report clean

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
