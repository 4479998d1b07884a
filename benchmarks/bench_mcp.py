"""MCP benchmark: per-call latency (sequential) and 200 concurrent calls, over stdio
and over Streamable HTTP.

Run with the benchmark venv (``make bench`` creates it)::

    .venv-bench/bin/python benchmarks/bench_mcp.py

Every contender talks to its own copy of one loopback server
(``benchmarks/mcp_bench_server.py``, an MCPServer with an ``echo`` tool), over stdio or
over Streamable HTTP (uvicorn on 127.0.0.1), all started before the first measurement,
pinned to one CPU while the benchmark itself runs on another (when the machine has two
or more). They are measured in interleaved rounds (order shuffled each round) so
machine noise hits them alike; figures are medians over rounds. Contenders, on each
transport:

- the raw ``mcp.ClientSession`` over the SDK's ``stdio_client`` or
  ``streamable_http_client`` (the reference);
- ``McpClient.call_tool`` (stdio: also through a registry adapter, ``registry.invoke``);
- the OpenAI Agents SDK's ``MCPServerStdio`` / ``MCPServerStreamableHttp.call_tool``;
- ``fastmcp.Client.call_tool``.

Each row is compared with the raw session on the same transport and protocol version:
the handshake (2025-11-25) and ``server/discover`` (2026-07-28); the peers negotiate
the latter. Peers whose package is missing are skipped, not faked.

Options: ``--quick`` (fewer rounds), ``--rounds N``, ``--transport stdio|http|both``,
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
from typing import Any

from agcore_tools import McpClient, StdioTransport, StreamableHttpTransport, ToolRegistry

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, str(ROOT / "benchmarks" / "mcp_bench_server.py")]
ARGS = {"text": "hello"}
CONCURRENT = 200
MS = 1e3

Call = Callable[[], Awaitable[Any]]


@dataclass
class Contender:
    """One way of calling the tool, already connected."""

    name: str
    call: Call
    protocol: str
    transport: str = "stdio"
    sequential: list[float] = field(default_factory=list)  # seconds per call, per round
    concurrent: list[float] = field(default_factory=list)  # seconds per batch, per round


async def _raw_session(stack: AsyncExitStack, modern: bool) -> tuple[Call, str]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    read, write = await stack.enter_async_context(
        stdio_client(StdioServerParameters(command=SERVER[0], args=SERVER[1:]))
    )
    session = await stack.enter_async_context(ClientSession(read, write))
    if modern:
        await session.discover()
    else:
        await session.initialize()

    async def call() -> Any:
        return await session.call_tool("echo", ARGS)

    return call, session.protocol_version or "?"


async def _mcp_client(stack: AsyncExitStack, protocol: str) -> tuple[McpClient, str]:
    client = McpClient("bench", StdioTransport(SERVER[0], SERVER[1:]), protocol=protocol)  # type: ignore[arg-type]
    await stack.enter_async_context(client)
    return client, client.protocol_version or "?"


async def _agents(stack: AsyncExitStack) -> tuple[Call, str]:
    from agents.mcp import MCPServerStdio

    server = MCPServerStdio(
        params={"command": SERVER[0], "args": SERVER[1:]}, cache_tools_list=True
    )
    await stack.enter_async_context(server)

    async def call() -> Any:
        return await server.call_tool("echo", ARGS)

    session = server.session
    return call, getattr(session, "protocol_version", None) or "?"


async def _fastmcp(stack: AsyncExitStack) -> tuple[Call, str]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport as FastStdio

    client = Client(FastStdio(SERVER[0], SERVER[1:], keep_alive=False))
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


async def _raw_http(stack: AsyncExitStack, modern: bool) -> tuple[Call, str]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    read, write = await stack.enter_async_context(streamable_http_client(_http_server(stack)))
    session = await stack.enter_async_context(ClientSession(read, write))
    if modern:
        await session.discover()
    else:
        await session.initialize()

    async def call() -> Any:
        return await session.call_tool("echo", ARGS)

    return call, session.protocol_version or "?"


async def _mcp_client_http(stack: AsyncExitStack, protocol: str) -> tuple[Call, str]:
    transport = StreamableHttpTransport(_http_server(stack))
    client = McpClient("bench", transport, protocol=protocol)  # type: ignore[arg-type]
    await stack.enter_async_context(client)

    async def call() -> Any:
        return await client.call_tool("echo", ARGS)

    return call, client.protocol_version or "?"


async def _agents_http(stack: AsyncExitStack) -> tuple[Call, str]:
    from agents.mcp import MCPServerStreamableHttp

    server = MCPServerStreamableHttp(params={"url": _http_server(stack)}, cache_tools_list=True)
    await stack.enter_async_context(server)

    async def call() -> Any:
        return await server.call_tool("echo", ARGS)

    return call, getattr(server.session, "protocol_version", None) or "?"


async def _fastmcp_http(stack: AsyncExitStack) -> tuple[Call, str]:
    from fastmcp import Client

    client = Client(_http_server(stack))
    await stack.enter_async_context(client)

    async def call() -> Any:
        return await client.call_tool("echo", ARGS)

    version = getattr(getattr(client, "session", None), "protocol_version", None)
    return call, version or "?"


async def _connect_http(stack: AsyncExitStack) -> list[Contender]:
    contenders = []
    for name, connect in (
        ("raw ClientSession", lambda s: _raw_http(s, modern=False)),
        ("McpClient.call_tool", lambda s: _mcp_client_http(s, "legacy")),
        ("raw ClientSession (discover)", lambda s: _raw_http(s, modern=True)),
        ("McpClient.call_tool (discover)", lambda s: _mcp_client_http(s, "auto")),
        ("openai-agents MCPServerStreamableHttp", _agents_http),
        ("fastmcp.Client", _fastmcp_http),
    ):
        try:
            call, version = await connect(stack)
        except ImportError as exc:
            print(f"skipping {name}: {exc}", file=sys.stderr)
            continue
        contenders.append(Contender(name, call, version, "http"))
    return contenders


async def _connect_all(stack: AsyncExitStack) -> list[Contender]:
    contenders: list[Contender] = []
    raw, version = await _raw_session(stack, modern=False)
    contenders.append(Contender("raw ClientSession", raw, version))

    client, version = await _mcp_client(stack, "legacy")
    contenders.append(
        Contender("McpClient.call_tool", lambda: client.call_tool("echo", ARGS), version)
    )

    registry = ToolRegistry()
    registry.register_all(client.into_tools(prefix=True))

    async def via_registry() -> Any:
        return (await registry.invoke("bench__echo", ARGS)).result()

    contenders.append(Contender("McpClient via registry.invoke", via_registry, version))

    for name, connect in (("openai-agents MCPServerStdio", _agents), ("fastmcp.Client", _fastmcp)):
        try:
            call, version = await connect(stack)
        except ImportError as exc:
            print(f"skipping {name}: {exc}", file=sys.stderr)
            continue
        contenders.append(Contender(name, call, version))

    raw_modern, version = await _raw_session(stack, modern=True)
    contenders.append(Contender("raw ClientSession (discover)", raw_modern, version))
    modern, version = await _mcp_client(stack, "auto")
    contenders.append(
        Contender("McpClient.call_tool (discover)", lambda: modern.call_tool("echo", ARGS), version)
    )
    return contenders


async def _measure(contenders: list[Contender], rounds: int, sequential_calls: int) -> None:
    for contender in contenders:  # warm up: imports, caches, JIT-free but still
        for _ in range(20):
            await contender.call()
        await asyncio.gather(*(contender.call() for _ in range(CONCURRENT)))
    for _ in range(rounds):
        order = contenders[:]
        random.shuffle(order)
        for contender in order:
            gc.collect()
            started = time.perf_counter()
            for _ in range(sequential_calls):
                await contender.call()
            contender.sequential.append((time.perf_counter() - started) / sequential_calls)
            gc.collect()
            started = time.perf_counter()
            await asyncio.gather(*(contender.call() for _ in range(CONCURRENT)))
            contender.concurrent.append(time.perf_counter() - started)


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
        ref = raw.get((c.transport, c.protocol))
        rows.append(
            {
                "name": c.name,
                "transport": c.transport,
                "protocol": c.protocol,
                "sequential_ms_per_call": round(seq * MS, 3),
                "concurrent_200_ms": round(conc * MS, 1),
                "vs_reference_sequential": round(seq / statistics.median(ref.sequential), 3)
                if ref is not None and ref is not c
                else None,
                "vs_reference_concurrent": round(conc / statistics.median(ref.concurrent), 3)
                if ref is not None and ref is not c
                else None,
                "reference": ref.name if ref is not None and ref is not c else None,
            }
        )
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "versions": {p: _version(p) for p in ("mcp", "openai-agents", "fastmcp", "agcore-tools")},
        "rows": rows,
    }


def _print(report: dict[str, Any], rounds: int, sequential_calls: int) -> None:
    print(
        f"MCP, {sequential_calls} sequential calls and {CONCURRENT} concurrent calls "
        f"per round, median of {rounds} rounds (Python {report['python']}; "
        + ", ".join(f"{k} {v}" for k, v in report["versions"].items())
        + ")"
    )
    header = f"{'contender':38} {'protocol':11} {'ms/call':>8} {'vs ref':>7} {'200 conc ms':>12} {'vs ref':>7}"
    transport = None
    for row in report["rows"]:
        if row["transport"] != transport:
            transport = row["transport"]
            print(f"\nover {transport}")
            print(header)
            print("-" * len(header))
        seq_ratio = row["vs_reference_sequential"]
        conc_ratio = row["vs_reference_concurrent"]
        print(
            f"{row['name']:38} {row['protocol']:11} {row['sequential_ms_per_call']:8.3f} "
            f"{(f'{seq_ratio:.2f}x' if seq_ratio else '—'):>7} {row['concurrent_200_ms']:12.1f} "
            f"{(f'{conc_ratio:.2f}x' if conc_ratio else '—'):>7}"
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


async def _run(rounds: int, sequential_calls: int, transports: str) -> dict[str, Any]:
    original = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    async with AsyncExitStack() as stack:
        # Servers on one CPU, clients on another: on a small machine, letting the
        # scheduler move a dozen busy processes around costs more than anything measured.
        servers_on = _pin(-1)
        contenders = await _connect_all(stack) if transports in ("stdio", "both") else []
        if transports in ("http", "both"):
            contenders += await _connect_http(stack)
        clients_on = _pin(0)
        await _measure(contenders, rounds, sequential_calls)
        report = _report(contenders)
        report["pinning"] = {"servers": servers_on, "client": clients_on}
        if original is not None:
            os.sched_setaffinity(0, original)
        # The peers' shutdown paths log noise on close; the figures are already taken.
        with contextlib.suppress(Exception):
            await stack.aclose()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 100 calls")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=300, help="sequential calls per round")
    parser.add_argument("--transport", choices=["stdio", "http", "both"], default="both")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/bench_mcp.json")
    options = parser.parse_args()
    rounds, calls = (3, 100) if options.quick else (options.rounds, options.calls)
    report = asyncio.run(_run(rounds, calls, options.transport))
    _print(report, rounds, calls)
    options.json.parent.mkdir(parents=True, exist_ok=True)
    options.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
