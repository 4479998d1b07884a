"""What each tool costs, against llama-cpp-python's server (SmolLM2-135M,
``chatml-function-calling``): the accounting, and how its estimate of the prompt compares
with the ``prompt_tokens`` the server reports.

The estimate counts what the loop sent (messages and definitions, one token per 4 bytes:
tiktoken does not know this model). The server counts what its chat template renders,
with SmolLM2's tokenizer, and its template does not render what was sent: with a system
prompt and ``tool_choice`` it writes the definitions into the system prompt with
instructions around them (more tokens than sent); without ``tool_choice`` it leaves the
definitions out, and it always leaves tool results out (fewer). So each request misses
by far, in opposite directions; the run's sum lands near the reported one only because
the two cancel. Both are measured here; docs/guides/tool-policies.md has the figures.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agcore_tools import ChatResponse, CycleConfig, LlmCycle, ToolRegistry

from .conftest import RealServer

FORCE_ADD = {"type": "function", "function": {"name": "add"}}
SYSTEM = "You are a helpful assistant. Use the tools."
# A real model on a shared 2-core machine: allow more than the suite's 120 s per test.
pytestmark = pytest.mark.timeout(300)
logger = logging.getLogger(__name__)


async def forced_run(server: RealServer, client: Any, tools: ToolRegistry) -> ChatResponse:
    # The server's own profile (picked from its model list) forces the first request's
    # tool call and sends no tool_choice after it, so the run is: call add, then answer.
    config = CycleConfig(
        server.model, temperature=0, seed=0, max_tokens=48, max_turns=3, tool_choice=FORCE_ADD
    )
    cycle = LlmCycle(config, client=client, system_prompt=SYSTEM)
    return await cycle.submit_with_tools("What is 2 + 3?", tools)


async def test_tool_costs_and_the_run_gap(llama_server, llama_client, tools):
    response = await forced_run(llama_server, llama_client, tools)

    assert response.turns == 2 and [i.tool_name for i in response.invocations] == ["add"]
    costs = response.tool_costs
    add, weather = costs["add"], costs["get_weather"]
    assert (add.calls, add.failures, add.definition_requests) == (1, 0, 2)
    assert add.argument_tokens > 0 and add.result_tokens > 0
    assert weather.calls == 0 and weather.definition_requests == 2
    assert weather.argument_tokens == weather.result_tokens == 0
    stats = tools.entry("add").stats  # type: ignore[union-attr]
    assert (stats.definition_tokens, stats.argument_tokens, stats.result_tokens) == (
        add.definition_tokens,
        add.argument_tokens,
        add.result_tokens,
    )

    reconciliation = costs.reconcile()
    logger.info("llama-cpp-python, forced call with a system prompt: %s", reconciliation)
    assert (reconciliation.requests, reconciliation.unreported) == (2, 0)
    assert reconciliation.reported == response.usage.prompt_tokens
    # The target, over the run: measured +3.5 % (355 estimated, 343 reported).
    assert reconciliation.within(0.10), reconciliation


@pytest.mark.xfail(
    strict=True,
    reason="the server's template renders tool instructions around the definitions on "
    "the first request (measured -47 %) and drops definitions and tool results on the "
    "second (+178 %); no count of what was sent can match that per request",
)
async def test_each_request_reconciles(llama_server, llama_client, tools):
    response = await forced_run(llama_server, llama_client, tools)

    per_request = response.tool_costs.reconcile().per_request
    logger.info("llama-cpp-python, per request (estimate, reported): %s", per_request)
    assert len(per_request) == 2
    for estimate, reported in per_request:
        assert reported is not None and abs(estimate - reported) <= 0.10 * reported


async def test_without_a_system_prompt_the_definitions_are_not_in_the_prompt(
    llama_server, llama_client, tools
):
    # Measured, not a target: the template leaves the definitions out, so the estimate,
    # which counts them as sent, is several times what the server reports.
    config = CycleConfig(
        llama_server.model, temperature=0, seed=0, max_tokens=48, max_turns=3,
        tool_choice=FORCE_ADD,
    )  # fmt: skip
    response = await LlmCycle(config, client=llama_client).submit_with_tools(
        "What is 2 + 3?", tools
    )

    reconciliation = response.tool_costs.reconcile()
    logger.info("llama-cpp-python, no system prompt: %s", reconciliation)
    definitions = response.tool_costs.total.definition_tokens
    assert reconciliation.gap is not None and reconciliation.gap > 1.0
    # Without the definitions the estimate comes close: they are what the server left out.
    without = reconciliation.estimate - definitions
    assert abs(without - reconciliation.reported) < 0.5 * reconciliation.reported
