"""The stdio transport: one server child process, its three pipes and its process group.

Written here rather than taken from ``mcp.client.stdio`` because the client needs
what that one keeps to itself: the child's pid and exit code (for error messages and
for ending the process group even when the child exits on its own), and its stderr
as a pipe the client drains into ``logging``. The framing (``_framing.py``) is the
SDK's: one JSON-RPC message per line, parsed with ``mcp_types.jsonrpc_message_adapter``.

Shutdown follows the MCP lifecycle for stdio: close the child's stdin, wait, SIGTERM,
wait, SIGKILL; then whatever is left in the child's process group gets the same
treatment. Every wait is bounded. A stopped child (SIGSTOP) gets SIGTERM and SIGCONT
at once: it could not see its stdin close.

The child's own exit ends the connection, not the end of its stdout: a process it
started may hold the pipes open long after (a wrapper script that died during
start-up). Once the child has exited and what it wrote has been read, the client stops
reading, and start-up or the calls in flight fail at once with its exit code.

While the ``server/discover`` probe goes unanswered, a ``ping`` follows it each second
(:func:`nudge_probe`): a server on an old MCP Python SDK (chroma-mcp pins 1.6.0) has
then already failed on the probe, but exits only once another line reaches it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..error import McpError
from ._framing import LineReader, LineWriter
from ._matching import PendingIds
from ._protocol import PROBE
from ._stderr import StderrLog, transport_secrets
from .transport import StdioTransport, split_command_hint

if TYPE_CHECKING:
    from anyio.abc import Process
    from mcp.client._transport import TransportStreams

__all__ = ["ChildProcess", "group_members", "open_stdio", "wait_exited"]

logger = logging.getLogger("agcore_tools.mcp")

_POLL = 0.01
_EXIT_DRAIN = 0.5
"""Seconds to read what an exited child wrote, while a process it started holds stdout."""
# Seconds each stop step waits for a child that never completed its start-up.
_ABANDON_GRACE = 0.1
NUDGE_EVERY = 1.0
"""Seconds between the pings that follow an unanswered probe."""
_NUDGES = 9  # the SDK waits 10 s for the probe's answer


@dataclass(slots=True)
class ChildProcess:
    """What the client knows about a running stdio server."""

    pid: int
    """The child's pid; also its process group id (it starts a new session)."""
    stderr: StderrLog
    """Its stderr reader, which keeps the first and last lines."""
    process: Process | None = field(default=None, repr=False)
    """The anyio process handle while it runs."""
    reader: LineReader | None = field(default=None, repr=False)
    """The reader of its stdout."""
    stop_signal: signal.Signals | None = None
    """The first signal the client sent it to stop it, if any."""

    @property
    def returncode(self) -> int | None:
        """The exit code once the child has exited (negative: killed by that signal)."""
        return self.process.returncode if self.process is not None else None

    def exit_text(self) -> str:
        """How it ended, for messages: ``exited with code 1``, ``was killed by signal 9``.

        A child killed by the client's own signal while it still ran is described by
        what it did before: the signal says only how the client stopped it.
        """
        code = self.returncode
        if code is not None and code < 0:
            if self.stop_signal is not None:
                reader = self.reader
                did = (
                    "closed its stdout"
                    if reader is not None and reader.eof
                    else "stopped answering"
                )
                return f"{did} and was stopped by the client ({_signal_name(-code)})"
            return f"was killed by signal {-code}"
        return f"exited with code {code}"


@asynccontextmanager
async def open_stdio(
    transport: StdioTransport,
    server_name: str,
    on_spawn: Callable[[ChildProcess], None],
    abandoned: Callable[[], bool] = lambda: False,
) -> AsyncIterator[TransportStreams]:
    """Start the child and yield the (read, write) message streams the MCP session uses.

    ``on_spawn`` receives the :class:`ChildProcess` as soon as the child exists.
    ``abandoned`` tells, at close, whether the child never finished its start-up: such a
    child gets no graceful grace period, so a start-up timeout stays close to the
    client's timeout.
    """
    import anyio
    from mcp.client.stdio import get_default_environment

    env = get_default_environment()
    env.update(transport.env or {})
    try:
        process = await anyio.open_process(
            [transport.command, *transport.args],
            env=env,
            cwd=transport.cwd,
            start_new_session=True,  # its own process group, so close() can end all of it
        )
    except OSError as exc:
        reason = exc.strerror or str(exc)
        cwd = transport.cwd
        if cwd is not None and exc.filename is not None and str(exc.filename) == str(cwd):
            # Its "No such file or directory" would read as the command's.
            reason = f"its working directory {str(cwd)!r}: {reason}"
        elif isinstance(exc, FileNotFoundError):
            reason += split_command_hint(transport)  # "npx -y server" given as the command
        raise McpError(server_name, f"cannot start {transport.describe()}: {reason}") from exc
    # No awaits between the spawn and the task group: a cancellation there would leak the child.
    assert process.stdin is not None and process.stdout is not None
    where = f"MCP server '{server_name}'"
    pending = PendingIds(where)
    secrets = transport_secrets(transport)
    read_stream = LineReader(process.stdout, pending, where, transport.max_message_size, secrets)
    write_stream = LineWriter(process.stdin, process.stdout, pending)
    child = ChildProcess(process.pid, StderrLog(server_name, secrets), process, read_stream)
    on_spawn(child)
    exit_watch = _exit_watch(process)
    stderr_done = anyio.Event()

    async def pump_stderr() -> None:
        assert process.stderr is not None
        try:
            await child.stderr.pump(process.stderr)
        finally:
            stderr_done.set()

    async def end_on_exit() -> None:
        assert process.stdout is not None
        await _exited(process, exit_watch)
        # What the child wrote before it exited is still read (bounded: a process it
        # started may hold stdout open); then reading stops, and the session with it.
        with anyio.move_on_after(_EXIT_DRAIN):
            await read_stream.ended.wait()
        if not read_stream.ended.is_set():
            logger.info(
                "[%s] %s; a process it started still holds its stdout",
                server_name,
                child.exit_text(),
            )
            await process.stdout.aclose()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_stderr)
            tg.start_soon(end_on_exit)
            tg.start_soon(nudge_probe, write_stream, pending)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    await write_stream.aclose()
                    await read_stream.aclose()
                    grace = _ABANDON_GRACE if abandoned() else transport.stop_grace
                    await _stop(child, process, server_name, min(grace, transport.stop_grace))
                    # Let the reader take the child's last words (they go into error messages).
                    with anyio.move_on_after(0.5):
                        await stderr_done.wait()
                tg.cancel_scope.cancel()
    finally:
        if exit_watch is not None:
            os.close(exit_watch)
        await _aclose_process(process)


async def nudge_probe(writer: LineWriter, pending: PendingIds) -> None:
    """Follow an unanswered ``server/discover`` probe with a ``ping`` each second.

    Why: a server on an old MCP Python SDK (chroma-mcp pins 1.6.0) fails on the probe,
    a method it cannot validate, but its stdin reader thread is blocked on the next
    line, so the process neither answers nor exits, and the SDK waits 10 s
    (``DISCOVER_TIMEOUT_SECONDS``) before it sends ``initialize``. A line makes it exit
    (code 1, naming the probe on stderr), and the client starts it again with
    ``initialize`` alone (see ``_handshake``) about a second in. A ping is the request
    servers of most SDKs answer before the handshake; whatever comes back for it, an
    answer or an error, is dropped by the framing (``PendingIds.own``). A server that
    answers the probe within a second never sees one; a slow one answers the pings it
    was sent (some Python SDK 1.x releases with an error, and a line on stderr each).
    """
    import anyio

    await writer.probing.wait()
    for number in range(1, _NUDGES + 1):
        await anyio.sleep(NUDGE_EVERY)
        if PROBE not in pending.waiting():
            return
        logger.debug("the server/discover probe is unanswered after %d s; pinging", number)
        await writer.nudge(number)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _exit_watch(process: Process) -> int | None:
    """A pidfd of the child, readable once it has exited (Linux), or None."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:  # pragma: no cover - not Linux
        return None
    try:
        fd: int = pidfd_open(process.pid)
    except OSError:  # already exited and reaped, or a kernel before 5.3
        return None
    return fd


async def _exited(process: Process, watch: int | None) -> None:
    """Return once the child has exited and its exit code is known.

    Not ``process.wait()``: on Python 3.11+ that also waits for the pipes to close.
    """
    import anyio

    if watch is not None and process.returncode is None:
        await anyio.wait_readable(watch)
    # The event loop reaps the child (and learns its code) just after it exits; without
    # a pidfd, this polling is all there is.
    while process.returncode is None:  # noqa: ASYNC110 - no event signals the reaping
        await anyio.sleep(_POLL)


async def _stop(child: ChildProcess, process: Process, server_name: str, grace: float) -> None:
    """Close stdin, then SIGTERM, then SIGKILL; then the same for the rest of the group."""
    import anyio

    pgid = process.pid
    # A stopped child (SIGSTOP, a debugger) reads nothing and handles no signal until
    # it is continued: it gets SIGTERM and SIGCONT at once, as systemd does, rather
    # than a grace period for an end of stdin it cannot see.
    stopped = _is_stopped(pgid)
    if process.stdin is not None:
        # Bounded: closing flushes what is buffered, which a child that stopped reading
        # would never take.
        with anyio.move_on_after(0 if stopped else grace):
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()
    if stopped or not await wait_exited(process, grace):
        logger.info(
            "[%s] %s; sending SIGTERM",
            server_name,
            "is stopped" if stopped else "did not exit after stdin closed",
        )
        child.stop_signal = signal.SIGTERM
        _signal_group(pgid, signal.SIGTERM)
        if stopped:
            _signal_group(pgid, signal.SIGCONT)
        if not await wait_exited(process, grace):
            logger.warning("[%s] ignored SIGTERM; sending SIGKILL", server_name)
            _signal_group(pgid, signal.SIGKILL)
            if not await wait_exited(process, grace):
                logger.error("[%s] pid %d survived SIGKILL; abandoning it", server_name, pgid)
    # The child is gone, but processes it started may live on in its group (npx leaves
    # node behind when killed). They get the same escalation.
    if await _members(pgid):
        _signal_group(pgid, signal.SIGTERM)
        if not await _group_gone(pgid, grace):
            _signal_group(pgid, signal.SIGKILL)
            if not await _group_gone(pgid, grace):
                logger.error("[%s] process group %d survived SIGKILL", server_name, pgid)


async def wait_exited(process: Process, seconds: float) -> bool:
    """True once ``process`` has exited, waiting at most ``seconds`` for it."""
    # Polls returncode rather than awaiting process.wait(): on Python 3.11+ that also
    # waits for the pipes to close, which a grandchild holding them can delay forever.
    import anyio

    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - no event signals the exit alone
            await anyio.sleep(_POLL)
    return process.returncode is not None


async def _group_gone(pgid: int, seconds: float) -> bool:
    import anyio

    with anyio.move_on_after(seconds):
        while await _members(pgid):  # noqa: ASYNC110 - nothing signals a group's end
            await anyio.sleep(_POLL)
    return not await _members(pgid)


async def _members(pgid: int) -> list[int]:
    # Reading /proc is many small syscalls: off the event loop.
    import anyio.to_thread

    return await anyio.to_thread.run_sync(group_members, pgid)


def _is_stopped(pid: int) -> bool:
    """True if the process is stopped by a signal or traced (Linux's ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read()
    except OSError:  # gone, or not Linux
        return False
    return fields[fields.rfind(b")") + 2 : fields.rfind(b")") + 3] in (b"T", b"t")


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    if sys.platform == "win32":  # pragma: no cover - the SDK's Job Objects would be needed
        return
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass
    except PermissionError as exc:
        logger.warning("cannot signal process group %d: %s", pgid, exc)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``.

    On Linux this reads ``/proc``, so zombies (which a container's init may never reap)
    don't count. Elsewhere it falls back to probing the group with signal 0.

    Example:
        >>> group_members(os.getpgrp()) != []
        True
    """
    if sys.platform == "win32":  # pragma: no cover
        return []
    try:
        entries = os.listdir("/proc")
    except OSError:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesised command: state, ppid, pgrp, ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(entry))
    return members


async def _aclose_process(process: Process) -> None:
    """Release the pipes and reap the child (already stopped by :func:`_stop`).

    anyio's ``aclose()`` also closes the pipe transports, so a grandchild that still
    holds a pipe cannot keep the subprocess transport alive past the event loop; if
    the wait runs out, it closes the transport itself (which kills the child).
    """
    import anyio

    with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
        await process.aclose()
