"""Sending a session's requests: ``tools/call`` (the hot path, :func:`call_tool`) and the
rest of the protocol (:func:`send`), with the client's timeout, error translation (see
``_recover``) and recovery.

Kept apart from ``_session``, which holds the connection, restarts it and binds it to
its event loop: what sending needs of the session is :class:`Sender` (the connection to
send on, the one that replaces a lost one, the errors for a request that cannot be
sent), and the session's ``call_tool`` and ``send`` call these with itself.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

from .._aio import with_timeout
from ..error import McpNotInitializedError, McpTimeoutError, ToolConfigError, ToolError
from ._connection import ClientSettings, Connection
from ._exchange import EXCHANGE, HttpExchange
from ._input_pause import ROUND, ServerQuestion
from ._progress import call_meta, progress_callback
from ._recover import Restarts, cause_of, classify, note_run, send_again
from ._restarts import RestartBudget
from ._results import result_value
from ._state import State

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import RequestParamsMeta

__all__ = [
    "BACKSTOP",
    "GRACE",
    "Meta",
    "Repeats",
    "Sender",
    "call_tool",
    "check_timeout",
    "send",
    "translate",
]

T = TypeVar("T")

BACKSTOP = 0.25
"""Extra seconds after the request timeout before the caller stops waiting regardless
(the SDK's clock does not run while a request is still being written)."""
GRACE = 0.25
"""Extra seconds after a request's timeout for telling why it failed (a ping, a stdio
child's exit status) before the caller gets a timeout instead: a request with timeout
``t`` returns or raises within ``t`` + this (+ the event loop's latency)."""
_UNTIMED = math.inf
"""The SDK read timeout of a ``tools/call``: none, as the connection's watchdog bounds
it. The SDK's per-request clock arms and cancels a timer for every request (about 4 %
of a stdio call's client CPU, docs/benchmarks.md); a request cancelled by the watchdog
still gets its ``notifications/cancelled``, which the SDK sends for any abandoned
request. ``math.inf``, not None: None would select the session's default timeout."""

Meta: TypeAlias = "RequestParamsMeta | None"
"""The ``_meta`` a request carries beyond what the SDK stamps (None: nothing)."""


class Repeats(Protocol):
    """What sending asks of the tool cache."""

    def safe_to_repeat(self, tool_name: str) -> bool:
        """Whether the tool's annotations say calling it twice does no harm."""
        ...


class Sender(Restarts, Protocol):
    """What sending needs of the session (``_session.Session`` is one): its restarts
    (:class:`~agcore_tools.mcp._recover.Restarts`), and the following."""

    @property
    def settings(self) -> ClientSettings:
        """The client's settings (read when needed)."""
        ...

    @property
    def conn(self) -> Connection | None:
        """The current connection."""
        ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the connection lives in."""
        ...

    @property
    def tools(self) -> Repeats | None:
        """The tool cache."""
        ...

    @property
    def budget(self) -> RestartBudget:
        """The restarts counted against the recovery policy."""
        ...

    async def usable_connection(
        self,
        conn: Connection | None,
        action: str,
        tool_name: str | None,
        started: float,
        limit: float,
    ) -> Connection:
        """``conn`` if requests can be sent on it; else the connection that replaces it."""
        ...

    async def ready(
        self, what: str, started: float | None = None, limit: float | None = None
    ) -> Connection:
        """The connection to send ``what`` on, restarted if it was lost."""
        ...

    def not_usable(
        self, conn: Connection | None, tool_name: str | None, what: str | None = None
    ) -> McpNotInitializedError:
        """The error for a request that cannot be sent on ``conn``."""
        ...

    def wrong_loop(self, action: str, tool_name: str | None) -> McpNotInitializedError:
        """The error for a request from another event loop than the connection's."""
        ...


async def translate(
    session: Sender,
    conn: Connection | None,
    exc: Exception,
    exchange: HttpExchange | None,
    action: str,
    limit: float,
    tool_name: str | None,
) -> ToolError:
    """The :class:`ToolError` for a request that failed with ``exc``, sent with
    ``exchange`` (for HTTP status details), without sending it again; raise it
    from ``_recover.cause_of``, which masks the secrets on ``exc``'s chain."""
    verdict = await classify(
        session.server_name, conn, exc, exchange, action, limit, tool_name, time.monotonic()
    )
    return verdict.error


async def call_tool(
    session: Sender, name: str, args: Mapping[str, Any] | None, timeout: float | None
) -> Any:
    """Send ``tools/call`` and return the tool's value (see :meth:`McpClient.call_tool`)."""
    settings = session.settings
    limit = settings.timeout if timeout is None else check_timeout(session.server_name, timeout)
    started = time.monotonic()
    conn = session.conn
    remaining = limit
    if conn is None or conn.state is not State.READY:
        try:
            conn = await session.usable_connection(
                conn, f"tools/call '{name}'", name, started, limit
            )
        except ToolError as exc:
            raise note_run(exc, False, name)  # noqa: B904 - its cause is kept: see note_run
        remaining = started + limit - time.monotonic()
    if session.loop is not asyncio.get_running_loop():
        raise note_run(session.wrong_loop(f"tools/call '{name}'", name), False, name)
    progress = progress_callback(settings.on_progress, session.server_name, name, conn.secrets.mask)
    arguments = dict(args) if args else {}
    # Over HTTP, the guard in _http reports what the server answered into this.
    exchange = HttpExchange() if conn.http else None
    token = EXCHANGE.set(exchange)
    # A call that can pause on a question: the question waits for its answer as long
    # as the call may take (see _elicitation).
    round_ = ROUND.get()
    timing = None
    if round_ is not None and round_.can_pause:
        timing = ROUND.set(replace(round_, limit=limit))
    try:
        result = await _send_call(conn, remaining, name, arguments, progress)
    except Exception as exc:  # noqa: BLE001 - send_again raises it translated, or retries
        tools = session.tools
        recovering = _within(
            session,
            send_again(
                session,
                conn,
                exc,
                exchange,
                action=f"tools/call '{name}'",
                tool_name=name,
                limit=limit,
                started=started,
                safe=lambda: tools is not None and tools.safe_to_repeat(name),
                send=lambda conn, remaining: _send_call(conn, remaining, name, arguments, progress),
            ),
            f"tools/call '{name}'",
            name,
            started,
            limit,
        )
        try:
            result = await recovering
        except McpTimeoutError as timed_out:  # the bound, after the request went out
            raise note_run(timed_out, True, name)  # noqa: B904 - its cause is kept
    finally:
        if timing is not None:
            ROUND.reset(timing)
        EXCHANGE.reset(token)
    session.budget.clear()
    if isinstance(result, ServerQuestion):
        return result  # a question for the user: the adapter pauses the loop on it
    return result_value(result, name, hide=conn.secrets.mask)


async def _within(
    session: Sender,
    recovery: Awaitable[T],
    action: str,
    tool_name: str | None,
    started: float,
    limit: float,
) -> T:
    """Await ``recovery`` (a failed request's diagnosis, waits and resending) until
    :data:`GRACE` past the request's deadline; then raise a timeout."""
    remaining = started + limit + GRACE - time.monotonic()
    try:
        return await with_timeout(recovery, max(0.0, remaining))
    except TimeoutError as exc:
        # Raised by the bound itself: send_again turns the others into ToolErrors.
        raise McpTimeoutError(
            session.server_name, f"{action} timed out after {limit:g} s", tool_name=tool_name
        ) from exc


def _send_call(
    conn: Connection,
    limit: float,
    name: str,
    arguments: dict[str, Any],
    progress: Any,
) -> Awaitable[Any]:
    """The one place a ``tools/call`` is sent: on ``conn``, bounded by its watchdog."""
    return conn.watchdog.bound(
        conn.call_tool(
            name,
            arguments,
            read_timeout_seconds=_UNTIMED,
            progress_callback=progress,
            meta=call_meta(conn.request_meta),
        ),
        limit,
    )


async def send(
    session: Sender,
    what: str,
    call: Callable[[Client, Meta], Awaitable[T]],
    *,
    resend: bool = True,
) -> T:
    """Run ``call`` on the connected SDK client within the client's timeout.

    ``call`` gets the SDK client and the ``_meta`` to send with the request (see
    :attr:`Connection.request_meta`). Failures become the :class:`ToolError` that
    ``call_tool`` would raise for them, and recover like it (see ``_recover``): these
    requests read, so they are safe to send again after a restart. ``resend=False``
    is for requests bound to the connection they started on (a subscription): they
    are never sent again, on a new connection or the same one.
    """
    limit = session.settings.timeout
    started = time.monotonic()
    conn = await session.ready(what, started, limit)
    client = conn.client
    if client is None:  # the connection ended between the check and here
        raise session.not_usable(conn, None, what)
    exchange = HttpExchange() if conn.http else None
    token = EXCHANGE.set(exchange)
    try:
        remaining = started + limit - time.monotonic()
        return await with_timeout(call(client, conn.request_meta), remaining + BACKSTOP)
    except Exception as exc:  # noqa: BLE001 - raised translated, chained from it masked
        if not resend:
            error = await translate(session, conn, exc, exchange, what, limit, None)
            raise error from cause_of(error, exc, conn)

        async def again(new: Connection, remaining: float) -> T:
            if new.client is None:
                raise session.not_usable(new, None, what)
            return await with_timeout(call(new.client, new.request_meta), remaining + BACKSTOP)

        return await _within(
            session,
            send_again(
                session,
                conn,
                exc,
                exchange,
                action=what,
                tool_name=None,
                limit=limit,
                started=started,
                safe=lambda: True,
                send=again,
            ),
            what,
            None,
            started,
            limit,
        )
    finally:
        EXCHANGE.reset(token)


def check_timeout(server_name: str, value: float) -> float:
    """``value`` as seconds, once it is a positive number.

    Example:
        >>> check_timeout("demo", 5)
        5.0
    """
    try:  # a bool is no number of seconds (True would be 1 s), nor is a string
        seconds = float("nan") if isinstance(value, (bool, str)) else float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds > 0:
        raise ToolConfigError(
            f"MCP server '{server_name}': timeout must be a positive number of seconds, "
            f"got {value!r}"
        )
    return seconds
