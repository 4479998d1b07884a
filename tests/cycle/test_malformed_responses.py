"""A malformed answer from an OpenAI-compatible server fails the loop with an LlmError.

Each case takes a well-formed answer (Chat Completions or Responses, whole or streamed),
breaks one field the way a buggy server or proxy might, and serves it over real HTTP
from a ScriptedChatServer. The loop must stop with an LlmError naming the field, not a
TypeError or AttributeError from deep inside, and leave the history as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from agcore_tools import FinishReason, LlmError, ToolRegistry, TurnComplete
from agcore_tools.testing import RawResponse, RawStream

from .conftest import S, assert_history_valid

ADD_CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
}


def chat_body() -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": [ADD_CALL]}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }


def chat_chunks() -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [choice],
        }

    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [{"index": 0, **ADD_CALL}]}),
        chunk({}, "tool_calls"),
    ]


def responses_body() -> dict[str, Any]:
    call = {
        "type": "function_call",
        "id": "fc1",
        "call_id": "c1",
        "name": "add",
        "arguments": '{"a": 2, "b": 3}',
        "status": "completed",
    }
    text = {
        "type": "message",
        "id": "m1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "5", "annotations": []}],
    }
    return {"id": "resp_1", "object": "response", "status": "completed", "model": "m",
            "output": [text, call]}  # fmt: skip


def responses_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "response.completed", "sequence_number": 0, "response": body}]


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Any], None]:
    def mutate(data: Any) -> None:
        for key in path[:-1]:
            data = data[key]
        data[path[-1]] = value

    return mutate


# (api, stream, path into the body (the chunk list when streamed on Chat), value, message)
CASES = [
    ("chat", False, ("choices",), 12345, r"response is malformed: choices is int, not a list"),
    ("chat", False, ("choices", 0, "message", "tool_calls"), 12345,
     r"the message's tool_calls is int, not a list"),
    ("chat", True, (0, "choices"), 12345, r"stream is malformed: a chunk's choices is int, not a list"),
    ("chat", True, (1, "choices", 0, "delta", "tool_calls"), 12345,
     r"a chunk's tool_calls is int, not a list"),
    ("responses", False, ("status",), [], r"response is malformed: status is list, not a string"),
    ("responses", False, ("output",), 12345, r"output is int, not a list"),
    ("responses", False, ("output",), "!!notb64", r"output is str, not a list"),
    ("responses", False, ("output", 1, "name"), 12345, r"output\[1\]\.name is int, not a string"),
    ("responses", False, ("output", 0, "content"), 12345, r"output\[0\]\.content is int, not a list"),
    ("responses", False, ("output", 0, "content"), "x", r"output\[0\]\.content is str, not a list"),
    ("responses", False, ("output", 0, "content", 0), "x",
     r"output\[0\]\.content\[0\] is str, not an object"),
    ("responses", False, ("output", 0, "content", 0, "text"), 12345,
     r"output\[0\]\.content\[0\]\.text is int, not a string"),
    ("responses", False, ("output", 1), [], r"output\[1\] is list, not an object"),
    ("responses", True, (0, "response", "output"), 12345, r"output is int, not a list"),
    ("responses", True, (0, "response", "output", 0, "content"), 12345,
     r"output\[0\]\.content is int, not a list"),
    ("responses", True, (0, "response", "output", 1, "name"), 12345,
     r"output\[1\]\.name is int, not a string"),
    ("responses", True, (0, "type"), [], r"stream is malformed: an event's type is list, not a string"),
]  # fmt: skip


def _served(api: str, stream: bool, mutate: Callable[[Any], None]) -> RawResponse | RawStream:
    if api == "chat":
        if stream:
            chunks = chat_chunks()
            mutate(chunks)
            return RawStream(chunks)
        body = chat_body()
        mutate(body)
        return RawResponse(200, body)
    if stream:
        events = responses_events(responses_body())
        mutate(events)
        return RawStream(events, done=False)
    body = responses_body()
    mutate(body)
    return RawResponse(200, body)


@pytest.mark.parametrize(
    ("api", "stream", "path", "value", "message"),
    CASES,
    ids=[f"{api}-{'sse' if stream else 'json'}-{'.'.join(map(str, path))}={value!r}"
         for api, stream, path, value, _ in CASES],
)  # fmt: skip
async def test_a_malformed_answer_is_an_llm_error_naming_the_field(
    serve, make_cycle, api, stream, path, value, message
):
    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    server = serve(_served(api, stream, _set(path, value)))
    cycle = make_cycle(server, api=api, max_retries=0)

    with pytest.raises(LlmError, match=message) as raised:
        if stream:
            await cycle.submit_stream_with_tools("2 + 3?", registry).collect()
        else:
            await cycle.submit_with_tools("2 + 3?", registry)

    assert "\n" not in str(raised.value)
    assert [m["role"] for m in cycle.messages] == ["user"]
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_the_unbroken_answers_the_cases_start_from_run_the_tool(
    serve, make_cycle, api, stream
):
    # The cases above fail on the field they break, not on the answer they start from.
    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    server = serve(_served(api, stream, lambda data: None), S.reply_text("5"))
    cycle = make_cycle(server, api=api, max_retries=0)

    if stream:
        answer = await cycle.submit_stream_with_tools("2 + 3?", registry).collect()
    else:
        answer = await cycle.submit_with_tools("2 + 3?", registry)

    assert answer.text == "5"
    assert [m["role"] for m in cycle.messages] == ["user", "assistant", "tool", "assistant"]


def _text_answer(api: str, stream: bool, mutate: Callable[[Any], None]) -> Any:
    if api == "chat":
        message = {"role": "assistant", "content": "Hi"}
        body = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    else:
        body = responses_body()
        body["output"] = body["output"][:1]
    mutate(body)
    return RawStream(responses_events(body), done=False) if stream else RawResponse(200, body)


@pytest.mark.parametrize(
    ("api", "stream", "path", "value", "text"),
    [
        ("chat", False, ("choices", 0, "finish_reason"), ["stop"], "Hi"),
        ("chat", False, ("choices", 0, "finish_reason"), {"why": "stop"}, "Hi"),
        ("responses", False, ("incomplete_details",), {"reason": []}, "5"),
        ("responses", True, ("output", 0, "content", 0, "text"), None, ""),
    ],
    ids=["chat-list", "chat-object", "responses-incomplete-list", "responses-sse-null-text"],
)
async def test_an_odd_finish_reason_reads_as_other_and_a_null_text_as_empty(
    serve, make_cycle, api, stream, path, value, text
):
    # Tolerated as a finish_reason of 5 already was (test_trace.py); a list or an
    # object raised a bare TypeError (unhashable), a null text one from str.join.
    server = serve(_text_answer(api, stream, _set(path, value)))
    cycle = make_cycle(server, api=api, max_retries=0)

    answer = await (cycle.submit_stream("Hi").collect() if stream else cycle.submit("Hi"))

    assert answer.text == text
    expected = FinishReason.STOP if path[-1] == "text" else FinishReason.OTHER
    assert answer.finish_reason is expected


def test_finish_reason_parse_reads_what_is_no_string_as_other() -> None:
    assert FinishReason.parse(["stop"]) is FinishReason.OTHER  # type: ignore[arg-type]
    assert FinishReason.parse(5) is FinishReason.OTHER  # type: ignore[arg-type]


class Sum(BaseModel):
    n: int


@pytest.mark.parametrize(
    ("api", "stream", "value"),
    [
        ("chat", False, ["stop"]),
        ("chat", True, {"why": "stop"}),
        ("responses", False, ["max_output_tokens"]),
        ("responses", True, {"why": 1}),
    ],
    ids=["chat-json-list", "chat-sse-object", "responses-json-list", "responses-sse-object"],
)
async def test_an_odd_finish_reason_reaches_structured_output_and_events_as_text(
    serve, make_cycle, api, stream, value
):
    # Tolerated as OTHER, it still failed output_type= with a bare TypeError (an
    # unhashable dict key), and TurnComplete.raw_finish_reason held a list or a dict.
    answer = '{"n": 5}'
    if api == "chat":
        message = {"role": "assistant", "content": answer}
        choice = {"index": 0, "message": message, "finish_reason": value}
        if stream:
            choice = {"index": 0, "delta": message, "finish_reason": value}
        body: dict[str, Any] = {"choices": [choice]}
    else:
        body = responses_body()
        body["output"] = body["output"][:1]
        body["output"][0]["content"][0]["text"] = answer
        body["incomplete_details"] = {"reason": value}

    def served() -> RawResponse | RawStream:
        if not stream:
            return RawResponse(200, body)
        return RawStream([body] if api == "chat" else responses_events(body), done=api == "chat")

    server = serve(served(), served())
    cycle = make_cycle(server, api=api, max_retries=0)
    run = cycle.submit_stream_with_tools if stream else cycle.submit_with_tools

    if stream:
        events = [e async for e in run("Sum?", ToolRegistry(), output_type=Sum)]
        answered = [e for e in events if isinstance(e, TurnComplete)]
        assert [e.raw_finish_reason for e in answered] == [str(value)]
    else:
        response = await run("Sum?", ToolRegistry(), output_type=Sum)
        assert response.output == Sum(n=5)
        assert response.finish_reason is FinishReason.OTHER


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_part_of_another_type_is_not_read_for_a_refusal(serve, make_cycle, stream):
    # Only a refusal part's "refusal" is read as text: a part of a type the loop does
    # not read (a newer API's) may hold that key as anything.
    body = responses_body()
    body["output"] = body["output"][:1]
    odd = [{"type": "future_part", "refusal": {"code": 1}}, {"type": [], "text": 5}]
    body["output"][0]["content"] += odd
    served = RawStream(responses_events(body), done=False) if stream else RawResponse(200, body)
    cycle = make_cycle(serve(served), api="responses", max_retries=0)

    answer = await (cycle.submit_stream("Hi").collect() if stream else cycle.submit("Hi"))

    assert (answer.text, answer.refusal) == ("5", None)
