"""Generator tools: each yielded value is a preliminary result, the last one is final;
timeouts and cancellation cover the whole generator and close it."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
)
from typing import Any

import pytest
from pydantic import BaseModel, field_serializer

from agcore_tools import (
    FunctionTool,
    Image,
    ToolContext,
    ToolExecutionError,
    ToolPartialResult,
    ToolRegistry,
    ToolTimeoutError,
)
from agcore_tools._progress import ToolEvent


async def test_an_async_generator_reports_each_value_and_returns_the_last() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def search(query: str) -> AsyncIterator[dict[str, object]]:
        """Search in batches."""
        for batch in range(3):
            yield {"query": query, "hits": (batch + 1) * 10}

    seen: list[ToolEvent] = []
    [result] = await registry.invoke_all(
        [("search", {"query": "cats"}, "c1")], ctx=ToolContext(on_event=seen.append)
    )
    assert result.output == {"query": "cats", "hits": 30}
    assert seen == [
        ToolPartialResult("search", "c1", {"query": "cats", "hits": n}) for n in (10, 20, 30)
    ]
    stats = registry.entry("search").stats  # type: ignore[union-attr]
    assert (stats.calls, stats.failures) == (1, 0)


async def test_an_async_generators_large_values_are_made_json_in_a_worker_thread() -> None:
    # Before: every value an async generator yielded was converted on the loop, a large
    # one holding it up as long as an async function's large result did.
    registry = ToolRegistry()
    threads: list[int] = []

    class Stamp(BaseModel):
        value: int

        @field_serializer("value")
        def _where(self, value: int) -> int:
            threads.append(threading.get_ident())
            return value

    @registry.tool
    async def export(n: int) -> AsyncIterator[list[Stamp]]:
        """Export a small page, then everything."""
        yield [Stamp(value=0)]
        yield [Stamp(value=i) for i in range(n)]

    seen: list[ToolEvent] = []
    done = await registry.invoke("export", {"n": 20_000}, ToolContext(on_event=seen.append))
    assert done.output == [{"value": i} for i in range(20_000)]
    assert [len(e.value) for e in seen if isinstance(e, ToolPartialResult)] == [1, 20_000]
    loop_thread = threading.get_ident()
    assert threads[0] == loop_thread  # the small page: on the loop, no thread hop
    assert len(threads) == 20_001 and loop_thread not in threads[1:]


async def test_a_sync_generator_runs_in_a_worker_thread() -> None:
    registry = ToolRegistry()
    threads: list[int] = []

    @registry.tool
    def count(n: int) -> Iterator[int]:
        """Count to n."""
        threads.append(threading.get_ident())
        yield from range(1, n + 1)

    seen: list[ToolEvent] = []
    [result] = await registry.invoke_all(
        [("count", {"n": 3})], ctx=ToolContext(on_event=seen.append)
    )
    assert result.output == 3
    assert [e.value for e in seen] == [1, 2, 3]  # type: ignore[union-attr]
    assert threads and threads[0] != threading.get_ident()


async def test_a_sync_generator_that_returns_its_result_after_progress_gives_that() -> None:
    # `yield` progress, then `return` the result: the returned value was dropped and the
    # model got the last progress value.
    registry = ToolRegistry()

    @registry.tool
    def job(n: int) -> Generator[dict[str, float], None, dict[str, int]]:
        """A long job."""
        yield {"progress": 0.5}
        return {"result": n * 2}

    seen: list[ToolEvent] = []
    [result] = await registry.invoke_all(
        [("job", {"n": 21})], ctx=ToolContext(on_event=seen.append)
    )
    assert result.output == {"result": 42}
    assert [e.value for e in seen] == [{"progress": 0.5}]  # type: ignore[union-attr]


async def test_a_generator_that_yields_nothing_returns_none() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def nothing() -> AsyncIterator[int]:
        """Yield nothing."""
        for value in ():
            yield value

    assert (await registry.invoke("nothing", {})).output is None


def _logged(func: Callable[..., Any]) -> Callable[..., Any]:
    # A plain logging decorator, with no idea its function is a generator.
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


async def test_a_generator_function_behind_a_plain_decorator_is_drained_as_one() -> None:
    # Before: the wrapper's generator was made a list on the loop (the sync one's
    # blocking work with it): no partial results, every value as the result; the async
    # one failed as "returned a async_generator, which is not JSON-compatible".
    registry = ToolRegistry()
    threads: list[int] = []

    @registry.tool
    @_logged
    def count(n: int) -> Iterator[int]:
        """Count to n."""
        for value in range(1, n + 1):
            threads.append(threading.get_ident())
            yield value

    @registry.tool
    @_logged
    async def letters(n: int) -> AsyncIterator[str]:
        """The first n letters."""
        for letter in "abc"[:n]:
            yield letter

    assert not count.quiet and count.output_schema is None
    assert not letters.quiet and letters.output_schema is None
    seen: list[ToolEvent] = []
    counted, lettered = await registry.invoke_all(
        [("count", {"n": 3}, "c1"), ("letters", {"n": 2}, "c2")],
        ctx=ToolContext(on_event=seen.append),
    )
    assert (counted.output, lettered.output) == (3, "b")
    # The two calls run side by side: each one's values in order, not the two's.
    assert [e for e in seen if e.call_id == "c1"] == [  # type: ignore[union-attr]
        ToolPartialResult("count", "c1", n) for n in (1, 2, 3)
    ]
    assert [e for e in seen if e.call_id == "c2"] == [  # type: ignore[union-attr]
        ToolPartialResult("letters", "c2", letter) for letter in "ab"
    ]
    assert len(seen) == 5
    assert len(threads) == 3 and threading.get_ident() not in threads


async def test_a_generator_a_sync_function_returns_is_drained_in_its_thread() -> None:
    registry = ToolRegistry()
    threads: list[int] = []

    @registry.tool
    def pages(n: int) -> Iterator[str]:
        """Read n pages lazily."""

        def read() -> Iterator[str]:
            for page in range(n):
                threads.append(threading.get_ident())  # a paged API's blocking read
                yield f"page {page}"

        return read()

    seen: list[ToolEvent] = []
    [result] = await registry.invoke_all(
        [("pages", {"n": 2}, "c1")], ctx=ToolContext(on_event=seen.append)
    )
    assert result.output == "page 1"
    assert seen == [ToolPartialResult("pages", "c1", f"page {n}") for n in (0, 1)]
    assert len(threads) == 2 and threading.get_ident() not in threads


async def test_a_generator_expression_a_tool_returns_is_its_whole_result() -> None:
    # Before: a sync tool's generator expression was drained as a stream, so the model
    # got its last item only ("carol"), while the same tool written async got them all.
    registry = ToolRegistry()
    users = [{"name": "alice"}, {"name": "bob"}, {"name": "carol"}]
    pixel = Image(b"GIF89a" + bytes(10))

    @registry.tool
    def user_names() -> Iterable[str]:
        """The names of all users."""
        return (user["name"] for user in users)

    @registry.tool
    async def user_names_async() -> Iterable[str]:
        """The names of all users."""
        return (user["name"] for user in users)

    @registry.tool
    def avatars() -> list[Image]:
        """Every user's avatar."""
        return (pixel for _ in users)  # type: ignore[return-value]

    seen: list[ToolEvent] = []
    results = await registry.invoke_all(
        [("user_names", {}), ("user_names_async", {}), ("avatars", {})],
        ctx=ToolContext(on_event=seen.append),
    )
    assert [result.output for result in results] == [
        ["alice", "bob", "carol"],
        ["alice", "bob", "carol"],
        [pixel, pixel, pixel],
    ]
    assert not [event for event in seen if isinstance(event, ToolPartialResult)]


def test_schemas_are_built_for_generator_return_annotations() -> None:
    async def a(x: int) -> AsyncIterator[int]:
        """A."""
        yield x

    async def b(x: int) -> AsyncGenerator[int, None]:
        """B."""
        yield x

    def c(x: int) -> Iterator[int]:
        """C."""
        yield x

    def d(x: int) -> Generator[int, None, None]:
        """D."""
        yield x

    for func in (a, b, c, d):
        tool = FunctionTool(func)
        assert tool.parameters["required"] == ["x"], func


async def test_a_value_that_is_not_json_fails_the_call() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def odd() -> AsyncIterator[object]:
        """Yield something JSON cannot hold."""
        yield object()

    result = await registry.invoke("odd", {})
    assert isinstance(result.error, ToolExecutionError)
    assert "not JSON-compatible" in str(result.error)


async def test_a_tool_timeout_covers_the_whole_async_generator_and_closes_it() -> None:
    registry = ToolRegistry()
    closed = asyncio.Event()
    never = asyncio.Event()

    @registry.tool(timeout=0.2)
    async def stream() -> AsyncIterator[int]:
        """Yield once, then hang."""
        try:
            yield 1
            await never.wait()
            yield 2
        finally:
            closed.set()

    seen: list[ToolEvent] = []
    [result] = await registry.invoke_all([("stream", {})], ctx=ToolContext(on_event=seen.append))
    assert isinstance(result.error, ToolTimeoutError)
    assert closed.is_set()
    assert [e.value for e in seen] == [1]  # type: ignore[union-attr]


async def test_a_cancelled_caller_closes_the_async_generator() -> None:
    registry = ToolRegistry()
    closed, started = asyncio.Event(), asyncio.Event()

    @registry.tool
    async def stream() -> AsyncIterator[int]:
        """Yield forever."""
        try:
            while True:
                started.set()
                yield 1
                await asyncio.Event().wait()
        finally:
            closed.set()

    task = asyncio.ensure_future(registry.invoke_all([("stream", {})]))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed.is_set()


async def test_a_timed_out_sync_generator_is_closed_at_its_next_yield() -> None:
    registry = ToolRegistry()
    go, closed = threading.Event(), threading.Event()
    produced: list[int] = []

    @registry.tool
    def stream() -> Iterator[int]:
        """Yield slowly."""
        try:
            for value in range(1, 10):
                produced.append(value)
                yield value
                go.wait(10)
        finally:
            closed.set()

    [result] = await registry.invoke_all([("stream", {})], timeout=0.2)
    assert isinstance(result.error, ToolTimeoutError)
    go.set()  # the thread moves on to its next yield, where it is closed
    assert await asyncio.to_thread(closed.wait, 10)
    assert produced == [1, 2]
