# Every CI job calls these targets, so a CI failure reproduces locally with the same command.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

NPM_STAMP := node_modules/.install-stamp
KAFKA := bash integration/kafka/kafka.sh
TEST_OUTPUT := integration/.test_output
MOCHA := node_modules/.bin/mocha

.PHONY: help
help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-20s %s\n", $$1, $$2}'

$(NPM_STAMP): package.json package-lock.json scripts/install.sh scripts/setup-native.sh scripts/check-native.mjs
	bash scripts/install.sh
	touch $@

.PHONY: install
install: $(NPM_STAMP) ## Install system build deps (apt) and npm deps, check librdkafka features

.PHONY: build
build: $(NPM_STAMP) ## Compile lib/ to dist/ (CJS + ESM wrapper + types)
	node scripts/build.mjs

.PHONY: lint
lint: $(NPM_STAMP) ## ESLint, Prettier and the TypeScript type check
	node_modules/.bin/eslint .
	node_modules/.bin/prettier --check .
	node_modules/.bin/tsc -p tsconfig.json

.PHONY: test-unit
test-unit: $(NPM_STAMP) ## Unit tests (no broker)
	$(MOCHA) --config .mocharc.unit.json

.PHONY: kafka-up
kafka-up: ## Start Kafka: KAFKA_BROKERS if set, else Docker if it answers, else Maven jars (KAFKA_NODES=1|3)
	$(KAFKA) up

.PHONY: kafka-down
kafka-down: ## Stop the Kafka started by kafka-up
	$(KAFKA) down

.PHONY: reset-kafka
reset-kafka: ## Stop Kafka, wipe its data, start it again (empty cluster)
	$(KAFKA) reset

.PHONY: test-integration
test-integration: build reset-kafka ## Integration tests against a real broker
	rm -rf $(TEST_OUTPUT)
	$(MOCHA) --config .mocharc.integration.json
	rm -rf $(TEST_OUTPUT)

.PHONY: test-package
test-package: build ## npm pack, then import (ESM), require (CJS) and type-check the tarball
	bash scripts/test-package.sh

.PHONY: test
test: lint test-unit test-package test-integration ## Everything: lint, unit, packaging and integration tests

.PHONY: clean
clean: ## Remove build output, test output and broker data (stops the broker)
	-$(KAFKA) down
	rm -rf dist $(TEST_OUTPUT) integration/.kafka *.tgz
