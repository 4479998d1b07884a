"""A test MCP server written with the SDK's MCPServer (the SDK's FastMCP), whose tools
return plain values: the SDK sends such a value ``v`` as ``structuredContent``
``{"result": v}`` beside ``v`` as text, and lists an output schema whose one property
is ``result``. Over stdio: ``python wrapped_server.py``.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

NOTE = "---\ntitle: Runbook\n---\n\n# Runbook\n\n" + "\n".join(
    f'- step {i}: run `psql -c "select {i}"` and check the "status" column' for i in range(40)
)

server = MCPServer("wrapped", version="1.0.0", log_level="WARNING")


@server.tool()
def read_note() -> str:
    """The runbook note, as markdown."""
    return NOTE


@server.tool()
def count(text: str) -> int:
    """How many words a text has."""
    return len(text.split())


@server.tool()
def tags() -> list[str]:
    """The note's tags (the SDK sends one text part per item)."""
    return ["ops", "db"]


@server.tool()
def sizes() -> list[int]:
    """The sizes of the note's sections (one text part per item, each its JSON)."""
    return [3, 40]


@server.tool()
def grid() -> list[list[int]]:
    """A grid of two rows (the SDK sends one text part per innermost item)."""
    return [[1, 2], [3, 4]]


@server.tool()
def summary() -> Annotated[CallToolResult, str]:
    """The note, with a text of the server's own that says less than the value."""
    text = TextContent(type="text", text="A runbook of 40 steps.")
    return CallToolResult(content=[text], structured_content={"result": NOTE})


class Verdict(BaseModel):
    result: str


@server.tool()
def verdict() -> Verdict:
    """An object whose one field is named result (the SDK sends its JSON as text)."""
    return Verdict(result="pass")


if __name__ == "__main__":
    server.run()
