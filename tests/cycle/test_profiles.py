"""Server profiles against a real loopback server: the loop fits each request to what
the profile says the server accepts, and picks and logs the profile once."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from pydantic import BaseModel

from agcore_tools import (
    AssistantTextDelta,
    CycleConfig,
    LlmConfigError,
    LlmCycle,
    LlmError,
    ReasoningDelta,
    StructuredOutput,
    TurnComplete,
)
from agcore_tools.cycle.profiles import (
    AZURE,
    LITELLM,
    LLAMA_CPP_PYTHON,
    OPENAI,
    ServerProfile,
    fit_request,
    fit_responses_request,
    profile_for_url,
)
from agcore_tools.testing import RawResponse, RawStream

from .conftest import S

FORCE_ADD = {"type": "function", "function": {"name": "add"}}
LLAMA = "llama-cpp-python"


class City(BaseModel):
    name: str
    population: int


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_on_llama_cpp_python_a_forced_first_call_is_followed_by_no_tool_choice(
    serve, make_cycle, calc, stream
):
    # Its model never sees tool results, so "auto" would call the tool again forever.
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2})]), S.reply_text("3"))
    cycle = make_cycle(server, tool_choice=FORCE_ADD, profile=LLAMA)

    if stream:
        response = await cycle.submit_stream_with_tools("1 + 2?", calc).collect()
    else:
        response = await cycle.submit_with_tools("1 + 2?", calc)

    assert response.text == "3"
    first, second = (request.json for request in server.requests)
    assert first["tool_choice"] == FORCE_ADD
    assert "tool_choice" not in second
    # A named choice and a request without one both stream on this server.
    assert first.get("stream", False) is stream and second.get("stream", False) is stream


async def test_the_openai_profile_still_relaxes_a_forced_choice_to_auto(serve, make_cycle, calc):
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2})]), S.reply_text("3"))
    cycle = make_cycle(server, tool_choice=FORCE_ADD)

    await cycle.submit_with_tools("1 + 2?", calc)

    assert [r.json["tool_choice"] for r in server.requests] == [FORCE_ADD, "auto"]


async def test_required_becomes_named_with_one_tool_and_auto_is_not_streamed(
    serve, make_cycle, calc
):
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2})]),
        S.reply_text("3"),
        S.reply_tool_calls([("add", {"a": 2, "b": 2})]),
        S.reply_text("4"),
    )
    only_add = calc.view([calc.entry("add")])
    forced = make_cycle(server, tool_choice="required", profile=LLAMA)
    await forced.submit_stream_with_tools("1 + 2?", only_add).collect()
    free = make_cycle(server, tool_choice="auto", profile=LLAMA)
    await free.submit_stream_with_tools("2 + 2?", only_add).collect()

    sent = [request.json for request in server.requests]
    assert sent[0]["tool_choice"] == FORCE_ADD and sent[0]["stream"] is True
    assert sent[2]["tool_choice"] == "auto" and "stream" not in sent[2]


async def test_a_bare_output_type_asks_for_json_object_on_llama_cpp_python(serve, make_cycle):
    server = serve(S.reply_text('{"name": "Tokyo", "population": 37400000}'))
    cycle = make_cycle(server, profile=LLAMA)

    response = await cycle.submit("Largest city?", output_type=City)

    assert response.output == City(name="Tokyo", population=37400000)
    assert server.requests[0].json["response_format"]["type"] == "json_object"


async def test_the_responses_api_on_a_server_without_it_is_refused_naming_the_fix(
    serve, make_cycle
):
    server = serve(S.reply_text("never sent"))
    cycle = make_cycle(server, api="responses", profile=LLAMA)

    with pytest.raises(LlmConfigError, match=r"llama-cpp-python .*api='chat'"):
        await cycle.submit("Hi")
    assert server.requests == []


async def test_the_profile_is_logged_once_at_info(serve, make_cycle, caplog):
    server = serve(S.reply_text("a"), S.reply_text("b"))
    cycle = make_cycle(server, profile=LLAMA)

    with caplog.at_level(logging.INFO, logger="agcore_tools.cycle"):
        await cycle.submit("one")
        await cycle.submit("two")

    said = [r.getMessage() for r in caplog.records if "server profile" in r.getMessage()]
    assert said == ["LlmCycle: server profile 'llama-cpp-python' (from CycleConfig.profile)"]


async def test_the_base_url_tells_openai_and_azure_and_a_local_port_tells_nothing() -> None:
    from openai import AsyncAzureOpenAI

    azure = AsyncAzureOpenAI(
        api_key="-", azure_endpoint="https://x.openai.azure.com", api_version="2024-10-21"
    )
    assert await LlmCycle(CycleConfig("m"), client=azure).requester.server_profile() is AZURE
    assert profile_for_url("https://api.openai.com/v1") is OPENAI
    assert profile_for_url("http://127.0.0.1:8080/v1") is None


async def test_a_server_whose_model_list_tells_nothing_runs_with_openai_and_says_so(
    serve, make_cycle, caplog
):
    server = serve(S.reply_text("a"), S.reply_text("b"))
    cycle = make_cycle(server)

    with caplog.at_level(logging.INFO, logger="agcore_tools.cycle"):
        await cycle.submit("one")
        await cycle.submit("two")

    said = [r.getMessage() for r in caplog.records if "server profile" in r.getMessage()]
    assert said == ["LlmCycle: server profile 'openai' (from the default)"]
    assert len(server.requests) == 2  # the model list is read, not scripted or recorded


def test_a_profile_is_given_by_name_or_as_an_object_and_an_unknown_name_is_refused() -> None:
    mine = ServerProfile("mine", strict_tools=False)
    assert CycleConfig("m", profile=mine).profile is mine
    assert CycleConfig("m", profile=LLAMA).profile is LLAMA_CPP_PYTHON
    with pytest.raises(ValueError, match="not a built-in profile"):
        CycleConfig("m", profile="llama")


def test_strict_tools_are_sent_non_strict_where_the_server_has_none() -> None:
    tool = {"type": "function", "function": {"name": "f", "strict": True, "parameters": {}}}
    params = {"tools": [tool]}

    stream, changed = fit_request(params, ServerProfile("s", strict_tools=False), stream=False)

    assert params["tools"] == [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert (stream, changed) == (False, ["strict tools -> non-strict"])
    assert tool["function"]["strict"] is True  # the registry's own definition is untouched


# -- falling back when the server refuses -------------------------------------------------

REFUSED_FORMAT = (
    "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\"}"
)
ANSWER = '{"name": "Tokyo", "population": 37400000}'


async def test_a_refused_json_schema_falls_back_to_json_object_once_and_is_remembered(
    serve, make_cycle, caplog
):
    server = serve(S.error(500, REFUSED_FORMAT), S.reply_text(ANSWER), S.reply_text(ANSWER))
    cycle = make_cycle(server, max_retries=3)

    with caplog.at_level(logging.WARNING, logger="agcore_tools.cycle"):
        first = await cycle.submit("Largest city?", output_type=City)
        second = await cycle.submit("And again?", output_type=City)

    assert first.output == second.output == City(name="Tokyo", population=37400000)
    sent = [r.json["response_format"]["type"] for r in server.requests]
    assert sent == ["json_schema", "json_object", "json_object"]  # no retries of the 500
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "127.0.0.1 refused response_format 'json_schema': falling back to json_object" in (
        warning
    )


async def test_a_fallback_is_kept_for_other_cycles_on_the_same_client(serve):
    server = serve(S.error(500, REFUSED_FORMAT), S.reply_text(ANSWER), S.reply_text(ANSWER))
    async with server.client() as client:
        for _ in range(2):
            cycle = LlmCycle(CycleConfig("m"), client=client)
            await cycle.submit("Largest city?", output_type=City)

    sent = [r.json["response_format"]["type"] for r in server.requests]
    assert sent == ["json_schema", "json_object", "json_object"]


async def test_with_adapt_false_a_refusal_stays_an_error(serve, make_cycle):
    server = serve(S.error(500, REFUSED_FORMAT), S.reply_text(ANSWER))
    cycle = make_cycle(server, adapt=False)

    with pytest.raises(LlmError, match="response_format"):
        await cycle.submit("Largest city?", output_type=City)
    assert len(server.requests) == 1


async def test_a_refusal_naming_nothing_the_request_used_stays_an_error(serve, make_cycle):
    server = serve(S.error(500, "the GPU is on fire"), S.reply_text(ANSWER))
    cycle = make_cycle(server, max_retries=0)

    with pytest.raises(LlmError, match="GPU is on fire"):
        await cycle.submit("Largest city?", output_type=City)
    assert len(server.requests) == 1


async def test_a_refused_required_tool_choice_falls_back_to_the_named_tool(serve, make_cycle, calc):
    server = serve(
        S.error(400, "tool_choice 'required' is not supported by this server"),
        S.reply_tool_calls([("add", {"a": 1, "b": 2})]),
        S.reply_text("3"),
    )
    cycle = make_cycle(server, tool_choice="required")

    response = await cycle.submit_with_tools("1 + 2?", calc.view([calc.entry("add")]))

    assert response.text == "3"
    choices = [r.json.get("tool_choice") for r in server.requests]
    assert choices == ["required", FORCE_ADD, "auto"]


async def test_an_empty_cut_stream_of_auto_is_sent_again_unstreamed(serve, make_cycle, calc):
    server = serve()
    server.add(RawStream([], done=True), S.reply_text("3"))
    cycle = make_cycle(server)

    response = await cycle.submit_stream_with_tools("1 + 2?", calc).collect()

    assert response.text == "3"
    assert [r.json.get("stream", False) for r in server.requests] == [True, False]


OVERFLOW = "This model's maximum context length is 512 tokens. However, you requested 3055"


@pytest.mark.parametrize("shape", ["empty", "only-finish"])
@pytest.mark.parametrize("then", ["error", "answer"])
async def test_a_stream_that_brought_nothing_is_sent_again_unstreamed(
    serve, make_cycle, shape, then
):
    # A prompt over the context, streamed: llama-cpp-python fails after its 200 and ends
    # the stream empty (the error blamed a streamed "auto" that was never sent); LiteLLM
    # in front closes it with a bare finish_reason "stop" (an empty answer joined the
    # history). Unstreamed, the server says why, or gives the answer the stream lost.
    server = serve()
    if shape == "empty":
        server.add(RawStream([], done=True))
    else:
        last = {**server.chunk(), "choices": [{"index": 0, "delta": {}}]}
        server.add(RawStream([server.chunk({}, "stop"), last], done=True))
    server.add(S.error(400, OVERFLOW) if then == "error" else S.reply_text("Hi"))
    cycle = make_cycle(server, profile=LLAMA if shape == "empty" else "litellm")

    if then == "error":
        with pytest.raises(LlmError, match="maximum context length is 512 tokens") as caught:
            await cycle.submit_stream("Hi").collect()
        assert "tool_choice" not in str(caught.value)
        assert cycle.messages == [{"role": "user", "content": "Hi"}]
    else:
        response = await cycle.submit_stream("Hi").collect()
        assert response.text == "Hi" and cycle.messages[-1]["content"] == "Hi"
    assert [r.json.get("stream", False) for r in server.requests] == [True, False]


async def test_a_streamed_empty_answer_naming_its_role_stays_an_answer(serve, make_cycle):
    server = serve()
    server.add(RawStream([server.chunk({"role": "assistant"}), server.chunk({}, "stop")]))
    cycle = make_cycle(server, profile="litellm")

    response = await cycle.submit_stream("Hi").collect()

    assert (response.text, len(server.requests)) == ("", 1)


@pytest.mark.parametrize("tools", [False, True])
async def test_without_adapt_a_stream_that_brought_nothing_names_auto_only_where_sent(
    serve, make_cycle, calc, tools
):
    server = serve()
    server.add(RawStream([], done=True), S.reply_text("3"))
    cycle = make_cycle(server, profile="openai", adapt=False)

    with pytest.raises(LlmError, match="stream was cut before anything arrived") as caught:
        if tools:
            await cycle.submit_stream_with_tools("1 + 2?", calc).collect()
        else:
            await cycle.submit_stream("1 + 2?").collect()

    assert ('tool_choice "auto"' in str(caught.value)) is tools
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_200_html_page_to_a_streamed_auto_turn_is_an_error_not_a_refusal(
    serve, make_cycle, calc, api, caplog
):
    # It parsed as an empty event stream: read as llama-cpp-python's refusal, it was
    # sent again unstreamed, the client stayed unstreamed, and the error said "no choices".
    html = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    server = serve(RawResponse(200, html, {"content-type": "text/html"}), S.reply_text("3"))
    cycle = make_cycle(server, api=api, max_retries=0)

    with caplog.at_level(logging.WARNING, logger="agcore_tools"):
        with pytest.raises(
            LlmError, match=r"not an event stream: the server answered text/html, starting '<html>"
        ):
            await cycle.submit_stream_with_tools("1 + 2?", calc).collect()
        response = await cycle.submit_stream_with_tools("1 + 2?", calc).collect()

    assert response.text == "3"
    assert [r.json.get("stream", False) for r in server.requests] == [True, True]
    assert "refused" not in caplog.text


async def test_a_stream_cut_midway_stays_an_error(serve, make_cycle, calc):
    server = serve()
    server.add(RawStream([server.chunk({"content": "Half an ans"})], done=True), S.reply_text("3"))
    cycle = make_cycle(server)

    with pytest.raises(LlmError, match="stream was cut: it ended"):
        await cycle.submit_stream_with_tools("1 + 2?", calc).collect()
    assert len(server.requests) == 1


EMPTY_ASSISTANT = {"role": "assistant", "content": ""}


def _shape(request: Any) -> list[Any]:
    return [item.get("type") or item for item in request.json["input"]]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("profile", ["litellm", None], ids=["litellm", "default"])
async def test_behind_litellm_the_responses_follow_up_has_an_empty_assistant_message(
    serve, make_cycle, calc, stream, profile
):
    # LiteLLM's bridge merges the calls into the assistant message before them; without
    # one, the server behind it gets an assistant message with no content (docs/providers.md).
    server = serve(
        S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1"), ("add", {"a": 3, "b": 4}, "c2")]),
        S.reply_text("3 and 7"),
    )
    cycle = make_cycle(server, api="responses", profile=profile)

    if stream:
        response = await cycle.submit_stream_with_tools("Sums?", calc).collect()
    else:
        response = await cycle.submit_with_tools("Sums?", calc)

    assert response.text == "3 and 7" and response.turns == 2
    calls = ["function_call", "function_call", "function_call_output", "function_call_output"]
    merged = [EMPTY_ASSISTANT] if profile else []
    assert _shape(server.requests[1]) == [{"role": "user", "content": "Sums?"}, *merged, *calls]
    # Only what is sent: the history keeps the response's output as it came.
    assert [item["type"] for item in cycle.messages[1]["response"]["output"]] == calls[:2]
    assert [r.stream for r in server.requests] == [stream, stream]


async def test_behind_litellm_a_streamed_responses_tool_turn_goes_unstreamed(
    serve, make_cycle, calc
):
    # The bridge's chunk builder fails on a streamed function call (response.failed);
    # with no tool_choice after the forced first request, the answer streams.
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2})]), S.reply_text("3"))
    cycle = make_cycle(server, api="responses", tool_choice=FORCE_ADD, profile="litellm")

    response = await cycle.submit_stream_with_tools("1 + 2?", calc).collect()

    assert response.text == "3"
    assert [r.stream for r in server.requests] == [False, True]
    assert "tool_choice" not in server.requests[1].json


@pytest.mark.parametrize(
    ("tools", "sent"),
    [(["add"], {"type": "function", "name": "add"}), (["add", "weather"], "auto")],
    ids=["one-tool", "two-tools"],
)
async def test_behind_litellm_a_required_responses_tool_choice_is_fitted_as_on_chat(
    serve, make_cycle, calc, tools, sent
):
    # The bridge answered "required" with an empty 500, retried 3 times: the Chat
    # request was fitted to the profile and the Responses one was not.
    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2})]), S.reply_text("3"))
    cycle = make_cycle(server, api="responses", tool_choice="required", profile="litellm")

    response = await cycle.submit_with_tools(
        "1 + 2?", calc.view([calc.entry(name) for name in tools])
    )

    assert response.text == "3"
    assert server.requests[0].json["tool_choice"] == sent
    assert "tool_choice" not in server.requests[1].json  # forced first, then free


async def test_behind_litellm_the_output_tool_next_to_tools_is_not_required(
    serve, make_cycle, calc
):
    # StructuredOutput(mode="tool") with other tools asks for "required": on the
    # Responses API behind LiteLLM, "auto" (the bridge's 500 otherwise).
    server = serve(S.reply_tool_calls([("final_result", {"name": "Rome", "population": 3})]))
    cycle = make_cycle(server, api="responses", profile="litellm")

    response = await cycle.submit_with_tools(
        "Rome?", calc, output_type=StructuredOutput(City, mode="tool")
    )

    assert response.output == City(name="Rome", population=3)
    assert server.requests[0].json["tool_choice"] == "auto"


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_behind_litellm_a_bare_output_type_asks_for_the_output_tool_on_responses(
    serve, make_cycle, api
):
    # The bridge sends a Responses json_object format on without its schema, so the
    # model wrote free JSON until the token limit; on Chat the schema reaches the server.
    answer = {"name": "Rome", "population": 3}
    if api == "chat":
        server = serve(S.reply_text(json.dumps(answer)))
    else:
        server = serve(S.reply_tool_calls([("final_result", answer)]))
    cycle = make_cycle(server, api=api, profile="litellm")

    response = await cycle.submit("Rome?", output_type=City)

    assert response.output == City(**answer)
    sent = server.requests[0].json
    if api == "chat":
        assert sent["response_format"]["type"] == "json_object"
    else:
        assert "text" not in sent
        assert [tool["name"] for tool in sent["tools"]] == ["final_result"]
        assert sent["tool_choice"] == {"type": "function", "name": "final_result"}


async def test_a_refusal_of_required_keeps_the_output_mode_asked_for(serve, make_cycle, calc):
    # Any refusal used to put the output in the profile's mode: here json_schema, with
    # the final_result tool gone from the retried request.
    server = serve(
        S.error(400, "tool_choice 'required' is not supported by this server"),
        S.reply_tool_calls([("final_result", {"name": "Rome", "population": 3})]),
    )
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools(
        "Rome?", calc, output_type=StructuredOutput(City, mode="tool")
    )

    assert response.output == City(name="Rome", population=3)
    first, second = (request.json for request in server.requests)
    assert (first["tool_choice"], second["tool_choice"]) == ("required", "auto")
    assert "response_format" not in second
    assert second["tools"][-1]["function"]["name"] == "final_result"


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_turn_sent_unstreamed_in_a_streamed_run_still_yields_its_text(
    serve, make_cycle, calc, api
):
    # llama-cpp-python (Chat) and LiteLLM's bridge (Responses) get streamed tool
    # turns unstreamed: the stream's consumer must see their reasoning and text all the same.
    server = serve(
        S.reply_tool_calls(
            [("add", {"a": 1, "b": 2})], text="Let me add.", reasoning="Adding is easy."
        ),
        S.reply_text("It is 3.", reasoning="Done."),
    )
    profile = "llama-cpp-python" if api == "chat" else "litellm"
    cycle = make_cycle(server, api=api, profile=profile, tool_choice="auto")

    async with cycle.submit_stream_with_tools("1 + 2?", calc) as events:
        seen = [
            (type(e).__name__, getattr(e, "text", None))
            for e in [event async for event in events]
            if isinstance(e, (AssistantTextDelta, ReasoningDelta, TurnComplete))
        ]

    # The answer, with no tool_choice left (reset_tool_choice), streams as usual.
    assert [r.stream for r in server.requests] == [False, True]
    assert seen == [
        ("ReasoningDelta", "Adding is easy."),
        ("AssistantTextDelta", "Let me add."),
        ("TurnComplete", None),
        ("ReasoningDelta", "Done."),
        ("AssistantTextDelta", "It is 3."),
        ("TurnComplete", None),
    ]
    assert events.response is not None and events.response.text == "It is 3."


def test_the_empty_assistant_message_opens_each_call_group_without_text_in_front() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"}
    text = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    chat_turn = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "add"}}],
    }
    messages = [
        {"role": "assistant", "content": "x", "response": {"id": "r1", "output": [text, call]}},
        {"role": "assistant", "content": "", "response": {"id": "r2", "output": [reasoning, call]}},
        chat_turn,  # a turn kept without its response (a history from api="chat")
        {"role": "assistant", "content": "plain", "tool_calls": chat_turn["tool_calls"]},
    ]
    params: dict[str, Any] = {"messages": list(messages)}

    stream, changed = fit_responses_request(params, LITELLM, stream=False)

    assert (stream, changed) == (
        False,
        [
            "1 assistant message item(s) -> text content",
            'assistant "" before 2 function_call group(s)',
        ],
    )
    sent = params["messages"]
    # Text before: merged already (the message item goes as plain text).
    assert sent[0]["response"]["output"] == [EMPTY_ASSISTANT, call] and sent[3] is messages[3]
    assert sent[1]["response"] == {"id": "r2", "output": [reasoning, EMPTY_ASSISTANT, call]}
    function_call = {"type": "function_call", "call_id": "c2", "name": "add", "arguments": ""}
    assert sent[2]["response"]["output"] == [EMPTY_ASSISTANT, function_call]
    assert messages[1]["response"]["output"] == [reasoning, call] and "response" not in chat_turn
    assert fit_responses_request({"messages": list(messages)}, OPENAI, stream=True) == (True, [])


def test_behind_litellm_an_output_message_goes_back_as_plain_assistant_text() -> None:
    # The bridge forwarded the output_text parts as list content, which the server
    # behind it (llama-cpp-python's) refused: a conversation ended at its first answer.
    said = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Hello", "annotations": []},
            {"type": "output_text", "text": " there.", "annotations": []},
        ],
    }
    refused = {**said, "content": [{"type": "refusal", "refusal": "I can't."}]}
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello there.", "response": {"output": [said]}},
        {"role": "user", "content": "Help me."},
        {"role": "assistant", "content": "", "response": {"output": [refused]}},
        {"role": "user", "content": "Bye"},
    ]
    params: dict[str, Any] = {"messages": list(messages)}

    assert fit_responses_request(params, LITELLM, stream=True) == (
        True,
        ["2 assistant message item(s) -> text content"],
    )
    sent = params["messages"]
    assert sent[1]["response"]["output"] == [{"role": "assistant", "content": "Hello there."}]
    assert sent[3]["response"]["output"] == [{"role": "assistant", "content": "I can't."}]
    assert messages[1]["response"]["output"] == [said]  # the history is untouched
    assert fit_responses_request({"messages": list(messages)}, OPENAI, stream=True) == (True, [])


@pytest.mark.parametrize("profile", ["litellm", "openai"])
async def test_behind_litellm_the_next_responses_turn_sends_the_answer_as_text(
    serve, make_cycle, profile
):
    server = serve(S.reply_text("Hello there."), S.reply_text("Bye."))
    cycle = make_cycle(server, api="responses", profile=profile)

    await cycle.submit("Hi")
    await cycle.submit("Now say goodbye.")

    answer = server.requests[1].json["input"][1]
    if profile == "litellm":
        assert answer == {"role": "assistant", "content": "Hello there."}
    else:  # OpenAI's API takes the output item back as it came
        assert answer["type"] == "message" and answer["content"][0]["type"] == "output_text"
