"""What an :class:`~agcore_tools.McpClient` without an ``elicitation_handler`` answers.

A server may ask the user for input in the middle of a tool call (``elicitation/create``).
With no handler the client still advertises elicitation and declines every request, so
the server's tool sees a plain "the user declined" instead of a protocol error, and the
app's log says what was asked and how to answer it.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["declining_handler"]

logger = logging.getLogger("agcore_tools.mcp")


def declining_handler(server_name: str) -> Any:
    """An SDK elicitation callback that declines every request, logging why.

    Example:
        >>> import asyncio
        >>> from mcp_types import ElicitRequestFormParams
        >>> decline = declining_handler("demo")
        >>> schema = {"type": "object", "properties": {}}
        >>> params = ElicitRequestFormParams(message="Your name?", requested_schema=schema)
        >>> asyncio.run(decline(None, params)).action
        'decline'
    """

    async def decline(context: Any, params: Any) -> Any:
        from mcp_types import ElicitResult

        logger.warning(
            "MCP server '%s' asked for user input (%.200r); declined: the McpClient has no "
            "elicitation_handler (pass McpClient(elicitation_handler=...) to answer)",
            server_name,
            getattr(params, "message", ""),
        )
        return ElicitResult(action="decline")

    return decline
