"""A circuit breaker and calls that pause (an MCP task still running): the pause
decides nothing, and its resume is let through by its call id and decides."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from agcore_tools import (
    BaseTool,
    Breaker,
    ToolBreakerChanged,
    ToolContext,
    ToolPolicy,
    ToolRegistry,
)
from agcore_tools._clock import CLOCK
from agcore_tools.pending import CallPaused, RunningTask


class Job(BaseTool):
    """``job(mode)`` behind ``Breaker(failures=2, window=60, cool_down=10)``: ``fail``
    raises, ``pause`` returns a CallPaused (its task runs on), ``ok`` succeeds, ``hold``
    waits for ``gate["hold"]`` then succeeds (``gate["held"]`` set on entry). A
    BaseTool, as an MCP tool is: a function tool's CallPaused would be turned to JSON."""

    name = "job"
    description = "Run a job."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"mode": {"type": "string"}},
        "required": ["mode"],
    }
    policy = ToolPolicy(breaker=Breaker(failures=2, window=60, cool_down=10))

    def __init__(self, gate: dict[str, asyncio.Event]) -> None:
        self.gate = gate

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        mode = args["mode"]
        if mode == "fail":
            raise ConnectionError("service down")
        if mode == "pause":
            task = RunningTask("t~task", "t", "job", "jobs", "task-1", "working")
            return CallPaused((task,), {"task": "task-1"})
        if mode == "hold":
            self.gate["held"].set()
            await asyncio.wait_for(self.gate["hold"].wait(), 10)
        return "done"


def _job(registry: ToolRegistry, gate: dict[str, asyncio.Event]) -> None:
    registry.register(Job(gate))


async def _open(registry: ToolRegistry, moment: list[float]) -> None:
    await registry.invoke_all([("job", {"mode": "fail"}, "f1"), ("job", {"mode": "fail"}, "f2")])
    assert registry.unavailable_tools() == ["job"]
    moment[0] += 11.0  # the cool-down is over: the next call is the probe


async def test_a_probe_that_pauses_decides_nothing() -> None:
    moment = [1000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()
        _job(registry, {})
        events: list[Any] = []
        ctx = ToolContext(on_event=events.append)
        await _open(registry, moment)
        [paused] = await registry.invoke_all([("job", {"mode": "pause"}, "p1")], ctx=ctx)
        assert isinstance(paused.output, CallPaused)
        # Not closed by the pause (it was, and the next failure merely counted one).
        assert not [e for e in events if isinstance(e, ToolBreakerChanged)]
        [probe] = await registry.invoke_all([("job", {"mode": "fail"}, "p2")], ctx=ctx)
        assert probe.error is not None
        assert registry.unavailable_tools() == ["job"]  # the next call was the probe
    finally:
        CLOCK.reset(token)


async def test_a_paused_probes_resume_goes_through_while_another_probes_and_decides() -> None:
    moment = [1000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()
        gate = {"held": asyncio.Event(), "hold": asyncio.Event()}
        _job(registry, gate)
        await _open(registry, moment)
        [paused] = await registry.invoke_all([("job", {"mode": "pause"}, "p1")])
        assert isinstance(paused.output, CallPaused)
        # Another call is the probe now, and is still running.
        other = asyncio.ensure_future(registry.invoke_all([("job", {"mode": "hold"}, "p2")]))
        await asyncio.wait_for(gate["held"].wait(), 10)
        [busy] = await registry.invoke_all([("job", {"mode": "ok"}, "p3")])
        assert "probe" in str(busy.error)  # a new call is still refused
        # The paused probe's resume is let through (it was refused: its result lost),
        # and decides: its task failed, so the breaker opens again.
        [resumed] = await registry.invoke_all([("job", {"mode": "fail"}, "p1")])
        assert "ConnectionError" in str(resumed.error)
        assert registry.unavailable_tools() == ["job"]
        gate["hold"].set()
        [held] = await asyncio.wait_for(other, 10)
        assert held.output == "done"
    finally:
        CLOCK.reset(token)


async def test_a_paused_probes_resume_that_succeeds_closes_the_breaker() -> None:
    moment = [1000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()
        _job(registry, {})
        events: list[Any] = []
        ctx = ToolContext(on_event=events.append)
        await _open(registry, moment)
        await registry.invoke_all([("job", {"mode": "pause"}, "p1")], ctx=ctx)
        assert not events  # the pause decided nothing
        [resumed] = await registry.invoke_all([("job", {"mode": "ok"}, "p1")], ctx=ctx)
        assert resumed.output == "done"
        changes = [e for e in events if isinstance(e, ToolBreakerChanged)]
        assert [(e.call_id, e.state) for e in changes] == [("p1", "closed")]
    finally:
        CLOCK.reset(token)
