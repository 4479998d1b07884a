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
(the server's side) reads requests on a socket pair and forks. On a socket of each
child's own it sends the child's pid with a pidfd, which signals that process and no
other even once its pid is free again, and later the child's exit status, which is how
``wait`` learns it (only the parent can reap a child). The child returns from the
forkserver's loop to the top of this file and runs its script there, so it ends as
``python script.py`` would: its uncaught exception, ``sys.exit`` and interpreter
shutdown are the interpreter's own. The forkserver ends, killing what it started, when
the test process closes its end or dies.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import io
import json
import os
import runpy
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


class ForkedProcess:
    """A forked test server, with the part of ``subprocess.Popen``'s API the fixtures use.

    ``pid`` is the server's own process id; signals go through a pidfd
    (:meth:`send_signal`), and the exit status comes from the forkserver, its parent.
    """

    def __init__(self, pid: int, pidfd: int, status: socket.socket, received: bytes) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._status = status
        self._received = received  # what came after the pid: the status, if it has

    def poll(self) -> int | None:
        if self.returncode is None:
            self._status.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and timeout is not None and timeout <= 0:
            self.poll()  # a zero timeout would make the socket non-blocking, not timed
        elif self.returncode is None:
            self._status.setblocking(True)
            self._status.settimeout(timeout)
            with contextlib.suppress(TimeoutError):
                self._read_status()
        if self.returncode is None:
            raise subprocess.TimeoutExpired(["forked", str(self.pid)], timeout or 0)
        return self.returncode

    def _read_status(self) -> None:
        data = self._received or self._status.recv(64)
        # Nothing: the forkserver ended without saying (the test process is ending).
        self.returncode = int(data) if data else -signal.SIGKILL
        self._status.close()
        os.close(self._pidfd)

    def send_signal(self, signum: int) -> None:
        """Signal the process, unless it has ended (never another that took its pid)."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # ended, not yet waited for
                signal.pidfd_send_signal(self._pidfd, signum)

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
        # What the preloaded modules read at import is the forkserver's, for every child:
        # none of the model's settings, which the documents' code blocks are run without.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_"))}
        self._proc = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno()), *self.preload],
            pass_fds=[theirs.fileno()],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        self._control = ours
        ours.settimeout(60)
        try:
            ready = ours.recv(16)
        except OSError:
            ready = b""
        if ready != b"ready\n":  # its imports done, or its failure on stderr
            self._end()
            raise RuntimeError(f"the forkserver preloading {self.preload[0]} failed to start")
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
                try:
                    socket.send_fds(
                        control,
                        [json.dumps(request).encode()],
                        [theirs.fileno(), stdin, stdout, stderr, *pass_fds],
                    )
                except OSError as exc:
                    self._end()
                    raise RuntimeError(f"the forkserver is gone: {exc}") from exc
        finally:
            theirs.close()
            for fd in opened:
                os.close(fd)
        ours.settimeout(60)
        try:
            answer, fds, _, _ = socket.recv_fds(ours, 64, 1)
            while answer and b"\n" not in answer:
                answer += ours.recv(64)
        except BaseException:
            ours.close()
            raise
        line, _, rest = answer.partition(b"\n")
        if not line.startswith(b"pid ") or len(fds) != 1:
            ours.close()
            raise RuntimeError(f"the forkserver did not start {argv[1]}: {answer!r}")
        return ForkedProcess(int(line.split()[1]), fds[0], ours, rest)

    def _end(self) -> None:
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

    def stop(self) -> None:
        with self._lock:
            self._end()


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
    received: dict[int, bytearray] = {out_read: bytearray(), err_read: bytearray()}
    try:
        proc = spawn(argv, env=env, stdout=out_write, stderr=err_write, cwd=cwd, preload=preload)
        os.close(out_write)
        os.close(err_write)
        out_write = err_write = -1
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for fd in received:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map() and (left := deadline - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    if data := os.read(key.fd, 1 << 16):
                        received[key.fd] += data
                    else:
                        selector.unregister(key.fd)
        try:
            code = proc.wait(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise subprocess.TimeoutExpired(argv, timeout, bytes(received[out_read])) from None
    finally:
        for fd in (*received, out_write, err_write):
            if fd >= 0:
                os.close(fd)

    def text(data: bytearray) -> str:  # as text=True decodes: universal newlines
        return io.TextIOWrapper(io.BytesIO(bytes(data))).read()

    return subprocess.CompletedProcess(
        argv, code, text(received[out_read]), text(received[err_read])
    )


def forkserver_pids() -> set[int]:
    """The forkservers running (their children are the test servers)."""
    return {pid for server in FORKSERVERS.values() if (pid := server.pid) is not None}


# -- the forkserver ------------------------------------------------------------------

_Job = tuple[dict[str, Any], list[int]]
"""What a forked child returns with from the forkserver's loop: its request and the
descriptors it was sent (stdin, stdout, stderr, then the sockets to pass)."""


def _serve(control: socket.socket, preload: list[str]) -> _Job | None:
    """The forkserver's loop. Returns None in the forkserver, once the test process
    has gone; returns the child's job in a forked child."""
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
    job: _Job | None = None
    try:
        while job is None:
            for key, _ in selector.select():
                if key.fileobj == wake_read:
                    os.read(wake_read, 512)
                    _reap(statuses)
                    continue
                # A sequenced-packet socket: one request, whole, with its descriptors.
                message, fds, _, _ = socket.recv_fds(control, 1 << 20, 32)
                if not message:
                    return None
                job = _fork(json.loads(message), fds, statuses)
                if job is not None:
                    break
                _reap(statuses)
        # The child: nothing of the forkserver's stays open in it.
        for sibling in statuses.values():
            sibling.close()
        statuses.clear()
        selector.close()
        control.close()
        signal.set_wakeup_fd(-1)
        os.close(wake_read)
        os.close(wake_write)
        return job
    finally:
        if job is None:  # the forkserver itself, ending: it ends what it started
            for pid in statuses:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while statuses and time.monotonic() < deadline:
                _reap(statuses)
                time.sleep(0.01)


def _fork(
    request: dict[str, Any], fds: list[int], statuses: dict[int, socket.socket]
) -> _Job | None:
    """Fork for one request: the child's job in the child, None in the forkserver
    (which answers on the request's status socket, whatever happens)."""
    status = socket.socket(fileno=fds[0])
    try:
        pid = os.fork()
    except OSError as exc:
        with contextlib.suppress(OSError):
            status.sendall(f"error: {exc}\n".encode())
        status.close()
        for fd in fds[1:]:
            os.close(fd)
        return None
    if pid == 0:
        status.close()
        return request, fds[1:]
    statuses[pid] = status  # before anything can fail: it is reaped and reported
    for fd in fds[1:]:
        os.close(fd)
    pidfd = os.pidfd_open(pid)  # not yet reaped: it is this child, alive or a zombie
    try:
        with contextlib.suppress(OSError):  # the test gave up waiting; it still ends
            socket.send_fds(status, [f"pid {pid}\n".encode()], [pidfd])
    finally:
        os.close(pidfd)
    return None


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


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """In a forked child: take the request's streams, sockets, environment, working
    directory and arguments, as a new ``python script.py`` would have them."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    targets: list[int] = request["targets"]
    # Out of the way of every target first, then into place.
    above = max([*targets, *fds]) + 1
    parked = [fcntl.fcntl(fd, fcntl.F_DUPFD, above) for fd in fds]
    for fd in fds:
        os.close(fd)
    for parked_fd, target in zip(parked, targets, strict=True):
        os.dup2(parked_fd, target)
        os.close(parked_fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    script = request["argv"][1]
    sys.argv = request["argv"][1:]
    # As Python's start-up sets them: the script's folder, then PYTHONPATH's entries.
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [os.path.dirname(os.path.abspath(script))]
    sys.path[1:1] = [p for p in extra if p not in sys.path]


if __name__ == "__main__":
    del sys.path[0]  # tests/, whose mcp/ package would hide the SDK
    job = _serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2:])
    if job is not None:
        _become(*job)
        # What the script raises ends this process as it would end `python script.py`.
        runpy.run_path(sys.argv[0], run_name="__main__")
