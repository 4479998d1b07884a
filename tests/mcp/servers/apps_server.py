"""An MCP Apps server (the SDK's ``mcp.server.apps``) over stdio, shaped like
``@modelcontextprotocol/server-pdf``: viewer tools with their ``ui://`` page
(``open_document`` answers the model in its text and the viewer in its
``structuredContent``, as ``display_pdf`` does), the page's callbacks, which the server offers to its app alone
(``_meta.ui.visibility: ["app"]``; ``poll`` the older flat way,
``_meta["ui/visibility"]``), beside a plain tool.

Run: ``python apps_server.py``. ``save`` writes its text to the file ``SAVED_TO`` names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, TypedDict

from mcp.server.apps import Apps
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent

VIEWER = "ui://viewer/app.html"

apps = Apps()


@apps.tool(resource_uri=VIEWER)
def show(name: str) -> str:
    """Show a document in the viewer."""
    return f"showing {name}"


@apps.tool(resource_uri=VIEWER, visibility=["app"])
def save(name: str, text: str) -> str:
    """The viewer's save callback: overwrites the document with the text."""
    Path(os.environ["SAVED_TO"]).write_text(f"{name}: {text}")
    return "saved"


@apps.tool(resource_uri=VIEWER, visibility=["model", "app"])
def zoom(percent: int) -> str:
    """Zoom the viewer (for the model and the app alike)."""
    return f"zoomed to {percent}%"


class Opened(TypedDict):
    viewUUID: str
    url: str


@apps.tool(resource_uri=VIEWER)
def open_document(url: str) -> Annotated[CallToolResult, Opened]:
    """Open a document in the viewer: its text is for the model, its structured content
    for the viewer (as server-pdf's display_pdf answers)."""
    return CallToolResult(
        content=[TextContent(type="text", text=f"Opened {url} in view v-1; do not open it again.")],
        structured_content={"viewUUID": "v-1", "url": url},
    )


apps.add_html_resource(VIEWER, "<!doctype html><title>viewer</title>")

server = MCPServer("apps", extensions=[apps])


@server.tool(meta={"ui/visibility": ["app"]})
def poll() -> str:
    """The viewer's poll callback (its visibility the older flat way)."""
    return "no commands"


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


if __name__ == "__main__":
    server.run()
