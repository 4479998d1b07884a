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

from agcore_tools import McpClient, StdioTransport, ToolRegistry
from agcore_tools._code_mode import python_signatures
from agcore_tools.mcp._adapter import make_adapters
from agcore_tools.mcp.models import McpToolInfo
from agcore_tools.schema import build_plan, required_names, strict_parameters
from agcore_tools.schema._jsonschema import malformed

GOOD = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

MALFORMED: dict[str, tuple[dict[str, Any], str]] = {
    "properties_list": (
        {"type": "object", "properties": [{"a": {"type": "string"}}]},
        "'properties' is not an object",
    ),
    "required_string": (
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": "abc"},
        "'required' is not a list of names",
    ),
    "required_odd": (
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", {"b": 1}]},
        "'required' is not a list of names",
    ),
    "defs_string": (
        {"type": "object", "$defs": "none", "properties": {"a": {"type": "string"}}},
        "'$defs' is not an object",
    ),
    "property_word": (
        {"type": "object", "properties": {"a": "string"}},
        "'properties.a' is not a schema",
    ),
    "nested_type_number": (
        {
            "type": "object",
            "properties": {"a": {"type": "object", "properties": {"b": {"type": 5}}}},
        },
        "'a.b.type' is not a type name or a list of them",
    ),
    "any_of_object": (
        {"type": "object", "properties": {"a": {"anyOf": {"type": "string"}}}},
        "'a.anyOf' is not a list of schemas",
    ),
}


def registry_of(schemas: dict[str, dict[str, Any]], **options: Any) -> ToolRegistry:
    """The tools as ``McpClient.into_tools(prefix=True)`` registers a server's."""
    client = McpClient("odd", StdioTransport("never-started"))
    infos = [McpToolInfo(name, f"The {name} tool.", schema) for name, schema in schemas.items()]
    registry = ToolRegistry(**options)
    registry.register_all(make_adapters(client, infos, "odd", client.permission_policy))
    return registry


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
    registry = registry_of({"good": GOOD, **schemas}, strict=True)
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
    definitions = registry_of(schemas).definitions()
    text, names = python_signatures(definitions)
    stubs = [node for node in ast.parse(text).body if isinstance(node, ast.AsyncFunctionDef)]
    assert len(stubs) == len(schemas)
    listed = {names[stub.name]: ast.unparse(stub.args) for stub in stubs}
    assert listed["odd__properties_list"] == ""  # no parameters it could name
    assert listed["odd__required_string"] == "a: str=None"  # optional: nothing is required
    assert listed["odd__empty_enum"] == "a: Any=None"
