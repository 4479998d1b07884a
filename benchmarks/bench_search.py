"""Tool search benchmark: recall@1, recall@5, MRR, and recall@10 and @20 (what a
two-stage listing of that length holds) on task sets, tokens per request,
and the index's build time and query latency for 1k and 10k tools.

Run from the repository's root (needs the ``search`` extra; the ``tokens`` extra gives
real token counts; ``wordllama``, in the dev extra, all-MiniLM-L6-v2 and
all-mpnet-base-v2, installed as ``sentence_encoder.py`` says, are the hybrid rows'
embedders, each used when present; with both encoders a full run takes about 25 minutes
on 2 cores, most of it numpy encoding the corpus)::

    .venv/bin/python benchmarks/bench_search.py            # everything
    .venv/bin/python benchmarks/bench_search.py --quick    # recall only, BM25 only

The corpus is every recorded server: the 21 of the interop sweep
(``benchmarks/data/interop/``) and those recorded for tool search
(``benchmarks/data/search_corpus/``, ``record_search_corpus.py``), registered as
``McpClient.into_tools(prefix=True)`` registers them (``server__tool``).

The task sets (``benchmarks/data/``), each task a user's prompt, a short keyword query
as a model would write it, and the tools that would do the task:

- ``search_tasks.json``: the first set, on the interop tools only (tuned on);
- ``search_dev.json``: the development split on the whole corpus (tuned on);
- ``search_heldout.json``: the held-out split, written apart and never tuned on: its
  misses are not read while the ranker changes.

A task counts for recall@k when any of its tools is among the first k. Each set is
ranked with the user's prompt as the query (the worst case; the figure the issue's
target is about) and with the keyword query, by BM25 alone and by the hybrid.

Tokens: for each held-out task, a real ``LlmCycle`` talks to a ``ScriptedChatServer``
with ``ToolSearch()``: the scripted model calls ``search_tools(query=<the prompt>)``,
then answers; the requests' ``tools`` are counted, against the count of every tool's
definition (not sent: more than a request may offer). That path is also checked to
find what the index finds.

Scale: the corpus copied under new server names up to 1,000 and 10,000 tools; the
index is built three times (median) and queried with every held-out prompt (p50).
MiniLM and MPNet, whose builds are the model encoding every tool, are timed at 1,000
tools, once.
Writes ``benchmarks/results/bench_search.json`` (git-ignored) with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from interop_data import adapters, load_corpus
from sentence_encoder import minilm_embedder, mpnet_embedder

from agcore_tools import CycleConfig, LlmCycle, ToolRegistry, ToolSearch
from agcore_tools._budget import BYTES_PER_TOKEN, _counter, definition_costs
from agcore_tools._ranking import Embedder, ToolIndex
from agcore_tools.testing import ScriptedChatServer as S

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
SETS = {"first (interop)": "search_tasks.json", "dev": "search_dev.json", "held-out": "search_heldout.json"}  # fmt: skip


def wordllama_embedder() -> Embedder | None:
    """WordLlama's bundled model (weights in its wheel), or None without the package."""
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError:
        return None
    model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    return lambda texts: model.embed(list(texts))


def registry_of(servers: list[dict[str, Any]]) -> ToolRegistry:
    registry = ToolRegistry()
    for server in servers:
        registry.register_all(adapters(server))
    return registry


def tasks_of(name: str) -> list[dict[str, Any]]:
    path = DATA / name
    if not path.exists():
        return []
    tasks: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    for task in tasks:
        if isinstance(task["expected"], str):
            task["expected"] = [task["expected"]]
    return tasks


LISTING = 20
"""The deepest rank scored: what ``ToolSearch(two_stage=True, max_results=20)`` lists,
for the model to choose from."""


def score(index: ToolIndex, tasks: Sequence[dict[str, Any]], field: str) -> dict[str, Any]:
    """recall@1, @5, @10 and @20, and MRR (of the first 5), of ``index`` on ``tasks``."""
    ranks: list[int | None] = []
    misses = []
    for task in tasks:
        query = task.get(field)
        if not query:
            continue
        found = index.search(query, LISTING)
        hits = [found.index(name) + 1 for name in task["expected"] if name in found]
        ranks.append(min(hits) if hits else None)
        if not hits or min(hits) > 5:
            misses.append((query, task["expected"], found[:3]))
    n = len(ranks) or 1
    return {
        "tasks": len(ranks),
        **{
            f"recall_at_{k}": sum(r is not None and r <= k for r in ranks) / n
            for k in (1, 5, 10, 20)
        },
        "mrr": sum(1 / r for r in ranks if r is not None and r <= 5) / n,
        "misses": misses,
    }


def tokens(request: Any, model: str) -> int:
    return sum(count for _, count in definition_costs(request.json.get("tools", []), model))


async def offered_after_search(registry: ToolRegistry, prompt: str, model: str) -> dict[str, Any]:
    script = [S.reply_tool_calls([("search_tools", {"query": prompt}, "s1")]), S.reply_text("ok")]
    with S(script) as server:
        async with server.client() as client:
            cycle = LlmCycle(CycleConfig(model), client=client)
            await cycle.submit_with_tools(prompt, registry, select=ToolSearch())
        first, second = server.requests
    found = [t["function"]["name"] for t in second.json.get("tools", [])]
    # Every tool in one request is counted, not sent: 1,477 tools is past what the
    # OpenAI profile lets a request offer (128).
    every = registry.definitions()
    return {
        "without": sum(count for _, count in definition_costs(every, model)),
        "search_first": tokens(first, model),
        "search_after": tokens(second, model),
        "found": [name for name in found if name != "search_tools"],
    }


async def offered_after_loading(registry: ToolRegistry, prompt: str, model: str) -> dict[str, Any]:
    """A two-stage search: the scripted model loads the first tool listed."""
    first_listed: list[str] = []

    def load_first(request: Any) -> dict[str, Any]:
        listing = request.json["messages"][-1]["content"]
        names = [
            line[2:].split(":", 1)[0] for line in listing.splitlines() if line.startswith("- ")
        ]
        first_listed.extend(names[:1])
        return S.reply_tool_calls([("load_tools", {"names": names[:1]}, "l1")])

    script = [
        S.reply_tool_calls([("search_tools", {"query": prompt}, "s1")]),
        load_first,
        S.reply_text("ok"),
    ]
    with S(script) as server:
        async with server.client() as client:
            cycle = LlmCycle(CycleConfig(model), client=client)
            await cycle.submit_with_tools(prompt, registry, select=ToolSearch(two_stage=True))
        first, _listed, loaded = server.requests
    return {
        "first": tokens(first, model),
        "listing": len(server.requests[1].json["messages"][-1]["content"]),
        "after_load": tokens(loaded, model),
    }


def scaled(definitions: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """The definitions copied under new server names (``c2_github__...``) up to ``size``."""
    out: list[dict[str, Any]] = []
    copy = 0
    while len(out) < size:
        copy += 1
        for definition in definitions[: size - len(out)]:
            function = dict(definition["function"])
            if copy > 1:
                function["name"] = f"c{copy}_{function['name']}"
            out.append({"type": "function", "function": function})
    return out


def timing(
    definitions: list[dict[str, Any]],
    queries: list[str],
    embedder: Embedder | None,
    builds_wanted: int = 3,
) -> dict[str, float]:
    builds = []
    index = ToolIndex([])
    for _ in range(builds_wanted):
        started = time.perf_counter()
        index = ToolIndex(definitions, embedder)
        builds.append(time.perf_counter() - started)
    latencies = []
    for query in queries:
        started = time.perf_counter()
        index.search(query, 5)
        latencies.append(time.perf_counter() - started)
    latencies.sort()
    return {
        "build_s": statistics.median(builds),
        "query_p50_ms": 1000 * statistics.median(latencies),
        "query_p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
    }


async def bench(model: str, quick: bool) -> dict[str, Any]:
    servers = load_corpus()
    registry = registry_of(servers)
    definitions = registry.definitions()
    embedders = (
        {}
        if quick
        else {
            "wordllama": wordllama_embedder(),
            "minilm": minilm_embedder(),
            "mpnet": mpnet_embedder(),
        }
    )
    rankers: dict[str, Callable[[], ToolIndex]] = {"bm25": lambda: ToolIndex(definitions)}
    for name, embedder in embedders.items():
        if embedder is not None:
            rankers[f"hybrid ({name})"] = lambda e=embedder: ToolIndex(definitions, e)
    indexes = {name: make() for name, make in rankers.items()}
    recall: dict[str, Any] = {}
    for set_name, file in SETS.items():
        tasks = tasks_of(file)
        if not tasks:
            continue
        for ranker, index in indexes.items():
            for field in ("prompt", "query"):
                recall[f"{set_name} | {ranker} | {field}"] = score(index, tasks, field)
    result: dict[str, Any] = {
        "tools": len(definitions),
        "servers": len(servers),
        "recall": recall,
    }
    if quick:
        return result
    heldout = tasks_of(SETS["held-out"]) or tasks_of(SETS["first (interop)"])
    rows = [await offered_after_search(registry, t["prompt"], model) for t in heldout]
    bm25 = indexes["bm25"]
    agree = sum(
        row["found"] == bm25.search(t["prompt"], 5) for row, t in zip(rows, heldout, strict=True)
    )
    result["tokens"] = {
        "counter": "tiktoken"
        if _counter(model) is not None
        else f"estimate (bytes/{BYTES_PER_TOKEN})",
        "without_search": statistics.median(r["without"] for r in rows),
        "search_first": statistics.median(r["search_first"] for r in rows),
        "search_after": statistics.median(r["search_after"] for r in rows),
        "loop_found_what_the_index_found": f"{agree}/{len(rows)}",
    }
    staged = [await offered_after_loading(registry, t["prompt"], model) for t in heldout]
    result["two_stage"] = {
        "first": statistics.median(r["first"] for r in staged),
        "listing_chars": statistics.median(r["listing"] for r in staged),
        "after_load": statistics.median(r["after_load"] for r in staged),
    }
    queries = [t["prompt"] for t in heldout]
    result["scale"] = {
        f"{size} tools | {ranker}": timing(scaled(definitions, size), queries, emb)
        for size in (1000, 10000)
        for ranker, emb in (("bm25", None), ("hybrid (wordllama)", embedders["wordllama"]))
        if ranker == "bm25" or emb is not None
    }
    for name in ("minilm", "mpnet"):
        if embedders[name] is not None:
            result["scale"][f"1000 tools | hybrid ({name})"] = timing(
                scaled(definitions, 1000), queries, embedders[name], builds_wanted=1
            )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--quick", action="store_true", help="recall only, BM25 only")
    parser.add_argument("--misses", action="store_true", help="print the dev sets' misses")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = asyncio.run(bench(args.model, args.quick))
    print(f"{result['tools']} tools from {result['servers']} servers")
    print(
        "| task set | ranker | query | tasks | recall@1 | recall@5 | MRR | recall@10 | recall@20 |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for key, row in result["recall"].items():
        set_name, ranker, field = key.split(" | ")
        query = "user's prompt" if field == "prompt" else "keyword query"
        print(
            f"| {set_name} | {ranker} | {query} | {row['tasks']} | {row['recall_at_1']:.3f} "
            f"| {row['recall_at_5']:.3f} | {row['mrr']:.3f} | {row['recall_at_10']:.3f} "
            f"| {row['recall_at_20']:.3f} |"
        )
    if args.misses:  # never the held-out split's: it is not tuned on
        for key, row in result["recall"].items():
            if not key.startswith("held-out"):
                for query, expected, found in row["misses"]:
                    print(f"  miss [{key}] {query!r} wants {expected}, found {found}")
    if "tokens" in result:
        t = result["tokens"]
        print(f"\ntokens ({t['counter']}, model {args.model}), medians over the held-out tasks:")
        print(f"  every tool offered: {t['without_search']}")
        print(f"  ToolSearch, first request (search_tools only): {t['search_first']}")
        share = t["search_after"] / t["without_search"]
        print(
            f"  ToolSearch, after one search (+ up to 5 found): {t['search_after']} ({share:.1%})"
        )
        print(f"  the loop offered what the index ranked: {t['loop_found_what_the_index_found']}")
        two = result["two_stage"]
        print(
            f"  ToolSearch(two_stage=True): first request {two['first']}, the listing "
            f"{two['listing_chars']} characters, after loading one tool {two['after_load']}"
        )
        print("\n| tools | ranker | index build (s) | query p50 (ms) | query p95 (ms) |")
        print("|---:|---|---:|---:|---:|")
        for key, row in result["scale"].items():
            size, ranker = key.split(" | ")
            print(
                f"| {size.split()[0]} | {ranker} | {row['build_s']:.2f} "
                f"| {row['query_p50_ms']:.2f} | {row['query_p95_ms']:.2f} |"
            )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
