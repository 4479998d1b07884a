"""The loop over the Responses API (``CycleConfig(api="responses")``) against a real
loopback server, in JSON and in SSE: the requests it sends, the history it keeps."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from pydantic import BaseModel

from agcore_tools import (
    AssistantTextDelta,
    CycleConfig,
    FinishReason,
    LlmConfigError,
    LlmCycle,
    LlmError,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    ReasoningDelta,
    SchemaContext,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolRegistry,
    TrimOldest,
    TurnComplete,
)
from agcore_tools.cycle._wire_responses import CONVERSATION_TAIL, to_input
from agcore_tools.testing import RawResponse, RawStream, Reply

from .conftest import S, assert_history_valid, tool_messages

MODES = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
USAGE = {
    "prompt_tokens": 50,
    "completion_tokens": 20,
    "total_tokens": 70,
    "prompt_tokens_details": {"cached_tokens": 32},
    "completion_tokens_details": {"reasoning_tokens": 12},
}


async def run(cycle: LlmCycle, prompt: str | None, registry: ToolRegistry, stream: bool) -> Any:
    if not stream:
        return await cycle.submit_with_tools(prompt, registry)
    return await cycle.submit_stream_with_tools(prompt, registry).collect()


def items(request: Any) -> list[dict[str, Any]]:
    return request.json["input"]


@MODES
async def test_a_tool_loop_runs_over_responses_create(serve, make_cycle, calc, stream):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")], usage=USAGE),
        S.reply_text("5", usage=USAGE),
    )
    cycle = make_cycle(server, api="responses", system_prompt="Be brief.")

    response = await run(cycle, "2 + 3?", calc, stream)

    assert response.text == "5" and response.turns == 2
    assert response.stop_reason is FinishReason.STOP
    assert calc.runs == [("add", {"a": 2, "b": 3})]
    assert [r.path for r in server.requests] == ["/v1/responses"] * 2
    assert [r.stream for r in server.requests] == [stream, stream]
    first, second = (r.json for r in server.requests)
    assert first["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2 + 3?"},
    ]
    assert "messages" not in first and "stream_options" not in first
    assert {t["name"] for t in first["tools"]} == {"add", "weather", "fail"}
    assert all(t["type"] == "function" and t["strict"] is False for t in first["tools"])
    call, output = second["input"][2:]
    assert (call["type"], call["call_id"], call["name"]) == ("function_call", "c1", "add")
    assert output == {"type": "function_call_output", "call_id": "c1", "output": "5"}
    # Usage, cached and reasoning tokens included, summed over both requests.
    usage = response.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (100, 40, 140)
    assert (usage.cached_tokens, usage.reasoning_tokens, usage.requests) == (64, 24, 2)
    # The history is plain JSON in the Chat Completions shape, plus each response.
    assert json.loads(json.dumps(cycle.messages)) == cycle.messages
    assert [m["role"] for m in cycle.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert_history_valid(cycle.messages)
    assert cycle.messages[2]["response"]["id"].startswith("resp_")
    assert tool_messages(cycle.messages) == {"c1": "5"}


@MODES
async def test_reasoning_items_go_back_with_their_calls_on_every_following_turn(
    serve, make_cycle, calc, stream
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")], reasoning="add first"),
        S.reply_tool_calls([("add", {"a": 3, "b": 4}, "c2")], reasoning="then again"),
        S.reply_text("3 and 7", reasoning="done"),
    )
    cycle = make_cycle(server, api="responses")

    response = await run(cycle, "Sums?", calc, stream)

    assert response.text == "3 and 7"
    kinds = [
        (i.get("type") or i["role"], i.get("id") or i.get("call_id"))
        for i in items(server.requests[2])
    ]
    rs1, rs2 = (i["id"] for i in items(server.requests[2]) if i.get("type") == "reasoning")
    assert kinds == [
        ("user", None),
        ("reasoning", rs1),
        ("function_call", "fc_scripted_0_0"),
        ("function_call_output", "c1"),
        ("reasoning", rs2),
        ("function_call", "fc_scripted_1_0"),
        ("function_call_output", "c2"),
    ]
    # The second request already carried the first reasoning item, before its call.
    assert [i.get("type") for i in items(server.requests[1])][1:3] == ["reasoning", "function_call"]
    reasoning = items(server.requests[2])[1]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "add first"}]
    assert "include" not in server.requests[0].json  # stored responses: nothing to ask


@MODES
async def test_without_store_encrypted_reasoning_is_asked_for_and_sent_back(
    serve, make_cycle, calc, stream
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")], reasoning="think"),
        S.reply_text("3"),
    )
    cycle = make_cycle(
        server, api="responses", store=False, include=["message.output_text.logprobs"]
    )

    await run(cycle, "1 + 2?", calc, stream)

    for request in server.requests:
        assert request.json["store"] is False
        assert request.json["include"] == [
            "message.output_text.logprobs",
            "reasoning.encrypted_content",
        ]
    reasoning = items(server.requests[1])[1]
    assert reasoning["type"] == "reasoning"
    assert reasoning["encrypted_content"] == "encrypted:0:think"
    assert cycle.config.request_options["include"] == ["message.output_text.logprobs"]


async def test_stream_maps_text_reasoning_and_tool_events(serve, make_cycle, calc):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")], reasoning="I should add"),
        S.reply_text("The sum is five.", reasoning="easy"),
        chunk_chars=4,
    )
    cycle = make_cycle(server, api="responses")

    events = [e async for e in cycle.submit_stream_with_tools("2 + 3?", calc)]

    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        *["ReasoningDelta"] * 3,
        "TurnComplete",
        "ToolExecutionStarted",
        "ToolExecutionCompleted",
        "ReasoningDelta",
        *["AssistantTextDelta"] * 4,
        "TurnComplete",
    ]
    reasoning = "".join(e.text for e in events[:3] if isinstance(e, ReasoningDelta))
    assert reasoning == "I should add"
    text = "".join(e.text for e in events if isinstance(e, AssistantTextDelta))
    assert text == "The sum is five."
    started = next(e for e in events if isinstance(e, ToolExecutionStarted))
    assert (started.tool_name, started.input, started.call_id) == ("add", {"a": 2, "b": 3}, "c1")
    completed = next(e for e in events if isinstance(e, ToolExecutionCompleted))
    assert completed.output == 5
    last = events[-1]
    assert isinstance(last, TurnComplete) and last.turn == 2 and last.usage is not None


def _event(kind: str, **fields: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}"


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([_event("error", code="server_error", message="overloaded", param=None)], "overloaded"),
        (
            [
                _event(
                    "response.failed",
                    response={
                        "id": "r",
                        "status": "failed",
                        "error": {"code": "x", "message": "it broke"},
                        "output": [],
                    },
                )
            ],
            "it broke",
        ),
        ([], "ended without response.completed"),
    ],
    ids=["error-event", "response-failed", "cut"],
)
async def test_errors_mid_stream_raise_llm_error_after_the_text_so_far(
    serve, make_cycle, events, message
):
    start = _event(
        "response.output_text.delta", output_index=0, item_id="m", content_index=0, delta="Hel"
    )
    server = serve(RawStream([start, *events], done=False))
    cycle = make_cycle(server, api="responses")

    seen: list[Any] = []
    with pytest.raises(LlmError, match=message):
        async for event in cycle.submit_stream("Hi"):
            seen.append(event)

    assert seen == [AssistantTextDelta("Hel")]
    assert len(server.requests) == 1  # a started stream is never retried


async def test_empty_deltas_make_no_events_as_on_chat(serve, make_cycle):
    # A consumer timing the first token, or opening a line on the first delta, must
    # see the same on either API.
    on = {"output_index": 0, "item_id": "m", "content_index": 0}
    steps = [
        _event("response.output_text.delta", **on, delta=""),
        _event("response.reasoning_summary_text.delta", **on, summary_index=0, delta=""),
        _event("response.reasoning_text.delta", **on),  # no delta at all
        _event("response.output_text.delta", **on, delta="Hi"),
        _event("response.completed", response={"id": "r1", "status": "completed", "output": []}),
    ]
    server = serve(RawStream(steps, done=False))
    cycle = make_cycle(server, api="responses")

    seen = [event async for event in cycle.submit_stream("Hi")]

    assert [type(e).__name__ for e in seen] == ["AssistantTextDelta", "TurnComplete"]
    assert seen[0] == AssistantTextDelta("Hi")


async def test_a_connection_dropped_after_response_completed_keeps_the_turn(
    serve, make_cycle, caplog
):
    text = {"type": "output_text", "text": "Hello", "annotations": []}
    said = {"type": "message", "role": "assistant", "id": "m", "content": [text]}
    delta = {"output_index": 0, "item_id": "m", "content_index": 0, "delta": "Hello"}
    completed = {"id": "r1", "status": "completed", "output": [said]}
    steps = [
        _event("response.output_text.delta", **delta),
        _event("response.completed", response=completed),
    ]
    server = serve(RawStream(steps, done=False, drop_connection=True))
    cycle = make_cycle(server, api="responses", max_retries=0)

    with caplog.at_level(logging.WARNING, logger="agcore_tools.cycle"):
        response = await cycle.submit_stream("Hi").collect()

    assert response.text == "Hello"
    assert cycle.messages[-1]["content"] == "Hello"
    assert "broke after its finish_reason" in caplog.text


@MODES
async def test_retries_and_http_errors_behave_as_on_chat(serve, make_cycle, stream):
    server = serve(S.error(503, "busy"), S.reply_text("ok"), S.error(400, "bad input"))
    cycle = make_cycle(server, api="responses")

    first = await (cycle.submit_stream("Hi").collect() if stream else cycle.submit("Hi"))
    with pytest.raises(LlmError, match=r"responses request failed: BadRequestError.*bad input"):
        await (cycle.submit_stream("Again").collect() if stream else cycle.submit("Again"))

    assert first.text == "ok"
    assert len(server.requests) == 3


@MODES
async def test_two_calls_of_one_turn_with_one_call_id_are_answered_apart(
    serve, make_cycle, calc, stream, caplog
):
    # Both went back as "c1": the model could not tell which result answered which call.
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1"), ("add", {"a": 3, "b": 4}, "c1")]),
        S.reply_text("3 and 7"),
    )
    cycle = make_cycle(server, api="responses")

    with caplog.at_level(logging.WARNING, logger="agcore_tools"):
        response = await run(cycle, "Sums?", calc, stream)

    assert response.text == "3 and 7"
    sent = [(i["type"], i["call_id"]) for i in items(server.requests[1]) if "call_id" in i]
    assert sent == [
        ("function_call", "c1"),
        ("function_call", "call_0_1"),
        ("function_call_output", "c1"),
        ("function_call_output", "call_0_1"),
    ]
    assert tool_messages(cycle.messages) == {"c1": "3", "call_0_1": "7"}
    assert "two tool calls of one turn the id 'c1'" in caplog.text
    assert_history_valid(cycle.messages)


@MODES
async def test_a_call_id_the_server_gives_again_in_a_later_turn_gets_one_of_its_own(
    serve, make_cycle, calc, stream
):
    # A server numbering each response's calls from "0" again: the second call had the
    # first one's id, so its idempotency key, and its output matched the first call too.
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "0")]),
        S.reply_tool_calls([("add", {"a": 3, "b": 4}, "0")]),
        S.reply_text("3 then 7"),
    )
    cycle = make_cycle(server, api="responses")

    response = await run(cycle, "Sums?", calc, stream)

    assert response.text == "3 then 7"
    sent = [(i["type"], i["call_id"]) for i in items(server.requests[2]) if "call_id" in i]
    assert sent == [
        ("function_call", "0"),
        ("function_call_output", "0"),
        ("function_call", "call_1_0"),
        ("function_call_output", "call_1_0"),
    ]
    assert tool_messages(cycle.messages) == {"0": "3", "call_1_0": "7"}
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize(
    ("body", "headers", "message"),
    [
        (b"<html><body>Sign in to continue</body></html>", {"content-type": "text/html"},
         r"not a Responses API response: a body that is not JSON, starting '<html><body>Sign in"),
        ({"hello": "world"}, {}, r"""not a Responses API response: JSON starting '\{"hello": "world"\}'"""),
    ],
    ids=["html", "unrelated-json"],
)  # fmt: skip
async def test_a_200_that_is_not_a_response_is_an_llm_error(
    serve, make_cycle, calc, body, headers, message
):
    # It was an empty answer, and an empty assistant message in the history.
    server = serve(RawResponse(200, body, headers))
    cycle = make_cycle(server, api="responses")

    with pytest.raises(LlmError, match=message):
        await cycle.submit_with_tools("2 + 3?", calc)

    assert [m["role"] for m in cycle.messages] == ["user"]


async def test_denied_permission_stops_the_loop_as_on_chat(serve, make_cycle):
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))  # shell is denied

    @registry.tool(permissions=["shell"])
    def run_shell(command: str) -> str:
        """Run a shell command."""
        raise AssertionError("never runs")

    server = serve(S.reply_tool_calls([("run_shell", {"command": "ls"}, "c1")], reasoning="r"))
    cycle = make_cycle(server, api="responses")

    with pytest.raises(LlmError) as raised:
        await cycle.submit_with_tools("List files", registry)

    assert isinstance(raised.value.__cause__, PermissionDeniedError)
    assert tool_messages(cycle.messages)["c1"].startswith("Error: permission denied")
    assert_history_valid(cycle.messages)


async def test_background_responses_are_refused_unstreamed_and_run_streamed(
    serve, make_cycle, calc
):
    # Unstreamed, a background response comes back queued with no output: the loop took
    # it for an empty answer ("" and STOP) while the work went on, billed, unread.
    server = serve(S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]), S.reply_text("5"))
    cycle = make_cycle(server, api="responses", background=True)

    with pytest.raises(LlmConfigError, match=r"background=True\) needs a streamed run"):
        await cycle.submit_with_tools("2 + 3?", calc)
    assert server.requests == [] and cycle.messages == []

    response = await cycle.submit_stream_with_tools("2 + 3?", calc).collect()
    assert response.text == "5"
    assert [r.json.get("background") for r in server.requests] == [True, True]


async def test_background_is_refused_where_a_profile_unstreams_the_tool_turn(
    serve, make_cycle, calc
):
    # LiteLLM's profile sends tool turns unstreamed: the check must come after that, or
    # a streamed run's background request goes out unstreamed, queued and billed.
    from agcore_tools.cycle.profiles import LITELLM

    server = serve(S.reply_text("5"))
    cycle = make_cycle(
        server, api="responses", background=True, tool_choice="auto", profile=LITELLM
    )

    with pytest.raises(LlmConfigError, match=r"the litellm server profile sends this turn"):
        await cycle.submit_stream_with_tools("2 + 3?", calc).collect()
    assert server.requests == [] and calc.runs == []


async def test_an_in_progress_status_with_output_is_an_answer(serve, make_cycle, calc):
    # A bridge that reports a finished response as in_progress still answered.
    said = {"type": "output_text", "text": "It is 5.", "annotations": []}
    answer = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "status": "in_progress",
        "model": "test-model",
        "output": [{"type": "message", "id": "m1", "role": "assistant", "content": [said]}],
    }
    server = serve(RawResponse(200, answer))
    cycle = make_cycle(server, api="responses")

    response = await cycle.submit_with_tools("2 + 3?", calc)

    assert response.text == "It is 5."


async def test_a_queued_response_is_an_error_not_an_empty_answer(serve, make_cycle, calc):
    # background asked for past the config's check (in extra_body), or by a proxy.
    queued = {
        "id": "resp_bg",
        "object": "response",
        "created_at": 1700000000,
        "status": "queued",
        "model": "test-model",
        "output": [],
    }
    server = serve(RawResponse(200, queued))
    cycle = make_cycle(server, api="responses", extra_body={"background": True})

    with pytest.raises(LlmError, match=r"'resp_bg' is still 'queued'.*background"):
        await cycle.submit_with_tools("2 + 3?", calc)
    assert calc.runs == []


@MODES
async def test_a_truncated_answer_is_length_and_a_lone_reasoning_item_is_not_sent_back(
    serve, make_cycle, stream
):
    server = serve(
        Reply(None, reasoning="long thought", finish_reason="length"), S.reply_text("ok")
    )
    cycle = make_cycle(server, api="responses")

    cut = await (cycle.submit_stream("Hi").collect() if stream else cycle.submit("Hi"))
    await cycle.submit("Go on")

    assert cut.stop_reason is FinishReason.LENGTH
    assert cycle.messages[1]["response"]["output"][0]["type"] == "reasoning"  # kept in history
    assert [i.get("type", i.get("role")) for i in items(server.requests[1])] == ["user", "user"]


@MODES
async def test_chaining_sends_only_what_follows_the_last_response(serve, make_cycle, calc, stream):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")], reasoning="r"),
        S.reply_text("5"),
        S.reply_text("bye"),
    )
    cycle = make_cycle(server, api="responses", chain_responses=True, system_prompt="Be brief.")

    await run(cycle, "2 + 3?", calc, stream)
    await cycle.submit("Thanks")

    first, second, third = (r.json for r in server.requests)
    assert "previous_response_id" not in first and len(first["input"]) == 2
    assert second["previous_response_id"] == cycle.messages[2]["response"]["id"]
    assert second["input"] == [{"type": "function_call_output", "call_id": "c1", "output": "5"}]
    assert third["previous_response_id"] == cycle.messages[4]["response"]["id"]
    assert third["input"] == [{"role": "user", "content": "Thanks"}]


@MODES
async def test_chaining_answers_a_repeated_call_id_under_the_servers_own_id(
    serve, make_cycle, calc, stream
):
    # The second response's call "0" gets an id of its own in the history, but the
    # server stored it as "0": the chained answer went back as "call_1_0", an id that
    # response does not have.
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "0")]),
        S.reply_tool_calls([("add", {"a": 3, "b": 4}, "0")]),
        S.reply_text("3 then 7"),
    )
    cycle = make_cycle(server, api="responses", chain_responses=True)

    response = await run(cycle, "Sums?", calc, stream)

    assert response.text == "3 then 7"
    second, third = (r.json for r in server.requests[1:])
    assert second["input"] == [{"type": "function_call_output", "call_id": "0", "output": "3"}]
    assert third["previous_response_id"] == cycle.messages[3]["response"]["id"]
    assert third["input"] == [{"type": "function_call_output", "call_id": "0", "output": "7"}]
    # The history keeps the calls apart, and so their approvals and idempotency keys.
    assert tool_messages(cycle.messages) == {"0": "3", "call_1_0": "7"}
    assert_history_valid(cycle.messages)


@MODES
async def test_a_conversation_gets_only_what_follows_the_last_response(
    serve, make_cycle, calc, stream
):
    # The server keeps each request's input and output items in the conversation and
    # prepends them to the next request's input: the whole history sent again was every
    # item twice, which OpenAI refuses ("Duplicate item found with id fc_..."), so the
    # tool loop's second request failed.
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")], reasoning="r"),
        S.reply_text("5"),
        S.reply_text("bye"),
    )
    cycle = make_cycle(server, api="responses", conversation="conv_1", system_prompt="Be brief.")

    await run(cycle, "2 + 3?", calc, stream)
    await cycle.submit("Thanks")

    first, second, third = (r.json for r in server.requests)
    assert [r["conversation"] for r in (first, second, third)] == ["conv_1"] * 3
    assert not any("previous_response_id" in r for r in (first, second, third))
    assert [i["role"] for i in first["input"]] == ["system", "user"]
    assert second["input"] == [{"type": "function_call_output", "call_id": "c1", "output": "5"}]
    assert third["input"] == [{"role": "user", "content": "Thanks"}]
    assert_history_valid(cycle.messages)  # the history itself keeps every turn


@MODES
async def test_a_conversation_resumed_after_approval_in_a_new_cycle_sends_the_answers(
    serve, make_cycle, stream
):
    # A run paused for approval, its history saved and resumed by another cycle (another
    # process): the conversation has the call, not its output, which goes alone.
    registry = ToolRegistry()

    @registry.tool(needs_approval=True)
    def refund(order: int) -> str:
        """Refund an order."""
        return f"refunded order {order}"

    server = serve(
        S.reply_tool_calls([("refund", {"order": 7}, "c1")], reasoning="needs a refund"),
        S.reply_text("Refunded."),
    )
    cycle = make_cycle(server, api="responses", conversation="conv_1")
    paused = await run(cycle, "Refund order 7", registry, stream)
    [request] = paused.pending_approvals
    resumed_cycle = make_cycle(server, api="responses", conversation="conv_1")
    resumed_cycle.messages = json.loads(json.dumps(cycle.messages))
    resumed = await resumed_cycle.submit_with_tools(None, registry, approvals=[request.approve()])

    assert resumed.text == "Refunded."
    assert items(server.requests[1]) == [
        {"type": "function_call_output", "call_id": "c1", "output": "refunded order 7"}
    ]


async def test_a_conversation_given_in_extra_body_gets_only_what_follows_too(
    serve, make_cycle, calc
):
    # The SDK merges extra_body into the request: the conversation went, and the whole
    # history with it, every item twice.
    server = serve(S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]), S.reply_text("5"))
    cycle = make_cycle(server, api="responses", extra_body={"conversation": "conv_1"})

    await cycle.submit_with_tools("2 + 3?", calc)

    second = server.requests[1].json
    assert second["conversation"] == "conv_1" and "previous_response_id" not in second
    assert second["input"] == [{"type": "function_call_output", "call_id": "c1", "output": "5"}]
    with pytest.raises(LlmConfigError, match="chain_responses=True or conversation="):
        CycleConfig(
            "m", api="responses", chain_responses=True, extra_body={"conversation": "conv_1"}
        )


@pytest.mark.parametrize("before", [None, "conv_0"])
async def test_a_history_made_outside_a_conversation_goes_whole_into_it(
    serve, make_cycle, calc, before
):
    # A conversation holds only what went through it: a history from a stateless cycle
    # (before=None) or from another conversation, handed to a cycle with conversation=,
    # was sent from its last response on, and the model lost the earlier turns unsaid.
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]),
        S.reply_text("5"),
        S.reply_text("10"),
        S.reply_text("bye"),
    )
    options = {"conversation": before} if before else {}
    first = make_cycle(server, api="responses", **options)
    await first.submit_with_tools("2 + 3?", calc)
    cycle = make_cycle(server, api="responses", conversation={"id": "conv_1"})
    cycle.messages = json.loads(json.dumps(first.messages))

    await cycle.submit("Twice that?")
    await cycle.submit("Thanks")

    whole, then = items(server.requests[2]), items(server.requests[3])
    assert [i.get("type", i.get("role")) for i in whole] == [
        "user", "function_call", "function_call_output", "message", "user"
    ]  # fmt: skip
    assert then == [{"role": "user", "content": "Thanks"}]  # conv_1 holds the rest now


async def test_a_conversation_gets_only_the_feedback_on_an_output_type_retry(serve, make_cycle):
    class City(BaseModel):
        name: str
        population: int

    server = serve(
        S.reply_text('{"name": "Paris", "population": "many"}'),
        S.reply_text('{"name": "Paris", "population": 2102650}'),
    )
    cycle = make_cycle(server, api="responses", conversation="conv_1")

    response = await cycle.submit("Biggest French city?", output_type=City)

    assert response.output == City(name="Paris", population=2102650)
    [feedback] = items(server.requests[1])
    assert feedback["role"] == "user"
    assert "population: Input should be a valid integer" in feedback["content"]


async def test_a_conversation_of_a_workflow_run_begun_before_the_patch_sends_it_all(
    serve, make_cycle, calc
):
    # CONVERSATION_TAIL is False in a Temporal run begun before the patch
    # agcore-conversation-sends-what-follows: its requests stay as they ran.
    server = serve(S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]), S.reply_text("5"))
    cycle = make_cycle(server, api="responses", conversation="conv_1")
    token = CONVERSATION_TAIL.set(False)
    try:
        await cycle.submit_with_tools("2 + 3?", calc)
    finally:
        CONVERSATION_TAIL.reset(token)
    second = server.requests[1].json
    assert second["conversation"] == "conv_1" and "previous_response_id" not in second
    assert [i.get("type", i.get("role")) for i in second["input"]] == [
        "user",
        "function_call",
        "function_call_output",
    ]


async def test_trimming_never_separates_reasoning_or_calls_from_what_follows(
    serve, make_cycle, calc
):
    script = []
    for n in range(3):
        script += [
            S.reply_tool_calls(
                [("add", {"a": n, "b": 1}), ("add", {"a": n, "b": 2})], reasoning=f"r{n}"
            ),
            S.reply_text(f"done {n}", reasoning=f"s{n}"),
        ]
    server = serve(*script)
    cycle = make_cycle(
        server, api="responses", history=TrimOldest(max_messages=7), system_prompt="S"
    )

    for n in range(3):
        await cycle.submit_with_tools(f"question {n}", calc)

    for request in server.requests:
        sent = items(request)
        assert sent[0] == {"role": "system", "content": "S"}
        for position, item in enumerate(sent):
            if item.get("type") == "reasoning":
                assert sent[position + 1].get("type") in ("function_call", "message")
            if item.get("type") == "function_call":
                outputs = [i for i in sent if i.get("type") == "function_call_output"]
                assert item["call_id"] in {o["call_id"] for o in outputs}
                assert any(i.get("type") == "reasoning" for i in sent[:position])
    last = items(server.requests[-1])
    assert [i.get("content") for i in last if i.get("role") == "user"] == ["question 2"]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_max_chars_counts_an_assistant_turn_once(serve, make_cycle, api):
    # The Responses API's assistant message holds its turn twice (the output items, and
    # the same text in the Chat shape): counted twice, an exchange that fits was dropped.
    answer = "x" * 400
    server = serve(S.reply_text(answer), S.reply_text(answer), S.reply_text("ok"))
    cycle = make_cycle(server, api=api, history=TrimOldest(max_chars=1500))

    for prompt in ("q1", "q2", "q3"):
        await cycle.submit(prompt)

    body = server.requests[-1].json
    sent = body.get("messages") or body["input"]
    assert [i.get("content") for i in sent if i.get("role") == "user"] == ["q1", "q2", "q3"]
    assert len(json.dumps(sent)) <= 1500


async def test_a_saved_history_resumes_on_the_responses_api(serve, make_cycle, calc):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")], reasoning="r"),
        S.reply_text("5"),
    )
    cycle = make_cycle(server, api="responses", max_turns=1)
    with pytest.raises(LlmError):
        await cycle.submit_with_tools("2 + 3?", calc)  # stops at max_turns, call answered
    saved = json.dumps(cycle.messages)

    resumed = make_cycle(server, api="responses")
    resumed.messages = json.loads(saved)
    response = await resumed.submit_with_tools(None, calc)

    assert response.text == "5"
    assert [i.get("type", i.get("role")) for i in items(server.requests[1])] == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
    ]


async def app_history(cycle: LlmCycle, calc: ToolRegistry) -> list[dict[str, Any]]:
    # The app's own loop, before the hand-over: response.output items, as dicts.
    history: list[dict[str, Any]] = [{"role": "user", "content": "2 + 3?"}]
    response = await cycle.client.responses.create(
        model="test-model", input=history, tools=calc.definitions(api="responses")
    )
    return history + [item.to_dict() for item in response.output]


@MODES
async def test_an_open_function_call_the_app_left_in_its_history_is_run_on_resume(
    serve, make_cycle, calc, stream
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")], text="Adding.", reasoning="r"),
        S.reply_text("5"),
    )
    cycle = make_cycle(server, api="responses")
    history = await app_history(cycle, calc)
    assert [i.get("type") for i in history[1:]] == ["reasoning", "message", "function_call"]
    cycle.messages[:] = history

    response = await run(cycle, None, calc, stream)

    assert response.text == "5" and calc.runs == [("add", {"a": 2, "b": 3})]
    sent = items(server.requests[1])
    # The app's items go back as they came (ids included), then the call's output.
    assert sent[1:4] == history[1:4]
    assert sent[4] == {"type": "function_call_output", "call_id": "c1", "output": "5"}
    assert_history_valid(cycle.messages)
    assert cycle.messages[1]["content"] == "Adding."


@pytest.mark.parametrize("handed", ["objects", "to_dict"])
async def test_what_the_sdks_parse_helper_added_to_output_items_is_not_sent(
    serve, make_cycle, handed
):
    # responses.parse() gives each function_call its parsed_arguments and each
    # output_text part its parsed value; OpenAI refuses both in input
    # ("Unknown parameter: 'input[2].parsed_arguments'", openai-python#2374).
    class Answer(BaseModel):
        total: int

    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]),
        S.reply_text('{"total": 5}'),
        S.reply_text("Done."),
    )
    cycle = make_cycle(server, api="responses")
    assert cycle.client is not None
    strict = ToolRegistry(strict=True)

    @strict.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    tools = strict.definitions(api="responses")
    history: list[Any] = [{"role": "user", "content": "2 + 3?"}]
    for _ in range(2):
        response = await cycle.client.responses.parse(
            model="test-model", input=history, tools=tools, text_format=Answer
        )
        history += response.output
        history += await strict.run_tool_calls(response.output)
    assert [type(item).__name__ for item in history[1:]] == [
        "ParsedResponseFunctionToolCall",
        "dict",
        "ParsedResponseOutputMessage",
    ]
    if handed == "to_dict":
        history = [h if isinstance(h, dict) else h.to_dict() for h in history]
        cycle.messages[:] = history
        await cycle.submit_with_tools("And 5 + 5?", strict)
    else:
        await cycle.submit_messages([*history, {"role": "user", "content": "And 5 + 5?"}])

    sent = items(server.requests[-1])
    assert [i.get("type", i.get("role")) for i in sent] == [
        "user",
        "function_call",
        "function_call_output",
        "message",
        "user",
    ]
    assert "parsed_arguments" not in sent[1] and sent[1]["arguments"] == '{"a": 2, "b": 3}'
    assert sent[3]["content"][0]["text"] == '{"total": 5}'
    assert "parsed" not in sent[3]["content"][0]


@MODES
async def test_an_open_function_call_the_app_left_is_declined_before_a_new_prompt(
    serve, make_cycle, calc, stream
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")], reasoning="r"),
        S.reply_text("Paris: 18 C"),
    )
    cycle = make_cycle(server, api="responses")
    cycle.messages[:] = await app_history(cycle, calc)

    await run(cycle, "Never mind: Paris?", calc, stream)

    assert calc.runs == []
    sent = items(server.requests[1])
    assert [i.get("type", i.get("role")) for i in sent] == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
        "user",
    ]
    assert "declined" in sent[3]["output"] and sent[3]["call_id"] == "c1"
    assert_history_valid(cycle.messages)


async def test_a_function_call_the_app_answered_with_its_own_item_is_not_run_again(
    serve, make_cycle, calc
):
    server = serve(S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]), S.reply_text("5"))
    cycle = make_cycle(server, api="responses")
    output = {"type": "function_call_output", "call_id": "c1", "output": "5"}
    cycle.messages[:] = [*await app_history(cycle, calc), output]

    response = await cycle.submit_with_tools(None, calc)

    assert response.text == "5" and calc.runs == []
    assert [i.get("type", i.get("role")) for i in items(server.requests[1])] == [
        "user",
        "function_call",
        "function_call_output",
    ]


async def test_the_apps_own_answer_given_to_submit_messages_is_the_calls_only_answer(
    serve, make_cycle, calc
):
    # The streaming guide's hand-over: the app's items in cycle.messages, its own answer
    # passed to submit_messages. The two were folded apart, and the call was declined
    # before the app's answer followed: two outputs for one call, which the API refuses.
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]),
        S.reply_text("5"),
        S.reply_text("2"),
    )
    cycle = make_cycle(server, api="responses")
    cycle.messages[:] = await app_history(cycle, calc)
    output = {"type": "function_call_output", "call_id": "c1", "output": "5"}

    response = await cycle.submit_messages([output])

    assert response.text == "5" and calc.runs == []
    sent = items(server.requests[1])
    assert [i.get("type", i.get("role")) for i in sent] == [
        "user",
        "function_call",
        "function_call_output",
    ]
    assert sent[2] == output
    assert_history_valid(cycle.messages)
    # A history in the loop's own form (a run paused for approval, say) answered the
    # same way: the item stays an item, and still answers the call.
    call = {"id": "c2", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    cycle.messages[:] = [
        {"role": "user", "content": "1 + 1?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ]
    await cycle.submit_messages([{"type": "function_call_output", "call_id": "c2", "output": "2"}])
    outputs = [i for i in items(server.requests[2]) if i.get("type") == "function_call_output"]
    assert outputs == [{"type": "function_call_output", "call_id": "c2", "output": "2"}]


async def test_an_output_item_of_parts_answers_its_call_and_the_others_stay_open(
    serve, make_cycle, calc
):
    # An app's function_call_output whose output is a list of parts (what a tool
    # returning an image gives) was left unfolded, and the open-call search stopped at
    # it: the other call was never run, and went unanswered in every later request.
    two = [("add", {"a": 2, "b": 3}, "c1"), ("add", {"a": 1, "b": 1}, "c2")]
    server = serve(S.reply_tool_calls(two), S.reply_text("done"), S.reply_text("ok"))
    cycle = make_cycle(server, api="responses")
    parts = [{"type": "input_text", "text": "5"}]
    answer = {"type": "function_call_output", "call_id": "c1", "output": parts}
    cycle.messages[:] = [*await app_history(cycle, calc), answer]

    assert (await cycle.submit_with_tools(None, calc)).text == "done"

    assert calc.runs == [("add", {"a": 1, "b": 1})]
    outputs = {i["call_id"]: i["output"] for i in items(server.requests[1]) if "output" in i}
    assert outputs == {"c1": parts, "c2": "2"}
    # The cycle's own paused turn, one call answered by the app's item, the other not:
    # a new prompt declines that one.
    call = {"id": "c3", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    cycle.messages[:] = [
        {"role": "user", "content": "1 + 1?"},
        {"role": "assistant", "content": "", "tool_calls": [call, {**call, "id": "c4"}]},
        {"type": "function_call_output", "call_id": "c4", "output": "by the app"},
    ]
    await cycle.submit_with_tools("never mind", calc)
    answers = {i["call_id"]: i["output"] for i in items(server.requests[2]) if "output" in i}
    assert sorted(answers) == ["c3", "c4"]
    assert "declined" in answers["c3"] and answers["c4"] == "by the app"


async def test_the_apps_own_output_message_item_is_sent_as_it_came(serve, make_cycle, calc):
    # Its id ties it to the reasoning item in front of it: rewritten as a bare
    # {"role": "assistant", ...} message, the reasoning item would be left alone (a 400).
    server = serve(S.reply_text("Paris.", reasoning="r"), S.reply_text("Rome."))
    cycle = make_cycle(server, api="responses")
    history = await app_history(cycle, calc)
    assert [i.get("type") for i in history[1:]] == ["reasoning", "message"]

    await cycle.submit_messages([*history, {"role": "user", "content": "And Italy?"}])

    assert items(server.requests[1])[1:3] == history[1:3]
    assert history[2]["id"] and history[2]["status"] == "completed"


@MODES
async def test_a_responses_history_goes_on_over_chat_without_its_response_keys(
    serve, make_cycle, calc, stream
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")], reasoning="r"),
        S.reply_text("5"),
        S.reply_text("ok"),
    )
    responses = make_cycle(server, api="responses")
    await run(responses, "2 + 3?", calc, stream)
    chat = make_cycle(server)
    chat.messages = responses.messages  # the same history, as a saved one would be

    await run(chat, "thanks", calc, stream)

    sent = server.requests[2]
    assert sent.path == "/v1/chat/completions"
    assert [m["role"] for m in sent.json["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    # Chat Completions refuses unknown message keys (a 400 on OpenAI and Azure).
    assert not [m for m in sent.json["messages"] if "response" in m]
    assert sent.json["messages"][1]["tool_calls"][0]["id"] == "c1"
    # The history keeps them, for a later Responses request.
    assert ["response" in m for m in chat.messages[:4]] == [False, True, False, True]


class Sum(BaseModel):
    total: int


@MODES
async def test_structured_output_and_forced_tool_choice_are_translated(
    serve, make_cycle, calc, stream
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]), S.reply_text('{"total": 5}')
    )
    cycle = make_cycle(
        server, api="responses", tool_choice={"type": "function", "function": {"name": "add"}}
    )

    if stream:
        response = await cycle.submit_stream_with_tools("2 + 3?", calc, output_type=Sum).collect()
    else:
        response = await cycle.submit_with_tools("2 + 3?", calc, output_type=Sum)

    assert response.output == Sum(total=5)
    first, second = (r.json for r in server.requests)
    assert first["tool_choice"] == {"type": "function", "name": "add"}
    assert second["tool_choice"] == "auto"
    fmt = first["text"]["format"]
    assert (
        fmt["type"] == "json_schema" and fmt["schema"]["properties"]["total"]["type"] == "integer"
    )
    assert "response_format" not in first


@MODES
async def test_a_responses_shaped_allowed_tools_choice_holds_on_every_request(
    serve, make_cycle, calc, stream
):
    only_add = {"type": "function", "name": "add"}
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2})]),
        S.reply_tool_calls([("add", {"a": 3, "b": 3})]),
        S.reply_text("3, 6"),
    )
    choice = {"type": "allowed_tools", "mode": "required", "tools": [only_add]}
    cycle = make_cycle(server, api="responses", tool_choice=choice)

    await run(cycle, "sums", calc, stream)

    relaxed = {"type": "allowed_tools", "mode": "auto", "tools": [only_add]}
    assert [r.json["tool_choice"] for r in server.requests] == [choice, relaxed, relaxed]


async def test_a_chat_shaped_allowed_tools_choice_goes_to_responses_in_its_shape(
    serve, make_cycle, calc
):
    # The custom tool's entry kept its Chat shape, {"custom": {"name": ...}}, which the
    # Responses API does not read.
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2})]), S.reply_text("3"))
    listed = [
        {"type": "function", "function": {"name": "add"}},
        {"type": "custom", "custom": {"name": "g"}},
    ]
    choice = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": listed}}
    cycle = make_cycle(server, api="responses", tool_choice=choice)

    assert (await cycle.submit_with_tools("1 + 2?", calc)).text == "3"

    tools = [{"type": "function", "name": "add"}, {"type": "custom", "name": "g"}]
    sent = {"type": "allowed_tools", "mode": "auto", "tools": tools}
    assert [r.json["tool_choice"] for r in server.requests] == [sent, sent]


async def test_schema_transforms_see_the_chat_shape_a_responses_run_converts(serve, make_cycle):
    # SchemaContext.api said "the API the definitions are built for", and a Responses
    # run's transforms saw "chat": the run builds chat definitions and converts them.
    seen = []

    def transform(schema: dict[str, Any], ctx: SchemaContext) -> dict[str, Any]:
        seen.append(ctx.api)
        return {**schema, "description": "seen"}

    registry = ToolRegistry(schema_transforms=[transform])

    @registry.tool
    def now(tz: str) -> str:
        """The time in a timezone."""
        return "9"

    server = serve(S.reply_text("ok"))
    await make_cycle(server, api="responses").submit_with_tools("?", registry)

    assert seen == ["chat"]
    [sent] = server.requests[0].json["tools"]
    assert (sent["name"], sent["parameters"]["description"]) == ("now", "seen")


def test_config_checks_the_api_and_chaining() -> None:
    assert CycleConfig("m").api == "chat"
    with pytest.raises(LlmConfigError, match="api must be"):
        CycleConfig("m", api="completions")  # type: ignore[arg-type]
    with pytest.raises(LlmConfigError, match="chain_responses needs"):
        CycleConfig("m", chain_responses=True)
    with pytest.raises(LlmConfigError, match="chain_responses needs"):
        CycleConfig("m", api="responses", chain_responses=True, store=False)
    with pytest.raises(LlmConfigError, match="previous_response_id"):
        CycleConfig("m", api="responses", previous_response_id="resp_1")
    with pytest.raises(LlmConfigError, match="chain_responses=True or conversation="):
        CycleConfig("m", api="responses", chain_responses=True, conversation="conv_1")


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"include": "reasoning.encrypted_content"}, r"include=\['reasoning.encrypted_content'\]"),
        ({"include": ["a", 5]}, "include must be a list of strings"),
        ({"include": {"reasoning.encrypted_content"}}, "include must be a list of strings"),
        ({"text": "low"}, "text must be a mapping"),
        ({"text": [("verbosity", "low")]}, "text must be a mapping"),
        # One setting: response_format would silently replace text.format.
        (
            {"text": {"format": {"type": "json_object"}}, "response_format": {"type": "text"}},
            r"both response_format and text=\{'format': \.\.\.\}",
        ),
    ],
)
def test_config_refuses_an_include_or_text_of_the_wrong_shape(options, match) -> None:
    with pytest.raises(LlmConfigError, match=match):
        CycleConfig("m", api="responses", store=False, **options)
    with pytest.raises(LlmConfigError, match=match):
        CycleConfig("m", api="responses", request_options=options)


def test_config_takes_include_and_text_of_the_right_shape() -> None:
    config = CycleConfig(
        "m", api="responses", include=("message.output_text.logprobs",), text={"verbosity": "low"}
    )
    assert config.request_options["include"] == ("message.output_text.logprobs",)
    assert CycleConfig("m", api="responses", include=None, text=None).api == "responses"


async def test_a_stream_whose_final_output_is_empty_is_built_from_its_events(serve, make_cycle):
    # A bridge may close with an empty response.output: the call is then assembled from
    # output_item.added and the function-call argument deltas.
    call = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "add", "arguments": ""}
    steps = [
        _event("response.output_item.added", output_index=0, item=call),
        *(
            _event(
                "response.function_call_arguments.delta", output_index=0, item_id="fc_1", delta=d
            )
            for d in ('{"a": 2', ', "b": ', "3}")
        ),
        _event(
            "response.completed", response={"id": "resp_1", "status": "completed", "output": []}
        ),
    ]
    server = serve(RawStream(steps, done=False), S.reply_text("5"))
    cycle = make_cycle(server, api="responses")
    registry = ToolRegistry()

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    response = await cycle.submit_stream_with_tools("2 + 3?", registry).collect()

    assert response.text == "5"
    assert tool_messages(cycle.messages) == {"c1": "5"}
    sent = items(server.requests[1])[1]
    assert (sent["call_id"], sent["arguments"]) == ("c1", '{"a": 2, "b": 3}')


async def test_a_stream_with_an_empty_final_output_keeps_its_text_and_done_arguments(
    serve, make_cycle, calc
):
    # new-api and older agentgateway close with output: [] and bare items: the text the
    # user saw stream was "" in the response and the history, and arguments sent only
    # in function_call_arguments.done ran the tool with {}.
    message = {"type": "message", "id": "m1", "role": "assistant", "content": []}
    call = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "add", "arguments": ""}
    empty = {"id": "resp_1", "status": "completed", "output": []}
    at = {"output_index": 0, "item_id": "m1", "content_index": 0}
    second = {**at, "content_index": 1}
    steps = [
        _event("response.output_item.added", output_index=0, item=message),
        _event("response.output_text.delta", **at, delta="Adding "),
        _event("response.output_text.done", **at, text="Adding "),
        _event("response.output_text.delta", **second, delta="now."),
        _event("response.output_text.done", **second, text="now."),
        _event("response.output_item.added", output_index=1, item=call),
        _event(
            "response.function_call_arguments.done",
            output_index=1,
            item_id="fc_1",
            arguments='{"a": 2, "b": 3}',
        ),
        _event("response.completed", response=empty),
    ]
    text_only = [
        _event("response.output_text.delta", output_index=0, item_id="m2", delta="It is 5."),
        _event("response.completed", response={**empty, "id": "resp_2"}),
    ]
    server = serve(RawStream(steps, done=False), RawStream(text_only, done=False))
    cycle = make_cycle(server, api="responses")

    response = await cycle.submit_stream_with_tools("2 + 3?", calc).collect()

    assert response.text == "It is 5."  # even with no item event at all
    assert cycle.messages[1]["content"] == "Adding now."
    assert tool_messages(cycle.messages) == {"c1": "5"}
    sent = [i for i in items(server.requests[1]) if i.get("type") == "function_call"]
    assert [(i["call_id"], i["arguments"]) for i in sent] == [("c1", '{"a": 2, "b": 3}')]


async def test_an_empty_final_output_keeps_a_reasoning_summary_apart_from_its_raw_text(
    serve, make_cycle, calc
):
    # The summary and the raw reasoning (gpt-oss behind a bridge) stream on the same
    # item; rebuilt from the events, each goes back in its own field, part by part,
    # instead of all of it joined into one summary.
    thought = {"type": "reasoning", "id": "rs_1", "summary": []}
    call = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "add", "arguments": ""}
    on = {"output_index": 0, "item_id": "rs_1"}
    steps = [
        _event("response.output_item.added", output_index=0, item=thought),
        _event("response.reasoning_text.delta", **on, content_index=0, delta="2 plus "),
        _event("response.reasoning_text.delta", **on, content_index=0, delta="3, by tool"),
        _event("response.reasoning_summary_text.delta", **on, summary_index=0, delta="Plan."),
        _event("response.reasoning_summary_text.delta", **on, summary_index=1, delta="Add."),
        _event("response.reasoning_summary_text.done", **on, summary_index=1, text="Add it."),
        _event("response.output_item.added", output_index=1, item=call),
        _event("response.function_call_arguments.delta", output_index=1, delta='{"a": 2, "b": 3}'),
        _event(
            "response.completed", response={"id": "resp_1", "status": "completed", "output": []}
        ),
    ]
    server = serve(RawStream(steps, done=False), S.reply_text("5"))
    cycle = make_cycle(server, api="responses")

    events = [e async for e in cycle.submit_stream_with_tools("2 + 3?", calc)]

    streamed = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert streamed == "2 plus 3, by toolPlan.Add."
    [sent] = [i for i in items(server.requests[1]) if i.get("type") == "reasoning"]
    assert sent["summary"] == [
        {"type": "summary_text", "text": "Plan."},
        {"type": "summary_text", "text": "Add it."},
    ]
    assert sent["content"] == [{"type": "reasoning_text", "text": "2 plus 3, by tool"}]
    assert tool_messages(cycle.messages) == {"c1": "5"}


async def test_an_empty_final_output_keeps_a_summary_on_a_reasoning_item_that_had_none(
    serve, make_cycle, calc
):
    # A bridge's bare item with no summary key that streams only raw reasoning: the API
    # requires summary on a reasoning input item, so it goes back with an empty one.
    on = {"output_index": 0, "item_id": "rs_1"}
    steps = [
        _event(
            "response.output_item.added", output_index=0, item={"type": "reasoning", "id": "rs_1"}
        ),
        _event("response.reasoning_text.delta", **on, content_index=0, delta="add them"),
        _event(
            "response.output_item.added",
            output_index=1,
            item={"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "add"},
        ),
        _event("response.function_call_arguments.delta", output_index=1, delta='{"a": 2, "b": 3}'),
        _event("response.completed", response={"id": "r1", "status": "completed", "output": []}),
    ]
    server = serve(RawStream(steps, done=False), S.reply_text("5"))
    cycle = make_cycle(server, api="responses")

    await cycle.submit_stream_with_tools("2 + 3?", calc).collect()

    [sent] = [i for i in items(server.requests[1]) if i.get("type") == "reasoning"]
    assert sent["summary"] == []
    assert sent["content"] == [{"type": "reasoning_text", "text": "add them"}]


async def test_tool_images_go_as_input_image_parts(serve, make_cycle):
    from agcore_tools import Image

    png = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
    registry = ToolRegistry()

    @registry.tool
    def photo() -> Image:
        """A photo."""
        return Image(png)

    server = serve(S.reply_tool_calls([("photo", {}, "c1")]), S.reply_text("A photo."))
    cycle = make_cycle(server, api="responses")

    await cycle.submit_with_tools("Show me", registry)

    sent = items(server.requests[1])
    assert [i.get("type", i.get("role")) for i in sent] == [
        "user",
        "function_call",
        "function_call_output",
        "user",
    ]
    assert sent[2]["output"].startswith("[image 1 (image/png")
    parts = sent[3]["content"]
    assert parts[0] == {"type": "input_text", "text": "Attachments of the tool results above:"}
    assert parts[-1] == {"type": "input_image", "image_url": Image(png).data_url, "detail": "auto"}


async def test_tool_audio_is_left_out_and_the_model_told_so(serve, make_cycle):
    from agcore_tools import Audio

    wav = b"RIFF" + bytes(4) + b"WAVEfmt " + bytes(16)
    registry = ToolRegistry()

    @registry.tool
    def record() -> list[Any]:
        """Record a sound."""
        return ["a recording", Audio(wav)]

    server = serve(S.reply_tool_calls([("record", {}, "c1")]), S.reply_text("Heard it."))
    cycle = make_cycle(server, api="responses")

    await cycle.submit_with_tools("Listen", registry)

    sent = items(server.requests[1])
    assert [i.get("type", i.get("role")) for i in sent] == [
        "user",
        "function_call",
        "function_call_output",
    ]
    assert sent[2]["output"] == (
        "a recording\n[audio 1 (audio/wav, 32 B) was not sent: "
        "the Responses API takes no audio in tool results]"
    )
    # A Chat history's sound, resumed on Responses, becomes a note instead of a 400.
    chat_audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    [message] = to_input([{"role": "user", "content": [chat_audio]}])
    assert [p["type"] for p in message["content"]] == ["input_text"]


async def test_a_refusal_part_is_surfaced_and_sent_back_as_it_came(serve, make_cycle):
    refusal = "I'm sorry, I can't help with that."
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": refusal}],
    }
    body = {"id": "resp_1", "object": "response", "created_at": 0, "model": "m",
            "status": "completed", "output": [item]}  # fmt: skip
    server = serve(RawResponse(200, body), S.reply_text("Fine."))
    cycle = make_cycle(server, api="responses")

    response = await cycle.submit("Say something bad")
    await cycle.submit("Something else, then")

    assert (response.refusal, response.text) == (refusal, "")
    assert response.message["refusal"] == refusal
    assert items(server.requests[1])[1] == item


@MODES
async def test_an_approval_pause_resumes_over_responses(serve, make_cycle, stream):
    registry = ToolRegistry()
    runs: list[int] = []

    @registry.tool(needs_approval=True)
    def refund(order: int) -> str:
        """Refund an order."""
        runs.append(order)
        return f"refunded order {order}"

    server = serve(
        S.reply_tool_calls([("refund", {"order": 7}, "c1")], reasoning="needs a refund"),
        S.reply_text("Refunded."),
    )
    cycle = make_cycle(server, api="responses")

    paused = await run(cycle, "Refund order 7", registry, stream)
    [request] = paused.pending_approvals
    saved = json.loads(json.dumps(cycle.messages))
    resumed_cycle = make_cycle(server, api="responses")
    resumed_cycle.messages = saved
    resumed = await resumed_cycle.submit_with_tools(None, registry, approvals=[request.approve()])

    assert resumed.text == "Refunded." and runs == [7]
    assert [i.get("type", i.get("role")) for i in items(server.requests[1])] == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert items(server.requests[1])[-1]["output"] == "refunded order 7"


@MODES
async def test_tool_choice_is_not_sent_on_a_request_without_tools(serve, make_cycle, stream):
    server = serve(S.reply_text("ok"))
    cycle = make_cycle(server, api="responses", tool_choice="required", temperature=0.5)
    if stream:
        await cycle.submit_stream("hi").collect()
    else:
        await cycle.submit("hi")
    body = server.requests[0].json
    assert ("tools" in body, "tool_choice" in body, body["temperature"]) == (False, False, 0.5)
    assert body["input"] == [{"role": "user", "content": "hi"}]
