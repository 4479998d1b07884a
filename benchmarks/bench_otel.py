"""OpenTelemetry benchmark: what tracing costs the loop, off and on.

Run with the benchmark venv (it needs ``opentelemetry-sdk``)::

    .venv-bench/bin/python benchmarks/bench_otel.py

The workload is ``bench_cycle.py``'s: 3 requests per loop against a loopback
:class:`~agcore_tools.testing.ScriptedChatServer`, the first two answered with parallel
tool calls (3, then 2), so one loop makes 9 spans (``invoke_agent``, 3 ``chat``,
5 ``execute_tool``). Two parts:

- **off**: ``submit_with_tools`` (and the streaming loop) per turn with tracing off and
  ``opentelemetry`` never imported, in this tree and in a baseline tree without the
  tracing hooks (``--baseline REF``, default the merge base with ``main``, extracted
  with ``git archive``). The two trees cannot share a process, so each run is a child
  process; children alternate (``--pairs`` pairs), and each reports the median of its
  interleaved rounds. Also timed: the hooks' own checks, in nanoseconds.
- **on**: in one process, the same loops with tracing on (SDK ``TracerProvider``,
  ``BatchSpanProcessor``, an exporter that drops the spans) and off
  (``configure_tracing(enabled=False)``), interleaved; the difference per loop divided
  by the 9 spans is the cost of one span.

Options: ``--quick``, ``--rounds N``, ``--loops N``, ``--pairs N``, ``--baseline REF``,
``--json PATH`` (default ``benchmarks/results/bench_otel.json``).
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
import tarfile
import tempfile
import time
import timeit
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPANS_PER_LOOP = 9  # invoke_agent + 3 chat + 5 execute_tool, checked by the "on" part
US = 1e6


def contenders(client: Any, wrap: Any = None) -> list[Any]:
    """The loop and the streaming loop of bench_cycle, optionally wrapped."""
    from bench_cycle import Contender, agcore_contenders

    found = agcore_contenders(client)
    if wrap is None:
        return found
    return [Contender(f"{c.name} {wrap[0]}", wrap[1](c.loop), c.note) for c in found]


# -- off: this tree against the baseline, in child processes --------------------------


async def child(rounds: int, loops: int) -> dict[str, Any]:
    from bench_cycle import ScriptedChatServer, by_progress, measure

    with ScriptedChatServer([by_progress], repeat=True) as server:
        client = server.client(timeout=30.0)
        found = contenders(client)
        await measure(found, server, rounds, loops)
        await client.close()
    assert not any(m.startswith("opentelemetry") for m in sys.modules), "tracing was imported"
    return {c.name: {"wall": c.median_ms("wall"), "cpu": c.median_ms("cpu")} for c in found}


async def count_calls(loops: int) -> dict[str, float]:
    """Python function calls per turn (cProfile), a measure machine load cannot move."""
    import cProfile
    import pstats

    from bench_cycle import ScriptedChatServer, by_progress

    with ScriptedChatServer([by_progress], repeat=True) as server:
        client = server.client(timeout=30.0)
        found: dict[str, float] = {}
        for contender in contenders(client):
            await contender.loop()
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(loops):
                await contender.loop()
            profile.disable()
            calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
            found[contender.name] = calls / (loops * 3)
        await client.close()
    return found


def extract(ref: str) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "agcore_tools"],
        capture_output=True,
        check=True,
    ).stdout
    target = Path(tempfile.mkdtemp(prefix="bench_otel_base_"))
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def run_child(tree: Path, rounds: int, loops: int, *, calls: bool = False) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT / "benchmarks")])}
    command = [sys.executable, __file__, "--child", "--rounds", str(rounds), "--loops", str(loops)]
    command += ["--count-calls"] if calls else []
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"child failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def hook_costs() -> dict[str, float]:
    """CPU nanoseconds of what the tracing hooks add when tracing is off."""
    import contextlib

    from openai import AsyncOpenAI

    from agcore_tools import CycleConfig, ToolRegistry, _otel
    from agcore_tools.cycle import EventStream, OpenAIRequester
    from agcore_tools.cycle._outcome import Outcome
    from agcore_tools.cycle._trace import run_trace

    client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="-")
    requester = OpenAIRequester(client)
    config = CycleConfig("m")
    registry = ToolRegistry()

    async def guarded(*_: Any) -> Any:
        return None

    async def events() -> Any:
        yield 1

    stream = EventStream(events(), Outcome(), None)

    async def plain(n: int) -> None:
        for _ in range(n):
            async for _event in events():
                pass

    async def closed(n: int) -> None:
        for _ in range(n):
            agen = events()
            async with contextlib.aclosing(agen):
                async for _event in agen:
                    pass

    def cpu(function: Any, number: int) -> float:
        best = min(timeit.repeat(function, number=number, repeat=7, timer=time.thread_time))
        return best / number * 1e9

    number = 100_000
    empty = cpu(lambda: None, number)
    aclosing = min(
        cpu(lambda: asyncio.run(closed(2000)), 1) - cpu(lambda: asyncio.run(plain(2000)), 1)
        for _ in range(5)
    )
    return {
        "run_trace() per submit call": cpu(lambda: run_trace(config, requester, Outcome()), number)
        - empty,
        "wrap_invoke() per tool batch": cpu(
            lambda: _otel.wrap_invoke(registry.tool_table, guarded), number
        )
        - empty,
        "the _trace check per event": cpu(lambda: stream._trace is None, number) - empty,
        "aclosing() per request": max(aclosing / 2000, 0.0),
    }


def per_turn_ns(hooks: dict[str, float]) -> float:
    """The hooks' cost per turn of the workload: a submit call per 3 turns, 2 tool
    batches per 3 turns, a request per turn and at most 6 events per turn."""
    return (
        hooks["run_trace() per submit call"] / 3
        + hooks["wrap_invoke() per tool batch"] * 2 / 3
        + hooks["aclosing() per request"]
        + hooks["the _trace check per event"] * 6
    )


def off_part(args: argparse.Namespace, rounds: int) -> dict[str, Any]:
    base = extract(args.baseline)
    runs: dict[str, list[dict[str, Any]]] = {"this tree": [], "baseline": []}
    for pair in range(args.pairs):
        order = [("this tree", ROOT), ("baseline", base)]
        if pair % 2:
            order.reverse()
        for label, tree in order:
            runs[label].append(run_child(tree, rounds, args.loops))
    rows = []
    for name in runs["this tree"][0]:
        row: dict[str, Any] = {"loop": name}
        for kind in ("wall", "cpu"):
            ours = statistics.median(r[name][kind] for r in runs["this tree"])
            theirs = statistics.median(r[name][kind] for r in runs["baseline"])
            row[f"{kind}_ms"] = ours
            row[f"baseline_{kind}_ms"] = theirs
            row[f"{kind}_change_percent"] = (ours / theirs - 1) * 100
        rows.append(row)
    hooks = hook_costs()
    counted = {label: run_child(tree, 1, 30, calls=True) for label, tree in order}
    for row in rows:
        ours, theirs = counted["this tree"][row["loop"]], counted["baseline"][row["loop"]]
        row["python_calls_per_turn"] = ours
        row["baseline_python_calls_per_turn"] = theirs
        row["calls_change_percent"] = (ours / theirs - 1) * 100
    return {
        "baseline": args.baseline,
        "pairs": args.pairs,
        "rows": rows,
        "hooks_ns": hooks,
        "hooks_ns_per_turn": per_turn_ns(hooks),
    }


# -- on: tracing on against off, in this process -----------------------------------------


class _Drop:
    """A span exporter that drops everything (the export path is the SDK's, not ours)."""

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


async def on_part(rounds: int, loops: int) -> dict[str, Any]:
    from bench_cycle import ScriptedChatServer, by_progress, measure
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agcore_tools import configure_tracing

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_Drop()))  # type: ignore[arg-type]

    def traced(loop: Any) -> Any:
        async def run() -> str:
            configure_tracing(provider)
            return str(await loop())

        return run

    def untraced(loop: Any) -> Any:
        async def run() -> str:
            configure_tracing(enabled=False)
            return str(await loop())

        return run

    with ScriptedChatServer([by_progress], repeat=True) as server:
        client = server.client(timeout=30.0)
        on = contenders(client, ("tracing on", traced))
        off = contenders(client, ("tracing off", untraced))
        # How many spans one loop makes, counted once.
        exporter = InMemorySpanExporter()
        counting = TracerProvider()
        counting.add_span_processor(SimpleSpanProcessor(exporter))
        configure_tracing(counting)
        await contenders(client)[0].loop()
        spans = len(exporter.get_finished_spans())
        assert spans == SPANS_PER_LOOP, spans
        await measure([*on, *off], server, rounds, loops)
        await client.close()
    configure_tracing()
    spans_alone = await span_costs(provider, rounds)
    provider.shutdown()
    rows = []
    for traced_one, plain in zip(on, off, strict=True):
        row: dict[str, Any] = {"loop": plain.name.removesuffix(" tracing off")}
        for kind in ("wall", "cpu"):
            per_loop_us = (traced_one.median_ms(kind) - plain.median_ms(kind)) * 3 * 1e3
            row[f"off_{kind}_ms_per_turn"] = plain.median_ms(kind)
            row[f"on_{kind}_ms_per_turn"] = traced_one.median_ms(kind)
            row[f"{kind}_us_per_span"] = per_loop_us / SPANS_PER_LOOP
        rows.append(row)
    return {"spans_per_loop": SPANS_PER_LOOP, "rows": rows, "registry_call_us": spans_alone}


async def span_costs(provider: Any, repeat: int, *, gc_off: bool = False) -> dict[str, float]:
    """CPU microseconds of one registry call (one ``execute_tool`` span when traced), in
    four modes interleaved in the same event loop, and of a bare SDK span in a tight loop.

    - ``untraced call``: tracing off;
    - ``traced call``: tracing on, the SDK provider;
    - ``our code, no-op tracer``: tracing on with OpenTelemetry's no-op provider, so
      what is left over the untraced call is our span path alone (attributes, the
      tracer lookup, making the span current) plus a no-op span;
    - ``SDK span around the call``: tracing off, the call inside the SDK's own
      ``start_as_current_span`` with the same attributes: the SDK's floor for a span
      current around the same work, measured beside ours.
    """
    from opentelemetry.trace import NoOpTracerProvider, SpanKind

    from agcore_tools import ToolRegistry, configure_tracing

    registry = ToolRegistry()

    @registry.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    calls = [("add", {"a": 1, "b": 2}, "call_1")]
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.description": "Add two integers.",
    }
    tracer = provider.get_tracer("bench")
    noop = NoOpTracerProvider()
    number = 2000
    modes = {
        "untraced call": None,
        "traced call": provider,
        "our code, no-op tracer": noop,
        "SDK span around the call": None,
    }

    async def batch(mode: str) -> float:
        chosen = modes[mode]
        configure_tracing(chosen) if chosen is not None else configure_tracing(enabled=False)
        around = mode == "SDK span around the call"
        started = time.thread_time()
        for _ in range(number):
            if around:
                with tracer.start_as_current_span(
                    "execute_tool add", kind=SpanKind.INTERNAL, attributes=attributes
                ):
                    await registry.invoke_all(calls)
            else:
                await registry.invoke_all(calls)
            # Let the loop turn, as it does between real calls: it then drops the call's
            # cancelled timeout handle, whose copied context holds the span; without
            # that, thousands pile up and garbage collection gets slower and slower.
            await asyncio.sleep(0)
        return (time.thread_time() - started) / number * US

    def bare() -> float:
        started = time.thread_time()
        for _ in range(number):
            with tracer.start_as_current_span("execute_tool add", attributes=attributes):
                pass
        return (time.thread_time() - started) / number * US

    for mode in modes:  # warm-up, then freeze the heap as bench_core does
        await batch(mode)
    bare()
    gc.collect()
    gc.freeze()
    if gc_off:
        gc.disable()
    found: dict[str, list[float]] = {name: [] for name in [*modes, "bare SDK span"]}
    for _ in range(repeat):
        for mode in modes:
            found[mode].append(await batch(mode))
        found["bare SDK span"].append(bare())
    gc.enable()
    configure_tracing()
    return {name: statistics.median(values) for name, values in found.items()}


def span_summary(costs: dict[str, float]) -> str:
    """The per-span figures: the SDK's floor, ours, and our overhead over the floor."""
    untraced = costs["untraced call"]
    floor = costs["SDK span around the call"] - untraced
    ours = costs["traced call"] - untraced
    own = costs["our code, no-op tracer"] - untraced
    return (
        f"one execute_tool span, CPU: ours {ours:.1f} µs; the SDK's own span around the same "
        f"call {floor:.1f} µs (ours - SDK: {ours - floor:+.1f} µs); our code alone, with a "
        f"no-op tracer, {own:.1f} µs; a bare SDK span in a tight loop "
        f"{costs['bare SDK span']:.1f} µs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds, for a smoke run")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--loops", type=int, default=20, help="loops per contender per round")
    parser.add_argument("--pairs", type=int, default=None, help="child runs per tree")
    parser.add_argument("--baseline", default=None, help="git ref of the tree without hooks")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--count-calls", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--spans-only", action="store_true", help="only the span micro-benchmark")
    parser.add_argument("--gc-off", action="store_true", help="garbage collection off in it")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/bench_otel.json")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 9)
    if args.child:
        work = count_calls(args.loops) if args.count_calls else child(rounds, args.loops)
        print(json.dumps(asyncio.run(work)))
        return
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this tree, not an installed one
    if args.spans_only:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(_Drop()))  # type: ignore[arg-type]
        costs = asyncio.run(span_costs(provider, rounds, gc_off=args.gc_off))
        provider.shutdown()
        print("CPU µs per registry call:", {k: round(v, 1) for k, v in costs.items()})
        print(span_summary(costs))
        return
    args.pairs = args.pairs or (1 if args.quick else 5)
    if args.baseline is None:
        args.baseline = subprocess.run(
            ["git", "-C", str(ROOT), "merge-base", "HEAD", "main"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    started = time.perf_counter()
    off = off_part(args, rounds)
    on = asyncio.run(on_part(rounds * 2, args.loops))

    print(f"Tracing off: this tree against {args.baseline[:12]} ({args.pairs} child runs each)")
    for row in off["rows"]:
        print(
            f"  {row['loop']:<28} wall {row['wall_ms']:.3f} vs {row['baseline_wall_ms']:.3f} ms/turn "
            f"({row['wall_change_percent']:+.1f} %), client CPU {row['cpu_ms']:.3f} vs "
            f"{row['baseline_cpu_ms']:.3f} ({row['cpu_change_percent']:+.1f} %)"
        )
    for row in off["rows"]:
        print(
            f"  {row['loop']:<28} Python calls per turn {row['python_calls_per_turn']:.0f} vs "
            f"{row['baseline_python_calls_per_turn']:.0f} ({row['calls_change_percent']:+.2f} %)"
        )
    for name, ns in off["hooks_ns"].items():
        print(f"  hook, {name}: {ns:.0f} ns CPU")
    per_turn = off["hooks_ns_per_turn"]
    share = per_turn / (off["rows"][0]["baseline_cpu_ms"] * 1e6) * 100
    print(
        f"  hooks per turn: {per_turn:.0f} ns = {share:.3f} % of the baseline's client CPU per turn"
    )
    print(f"Tracing on: {SPANS_PER_LOOP} spans per loop, BatchSpanProcessor, spans dropped")
    for row in on["rows"]:
        print(
            f"  {row['loop']:<28} wall {row['on_wall_ms_per_turn']:.3f} vs "
            f"{row['off_wall_ms_per_turn']:.3f} ms/turn: {row['wall_us_per_span']:.1f} µs/span; "
            f"client CPU {row['cpu_us_per_span']:.1f} µs/span"
        )
    print("  " + span_summary(on["registry_call_us"]))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"off": off, "on": on}, indent=2) + "\n")
    print(f"({time.perf_counter() - started:.0f} s; results in {args.json})")


if __name__ == "__main__":
    main()
