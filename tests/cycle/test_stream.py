"""Streaming and provider quirks: each one is played by the real server to a real SDK client."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agcore_tools import (
    AssistantTextDelta,
    FinishReason,
    LlmError,
    ReasoningDelta,
    ToolContext,
    ToolExecutionStarted,
    ToolRegistry,
    TurnComplete,
)
from agcore_tools.cycle._stream import DERIVED_IDS_RESERVED, TurnBuilder
from agcore_tools.testing import RawResponse, RawStream, ScriptedChatServer

from .conftest import S, assert_history_valid, tool_messages


@pytest.fixture
def echo() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> str:
        """Echo the text."""
        return f"echo:{text}"

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return registry


async def play(serve, make_cycle, registry, build_events) -> tuple[list[Any], Any, Any]:
    """Serve one raw stream (then a plain answer) and run the streaming loop over it."""
    server = serve()
    server.add(RawStream(build_events(server)), S.reply_text("done"))
    cycle = make_cycle(server)
    events = [e async for e in cycle.submit_stream_with_tools("go", registry)]
    return events, cycle, server


def started(events: list[Any]) -> list[tuple[str, Any, str]]:
    return [
        (e.tool_name, e.input, e.call_id) for e in events if isinstance(e, ToolExecutionStarted)
    ]


def call(
    index: int | None = None, id: str | None = None, name: str | None = None, args: Any = None
):
    """A tool-call delta; only the given fields are present."""
    delta: dict[str, Any] = {}
    if index is not None:
        delta["index"] = index
    if id is not None:
        delta["id"] = id
        delta["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    if function:
        delta["function"] = function
    return delta


async def test_a_whole_call_in_one_chunk(serve, make_cycle, echo):
    events, cycle, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"tool_calls": [call(0, "c1", "echo", '{"text": "hi"}')]}, "tool_calls"),
        ],
    )
    assert started(events) == [("echo", {"text": "hi"}, "c1")]
    assert tool_messages(cycle.messages) == {"c1": "echo:hi"}


async def test_deltas_without_index_start_a_call_per_name(serve, make_cycle, echo):
    # Ollama: every call complete, no index; and a continuation delta with neither.
    events, cycle, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"tool_calls": [call(None, "o1", "echo", '{"text": ')]}),
            s.chunk({"tool_calls": [call(None, None, None, '"a"}')]}),
            s.chunk({"tool_calls": [call(None, "o2", "add", '{"a": 1, "b": 2}')]}),
            s.chunk({}, "tool_calls"),
        ],
    )
    assert started(events) == [("echo", {"text": "a"}, "o1"), ("add", {"a": 1, "b": 2}, "o2")]
    assert tool_messages(cycle.messages) == {"o1": "echo:a", "o2": "3"}


async def test_the_same_index_reused_for_a_different_id_is_a_new_call(serve, make_cycle, echo):
    # Ollama and SGLang send every call at index 0.
    events, cycle, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"tool_calls": [call(0, "x1", "echo", '{"text": "one"}')]}),
            s.chunk({"tool_calls": [call(0, "x2", "echo", '{"text": "two"}')]}),
            s.chunk({}, "tool_calls"),
        ],
    )
    assert started(events) == [("echo", {"text": "one"}, "x1"), ("echo", {"text": "two"}, "x2")]
    assert_history_valid(cycle.messages)


async def test_the_same_index_reused_without_ids_is_a_new_call_per_name(serve, make_cycle, echo):
    events, cycle, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"tool_calls": [call(0, None, "add", '{"a": 1, "b": 1}')]}),
            s.chunk({"tool_calls": [call(0, None, "add", '{"a": 2, "b": 2}')]}),
            s.chunk({}, "tool_calls"),
        ],
    )
    inputs = [(name, args) for name, args, _ in started(events)]
    assert inputs == [("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})]
    assert sorted(tool_messages(cycle.messages).values()) == ["2", "4"]


async def test_the_name_repeated_on_every_delta_without_the_id_makes_one_call(
    serve, make_cycle, echo
):
    # MiniMax M2.7 through NVIDIA NIM: the name on every delta, the id on the first
    # only. A repeated name was read as an index reused for a new call, and one call
    # became three with broken arguments.
    events, cycle, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"tool_calls": [call(0, "m1", "add", '{"a":')]}),
            s.chunk({"tool_calls": [call(0, None, "add", ' 1, "b"')]}),
            s.chunk({"tool_calls": [call(0, None, "add", ": 2}")]}),
            s.chunk({"tool_calls": [call(0, None, "add", '{"a": 3, "b": 4}')]}),  # reused
            s.chunk({}, "tool_calls"),
        ],
    )
    assert [(name, args) for name, args, _ in started(events)] == [
        ("add", {"a": 1, "b": 2}),
        ("add", {"a": 3, "b": 4}),
    ]
    assert started(events)[0][2] == "m1"
    assert sorted(tool_messages(cycle.messages).values()) == ["3", "7"]
    assert_history_valid(cycle.messages)


async def test_missing_or_empty_ids_get_stable_unique_ids(serve, make_cycle, echo):
    server = serve()
    for _ in range(2):
        server.add(
            RawStream(
                [
                    server.chunk({"tool_calls": [call(0, "", "echo", '{"text": "a"}')]}),
                    server.chunk({"tool_calls": [call(1, None, "echo", '{"text": "b"}')]}),
                    server.chunk({}, "tool_calls"),
                ]
            )
        )
    server.add(S.reply_text("done"))
    cycle = make_cycle(server)

    events = [e async for e in cycle.submit_stream_with_tools("go", echo)]

    ids = [call_id for _, _, call_id in started(events)]
    assert len(ids) == 4 and len(set(ids)) == 4 and all(ids)
    assert ids[:2] == ["call_0_0", "call_0_1"]
    # The generated ids are what the history and the next requests carry.
    assert list(tool_messages(cycle.messages)) == ids
    resent = server.requests[1].json["messages"]
    assert [c["id"] for c in resent[1]["tool_calls"]] == ids[:2]
    assert_history_valid(cycle.messages)


async def test_empty_name_and_id_on_continuation_deltas_are_ignored(serve, make_cycle, echo):
    events, cycle, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"tool_calls": [call(0, "c1", "echo", "")]}),
            s.chunk({"tool_calls": [call(0, "", "", '{"te')]}),
            s.chunk({"tool_calls": [call(0, "", "", 'xt": "x"}')]}),
            s.chunk({}, "tool_calls"),
        ],
    )
    assert started(events) == [("echo", {"text": "x"}, "c1")]
    assert cycle.messages[1]["tool_calls"][0]["function"]["name"] == "echo"


async def test_id_and_name_repeated_on_every_delta_make_one_call(serve, make_cycle, echo):
    # llama-cpp-python 0.3: the call's id and name on every argument delta, with
    # content null and a legacy function_call next to tool_calls (ignored).
    legacy = {"name": "echo", "arguments": ""}
    events, cycle, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"content": None, "function_call": legacy,
                     "tool_calls": [call(0, "c1", "echo", '{"text": ')]}),
            s.chunk({"content": None, "function_call": legacy,
                     "tool_calls": [call(0, "c1", "echo", '"twice"}')]}),
            s.chunk({}, "tool_calls"),
        ],
    )  # fmt: skip
    assert started(events) == [("echo", {"text": "twice"}, "c1")]
    assert "function_call" not in cycle.messages[1]
    assert tool_messages(cycle.messages) == {"c1": "echo:twice"}


async def test_arguments_sent_as_a_json_object(serve, make_cycle, echo):
    # llama.cpp and TGI.
    events, cycle, server = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"tool_calls": [call(0, "c1", "add", {"a": 4, "b": 5})]}),
            s.chunk({}, "tool_calls"),
        ],
    )
    assert started(events) == [("add", {"a": 4, "b": 5}, "c1")]
    # The history holds JSON text, as the API expects when it is sent back.
    sent = server.requests[1].json["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"a": 4, "b": 5}'
    assert tool_messages(cycle.messages) == {"c1": "9"}


async def test_content_null_chunks(serve, make_cycle, echo):
    events, cycle, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"role": "assistant", "content": None}),
            s.chunk({"content": None, "tool_calls": [call(0, "c1", "echo", '{"text": "n"}')]}),
            s.chunk({"content": None}, "tool_calls"),
        ],
    )
    assert not [e for e in events[:2] if isinstance(e, AssistantTextDelta)]
    assert cycle.messages[1]["content"] == ""
    assert tool_messages(cycle.messages) == {"c1": "echo:n"}


async def test_chunks_with_empty_choices(serve, make_cycle, echo):
    # Azure's first chunk carries only prompt_filter_results; the usage chunk has no choices.
    events, cycle, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            {"id": "", "object": "", "created": 0, "model": "", "choices": [],
             "prompt_filter_results": [{"prompt_index": 0}]},
            s.chunk({"content": "Hi"}),
            s.chunk({}, "stop"),
            {**s.chunk(), "choices": [],
             "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}},
        ],
    )  # fmt: skip
    assert [e.text for e in events if isinstance(e, AssistantTextDelta)] == ["Hi"]
    final = events[-1]
    assert isinstance(final, TurnComplete) and final.usage is not None
    assert final.usage.total_tokens == 8
    assert cycle.messages[-1] == {"role": "assistant", "content": "Hi"}


async def test_keep_alive_comments(serve, make_cycle, echo):
    events, _, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            ": keep-alive",
            s.chunk({"content": "A"}),
            ": OPENROUTER PROCESSING",
            s.chunk({"content": "B"}, "stop"),
        ],
    )
    assert [e.text for e in events if isinstance(e, AssistantTextDelta)] == ["A", "B"]


async def test_an_error_object_mid_stream_raises_llm_error_and_is_not_retried(
    serve, make_cycle, echo
):
    server = serve()
    server.add(
        RawStream(
            [
                server.chunk({"content": "Partial "}),
                {"error": {"message": "upstream overloaded", "type": "server_error"}},
            ],
            done=False,
        ),
        S.reply_text("should never be requested"),
    )
    cycle = make_cycle(server, max_retries=3)
    seen: list[Any] = []

    with pytest.raises(LlmError, match="upstream overloaded"):
        async for event in cycle.submit_stream_with_tools("go", echo):
            seen.append(event)

    assert [e.text for e in seen] == ["Partial "]
    assert len(server.requests) == 1


TGI_ERROR = {"error": "Request failed during generation: CUDA out of memory", "error_type": "x"}


@pytest.mark.parametrize(
    ("events", "message"),
    [
        pytest.param(
            lambda s: [s.chunk({"content": "Hel"}), TGI_ERROR],
            "the model's stream failed: APIError: Request failed during generation: CUDA out "
            "of memory",
            id="tgi-error-mid-stream",
        ),
        pytest.param(
            lambda s: [TGI_ERROR],
            "chat completion request failed: APIError: Request failed during generation: "
            "CUDA out of memory",
            id="tgi-error-first",
        ),
        pytest.param(
            lambda s: [{"error": {"code": 500}}],
            "chat completion request failed: APIError: An error occurred during streaming: "
            '{"code": 500}',
            id="error-object-without-message",
        ),
        pytest.param(
            lambda s: [s.chunk({"content": "Hel"}), "data: ", s.chunk({}, "stop")],
            "the model's stream failed: an event that is not JSON (Expecting value): ''",
            id="empty-data-line",
        ),
    ],
)
async def test_a_failed_stream_says_what_the_server_sent(serve, make_cycle, echo, events, message):
    # TGI sends its error as a string, which the SDK keeps in the error's body only.
    server = serve()
    server.add(RawStream(events(server), done=False))
    cycle = make_cycle(server, max_retries=0)

    with pytest.raises(LlmError) as raised:
        await cycle.submit_stream_with_tools("go", echo).collect()

    assert str(raised.value) == message
    assert raised.value.__cause__ is not None


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda s: [s.chunk({"content": "Half an ans"})], id="text-then-done"),
        pytest.param(
            lambda s: [s.chunk({"tool_calls": [call(0, "c1", "echo", '{"text": "ha')]})],
            id="half-a-tool-call",
        ),
        pytest.param(lambda s: [], id="no-chunk-at-all"),
        pytest.param(
            lambda s: [s.chunk({"role": "assistant", "content": ""}), s.chunk({}, "")],
            id="empty-finish-reason",
        ),
    ],
)
@pytest.mark.parametrize("done", [True, False], ids=["with-DONE", "without-DONE"])
async def test_a_stream_ending_without_finish_reason_is_cut_and_history_stays_valid(
    serve, make_cycle, echo, cut, done
):
    # llama-cpp-python's server does this for streamed tool_choice="auto": it raises
    # inside a 200 response and the stream just ends.
    # (With adapt=False: an empty cut is otherwise sent again unstreamed, see
    # test_profiles.py.)
    server = serve()
    server.add(RawStream(cut(server), done=done), S.reply_text("second try"))
    cycle = make_cycle(server, max_retries=3, adapt=False)

    with pytest.raises(LlmError, match=r"stream was cut.*: it ended without a finish_reason"):
        await cycle.submit_stream_with_tools("go", echo).collect()

    assert len(server.requests) == 1  # a started stream is never retried
    assert cycle.messages == [{"role": "user", "content": "go"}]  # no half-built turn
    assert (await cycle.submit_with_tools("again", echo)).text == "second try"
    assert server.requests[1].json["messages"] == [
        {"role": "user", "content": "go"},
        {"role": "user", "content": "again"},
    ]


async def test_a_connection_dropped_after_the_finish_reason_keeps_the_whole_turn(
    serve, make_cycle, echo, caplog
):
    # A proxy that breaks the connection as the stream ends, before [DONE]: the turn
    # had arrived whole, and asking again would pay for it twice.
    server = serve()
    usage = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    server.add(
        RawStream(
            [
                server.chunk({"tool_calls": [call(0, "c1", "echo", '{"text": "hi"}')]}),
                server.chunk({}, "tool_calls"),
                {"id": "x", "object": "chat.completion.chunk", "choices": [], "usage": usage},
            ],
            done=False,
            drop_connection=True,
        ),
        S.reply_text("It said hi."),
    )
    cycle = make_cycle(server, max_retries=0)

    with caplog.at_level(logging.WARNING, logger="agcore_tools.cycle"):
        response = await cycle.submit_stream_with_tools("go", echo).collect()

    assert response.text == "It said hi."
    assert tool_messages(cycle.messages) == {"c1": "echo:hi"}
    assert response.usage.prompt_tokens == 9 + 10
    assert "broke after its finish_reason" in caplog.text
    assert "incomplete chunked read" in caplog.text  # what broke, not just "Connection error."


async def test_a_connection_dropped_before_the_finish_reason_says_what_broke(
    serve, make_cycle, echo
):
    server = serve()
    server.add(
        RawStream(
            [server.chunk({"content": "The answer "}), server.chunk({"content": "is"})],
            done=False,
            drop_connection=True,
        )
    )
    cycle = make_cycle(server, max_retries=0)

    with pytest.raises(LlmError) as raised:
        await cycle.submit_stream_with_tools("go", echo).collect()

    message = str(raised.value)
    assert message.startswith("the model's stream failed after 2 chunk(s): APIConnectionError")
    assert "incomplete chunked read" in message
    assert raised.value.__cause__ is not None
    assert cycle.messages == [{"role": "user", "content": "go"}]


async def test_a_stream_cut_after_a_tool_turn_keeps_the_answered_calls(serve, make_cycle, echo):
    server = serve()
    server.add(
        S.reply_tool_calls([("echo", {"text": "x"}, "c1")]),
        RawStream([server.chunk({"content": "The echo sa"})], done=False),
    )
    cycle = make_cycle(server)

    with pytest.raises(LlmError, match="stream was cut"):
        await cycle.submit_stream_with_tools("go", echo).collect()

    assert [m["role"] for m in cycle.messages] == ["user", "assistant", "tool"]
    assert tool_messages(cycle.messages) == {"c1": "echo:x"}
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_tool_turn_without_text_is_sent_back_with_empty_string_content(
    serve, make_cycle, echo, stream
):
    # llama-cpp-python's server answers 500 "Input should be a valid string" to an
    # assistant tool-call message whose content is null or missing; OpenAI takes "".
    server = serve(S.reply_tool_calls([("echo", {"text": "x"}, "c1")]), S.reply_text("ok"))
    cycle = make_cycle(server)

    if stream:
        await cycle.submit_stream_with_tools("go", echo).collect()
    else:
        await cycle.submit_with_tools("go", echo)

    sent = server.requests[1].json["messages"][1]
    assert sent["role"] == "assistant" and sent["tool_calls"]
    assert sent["content"] == ""
    assert all(isinstance(m["content"], str) for m in cycle.messages)


async def test_finish_reason_in_the_same_chunk_as_the_last_argument_fragment(
    serve, make_cycle, echo
):
    events, _, _ = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"tool_calls": [call(0, "c1", "echo", '{"text": ')]}),
            s.chunk({"tool_calls": [call(0, None, None, '"end"}')]}, "tool_calls"),
        ],
    )
    assert started(events) == [("echo", {"text": "end"}, "c1")]
    first = next(e for e in events if isinstance(e, TurnComplete))
    assert first.finish_reason is FinishReason.TOOL_CALLS


async def test_reasoning_field_named_reasoning_is_echoed_under_that_name(serve, make_cycle, echo):
    events, _, server = await play(
        serve,
        make_cycle,
        echo,
        lambda s: [
            s.chunk({"reasoning": "hmm"}),
            s.chunk({"tool_calls": [call(0, "c1", "echo", '{"text": "r"}')]}, "tool_calls"),
        ],
    )
    assert server.requests[1].json["messages"][1]["reasoning"] == "hmm"
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["hmm"]


# -- non-streamed responses go through the same normalisation ---------------------------------


async def test_non_streamed_quirks_object_arguments_and_missing_ids(serve, make_cycle, echo):
    server = serve()
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}},
                        {"id": "", "type": "function", "function": {"name": "echo", "arguments": '{"text": "t"}'}},
                    ],
                },
            }
        ],
    }  # fmt: skip
    server.add(RawResponse(200, body), S.reply_text("done"))
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("go", echo)

    assert [inv.output for inv in response.invocations] == [3, "echo:t"]
    assert [c["id"] for c in cycle.messages[1]["tool_calls"]] == ["call_0_0", "call_0_1"]
    assert_history_valid(cycle.messages)


def _calls_without_ids(*amounts: int) -> RawResponse:
    calls = [
        {"type": "function", "function": {"name": "charge", "arguments": f'{{"amount": {n}}}'}}
        for n in amounts
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
    return RawResponse(200, {"id": "x", "object": "chat.completion", "choices": [choice]})


async def test_generated_ids_stay_unique_when_a_fresh_cycle_resumes_the_history(serve, make_cycle):
    # Each new cycle started its ids at call_0_0 again: a saved history resumed in a
    # fresh cycle held two calls with one id, and one idempotency key for both (an API
    # deduplicating on it would drop the second charge).
    keys: dict[int, str] = {}
    registry = ToolRegistry()

    @registry.tool
    def charge(amount: int, ctx: ToolContext) -> str:
        """Charge the customer."""
        keys[amount] = ctx.idempotency_key  # keyed by charge: sync calls run in threads
        return f"charged {amount}"

    server = serve(_calls_without_ids(5, 6), S.reply_text("done"))
    server.add(_calls_without_ids(7), S.reply_text("done"))
    first = make_cycle(server)
    await first.submit_with_tools("Charge", registry, ctx=ToolContext(run_id="order-42"))
    later = make_cycle(server)  # after a restart
    later.messages = json.loads(json.dumps(first.messages))

    await later.submit_with_tools("Charge more", registry, ctx=ToolContext(run_id="order-42"))

    ids = [m["tool_call_id"] for m in later.messages if m["role"] == "tool"]
    assert ids == ["call_0_0", "call_0_1", "call_1_0"]  # past every tag the history holds
    assert keys == {5: "order-42:call_0_0", 6: "order-42:call_0_1", 7: "order-42:call_1_0"}
    assert_history_valid(later.messages)


async def test_a_call_id_the_server_gives_again_in_a_later_turn_gets_one_of_its_own(
    serve, make_cycle
):
    # Some servers number each response's calls from "0" again: the second charge had
    # the first one's id, so its idempotency key, and a payment API would drop it as a
    # retry of the first. The new id is in the history, so the key stays the call's
    # when the history is saved and resumed.
    keys: dict[int, str] = {}
    registry = ToolRegistry()

    @registry.tool
    def charge(amount: int, ctx: ToolContext) -> str:
        """Charge the customer."""
        keys[amount] = ctx.idempotency_key  # keyed by charge: sync calls run in threads
        return f"charged {amount}"

    server = serve(
        S.reply_tool_calls([("charge", {"amount": 5}, "0")]),
        S.reply_tool_calls([("charge", {"amount": 6}, "0")]),
        S.reply_text("done"),
    )
    server.add(S.reply_tool_calls([("charge", {"amount": 7}, "0")]), S.reply_text("done"))
    first = make_cycle(server)
    await first.submit_with_tools("Charge", registry, ctx=ToolContext(run_id="order-42"))
    later = make_cycle(server)  # after a restart
    later.messages = json.loads(json.dumps(first.messages))

    await later.submit_with_tools("Charge more", registry, ctx=ToolContext(run_id="order-42"))

    ids = [m["tool_call_id"] for m in later.messages if m["role"] == "tool"]
    assert ids == ["0", "call_1_0", "call_2_0"]
    assert keys == {5: "order-42:0", 6: "order-42:call_1_0", 7: "order-42:call_2_0"}
    assert later.messages[:6] == first.messages  # the earlier calls keep their ids
    sent = server.requests[-1].json["messages"]
    assert [c["id"] for m in sent for c in m.get("tool_calls", ())] == ids
    assert_history_valid(later.messages)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_renamed_call_never_takes_an_id_another_call_of_the_turn_has(
    serve, make_cycle, echo, api, stream
):
    # The second "call_0_1" was renamed to the id generated for its place, call_0_1
    # again: both calls still shared it, and with it their answers and approvals.
    twins = [("add", {"a": 1, "b": 2}, "call_0_1"), ("add", {"a": 3, "b": 4}, "call_0_1")]
    server = serve(S.reply_tool_calls(twins), S.reply_text("3 and 7"))
    cycle = make_cycle(server, api=api)
    response = await (
        cycle.submit_stream_with_tools("Sums?", echo).collect()
        if stream
        else cycle.submit_with_tools("Sums?", echo)
    )
    assert response.text == "3 and 7"
    assert tool_messages(cycle.messages) == {"call_0_1": "3", "call_0_1_1": "7"}
    assert_history_valid(cycle.messages)


def test_a_run_begun_before_derived_ids_were_reserved_keeps_its_ids() -> None:
    # What a Temporal run started before the patch agcore-derived-call-ids-reserved
    # replays with: a server's "c1~0" kept, and a renamed repeat given its place's id.
    completion = {
        "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [
            {"id": "c1~0", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
            {"id": "call_0_2", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
            {"id": "call_0_2", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
        ]}}]
    }  # fmt: skip
    ids = {}
    for reserved in (True, False):
        token = DERIVED_IDS_RESERVED.set(reserved)
        try:
            builder = TurnBuilder("0")
            builder.feed_completion(completion)
            ids[reserved] = [c.call_id for c in builder.build().calls]
        finally:
            DERIVED_IDS_RESERVED.reset(token)
    assert ids == {
        True: ["call_0_0", "call_0_2", "call_0_2_1"],
        False: ["c1~0", "call_0_2", "call_0_2"],
    }


async def test_a_response_without_choices_is_an_llm_error(serve, make_cycle):
    server = serve(RawResponse(200, {"id": "x", "object": "chat.completion", "choices": []}))
    with pytest.raises(LlmError, match="no choices"):
        await make_cycle(server).submit("Hi")


async def test_a_200_html_page_is_an_llm_error_quoting_it(serve, make_cycle):
    html = b"<html><body>Sign in to continue</body></html>"
    server = serve(RawResponse(200, html, {"content-type": "text/html"}))
    with pytest.raises(LlmError, match="no choices: a body that is not JSON, starting '<html>"):
        await make_cycle(server).submit("Hi")


async def test_an_error_body_with_status_200_is_an_llm_error(serve, make_cycle):
    server = serve(RawResponse(200, {"error": {"message": "quota exceeded"}}))
    with pytest.raises(LlmError, match="quota exceeded"):
        await make_cycle(server).submit("Hi")


# -- the builder's slot rules, without HTTP -----------------------------------------------------


def _chunk(deltas: list[dict[str, Any]], finish: str | None = None) -> Any:
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    body = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": {"tool_calls": deltas}, "finish_reason": finish}]}  # fmt: skip
    return construct_type(type_=ChatCompletionChunk, value=body)


def test_an_id_arriving_after_the_name_joins_the_same_call() -> None:
    builder = TurnBuilder("t")
    builder.feed(_chunk([call(0, None, "echo", "")]))
    builder.feed(_chunk([call(0, "late", None, '{"text": "z"}')], "tool_calls"))
    turn = builder.build()
    assert [(c.call_id, c.name, c.args) for c in turn.calls] == [("late", "echo", {"text": "z"})]


def test_an_id_split_across_chunks_of_one_index_is_joined_into_one_call() -> None:
    # The rest of the id, without a name, opened a second, nameless call.
    builder = TurnBuilder("t")
    builder.feed(_chunk([call(0, "call_ab", "echo", "")]))
    builder.feed(_chunk([call(0, "cd", None, '{"text":')]))
    builder.feed(_chunk([call(0, None, None, ' "z"}')], "tool_calls"))
    turn = builder.build()
    assert [(c.call_id, c.name, c.args) for c in turn.calls] == [
        ("call_abcd", "echo", {"text": "z"})
    ]


async def test_a_call_without_a_name_stops_the_loop_saying_so(serve, make_cycle, echo):
    with pytest.raises(LlmError, match="stopped: the model sent a tool call without a name"):
        await play(
            serve,
            make_cycle,
            echo,
            lambda s: [s.chunk({"tool_calls": [call(0, "c1", None, "{}")]}, "tool_calls")],
        )


def test_interleaved_parallel_calls_are_assembled_by_index() -> None:
    builder = TurnBuilder("t")
    builder.feed(_chunk([call(0, "a", "echo", ""), call(1, "b", "add", "")]))
    builder.feed(_chunk([call(1, None, None, '{"a": 1,'), call(0, None, None, '{"text":')]))
    builder.feed(_chunk([call(0, None, None, ' "q"}'), call(1, None, None, ' "b": 2}')]))
    turn = builder.build()
    assert [(c.call_id, c.args) for c in turn.calls] == [
        ("a", {"text": "q"}),
        ("b", {"a": 1, "b": 2}),
    ]
    assert turn.reason is FinishReason.TOOL_CALLS
    assert turn.raw_reason is None


@pytest.mark.parametrize("closing", ["", "\n", None])
@pytest.mark.parametrize("index", [0, None])
def test_a_name_on_every_delta_with_a_closing_delta_makes_one_call(closing, index) -> None:
    # MiniMax through NIM names the call on every delta; a last delta bringing no
    # arguments opened a second call of the same tool, which ran with its defaults.
    # Without an index, every fragment was a call of its own.
    builder = TurnBuilder("t")
    builder.feed(_chunk([call(index, "c1", "echo", '{"text":')]))
    builder.feed(_chunk([call(index, None, "echo", ' "z"}')]))
    builder.feed(_chunk([call(index, None, "echo", closing)], "tool_calls"))
    turn = builder.build()
    assert [(c.call_id, c.name, c.args) for c in turn.calls] == [("c1", "echo", {"text": "z"})]


def test_a_second_call_of_the_same_tool_on_a_reused_index_is_still_its_own() -> None:
    builder = TurnBuilder("t")
    builder.feed(_chunk([call(0, None, "echo", '{"text": "a"}')]))
    builder.feed(_chunk([call(0, None, "echo", "")]))
    builder.feed(_chunk([call(0, None, None, '{"text": "b"}')], "tool_calls"))
    turn = builder.build()
    assert [c.args for c in turn.calls] == [{"text": "a"}, {"text": "b"}]


def test_another_tools_name_on_a_reused_index_starts_a_call_even_after_empty_arguments() -> None:
    # Every parallel call on index 0 and no ids: get_time's "" took get_weather's
    # arguments, and get_weather was lost.
    builder = TurnBuilder("t")
    builder.feed(_chunk([call(0, None, "now", "")]))
    builder.feed(_chunk([call(0, None, "echo", '{"text": "Rome"}')], "tool_calls"))
    turn = builder.build()
    assert [(c.name, c.args) for c in turn.calls] == [("now", {}), ("echo", {"text": "Rome"})]


def test_a_stray_empty_delta_makes_no_call() -> None:
    builder = TurnBuilder("t")
    builder.feed(_chunk([{"index": 0}]))
    turn = builder.build()
    assert turn.calls == ()
    assert "tool_calls" not in turn.message


def test_the_server_chunk_helper_makes_sdk_readable_chunks() -> None:
    server = ScriptedChatServer()
    chunk = server.chunk({"content": "x"}, "stop")
    assert chunk["choices"][0] == {"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}


REFUSAL = "I'm sorry, I can't help with that."


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_refusal_is_kept_in_the_history_and_on_the_response(serve, make_cycle, stream):
    server = serve()
    if stream:
        pieces = [server.chunk({"role": "assistant", "content": None, "refusal": ""})]
        pieces += [
            server.chunk({"refusal": part}) for part in ("I'm sorry, ", "I can't help with that.")
        ]
        server.add(RawStream([*pieces, server.chunk({}, "stop")]))
    else:
        message = {"role": "assistant", "content": None, "refusal": REFUSAL}
        body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}  # fmt: skip
        server.add(RawResponse(200, body))
    server.add(S.reply_text("Fine."))
    cycle = make_cycle(server)

    if stream:
        events = cycle.submit_stream("Say something bad")
        seen = [event async for event in events]
        response = events.response
        assert isinstance(seen[-1], TurnComplete) and seen[-1].message["refusal"] == REFUSAL
    else:
        response = await cycle.submit("Say something bad")
    await cycle.submit("Something else, then")

    assert response.refusal == REFUSAL and response.text == ""
    kept = {"role": "assistant", "content": "", "refusal": REFUSAL}
    assert response.message == kept
    assert server.requests[1].json["messages"][1] == kept  # resent as the API gave it
