"""Real OpenAI-compatible servers, started by the tests themselves.

``llama_server`` runs llama-cpp-python's server (``python -m llama_cpp.server``, chat
format ``chatml-function-calling``) on SmolLM2-135M as a child process, once per session.
``litellm_proxy`` runs LiteLLM's proxy (its own venv, ``litellm_path()``) in front of
it. ``make test`` installs all three (see the Makefile); when one is missing the tests
fail under CI (``CI`` set) and are skipped elsewhere, with the reason.

``llamacpp_server`` runs llama.cpp's own ``llama-server`` (``--jinja``) on the same model.
It is opt-in (``make test-llama-server`` builds it, 21 CPU-minutes, and runs the tests
marked ``llama_server``): when its binary is missing those tests are skipped, under CI too,
unless ``AGCORE_LLAMA_SERVER`` names a binary that is not there.

All three are :func:`supervised`: a server that dies mid-session (a crash in the native
build, say) is reported by the test during which it died, with its exit status or signal
and its last lines, and is started again on the same port, so the tests after it run
instead of failing with "Connection error".
"""

from __future__ import annotations

import importlib.util
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agcore_tools import ToolRegistry

_START_TIMEOUT = 120.0  # loading the model takes a few seconds; a loaded CI box more
_STOP_TIMEOUT = 10.0
_READY = re.compile(r"Uvicorn running on (http://\S+)")
_LLAMACPP_READY = re.compile(r"listening on (http://\S+)")  # printed once the model is loaded
_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
LITELLM_VERSION = "1.106.12"  # must match LITELLM_VERSION in the Makefile
LLAMA_VERSION = "0.3.36"  # must match LLAMA_VERSION in the Makefile
LLAMACPP_TOOL_TEMPLATE = "Qwen-Qwen2.5-7B-Instruct.jinja"  # must match the Makefile's


def _cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agcore-tools"


def model_path() -> Path:
    """Where scripts/fetch_test_model.py puts the model (``AGCORE_TEST_MODEL`` overrides)."""
    if override := os.environ.get("AGCORE_TEST_MODEL"):
        return Path(override)
    return _cache() / "models" / _MODEL


def litellm_path() -> Path:
    """The ``litellm`` command in the venv of its own that the Makefile's ``real-servers``
    target builds (``AGCORE_LITELLM`` overrides). LiteLLM pins many packages, so it never
    goes into the project's venv."""
    if override := os.environ.get("AGCORE_LITELLM"):
        return Path(override)
    return _cache() / f"litellm-{LITELLM_VERSION}" / "bin" / "litellm"


def llamacpp_server_path() -> Path | None:
    """The ``llama-server`` binary that ``make llama-server`` builds (``AGCORE_LLAMA_SERVER``
    overrides), or None when there is none. Its folder in the cache is keyed by the
    Makefile's build flags; ``make test-llama-server`` names it, and a bare pytest run
    takes the only one there is (with several, set ``AGCORE_LLAMA_SERVER``)."""
    if override := os.environ.get("AGCORE_LLAMA_SERVER"):
        return Path(override)
    built = sorted(_cache().glob(f"llama-server-{LLAMA_VERSION}-*/llama-server"))
    return built[0] if len(built) == 1 else None


def _unavailable(reason: str) -> None:
    hint = f"{reason}; `make test` installs it (see the Makefile's real-servers target)"
    if os.environ.get("CI"):
        pytest.fail(hint, pytrace=False)
    pytest.skip(hint)


def describe_exit(returncode: int) -> str:
    """How a process ended, as a person would say it (``killed by SIGSEGV``, ``exit code 1``)."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


class RealServer:
    """A running OpenAI-compatible server, which can be started again on the same port.

    ``process`` and ``output`` are those of the current run. The URL stays the same across
    a restart, so LiteLLM's proxy, configured with the llama server's URL, keeps working
    when the server behind it comes back.
    """

    def __init__(
        self,
        name: str,
        base_url: str,
        model: str,
        run: tuple[list[str], subprocess.Popen[str]],
        command: Callable[[int], list[str]],
        env: dict[str, str] | None = None,
        secret: str = "",
        api_key: str = "not-needed",
        ready: re.Pattern[str] = _READY,
    ) -> None:
        self.name = name
        self.base_url = base_url
        """Up to and including ``/v1``."""
        self.model = model
        """The model name to send."""
        self.api_key = api_key
        """The key to send."""
        self.output, self.process = run
        self._command, self._env, self._secret = command, env, secret
        self._ready = ready

    def __repr__(self) -> str:
        return f"RealServer({self.name!r}, {self.base_url!r})"

    def stop(self) -> None:
        """Terminate the server (bounded), then kill it if it lingers."""
        _stop(self.process)

    def death(self, wait: float = 0.0) -> str | None:
        """``None`` while the server runs; otherwise how it ended and its last lines.
        ``wait`` gives a process that is going down that long to finish dying."""
        try:
            returncode = self.process.wait(wait) if wait else self.process.poll()
        except subprocess.TimeoutExpired:
            return None
        if returncode is None:
            return None
        tail = "".join(self.output[-_TAIL_LINES:]).rstrip() or "(no output)"
        return (
            f"{self.name} at {self.base_url} exited during the session "
            f"({describe_exit(returncode)}); its last lines:\n{tail}"
        )

    def restart(self) -> None:
        """Start the server again on its port, and wait (bounded) until it serves."""
        self.stop()
        port = int(self.base_url.rsplit(":", 1)[1].split("/", 1)[0])
        _, self.output, self.process = _start(
            self.name, self._command(port), self._env, self._secret, self._ready
        )


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(_STOP_TIMEOUT)


def start_llama_server(n_ctx: int = 2048) -> RealServer:
    """Start llama-cpp-python's server on SmolLM2-135M on a free port, and wait (bounded)
    until it serves. The caller stops it; tests that crash a server take one of their own.
    ``n_ctx`` is the context in tokens (the model's own limit is 8192)."""
    for module in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            _unavailable(f"{module} is not installed (llama-cpp-python[server])")
    model = model_path()
    if not model.is_file():
        _unavailable(f"the test model {model} is missing")

    def command(port: int) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server", "--model", str(model),
            "--chat_format", "chatml-function-calling", "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", str(n_ctx), "--verbose", "False",
        ]  # fmt: skip

    url, output, process = _start("llama_cpp.server", command(0))
    return RealServer("llama_cpp.server", f"{url}/v1", str(model), (output, process), command)


def start_llamacpp_server(n_ctx: int = 2048, tool_template: bool = True) -> RealServer:
    """Start llama.cpp's own ``llama-server`` on SmolLM2-135M on a free port, with
    ``--jinja``, and wait (bounded) until it serves. Opt-in: a missing binary skips the
    test, under CI too, unless ``AGCORE_LLAMA_SERVER`` names it. ``n_ctx`` is the context
    in tokens, one slot.

    SmolLM2's own chat template has no tools, and with it this server leaves ``tools``
    out of the prompt and ``tool_choice`` unenforced, silently. So by default it runs
    with a ChatML template that has them (``--chat-template-file``): Qwen2.5's, which
    ``make llama-server`` copies beside the binary from the same llama.cpp source
    (``models/templates``); SmolLM2 is a ChatML model too. ``tool_template=False`` keeps
    the model's own."""
    binary = llamacpp_server_path()
    named = os.environ.get("AGCORE_LLAMA_SERVER")
    if binary is None or not binary.is_file():
        if named:
            pytest.fail(f"AGCORE_LLAMA_SERVER names {binary}, which is not there", pytrace=False)
        pytest.skip(
            "llama.cpp's llama-server is not built; `make test-llama-server` builds it "
            "(opt-in: a build of about 21 CPU-minutes, once)"
        )
    template = binary.with_name(LLAMACPP_TOOL_TEMPLATE)
    if tool_template and not template.is_file():
        pytest.fail(
            f"{template} is missing beside the binary; `make llama-server` puts it there",
            pytrace=False,
        )
    model = model_path()
    if not model.is_file():
        _unavailable(f"the test model {model} is missing")
    chat_template = ["--chat-template-file", str(template)] if tool_template else []
    # llama-cpp-python's default (half the CPUs). Its own, all of them, spin-waits: on a
    # shared 2-core machine that made it ten times slower (about 4 tokens/s, not 45).
    threads = max(1, (os.cpu_count() or 2) // 2)
    # A request without max_tokens (the docs' snippets send none) would otherwise run to
    # the end of the context (about 40 s a turn here): 256 tokens, as a deployment would.
    predict = 256

    def command(port: int) -> list[str]:
        return [
            str(binary), "--model", str(model), "--jinja", *chat_template,
            "--host", "127.0.0.1", "--port", str(port), "--ctx-size", str(n_ctx),
            "--parallel", "1", "--threads", str(threads), "--n-predict", str(predict),
            "--no-webui", "--offline", "--log-colors", "off",
        ]  # fmt: skip

    url, output, process = _start("llama-server", command(0), ready_line=_LLAMACPP_READY)
    return RealServer(
        "llama-server", f"{url}/v1", str(model), (output, process), command, ready=_LLAMACPP_READY
    )


def start_litellm_proxy(backend: RealServer, directory: Path) -> RealServer:
    """Start LiteLLM's proxy on a free port in front of ``backend``, and wait (bounded)
    until it serves. Its config goes in ``directory``; the master key is random, passed
    in the environment only, and masked in the output kept for failure messages.

    The backend is declared as provider ``llamafile/`` (an OpenAI-compatible local
    server): the proxy then answers ``/v1/responses`` through its Responses-to-Chat
    bridge, where ``openai/`` would forward to a ``/v1/responses`` the backend lacks."""
    command = litellm_path()
    if not command.is_file():
        _unavailable(f"LiteLLM's proxy {command} is not installed")
    config = directory / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: smollm\n"
        "    litellm_params:\n"
        "      model: llamafile/smollm\n"
        f"      api_base: {backend.base_url}\n"
        "      api_key: not-needed\n"
        # Any other model name (the docs' snippets ask for gpt-4o-mini) goes there too.
        '  - model_name: "*"\n'
        "    litellm_params:\n"
        "      model: llamafile/smollm\n"
        f"      api_base: {backend.base_url}\n"
        "      api_key: not-needed\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
        "  num_retries: 0\n"  # a failure is the answer under test, not a reason to retry
        "router_settings:\n"
        "  disable_cooldowns: true\n"  # or one 500 takes the only deployment away
    )
    key = f"sk-{secrets.token_urlsafe(24)}"
    # LITELLM_LOCAL_MODEL_COST_MAP: use the cost map in the package, not one from the web.
    env = {**os.environ, "LITELLM_MASTER_KEY": key, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def arguments(port: int) -> list[str]:
        return [str(command), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]

    url, output, process = _start("litellm", arguments(0), env, secret=key)
    return RealServer(
        "litellm", f"{url}/v1", "smollm", (output, process), arguments, env, key, api_key=key
    )


def _start(
    name: str,
    command: list[str],
    env: dict[str, str] | None = None,
    secret: str = "",
    ready_line: re.Pattern[str] = _READY,
) -> tuple[str, list[str], subprocess.Popen[str]]:
    """Run a server and wait (bounded) for the URL it says it serves on (``ready_line``,
    uvicorn's by default); its output, with ``secret`` masked, is kept for failure
    messages."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env
    )
    output: list[str] = []
    ready = threading.Event()
    found: list[str] = []

    def drain() -> None:
        # Reads until the child exits, so its pipe never fills and blocks it.
        assert process.stdout is not None
        for line in process.stdout:
            if secret:
                line = line.replace(secret, "***")
            output.append(line[:300])
            if not found and (match := ready_line.search(line)):
                found.append(match.group(1))
                ready.set()
        ready.set()  # exited: wake the waiter, which then finds no URL

    threading.Thread(target=drain, name=f"{name}-output", daemon=True).start()
    if not ready.wait(_START_TIMEOUT) or not found:
        _stop(process)
        tail = "".join(output[-20:])
        pytest.fail(
            f"{name} did not start within {_START_TIMEOUT:.0f} s "
            f"(exit code {process.poll()}):\n{tail}",
            pytrace=False,
        )
    return found[0], output, process


_TAIL_LINES = 20
_DEATH_WAIT = 2.0  # after a failed test: a server killed mid-request may still be exiting
_SUPERVISED: list[RealServer] = []
_CALL_FAILED = pytest.StashKey[bool]()


@contextmanager
def supervised(server: RealServer) -> Iterator[RealServer]:
    """Watch ``server`` for the tests that run while it is open, and stop it at the end.

    A server that dies is reported with its exit status and last lines by the test during
    which it died (at teardown) or, if it died between tests, by the next one (at setup),
    instead of every later test failing with "Connection error". It is then started again
    on the same port for the tests that follow.
    """
    _SUPERVISED.append(server)
    try:
        yield server
    finally:
        if server in _SUPERVISED:  # _report_deaths drops one it could not start again
            _SUPERVISED.remove(server)
        server.stop()


def _report_deaths(wait: float) -> None:
    reports = []
    for server in list(_SUPERVISED):
        if (report := server.death(wait)) is None:
            continue
        try:
            server.restart()
        except (Exception, pytest.fail.Exception) as exc:
            report += f"\nstarting it again failed too: {exc}"
            _SUPERVISED.remove(server)  # the fixtures' own teardown still stops it
        else:
            report += "\nIt was started again on the same port for the tests that follow."
        reports.append(report)
    if reports:
        pytest.fail("\n\n".join(reports), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_CALL_FAILED] = True
    return report


@pytest.fixture(autouse=True)
def _real_servers_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """Report a supervised server that died, with its exit status, and start it again."""
    _report_deaths(wait=0.0)
    yield
    _report_deaths(wait=_DEATH_WAIT if request.node.stash.get(_CALL_FAILED, False) else 0.0)


@pytest.fixture(scope="session")
def llama_server() -> Iterator[RealServer]:
    """llama-cpp-python's OpenAI-compatible server on SmolLM2-135M, on a free port."""
    with supervised(start_llama_server()) as server:
        yield server


@pytest.fixture
async def llama_client(llama_server: RealServer) -> AsyncIterator[Any]:
    """A real ``AsyncOpenAI`` client for the llama server, closed after the test."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(
        base_url=llama_server.base_url, api_key="not-needed", timeout=60.0, max_retries=0
    )
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="session")
def llamacpp_server() -> Iterator[RealServer]:
    """llama.cpp's own ``llama-server`` (``--jinja``) on SmolLM2-135M, on a free port;
    opt-in (``make test-llama-server``)."""
    with supervised(start_llamacpp_server()) as server:
        yield server


@pytest.fixture
async def llamacpp_client(llamacpp_server: RealServer) -> AsyncIterator[Any]:
    """A real ``AsyncOpenAI`` client for ``llama-server``, closed after the test."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(
        base_url=llamacpp_server.base_url, api_key="not-needed", timeout=60.0, max_retries=0
    )
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="session")
def litellm_proxy(
    llama_server: RealServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealServer]:
    """LiteLLM's proxy in front of ``llama_server``, on a free port."""
    with supervised(
        start_litellm_proxy(llama_server, tmp_path_factory.mktemp("litellm"))
    ) as server:
        yield server


@pytest.fixture
async def litellm_client(litellm_proxy: RealServer) -> AsyncIterator[Any]:
    """A real ``AsyncOpenAI`` client for the LiteLLM proxy, closed after the test."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(
        base_url=litellm_proxy.base_url, api_key=litellm_proxy.api_key, timeout=60.0, max_retries=0
    )
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def tools() -> ToolRegistry:
    """Two small tools; ``tools.runs`` records every call with its validated arguments."""
    registry = ToolRegistry()
    runs: list[tuple[str, dict[str, Any]]] = []
    registry.runs = runs  # type: ignore[attr-defined]

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        runs.append(("add", {"a": a, "b": b}))
        return a + b

    @registry.tool
    def get_weather(city: str) -> dict[str, Any]:
        """The current weather in a city."""
        runs.append(("get_weather", {"city": city}))
        return {"city": city, "celsius": 18, "sky": "light rain"}

    return registry
