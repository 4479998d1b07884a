"""A call of an MCP tool the app made without a connection (before connect(), after
close()) is its own mistake, which no breaker counts; a server that is down still is.
So is a call, or a connect, that the app's close() cut off."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agcore_tools import (
    Breaker,
    McpClient,
    McpError,
    McpNotInitializedError,
    McpRecovery,
    StdioTransport,
    ToolInvocation,
    ToolPolicy,
    ToolRegistry,
)
from agcore_tools.mcp import McpTool, McpToolInfo

from .conftest import FIXTURE, ROOT, SERVERS, assert_no_stray_tasks, wait_until

POLICY = ToolPolicy(breaker=Breaker(failures=1, window=60.0, cool_down=60.0))


def _echo(client: McpClient) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(McpTool(client, McpToolInfo("echo", "Echo text."), "echo", []))
    registry.set_policy(POLICY, category="mcp:fixture")
    return registry


async def test_a_call_before_connect_does_not_open_the_breaker() -> None:
    client = McpClient("fixture", StdioTransport(sys.executable, [str(FIXTURE)]))
    registry = _echo(client)
    for _ in range(3):
        [early] = await registry.invoke_all([("echo", {"text": "hi"})])
        assert isinstance(early.error, McpNotInitializedError) and early.error.by_caller
        assert "call connect() first" in str(early.error)
    assert registry.unavailable_tools() == []  # it opened at the first such call before
    async with client:
        [call] = await registry.invoke_all([("echo", {"text": "hi"})])
        assert call.output == "hi"


async def test_a_call_after_close_does_not_open_the_breaker() -> None:
    async with McpClient("fixture", StdioTransport(sys.executable, [str(FIXTURE)])) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        registry.set_policy(POLICY, category="mcp:fixture")
        [call] = await registry.invoke_all([("echo", {"text": "hi"})])
        assert call.output == "hi"
    [late] = await registry.invoke_all([("echo", {"text": "hi"})])
    assert isinstance(late.error, McpNotInitializedError) and late.error.by_caller
    assert registry.unavailable_tools() == []


async def test_a_server_that_failed_to_start_still_opens_the_breaker() -> None:
    # The same error class, for a server that is down: it counts.
    transport = StdioTransport(sys.executable, ["-c", "import sys; sys.exit(3)"])
    client = McpClient("fixture", transport, timeout=15)
    registry = _echo(client)
    with pytest.raises(McpError):
        await client.connect()
    [down] = await registry.invoke_all([("echo", {"text": "hi"})])
    assert isinstance(down.error, McpNotInitializedError) and not down.error.by_caller
    assert registry.unavailable_tools() == ["echo"]
    await client.close()


def test_a_call_after_the_connecting_loop_ended_does_not_open_the_breaker() -> None:
    # asyncio.run(client.connect()) leaves a connection that ended with its loop: the
    # app's mistake, as a call before connect() is.
    client = McpClient("fixture", StdioTransport(sys.executable, [str(FIXTURE)]), timeout=15)
    registry = _echo(client)
    asyncio.run(client.connect())

    async def call() -> None:
        [late] = await registry.invoke_all([("echo", {"text": "hi"})])
        assert isinstance(late.error, McpNotInitializedError) and late.error.by_caller
        assert registry.unavailable_tools() == []
        await client.close()

    asyncio.run(call())


async def test_a_call_the_app_cut_off_by_closing_the_client_does_not_open_the_breaker() -> None:
    # The server has the call (it is asking the client's model) when the app closes the
    # client: "the client was closed" is the app's doing, not the server's.
    asked = asyncio.Event()

    async def sample(ctx: object, params: object) -> None:
        asked.set()
        await asyncio.sleep(30)  # cut off by close()

    transport = StdioTransport(sys.executable, [str(FIXTURE)])
    client = McpClient("fixture", transport, timeout=15, protocol="legacy", sampling_handler=sample)
    await client.connect()
    registry = ToolRegistry()
    registry.register_all(client.into_tools())
    registry.set_policy(POLICY, category="mcp:fixture")
    call = asyncio.create_task(registry.invoke_all([("sample", {"prompt": "hi"})]))
    await asyncio.wait_for(asked.wait(), 10)
    await client.close()
    [cut] = await asyncio.wait_for(call, 10)
    assert isinstance(cut.error, McpNotInitializedError) and cut.error.by_caller
    assert "the client was closed" in str(cut.error)
    assert registry.unavailable_tools() == []  # it opened here before
    await assert_no_stray_tasks()  # the handler cut off with its call


# -- a connect the app's close() cut off ("closed while connecting") ---------------------


def silent_from(tmp_path: Path, start: int) -> StdioTransport:
    """The fixture server behind ``initialize_gate.py``, which from its ``start``-th
    start on answers nothing (``initialize`` included): a handshake that never ends."""
    env = {"GATE_STARTS": str(tmp_path / "starts"), "GATE_SILENT_FROM": str(start)}
    return StdioTransport(
        sys.executable, [str(SERVERS / "initialize_gate.py")], env=env, stop_grace=0.5
    )


def starts(tmp_path: Path) -> int:
    path = tmp_path / "starts"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def test_a_connect_the_app_cut_off_by_closing_the_client_is_its_own_doing(
    tmp_path: Path,
) -> None:
    client = McpClient("fixture", silent_from(tmp_path, 1), timeout=30)
    connecting = asyncio.create_task(client.connect())
    try:
        await wait_until(lambda: starts(tmp_path) == 1, "the server to start")  # it is mute
    finally:
        await client.close()  # the test's step, and its clean-up if the wait failed
    with pytest.raises(McpNotInitializedError) as info:
        await asyncio.wait_for(connecting, 10)
    assert info.value.by_caller
    assert "closed while connecting" in str(info.value)
    await assert_no_stray_tasks()


CLOSED_BEFORE_ITS_OWNER_RAN = """
import asyncio, sys
from agcore_tools import McpClient, McpNotInitializedError, StdioTransport

async def main():
    client = McpClient("fixture", StdioTransport(sys.executable, [sys.argv[1]]))
    connecting = asyncio.create_task(client.connect())
    await asyncio.sleep(0)  # one turn: connect() waits for the SDK's import, in a thread
    await client.close()
    try:
        await asyncio.wait_for(connecting, 30)
    except McpNotInitializedError as exc:
        print(exc.by_caller, exc)

asyncio.run(main())
"""


def test_a_first_connect_the_app_closed_before_its_server_started_is_its_own_doing() -> None:
    # The first connect() of a process imports the MCP SDK in a worker thread: a close()
    # then stops the connection before its owner task runs, and the owner ends with no
    # start-up error of its own. A process of its own: this one has imported the SDK.
    done = subprocess.run(
        [sys.executable, "-c", CLOSED_BEFORE_ITS_OWNER_RAN, str(FIXTURE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.stdout == "True MCP server 'fixture': closed while connecting\n", done.stderr


async def test_a_restart_the_app_cut_off_by_closing_the_client_does_not_open_the_breaker(
    tmp_path: Path,
) -> None:
    # The call starts the lost server again (its recovery), whose handshake never ends;
    # the app closes the client meanwhile. The call's error is the app's doing.
    client = McpClient("fixture", silent_from(tmp_path, 2), timeout=30, recovery=McpRecovery())
    await client.connect()
    registry = _echo(client)
    try:
        first = client.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await wait_until(lambda: not client.connected, "the death to be noticed")
        call = asyncio.create_task(registry.invoke_all([("echo", {"text": "hi"})]))
        await wait_until(lambda: starts(tmp_path) == 2, "the restart's server to start")
    finally:
        await client.close()  # the test's step, and its clean-up if a wait failed
    [cut] = await asyncio.wait_for(call, 10)
    assert isinstance(cut.error, McpNotInitializedError) and cut.error.by_caller
    assert "closed while connecting" in str(cut.error)
    assert registry.unavailable_tools() == []  # it opened here before
    await assert_no_stray_tasks()


# -- a call while a connect is under way ("still connecting") ----------------------------


async def _call_while_connecting(
    client: McpClient, registry: ToolRegistry, tmp_path: Path, start: int
) -> ToolInvocation:
    """An echo call made while ``client.connect()``, started in a task, waits on the
    ``start``-th start of a mute server; then the client is closed, which ends that
    connect with ``McpNotInitializedError``."""
    connecting = asyncio.create_task(client.connect())
    try:
        await wait_until(lambda: starts(tmp_path) == start, f"start {start} of the server")
        [call] = await registry.invoke_all([("echo", {"text": "hi"})])
    finally:
        await client.close()  # the test's step, and its clean-up if a wait failed
    with pytest.raises(McpNotInitializedError):
        await asyncio.wait_for(connecting, 10)
    return call


async def test_a_call_during_the_apps_first_connect_does_not_open_the_breaker(
    tmp_path: Path,
) -> None:
    # The app started connect() in a task and called a tool before it ended: its own
    # ordering mistake, as a call before connect() is. It opened the breaker before.
    # Without recovery: with it, the call waits for the connect instead.
    client = McpClient("fixture", silent_from(tmp_path, 1), timeout=30, recovery=None)
    registry = _echo(client)
    early = await _call_while_connecting(client, registry, tmp_path, 1)
    assert isinstance(early.error, McpNotInitializedError) and early.error.by_caller
    assert "still connecting" in str(early.error)
    assert registry.unavailable_tools() == []
    # A connect the app's close() cut off is no failure of the server's: the next
    # connect is a first one again.
    again = await _call_while_connecting(client, registry, tmp_path, 2)
    assert isinstance(again.error, McpNotInitializedError) and again.error.by_caller
    assert registry.unavailable_tools() == []
    await assert_no_stray_tasks()


async def test_a_call_while_the_app_tries_again_a_server_that_failed_to_start_counts(
    tmp_path: Path,
) -> None:
    # Its first start exits at once, the second answers nothing. A server that never
    # starts must still open the breaker of calls made while the app tries it again.
    script = tmp_path / "server.py"
    log = tmp_path / "starts"
    script.write_text(
        f"import sys\nwith open({str(log)!r}, 'a') as log:\n    log.write('start\\n')\n"
        f"with open({str(log)!r}) as log:\n    started = len(log.read().splitlines())\n"
        "if started == 1:\n    sys.exit(3)\nfor _ in sys.stdin.buffer:\n    pass\n"
    )
    transport = StdioTransport(sys.executable, [str(script)], stop_grace=0.5)
    client = McpClient("fixture", transport, timeout=30, recovery=None)
    registry = _echo(client)
    with pytest.raises(McpError):
        await client.connect()
    down = await _call_while_connecting(client, registry, tmp_path, 2)
    assert isinstance(down.error, McpNotInitializedError) and not down.error.by_caller
    assert "still connecting" in str(down.error)
    assert registry.unavailable_tools() == ["echo"]
    await assert_no_stray_tasks()


async def test_a_call_while_the_app_connects_a_server_that_died_still_opens_the_breaker(
    tmp_path: Path,
) -> None:
    # The same error once a connection was ready: the server died, and its new start
    # is under way (the app's connect(), without recovery), which is the server's
    # failure, counted as before.
    client = McpClient("fixture", silent_from(tmp_path, 2), timeout=30, recovery=None)
    await client.connect()
    registry = _echo(client)
    connecting: asyncio.Task[None] | None = None
    try:
        first = client.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await wait_until(lambda: not client.connected, "the death to be noticed")
        connecting = asyncio.create_task(client.connect())
        await wait_until(lambda: starts(tmp_path) == 2, "the new server to start")
        [down] = await registry.invoke_all([("echo", {"text": "hi"})])
    finally:
        await client.close()
    assert isinstance(down.error, McpNotInitializedError) and not down.error.by_caller
    assert "still connecting" in str(down.error)
    assert registry.unavailable_tools() == ["echo"]
    assert connecting is not None
    with pytest.raises(McpNotInitializedError):
        await asyncio.wait_for(connecting, 10)
    await assert_no_stray_tasks()


def test_a_call_during_the_first_connect_in_a_new_event_loop_does_not_open_the_breaker(
    tmp_path: Path,
) -> None:
    # The connection of asyncio.run(client.connect()) ended with its loop; a connect in
    # the next loop is a first one again, whatever the last loop's connection did.
    client = McpClient("fixture", silent_from(tmp_path, 2), timeout=30, recovery=None)
    registry = _echo(client)
    asyncio.run(client.connect())

    early = asyncio.run(_call_while_connecting(client, registry, tmp_path, 2))
    assert isinstance(early.error, McpNotInitializedError) and early.error.by_caller
    assert "still connecting" in str(early.error)
    assert registry.unavailable_tools() == []
