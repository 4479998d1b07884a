"""The queries a real model writes into ``search_tools``, and what they find (issue 26,
deliverable 3).

Starts llama-cpp-python's server on the test model (SmolLM2-135M, ``chatml-function-
calling``; what ``make test`` installs and caches), offers it exactly the
``search_tools`` definition a ``ToolSearch()`` run offers, with ``tool_choice`` naming
it, and sends each task's prompt. The query the model wrote is ranked with the
search's index over the 1,477 tools of ``bench_search.py``, and scored as that script
scores (recall@1, recall@5), beside the user's prompt and the hand-written keyword
query of the same tasks. A 135M-parameter model is a poor judge of queries; this shows
what the description makes a small model write, not what a capable one does::

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_search_llama.py --tasks 40

Uses the held-out split (``--set dev`` for the other). Prints each query with
``--show`` (never tuned on: the search's description was not changed after a run).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
from bench_search import registry_of, tasks_of
from interop_data import load_corpus
from openai import OpenAI

from agcore_tools._ranking import ToolIndex
from agcore_tools._search import SearchTool

MODEL = Path.home() / ".cache" / "agcore-tools" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(model: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model),
        "--chat_format", "chatml-function-calling", "--host", "127.0.0.1",
        "--port", str(port), "--n_ctx", "2048", "--verbose", "False",
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{url}/models", timeout=2).status_code == 200:
                return process, url
        except httpx2.TransportError:
            pass
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}")
        time.sleep(0.25)
    process.kill()
    process.wait(10)
    raise RuntimeError("llama_cpp.server did not answer within 120 s")


def written_query(client: OpenAI, definition: dict[str, Any], prompt: str) -> str | None:
    completion = client.chat.completions.create(
        model="local",
        messages=[{"role": "user", "content": prompt}],
        tools=[definition],  # type: ignore[list-item]
        tool_choice={"type": "function", "function": {"name": "search_tools"}},
        max_tokens=48,
        temperature=0,
    )
    calls = completion.choices[0].message.tool_calls or []
    for call in calls:
        try:
            query = json.loads(call.function.arguments).get("query")  # type: ignore[union-attr]
        except (ValueError, AttributeError):
            continue
        if isinstance(query, str) and query.strip():
            return query
    return None


def rank_of(index: ToolIndex, query: str | None, expected: list[str]) -> int | None:
    if not query:
        return None
    found = index.search(query, 5)
    hits = [found.index(name) + 1 for name in expected if name in found]
    return min(hits) if hits else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--set", choices=["held-out", "dev"], default="held-out")
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()
    model = Path(os.environ.get("AGCORE_TEST_MODEL", MODEL))
    tasks = tasks_of("search_heldout.json" if args.set == "held-out" else "search_dev.json")
    tasks = tasks[: args.tasks]
    definitions = registry_of(load_corpus()).definitions()
    index = ToolIndex(definitions)
    definition = SearchTool(definitions, set, lambda names: None, 5).definition()
    process, url = start_server(model)
    try:
        client = OpenAI(base_url=url, api_key="local")
        ranks: dict[str, list[int | None]] = {"model's query": [], "prompt": [], "keyword": []}
        for task in tasks:
            query = written_query(client, definition, task["prompt"])
            ranks["model's query"].append(rank_of(index, query, task["expected"]))
            ranks["prompt"].append(rank_of(index, task["prompt"], task["expected"]))
            ranks["keyword"].append(rank_of(index, task["query"], task["expected"]))
            if args.show:
                print(f"{task['prompt']!r} -> {query!r}")
    finally:
        process.terminate()
        process.wait(10)
    print(f"{len(tasks)} tasks of the {args.set} split, 1 request each, {model.name}")
    print("| query | recall@1 | recall@5 |")
    print("|---|---:|---:|")
    for name, found in ranks.items():
        n = len(found)
        print(
            f"| {name} | {sum(r == 1 for r in found) / n:.3f} | {sum(r is not None for r in found) / n:.3f} |"
        )


if __name__ == "__main__":
    main()
