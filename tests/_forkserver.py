"""Start the tests' HTTP server scripts by forking a process that has already imported
the MCP SDK, uvicorn and Starlette, instead of starting a new Python each time.

Why: the suite starts about 250 HTTP test servers (``fault_server.py``,
``fixture_server.py --http-fd``, ``task_server.py``, ``oauth_server.py``), and each
new Python spent about 0.7 s of CPU importing the SDK before serving: some 200 CPU-s
of a 2-core machine's ``make test``. A child forked from this module's server process
(a "forkserver", as ``multiprocessing`` calls it) runs the same script with the same
arguments, environment, working directory, standard streams and inherited sockets,
and serves real HTTP as before; only the imports are already done.

It is for test servers started here, never for what the library itself starts: a
stdio server an :class:`~agcore_tools.McpClient` spawns is a real ``Popen``, since how
the library starts, watches and stops it is what those tests check.

Two halves in one file. :func:`spawn` (the test's side) returns a
:class:`ForkedProcess`, which answers the few ``subprocess.Popen`` calls the fixtures
make (``pid``, ``poll``, ``wait``, ``kill``, ``terminate``). ``python _forkserver.py``
(the server's side) reads requests on a socket pair, forks, and reports each child's
exit status on a socket of that child's own, which is how ``wait`` learns it (only the
parent can reap a child). The server ends, killing what it started, when the test
process closes its end or dies.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

MCP_SERVERS = (
    "mcp.server.mcpserver",
    "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager",
    "mcp.server.auth.provider",
    "mcp.server.auth.settings",
    "mcp.server.extension",
    "mcp.shared.auth",
    "mcp_types",
    "anyio",
    "uvicorn",
    "uvicorn.config",
    "uvicorn.server",
    "uvicorn.lifespan.on",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto",
    "starlette.applications",
    "starlette.routing",
    "sse_starlette",
)
"""What the MCP server scripts import from outside their folder."""

TEMPORAL_WORKERS = (
    "temporalio.client",
    "temporalio.worker",
    "openai",
    "agcore_tools",
    "agcore_tools.temporal",
)
"""What ``tests/temporal/worker_process.py`` imports (1.2 s of CPU, 35 times a run)."""

DOC_SNIPPETS = ("openai", "agcore_tools", "agcore_tools.mcp", "mcp.client", "mcp_types")
"""What the documents' code blocks import (``tests/test_docs_snippets.py``)."""

_HIGH_FD = 200
"""Where a child parks the descriptors it was sent before moving them into place."""


class ForkedProcess:
    """A forked test server, with the part of ``subprocess.Popen``'s API the fixtures use.

    ``pid`` is the server's own process id (``os.kill`` works on it: SIGSTOP freezes it);
    its exit status comes from the forkserver, its parent, over ``status``.
    """

    def __init__(self, pid: int, status: socket.socket, received: bytes) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._status = status
        self._received = received  # what came after the pid: the status, if it has

    def poll(self) -> int | None:
        if self.returncode is None:
            self._status.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._status.setblocking(True)
            self._status.settimeout(timeout)
            try:
                self._read_status()
            except TimeoutError:
                raise subprocess.TimeoutExpired(
                    ["forked server", str(self.pid)], timeout or 0
                ) from None
        assert self.returncode is not None
        return self.returncode

    def _read_status(self) -> None:
        data = self._received or self._status.recv(64)
        # Nothing: the forkserver ended without reporting (the test process is ending).
        self.returncode = int(data) if data else -signal.SIGKILL
        self._status.close()

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Forkserver:
    """The test process's handle on a forkserver that imported ``preload``, started on
    first use."""

    def __init__(self, preload: tuple[str, ...]) -> None:
        self.preload = preload
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._proc = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno()), *self.preload],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        ours.settimeout(60)
        if ours.recv(16) != b"ready\n":  # its imports done, or its failure on stderr
            raise RuntimeError("the test servers' forkserver failed to start")
        self._control = ours
        atexit.register(self.stop)
        return ours

    def spawn(
        self,
        argv: list[str],
        pass_fds: tuple[int, ...],
        env: dict[str, str] | None,
        streams: tuple[int | None, int, int],
        cwd: str | None,
    ) -> ForkedProcess:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        opened = []
        stdin, stdout, stderr = streams
        if stdin is None:
            opened.append(os.open(os.devnull, os.O_RDONLY))
            stdin = opened[-1]
        request = {
            "argv": argv,
            "env": dict(os.environ if env is None else env),
            "cwd": cwd or os.getcwd(),
            "targets": [0, 1, 2, *pass_fds],
        }
        try:
            with self._lock:
                control = self._control or self._start()
                socket.send_fds(
                    control,
                    [json.dumps(request).encode() + b"\n"],
                    [theirs.fileno(), stdin, stdout, stderr, *pass_fds],
                )
        finally:
            theirs.close()
            for fd in opened:
                os.close(fd)
        ours.settimeout(60)
        answer = b""
        while b"\n" not in answer and (more := ours.recv(64)):
            answer += more
        pid, _, rest = answer.partition(b"\n")
        if not pid.startswith(b"pid "):
            raise RuntimeError(f"the forkserver did not start {argv[1]}: {answer!r}")
        return ForkedProcess(int(pid.split()[1]), ours, rest)

    def stop(self) -> None:
        with self._lock:
            if self._control is not None:
                self._control.close()  # it kills what it started, and ends
                self._control = None
            if self._proc is not None:
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(10)
                self._proc = None


FORKSERVERS = {p: _Forkserver(p) for p in (MCP_SERVERS, TEMPORAL_WORKERS, DOC_SNIPPETS)}


def spawn(
    argv: list[str],
    *,
    pass_fds: tuple[int, ...] | list[int] = (),
    env: dict[str, str] | None = None,
    stdout: int = 1,
    stderr: int = 2,
    cwd: str | os.PathLike[str] | None = None,
    preload: tuple[str, ...] = MCP_SERVERS,
) -> ForkedProcess:
    """Run ``argv`` (``[sys.executable, script, *args]``) as ``subprocess.Popen`` would,
    in a child forked from the forkserver that imported ``preload`` (one of this
    module's tuples); ``pass_fds`` keep their numbers in it.

    Its stdin is ``/dev/null``; its stdout and stderr are this process's (pytest's
    capture included), as a ``Popen`` child inherits them, unless given as descriptors.
    """
    if argv[0] != sys.executable or len(argv) < 2:
        raise ValueError(f"the forkserver runs scripts with this Python only: {argv!r}")
    forkserver = FORKSERVERS[preload]
    streams = (None, stdout, stderr)
    return forkserver.spawn(list(argv), tuple(pass_fds), env, streams, cwd and os.fspath(cwd))


def run(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | os.PathLike[str],
    timeout: float,
    preload: tuple[str, ...],
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=...)``, forked."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        proc = spawn(argv, env=env, stdout=out_write, stderr=err_write, cwd=cwd, preload=preload)
    finally:
        os.close(out_write)
        os.close(err_write)
    received: dict[int, bytearray] = {out_read: bytearray(), err_read: bytearray()}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for fd in received:
            selector.register(fd, selectors.EVENT_READ)
        try:
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    proc.kill()
                    proc.wait(10)
                    raise subprocess.TimeoutExpired(argv, timeout, bytes(received[out_read]))
                for key, _ in selector.select(left):
                    if data := os.read(key.fd, 1 << 16):
                        received[key.fd] += data
                    else:
                        selector.unregister(key.fd)
        finally:
            for fd in received:
                os.close(fd)
        code = proc.wait(max(deadline - time.monotonic(), 0.1))

    def text(data: bytearray) -> str:  # as text=True decodes: universal newlines
        return io.TextIOWrapper(io.BytesIO(bytes(data))).read()

    return subprocess.CompletedProcess(
        argv, code, text(received[out_read]), text(received[err_read])
    )


def forkserver_pids() -> set[int]:
    """The forkservers running (their children are the test servers)."""
    return {pid for server in FORKSERVERS.values() if (pid := server.pid) is not None}


# -- the forkserver ------------------------------------------------------------------


def _child(request: dict[str, Any], fds: list[int], keep_closed: list[int]) -> int:
    """In the forked child: take the request's streams and sockets, then run its script."""
    import runpy
    import traceback

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parked = [os.dup2(fd, _HIGH_FD + i) for i, fd in enumerate(fds)]
    for fd in {*fds, *keep_closed}:
        with contextlib.suppress(OSError):
            os.close(fd)
    for parked_fd, target in zip(parked, request["targets"], strict=True):
        os.dup2(parked_fd, target)
    for parked_fd in parked:
        os.close(parked_fd)
    os.environ.clear()
    os.environ.update(request["env"])
    # As Python's start-up reads PYTHONPATH (the forkserver read the test process's).
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [p for p in extra if p not in sys.path]
    os.chdir(request["cwd"])
    script = request["argv"][1]
    sys.argv = request["argv"][1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    # What a normal exit does before the process ends: join the threads, run the atexit
    # functions, and collect what is left (finalizers that warn of unclosed objects).
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _serve(control: socket.socket, preload: list[str]) -> None:
    for name in preload:
        with contextlib.suppress(ImportError):
            __import__(name)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the test process decides when to end
    statuses: dict[int, socket.socket] = {}
    selector = selectors.EpollSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    control.sendall(b"ready\n")
    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj == wake_read:
                    os.read(wake_read, 512)
                    _reap(statuses)
                    continue
                # A sequenced-packet socket: one request, whole, with its descriptors.
                line, fds, _, _ = socket.recv_fds(control, 1 << 20, 32)
                if not line:
                    return
                status = socket.socket(fileno=fds[0])
                pid = os.fork()
                if pid == 0:
                    keep_closed = [control.fileno(), selector.fileno(), wake_read, wake_write]
                    keep_closed += [s.fileno() for s in statuses.values()]
                    os._exit(_child(json.loads(line), fds[1:], [fds[0], *keep_closed]))
                for fd in fds[1:]:
                    os.close(fd)
                status.sendall(f"pid {pid}\n".encode())
                statuses[pid] = status
                _reap(statuses)
    finally:
        for pid in statuses:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while statuses and time.monotonic() < deadline:
            _reap(statuses)
            time.sleep(0.01)


def _reap(statuses: dict[int, socket.socket]) -> None:
    while statuses:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock = statuses.pop(pid, None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.sendall(str(os.waitstatus_to_exitcode(status)).encode())
            sock.close()


if __name__ == "__main__":
    del sys.path[0]  # tests/, whose mcp/ package would hide the SDK
    _serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2:])
