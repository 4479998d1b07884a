"""Sync entry points: what ``run_tool_calls_sync`` adds over ``await run_tool_calls``.

Run it with the project's venv (it needs no peers; ``make bench`` runs it too)::

    .venv/bin/python benchmarks/bench_sync.py

One Chat Completions tool call of a trivial async tool (``async def add(a, b)``),
answered by ``await registry.run_tool_calls(calls)`` inside a running loop (the async
path) and by ``registry.run_tool_calls_sync(calls)`` from plain code (the sync path).
For the choice of mechanism, the same coroutine also goes through
``asyncio.run_coroutine_threadsafe(...).result()`` and through anyio's
``BlockingPortal.call``; two floors show what any cross-thread hand-off costs on the
machine: an empty coroutine through the sync path, and a bare two-thread lock ping-pong.

Contenders run in interleaved rounds (order shuffled each round); figures are medians
over rounds. Options: ``--quick`` (a smoke run), ``--json PATH`` (default
``benchmarks/results/bench_sync.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from run_info import machine

from agcore_tools import ToolRegistry, _sync

ROOT = Path(__file__).resolve().parent.parent
US = 1e6
TARGET_US = 50.0
CALLS = [
    {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}
]
EXPECTED = [{"role": "tool", "tool_call_id": "call_1", "content": "3"}]


@dataclass
class Contender:
    """How to time a batch of n calls (returns wall seconds)."""

    name: str
    batch: Callable[[int], float]
    samples: list[float] = field(default_factory=list)  # wall seconds per call, per round
    cpu: list[float] = field(default_factory=list)  # process CPU seconds per call, per round

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples) * US

    @property
    def cpu_us(self) -> float:
        return statistics.median(self.cpu) * US


def build() -> tuple[list[Contender], Callable[[], None]]:
    registry = ToolRegistry()

    @registry.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    run_tool_calls = registry.run_tool_calls
    run_tool_calls_sync = registry.run_tool_calls_sync

    # The async path: the caller's own loop, in this thread.
    home = asyncio.new_event_loop()

    async def async_batch(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            await run_tool_calls(CALLS)
        return time.perf_counter() - started

    def async_path(n: int) -> float:
        return home.run_until_complete(async_batch(n))

    def sync_path(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            run_tool_calls_sync(CALLS)
        return time.perf_counter() - started

    # Alternatives for the same hand-off, each with a loop in its own thread.
    other = asyncio.new_event_loop()
    threading.Thread(target=other.run_forever, daemon=True).start()

    def threadsafe(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            asyncio.run_coroutine_threadsafe(run_tool_calls(CALLS), other).result()
        return time.perf_counter() - started

    from anyio.from_thread import start_blocking_portal

    portal_cm = start_blocking_portal()
    portal = portal_cm.__enter__()

    def anyio_portal(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            portal.call(run_tool_calls, CALLS)
        return time.perf_counter() - started

    async def nothing() -> None:
        return None

    def empty_sync(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            _sync.run(nothing())
        return time.perf_counter() - started

    ping, pong = threading.Lock(), threading.Lock()
    ping.acquire()
    pong.acquire()

    def echo() -> None:
        while True:
            ping.acquire()
            pong.release()

    threading.Thread(target=echo, daemon=True).start()

    def ping_pong(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            ping.release()
            pong.acquire()
        return time.perf_counter() - started

    for result in (
        home.run_until_complete(run_tool_calls(CALLS)),
        run_tool_calls_sync(CALLS),
        asyncio.run_coroutine_threadsafe(run_tool_calls(CALLS), other).result(),
        portal.call(run_tool_calls, CALLS),
    ):
        if result != EXPECTED:
            raise SystemExit(f"unexpected answer {result!r}")

    def close() -> None:
        portal_cm.__exit__(None, None, None)
        other.call_soon_threadsafe(other.stop)
        home.close()

    contenders = [
        Contender("await run_tool_calls (async path)", async_path),
        Contender("run_tool_calls_sync (shipped)", sync_path),
        Contender("asyncio.run_coroutine_threadsafe().result()", threadsafe),
        Contender("anyio BlockingPortal.call", anyio_portal),
        Contender("floor: empty coroutine via _sync.run", empty_sync),
        Contender("floor: two-thread lock ping-pong", ping_pong),
    ]
    return contenders, close


def measure(contenders: list[Contender], rounds: int, batch: int) -> None:
    for contender in contenders:  # warm-up: lazy imports, thread start, caches
        contender.batch(batch)
    gc.collect()
    gc.freeze()
    order = list(contenders)
    for _ in range(rounds):
        random.shuffle(order)
        for contender in order:
            cpu = time.process_time()  # every thread of this process: both sides of a hand-off
            wall = contender.batch(batch)
            contender.cpu.append((time.process_time() - cpu) / batch)
            contender.samples.append(wall / batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (smoke run)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/bench_sync.json")
    opts = parser.parse_args()
    rounds, batch = (5, 300) if opts.quick else (21, 2000)

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    contenders, close = build()
    try:
        measure(contenders, rounds, batch)
    finally:
        close()

    base, ours = contenders[0], contenders[1]
    print(f"\nOne tool call through run_tool_calls: {rounds} rounds of {batch} calls")
    print(f"load average before: {load[0]:.2f}" if load else "")
    header = f"  {'contender':<46}{'wall µs':>9}{'min µs':>9}{'+ µs':>8}{'CPU µs':>9}{'+ µs':>8}"
    print(header)
    rows = []
    for contender in contenders:
        low = min(contender.samples) * US
        extra = contender.median_us - base.median_us
        extra_cpu = contender.cpu_us - base.cpu_us
        floor = contender.name.startswith("floor")
        plain = floor or contender is base
        shown = ("", "") if plain else (f"{extra:>8.1f}", f"{extra_cpu:>8.1f}")
        print(
            f"  {contender.name:<46}{contender.median_us:>9.1f}{low:>9.1f}{shown[0]:>8}"
            f"{contender.cpu_us:>9.1f}{shown[1]:>8}"
        )
        rows.append(
            {
                "name": contender.name,
                "wall_median_us": round(contender.median_us, 2),
                "wall_min_us": round(low, 2),
                "cpu_median_us": round(contender.cpu_us, 2),
            }
        )
    # Rounds are interleaved, so a round's sync and async batches ran moments apart: the
    # median of the per-round differences is less exposed to the machine's load swings.
    paired = statistics.median(
        (s - a) * US for s, a in zip(ours.samples, base.samples, strict=True)
    )
    overhead_cpu = ours.cpu_us - base.cpu_us
    met = paired <= TARGET_US
    print(
        f"  sync overhead per call: {paired:.1f} µs wall (median of per-round differences), "
        f"{overhead_cpu:.1f} µs CPU; target <= {TARGET_US:.0f} µs wall: {'met' if met else 'MISSED'}"
    )
    results = {
        "benchmark": "sync",
        "command": ".venv/bin/python benchmarks/bench_sync.py",
        "machine": machine(),
        "rounds": rounds,
        "calls_per_round": batch,
        "rows": rows,
        "sync_overhead_wall_us": round(paired, 2),
        "sync_overhead_cpu_us": round(overhead_cpu, 2),
        "target_met": met,
    }
    opts.json.parent.mkdir(parents=True, exist_ok=True)
    opts.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {opts.json.relative_to(ROOT) if opts.json.is_relative_to(ROOT) else opts.json}")


if __name__ == "__main__":
    main()
