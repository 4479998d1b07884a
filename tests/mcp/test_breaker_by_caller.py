"""A call of an MCP tool the app made without a connection (before connect(), after
close()) is its own mistake, which no breaker counts; a server that is down still is."""

from __future__ import annotations

import asyncio
import sys

import pytest

from agcore_tools import (
    Breaker,
    McpClient,
    McpError,
    McpNotInitializedError,
    StdioTransport,
    ToolPolicy,
    ToolRegistry,
)
from agcore_tools.mcp import McpTool, McpToolInfo

from .conftest import FIXTURE, assert_no_stray_tasks

POLICY = ToolPolicy(breaker=Breaker(failures=1, window=60.0, cool_down=60.0))


def _echo(client: McpClient) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(McpTool(client, McpToolInfo("echo", "Echo text."), "echo", []))
    registry.set_policy(POLICY, category="mcp:fixture")
    return registry


async def test_a_call_before_connect_does_not_open_the_breaker() -> None:
    client = McpClient("fixture", StdioTransport(sys.executable, [str(FIXTURE)]))
    registry = _echo(client)
    for _ in range(3):
        [early] = await registry.invoke_all([("echo", {"text": "hi"})])
        assert isinstance(early.error, McpNotInitializedError) and early.error.by_caller
        assert "call connect() first" in str(early.error)
    assert registry.unavailable_tools() == []  # it opened at the first such call before
    async with client:
        [call] = await registry.invoke_all([("echo", {"text": "hi"})])
        assert call.output == "hi"


async def test_a_call_after_close_does_not_open_the_breaker() -> None:
    async with McpClient("fixture", StdioTransport(sys.executable, [str(FIXTURE)])) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        registry.set_policy(POLICY, category="mcp:fixture")
        [call] = await registry.invoke_all([("echo", {"text": "hi"})])
        assert call.output == "hi"
    [late] = await registry.invoke_all([("echo", {"text": "hi"})])
    assert isinstance(late.error, McpNotInitializedError) and late.error.by_caller
    assert registry.unavailable_tools() == []


async def test_a_server_that_failed_to_start_still_opens_the_breaker() -> None:
    # The same error class, for a server that is down: it counts.
    transport = StdioTransport(sys.executable, ["-c", "import sys; sys.exit(3)"])
    client = McpClient("fixture", transport, timeout=15)
    registry = _echo(client)
    with pytest.raises(McpError):
        await client.connect()
    [down] = await registry.invoke_all([("echo", {"text": "hi"})])
    assert isinstance(down.error, McpNotInitializedError) and not down.error.by_caller
    assert registry.unavailable_tools() == ["echo"]
    await client.close()


def test_a_call_after_the_connecting_loop_ended_does_not_open_the_breaker() -> None:
    # asyncio.run(client.connect()) leaves a connection that ended with its loop: the
    # app's mistake, as a call before connect() is.
    client = McpClient("fixture", StdioTransport(sys.executable, [str(FIXTURE)]), timeout=15)
    registry = _echo(client)
    asyncio.run(client.connect())

    async def call() -> None:
        [late] = await registry.invoke_all([("echo", {"text": "hi"})])
        assert isinstance(late.error, McpNotInitializedError) and late.error.by_caller
        assert registry.unavailable_tools() == []
        await client.close()

    asyncio.run(call())


async def test_a_call_the_app_cut_off_by_closing_the_client_does_not_open_the_breaker() -> None:
    # The server has the call (it is asking the client's model) when the app closes the
    # client: "the client was closed" is the app's doing, not the server's.
    asked = asyncio.Event()

    async def sample(ctx: object, params: object) -> None:
        asked.set()
        await asyncio.sleep(30)  # cut off by close()

    transport = StdioTransport(sys.executable, [str(FIXTURE)])
    client = McpClient("fixture", transport, timeout=15, protocol="legacy", sampling_handler=sample)
    await client.connect()
    registry = ToolRegistry()
    registry.register_all(client.into_tools())
    registry.set_policy(POLICY, category="mcp:fixture")
    call = asyncio.create_task(registry.invoke_all([("sample", {"prompt": "hi"})]))
    await asyncio.wait_for(asked.wait(), 10)
    await client.close()
    [cut] = await asyncio.wait_for(call, 10)
    assert isinstance(cut.error, McpNotInitializedError) and cut.error.by_caller
    assert "the client was closed" in str(cut.error)
    assert registry.unavailable_tools() == []  # it opened here before
    await assert_no_stray_tasks()  # the handler cut off with its call
