"""Schemas a server may send that are malformed, or valid but unusual: shared by the
offline tests (``test_malformed_schemas.py``) and the real llama-cpp-python server's
(``real/test_interop_llama.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agcore_tools import McpClient, StdioTransport, ToolRegistry
from agcore_tools.mcp._adapter import make_adapters
from agcore_tools.mcp.models import McpToolInfo
from agcore_tools.schema import SchemaTransform

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
        "'a' is not a schema",
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
        "'a.anyOf' is not a list",
    ),
}

UNUSUAL: dict[str, dict[str, Any]] = {
    "boolean_properties": {
        "type": "object",
        "properties": {"any": True, "never": False, "q": {"type": "string"}},
        "required": ["q", "never"],
    },
    "boolean_items": {
        "type": "object",
        "properties": {
            "anything": {"type": "array", "items": True},
            "empty": {"type": "array", "items": False},
        },
    },
    "recursive_root": {  # zod-to-json-schema's z.lazy at the root
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
    },
    "missing_ref": {"type": "object", "properties": {"x": {"$ref": "#/$defs/Nowhere"}}},
    "remote_ref": {
        "type": "object",
        "properties": {"x": {"$ref": "https://example.com/schemas/x.json", "description": "An x."}},
    },
}
"""Valid JSON Schema that llama-cpp-python's grammar converter refuses as it is."""


def registry_of_schemas(
    schemas: dict[str, dict[str, Any]],
    schema_transforms: Sequence[SchemaTransform] = (),
    **options: Any,
) -> ToolRegistry:
    """Tools with these schemas, as ``McpClient.into_tools(prefix=True)`` registers a
    server's (server ``odd``)."""
    client = McpClient("odd", StdioTransport("never-started"))
    infos = [McpToolInfo(name, f"The {name} tool.", schema) for name, schema in schemas.items()]
    registry = ToolRegistry(schema_transforms=list(schema_transforms), **options)
    registry.register_all(make_adapters(client, infos, "odd", client.permission_policy))
    return registry
