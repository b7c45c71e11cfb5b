# gradwire — the commands. `make test` is the test command CI runs.
#
#   make test        install missing packages, configure, build, run all tests
#   make test-asan   the unit tests of common/ and server/ under ASan + UBSan
#   make fuzz-smoke  build the libFuzzer targets and run each for FUZZ_SECONDS
#   make fuzz        the same for FUZZ_LONG_SECONDS (default one hour)
#   make bench       the compression benchmark (writes build/bench-compress.json)
#   make bench-network  dense fp32 against Top-K 1% + EF on 1 Gbit/s links
#                    between network namespaces (root; build/bench-network.json)
#   make bench-convergence  accuracy and bytes of every compressor (about 25
#                    min; writes build/convergence.{md,json})
#   make demo        2 shards + 2 workers train Fashion-MNIST on this machine
#                    (gradwire local; writes build/demo-summary.json)
#   make format      clang-format every C++ file
#   make check-deploy  offline checks of docker-compose.yml, deploy/docker,
#                    deploy/k8s and deploy/prometheus, with every service's
#                    settings run through the binaries' --dry-run

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
FUZZ_SECONDS ?= 60
FUZZ_LONG_SECONDS ?= 3600
# Extra flags for `make demo`, appended last so they win, e.g.
# DEMO_ARGS="--max-steps=100" on a busy machine.
DEMO_ARGS  ?=
# Flags for bench/network.sh, e.g. "--rate=10gbit --steps=100".
NETWORK_ARGS ?=
# Flags for bench/convergence.sh, e.g. "--model=cnn --epochs=1".
CONVERGENCE_ARGS ?=

.PHONY: all deps configure build test test-asan fuzz-smoke fuzz bench bench-convergence bench-network demo format check-deploy clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DGRADWIRE_SANITIZE=ON -DGRADWIRE_BUILD_BENCHMARKS=OFF -DGRADWIRE_CUDA=OFF \
	  -DGRADWIRE_BUILD_WORKER=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -L unit

$(FUZZ_BUILD)/bin/gradwire-fuzz-decode: deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRADWIRE_BUILD_FUZZERS=ON \
	  -DGRADWIRE_SANITIZE=ON -DGRADWIRE_BUILD_BENCHMARKS=OFF \
	  -DGRADWIRE_BUILD_TESTS=ON -DGRADWIRE_CUDA=OFF -DGRADWIRE_BUILD_WORKER=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target gradwire-fuzz-decode

fuzz-smoke: $(FUZZ_BUILD)/bin/gradwire-fuzz-decode
	tests/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

fuzz: $(FUZZ_BUILD)/bin/gradwire-fuzz-decode
	tests/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(FUZZ_LONG_SECONDS)

bench: build
	$(BUILD)/bin/gradwire-bench-compress --json $(BUILD)/bench-compress.json

bench-convergence: build
	BUILD=$(BUILD) bench/convergence.sh --out $(BUILD) $(CONVERGENCE_ARGS)

bench-network: build
	bench/network.sh --bin $(BUILD)/bin --json $(BUILD)/bench-network.json $(NETWORK_ARGS)

demo: build
	$(BUILD)/bin/gradwire local --shards=2 --workers=2 --model=cnn \
	  --compressor=topk --ratio=0.01 --error-feedback --epochs=1 \
	  --summary-json=$(BUILD)/demo-summary.json $(DEMO_ARGS)

check-deploy: build
	BUILD=$(BUILD) scripts/check-deploy.sh

format:
	git ls-files '*.cc' '*.h' '*.cu' '*.cuh' '*.proto' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
