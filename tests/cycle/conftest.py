"""Fixtures for the LLM loop tests: a real loopback server and cycles talking to it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from agcore_tools import CycleConfig, LlmCycle, ToolRegistry
from agcore_tools.testing import ScriptedChatServer, ScriptItem

S = ScriptedChatServer


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedChatServer]]:
    """Start a ScriptedChatServer with a script; every one is stopped after the test."""
    servers: list[ScriptedChatServer] = []

    def start(*script: ScriptItem, **options: Any) -> ScriptedChatServer:
        server = ScriptedChatServer(script, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
async def make_cycle() -> AsyncIterator[Callable[..., LlmCycle]]:
    """Build an LlmCycle talking to a server; its client is closed after the test."""
    cycles: list[LlmCycle] = []

    def build(
        server: ScriptedChatServer,
        *,
        system_prompt: str | None = None,
        client_options: dict[str, Any] | None = None,
        **config: Any,
    ) -> LlmCycle:
        config.setdefault("retry_initial_delay", 0.01)
        client = server.client(**{"timeout": 10.0, **(client_options or {})})
        cycle = LlmCycle(
            CycleConfig("test-model", **config), client=client, system_prompt=system_prompt
        )
        cycles.append(cycle)
        return cycle

    yield build
    for cycle in cycles:
        await asyncio.wait_for(cycle.client.close(), 5)


@pytest.fixture
def calc() -> ToolRegistry:
    """A registry with a few small tools; ``calc.runs`` lists every call made."""
    registry = ToolRegistry()
    runs: list[tuple[str, dict[str, Any]]] = []
    registry.runs = runs  # type: ignore[attr-defined]

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        runs.append(("add", {"a": a, "b": b}))
        return a + b

    @registry.tool
    async def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        runs.append(("weather", {"city": city}))
        return {"city": city, "temp_c": 21, "sky": "clear"}

    @registry.tool
    def fail(reason: str) -> str:
        """Always fails."""
        runs.append(("fail", {"reason": reason}))
        raise ValueError(reason)

    return registry


def tool_messages(messages: list[dict[str, Any]]) -> dict[str, str]:
    """tool_call_id -> content of every tool message."""
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def assert_history_valid(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call is answered by exactly one tool message right after it."""
    i = 0
    while i < len(messages):
        message = messages[i]
        if message["role"] == "assistant" and message.get("tool_calls"):
            ids = [call["id"] for call in message["tool_calls"]]
            answers = messages[i + 1 : i + 1 + len(ids)]
            assert [m["role"] for m in answers] == ["tool"] * len(ids), messages
            assert [m["tool_call_id"] for m in answers] == ids
            i += 1 + len(ids)
            continue
        assert message["role"] != "tool", f"orphan tool message at {i}: {messages}"
        i += 1


@pytest.fixture
def bank() -> ToolRegistry:
    """``refund`` needs approval, ``balance`` does not; ``bank.runs`` lists the calls."""
    registry = ToolRegistry()
    runs: list[tuple[str, dict[str, Any]]] = []
    registry.runs = runs  # type: ignore[attr-defined]

    @registry.tool(needs_approval=True)
    def refund(order: int, amount: float) -> str:
        """Refund an order."""
        runs.append(("refund", {"order": order, "amount": amount}))
        return f"refunded {amount} on order {order}"

    @registry.tool
    def balance(account: str) -> int:
        """An account's balance."""
        runs.append(("balance", {"account": account}))
        return 100

    return registry


TWO_CALLS = ScriptedChatServer.reply_tool_calls(
    [("refund", {"order": 7, "amount": 20.0}, "c_refund"), ("balance", {"account": "a"}, "c_bal")]
)
"""A turn of two calls: ``refund`` (which needs approval) and ``balance``."""
