"""OpenTelemetry client spans of MCP tool calls (the MCP semantic conventions).

A ``tools/call {tool}`` span (kind CLIENT) covers each :meth:`McpClient.call_tool`,
resends after a reconnect included, and is current while the request is out. The MCP
SDK (2.3 and later) injects the current trace context into every request's
``params._meta`` (``traceparent``, and ``tracestate``/``baggage`` when set), as the
conventions ask, so the server's spans continue this trace; with a global tracer
provider the SDK also adds its own ``MCP send ...`` span per JSON-RPC request under
this one. With tracing off (see ``agcore_tools/_otel.py``) the wrapper costs a lookup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from .. import _otel
from .._clock import expired_limit
from .._span_content import content_json
from ..error import McpError, McpTimeoutError, ToolExecutionError
from ._recover import refused_by_server
from ._session import Session

__all__ = ["traced_call_tool"]


async def traced_call_tool(
    tracer: Any,
    session: Session,
    name: str,
    args: Mapping[str, Any] | None,
    timeout: float | None,
) -> Any:
    """:meth:`Session.call_tool` in a ``tools/call {name}`` span of ``tracer``
    (:meth:`McpClient.call_tool` calls it when tracing is on)."""
    attributes: dict[str, Any] = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": _otel.short(name),
        "gen_ai.operation.name": "execute_tool",
    }
    attributes.update(_connection_attributes(session))
    content = _otel.capture_content()
    limit = _otel.content_limit()
    if content:
        attributes["gen_ai.tool.call.arguments"] = content_json(dict(args or {}), limit)
    ot = _otel.api()
    span = tracer.start_span(f"tools/call {name}", kind=ot.CLIENT, attributes=attributes)
    # Current during the request: the SDK sends the current context in _meta.
    token = ot.attach(ot.in_context(span))
    try:
        result = await session.call_tool(name, args, timeout)
    except asyncio.CancelledError as exc:
        # The registry's (or the loop's) time limit for the call cancels it from outside;
        # that is this span's timeout, as the client's own timeout would be.
        expired = expired_limit()
        if expired is None:
            _otel.fail(span, _otel.error_type(exc), _otel.raised(exc))
        else:
            _otel.fail(span, "timeout", f"timed out after {expired:g} s (the caller's time limit)")
        raise
    except BaseException as exc:
        code = _answered_code(exc)
        if code is not None:  # the conventions' error.type, and the response's code
            span.set_attribute("rpc.response.status_code", code)
        _otel.fail(span, _error_type(exc) if code is None else code, _otel.raised(exc))
        raise
    else:
        if content:
            span.set_attribute("gen_ai.tool.call.result", content_json(result, limit))
        return result
    finally:
        ot.detach(token)
        span.end()


def _connection_attributes(session: Session) -> dict[str, Any]:
    conn = session.conn
    if conn is None:
        return {}
    attributes: dict[str, Any] = {"network.transport": "tcp" if conn.http else "pipe"}
    client = conn.client
    version = getattr(client, "protocol_version", None) if client is not None else None
    if isinstance(version, str):
        attributes["mcp.protocol.version"] = version
    return attributes


def _answered_code(exc: BaseException) -> str | None:
    """The JSON-RPC error code of the server's error answer to the call (``"-32602"``),
    or None when ``exc`` is no such answer."""
    if not isinstance(exc, McpError) or not refused_by_server(exc):
        return None
    code = getattr(exc.__cause__, "code", None)
    return str(code) if isinstance(code, int) else None


def _error_type(exc: BaseException) -> str:
    # The conventions' values where they name one; else the exception's class.
    if isinstance(exc, McpTimeoutError):
        return "timeout"
    if isinstance(exc, ToolExecutionError):
        return "tool_error"  # the server answered isError: true
    if isinstance(exc, McpError) and exc.status_code is not None:
        return str(exc.status_code)
    return _otel.error_type(exc)
