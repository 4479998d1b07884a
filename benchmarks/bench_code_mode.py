"""Code mode against direct tool calls: model turns, input tokens, tool calls and wall time
on multi-step tasks over real recorded tool lists, and the sandbox's overhead (issue 27).

Run from the repository's root (needs the ``code`` extra; the ``tokens`` extra and
tiktoken's encoding data give real token counts, otherwise they are estimated at one
token per ``BYTES_PER_TOKEN`` bytes; offline, point ``TIKTOKEN_CACHE_DIR`` at a folder
holding the encoding file)::

    .venv/bin/python benchmarks/bench_code_mode.py
    .venv/bin/python benchmarks/bench_code_mode.py --json benchmarks/results/bench_code_mode.json
    .venv/bin/python benchmarks/bench_code_mode.py --tasks benchmarks/data/code_mode_heldout.json

The suite is ``benchmarks/data/code_mode_tasks.json`` (written by
``make_code_mode_tasks.py``, whose docstring describes the data; ``--tasks`` names
another file of the same form, such as the held-out suite
``code_mode_heldout.json`` from ``make_code_mode_heldout.py``): 24 tasks, each over
one or two servers of the interop sweep, whose recorded tools are registered as
``McpClient.into_tools(prefix=True)`` registers them (``server__tool``). A fake client
answers each call from the task's recorded answers, keyed on the tool and its
arguments; a call with no recorded answer gets a short fixed string.

Each task runs twice through a real ``LlmCycle`` talking to a ``ScriptedChatServer``:

- direct: every tool offered; the model's turns are JSON tool calls, those a good model
  issues together in one turn (they run at once), then the answer;
- code mode: ``select=CodeMode()``, the model writes ``run_python`` programs (one, or two
  where it must read a result before it can write the rest), then the same answer.

Both runs must make the same tool calls and get the same answers (asserted), every
program must succeed and print the facts the answer relies on, and both must end with
the same text. Measured per run: requests sent (model turns), input tokens (the sum over
requests of the messages and the tools sent), tool calls (in code mode, the calls the
programs made; ``run_python`` itself is not counted) and wall time (the scripted model
and the fake tools answer at once, so this is the loop's and the sandbox's own time).

The issue's targets on the suite: at least 35% fewer input tokens and 50% fewer turns.
What the figures leave out: the programs assume the model knows each tool's result
shape. The listing gives it where a server declares an ``outputSchema`` (the
filesystem server's ``{"content": ...}``: the recorded schemas are carried, as a real
``McpClient`` lists them), not for text results (GitHub's JSON text, git's text); a
model that must look first pays one more program. Part of the saving on definitions is
that ``run_python``'s stubs keep parameter descriptions (cut at 120 characters) but drop
nested input schemas, and give an output schema as a return type and a ``Returns:``
line of at most 300 characters.

Overhead: ``run_python`` executed directly on a trivial tool, a program of 10 sequential
calls and one of 10 gathered calls, against the same 10 calls through
``registry.invoke`` (sequential) and ``registry.invoke_all``; medians of ``--runs``
runs; the target is at most 50 ms added.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import math
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interop_data import infos, load

from agcore_tools import CodeMode, CycleConfig, LlmCycle, McpClient, StdioTransport, ToolRegistry
from agcore_tools._budget import BYTES_PER_TOKEN, _counter, definition_costs
from agcore_tools._code_mode import DEFAULT_LIMITS, RunPythonTool
from agcore_tools.base import ToolContext
from agcore_tools.mcp._adapter import adapter_name, make_adapters
from agcore_tools.testing import ScriptedChatServer as S

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "benchmarks" / "data" / "code_mode_tasks.json"
UNRECORDED = "ok"
"""What a call with no recorded answer gets (a tool the task does not use)."""


def key(tool: str, args: Mapping[str, Any]) -> str:
    return json.dumps([tool, args], sort_keys=True, ensure_ascii=False)


class RecordedServer:
    """Stands in for an :class:`McpClient`: answers ``tools/call`` from a task's answers
    and logs every call; the adapters built on it are those of ``into_tools(prefix=True)``."""

    def __init__(self, name: str, answers: Mapping[str, Any], log: list[tuple[str, str]]) -> None:
        self.server_name = name
        self._answers = answers
        self._log = log

    async def call_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any:
        tool = adapter_name(name, self.server_name)
        found = key(tool, dict(args or {}))
        output = copy.deepcopy(self._answers.get(found, UNRECORDED))
        self._log.append((found, json.dumps(output, sort_keys=True, ensure_ascii=False)))
        return output


def registry_for(
    task: Mapping[str, Any], servers: Mapping[str, Any], log: list[tuple[str, str]]
) -> ToolRegistry:
    answers = {key(tool, args): output for tool, args, output in task["responses"]}
    registry = ToolRegistry()
    for name in task["servers"]:
        recorded = servers[name]
        policy = McpClient(name, StdioTransport("recorded-not-started")).permission_policy
        fake = RecordedServer(name, answers, log)
        registry.register_all(make_adapters(fake, infos(recorded), name, policy))
    return registry


class Tokens:
    """Counts a request's input: its messages and its tools, as compact JSON."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._count = _counter(model)
        self.counter = (
            f"tiktoken ({model})"
            if self._count is not None
            else f"estimate (bytes/{BYTES_PER_TOKEN})"
        )

    def text(self, text: str) -> int:
        if self._count is not None:
            return self._count(text)
        return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)

    def request(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """(message tokens, tool tokens) of one request."""
        messages = json.dumps(body.get("messages", []), separators=(",", ":"), ensure_ascii=False)
        tools = sum(n for _, n in definition_costs(body.get("tools", []), self.model))
        return self.text(messages), tools


def tool_results(body: Mapping[str, Any]) -> dict[str, str]:
    """The tool messages of a request, by call id."""
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m.get("role") == "tool"}


async def run(
    task: Mapping[str, Any], servers: Mapping[str, Any], mode: str, tokens: Tokens
) -> dict[str, Any]:
    """One run of ``task``, ``direct`` or ``code``: its figures and what it saw."""
    log: list[tuple[str, str]] = []
    registry = registry_for(task, servers, log)
    if mode == "direct":
        script = [
            S.reply_tool_calls([(tool, args, f"d{t}_{i}") for i, (tool, args) in enumerate(turn)])
            for t, turn in enumerate(task["direct"])
        ]
        select: Any = None
    else:
        script = [
            S.reply_tool_calls([("run_python", {"code": code}, f"p{k}")])
            for k, code in enumerate(task["code"])
        ]
        select = CodeMode()
    script.append(S.reply_text(task["answer"]))
    with S(script) as server:
        async with server.client(timeout=60.0) as client:
            cycle = LlmCycle(CycleConfig(tokens.model, max_turns=20), client=client)
            started = time.perf_counter()
            response = await cycle.submit_with_tools(task["prompt"], registry, select=select)
            wall = time.perf_counter() - started
        bodies = [r.json for r in server.requests]
    counts = [tokens.request(body) for body in bodies]
    return {
        "turns": len(bodies),
        "input_tokens": sum(m + t for m, t in counts),
        "message_tokens": sum(m for m, _ in counts),
        "tool_tokens": sum(t for _, t in counts),
        "tool_calls": len(log),
        "model_calls": sum(len(turn) for turn in task["direct"])
        if mode == "direct"
        else len(task["code"]),
        "wall_ms": 1000 * wall,
        "text": response.text,
        "calls": sorted(log),
        "results": tool_results(bodies[-1]),
    }


def check(task: Mapping[str, Any], direct: dict[str, Any], code: dict[str, Any]) -> None:
    """Both runs did the task: same calls and answers, programs ran, facts printed."""
    name = task["id"]
    recorded = {key(tool, args) for tool, args, _ in task["responses"]}
    for mode, result in (("direct", direct), ("code", code)):
        assert result["text"] == task["answer"], f"{name} ({mode}): the loop ended early"
        missing = [k for k, _ in result["calls"] if k not in recorded]
        assert not missing, f"{name} ({mode}): calls with no recorded answer: {missing}"
    printed = "\n".join(code["results"][f"p{k}"] for k in range(len(task["code"])))
    for bad in ("the program failed", "Traceback", "the sandbox stopped"):
        assert bad not in printed, f"{name}: a program failed:\n{printed}"
    assert direct["calls"] == code["calls"], (
        f"{name}: the runs made different calls:\n"
        f"  direct only: {sorted(set(direct['calls']) - set(code['calls']))}\n"
        f"  code only: {sorted(set(code['calls']) - set(direct['calls']))}"
    )
    for fact in task["expect"]:
        assert fact in printed, f"{name}: the programs did not print {fact!r}:\n{printed}"


def ratio(code: float, direct: float) -> float:
    return code / direct if direct else float("nan")


async def measured(
    task: Mapping[str, Any], servers: Mapping[str, Any], mode: str, tokens: Tokens, repeats: int
) -> dict[str, Any]:
    """``repeats`` runs of one mode: the first's figures, the median wall time."""
    runs = [await run(task, servers, mode, tokens) for _ in range(repeats)]
    first = runs[0]
    for other in runs[1:]:
        assert (other["input_tokens"], other["calls"]) == (first["input_tokens"], first["calls"])
    first["wall_ms"] = statistics.median(r["wall_ms"] for r in runs)
    return first


async def suite(
    model: str, only: str | None, repeats: int, tasks: list[dict[str, Any]]
) -> dict[str, Any]:
    if only:
        tasks = [t for t in tasks if only in t["id"]]
    servers = {s["server"]: s for s in load()}
    tokens = Tokens(model)
    for mode in ("direct", "code"):  # warm: imports, the first client, the first sandbox
        await run(tasks[0], servers, mode, tokens)
    rows = []
    for task in tasks:
        direct = await measured(task, servers, "direct", tokens, repeats)
        code = await measured(task, servers, "code", tokens, repeats)
        check(task, direct, code)
        row = {"id": task["id"], "servers": task["servers"], "programs": len(task["code"])}
        rows.append({**row, "direct": direct, "code": code})
    fields = ("turns", "input_tokens", "tool_tokens", "message_tokens", "tool_calls", "model_calls", "wall_ms")  # fmt: skip
    totals = {
        mode: {f: sum(r[mode][f] for r in rows) for f in fields} for mode in ("direct", "code")
    }
    ratios = {f: ratio(totals["code"][f], totals["direct"][f]) for f in fields}
    per_task = [ratio(r["code"]["input_tokens"], r["direct"]["input_tokens"]) for r in rows]
    for row in rows:
        for mode in ("direct", "code"):
            for bulky in ("text", "calls", "results"):
                row[mode].pop(bulky)
    return {
        "model": model,
        "counter": tokens.counter,
        "tasks": rows,
        "totals": totals,
        "ratios": ratios,
        "median_task_token_ratio": statistics.median(per_task) if per_task else None,
        "targets": {
            "input_tokens_35pct_fewer": ratios["input_tokens"] <= 0.65,
            "turns_50pct_fewer": ratios["turns"] <= 0.50,
        },
    }


# -- overhead -----------------------------------------------------------------------

SEQUENTIAL = "total = 0\nfor i in range(10):\n    total += await echo(i)\ntotal\n"
GATHERED = "import asyncio\nsum(await asyncio.gather(*[echo(i) for i in range(10)]))\n"


async def overhead(runs: int) -> dict[str, Any]:
    registry = ToolRegistry()

    @registry.tool
    def echo(x: int) -> int:
        """Return x."""
        return x

    tool = RunPythonTool(registry.tool_table, registry.definitions(), DEFAULT_LIMITS, 60.0)

    async def sequential() -> Any:
        return [(await registry.invoke("echo", {"x": i})).output for i in range(10)]

    async def together() -> Any:
        return [r.output for r in await registry.invoke_all([("echo", {"x": i}) for i in range(10)])]  # fmt: skip

    async def program(code: str) -> Any:
        return await tool.execute({"code": code}, ToolContext())

    cases = {
        "direct: 10 x registry.invoke": sequential,
        "direct: registry.invoke_all(10)": together,
        "run_python: empty program": lambda: program("None\n"),
        "run_python: 10 sequential calls": lambda: program(SEQUENTIAL),
        "run_python: 10 gathered calls": lambda: program(GATHERED),
    }
    assert await cases["run_python: 10 sequential calls"]() == "result: 45"
    assert await cases["run_python: 10 gathered calls"]() == "result: 45"
    assert await sequential() == list(range(10)) == await together()
    medians = {}
    for name, case in cases.items():
        await case()  # warm
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            await case()
            times.append(1000 * (time.perf_counter() - started))
        medians[name] = statistics.median(times)
    seq = medians["run_python: 10 sequential calls"] - medians["direct: 10 x registry.invoke"]
    gat = medians["run_python: 10 gathered calls"] - medians["direct: registry.invoke_all(10)"]
    return {
        "runs": runs,
        "median_ms": medians,
        "added_ms": {"sequential": seq, "gathered": gat},
        "target_50ms_met": max(seq, gat) <= 50.0,
    }


# -- report ---------------------------------------------------------------------------


def report(result: dict[str, Any]) -> None:
    s = result.get("suite")
    if s:
        print(f"{len(s['tasks'])} tasks; input tokens counted with {s['counter']}\n")
        print(
            "| task | servers | turns | input tokens | ratio | tool calls "
            "| written by the model | wall ms |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        rows = [(r["id"], ", ".join(r["servers"]), r["direct"], r["code"]) for r in s["tasks"]]
        rows.append(("**total**", "", s["totals"]["direct"], s["totals"]["code"]))
        for name, servers, d, c in rows:
            print(
                f"| {name} | {servers} | {d['turns']} / {c['turns']} "
                f"| {d['input_tokens']:,} / {c['input_tokens']:,} "
                f"| {ratio(c['input_tokens'], d['input_tokens']):.2f} "
                f"| {d['tool_calls']} / {c['tool_calls']} "
                f"| {d['model_calls']} calls / {c['model_calls']} prog. "
                f"| {d['wall_ms']:.0f} / {c['wall_ms']:.0f} |"
            )
        q = s["ratios"]
        print("\n(each cell: direct / code mode)")
        d, c = s["totals"]["direct"], s["totals"]["code"]
        print(
            f"\ncode mode / direct: turns {q['turns']:.2f} ({1 - q['turns']:.0%} fewer); "
            f"input tokens {q['input_tokens']:.2f} ({1 - q['input_tokens']:.0%} fewer, median "
            f"per task {s['median_task_token_ratio']:.2f}): tool definitions "
            f"{d['tool_tokens']:,} -> {c['tool_tokens']:,} ({q['tool_tokens']:.2f}), messages "
            f"{d['message_tokens']:,} -> {c['message_tokens']:,} ({q['message_tokens']:.2f}); "
            f"wall time {q['wall_ms']:.2f}"
        )
        t = s["targets"]
        print(
            f"targets: >=35% fewer input tokens: {'met' if t['input_tokens_35pct_fewer'] else 'NOT met'}; "
            f">=50% fewer turns: {'met' if t['turns_50pct_fewer'] else 'NOT met'}"
        )
    o = result.get("overhead")
    if o:
        print(f"\noverhead, median of {o['runs']} runs (ms):\n")
        print("| case | median ms |\n|---|---:|")
        for name, ms in o["median_ms"].items():
            print(f"| {name} | {ms:.2f} |")
        a = o["added_ms"]
        print(
            f"\nadded by code mode: {a['sequential']:.1f} ms (10 sequential calls), "
            f"{a['gathered']:.1f} ms (10 gathered); target <= 50 ms: "
            f"{'met' if o['target_50ms_met'] else 'NOT met'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt-4o", help="names the tokenizer")
    parser.add_argument("--runs", type=int, default=30, help="runs per overhead case")
    parser.add_argument("--repeats", type=int, default=3, help="runs per task and mode (wall time: median)")  # fmt: skip
    parser.add_argument("--task", default=None, help="only the tasks whose id contains this")
    parser.add_argument("--tasks", type=Path, default=TASKS, help="the suite's file (default: %(default)s)")  # fmt: skip
    parser.add_argument("--no-overhead", action="store_true")
    parser.add_argument("--no-suite", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result: dict[str, Any] = {}
    if not args.no_suite:
        tasks = json.loads(args.tasks.read_text(encoding="utf-8"))["tasks"]
        result["suite"] = asyncio.run(suite(args.model, args.task, args.repeats, tasks))
    if not args.no_overhead:
        result["overhead"] = asyncio.run(overhead(args.runs))
    report(result)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
