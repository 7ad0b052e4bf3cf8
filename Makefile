# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint demo bench bench-full fuzz clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

demo: install
	$(BIN)/acp-registry demo

# The bench extra (eventsourcing, matplotlib) on top of dev: the baselines and plots need it.
$(VENV)/.installed-bench: $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks.run --quick

bench-full: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks.run --full

# The long fuzz run: every fuzz suite with 10 times make test's examples, under five seeds (~15 minutes).
fuzz: install
	$(BIN)/python -m benchmarks.fuzz_sweep

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
