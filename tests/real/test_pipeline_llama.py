"""``grammar_safe_schema`` against a real llama-cpp-python server.

The schemas below reproduce what three excel tools of a real MCP server sent: an enum
value containing ``"``, ``maxItems: 10000`` and ``maxLength: 8192``. Forced, each one
makes llama.cpp fail to parse the grammar it is turned into, and the server process dies
(a segmentation fault): every later request gets a connection error. Each crash is shown
once, on a server of its own. Then every schema, through the pipeline, is sent alone and
forced to one shared server, which answers each with a call and stays up.

The servers come from :func:`tests.real.conftest.start_llama_server` (SmolLM2-135M in
the agcore-tools cache); missing either, the tests are skipped (failed under CI).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agcore_tools import BaseTool, ToolContext, ToolRegistry, grammar_safe_schema, portable_schema

from .conftest import RealServer, start_llama_server, supervised

pytestmark = pytest.mark.timeout(300)


def _object(prop: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"value": prop}, "required": ["value"]}


CRASHING = {
    "enum_with_quote": _object({"type": "string", "enum": ['Sheet "A"', "Sheet B"]}),
    "max_items_10000": _object({"type": "array", "items": {"type": "string"}, "maxItems": 10_000}),
    "max_length_8192": _object({"type": "string", "maxLength": 8192}),
    "property_name_with_quote": {
        "type": "object",
        "properties": {'cell "A1"': {"type": "string"}},
        "required": ['cell "A1"'],
    },
}
SCHEMAS = {
    **CRASHING,
    # Not anchored: llama-cpp-python cannot convert it and drops the grammar silently.
    "unanchored_pattern": _object({"type": "string", "pattern": "[A-Z]{3}[0-9]+"}),
    "const_with_quote": _object({"const": 'a "quoted" value'}),
    "defs_and_narrowing": {
        "type": "object",
        "$defs": {"Cell": {"type": "string", "pattern": "[A-Z]+[0-9]+", "maxLength": 5000}},
        "properties": {"cell": {"$ref": "#/$defs/Cell"}, "rows": {"type": "integer"}},
        "required": ["cell"],
    },
}


@pytest.fixture(scope="module")
def shared_server() -> Iterator[RealServer]:
    with supervised(start_llama_server()) as server:
        yield server


class ExcelTool(BaseTool):
    """A tool whose schema is given as is, as an MCP server sends it."""

    def __init__(self, name: str, parameters: dict[str, Any]) -> None:
        self.name = name
        self.description = "Write a value to the sheet."
        self.parameters = parameters

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return "done"


def _forced_call(server: RealServer, definitions: list[dict[str, Any]]) -> Any:
    from openai import OpenAI

    with OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=60) as client:
        return client.chat.completions.create(
            model="test",
            messages=[{"role": "user", "content": "Write the value."}],
            tools=definitions,  # type: ignore[arg-type]
            tool_choice={
                "type": "function",
                "function": {"name": definitions[0]["function"]["name"]},
            },
            max_tokens=24,
            temperature=0,
        )


@pytest.mark.parametrize("case", sorted(CRASHING))
def test_the_raw_schema_kills_the_server(case: str) -> None:
    import openai

    registry = ToolRegistry()
    registry.register(ExcelTool(case, CRASHING[case]))
    server = start_llama_server()
    try:
        with pytest.raises(openai.APIConnectionError):
            _forced_call(server, registry.definitions())
        assert server.process.wait(30) != 0
        assert any("error parsing grammar" in line for line in server.output), server.output[-5:]
    finally:
        server.stop()


def test_every_schema_through_the_pipeline_is_accepted(shared_server: RealServer) -> None:
    registry = ToolRegistry(schema_transforms=[portable_schema, grammar_safe_schema])
    for case, schema in SCHEMAS.items():
        registry.register(ExcelTool(case, schema))
    answered = []
    for definition in registry.definitions():
        response = _forced_call(shared_server, [definition])
        [call] = response.choices[0].message.tool_calls
        assert call.function.name == definition["function"]["name"]
        assert call.function.arguments.lstrip().startswith("{")
        answered.append(call.function.name)
    assert answered == list(SCHEMAS)
    assert shared_server.process.poll() is None
    assert not [line for line in shared_server.output if "error parsing grammar" in line]
