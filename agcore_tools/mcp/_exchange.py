"""What the HTTP layer saw of one MCP request, handed back to the task that sent it.

The MCP SDK turns an HTTP failure into a JSON-RPC error that keeps neither the status
nor its headers ("Server returned an error response"). The SDK sends each request's
POST in the context of the task that sent the message, so a context variable set by
the caller reaches the HTTP client's transport; the guard in ``_http`` fills the
:class:`HttpExchange` it finds there, and the caller reads it after a failure.

Kept free of SDK and httpx imports: the client checks it on every call.
"""

from __future__ import annotations

import math
import time
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["EXCHANGE", "HttpExchange", "parse_retry_after", "sdk_detail"]

_SDK_STAND_INS = frozenset({"Server returned an error response", "Session terminated", "Not Found"})
"""The SDK's messages for an HTTP failure without a JSON-RPC body; the status says more."""


@dataclass(slots=True)
class HttpExchange:
    """The HTTP outcome of one request: its failure status, or the network error."""

    status: int | None = None
    """The status of a failed (>= 400) answer."""
    reason: str = ""
    """Its reason phrase."""
    retry_after: float | None = None
    """Seconds its ``Retry-After`` header asked for."""
    www_authenticate: str | None = None
    """Its ``WWW-Authenticate`` header (a challenge, never a credential)."""
    session_gone: bool = False
    """The request carried a session id and the server no longer knows it."""
    network_error: str | None = None
    """The request got no HTTP answer at all: why (``ConnectError: ...``)."""
    never_sent: bool = False
    """No connection to the server could be made for it, so the server never saw it."""
    pool_full: bool = False
    """No connection of the HTTP client's pool came free for it in time: it was never
    sent, and that says nothing of the server's health."""

    def describe(self) -> str:
        """One line for messages: ``HTTP 401 Unauthorized (WWW-Authenticate: Bearer ...)``."""
        if self.status is None:
            return self.network_error or "no answer"
        text = f"HTTP {self.status} {self.reason or _phrase(self.status)}".rstrip()
        if self.www_authenticate:
            text += f" (WWW-Authenticate: {self.www_authenticate})"
        if self.retry_after is not None:
            text += f"; retry after {self.retry_after:g} s"
        return text


EXCHANGE: ContextVar[HttpExchange | None] = ContextVar("agcore_mcp_http_exchange", default=None)
"""The exchange of the request being sent from this context, if its sender wants one."""


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), or None.

    Example:
        >>> parse_retry_after("2"), parse_retry_after("soon"), parse_retry_after(None)
        (2.0, None, None)
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        import email.utils

        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _phrase(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def sdk_detail(exc: BaseException) -> str:
    """``": <the JSON-RPC error's message>"`` when it adds to the HTTP status, else ""."""
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError) and exc.message not in _SDK_STAND_INS:
        return f": {exc.message}"
    return ""
