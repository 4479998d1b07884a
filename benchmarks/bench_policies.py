"""Tool policies: what a policy costs a call, that no policy costs nothing, and that a
rate limit holds over a minute.

Run with the project's venv (no peers are needed)::

    .venv/bin/python benchmarks/bench_policies.py [--base REV] [--hold-seconds 60]

Three parts:

(a) **No cost when unused.** ``registry.invoke`` and ``registry.invoke_all`` (one
    call, the loop's path) of a trivial tool with no policy, on this tree and on
    ``--base`` (a commit before policies; default ``693ba7f``, checked out into a
    scratch worktree), each in its own child process, the two interleaved over
    rounds: the ratio of medians.
(b) **A policy's cost per call, uncontended.** In one process, interleaved rounds:
    no policy, a concurrency cap, a rate limit (in-memory bucket, never waiting), a
    breaker, all three; the difference from no policy, in µs per call.
(c) **A rate limit over time.** 50 callers hammer a ``RateLimit(20, per=1.0)`` tool
    for ``--hold-seconds`` (60 by default); the calls that started, against the
    limit's bound (20 per second plus the burst).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
US = 1e6

CHILD = r"""
import asyncio, gc, json, sys, time
from agcore_tools import ToolRegistry
registry = ToolRegistry()

@registry.tool
async def add(a: int, b: int) -> int:
    '''Add two integers.'''
    return a + b

ARGS = {"a": 1, "b": 2}

async def main(n: int) -> dict:
    for _ in range(2000):
        await registry.invoke("add", ARGS)
        await registry.invoke_all([("add", ARGS, "c")])
    gc.collect(); gc.freeze()
    out = {}
    for label, call in (
        ("invoke", lambda: registry.invoke("add", ARGS)),
        ("invoke_all", lambda: registry.invoke_all([("add", ARGS, "c")])),
    ):
        best = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n):
                await call()
            best.append((time.perf_counter() - start) / n)
        out[label] = statistics.median(best)
    return out

import statistics
print(json.dumps(asyncio.run(main(int(sys.argv[1])))))
"""


def no_cost(base: str, rounds: int, calls: int) -> dict[str, Any]:
    """Part (a): this tree against ``base``, child processes interleaved."""
    scratch = Path(tempfile.mkdtemp(prefix="agcore-base-"))
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(scratch), base],
        check=True,
        capture_output=True,
    )
    try:
        trees = {"this tree": ROOT, f"base {base}": scratch}
        samples: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
        for round_ in range(rounds):
            order = list(trees.items())
            if round_ % 2:
                order.reverse()
            for label, tree in order:
                env = {**os.environ, "PYTHONPATH": str(tree)}
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(calls)],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                for name, seconds in json.loads(out.stdout).items():
                    samples[label].setdefault(name, []).append(seconds)
        result: dict[str, Any] = {}
        for name in ("invoke", "invoke_all"):
            mine = statistics.median(samples["this tree"][name]) * US
            theirs = statistics.median(samples[f"base {base}"][name]) * US
            result[name] = {"this_tree_us": mine, "base_us": theirs, "ratio": mine / theirs}
        return result
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(scratch)],
            check=False,
            capture_output=True,
        )


async def policy_cost(rounds: int, calls: int) -> dict[str, float]:
    """Part (b): µs per ``invoke`` with each policy, interleaved in one process."""
    from agcore_tools import Breaker, RateLimit, ToolPolicy, ToolRegistry

    policies = {
        "no policy": None,
        "concurrency=3": ToolPolicy(concurrency=3),
        "rate 10^9/s": ToolPolicy(rate=RateLimit(10**9, per=1.0)),
        "breaker": ToolPolicy(breaker=Breaker()),
        "all three": ToolPolicy(concurrency=3, rate=RateLimit(10**9, per=1.0), breaker=Breaker()),
    }
    registries = {}
    for label, policy in policies.items():
        registry = ToolRegistry()

        async def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        registry.tool(policy=policy)(add)
        registries[label] = registry
    args = {"a": 1, "b": 2}
    for registry in registries.values():
        for _ in range(2000):
            await registry.invoke("add", args)
    gc.collect()
    gc.freeze()
    samples: dict[str, list[float]] = {label: [] for label in registries}
    for round_ in range(rounds):
        order = list(registries.items())
        if round_ % 2:
            order.reverse()
        for label, registry in order:
            start = time.perf_counter()
            for _ in range(calls):
                await registry.invoke("add", args)
            samples[label].append((time.perf_counter() - start) / calls)
    medians = {label: statistics.median(s) * US for label, s in samples.items()}
    return medians


async def rate_hold(seconds: float, callers: int = 50) -> dict[str, float]:
    """Part (c): calls started under a RateLimit(20, per=1.0) over ``seconds``."""
    from agcore_tools import RateLimit, ToolPolicy, ToolRegistry

    registry = ToolRegistry()
    starts: list[float] = []

    @registry.tool(policy=ToolPolicy(rate=RateLimit(20, per=1.0)))
    async def ping() -> str:
        """Ping."""
        starts.append(time.perf_counter())
        return "pong"

    began = time.perf_counter()
    stop = began + seconds

    async def caller() -> None:
        while time.perf_counter() < stop:
            await registry.invoke_all([("ping", {})], timeout=seconds + 5)

    await asyncio.wait_for(asyncio.gather(*(caller() for _ in range(callers))), seconds + 30)
    within = [s for s in starts if s - began < seconds]
    allowed = 20 * seconds + 20  # the steady rate plus the burst
    return {
        "seconds": seconds,
        "started": len(within),
        "allowed": allowed,
        "ratio_to_allowed": len(within) / allowed,
        "ratio_to_steady_rate": (len(within) - 20) / (20 * seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="693ba7f")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--hold-seconds", type=float, default=60.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=str(ROOT / "benchmarks/results/bench_policies.json"))
    args = parser.parse_args()
    calls = 2000 if args.quick else 20000
    rounds = 3 if args.quick else args.rounds
    hold = 3.0 if args.quick else args.hold_seconds

    print("(a) no policy: this tree / base, median µs per call")
    a = no_cost(args.base, rounds, calls)
    for name, row in a.items():
        print(
            f"  {name:<11} {row['this_tree_us']:.2f} / {row['base_us']:.2f} = {row['ratio']:.3f}x"
        )
    print("(b) invoke with a policy, uncontended: median µs per call (difference)")
    b = asyncio.run(policy_cost(rounds * 3, calls))
    plain = b["no policy"]
    for label, us in b.items():
        print(f"  {label:<14} {us:6.2f}  (+{us - plain:.2f})")
    print(f"(c) RateLimit(20, per=1.0), 50 callers, {hold:g} s")
    c = asyncio.run(rate_hold(hold))
    print(
        f"  started {c['started']} of at most {c['allowed']:.0f} "
        f"({c['ratio_to_allowed']:.4f}); after the burst, {c['ratio_to_steady_rate']:.4f} "
        "of the steady rate"
    )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"no_cost": a, "policy_cost_us": b, "rate_hold": c}))


if __name__ == "__main__":
    main()
