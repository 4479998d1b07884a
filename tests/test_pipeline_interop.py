"""The schema pipeline on the recorded tools of 21 third-party MCP servers.

``benchmarks/data/interop/<server>.json`` holds each server's ``tools/list`` answer as
the server sent it (``benchmarks/record_interop.py``). Each tool is registered the way
``McpClient.into_tools(prefix=True)`` registers it, and its definition is built through
the pipelines the guides recommend. ``tests/real/test_interop_llama.py`` sends the
grammar-safe ones to a real llama-cpp-python server.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest

from agcore_tools import grammar_safe_schema, portable_schema
from agcore_tools._listing import python_signatures
from agcore_tools.schema import GRAMMAR_BOUND_LIMIT
from agcore_tools.schema._jsonschema import subschemas

from ._interop import EVERY_SERVER, SERVERS, recorded, registry_of

# The keywords llama-cpp-python's grammar converter tells a value's kind by.
KINDS = ("type", "$ref", "anyOf", "oneOf", "allOf", "const", "enum", "properties", "items")
KINDS += ("prefixItems", "pattern")


def hazards(schema: dict[str, Any]) -> list[str]:
    """Constructs known to break llama-cpp-python: a ``"`` in an enum or const value or
    a property name (the server exits), a length or count bound over the limit (a
    repetition llama.cpp refuses), an unanchored ``pattern`` or a node that names no
    kind of value, as ``{}`` or ``{"description": ...}`` (the grammar is dropped, or
    allows objects only)."""
    found = []
    if not any(key in schema for key in KINDS):
        found.append(f"no kind in {sorted(schema)}")
    values = list(schema.get("enum") or []) + ([schema["const"]] if "const" in schema else [])
    found += [f"enum value {v!r}" for v in values if isinstance(v, str) and '"' in v]
    found += [f"property {p!r}" for p in schema.get("properties") or {} if '"' in p]
    for key in ("minLength", "maxLength", "minItems", "maxItems"):
        if isinstance(schema.get(key), int) and schema[key] > GRAMMAR_BOUND_LIMIT:
            found.append(f"{key}: {schema[key]}")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and not (pattern.startswith("^") and pattern.endswith("$")):
        found.append(f"pattern {pattern!r}")
    for _, sub in subschemas(schema):
        found += hazards(sub)
    return found


def test_the_sweep_is_recorded() -> None:
    # Every server of issue 10 answered, with its package and version written down.
    assert len(SERVERS) == 21
    for server in SERVERS:
        data = recorded(server)
        assert data["server"] == server
        assert data["package"] and data["version"]
        assert data["tools"], server


def test_the_raw_schemas_do_contain_the_hazards() -> None:
    # What the grammar-safe test below removes is really there before the pipeline.
    found = [
        h
        for s in SERVERS
        for d in registry_of(s).definitions()
        for h in hazards(d["function"]["parameters"])
    ]
    assert any(h.startswith("enum value") for h in found)
    assert any(h.startswith(("maxItems", "maxLength")) for h in found)
    assert any(h.startswith("pattern") for h in found)
    assert any(h.startswith("no kind") for h in found)


@pytest.mark.parametrize("server", EVERY_SERVER)
def test_every_schema_passes_the_grammar_pipeline_without_a_hazard(server: str) -> None:
    registry = registry_of(server, schema_transforms=[portable_schema, grammar_safe_schema])
    definitions = registry.definitions()
    assert len(definitions) == len(recorded(server)["tools"])
    for definition in definitions:
        assert hazards(definition["function"]["parameters"]) == [], definition["function"]["name"]


@pytest.mark.parametrize("server", EVERY_SERVER)
def test_every_schema_passes_the_strict_pipeline(server: str) -> None:
    # What strict mode cannot describe is offered non-strict (logged), never an error.
    registry = registry_of(server, strict=True, schema_transforms=[portable_schema])
    definitions = registry.definitions()
    assert len(definitions) == len(recorded(server)["tools"])
    for definition in definitions:
        parameters = definition["function"]["parameters"]
        assert parameters.get("type") == "object"
        if definition["function"].get("strict"):
            assert parameters.get("additionalProperties") is False
            assert set(parameters.get("properties") or {}) == set(parameters.get("required") or [])


@pytest.mark.parametrize("server", EVERY_SERVER)
def test_every_tool_becomes_a_code_mode_stub_that_parses_as_python(server: str) -> None:
    # run_python's description lists the tools as Python; descriptions hold backslashes
    # and quotes, and parameters are named "from" or "api-version".
    # Their output schemas (662 of the 1,477 tools have one) give the return types.
    registry = registry_of(server)
    definitions = registry.definitions()
    outputs = {name: registry.get(name).output_schema for name in registry.list_tools()}
    text, names = python_signatures(definitions, outputs)
    stubs = [node for node in ast.parse(text).body if isinstance(node, ast.AsyncFunctionDef)]
    assert [names[stub.name] for stub in stubs] == [d["function"]["name"] for d in definitions]
    for stub in stubs:
        shown = ast.unparse(stub.returns) if stub.returns is not None else ""
        if outputs[names[stub.name]] is None:
            assert shown == "Any", stub.name
        else:  # MCP's output schemas are objects: "dict", or "dict[str, int]" for a map
            assert shown.startswith("dict"), (stub.name, shown)
