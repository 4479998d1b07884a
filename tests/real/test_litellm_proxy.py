"""The loop and the drop-in through LiteLLM's proxy, in front of llama-cpp-python's server.

The proxy (LiteLLM 1.106.12, in a venv of its own: see ``litellm_path()``) is a second
real OpenAI-compatible server, and the only one here that speaks the Responses API: it
answers ``/v1/responses`` by turning each request into a Chat Completions one for the
llama server behind it. The same SmolLM2-135M makes the tool calls, so the llama
server's own quirks (tests/real/test_llama_cpp_server.py) show through. What the proxy
adds (docs/providers.md):

- it drops ``content: null`` from an assistant message before forwarding it, so the
  llama server sees no ``content`` (a different 500 than for ``null`` sent directly);
- it closes a stream that failed behind it (the llama server's cut ``"auto"`` stream, a
  prompt over its context) with a bare ``finish_reason: "stop"``: no role, text or usage,
  which a real empty answer has, so the loop tells the cut and sends the request again
  unstreamed, for the server's error;
- its Responses bridge sends a follow-up's function call as an assistant message with
  no ``content``; an explicit empty assistant message before the call fills it, which
  LiteLLM's server profile sends (not with ``chain_responses``, out of its reach);
- its Responses bridge forwards an earlier answer's output ``message`` item as list
  content, which the llama server refuses; plain assistant text, which LiteLLM's
  server profile sends, passes;
- a streamed Responses function call ends with ``response.failed`` (an error in
  LiteLLM's own chunk builder) after all of its argument deltas, so the profile sends
  such a turn unstreamed.
- its Responses bridge answers ``tool_choice: "required"`` with an empty 500, so the
  profile fits a Responses ``tool_choice`` as it fits a Chat one (the one tool by name).

Each quirk is pinned raw (the drop-in, or ``profile="openai"``) and the loop is shown
answering with LiteLLM's profile, which it picks by itself: the proxy's ``GET /models``
answer carries no ``x-litellm-*`` header, but gives every entry LiteLLM's constant
``created``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from agcore_tools import CycleConfig, FinishReason, LlmCycle, LlmError, MaxTurnsExceededError

from ..cycle.conftest import assert_history_valid
from .conftest import RealServer
from .test_llama_cpp_server import (
    FORCE_ADD,
    MODES,
    OVER_THE_CONTEXT,
    QUESTION,
    assert_answers,
    assert_tool_turns,
    make_cycle,
    stop_forcing,
    submit,
)

pytestmark = pytest.mark.timeout(300)

ADD_CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
}
# The llama server's answer to an assistant message without "content": its chat
# template reads the key. To "content": null sent directly it answers "Input should be
# a valid string" instead, so this text behind the proxy shows the proxy dropped null.
NO_CONTENT_KEY = "'dict object' has no attribute 'content'"
FORCE_WEATHER = {"type": "function", "name": "get_weather"}


@pytest.mark.parametrize(
    ("content", "accepted"),
    [("null", False), ("missing", False), ("empty", True)],
)
async def test_the_proxy_drops_null_content_next_to_tool_calls(
    litellm_proxy, litellm_client, content, accepted
):
    from openai import InternalServerError

    assistant: dict[str, Any] = {"role": "assistant", "tool_calls": [ADD_CALL]}
    if content != "missing":
        assistant["content"] = None if content == "null" else ""
    messages = [{"role": "user", "content": QUESTION}, assistant]
    messages.append({"role": "tool", "tool_call_id": "c1", "content": "5"})

    async def send() -> Any:
        return await litellm_client.chat.completions.create(
            model=litellm_proxy.model, messages=messages, max_tokens=1
        )

    if accepted:
        assert (await send()).choices[0].finish_reason in ("stop", "length")
    else:
        with pytest.raises(InternalServerError, match=NO_CONTENT_KEY):
            await send()


@MODES
async def test_forced_tool_choice_then_an_answer(litellm_proxy, litellm_client, tools, stream):
    cycle = make_cycle(litellm_proxy, litellm_client, max_turns=1, tool_choice=FORCE_ADD)

    with pytest.raises(MaxTurnsExceededError):
        await submit(cycle, QUESTION, tools, stream)

    assert [name for name, _ in tools.runs] == ["add"]
    assert_tool_turns(cycle.messages, tools)
    stop_forcing(cycle)
    await assert_answers(cycle, tools, stream)


async def test_auto_tool_choice_loop_is_accepted_on_every_turn(
    litellm_proxy, litellm_client, tools
):
    # The model calls again each turn: the llama server's template hides tool results.
    # The server's own behaviour, so OpenAI's profile: LiteLLM's would answer.
    cycle = make_cycle(
        litellm_proxy, litellm_client, max_turns=2, tool_choice="auto", profile="openai"
    )

    with pytest.raises(MaxTurnsExceededError):
        await cycle.submit_with_tools(QUESTION, tools)

    assert [m["role"] for m in cycle.messages].count("assistant") == 2
    assert_tool_turns(cycle.messages, tools)
    stop_forcing(cycle)
    await assert_answers(cycle, tools, stream=False)


async def test_streamed_auto_tool_choice_cut_is_told_from_an_empty_answer(
    litellm_proxy, litellm_client, tools
):
    # Direct, the llama server's stream ends without a finish_reason, and the loop
    # raises a cut stream. The proxy closes that stream with finish_reason "stop", but
    # with no role, text or usage, which a real empty answer has (stop=["I"] below): it
    # used to come back as an empty answer, joining the history. Raw, so OpenAI's profile
    # without adapt: LiteLLM's sends that turn unstreamed.
    # The real empty answer first: the llama server closes its connection when the cut
    # stream ends, and the proxy may send its next request down that closed connection
    # (a 500 "Connection error"). The raw client does not retry; the loop's requests
    # below retry a 500, as they would in an app.
    empty = await litellm_client.chat.completions.create(
        model=litellm_proxy.model,
        messages=[{"role": "user", "content": "Say hi"}],
        temperature=0,
        max_tokens=5,
        stop=["I"],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in empty]
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[-1].usage is not None
    assert not "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    raw = await litellm_client.chat.completions.create(
        model=litellm_proxy.model,
        messages=[{"role": "user", "content": QUESTION}],
        tools=tools.definitions(),
        tool_choice="auto",
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in raw]
    assert [c.choices[0].delta.role for c in chunks if c.choices] == [None, None]
    assert chunks[0].choices[0].finish_reason == "stop" and chunks[-1].usage is None
    cycle = make_cycle(
        litellm_proxy, litellm_client, tool_choice="auto", profile="openai", adapt=False
    )

    with pytest.raises(LlmError, match="stream was cut before anything arrived"):
        await cycle.submit_stream_with_tools(QUESTION, tools).collect()

    assert tools.runs == []
    assert cycle.messages == [{"role": "user", "content": QUESTION}]
    stop_forcing(cycle)
    await assert_answers(cycle, tools, stream=True)


async def test_a_streamed_prompt_over_the_context_is_the_servers_error_not_an_empty_answer(
    litellm_proxy, litellm_client
):
    # The llama server fails the stream after its 200 and the proxy closes it with a bare
    # finish_reason: the loop sends the request again unstreamed, and the proxy's 400
    # names the limit. It used to be an empty answer, silently.
    cycle = make_cycle(litellm_proxy, litellm_client)

    with pytest.raises(LlmError, match=r"ContextWindowExceededError.*maximum context length"):
        await cycle.submit_stream(OVER_THE_CONTEXT).collect()

    assert cycle.messages == [{"role": "user", "content": OVER_THE_CONTEXT}]


async def test_chat_drop_in_through_the_proxy(litellm_proxy, litellm_client, tools):
    messages: list[Any] = [{"role": "user", "content": "What's the weather in Paris?"}]
    options = {"model": litellm_proxy.model, "temperature": 0, "max_tokens": 48}
    force = {"type": "function", "function": {"name": "get_weather"}}
    completion = await litellm_client.chat.completions.create(
        messages=messages, tools=tools.definitions(), tool_choice=force, **options
    )
    message = completion.choices[0].message
    assert message.tool_calls
    messages.append({**message.to_dict(), "content": message.content or ""})
    messages += await tools.run_tool_calls(message.tool_calls)

    final = await litellm_client.chat.completions.create(
        messages=messages, tools=tools.definitions(), **{**options, "max_tokens": 16}
    )

    assert [name for name, _ in tools.runs] == ["get_weather"]
    assert isinstance(tools.runs[0][1]["city"], str)
    tool_messages = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [message.tool_calls[0].id]
    assert not tool_messages[0]["content"].startswith("Error")
    assert final.choices[0].message.content and not final.choices[0].message.tool_calls


async def test_responses_drop_in_through_the_bridge(litellm_proxy, litellm_client, tools):
    # The drop-in on Responses output, then the follow-up with the whole conversation
    # as input. The bridge turns the function_call item into an assistant message with
    # no "content", which the llama server refuses (as previous_response_id does too);
    # the empty assistant message before it is merged into that message as "content".
    question = {"role": "user", "content": "What's the weather in Paris?"}
    definitions = tools.definitions(api="responses")
    options = {"model": litellm_proxy.model, "temperature": 0, "tools": definitions}
    response = await litellm_client.responses.create(
        input=[question], tool_choice=FORCE_WEATHER, max_output_tokens=48, **options
    )
    calls = [item for item in response.output if item.type == "function_call"]
    assert [call.name for call in calls] == ["get_weather"]

    outputs = await tools.run_tool_calls(response.output)

    assert [name for name, _ in tools.runs] == ["get_weather"]
    assert isinstance(tools.runs[0][1]["city"], str)
    assert [(o["type"], o["call_id"]) for o in outputs] == [
        ("function_call_output", calls[0].call_id)
    ]
    assert not str(outputs[0]["output"]).startswith("Error")
    history = [question, {"role": "assistant", "content": ""}, calls[0].to_dict(), *outputs]
    final = await litellm_client.responses.create(input=history, max_output_tokens=16, **options)
    assert final.output_text
    assert [item.type for item in final.output] == ["message"]
    assert await tools.run_tool_calls(final.output) == []


async def test_streamed_responses_function_call_fails_in_the_bridge(
    litellm_proxy, litellm_client, tools
):
    # The same forced call streams whole over Chat Completions (test above, "sse").
    # Over Responses the bridge streams the call and its argument deltas, then fails in
    # LiteLLM's own chunk builder ("'dict' object has no attribute 'name'" in its log).
    stream = await litellm_client.responses.create(
        model=litellm_proxy.model,
        input=QUESTION,
        tools=tools.definitions(api="responses"),
        tool_choice={"type": "function", "name": "add"},
        temperature=0,
        max_output_tokens=48,
        stream=True,
    )
    events = [event async for event in stream]

    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert [e.item.name for e in events if e.type == "response.output_item.added"] == ["add"]
    assert set(json.loads(arguments)) == {"a", "b"}  # the grammar from the tool's schema
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.error.message == (
        "litellm.APIError: Error building chunks for logging/streaming usage calculation"
    )
    assert last.response.output == []
    assert not [e for e in events if e.type == "response.completed"]


RESPONSES_OPTIONS: dict[str, Any] = {"temperature": 0, "max_output_tokens": 48, "max_retries": 0}


def forced_responses_cycle(
    proxy: RealServer, client: Any, profile: str | None, *, chain_responses: bool = False
) -> LlmCycle:
    """A Responses loop whose first request forces get_weather, with ``profile`` (None:
    the one the loop picks)."""
    config = CycleConfig(
        proxy.model,
        api="responses",
        tool_choice=FORCE_WEATHER,
        max_turns=3,
        profile=profile,
        chain_responses=chain_responses,
        **RESPONSES_OPTIONS,
    )
    return LlmCycle(config, client=client)


@MODES
async def test_the_responses_loop_through_the_bridge(litellm_proxy, litellm_client, tools, stream):
    # CycleConfig(api="responses") end to end, with the profile the loop picks by itself
    # (LiteLLM's, from its model list): a forced call runs, then the follow-up sends the
    # whole input with {"role": "assistant", "content": ""} before the function_call
    # item, which the bridge merges into the call's message, and the model answers.
    # Streamed, the tool turn goes unstreamed (the bridge's response.failed) and the
    # answer streams.
    cycle = forced_responses_cycle(litellm_proxy, litellm_client, None)
    picked = await cycle.requester.server_profile()
    assert picked is not None and picked.name == "litellm"

    response = await submit(cycle, "What's the weather in Paris?", tools, stream)

    assert [name for name, _ in tools.runs] == ["get_weather"]
    assert isinstance(tools.runs[0][1]["city"], str)
    assert response.turns == 2  # an answer, cut or not at max_output_tokens
    assert response.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
    assert response.text and response.text == cycle.messages[-1]["content"]
    assert response.usage.requests == 2 and response.usage.prompt_tokens > 0
    assert_history_valid(cycle.messages)
    assert [m["role"] for m in cycle.messages] == ["user", "assistant", "tool", "assistant"]
    output = cycle.messages[1]["response"]["output"]
    assert [item["type"] for item in output] == ["function_call"], output  # history unfitted
    assert not cycle.messages[2]["content"].startswith("Error")
    assert "tool_calls" not in cycle.messages[3]

    plain = LlmCycle(
        CycleConfig(litellm_proxy.model, api="responses", **RESPONSES_OPTIONS),
        client=litellm_client,
    )
    answer = await plain.submit("Say hello.")
    assert answer.text and answer.usage.prompt_tokens > 0
    assert plain.messages[1]["response"]["output"][0]["type"] == "message"


async def test_a_required_tool_choice_on_the_responses_loop_through_the_bridge(
    litellm_proxy, litellm_client, tools
):
    # The bridge answers "required" with an empty 500 (and so does the server behind it,
    # which takes no "required"): LiteLLM's profile sends the one tool offered by name,
    # in the Responses shape, as it does on Chat Completions.
    config = CycleConfig(
        litellm_proxy.model, api="responses", tool_choice="required", **RESPONSES_OPTIONS
    )
    cycle = LlmCycle(config, client=litellm_client)

    response = await cycle.submit_with_tools(
        "What's the weather in Paris?", tools.view([tools.entry("get_weather")])
    )

    assert [name for name, _ in tools.runs] == ["get_weather"]
    assert response.turns == 2 and response.text
    assert [m["role"] for m in cycle.messages] == ["user", "assistant", "tool", "assistant"]


class Weather(BaseModel):
    city: str
    celsius: int


async def test_a_bare_output_type_on_the_responses_loop_through_the_bridge(
    litellm_proxy, litellm_client
):
    # The bridge passes a json_object format on without its schema: the model wrote free
    # JSON until max_output_tokens, every time. LiteLLM's profile asks for the output tool
    # on the Responses API, which a named tool_choice holds to the schema.
    config = CycleConfig(litellm_proxy.model, api="responses", **RESPONSES_OPTIONS)
    cycle = LlmCycle(config, client=litellm_client)

    response = await cycle.submit("Weather in Paris?", output_type=Weather)

    assert isinstance(response.output, Weather)
    assert [call["function"]["name"] for call in response.message["tool_calls"]] == ["final_result"]


@MODES
async def test_a_responses_conversation_goes_on_after_a_text_answer(
    litellm_proxy, litellm_client, stream
):
    # The second request sends back the first answer's output message item, whose
    # output_text parts the bridge forwards as list content: the llama server refused
    # it (a 500). LiteLLM's profile sends it as plain assistant text, in the same loop
    # and in a fresh one resuming the history.
    config = CycleConfig(
        litellm_proxy.model, api="responses", **{**RESPONSES_OPTIONS, "max_output_tokens": 16}
    )
    cycle = LlmCycle(config, client=litellm_client)

    async def ask(on: LlmCycle, prompt: str) -> Any:
        if stream:
            return await on.submit_stream(prompt).collect()
        return await on.submit(prompt)

    first = await ask(cycle, "Say hello.")
    second = await ask(cycle, "Now say goodbye.")
    resumed = LlmCycle(config, client=litellm_client)
    resumed.messages = json.loads(json.dumps(cycle.messages))
    third = await ask(resumed, "And once more.")

    assert first.text and second.text and third.text
    assert [m["role"] for m in resumed.messages] == ["user", "assistant"] * 3
    output = cycle.messages[1]["response"]["output"]
    assert output[0]["type"] == "message", output  # the history keeps the item unfitted
    assert_history_valid(resumed.messages)


@MODES
async def test_the_responses_loop_fails_in_the_bridge_without_its_profile(
    litellm_proxy, litellm_client, tools, stream
):
    # profile="openai" sends what OpenAI takes: the follow-up's function_call item alone,
    # which the bridge forwards as an assistant message without "content" (the llama
    # server's 500, as in the drop-in test above); streamed, the tool turn itself fails.
    cycle = forced_responses_cycle(litellm_proxy, litellm_client, "openai")
    error = "Error building chunks" if stream else "'dict object' has no attribute 'content'"

    with pytest.raises(LlmError, match=error):
        await submit(cycle, "What's the weather in Paris?", tools, stream)

    assert [name for name, _ in tools.runs] == ([] if stream else ["get_weather"])


async def test_a_chained_responses_loop_still_fails_in_the_bridge(
    litellm_proxy, litellm_client, tools
):
    # chain_responses sends previous_response_id and only the function_call_output: the
    # call comes back from the proxy's stored response, out of the client's reach, and
    # the bridge sends it without "content". The profile cannot merge there: leave
    # chain_responses off behind LiteLLM (docs/providers.md, the LiteLLM row).
    cycle = forced_responses_cycle(litellm_proxy, litellm_client, "litellm", chain_responses=True)

    with pytest.raises(LlmError, match="'dict object' has no attribute 'content'"):
        await cycle.submit_with_tools("What's the weather in Paris?", tools)

    assert [name for name, _ in tools.runs] == ["get_weather"]
