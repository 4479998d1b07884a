"""A test MCP server that reports the trace context a request carried in ``_meta``.

Run over stdio: ``python trace_server.py``. Its one tool, ``trace_context``, answers with
the ``traceparent`` (and ``tracestate``) of its own request, so a test can check what the
client propagated, as an instrumented server would read it.
"""

from __future__ import annotations

import asyncio
import base64

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import BlobResourceContents, EmbeddedResource, ImageContent, TextContent

server = MCPServer("trace", version="1.0.0", log_level="WARNING")


@server.tool()
def trace_context(ctx: Context) -> dict[str, str | None]:
    """The W3C trace context fields of this request's ``_meta``."""
    meta = ctx.request_context.meta or {}
    return {"traceparent": meta.get("traceparent"), "tracestate": meta.get("tracestate")}


@server.tool()
def fail() -> str:
    """Always fails (the result has isError: true)."""
    raise ValueError("this tool always fails")


@server.tool()
async def slow(ctx: Context) -> str:
    """Log "started", then take a minute (a client's time limit or cancel ends it)."""
    await ctx.log("warning", "started")
    await asyncio.sleep(60)
    return "late"


# Not UTF-8 text: recorded as it is, it would fail to serialise.
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


@server.tool(structured_output=False)
def picture() -> list[TextContent | ImageContent | EmbeddedResource]:
    """A caption, a PNG, an image part of a media type no image has, a PDF blob (a File
    once received) and a blob of no kind a model reads (kept as typed JSON)."""
    data = base64.b64encode(PNG).decode()
    blob = BlobResourceContents(uri="file:///r.pdf", mime_type="application/pdf", blob=data)
    raw = BlobResourceContents(uri="file:///r.bin", mime_type="application/octet-stream", blob=data)
    return [
        TextContent(type="text", text="a chart:"),
        ImageContent(type="image", data=data, mime_type="image/png"),
        ImageContent(type="image", data=data, mime_type="text/plain"),  # kept as typed JSON
        EmbeddedResource(type="resource", resource=blob),
        EmbeddedResource(type="resource", resource=raw),
    ]


if __name__ == "__main__":
    server.run("stdio")
