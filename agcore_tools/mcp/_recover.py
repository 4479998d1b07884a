"""What a failed MCP request means, and sending it again where that is safe.

:func:`classify` turns the exception of a failed request (and the HTTP outcome the
guard in ``_http`` recorded for it) into the :class:`ToolError` to raise, and says
whether the request may be sent again:

- after a wait, on the same connection: the server answered 429 or 503 with a
  ``Retry-After`` (it did not run the request; nor does it after a 401, 403 or 429
  without one, which are not sent again);
- after a restart of the connection: the server forgot the session (HTTP 404; it did
  not run the request either), or the connection is gone; then the request is sent
  again only if it never ran, or if it is safe to repeat (``tools/list``, or a tool
  annotated ``readOnlyHint`` or ``idempotentHint``);
- after connecting again with the ``initialize`` handshake: the server agreed on
  2026-07-28 and then refused the request, unrun, until it gets ``initialize`` (see
  ``_handshake.wants_initialize``); if it fails again, its error names both.

A stream that failed on its own (an SSE event over the size limit, a response cut
off) fails its request alone, with the SDK's reason; a ping decides whether the
server behind it is still there. So does an answer with a mismatched id (``_matching``).

A ``tools/call`` that fails says whether it may have run (:func:`note_run`): once
its request was sent, it may have, unless ``classify`` found that it never ran; every
attempt counts, so a call re-sent after a restart may have run if either send may have.
The server's JSON-RPC error answer to a ``tools/call`` is recoverable, as an
``isError`` answer is, and never ran when its code refuses the request unrun.
The SDK's own failures have codes that servers use for their errors too (-32000, a
closed connection; -32001, its timeout; -32700, an answer it could not parse): a
server's answer with one is an answer like any other (``_error_text.sdk_own``,
``sdk_parse_error``), not a lost connection, a timeout or a malformed answer.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from ..error import McpError, McpNotInitializedError, McpTimeoutError, ToolError
from ._connection import Connection
from ._error_text import (
    GENERIC_CLOSE,
    first_line,
    malformed,
    quoted,
    sdk_own,
    sdk_parse_error,
    size_hint,
    validation_line,
)
from ._exchange import EXCHANGE, HttpExchange, sdk_detail
from ._handshake import initialize_note, wants_initialize
from ._limits import over_limit_reason
from ._matching import invalid_reason, mismatch_reason
from ._state import State

__all__ = [
    "Restarts",
    "Verdict",
    "cause_of",
    "classify",
    "is_safe_to_repeat",
    "note_run",
    "noted",
    "refused_by_server",
    "send_again",
    "shown",
]

T = TypeVar("T")

_MAX_WAITS = 5
"""Retry-After waits within one call, at most."""
_END_WAIT = 2.0
"""Seconds to wait for a broken HTTP connection's owner task to report why it broke."""


class Restarts(Protocol):
    """What :func:`send_again` needs of the session: whether it may restart the
    connection, and the restart itself."""

    @property
    def server_name(self) -> str:
        """Names the server in messages."""
        ...

    def can_restart(self) -> bool:
        """Whether the recovery policy allows another restart in a row."""
        ...

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
        """A usable connection in place of ``conn``, which was lost, within ``limit``
        seconds of ``started`` (else :class:`McpTimeoutError`); one made with the
        ``initialize`` handshake when the server refused ``action`` for want of it
        (``wants_initialize``, its words)."""
        ...


@dataclass(slots=True)
class Verdict:
    """What a failed request means."""

    error: ToolError
    """What to raise if it is not sent again."""
    wait: float | None = None
    """Send it again on the same connection after this many seconds (429/503)."""
    restart: bool = False
    """The connection (or its session) is gone; a restart may send it again."""
    never_ran: bool = False
    """The server provably did not run it."""
    wants_initialize: str | None = None
    """The server refused it unrun until it gets ``initialize`` (its words, masked):
    connecting again with the handshake may send it."""


async def classify(
    name: str,
    conn: Connection | None,
    exc: Exception,
    exchange: HttpExchange | None,
    action: str,
    limit: float,
    tool_name: str | None,
    failed_at: float,
) -> Verdict:
    """Read the failure ``exc`` of ``action`` sent on ``conn`` to the server ``name``.

    The error has ``conn``'s secrets masked (the transport's, and the credentials its
    requests carried): in its text, and, when ``exc`` is the library's own error raised
    inside the request (a task's, quoting the server), on its chain too. Raise it
    from :func:`cause_of`."""
    verdict = await _classify(name, conn, exc, exchange, action, limit, tool_name, failed_at)
    if conn is not None:
        verdict.error = conn.secrets.masked_error(verdict.error)
        _note_wants_initialize(verdict, conn, exc)
    return verdict


def _note_wants_initialize(verdict: Verdict, conn: Connection, exc: Exception) -> None:
    said = wants_initialize(conn.client, exc)
    if said is not None:
        verdict.wants_initialize = quoted(said, conn.secrets.mask)
        verdict.never_ran = True


def shown(exc: Exception, conn: Connection | None) -> BaseException:
    """``exc`` as a traceback may print it, to chain an error from: with ``conn``'s
    secrets masked on its whole chain (a server's error, in the SDK's, may echo the
    credential it got)."""
    return exc if conn is None else conn.secrets.masked(exc)


def cause_of(error: ToolError, exc: Exception, conn: Connection | None) -> BaseException | None:
    """What ``error``, :func:`classify`'s verdict on ``exc``, is raised from: ``exc``
    (:func:`shown`); or, when ``exc`` is the library's own error raised inside the
    request, which ``error`` is then (masked), that error's own cause."""
    return error.__cause__ if isinstance(exc, ToolError) else shown(exc, conn)


async def _classify(
    name: str,
    conn: Connection | None,
    exc: Exception,
    exchange: HttpExchange | None,
    action: str,
    limit: float,
    tool_name: str | None,
    failed_at: float,
) -> Verdict:
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, PARSE_ERROR, REQUEST_TIMEOUT, URL_ELICITATION_REQUIRED
    from pydantic import ValidationError

    if isinstance(exc, ToolError):
        return Verdict(exc)
    http = conn is None or conn.http
    hide = conn.secrets.mask if conn is not None else str

    def quote(text: str) -> str:  # the server's words, or the SDK's quoting them
        return quoted(text, hide)

    if isinstance(exc, TimeoutError) or (
        isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT and sdk_own(exc, http)
    ):
        return Verdict(
            McpTimeoutError(name, f"{action} timed out after {limit:g} s", tool_name=tool_name)
        )
    if isinstance(exc, MCPError) and (stray := mismatch_reason(exc.data, exc.message)):
        # The connection stays up, but a server that mixes up its answers is not to be
        # asked again: unrecoverable, like any McpError.
        return Verdict(McpError(name, f"{action} failed: {quote(stray)}", tool_name=tool_name))
    if isinstance(exc, MCPError) and (problem := invalid_reason(exc.data, exc.message)):
        return Verdict(
            McpError(name, f"{action} got an invalid answer: {quote(problem)}", tool_name=tool_name)
        )
    if isinstance(exc, MCPError) and (dropped := over_limit_reason(exc.data, exc.message)):
        # The server and the connection are fine: only this answer was too big (or too
        # deep) to take, as with an SSE event over the limit.
        error = McpError(
            name, f"{action} failed: {quote(dropped)}", tool_name=tool_name, recoverable=True
        )
        return Verdict(error)
    if exchange is not None and exchange.status is not None:
        return _http_failure(name, conn, exc, exchange, action, tool_name, hide)
    if exchange is not None and exchange.pool_full:
        # Never sent, and no sign of the server's health (a ping would wait in the pool too).
        error = McpError(
            name,
            f"{action} was not sent: {exchange.network_error}",
            tool_name=tool_name,
            recoverable=True,
        )
        return Verdict(error, never_ran=True)
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED and sdk_own(exc, http):
        if conn is None or conn.state is State.CLOSED:
            return Verdict(
                McpNotInitializedError(
                    name,
                    f"{action} failed: the client was closed",
                    tool_name=tool_name,
                    by_caller=conn is not None and conn.closed_by_app,
                )
            )
        if conn.http and conn.state is State.READY and exc.message != GENERIC_CLOSE:
            # One request got no answer: its stream broke, or its POST failed. The
            # connection is lost only if the server is gone too.
            gone = await conn.check_alive(failed_at)
            if gone is None:
                return Verdict(
                    McpError(
                        name,
                        f"{action} failed: {quote(exc.message)}{size_hint(exc.message)}",
                        tool_name=tool_name,
                        recoverable=True,
                    )
                )
            conn.mark_lost(gone, give_up=True)
        if conn.http:
            await conn.wait_ended(_END_WAIT)  # a transport that broke says why as it ends
        reason = await conn.exit_description()
        conn.mark_lost(reason)
        # Unrecoverable, as a dead server is (seed acceptance 17): the tool loop stops,
        # and the next request starts the server again.
        return Verdict(
            McpError(
                name, f"{action} failed: connection lost ({quote(reason)})", tool_name=tool_name
            ),
            restart=True,
            never_ran=exchange is not None and exchange.never_sent,
        )
    if isinstance(exc, MCPError) and exc.code == PARSE_ERROR and sdk_parse_error(exc):
        # The SDK's message holds pydantic's whole report (its URL included): the one
        # line names what was malformed and the first complaint; the SDK's error, the
        # __cause__, keeps the rest.
        return Verdict(
            McpError(name, f"{action} failed: {quote(malformed(exc.message))}", tool_name=tool_name)
        )
    if isinstance(exc, MCPError) and exc.code == URL_ELICITATION_REQUIRED:
        return _needs_links(name, exc, action, tool_name, quote)
    if isinstance(exc, MCPError):
        return _answered(name, exc, action, tool_name, quote)
    if tool_name is not None and isinstance(exc, RuntimeError) and _OFF_SCHEMA.match(str(exc)):
        # The SDK checks a result against the tool's outputSchema after it arrived and
        # raises without the result. Servers with a slightly wrong schema are common, so
        # the model reads this and goes on (recoverable); the server did run the call.
        return Verdict(
            McpError(
                name,
                f"{action} answered with a result that does not match the tool's own output "
                f"schema, so the result was dropped: {quote(first_line(exc))}",
                tool_name=tool_name,
                recoverable=True,
            )
        )
    if isinstance(exc, ValidationError):
        # pydantic's first line only counts the errors ("1 validation error for
        # ListToolsResult"): the one line names where the answer is wrong, and how.
        return Verdict(
            McpError(
                name,
                f"{action} got an invalid answer: {quote(validation_line(exc))}",
                tool_name=tool_name,
            )
        )
    if isinstance(exc, RuntimeError):
        return Verdict(
            McpError(
                name,
                f"{action} got an invalid answer: {quote(first_line(exc))}",
                tool_name=tool_name,
            )
        )
    return Verdict(
        McpError(
            name,
            f"{action} failed: {type(exc).__name__}: {quote(first_line(exc))}",
            tool_name=tool_name,
        )
    )


_UNRUN_CODES = frozenset({-32700, -32600, -32601, -32602, -32020, -32021, -32022})
"""JSON-RPC error codes that refuse a request before it runs (``mcp_types``' PARSE_ERROR,
INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, HEADER_MISMATCH,
MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION). Any other code
(INTERNAL_ERROR, 0, a server's own) may come from a tool that failed part way."""


def _answered(
    name: str, exc: Any, action: str, tool_name: str | None, quote: Callable[[str], str]
) -> Verdict:
    """The server's JSON-RPC error answer to the request: the connection is fine, and
    the server refused or failed this request alone. The server's message is shown by
    ``quote``: the connection's secrets masked, as in its log messages, since a model
    may read it, and its control characters escaped, since an app may log it.

    For a ``tools/call`` it is recoverable, as an ``isError`` answer is: mcp-go servers
    and TypeScript servers on the low-level ``Server`` answer a model's wrong argument
    this way ("Unknown vault: Notes. Available vaults: ..."), and the model must read
    it to correct itself. Other requests keep their meaning (the adapters of
    ``_protocol_tools`` decide for theirs)."""
    said = quote(exc.message)
    if tool_name is None:
        return Verdict(McpError(name, f"{action} failed: {said} (code {exc.code})"))
    unrun = exc.code in _UNRUN_CODES
    verb = "was refused by the server" if unrun else "failed on the server"
    error = McpError(
        name, f"{action} {verb}: {said} (code {exc.code})", tool_name=tool_name, recoverable=True
    )
    return Verdict(error, never_ran=unrun)


def _needs_links(
    name: str, exc: Any, action: str, tool_name: str | None, quote: Callable[[str], str]
) -> Verdict:
    """The server's ``URLElicitationRequiredError``: the user must open a link (to sign
    in, to consent) before the server runs the request. Recoverable: the model reads it,
    and the app shows the links from :attr:`McpError.elicitations`. The message names
    only their hosts, since a link may carry a one-time token."""
    data = exc.data if isinstance(exc.data, Mapping) else {}
    listed = data.get("elicitations")
    links = tuple(
        dict(item)
        for item in (listed if isinstance(listed, list) else ())
        if isinstance(item, Mapping) and isinstance(item.get("url"), str)
    )
    hosts = sorted({urlsplit(link["url"]).hostname or "?" for link in links})
    said = "; ".join(sorted({str(link["message"]) for link in links if link.get("message")}))
    where = quote(f"{', '.join(hosts) or 'no host given'}{f': {said}' if said else ''}")
    error = McpError(
        name,
        f"{action} needs the user to open a link first (at {where}); the app has the link: "
        "call again once the user has opened it",
        tool_name=tool_name,
        recoverable=True,
    )
    error.elicitations = links
    return Verdict(error, never_ran=True)


def refused_by_server(error: ToolError) -> bool:
    """Whether ``error`` is the server's JSON-RPC error answer to the request itself
    (invalid params, an unknown resource): the connection is fine, and only that request
    was refused. A timeout, a lost connection, an HTTP failure, or an answer that was
    malformed or mismatched is not.

    Example:
        >>> refused_by_server(McpError("fs", "resources/read 'x' failed: connection lost"))
        False
    """
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, PARSE_ERROR, REQUEST_TIMEOUT

    cause = error.__cause__
    return (
        type(error) is McpError  # what classify() makes of an answered error, and no other
        and error.status_code is None
        and isinstance(cause, MCPError)
        # The SDK's own failures have these codes too; the server's answer with one is
        # what classify() quoted with its code (see _answered).
        and (
            cause.code not in (CONNECTION_CLOSED, PARSE_ERROR, REQUEST_TIMEOUT)
            or error.reason.endswith(f" (code {cause.code})")
        )
        and mismatch_reason(cause.data, cause.message) is None
        and invalid_reason(cause.data, cause.message) is None
        and over_limit_reason(cause.data, cause.message) is None
    )


def _http_failure(
    name: str,
    conn: Connection | None,
    exc: Exception,
    http: HttpExchange,
    action: str,
    tool_name: str | None,
    hide: Callable[[str], str],
) -> Verdict:
    if http.session_gone:
        reason = f"the server no longer knows the session ({http.describe()})"
        if conn is not None:
            conn.mark_lost(reason, give_up=True)
        error = McpError(
            name, f"{action} failed: {reason}", tool_name=tool_name, status_code=http.status
        )
        return Verdict(error, restart=True, never_ran=True)
    from mcp.shared.exceptions import MCPError

    detail = sdk_detail(exc, hide)
    # On 2026-07-28 the server's JSON-RPC error answer comes with the HTTP status its
    # code maps to (400 for -32602, 404 for -32601): a call refused, as over stdio.
    code = exc.code if detail and isinstance(exc, MCPError) else None
    refused = tool_name is not None and code in _UNRUN_CODES
    what = (
        f"was refused by the server: {http.describe()}{detail} (code {code})"
        if refused
        else f"failed: {http.describe()}{detail}"
    )
    error = McpError(
        name,
        f"{action} {what}",
        tool_name=tool_name,
        status_code=http.status,
        retry_after=http.retry_after,
        # A credential the server refuses will not get better by asking again.
        recoverable=http.status not in (401, 403),
    )
    if http.status in (429, 503) and http.retry_after is not None:
        return Verdict(error, wait=http.retry_after, never_ran=True)
    # Refused at the door (a credential, a rate limit, a body too large), or by its
    # JSON-RPC code: not run.
    return Verdict(error, never_ran=refused or http.refused)


async def send_again(
    session: Restarts,
    conn: Connection,
    exc: Exception,
    exchange: HttpExchange | None,
    *,
    action: str,
    tool_name: str | None,
    limit: float,
    started: float,
    safe: Callable[[], bool],
    send: Callable[[Connection, float], Awaitable[T]],
) -> T:
    """After ``send`` failed with ``exc``: send it again where that is allowed (see the
    module docs), within ``limit`` seconds of ``started``; else raise the error."""
    waits = 0
    restarted = False
    ran = False  # whether a failed send may have run the request
    first = ""  # what the error adds once connected again for want of initialize
    while True:
        verdict = await classify(
            session.server_name, conn, exc, exchange, action, limit, tool_name, time.monotonic()
        )
        ran = ran or not verdict.never_ran
        remaining = started + limit - time.monotonic()
        if verdict.wait is not None and waits < _MAX_WAITS and verdict.wait < remaining:
            waits += 1
            await asyncio.sleep(verdict.wait)
        elif verdict.wants_initialize is not None and not first:
            first = initialize_note(verdict.wants_initialize)
            try:
                conn = await session.restart_within(
                    conn,
                    action,
                    tool_name,
                    started,
                    limit,
                    wants_initialize=verdict.wants_initialize,
                )
            except ToolError as failed:
                raise note_run(noted(failed, first), ran, tool_name) from shown(exc, conn)
        elif (
            verdict.restart
            and not restarted
            and (verdict.never_ran or safe())
            and session.can_restart()
        ):
            restarted = True
            try:
                conn = await session.restart_within(conn, action, tool_name, started, limit)
            except ToolError as failed:
                raise note_run(noted(failed, first), ran, tool_name) from shown(exc, conn)
        else:
            error = noted(verdict.error, first)
            raise note_run(error, ran, tool_name) from cause_of(verdict.error, exc, conn)
        remaining = started + limit - time.monotonic()
        if remaining <= 0:
            timed_out = McpTimeoutError(
                session.server_name, f"{action} timed out after {limit:g} s", tool_name=tool_name
            )
            raise note_run(noted(timed_out, first), ran, tool_name) from shown(exc, conn)
        exchange = HttpExchange() if conn.http else None
        token = EXCHANGE.set(exchange)
        try:
            return await send(conn, remaining)
        except Exception as again:  # noqa: BLE001 - classified on the next turn
            exc = again
        finally:
            EXCHANGE.reset(token)


def noted(error: ToolError, note: str) -> ToolError:
    """``error`` with ``note`` (naming an earlier attempt) after its reason: a copy,
    with the same cause; itself when there is no note, or it is not an
    :class:`McpError`."""
    if not note or not isinstance(error, McpError):
        return error
    copy = type(error).__new__(type(error))
    copy.__dict__.update(error.__dict__)
    McpError.__init__(
        copy,
        error.server_name,
        f"{error.reason}{note}",
        tool_name=error.tool_name,
        status_code=error.status_code,
        retry_after=error.retry_after,
        may_have_run=error.may_have_run,
    )
    copy.__cause__ = error.__cause__
    copy.__suppress_context__ = True
    return copy


def note_run(error: ToolError, may_have_run: bool, tool_name: str | None) -> ToolError:
    """``error``, which failed a ``tools/call`` of ``tool_name``, saying whether the call
    may have run on the server (see :class:`~agcore_tools.McpError`): a copy, with the
    same cause, naming the tool. Errors of other requests (``tool_name`` None), errors
    that say it already, and errors that are not :class:`McpError` are returned as they
    are.

    Example:
        >>> lost = McpError("pay", "tools/call 'send' failed: connection lost")
        >>> print(note_run(lost, False, "send"))
        MCP server 'pay': tools/call 'send' failed: connection lost; the call was not run
        >>> noted = note_run(lost, True, "send")
        >>> noted.may_have_run, noted.tool_name, lost.may_have_run
        (True, 'send', None)
    """
    if not isinstance(error, McpError) or tool_name is None or error.may_have_run is not None:
        return error
    noted = type(error).__new__(type(error))
    noted.__dict__.update(error.__dict__)
    McpError.__init__(
        noted,
        error.server_name,
        error.reason,
        tool_name=error.tool_name or tool_name,
        status_code=error.status_code,
        retry_after=error.retry_after,
        may_have_run=may_have_run,
    )
    noted.__cause__ = error.__cause__
    noted.__suppress_context__ = True
    return noted


_OFF_SCHEMA = re.compile(
    r"Invalid structured content returned by tool |Invalid schema for tool "
    r"|Tool .* has an output schema but did not return structured content"
)
"""The MCP SDK's messages (``ClientSession.validate_tool_result``) for a received
``tools/call`` result that its tool's ``outputSchema`` refuses, or cannot check."""


def is_safe_to_repeat(annotations: Mapping[str, Any]) -> bool:
    """A tool whose annotations say calling it twice does no harm.

    Example:
        >>> is_safe_to_repeat({"readOnlyHint": True}), is_safe_to_repeat({})
        (True, False)
    """
    return annotations.get("readOnlyHint") is True or annotations.get("idempotentHint") is True
