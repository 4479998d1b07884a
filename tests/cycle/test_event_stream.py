"""The EventStream object itself: stopping it from elsewhere (another task, another
thread, the call's ToolContext), one consumer, collect()."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import Any

import pytest
from openai import OpenAI

from agcore_tools import (
    AssistantTextDelta,
    CycleConfig,
    FinishReason,
    LlmCycle,
    LlmError,
    RunStoppedError,
    ToolContext,
    ToolExecutionStarted,
    ToolProgress,
    ToolRegistry,
    TurnComplete,
)
from agcore_tools.error import LlmUsageError
from agcore_tools.testing import Pause, RawStream

from .conftest import S, assert_history_valid, tool_messages


def endless_tool() -> tuple[ToolRegistry, dict[str, Any]]:
    """A registry whose async tool ``wait`` runs until cancelled; ``seen`` says how far."""
    registry = ToolRegistry()
    seen: dict[str, Any] = {"started": threading.Event(), "cancelled": False}

    @registry.tool
    async def wait() -> str:
        """Waits until cancelled."""
        seen["started"].set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise
        return "impossible"

    return registry, seen


async def test_aclose_from_another_task_stops_the_stream_its_consumer_waits_on(serve, make_cycle):
    # A UI's Stop button: one task iterates, another closes.
    server = serve()
    server.add(RawStream([server.chunk({"content": "Hel"}), Pause(30)]), S.reply_text("again"))
    cycle = make_cycle(server)
    events = cycle.submit_stream("Hi")
    first_words = asyncio.Event()
    seen: list[Any] = []

    async def consume() -> None:
        async for event in events:
            seen.append(event)
            first_words.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(first_words.wait(), 5)

    await asyncio.wait_for(events.aclose(), 5)

    await asyncio.wait_for(consumer, 5)  # its iteration simply ended
    assert [type(e) for e in seen] == [AssistantTextDelta]
    await server.wait_for(lambda: server.requests[0].disconnected, timeout=5)
    assert not server.requests[0].completed
    assert events.response is None
    assert (await cycle.submit("Next")).text == "again"


async def test_aclose_from_another_task_cancels_the_running_tools(serve, make_cycle):
    registry, seen = endless_tool()
    server = serve(S.reply_tool_calls([("wait", {}, "w1")]), S.reply_text("ok"))
    cycle = make_cycle(server)
    events = cycle.submit_stream_with_tools("Go", registry)

    async def consume() -> None:
        async for _ in events:
            pass

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(asyncio.to_thread(seen["started"].wait, 5), 10)

    await asyncio.wait_for(events.aclose(), 5)

    await asyncio.wait_for(consumer, 5)
    assert seen["cancelled"] is True
    assert "did not complete" in tool_messages(cycle.messages)["w1"]
    assert_history_valid(cycle.messages)
    assert (await cycle.submit("And now?")).text == "ok"


async def test_a_stop_while_the_consumer_is_in_its_loop_body_closes_once(serve, make_cycle):
    # A UI's consumer spends its time in the loop body (a websocket send). A Stop then
    # closes the loop while a tool's cancellation awaits its cleanup; the consumer's own
    # close on leaving waits for that one instead of closing the generator again.
    registry = ToolRegistry()
    reported, cleaning, cleaned = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @registry.tool
    async def index(ctx: ToolContext) -> str:
        """Index the documents."""
        ctx.report_progress(1, 100)
        try:
            await asyncio.sleep(60)
        finally:
            cleaning.set()
            await asyncio.wait_for(cleaned.wait(), 10)  # closing a connection, say
        return "indexed"

    server = serve(S.reply_tool_calls([("index", {}, "i1")]), S.reply_text("ok"))
    cycle = make_cycle(server)
    events = cycle.submit_stream_with_tools("Index", registry)
    in_body, leaving = asyncio.Event(), asyncio.Event()

    async def consume() -> None:
        try:
            async for event in events:
                if isinstance(event, ToolProgress):
                    reported.set()
                    await asyncio.wait_for(in_body.wait(), 10)
        finally:
            leaving.set()
            await events.aclose()  # what `async with events:` does on leaving

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(reported.wait(), 10)
    stop = asyncio.create_task(events.aclose())  # the Stop button
    await asyncio.wait_for(cleaning.wait(), 10)  # the loop's close is under way
    in_body.set()
    await asyncio.wait_for(leaving.wait(), 10)  # the consumer is in its own aclose()
    assert not consumer.done()
    cleaned.set()

    await asyncio.wait_for(asyncio.gather(consumer, stop), 10)
    assert "did not complete" in tool_messages(cycle.messages)["i1"]
    assert_history_valid(cycle.messages)
    assert (await cycle.submit("And now?")).text == "ok"


async def test_a_second_consumer_of_one_stream_is_told_a_stream_has_one(serve, make_cycle):
    server = serve()
    server.add(RawStream([server.chunk({"content": "Hel"}), Pause(30)]))
    cycle = make_cycle(server)
    events = cycle.submit_stream("Hi")
    first_words = asyncio.Event()

    async def consume() -> None:
        async for _ in events:
            first_words.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(first_words.wait(), 5)

    with pytest.raises(LlmUsageError, match="an EventStream has one consumer"):
        await events.__anext__()

    await asyncio.wait_for(events.aclose(), 5)
    await asyncio.wait_for(consumer, 5)


def test_close_from_another_thread_stops_a_sync_stream(serve) -> None:
    registry, seen = endless_tool()
    server = serve(S.reply_tool_calls([("wait", {}, "w1")]), S.reply_text("ok"))
    client = OpenAI(base_url=server.base_url, api_key="-", max_retries=0)
    with LlmCycle(CycleConfig("m"), client=client) as cycle:
        events = cycle.submit_stream_with_tools_sync("Go", registry)
        failures: list[BaseException] = []

        def stop_button() -> None:
            # The tool runs only once the consumer asked for the event after its
            # Started one: the main thread is then blocked in next().
            seen["started"].wait(5)
            try:
                events.close()
            except BaseException as exc:  # reported by the assertion below
                failures.append(exc)

        stopper = threading.Thread(target=stop_button)
        stopper.start()
        kinds = [type(event) for event in events]
        stopper.join(10)

        assert failures == []
        assert ToolExecutionStarted in kinds
        assert seen["cancelled"] is True
        assert events.response is None
        assert_history_valid(cycle.messages)
        assert cycle.submit_messages_sync([]).text == "ok"


async def test_collect_after_a_failed_iteration_says_the_call_failed_and_why(serve, make_cycle):
    server = serve()
    server.add(
        RawStream(
            [server.chunk({"content": "Hel"}), {"error": {"message": "upstream overloaded"}}],
            done=False,
        )
    )
    cycle = make_cycle(server, max_retries=0)
    events = cycle.submit_stream("Hi")

    with pytest.raises(LlmError, match="upstream overloaded") as first:
        async for _ in events:
            pass
    with pytest.raises(LlmError) as later:
        await events.collect()

    assert str(later.value).startswith("the streamed call failed earlier: LlmError: ")
    assert "upstream overloaded" in str(later.value)
    assert later.value.__cause__ is first.value


async def test_collect_after_a_clean_end_or_an_early_close_says_so(serve, make_cycle):
    server = serve(S.reply_text("Hello"))
    server.add(RawStream([server.chunk({"content": "partial"}), Pause(30)]))
    cycle = make_cycle(server)

    done = cycle.submit_stream("Hi")
    async for _ in done:
        pass
    assert (await done.collect()).text == "Hello"  # a normal end is no failure
    async with cycle.submit_stream("Again") as left:
        async for _ in left:
            break
    with pytest.raises(LlmError, match="closed before the call finished"):
        await left.collect()


@pytest.mark.parametrize("output_type", [None, int], ids=["text", "output_type"])
async def test_a_consumer_leaving_at_the_last_turn_complete_still_finds_the_response(
    serve, make_cycle, calc, output_type
):
    # A UI stops reading at the answer's TurnComplete(STOP): the call had finished.
    server = serve(S.reply_tool_calls([("add", {"a": 2, "b": 3})]), S.reply_text('{"result": 5}'))
    cycle = make_cycle(server)

    async with cycle.submit_stream_with_tools("2 + 3?", calc, output_type=output_type) as events:
        async for event in events:
            if isinstance(event, TurnComplete) and event.finish_reason is FinishReason.STOP:
                break

    assert events.response is not None
    assert events.response.text == '{"result": 5}' and events.response.turns == 2
    assert events.response.output == (5 if output_type else None)
    assert (await events.collect()).text == '{"result": 5}'
    assert_history_valid(cycle.messages)


# -- a Stop through the call's ToolContext ---------------------------------------------------


def press_stop(ctx: ToolContext) -> None:
    """What a sync app's Stop button does: cancel the call's context from its own thread."""
    button = threading.Thread(target=ctx.cancellation.cancel)
    button.start()
    button.join(5)


def waiting_tool() -> tuple[ToolRegistry, threading.Event]:
    """A registry whose async tool ``crunch`` works until its context is cancelled, then
    returns "stopped" (the result a model used to be sent, and asked about again)."""
    registry = ToolRegistry()
    started = threading.Event()

    @registry.tool
    async def crunch(ctx: ToolContext) -> str:
        """Crunch numbers until stopped."""
        started.set()
        await asyncio.wait_for(ctx.cancellation.wait(), 30)
        return "stopped"

    return registry, started


async def test_a_stop_through_the_ctx_while_a_tool_runs_ends_the_run_without_asking_again(
    serve, make_cycle
):
    registry, started = waiting_tool()
    server = serve(
        S.reply_tool_calls([("crunch", {}, "c1")], usage={"prompt_tokens": 9}),
        S.reply_text("ok"),  # what the run used to ask for next, with "stopped"
    )
    cycle = make_cycle(server)
    ctx = ToolContext()
    run = asyncio.ensure_future(cycle.submit_with_tools("Crunch", registry, ctx=ctx))
    await asyncio.wait_for(asyncio.to_thread(started.wait, 5), 10)

    press_stop(ctx)

    with pytest.raises(RunStoppedError, match="stopped by its ToolContext") as stopped:
        await asyncio.wait_for(run, 10)
    assert isinstance(stopped.value, LlmError)
    assert stopped.value.usage.prompt_tokens == 9  # the one request answered
    assert len(server.requests) == 1  # nothing more was asked of the model
    assert "c1" in tool_messages(cycle.messages)
    assert_history_valid(cycle.messages)
    assert (await cycle.submit_with_tools(None, registry, ctx=ToolContext())).text == "ok"


async def test_a_stop_through_the_ctx_while_the_model_streams_closes_the_request(
    serve, make_cycle, calc
):
    # The consumer waits for the next chunk when Stop is pressed: its iteration ends, as
    # after aclose(), the HTTP stream is dropped, and the cut turn is not recorded.
    server = serve()
    server.add(RawStream([server.chunk({"content": "Hel"}), Pause(30)]), S.reply_text("again"))
    cycle = make_cycle(server)
    ctx = ToolContext()
    events = cycle.submit_stream_with_tools("Hi", calc, ctx=ctx)
    first_words = asyncio.Event()
    seen: list[Any] = []

    async def consume() -> None:
        async for event in events:
            seen.append(event)
            first_words.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(first_words.wait(), 5)

    await asyncio.to_thread(press_stop, ctx)

    await asyncio.wait_for(consumer, 5)  # its iteration simply ended
    assert [type(e) for e in seen] == [AssistantTextDelta]
    await server.wait_for(lambda: server.requests[0].disconnected, timeout=5)
    assert not server.requests[0].completed
    assert events.response is None
    with pytest.raises(RunStoppedError):
        await events.collect()
    assert cycle.messages == [{"role": "user", "content": "Hi"}]
    assert (await cycle.submit("Next")).text == "again"


async def test_a_stop_through_the_ctx_while_the_consumer_handles_an_event_ends_its_loop(
    serve, make_cycle, calc
):
    # Pressed in the consumer's loop body: the loop is closed at once, and the next
    # step ends the iteration once that close is done (the cycle is free then).
    server = serve()
    server.add(RawStream([server.chunk({"content": "Hel"}), Pause(30)]), S.reply_text("again"))
    cycle = make_cycle(server)
    ctx = ToolContext()
    seen: list[Any] = []

    async for event in cycle.submit_stream_with_tools("Hi", calc, ctx=ctx):
        seen.append(event)
        await asyncio.to_thread(press_stop, ctx)

    assert [type(e) for e in seen] == [AssistantTextDelta]
    await server.wait_for(lambda: server.requests[0].disconnected, timeout=5)
    assert (await cycle.submit("Next")).text == "again"


async def test_a_ctx_cancelled_before_the_call_sends_nothing(serve, make_cycle, calc):
    server = serve(S.reply_text("never sent"), S.reply_text("sent"))
    cycle = make_cycle(server)
    ctx = ToolContext()
    ctx.cancellation.cancel()

    with pytest.raises(RunStoppedError):
        await cycle.submit_with_tools("Hi", calc, ctx=ctx)
    with pytest.raises(RunStoppedError):
        await cycle.submit_stream_with_tools("Hi", calc, ctx=ctx).collect()

    assert server.requests == []
    assert cycle.messages == []  # the prompt did not join the history
    assert (await cycle.submit_with_tools("Hi", calc, ctx=ToolContext())).text == "never sent"


def test_a_stop_through_the_ctx_ends_a_sync_call_and_a_sync_stream(serve) -> None:
    # The sync guide's Stop button: a thread cancels the ctx given to a *_sync call.
    registry = ToolRegistry()
    started = threading.Event()

    @registry.tool
    def crunch(ctx: ToolContext) -> str:
        """Crunch numbers until stopped (a sync tool polls its context)."""
        started.set()
        deadline = time.monotonic() + 30
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)  # a step of the work
        return "stopped"

    server = serve(
        S.reply_tool_calls([("crunch", {}, "c1")]),
        S.reply_text("went on"),  # what the old loop asked for after the Stop
    )
    client = OpenAI(base_url=server.base_url, api_key="-", max_retries=0)
    with LlmCycle(CycleConfig("m"), client=client) as cycle:
        ctx = ToolContext()
        stopper = threading.Thread(target=lambda: started.wait(5) and ctx.cancellation.cancel())
        stopper.start()
        with pytest.raises(RunStoppedError):
            cycle.submit_with_tools_sync("Crunch", registry, ctx=ctx)
        stopper.join(5)
        assert len(server.requests) == 1
        assert_history_valid(cycle.messages)

        assert cycle.submit_messages_sync([]).text == "went on"
        server.add(RawStream([server.chunk({"content": "Hel"}), Pause(30)]), S.reply_text("ok"))
        ctx = ToolContext()
        reading = threading.Event()
        stopper = threading.Thread(target=lambda: reading.wait(5) and press_stop(ctx))
        stopper.start()
        with cycle.submit_stream_with_tools_sync("Hi", registry, ctx=ctx) as events:
            kinds = []
            for event in events:
                kinds.append(type(event))
                reading.set()
        stopper.join(5)
        assert kinds == [AssistantTextDelta]
        with pytest.raises(RunStoppedError):
            events.collect()
        assert len(server.requests) == 3
        assert cycle.submit_messages_sync([]).text == "ok"


async def test_a_stream_dropped_unfinished_takes_its_ctx_watcher_along(serve, make_cycle, calc):
    # The task that waits for the ctx's Stop holds the stream weakly: a stream the app
    # drops is closed by the garbage collector as before, and its watcher is cancelled,
    # not left pending for ever.
    server = serve()
    server.add(RawStream([server.chunk({"content": "Hel"}), Pause(30)]), S.reply_text("again"))
    cycle = make_cycle(server)
    ctx = ToolContext()
    before = asyncio.all_tasks()
    events = cycle.submit_stream_with_tools("Hi", calc, ctx=ctx)
    assert isinstance(await events.__anext__(), AssistantTextDelta)
    (watcher,) = [t for t in asyncio.all_tasks() - before if "_stop_on" in repr(t.get_coro())]

    del events
    gc.collect()

    done, _ = await asyncio.wait([watcher], timeout=5)
    assert watcher in done and watcher.cancelled()
    await server.wait_for(lambda: server.requests[0].disconnected, timeout=5)
    ctx.cancellation.cancel()  # too late to matter: nothing runs
    assert (await cycle.submit("Next")).text == "again"
