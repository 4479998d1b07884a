"""What a rate limit in Redis costs, and whether it holds across processes.

1. Per call, uncontended: a rate-limited tool's ``registry.invoke`` with the bucket in
   this process (``MemoryRateStore``) and in Redis (``RedisStore`` on a unix socket),
   against the same tool without a policy; the store's ``reserve`` alone; and a call
   answered from a ``ResultCache`` in Redis. Medians of ``--rounds`` rounds of
   ``--calls`` sequential calls.
2. The rate hold: ``--processes`` processes, each with its own registry and
   ``RedisStore``, run ``--callers`` concurrent callers each, calling as fast as they
   are let through a ``RateLimit(--rate, per=1.0)`` tool for ``--duration`` seconds.
   The tool records when each call starts; the calls started in the window are
   compared with the rate (``rate × duration``) and with what the bucket allows
   (``burst + rate × duration``: it starts full). ``--memory`` runs the same with a
   bucket per process, to show what sharing buys.

The script starts its own ``redis-server`` (``make test`` installs Debian's) on a unix
socket in a temporary folder, TCP off.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_redis_store.py [--duration 60] [--memory]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agcore_tools import RateLimit, ResultCache, ToolPolicy, ToolRegistry
from agcore_tools.policies import MemoryRateStore
from agcore_tools.redis import RedisStore

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def redis_server() -> Iterator[str]:
    """A redis-server on a unix socket; its path."""
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("no redis-server: `make test` installs Debian's (apt-get install redis-server)")
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as folder:
        socket = str(Path(folder) / "redis.sock")
        proc = subprocess.Popen(
            [
                *(binary, "--port", "0", "--unixsocket", socket, "--save", ""),
                *("--appendonly", "no", "--dir", folder, "--logfile", ""),
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(socket):
                if proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit("redis-server did not start")
                time.sleep(0.02)
            yield socket
        finally:
            proc.terminate()
            proc.wait(timeout=10)


async def per_call(socket: str, rounds: int, calls: int) -> None:
    unlimited = RateLimit(10**9, per=1.0)  # never waits: only the bookkeeping is timed
    async with RedisStore(f"unix://{socket}", prefix="bench:") as store:
        registry = ToolRegistry()

        @registry.tool
        def plain() -> str:
            """No policy."""
            return "ok"

        @registry.tool(policy=ToolPolicy(rate=unlimited))
        def memory() -> str:
            """A bucket in this process."""
            return "ok"

        @registry.tool(policy=ToolPolicy(rate=RateLimit(10**9, per=1.0, store=store)))
        def redis() -> str:
            """A bucket in Redis."""
            return "ok"

        @registry.tool(policy=ToolPolicy(cache=ResultCache(600, store=store)))
        def cached() -> str:
            """A result cached in Redis."""
            return "ok"

        memory_store = MemoryRateStore()

        async def reserve_memory() -> None:
            await memory_store.reserve("k", unlimited, 0.0)

        async def reserve_redis() -> None:
            await store.reserve("k", unlimited, 0.0)

        await registry.invoke("cached", {})  # stored: the rest are hits
        timed = {
            "invoke, no policy": lambda: registry.invoke("plain", {}),
            "invoke, rate in memory": lambda: registry.invoke("memory", {}),
            "invoke, rate in Redis": lambda: registry.invoke("redis", {}),
            "invoke, cache hit in Redis": lambda: registry.invoke("cached", {}),
            "reserve, MemoryRateStore": reserve_memory,
            "reserve, RedisStore": reserve_redis,
        }
        found: dict[str, list[float]] = {name: [] for name in timed}
        for _ in range(rounds):
            for name, call in timed.items():
                start = time.perf_counter()
                for _ in range(calls):
                    await call()
                found[name].append((time.perf_counter() - start) / calls)
        base = statistics.median(found["invoke, no policy"])
        print(f"per call, uncontended (median of {rounds} rounds of {calls} calls):")
        for name, rows in found.items():
            cost = statistics.median(rows)
            extra = f"  ({(cost - base) * 1e6:+.1f} µs)" if name.startswith("invoke,") else ""
            print(f"  {name:28} {cost * 1e6:8.1f} µs{extra}")


_WORKER = """
import asyncio, json, sys, time
from agcore_tools import RateLimit, ToolPolicy, ToolRegistry
from agcore_tools.redis import RedisStore

socket, prefix, rate, callers, duration, shared = sys.argv[1:7]
rate, callers, duration, shared = int(rate), int(callers), float(duration), shared == "1"

async def main() -> None:
    starts = []
    async with RedisStore(f"unix://{socket}", prefix=prefix) as store:
        registry = ToolRegistry()
        limit = RateLimit(rate, per=1.0, store=store if shared else None)

        @registry.tool(policy=ToolPolicy(rate=limit))
        def call() -> str:
            '''Recorded.'''
            starts.append(time.time())
            return "ok"

        await store.client.ping()
        print("ready", flush=True)
        begin = float(sys.stdin.readline())
        end = begin + duration

        async def caller() -> None:
            while time.time() < end:
                await registry.invoke("call", {})

        await asyncio.sleep(max(begin - time.time(), 0))  # a sleep never ends early
        tasks = [asyncio.ensure_future(caller()) for _ in range(callers)]
        await asyncio.sleep(max(end - time.time(), 0) + 0.05)
        for task in tasks:  # the calls still waiting for a turn after the window
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps(starts), flush=True)

asyncio.run(main())
"""


def rate_hold(
    socket: str, processes: int, callers: int, rate: int, duration: float, shared: bool
) -> None:
    prefix = f"hold{time.time_ns()}:"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [socket, prefix, str(rate), str(callers), str(duration), "1" if shared else "0"]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(processes)
    ]
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
    begin = time.time() + 0.2
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(f"{begin!r}\n")
        worker.stdin.close()
    starts: list[float] = []
    for worker in workers:
        assert worker.stdout is not None
        starts += json.loads(worker.stdout.read().splitlines()[-1])
        worker.wait()
    inside = sorted(t for t in starts if begin <= t < begin + duration)
    nominal = rate * duration
    bound = rate + nominal  # the bucket starts full: burst = rate
    where = "one bucket in Redis" if shared else "a bucket per process"
    print(
        f"rate hold, {where}: RateLimit({rate}, per=1.0) for {duration:g} s, "
        f"{processes} processes x {callers} callers"
    )
    print(
        f"  calls started {len(inside)}; rate x duration {nominal:.0f} "
        f"({(len(inside) / nominal - 1) * 100:+.1f} %); burst + rate x duration {bound:.0f} "
        f"({(len(inside) / bound - 1) * 100:+.1f} %)"
    )
    if len(inside) > rate:
        steady = inside[rate:]  # after the opening burst
        span = steady[-1] - steady[0]
        print(f"  steady rate after the burst {(len(steady) - 1) / span:.2f} calls/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--rate", type=int, default=20)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--memory", action="store_true", help="also a bucket per process")
    parser.add_argument("--skip-hold", action="store_true", help="per-call figures only")
    options = parser.parse_args()
    with redis_server() as socket:
        asyncio.run(per_call(socket, options.rounds, options.calls))
        if options.skip_hold:
            return
        for shared in (True, False) if options.memory else (True,):
            rate_hold(
                socket,
                options.processes,
                options.callers,
                options.rate,
                options.duration,
                shared,
            )


if __name__ == "__main__":
    main()
