"""Argument parsing, result text, truncation, and registry.run_tool_calls for both APIs."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai import OpenAI
from pydantic_core import to_json

from agcore_tools import (
    BaseTool,
    File,
    Image,
    InvalidArgumentsError,
    PermissionChecker,
    PermissionConfig,
    ToolConfigError,
    ToolContext,
    ToolError,
    ToolInvocation,
    ToolRegistry,
    ToolTimeoutError,
)
from agcore_tools._text import in_pieces, is_large
from agcore_tools.calls import model_text, parse_call, result_text, truncate_utf8
from agcore_tools.testing import ScriptedChatServer as S

DEEP = 100_000

# -- parse_call -------------------------------------------------------------------------


def test_json_text_arguments_are_parsed() -> None:
    call = parse_call("add", "c1", '{"a": 1, "b": [2]}')
    assert (call.args, call.error, call.arguments) == (
        {"a": 1, "b": [2]},
        None,
        '{"a": 1, "b": [2]}',
    )


@pytest.mark.parametrize("empty", [None, "", "   "])
def test_empty_arguments_are_an_empty_object(empty: str | None) -> None:
    call = parse_call("now", "c1", empty)
    assert (call.args, call.arguments, call.error) == ({}, "{}", None)


def test_an_object_given_as_is_is_used_and_recorded_as_json_text() -> None:
    call = parse_call("add", "c1", {"a": 1, "city": "北京"})
    assert call.args == {"a": 1, "city": "北京"}
    assert call.arguments == '{"a": 1, "city": "北京"}'


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("{oops", "arguments are not valid JSON (Expecting property name"),
        ('{"a": ', "arguments are not valid JSON (Expecting value at line 1 column 7)"),
        ('{"a": "x\ny"}', "arguments are not valid JSON (Invalid control character at line 1"),
        ("[1, 2]", "arguments must be a JSON object, got an array"),
        ("42", "arguments must be a JSON object, got a number"),
        ("null", "arguments must be a JSON object, got null"),
        ("true", "arguments must be a JSON object, got a boolean"),
        ([1, 2], "arguments must be a JSON object, got an array"),
    ],
)
def test_unusable_arguments_give_an_invalid_arguments_error(raw: Any, reason: str) -> None:
    call = parse_call("add", "c1", raw)
    assert call.args is None
    assert isinstance(call.error, InvalidArgumentsError)
    assert call.error.tool_name == "add"
    assert call.error.reason.startswith(reason)
    assert call.input == call.arguments  # the raw text is what a UI shows


@pytest.mark.parametrize(
    ("raw", "path", "problem"),
    [
        ('{"amount": NaN}', "amount", "NaN is not a JSON number"),
        ('{"a": {"b": [1, -Infinity]}}', "a.b.1", "-Infinity is not a JSON number"),
        ('{"a": 1e999}', "a", "1e999 is past the range of a 64-bit float (about 1.8e308)"),
        ('{"a": -1' + "0" * 400 + ".5}", "a", "-1000000000000000000... is past the range"),
        ({"amount": float("inf")}, "amount", "Infinity is not a JSON number"),  # an object
    ],
)
def test_numbers_json_cannot_hold_are_refused_naming_the_argument(
    raw: Any, path: str, problem: str
) -> None:
    call = parse_call("pay", "c1", raw)
    assert call.args is None
    assert isinstance(call.error, InvalidArgumentsError)
    assert call.error.reason.startswith(f"{path}: {problem}")
    assert call.error.reason.endswith("; send a finite number")
    [(field, _)] = call.error.errors
    assert field == path


def test_finite_numbers_and_strings_spelling_nan_are_arguments() -> None:
    call = parse_call("pay", "c1", '{"a": 1.7976931348623157e308, "b": "NaN", "c": -0.0}')
    assert call.error is None
    assert call.args == {"a": 1.7976931348623157e308, "b": "NaN", "c": -0.0}


def test_an_integer_too_long_to_read_is_an_error_not_a_crash() -> None:
    call = parse_call("pay", "c1", '{"a": ' + "1" * 5000 + "}")
    assert isinstance(call.error, InvalidArgumentsError)
    assert isinstance(call.error.__cause__, ValueError)
    assert call.error.reason == (
        "arguments hold an integer with too many digits to read; send a shorter number"
    )
    assert parse_call("pay", "c1", '{"a": ' + "1" * 4000 + "}").args == {"a": int("1" * 4000)}


def test_an_integer_too_long_to_write_in_mapping_arguments_is_named_as_such() -> None:
    call = parse_call("pay", "c1", {"a": 10**5000})
    assert isinstance(call.error, InvalidArgumentsError)
    assert isinstance(call.error.__cause__, ValueError)
    assert call.error.reason == (
        "arguments hold an integer with too many digits to read; send a shorter number"
    )
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    assert parse_call("pay", "c1", cyclic).error.reason == (
        "arguments nest too deeply to parse; send a flatter JSON object"
    )


def test_a_json_error_keeps_the_decoder_error_as_cause() -> None:

    call = parse_call("add", "c1", '{"a": }')
    assert isinstance(call.error, InvalidArgumentsError)
    assert isinstance(call.error.__cause__, json.JSONDecodeError)
    assert "line 1 column 7" in str(call.error)


def test_arguments_nested_too_deeply_give_an_error_with_the_recursion_error_as_cause() -> None:
    call = parse_call("echo", "c1", '{"v": ' + "[" * DEEP + "]" * DEEP + "}")
    assert call.args is None
    assert isinstance(call.error, InvalidArgumentsError)
    assert isinstance(call.error.__cause__, RecursionError)
    assert call.error.reason == "arguments nest too deeply to parse; send a flatter JSON object"


def test_an_object_too_deep_to_write_as_json_is_an_error_recorded_as_empty() -> None:
    value: dict[str, Any] = {}
    for _ in range(DEEP):
        value = {"v": value}
    call = parse_call("echo", "c1", value)
    assert (call.args, call.arguments) == (None, "{}")
    assert isinstance(call.error, InvalidArgumentsError)
    assert isinstance(call.error.__cause__, RecursionError)


def test_lone_surrogates_in_name_id_and_arguments_text_become_replacement_characters() -> None:
    call = parse_call("ech\ud800", "c\udc01", '{"text": "\udfff", "escaped": "\\ud800"}')
    assert (call.name, call.call_id) == ("ech\ufffd", "c\ufffd")
    assert call.arguments == '{"text": "\ufffd", "escaped": "\\ud800"}'
    # An escaped surrogate is valid JSON text; the tool gets what it spells.
    assert call.args == {"text": "\ufffd", "escaped": "\ud800"}
    call.arguments.encode("utf-8")


# -- result text -------------------------------------------------------------------------


def test_result_text_keeps_strings_and_writes_everything_else_as_compact_json() -> None:
    from dataclasses import dataclass

    @dataclass
    class Point:
        x: int
        y: int

    assert result_text("as is") == "as is"
    assert result_text({"城市": "上海", "n": 1.5}) == '{"城市":"上海","n":1.5}'
    assert result_text([Point(1, 2)]) == '[{"x":1,"y":2}]'
    assert result_text(None) == "null"
    assert result_text(object()).startswith('"<object object')


def test_a_result_holding_nan_or_infinity_is_still_json() -> None:
    # json.dumps writes NaN and Infinity, which no JSON parser (nor model API) reads.
    text = result_text({"mean": float("nan"), "max": float("-inf"), "n": 0})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"not JSON: {c}")) == {
        "mean": None, "max": None, "n": 0
    }  # fmt: skip


def test_model_text_replaces_lone_surrogates_in_results_and_errors() -> None:
    assert model_text(ToolInvocation("t", {}, output="a\ud800b"), None) == "a\ufffdb"
    assert model_text(ToolInvocation("t", {}, output={"k\udc00": ["\ud800"]}), None) == (
        '{"k\ufffd":["\ufffd"]}'
    )
    failed = ToolInvocation("t", {}, error=ToolError("bad \ud800"))
    assert model_text(failed, None) == "Error: bad \ufffd"


async def test_lone_surrogates_beside_binary_values_are_replaced_in_what_the_drop_in_gives() -> (
    None
):
    # Before: text beside an image was not scrubbed, so the messages run_tool_calls gave
    # could not be sent by the caller's own client ("surrogates not allowed").
    registry = ToolRegistry()
    listed = b"caf\xe9".decode("utf-8", "surrogateescape")  # os.listdir's name of it
    pixel = Image(b"GIF89a" + bytes(10))

    @registry.tool
    def screenshot() -> list[Any]:
        """Names, a screenshot and a file."""
        return [f"files: {listed}.txt", pixel, File(b"%PDF-1.7\n", filename=f"{listed}.pdf")]

    @registry.tool
    def described() -> dict[str, Any]:
        """Names in a structure, beside a screenshot."""
        return {"names": [f"{listed}.txt"], "shot": pixel}

    @registry.tool
    def sizes() -> dict[str, int]:
        """Sizes by name: the names are keys."""
        return {f"{listed}.txt": 3}

    calls = [("c1", "screenshot"), ("c2", "described"), ("c3", "sizes")]
    chat = await registry.run_tool_calls([chat_call(id_, name, "{}") for id_, name in calls])
    responses = await registry.run_tool_calls(
        [{"type": "function_call", "call_id": "f1", "name": "screenshot", "arguments": "{}"}]
    )
    for messages in (chat, responses):
        json.dumps(messages, ensure_ascii=False).encode("utf-8")  # what a client sends
    assert chat[0]["content"].startswith("files: caf\ufffd.txt\n[image 1 (image/gif, 16 B)")
    assert "file 1 (caf\ufffd.pdf)" in chat[0]["content"]
    assert chat[1]["content"].startswith('{"names":["caf\ufffd.txt"],"shot":"[image 1 ')
    assert chat[2]["content"] == '{"caf\ufffd.txt":3}'
    assert chat[3]["content"][3] == {
        "type": "text",
        "text": "file 1 (caf\ufffd.pdf) of tool call c1 (screenshot):",
    }
    assert chat[3]["content"][4]["file"]["filename"] == "caf\ufffd.pdf"
    text, _, pdf = responses[0]["output"]
    assert text["text"].startswith("files: caf\ufffd.txt")
    assert pdf["filename"] == "caf\ufffd.pdf"


def test_a_result_that_cannot_be_written_as_json_reads_as_an_error() -> None:
    deep: list[Any] = []
    for _ in range(DEEP):
        deep = [deep]
    circular: list[Any] = []
    circular.append(circular)
    for output in (deep, circular):
        text = model_text(ToolInvocation("t", {}, output=output), 200)
        assert text.startswith("Error: tool 't' failed: returned a result that cannot be written")
    # Nesting pydantic refuses but json can write is sent as it is.
    medium = json.loads("[" * 500 + "]" * 500)
    assert model_text(ToolInvocation("t", {}, output=medium), None) == "[" * 500 + "]" * 500


ROWS = [{"id": n, "name": f"customer {n}", "email": f"c{n}@example.com"} for n in range(60_000)]


@pytest.mark.parametrize(
    "value",
    [
        ROWS,
        {"total": len(ROWS), "rows": ROWS, "next": None},
        tuple(ROWS[:9000]),
        [ROWS[:500], "x" * 300_000, {"more": ROWS[:20_000]}, 5],
        {n: {"sku": f"s{n}", "price": n / 3, "tags": ("a", None)} for n in range(30_000)},
        [[n, float("nan"), "北京"] for n in range(50_000)],
    ],
    ids=["rows", "nested", "tuple", "mixed", "int-keys", "nan"],
)
def test_a_large_result_is_written_a_run_at_a_time_as_the_same_text(value: Any) -> None:
    # One pydantic-core (or json) call on the whole of it holds the GIL throughout, so
    # in a worker thread it would hold up the event loop as long as on it.
    assert is_large(value)
    assert result_text(value) == to_json(value, fallback=str, inf_nan_mode="null").decode()
    written: list[int] = []

    def dumps(part: Any) -> str:
        text = json.dumps(part, ensure_ascii=False)
        written.append(len(text))
        return text

    whole = json.dumps(value, ensure_ascii=False)
    assert in_pieces(value, dumps, ", ") == whole
    assert len(whole) > 600_000 and max(written) < 400_000  # the 300 kB string: one run


def test_a_small_result_is_written_in_one_go() -> None:
    written: list[str] = []

    def dumps(part: Any) -> str:
        written.append(json.dumps(part))
        return written[-1]

    small = {"rows": ROWS[:100], "total": 100}
    assert not is_large(small)
    assert in_pieces(small, dumps, ", ") == json.dumps(small) and len(written) == 1


# -- truncation ---------------------------------------------------------------------------


def test_text_that_fits_is_returned_unchanged() -> None:
    text = "短文本" * 10
    assert truncate_utf8(text, 1000) is text
    assert truncate_utf8(text, None) is text
    exact = "é" * 50  # 100 bytes
    assert truncate_utf8(exact, 100) is exact


def test_cjk_text_is_cut_on_character_boundaries_with_head_tail_and_a_marker() -> None:
    text = "".join(chr(0x4E00 + i % 500) for i in range(3000))  # 9000 bytes
    cut = truncate_utf8(text, 1000)
    data = cut.encode("utf-8")
    assert len(data) <= 1000
    head, marker_and_tail = cut.split("\n[... ", 1)
    count, tail = marker_and_tail.split(" bytes omitted ...]\n")
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) > len(tail) > 0  # two thirds head, one third tail
    assert int(count) == len(text.encode()) - len(head.encode()) - len(tail.encode())
    assert len(data) > 950  # the budget is used, give or take a split character


def test_emoji_at_the_cut_points_are_dropped_whole() -> None:
    text = "🙂" * 1000  # 4 bytes each
    for limit in range(200, 240):
        cut = truncate_utf8(text, limit)
        assert len(cut.encode()) <= limit
        head, _, rest = cut.partition("\n[")
        assert set(head) == {"🙂"}
        assert set(rest.split("]\n")[1]) == {"🙂"}


def test_a_limit_below_the_marker_size_hard_cuts_the_head() -> None:
    cut = truncate_utf8("数据" * 100, 10)
    assert cut == "数据数"
    assert len(cut.encode()) <= 10


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=0, max_size=400), st.integers(min_value=0, max_value=600))
def test_truncation_never_exceeds_the_limit_and_keeps_a_prefix(text: str, limit: int) -> None:
    cut = truncate_utf8(text, limit)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= limit:
        assert cut == text
    else:
        assert len(cut.encode("utf-8", "surrogatepass")) <= limit
        head = cut.split("\n[... ")[0]
        assert text.startswith(head)


# -- run_tool_calls ----------------------------------------------------------------------


@pytest.fixture
def registry() -> ToolRegistry:
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))

    @registry.tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @registry.tool
    async def nap(seconds: float) -> str:
        """Sleep."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @registry.tool
    def long_text() -> str:
        """Much text."""
        return "字" * 10000

    @registry.tool(permissions=["shell"])
    def shell(cmd: str) -> str:
        """Denied by the default policy."""
        raise AssertionError("must never run")

    return registry


def chat_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def test_chat_completions_dicts_give_tool_messages_in_order(registry) -> None:
    calls = [
        chat_call("c1", "nap", '{"seconds": 0.2}'),
        chat_call("c2", "add", '{"a": 1, "b": 2}'),
    ]
    started = time.perf_counter()
    messages = await registry.run_tool_calls(calls)
    assert time.perf_counter() - started < 1.0
    assert messages == [
        {"role": "tool", "tool_call_id": "c1", "content": "slept 0.2"},
        {"role": "tool", "tool_call_id": "c2", "content": "3"},
    ]


async def test_chat_completions_sdk_objects_are_accepted(registry) -> None:
    from openai.types.chat import ChatCompletionMessage

    message = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [chat_call("c9", "add", '{"a": 2, "b": 2}')],
        }
    )
    assert await registry.run_tool_calls(message.tool_calls) == [
        {"role": "tool", "tool_call_id": "c9", "content": "4"}
    ]


async def test_responses_function_calls_give_function_call_outputs(registry) -> None:
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage

    output = [
        ResponseOutputMessage.model_validate(
            {
                "id": "m1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Let me add.", "annotations": []}],
            }
        ),
        ResponseFunctionToolCall(
            type="function_call", call_id="fc1", name="add", arguments='{"a": 5, "b": 6}'
        ),
        {"type": "reasoning", "id": "r1", "summary": []},
        {"type": "function_call", "call_id": "fc2", "name": "add", "arguments": '{"a": 1}'},
    ]
    outputs = await registry.run_tool_calls(output)
    assert outputs[0] == {"type": "function_call_output", "call_id": "fc1", "output": "11"}
    assert outputs[1]["call_id"] == "fc2"
    assert outputs[1]["output"].startswith(
        "Error: tool 'add' got invalid arguments: b: Field required"
    )
    assert len(outputs) == 2


async def test_every_failure_becomes_error_text_and_nothing_is_raised(registry) -> None:
    messages = await registry.run_tool_calls(
        [
            chat_call("c1", "missing", "{}"),
            chat_call("c2", "shell", '{"cmd": "ls"}'),
            chat_call("c3", "add", "{not json"),
            chat_call("c4", "nap", '{"seconds": 5}'),
        ],
        timeout=0.1,
    )
    contents = [m["content"] for m in messages]
    # The same text as the loop's (CycleConfig(unknown_tool="tell_model")): the model
    # learns which tools it may call, not shell, which the permissions deny (it listed
    # shell, and the model's call to it was refused).
    assert contents[0] == (
        "Error: tool 'missing' is not registered: the tools offered are: add, nap, long_text"
    )
    assert contents[1].startswith("Error: permission denied: tool 'shell' needs 'shell'")
    assert contents[2].startswith(
        "Error: tool 'add' got invalid arguments: arguments are not valid JSON"
    )
    assert contents[3] == f"Error: {ToolTimeoutError('nap', 0.1)}"


async def test_a_chat_call_that_cannot_run_is_answered_with_an_error(registry) -> None:
    from openai.types.chat import ChatCompletionMessage

    # A custom tool's call, and one without its function: each still needs an answer
    # (the API refuses a history with an unanswered call).
    message = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "custom", "custom": {"name": "sql", "input": "SELECT 1"}},
                chat_call("c2", "add", '{"a": 1, "b": 2}'),
            ],
        }
    )
    messages = await registry.run_tool_calls(
        [*message.tool_calls, {"id": "c3", "type": "function", "function": None}]
    )
    assert [m["tool_call_id"] for m in messages] == ["c1", "c2", "c3"]
    assert messages[0]["content"] == (
        "Error: tool call 'c1' cannot run: custom tool calls are not supported here; "
        "call a function tool instead"
    )
    assert messages[1]["content"] == "3"
    assert messages[2]["content"].startswith("Error: tool call 'c3' cannot run: the tool call")


async def test_hostile_arguments_and_results_become_clean_text_not_exceptions() -> None:
    registry = ToolRegistry()

    @registry.tool
    def echo(value: Any = None) -> Any:
        """Return the value."""
        return value

    messages = await registry.run_tool_calls(
        [
            chat_call("deep", "echo", '{"value": ' + "[" * DEEP + "]" * DEEP + "}"),
            chat_call("lone", "echo", '{"value": "\\ud800"}'),
        ]
    )
    contents = {m["tool_call_id"]: m["content"] for m in messages}
    assert contents["deep"] == (
        "Error: tool 'echo' got invalid arguments: arguments nest too deeply to parse; "
        "send a flatter JSON object"
    )
    assert contents["lone"] == "\ufffd"
    json.dumps(messages, ensure_ascii=False).encode("utf-8")


async def test_results_are_truncated_like_the_loop_does(registry) -> None:
    (message,) = await registry.run_tool_calls(
        [chat_call("c1", "long_text", "{}")], max_result_bytes=300
    )
    assert len(message["content"].encode()) <= 300
    assert "bytes omitted" in message["content"]
    (full,) = await registry.run_tool_calls(
        [chat_call("c1", "long_text", "{}")], max_result_bytes=None
    )
    assert full["content"] == "字" * 10000


@pytest.mark.parametrize(
    ("limit", "value"),
    [
        ("max_result_bytes", 0),
        ("max_result_bytes", -8),
        ("max_result_bytes", 63),
        ("max_result_bytes", 10.5),
        ("max_result_bytes", "16k"),
        ("max_result_bytes", True),
        ("max_attachment_bytes", 0),
        ("max_attachment_bytes", 2.0),
    ],
)
async def test_a_byte_limit_that_is_no_integer_in_range_is_refused(registry, limit, value) -> None:
    calls = [chat_call("c1", "long_text", "{}")]
    expected = f"run_tool_calls\\(\\) {limit} must be an integer at least"
    with pytest.raises(ToolConfigError, match=expected) as caught:
        await registry.run_tool_calls(calls, **{limit: value})
    assert isinstance(caught.value, ValueError)
    # The sync entry point names itself.
    with pytest.raises(ToolConfigError, match=expected.replace("calls", "calls_sync")):
        registry.run_tool_calls_sync(calls, **{limit: value})


async def test_nothing_to_run_gives_nothing(registry) -> None:
    assert await registry.run_tool_calls(None) == []
    assert await registry.run_tool_calls([]) == []
    assert await registry.run_tool_calls([{"type": "message", "content": []}]) == []


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([42], "cannot read 42"),
        (
            [{"type": "function", "function": {"name": "add", "arguments": "{}"}}],
            "without its 'id'",
        ),
        (
            [
                chat_call("c1", "add", "{}"),
                {"type": "function_call", "call_id": "f", "name": "add", "arguments": "{}"},
            ],
            "mixed",
        ),
    ],
)
async def test_unreadable_input_is_a_tool_error(registry, items, message) -> None:
    with pytest.raises(ToolError, match=message):
        await registry.run_tool_calls(items)


def test_the_wrong_items_are_a_caller_mistake_naming_the_entry_point_and_the_fix(registry) -> None:
    # The likely slips, with the SDK's own objects: the assistant message itself, a
    # completion's choices, one turn's Chat calls with a Responses item.
    with (
        S([S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")])]) as server,
        OpenAI(base_url=server.base_url, api_key="-", max_retries=0) as client,
    ):
        completion = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "1 + 2?"}]
        )
    message = completion.choices[0].message
    responses_call = {"type": "function_call", "call_id": "f", "name": "add", "arguments": "{}"}
    for items, named in [
        ([message], r"cannot read .*; that is a message: pass message\.tool_calls$"),
        (
            completion.choices,
            r"cannot read .*; that is a choice: pass completion\.choices\[0\]\.message\.tool_calls",
        ),
        ([message.tool_calls[0], responses_call], "got Chat Completions and Responses calls mixed"),
        ([42], r"cannot read 42: expected .* items$"),
        # A bare ToolError that said "without an id or name" with the name there.
        (
            [{"type": "function", "function": {"name": "add", "arguments": "{}"}}],
            r"got a tool call without its 'id' \(the id its answer must carry\): \{",
        ),
        (
            [{"type": "function_call", "arguments": "{}"}],
            "got a tool call without its 'call_id' .* and a function name: ",
        ),
        # A plain ToolError, no ValueError, unlike a function call without its id.
        (
            [{"type": "custom", "custom": {"name": "grep", "input": "x"}}],
            r"got a tool call without its 'id' \(the id its answer must carry\): \{",
        ),
    ]:
        with pytest.raises(ToolConfigError, match=f"^run_tool_calls_sync\\(\\) {named}") as info:
            registry.run_tool_calls_sync(items)
        assert isinstance(info.value, ValueError)
        with pytest.raises(ToolConfigError, match=f"^run_tool_calls\\(\\) {named}"):
            asyncio.run(registry.run_tool_calls(items))


def test_the_sdk_object_holding_the_calls_is_refused_naming_what_to_pass(registry) -> None:
    # The drop-in's likely slips: the message without .tool_calls, the completion, the
    # response without .output, one call without a list. The SDK's objects are pydantic
    # models, which iterate as (field, value) pairs: the error named ('content', None).
    with (
        S(
            [
                S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c1")]),
                S.reply_tool_calls([("add", {"a": 1, "b": 2}, "c2")]),
            ]
        ) as server,
        OpenAI(base_url=server.base_url, api_key="-", max_retries=0) as client,
    ):
        completion = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "1 + 2?"}]
        )
        response = client.responses.create(model="m", input="1 + 2?")
    message = completion.choices[0].message
    assert message.tool_calls is not None
    for passed, named in [
        (message, "ChatCompletionMessage; that is a message: pass message.tool_calls"),
        (
            completion,
            "ChatCompletion; that is a completion: pass completion.choices[0].message.tool_calls",
        ),
        (response, "Response; that is a response: pass response.output"),
        (message.tool_calls[0], "; that is one tool call: pass a list of them, such as [call]"),
        (response.output[0], "; that is one tool call: pass a list of them, such as [call]"),
        (completion.to_dict(), "dict; that is a completion: pass completion.choices[0]"),
    ]:
        with pytest.raises(ToolConfigError) as info:
            asyncio.run(registry.run_tool_calls(passed))
        text = str(info.value)
        assert text.startswith(
            "run_tool_calls() takes a list of tool calls (message.tool_calls, or "
            "response.output), got "
        )
        assert named in text and "('" not in text  # no (field, value) pair
        with pytest.raises(ToolConfigError, match=r"^run_tool_calls_sync\(\) takes a list"):
            registry.run_tool_calls_sync(passed)
    # What the hints name runs.
    outputs = registry.run_tool_calls_sync(message.tool_calls)
    assert outputs[0]["content"] == "3"
    assert registry.run_tool_calls_sync(response.output)[0]["output"] == "3"


async def test_cancelling_run_tool_calls_cancels_the_running_tools() -> None:
    registry = ToolRegistry()
    cancelled: list[str] = []

    @registry.tool
    async def hang(name: str) -> str:
        """Wait forever."""
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return name

    task = asyncio.create_task(
        registry.run_tool_calls(
            [chat_call("a", "hang", '{"name": "a"}'), chat_call("b", "hang", '{"name": "b"}')]
        )
    )
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert sorted(cancelled) == ["a", "b"]


class Seen:
    """Written with ``str`` (pydantic's fallback): notes the thread that wrote it."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def __str__(self) -> str:
        self.threads.append(threading.get_ident())
        return "seen"


class Export(BaseTool):
    """A tool that returns rows as they are (as an MCP tool's result comes)."""

    name, description = "export", "Export rows."

    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return [self.seen, *ROWS[: args["rows"]]]


async def test_run_tool_calls_makes_a_large_results_text_off_the_event_loop() -> None:
    # It was made on the loop (a 5 MB result held it up for 50-200 ms) although the
    # model reads 16 KiB of it. A small result is still made at once, on the loop.
    seen = Seen()
    registry = ToolRegistry()
    registry.register(Export(seen))
    loop_thread = threading.get_ident()
    for rows, off_loop in ((3, False), (60_000, True)):
        [message] = await registry.run_tool_calls(
            [chat_call("c1", "export", json.dumps({"rows": rows}))], max_result_bytes=200
        )
        assert message["content"].startswith('["seen",{"id":0,"name":"customer 0"')
        assert len(message["content"].encode()) <= 200
        assert (seen.threads.pop() != loop_thread) is off_loop


# -- images, audio and files --------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + bytes(i % 251 for i in range(30_000))


@pytest.fixture
def pictures() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def snapshot() -> bytes:
        """Raw PNG bytes, as many imaging libraries hand them out."""
        return PNG

    @registry.tool
    def report() -> dict[str, Any]:
        """A caption and a chart in one dict."""
        chart = base64.b64encode(PNG).decode()  # as an image API hands it out
        return {"caption": "Q3 sales", "chart": Image.from_base64(chart), "pdf": File(b"%PDF-1.7")}

    @registry.tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    return registry


async def test_chat_completions_drop_in_sends_images_in_a_user_message_after_the_tools(
    pictures: ToolRegistry,
) -> None:
    script = [
        S.reply_tool_calls([("snapshot", {}, "c1"), ("add", {"a": 1, "b": 2}, "c2")]),
        S.reply_text("A black square; 3."),
    ]
    with S(script) as server:
        async with server.client() as client:
            messages: list[Any] = [{"role": "user", "content": "Snapshot, and 1 + 2?"}]
            while True:
                completion = await client.chat.completions.create(
                    model="m", messages=messages, tools=pictures.definitions()
                )
                message = completion.choices[0].message
                messages.append(message.to_dict())
                if not message.tool_calls:
                    break
                messages += await pictures.run_tool_calls(message.tool_calls)
        sent = server.requests[1].json["messages"]
    # Before: "tool 'snapshot' failed: returned a bytes, which is not JSON-compatible".
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert sent[2]["content"] == (
        "[image 1 (image/png, 29.3 KB) is attached in the next user message]"
    )
    assert sent[3]["content"] == "3"
    assert sent[4]["content"][1:] == [
        {"type": "text", "text": "image 1 of tool call c1 (snapshot):"},
        {"type": "image_url", "image_url": {"url": Image(PNG).data_url}},
    ]
    assert message.content == "A black square; 3."


async def test_responses_drop_in_sends_input_image_and_input_file_parts(
    pictures: ToolRegistry,
) -> None:
    script = [S.reply_tool_calls([("report", {}, "fc1")]), S.reply_text("Q3 looks good.")]
    with S(script) as server:
        async with server.client() as client:
            tools = pictures.definitions(api="responses")
            response = await client.responses.create(model="m", input="Q3?", tools=tools)
            while outputs := await pictures.run_tool_calls(response.output):
                response = await client.responses.create(
                    model="m", input=outputs, previous_response_id=response.id, tools=tools
                )
        [output] = server.requests[1].json["input"]
    # Before: a base64 image in a dict was cut at 16 KB in the middle of its base64.
    assert output["type"] == "function_call_output" and output["call_id"] == "fc1"
    text, image, pdf = output["output"]
    assert text == {
        "type": "input_text",
        "text": '{"caption":"Q3 sales","chart":"[image 1 (image/png, 29.3 KB) is attached '
        'below]","pdf":"[file 1 (file.pdf) (application/pdf, 8 B) is attached below]"}',
    }
    assert image == {"type": "input_image", "image_url": Image(PNG).data_url}
    assert pdf == {
        "type": "input_file",
        "file_data": "data:application/pdf;base64,JVBERi0xLjc=",
        "filename": "file.pdf",
    }
    assert response.output_text == "Q3 looks good."


async def test_a_binary_value_over_the_drop_in_limit_is_named_not_sent(
    pictures: ToolRegistry,
) -> None:
    call = {"type": "function_call", "call_id": "fc1", "name": "snapshot", "arguments": "{}"}
    [output] = await pictures.run_tool_calls([call], max_attachment_bytes=10_000)
    assert output["output"] == (
        "[image 1 (image/png, 29.3 KB) was not sent: it is larger than the 9.8 KB limit for "
        "binary tool results]"
    )
    messages = await pictures.run_tool_calls(
        [chat_call("c1", "snapshot", "{}")], max_attachment_bytes=10_000
    )
    assert [m["role"] for m in messages] == ["tool"]  # nothing left to attach


async def test_bytes_of_no_known_kind_from_a_base_tool_become_error_text() -> None:
    from agcore_tools import BaseTool

    class Blob(BaseTool):
        name = "blob"
        description = "Returns raw bytes."

        async def execute(self, args: dict[str, Any], ctx: Any) -> Any:
            return {"blob": b"\x00\xff"}

    registry = ToolRegistry()
    registry.register(Blob())
    [message] = await registry.run_tool_calls([chat_call("c1", "blob", "{}")])
    assert message["content"] == (
        "Error: tool 'blob' failed: returned 2 bytes that are neither a PNG, JPEG, GIF or WebP "
        "image nor UTF-8 text; wrap them in Image(...), Audio(...) or File(...) with their "
        "media type"
    )


def test_no_json_error_reads_at_at() -> None:
    # json's message for a control character ends in "at"; the position follows once.
    for raw in ('{"a": "x\ny"}', '{"a": "\\q"}', '{"a": ', "{oops", '{"a": 1,}'):
        error = parse_call("f", "c1", raw).error
        assert error is not None and " at at " not in str(error), str(error)
