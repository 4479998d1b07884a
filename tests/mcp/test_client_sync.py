"""McpClient from synchronous code: the *_sync methods and ``with``, against real servers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agcore_tools import McpClient, McpNotInitializedError, ToolRegistry

from .conftest import FIXTURE, ROOT, fixture_stdio, live_children, pid_alive


def make_client(**options: Any) -> McpClient:
    options.setdefault("timeout", 15)
    return McpClient("fixture", fixture_stdio(), **options)


def test_a_sync_connection_stays_open_across_calls_until_close_sync() -> None:
    client = make_client()
    client.connect_sync()
    try:
        assert client.connected and client.pid is not None
        pid = client.pid
        # Several separate sync calls, one session: the loop it lives on outlives each call.
        assert client.call_tool_sync("echo", {"text": "one"}) == "one"
        assert client.call_tool_sync("echo", {"text": "two"}) == "two"
        names = [tool["function"]["name"] for tool in client.list_tools_sync()]
        assert "echo" in names and "weather" in names
        assert client.pid == pid
    finally:
        client.close_sync()
    assert not client.connected and not pid_alive(pid)


def test_with_connects_and_closes() -> None:
    with make_client() as client:
        assert client.call_tool_sync("weather", {"city": "Oslo"})["city"] == "Oslo"
        pid = client.pid
    assert pid is not None and not client.connected and not pid_alive(pid)


def test_the_registry_drop_in_runs_mcp_tools_from_sync_code() -> None:
    registry = ToolRegistry()
    with make_client() as client:
        registry.register_all(client.into_tools(prefix=True))
        calls = [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "fixture__echo", "arguments": '{"text": "hi"}'},
            }
        ]
        assert registry.run_tool_calls_sync(calls) == [
            {"role": "tool", "tool_call_id": "c1", "content": "hi"}
        ]


def test_eight_threads_share_one_sync_connection() -> None:
    results: dict[int, Any] = {}

    def call(n: int) -> None:
        results[n] = client.call_tool_sync("echo", {"text": f"t{n}"})

    with make_client() as client:
        workers = [threading.Thread(target=call, args=(n,)) for n in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
    assert results == {n: f"t{n}" for n in range(8)}


# -- the failure the sync surface fixes, and loops that do not match ------------------------


def test_a_connection_made_under_asyncio_run_explains_why_it_is_gone() -> None:
    client = make_client()
    registry = ToolRegistry()
    asyncio.run(client.connect())  # the session ends when asyncio.run closes its loop
    registry.register_all(client.into_tools())
    assert not client.connected

    with pytest.raises(McpNotInitializedError, match="event loop that has since ended") as info:
        client.call_tool_sync("echo", {"text": "x"})
    assert "use connect_sync()" in str(info.value)
    # A model calling the tool is told the same, not "call connect() first".
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "echo", "arguments": '{"text": "x"}'},
    }
    [answer] = registry.run_tool_calls_sync([call])
    assert "event loop that has since ended" in answer["content"]

    client.connect_sync()  # the sync way: it stays connected
    try:
        assert registry.run_tool_calls_sync(
            [{**call, "function": {"name": "echo", "arguments": '{"text": "back"}'}}]
        ) == [{"role": "tool", "tool_call_id": "c", "content": "back"}]
    finally:
        client.close_sync()


async def test_a_sync_connected_client_refuses_calls_from_another_loop() -> None:
    client = make_client()
    await asyncio.to_thread(client.connect_sync)
    try:
        with pytest.raises(McpNotInitializedError, match="connected with connect_sync"):
            await client.call_tool("echo", {"text": "x"})
        with pytest.raises(McpNotInitializedError, match="use the \\*_sync methods"):
            await client.list_tools()
        with pytest.raises(McpNotInitializedError, match="connected with connect_sync"):
            await client.close()
        assert client.connected  # refusing did not disturb the session
    finally:
        await asyncio.to_thread(client.close_sync)
    assert not client.connected


async def test_an_async_connected_client_refuses_sync_calls_instead_of_hanging() -> None:
    client = make_client()
    await client.connect()
    try:
        with pytest.raises(McpNotInitializedError, match="connected in another one"):
            client.call_tool_sync("echo", {"text": "x"})
        with pytest.raises(McpNotInitializedError, match="connected in another one"):
            client.connect_sync()
        assert await client.call_tool("echo", {"text": "still fine"}) == "still fine"
    finally:
        await client.close()
    # Once closed, the client may move to the library's loop.
    client.connect_sync()
    try:
        assert client.call_tool_sync("echo", {"text": "moved"}) == "moved"
    finally:
        client.close_sync()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_client_connected_before_a_fork_says_so_in_the_child() -> None:
    code = textwrap.dedent(
        f"""
        import os, sys
        from agcore_tools import McpClient, McpNotInitializedError, StdioTransport

        client = McpClient("fixture", StdioTransport(sys.executable, [{str(FIXTURE)!r}]))
        client.connect_sync()
        server = client.pid
        pid = os.fork()
        if pid == 0:
            try:
                client.call_tool_sync("echo", {{"text": "child"}})
            except McpNotInitializedError as exc:
                print(exc, flush=True)
            # A prefork worker's shutdown hook closing what it inherited: nothing of
            # the child's to close, so quiet (it raised McpNotInitializedError).
            client.close_sync()
            with client:  # a `with` block's end closes too; its start connects anew
                print(client.pid != server, flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print(client.call_tool_sync("echo", {{"text": "parent"}}))
        print(client.pid == server)
        client.close_sync()
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    child, own_server, parent, same_server = done.stdout.splitlines()
    assert "connected before this process was forked" in child
    assert "new McpClient in this process" in child
    assert own_server == "True"  # the child's own server, not the parent's
    assert (parent, same_server) == ("parent", "True")  # the parent's session undisturbed


# -- interpreter exit ------------------------------------------------------------------------


def test_a_script_that_never_closes_its_client_exits_and_stops_the_server(
    tmp_path: Path,
) -> None:
    script = tmp_path / "forgetful.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            from agcore_tools import McpClient, StdioTransport

            client = McpClient("fixture", StdioTransport(sys.executable, [{str(FIXTURE)!r}]))
            client.connect_sync()
            print(client.call_tool_sync("echo", {{"text": "hello"}}))
            print(client.pid, flush=True)
            # no close_sync(): the library's loop winds the session down at exit
            """
        )
    )
    before = live_children()
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 30
    echoed, pid = result.stdout.split()
    assert echoed == "hello"
    assert not pid_alive(int(pid)), "the MCP server outlived the script"
    assert live_children() == before
