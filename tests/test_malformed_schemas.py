"""Schemas a server gets wrong: one malformed tool must not break the registry.

An MCP server's ``inputSchema`` is sent as the server wrote it. These are not valid
JSON Schema (``properties`` as a list, ``required`` as a string, a property whose
schema is the word ``"string"``), and a real server can send any of them. Every path
that reads a schema (strict mode, the argument plan, code mode's listing) must keep
working for the other tools and say what is wrong with this one.
"""

from __future__ import annotations

import ast
import logging
from typing import Any

import pytest

from agcore_tools import CycleConfig, LlmCycle, portable_schema
from agcore_tools._listing import python_signatures
from agcore_tools.schema import (
    SchemaContext,
    apply_transforms,
    build_plan,
    required_names,
    strict_parameters,
)
from agcore_tools.schema._jsonschema import malformed
from agcore_tools.testing import ScriptedChatServer

from ._odd_schemas import GOOD, MALFORMED, UNUSUAL, registry_of_schemas


@pytest.mark.parametrize("name", MALFORMED)
def test_each_malformation_is_named(name: str) -> None:
    schema, why = MALFORMED[name]
    assert malformed(schema) == why


def test_a_valid_schema_is_not_malformed() -> None:
    # Boolean subschemas and draft-07 tuples are valid JSON Schema.
    schema = {
        "type": "object",
        "properties": {"a": True, "b": {"type": "array", "items": [{"type": "string"}, False]}},
        "required": ["a"],
    }
    assert malformed(schema) is None


def test_strict_mode_offers_a_malformed_tool_non_strict_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    schemas = {name: schema for name, (schema, _) in MALFORMED.items()}
    registry = registry_of_schemas({"good": GOOD, **schemas}, strict=True)
    with caplog.at_level(logging.WARNING, logger="agcore_tools.registry"):
        definitions = {d["function"]["name"]: d["function"] for d in registry.definitions()}
    assert set(definitions) == {"odd__good"} | {f"odd__{name}" for name in MALFORMED}
    assert definitions["odd__good"]["strict"] is True
    for name, (schema, why) in MALFORMED.items():
        assert not definitions[f"odd__{name}"].get("strict"), name
        assert definitions[f"odd__{name}"]["parameters"] == schema  # sent as the server wrote it
        assert f"its schema is malformed: {why}" in caplog.text, name
    assert strict_parameters(MALFORMED["required_string"][0]) == (
        None,
        "its schema is malformed: 'required' is not a list of names",
    )


def test_a_required_string_is_not_read_letter_by_letter() -> None:
    # set("abc") would make a, b and c required, and keep a null the model sent for a.
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": "ab",
    }
    assert required_names(schema) == set()
    plan = build_plan(schema, check_extras=True)
    assert plan is not None
    assert plan.apply({"a": None, "b": "x"}) == ({"b": "x"}, [])
    assert required_names({"required": ["a", 3, None, "b"]}) == {"a", "b"}


def test_code_mode_lists_every_malformed_tool_as_python() -> None:
    schemas = {name: schema for name, (schema, _) in MALFORMED.items()}
    schemas["empty_enum"] = {"type": "object", "properties": {"a": {"enum": []}}}
    schemas["empty_one_of"] = {"type": "object", "properties": {"a": {"oneOf": []}}}
    definitions = registry_of_schemas(schemas).definitions()
    text, names = python_signatures(definitions)
    stubs = [node for node in ast.parse(text).body if isinstance(node, ast.AsyncFunctionDef)]
    assert len(stubs) == len(schemas)
    listed = {names[stub.name]: ast.unparse(stub.args) for stub in stubs}
    assert listed["odd__properties_list"] == ""  # no parameters it could name
    assert listed["odd__required_string"] == "a: str=None"  # optional: nothing is required
    assert listed["odd__empty_enum"] == "a: Any=None"


@pytest.mark.parametrize("name", MALFORMED)
def test_portable_schema_drops_what_is_malformed_and_says_so(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    schema, _ = MALFORMED[name]
    with caplog.at_level(logging.WARNING, logger="agcore_tools.registry"):
        portable = apply_transforms(schema, [portable_schema], SchemaContext(name, "chat"))
    assert malformed(portable) is None
    assert portable["type"] == "object"
    assert f"portable_schema: tool '{name}' has a malformed schema; dropped" in caplog.text


def test_portable_schema_keeps_what_is_well_formed_of_a_malformed_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": "string", "c": {"type": 5, "minimum": 1}},
        "required": ["a", {"b": 1}],
    }
    portable = apply_transforms(schema, [portable_schema], SchemaContext("t", "chat"))
    assert portable == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "c": {"description": "(minimum: 1)"}},
        "required": ["a"],
    }


def test_portable_schema_writes_boolean_schemas_and_odd_references_as_the_core_does() -> None:
    def portable(name: str) -> dict[str, Any]:
        return apply_transforms(UNUSUAL[name], [portable_schema], SchemaContext(name, "chat"))

    booleans = portable("boolean_properties")
    assert booleans["properties"] == {"any": {}, "q": {"type": "string"}}
    assert booleans["required"] == ["q"]  # a property that can never be sent is not required
    items = portable("boolean_items")["properties"]
    assert items == {
        "anything": {"type": "array"},
        "empty": {"type": "array", "description": "(maxItems: 0)"},
    }
    # "#" recursion becomes a definition of the root, which converters can resolve.
    tree = portable("recursive_root")
    assert tree["$defs"]["root"]["properties"]["children"]["items"] == {"$ref": "#/$defs/root"}
    assert tree["properties"]["children"]["items"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/root"
    }
    # A reference to nothing, or to another document, is any value, and the model is told.
    assert portable("missing_ref")["properties"]["x"] == {
        "description": "(a schema this one does not include: #/$defs/Nowhere)"
    }
    assert portable("remote_ref")["properties"]["x"] == {
        "description": "An x. (a schema this one does not include: https://example.com/schemas/x.json)"
    }


ROOT_DEFS: dict[str, Any] = {
    "Args": {"type": "object", "properties": {"at": {"$ref": "#/$defs/Place"}}, "required": ["at"]},
    "Place": {"type": "object", "properties": {"city": {"type": "string"}}},
}

# What some servers send that has one meaning, and that OpenAI refuses the whole request
# over: PHP's json_encode writes an empty map as [], a root may leave out its type.
UNAMBIGUOUS = {
    "php_empty_map": (
        {"type": "object", "properties": []},
        {"type": "object", "properties": {}},
    ),
    "php_nested": (
        {
            "type": "object",
            "properties": {"opts": {"type": "object", "properties": []}},
            "required": None,
        },
        {"type": "object", "properties": {"opts": {"type": "object", "properties": {}}}},
    ),
    "no_root_type": (
        {"properties": {"q": {"type": "string"}}},
        {"properties": {"q": {"type": "string"}}, "type": "object"},
    ),
    "nothing": ({}, {"type": "object", "properties": {}}),
    # Go's invopop/jsonschema, zod-to-json-schema with a `name`: the root is a reference.
    "root_ref": (
        {"$ref": "#/$defs/Args", "$defs": ROOT_DEFS},
        {"$defs": ROOT_DEFS, **ROOT_DEFS["Args"]},
    ),
    "no_properties": ({"type": "object"}, {"type": "object", "properties": {}}),
    # HubSpot's search: "array schema missing items", even without strict mode.
    "array_without_items": (
        {
            "type": "object",
            "properties": {
                "values": {"type": "array", "description": "Any values."},
                "rows": {"type": "array", "items": {"type": ["array", "null"]}},
            },
        },
        {
            "type": "object",
            "properties": {
                "values": {"type": "array", "description": "Any values.", "items": {}},
                "rows": {"type": "array", "items": {"type": ["array", "null"], "items": {}}},
            },
        },
    ),
}


def test_what_has_one_meaning_is_mended_before_the_model_sees_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="agcore_tools.mcp"):
        registry = registry_of_schemas({name: raw for name, (raw, _) in UNAMBIGUOUS.items()})
    definitions = {d["function"]["name"]: d["function"] for d in registry.definitions()}
    for name, (_, mended) in UNAMBIGUOUS.items():
        assert definitions[f"odd__{name}"]["parameters"] == mended, name
    assert "tool 'php_empty_map': input schema mended: 'properties': [] as {}" in caplog.text
    assert "'opts.properties': [] as {}; 'required': null dropped" in caplog.text
    assert "'values': items {} added; 'rows.items': items {} added" in caplog.text
    assert "tool 'root_ref': input schema mended: root $ref '#/$defs/Args' inlined" in caplog.text
    # Mended, the schema is well formed: strict mode takes it.
    raws = {name: UNAMBIGUOUS[name][0] for name in ("php_empty_map", "root_ref")}
    strict = registry_of_schemas(raws, strict=True)
    assert [d["function"]["strict"] for d in strict.definitions()] == [True, True]
    # A valid schema, a combinator at the root included, is sent as it was.
    union = {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]}
    plain = registry_of_schemas({"union": union, "good": GOOD}).definitions()
    assert [d["function"]["parameters"] for d in plain] == [union, GOOD]


async def test_the_request_carries_the_mended_schema() -> None:
    registry = registry_of_schemas({"ping": {"properties": []}})
    with ScriptedChatServer([ScriptedChatServer.reply_text("pong")]) as server:
        async with server.client() as client:
            cycle = LlmCycle(CycleConfig("gpt-4o"), client=client)
            response = await cycle.submit_with_tools("ping?", registry)
        [request] = server.requests
    assert response.text == "pong"
    [sent] = request.json["tools"]
    assert sent["function"]["parameters"] == {"properties": {}, "type": "object"}


def test_portable_schema_mends_what_has_one_meaning_as_the_adapter_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A local tool's schema meets the same mending as an MCP tool's, not a dropped key
    # and a warning: both paths give the model the same schema.
    raw, expected = UNAMBIGUOUS["php_nested"]
    with caplog.at_level(logging.INFO, logger="agcore_tools.registry"):
        portable = apply_transforms(raw, [portable_schema], SchemaContext("local", "chat"))
    assert portable == expected
    assert (
        "portable_schema: tool 'local': mended 'opts.properties': [] as {}; 'required': null dropped"
        in caplog.text
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
