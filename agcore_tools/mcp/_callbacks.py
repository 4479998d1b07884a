"""Calling the user's callbacks (``on_log``, ``on_progress``) from inside the MCP SDK's
tasks: sync or async alike, and a callback's failure is logged, never raised into the
SDK, where it would break the connection."""

from __future__ import annotations

import inspect
import logging
from typing import Any

__all__ = ["call_user"]

logger = logging.getLogger("agcore_tools.mcp")


async def call_user(callback: Any, value: Any, server_name: str) -> None:
    """Call a user's callback (sync or async); its failure is logged, never raised into the SDK."""
    try:
        result = callback(value)
        if inspect.isawaitable(result):
            await result
    except Exception:  # a user's callback must not break the connection
        logger.exception("MCP server '%s': callback %r raised", server_name, callback)
