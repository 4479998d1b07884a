"""MCP progress as tool events: server-everything's long-running operation, through the
streaming loop and through run_tool_calls; the server is only asked for progress (a
progress token) when someone listens."""

from __future__ import annotations

import json
import logging

import pytest

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    McpClient,
    StdioTransport,
    ToolContext,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolProgress,
    ToolRegistry,
)
from agcore_tools.mcp._progress import CALLER, progress_callback
from agcore_tools.testing import ScriptedChatServer as S

from .conftest import EVERYTHING, require_node_modules, system_node

pytestmark = pytest.mark.timeout(90)

LONG = "everything__trigger-long-running-operation"


@pytest.fixture
def everything_stdio() -> StdioTransport:
    require_node_modules(EVERYTHING)
    return StdioTransport(system_node(), [str(EVERYTHING), "stdio"])


async def test_server_progress_arrives_as_tool_progress_events_in_the_stream(
    everything_stdio: StdioTransport,
) -> None:
    registry = ToolRegistry()
    script = [
        S.reply_tool_calls([(LONG, {"duration": 0.3, "steps": 3})]),
        S.reply_text("Done."),
    ]
    async with McpClient("everything", everything_stdio, timeout=20) as client:
        registry.register_all(client.into_tools(prefix=True))
        with S(script) as server:
            async with server.client() as openai:
                cycle = LlmCycle(CycleConfig("m"), client=openai)
                async with cycle.submit_stream_with_tools("Run it", registry) as events:
                    seen = [event async for event in events]
    kinds = [type(e).__name__ for e in seen if not type(e).__name__.startswith("Turn")]
    assert kinds == [
        "ToolExecutionStarted",
        "ToolProgress",
        "ToolProgress",
        "ToolProgress",
        "ToolExecutionCompleted",
        "AssistantTextDelta",
    ]
    started = next(e for e in seen if isinstance(e, ToolExecutionStarted))
    progress = [e for e in seen if isinstance(e, ToolProgress)]
    assert [(p.progress, p.total) for p in progress] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
    assert {(p.tool_name, p.call_id) for p in progress} == {(LONG, started.call_id)}
    done = next(e for e in seen if isinstance(e, ToolExecutionCompleted))
    assert done.ok and "Long running operation completed" in done.output
    # Progress never reaches the model: the history holds the final result only.
    history = json.dumps(cycle.messages)
    assert "Long running operation completed" in history
    assert "progress" not in history.lower()


async def test_server_progress_reaches_run_tool_calls_on_event(
    everything_stdio: StdioTransport,
) -> None:
    registry = ToolRegistry()
    updates: list[object] = []
    calls = [
        {
            "id": "call_7",
            "type": "function",
            "function": {"name": LONG, "arguments": '{"duration": 0.2, "steps": 2}'},
        }
    ]
    async with McpClient("everything", everything_stdio, timeout=20) as client:
        registry.register_all(client.into_tools(prefix=True))
        [message] = await registry.run_tool_calls(calls, ctx=ToolContext(on_event=updates.append))
    assert message["tool_call_id"] == "call_7"
    assert "Long running operation completed" in message["content"]
    assert updates == [
        ToolProgress(LONG, "call_7", 1.0, 2.0, None),
        ToolProgress(LONG, "call_7", 2.0, 2.0, None),
    ]


def test_no_listener_means_no_progress_token(caplog: pytest.LogCaptureFixture) -> None:
    # The SDK sends a progress token only with a callback: none is made for nobody.
    caplog.set_level(logging.INFO, "agcore_tools.mcp.progress")
    assert progress_callback(None, "s", "t") is None
    assert progress_callback(print, "s", "t") is not None
    token = CALLER.set(ToolContext(on_event=print))
    try:
        assert progress_callback(None, "s", "t") is not None
    finally:
        CALLER.reset(token)
