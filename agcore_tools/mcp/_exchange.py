"""What the HTTP layer saw of one MCP request, handed back to the task that sent it.

The MCP SDK turns an HTTP failure into a JSON-RPC error that keeps neither the status
nor its headers ("Server returned an error response"). The SDK sends each request's
POST in the context of the task that sent the message, so a context variable set by
the caller reaches the HTTP client's transport; the guard in ``_http`` fills the
:class:`HttpExchange` it finds there, and the caller reads it after a failure.

Kept free of SDK and httpx imports: the client checks it on every call.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from ._error_text import quoted
from ._serverlog import safe_text

__all__ = ["EXCHANGE", "HttpExchange", "parse_retry_after", "sdk_detail", "server_reason"]

_SDK_STAND_INS = frozenset({"Server returned an error response", "Session terminated", "Not Found"})
"""The SDK's messages for an HTTP failure without a JSON-RPC body; the status says more."""

_REFUSED = frozenset({400, 401, 403, 404, 405, 406, 411, 413, 414, 415, 422, 429, 431})
"""Statuses by which a server refuses a request before running it: a malformed or
oversized request, a credential, a method or media type it does not take, a rate limit.
A 5xx, a 408 or a 409 may come after the work began."""

REASON_LIMIT = 300
"""Characters of a server's own words (from an error's body) a message shows at most."""
_REASON_KEYS = ("error_description", "detail", "message", "error", "title")
"""Where error bodies say what is wrong: OAuth's ``{"error", "error_description"}``,
FastAPI's and RFC 9457's ``detail``, ``message`` (GitHub's, Express's), ``title``."""


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
    server_reason: str = ""
    """What the failed answer's body says is wrong (see :func:`server_reason`)."""
    auth_failure: str | None = None
    """The ``auth=`` flow that was answering a 401 or 403 failed: why (``OSError: ...``)."""
    auth_running: bool = False
    """An ``auth=`` flow is at work for the request (a sign-in, a token request), not
    waiting on the server's answer to the request itself."""

    @property
    def refused(self) -> bool:
        """Whether the failed answer's status refuses the request before running it
        (400, 401, 403, 404, 413, 422, 429 ...; not a 5xx).

        Example:
            >>> HttpExchange(status=413).refused, HttpExchange(status=500).refused
            (True, False)
        """
        return self.status in _REFUSED

    def describe(self) -> str:
        """One line for messages: ``HTTP 401 Unauthorized: "token expired" (WWW-Authenticate: Bearer ...)``."""
        if self.status is None:
            return self.network_error or "no answer"
        text = f"HTTP {self.status} {self.reason or _phrase(self.status)}".rstrip()
        if self.server_reason:
            text += f": {self.server_reason}"
        if self.www_authenticate:
            text += f" (WWW-Authenticate: {self.www_authenticate})"
        if self.retry_after is not None:
            text += f"; retry after {self.retry_after:g} s"
        if self.auth_failure is not None:
            text += f"; the auth flow then failed: {self.auth_failure}"
        # The reason phrase and the header are the server's too, as its body's words are.
        return safe_text(text)


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


def server_reason(
    body: bytes, content_type: str, phrase: str, hide: Callable[[str], str] = str
) -> str:
    """What an HTTP error's ``body`` says is wrong, on one line of at most
    :data:`REASON_LIMIT` characters, shown by ``hide`` (which masks secrets, before the
    cut), in quotes; ``""`` when it says nothing more than the reason ``phrase``. A
    JSON-RPC error is left out (the SDK reports it), and so is HTML (a page's markup).

    Example:
        >>> body = b'{"error": "insufficient_scope", "error_description": "token lacks the repo scope"}'
        >>> server_reason(body, "application/json", "Forbidden")
        '"insufficient_scope: token lacks the repo scope"'
        >>> server_reason(b"Token expired\\nsign in again", "text/plain", "Unauthorized")
        '"Token expired sign in again"'
        >>> server_reason(b"Not Found", "text/plain", "Not Found"), server_reason(b"<html>", "text/html", "")
        ('', '')
    """
    text = body.decode("utf-8", "replace").strip()
    if not text or "html" in content_type.lower() or text.startswith("<"):
        return ""
    if "json" in content_type.lower() or text.startswith(("{", "[")):
        said = _json_reason(text)
        if said is None:
            return ""
        text = said or text
    text = " ".join(hide(text).split())
    if not text or text.lower() == phrase.lower():
        return ""
    if len(text) > REASON_LIMIT:
        text = text[: REASON_LIMIT - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def _json_reason(text: str) -> str | None:
    """The message of a JSON error body; None for a JSON-RPC error, "" for none found."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return ""  # cut short, or not JSON after all: its text, as it is
    if not isinstance(parsed, dict):
        return ""
    if "jsonrpc" in parsed:
        return None
    error, description = parsed.get("error"), parsed.get("error_description")
    if isinstance(error, str) and isinstance(description, str):
        return f"{error}: {description}"
    for key in _REASON_KEYS:
        value = parsed.get(key)
        if isinstance(value, dict):
            value = value.get("message")
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _phrase(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def sdk_detail(exc: BaseException, hide: Callable[[str], str] = str) -> str:
    """``": <the JSON-RPC error's message>"`` when it adds to the HTTP status, else "";
    the message masked by ``hide``, then made safe to quote (``_error_text.quoted``)."""
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError) and exc.message not in _SDK_STAND_INS:
        return f": {quoted(exc.message, hide)}"
    return ""
