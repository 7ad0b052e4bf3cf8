# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The demo's store, kept for `acp-registry list` and the other commands afterwards (git ignores .demo/).
DEMO_DIR ?= .demo
DEMO_STORE := sqlite://$(abspath $(DEMO_DIR))/sessions.db

.PHONY: install test lint guard demo bench bench-full fuzz agents test-agents clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The venv's packages are installed by uv (from PyPI, like pip; pip stays in the venv for whoever wants it): from a
# fresh clone it installs the dev extra in ~4 s where pip took ~19 s, a tenth of make test on two cores.
$(BIN)/uv: $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check 'uv>=0.5'
UV_PIP := $(BIN)/uv pip install --quiet --python $(BIN)/python

# Only what the package itself needs (msgspec, rich, reactivex, ...): all the demo and the CLI use.
$(VENV)/.installed-base: $(BIN)/uv pyproject.toml
	$(UV_PIP) -e .
	touch $@

# The dev extra on top: PostgreSQL driver, the official ACP SDK, pytest, mypy, ruff, matplotlib for the plot test.
$(VENV)/.installed: $(BIN)/uv pyproject.toml
	$(UV_PIP) -e '.[dev]'
	touch $(VENV)/.installed-base $@

install: $(VENV)/.installed

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The suite on every core (pytest-xdist), then the speed guard (instruction counts: any load may run beside it), and
# last, in one pytest run, one by one, the tests that must run alone: those marked serial (one restarts the
# PostgreSQL server every other PostgreSQL test shares) and those marked idle (each asserts a time bound that only a
# machine the suite no longer loads keeps for sure). A plain `pytest` runs all of them one by one.
#
# With PYTHONDONTWRITEBYTECODE set (some machines set it for every process) the suite would keep no bytecode: each of
# its pytest processes would rewrite and compile every test module again (~8 s of CPU in each of the four that
# collect the suite) and every acp-registry a test starts would compile what it imports. make test keeps it in
# .venv/pycache instead, never beside the sources (a plain `pytest` leaves the variable as it is).
ifneq ($(PYTHONDONTWRITEBYTECODE),)
TEST_ENV := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache
endif
# Two pytest workers a core: the suite's tests wait on the processes they start and on PostgreSQL's commits, and two
# workers on two cores left a core idle a third of the time (the parallel step 367 s -> 312 s with four, the same tree).
# Work stealing: a worker that is done takes the tests still queued on another, so the step does not end on one
# worker's tail of long tests.
WORKERS ?= $(shell echo $$((2 * $$(nproc))))
# Bytecode first, in one process, while the lint runs on the other core: the package and what collecting the suite
# imports, compiled once (the workers, started together on a fresh clone, each compiled all of it: 24 s of the step).
WARM := $(BIN)/python -m compileall -q events registry benchmarks tests && $(BIN)/pytest --collect-only -q
test: install
	$(TEST_ENV) sh -c '{ $(WARM); } >/dev/null 2>&1' & $(MAKE) --no-print-directory lint; lint=$$?; wait; exit $$lint
	$(TEST_ENV) $(BIN)/pytest -n $(WORKERS) --dist worksteal -m 'not real_agents and not serial and not idle'
	$(TEST_ENV) $(BIN)/pytest benchmarks/test_guard.py
	$(TEST_ENV) $(BIN)/pytest -m '(serial or idle) and not real_agents'

# The speed figures CI holds, each a ratio of instructions counted by valgrind against a reference (benchmarks/guard.py).
guard: install
	$(BIN)/pytest benchmarks/test_guard.py

demo: $(VENV)/.installed-base
	rm -f $(DEMO_DIR)/sessions.db $(DEMO_DIR)/sessions.db-wal $(DEMO_DIR)/sessions.db-shm $(DEMO_DIR)/sessions.db.*
	mkdir -p $(DEMO_DIR)
	$(BIN)/acp-registry demo --store $(DEMO_STORE)

# Real third-party ACP agents from npm/PyPI (fast-agent, mistral-vibe, claude-agent-acp, claude-code-acp, codex-acp,
# gemini-cli)
# and the TypeScript SDK, into a cache outside the clone ($ACP_REGISTRY_AGENTS_DIR, ~/.cache/acp-session-registry/agents),
# under a lock on it; quick when they are there and whole, a broken one installed again. Each step may take
# $ACP_REGISTRY_AGENTS_TIMEOUT seconds (300). Exit 3 when one could not be installed (its tests then skip).
agents:
	bash tests/agents/install.sh

# The proxy in front of those agents, and the SDK clients through it (tests marked real_agents; make test skips them).
test-agents: install
	$(BIN)/pytest -m real_agents

# The bench extra (eventsourcing, ripgrep) on top of dev: the baselines need it.
$(VENV)/.installed-bench: $(VENV)/.installed pyproject.toml
	$(UV_PIP) -e '.[dev,bench]'
	touch $@

# benchmarks/results/ tracks the published full run; git ignores the quick (and custom) runs written beside it.
bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks.run --quick

bench-full: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks.run --full

# The long fuzz run: every fuzz suite with 10 times make test's examples, under five seeds (~15 minutes).
fuzz: install
	$(BIN)/python -m benchmarks.fuzz_sweep

clean:
	rm -rf $(VENV) $(DEMO_DIR) .mypy_cache .ruff_cache .pytest_cache .hypothesis
