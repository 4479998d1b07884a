"""A client dropped without ``close()``: once nothing refers to it and it is collected,
its server stops, with a ResourceWarning; a client that registered tools still refer to
is kept. Real stdio servers, in a loop that lives on (async) and on the library's loop
(sync)."""

from __future__ import annotations

import asyncio
import gc
import textwrap
import time
import warnings
import weakref
from pathlib import Path

import pytest

from agcore_tools import McpClient, ToolRegistry
from tests._scripts import run_script

from .conftest import FIXTURE, fixture_stdio, pid_alive
from .test_faults import wait_for

pytestmark = pytest.mark.timeout(90)

SECRET = "sk-unclosed-S3CRET"
STOPPED_WITHIN = 30.0
"""Seconds for a server to be gone after its client was collected (a loaded machine)."""


def collected(ref: weakref.ref[McpClient]) -> bool:
    gc.collect()
    return ref() is None


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_connected_client_nobody_refers_to_stops_its_server_when_collected(
    protocol: str,
) -> None:
    # "auto" negotiates 2026-07-28, whose connection keeps a tools/list_changed
    # subscription open; "legacy" gets list_changed notifications unasked.
    async def decline(context: object, params: object) -> None:
        return None

    client = McpClient(
        "dropped",
        fixture_stdio(env={"API_TOKEN": SECRET}),
        protocol=protocol,  # type: ignore[arg-type]
        timeout=20,
        elicitation_handler=decline,  # type: ignore[arg-type]
        on_log=lambda message: None,
    )
    await client.connect()
    assert await client.call_tool("echo", {"text": "hi"}) == "hi"
    pid = client.pid
    assert pid is not None
    ref = weakref.ref(client)
    del client
    with pytest.warns(ResourceWarning, match=r"unclosed McpClient 'dropped'") as caught:
        assert collected(ref)
    assert f"server process {pid}" in str(caught[0].message)
    assert SECRET not in str(caught[0].message)

    async def stopped() -> bool:  # the stop runs on this loop, while this test waits
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return not pid_alive(pid) and all(t.done() for t in others)

    await wait_for(stopped, "the server of the collected client to stop", STOPPED_WITHIN)


async def test_a_closed_client_is_collected_without_a_warning() -> None:
    client = McpClient("closed", fixture_stdio(), timeout=20)
    await client.connect()
    await client.close()
    ref = weakref.ref(client)
    del client
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert collected(ref)
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_a_first_connect_cancelled_as_it_imports_the_sdk_then_closed_warns_nothing(
    tmp_path: Path,
) -> None:
    # The process's first connect imports the MCP SDK in a worker thread (most of a
    # second): cancelled there, before its owner task existed, its connection stayed
    # "starting" through close(), and the collected client warned "unclosed McpClient"
    # though close() had been awaited. A fresh process: this one has imported the SDK.
    script = tmp_path / "cancelled_first_connect.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio
            import gc
            import sys
            import warnings
            import weakref

            from agcore_tools import McpClient, StdioTransport

            async def main() -> None:
                client = McpClient(
                    "fx", StdioTransport(sys.executable, [{str(FIXTURE)!r}]), timeout=20
                )
                connecting = asyncio.ensure_future(client.connect())
                await asyncio.sleep(0)  # the connect now waits for the SDK's import
                connecting.cancel()
                try:
                    await connecting
                except asyncio.CancelledError:
                    print("cancelled")
                await client.close()  # as the app is told to
                ref = weakref.ref(client)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    del client, connecting
                    # The import's thread holds the cancelled call (and so the client)
                    # until it is done.
                    for _ in range(600):
                        gc.collect()
                        if ref() is None:
                            break
                        await asyncio.sleep(0.05)
                print(ref() is None, [str(w.message) for w in caught])

            asyncio.run(main())
            """
        )
    )
    result = run_script(script, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["cancelled", "True []"], result.stdout


def test_a_client_whose_tools_are_registered_is_kept_and_a_replaced_one_stops() -> None:
    # A notebook cell run twice: it makes a client, connects it and registers its tools.
    registry = ToolRegistry()
    first = McpClient("cell", fixture_stdio(), timeout=20)
    first.connect_sync()
    registry.register_all(first.into_tools())
    first_pid = first.pid
    assert first_pid is not None
    ref = weakref.ref(first)
    del first
    # The registry's tools refer to the client: it is in use, not garbage.
    assert not collected(ref)
    assert registry.invoke_sync("echo", {"text": "kept"}).output == "kept"
    assert pid_alive(first_pid)

    second = McpClient("cell", fixture_stdio(), timeout=20)
    second.connect_sync()
    try:
        registry.register_all(second.into_tools())  # replaces the first client's tools
        with pytest.warns(ResourceWarning, match=r"unclosed McpClient 'cell'"):
            assert collected(ref)
        deadline = time.monotonic() + STOPPED_WITHIN
        while pid_alive(first_pid):
            assert time.monotonic() < deadline, "the replaced client's server lives on"
            time.sleep(0.05)  # the stop runs on the library's loop, in its thread
        assert registry.invoke_sync("echo", {"text": "second"}).output == "second"
        assert second.connected and second.pid is not None and pid_alive(second.pid)
    finally:
        second.close_sync()
