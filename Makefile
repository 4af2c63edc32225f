# changelake — the two set-up commands are `make demo` and `make test` (see README.md).
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin

.PHONY: setup system-deps venv demo test test-unit test-browser check dev services-up services-down validate bench clean

setup: system-deps venv

system-deps:
	@bash scripts/install-system-deps.sh

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing changelake into $(VENV) (log: $(VENV)/install.log)"
	@{ $(BIN)/pip install -q --upgrade pip && $(BIN)/pip install -q -e '.[test,scale]'; } > $(VENV)/install.log 2>&1 \
	  || { tail -20 $(VENV)/install.log; exit 1; }
	@touch $@

## The main job on the local services: both pipelines, the aggregation, the checks.
## The lake of Pipeline 2 is Iceberg, or Paimon with `LAKE=paimon make demo`.
demo: setup
	@$(BIN)/changelake services up
	@$(BIN)/changelake demo

## The whole test suite against real Kafka and MariaDB started for the tests (the browser test
## in tests/e2e/test_browser.py included; `pytest -m browser` selects it alone).
test: setup
	@# bytecode of the project's own modules, written once: every subprocess of the tests (CLI calls,
	@# Dagster run workers, the binlog reader's child) then loads it instead of compiling, also where
	@# PYTHONDONTWRITEBYTECODE is set (about 1 s per process that imports the platform, on 2 cores)
	@$(BIN)/python -m compileall -q -j 0 changelake cli resources assets sensors platform_defs >/dev/null
	@PYTHONWARNINGS=ignore $(BIN)/dg check defs >/dev/null
	@$(BIN)/mypy --strict changelake/changelog changelake/formats changelake/connectors changelake/pipeline changelake/pageviews changelake/services.py changelake/state_dir.py changelake/collector.py changelake/options.py changelake/errors.py
	@$(BIN)/pytest -q -p no:cacheprovider --durations=20

test-browser: setup
	@$(BIN)/pytest -q -p no:cacheprovider -m browser tests/e2e

## Every lake check, headless (exit 1 on failure).
check: venv
	@$(BIN)/changelake check

test-unit: venv
	@$(BIN)/pytest -q -m "not integration" tests/unit

## The Dagster UI on http://$(HOST):$(PORT) with the local services (make dev PORT=3001 HOST=0.0.0.0).
PORT ?= 3000
HOST ?= 127.0.0.1
dev: setup
	@$(BIN)/changelake services up
	@$(BIN)/changelake dev --port $(PORT) --host $(HOST)

services-up: venv
	@$(BIN)/changelake services up
services-down: venv
	@$(BIN)/changelake services down

## Load and validate the code location (dg, from dagster-dg-cli; [tool.dg] in pyproject.toml).
validate: venv
	@$(BIN)/dg check defs

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	@$(BIN)/changelake services down 2>/dev/null || true
	rm -rf .state
