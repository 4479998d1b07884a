"""Seed acceptance items 14-17: handshake, list, call, and MCP adapters in a ToolRegistry
driven by LlmCycle.submit_with_tools next to a local @tool (offline: the model is
agcore_tools.testing's loopback Chat Completions server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    LlmError,
    McpClient,
    McpError,
    ToolRegistry,
)
from agcore_tools.testing import ScriptedChatServer as S

from .conftest import fixture_stdio

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def fixture_client() -> AsyncIterator[McpClient]:
    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        yield client


async def test_14_connect_completes_the_handshake(fixture_client: McpClient) -> None:
    assert fixture_client.connected
    assert fixture_client.protocol_version in ("2025-11-25", "2026-07-28")
    assert fixture_client.server_info == {"name": "fixture", "version": "1.0.0"}


async def test_15_list_tools_returns_the_servers_tools(fixture_client: McpClient) -> None:
    names = [d["function"]["name"] for d in await fixture_client.list_tools()]
    assert {"weather", "echo", "fail"} <= set(names)


async def test_16_call_tool_calls_a_tool(fixture_client: McpClient) -> None:
    assert await fixture_client.call_tool("echo", {"text": "acceptance"}) == "acceptance"


def _registry(client: McpClient) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    registry.register_all(client.into_tools(prefix=True))
    return registry


async def test_17_adapters_run_in_the_tool_loop_next_to_local_tools(
    fixture_client: McpClient,
) -> None:
    registry = _registry(fixture_client)
    script = [
        S.reply_tool_calls(
            [
                ("fixture__weather", {"city": "Paris"}, "call_mcp"),
                ("add", {"a": 2, "b": 3}, "call_local"),
                ("fixture__fail", {"message": "no such city"}, "call_err"),
            ]
        ),
        S.reply_text("Paris is 21.5 °C, and 2 + 3 = 5."),
    ]
    with S(script) as server:
        cycle = LlmCycle(CycleConfig("test-model"), client=server.client(timeout=10.0))
        try:
            response = await cycle.submit_with_tools("Weather in Paris, and 2 + 3?", registry)
        finally:
            await asyncio.wait_for(cycle.client.close(), 5)
        first, second = (request.json for request in server.requests)

    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered[0] == "add" and "fixture__weather" in offered
    assert response.text == "Paris is 21.5 °C, and 2 + 3 = 5."
    answers = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert answers["call_mcp"] == '{"city":"Paris","temperature":21.5}'
    assert answers["call_local"] == "5"
    # isError is recoverable: the model reads the server's text and the loop goes on.
    assert "no such city" in answers["call_err"]
    assert [inv.tool_name for inv in response.invocations] == [
        "fixture__weather",
        "add",
        "fixture__fail",
    ]


async def test_17_a_dead_server_stops_the_loop_with_the_mcp_error(
    fixture_client: McpClient,
) -> None:
    registry = _registry(fixture_client)
    script = [
        S.reply_tool_calls([("fixture__die", {"code": 1}, "call_die")]),
        S.reply_text("unreachable"),
    ]
    with S(script) as server:
        cycle = LlmCycle(CycleConfig("test-model"), client=server.client(timeout=10.0))
        try:
            with pytest.raises(LlmError) as info:
                await cycle.submit_with_tools("Please crash.", registry)
        finally:
            await asyncio.wait_for(cycle.client.close(), 5)
    assert isinstance(info.value.__cause__, McpError)
    assert "exited with code 1" in str(info.value.__cause__)
    # The history stays valid: the failed call got its tool message.
    assert cycle.messages[-1]["role"] == "tool"
    assert cycle.messages[-1]["tool_call_id"] == "call_die"
