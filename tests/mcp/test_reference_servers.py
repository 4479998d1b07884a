"""The official reference servers from npm, run with Node 20 from PATH:
server-everything over stdio and over Streamable HTTP, server-filesystem on a tmp dir,
and server-everything started through npx (process-group cleanup)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agcore_tools import (
    Image,
    McpClient,
    Permission,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    StdioTransport,
    StreamableHttpTransport,
    ToolExecutionError,
    ToolRegistry,
)
from agcore_tools.mcp import McpProgress
from agcore_tools.mcp._stdio import group_members

from .conftest import (
    EVERYTHING,
    FILESYSTEM,
    assert_group_gone,
    pid_alive,
    require_node_modules,
    system_node,
)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def everything_stdio() -> StdioTransport:
    require_node_modules(EVERYTHING)
    return StdioTransport(system_node(), [str(EVERYTHING), "stdio"])


@pytest.fixture
def everything_http() -> Iterator[str]:
    """server-everything's streamableHttp mode on a free loopback port."""
    require_node_modules(EVERYTHING)
    for _attempt in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        proc = subprocess.Popen(
            [system_node(), str(EVERYTHING), "streamableHttp"],
            env={**os.environ, "PORT": str(port)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            if _wait_for_port(port, proc):
                yield f"http://127.0.0.1:{port}/mcp"
                return
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    pytest.fail("server-everything did not start listening")


def _wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


async def _exercise_everything(client: McpClient) -> None:
    names = {d["function"]["name"] for d in await client.list_tools()}
    assert {"echo", "get-sum", "get-structured-content", "get-tiny-image"} <= names
    assert await client.call_tool("echo", {"message": "hello"}) == "Echo: hello"
    assert await client.call_tool("get-sum", {"a": 2, "b": 40}) == "The sum of 2 and 40 is 42."
    weather = await client.call_tool("get-structured-content", {"location": "New York"})
    assert set(weather) == {"temperature", "conditions", "humidity"}
    caption, image, note = await client.call_tool("get-tiny-image")
    assert isinstance(caption, str) and isinstance(note, str)
    assert isinstance(image, Image) and image.media_type == "image/png"
    assert image.data.startswith(b"\x89PNG\r\n\x1a\n")  # the bytes, decoded from base64


async def test_server_everything_over_stdio(everything_stdio: StdioTransport) -> None:
    updates: list[McpProgress] = []
    async with McpClient(
        "everything", everything_stdio, timeout=20, on_progress=updates.append
    ) as client:
        assert client.protocol_version == "2025-11-25"  # no server/discover: handshake
        assert client.server_info is not None
        assert client.server_info["name"] == "mcp-servers/everything"
        await _exercise_everything(client)
        done = await client.call_tool(
            "trigger-long-running-operation", {"duration": 0.3, "steps": 3}
        )
        assert "Long running operation completed" in done
        assert [u.progress for u in updates] == [1.0, 2.0, 3.0]
        # The server reports the environment it was given: the minimal one.
        env = await client.call_tool("get-env")
        assert "OPENAI_API_KEY" not in env and '"PATH"' in env


async def test_server_everything_over_streamable_http(everything_http: str) -> None:
    async with McpClient(
        "everything", StreamableHttpTransport(everything_http), timeout=20
    ) as client:
        assert client.protocol_version == "2025-11-25"
        await _exercise_everything(client)
        # Many tasks at once over one HTTP session.
        sums = await asyncio.gather(
            *(client.call_tool("get-sum", {"a": i, "b": 1}) for i in range(30))
        )
        assert sums == [f"The sum of {i} and 1 is {i + 1}." for i in range(30)]


async def test_server_everything_tools_in_a_guarded_registry(
    everything_stdio: StdioTransport,
) -> None:
    # The reference server annotates its tools; the default policy maps them.
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))
    async with McpClient("everything", everything_stdio, timeout=20) as client:
        registry.register_all(client.into_tools(prefix=True))
        echo = registry.get("everything__echo")
        assert echo is not None and tuple(echo.required_permissions) == (Permission.READ,)
        result = await registry.invoke("everything__echo", {"message": "guarded"})
        assert result.result() == "Echo: guarded"
        # gzip-file-as-resource is not read-only: refused before it runs.
        with pytest.raises(PermissionDeniedError, match="needs 'write'"):
            await registry.invoke("everything__gzip-file-as-resource", {})


async def test_server_filesystem_on_a_tmp_dir(tmp_path: Path) -> None:
    require_node_modules(FILESYSTEM)
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    transport = StdioTransport(system_node(), [str(FILESYSTEM), str(tmp_path)])
    async with McpClient("fs", transport, timeout=20) as client:
        tools = {info.name: info for info in await client.tool_infos()}
        assert tools["read_text_file"].hint("readOnlyHint") is True
        read = await client.call_tool("read_text_file", {"path": str(tmp_path / "notes.txt")})
        assert read == {"content": "remember the milk\n"}
        await client.call_tool(
            "write_file", {"path": str(tmp_path / "new.txt"), "content": "written by MCP"}
        )
        assert (tmp_path / "new.txt").read_text() == "written by MCP"
        listing = await client.call_tool("list_directory", {"path": str(tmp_path)})
        assert "[FILE] notes.txt" in listing["content"]
        with pytest.raises(ToolExecutionError, match="outside allowed directories"):
            await client.call_tool("read_text_file", {"path": "/etc/hostname"})

        registry = ToolRegistry(PermissionChecker(PermissionConfig()))
        registry.register_all(client.into_tools(prefix="fs"))
        assert (await registry.invoke("fs__list_allowed_directories", {})).ok
        with pytest.raises(PermissionDeniedError):
            await registry.invoke("fs__move_file", {"source": "a", "destination": "b"})


async def test_npx_wrapper_and_its_grandchildren_are_gone_after_close() -> None:
    require_node_modules(EVERYTHING)
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not on PATH")
    # npx runs the server as its grandchild (npm exec -> sh -> node), like
    # `npx -y @modelcontextprotocol/server-everything` does after its download.
    transport = StdioTransport(
        npx, ["--offline", "--no", "--", system_node(), str(EVERYTHING), "stdio"]
    )
    client = McpClient("npx-everything", transport, timeout=30)
    await client.connect()
    assert await client.call_tool("echo", {"message": "via npx"}) == "Echo: via npx"
    pgid = client.pid
    assert pgid is not None
    members = group_members(pgid)
    assert len(members) >= 2, f"expected npx and its node grandchild in the group: {members}"
    await client.close()
    assert_group_gone(pgid)
    assert not any(pid_alive(pid) for pid in members)


async def test_a_crashed_npx_wrapper_leaves_no_orphan_server() -> None:
    require_node_modules(EVERYTHING)
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not on PATH")
    transport = StdioTransport(
        npx, ["--offline", "--no", "--", system_node(), str(EVERYTHING), "stdio"]
    )
    client = McpClient("npx-everything", transport, timeout=30)
    await client.connect()
    pgid = client.pid
    assert pgid is not None
    members = group_members(pgid)
    os.kill(pgid, signal.SIGKILL)  # the wrapper dies; node keeps the pipes open
    await asyncio.sleep(0.3)
    await client.close()
    assert_group_gone(pgid)
    assert not any(pid_alive(pid) for pid in members)
