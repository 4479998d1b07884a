"""The loop and the drop-in against llama-cpp-python's OpenAI-compatible server.

A real model (SmolLM2-135M) makes real tool calls through ``chatml-function-calling``.
With a model this small the tests check structure, not wisdom: which tool was called,
with arguments its schema accepts, and that the server accepts every history the loop
builds. What this server does differently (docs/providers.md):

- it answers 500 to an assistant message whose ``content`` is null or missing;
- its chat template leaves tool results out of the prompt, so with ``tool_choice="auto"``
  the model calls a tool again on every turn, and its ``auto`` text answers are empty;
- without ``tool_choice`` it ignores ``tools`` and answers in text;
- a streamed ``tool_choice="auto"`` request fails inside its 200 response.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from agcore_tools import (
    Audio,
    ChatResponse,
    CycleConfig,
    File,
    FinishReason,
    Image,
    LlmCycle,
    LlmError,
    MaxTurnsExceededError,
    ToolRegistry,
)

from ..cycle.conftest import assert_history_valid
from .conftest import RealServer

QUESTION = "What is 2 + 3?"
OVER_THE_CONTEXT = "Summarize this: " + "lorem ipsum dolor sit amet " * 300  # 3000 tokens
FORCE_ADD = {"type": "function", "function": {"name": "add"}}
FORCE_REPORT = {"type": "function", "function": {"name": "report"}}
GIF = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(16)
MODES = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
# A real model on a shared 2-core machine: allow more than the suite's 120 s per test.
pytestmark = pytest.mark.timeout(300)


def make_cycle(server: RealServer, client: Any, **options: Any) -> LlmCycle:
    config = CycleConfig(server.model, temperature=0, seed=0, max_tokens=48, **options)
    # No system prompt: this server's template writes the tools into it, which makes
    # every prompt ten times longer (about 5 s of CPU each); the grammar still
    # constrains the model to the tools.
    return LlmCycle(config, client=client)


async def submit(cycle: LlmCycle, prompt: str, tools: ToolRegistry, stream: bool) -> ChatResponse:
    if stream:
        return await cycle.submit_stream_with_tools(prompt, tools).collect()
    return await cycle.submit_with_tools(prompt, tools)


def stop_forcing(cycle: LlmCycle) -> None:
    """Drop ``tool_choice``: this server then answers in text (a short one, for speed)."""
    options = {k: v for k, v in cycle.config.request_options.items() if k != "tool_choice"}
    options["max_tokens"] = 16
    cycle.config = dataclasses.replace(cycle.config, max_turns=2, request_options=options)


def assert_tool_turns(messages: list[dict[str, Any]], tools: ToolRegistry) -> None:
    """Every assistant turn is well formed and each of its calls ran without error."""
    assert_history_valid(messages)
    calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert calls, messages
    assert all(m["content"] == "" for m in messages if m["role"] == "assistant")
    assert {c["function"]["name"] for c in calls} <= set(tools.list_tools())
    results = [m["content"] for m in messages if m["role"] == "tool"]
    assert not [r for r in results if r.startswith("Error")], results
    # The registry validated each call's arguments against its schema before running it.
    assert len(tools.runs) == len(calls)  # type: ignore[attr-defined]


async def assert_answers(cycle: LlmCycle, tools: ToolRegistry, stream: bool) -> None:
    """The server accepts the whole history and the model answers in text."""
    runs = len(tools.runs)  # type: ignore[attr-defined]
    response = await submit(cycle, "Thanks. Now say the answer.", tools, stream)
    assert response.stop_reason in (FinishReason.STOP, FinishReason.LENGTH)
    assert response.text.strip()
    assert len(tools.runs) == runs  # type: ignore[attr-defined]
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize(
    ("content", "accepted"),
    [("null", False), ("missing", False), ("empty", True)],
)
async def test_the_server_takes_only_string_content_next_to_tool_calls(
    llama_server, llama_client, content, accepted
):
    from openai import InternalServerError

    assistant: dict[str, Any] = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
        ],
    }  # fmt: skip
    if content != "missing":
        assistant["content"] = None if content == "null" else ""
    messages = [{"role": "user", "content": QUESTION}, assistant]
    messages.append({"role": "tool", "tool_call_id": "c1", "content": "5"})

    async def send() -> Any:
        return await llama_client.chat.completions.create(
            model=llama_server.model, messages=messages, max_tokens=1
        )

    if accepted:
        assert (await send()).choices[0].finish_reason in ("stop", "length")
    else:
        with pytest.raises(InternalServerError):
            await send()


@MODES
async def test_forced_tool_choice_then_an_answer(llama_server, llama_client, tools, stream):
    # One forced turn, then a request without tool_choice for the answer: with "auto"
    # this server never answers, as it cannot see tool results.
    cycle = make_cycle(
        llama_server, llama_client, max_turns=1, tool_choice=FORCE_ADD, profile="openai"
    )

    with pytest.raises(MaxTurnsExceededError):
        await submit(cycle, QUESTION, tools, stream)

    assert [name for name, _ in tools.runs] == ["add"]
    assert_tool_turns(cycle.messages, tools)
    stop_forcing(cycle)
    await assert_answers(cycle, tools, stream)


async def test_auto_tool_choice_loop_is_accepted_on_every_turn(llama_server, llama_client, tools):
    # The second request used to fail: 500 "Input should be a valid string" for the
    # assistant message's content. The model calls again each turn (see the module doc).
    # The server's own behaviour, so OpenAI's profile: its own would answer (below).
    cycle = make_cycle(
        llama_server, llama_client, max_turns=2, tool_choice="auto", profile="openai"
    )

    with pytest.raises(MaxTurnsExceededError):
        await cycle.submit_with_tools(QUESTION, tools)

    assert [m["role"] for m in cycle.messages].count("assistant") == 2
    assert_tool_turns(cycle.messages, tools)
    stop_forcing(cycle)
    await assert_answers(cycle, tools, stream=False)


async def test_streamed_auto_tool_choice_is_a_cut_stream(llama_server, llama_client, tools):
    # The server raises "Automatic streaming tool choice is not supported" after its
    # 200 and ends the stream; that used to come back as an empty answer.
    cycle = make_cycle(
        llama_server, llama_client, tool_choice="auto", profile="openai", adapt=False
    )

    with pytest.raises(LlmError, match=r'stream was cut before anything arrived.*"auto"'):
        await cycle.submit_stream_with_tools(QUESTION, tools).collect()

    assert cycle.messages == [{"role": "user", "content": QUESTION}]
    assert tools.runs == []
    stop_forcing(cycle)
    await assert_answers(cycle, tools, stream=True)


async def test_a_streamed_prompt_over_the_context_shows_the_servers_reason(
    llama_server, llama_client
):
    # The server fails after its 200 and ends the stream empty, its reason only in its
    # own log: the error blamed a streamed "auto" tool choice, never sent. The loop sends
    # the request again unstreamed, and the server's 400 names the limit.
    cycle = make_cycle(llama_server, llama_client)

    with pytest.raises(LlmError, match="maximum context length is 2048 tokens") as caught:
        await cycle.submit_stream(OVER_THE_CONTEXT).collect()

    assert "tool_choice" not in str(caught.value)
    assert cycle.messages == [{"role": "user", "content": OVER_THE_CONTEXT}]


@MODES
@pytest.mark.parametrize("choice", [FORCE_ADD, "auto"], ids=["forced", "auto"])
async def test_with_its_profile_the_default_loop_calls_once_then_answers(
    llama_server, llama_client, tools, stream, choice
):
    # No profile given: the model list tells this server. Its profile keeps the first
    # request's tool_choice (a streamed "auto" one goes unstreamed), then sends none,
    # so the model answers instead of calling again every turn.
    cycle = make_cycle(llama_server, llama_client, max_turns=3, tool_choice=choice)

    response = await submit(cycle, QUESTION, tools, stream)

    assert response.turns == 2
    assert [name for name, _ in tools.runs] == ["add"]
    assert [i.tool_name for i in response.invocations] == ["add"]
    assert response.message["role"] == "assistant" and not response.message.get("tool_calls")
    assert_history_valid(cycle.messages)


async def test_a_file_or_sound_a_tool_returns_is_left_out_and_the_conversation_goes_on(
    llama_server, llama_client
):
    # The server takes text and image_url parts only: a file or input_audio part is a 500,
    # and it stays in the history. Its profile leaves them out, labelled, and sends the image.
    registry = ToolRegistry()

    @registry.tool
    def report() -> list[Any]:
        """The monthly report."""
        return [Image(GIF), File(b"%PDF-1.4\n" + bytes(20)), Audio(WAV)]

    cycle = make_cycle(llama_server, llama_client, max_turns=3, tool_choice=FORCE_REPORT)

    response = await cycle.submit_with_tools("Summarise the report", registry)
    sent = list(cycle.messages)
    again = await cycle.submit_with_tools("Say hello.", registry)  # the history goes again

    assert [i.tool_name for i in response.invocations] == ["report"]
    tool_text = next(m["content"] for m in sent if m["role"] == "tool")
    assert "the llama-cpp-python server takes no file in messages" in tool_text
    assert "the llama-cpp-python server takes no audio in messages" in tool_text
    attached = [m for m in sent if m["role"] == "user" and isinstance(m["content"], list)]
    assert [[p["type"] for p in m["content"]] for m in attached] == [["text", "text", "image_url"]]
    assert again.turns == 2 and again.message["role"] == "assistant"
    assert_history_valid(cycle.messages)


async def test_drop_in_with_the_real_client(llama_server, llama_client, tools):
    # The drop-in guide's loop (docs/guides/drop-in.md), with the first request forcing a tool call.
    messages: list[Any] = [{"role": "user", "content": "What's the weather in Paris?"}]
    options = {"model": llama_server.model, "temperature": 0, "max_tokens": 48}
    force = {"type": "function", "function": {"name": "get_weather"}}
    completion = await llama_client.chat.completions.create(
        messages=messages, tools=tools.definitions(), tool_choice=force, **options
    )
    message = completion.choices[0].message
    assert message.tool_calls and message.content is None  # null from the server ...
    messages.append({**message.to_dict(), "content": message.content or ""})  # ... "" back
    messages += await tools.run_tool_calls(message.tool_calls)

    final = await llama_client.chat.completions.create(
        messages=messages, tools=tools.definitions(), **{**options, "max_tokens": 16}
    )

    assert [name for name, _ in tools.runs] == ["get_weather"]
    assert isinstance(tools.runs[0][1]["city"], str)
    assert not [m for m in messages if m["role"] == "tool" and m["content"].startswith("Error")]
    assert final.choices[0].message.content and not final.choices[0].message.tool_calls


async def test_a_fixed_code_mode_program_over_the_real_wire(llama_server, llama_client, tools):
    # Issue 27: a 135M model cannot write programs, so the program is fixed by the
    # grammar: a schema transform turns run_python's `code` into a one-value enum, and
    # the forced call can only carry that text. The rest is real: the request, the
    # server's tool call, the sandbox, the registry, and the history sent back.
    pytest.importorskip("pydantic_monty")
    from agcore_tools import CodeMode

    # One line, no double quote: llama-cpp-python 0.3.36 writes an enum string with a
    # newline into the grammar unescaped (the call's JSON then holds a raw newline),
    # and one with a double quote into a grammar it cannot parse (its server dies).
    program = (
        "import asyncio; x, y = await asyncio.gather(add(2, 3), add(a=4, b=5)); "
        "print('sum', x + y); x * y"
    )

    def fixed_program(schema: dict[str, Any], ctx: Any) -> dict[str, Any]:
        if ctx.tool_name == "run_python":
            schema["properties"]["code"] = {"type": "string", "enum": [program]}
        return schema

    registry = ToolRegistry(schema_transforms=[fixed_program])
    registry.runs = tools.runs  # type: ignore[attr-defined]
    registry.register_all([tools.get("add"), tools.get("get_weather")])
    force = {"type": "function", "function": {"name": "run_python"}}
    cycle = LlmCycle(
        CycleConfig(llama_server.model, temperature=0, max_tokens=96, max_turns=1,
                    tool_choice=force, profile="openai"),
        client=llama_client,
    )  # fmt: skip

    with pytest.raises(MaxTurnsExceededError):
        await cycle.submit_with_tools(QUESTION, registry, select=CodeMode())

    [call] = cycle.messages[-2]["tool_calls"]
    assert call["function"]["name"] == "run_python"
    assert json.loads(call["function"]["arguments"]) == {"code": program}
    assert cycle.messages[-1]["content"] == "sum 14\nresult: 45"
    assert sorted(tools.runs, key=str) == [("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 5})]
    stop_forcing(cycle)
    await assert_answers(cycle, registry, False)
