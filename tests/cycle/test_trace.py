"""The loop's OpenTelemetry spans against a real loopback server: ``invoke_agent`` per
``submit*`` call, ``chat {model}`` per request, ``execute_tool {tool}`` per call."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from agcore_tools import (
    AssistantTextDelta,
    CycleConfig,
    LlmCycle,
    LlmError,
    MaxTurnsExceededError,
    RunStoppedError,
    ToolContext,
    ToolRegistry,
    TurnComplete,
)
from agcore_tools.testing import Pause, RawStream, ScriptedChatServer
from tests._otel import Spans, attributes, recording

from .conftest import S

CACHED_USAGE = {
    "prompt_tokens": 30,
    "completion_tokens": 12,
    "total_tokens": 42,
    "prompt_tokens_details": {"cached_tokens": 20},
    "completion_tokens_details": {"reasoning_tokens": 5},
}
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


@pytest.fixture
def spans() -> Any:
    with recording() as recorded:
        yield recorded


def two_turns() -> list[Any]:
    return [
        S.reply_tool_calls(
            [("add", {"a": 2, "b": 3}, "call_add"), ("fail", {"reason": "broken"}, "call_fail")],
            usage=CACHED_USAGE,
        ),
        S.reply_text("5, and fail failed", usage={"prompt_tokens": 50, "completion_tokens": 6}),
    ]


def check_two_turn_tree(
    spans: Spans, server: ScriptedChatServer, *, streamed: bool, parent: Any = None
) -> None:
    agent = spans.one("invoke_agent")
    if parent is None:
        assert agent.parent is None
    else:
        assert agent.parent is not None
        assert agent.parent.span_id == parent.context.span_id
    children = spans.children(agent)
    assert [s.name for s in children[:1] + children[3:]] == ["chat test-model", "chat test-model"]
    assert sorted(s.name for s in children[1:3]) == ["execute_tool add", "execute_tool fail"]
    # Nothing else, nothing nested deeper.
    assert len(spans.finished()) == 5 + (parent is not None)
    assert {s.context.trace_id for s in spans.finished()} == {agent.context.trace_id}

    assert agent.kind is SpanKind.INTERNAL
    assert attributes(agent) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "test-model",
        "server.address": "127.0.0.1",
        "server.port": server.port,
        "gen_ai.usage.input_tokens": 80,
        "gen_ai.usage.output_tokens": 18,
        "gen_ai.usage.cache_read.input_tokens": 20,
        "gen_ai.usage.reasoning.output_tokens": 5,
    }
    assert agent.status.status_code is StatusCode.UNSET

    first, second = children[0], children[3]
    assert first.kind is SpanKind.CLIENT
    common = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "test-model",
        "server.address": "127.0.0.1",
        "server.port": server.port,
        "openai.api.type": "chat_completions",
        "gen_ai.response.model": server.model,
    }
    first_attributes = attributes(first)
    if streamed:
        assert first_attributes.pop("gen_ai.request.stream") is True
        assert first_attributes.pop("gen_ai.response.time_to_first_chunk") >= 0
        assert first_attributes.pop("gen_ai.response.id") == "chatcmpl-scripted"
    else:
        assert first_attributes.pop("gen_ai.response.id").startswith("chatcmpl-scripted-")
    assert first_attributes == {
        **common,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 12,
        "gen_ai.usage.cache_read.input_tokens": 20,
        "gen_ai.usage.reasoning.output_tokens": 5,
    }
    second_attributes = attributes(second)
    assert second_attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert second_attributes["gen_ai.usage.input_tokens"] == 50
    assert "gen_ai.usage.cache_read.input_tokens" not in second_attributes

    add, fail = spans.one("execute_tool add"), spans.one("execute_tool fail")
    assert attributes(add) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call_add",
        "gen_ai.tool.description": "Add two integers.",
    }
    assert attributes(fail)["error.type"] == "ToolExecutionError"
    assert attributes(fail)["gen_ai.tool.call.id"] == "call_fail"
    assert fail.status.status_code is StatusCode.ERROR
    # Tools run after their turn's request and before the next one.
    assert first.end_time <= min(add.start_time, fail.start_time)
    assert max(add.end_time, fail.end_time) <= second.start_time
    # No content unless asked for.
    assert not any(CONTENT_KEYS & set(attributes(s)) for s in spans.finished())


async def test_a_two_turn_loop_with_a_failing_tool(
    spans: Spans, serve: Callable[..., ScriptedChatServer], make_cycle: Any, calc: ToolRegistry
) -> None:
    server = serve(*two_turns())
    response = await make_cycle(server).submit_with_tools("2 + 3, then fail", calc)
    assert response.text == "5, and fail failed"
    check_two_turn_tree(spans, server, streamed=False)


async def test_a_streamed_loop_and_the_consumer_stays_outside_the_spans(
    spans: Spans, serve: Callable[..., ScriptedChatServer], make_cycle: Any, calc: ToolRegistry
) -> None:
    server = serve(*two_turns())
    app = spans.provider.get_tracer("app")
    seen: set[int] = set()
    with app.start_as_current_span("request handler") as handler:
        async with make_cycle(server).submit_stream_with_tools("2 + 3, then fail", calc) as events:
            async for _event in events:
                # Between events the consumer's own span is current, not the loop's.
                seen.add(trace.get_current_span().get_span_context().span_id)
        assert events.response is not None
    assert seen == {handler.get_span_context().span_id}
    check_two_turn_tree(spans, server, streamed=True, parent=spans.one("request handler"))


async def test_a_stream_read_after_its_callers_span_ended_is_still_its_child(
    spans: Spans, serve: Callable[..., ScriptedChatServer], make_cycle: Any, calc: ToolRegistry
) -> None:
    server = serve(*two_turns())
    with spans.provider.get_tracer("app").start_as_current_span("request handler"):
        events = make_cycle(server).submit_stream_with_tools("2 + 3, then fail", calc)
    # A web framework reads the returned stream after the handler's span has ended.
    async with events:
        async for _event in events:
            pass
    check_two_turn_tree(spans, server, streamed=True, parent=spans.one("request handler"))


async def test_a_failed_request_marks_its_chat_span_and_the_run(
    spans: Spans, serve: Callable[..., ScriptedChatServer], make_cycle: Any
) -> None:
    server = serve(S.error(400, "bad request"))
    with pytest.raises(LlmError, match="bad request"):
        await make_cycle(server, max_retries=0).submit("Hi")
    chat, agent = spans.one("chat test-model"), spans.one("invoke_agent")
    assert chat.parent is not None and chat.parent.span_id == agent.context.span_id
    # The request's span names the SDK's error; the run's, the error the caller got.
    assert attributes(chat)["error.type"] == "BadRequestError"
    assert attributes(agent)["error.type"] == "LlmError"
    assert chat.status.status_code is agent.status.status_code is StatusCode.ERROR
    assert "gen_ai.usage.input_tokens" not in attributes(agent)


async def test_content_is_recorded_when_asked(
    serve: Callable[..., ScriptedChatServer], make_cycle: Any, calc: ToolRegistry
) -> None:
    server = serve(*two_turns())
    with recording(capture_content=True) as spans:
        cycle: LlmCycle = make_cycle(server, system_prompt="Be brief.")
        await cycle.submit_with_tools("2 + 3, then fail", calc)
    first, second = spans.named("chat test-model")
    assert json.loads(attributes(first)["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "2 + 3, then fail"}]},
    ]
    assert json.loads(attributes(first)["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_add",
                    "name": "add",
                    "arguments": {"a": 2, "b": 3},
                },
                {
                    "type": "tool_call",
                    "id": "call_fail",
                    "name": "fail",
                    "arguments": {"reason": "broken"},
                },
            ],
            "finish_reason": "tool_calls",
        }
    ]
    sent = json.loads(attributes(second)["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[3]["parts"] == [{"type": "tool_call_response", "id": "call_add", "response": "5"}]
    assert json.loads(attributes(second)["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "5, and fail failed"}
    ]
    add = attributes(spans.one("execute_tool add"))
    assert (add["gen_ai.tool.call.arguments"], add["gen_ai.tool.call.result"]) == (
        '{"a":2,"b":3}',
        "5",
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_recorded_content_has_the_reasoning_on_either_api(
    api: str, serve: Callable[..., ScriptedChatServer], make_cycle: Any, calc: ToolRegistry
) -> None:
    # The Responses API keeps a turn's reasoning summary among its output items: before,
    # its messages were recorded without it.
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "call_add")], reasoning="Add them."),
        S.reply_text("5"),
    )
    with recording(capture_content=True) as spans:
        await make_cycle(server, api=api).submit_with_tools("2 + 3", calc)
    first, second = spans.named("chat test-model")
    thought = {"type": "reasoning", "content": "Add them."}
    assert json.loads(attributes(first)["gen_ai.output.messages"])[0]["parts"][0] == thought
    sent = json.loads(attributes(second)["gen_ai.input.messages"])
    assert sent[1]["parts"][0] == thought  # the assistant's turn, sent back


async def test_a_finish_reason_that_is_no_str_fails_no_traced_run(
    serve: Callable[..., ScriptedChatServer], make_cycle: Any
) -> None:
    # Untraced, the loop reads it as "other"; traced, the span's len() of it raised a
    # bare TypeError that failed the run.
    server = serve()
    server.add(RawStream([server.chunk({"content": "Hi"}), server.chunk({}, finish_reason=5)]))
    with recording(capture_content=True) as spans:
        response = await make_cycle(server).submit_stream("Hi").collect()
    assert response.text == "Hi"
    chat = attributes(spans.one("chat test-model"))
    assert chat["gen_ai.response.finish_reasons"] == ("5",)
    assert json.loads(chat["gen_ai.output.messages"])[0]["finish_reason"] == "5"
    assert spans.one("invoke_agent").status.status_code is StatusCode.UNSET


async def test_chat_content_and_failure_statuses_are_cut_with_their_full_length(
    serve: Callable[..., ScriptedChatServer], make_cycle: Any
) -> None:
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    big = "A" * 50_000
    server = serve(
        S.reply_tool_calls([("echo", {"text": big}, "call_1")]),
        S.reply_text(big),
        S.error(400, "bad request: " + "B" * 100_000),
    )
    cycle: LlmCycle = make_cycle(server, max_retries=0)
    with recording(capture_content=True, max_content_chars=1000) as spans:
        await cycle.submit_with_tools("echo it", registry)
        with pytest.raises(LlmError):
            await cycle.submit("again")
    first, second, third = spans.named("chat test-model")
    # Each text, argument and result is cut; the attribute stays JSON.
    [call] = json.loads(attributes(first)["gen_ai.output.messages"])[0]["parts"]
    assert len(call["arguments"]) == 1000
    assert call["arguments"].endswith("… (50,012 chars)")
    sent = json.loads(attributes(second)["gen_ai.input.messages"])
    response = sent[-1]["parts"][0]["response"]  # the loop cut it to max_result_bytes
    assert (len(response), response[-16:]) == (1000, "… (16,384 chars)")
    [text] = json.loads(attributes(second)["gen_ai.output.messages"])[0]["parts"]
    assert len(text["content"]) == 1000
    # A failure's text, on the chat and invoke_agent spans alike.
    for span in (third, spans.named("invoke_agent")[-1]):
        status = span.status.description or ""
        assert len(status) == 4096
        assert status.endswith(" chars)")
        assert "BBBB" in status


def agent_usage(spans: Spans) -> dict[str, Any]:
    agent = spans.named("invoke_agent")[-1]
    return {k: v for k, v in attributes(agent).items() if k.startswith("gen_ai.usage.")}


async def test_a_run_that_fails_is_left_or_is_cancelled_still_reports_its_tokens(
    serve: Callable[..., ScriptedChatServer], make_cycle: Any, calc: ToolRegistry
) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 1}
    spent = {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 1}
    twice = {"gen_ai.usage.input_tokens": 200, "gen_ai.usage.output_tokens": 2}
    add = S.reply_tool_calls([("add", {"a": 1, "b": 2})], usage=usage)
    started, never = asyncio.Event(), asyncio.Event()

    @calc.tool
    async def hang() -> str:
        """Waits for ever."""
        started.set()
        await never.wait()
        return "never"

    server = serve(
        add,
        add,  # max_turns=2: the run stops before a third request
        add,
        S.error(400, "context too long"),
        add,
        S.reply_tool_calls([("hang", {})], usage=usage),
    )
    with recording() as spans:
        with pytest.raises(MaxTurnsExceededError):
            await make_cycle(server, max_turns=2).submit_with_tools("go", calc)
        assert agent_usage(spans) == twice
        with pytest.raises(LlmError):
            await make_cycle(server, max_retries=0).submit_with_tools("go", calc)
        assert agent_usage(spans) == spent
        events = make_cycle(server).submit_stream_with_tools("go", calc)
        async with events:
            async for event in events:
                if isinstance(event, TurnComplete):
                    break  # left after the first answer
        assert agent_usage(spans) == spent
        run = asyncio.ensure_future(make_cycle(server).submit_with_tools("go", calc))
        await asyncio.wait_for(started.wait(), 10)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert agent_usage(spans) == spent


async def test_a_run_without_reported_usage_has_no_token_totals(
    serve: Callable[..., ScriptedChatServer], make_cycle: Any
) -> None:
    # A stream without include_usage: the chat span has no usage, nor may invoke_agent
    # claim zeros nobody measured.
    server = serve(S.reply_text("hello"))
    with recording() as spans:
        cycle = make_cycle(server, stream_options={"include_usage": False})
        response = await cycle.submit_stream("hi").collect()
    assert (response.usage.requests, response.usage.reported) == (1, 0)
    assert agent_usage(spans) == {}
    assert not any(k.startswith("gen_ai.usage.") for k in attributes(spans.one("chat test-model")))
    assert "| usage | no usage reported by its 1 request(s) |" in response._repr_markdown_()


async def test_leaving_a_stream_early_ends_its_spans(
    spans: Spans, serve: Callable[..., ScriptedChatServer], make_cycle: Any
) -> None:
    server = serve(S.reply_text("Hello there, world"), chunk_chars=5)
    events = make_cycle(server).submit_stream("Hi")
    async with events:
        async for event in events:
            assert isinstance(event, AssistantTextDelta)
            break
    assert [s.name for s in spans.finished()] == ["chat test-model", "invoke_agent"]
    # The consumer stopped the call: neither the request nor the run failed.
    assert all(s.status.status_code is StatusCode.UNSET for s in spans.finished())
    assert all("error.type" not in attributes(s) for s in spans.finished())


async def test_a_stream_dropped_without_closing_still_ends_its_run_span(
    spans: Spans, serve: Callable[..., ScriptedChatServer], make_cycle: Any
) -> None:
    # A `break` outside `async with`: the stream is never closed, only collected (the
    # garbage collector closes its loop). Its invoke_agent span was never ended, so
    # never exported, and its chat span had no parent in the backend.
    server = serve(S.reply_text("Hello there, world"), chunk_chars=5)
    async for event in make_cycle(server).submit_stream("Hi"):
        assert isinstance(event, AssistantTextDelta)
        break
    gc.collect()  # ends the span on the loop, at its next turn (FIFO: before this task's)
    await asyncio.sleep(0)
    agent = spans.one("invoke_agent")
    assert agent.status.status_code is StatusCode.UNSET  # left early, as with a close
    assert "error.type" not in attributes(agent)


async def test_a_stop_from_another_task_ends_the_run_as_leaving_early_does(
    spans: Spans, serve: Callable[..., ScriptedChatServer], make_cycle: Any
) -> None:
    # The same Stop, whether it lands while the consumer waits for an event (it is
    # cancelled) or while it is in its loop body: the run was stopped, not failed.
    server = serve()
    server.add(RawStream([server.chunk({"content": "Hel"}), Pause(30)]))
    events = make_cycle(server).submit_stream("Hi")
    first_words = asyncio.Event()

    async def consume() -> None:
        async with events:
            async for _ in events:
                first_words.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(first_words.wait(), 5)
    await asyncio.wait_for(events.aclose(), 5)
    await asyncio.wait_for(consumer, 5)

    assert [s.name for s in spans.finished()] == ["chat test-model", "invoke_agent"]
    assert spans.one("invoke_agent").status.status_code is StatusCode.UNSET
    assert "error.type" not in attributes(spans.one("invoke_agent"))


async def test_a_stop_through_the_ctx_ends_the_run_as_leaving_early_does(
    spans: Spans, serve: Callable[..., ScriptedChatServer], make_cycle: Any, calc: ToolRegistry
) -> None:
    # Whether it lands while the model streams (the stream's stop) or before the run
    # sends anything (the loop's own check): the app stopped the run, it did not fail.
    server = serve()
    server.add(RawStream([server.chunk({"content": "Hel"}), Pause(30)]))
    cycle = make_cycle(server)
    ctx = ToolContext()
    events = cycle.submit_stream_with_tools("Hi", calc, ctx=ctx)
    assert isinstance(await events.__anext__(), AssistantTextDelta)
    waiting = asyncio.ensure_future(events.__anext__())
    await asyncio.to_thread(ctx.cancellation.cancel)
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, 5)
    with pytest.raises(RunStoppedError):
        await events.collect()
    with pytest.raises(RunStoppedError):
        await cycle.submit_with_tools("Hi", calc, ctx=ctx)  # still cancelled: unsent

    names = ["chat test-model", "invoke_agent", "invoke_agent"]
    assert [s.name for s in spans.finished()] == names
    for agent in spans.finished()[1:]:
        assert agent.status.status_code is StatusCode.UNSET
        assert "error.type" not in attributes(agent)


def test_a_sync_call_is_traced_under_the_callers_span(calc: ToolRegistry) -> None:
    from openai import OpenAI

    script = [S.reply_tool_calls([("add", {"a": 1, "b": 2})]), S.reply_text("3")]
    with recording() as spans, ScriptedChatServer(script) as server:
        client = OpenAI(base_url=server.base_url, api_key="-", timeout=10.0)
        with LlmCycle(CycleConfig("m"), client=client) as cycle:
            app = spans.provider.get_tracer("app")
            with app.start_as_current_span("sync caller"):
                events = cycle.submit_stream_with_tools_sync("1 + 2?", calc)
                assert [type(e).__name__ for e in events][-1] == "TurnComplete"
        client.close()
    assert sorted(spans.tree()) == [
        ("chat m", "invoke_agent"),
        ("chat m", "invoke_agent"),
        ("execute_tool add", "invoke_agent"),
        ("invoke_agent", "sync caller"),
        ("sync caller", None),
    ]


async def test_the_responses_api_gets_the_same_spans(
    spans: Spans, serve: Callable[..., ScriptedChatServer], make_cycle: Any, calc: ToolRegistry
) -> None:
    server = serve(*two_turns())
    cycle = make_cycle(server, api="responses", max_output_tokens=64)

    response = await cycle.submit_stream_with_tools("2 + 3, then fail", calc).collect()

    assert response.text == "5, and fail failed"
    agent = spans.one("invoke_agent")
    children = spans.children(agent)
    assert [s.name for s in children[:1] + children[3:]] == ["chat test-model", "chat test-model"]
    first = attributes(children[0])
    assert first["openai.api.type"] == "responses"
    assert first["gen_ai.request.max_tokens"] == 64  # max_output_tokens
    assert first["gen_ai.request.stream"] is True
    assert first["gen_ai.response.time_to_first_chunk"] >= 0
    assert first["gen_ai.response.id"] == cycle.messages[1]["response"]["id"]
    assert first["gen_ai.response.id"].startswith("resp_scripted_")
    assert first["gen_ai.response.model"] == server.model
    assert first["gen_ai.response.finish_reasons"] == ("completed",)
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (30, 12)
    assert first["gen_ai.usage.cache_read.input_tokens"] == 20
    assert first["gen_ai.usage.reasoning.output_tokens"] == 5
    assert attributes(agent)["gen_ai.usage.input_tokens"] == 80
