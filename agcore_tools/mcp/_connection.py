"""One ``connect()`` … ``close()`` lifetime of an MCP client, run by a single owner task.

The MCP SDK keeps anyio task groups and cancel scopes open for as long as a session
lives, and anyio requires a scope to be exited by the task that entered it. Entering
the session in ``connect()`` and leaving it in ``close()`` breaks as soon as those run
in different tasks ("Attempted to exit cancel scope in a different task"), which is
what applications do. So a connection gets an owner task that enters the transport and
the session, waits until it is told to stop (or the server goes away), and exits them
itself. Other tasks only send requests through the session, which is safe from any
task: requests travel over memory streams and wait on their own response slot.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .._aio import with_timeout
from .._version import __version__
from ..error import McpNotInitializedError, McpTimeoutError, ToolError
from . import _handshake, _sdklog
from ._callbacks import HANDLER_KEYWORDS, call_user, live_handlers, window
from ._elicitation import LiveQuestions
from ._exchange import EXCHANGE
from ._feeds import UpdateFeeds
from ._log_restore import needs_restore, restore_log_level
from ._ping import PROBE_TIMEOUT, AliveCheck, ping
from ._protocol import LOG_LEVELS, is_modern
from ._relisten import describe, listen_tools_changed
from ._serverlog import ServerLog
from ._startup import Startup, import_sdk
from ._state import State
from ._stderr import SentSecrets
from ._stdio import ChildProcess
from ._stream_state import NotificationStream
from ._streams import DiscoverAnswer, watch_end
from ._tool_caller import tool_caller
from ._tool_vetting import ToolListVetting
from ._watchdog import Watchdog
from .models import McpLogMessage
from .recovery import McpRecovery
from .transport import StdioTransport, StreamableHttpTransport

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    import anyio
    import anyio.abc
    from mcp import Client
    from mcp.client._transport import TransportStreams
    from mcp.client.session import (
        ElicitationFnT,
        IncomingMessage,
        ListRootsFnT,
        SamplingFnT,
    )
    from mcp_types import LoggingMessageNotificationParams, RequestParamsMeta

__all__ = ["ClientSettings", "Connection"]

logger = logging.getLogger("agcore_tools.mcp")

_CLOSE_SLACK = 5.0
"""Seconds a close may take beyond the stdio shutdown escalation's own waits."""

_EXIT_WAIT = 2.0
"""Seconds to wait for a stdio child's exit status once its stdout has ended.

The end of stdout and the exit status arrive separately (the status only once the
child is reaped), in either order. Waiting for it makes the recorded reason say what
really happened ("was killed by signal 9") instead of depending on which came first.
A child that closed stdout yet lives on costs this wait once, before it is declared lost.
"""

_GENERIC_END = "the server closed the connection"


class ClientSettings(Protocol):
    """What a connection (and the session around it) reads of the client's settings.

    :class:`~agcore_tools.McpClient` is one; they are read when needed, not copied, so
    a setting changed on the client (``on_log``, ``log_level``, ...) applies from then on.
    """

    server_name: str
    transport: StdioTransport | StreamableHttpTransport
    tools_ttl: float | None
    protocol: Literal["auto", "legacy"]
    recovery: McpRecovery | None
    sampling_handler: SamplingFnT | None
    elicitation_handler: ElicitationFnT | None
    roots_handler: ListRootsFnT | None
    on_log: Any
    on_progress: Any
    log_level: str | None
    tasks: bool

    @property
    def timeout(self) -> float:
        """Seconds for start-up and for each request."""
        ...


class Connection:
    """The owner task of one connection, and what other tasks may read from it.

    ``on_tools_changed`` is told (with the reason) when the server's tool list may have
    changed: a ``notifications/tools/list_changed``, or its stream reopened. ``secrets``
    (the client's) notes the credentials its requests carry, and masks what it reports."""

    def __init__(
        self,
        settings: ClientSettings,
        on_tools_changed: Callable[[str | None], None],
        secrets: SentSecrets,
    ) -> None:
        # Weakly: the owner task must not keep the client alive (see _unclosed).
        self._settings = weakref.ref(settings)
        self.transport = settings.transport
        """The transport this connection was opened with."""
        self._tools_changed = on_tools_changed
        self.server_name = settings.server_name
        self.state = State.STARTING
        self.client: Client | None = None
        """The SDK client, set while the connection is READY."""
        self.call_tool: Any = None
        """What sends ``tools/call`` (see :func:`tool_caller`), set with :attr:`client`."""
        self.secrets = secrets
        """What the server's log messages and errors are masked with."""
        self.log = ServerLog(settings.server_name, secrets.mask)
        """Where the server's log messages are logged (masked, escaped, cut, budgeted)."""
        # Read when a question comes: the client's timeout may change meanwhile.
        self.questions = LiveQuestions(
            settings.server_name, lambda: self.settings.timeout, self.secrets
        )
        """Questions asked on this connection (2025-11-25) with no handler to answer
        them: declined, or held for the one call that can pause (see _elicitation)."""
        self.child: ChildProcess | None = None
        """The stdio child, once spawned."""
        self.discovered = DiscoverAnswer()
        """What the ``server/discover`` answer said outside what the SDK reads."""
        self.lost_reason: str | None = None
        self.lost_at = math.inf
        """When (``time.monotonic()``) the connection was lost."""
        self.http = not isinstance(self.transport, StdioTransport)
        self._startup = Startup(settings.server_name, self.transport, secrets)
        self.updates = UpdateFeeds()
        """The open resource subscriptions of a handshake-era session."""
        self.answers: frozenset[str] = frozenset()
        """The client's handlers whose capability was advertised when connecting."""
        self.request_meta: RequestParamsMeta | None = None
        """``_meta`` sent with later requests (a log level set on a 2026-07-28 session)."""
        self.chosen_log_level: str | None = None
        """The level ``set_log_level()`` chose on an earlier connection: sent again, off
        the start-up deadline, once a handshake-era server is up (see _log_restore)."""
        self.level_lock = asyncio.Lock()
        """The session's, held while ``logging/setLevel`` is sent (see _log_restore)."""
        self.watchdog = Watchdog()
        """The time bound of the tool calls sent on this connection."""
        self.deadline = math.inf
        """When (``time.monotonic()``) its start must be done by, once :meth:`start` runs:
        the deadline of the ``connect()``, restart or new handshake that started it,
        which the ``tools/list`` sent once it is up keeps to as well."""
        self._error: ToolError | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task[None] | None = None
        self._alive = AliveCheck()
        self._given_up = False
        self.closed_by_app = False  # by McpClient.close(): a call it cuts off is no fault
        self.stream = NotificationStream(  # where the server's notifications come
            self.server_name, on_tools_changed, lambda: self.state is State.READY
        )

    @property
    def settings(self) -> ClientSettings:
        """The client's settings, read when needed (the client is alive while it sends)."""
        settings = self._settings()
        if settings is None:
            raise McpNotInitializedError(
                self.server_name, "its McpClient was garbage-collected", by_caller=True
            )
        return settings

    @property
    def usable(self) -> bool:
        """True while requests can be sent."""
        return self.state is State.READY and self.client is not None

    # -- driven by the session (_session.py) ----------------------------------------

    async def start(self, deadline: float | None = None) -> None:
        """Start the owner task and wait until the session is ready or start-up failed,
        by ``deadline`` (``time.monotonic()``; default: the client's timeout from when
        the MCP SDK is imported, which the first connect of a process does first)."""
        await import_sdk(self.server_name)
        now = time.monotonic()
        self.deadline = now + self.settings.timeout if deadline is None else deadline
        # In an empty context: the owner, and the SDK's tasks it starts (those that
        # read the server's messages and answer its requests), live as long as the
        # connection, and a copy of the caller's context would keep what its variables
        # hold (a request's objects) alive as long, and make the span current at
        # connect the parent of the spans of every request the server sends. Nothing
        # it runs reads the caller's: what it needs it sets itself (_sdklog, EXCHANGE).
        self._task = contextvars.Context().run(
            asyncio.create_task, self._run(), name=f"mcp-client:{self.server_name}"
        )
        try:
            # The owner enforces the start-up deadline itself; this outer bound only
            # guards against a transport that hangs while unwinding a failed start.
            left = max(0.0, self.deadline - now)
            await with_timeout(self._ready.wait(), left + self._close_bound())
        except asyncio.CancelledError:
            await self.stop()
            raise
        except TimeoutError as exc:
            await self.stop()
            raise McpTimeoutError(
                self.server_name, "start-up did not finish, and neither did its clean-up"
            ) from exc
        if self._error is not None:
            await self.stop()
            raise self._error
        if not self.usable:
            await self.stop()
            raise McpNotInitializedError(
                self.server_name,
                self.lost_reason or "closed while connecting",
                by_caller=self.closed_by_app and self.lost_reason is None,
            )

    async def stop(self, *, by_app: bool = False) -> None:
        """Ask the owner task to close the session, and wait (bounded) until it has;
        ``by_app``: for the app's ``close()``."""
        self.closed_by_app = self.closed_by_app or by_app
        if self.state is State.READY:
            self.state = State.CLOSED
        if self._scope is not None and not self._ready.is_set():
            self._scope.cancel()  # still starting: abandon the handshake
        self._stop.set()
        task = self._task
        if task is None and self.state is State.STARTING:
            self.state = State.CLOSED  # no owner ever ran (a connect stopped in the SDK import)
        if task is None or task.done():
            return
        bound = self._close_bound()
        done, _ = await asyncio.wait({task}, timeout=bound)
        if not done:
            logger.error(
                "MCP server '%s' did not shut down within %g s; cancelling its task",
                self.server_name,
                bound,
            )
            task.cancel()
            await asyncio.wait({task}, timeout=_CLOSE_SLACK)

    def _close_bound(self) -> float:
        transport = self.transport
        # Stdio shutdown waits up to seven grace periods (stdin, SIGTERM, SIGKILL, then
        # the same for the rest of the process group, and the last stderr).
        if isinstance(transport, StdioTransport):
            return _CLOSE_SLACK + 7 * transport.stop_grace
        return _CLOSE_SLACK

    def mark_lost(self, reason: str, *, give_up: bool = False) -> None:
        """The server went away: refuse further requests and let the owner clean up.

        ``give_up`` (the server is frozen, or forgot the session) skips the polite
        parts of closing: a stdio child gets no grace period, and the HTTP transport
        sends nothing more.
        """
        if self.state in (State.STARTING, State.READY):
            self.state = State.LOST
            self.lost_reason = reason
            self.lost_at = time.monotonic()
            logger.warning("MCP server '%s': connection lost: %s", self.server_name, reason)
        if give_up:
            self._given_up = True
        self.updates.end(self.lost_reason)
        self._stop.set()

    def retire(self, reason: str) -> None:
        """Refuse further requests as a lost connection does, with no WARNING: the
        session replaces it on purpose (``reason``)."""
        if self.state in (State.STARTING, State.READY):
            self.state = State.LOST
            self.lost_reason = reason
            self.lost_at = time.monotonic()

    def failed_restart(self, reason: str) -> None:
        """A restart that failed leaves the client lost, so a later request tries again."""
        self.state = State.LOST
        self.lost_reason = reason
        self.lost_at = time.monotonic()

    async def wait_ended(self, seconds: float) -> None:
        """Wait (at most ``seconds``) until the owner task has finished."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=seconds)

    async def check_alive(self, failed_at: float) -> str | None:
        """After a request failed at ``failed_at`` without an answer: None if the server
        still answers, else why it is gone. Concurrent failures share one ping."""
        return await self._alive.after(
            failed_at, lambda: self.probe(min(self.settings.timeout, PROBE_TIMEOUT))
        )

    async def probe(self, seconds: float) -> str | None:
        """Ping the server (``server/discover`` on 2026-07-28, which has no ping): None
        if it answers anything, else why not (see :func:`ping`)."""
        client = self.client
        if client is None or self.state is not State.READY:
            return self.lost_reason or "the connection is closed"
        return await ping(client, seconds, lambda: self.lost_reason)

    async def exit_description(self, wait: float = _EXIT_WAIT) -> str:
        """Why the connection ended, waiting (bounded) for a stdio child's exit status."""
        if self._given_up:
            # The client ended it (and the child's exit status says only how).
            return self.lost_reason or _GENERIC_END
        child = self.child
        if child is not None and child.process is not None:
            from ._stdio import wait_exited

            await wait_exited(child.process, wait)
        if child is not None and child.returncode is not None:
            if self.state is State.LOST:
                self.lost_reason = child.exit_text()
            return child.exit_text()
        if child is not None and child.reader is not None and child.reader.eof:
            return self.lost_reason or "closed its stdout but kept running"
        return self.lost_reason or _GENERIC_END

    # -- the owner task --------------------------------------------------------------

    async def _run(self) -> None:
        import anyio

        _sdklog.install()
        _sdklog.CONNECTION.set(_sdklog.Routed(self.server_name, self.secrets))  # and its SDK tasks'
        learned = False  # the handshake alone, as remembered, not as asked (see _handshake)
        try:
            # On anyio's clock, which need not be time.monotonic().
            deadline = anyio.current_time() + (self.deadline - time.monotonic())
            mode = "legacy" if _handshake.remembered(self.settings) else self.settings.protocol
            learned = mode != self.settings.protocol
            try:
                timed_out = await self._attempt(mode, deadline)
            except Exception as exc:
                if mode != "auto" or not self._probe_broke_it(exc, deadline):
                    raise
                timed_out = await self._attempt("legacy", deadline)
            if self.state is State.STARTING:
                self._error = self._startup_error(None, timed_out=timed_out)
                self._unlearn(learned)
        except Exception as exc:  # every failure is reported; none escapes the task
            shown = self.secrets.masked(exc)  # what the server echoed may be a credential
            if self.state is State.STARTING:
                self._error = self._startup_error(exc, timed_out=False)
                self._unlearn(learned)
                logger.debug("MCP server '%s' failed to start", self.server_name, exc_info=shown)
            else:
                if self.state is State.LOST and self.lost_reason == _GENERIC_END:
                    # The end of the read stream was seen first; this is why it ended.
                    self.lost_reason = describe(shown)
                self.mark_lost(describe(shown))
                logger.debug("MCP server '%s' connection failed", self.server_name, exc_info=shown)
        finally:
            if self.state is State.LOST and self.child is not None and not self._given_up:
                if self.child.returncode is not None:
                    self.lost_reason = self.child.exit_text()
            elif self.state is not State.LOST:
                self.state = State.CLOSED
            self.updates.end(self.lost_reason if self.state is State.LOST else None)
            self.client = None
            self.call_tool = None
            self.watchdog.close()
            self.log.flush()  # no more messages come to count the last second's
            self._ready.set()

    async def _attempt(self, mode: Literal["auto", "legacy"], deadline: float) -> bool:
        """Start the server (or reach it) and serve until stopped; whether the start-up
        deadline passed (a failed start-up raises)."""
        import anyio

        with anyio.CancelScope(deadline=deadline) as scope:
            self._scope = scope
            if self._stop.is_set():
                scope.cancel()
            await self._serve(scope, mode)
        # A cancelled scope means the deadline passed, unless close() cancelled it.
        return scope.cancelled_caught and not self._stop.is_set()

    def _unlearn(self, learned: bool) -> None:
        """After a failed start-up: if it used the handshake alone only because the
        server was remembered as needing it (``learned``), and the client did not stop
        it, let new clients probe the server again (see ``_handshake``)."""
        settings = self._settings()
        if learned and settings is not None and not self._stop.is_set():
            _handshake.forget(settings)

    def _probe_broke_it(self, exc: Exception, deadline: float) -> bool:
        """Whether a start-up that failed with ``exc`` is tried again with the
        ``initialize`` handshake alone (see ``_handshake``), before ``deadline``."""
        import anyio

        if self._stop.is_set() or anyio.current_time() >= deadline:
            return False
        return self.state is State.STARTING and self._startup.retry_legacy(exc, self.child)

    async def _serve(self, scope: anyio.CancelScope, mode: Literal["auto", "legacy"]) -> None:
        import anyio
        from mcp import Client
        from mcp_types import Implementation

        settings = self.settings
        name = settings.server_name
        # Read when a request comes: the client's timeout may change meanwhile.
        answer_within = window(self.watchdog, lambda: self.settings.timeout)
        # Each read when a request comes: one replaced after connect() answers from then on.
        handlers = live_handlers(self._handler, name, answer_within, self.questions.handler)
        self.answers = frozenset(h for h, k in HANDLER_KEYWORDS.items() if handlers[k] is not None)
        client = Client(
            self._open_transport(),
            mode=mode,
            read_timeout_seconds=settings.timeout,
            **handlers,
            logging_callback=self._on_log,
            log_level=settings.log_level,  # type: ignore[arg-type]
            message_handler=self._on_message,
            client_info=Implementation(name="agcore-tools", version=__version__),
            cache=None,  # the client keeps its own tool cache (pagination, list_changed, TTL)
            extensions=_task_extensions(settings, self.secrets.mask),
        )
        token = EXCHANGE.set(self._startup.exchange)  # the handshake's HTTP outcome
        async with client, anyio.create_task_group() as tasks:
            EXCHANGE.reset(token)  # tasks started from here on report nothing into it
            if _wants_listen(client):
                await tasks.start(listen_tools_changed, client, self.stream)
            elif is_modern(client):
                self.stream.event("none", None)  # it sends tools/list_changed on no stream
            scope.deadline = math.inf
            self.client = client
            self.call_tool = tool_caller(client, self.questions, self._pausable)
            if settings.tasks and is_modern(client):
                from ._task_wire import resolving_tasks

                self.call_tool = resolving_tasks(
                    self.call_tool, client.session, self.server_name, self.secrets.mask
                )
            self.state = State.READY
            retried = self._startup.first_try is not None
            _handshake.connected(settings, client, self.child, mode, retried)
            self._ready.set()
            if self.chosen_log_level is not None and needs_restore(client):
                seconds, mask = settings.timeout, self.secrets.mask
                level, lock = lambda: self.chosen_log_level, self.level_lock
                tasks.start_soon(restore_log_level, client, level, lock, seconds, name, mask)
            interval = settings.recovery.ping_interval if settings.recovery is not None else None
            del settings  # while it serves, this task must not keep the client alive
            if interval is not None:
                tasks.start_soon(self._keep_alive, interval)
            await self._stop.wait()
            tasks.cancel_scope.cancel()

    def _handler(self, what: str) -> Any:
        """The client's handler ``what`` now (None once the client is gone)."""
        return getattr(self._settings(), what, None)

    def _pausable(self) -> bool:
        """Whether a question may pause a call: the client has no elicitation_handler now."""
        return self._handler("elicitation_handler") is None

    def _open_transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        transport = self.transport
        if isinstance(transport, StdioTransport):
            from ._stdio import open_stdio

            opened = open_stdio(
                transport,
                self.server_name,
                self._spawned,
                lambda: self.state is State.STARTING or self._given_up,
            )
        else:
            from ._http import open_streamable_http

            opened = open_streamable_http(
                transport,
                lambda: self.state is State.READY,
                lambda: self._given_up,
                self.stream.event,
                self.secrets,
            )
        vetting = ToolListVetting(self.server_name, self._protocol_version, self.secrets.mask)
        self.discovered = DiscoverAnswer()  # this attempt's
        return watch_end(opened, self._transport_ended, vetting, self.discovered)

    def _protocol_version(self) -> str | None:
        client = self.client
        return client.protocol_version if client is not None else None

    def _spawned(self, child: ChildProcess) -> None:
        self.child = child

    async def _transport_ended(self) -> None:
        if self.state is State.READY:
            reason = await self.exit_description()
            if self.state is State.READY:
                self.mark_lost(reason)

    def _startup_error(self, exc: BaseException | None, *, timed_out: bool) -> ToolError:
        # The client's timeout is read only for a start-up that timed out.
        error = self._startup.error(
            exc, self.child, self._stop.is_set(), timed_out, lambda: self.settings.timeout
        )
        if isinstance(error, McpNotInitializedError) and self.closed_by_app:
            error.by_caller = True  # the app closed the client while it connected
        return error

    # -- server-to-client traffic ----------------------------------------------------

    async def _keep_alive(self, interval: float) -> None:
        """Ping every ``interval`` seconds; a server that does not answer within it is dead."""
        import anyio

        while self.state is State.READY:
            await anyio.sleep(interval)
            reason = await self.probe(interval)
            if reason is not None and self.state is State.READY:
                self.mark_lost(reason, give_up=True)

    async def _on_message(self, message: IncomingMessage) -> None:
        from mcp_types import ResourceUpdatedNotification, ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._tools_changed("the server's tool list changed")
        elif isinstance(message, ResourceUpdatedNotification):
            self.updates.deliver(message.params.uri)
        elif isinstance(message, Exception):
            said = self.secrets.mask(describe(message))
            logger.warning("MCP server '%s': transport error: %s", self.server_name, said)

    async def _on_log(self, params: LoggingMessageNotificationParams) -> None:
        # Servers log their start-up settings this way too: the transport's secrets, and
        # the credentials sent, are masked as in a stdio server's stderr. The callback
        # gets the data as sent: the app chose to read it, and judges it itself.
        self.log.relay(LOG_LEVELS.get(params.level, logging.INFO), params.data)
        settings = self._settings()  # None once the client is gone, and its on_log with it
        callback = settings.on_log if settings is not None else None
        if callback is not None:
            message = McpLogMessage(self.server_name, params.level, params.data, params.logger)
            await call_user(callback, message, self.server_name)


def _task_extensions(settings: ClientSettings, hide: Callable[[str], str]) -> list[Any] | None:
    """The 2026-07-28 tasks extension, for a client created with ``tasks=True`` only:
    it is advertised on every request of the session, and adds a result shape that
    every ``tools/call`` answer is parsed against (see ``_tasks``)."""
    if not settings.tasks:
        return None
    from ._task_wire import TasksExtension

    return [TasksExtension(settings.server_name, hide)]


def _wants_listen(client: Client) -> bool:
    tools = client.server_capabilities.tools
    return is_modern(client) and tools is not None and bool(tools.list_changed)
