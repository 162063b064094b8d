# The developer entry points. `make check` is exactly what CI runs (.ci/run).
#
#   make demo        run the built-in example
#   make test        run the test suite
#   make check       lint, format check, type check, then the tests
#   make bench-core  run every bench/bench_*.py (python -m bench.<name>)
#
# The virtualenv is created on first use; installs are skipped while a stamp file
# is newer than pyproject.toml.

PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install -q
PYTEST := $(BIN)/python -m pytest -q
BENCHES := $(sort $(basename $(notdir $(wildcard bench/bench_*.py))))

.PHONY: demo test check lint bench-core

demo: $(VENV)/.installed
	$(BIN)/deltalog demo

test: $(VENV)/.installed-dev
	$(PYTEST)

check: lint
	$(PYTEST)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench-core: $(VENV)/.installed-bench
	@set -e; for b in $(BENCHES); do \
		echo "## $$b"; $(BIN)/python -m bench.$$b; \
	done

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[dev]'
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[bench]'
	touch $@

# The side-by-side suite (bench/suite.py): writes docs/benchmarks/; ARGS=--quick for a short run.
.PHONY: bench
bench: $(VENV)/.installed-bench
	$(BIN)/python -m bench.suite $(ARGS)
