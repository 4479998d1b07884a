"""Runs that the record-and-replay tests record and replay: the same code both times.

``five_turns`` is the target run (a local tool and an MCP server's tools over five
model turns); ``llama_run`` is the run recorded against the real llama-cpp-python
server (tests/real/test_replay_llama_real.py), whose committed cassette
tests/test_replay_llama.py replays.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    MaxTurnsExceededError,
    McpClient,
    StdioTransport,
    ToolRegistry,
)
from agcore_tools.testing import Cassette, ScriptedChatServer, no_network

ROOT = Path(__file__).resolve().parents[1]
# For a pytest run in a subprocess that tests the plugin: hypothesis' own plugin, which
# the plugin never meets, takes about 1.3 s of each run's start-up to import.
NO_HYPOTHESIS = ("-p", "no:hypothesispytest")
LLAMA_CASSETTE = ROOT / "tests" / "cassettes" / "llama_tool_run.json"
S = ScriptedChatServer

# -- counting connections: an audit hook, added once (hooks cannot be removed) --------

_CONNECTS: list[Any] = []
_COUNTING: list[bool] = []


def _count(event: str, args: tuple[Any, ...]) -> None:
    if _COUNTING and event == "socket.connect":
        _CONNECTS.append(args[1] if len(args) > 1 else None)


sys.addaudithook(_count)


@contextmanager
def counted_connects() -> Iterator[list[Any]]:
    """The addresses of the ``socket.connect`` calls made in this process meanwhile."""
    start = len(_CONNECTS)
    _COUNTING.append(True)
    seen: list[Any] = []
    try:
        yield seen
    finally:
        _COUNTING.pop()
        seen.extend(_CONNECTS[start:])


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """Seconds spent in the block, as ``[elapsed]`` once it ends."""
    elapsed: list[float] = []
    start = time.perf_counter()
    try:
        yield elapsed
    finally:
        elapsed.append(time.perf_counter() - start)


def replayed_offline(replay: Callable[[], Any]) -> tuple[Any, Any, list[float]]:
    """Run ``replay()`` (a coroutine function) four times with the network blocked and
    every connect counted (asserted to be none): the first outcome (which also imports
    what a replay uses, once per process), the last, and the last three's seconds."""
    with no_network() as guard, counted_connects() as connects:
        first = asyncio.run(replay())
        timings = []
        for _ in range(3):
            with stopwatch() as elapsed:
                outcome = asyncio.run(replay())
            timings.append(elapsed[0])
    assert guard.attempts == [] and connects == []
    return first, outcome, timings


def demo_mcp() -> McpClient:
    """The bundled example MCP server (capitals, text stats, temperatures)."""
    return McpClient(
        "demo", StdioTransport(sys.executable, [str(ROOT / "examples" / "mcp_server.py")])
    )


def local_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return registry


# -- the five-turn run ----------------------------------------------------------------


FIVE_TURN_SCRIPT = [
    S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]),
    S.reply_tool_calls([("demo__capital_of", {"country": "Japan"}, "c2")]),
    S.reply_tool_calls(
        [("demo__text_stats", {"text": "Tokyo is big."}, "c3"), ("add", {"a": 5, "b": 7}, "c4")]
    ),
    S.reply_tool_calls([("demo__celsius_to_fahrenheit", {"celsius": 24}, "c5")]),
    S.reply_text("5, Tokyo, 3 words, 12, and 75.2 °F."),
]


@dataclass
class Outcome:
    """What a run did: its history, its tool calls and the number of turns."""

    messages: list[dict[str, Any]]
    calls: list[tuple[str, dict[str, Any]]]
    turns: int
    text: str | None


async def five_turns(
    cassette: Cassette,
    stream: bool = False,
    api: str = "chat",
    tweak: Callable[[ToolRegistry], None] | None = None,
    **client_options: Any,
) -> Outcome:
    """A local tool and three MCP tools over five turns, through ``cassette``."""
    registry = local_registry()
    if tweak is not None:
        tweak(registry)
    async with cassette.mcp(demo_mcp()) as demo, cassette.client(**client_options) as client:
        registry.register_all(demo.into_tools(prefix=True))
        cycle = LlmCycle(CycleConfig("test-model", api=api, max_turns=6), client=client)  # type: ignore[arg-type]
        if stream:
            response = await cycle.submit_stream_with_tools(
                "Do the five things.", registry
            ).collect()
        else:
            response = await cycle.submit_with_tools("Do the five things.", registry)
    calls = [(i.tool_name, dict(i.input)) for i in response.invocations]
    return Outcome(cycle.messages, calls, response.turns, response.text)


# -- the llama run --------------------------------------------------------------------

LLAMA_QUESTION = "Convert 20, then 25 degrees Celsius to Fahrenheit."
LLAMA_MODEL = "SmolLM2-135M-Instruct"  # the server has one model and takes any name
FORCE = {"type": "function", "function": {"name": "demo__celsius_to_fahrenheit"}}


async def llama_run(cassette: Cassette, **client_options: Any) -> Outcome:
    """Five turns against SmolLM2 on llama-cpp-python: four forced calls of an MCP tool
    (the model fills in the arguments), then a streamed text answer once forcing stops.

    The small model answers in text only without ``tool_choice``, and its chat
    template leaves tool results out of the prompt, so the calls are forced.
    """
    registry = ToolRegistry()
    async with cassette.mcp(demo_mcp()) as demo, cassette.client(**client_options) as client:
        registry.register_all(demo.into_tools(prefix=True))
        config = CycleConfig(
            LLAMA_MODEL,
            temperature=0,
            seed=0,
            max_tokens=48,
            max_turns=4,
            tool_choice=FORCE,
            reset_tool_choice=False,
        )
        cycle = LlmCycle(config, client=client)
        turns = 0
        calls: list[tuple[str, dict[str, Any]]] = []
        try:
            await cycle.submit_with_tools(LLAMA_QUESTION, registry)
        except MaxTurnsExceededError as exc:
            turns += exc.max_turns
            calls += [(i.tool_name, dict(i.input)) for i in exc.invocations]
        options = {k: v for k, v in config.request_options.items() if k != "tool_choice"}
        options["max_tokens"] = 16
        cycle.config = dataclasses.replace(config, max_turns=1, request_options=options)
        # Streamed: the cassette then holds server-sent events as well as JSON.
        response = await cycle.submit_stream_with_tools(
            "Thanks. Now say the answer.", registry
        ).collect()
    return Outcome(cycle.messages, calls, turns + response.turns, response.text)
