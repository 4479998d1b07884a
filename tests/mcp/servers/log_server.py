"""A stdio test MCP server written with the SDK's MCPServer that sends what it is told
to as log messages (``notifications/message``): text a hostile server would send.

Run: ``python log_server.py``. Its ``API_TOKEN`` environment variable is what a secret
in the text stands for (``{token}``).
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("logs", log_level="WARNING")


@server.tool(structured_output=False)
async def log(
    ctx: Context, text: str, count: int = 1, repeat: int = 1, level: str = "error"
) -> str:
    """Send ``text`` repeated ``repeat`` times, as ``count`` log messages at ``level``,
    before answering."""
    data = text.replace("{token}", os.environ.get("API_TOKEN", "-")) * repeat
    for _ in range(count):
        await ctx.log(level, data)  # type: ignore[arg-type]
    return "logged"


@server.tool(structured_output=False)
async def log_as(ctx: Context, text: str, levels: list[str]) -> str:
    """Send ``text`` once at each of ``levels``, spelt as given, MCP's or not
    (``"warn"``, ``"INFO"``), as servers outside the SDKs do."""
    import mcp_types as types

    for level in levels:
        # model_construct: the SDK's own check would refuse the levels that are not MCP's.
        params = types.LoggingMessageNotificationParams.model_construct(level=level, data=text)
        notification = types.LoggingMessageNotification(params=params)
        await ctx.request_context.session.send_notification(notification)
    return "logged"


if __name__ == "__main__":
    server.run()
