"""LLM-loop benchmark: client-side time per turn of an automatic tool loop.

Run with the benchmark venv (``make bench`` creates it)::

    .venv-bench/bin/python benchmarks/bench_cycle.py

Every contender runs the same conversation against the same loopback
:class:`~agcore_tools.testing.ScriptedChatServer` (in this process, on its own thread):
3 requests per loop, the first two answered with parallel tool calls (3, then 2), the
last with text. Contenders:

- ``agcore LlmCycle``: ``submit_with_tools`` (and, for information, the streaming loop);
- ``raw OpenAI SDK loop``: a hand-written loop on ``chat.completions.create`` with
  ``asyncio.gather`` over the calls, the least any loop can do (and its streaming
  twin, the baseline of the streaming rows);
- ``openai-agents Runner``: ``Runner.run`` with ``OpenAIChatCompletionsModel`` on the
  same client, tracing off;
- the same three over the Responses API: ``CycleConfig(api="responses")``, a
  hand-written ``responses.create`` loop (``input += response.output``, and its
  streaming twin), and the Runner with ``OpenAIResponsesModel``. Each row is compared
  with the raw loop of its own API and mode.

Rounds are interleaved (order shuffled each round) so machine noise hits everyone
alike; figures are medians over rounds. "wall" is elapsed time per turn; "client CPU"
is the CPU time of the client's thread only (the server's thread excluded).

Options: ``--quick`` (fewer rounds), ``--rounds N``, ``--loops N`` (loops per batch),
``--only WORD`` (only the contenders whose name holds WORD, e.g. ``responses``; their
raw baselines hold it too), ``--json PATH`` (default
``benchmarks/results/bench_cycle.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from run_info import machine, versions

from agcore_tools import CycleConfig, LlmCycle, ToolRegistry
from agcore_tools.testing import CapturedRequest, ScriptedChatServer, ScriptItem

ROOT = Path(__file__).resolve().parent.parent
MODEL = "bench-model"
PROMPT = "Weather in Paris, Tokyo and Oslo, then add the temperatures."
TURNS_PER_LOOP = 3
MS = 1e3

_WEATHER = {"Paris": 18, "Tokyo": 24, "Oslo": 9}


# -- the tools, written once as plain functions ----------------------------------------


async def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "temp_c": _WEATHER.get(city, 20), "sky": "clear"}


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


# -- the script: chosen by how far the conversation is, so contenders can interleave -----

S = ScriptedChatServer
SCRIPT: list[ScriptItem] = [
    S.reply_tool_calls(
        [("get_weather", {"city": c}) for c in ("Paris", "Tokyo", "Oslo")],
        text="Checking the three cities.",
    ),
    S.reply_tool_calls([("add", {"a": 18, "b": 24}), ("add", {"a": 42, "b": 9})]),
    S.reply_text("Paris 18 °C, Tokyo 24 °C, Oslo 9 °C; together 51 °C."),
]


def by_progress(request: CapturedRequest) -> ScriptItem:
    body = request.json
    if "messages" in body:
        turn = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    else:  # Responses: one batch of function_call_output items per earlier tool turn
        kinds = [item.get("type") for item in body["input"]]
        turn = sum(
            1
            for i, kind in enumerate(kinds)
            if kind == "function_call_output" and kinds[i + 1 : i + 2] != ["function_call_output"]
        )
    return SCRIPT[turn]


# -- contenders ----------------------------------------------------------------------------

Loop = Callable[[], Awaitable[str]]


@dataclass
class Contender:
    name: str
    loop: Loop
    note: str = ""
    wall: list[float] = field(default_factory=list)  # seconds per turn, one per round
    cpu: list[float] = field(default_factory=list)

    def median_ms(self, kind: str) -> float:
        return statistics.median(getattr(self, kind)) * MS


def agcore_contenders(client: Any) -> list[Contender]:
    registry = ToolRegistry()
    registry.tool(get_weather)
    registry.tool(add)
    config = CycleConfig(MODEL)

    async def loop() -> str:
        cycle = LlmCycle(config, client=client)
        return (await cycle.submit_with_tools(PROMPT, registry)).text

    async def stream_loop() -> str:
        cycle = LlmCycle(config, client=client)
        return (await cycle.submit_stream_with_tools(PROMPT, registry).collect()).text

    responses = CycleConfig(MODEL, api="responses")

    async def responses_loop() -> str:
        cycle = LlmCycle(responses, client=client)
        return (await cycle.submit_with_tools(PROMPT, registry)).text

    async def responses_stream_loop() -> str:
        cycle = LlmCycle(responses, client=client)
        return (await cycle.submit_stream_with_tools(PROMPT, registry).collect()).text

    return [
        Contender("agcore LlmCycle", loop, "submit_with_tools"),
        Contender("agcore LlmCycle (stream)", stream_loop, "submit_stream_with_tools, SSE"),
        Contender("agcore LlmCycle (responses)", responses_loop, 'api="responses"'),
        Contender(
            "agcore LlmCycle (responses, stream)",
            responses_stream_loop,
            'api="responses", SSE',
        ),
    ]


def raw_contenders(client: Any) -> list[Contender]:
    functions = {"get_weather": get_weather, "add": add}
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two integers.",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                    "additionalProperties": False,
                },
            },
        },
    ]

    async def run(call: Any) -> str:
        result = await functions[call.function.name](**json.loads(call.function.arguments))
        return result if isinstance(result, str) else json.dumps(result)

    async def loop() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        while True:
            completion = await client.chat.completions.create(
                model=MODEL, messages=messages, tools=tools
            )
            message = completion.choices[0].message
            calls = message.tool_calls or []
            messages.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    **(
                        {
                            "tool_calls": [
                                {
                                    "id": c.id,
                                    "type": "function",
                                    "function": {
                                        "name": c.function.name,
                                        "arguments": c.function.arguments,
                                    },
                                }
                                for c in calls
                            ]
                        }
                        if calls
                        else {}
                    ),
                }
            )
            if not calls:
                return message.content or ""
            results = await asyncio.gather(*(run(c) for c in calls))
            messages.extend(
                {"role": "tool", "tool_call_id": c.id, "content": r}
                for c, r in zip(calls, results, strict=True)
            )

    async def stream_loop() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        while True:
            stream = await client.chat.completions.create(
                model=MODEL, messages=messages, tools=tools, stream=True
            )
            text: list[str] = []
            calls: dict[int, dict[str, Any]] = {}
            async for chunk in stream:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta.content:
                    text.append(delta.content)
                for piece in delta.tool_calls or ():
                    slot = calls.setdefault(
                        piece.index,
                        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                    )
                    if piece.id:
                        slot["id"] = piece.id
                    if piece.function and piece.function.name:
                        slot["function"]["name"] = piece.function.name
                    if piece.function and piece.function.arguments:
                        slot["function"]["arguments"] += piece.function.arguments
            content = "".join(text)
            if not calls:
                messages.append({"role": "assistant", "content": content})
                return content
            ordered = [calls[i] for i in sorted(calls)]
            messages.append(
                {"role": "assistant", "content": content or None, "tool_calls": ordered}
            )

            async def run_call(call: dict[str, Any]) -> str:
                function = functions[call["function"]["name"]]
                result = await function(**json.loads(call["function"]["arguments"]))
                return result if isinstance(result, str) else json.dumps(result)

            results = await asyncio.gather(*(run_call(c) for c in ordered))
            messages.extend(
                {"role": "tool", "tool_call_id": c["id"], "content": r}
                for c, r in zip(ordered, results, strict=True)
            )

    flat = [{"type": "function", **tool["function"]} for tool in tools]

    async def run_item(item: Any) -> str:
        result = await functions[item.name](**json.loads(item.arguments))
        return result if isinstance(result, str) else json.dumps(result)

    async def run_outputs(calls: list[Any]) -> list[dict[str, Any]]:
        results = await asyncio.gather(*(run_item(c) for c in calls))
        return [
            {"type": "function_call_output", "call_id": c.call_id, "output": r}
            for c, r in zip(calls, results, strict=True)
        ]

    async def responses_loop() -> str:
        items: list[Any] = [{"role": "user", "content": PROMPT}]
        while True:
            response = await client.responses.create(model=MODEL, input=items, tools=flat)
            items += response.output
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                return str(response.output_text)
            items += await run_outputs(calls)

    async def responses_stream_loop() -> str:
        items: list[Any] = [{"role": "user", "content": PROMPT}]
        while True:
            stream = await client.responses.create(
                model=MODEL, input=items, tools=flat, stream=True
            )
            text: list[str] = []
            response: Any = None
            async for event in stream:
                if event.type == "response.output_text.delta":
                    text.append(event.delta)
                elif event.type == "response.completed":
                    response = event.response
            items += response.output
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                return "".join(text)
            items += await run_outputs(calls)

    return [
        Contender("raw OpenAI SDK loop", loop, "hand-written, asyncio.gather"),
        Contender("raw OpenAI SDK loop (stream)", stream_loop, "hand-written, SSE"),
        Contender("raw OpenAI SDK loop (responses)", responses_loop, "responses.create"),
        Contender(
            "raw OpenAI SDK loop (responses, stream)",
            responses_stream_loop,
            "responses.create, SSE",
        ),
    ]


def agents_contender(client: Any) -> list[Contender]:
    try:
        from agents import (
            Agent,
            OpenAIChatCompletionsModel,
            OpenAIResponsesModel,
            Runner,
            function_tool,
            set_tracing_disabled,
        )
    except ImportError:
        return []
    set_tracing_disabled(True)
    agent = Agent(
        name="bench",
        tools=[function_tool(get_weather), function_tool(add)],
        model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
    )

    on_responses = agent.clone(model=OpenAIResponsesModel(model=MODEL, openai_client=client))

    async def loop() -> str:
        result = await Runner.run(agent, PROMPT, max_turns=10)
        return str(result.final_output)

    async def responses_loop() -> str:
        result = await Runner.run(on_responses, PROMPT, max_turns=10)
        return str(result.final_output)

    return [
        Contender("openai-agents Runner", loop, "Runner.run, tracing off"),
        Contender("openai-agents Runner (responses)", responses_loop, "OpenAIResponsesModel"),
    ]


# -- measuring ---------------------------------------------------------------------------


async def measure(
    contenders: list[Contender], server: ScriptedChatServer, rounds: int, loops: int
) -> None:
    expected = SCRIPT[-1].text  # type: ignore[union-attr]
    for contender in contenders:  # warm-up, and a check that every loop does the same work
        before = len(server.requests)
        for _ in range(3):
            answer = await contender.loop()
            assert answer == expected, (contender.name, answer)
        assert len(server.requests) - before == 3 * TURNS_PER_LOOP, contender.name
    order = list(contenders)
    for _ in range(rounds):
        random.shuffle(order)
        for contender in order:
            gc.collect()
            wall0, cpu0 = time.perf_counter(), time.thread_time()
            for _ in range(loops):
                await contender.loop()
            turns = loops * TURNS_PER_LOOP
            contender.wall.append((time.perf_counter() - wall0) / turns)
            contender.cpu.append((time.thread_time() - cpu0) / turns)


def table(contenders: list[Contender]) -> list[dict[str, Any]]:
    """Each row against its raw baseline: streaming rows against the raw streaming loop."""
    raw = {c.name: c for c in contenders if c.name.startswith("raw ")}
    rows = []
    print(
        f"\n{'contender':<40} {'wall ms/turn':>13} {'x raw':>7} {'client CPU ms/turn':>19} {'x raw':>7}"
    )
    for c in contenders:
        kind = [k for k in ("responses", "stream") if k in c.name]
        base = raw["raw OpenAI SDK loop" + (f" ({', '.join(kind)})" if kind else "")]
        wall, cpu = c.median_ms("wall"), c.median_ms("cpu")
        ratio_wall, ratio_cpu = wall / base.median_ms("wall"), cpu / base.median_ms("cpu")
        print(
            f"{c.name:<40} {wall:>13.2f} {ratio_wall:>6.2f}x {cpu:>19.2f} {ratio_cpu:>6.2f}x   {c.note}"
        )
        rows.append(
            {
                "name": c.name,
                "note": c.note,
                "wall_ms_per_turn": wall,
                "cpu_ms_per_turn": cpu,
                "wall_vs_raw": ratio_wall,
                "cpu_vs_raw": ratio_cpu,
            }
        )
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds, for a smoke run")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--loops", type=int, default=20, help="loops per contender per round")
    parser.add_argument("--only", default=None, help="only contenders whose name holds this")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/bench_cycle.json")
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 15)

    with ScriptedChatServer([by_progress], repeat=True) as server:
        client = server.client(timeout=30.0)
        contenders = [*raw_contenders(client), *agcore_contenders(client)]
        agents = agents_contender(client)
        if not agents:
            print("openai-agents is not installed: skipped (use the bench venv)", file=sys.stderr)
        contenders += agents
        if args.only is not None:
            contenders = [c for c in contenders if args.only in c.name]
        await measure(contenders, server, rounds, args.loops)
        await client.close()

    print(f"LLM loop: {TURNS_PER_LOOP} requests per loop, parallel tool calls (3, then 2); "
          f"{rounds} rounds x {args.loops} loops, medians")  # fmt: skip
    rows = table(contenders)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "benchmark": "llm_loop_per_turn",
                "turns_per_loop": TURNS_PER_LOOP,
                "rounds": rounds,
                "loops_per_round": args.loops,
                "results": rows,
                "versions": versions(
                    "agcore-tools", "openai", "openai-agents", "httpx2", "pydantic"
                ),
                "machine": machine(),
            },
            indent=2,
        )
        + "\n"
    )
    print(
        f"\nresults written to {args.json.relative_to(ROOT) if args.json.is_relative_to(ROOT) else args.json}"
    )


if __name__ == "__main__":
    asyncio.run(main())
