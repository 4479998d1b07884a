"""Tool search benchmark: tokens per request with and without ``ToolSearch``, and recall@5.

Run from the repository's root (needs the ``search`` extra; the ``tokens`` extra with
its encoding data gives real token counts, otherwise they are the documented estimate)::

    .venv/bin/python benchmarks/bench_search.py

The registry holds the 288 tools recorded from the 21 third-party MCP servers of the
interop sweep (``benchmarks/data/interop/``, see ``record_interop.py``), registered as
``McpClient.into_tools(prefix=True)`` registers them (``server__tool``). For each task
prompt of ``benchmarks/data/search_tasks.json`` (each naming the tool that does the
task), a real ``LlmCycle`` talks to a ``ScriptedChatServer`` twice:

- without search: one request offering every tool;
- with ``ToolSearch()`` (no core set): the scripted model calls
  ``search_tools(query=<the task prompt>)``, then answers. The second request carries
  the tools the search found; the task counts for recall@5 when its tool is among them.

Using the user's prompt as the query is a stand-in for the query a model would write;
a model usually writes a shorter, more focused one. Token counts are taken from the
requests the server captured (the ``tools`` param each sent). Writes
``benchmarks/results/bench_search.json`` (git-ignored) with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from pathlib import Path
from typing import Any

from interop_data import adapters, load

from agcore_tools import CycleConfig, LlmCycle, ToolRegistry, ToolSearch
from agcore_tools._budget import BYTES_PER_TOKEN, _counter, definition_costs
from agcore_tools.testing import ScriptedChatServer as S

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"


def registry_of(servers: list[dict[str, Any]]) -> ToolRegistry:
    registry = ToolRegistry()
    for server in servers:
        registry.register_all(adapters(server))
    return registry


def tokens(request: Any, model: str) -> int:
    return sum(count for _, count in definition_costs(request.json.get("tools", []), model))


def names(request: Any) -> list[str]:
    return [tool["function"]["name"] for tool in request.json.get("tools", [])]


async def run_task(registry: ToolRegistry, prompt: str, model: str) -> dict[str, Any]:
    script = [S.reply_tool_calls([("search_tools", {"query": prompt}, "s1")]), S.reply_text("ok")]
    with S([S.reply_text("ok"), *script]) as server:
        async with server.client() as client:
            cycle = LlmCycle(CycleConfig(model), client=client)
            await cycle.submit_with_tools(prompt, registry)
            cycle.messages.clear()
            await cycle.submit_with_tools(prompt, registry, select=ToolSearch())
        plain, first, second = server.requests
    return {
        "without": tokens(plain, model),
        "search_first": tokens(first, model),
        "search_after": tokens(second, model),
        "found": [n for n in names(second) if n != "search_tools"],
    }


async def bench(model: str) -> dict[str, Any]:
    servers = load()
    tasks = json.loads((DATA / "search_tasks.json").read_text(encoding="utf-8"))
    registry = registry_of(servers)
    rows = []
    for task in tasks:
        row = await run_task(registry, task["prompt"], model)
        rows.append({**task, **row, "rank": _rank(row["found"], task["expected"])})
    hits = [row["rank"] is not None for row in rows]
    return {
        "model": model,
        "counter": "tiktoken"
        if _counter(model) is not None
        else f"estimate (bytes/{BYTES_PER_TOKEN})",
        "tools": len(registry),
        "servers": {s["server"]: len(s["tools"]) for s in servers},
        "tasks": len(tasks),
        "tokens_without_search": statistics.median(row["without"] for row in rows),
        "tokens_search_first": statistics.median(row["search_first"] for row in rows),
        "tokens_search_after": statistics.median(row["search_after"] for row in rows),
        "recall_at_5": sum(hits) / len(rows),
        "recall_at_1": sum(row["rank"] == 1 for row in rows) / len(rows),
        "misses": [
            (row["prompt"], row["expected"], row["found"]) for row in rows if row["rank"] is None
        ],
    }


def _rank(found: list[str], expected: str) -> int | None:
    return found.index(expected) + 1 if expected in found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = asyncio.run(bench(args.model))
    print(f"{result['tools']} tools from {result['servers']}; {result['tasks']} tasks")
    print(f"token counter: {result['counter']} (model {result['model']})")
    print("| request | tools tokens (median) |")
    print("|---|---:|")
    print(f"| without search: every tool | {result['tokens_without_search']} |")
    print(f"| ToolSearch, first request: search_tools only | {result['tokens_search_first']} |")
    print(f"| ToolSearch, after one search: + up to 5 found | {result['tokens_search_after']} |")
    print(f"recall@5 {result['recall_at_5']:.3f}, recall@1 {result['recall_at_1']:.3f}")
    for prompt, expected, found in result["misses"]:
        print(f"  miss: {prompt!r} wants {expected}, found {found}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
