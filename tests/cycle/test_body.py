"""cycle/_body.py: the history and tools sent past the SDK's transform, the same bytes.

Every comparison sends the same parameters twice through the real SDK to a real
loopback server: once as given (the SDK transforms the whole body), once as the wire
hands them over (plain-JSON lists in ``extra_body``), and compares the raw bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from openai import NOT_GIVEN, AsyncOpenAI, omit
from openai.types.chat import ChatCompletionMessage

from agcore_tools import CycleConfig
from agcore_tools.cycle._body import is_plain_json, lighten, without_unused_tool_options
from agcore_tools.cycle._wire import close_stream, open_stream
from agcore_tools.cycle._wire_chat import ChatWire
from agcore_tools.cycle._wire_responses import ResponsesWire
from agcore_tools.testing import CapturedRequest, ScriptedChatServer

S = ScriptedChatServer

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "Réponds en français, s'il te plaît. 日本語も"},
    {"role": "user", "content": 'Combien font 2 + 3 ? \u2603 \U0001f600 "quoted" \\ back'},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3, "note": "é"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "5"},
    {"role": "assistant", "content": "Cinq. Ünïcödé, 1.5e-7, -0"},
]
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Additionne deux nombres — exactement.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "number", "default": 1.5}},
                "required": ["a"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
]
OPTIONS: dict[str, Any] = {
    "temperature": 0.25,
    "top_p": omit,
    "seed": NOT_GIVEN,
    "metadata": {"clé": "valeur"},
    "tool_choice": "auto",
    "extra_headers": {"X-Trace": "abc"},
    "extra_query": {"q": "1"},
    "extra_body": {"top_k": 5, "zzz": ["é"], "temperature": 0.5},
    "timeout": 7.0,
}


def chat_params(stream: bool, **more: Any) -> dict[str, Any]:
    params = {"model": "m", "messages": HISTORY, "tools": TOOLS, **OPTIONS, **more}
    if stream:
        params.update(stream=True, stream_options={"include_usage": True})
    return params


def responses_params(stream: bool) -> dict[str, Any]:
    # What ResponsesWire.request hands over, minus the lightening, built from the same
    # Chat-shaped parameters the loop makes.
    wire = ResponsesWire(chain=False)
    params = chat_params(stream)
    for chat_only in ("stream_options", "seed"):
        params.pop(chat_only, None)
    sent = wire.request(_Resources(), params)[1]
    return _restored(sent, params["extra_body"])


class _Resources:
    """Stands in for the client in ``wire.request`` (which only picks a resource)."""

    chat = type("chat", (), {"completions": "chat.completions"})()
    responses = "responses"


def _restored(sent: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The parameters before :func:`lighten`: the moved lists back in their keys."""
    moved = {k: v for k, v in sent["extra_body"].items() if k in sent and sent[k] == []}
    return {**sent, **moved, "extra_body": extra}


async def _send(client: AsyncOpenAI, api: str, params: dict[str, Any]) -> None:
    resource = client.chat.completions if api == "chat" else client.responses
    if params.get("stream"):
        response, _ = await open_stream(resource, params)
        await close_stream(response)
    else:
        await resource.create(**params)


async def _both(
    serve: Callable[..., ScriptedChatServer], api: str, params: dict[str, Any], keys: list[str]
) -> tuple[CapturedRequest, CapturedRequest]:
    server = serve(S.reply_text("ok"), repeat=True)
    async with server.client(timeout=10.0) as client:
        await _send(client, api, params)
        await _send(client, api, lighten(params, keys))
    return server.requests[0], server.requests[1]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_chat_body_is_byte_for_byte_the_sdks(
    serve: Callable[..., ScriptedChatServer], stream: bool
) -> None:
    params = chat_params(stream)
    assert lighten(params, ["messages", "tools"])["messages"] == []  # the fast path
    sdk, ours = await _both(serve, "chat", params, ["messages", "tools"])
    assert ours.body == sdk.body
    assert "日本語".encode() in ours.body  # UTF-8, not \u escapes, as the SDK sends
    # The caller's extra_body still wins over a parameter, and is appended after.
    assert (ours.json["temperature"], ours.json["top_k"]) == (0.5, 5)
    assert (ours.path, ours.headers["x-trace"]) == (sdk.path, "abc")
    assert "q=1" in ours.path
    assert ours.headers["x-stainless-read-timeout"] == "7.0"  # the per-request timeout
    assert ours.headers == sdk.headers


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_responses_body_is_byte_for_byte_the_sdks(
    serve: Callable[..., ScriptedChatServer], stream: bool
) -> None:
    params = responses_params(stream)
    assert lighten(params, ["input", "tools"])["input"] == []
    sdk, ours = await _both(serve, "responses", params, ["input", "tools"])
    assert ours.body == sdk.body
    assert ours.path == sdk.path and ours.path.startswith("/v1/responses")
    assert ours.json["input"][0]["content"] == HISTORY[0]["content"]


async def test_what_is_not_plain_json_is_left_to_the_sdks_transform(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    # A response's message model, and a message with an omitted key: the SDK dumps
    # the one and drops the other; the wire must not send them as they are.
    message = ChatCompletionMessage(role="assistant", content="Bonjour é")
    history = [*HISTORY, message, {"role": "user", "content": "encore", "name": omit}]
    params = chat_params(False, messages=history)
    assert not is_plain_json(history)
    assert lighten(params, ["messages", "tools"])["messages"] is history
    sdk, ours = await _both(serve, "chat", params, ["messages", "tools"])
    assert ours.body == sdk.body
    assert ours.json["messages"][-1] == {"role": "user", "content": "encore"}


async def test_without_extra_body_the_moved_lists_make_the_whole_extra_body(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    params = {"model": "m", "messages": HISTORY}
    sent = lighten(params, ["messages", "tools"])
    assert sent == {"model": "m", "messages": [], "extra_body": {"messages": HISTORY}}
    assert params == {"model": "m", "messages": HISTORY}  # not changed in place
    sdk, ours = await _both(serve, "chat", params, ["messages", "tools"])
    assert ours.body == sdk.body


def test_an_extra_body_that_is_not_a_mapping_is_left_for_the_sdk_to_refuse() -> None:
    params = {"model": "m", "messages": HISTORY, "extra_body": "nope"}
    assert lighten(params, ["messages"]) is params


def test_plain_json_is_exact_types_and_survives_deep_nesting() -> None:
    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]
    assert is_plain_json(deep)
    assert is_plain_json({"a": [1, 2.5, True, None, "s", {"b": []}]})
    assert not is_plain_json({1: "int key"})
    assert not is_plain_json([("tuple",)])
    assert not is_plain_json([{"n": NOT_GIVEN}])


async def test_the_loops_requests_are_the_bytes_the_sdk_sends_for_their_json(
    serve: Callable[..., ScriptedChatServer], make_cycle: Callable[..., Any], calc: Any
) -> None:
    server = serve(S.reply_tool_calls([("add", {"a": 2, "b": 3})]), S.reply_text("Cinq é."))
    cycle = make_cycle(server, system_prompt="Sois bref — très.", temperature=0.5)
    await cycle.submit_with_tools("2 + 3 ? ☃", calc)
    again = serve(S.reply_text("ok"), repeat=True)
    async with again.client(timeout=10.0) as client:
        for request in server.requests:
            await client.chat.completions.create(**request.json)
    assert [r.body for r in server.requests] == [r.body for r in again.requests]
    assert len(server.requests[1].json["messages"]) == 4


# -- the wires ----------------------------------------------------------------------------


def test_the_chat_wire_sends_the_loops_history_past_the_transform() -> None:
    wire = ChatWire()
    params = wire.params(CycleConfig("m"), HISTORY, TOOLS, stream=True)
    resource, sent = wire.request(_Resources(), params)
    assert resource == "chat.completions"
    assert (sent["messages"], sent["tools"]) == ([], [])
    assert sent["extra_body"] == {"messages": HISTORY, "tools": TOOLS}


def test_the_responses_wire_sends_the_input_past_the_transform() -> None:
    wire = ResponsesWire(chain=False)
    params = wire.params(CycleConfig("m", api="responses"), HISTORY, TOOLS, stream=False)
    resource, sent = wire.request(_Resources(), params)
    assert resource == "responses"
    assert (sent["input"], sent["tools"]) == ([], [])
    assert [item.get("type") for item in sent["extra_body"]["input"]][2:4] == [
        "function_call",
        "function_call_output",
    ]


def test_tool_options_go_only_with_tools() -> None:
    params = {"model": "m", "tool_choice": "required", "parallel_tool_calls": False}
    options = ("tool_choice", "parallel_tool_calls")
    assert without_unused_tool_options(params, options) == {"model": "m"}
    assert without_unused_tool_options({**params, "tools": omit}, options) == {
        "model": "m",
        "tools": omit,
    }
    with_tools = {**params, "tools": TOOLS}
    assert without_unused_tool_options(with_tools, options) is with_tools


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_an_azure_client_still_routes_to_its_deployment(
    serve: Callable[..., ScriptedChatServer], stream: bool
) -> None:
    from openai import AsyncAzureOpenAI

    from agcore_tools import LlmCycle

    server = serve(S.reply_text("ok"))
    client = AsyncAzureOpenAI(
        api_key="k", api_version="2024-06-01", azure_endpoint=server.base_url.removesuffix("/v1")
    )
    async with client:
        cycle = LlmCycle(CycleConfig("my-deployment"), client=client)
        if stream:
            await cycle.submit_stream("héllo").collect()
        else:
            await cycle.submit("héllo")
    [request] = server.requests
    # The SDK's Azure routing reads the model from the body it builds: still there.
    assert request.path.startswith("/openai/deployments/my-deployment/chat/completions")
    assert request.headers["api-key"] == "k"
    assert request.json["messages"] == [{"role": "user", "content": "héllo"}]


async def test_a_lone_surrogate_in_a_key_is_sent_replaced_and_clean_messages_are_not_copied(
    serve: Callable[..., ScriptedChatServer],
) -> None:
    # A property name decoded from a JSON escape (an MCP tool's inputSchema, "\udcff")
    # was not looked at: the request failed to encode, before anything was sent.
    clean = {"role": "user", "content": "Bonjour é"}
    odd = {"role": "user", "content": "hi", "x\udcff": 1}
    tool = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"caf\udcff": {"type": "string"}}},
        },
    }
    params = {"model": "m", "messages": [clean, odd], "tools": [tool]}
    sent = lighten(params, ["messages", "tools"])
    assert sent["extra_body"]["messages"][0] is clean
    assert sent["extra_body"]["messages"][1] == {"role": "user", "content": "hi", "x\ufffd": 1}
    server = serve(S.reply_text("ok"))
    async with server.client(timeout=10.0) as client:
        await _send(client, "chat", sent)
    [request] = server.requests
    assert "caf\ufffd" in request.json["tools"][0]["function"]["parameters"]["properties"]
    assert params["messages"][1] is odd and "x\udcff" in odd  # the caller's, unchanged
