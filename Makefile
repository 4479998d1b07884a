# Each target sets itself up: a fresh machine needs only python3 (3.10+) and pip.
# npm packages (MCP reference servers, the conformance suite, Node 22) are
# installed from the committed package-lock.json when package.json exists.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench node clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch node_modules/.installed

node:
	@if [ -f package.json ]; then $(MAKE) --no-print-directory node_modules/.installed; fi

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) node
	$(BIN)/python -m pytest

test: lint typecheck unit

# Benchmarks run in their own venv: the peers (openai-agents, pydantic-ai-slim,
# langchain-core, fastmcp) are benchmark extras, never runtime dependencies.
BENCH := .venv-bench
$(BENCH)/.installed: pyproject.toml
	test -x $(BENCH)/bin/python || $(PYTHON) -m venv $(BENCH)
	$(BENCH)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH)/bin/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH)/.installed

bench: $(BENCH)/.installed node
	$(BENCH)/bin/python benchmarks/bench_core.py
	$(BENCH)/bin/python benchmarks/bench_cycle.py
	$(BENCH)/bin/python benchmarks/bench_mcp.py
	$(BENCH)/bin/python benchmarks/bench_sync.py

clean:
	rm -rf $(VENV) $(BENCH) node_modules .pytest_cache .mypy_cache .ruff_cache
