"""Tool events in the loop: ToolProgress and ToolPartialResult fall between their call's
ToolExecutionStarted and ToolExecutionCompleted, arrive while the tool still runs, never
reach the model, and stop with the stream; the run's shared state."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from agcore_tools import (
    LlmCycle,
    LlmError,
    StreamEvent,
    ToolContext,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolPartialResult,
    ToolProgress,
    ToolRegistry,
)
from agcore_tools._progress import ToolEvent
from agcore_tools.calls import parse_call
from agcore_tools.cycle._tool_stream import _quiet
from agcore_tools.testing import ScriptedChatServer

S = ScriptedChatServer
Serve = Callable[..., ScriptedChatServer]
MakeCycle = Callable[..., LlmCycle]
HELD = 16  # unread reports of a kind a stream holds per call (_progress.REPORTS_PER_CALL)


def _ends(events: list[Any], call_id: str) -> tuple[int, int]:
    started = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, ToolExecutionStarted) and e.call_id == call_id
    )
    done = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, ToolExecutionCompleted) and e.call_id == call_id
    )
    return started, done


async def test_events_fall_between_their_calls_start_and_completion(
    serve: Serve, make_cycle: MakeCycle
) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def index(ctx: ToolContext) -> str:
        """Index files."""
        ctx.report_progress(1, 2)
        ctx.report_progress(2, 2)
        return "indexed"

    @registry.tool
    def search(query: str) -> Iterator[list[str]]:
        """Search in batches (sync, in a thread)."""
        yield [query]
        yield [query, query.upper()]

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    server = serve(
        S.reply_tool_calls([("index", {}), ("search", {"query": "q"}), ("add", {"a": 1, "b": 2})]),
        S.reply_text("ok"),
    )
    cycle = make_cycle(server)
    async with cycle.submit_stream_with_tools("go", registry) as stream:
        events: list[StreamEvent] = [event async for event in stream]
    tool_events = [e for e in events if isinstance(e, (ToolProgress, ToolPartialResult))]
    # Both reports came before the consumer could read; both are held (well under the bound).
    assert [e.progress for e in tool_events if isinstance(e, ToolProgress)] == [1, 2]
    for event in tool_events:
        started, done = _ends(events, event.call_id or "")
        assert started < events.index(event) < done
    partials = [e.value for e in tool_events if isinstance(e, ToolPartialResult)]
    assert partials == [["q"], ["q", "Q"]]
    # Only the final result reaches the model; completion and invocations carry it.
    search_id = next(e.call_id for e in tool_events if e.tool_name == "search")
    answer = next(m for m in cycle.messages if m.get("tool_call_id") == search_id)
    assert answer["content"] == '["q","Q"]'
    completed = [e for e in events if isinstance(e, ToolExecutionCompleted)]
    assert {e.tool_name: e.output for e in completed}["search"] == ["q", "Q"]
    assert stream.response is not None
    assert [i.output for i in stream.response.invocations] == ["indexed", ["q", "Q"], 3]


async def test_progress_arrives_while_the_tool_still_runs(
    serve: Serve, make_cycle: MakeCycle
) -> None:
    # The tool waits for the consumer to have seen its report: batching reports until
    # the call ends would deadlock here (and time out).
    registry = ToolRegistry()
    seen_async, seen_sync = asyncio.Event(), threading.Event()

    @registry.tool
    async def waits(ctx: ToolContext) -> str:
        """Report, then wait to be seen."""
        ctx.report_progress(1)
        await asyncio.wait_for(seen_async.wait(), 10)
        return "seen"

    @registry.tool
    def waits_in_thread(ctx: ToolContext) -> str:
        """Report from a thread, then wait to be seen."""
        ctx.report_progress(1)
        return "seen" if seen_sync.wait(10) else "not seen"

    server = serve(S.reply_tool_calls([("waits", {}), ("waits_in_thread", {})]), S.reply_text("ok"))
    events: list[StreamEvent] = []
    async with make_cycle(server).submit_stream_with_tools("go", registry) as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ToolProgress):
                (seen_async if event.tool_name == "waits" else seen_sync).set()
    outputs = [e.output for e in events if isinstance(e, ToolExecutionCompleted)]
    assert outputs == ["seen", "seen"]


async def test_a_slow_consumer_reads_each_calls_latest_reports_not_a_backlog(
    serve: Serve, make_cycle: MakeCycle
) -> None:
    # A tool reports far faster than a UI redraws: past HELD unread reports of a kind,
    # the oldest gives way to the newest, so nothing piles up in memory.
    registry = ToolRegistry()
    finished = asyncio.Event()
    heard: list[ToolEvent] = []

    @registry.tool
    async def scan(ctx: ToolContext) -> AsyncIterator[list[int]]:
        """Scan; yields the hits so far."""
        hits: list[int] = []
        for done in range(1, 101):
            ctx.report_progress(done, 100)
            hits.append(done)
            yield list(hits)
            await asyncio.sleep(0)  # the next page arrives
        finished.set()

    server = serve(S.reply_tool_calls([("scan", {}, "c1")]), S.reply_text("ok"))
    cycle = make_cycle(server)
    events: list[StreamEvent] = []
    stream = cycle.submit_stream_with_tools(
        "Scan", registry, ctx=ToolContext(on_event=heard.append)
    )
    async with stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, (ToolProgress, ToolPartialResult)) and not finished.is_set():
                await asyncio.wait_for(finished.wait(), 10)  # busy redrawing meanwhile

    started, done = _ends(events, "c1")
    progress = [e.progress for e in events if isinstance(e, ToolProgress)]
    partial = [len(e.value) for e in events if isinstance(e, ToolPartialResult)]
    assert len(progress) <= 1 + HELD  # the latest, not 100 reports
    assert progress[-HELD:] == list(range(101 - HELD, 101))
    # Up to HELD unread values are held; older ones gave way to newer.
    assert len(partial) <= 1 + HELD
    assert partial[-HELD:] == list(range(101 - HELD, 101))
    assert all(
        started < i < done
        for i, e in enumerate(events)
        if isinstance(e, (ToolProgress, ToolPartialResult))
    )
    assert len(events[done].output) == 100
    # A listener is called with each report as it comes: it hears them all.
    assert len(heard) == 200


async def test_the_non_streaming_loop_gives_the_events_to_on_event(
    serve: Serve, make_cycle: MakeCycle
) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def fetch(ctx: ToolContext) -> AsyncIterator[str]:
        """Fetch in two parts."""
        ctx.report_progress(50, 100, "half")
        yield "part"
        yield "whole"

    seen: list[ToolEvent] = []
    server = serve(S.reply_tool_calls([("fetch", {})]), S.reply_text("ok"))
    cycle = make_cycle(server)
    response = await cycle.submit_with_tools("go", registry, ctx=ToolContext(on_event=seen.append))
    call_id = cycle.messages[1]["tool_calls"][0]["id"]
    assert seen == [
        ToolProgress("fetch", call_id, 50, 100, "half"),
        ToolPartialResult("fetch", call_id, "part"),
        ToolPartialResult("fetch", call_id, "whole"),
    ]
    assert response.invocations[0].output == "whole"
    history = json.dumps(cycle.messages)
    assert "part" not in history and "half" not in history  # the model sees "whole" only


async def test_on_event_also_hears_the_streaming_loop(serve: Serve, make_cycle: MakeCycle) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def step(ctx: ToolContext) -> str:
        """One step."""
        ctx.report_progress(1)
        return "ok"

    seen: list[ToolEvent] = []
    server = serve(S.reply_tool_calls([("step", {})]), S.reply_text("ok"))
    stream = make_cycle(server).submit_stream_with_tools(
        "go", registry, ctx=ToolContext(on_event=seen.append)
    )
    streamed = [e for e in [event async for event in stream] if isinstance(e, ToolProgress)]
    assert streamed == seen and len(seen) == 1


async def test_leaving_the_stream_closes_a_generator_tool(
    serve: Serve, make_cycle: MakeCycle
) -> None:
    registry = ToolRegistry()
    closed = asyncio.Event()

    @registry.tool
    async def feed() -> AsyncIterator[int]:
        """Yield forever."""
        try:
            n = 0
            while True:
                n += 1
                yield n
                await asyncio.Event().wait()
        finally:
            closed.set()

    server = serve(S.reply_tool_calls([("feed", {})]))
    cycle = make_cycle(server)
    stream = cycle.submit_stream_with_tools("go", registry)
    async for event in stream:
        if isinstance(event, ToolPartialResult):
            break
    await stream.aclose()
    assert closed.is_set()
    assert "the tool loop was cancelled" in cycle.messages[-1]["content"]


async def test_the_loop_timeout_covers_a_generator_tool(
    serve: Serve, make_cycle: MakeCycle
) -> None:
    registry = ToolRegistry()
    closed = asyncio.Event()

    @registry.tool
    async def feed() -> AsyncIterator[int]:
        """Yield once, then hang."""
        try:
            yield 1
            await asyncio.Event().wait()
        finally:
            closed.set()

    server = serve(S.reply_tool_calls([("feed", {})]), S.reply_text("sorry"))
    cycle = make_cycle(server, tool_timeout_secs=0.2)
    events = [e async for e in cycle.submit_stream_with_tools("go", registry)]
    assert closed.is_set()
    kinds = [type(e).__name__ for e in events if type(e).__name__.startswith("Tool")]
    assert kinds == ["ToolExecutionStarted", "ToolPartialResult", "ToolExecutionCompleted"]
    assert "timed out" in cycle.messages[2]["content"]


def test_a_turn_of_plain_tools_needs_no_listening() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def plain(x: int) -> int:
        """Plain."""
        return x

    @registry.tool
    def sync(x: int) -> int:  # it could return a generator: nothing tells before it runs
        """Sync."""
        return x

    @registry.tool
    def reporting(ctx: ToolContext) -> int:
        """Takes the context."""
        return 0

    @registry.tool
    def streaming() -> Iterator[int]:
        """A generator."""
        yield 0

    def calls(*names: str) -> list[Any]:
        return [parse_call(name, f"c{i}", "{}") for i, name in enumerate(names)]

    assert _quiet(registry, calls("plain", "plain"))
    assert not _quiet(registry, calls("plain", "reporting"))
    assert not _quiet(registry, calls("streaming"))
    assert not _quiet(registry, calls("plain", "sync"))


async def test_a_generator_a_sync_tool_returns_reports_to_the_stream(
    serve: Serve, make_cycle: MakeCycle
) -> None:
    # Its values are reported as it is drained (as a generator function's are), but the
    # tool counted as one that reports nothing, and the stream never listened. The
    # annotation says it streams: a returned generator a tool does not declare so is its
    # whole result, listed (a generator expression is a sequence, not progress).
    registry = ToolRegistry()

    def steps(n: int) -> Iterator[dict[str, int]]:
        for done in range(1, n + 1):
            yield {"done": done}

    @registry.tool
    def count(n: int) -> Iterator[dict[str, int]]:
        """Count to n, reporting progress."""
        return steps(n)  # a generator another function made

    server = serve(S.reply_tool_calls([("count", {"n": 3}, "c1")]), S.reply_text("done"))
    cycle = make_cycle(server)
    async with cycle.submit_stream_with_tools("Count to 3", registry) as stream:
        events: list[StreamEvent] = [event async for event in stream]

    partial = [e.value for e in events if isinstance(e, ToolPartialResult)]
    assert partial and partial[-1] == {"done": 3}
    started, done = _ends(events, "c1")
    assert all(started < events.index(e) < done for e in events if isinstance(e, ToolPartialResult))


# -- shared state --------------------------------------------------------------------


def _state_tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def remember(key: str, value: str, ctx: ToolContext) -> str:
        """Remember a value for later steps."""
        ctx.shared_state[key] = value
        return "ok"

    @registry.tool
    def recall(key: str, ctx: ToolContext) -> str:
        """Recall a value an earlier step remembered."""
        return str(ctx.shared_state.get(key, "nothing"))

    return registry


async def test_shared_state_spans_a_run_and_the_run_it_resumes(
    serve: Serve, make_cycle: MakeCycle
) -> None:
    registry = _state_tools()
    server = serve(
        S.reply_tool_calls([("remember", {"key": "k", "value": "v1"})]),
        S.reply_tool_calls([("recall", {"key": "k"})]),
        # max_turns=2 stops the first run here; prompt=None resumes it.
        S.reply_tool_calls([("recall", {"key": "k"})]),
        S.reply_text("done"),
        # A new prompt is a new run: a fresh state.
        S.reply_tool_calls([("recall", {"key": "k"})]),
        S.reply_text("done"),
    )
    cycle = make_cycle(server, max_turns=2)
    with pytest.raises(LlmError):
        await cycle.submit_with_tools("remember and recall", registry)
    assert cycle.messages[-1]["content"] == "v1"  # the second turn saw the first's state
    await cycle.submit_with_tools(None, registry)
    assert cycle.messages[-2]["content"] == "v1"  # the resumed run sees it too
    await cycle.submit_with_tools("again", registry)
    assert cycle.messages[-2]["content"] == "nothing"


async def test_an_app_given_shared_state_is_used_and_kept(
    serve: Serve, make_cycle: MakeCycle
) -> None:
    registry = _state_tools()
    state: dict[str, Any] = {"k": "from the app"}
    server = serve(
        S.reply_tool_calls([("recall", {"key": "k"}), ("remember", {"key": "n", "value": "2"})]),
        S.reply_text("done"),
    )
    cycle = make_cycle(server)
    await cycle.submit_with_tools("go", registry, ctx=ToolContext(shared_state=state))
    assert cycle.messages[2]["content"] == "from the app"
    assert state == {"k": "from the app", "n": "2"}
