"""MCP benchmark: per-call latency (sequential) and 200 concurrent calls, over stdio
and over Streamable HTTP.

Run with the benchmark venv (``make bench`` creates it)::

    .venv-bench/bin/python benchmarks/bench_mcp.py

The server is ``benchmarks/mcp_bench_server.py`` (an MCPServer with an ``echo`` tool).
Over stdio every contender starts its own copy; over Streamable HTTP all of them open
sessions on one copy (uvicorn on 127.0.0.1). Servers are pinned to one CPU and the
benchmark to another (when the machine has two or more). Every round connects every
contender afresh (new client, new stdio server): two copies of the same client or
server run a few percent apart on this kind of machine for where they landed in
memory alone, and fresh copies each round keep one such draw from deciding every
round. Within a round the contenders take turns in blocks of 25 sequential calls, in a
new random order for each block, so machine noise hits them alike. Contenders, on each
transport:

- the raw ``mcp.ClientSession`` over the SDK's ``stdio_client`` or
  ``streamable_http_client`` (the reference);
- ``McpClient.call_tool`` (stdio: also through a registry adapter, ``registry.invoke``);
- over stdio, two rows that tell the transport's share from the client's: the raw
  session over McpClient's own stdio transport, and the SDK session inside a connected
  McpClient called directly (it keeps the session's default request clock);
- the OpenAI Agents SDK's ``MCPServerStdio`` / ``MCPServerStreamableHttp.call_tool``;
- ``fastmcp.Client.call_tool``.

Each row is compared with the raw session on the same transport and protocol version:
the handshake (2025-11-25) and ``server/discover`` (2026-07-28); the peers negotiate
the latter. Peers whose package is missing are skipped, not faked.

Per contender and round it takes the wall time of 300 sequential calls (after 20 of
warm-up), the client's CPU time for them (``time.process_time`` of this process: the
servers are other processes, and contenders run one at a time), and the wall time of
200 concurrent calls. A ratio to the raw session is the median of the per-round ratios (each taken
moments apart in the same round), printed with its quartiles.

Options: ``--quick`` (fewer rounds), ``--rounds N``, ``--transport stdio|http|both``,
``--no-peers`` (only the raw session, ``McpClient.call_tool`` and the two stdio rows
above),
``--json PATH`` (default ``benchmarks/results/bench_mcp.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import http.client
import importlib.metadata
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agcore_tools import McpClient, StdioTransport, StreamableHttpTransport, ToolRegistry

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, str(ROOT / "benchmarks" / "mcp_bench_server.py")]
ARGS = {"text": "hello"}
# Every server copy hashes strings alike (Python randomises it per process otherwise),
# so copies of one server do not run at different speeds for that reason.
SERVER_ENV = {"PYTHONHASHSEED": "0"}
CONCURRENT = 200
BLOCK = 25  # sequential calls a contender makes before the next one's turn
WARM_UP = 20  # calls on each new connection before its first measured block
MS = 1e3

Call = Callable[[], Awaitable[Any]]
Era = Literal["auto", "legacy"]  # McpClient(protocol=...)
Connect = Callable[[AsyncExitStack], Awaitable[tuple[Call, str]]]


@dataclass
class Contender:
    """One way of calling the tool, and how to connect it afresh (once per round)."""

    name: str
    connect: Connect
    transport: str = "stdio"
    call: Call | None = None
    protocol: str = "?"
    sequential: list[float] = field(default_factory=list)  # seconds per call, per round
    concurrent: list[float] = field(default_factory=list)  # seconds per batch, per round
    cpu: list[float] = field(default_factory=list)  # client CPU seconds per sequential call


async def _session_on(stack: AsyncExitStack, streams: Any, modern: bool) -> tuple[Call, str]:
    """A raw ``ClientSession`` on ``streams`` (read, write), after its era's handshake."""
    from mcp import ClientSession

    read, write = streams
    session = await stack.enter_async_context(ClientSession(read, write))
    if modern:
        await session.discover()
    else:
        await session.initialize()

    async def call() -> Any:
        return await session.call_tool("echo", ARGS)

    return call, session.protocol_version or "?"


async def _raw_session(stack: AsyncExitStack, modern: bool) -> tuple[Call, str]:
    from mcp import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:], env=SERVER_ENV)
    return await _session_on(stack, await stack.enter_async_context(stdio_client(params)), modern)


async def _session_on_our_stdio(stack: AsyncExitStack, modern: bool) -> tuple[Call, str]:
    """The raw session over McpClient's own stdio transport: with the raw session over
    the SDK's ``stdio_client``, it tells the transport's share from the client's."""
    from agcore_tools.mcp._stdio import open_stdio

    transport = StdioTransport(SERVER[0], SERVER[1:], env=SERVER_ENV)
    streams = await stack.enter_async_context(open_stdio(transport, "bench", lambda _: None))
    return await _session_on(stack, streams, modern)


async def _session_of_mcp_client(stack: AsyncExitStack, protocol: Era) -> tuple[Call, str]:
    """The SDK session inside a connected McpClient, called directly."""
    client = McpClient(
        "bench", StdioTransport(SERVER[0], SERVER[1:], env=SERVER_ENV), protocol=protocol
    )
    await stack.enter_async_context(client)
    conn = client._session.conn
    assert conn is not None and conn.client is not None
    session = conn.client.session

    async def call() -> Any:
        return await session.call_tool("echo", ARGS)

    return call, client.protocol_version or "?"


async def _mcp_client(stack: AsyncExitStack, protocol: Era) -> tuple[Call, str]:
    client = McpClient(
        "bench", StdioTransport(SERVER[0], SERVER[1:], env=SERVER_ENV), protocol=protocol
    )
    await stack.enter_async_context(client)

    async def call() -> Any:
        return await client.call_tool("echo", ARGS)

    return call, client.protocol_version or "?"


async def _via_registry(stack: AsyncExitStack) -> tuple[Call, str]:
    transport = StdioTransport(SERVER[0], SERVER[1:], env=SERVER_ENV)
    client = McpClient("bench", transport, protocol="legacy")
    await stack.enter_async_context(client)
    registry = ToolRegistry()
    registry.register_all(client.into_tools(prefix=True))

    async def call() -> Any:
        return (await registry.invoke("bench__echo", ARGS)).result()

    return call, client.protocol_version or "?"


async def _agents(stack: AsyncExitStack) -> tuple[Call, str]:
    from agents.mcp import MCPServerStdio

    server = MCPServerStdio(
        params={"command": SERVER[0], "args": SERVER[1:], "env": SERVER_ENV}, cache_tools_list=True
    )
    await stack.enter_async_context(server)

    async def call() -> Any:
        return await server.call_tool("echo", ARGS)

    session = server.session
    return call, getattr(session, "protocol_version", None) or "?"


async def _fastmcp(stack: AsyncExitStack) -> tuple[Call, str]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport as FastStdio

    client = Client(FastStdio(SERVER[0], SERVER[1:], env=SERVER_ENV, keep_alive=False))
    await stack.enter_async_context(client)

    async def call() -> Any:
        return await client.call_tool("echo", ARGS)

    version = getattr(getattr(client, "session", None), "protocol_version", None)
    return call, version or "?"


def _http_server(stack: AsyncExitStack) -> str:
    """Start one bench server over Streamable HTTP; its URL once it answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [*SERVER, "--http-fd", str(sock.fileno())],
        pass_fds=[sock.fileno()],
        stdin=subprocess.DEVNULL,
        env={**os.environ, **SERVER_ENV},
    )
    sock.close()

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    stack.callback(stop)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", "/")  # queued in the backlog until uvicorn accepts it
        connection.getresponse().read()
    finally:
        connection.close()
    return f"http://127.0.0.1:{port}/mcp"


async def _raw_http(stack: AsyncExitStack, url: str, modern: bool) -> tuple[Call, str]:
    from mcp.client.streamable_http import streamable_http_client

    streams = await stack.enter_async_context(streamable_http_client(url))
    return await _session_on(stack, streams, modern)


async def _mcp_client_http(stack: AsyncExitStack, url: str, protocol: Era) -> tuple[Call, str]:
    transport = StreamableHttpTransport(url)
    client = McpClient("bench", transport, protocol=protocol)
    await stack.enter_async_context(client)

    async def call() -> Any:
        return await client.call_tool("echo", ARGS)

    return call, client.protocol_version or "?"


async def _agents_http(stack: AsyncExitStack, url: str) -> tuple[Call, str]:
    from agents.mcp import MCPServerStreamableHttp

    server = MCPServerStreamableHttp(params={"url": url}, cache_tools_list=True)
    await stack.enter_async_context(server)

    async def call() -> Any:
        return await server.call_tool("echo", ARGS)

    return call, getattr(server.session, "protocol_version", None) or "?"


async def _fastmcp_http(stack: AsyncExitStack, url: str) -> tuple[Call, str]:
    from fastmcp import Client

    client = Client(url)
    await stack.enter_async_context(client)

    async def call() -> Any:
        return await client.call_tool("echo", ARGS)

    version = getattr(getattr(client, "session", None), "protocol_version", None)
    return call, version or "?"


def _http_contenders(url: str, peers: bool) -> list[Contender]:
    def at(connect: Callable[[AsyncExitStack, str], Awaitable[tuple[Call, str]]]) -> Connect:
        return lambda stack: connect(stack, url)

    ways = [
        ("raw ClientSession", at(lambda s, u: _raw_http(s, u, modern=False))),
        ("McpClient.call_tool", at(lambda s, u: _mcp_client_http(s, u, "legacy"))),
        ("raw ClientSession (discover)", at(lambda s, u: _raw_http(s, u, modern=True))),
        ("McpClient.call_tool (discover)", at(lambda s, u: _mcp_client_http(s, u, "auto"))),
    ]
    if peers:
        ways += [
            ("openai-agents MCPServerStreamableHttp", at(_agents_http)),
            ("fastmcp.Client", at(_fastmcp_http)),
        ]
    return [Contender(name, connect, "http") for name, connect in ways]


def _stdio_contenders(peers: bool) -> list[Contender]:
    ways: list[tuple[str, Connect]] = [
        ("raw ClientSession", lambda s: _raw_session(s, modern=False)),
        ("McpClient.call_tool", lambda s: _mcp_client(s, "legacy")),
        ("ClientSession on McpClient's stdio", lambda s: _session_on_our_stdio(s, modern=False)),
        ("session inside McpClient", lambda s: _session_of_mcp_client(s, "legacy")),
    ]
    if peers:
        ways += [
            ("McpClient via registry.invoke", _via_registry),
            ("openai-agents MCPServerStdio", _agents),
            ("fastmcp.Client", _fastmcp),
        ]
    ways += [
        ("raw ClientSession (discover)", lambda s: _raw_session(s, modern=True)),
        ("McpClient.call_tool (discover)", lambda s: _mcp_client(s, "auto")),
        ("ClientSession on McpClient's stdio (discover)", lambda s: _session_on_our_stdio(s, True)),
        ("session inside McpClient (discover)", lambda s: _session_of_mcp_client(s, "auto")),
    ]
    return [Contender(name, connect) for name, connect in ways]


async def _connect(stack: AsyncExitStack, contenders: list[Contender]) -> list[Contender]:
    """Connect every contender (servers on the servers' CPU); those whose package is
    missing are left out."""
    _pin(-1)
    connected = []
    for contender in contenders:
        try:
            contender.call, contender.protocol = await contender.connect(stack)
        except ImportError as exc:
            print(f"skipping {contender.name}: {exc}", file=sys.stderr)
            continue
        connected.append(contender)
    _pin(0)
    return connected


async def _round(contenders: list[Contender], sequential_calls: int) -> list[Contender]:
    """One round on fresh connections (and fresh stdio servers): each copy of a client
    or server lands differently in memory and runs a few percent faster or slower than
    the next for that alone, so every round gets new ones rather than all rounds
    inheriting one draw."""
    async with AsyncExitStack() as stack:
        contenders = await _connect(stack, contenders)
        calls = {id(c): c.call for c in contenders if c.call is not None}
        for contender in contenders:  # warm up: imports, caches, the new connection
            call = calls[id(contender)]
            for _ in range(WARM_UP):
                await call()
        block = min(BLOCK, sequential_calls)
        wall = dict.fromkeys(calls, 0.0)
        cpu = dict.fromkeys(calls, 0.0)
        gc.collect()
        # Sequential calls in blocks of BLOCK, the contenders in a new random order for
        # each block: all of them see the same moments of the machine's load, and no
        # order effect (what one contender leaves for the loop to finish after its last
        # call runs in the next one's block) favours any of them.
        for _ in range(sequential_calls // block):
            order = contenders[:]
            random.shuffle(order)
            for contender in order:
                call = calls[id(contender)]
                # The servers are other processes: this process's CPU time while one
                # contender runs alone is its client cost (SDK, transport and wrapper).
                started_cpu = time.process_time()
                started = time.perf_counter()
                for _ in range(block):
                    await call()
                wall[id(contender)] += time.perf_counter() - started
                cpu[id(contender)] += time.process_time() - started_cpu
        done = sequential_calls // block * block
        for contender in contenders:
            contender.sequential.append(wall[id(contender)] / done)
            contender.cpu.append(cpu[id(contender)] / done)
        order = contenders[:]
        random.shuffle(order)
        for contender in order:
            call = calls[id(contender)]
            gc.collect()
            started = time.perf_counter()
            await asyncio.gather(*(call() for _ in range(CONCURRENT)))
            contender.concurrent.append(time.perf_counter() - started)
        # The peers' shutdown paths log noise on close; the figures are already taken.
        with contextlib.suppress(Exception):
            await stack.aclose()
    return contenders


def _paired(values: list[float], reference: list[float]) -> dict[str, float]:
    """Round-by-round ratios to the reference (both measured moments apart in the same
    round): their median and the range of the middle half (quartiles) and of all."""
    ratios = sorted(v / r for v, r in zip(values, reference, strict=True))
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    return {
        "median": round(statistics.median(ratios), 3),
        "q1": round(q1, 3),
        "q3": round(q3, 3),
        "min": round(ratios[0], 3),
        "max": round(ratios[-1], 3),
    }


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def _report(contenders: list[Contender]) -> dict[str, Any]:
    # Each row is compared with the raw session on the same transport and protocol version.
    raw = {
        (c.transport, c.protocol): c for c in contenders if c.name.startswith("raw ClientSession")
    }
    rows = []
    for c in contenders:
        seq = statistics.median(c.sequential)
        conc = statistics.median(c.concurrent)
        cpu = statistics.median(c.cpu)
        ref = raw.get((c.transport, c.protocol))
        if ref is c:
            ref = None
        rows.append(
            {
                "name": c.name,
                "transport": c.transport,
                "protocol": c.protocol,
                "sequential_ms_per_call": round(seq * MS, 3),
                "cpu_ms_per_call": round(cpu * MS, 3),
                "concurrent_200_ms": round(conc * MS, 1),
                "reference": ref.name if ref is not None else None,
                # Medians of the per-round ratios (see _paired), with their spread.
                "vs_reference_sequential": _paired(c.sequential, ref.sequential) if ref else None,
                "vs_reference_cpu": _paired(c.cpu, ref.cpu) if ref else None,
                "vs_reference_concurrent": _paired(c.concurrent, ref.concurrent) if ref else None,
            }
        )
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "versions": {p: _version(p) for p in ("mcp", "openai-agents", "fastmcp", "agcore-tools")},
        "rows": rows,
    }


def _ratio(paired: dict[str, float] | None) -> str:
    if paired is None:
        return "—"
    return f"{paired['median']:.3f}x [{paired['q1']:.2f}-{paired['q3']:.2f}]"


def _print(report: dict[str, Any], rounds: int, sequential_calls: int) -> None:
    print(
        f"MCP, {sequential_calls} sequential calls and {CONCURRENT} concurrent calls "
        f"per round, {rounds} rounds (Python {report['python']}; "
        + ", ".join(f"{k} {v}" for k, v in report["versions"].items())
        + f"); load average at the end {report['load_average']}"
    )
    print(
        "ms: medians over rounds; x raw: median of the per-round ratios to the raw session "
        "[quartiles]; CPU: this process's CPU time (the client's; servers are other processes)"
    )
    header = (
        f"{'contender':46} {'protocol':11} {'ms/call':>8} {'x raw':>19} {'CPU ms':>7} "
        f"{'x raw':>19} {'200 conc ms':>12} {'x raw':>19}"
    )
    transport = None
    for row in report["rows"]:
        if row["transport"] != transport:
            transport = row["transport"]
            print(f"\nover {transport}")
            print(header)
            print("-" * len(header))
        print(
            f"{row['name']:46} {row['protocol']:11} {row['sequential_ms_per_call']:8.3f} "
            f"{_ratio(row['vs_reference_sequential']):>19} {row['cpu_ms_per_call']:7.3f} "
            f"{_ratio(row['vs_reference_cpu']):>19} {row['concurrent_200_ms']:12.1f} "
            f"{_ratio(row['vs_reference_concurrent']):>19}"
        )


def _pin(cpu: int | None) -> str:
    """Pin this process to one CPU (children started later inherit it); "" if unsupported."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return ""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return ""
    os.sched_setaffinity(0, {cpus[cpu]})
    return f"cpu {cpus[cpu]}"


async def _run(rounds: int, sequential_calls: int, transports: str, peers: bool) -> dict[str, Any]:
    original = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    async with AsyncExitStack() as stack:
        # Servers on one CPU, clients on another: on a small machine, letting the
        # scheduler move a dozen busy processes around costs more than anything measured.
        servers_on = _pin(-1)
        contenders = _stdio_contenders(peers) if transports in ("stdio", "both") else []
        if transports in ("http", "both"):
            # One server process for all: each contender has its own session on it,
            # and they take turns.
            contenders += _http_contenders(_http_server(stack), peers)
        clients_on = _pin(0)
        for _ in range(rounds):
            contenders = await _round(contenders, sequential_calls)
        report = _report(contenders)
        report["pinning"] = {"servers": servers_on, "client": clients_on}
        if original is not None:
            os.sched_setaffinity(0, original)
    return report


async def _count(calls: int, peers: bool) -> None:
    """Print the Python function calls per tool call of each stdio contender (cProfile):
    a figure that load does not move."""
    import cProfile
    import pstats

    for contender in _stdio_contenders(peers):
        async with AsyncExitStack() as stack:
            try:
                call, protocol = await contender.connect(stack)
            except ImportError as exc:
                print(f"skipping {contender.name}: {exc}", file=sys.stderr)
                continue
            for _ in range(50):
                await call()
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(calls):
                await call()
            profile.disable()
            total = sum(row[1] for row in pstats.Stats(profile).stats.values())  # type: ignore[attr-defined]
            print(
                f"{contender.name:46s} {protocol:11s} {total / calls:8.0f} Python calls per tool call"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 100 calls")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=300, help="sequential calls per round")
    parser.add_argument("--transport", choices=["stdio", "http", "both"], default="both")
    parser.add_argument(
        "--no-peers",
        action="store_true",
        help="only the raw session and McpClient.call_tool (the rows the 1.05x target is about)",
    )
    parser.add_argument(
        "--count",
        action="store_true",
        help="count Python calls per tool call over stdio (cProfile) instead of timing",
    )
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/bench_mcp.json")
    options = parser.parse_args()
    rounds, calls = (3, 100) if options.quick else (options.rounds, options.calls)
    if options.count:
        asyncio.run(_count(calls, not options.no_peers))
        return
    report = asyncio.run(_run(rounds, calls, options.transport, not options.no_peers))
    _print(report, rounds, calls)
    options.json.parent.mkdir(parents=True, exist_ok=True)
    options.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
