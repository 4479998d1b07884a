"""The loop, structured output and the docs' snippets against llama.cpp's own
``llama-server``, with the library's defaults only.

The server is built from the llama.cpp that the llama-cpp-python sdist vendors and runs
the same SmolLM2-135M with ``--jinja`` (``llamacpp_server`` in the conftest). Opt-in:
``make test-llama-server`` builds it once (21 CPU-minutes, which a fresh
``make test`` has no room for) and runs only these tests; without the binary they are
skipped. Nothing here names a profile: the loop must pick ``llama-server``'s from the
server's ``GET /v1/models`` answer, and that profile must be enough for each request.
The model is tiny, so the tests check structure (a tool was called, the run ended in
text, the output has the type asked for), never wording.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agcore_tools import (
    CycleConfig,
    FinishReason,
    LlmCycle,
    LlmError,
    MaxTurnsExceededError,
    ToolRegistry,
)
from agcore_tools.cycle import OpenAIRequester
from agcore_tools.cycle.profiles import LLAMA_SERVER, profile_for_models, profile_for_url
from tests._scripts import run_script
from tests.test_docs_snippets import RUNNABLE, Block

from ..cycle.conftest import assert_history_valid
from .conftest import RealServer, start_llamacpp_server, supervised
from .test_snippets_real import RESPONSES, TALKING

MODES = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
QUESTION = "What is 2 + 3?"
pytestmark = [pytest.mark.timeout(300), pytest.mark.llama_server]


class Weather(BaseModel):
    city: str
    celsius: int


def make_cycle(server: RealServer, client: Any, **options: Any) -> LlmCycle:
    options = {"temperature": 0, "seed": 0, "max_tokens": 64, **options}
    config = CycleConfig(server.model, **options)
    return LlmCycle(config, client=client)


def picked(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The profiles the loop said it picked, at INFO."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "agcore_tools.cycle" and "server profile" in record.getMessage()
    ]


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the loop said the server refused (a fallback it had to learn), at WARNING."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_the_model_list_tells_llama_server(llamacpp_server, llamacpp_client):
    raw = await llamacpp_client.models.with_raw_response.list()
    listing = raw.http_response.json()

    [entry] = listing["data"]
    assert entry["owned_by"] == "llamacpp", listing
    assert profile_for_url(llamacpp_server.base_url) is None  # a local port tells nothing
    assert profile_for_models(listing, raw.headers) is LLAMA_SERVER
    assert await OpenAIRequester(llamacpp_client).server_profile() is LLAMA_SERVER


# One exchange before the question: SmolLM2-135M never starts a <tool_call> on its own,
# and "required" lets it write text first (below), so it is shown the template's call
# format once, as text.
CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
EXAMPLE = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": CALL_TEXT},
]
# The same for api="responses", as a Responses run keeps it: the assistant message with
# its response's output items. This server refuses an assistant input item without
# "type": "message" (test_an_untyped_assistant_item_is_refused), which is what the loop
# sends for an assistant message that has no response kept.
OUTPUT_TEXT = {"type": "output_text", "text": CALL_TEXT, "annotations": []}
RESPONSES_EXAMPLE = [
    EXAMPLE[0],
    {
        **EXAMPLE[1],
        "response": {
            "output": [{"type": "message", "role": "assistant", "content": [OUTPUT_TEXT]}]
        },
    },
]


@MODES
async def test_a_forced_first_call_then_an_answer(
    llamacpp_server, llamacpp_client, tools, stream, caplog
):
    # "required" (this server takes it; a named tool_choice it would read as "auto")
    # serves the first request only; the model then sees the tool's result (the
    # template carries it) and answers in text.
    caplog.set_level(logging.INFO, logger="agcore_tools.cycle")
    cycle = make_cycle(llamacpp_server, llamacpp_client, tool_choice="required", max_turns=4)
    cycle.messages.extend(EXAMPLE)

    if stream:
        response = await cycle.submit_stream_with_tools("And in Rome?", tools).collect()
    else:
        response = await cycle.submit_with_tools("And in Rome?", tools)

    assert picked(caplog) == ["LlmCycle: server profile 'llama-server' (from the server)"]
    assert response.invocations, cycle.messages[len(EXAMPLE) :]
    assert {i.tool_name for i in response.invocations} <= set(tools.list_tools())
    assert len(tools.runs) == len(response.invocations)  # type: ignore[attr-defined]
    assert response.message["role"] == "assistant" and not response.message.get("tool_calls")
    assert response.text.strip()
    assert response.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
    assert_history_valid(cycle.messages)
    assert not refusals(caplog)


@MODES
async def test_the_responses_loop_with_the_defaults(
    llamacpp_server, llamacpp_client, tools, stream, caplog
):
    # This llama-server has /v1/responses (a conversion to its chat request): the same
    # loop on CycleConfig(api="responses"), the example sent as input items.
    caplog.set_level(logging.INFO, logger="agcore_tools.cycle")
    config = CycleConfig(
        llamacpp_server.model,
        api="responses",
        tool_choice="required",
        max_turns=4,
        temperature=0,
        max_output_tokens=64,
    )
    cycle = LlmCycle(config, client=llamacpp_client)
    cycle.messages.extend(RESPONSES_EXAMPLE)

    if stream:
        response = await cycle.submit_stream_with_tools("And in Rome?", tools).collect()
    else:
        response = await cycle.submit_with_tools("And in Rome?", tools)

    assert picked(caplog) == ["LlmCycle: server profile 'llama-server' (from the server)"]
    assert response.invocations, cycle.messages[len(EXAMPLE) :]
    assert len(tools.runs) == len(response.invocations)  # type: ignore[attr-defined]
    assert response.message["role"] == "assistant" and not response.message.get("tool_calls")
    assert response.text.strip()
    assert response.usage.prompt_tokens > 0
    assert_history_valid(cycle.messages)
    assert not refusals(caplog)


async def test_chained_responses_are_refused(llamacpp_server, llamacpp_client, tools):
    # Stateless: a follow-up naming previous_response_id is a 400, so chain_responses
    # cannot work here (the profile's comment says to leave it off).
    config = CycleConfig(
        llamacpp_server.model,
        api="responses",
        chain_responses=True,
        tool_choice="required",
        max_turns=4,
        temperature=0,
        max_output_tokens=64,
    )
    cycle = LlmCycle(config, client=llamacpp_client)
    cycle.messages.extend(RESPONSES_EXAMPLE)

    with pytest.raises(LlmError, match="previous_response_id"):
        await cycle.submit_with_tools("And in Rome?", tools)

    assert tools.runs  # type: ignore[attr-defined]  # the first request's call ran


async def test_an_untyped_assistant_item_is_refused(llamacpp_server, llamacpp_client):
    # OpenAI takes {"role": "assistant", "content": "..."} as an input message (its
    # "type" is optional); this server's conversion (server-chat.cpp) needs "type":
    # "message" on an assistant item, else a 400. The loop sends the untyped form for an
    # assistant message without a kept response (a history from api="chat").
    config = CycleConfig(llamacpp_server.model, api="responses", max_output_tokens=8)
    cycle = LlmCycle(config, client=llamacpp_client)
    cycle.messages.extend(EXAMPLE)

    with pytest.raises(LlmError, match="Cannot determine type of 'item'"):
        await cycle.submit("And in Rome?")

    typed = LlmCycle(config, client=llamacpp_client)
    typed.messages.extend(RESPONSES_EXAMPLE)
    assert (await typed.submit("And in Rome?")).usage.prompt_tokens > 0


async def test_a_named_tool_choice_is_read_as_auto(llamacpp_server, llamacpp_client, tools):
    # The profile's tool_choice_named=False: an object is the wrong type for the field,
    # which the server logs and replaces with "auto". Sent raw, past the profile.
    named = {"type": "function", "function": {"name": "add"}}
    completion = await llamacpp_client.chat.completions.create(
        model=llamacpp_server.model,
        messages=[{"role": "user", "content": QUESTION}],
        tools=tools.definitions(),
        tool_choice=named,
        max_tokens=16,
        temperature=0,
    )

    assert completion.choices[0].message.tool_calls is None  # not forced: it answered
    log = "".join(llamacpp_server.output)
    assert "Wrong type supplied for parameter 'tool_choice'" in log


async def test_required_lets_the_model_write_text_before_the_call(
    llamacpp_server, llamacpp_client, tools
):
    # The quirk behind EXAMPLE: "required"'s grammar is any text without "<tool_call>",
    # then one or more calls (common/chat-auto-parser-generator.cpp), so a model that
    # does not start a call at once writes until max_tokens, and no call comes back.
    completion = await llamacpp_client.chat.completions.create(
        model=llamacpp_server.model,
        messages=[{"role": "user", "content": QUESTION}],
        tools=tools.definitions(),
        tool_choice="required",
        max_tokens=32,
        temperature=0,
    )

    [choice] = completion.choices
    assert choice.finish_reason == "length"
    assert choice.message.content and not choice.message.tool_calls


async def test_a_call_cut_at_max_tokens_comes_back_unfinished(
    llamacpp_server, llamacpp_client, tools
):
    # Cut inside a call's arguments, the server still sends the call, its arguments
    # unfinished JSON, with finish_reason "length". The loop gives the model an
    # InvalidArgumentsError result, as for any arguments that are not JSON; the tool
    # never runs (a snippet that read such a call's output unchecked failed here).
    messages = [*EXAMPLE, {"role": "user", "content": "And in Rome?"}]
    completion = await llamacpp_client.chat.completions.create(
        model=llamacpp_server.model,
        messages=messages,
        tools=tools.definitions(),
        tool_choice="required",
        max_tokens=20,
        temperature=0,
    )

    [choice] = completion.choices
    assert choice.finish_reason == "length"
    [call] = choice.message.tool_calls or []
    with pytest.raises(json.JSONDecodeError):
        json.loads(call.function.arguments)

    cycle = make_cycle(
        llamacpp_server, llamacpp_client, tool_choice="required", max_tokens=20, max_turns=1
    )
    cycle.messages.extend(EXAMPLE)
    with pytest.raises(MaxTurnsExceededError):
        await cycle.submit_with_tools("And in Rome?", tools)
    [result] = [m for m in cycle.messages if m["role"] == "tool"]
    assert "Error" in result["content"], result
    assert tools.runs == []  # type: ignore[attr-defined]


async def test_with_the_models_own_template_tools_are_ignored(tools):
    # SmolLM2's template renders no tools: the server leaves them out of the prompt
    # (the same prompt tokens as without them) and "required" is not enforced. No error.
    from openai import AsyncOpenAI

    with supervised(start_llamacpp_server(tool_template=False)) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="-", timeout=60.0, max_retries=0)
        try:
            options: dict[str, Any] = {
                "model": server.model,
                "messages": [{"role": "user", "content": QUESTION}],
                "max_tokens": 8,
                "temperature": 0,
            }
            plain = await client.chat.completions.create(**options)
            forced = await client.chat.completions.create(
                **options, tools=tools.definitions(), tool_choice="required"
            )
        finally:
            await client.close()

    assert not forced.choices[0].message.tool_calls
    assert forced.usage and plain.usage
    assert forced.usage.prompt_tokens == plain.usage.prompt_tokens


@MODES
async def test_structured_output_with_the_defaults(
    llamacpp_server, llamacpp_client, stream, caplog
):
    # The profile keeps OpenAI's native json_schema: the server makes a grammar of it.
    caplog.set_level(logging.INFO, logger="agcore_tools.cycle")
    cycle = make_cycle(llamacpp_server, llamacpp_client)

    if stream:
        events = cycle.submit_stream_with_tools(
            "Weather in Paris?", ToolRegistry(), output_type=Weather
        )
        response = await events.collect()
    else:
        response = await cycle.submit("Weather in Paris?", output_type=Weather)

    assert isinstance(response.output, Weather)
    assert Weather.model_validate_json(response.text) == response.output
    assert response.turns == 1
    assert not refusals(caplog)  # json_schema was taken as sent, not learned away


# The Responses API's snippets too: this llama-server has /v1/responses.
SNIPPETS = TALKING + [block for block in RUNNABLE if block.name in RESPONSES]


@pytest.mark.parametrize("block", SNIPPETS, ids=lambda block: block.id)
def test_snippet_runs_against_llama_server(
    block: Block, llamacpp_server: RealServer, tmp_path: Path
) -> None:
    # As tests/real/test_snippets_real.py runs them against llama-cpp-python's server:
    # unchanged, OPENAI_BASE_URL set and nothing else, each must exit 0.
    script = tmp_path / f"snippet_{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    env = {"OPENAI_BASE_URL": llamacpp_server.base_url, "OPENAI_API_KEY": "sk-local"}

    result = run_script(script, env=env, timeout=240)

    where = f"{block.document}, block at line {block.line}"
    assert result.returncode == 0, (
        f"{where} failed against {llamacpp_server.name}:\n{result.stderr}"
    )
