"""An MCP tool's arguments are checked against the tool's input schema before the call
is sent: against a server that checks nothing (an OpenAPI bridge), arguments that break
the schema never reach it, and the model reads one line it can correct itself from."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from agcore_tools import (
    CodeMode,
    CycleConfig,
    InvalidArgumentsError,
    LlmCycle,
    McpClient,
    McpToolInfo,
    StdioTransport,
    ToolContext,
    ToolRegistry,
    portable_schema,
)
from agcore_tools.mcp import McpTool
from agcore_tools.schema._validate import check_against_schema
from agcore_tools.testing import ScriptedChatServer as S

from .conftest import SERVERS

BRIDGE = SERVERS / "bridge_server.py"


def bridge() -> McpClient:
    return McpClient("pets", StdioTransport(sys.executable, [str(BRIDGE)]), timeout=15)


async def received(client: McpClient) -> list[list[Any]]:
    """The calls the server got, as [tool, arguments]."""
    got: list[list[Any]] = json.loads(await client.call_tool("received"))
    return got


@pytest.mark.parametrize(
    ("tool", "args", "reason"),
    [
        # Once sent as DELETE /pets/three by an OpenAPI bridge.
        ("delete_pet", {"petId": "three"}, "petId: 'three' is not of type 'integer'"),
        # A digit string is refused too: the model sends the number next (the guide says why).
        ("delete_pet", {"petId": "3"}, "petId: '3' is not of type 'integer'"),
        ("delete_pet", {}, "'petId' is a required property"),
        # Once sent on as a query parameter, under additionalProperties: false.
        (
            "list_pets",
            {"limit": 1, "bogus": True},
            "Additional properties are not allowed ('bogus' was unexpected)",
        ),
        (
            "add_pet",
            {"name": "Rex", "owner": {"email": "a@b.c", "pin": "4242"}},
            "owner: Additional properties are not allowed ('pin' was unexpected)",
        ),
    ],
)
async def test_arguments_that_break_the_schema_are_refused_and_never_sent(
    tool: str, args: dict[str, Any], reason: str
) -> None:
    registry = ToolRegistry()
    async with bridge() as client:
        registry.register_all(client.into_tools(prefix=True))
        refused = await registry.invoke(f"pets__{tool}", args)
        adapter = registry.get(f"pets__{tool}")
        assert adapter is not None
        # A direct call of the adapter is checked the same way.
        with pytest.raises(InvalidArgumentsError):
            await adapter.execute(args, ToolContext())
        assert await received(client) == []
    error = refused.error
    assert type(error) is InvalidArgumentsError
    assert str(error) == f"tool 'pets__{tool}' got invalid arguments: {reason}"
    assert error.is_recoverable() and refused.may_have_run is False
    # Spans and logs without content capture read the rule, never a value or a key the
    # model wrote.
    assert error.redacted.endswith("' rule failed")
    for written in ("three", "'3'", "bogus", "pin", "4242"):
        assert written not in error.redacted


async def test_valid_arguments_are_sent_as_they_are() -> None:
    registry = ToolRegistry()
    async with bridge() as client:
        registry.register_all(client.into_tools(prefix=True))
        done = await registry.invoke("pets__delete_pet", {"petId": 3})
        listed = await registry.invoke("pets__list_pets", {"limit": 2, "tag": "dog"})
        assert await received(client) == [
            ["delete_pet", {"petId": 3}],
            ["list_pets", {"limit": 2, "tag": "dog"}],
        ]
    assert done.output == "DELETE /pets/3" and listed.output == "GET /pets?limit=2&tag=dog"


async def test_strict_modes_nulls_are_dropped_before_the_check() -> None:
    # In strict mode the model sends null for each optional property, nested ones too;
    # the server's schema allows no null there. What is checked is what is sent: the
    # arguments once the nulls are dropped, against the server's schema (in the strict
    # form the model reads, every property is required).
    registry = ToolRegistry(strict=True)
    async with bridge() as client:
        registry.register_all(client.into_tools(prefix=True))
        [definition] = [
            d for d in registry.definitions() if d["function"]["name"] == "pets__add_pet"
        ]
        assert definition["function"]["strict"] is True
        sent = {"name": "Rex", "tag": None, "owner": {"email": "a@b.c", "phone": None}}
        done = await registry.invoke("pets__add_pet", sent)
        assert done.ok, done.error
        assert await received(client) == [["add_pet", {"name": "Rex", "owner": {"email": "a@b.c"}}]]


async def test_the_servers_own_schema_is_checked_not_the_transformed_one() -> None:
    # portable_schema moves `maximum` into the description the model reads; the
    # server's schema still has it, and the call is checked against that.
    registry = ToolRegistry(schema_transforms=[portable_schema])
    async with bridge() as client:
        registry.register_all(client.into_tools(prefix=True))
        [definition] = [
            d for d in registry.definitions() if d["function"]["name"] == "pets__list_pets"
        ]
        assert "maximum" not in definition["function"]["parameters"]["properties"]["limit"]
        refused = await registry.invoke("pets__list_pets", {"limit": 500})
        assert await received(client) == []
    assert str(refused.error) == (
        "tool 'pets__list_pets' got invalid arguments: limit: 500 is greater than the "
        "maximum of 100"
    )


async def test_decimal_amounts_are_exact_multiples_and_are_sent() -> None:
    # jsonschema divides in binary floating point, where 19.99 / 0.01 is
    # 1998.9999999999998: money amounts the server takes were refused, never sent.
    registry = ToolRegistry()
    amounts = [19.99, 0.07, 4.35, 12.34]
    async with bridge() as client:
        registry.register_all(client.into_tools(prefix=True))
        done = [await registry.invoke("pets__refund", {"amount": a}) for a in amounts]
        refused = await registry.invoke("pets__refund", {"amount": 0.005})
        assert await received(client) == [["refund", {"amount": a}] for a in amounts]
    assert [d.output for d in done] == [f'POST /refunds {{"amount": {a}}}' for a in amounts]
    assert str(refused.error) == (
        "tool 'pets__refund' got invalid arguments: amount: 0.005 is not a multiple of 0.01"
    )


async def test_null_for_an_openapi_nullable_property_is_sent() -> None:
    # OpenAPI 3.0 bridges copy `"nullable": true` verbatim: the model reads it, and the
    # server takes null; JSON Schema alone refused it ("None is not of type 'string'").
    registry = ToolRegistry()
    async with bridge() as client:
        registry.register_all(client.into_tools(prefix=True))
        done = await registry.invoke("pets__refund", {"amount": 5, "note": None})
        refused = await registry.invoke("pets__refund", {"amount": 5, "note": 7})
        assert await received(client) == [["refund", {"amount": 5, "note": None}]]
    assert done.ok, done.error
    assert str(refused.error) == (
        "tool 'pets__refund' got invalid arguments: note: 7 is not of type 'string'"
    )


REFUND = {
    "type": "object",
    "properties": {
        "amount": {"type": "number", "multipleOf": 0.01},
        "note": {"type": "string", "nullable": True},
        "kind": {"type": "string", "enum": ["full", "part"], "nullable": True},
    },
}


@pytest.mark.parametrize("draft", [None, "http://json-schema.org/draft-04/schema#"])
@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({"amount": 19.99, "note": None}, None),
        ({"amount": 0.07}, None),
        ({"amount": 4.35}, None),
        ({"amount": 1e300}, None),
        ({"amount": 0.005}, "amount: 0.005 is not a multiple of 0.01"),
        ({"amount": float("nan")}, "amount: nan is not a multiple of 0.01"),
        # OpenAPI 3.0.3: nullable adds null to the type; an enum without null still holds.
        ({"kind": None}, "kind: None is not one of ['full', 'part']"),
    ],
)
def test_an_approvals_edit_and_a_workflows_edit_are_checked_the_same_way(
    draft: str | None, args: dict[str, Any], reason: str | None
) -> None:
    # An approval's edit is checked by the tool's check_arguments, a Temporal run's
    # approve signal by check_against_schema: both as the call would be before it is sent.
    schema = dict(REFUND, **({"$schema": draft} if draft else {}))
    tool = McpTool(
        McpClient("shop", StdioTransport("unused")),
        McpToolInfo("refund", input_schema=schema),
        "refund",
        [],
    )
    for check in (tool.check_arguments, lambda a: check_against_schema("refund", schema, a)):
        if reason is None:
            check(args)
        else:
            with pytest.raises(InvalidArgumentsError) as refused:
                check(args)
            assert str(refused.value) == f"tool 'refund' got invalid arguments: {reason}"


async def test_the_model_reads_what_is_wrong_and_its_next_call_is_sent() -> None:
    registry = ToolRegistry()
    script = [
        S.reply_tool_calls([("pets__delete_pet", {"petId": "all"}, "call_wrong")]),
        S.reply_tool_calls([("pets__delete_pet", {"petId": 7}, "call_right")]),
        S.reply_text("done"),
    ]
    async with bridge() as client:
        registry.register_all(client.into_tools(prefix=True))
        with S(script) as server:
            cycle = LlmCycle(CycleConfig("test-model"), client=server.client(timeout=10.0))
            try:
                response = await cycle.submit_with_tools("delete pet 7", registry)
            finally:
                await asyncio.wait_for(cycle.client.close(), 5)
            last = server.requests[-1].json
        assert await received(client) == [["delete_pet", {"petId": 7}]]
    assert response.text == "done"
    answers = {m["tool_call_id"]: m["content"] for m in last["messages"] if m["role"] == "tool"}
    assert answers == {
        "call_wrong": "Error: tool 'pets__delete_pet' got invalid arguments: petId: 'all' is "
        "not of type 'integer'",
        "call_right": "DELETE /pets/7",
    }
    [wrong, _] = response.invocations
    assert wrong.may_have_run is False


async def test_a_code_mode_programs_call_is_checked_too() -> None:
    pytest.importorskip("pydantic_monty")
    code = (
        "try:\n"
        "    await pets__delete_pet('three')\n"
        "except Exception as exc:\n"
        "    print('caught:', exc)\n"
        "print(await pets__delete_pet(4))\n"
    )
    registry = ToolRegistry()
    script = [
        S.reply_tool_calls([("run_python", {"code": code}, "c_prog")]),
        S.reply_text("done"),
    ]
    async with bridge() as client:
        registry.register_all(client.into_tools(prefix=True))
        with S(script) as server:
            cycle = LlmCycle(CycleConfig("test-model"), client=server.client(timeout=10.0))
            try:
                await cycle.submit_with_tools("go", registry, select=CodeMode())
            finally:
                await asyncio.wait_for(cycle.client.close(), 5)
            last = server.requests[-1].json
        assert await received(client) == [["delete_pet", {"petId": 4}]]
    [output] = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    assert output.startswith(
        "caught: tool 'pets__delete_pet' got invalid arguments: petId: 'three' is not of "
        "type 'integer'\nDELETE /pets/4"
    )


TALLY = McpToolInfo(
    "tally",
    input_schema={
        "type": "object",
        "properties": {
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            "pin": {"type": "string", "maxLength": 4},
        },
        "additionalProperties": False,
    },
)


@pytest.mark.parametrize(
    ("args", "reason", "redacted"),
    [
        (
            {"counts": {"acct 99-1234": "SECRET"}},
            "counts/acct 99-1234: 'SECRET' is not of type 'integer'",
            "counts/*: the 'type' rule failed",
        ),
        ({"pin": "123456"}, "pin: '123456' is too long", "pin: the 'maxLength' rule failed"),
        (
            {"note ssn 078-05-1120": 1},
            "Additional properties are not allowed ('note ssn 078-05-1120' was unexpected)",
            "the 'additionalProperties' rule failed",
        ),
    ],
)
def test_a_refusal_for_spans_and_logs_holds_no_value_or_key_the_model_wrote(
    args: dict[str, object], reason: str, redacted: str
) -> None:
    # The model reads the values to correct them; spans and logs recorded without
    # content capture (and an approval's ApprovalError built from it) used to get them too.
    tool = McpTool(McpClient("demo", StdioTransport("unused")), TALLY, "demo__tally", [])
    with pytest.raises(InvalidArgumentsError) as refused:
        tool.check_arguments(args)
    assert str(refused.value) == f"tool 'demo__tally' got invalid arguments: {reason}"
    assert refused.value.redacted == f"tool 'demo__tally' got invalid arguments: {redacted}"


async def test_a_huge_value_is_quoted_back_to_the_model_as_a_short_excerpt() -> None:
    # jsonschema's messages quote the whole value: a model that sent a megabyte read a
    # megabyte back in the tool's result.
    huge = "three" * 200_000
    registry = ToolRegistry()
    script = [
        S.reply_tool_calls([("pets__delete_pet", {"petId": huge}, "call_huge")]),
        S.reply_text("done"),
    ]
    async with bridge() as client:
        registry.register_all(client.into_tools(prefix=True))
        with S(script) as server:
            cycle = LlmCycle(CycleConfig("test-model"), client=server.client(timeout=10.0))
            try:
                await cycle.submit_with_tools("delete pet three", registry)
            finally:
                await asyncio.wait_for(cycle.client.close(), 5)
            last = server.requests[-1].json
        assert await received(client) == []
    [answer] = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    assert answer == (
        f"Error: tool 'pets__delete_pet' got invalid arguments: petId: {huge[:70]!r}... "
        "(1000000 characters) is not of type 'integer'"
    )


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({"pin": "1" * 5000}, f"pin: {'1' * 70!r}... (5000 characters) is too long"),
        (
            {"counts": {"k" * 5000: "many"}},
            f"counts/{'k' * 70}... (5000 characters): 'many' is not of type 'integer'",
        ),
        (
            {"counts": {"a": list(range(5000))}},
            f"counts/a: {str(list(range(5000)))[:70]}... (5000 items) is not of type 'integer'",
        ),
    ],
)
def test_long_values_and_keys_are_cut_in_the_refusal_naming_the_field_and_the_rule(
    args: dict[str, object], reason: str
) -> None:
    tool = McpTool(McpClient("demo", StdioTransport("unused")), TALLY, "demo__tally", [])
    with pytest.raises(InvalidArgumentsError) as refused:
        tool.check_arguments(args)
    assert str(refused.value) == f"tool 'demo__tally' got invalid arguments: {reason}"
    assert refused.value.errors == [(reason.split(": ", 1)[0], reason.split(": ", 1)[1])]


def test_many_bad_entries_list_the_first_problems_and_count_the_rest() -> None:
    # Each problem is short, but an array of 100,000 bad items made 100,000 of them.
    schema = {
        "type": "object",
        "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
    }
    info = McpToolInfo("purge", input_schema=schema)
    tool = McpTool(McpClient("demo", StdioTransport("unused")), info, "demo__purge", [])
    with pytest.raises(InvalidArgumentsError) as refused:
        tool.check_arguments({"ids": ["x"] * 1000})
    errors = refused.value.errors
    assert errors[:20] == [(f"ids/{i}", "'x' is not of type 'integer'") for i in range(20)]
    assert errors[20:] == [("...", "980 more problems not listed")]
    # The message lists the first 20 (the best match first), then counts the rest.
    message = str(refused.value)
    assert message.count("is not of type 'integer'") == 20 and message.endswith("; and 980 more")


def test_every_bad_field_is_named_so_the_model_fixes_them_in_one_turn() -> None:
    # Only jsonschema's best match was named; a function tool's message names each.
    schema = {
        "type": "object",
        "properties": {"identifier": {"type": "string"}, "page": {"type": "integer"}},
    }
    info = McpToolInfo("read", input_schema=schema)
    tool = McpTool(McpClient("demo", StdioTransport("unused")), info, "demo__read", [])
    with pytest.raises(InvalidArgumentsError) as refused:
        tool.check_arguments({"identifier": 5, "page": "two"})
    assert str(refused.value) == (
        "tool 'demo__read' got invalid arguments: page: 'two' is not of type 'integer'; "
        "identifier: 5 is not of type 'string'"
    )


def test_a_long_unexpected_key_is_cut_keeping_the_rule() -> None:
    tool = McpTool(McpClient("demo", StdioTransport("unused")), TALLY, "demo__tally", [])
    with pytest.raises(InvalidArgumentsError) as refused:
        tool.check_arguments({"note " * 10_000: 1})
    reason = refused.value.reason
    assert reason.startswith("Additional properties are not allowed ('note note")
    assert reason.endswith("note ' was unexpected)") and len(reason) <= 400


def test_a_union_every_shape_of_which_needs_one_key_names_that_key() -> None:
    # An anyOf of content blocks that each require "type" (@mcp-z/mcp-pdf's pdf-document):
    # jsonschema's best match does not choose among tied branches, and the model read
    # only "is not valid under any of the given schemas", not what to add.
    block = {
        "anyOf": [
            {"type": "object", "required": ["type", "text"]},
            {"type": "object", "required": ["type", "url"]},
        ]
    }
    schema = {"type": "object", "properties": {"content": {"type": "array", "items": block}}}
    info = McpToolInfo("write", input_schema=schema)
    tool = McpTool(McpClient("demo", StdioTransport("unused")), info, "demo__write", [])
    with pytest.raises(InvalidArgumentsError) as refused:
        tool.check_arguments({"content": [{"text": "hi"}]})
    assert refused.value.reason == (
        "content/0: {'text': 'hi'} is not valid under any of the given schemas; "
        "in every one: 'type' is a required property"
    )
    assert refused.value.redacted.endswith("content/0: the 'anyOf' rule failed")
    # Branches that refuse for different reasons only: the message is jsonschema's.
    with pytest.raises(InvalidArgumentsError) as refused:
        tool.check_arguments({"content": [{"type": "text"}]})
    assert refused.value.reason == (
        "content/0: {'type': 'text'} is not valid under any of the given schemas"
    )
