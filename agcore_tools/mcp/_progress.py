"""MCP progress: the SDK callback that asks a server for ``notifications/progress``;
and the call's idempotency key, which goes out in the same request's ``_meta``.

Each update goes to the ``agcore_tools.mcp.progress`` logger (DEBUG), to the client's
``on_progress``, and, when the call came through the registry with a listening
context, to that context as a :class:`~agcore_tools.ToolProgress` (in the streaming
loop, an event). :class:`~agcore_tools.mcp._adapter.McpTool` names that context in
:data:`CALLER` for the length of its call.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from typing import Any

from ..base import ToolContext
from ._callbacks import call_user
from ._serverlog import safe_text
from .models import McpProgress

__all__ = ["CALLER", "CALL_KEY", "IDEMPOTENCY_META_KEY", "call_meta", "progress_callback"]

progress_logger = logging.getLogger("agcore_tools.mcp.progress")

CALLER: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "agcore_tools_mcp_caller", default=None
)
"""The context of the registry call in flight, when someone listens to its events."""

CALL_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agcore_tools_mcp_call_key", default=None
)
"""The idempotency key of the registry call in flight (see
:attr:`ToolContext.idempotency_key`), set by the adapter for the length of its call."""

IDEMPOTENCY_META_KEY = "dev.agcore/idempotency-key"
"""The ``_meta`` key a ``tools/call`` carries its idempotency key under."""


def call_meta(meta: Any) -> Any:
    """``meta`` (the connection's ``_meta``, or None) with the call's idempotency key.

    Example:
        >>> token = CALL_KEY.set("run-1:call_1")
        >>> call_meta({"level": "info"})
        {'level': 'info', 'dev.agcore/idempotency-key': 'run-1:call_1'}
        >>> CALL_KEY.reset(token)
        >>> call_meta(None) is None
        True
    """
    key = CALL_KEY.get()
    if key is None:
        return meta
    return {**(meta or {}), IDEMPOTENCY_META_KEY: key}


def progress_callback(
    callback: Any, server: str, tool_name: str, hide: Callable[[str], str] = str
) -> Any:
    """The SDK's ``progress_callback`` for one call, or None when nobody listens (a
    progress token makes the server send updates, so it is only asked for then). The
    log line shows the message as the server's own log messages are logged: masked by
    ``hide`` (the connection's secrets), its control characters escaped, and cut
    (``_serverlog.safe_text``); the callback and the caller get it as sent."""
    caller = CALLER.get()
    if callback is None and caller is None and not progress_logger.isEnabledFor(logging.DEBUG):
        return None

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        update = McpProgress(server, tool_name, progress, total, message)
        shown = None if message is None else safe_text(hide(message))
        progress_logger.debug("[%s] %s: %s/%s %s", server, tool_name, progress, total, shown)
        if caller is not None:
            caller.report_progress(progress, total, message)
        if callback is not None:
            await call_user(callback, update, server)

    return on_progress
