"""A stdio test MCP server written with the SDK's MCPServer whose tool list is always
changing: each ``tools/list`` it answers is preceded by a
``notifications/tools/list_changed``, as a server whose tools churn (or a buggy one
that floods the notice) sends. ``listed`` says how many ``tools/list`` requests came; ``flood`` sends
notices with no change at all.

Run: ``python churn_server.py`` (speaks the 2025-11-25 handshake era's notifications).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("churn")
listed_count = 0


@server.tool(structured_output=False)
def listed() -> str:
    """How many tools/list requests this server has answered."""
    return str(listed_count)


@server.tool(structured_output=False)
def add(name: str) -> str:
    """Register a tool called ``name``."""
    server.add_tool(lambda: name, name=name, description=f"Added at run time: {name}")
    return f"added {name}"


@server.tool(structured_output=False)
async def flood(count: int, ctx: Context) -> str:
    """Send ``count`` notifications/tools/list_changed, then answer."""
    for _ in range(count):
        await ctx.session.send_tool_list_changed()
    return f"sent {count}"


lowlevel = server._lowlevel_server
_listing = lowlevel.get_request_handler("tools/list")
assert _listing is not None


async def churning_list(ctx: Any, params: Any) -> Any:
    """Say the list changed, then list it."""
    global listed_count
    listed_count += 1
    await ctx.session.send_tool_list_changed()
    return await _listing.handler(ctx, params)


lowlevel.add_request_handler("tools/list", _listing.params_type, churning_list)


if __name__ == "__main__":
    server.run()
