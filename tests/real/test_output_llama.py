"""Structured final output against llama-cpp-python's OpenAI-compatible server.

This server constrains the model with a grammar made from the schema, but only for
``response_format={"type": "json_object", "schema": ...}``: its request model refuses
``"json_schema"`` (a 500 whose body names the accepted types). So the guide's advice for
it is ``StructuredOutput(..., mode="json_object")``, or ``mode="tool"`` (a forced tool
call, grammar-constrained too). SmolLM2-135M knows little, so the tests check that the
answer has the type asked for, not that it is true.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from agcore_tools import CycleConfig, LlmCycle, LlmError, StructuredOutput, ToolRegistry

from ..cycle.conftest import assert_history_valid
from .conftest import RealServer

MODES = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
pytestmark = pytest.mark.timeout(300)


class Weather(BaseModel):
    city: str
    celsius: int


def make_cycle(server: RealServer, client: Any, **options: Any) -> LlmCycle:
    config = CycleConfig(server.model, temperature=0, seed=0, max_tokens=64, **options)
    return LlmCycle(config, client=client)


@MODES
async def test_json_object_mode_is_grammar_constrained_to_the_type(
    llama_server, llama_client, tools, stream
):
    cycle = make_cycle(llama_server, llama_client)
    output = StructuredOutput(Weather, mode="json_object", retries=0)

    if stream:
        events = cycle.submit_stream_with_tools("Weather in Paris?", tools, output_type=output)
        response = await events.collect()
    else:
        response = await cycle.submit_with_tools("Weather in Paris?", tools, output_type=output)

    assert isinstance(response.output, Weather)
    assert Weather.model_validate_json(response.text) == response.output
    assert response.turns == 1
    assert tools.runs == []  # type: ignore[attr-defined]


async def test_tool_mode_gets_the_answer_from_a_forced_final_result_call(
    llama_server, llama_client
):
    cycle = make_cycle(llama_server, llama_client)
    output = StructuredOutput(list[int], mode="tool", retries=0)

    response = await cycle.submit("Three small prime numbers?", output_type=output)

    assert isinstance(response.output, list)
    assert all(isinstance(n, int) for n in response.output)
    [call] = response.message["tool_calls"]
    assert call["function"]["name"] == "final_result"
    assert_history_valid(cycle.messages)


async def test_json_schema_mode_is_refused_by_this_server(llama_server, llama_client):
    cycle = make_cycle(llama_server, llama_client, max_retries=0, adapt=False)
    output = StructuredOutput(Weather, mode="json_schema", retries=0)

    with pytest.raises(LlmError, match="json_object"):
        await cycle.submit_with_tools("Weather in Paris?", ToolRegistry(), output_type=output)


async def test_a_refused_json_schema_falls_back_to_json_object(llama_server, llama_client):
    # OpenAI's profile, so native json_schema is sent; the server's 500 names
    # response_format, and the loop asks again with json_object, once.
    cycle = make_cycle(llama_server, llama_client, profile="openai")
    output = StructuredOutput(Weather, mode="json_schema", retries=0)

    response = await cycle.submit("Weather in Paris?", output_type=output)

    assert isinstance(response.output, Weather)


async def test_a_bare_output_type_works_unchanged_the_server_told_by_its_model_list(
    llama_server, llama_client, caplog
):
    # The structured output guide's structured-readme snippet, no mode and no profile given: the model
    # list tells llama-cpp-python's server, whose profile asks for json_object.
    cycle = make_cycle(llama_server, llama_client)

    with caplog.at_level("INFO", logger="agcore_tools.cycle"):
        response = await cycle.submit("Weather in Paris?", output_type=Weather)

    assert isinstance(response.output, Weather)
    assert "server profile 'llama-cpp-python' (from the server)" in caplog.text
