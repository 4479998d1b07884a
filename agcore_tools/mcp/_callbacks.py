"""Calling the user's callbacks (``on_log``, ``on_progress``) from inside the MCP SDK's
tasks: sync or async alike, and a callback's failure is logged, never raised into the
SDK, where it would break the connection. The handlers that answer the server
(``sampling_handler``, ``elicitation_handler``) are guarded too: a failure is told to
the server as a generic error, never its text, which may hold secrets."""

from __future__ import annotations

import inspect
import logging
from typing import Any

__all__ = ["call_user", "guarded_handler"]

logger = logging.getLogger("agcore_tools.mcp")


async def call_user(callback: Any, value: Any, server_name: str) -> None:
    """Call a user's callback (sync or async); its failure is logged, never raised into the SDK."""
    try:
        result = callback(value)
        if inspect.isawaitable(result):
            await result
    except Exception:  # a user's callback must not break the connection
        logger.exception("MCP server '%s': callback %r raised", server_name, callback)


def guarded_handler(handler: Any, what: str, server_name: str) -> Any:
    """``handler`` (an app's async SDK callback: ``context, params``) whose failure the
    server gets as a JSON-RPC error saying only that ``what`` failed; the exception's
    type is logged at WARNING (not its text, which may hold secrets). None stays None.

    Example:
        >>> import asyncio
        >>> async def broken(context: Any, params: Any) -> Any:
        ...     raise RuntimeError("token sk-123 rejected")
        >>> asyncio.run(guarded_handler(broken, "sampling_handler", "demo")(None, None)).message
        "the client's sampling_handler failed"
    """
    if handler is None:
        return None
    from mcp_types import INTERNAL_ERROR, ErrorData

    async def guarded(context: Any, params: Any) -> Any:
        try:
            return await handler(context, params)
        except Exception as exc:  # noqa: BLE001 - its text may hold secrets: not logged, not sent
            logger.warning(
                "MCP server '%s': the client's %s raised %s; the server was told it failed",
                server_name,
                what,
                type(exc).__name__,
            )
            return ErrorData(code=INTERNAL_ERROR, message=f"the client's {what} failed")

    return guarded
