# Every CI job calls these targets, so a CI failure reproduces locally with the same command.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

NPM_STAMP := node_modules/.install-stamp
BENCH_STAMP := bench/node_modules/.install-stamp
KAFKA := bash integration/kafka/kafka.sh
TEST_OUTPUT := integration/.test_output
MOCHA := node_modules/.bin/mocha
# The local broker's first port (node N listens on KAFKA_PORT_BASE + 10 × (N − 1)); set it when
# 9092 is taken. The tests talk to it unless KAFKA_BROKERS names an external cluster.
KAFKA_PORT_BASE ?= 9092
export KAFKA_PORT_BASE
# KAFKA_TEST_BINDING=fast runs the integration and chaos suites with every consumer on the companion
# binding (fast-binding/, built first); unset or `stock`: node-rdkafka.
KAFKA_TEST_BINDING ?= stock
KAFKA_TEST_BINDING_MODULE ?= $(CURDIR)/fast-binding
export KAFKA_TEST_BINDING KAFKA_TEST_BINDING_MODULE
TEST_BINDING := $(if $(filter fast,$(KAFKA_TEST_BINDING)),fast-binding/dist/node-rdkafka/build/Release/node-librdkafka.node)
ifndef KAFKA_BROKERS
KAFKA_BROKERS_TEST ?= 127.0.0.1:$(KAFKA_PORT_BASE)
export KAFKA_BROKERS_TEST
endif

.PHONY: help
help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-20s %s\n", $$1, $$2}'

$(NPM_STAMP): package.json package-lock.json scripts/install.sh scripts/setup-native.sh scripts/check-native.mjs
	bash scripts/install.sh
	touch $@

.PHONY: install
install: $(NPM_STAMP) ## Install system build deps (apt) and npm deps, check librdkafka features (warns)

# Fails when librdkafka lacks zstd, lz4, SSL or SASL/SCRAM, naming the package to install: run first
# by the targets that need them (a real broker's compressed topics and secured listeners).
.PHONY: check-native
check-native: $(NPM_STAMP) ## Fail unless librdkafka has zstd, lz4, SSL and SASL/SCRAM (the broker tests need them)
	node scripts/check-native.mjs

# dist/ is rebuilt only when its inputs changed, so that suites running at once (make test) never
# rebuild it under each other.
BUILD_STAMP := dist/.build-stamp
BUILD_INPUTS := $(shell find lib -name '*.ts') package.json tsconfig.json $(wildcard tsconfig.*.json) scripts/build.mjs

$(BUILD_STAMP): $(NPM_STAMP) $(BUILD_INPUTS)
	node scripts/build.mjs
	touch $@

.PHONY: build
build: $(BUILD_STAMP) ## Compile lib/ to dist/ (CJS + ESM wrapper + types)

.PHONY: lint
lint: $(NPM_STAMP) ## ESLint, Prettier and the TypeScript type check
	node_modules/.bin/eslint .
	node_modules/.bin/prettier --check .
	node_modules/.bin/tsc -p tsconfig.json
	node scripts/check-file-sizes.mjs

.PHONY: test-unit
test-unit: $(NPM_STAMP) ## Unit tests (no broker)
	$(MOCHA) --config .mocharc.unit.json

.PHONY: kafka-up
kafka-up: ## Start Kafka: KAFKA_BROKERS if set, else Docker if it answers, else Maven jars (KAFKA_NODES=1|3)
	$(KAFKA) up

.PHONY: kafka-fetch
kafka-fetch: ## Fetch the broker jars from Maven Central and compile kafka.sh's helpers (once; cached)
	$(KAFKA) fetch

.PHONY: kafka-down
kafka-down: ## Stop the Kafka started by kafka-up
	$(KAFKA) down

.PHONY: reset-kafka
reset-kafka: ## Stop Kafka, wipe its data, start it again (an empty one-node cluster: what the suites expect)
	KAFKA_NODES=1 $(KAFKA) reset

.PHONY: test-integration
test-integration: check-native build reset-kafka $(TEST_BINDING) ## Integration tests against a real broker
	rm -rf $(TEST_OUTPUT)/integration
	TEST_OUTPUT_DIR=$(TEST_OUTPUT)/integration $(MOCHA) --config .mocharc.integration.json || \
		{ node scripts/test-output-digest.mjs $(TEST_OUTPUT)/integration; exit 1; }
	rm -rf $(TEST_OUTPUT)/integration

.PHONY: api-report
api-report: build ## Write the public API report (api/reactive-rdkafka.api.md) from dist/: commit it with an API change
	node scripts/api-report.mjs

.PHONY: test-api
test-api: build ## Fail when the public API (dist/'s declarations) differs from the committed report
	node scripts/api-report.mjs --check

.PHONY: test-package
test-package: $(NPM_STAMP) ## npm pack from a clean clone, publint, attw, then import/require/type-check the tarball
	bash scripts/test-package.sh

# The chaos suites get clusters of their own (jar mode: they stop, freeze and restart brokers), on
# ports above the shared broker's and in their own data directories, so that they can run at once
# with each other and with the integration suite (make test does), and stop them when done.
CHAOS_PORT_BASE := $(shell echo $$(( $(KAFKA_PORT_BASE) + 100 )))
CHAOS3_PORT_BASE := $(shell echo $$(( $(KAFKA_PORT_BASE) + 200 )))
EOS_PORT_BASE := $(shell echo $$(( $(KAFKA_PORT_BASE) + 300 )))
CHAOS_KAFKA := KAFKA_MODE=jars KAFKA_NODES=1 KAFKA_PORT_BASE=$(CHAOS_PORT_BASE) KAFKA_DATA_DIR=$(CURDIR)/integration/.kafka-chaos $(KAFKA)
EOS_KAFKA := KAFKA_MODE=jars KAFKA_NODES=1 KAFKA_PORT_BASE=$(EOS_PORT_BASE) KAFKA_DATA_DIR=$(CURDIR)/integration/.kafka-eos $(KAFKA)
CHAOS3_KAFKA := KAFKA_MODE=jars KAFKA_NODES=3 KAFKA_PORT_BASE=$(CHAOS3_PORT_BASE) KAFKA_DATA_DIR=$(CURDIR)/integration/.kafka-chaos3 $(KAFKA)

.PHONY: test-rebalance
test-rebalance: check-native build ## Rebalance chaos suites: graceful/crash/frozen/stuck on 1 broker and a broker failure on 3, at once
	bash scripts/lanes.sh chaos=test-rebalance-local chaos3=test-rebalance-broker

.PHONY: test-rebalance-local
test-rebalance-local: test-chaos-rebalance test-chaos-exactly-once ## Rebalance chaos on one broker (its own, or KAFKA_BROKERS): graceful, crash, frozen, stuck, exactly-once

.PHONY: test-chaos-rebalance
test-chaos-rebalance: check-native build $(TEST_BINDING) ## Graceful, crash, frozen and stuck rebalance chaos on a broker of its own (or KAFKA_BROKERS)
	rm -rf $(TEST_OUTPUT)/rebalance
ifdef KAFKA_BROKERS
	TEST_OUTPUT_DIR=$(TEST_OUTPUT)/rebalance $(MOCHA) --config .mocharc.chaos.json
else
	$(CHAOS_KAFKA) reset
	rc=0; KAFKA_MODE=jars KAFKA_PORT_BASE=$(CHAOS_PORT_BASE) KAFKA_DATA_DIR=$(CURDIR)/integration/.kafka-chaos \
		KAFKA_BROKERS_TEST=127.0.0.1:$(CHAOS_PORT_BASE) TEST_OUTPUT_DIR=$(TEST_OUTPUT)/rebalance \
		$(MOCHA) --config .mocharc.chaos.json || rc=$$?; $(CHAOS_KAFKA) down; exit $$rc
endif
	rm -rf $(TEST_OUTPUT)/rebalance

.PHONY: test-chaos-exactly-once
test-chaos-exactly-once: check-native build $(TEST_BINDING) ## Exactly-once chaos (seeded SIGKILL/SIGTERM restarts of processTransactional() workers) on a broker of its own (or KAFKA_BROKERS)
	rm -rf $(TEST_OUTPUT)/chaos-exactly-once
ifdef KAFKA_BROKERS
	TEST_OUTPUT_DIR=$(TEST_OUTPUT)/chaos-exactly-once $(MOCHA) --config .mocharc.chaos-eos.json
else
	$(EOS_KAFKA) reset
	rc=0; KAFKA_MODE=jars KAFKA_PORT_BASE=$(EOS_PORT_BASE) KAFKA_DATA_DIR=$(CURDIR)/integration/.kafka-eos \
		KAFKA_BROKERS_TEST=127.0.0.1:$(EOS_PORT_BASE) TEST_OUTPUT_DIR=$(TEST_OUTPUT)/chaos-exactly-once \
		$(MOCHA) --config .mocharc.chaos-eos.json || rc=$$?; $(EOS_KAFKA) down; exit $$rc
endif
	rm -rf $(TEST_OUTPUT)/chaos-exactly-once

.PHONY: test-rebalance-broker
test-rebalance-broker: check-native build $(TEST_BINDING) ## Broker-failure and coordinator-freeze chaos on a three-node cluster of its own
	rm -rf $(TEST_OUTPUT)/rebalance-broker
	$(CHAOS3_KAFKA) reset
	rc=0; KAFKA_MODE=jars KAFKA_PORT_BASE=$(CHAOS3_PORT_BASE) KAFKA_DATA_DIR=$(CURDIR)/integration/.kafka-chaos3 \
		KAFKA_BROKERS_TEST=127.0.0.1:$(CHAOS3_PORT_BASE),127.0.0.1:$$(($(CHAOS3_PORT_BASE) + 10)),127.0.0.1:$$(($(CHAOS3_PORT_BASE) + 20)) \
		KAFKA_REPLICATION_FACTOR=3 TEST_OUTPUT_DIR=$(TEST_OUTPUT)/rebalance-broker \
		$(MOCHA) --config .mocharc.chaos-broker.json || rc=$$?; $(CHAOS3_KAFKA) down; exit $$rc
	rm -rf $(TEST_OUTPUT)/rebalance-broker

.PHONY: test-rebalance-full
test-rebalance-full: check-native build reset-kafka ## The chaos suite at taskbroker's scale (8 workers x 32 partitions x 100k messages x 16 restarts)
	rm -rf $(TEST_OUTPUT)/rebalance-full
	CHAOS_SCALE=full TEST_OUTPUT_DIR=$(TEST_OUTPUT)/rebalance-full $(MOCHA) --config .mocharc.chaos.json
	rm -rf $(TEST_OUTPUT)/rebalance-full

# The companion binding (fast-binding/): node-rdkafka from its registry release + this project's
# patches, librdkafka linked in statically. Cached in ~/.cache by version, patches and Node ABI.
FAST_BINDING := fast-binding/dist/node-rdkafka/build/Release/node-librdkafka.node

$(FAST_BINDING): fast-binding/build.sh $(wildcard fast-binding/patches/*.patch) | $(NPM_STAMP)
	bash fast-binding/build.sh

.PHONY: fast-binding
fast-binding: $(FAST_BINDING) ## Build the companion binding and pack it (reactive-rdkafka-fast-binding-<version>.tgz here), then install the tarball aside and load it
	cd fast-binding && npm pack --silent --pack-destination ..
	bash fast-binding/check-tarball.sh reactive-rdkafka-fast-binding-$$(node -p "require('./fast-binding/package.json').version").tgz

.PHONY: test-fast-binding
test-fast-binding: check-native build $(FAST_BINDING) kafka-up ## The companion binding's suite: its fields against node-rdkafka's, the binding contract and core integration suites on it (all of them: KAFKA_TEST_BINDING=fast make test-integration test-rebalance)
	rm -rf $(TEST_OUTPUT)/fast-binding
	KAFKA_TEST_BINDING=fast TEST_OUTPUT_DIR=$(TEST_OUTPUT)/fast-binding $(MOCHA) --config .mocharc.fast-binding.json || \
		{ node scripts/test-output-digest.mjs $(TEST_OUTPUT)/fast-binding; exit 1; }
	rm -rf $(TEST_OUTPUT)/fast-binding

.PHONY: test
test: ## Everything: lint, unit, packaging, demo, integration and chaos tests, bench smoke run; then the time per suite
	bash scripts/test-all.sh

.PHONY: bench-install
bench-install: $(BENCH_STAMP) ## Install the peer libraries of the bench into bench/node_modules (only the bench targets use them)

$(BENCH_STAMP): bench/package.json bench/package-lock.json
	npm ci --prefix bench --no-audit --no-fund --loglevel=error
	touch $@

.PHONY: bench
bench: build $(BENCH_STAMP) $(FAST_BINDING) kafka-up ## Full benchmark (takes ~15 min; builds the companion binding): regenerates docs/benchmarks.md and its SVG charts
	node --import tsx bench/run.ts --mode full

.PHONY: bench-quick
bench-quick: build $(BENCH_STAMP) kafka-up ## Smoke run of the benchmark on a small topic; report in bench/.results/
	node --import tsx bench/run.ts --mode quick

.PHONY: test-bench
test-bench: bench-quick ## bench-quick, then check that its report has a figure for every installed contender
	$(MOCHA) --config .mocharc.bench.json

.PHONY: clean
clean: ## Remove build output, test output and broker data (stops the broker)
	-$(KAFKA) down
	-$(CHAOS_KAFKA) down
	-$(CHAOS3_KAFKA) down
	-$(EOS_KAFKA) down
	rm -rf dist $(TEST_OUTPUT) integration/.kafka integration/.kafka-chaos integration/.kafka-chaos3 integration/.kafka-eos *.tgz bench/.results fast-binding/dist

.PHONY: demo
demo: $(NPM_STAMP) ## Two consumers, rebalances under load, then a loss/duplicate count (embedded broker unless KAFKA_BROKERS)
	node scripts/check-native.mjs --warn=demo
	node --import tsx scripts/demo/demo.ts

.PHONY: docs
docs: $(NPM_STAMP) ## API reference from the doc comments, into docs/api/ (typedoc)
	rm -rf docs/api
	node_modules/.bin/typedoc --options docs/typedoc.json
