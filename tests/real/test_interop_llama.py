"""Every recorded tool of the interop sweep and of the search corpus, through the
grammar pipeline, to a real llama-cpp-python server: zero grammar crashes.

The tools are the ``tools/list`` answers of 21 third-party MCP servers recorded in
``benchmarks/data/interop`` (``benchmarks/record_interop.py``) and of 36 more in
``benchmarks/data/search_corpus`` (1,477 tools in all), registered as
``McpClient.into_tools(prefix=True)`` registers them, with
``schema_transforms=[portable_schema, grammar_safe_schema]``. Each definition is sent
alone, with ``tool_choice`` naming it, so the server turns its schema into a grammar.
Raw, three excel schemas kill the server (``test_pipeline_llama.py`` shows each crash);
here every request must be answered with a call to the tool, and the server must
still be up, with no "error parsing grammar" in its output, after each server's tools.
Each schema must also convert to a grammar in llama-cpp-python's own converter, which
the server would otherwise replace silently with plain JSON.

``max_tokens`` is tiny: the grammar is built before the first token, so a crash shows
at once, and the arguments (cut short) are not what is checked. The context is the
model's full 8192 tokens: the largest definitions (excel's ``create_chart``) need more
than the default 2048.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agcore_tools import grammar_safe_schema, portable_schema

from .._interop import EVERY_SERVER, recorded, registry_of
from .._odd_schemas import MALFORMED, UNUSUAL, registry_of_schemas
from .conftest import RealServer, start_llama_server, supervised

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

MAX_TOKENS = 4


@pytest.fixture(scope="module")
def server() -> Iterator[RealServer]:
    with supervised(start_llama_server(n_ctx=8192)) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: RealServer) -> Iterator[Any]:
    from openai import OpenAI

    with OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=120) as c:
        yield c


def _forced(client: Any, definition: dict[str, Any]) -> Any:
    name = definition["function"]["name"]
    return client.chat.completions.create(
        model="test",
        messages=[{"role": "user", "content": f"Use the tool {name}."}],
        tools=[definition],
        tool_choice={"type": "function", "function": {"name": name}},
        max_tokens=MAX_TOKENS,
        temperature=0,
    )


@pytest.mark.parametrize("name", EVERY_SERVER)
def test_every_tool_is_answered_and_the_server_survives(
    name: str, server: RealServer, client: Any
) -> None:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    registry = registry_of(name, schema_transforms=[portable_schema, grammar_safe_schema])
    definitions = registry.definitions()
    assert len(definitions) == len(recorded(name)["tools"])
    answered = []
    for definition in definitions:
        tool = definition["function"]["name"]
        # Raises where llama-cpp-python would drop the grammar without a word.
        json_schema_to_gbnf(json.dumps(definition["function"]["parameters"]))
        response = _forced(client, definition)
        [call] = response.choices[0].message.tool_calls
        assert call.function.name == tool
        assert call.function.arguments.lstrip().startswith("{"), (tool, call.function.arguments)
        answered.append(tool)
    assert answered == [d["function"]["name"] for d in definitions]
    assert server.process.poll() is None, "".join(server.output[-20:])
    assert not [line for line in server.output if "error parsing grammar" in line]


ODD = {**{name: schema for name, (schema, _) in MALFORMED.items()}, **UNUSUAL}
# The converter reads "required": "abc" as a, b and c, and never looks at a $defs that
# no $ref follows: these two convert raw (to a grammar that may be wrong).
CONVERTED_RAW = {"required_string", "defs_string"}


@pytest.mark.parametrize("name", ODD)
def test_an_odd_schema_reaches_the_server_with_its_grammar(
    name: str, server: RealServer, client: Any
) -> None:
    # Malformed, or valid JSON Schema the converter does not take (boolean subschemas,
    # "#" recursion, a reference to nothing): raw, each has no grammar; through the
    # pipeline, each converts and is answered.
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    if name not in CONVERTED_RAW:
        refused = (AssertionError, AttributeError, KeyError, TypeError, ValueError)
        with pytest.raises(refused):  # as the converter trips on each
            json_schema_to_gbnf(json.dumps(ODD[name]))
    registry = registry_of_schemas({name: ODD[name]}, [portable_schema, grammar_safe_schema])
    [definition] = registry.definitions()
    json_schema_to_gbnf(json.dumps(definition["function"]["parameters"]))
    response = _forced(client, definition)
    [call] = response.choices[0].message.tool_calls
    assert call.function.name == definition["function"]["name"]
    assert server.process.poll() is None, "".join(server.output[-20:])
    assert not [line for line in server.output if "error parsing grammar" in line]
