"""MCP client spans (the MCP semantic conventions) and the trace context the server
receives in ``params._meta``, against a real MCPServer over stdio."""

from __future__ import annotations

import asyncio
import json
import re
import sys

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    McpClient,
    McpError,
    StdioTransport,
    ToolExecutionError,
    ToolRegistry,
    configure_tracing,
)
from agcore_tools.mcp import McpLogMessage
from agcore_tools.testing import ScriptedChatServer as S
from tests._otel import attributes, recording

from .conftest import SERVERS, fixture_stdio

TRACE_SERVER = SERVERS / "trace_server.py"


def trace_client() -> McpClient:
    return McpClient("trace", StdioTransport(sys.executable, [str(TRACE_SERVER)]), timeout=30)


async def test_a_loop_calling_an_mcp_tool_sends_its_trace_context_to_the_server() -> None:
    script = [
        S.reply_tool_calls([("trace_context", {}, "call_1"), ("fail", {}, "call_2")]),
        S.reply_text("done"),
    ]
    with recording() as spans, S(script) as server:
        async with trace_client() as mcp, server.client() as openai:
            registry = ToolRegistry()
            registry.register_all(mcp.into_tools())
            response = await LlmCycle(CycleConfig("m"), client=openai).submit_with_tools(
                "What trace am I in?", registry
            )
    assert response.text == "done"
    assert sorted(spans.tree()) == [
        ("chat m", "invoke_agent"),
        ("chat m", "invoke_agent"),
        ("execute_tool fail", "invoke_agent"),
        ("execute_tool trace_context", "invoke_agent"),
        ("invoke_agent", None),
        ("tools/call fail", "execute_tool fail"),
        ("tools/call trace_context", "execute_tool trace_context"),
    ]
    call = spans.one("tools/call trace_context")
    assert call.kind is SpanKind.CLIENT
    recorded = attributes(call)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", recorded.pop("mcp.protocol.version"))
    assert recorded == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "trace_context",
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "pipe",
    }
    # The server read the client span as its parent from the request's _meta.
    received = response.invocations[0].output
    version, trace_id, parent_id, flags = received["traceparent"].split("-")
    assert (version, trace_id, parent_id) == (
        "00",
        f"{call.context.trace_id:032x}",
        f"{call.context.span_id:016x}",
    )
    assert int(flags, 16) & 1  # sampled
    # isError: true is the conventions' tool_error on the MCP span.
    failed = spans.one("tools/call fail")
    assert attributes(failed)["error.type"] == "tool_error"
    assert failed.status.status_code is StatusCode.ERROR
    assert isinstance(response.invocations[1].error, ToolExecutionError)
    assert attributes(spans.one("execute_tool fail"))["error.type"] == "ToolExecutionError"


async def test_without_tracing_the_request_carries_no_trace_context() -> None:
    configure_tracing(enabled=False)
    try:
        async with trace_client() as mcp:
            received = await mcp.call_tool("trace_context")
    finally:
        configure_tracing()
    assert received == {"traceparent": None, "tracestate": None}


async def test_arguments_and_results_of_mcp_calls_are_recorded_only_when_asked() -> None:
    with recording(capture_content=True) as spans:
        async with trace_client() as mcp:
            received = await mcp.call_tool("trace_context", {})
    recorded = attributes(spans.one("tools/call trace_context"))
    assert recorded["gen_ai.tool.call.arguments"] == "{}"
    assert received["traceparent"] in recorded["gen_ai.tool.call.result"]


async def test_mcp_image_and_blob_results_are_recorded_as_stubs_and_never_fail_a_call() -> None:
    with recording(capture_content=True) as spans:
        async with trace_client() as mcp:
            registry = ToolRegistry()
            registry.register_all(mcp.into_tools())
            [invocation] = await registry.invoke_all([("picture", {})])
    assert invocation.error is None
    assert [type(part).__name__ for part in invocation.output] == ["str", "Image", *["dict"] * 3]
    image = {"type": "image", "media_type": "image/png", "size": 264}
    expected = [
        "a chart:",
        image,
        {**image, "media_type": "text/plain"},
        {
            "type": "resource",
            "resource": {
                "uri": "file:///r.pdf",
                "mimeType": "application/pdf",
                "blob": {
                    "type": "file",
                    "media_type": "application/pdf",
                    "filename": "r.pdf",
                    "size": 264,
                },
            },
        },
        {
            "type": "resource",
            "resource": {
                "uri": "file:///r.bin",
                "mimeType": "application/octet-stream",
                "blob": {"type": "blob", "media_type": "application/octet-stream", "size": 264},
            },
        },
    ]
    for name in ("tools/call picture", "execute_tool picture"):
        span = spans.one(name)
        assert span.status.status_code is StatusCode.UNSET
        assert json.loads(attributes(span)["gen_ai.tool.call.result"]) == expected


async def test_an_mcp_call_cut_by_its_callers_time_limit_is_a_timeout_on_its_span() -> None:
    started = asyncio.Event()

    def on_log(message: McpLogMessage) -> None:
        if message.data == "started":
            started.set()

    with recording() as spans:
        client = McpClient(
            "trace", StdioTransport(sys.executable, [str(TRACE_SERVER)]), timeout=30, on_log=on_log
        )
        async with client as mcp:
            registry = ToolRegistry()
            registry.register_all(mcp.into_tools())
            # The registry's (the loop's tool_timeout) limit, not the client's own.
            [invocation] = await registry.invoke_all([("slow", {})], timeout=0.5)
            assert type(invocation.error).__name__ == "ToolTimeoutError"
            assert attributes(spans.one("execute_tool slow"))["error.type"] == "ToolTimeoutError"
            cut = spans.one("tools/call slow")
            assert attributes(cut)["error.type"] == "timeout"
            assert cut.status.description == "timed out after 0.5 s (the caller's time limit)"
            # A cancellation says so, and is no timeout.
            started.clear()
            call = asyncio.ensure_future(mcp.call_tool("slow"))
            await asyncio.wait_for(started.wait(), 10)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
    cancelled = spans.named("tools/call slow")[-1]
    assert attributes(cancelled)["error.type"] == "CancelledError"
    assert cancelled.status.description == "CancelledError: cancelled by the caller"


async def test_a_json_rpc_error_answer_is_its_code_on_the_mcp_span() -> None:
    # The MCP conventions: error.type is the JSON-RPC error code when the server answers
    # with one, and so is rpc.response.status_code. Before: the error class, McpError.
    with recording() as spans:
        async with McpClient("fx", fixture_stdio(), timeout=30) as mcp:
            with pytest.raises(McpError, match=r"Unknown vault: x"):
                await mcp.call_tool("open_vault", {"vault": "x"})
            with pytest.raises(ToolExecutionError):
                await mcp.call_tool("fail", {"message": "no"})
    refused = attributes(spans.one("tools/call open_vault"))
    assert (refused["error.type"], refused["rpc.response.status_code"]) == ("-32602", "-32602")
    failed = attributes(spans.one("tools/call fail"))
    assert failed["error.type"] == "tool_error"  # isError: true, no JSON-RPC error
    assert "rpc.response.status_code" not in failed
