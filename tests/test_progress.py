"""Progress reports and the event callback: from async tools, from sync tools in worker
threads (delivered on the loop's thread), through the registry and the drop-in."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from agcore_tools import (
    ToolContext,
    ToolError,
    ToolProgress,
    ToolRegistry,
    ToolTimeoutError,
)
from agcore_tools._progress import ToolEvent


def _calls(name: str, call_id: str = "call_1") -> list[dict[str, object]]:
    return [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]


def _recorder() -> tuple[list[tuple[ToolEvent, int]], Callable[[ToolEvent], None]]:
    seen: list[tuple[ToolEvent, int]] = []
    return seen, lambda event: seen.append((event, threading.get_ident()))


async def _after_scheduled_callbacks() -> None:
    """Return once the callbacks a thread scheduled on the loop before now have run."""
    flushed = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(flushed.set_result, None)
    await flushed


async def test_an_async_tool_reports_through_the_registry() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def index(ctx: ToolContext) -> str:
        """Index three files."""
        for done in (1, 2, 3):
            ctx.report_progress(done, 3, f"file {done}")
        return "indexed"

    seen, record = _recorder()
    [result] = await registry.invoke_all([("index", {}, "c1")], ctx=ToolContext(on_event=record))
    assert result.output == "indexed"
    assert [event for event, _ in seen] == [
        ToolProgress("index", "c1", done, 3, f"file {done}") for done in (1, 2, 3)
    ]


async def test_a_sync_tool_reports_from_its_thread_onto_the_loop_thread() -> None:
    registry = ToolRegistry()
    tool_threads: list[int] = []

    @registry.tool
    def crunch(ctx: ToolContext) -> int:
        """Crunch numbers."""
        tool_threads.append(threading.get_ident())
        for done in range(1, 4):
            ctx.report_progress(done)
        return 42

    seen, record = _recorder()
    [result] = await registry.invoke_all([("crunch", {}, "c1")], ctx=ToolContext(on_event=record))
    assert result.output == 42
    # Each report was delivered before the result (it hopped first), on the loop thread.
    assert [event.progress for event, _ in seen] == [1, 2, 3]  # type: ignore[union-attr]
    assert {thread for _, thread in seen} == {threading.get_ident()}
    assert tool_threads != [threading.get_ident()]


class CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the callbacks other threads hand it."""

    hops = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> asyncio.Handle:
        self.hops += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def test_reports_a_sync_tool_makes_while_the_loop_is_busy_travel_in_one_hop() -> None:
    # Each report was a hop of its own: 300,000 reports made the call 20 times slower
    # and held up the loop. Every report still reaches on_event, in order, with the
    # generator's values among them.
    registry = ToolRegistry()
    loop = CountingLoop()
    busy, reported = threading.Event(), threading.Event()
    hops: list[int] = []

    def hold_the_loop() -> None:
        busy.set()
        reported.wait(10)  # a loop busy with other work while the tool reports

    @registry.tool
    def crunch(ctx: ToolContext) -> Any:
        """Crunch numbers."""
        loop.call_soon_threadsafe(hold_the_loop)
        assert busy.wait(10)
        before = loop.hops
        for done in range(1, 5001):
            ctx.report_progress(done, 5000)
            if done % 1000 == 0:
                ctx.report_partial(done)
        hops.append(loop.hops - before)
        reported.set()
        return 5000

    seen, record = _recorder()
    try:
        [result] = loop.run_until_complete(
            registry.invoke_all([("crunch", {}, "c1")], ctx=ToolContext(on_event=record))
        )
    finally:
        loop.close()
    assert result.output == 5000
    assert hops == [1]
    progress = [e.progress for e, _ in seen if isinstance(e, ToolProgress)]
    assert progress == list(range(1, 5001))
    order = [(type(e).__name__, getattr(e, "value", None)) for e, _ in seen]
    assert [order.index(("ToolPartialResult", n)) for n in range(1000, 5001, 1000)] == [
        n + n // 1000 - 1 for n in range(1000, 5001, 1000)
    ]


def test_the_sync_drop_in_delivers_reports_from_the_library_loop() -> None:
    # The context is made outside any loop; the calls run on agcore_tools' own loop.
    registry = ToolRegistry()

    @registry.tool
    def crunch(ctx: ToolContext) -> str:
        """Crunch numbers."""
        ctx.report_progress(0.5, 1.0, "half way")
        return "done"

    seen, record = _recorder()
    [message] = registry.run_tool_calls_sync(_calls("crunch"), ctx=ToolContext(on_event=record))
    assert message == {"role": "tool", "tool_call_id": "call_1", "content": "done"}
    assert [event for event, _ in seen] == [ToolProgress("crunch", "call_1", 0.5, 1.0, "half way")]
    assert seen[0][1] != threading.get_ident()  # the library loop's thread, not this one


def test_a_sync_tool_invoked_directly_with_a_context_made_outside_any_loop() -> None:
    registry = ToolRegistry()

    @registry.tool
    def crunch(ctx: ToolContext) -> str:
        """Crunch numbers."""
        ctx.report_progress(1, 1)
        return "done"

    seen, record = _recorder()
    result = registry.invoke_sync("crunch", {}, ToolContext(on_event=record))
    assert result.output == "done"
    assert [event for event, _ in seen] == [ToolProgress("crunch", None, 1, 1, None)]


async def test_invoke_gives_the_tool_a_context_naming_it() -> None:
    # invoke() and invoke_sync() left the context's tool_name None (invoke_all() set
    # it): a tool's reports named no tool.
    registry = ToolRegistry()
    names: list[str | None] = []

    @registry.tool
    async def back_up(ctx: ToolContext) -> str:
        """Back up the database."""
        names.append(ctx.tool_name)
        ctx.report_progress(1, 1, "backed up")
        return "ok"

    seen, record = _recorder()
    await registry.invoke("back_up", {}, ToolContext(on_event=record))
    await registry.invoke("back_up", {})  # a context of its own
    assert names == ["back_up", "back_up"]
    assert [event for event, _ in seen] == [ToolProgress("back_up", None, 1, 1, "backed up")]


async def test_a_failing_callback_is_logged_and_the_tool_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()

    @registry.tool
    async def step(ctx: ToolContext) -> str:
        """One step."""
        ctx.report_progress(1)
        return "ok"

    def broken(event: ToolEvent) -> None:
        raise KeyError("display gone")

    [result] = await registry.invoke_all([("step", {})], ctx=ToolContext(on_event=broken))
    assert result.output == "ok"
    assert "on_event callback" in caplog.text and "display gone" in caplog.text


class _AsyncListener:
    async def __call__(self, event: ToolEvent) -> None: ...


async def _async_listener(event: ToolEvent) -> None: ...


@pytest.mark.parametrize(
    ("listener", "says"),
    [
        (_async_listener, "not the async function _async_listener"),
        (_AsyncListener(), "not the async function _AsyncListener"),
        ("print", "takes a function called with each event, got str"),
    ],
    ids=["async-function", "async-call", "not-callable"],
)
def test_an_on_event_that_is_not_a_plain_function_is_refused_naming_the_fix(
    listener: object, says: str
) -> None:
    # An async listener (pushing to a websocket, say) type-checks, and its coroutines
    # were dropped: the listener never heard a thing.
    with pytest.raises(TypeError, match=says) as raised:
        ToolContext(on_event=listener)  # type: ignore[arg-type]
    assert isinstance(raised.value, ToolError)
    if "async" in says:
        assert "put_nowait" in str(raised.value)


async def test_a_callback_returning_a_coroutine_is_told_it_is_never_awaited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # `lambda event: queue.put(event)`: asyncio.Queue.put is a coroutine function.
    registry = ToolRegistry()
    queue: asyncio.Queue[ToolEvent] = asyncio.Queue()
    made: list[Any] = []

    @registry.tool
    async def step(ctx: ToolContext) -> str:
        """One step."""
        ctx.report_progress(1)
        return "ok"

    def hand_on(event: ToolEvent) -> object:
        made.append(queue.put(event))
        return made[-1]

    [result] = await registry.invoke_all([("step", {})], ctx=ToolContext(on_event=hand_on))

    assert result.output == "ok"
    assert "returned a coroutine, which is never awaited" in caplog.text
    assert made[0].cr_frame is None  # closed: no "never awaited" warning at exit


async def test_a_callback_starting_a_task_is_not_told_it_is_never_awaited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # `lambda event: asyncio.create_task(send(event))`: the task runs on its own.
    registry = ToolRegistry()
    sent: list[ToolEvent] = []
    tasks: list[asyncio.Task[None]] = []

    async def send(event: ToolEvent) -> None:
        sent.append(event)

    @registry.tool
    async def step(ctx: ToolContext) -> str:
        """One step."""
        ctx.report_progress(1)
        return "ok"

    def hand_on(event: ToolEvent) -> object:
        tasks.append(asyncio.create_task(send(event)))
        return tasks[-1]

    [result] = await registry.invoke_all([("step", {})], ctx=ToolContext(on_event=hand_on))
    await asyncio.wait_for(asyncio.gather(*tasks), 10)

    assert result.output == "ok" and len(sent) == 1
    assert "never awaited" not in caplog.text


async def test_reports_after_a_timeout_are_dropped() -> None:
    registry = ToolRegistry()
    release, reported = threading.Event(), threading.Event()

    @registry.tool
    def slow(ctx: ToolContext) -> str:
        """Block until released."""
        ctx.report_progress(1)
        release.wait(10)
        ctx.report_progress(2)  # the caller gave up on this call already
        reported.set()
        return "late"

    seen, record = _recorder()
    [result] = await registry.invoke_all(
        [("slow", {}, "c1")], ctx=ToolContext(on_event=record), timeout=0.2
    )
    assert isinstance(result.error, ToolTimeoutError)
    release.set()
    assert await asyncio.to_thread(reported.wait, 10)
    await _after_scheduled_callbacks()
    assert [event.progress for event, _ in seen] == [1]  # type: ignore[union-attr]


async def test_reports_after_the_call_ended_are_dropped() -> None:
    # A helper thread of the tool's reports after the tool returned: that report would
    # follow the call's ToolExecutionCompleted.
    registry = ToolRegistry()
    release, reported = threading.Event(), threading.Event()

    @registry.tool
    def search_all(ctx: ToolContext) -> str:
        """Ask a slow source in a helper thread; answer without waiting for it."""

        def ask() -> None:
            release.wait(10)
            ctx.report_progress(2, 2, "late source answered")
            reported.set()

        threading.Thread(target=ask, daemon=True).start()
        ctx.report_progress(1, 2, "fast source answered")
        return "partial answer"

    seen, record = _recorder()
    ctx = ToolContext(on_event=record)
    [result] = await registry.invoke_all([("search_all", {}, "c1")], ctx=ctx)
    assert result.output == "partial answer"
    release.set()
    assert await asyncio.to_thread(reported.wait, 10)
    await _after_scheduled_callbacks()
    assert [event.progress for event, _ in seen] == [1]  # type: ignore[union-attr]
    await registry.invoke_all([("search_all", {}, "c2")], ctx=ctx)
    # The run's next call reports as before (its own helper may or may not be in time).
    assert ("c2", 1) in [(e.call_id, e.progress) for e, _ in seen]  # type: ignore[union-attr]


def test_reporting_without_a_listener_does_nothing() -> None:
    ToolContext().report_progress(1, 2, "nobody listens")  # no error, no effect


def test_a_context_never_on_a_loop_reports_in_the_reporting_thread() -> None:
    seen: list[tuple[ToolEvent, str]] = []
    ctx = ToolContext(on_event=lambda e: seen.append((e, threading.current_thread().name)))

    def report() -> None:
        ctx.report_progress(1)  # made outside any loop, used in a bare thread

    thread = threading.Thread(target=report, name="reporter")
    thread.start()
    thread.join(10)
    assert [(event.progress, name) for event, name in seen] == [(1, "reporter")]  # type: ignore[union-attr]


def test_a_sync_tool_called_directly_reports_to_its_context() -> None:
    # A unit test of the tool: no event loop, no registry, the caller's own context.
    registry = ToolRegistry()

    @registry.tool
    def index_files(count: int, ctx: ToolContext) -> str:
        """Index the user's files."""
        for done in range(1, count + 1):
            ctx.report_progress(done, count, f"file {done}")
        return f"indexed {count} files"

    seen: list[ToolEvent] = []
    assert index_files(2, ToolContext(on_event=seen.append)) == "indexed 2 files"
    assert [(e.progress, e.total, e.message) for e in seen] == [  # type: ignore[union-attr]
        (1, 2, "file 1"),
        (2, 2, "file 2"),
    ]


async def test_a_report_from_an_async_tool_is_delivered_at_once() -> None:
    # Delivery is synchronous on the loop thread: the app sees it before the tool's
    # next line runs.
    registry = ToolRegistry()
    seen: list[ToolEvent] = []
    counts: list[int] = []

    @registry.tool
    async def watch(ctx: ToolContext) -> None:
        """Report and look."""
        ctx.report_progress(1)
        counts.append(len(seen))

    await registry.invoke_all([("watch", {})], ctx=ToolContext(on_event=seen.append))
    assert counts == [1]
