"""Scale benchmark: N concurrent 3-turn tool loops in one process.

Run with the benchmark venv (``make bench`` creates it)::

    .venv-bench/bin/python benchmarks/bench_scale.py            # N = 10, 100, 1000
    .venv-bench/bin/python benchmarks/bench_scale.py --n 10 100 --rounds 2   # a quick run

The model is ``benchmarks/scale_server.py``, a separate process answering from bytes
prepared at start-up (the script of ``bench_cycle.py``: 3 parallel tool calls, then 2,
then text), so it is never the bottleneck. Each contender runs in a fresh process of
its own (so its peak RSS is its own), N conversations at once (``asyncio.gather``),
each a 3-request tool loop from a fresh state; for N below 100, batches of N follow
each other until 100 conversations have run. Contenders:

- ``raw``: the hand-written loop of ``bench_cycle.py`` on ``AsyncOpenAI``
  (``raw-stream``: its streaming twin; ``raw-rawresp``: the same loop reading the
  body with ``with_raw_response`` and ``json.loads``, building no SDK objects;
  ``raw-notransform``: that loop, also sending the history and tools in
  ``extra_body``, which skips the SDK's per-request walk of ``messages``);
- ``cycle``: ``LlmCycle.submit_with_tools``; ``cycle-stream``:
  ``submit_stream_with_tools`` with its events consumed;
- ``agents``: openai-agents ``Runner.run`` (``OpenAIChatCompletionsModel``, tracing off);
- ``bare``: the floor: ``httpx2.AsyncClient.post`` of the same three request bodies
  (no SDK, no loop), read as bytes.

and the transport under each, after the slash: ``default`` (the SDK's own client: one
pool of 1000 connections, 100 kept alive), ``tuned`` (one pool, 1000 kept alive),
``sharded`` (``agcore_tools.cycle.sharded_http_client()``: 64 pools of 16, all kept
alive); ``+gc``: the same, with the garbage collector tuned by the application after
the warm-up (``gc.freeze()``, ``gc.set_threshold(7000, 10, 10)``). SDK retries are off
everywhere.

Figures per contender and N: client CPU per turn (the process's CPU time over the
rounds, divided by the turns), p50 and p99 conversation latency (and per turn: /3),
peak RSS, and the most threads and sockets the process held while the N
conversations ran. Separately (``--memory``): memory held per idle ``LlmCycle`` with a
20-message history (tracemalloc), against the size of its message dicts.

Writes ``benchmarks/results/bench_scale.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

TURNS = 3
MIN_CONVERSATIONS = 100  # per round, for small N
CONTENDERS = [
    "raw/default",
    "raw/sharded",
    "raw-rawresp/sharded",
    "raw-stream/sharded",
    "raw-notransform/sharded",
    "cycle/default",
    "cycle/tuned",
    "cycle/sharded",
    "cycle-stream/sharded",
    "agents/sharded",
    "bare/default",
    "bare/sharded",
    "raw/sharded+gc",
    "cycle/sharded+gc",
]


# -- the worker: one contender, one N, in a process of its own ---------------------------


def http_client(transport: str) -> Any:
    import httpx2
    from openai import DefaultAsyncHttpxClient

    from agcore_tools.cycle import sharded_http_client

    if transport == "default":
        client = DefaultAsyncHttpxClient()
    elif transport == "tuned":
        client = DefaultAsyncHttpxClient(
            limits=httpx2.Limits(max_connections=1000, max_keepalive_connections=1000)
        )
    elif transport == "sharded":
        client = sharded_http_client()
    else:
        raise SystemExit(f"unknown transport {transport!r}")
    # The SDK's 5 s connect timeout is too short for a thousand connections opened at
    # once by a process sharing two cores; the figures are CPU, not connect time.
    client.timeout = httpx2.Timeout(600.0, connect=120.0)
    return client


def make_loop(kind: str, client: Any, base_url: str) -> Any:
    from bench_cycle import agcore_contenders, agents_contender, raw_contenders

    if kind == "raw":
        return raw_contenders(client)[0].loop
    if kind == "raw-stream":
        return raw_contenders(client)[1].loop
    if kind == "cycle":
        return agcore_contenders(client)[0].loop
    if kind == "cycle-stream":
        return agcore_contenders(client)[1].loop
    if kind == "agents":
        agents = agents_contender(client)  # [Chat Completions, Responses], or []
        if not agents:
            raise SystemExit("openai-agents is not installed: use the bench venv")
        return agents[0].loop
    if kind == "raw-rawresp":
        return rawresp_loop(client)
    if kind == "raw-notransform":
        return rawresp_loop(client, transform=False)
    if kind == "bare":
        return bare_loop(client, base_url)
    raise SystemExit(f"unknown contender {kind!r}")


def rawresp_loop(client: Any, transform: bool = True) -> Any:
    """The raw loop, reading each answer as JSON (``with_raw_response``), no SDK models.

    With ``transform=False`` the history goes in ``extra_body``, which the SDK sends as
    it is, instead of ``messages``, which it walks against its TypedDicts first.
    """
    from bench_cycle import PROMPT, add, get_weather

    functions = {"get_weather": get_weather, "add": add}
    definitions = _tool_definitions()
    create = client.chat.completions.with_raw_response.create

    async def run(call: dict[str, Any]) -> str:
        function = call["function"]
        result = await functions[function["name"]](**json.loads(function["arguments"]))
        return result if isinstance(result, str) else json.dumps(result)

    async def loop() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        while True:
            if transform:
                raw = await create(model="bench-model", messages=messages, tools=definitions)
            else:
                raw = await create(
                    model="bench-model",
                    messages=[],
                    extra_body={"messages": messages, "tools": definitions},
                )
            message = json.loads(raw.http_response.content)["choices"][0]["message"]
            calls = message.get("tool_calls") or []
            turn = {"role": "assistant", "content": message.get("content")}
            if calls:
                turn["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": c["function"]} for c in calls
                ]
            messages.append(turn)
            if not calls:
                return message.get("content") or ""
            results = await asyncio.gather(*(run(c) for c in calls))
            messages.extend(
                {"role": "tool", "tool_call_id": c["id"], "content": r}
                for c, r in zip(calls, results, strict=True)
            )

    return loop


def _tool_definitions() -> list[dict[str, Any]]:
    def function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": list(properties),
                    "additionalProperties": False,
                },
            },
        }

    return [
        function("get_weather", "Current weather for a city.", {"city": {"type": "string"}}),
        function("add", "Add two integers.", {"a": {"type": "integer"}, "b": {"type": "integer"}}),
    ]


def bare_loop(http: Any, base_url: str) -> Any:
    """Three posts of fixed request bodies: the transport alone, the floor under any loop."""
    from bench_cycle import PROMPT

    definitions = _tool_definitions()
    user = {"role": "user", "content": PROMPT}
    assistant = {"role": "assistant", "content": None}
    bodies = [
        json.dumps(
            {"model": "bench-model", "messages": [user, *[assistant] * k], "tools": definitions}
        ).encode()
        for k in range(TURNS)
    ]
    url = base_url + "/chat/completions"
    headers = {"content-type": "application/json", "authorization": "Bearer bench"}

    async def loop() -> str:
        content = b""
        for body in bodies:
            response = await http.post(url, content=body, headers=headers)
            content = response.content
        return json.loads(content)["choices"][0]["message"]["content"]

    return loop


def open_sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return count


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def run_worker(name: str, n: int, rounds: int, base_url: str) -> dict[str, Any]:
    from bench_cycle import SCRIPT
    from openai import AsyncOpenAI

    kind, transport = name.split("/")
    transport, tune_gc = transport.removesuffix("+gc"), transport.endswith("+gc")
    http = http_client(transport)
    client = AsyncOpenAI(
        api_key="bench", base_url=base_url, max_retries=0, http_client=http, timeout=http.timeout
    )
    loop = make_loop(kind, http if kind == "bare" else client, base_url)
    expected = SCRIPT[-1].text

    async def timed(latencies: list[float]) -> None:
        start = time.perf_counter()
        answer = await loop()
        latencies.append(time.perf_counter() - start)
        if answer != expected:
            raise AssertionError(f"{name}: unexpected answer {answer!r}")

    peak = {"threads": 0, "sockets": 0}
    running = True

    async def sample() -> None:
        while running:
            peak["threads"] = max(peak["threads"], len(os.listdir("/proc/self/task")))
            peak["sockets"] = max(peak["sockets"], open_sockets())
            await asyncio.sleep(0.25)

    await asyncio.gather(*(timed([]) for _ in range(min(n, 50))))  # warm-up
    if tune_gc:
        # What an application can do: objects alive after start-up leave the collector's
        # sight, and young collections run ten times less often.
        gc.freeze()
        gc.set_threshold(7000, 10, 10)
    rss_before = rss_mb()
    batches = max(1, math.ceil(MIN_CONVERSATIONS / n))
    latencies: list[float] = []
    cpu_per_turn: list[float] = []
    sampler = asyncio.create_task(sample())
    for _ in range(rounds):
        gc.collect()
        cpu0 = time.process_time()
        for _ in range(batches):
            await asyncio.gather(*(timed(latencies) for _ in range(n)))
        cpu_per_turn.append((time.process_time() - cpu0) / (batches * n * TURNS))
    running = False
    await sampler
    await client.close()
    await http.aclose()
    ordered = sorted(latencies)

    def quantile(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "contender": name,
        "n": n,
        "rounds": rounds,
        "conversations": len(latencies),
        "cpu_ms_per_turn": statistics.median(cpu_per_turn) * 1e3,
        "cpu_ms_per_turn_rounds": [c * 1e3 for c in cpu_per_turn],
        "p50_conversation_ms": quantile(0.50) * 1e3,
        "p99_conversation_ms": quantile(0.99) * 1e3,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_before_mb": rss_before,
        "peak_threads": peak["threads"],
        "peak_sockets": peak["sockets"],
        "threads_python": threading.active_count(),
    }


# -- idle memory: what an LlmCycle with a 20-message history holds ---------------------------


def deep_size(value: Any, seen: set[int] | None = None) -> int:
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        size += sum(deep_size(v, seen) for v in value)
    return size


async def run_memory(base_url: str, count: int = 200) -> dict[str, Any]:
    import tracemalloc

    from bench_cycle import PROMPT, add, get_weather
    from openai import AsyncOpenAI

    from agcore_tools import CycleConfig, LlmCycle, ToolRegistry

    registry = ToolRegistry()
    registry.tool(get_weather)
    registry.tool(add)
    config = CycleConfig("bench-model")
    client = AsyncOpenAI(api_key="bench", base_url=base_url, max_retries=0)

    async def fill(cycle: LlmCycle) -> None:
        # Two tool loops (9 messages each) and one plain exchange: 20 messages.
        await cycle.submit_with_tools(PROMPT, registry)
        await cycle.submit_with_tools(PROMPT, registry)
        await cycle.submit("Thanks.")

    async def batch() -> list[LlmCycle]:
        cycles = [LlmCycle(config, client=client) for _ in range(count)]
        await asyncio.gather(*(fill(c) for c in cycles))
        return cycles

    tracemalloc.start()
    del_me = await batch()  # warm-up: pools, caches, lazy imports
    del del_me
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    cycles = await batch()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    lengths = {len(c.messages) for c in cycles}
    per_cycle = (after - before) / count
    messages = statistics.mean(deep_size(c.messages) for c in cycles)
    # What a bare cycle costs before any message: its retry-less client copy and fields.
    gc.collect()
    empty0 = tracemalloc.get_traced_memory()[0]
    empties = [LlmCycle(config, client=client) for _ in range(count)]
    gc.collect()
    empty = (tracemalloc.get_traced_memory()[0] - empty0) / count
    del empties
    tracemalloc.stop()
    await client.close()
    return {
        "history_messages": sorted(lengths),
        "bytes_per_idle_cycle": per_cycle,
        "bytes_of_message_dicts": messages,
        "ratio": per_cycle / messages,
        "bytes_per_empty_cycle": empty,
        "tasks_after": len(asyncio.all_tasks()) - 1,
        "threads_after": threading.active_count(),
    }


# -- the driver ----------------------------------------------------------------------------


def start_server() -> tuple[subprocess.Popen[str], str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    server = subprocess.Popen(
        [sys.executable, str(HERE / "scale_server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    return server, f"http://127.0.0.1:{port}/v1"


def worker(args: list[str]) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env=env, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def rounds_for(n: int, rounds: int | None) -> int:
    if rounds is not None:
        return rounds
    return 1 if n >= 1000 else 3


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"\n{'N':>5} {'contender':<22} {'CPU ms/turn':>11} {'x raw':>6} {'x own N=10':>10} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'p99 x raw':>9} {'RSS MB':>7} {'thr':>4} {'sock':>5}"
    )
    by = {(r["contender"], r["n"]): r for r in rows}
    for r in sorted(rows, key=lambda r: (r["n"], CONTENDERS.index(r["contender"]))):
        kind, transport = r["contender"].split("/")
        base_kind = "raw-stream" if "stream" in kind else "raw"
        base = by.get((f"{base_kind}/{transport}", r["n"])) or by.get(
            (f"{base_kind}/sharded", r["n"])
        )
        own10 = by.get((r["contender"], 10))
        ratio = r["cpu_ms_per_turn"] / base["cpu_ms_per_turn"] if base else math.nan
        p99 = r["p99_conversation_ms"] / base["p99_conversation_ms"] if base else math.nan
        growth = r["cpu_ms_per_turn"] / own10["cpu_ms_per_turn"] if own10 else math.nan
        print(
            f"{r['n']:>5} {r['contender']:<22} {r['cpu_ms_per_turn']:>11.2f} {ratio:>5.2f}x "
            f"{growth:>9.2f}x {r['p50_conversation_ms']:>8.1f} {r['p99_conversation_ms']:>8.1f} "
            f"{p99:>8.2f}x {r['peak_rss_mb']:>7.0f} {r['peak_threads']:>4} {r['peak_sockets']:>5}"
        )


def write(path: Path, rows: list[dict[str, Any]], memory: dict[str, Any] | None) -> None:
    from bench_cycle import versions

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "benchmark": "scale",
                "turns_per_conversation": TURNS,
                "results": rows,
                "idle_memory": memory,
                "versions": versions(),
                "machine": {
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                    "cpus": os.cpu_count(),
                },
            },
            indent=2,
        )
        + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--rounds", type=int, default=None, help="default: 3, or 1 at N >= 1000")
    parser.add_argument("--contenders", nargs="+", default=CONTENDERS, choices=CONTENDERS)
    parser.add_argument("--no-memory", action="store_true", help="skip the idle-memory figure")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/bench_scale.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--memory-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        result = asyncio.run(run_worker(args.worker, args.n[0], args.rounds, args.base_url))
        print(json.dumps(result))
        return
    if args.memory_worker:
        print(json.dumps(asyncio.run(run_memory(args.base_url))))
        return

    server, base_url = start_server()
    rows: list[dict[str, Any]] = []
    memory: dict[str, Any] | None = None
    try:
        for n in args.n:
            order = list(args.contenders)
            random.shuffle(order)
            for name in order:
                rounds = rounds_for(n, args.rounds)
                try:
                    row = worker(
                        [
                            "--worker",
                            name,
                            "--n",
                            str(n),
                            "--rounds",
                            str(rounds),
                            "--base-url",
                            base_url,
                        ]
                    )
                    print(
                        f"N={n:<5} {name:<22} {row['cpu_ms_per_turn']:.2f} ms CPU/turn, "
                        f"p99 {row['p99_conversation_ms']:.1f} ms",
                        flush=True,
                    )
                    rows.append(row)
                except RuntimeError as exc:  # one contender failing must not lose the rest
                    print(f"N={n:<5} {name:<22} FAILED: {exc}", flush=True)
                write(args.json, rows, None)
        if not args.no_memory:
            memory = worker(["--memory-worker", "--base-url", base_url])
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)

    print_table(rows)
    if memory is not None:
        print(
            f"\nidle LlmCycle, {memory['history_messages']} messages: "
            f"{memory['bytes_per_idle_cycle'] / 1024:.1f} KiB held, message dicts "
            f"{memory['bytes_of_message_dicts'] / 1024:.1f} KiB ({memory['ratio']:.2f}x); "
            f"an empty cycle {memory['bytes_per_empty_cycle'] / 1024:.1f} KiB"
        )

    write(args.json, rows, memory)
    print(f"\nresults written to {args.json}")


if __name__ == "__main__":
    main()
