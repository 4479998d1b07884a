"""How much memory the in-process result cache holds when many tools each cache.

Run it with the project's venv (it needs no peers)::

    .venv/bin/python benchmarks/bench_cache_memory.py 50 20 1000000

Registers ``TOOLS`` tools, each with a ``ResultCache`` of its own policy (no store
named, so the in-process default), calls each ``RESULTS`` times with distinct
arguments, each answer ``SIZE`` bytes, and prints what the process holds afterwards:
tracemalloc's count of live bytes, and the growth of its resident set. Before stop 50
each tool had a store of its own bounded at 64 MiB, so the bound multiplied with the
tools; now one store holds every tool's results, bounded as a whole.

Figures for an older tree: run this file with that tree first on ``PYTHONPATH``.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tracemalloc
from typing import Any

from agcore_tools import ResultCache, ToolPolicy, ToolRegistry, tool


def resident() -> int:
    """The process's resident set, in bytes (Linux)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))


def cached_tool(number: int, size: int) -> Any:
    """A tool whose answers are ``size`` bytes, cached by its own policy."""

    @tool(name=f"page_{number}", policy=ToolPolicy(cache=ResultCache(ttl=600)))
    async def page(n: int) -> str:
        """A page of text."""
        return f"{number}:{n}:" + "x" * size

    return page


async def main(tools: int, results: int, size: int) -> None:
    registry = ToolRegistry()
    for number in range(tools):
        registry.register(cached_tool(number, size))
    gc.collect()
    rss_before = resident()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for n in range(results):
        for number in range(tools):
            await registry.invoke(f"page_{number}", {"n": n})
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    gc.collect()
    grown = resident() - rss_before
    print(
        f"{tools} tools x {results} results x {size:,} B: held {held / 2**20:.1f} MiB "
        f"(tracemalloc), resident set +{grown / 2**20:.1f} MiB"
    )


if __name__ == "__main__":
    counts = [int(arg) for arg in sys.argv[1:4]] or [50, 20, 1_000_000]
    if len(counts) != 3:
        sys.exit("usage: bench_cache_memory.py TOOLS RESULTS SIZE")
    asyncio.run(main(*counts))
