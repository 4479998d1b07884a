"""Hostile or broken model output never crashes the loop nor poisons the history.

Every test talks real HTTP to a ScriptedChatServer. The property test feeds arbitrary
argument strings, model text and tool results through the loop, and checks that the run
ends with a ChatResponse or a documented error, and that the history still encodes as
UTF-8 JSON (so the conversation can go on).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from agcore_tools import (
    BaseTool,
    ChatResponse,
    CycleConfig,
    File,
    Image,
    InvalidArgumentsError,
    LlmCycle,
    LlmError,
    StructuredOutput,
    ToolContext,
    ToolRegistry,
    tool,
)
from agcore_tools.testing import CapturedRequest, RawResponse, RawStream, Reply, ScriptedChatServer

from .conftest import S, assert_history_valid, tool_messages

DEEP = 100_000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def assert_encodes(messages: list[dict[str, Any]]) -> None:
    """The history serialises to JSON and that JSON encodes as UTF-8, as a request must."""
    json.dumps(messages, ensure_ascii=False).encode("utf-8")


class Returns(BaseTool):
    """A tool that returns whatever it is told to, bypassing @tool's JSON conversion."""

    name = "returns"
    description = "Return the prepared value."

    def __init__(self) -> None:
        self.value: Any = None

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return self.value


def hostile_registry() -> tuple[ToolRegistry, Returns]:
    registry = ToolRegistry()

    @tool(registry=registry)
    def echo(value: Any = None) -> Any:
        """Return the value it is given."""
        return value

    returns = Returns()
    registry.register(returns)
    return registry, returns


# -- deep nesting -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_arguments_nested_100000_deep_go_back_to_the_model(serve, make_cycle, stream):
    registry, _ = hostile_registry()
    server = serve(
        S.reply_tool_calls([("echo", '{"value": ' + nested(DEEP) + "}", "deep")]),
        S.reply_text("I will send flatter arguments"),
        chunk_chars=4096,
    )
    cycle = make_cycle(server)

    if stream:
        response = await cycle.submit_stream_with_tools("Go", registry).collect()
    else:
        response = await cycle.submit_with_tools("Go", registry)

    assert response.text == "I will send flatter arguments"
    [invocation] = response.invocations
    assert isinstance(invocation.error, InvalidArgumentsError)
    assert isinstance(invocation.error.__cause__, RecursionError)
    assert tool_messages(cycle.messages)["deep"] == (
        "Error: tool 'echo' got invalid arguments: arguments nest too deeply to parse; "
        "send a flatter JSON object"
    )
    assert_history_valid(cycle.messages)
    assert_encodes(cycle.messages)


async def test_deep_arguments_to_a_strict_field_go_back_to_the_model_as_its_mistake(
    serve, make_cycle
):
    # 600 deep parses, but a strict field's second reading, as JSON, walked the
    # arguments by recursion: the model read a RecursionError as the tool's failure.
    registry = ToolRegistry()

    @registry.tool
    def keep(items: list[Any], copies: int = Field(1, strict=True)) -> str:
        """Keep some items."""
        return f"kept {copies}"

    sent = '{"items": ' + nested(600) + ', "copies": %s}'
    server = serve(
        S.reply_tool_calls([("keep", sent % '"2"', "c1")]),
        S.reply_tool_calls([("keep", sent % "2", "c2")]),
        S.reply_text("done"),
    )
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("Go", registry)

    assert response.text == "done"
    assert isinstance(response.invocations[0].error, InvalidArgumentsError)
    assert tool_messages(cycle.messages) == {
        "c1": "Error: tool 'keep' got invalid arguments: copies: Input should be a valid "
        "integer (got '2')",
        "c2": "kept 2",
    }
    assert_history_valid(cycle.messages)


async def test_a_result_nested_too_deeply_for_json_reads_as_an_error(serve, make_cycle):
    registry, returns = hostile_registry()
    value: list[Any] = []
    for _ in range(DEEP):
        value = [value]
    returns.value = value
    server = serve(S.reply_tool_calls([("returns", {}, "c1")]), S.reply_text("ok"))
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("Go", registry)

    assert response.text == "ok"
    assert tool_messages(cycle.messages)["c1"].startswith(
        "Error: tool 'returns' failed: returned a result that cannot be written as JSON"
    )
    assert_history_valid(cycle.messages)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_response_nested_too_deeply_is_an_llm_error(serve, make_cycle, stream):
    body = '{"choices": ' + nested(DEEP) + "}"
    if stream:
        server = serve(RawStream(["data: " + body, ""]))
    else:
        server = serve(RawResponse(200, body.encode(), {"Content-Type": "application/json"}))
    cycle = make_cycle(server, max_retries=0)

    with pytest.raises(LlmError) as raised:
        if stream:
            await cycle.submit_stream("Hi").collect()
        else:
            await cycle.submit("Hi")

    assert isinstance(raised.value.__cause__, RecursionError)


# -- numbers JSON cannot hold, or Python cannot read ----------------------------------------


def over_limit_refunds() -> tuple[ToolRegistry, list[Any], list[Any]]:
    """approval.md's per-call rule; the lists of the arguments it weighed and of the
    amounts refunded."""
    registry = ToolRegistry()
    weighed: list[Any] = []
    refunded: list[Any] = []

    def over_limit(args: dict[str, Any], ctx: ToolContext) -> bool:
        weighed.append(args)
        return bool(args["amount"] > 100)

    @registry.tool(needs_approval=over_limit)
    def refund(order: int, amount: float) -> str:
        """Refund an order."""
        refunded.append(amount)
        return f"refunded {amount} on order {order}"

    return registry, weighed, refunded


NOT_JSON = {
    "NaN": "NaN is not a JSON number",
    "-Infinity": "-Infinity is not a JSON number",
    "Infinity": "Infinity is not a JSON number",
    "1e999": "1e999 is past the range of a 64-bit float (about 1.8e308)",
}


@pytest.mark.parametrize("literal", list(NOT_JSON))
@pytest.mark.parametrize(
    ("api", "stream"),
    [("chat", False), ("chat", True), ("responses", False), ("responses", True)],
    ids=["chat-json", "chat-sse", "responses-json", "responses-sse"],
)
async def test_nan_or_infinity_in_arguments_go_back_to_the_model_unasked_and_unrun(
    serve, make_cycle, literal, api, stream
):
    # Python's json reads NaN and the infinities, which are no JSON: the rule saw
    # nan > 100 == False, nobody was asked, and refund ran with amount=nan.
    registry, weighed, refunded = over_limit_refunds()
    server = serve(
        S.reply_tool_calls([("refund", f'{{"order": 2, "amount": {literal}}}', "c1")]),
        S.reply_text("I will send a number"),
    )
    cycle = make_cycle(server, api=api)

    if stream:
        response = await cycle.submit_stream_with_tools("Refund order 2", registry).collect()
    else:
        response = await cycle.submit_with_tools("Refund order 2", registry)

    assert response.text == "I will send a number"
    assert response.pending_approvals == ()
    assert (weighed, refunded) == ([], [])
    [invocation] = response.invocations
    assert isinstance(invocation.error, InvalidArgumentsError)
    expected = f"amount: {NOT_JSON[literal]}; send a finite number"
    assert invocation.error.reason == expected
    assert invocation.error.errors == [("amount", NOT_JSON[literal])]
    assert "amount" not in invocation.error.redacted  # a key the model may have made up
    assert expected in server.requests[1].body.decode()  # what the model read
    if api == "chat":
        assert_history_valid(cycle.messages)


async def test_nan_in_arguments_a_server_sends_as_an_object_is_refused_too(serve, make_cycle):
    registry, weighed, refunded = over_limit_refunds()
    call = {"id": "c1", "type": "function", "function": {"name": "refund", "arguments": None}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]}  # fmt: skip
    raw = json.dumps(body).replace('"arguments": null', '"arguments": {"order": 2, "amount": NaN}')
    server = serve(RawResponse(200, raw.encode(), {"Content-Type": "application/json"}))
    server.add(S.reply_text("I will send a number"))
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("Refund order 2", registry)

    assert (response.pending_approvals, weighed, refunded) == ((), [], [])
    assert tool_messages(cycle.messages)["c1"] == (
        "Error: tool 'refund' got invalid arguments: amount: NaN is not a JSON number; "
        "send a finite number"
    )
    assert_history_valid(cycle.messages)
    assert_encodes(cycle.messages)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_an_integer_too_long_to_read_goes_back_to_the_model(serve, make_cycle, stream):
    # json.loads raised int()'s ValueError (over 4300 digits), which was no
    # JSONDecodeError: the run ended with it, bare.
    registry, weighed, refunded = over_limit_refunds()
    arguments = '{"order": ' + "9" * 5000 + ', "amount": 1}'
    server = serve(
        S.reply_tool_calls([("refund", arguments, "c1")]),
        S.reply_text("I will send a shorter number"),
        chunk_chars=4096,
    )
    cycle = make_cycle(server)

    if stream:
        response = await cycle.submit_stream_with_tools("Refund", registry).collect()
    else:
        response = await cycle.submit_with_tools("Refund", registry)

    assert response.text == "I will send a shorter number"
    assert (weighed, refunded) == ([], [])
    assert tool_messages(cycle.messages)["c1"] == (
        "Error: tool 'refund' got invalid arguments: arguments hold an integer with too many "
        "digits to read; send a shorter number"
    )
    assert_history_valid(cycle.messages)


# -- lone surrogates ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_lone_surrogate_echoed_by_a_tool_does_not_poison_the_history(
    serve, make_cycle, stream
):
    registry, _ = hostile_registry()
    server = serve(
        S.reply_tool_calls([("echo", '{"value": "a\\ud800b"}', "c1")]),
        S.reply_text("echoed"),
        S.reply_text("still talking"),
    )
    cycle = make_cycle(server)

    if stream:
        response = await cycle.submit_stream_with_tools("Echo", registry).collect()
    else:
        response = await cycle.submit_with_tools("Echo", registry)

    assert response.text == "echoed"
    assert response.invocations[0].output == "a\ud800b"  # the tool got what was sent
    assert tool_messages(cycle.messages)["c1"] == "a\ufffdb"  # the model reads clean text
    assert server.requests[1].json["messages"][-1]["content"] == "a\ufffdb"
    assert (await cycle.submit("And now?")).text == "still talking"
    assert_encodes(cycle.messages)


# os.listdir's name of a file whose name is not UTF-8 (decoded with surrogateescape).
LISTED = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
PIXEL = Image(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;")


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_lone_surrogates_beside_an_image_or_a_file_are_replaced_too(serve, make_cycle, api):
    # Before: only a result without binary values was scrubbed; beside an image the loop
    # died with a bare UnicodeEncodeError (counting the result's tokens).
    registry = ToolRegistry()

    @registry.tool
    def screenshot(folder: str) -> list[Any]:
        """A folder's listing, a screenshot of it and one of its files."""
        pdf = File(b"%PDF-1.7\n", filename=LISTED.replace(".txt", ".pdf"))
        return [f"files: {LISTED}", PIXEL, pdf, {"names": [LISTED], "shot": PIXEL}]

    server = serve(
        S.reply_tool_calls([("screenshot", {"folder": "/x"}, "c1")]),
        S.reply_text("done"),
        S.reply_text("still talking"),
    )
    cycle = make_cycle(server, api=api)

    response = await cycle.submit_with_tools("Look", registry)

    assert response.text == "done"
    sent = json.dumps(server.requests[1].json, ensure_ascii=False)
    assert "caf\ufffd.txt" in sent and "caf\ufffd.pdf" in sent
    assert "\udce9" not in sent  # the raw surrogate, which no request can carry
    assert (await cycle.submit("And now?")).text == "still talking"
    assert_encodes(cycle.messages)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_lone_surrogates_in_a_tool_s_descriptions_are_sent_replaced(serve, make_cycle, api):
    # Written with an escape in a description or a docstring's Args, one made every
    # request of a run offering the tool fail to encode, before anything was sent.
    registry = ToolRegistry()

    def add(a: int, b: int) -> int:
        return a + b

    # Set at run time: Python 3.13's compiler cleans a docstring's indents, and cannot
    # encode one holding a lone surrogate.
    add.__doc__ = "Unused.\n\nArgs:\n    a: The first\udfff one.\n    b: The second one.\n"
    add = registry.tool(description="Adds\ud800 two numbers.")(add)

    server = serve(S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")]), S.reply_text("3"))
    cycle = make_cycle(server, api=api)

    response = await cycle.submit_with_tools("1 + 2?", registry)

    assert response.text == "3" and len(server.requests) == 2
    [sent] = server.requests[0].json["tools"]
    function = sent["function"] if api == "chat" else sent
    assert function["description"] == "Adds\ufffd two numbers."
    assert function["parameters"]["properties"]["a"]["description"] == "The first\ufffd one."
    assert add.description == "Adds\ud800 two numbers."  # the tool itself as it was made


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("mode", ["json_schema", "tool"])
async def test_lone_surrogates_in_an_output_type_s_descriptions_are_sent_replaced(
    serve, make_cycle, api, mode
):
    # A field description written with an escape made every request of a structured run
    # fail to encode, before anything was sent, as a tool's description did (a review of
    # ac9a40e, which fixed only the final_result tool's).
    class Sum(BaseModel):
        total: int = Field(description="The sum\udfff.")

    server = serve(
        S.reply_tool_calls([("final_result", {"total": 3})])
        if mode == "tool"
        else S.reply_text('{"total": 3}')
    )
    cycle = make_cycle(server, api=api)

    response = await cycle.submit("1 + 2?", output_type=StructuredOutput(Sum, mode=mode))

    assert response.output == Sum(total=3) and len(server.requests) == 1
    sent = server.requests[0].json
    if mode == "tool":
        [tool] = sent["tools"]
        schema = (tool["function"] if api == "chat" else tool)["parameters"]
    elif api == "chat":
        schema = sent["response_format"]["json_schema"]["schema"]
    else:
        schema = sent["text"]["format"]["schema"]
    assert schema["properties"]["total"]["description"] == "The sum\ufffd."
    assert Sum.model_json_schema()["properties"]["total"]["description"] == "The sum\udfff."


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("entry", ["prompt", "system_prompt", "messages"])
async def test_lone_surrogates_in_the_caller_s_text_are_sent_replaced(
    serve, make_cycle, api, entry
):
    # Before: a prompt, a system prompt or a given message holding a file name as
    # os.listdir decodes it failed the request with LlmError: UnicodeEncodeError.
    server = serve(S.reply_text("seen"), S.reply_text("still talking"))
    cycle = make_cycle(
        server, api=api, system_prompt=f"Files: {LISTED}" if entry == "system_prompt" else None
    )

    if entry == "messages":
        response = await cycle.submit_messages(
            [{"role": "user", "content": [{"type": "text", "text": f"Open {LISTED}"}]}]
        )
    else:
        response = await cycle.submit(f"Open {LISTED}" if entry == "prompt" else "Open it")

    assert response.text == "seen"
    sent = json.dumps(server.requests[0].json, ensure_ascii=False)
    assert "caf\ufffd.txt" in sent and "\udce9" not in sent
    assert "caf\ufffd.txt" in json.dumps(cycle.messages, ensure_ascii=False)  # as sent
    assert (await cycle.submit("And now?")).text == "still talking"
    assert_encodes(cycle.messages)


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("entry", ["appended", "tuple"])
async def test_lone_surrogates_the_app_put_in_the_history_itself_are_sent_replaced(
    serve, make_cycle, api, entry
):
    # Before: a message appended to cycle.messages by the app (which no entry point
    # sees), or content given as a tuple, holding a file name as os.listdir decodes it
    # failed the request with LlmError: UnicodeEncodeError.
    server = serve(S.reply_text("seen"))
    cycle = make_cycle(server, api=api)
    clean = {"role": "user", "content": "Hello"}
    cycle.messages.append(clean)
    cycle.messages.append({"role": "assistant", "content": "Hi"})
    if entry == "appended":
        cycle.messages.append({"role": "user", "content": f"Open {LISTED}"})
        response = await cycle.submit_messages([])
    else:
        parts = ({"type": "text", "text": f"Open {LISTED}"},)
        response = await cycle.submit_messages([{"role": "user", "content": parts}])
    assert response.text == "seen"
    sent = json.dumps(server.requests[0].json, ensure_ascii=False)
    assert "caf\ufffd.txt" in sent and "\udce9" not in sent
    assert cycle.messages[0] is clean  # a clean message is neither copied nor changed


async def test_lone_surrogates_in_the_model_s_own_message_are_replaced(serve, make_cycle):
    registry, _ = hostile_registry()
    server = serve(
        # A literal surrogate in the arguments text and in the call's name.
        S.reply_tool_calls([("echo", '{"value": "\ud800"}', "c1"), ("ech\udc00", {}, "c2")]),
        S.reply_text("bad \udfff text"),
        S.reply_text("fine"),
    )
    cycle = make_cycle(server, unknown_tool="tell_model")

    response = await cycle.submit_with_tools("Go", registry)

    assert response.text == "bad \ufffd text"
    assert cycle.messages[-1]["content"] == "bad \ufffd text"
    calls = cycle.messages[1]["tool_calls"]
    assert calls[0]["function"]["arguments"] == '{"value": "\ufffd"}'
    assert calls[1]["function"]["name"] == "ech\ufffd"
    assert tool_messages(cycle.messages)["c2"].startswith(
        "Error: tool 'ech\ufffd' is not registered"
    )
    assert (await cycle.submit("Again")).text == "fine"
    assert_encodes(cycle.messages)


async def test_a_character_split_across_stream_chunks_is_whole_in_the_answer(serve, make_cycle):
    # A server slicing UTF-16 text sent each half of the pair's escape in its own chunk.
    server = serve()
    server.add(
        RawStream([
            server.chunk({"content": "thumbs \ud83d"}),
            server.chunk({"content": "\udc4d up"}, "stop"),
        ])
    )  # fmt: skip
    cycle = make_cycle(server)

    response = await cycle.submit_stream("Hi").collect()

    assert response.text == cycle.messages[-1]["content"] == "thumbs \U0001f44d up"
    assert_encodes(cycle.messages)


# -- the property ---------------------------------------------------------------------------

# Text with lone surrogates mixed in (hypothesis leaves them out by default).
TEXT = st.text(st.characters() | st.characters(categories=["Cs"]), max_size=40)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
ARGUMENTS = st.one_of(
    TEXT,  # mostly not JSON at all
    JSON_VALUES.map(lambda value: json.dumps({"value": value})),
    JSON_VALUES.map(lambda value: json.dumps({"value": value}, ensure_ascii=False)),
    JSON_VALUES.map(json.dumps),  # JSON, but maybe not an object
    st.integers(1, 3 * DEEP).map(lambda depth: '{"value": ' + nested(depth) + "}"),
)
RESULTS = st.one_of(
    JSON_VALUES,
    st.integers(1, 5000).map(lambda depth: json.loads(nested(min(depth, 900)))),
    st.integers(1000, DEEP).map(lambda depth: _deep_list(depth)),
)


def _deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@dataclass
class Round:
    """What the scripted model says in one example."""

    arguments: str = "{}"
    text: str = ""
    seen: list[CapturedRequest] = field(default_factory=list)

    def answer(self, request: CapturedRequest) -> Reply:
        self.seen.append(request)
        last = request.json["messages"][-1]
        if last["role"] == "user" and last["content"] == "go":
            return S.reply_tool_calls([("echo", self.arguments), ("returns", self.arguments)])
        return S.reply_text(self.text)


@pytest.mark.timeout(180)
def test_arbitrary_arguments_text_and_results_never_crash_nor_poison_the_history() -> None:
    registry, returns = hostile_registry()
    current = Round()
    with ScriptedChatServer([lambda request: current.answer(request)], repeat=True) as server:

        async def run(stream: bool) -> None:
            async with server.client(timeout=30.0) as client:
                cycle = LlmCycle(CycleConfig("m", max_retries=0), client=client)
                try:
                    if stream:
                        outcome = await cycle.submit_stream_with_tools("go", registry).collect()
                    else:
                        outcome = await cycle.submit_with_tools("go", registry)
                except LlmError:
                    pass  # the documented way for a run to fail; the checks below still hold
                else:
                    assert isinstance(outcome, ChatResponse)
                    assert outcome.text == current.text.translate(_SCRUB)
                assert_history_valid(cycle.messages)
                assert_encodes(cycle.messages)
                # And the conversation goes on.
                assert isinstance(await cycle.submit("again"), ChatResponse)
                assert_encodes(cycle.messages)

        @settings(
            max_examples=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(arguments=ARGUMENTS, text=TEXT, result=RESULTS, stream=st.booleans())
        def check(arguments: str, text: str, result: Any, stream: bool) -> None:
            current.arguments, current.text = arguments, text
            returns.value = result
            asyncio.run(run(stream))

        check()


_SCRUB = {code: "\ufffd" for code in range(0xD800, 0xE000)}
