"""A circuit breaker and calls that pause (an MCP task still running): the pause
decides nothing, and its resume is let through by its call id and decides."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, ClassVar

from agcore_tools import (
    BaseTool,
    Breaker,
    ToolBreakerChanged,
    ToolContext,
    ToolPolicy,
    ToolRegistry,
    ToolUnavailableError,
)
from agcore_tools._clock import CLOCK
from agcore_tools._text import args_digest
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
        self.resumes: dict[str, str] = {}
        """The mode a call's resume runs in, by call id: a resume is the same call, its
        arguments unchanged (as a ResumableTool's ``resume_next`` is told)."""

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        mode = self.resumes.pop(ctx.call_id or "", args["mode"])
        if mode == "fail":
            raise ConnectionError("service down")
        if mode == "pause":
            task = RunningTask("t~task", "t", "job", "jobs", "task-1", "working")
            return CallPaused((task,), {"task": "task-1"})
        if mode == "hold":
            self.gate["held"].set()
            await asyncio.wait_for(self.gate["hold"].wait(), 10)
        return "done"


def _job(registry: ToolRegistry, gate: dict[str, asyncio.Event]) -> Job:
    job = Job(gate)
    registry.register(job)
    return job


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
        job = _job(registry, gate)
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
        job.resumes["p1"] = "fail"
        [resumed] = await registry.invoke_all([("job", {"mode": "pause"}, "p1")])
        assert "ConnectionError" in str(resumed.error)
        assert registry.unavailable_tools() == ["job"]
        gate["hold"].set()
        [held] = await asyncio.wait_for(other, 10)
        assert held.output == "done"
        # The other probe's half-open phase ended with the resume's verdict: its late
        # success decides nothing, as a call's that ends after the breaker opened.
        assert registry.unavailable_tools() == ["job"]
    finally:
        CLOCK.reset(token)


async def test_a_paused_probes_resume_that_succeeds_closes_the_breaker() -> None:
    moment = [1000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()
        job = _job(registry, {})
        events: list[Any] = []
        ctx = ToolContext(on_event=events.append)
        await _open(registry, moment)
        await registry.invoke_all([("job", {"mode": "pause"}, "p1")], ctx=ctx)
        assert not events  # the pause decided nothing
        job.resumes["p1"] = "ok"
        [resumed] = await registry.invoke_all([("job", {"mode": "pause"}, "p1")], ctx=ctx)
        assert resumed.output == "done"
        changes = [e for e in events if isinstance(e, ToolBreakerChanged)]
        assert [(e.call_id, e.state) for e in changes] == [("p1", "closed")]
    finally:
        CLOCK.reset(token)


def test_one_probe_among_calls_from_many_threads_and_loops() -> None:
    """A registry's breaker is shared by every thread and loop that calls its tool (as
    its concurrency cap is): after the cool-down, of calls released at once from eight
    threads, each running its own event loop, one is the probe and the rest are refused.
    (With the GIL the check and the claim could not be split in practice; the lock
    makes it so on any build.)"""
    moment = [1000.0]
    registry = ToolRegistry()
    release = threading.Event()
    ran: list[int] = []
    ran_lock = threading.Lock()
    answered = threading.Event()  # the seven calls other than the probe were refused

    @registry.tool(policy=ToolPolicy(breaker=Breaker(failures=1, window=60, cool_down=10)))
    def lookup(x: int) -> int:
        """Look something up (sync: it waits in a worker thread)."""
        if x < 0:
            raise ConnectionError("service down")
        with ran_lock:
            ran.append(x)
        assert release.wait(10)  # the probe runs until every other call was answered
        return x

    def call(x: int, barrier: threading.Barrier, refused: list[str]) -> None:
        async def one() -> None:
            token = CLOCK.set(lambda: moment[0])  # a thread does not inherit contexts
            try:
                barrier.wait(10)
                await registry.invoke("lookup", {"x": x})
            except ToolUnavailableError as exc:
                with ran_lock:
                    refused.append(str(exc))
                    if len(refused) == 7:
                        answered.set()
            finally:
                CLOCK.reset(token)

        asyncio.run(one())

    async def fail() -> None:
        token = CLOCK.set(lambda: moment[0])
        try:
            await registry.invoke("lookup", {"x": -1})
        finally:
            CLOCK.reset(token)

    token = CLOCK.set(lambda: moment[0])  # for unavailable_tools() in this thread
    try:
        started = time.monotonic()
        for _ in range(20):
            asyncio.run(fail())
            assert registry.unavailable_tools() == ["lookup"]
            moment[0] += 11.0  # the cool-down is over
            ran.clear()
            release.clear()
            answered.clear()
            barrier = threading.Barrier(8)
            refused: list[str] = []
            threads = [threading.Thread(target=call, args=(i, barrier, refused)) for i in range(8)]
            for thread in threads:
                thread.start()
            answered.wait(10)  # bounded: two probes would leave six refusals
            release.set()
            for thread in threads:
                thread.join(10)
            assert len(ran) == 1, ran
            assert len(refused) == 7 and all("probe" in r for r in refused)
            assert registry.unavailable_tools() == []  # the probe succeeded
        assert time.monotonic() - started < 60
    finally:
        CLOCK.reset(token)


async def test_a_fresh_call_reusing_a_paused_calls_id_is_refused_while_open() -> None:
    # Call ids are not unique across conversations (a provider that numbers them, an
    # app's own): a paused call's id let any call with that id through an open breaker.
    # Its resume is the same call, with the same arguments, and still goes through.
    moment = [1000.0]
    token = CLOCK.set(lambda: moment[0])
    try:
        registry = ToolRegistry()
        _job(registry, {})
        [paused] = await registry.invoke_all([("job", {"mode": "pause"}, "call_0")])
        assert isinstance(paused.output, CallPaused)
        await registry.invoke_all(
            [("job", {"mode": "fail"}, "f1"), ("job", {"mode": "fail"}, "f2")]
        )
        [fresh] = await registry.invoke_all([("job", {"mode": "ok"}, "call_0")])
        assert isinstance(fresh.error, ToolUnavailableError) and fresh.output is None
        [resumed] = await registry.invoke_all([("job", {"mode": "pause"}, "call_0")])
        assert resumed.error is None and isinstance(resumed.output, CallPaused)
    finally:
        CLOCK.reset(token)


def test_the_digest_of_a_calls_arguments_takes_any_arguments() -> None:
    # A lone surrogate from the model's JSON, a value that is not JSON, mixed keys.
    assert args_digest({"a": "caf\udce9"}) != args_digest({"a": "caf\ufffd"})
    assert len(args_digest({"when": object()})) == 32
    assert len(args_digest({1: "a", "b": 2})) == 32
