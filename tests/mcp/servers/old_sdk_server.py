"""A FastMCP server on the MCP Python SDK 1.x, over stdio, with one tool: ``add``.

Run by the Python of the venv ``make old-mcp-sdk`` builds (the SDK 1.6.0, as chroma-mcp
pins it; see ``old_sdk_python()`` in conftest.py). SDKs up to 1.8 validate each request
against the methods they know and exit (code 1, a pydantic dump on stderr) on any other,
such as the ``server/discover`` probe of 2026-07-28.
"""

from mcp.server.fastmcp import FastMCP

server = FastMCP("old")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    server.run()
