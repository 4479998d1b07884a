"""Weather and calculator tools with the full loop: ``LlmCycle.submit_with_tools``.

Run it with ``python examples/weather_calculator.py [prompt]``. The model calls the
tools (concurrently when it asks for several at once), reads their results and
answers; the script then prints the answer, each tool call, and the transcript
(``cycle.messages``, plain Chat Completions dicts).
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import operator
import sys
from typing import Annotated, Any

from _offline import model_client
from pydantic import Field

from agcore_tools import CycleConfig, LlmCycle, ToolRegistry
from agcore_tools.testing import ScriptedChatServer, ScriptItem

PROMPT = "How warm is it in Lima and in Nairobi, and what's the average of the two?"

registry = ToolRegistry()

STATIONS = {"lima": 19.5, "nairobi": 23.0, "oslo": 4.5}


@registry.tool(permissions=["network"])
async def get_weather(city: Annotated[str, Field(description="A city name, e.g. Lima")]) -> dict:
    """The current temperature in a city, in degrees Celsius."""
    await asyncio.sleep(0.05)  # stands in for a weather API call
    if city.lower() not in STATIONS:
        # The loop sends this error to the model as the tool's result; it can retry.
        raise ValueError(f"no station in {city!r}; try one of {sorted(STATIONS)}")
    return {"city": city, "celsius": STATIONS[city.lower()]}


_OPERATORS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    # In floats, which overflow at once: an exact power such as 9**9**9**9 would run for
    # hours holding the GIL, and no timeout could stop it.
    ast.Pow: math.pow,
    ast.USub: operator.neg,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported expression: {ast.unparse(node)}")


@registry.tool
def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression with + - * / ** and parentheses.

    Args:
        expression: For example "(19.5 + 23) / 2".
    """
    try:
        return _evaluate(ast.parse(expression, mode="eval").body)
    except OverflowError as exc:
        raise ValueError(f"{expression} is too large to compute (over about 1e308)") from exc


def offline_script() -> list[ScriptItem]:
    """Two weather calls at once, then the calculator, then the answer."""
    reply = ScriptedChatServer
    return [
        reply.reply_tool_calls(
            [("get_weather", {"city": "Lima"}), ("get_weather", {"city": "Nairobi"})]
        ),
        reply.reply_tool_calls([("calculate", {"expression": "(19.5 + 23.0) / 2"})]),
        reply.reply_text("Lima is at 19.5 °C and Nairobi at 23 °C; the average is 21.25 °C."),
    ]


async def main(argv: list[str]) -> None:
    prompt = " ".join(argv) or PROMPT
    async with model_client("weather and calculator", offline_script()) as (client, model):
        cycle = LlmCycle(CycleConfig(model, max_turns=6), client=client)
        response = await cycle.submit_with_tools(prompt, registry)

    print(f"user> {prompt}")
    print(f"assistant> {response.text}")
    print(f"\n{len(response.invocations)} tool calls in {response.turns} requests:")
    for call in response.invocations:
        outcome = call.output if call.ok else f"error: {call.error}"
        print(f"  {call.tool_name}({json.dumps(call.input)}) -> {outcome}")
    print("\ntranscript:")
    for message in cycle.messages:
        calls = [c["function"] for c in message.get("tool_calls", [])]
        text = message["content"] or ", ".join(f"{c['name']}({c['arguments']})" for c in calls)
        print(f"  {message['role']:>9}: {text}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
