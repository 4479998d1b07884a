"""The schema pipeline of ``ToolRegistry(schema_transforms=...)`` and its built-ins."""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

import pytest
from pydantic import Field

from agcore_tools import (
    BaseTool,
    InvalidArgumentsError,
    SchemaContext,
    ToolConfigError,
    ToolContext,
    ToolDefinitionError,
    ToolRegistry,
    grammar_safe_schema,
    portable_schema,
)
from agcore_tools.schema import GRAMMAR_BOUND_LIMIT

CTX = SchemaContext("t", "chat")


class SchemaTool(BaseTool):
    """A tool with a hand-written schema, as an MCP server would send it."""

    def __init__(self, name: str, parameters: dict[str, Any], permissions: Any = ()) -> None:
        self.name = name
        self.description = f"The {name} tool."
        self.parameters = parameters
        self.required_permissions = tuple(permissions)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return args


def _notion_like(name: str) -> dict[str, Any]:
    # notion's server copies every definition into every tool, used or not.
    defs = {
        f"Block{i}": {
            "type": "object",
            "title": f"Block{i}",
            "properties": {"text": {"type": "string", "maxLength": 2000}},
        }
        for i in range(40)
    }
    defs["Id"] = {"type": "string", "format": "uuid", "description": "A page id."}
    return {
        "type": "object",
        "$defs": defs,
        "properties": {"page_id": {"$ref": "#/$defs/Id"}, "block": {"$ref": "#/$defs/Block3"}},
        "required": ["page_id"],
    }


# -- portable ---------------------------------------------------------------------------


def test_portable_inlines_used_defs_and_drops_the_rest() -> None:
    schema = _notion_like("get_page")
    out = portable_schema(json.loads(json.dumps(schema)), CTX)
    assert "$defs" not in out
    assert out["properties"]["page_id"] == {
        "type": "string",
        "description": 'A page id. (format: "uuid")',
    }
    assert out["properties"]["block"]["properties"]["text"] == {
        "type": "string",
        "description": "(maxLength: 2000)",
    }
    assert len(json.dumps(out)) * 10 < len(json.dumps(schema))


def test_portable_keeps_a_recursive_reference_with_its_definition() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            },
            "Unused": {"type": "string"},
        },
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
    }
    out = portable_schema(schema, CTX)
    assert list(out["$defs"]) == ["Node"]
    assert out["properties"]["tree"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_portable_reads_oneof_as_anyof_and_drops_annotations() -> None:
    schema = {
        "type": "object",
        "title": "Args",
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {
            "when": {
                "oneOf": [{"type": "string", "format": "date"}, {"type": "integer"}],
                "default": 0,
                "examples": [1],
            }
        },
    }
    out = portable_schema(schema, CTX)
    assert out == {
        "type": "object",
        "properties": {
            "when": {
                "anyOf": [
                    {"type": "string", "description": '(format: "date")'},
                    {"type": "integer"},
                ],
                "description": "(default: 0)",
            }
        },
    }


def test_a_property_named_like_a_keyword_is_not_touched() -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "format": {}}}
    assert portable_schema(json.loads(json.dumps(schema)), CTX) == schema


# -- grammar-safe -----------------------------------------------------------------------


def test_grammar_safe_rewrites_what_breaks_llama_cpp() -> None:
    schema = {
        "type": "object",
        "properties": {
            "sheet": {"type": "string", "enum": ['Sheet "A"', "B"], "description": "Sheet."},
            "mark": {"const": 'say "x"'},
            "rows": {"type": "array", "items": {"type": "string"}, "maxItems": 10_000},
            "text": {"type": "string", "maxLength": 8192, "minLength": 1},
            "code": {"type": "string", "pattern": "[A-Z]{3}"},
            "ok": {"type": "string", "pattern": "^[a-z]+$", "maxLength": GRAMMAR_BOUND_LIMIT},
        },
    }
    out = grammar_safe_schema(schema, CTX)["properties"]
    assert out["sheet"] == {"type": "string", "description": 'Sheet. One of: "Sheet \\"A\\"", "B".'}
    assert out["mark"] == {"type": "string", "description": 'Exactly "say \\"x\\"".'}
    assert out["rows"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "(maxItems: 10000)",
    }
    assert out["text"] == {"type": "string", "minLength": 1, "description": "(maxLength: 8192)"}
    assert out["code"] == {"type": "string", "description": '(pattern: "[A-Z]{3}")'}
    assert out["ok"] == {"type": "string", "pattern": "^[a-z]+$", "maxLength": GRAMMAR_BOUND_LIMIT}


def test_grammar_safe_names_every_type_where_a_node_names_none() -> None:
    # llama-cpp-python's converter refuses these (pydantic's list[Any] raised a
    # KeyError there), or reads {} as objects only; each accepts any JSON value.
    registry = ToolRegistry(schema_transforms=[grammar_safe_schema])

    @registry.tool
    def store(values: list[Any], value: Any) -> str:
        """Store values."""
        return "ok"

    registry.register(
        SchemaTool("note", {"type": "object", "properties": {"v": {"description": "Any."}}})
    )
    anything = ["string", "number", "boolean", "object", "array", "null"]
    stored, noted = (d["function"]["parameters"]["properties"] for d in registry.definitions())
    assert stored["values"] == {"type": "array", "items": {"type": anything}}
    assert stored["value"] == {"type": anything}
    assert noted["v"] == {"type": anything, "description": "Any."}
    assert registry.invoke_sync("store", {"values": ["a", 1], "value": None}).output == "ok"


# -- the registry ------------------------------------------------------------------------


def test_the_pipeline_changes_what_the_model_reads_not_what_the_tool_accepts() -> None:
    registry = ToolRegistry(schema_transforms=[portable_schema])

    @registry.tool
    def lookup(code: Annotated[str, Field(min_length=3)]) -> str:
        """Look a code up."""
        return code

    [definition] = registry.definitions()
    assert definition["function"]["parameters"]["properties"]["code"] == {
        "type": "string",
        "description": "(minLength: 3)",
    }
    assert lookup.parameters["properties"]["code"]["minLength"] == 3
    invocation = registry.invoke_sync("lookup", {"code": "ab"})
    assert isinstance(invocation.error, InvalidArgumentsError)
    assert registry.invoke_sync("lookup", {"code": "abc"}).output == "abc"


def test_user_transforms_run_in_order_once_per_api_with_their_context() -> None:
    seen: list[tuple[str, SchemaContext]] = []

    def first(schema: dict[str, Any], ctx: SchemaContext) -> dict[str, Any]:
        seen.append(("first", ctx))
        schema["description"] = "first"
        return schema

    def second(schema: dict[str, Any], ctx: SchemaContext) -> dict[str, Any]:
        seen.append(("second", ctx))
        return {**schema, "description": schema["description"] + ", second"}

    tool = SchemaTool("mem__search", {"type": "object", "properties": {}})
    registry = ToolRegistry(schema_transforms=(first, second))
    registry.register(tool)
    for _ in range(3):
        chat = registry.definitions()
        flat = registry.definitions(api="responses")
    assert chat[0]["function"]["parameters"]["description"] == "first, second"
    assert flat[0]["parameters"]["description"] == "first, second"
    assert "description" not in tool.parameters  # the tool's own schema is untouched
    assert [(step, ctx.api) for step, ctx in seen] == [
        ("first", "chat"),
        ("second", "chat"),
        ("first", "responses"),
        ("second", "responses"),
    ]
    assert {ctx.tool_name for _, ctx in seen} == {"mem__search"}


def test_strict_runs_after_the_pipeline() -> None:
    registry = ToolRegistry(strict=True, schema_transforms=[portable_schema])
    registry.register(
        SchemaTool(
            "fetch",
            {
                "type": "object",
                "properties": {"url": {"type": "string", "format": "uri", "maxLength": 2048}},
                "required": ["url"],
            },
        )
    )
    [function] = [d["function"] for d in registry.definitions()]
    assert function["strict"] is True
    assert function["parameters"]["properties"]["url"] == {
        "type": "string",
        "description": '(maxLength: 2048; format: "uri")',
    }
    assert function["parameters"]["additionalProperties"] is False


def test_a_schema_strict_mode_cannot_describe_is_offered_non_strict_with_a_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry(strict=True, schema_transforms=[grammar_safe_schema])
    registry.register(SchemaTool("put", {"type": "object", "properties": {"value": {}}}))
    with caplog.at_level(logging.WARNING, "agcore_tools.registry"):
        [function] = [d["function"] for d in registry.definitions()]
    assert "strict" not in function
    anything = ["string", "number", "boolean", "object", "array", "null"]
    assert function["parameters"] == {"type": "object", "properties": {"value": {"type": anything}}}
    assert "tool 'put' is offered without strict mode: 'value' accepts any JSON value" in (
        caplog.text
    )


def test_a_failing_transform_names_the_tool_and_the_transform() -> None:
    def broken(schema: dict[str, Any], ctx: SchemaContext) -> dict[str, Any]:
        raise KeyError("properties")

    def wrong(schema: dict[str, Any], ctx: SchemaContext) -> dict[str, Any]:
        return None  # type: ignore[return-value]

    registry = ToolRegistry(schema_transforms=[broken])
    registry.register(SchemaTool("t", {"type": "object"}))
    with pytest.raises(ToolConfigError, match="schema transform broken failed on tool 't'") as e:
        registry.definitions()
    assert isinstance(e.value.__cause__, KeyError)
    registry = ToolRegistry(schema_transforms=[wrong])
    registry.register(SchemaTool("t", {"type": "object"}))
    with pytest.raises(ToolDefinitionError, match="returned NoneType for tool 't'"):
        registry.definitions()


def test_without_transforms_definitions_stay_as_they_were() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "minLength": 1}}}
    registry = ToolRegistry()
    registry.register(SchemaTool("q", schema))
    assert registry.definitions()[0]["function"]["parameters"] == schema


def test_grammar_safe_moves_a_property_named_with_a_quote_to_the_description() -> None:
    schema = {
        "type": "object",
        "properties": {'a"b': {"type": "string"}, "c": {"type": "integer"}},
        "required": ['a"b', "c"],
        "additionalProperties": False,
    }
    assert grammar_safe_schema(schema, CTX) == {
        "type": "object",
        "properties": {"c": {"type": "integer"}},
        "required": ["c"],
        "additionalProperties": True,
        "description": 'Also takes these properties: {"a\\"b": {"type": "string"}}. '
        'Required: ["a\\"b"].',
    }
