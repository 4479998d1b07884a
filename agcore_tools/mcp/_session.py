"""The session behind an :class:`~agcore_tools.McpClient`: its connection, the event loop
it is bound to, and restarts after the connection is lost.

One :class:`Session` per client. It starts and replaces :class:`Connection` objects
(``connect()``, restarts under :class:`~agcore_tools.McpRecovery`, ``close()``),
refuses requests from an event loop other than the connection's, and sends every
request through ``_sending``: ``tools/call`` (the hot path, :meth:`Session.call_tool`)
and the rest of the protocol (:meth:`Session.send`), with the client's timeout, error
translation (see ``_recover``) and recovery. The tool list is not its business: a
:class:`ToolListing` (the tool cache) is told when a connection starts and when the
list may have changed. The names of ``_sending`` the other modules use (``BACKSTOP``,
``GRACE``, ``Meta``, ``check_timeout``) are exported here too, beside the session.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .. import _sync
from .._aio import with_timeout
from ..error import McpNotInitializedError, McpTimeoutError, ToolError
from . import _handshake, _sending
from ._connection import ClientSettings, Connection
from ._error_text import quoted
from ._recover import noted
from ._restarts import Circuit, RestartBudget
from ._sending import BACKSTOP, GRACE, Meta, check_timeout
from ._state import State
from ._stderr import SentSecrets
from ._unclosed import Tracked, watch, weak_method

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["BACKSTOP", "GRACE", "Meta", "Session", "ToolListing", "check_timeout"]

logger = logging.getLogger("agcore_tools.mcp")

T = TypeVar("T")


class ToolListing(Protocol):
    """What the session tells the tool cache, and asks of it."""

    def invalidate(self, reason: str | None) -> None:
        """The tool list may have changed (``reason`` is logged; None: silently)."""
        ...

    async def prime(self, conn: Connection) -> None:
        """A connection has just started: list its tools by the deadline of its start
        (``conn.deadline``); failures raise."""
        ...

    def new_loop(self) -> None:
        """The session moved to another event loop: locks of the old one are useless."""
        ...

    def safe_to_repeat(self, tool_name: str) -> bool:
        """Whether the tool's annotations say calling it twice does no harm."""
        ...


class Session:
    """The connection of one client, the loop it lives in, its restarts, and sending.

    A client (``settings``) garbage-collected unclosed has its connection stopped (see
    ``_unclosed``).

    Example:
        >>> from agcore_tools import McpClient, StdioTransport
        >>> session = Session(McpClient("demo", StdioTransport("server")))
        >>> session.connected, session.conn is None
        (False, True)
    """

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        """The client's settings (read when needed)."""
        self.tools: ToolListing | None = None
        """The tool cache to tell about new connections and tool list changes."""
        self.conn: Connection | None = None
        """The current connection (None before connect and after close)."""
        self.failed: Connection | None = None
        """The last connection that failed to start, kept for its stderr tail."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The event loop the connection lives in (an MCP session cannot leave it)."""
        self.owner_pid: int | None = None
        """The id of the process whose loop :attr:`loop` is (a forked child's id differs)."""
        self.budget = RestartBudget()
        """The restarts counted against the recovery policy (a circuit breaker)."""
        self.secrets = SentSecrets(settings.transport)
        """The transport's secrets and the credentials the requests of every connection
        carried (kept across restarts): masked in what the server sends back."""
        self.opened = False
        """Whether the app asked for a connection and has not closed it since: a
        request without one is then the server's failure, else the app's mistake."""
        self.started_once = False
        """Whether a connection's start ended, ready or failed by the server, since the
        client was made, last closed or moved to another event loop: a request while
        one starts is then the server's failure (a restart, or a server that failed to
        start tried again), else the app's mistake (a call before its first
        ``connect()`` ended)."""
        self.chosen_log_level: str | None = None
        """The level the last ``set_log_level()`` chose, asked for again by each new
        handshake-era connection (which starts at the server's default)."""
        self._connect_lock = asyncio.Lock()
        self.level_lock = asyncio.Lock()
        """Held while ``logging/setLevel`` is sent: by ``set_log_level()``, and by each
        connection's re-send of the chosen level (see _log_restore)."""
        # The restarts waiting out their backoff: close() wakes them, so a caller
        # waiting for a restart learns of the close at once, not after the backoff.
        self._backoffs: set[asyncio.Future[None]] = set()
        # Restarts run in tasks of their own, which a caller leaves at its deadline;
        # close() waits for them.
        self._restarting: set[asyncio.Task[Connection]] = set()
        self._tracked = Tracked()
        watch(settings, self._tracked, settings.server_name)

    @property
    def server_name(self) -> str:
        """The server's name, for messages."""
        return self.settings.server_name

    @property
    def connected(self) -> bool:
        """True while requests can be sent."""
        conn = self.conn
        return conn is not None and conn.usable

    @property
    def client(self) -> Client | None:
        """The SDK client of the current connection, while it has one."""
        conn = self.conn
        return conn.client if conn is not None else None

    # -- connecting, restarting, closing -----------------------------------------------

    async def connect(self) -> None:
        """Connect, unless already connected (see :meth:`McpClient.connect`)."""
        self.use_loop("connect")
        async with self._connect_lock:
            old = self.conn
            if old is not None and old.usable:
                return
            self.budget.clear()
            await self._start_locked(restarting=False)

    async def _start_locked(self, *, restarting: bool, deadline: float | None = None) -> Connection:
        """Replace the connection with a new one (the connect lock is held); once more,
        with the ``initialize`` handshake, when the server refused to list its tools for
        want of it (see :meth:`with_handshake`). All of it by ``deadline``
        (``time.monotonic()``; default: the client's timeout from the start, see
        :meth:`Connection.start`), the tools listed and the second try included: a
        second try with a timeout of its own made ``connect()`` take twice its timeout."""
        self.opened = True
        note = ""  # what an error adds once started again for want of initialize
        while True:
            old = self.conn
            if old is not None:
                self.conn = None
                await old.stop()
            if self.secrets.transport is not self.settings.transport:  # the client got another
                self.secrets = SentSecrets(self.settings.transport)
            # A weak method: the connection's tasks must not keep the client alive.
            conn = Connection(self.settings, weak_method(self._tools_changed), self.secrets)
            conn.chosen_log_level, conn.level_lock = self.chosen_log_level, self.level_lock
            self.conn, self.failed = conn, None
            self._tracked.follow(conn, self.loop)
            try:
                await conn.start(deadline)
                deadline = conn.deadline
                if self.tools is not None:
                    self.tools.invalidate(None)
                    await self.tools.prime(conn)
            except BaseException as exc:
                said = self._wants_initialize(conn, exc) if not note else None
                if said is not None:
                    self._to_handshake(conn, "tools/list", said)
                    note = _handshake.initialize_note(said)
                    continue
                if isinstance(exc, ToolError) and self.opened:
                    # The server failed to start (not a start close() or a cancel cut
                    # off): a call while it is tried again counts against it.
                    self.started_once = True
                if self.conn is conn:
                    if restarting and isinstance(exc, ToolError):
                        # Stay lost: the next request tries again, after its backoff.
                        conn.failed_restart(exc.message)
                    else:
                        self.conn, self.failed = None, conn
                await conn.stop()
                if note and isinstance(exc, ToolError):
                    raise noted(exc, note) from exc.__cause__
                raise
            self.started_once = True
            return conn

    def _wants_initialize(self, conn: Connection, exc: BaseException) -> str | None:
        """The server's words (masked, made safe), when ``exc`` is its refusal of a
        request on ``conn`` for want of the ``initialize`` handshake."""
        if not isinstance(exc, ToolError) or exc.__cause__ is None:
            return None
        said = _handshake.wants_initialize(conn.client, exc.__cause__)
        if said is None:  # its tools listed in the 2025 shape: it takes the handshake
            said = _handshake.older_shape(conn.client, exc.__cause__)
        return None if said is None else quoted(said, conn.secrets.mask)

    def _to_handshake(self, conn: Connection, action: str, said: str) -> None:
        """Say that the server refused ``action`` on ``conn`` for want of ``initialize``
        (``said``), and have ``conn`` and the client's later connections replaced by
        ones made with it."""
        client = conn.client
        version = client.protocol_version if client is not None else "?"
        _handshake.warn_initialize(self.server_name, self.settings.transport, version, action, said)
        _handshake.remember(self.settings)
        conn.retire(f"the server asked for the initialize handshake: {said}")

    def _tools_changed(self, reason: str | None) -> None:
        if self.tools is not None:
            self.tools.invalidate(reason)

    def _replaced(self, conn: Connection, action: str, tool_name: str | None) -> Connection | None:
        """None while ``conn`` is still the client's connection; else the usable one
        another task put in its place meanwhile (a restart, a refusal's new handshake),
        or the error to raise when there is none (close() ran)."""
        current = self.conn
        if current is conn:
            return None
        if current is not None and current.usable:
            return current
        raise self.not_usable(current, tool_name, action)

    async def restart(self, conn: Connection, action: str, tool_name: str | None) -> Connection:
        """A usable connection in place of ``conn``, which was lost (see :class:`McpRecovery`)."""
        async with self._connect_lock:
            if (replaced := self._replaced(conn, action, tool_name)) is not None:
                return replaced
            policy = self.settings.recovery
            now = time.monotonic()
            if policy is None or self.budget.next_at(policy, now) > now:
                raise self.not_usable(conn, tool_name, action)
            attempt = self.budget.used(policy, now) + 1
            wait = policy.delay(attempt) - (now - conn.lost_at)
            if wait > 0:
                await self._back_off(wait)
                if self.conn is not conn:
                    raise self.not_usable(self.conn, tool_name, action)
            logger.info(
                "MCP server '%s': starting it again (restart %d of %d within %g s) after: %s",
                self.server_name,
                attempt,
                policy.max_restarts,
                policy.window,
                conn.lost_reason,
            )
            try:
                return await self._start_locked(restarting=True)
            finally:
                self.budget.spend(policy, time.monotonic())

    async def with_handshake(
        self, conn: Connection, action: str, tool_name: str | None, said: str
    ) -> Connection:
        """A connection made with the ``initialize`` handshake in place of ``conn``,
        whose server refused ``action`` for want of it (``said``, its words, masked; see
        ``_handshake.wants_initialize``). Not a restart after a failure: it is not
        counted against the recovery policy, and needs none. The client's later
        connections use the handshake too."""
        async with self._connect_lock:
            if (replaced := self._replaced(conn, action, tool_name)) is not None:
                return replaced
            self._to_handshake(conn, action, said)
            # One timeout for the wait below and the new connection's start.
            deadline = time.monotonic() + self.settings.timeout
            # The calls in flight on it get their refusals first, to send again on the
            # new one: stopped now, they would fail as if they may have run.
            await conn.watchdog.idle(self.settings.timeout)
            if self.conn is not conn:  # close() ran meanwhile: start nothing after it
                raise self.not_usable(self.conn, tool_name, action)
            return await self._start_locked(restarting=True, deadline=deadline)

    async def restart_within(
        self,
        conn: Connection,
        action: str,
        tool_name: str | None,
        started: float,
        limit: float,
        *,
        wants_initialize: str | None = None,
    ) -> Connection:
        """:meth:`restart`, waited for until ``limit`` seconds after ``started`` at most;
        or, when the server refused ``action`` for want of ``initialize``
        (``wants_initialize``, its words), :meth:`with_handshake`.

        The restart runs in a task of its own (bounded by the client's timeout, and
        ended by :meth:`close`): a caller whose time runs out raises
        :class:`McpTimeoutError` and leaves it to finish for the next request.
        """
        if wants_initialize is not None:
            work = self.with_handshake(conn, action, tool_name, wants_initialize)
        else:
            work = self.restart(conn, action, tool_name)
        task = asyncio.create_task(work)
        self._restarting.add(task)
        task.add_done_callback(self._restarting.discard)
        try:
            done, _ = await asyncio.wait(
                {task}, timeout=max(0.0, started + limit - time.monotonic())
            )
        except asyncio.CancelledError:
            task.add_done_callback(self._restart_unwatched)
            raise
        if task in done:
            if task.cancelled():  # by close(), not by this caller's own cancellation
                raise self.not_usable(self.conn, tool_name, action)
            return task.result()
        task.add_done_callback(self._restart_unwatched)
        raise McpTimeoutError(
            self.server_name,
            f"{action} timed out after {limit:g} s, waiting for the server to start again",
            tool_name=tool_name,
        )

    def _restart_unwatched(self, task: asyncio.Task[Connection]) -> None:
        """The outcome of a restart whose caller left: the next request sees it."""
        if task.cancelled():
            return
        failed = task.exception()
        if failed is not None:
            # Ended by close(), it is no news.
            level = logging.INFO if self.conn is not None else logging.DEBUG
            logger.log(level, "MCP server '%s': restart failed: %s", self.server_name, failed)

    async def _back_off(self, seconds: float) -> None:
        """Wait ``seconds``, or until :meth:`close` runs."""
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._backoffs.add(woken)
        try:
            await asyncio.wait({woken}, timeout=seconds)
        finally:
            self._backoffs.discard(woken)
            woken.cancel()

    def can_restart(self) -> bool:
        """Whether the recovery policy allows a restart now (its budget has room)."""
        policy = self.settings.recovery
        if policy is None:
            return False
        now = time.monotonic()
        return self.budget.next_at(policy, now) <= now

    @property
    def circuit(self) -> Circuit:
        """The restart circuit (see :attr:`McpClient.circuit`)."""
        conn = self.conn
        if conn is None or conn.state is not State.LOST:
            return "closed"
        policy = self.settings.recovery
        if policy is None:
            return "open"
        return self.budget.state(policy, time.monotonic())

    async def usable_connection(
        self,
        conn: Connection | None,
        action: str,
        tool_name: str | None,
        started: float,
        limit: float,
    ) -> Connection:
        """``conn`` if requests can be sent on it; else the connection that replaces it,
        waited for until ``limit`` seconds after ``started`` at most."""
        if conn is not None and conn.usable:
            return conn
        if conn is not None and self.settings.recovery is not None:
            if conn.state is State.STARTING:
                # Let the connect or restart in progress finish.
                remaining = max(0.0, started + limit - time.monotonic())
                try:
                    await with_timeout(self._connect_lock.acquire(), remaining)
                except TimeoutError as exc:
                    raise McpTimeoutError(
                        self.server_name,
                        f"{action} timed out after {limit:g} s, waiting for the connection",
                        tool_name=tool_name,
                    ) from exc
                self._connect_lock.release()
                current = self.conn
                if current is not None and current.usable:
                    return current
                conn = current
            if conn is not None and conn.state is State.LOST and self.can_restart():
                return await self.restart_within(conn, action, tool_name, started, limit)
        raise self.not_usable(conn, tool_name, action)

    async def ready(
        self, what: str, started: float | None = None, limit: float | None = None
    ) -> Connection:
        """The connection to send ``what`` on: restarted if it was lost (see
        :class:`McpRecovery`), within ``limit`` seconds of ``started`` (default: the
        client's timeout, from now), and in this event loop."""
        conn = self.conn
        if conn is None or not conn.usable:
            conn = await self.usable_connection(
                conn,
                what,
                None,
                time.monotonic() if started is None else started,
                self.settings.timeout if limit is None else limit,
            )
        if self.loop is not asyncio.get_running_loop():
            raise self.wrong_loop(what, None)
        return conn

    def require(self, what: str) -> Connection:
        """The connection to send ``what`` on, without restarting a lost one."""
        conn = self.conn
        if conn is None or not conn.usable:
            raise self.not_usable(conn, None, what)
        if self.loop is not asyncio.get_running_loop():
            raise self.wrong_loop(what, None)
        return conn

    async def close(self) -> None:
        """Close the connection (see :meth:`McpClient.close`); idempotent."""
        conn = self.conn
        self.opened = self.started_once = False
        if conn is not None and self.owner_pid not in (None, os.getpid()):
            # A forked child's copy: the connection and its server stay the parent's,
            # so the child has nothing to close (as an LlmCycle's close there).
            self.conn = None
            return
        if conn is not None and self.loop is not asyncio.get_running_loop():
            if self._alive_elsewhere(conn):
                raise self.wrong_loop("close", None)
            self.conn = None  # it ended with its event loop, or on its own
            return
        self.conn = None
        for woken in self._backoffs:
            if not woken.done():
                woken.set_result(None)
        if conn is not None:
            await conn.stop(by_app=True)
        if self._restarting:
            # A restart a caller left is past its backoff, or stopped above with the
            # connection it was starting: it ends at once.
            await asyncio.wait(set(self._restarting), timeout=GRACE)
            left = set(self._restarting)
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(left, timeout=GRACE)  # their cleanup, bounded

    # -- the event loop ----------------------------------------------------------------

    def use_loop(self, action: str) -> None:
        """Make the running loop this session's, unless a live connection belongs to another."""
        running = asyncio.get_running_loop()
        bound = self.loop
        if bound is running:
            return
        conn = self.conn
        if conn is not None and self._alive_elsewhere(conn):
            raise self.wrong_loop(action, None)
        if bound is not None:
            # A session of another loop has ended (with its loop, or on its own); the
            # locks may belong to that loop, so this one gets fresh ones; a connect in
            # this one is a first connect.
            self.conn, self.started_once = None, False
            self._connect_lock = asyncio.Lock()
            self.level_lock = asyncio.Lock()
            if self.tools is not None:
                self.tools.new_loop()
        self.loop = running
        self.owner_pid = os.getpid()

    def _alive_elsewhere(self, conn: Connection) -> bool:
        bound = self.loop
        return (
            bound is not None
            and not bound.is_closed()
            and conn.state in (State.STARTING, State.READY)
        )

    # -- errors ------------------------------------------------------------------------

    def not_usable(
        self, conn: Connection | None, tool_name: str | None, what: str | None = None
    ) -> McpNotInitializedError:
        """The error for a request that cannot be sent on ``conn``, saying why."""
        action = what or f"tools/call '{tool_name}'"
        if conn is not None and conn.state is State.LOST:
            reason = f"cannot send {action}: the connection was lost ({conn.lost_reason}); "
            policy = self.settings.recovery
            now = time.monotonic()
            retry_at = self.budget.next_at(policy, now) if policy is not None else math.inf
            if policy is not None and now < retry_at < math.inf:
                reason += (
                    f"{policy.max_restarts} restarts within {policy.window:g} s did not bring "
                    f"it back, so requests fail at once until the next restart is tried, in "
                    f"{retry_at - now:.1f} s by the first request after that (connect() "
                    "tries at once)"
                )
            elif policy is not None and retry_at == now:
                reason += "the next request starts it again"
            else:
                reason += "call connect() to start it again"
        elif conn is not None and conn.state is State.STARTING:
            reason = f"cannot send {action}: still connecting"
            # During the first connect, not awaited: the app's mistake, as a call before
            # connect() is. During a restart after the server died, or a new try after it
            # failed to start: the server's failure.
            return McpNotInitializedError(
                self.server_name, reason, tool_name=tool_name, by_caller=not self.started_once
            )
        elif conn is not None and self.loop is not None and self.loop.is_closed():
            return self.wrong_loop(action, tool_name)
        else:
            reason = f"cannot send {action}: not connected; call connect() first"
            # Never connected, or closed by the app: its mistake, not the server's. A
            # connect() that failed, or a restart under way, leaves it opened.
            by_caller = not self.opened
            return McpNotInitializedError(
                self.server_name, reason, tool_name=tool_name, by_caller=by_caller
            )
        return McpNotInitializedError(self.server_name, reason, tool_name=tool_name)

    def wrong_loop(self, action: str, tool_name: str | None) -> McpNotInitializedError:
        """The error for a request from an event loop the connection does not live in."""
        bound = self.loop
        if self.owner_pid is not None and self.owner_pid != os.getpid():
            reason = (
                f"cannot send {action}: the client was connected before this process was "
                "forked, and its connection stays the parent's; make and connect a new "
                "McpClient in this process"
            )
        elif bound is None or bound.is_closed():
            reason = (
                f"cannot send {action}: the connection was made in an event loop that has "
                "since ended (as with asyncio.run(client.connect())); connect again in this "
                "loop, or use connect_sync() and the *_sync methods, whose connection stays "
                "open on agcore_tools' own loop"
            )
        elif _sync.is_library_loop(bound):
            reason = (
                f"cannot send {action} from this event loop: the client was connected with "
                "connect_sync(), on agcore_tools' own loop, where its session must stay; use "
                "the *_sync methods"
            )
        else:
            reason = (
                f"cannot send {action} from this event loop: the client was connected in "
                "another one, where its session must stay (a *_sync method runs on "
                "agcore_tools' own loop); await it in that loop, or close() it there first"
            )
        return McpNotInitializedError(self.server_name, reason, tool_name=tool_name, by_caller=True)

    # -- sending (in _sending) ----------------------------------------------------------

    async def call_tool(
        self, name: str, args: Mapping[str, Any] | None, timeout: float | None
    ) -> Any:
        """Send ``tools/call`` and return the tool's value (see :meth:`McpClient.call_tool`
        and ``_sending.call_tool``)."""
        return await _sending.call_tool(self, name, args, timeout)

    async def send(
        self,
        what: str,
        call: Callable[[Client, Meta], Awaitable[T]],
        *,
        resend: bool = True,
    ) -> T:
        """Run ``call`` on the connected SDK client within the client's timeout, failing
        and recovering as :meth:`call_tool` does (see ``_sending.send``)."""
        return await _sending.send(self, what, call, resend=resend)
