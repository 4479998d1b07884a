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

__all__ = [
    "CALLER",
    "CALL_KEY",
    "IDEMPOTENCY_META_KEY",
    "ProgressRelay",
    "call_meta",
    "progress_callback",
]

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


class ProgressRelay:
    """The SDK's ``progress_callback`` for one call: each update to the log, to the
    client's ``on_progress`` and to :attr:`caller`.

    A call paused on a 2025-11-25 question runs on while the loop waits, and its
    updates after the answer belong to the run that resumed it: :attr:`caller` is
    pointed at that run's context then (see ``_input_pause``), else they went to the
    context of the run that paused, which has ended."""

    __slots__ = ("callback", "caller", "hide", "server", "tool_name")

    def __init__(
        self,
        callback: Any,
        caller: ToolContext | None,
        server: str,
        tool_name: str,
        hide: Callable[[str], str],
    ) -> None:
        self.callback = callback
        self.caller = caller
        """The listening context of the registry call the updates belong to, or None."""
        self.server = server
        self.tool_name = tool_name
        self.hide = hide

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        server, tool_name = self.server, self.tool_name
        shown = None if message is None else safe_text(self.hide(message))
        progress_logger.debug("[%s] %s: %s/%s %s", server, tool_name, progress, total, shown)
        caller = self.caller
        if caller is not None:
            caller.report_progress(progress, total, message)
        if self.callback is not None:
            update = McpProgress(server, tool_name, progress, total, message)
            await call_user(self.callback, update, server)


def progress_callback(
    callback: Any, server: str, tool_name: str, hide: Callable[[str], str] = str
) -> ProgressRelay | None:
    """The SDK's ``progress_callback`` for one call, or None when nobody listens (a
    progress token makes the server send updates, so it is only asked for then). The
    log line shows the message as the server's own log messages are logged: masked by
    ``hide`` (the connection's secrets), its control characters escaped, and cut
    (``_serverlog.safe_text``); the callback and the caller get it as sent."""
    caller = CALLER.get()
    if callback is None and caller is None and not progress_logger.isEnabledFor(logging.DEBUG):
        return None
    return ProgressRelay(callback, caller, server, tool_name, hide)
