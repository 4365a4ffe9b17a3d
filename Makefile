# kairo-orch: every target bootstraps what it needs, so `make test` works on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test test-fast check format demo bench bench-completion bench-scale chaos attack clean-venv

install: $(STAMP)

# git and tmux come from the system's packages when missing; the rest from PyPI.
$(STAMP): pyproject.toml scripts/install-system-packages.sh
	@bash scripts/install-system-packages.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# The real agent programs (Claude Code, Codex CLI, Aider), pinned, into a cache outside the
# clone that later runs reuse: tests/real_agents.py.
test: $(STAMP)
	$(BIN)/python -m tests.real_agents install
	$(BIN)/pytest -q

test-fast: $(STAMP)
	$(BIN)/pytest -q -m 'not slow'

check: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python scripts/import_cycles.py
	$(BIN)/python scripts/layers.py

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# The performance targets, beside raw git/tmux/sqlite baselines: a table and bench.json.
# Bytecode first: with PYTHONDONTWRITEBYTECODE set (as on this project's machines), every
# supervisor would compile kairo's own modules anew, which a pip install does once.
bench: $(STAMP)
	$(BIN)/python -m compileall -q orchestrator agents
	$(BIN)/python scripts/bench.py

# The completion gates against scripted misbehaving agents (the real Claude Code and Codex
# against tests/model_server), beside a gates-off baseline: a table and bench-completion.json.
# Its --quick form runs in `make test` (tests/completion/test_bench_completion.py).
bench-completion: $(STAMP)
	$(BIN)/python -m tests.real_agents install
	$(BIN)/python -m compileall -q orchestrator agents
	$(BIN)/python scripts/bench_completion.py $(ARGS)

# A 1,024-subtask plan beside a 64-subtask one: does the supervisor's cost per subtask stay
# the same? One run each (it is long): bench-scale.json. scripts/bench_scale.py says more.
bench-scale: $(STAMP)
	$(BIN)/python -m compileall -q orchestrator agents
	$(BIN)/python scripts/bench_scale.py $(ARGS)

# Kills, outages, a deleted store, a full disk, tmux killed, under real runs: tests/chaos.
# Its short form runs in `make test`.
chaos: $(STAMP)
	$(BIN)/python -m tests.chaos

# Adversarial agents (tests/attack), counted by the reproduction each defends against and the
# sandbox it ran in (local, or bwrap: the default). They run in `make test` too.
attack: $(STAMP)
	$(BIN)/python -m tests.attack

clean-venv:
	rm -rf $(VENV)
