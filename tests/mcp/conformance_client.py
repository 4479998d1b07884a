"""The client program the MCP conformance suite runs (client side).

Usage: ``python conformance_client.py <server-url>``; the scenario's name is in
``MCP_CONFORMANCE_SCENARIO``. Built on :class:`agcore_tools.McpClient` only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any

import mcp_types as types

from agcore_tools import McpClient, StreamableHttpTransport

log = logging.getLogger("conformance_client")


async def accept_with_defaults(
    context: Any, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """Accept an elicitation, filling every field from its schema's default (SEP-1034)."""
    schema = getattr(params, "requested_schema", None) or {}
    content = {
        name: spec["default"]
        for name, spec in schema.get("properties", {}).items()
        if isinstance(spec, dict) and "default" in spec
    }
    return types.ElicitResult(action="accept", content=content)


# The tool each scenario's server offers, and the arguments it expects.
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


async def run(url: str, scenario: str) -> None:
    client = McpClient(
        "conformance",
        StreamableHttpTransport(url),
        timeout=20,
        elicitation_handler=accept_with_defaults,
    )
    async with client:
        log.info("connected: %s, protocol %s", client.server_info, client.protocol_version)
        tools = [d["function"]["name"] for d in await client.list_tools()]
        log.info("tools: %s", tools)
        if scenario in CALLS:
            name, args = CALLS[scenario]
            result = await client.call_tool(name, args)
            log.info("%s -> %r", name, result)


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    asyncio.run(run(sys.argv[-1], scenario))


if __name__ == "__main__":
    main()
