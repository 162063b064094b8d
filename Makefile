# The developer entry points. `make check` is exactly what CI runs (.ci/run).
#
#   make demo        run the built-in example
#   make test        run the test suite
#   make check       lint, format check, type check, then the tests (on every core)
#   make bench-core  run every bench/bench_*.py (python -m bench.<name>)
#   make soak        the long, randomized run of the stateful model test (docs/adr/0037)
#
# The virtualenv is created on first use; installs are skipped while a stamp file
# is newer than pyproject.toml.

PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install -q
PYTEST := $(BIN)/python -m pytest -q
BENCHES := $(sort $(basename $(notdir $(wildcard bench/bench_*.py))))
# `make check` (what CI runs) spreads the tests over the machine's cores, at most 4,
# with pytest-xdist; the tests of the one Spark session share a worker (ADR 0081).
# JOBS=1 runs them in one process, as `make test` always does.
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)
PARALLEL := $(if $(filter-out 0 1,$(JOBS)),-n $(JOBS) --dist loadgroup)

.PHONY: demo test check lint bench-core soak

demo: $(VENV)/.installed
	$(BIN)/deltalog demo

test: $(VENV)/.installed-dev
	$(PYTEST)

check: lint
	$(PYTEST) $(PARALLEL)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The stateful model test at length, randomized: the `dev` hypothesis profile even
# where CI=true would pick the derandomized `ci` one (a scheduled soak must draw new
# examples each run); it stops at the first failure. DELTALOG_SOAK_EXAMPLES and
# DELTALOG_SOAK_STEPS (default 300 and 80) size it; no per-test timeout. Not in CI.
soak: $(VENV)/.installed-dev
	DELTALOG_SOAK=1 DELTALOG_SOAK_EXAMPLES=$${DELTALOG_SOAK_EXAMPLES:-300} \
		HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-dev} \
		$(PYTEST) -p no:cacheprovider --timeout=0 -x \
		--hypothesis-show-statistics tests/datalog/test_model.py

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
