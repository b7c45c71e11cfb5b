# gradwire — the commands. `make test` is the test command CI runs.
#
#   make test        install missing packages, configure, build, run all tests
#   make test-asan   the unit tests of common/, server/, client/ and cli/
#                    under ASan + UBSan, built by clang with -Werror
#                    -Wthread-safety in the fuzz targets' tree (one
#                    sanitizer build for both)
#   make fuzz-smoke  build the libFuzzer targets (decode, push, init, restore,
#                    getinfo, pull) and fuzz them one after another,
#                    FUZZ_SECONDS in total
#                    (split evenly: CI's FUZZ_SECONDS=60 is 10 s each, so that
#                    its fuzz step stays a few minutes with the build)
#   make fuzz        the same for FUZZ_LONG_SECONDS in total (default one hour)
#   make bench       the compression benchmark (writes build/bench-compress.json)
#   make bench-network  dense fp32 against Top-K 1% + EF on 1 Gbit/s links
#                    between network namespaces (root; build/bench-network.json)
#   make bench-auto  every compression setting and DDP on 10 Mbit/s to unshaped
#                    links (root; docs/benchmarks/data/auto-DATE.json; AUTO_ARGS)
#   make bench-straggler  1 shard + 3 workers, one slowed, under BSP and SSP
#                    (staleness 2, 4); writes build/bench-straggler.json
#   make bench-convergence  accuracy and bytes of 6 compression settings,
#                    each with momentum and with plain SGD, seeds 1,2,3, 10
#                    MLP epochs (bench/convergence/convergence.py; about
#                    1.5 h; writes build/convergence.{md,json},
#                    convergence-*.png and build/convergence-runs/)
#   make bench-optimizers  DistributedOptimizer (Top-K 1% + EF) against DDP
#                    with the same torch optimizer: SGD momentum, Adam,
#                    Adadelta, seeds 1,2,3, 1 CNN epoch, 2 workers
#                    (bench/convergence/optimizer_convergence.py; about
#                    1 h; writes build/optimizer-convergence.{md,json})
#   make bench-models  ResNet-18 and the GPT of examples/python/ from the
#                    user's path: each DDP script against its gradwire port
#                    (and Compression("none")), 2 workers on seeds 1,2,3 and
#                    4 workers on seed 1; accuracy or held-out perplexity,
#                    bytes, seconds per step, peak memory against DDP's
#                    (bench/models/models.py; several hours on 2 cores;
#                    docs/benchmarks/data/models-DATE.json; MODELS_ARGS)
#   make bench-large   the 126M-parameter GPT against DDP: step time split
#                    into exchange and the rest, start-up seconds and bytes,
#                    worker and shard peak memory per parameter, checkpoint
#                    size and time (bench/large/large.py; about 15 minutes
#                    on 2 cores; docs/benchmarks/data/large-DATE.json;
#                    LARGE_ARGS)
#   make bench-python  Python workers against gradwire-worker, overlap on
#                    shaped links (root), ResNet-18 against DDP
#                    (build/bench-python.json; PYTHON_BENCH_ARGS="--parts=a")
#   make bench-load  64 simulated workers against 2 real shards: throughput,
#                    latency, errors, shard memory (build/bench-load.json)
#   make demo        builds only the three binaries it runs, then 2 shards +
#                    2 workers train Fashion-MNIST on this machine
#                    (gradwire local; writes build/demo-summary.json), with
#                    the Prometheus console dashboard when Debian's
#                    prometheus is installed (its URL is printed)
#   make demo-python the same with Python workers (bench/python/worker.py
#                    through --worker-command; writes
#                    build/demo-python-summary.json)
#   make format      clang-format every C++ file
#   make lint        -Werror -Wthread-safety over every source (the unit
#                    tests of common/, server/, client/, cli/ get them in
#                    make test-asan), and no function over 60 lines
#                    outside tests/ (clang-tidy-14; build-lint/ holds its
#                    compile database), and a clang-format check of every
#                    C++ and proto file
#   make settings-doc  writes docs/reference/settings.md, the reference of
#                    every worker setting, from worker/settings_table.h
#   make check-docs  every relative link and #anchor in the tracked Markdown
#                    files resolves; every figure of README.md and
#                    docs/benchmarks/README.md is what its data file gives;
#                    the generated settings reference is current
#                    (scripts/check-docs.sh)
#   make figures     rewrites the figures of README.md and
#                    docs/benchmarks/README.md from the benchmark data
#                    files they name (scripts/figures.py --write; without
#                    --write it prints each figure with its files' commits
#                    and machines, --provenance what every data file records)
#   make check-deploy  offline checks of docker-compose.yml, deploy/docker,
#                    deploy/k8s and deploy/prometheus, with every service's
#                    settings run through the binaries' --dry-run
#   make images      the server, worker and Prometheus images, compiled from
#                    source inside the image build, with docker or podman
#                    (scripts/images.sh; makes Debian base images locally
#                    where no registry answers)
#   make images-prebuilt  the same images from the binaries in $(BUILD)/bin
#                    (what CI uses after make test: nothing compiles twice)
#   make compose-test  images-prebuilt, then docker-compose.yml (TLS) and its
#                    plaintext opt-out brought up for real: health, training,
#                    a shard killed and restarted, Prometheus's bytes against
#                    the workers' summaries, down -v leaving nothing
#                    (tests/compose/compose-test.sh; exit 77: no engine)

BUILD      ?= build
# The sanitizer tree (clang, ASan + UBSan, -Werror): the unit tests of
# test-asan and the fuzz targets share its libraries.
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
FUZZ_SECONDS ?= 60
FUZZ_LONG_SECONDS ?= 3600
# The fuzz targets; the seconds given to fuzz-smoke / fuzz are shared by them.
FUZZ_TARGETS := decode push init restore getinfo pull
fuzz_seconds_each = $$(( $(1) / $(words $(FUZZ_TARGETS)) > 0 ? $(1) / $(words $(FUZZ_TARGETS)) : 1 ))
# `make demo`'s dashboard: on when Debian's Prometheus is installed.
DEMO_DASHBOARD ?= $(if $(wildcard /usr/bin/prometheus),--dashboard)
# Extra flags for `make demo`, appended last so they win, e.g.
# DEMO_ARGS="--max-steps=100" on a busy machine.
DEMO_ARGS  ?=
# Flags for bench/network/network.sh, e.g. "--rate=10gbit --steps=100".
NETWORK_ARGS ?=
# Flags for bench/straggler/straggler.sh, e.g. "--delay-ms=300 --every=4".
STRAGGLER_ARGS ?=
# Flags for bench/convergence/convergence.sh (its convergence.py --help),
# e.g. "--seeds=1 --only=topk1,dense" or "--model=cnn --epochs=1".
CONVERGENCE_ARGS ?=
# Flags for bench/convergence/optimizer_convergence.py (--help), e.g.
# "--seeds=1 --optimizers=adam".
OPTIMIZERS_ARGS ?=
# Flags for bench/python/python.sh, e.g. "--parts=a --steps=60 --repeat=2".
PYTHON_BENCH_ARGS ?=
# Flags for bench/models/models.py (--help), e.g.
# "--models=gpt --plan=2:1 --methods=ddp,gradwire".
MODELS_ARGS ?=
# Flags for gradwire-bench-load, e.g. "--mode=bsp --steps=200".
LOAD_ARGS ?=

.PHONY: all deps configure build demo-build test lint sanitizer-configure test-asan fuzz-build fuzz-smoke fuzz bench bench-convergence bench-optimizers bench-network bench-auto bench-straggler bench-load bench-models bench-large bench-python demo demo-python format check-deploy check-docs figures settings-doc images images-prebuilt compose-test clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

sanitizer-configure: deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRADWIRE_BUILD_FUZZERS=ON \
	  -DGRADWIRE_SANITIZE=ON -DGRADWIRE_WERROR=ON \
	  -DGRADWIRE_BUILD_BENCHMARKS=OFF -DGRADWIRE_BUILD_TESTS=ON \
	  -DGRADWIRE_CUDA=OFF -DGRADWIRE_BUILD_WORKER=OFF

test-asan: sanitizer-configure
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target gradwire-unit-tests
	ctest --test-dir $(FUZZ_BUILD) --output-on-failure -j $(JOBS) -L unit

fuzz-build: sanitizer-configure
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addprefix gradwire-fuzz-,$(FUZZ_TARGETS))

fuzz-smoke: fuzz-build
	tests/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(call fuzz_seconds_each,$(FUZZ_SECONDS))

fuzz: fuzz-build
	tests/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(call fuzz_seconds_each,$(FUZZ_LONG_SECONDS))

bench: build
	$(BUILD)/bin/gradwire-bench-compress --json $(BUILD)/bench-compress.json

bench-convergence: build
	BUILD=$(BUILD) bench/convergence/convergence.sh --out $(BUILD) $(CONVERGENCE_ARGS)

bench-optimizers: build
	bench/convergence/optimizer_convergence.py --out $(BUILD) --bin $(BUILD)/bin $(OPTIMIZERS_ARGS)

bench-network: build
	bench/network/network.sh --bin $(BUILD)/bin --json $(BUILD)/bench-network.json $(NETWORK_ARGS)

bench-auto: build
	bench/auto/auto.sh --bin=$(BUILD)/bin $(AUTO_ARGS)

bench-straggler: build
	bench/straggler/straggler.sh --bin $(BUILD)/bin --json $(BUILD)/bench-straggler.json $(STRAGGLER_ARGS)

bench-models: build
	bench/models/models.py --build $(BUILD) --methods=ddp,gradwire,none $(MODELS_ARGS)

bench-large: build
	bench/large/large.py --build $(BUILD) $(LARGE_ARGS)

bench-python: build
	bench/python/python.sh --bin $(BUILD)/bin --json $(BUILD)/bench-python.json $(PYTHON_BENCH_ARGS)

bench-load: build
	$(BUILD)/bin/gradwire-bench-load --json $(BUILD)/bench-load.json $(LOAD_ARGS)

# The demo builds only what it runs: the tests and benchmarks come with
# `make test` and `make bench`.
DEMO_TARGETS := gradwire gradwire-server gradwire-worker

demo-build: configure
	cmake --build $(BUILD) -j $(JOBS) --target $(DEMO_TARGETS)

demo: demo-build
	$(BUILD)/bin/gradwire local --shards=2 --workers=2 --model=cnn \
	  --compressor=topk --ratio=0.01 --error-feedback --epochs=1 \
	  --summary-json=$(BUILD)/demo-summary.json $(DEMO_DASHBOARD) $(DEMO_ARGS)

# The workers inherit gradwire local's environment: PYTHONPATH finds the
# gradwire Python module built into $(BUILD)/python.
demo-python: build
	PYTHONPATH=$(abspath $(BUILD))/python $(BUILD)/bin/gradwire local \
	  --shards=2 --workers=2 \
	  --worker-command="/usr/bin/python3 bench/python/worker.py" \
	  --model=cnn --compressor=topk --ratio=0.01 --error-feedback --epochs=1 \
	  --summary-json=$(BUILD)/demo-python-summary.json $(DEMO_ARGS)

check-deploy: build
	BUILD=$(BUILD) scripts/check-deploy.sh

# Links in every tracked *.md, the figures of README.md and
# docs/benchmarks/README.md against their data, and the settings reference
# against the build's settings_reference test when $(BUILD) has it (no
# build of its own).
check-docs:
	BUILD=$(BUILD) scripts/check-docs.sh

# The figures of README.md and docs/benchmarks/README.md, computed from the
# data files they name; no build needed.
figures:
	scripts/figures.py --write

images: deps
	scripts/images.sh --jobs $(JOBS)

images-prebuilt: build
	scripts/images.sh --prebuilt $(BUILD)

compose-test: images-prebuilt
	tests/compose/compose-test.sh

lint: deps
	scripts/lint.sh

settings-doc: configure
	cmake --build $(BUILD) -j $(JOBS) --target gradwire-settings-doc
	$(BUILD)/bin/gradwire-settings-doc > docs/reference/settings.md

format:
	git ls-files '*.cc' '*.h' '*.cu' '*.cuh' '*.proto' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) build-lint
