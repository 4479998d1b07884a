"""A test MCP server that reports the trace context a request carried in ``_meta``.

Run over stdio: ``python trace_server.py``. Its one tool, ``trace_context``, answers with
the ``traceparent`` (and ``tracestate``) of its own request, so a test can check what the
client propagated, as an instrumented server would read it.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

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


if __name__ == "__main__":
    server.run("stdio")
