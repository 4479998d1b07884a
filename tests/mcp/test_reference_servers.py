"""The official reference servers from npm, run with Node 20 from PATH:
server-everything over stdio and over Streamable HTTP, server-filesystem on a tmp dir,
and server-everything started through npx (process-group cleanup)."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from agcore_tools import (
    Image,
    McpClient,
    McpError,
    Permission,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    StdioTransport,
    StreamableHttpTransport,
    ToolExecutionError,
    ToolRegistry,
)
from agcore_tools.mcp import McpLogMessage, McpProgress
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
        # read_media_file repeats the image's base64 in structuredContent: labelled there.
        (tmp_path / "dot.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        media = await client.call_tool("read_media_file", {"path": str(tmp_path / "dot.png")})
        assert media == [
            {
                "content": [
                    {
                        "type": "image",
                        "data": "[image/png image, attached]",
                        "mimeType": "image/png",
                    }
                ]
            },
            Image(b"\x89PNG\r\n\x1a\n", "image/png"),
        ]

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


async def test_server_everything_resources_prompts_and_the_rest(
    everything_stdio: StdioTransport, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp")
    roots = [types.Root(uri="file:///srv/a", name="a")]
    synced: list[str] = []
    roots_synced = asyncio.Event()

    async def list_roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=list(roots))

    def on_log(message: McpLogMessage) -> None:
        if "root(s) received" in str(message.data):
            synced.append(str(message.data))
            roots_synced.set()

    async with McpClient(
        "everything", everything_stdio, timeout=20, roots_handler=list_roots, on_log=on_log
    ) as client:
        assert (client.instructions or "").startswith("# Everything Server")
        assert await client.ping() > 0
        # Resources: static documents, two templates, text and blob reads.
        docs = {r.uri: r for r in await client.list_resources()}
        assert docs["demo://resource/static/document/features.md"].mime_type == "text/markdown"
        templates = [t.uri_template for t in await client.list_resource_templates()]
        assert "demo://resource/dynamic/text/{resourceId}" in templates
        (text,) = await client.read_resource("demo://resource/dynamic/text/2")
        assert (text.text or "").startswith("Resource 2: This is a plaintext resource")
        (blob,) = await client.read_resource("demo://resource/dynamic/blob/1")
        assert blob.text is None and blob.data.startswith(b"Resource 1: This is a base64 blob")

        # A model follows the resource_links a tool returns, through the reader tool.
        registry = ToolRegistry(PermissionChecker(PermissionConfig()))
        registry.register_all(client.into_tools(prefix=True))
        registry.register(client.resource_reader_tool(prefix=True))
        parts = (await registry.invoke("everything__get-resource-links", {"count": 2})).result()
        links = [p["uri"] for p in parts if isinstance(p, dict) and p["type"] == "resource_link"]
        assert links == ["demo://resource/dynamic/blob/1", "demo://resource/dynamic/text/2"]
        read = [
            (await registry.invoke("everything__read_resource", {"uri": u})).result() for u in links
        ]
        assert read[0][0]["blob"] and read[0][0]["uri"] == links[0]
        assert read[1].startswith("Resource 2: This is a plaintext resource")

        # Annotations on a text-only result are kept.
        assert await client.call_tool("get-annotated-message", {"messageType": "error"}) == [
            {
                "type": "text",
                "text": "Error: Operation failed",
                "annotations": {"priority": 1.0, "audience": ["user", "assistant"]},
            }
        ]
        # The task-requiring tool is offered, and its calls run as tasks.
        assert (await client.tool_infos())[-1].name == "simulate-research-query"
        research = registry.get("everything__simulate-research-query")
        assert research is not None and research.as_task  # type: ignore[attr-defined]

        # Prompts and completion.
        prompts = {p.name: p for p in await client.list_prompts()}
        assert prompts["args-prompt"].arguments[0] == {
            "name": "city",
            "description": "Name of the city",
            "required": True,
        }
        prompt = await client.get_prompt("args-prompt", {"city": "Paris"})
        assert prompt.messages[0]["content"]["text"] == "What's weather in Paris?"
        team = await client.complete(
            "name", "", prompt="completable-prompt", context={"department": "Sales"}
        )
        assert team.values == ("David", "Eve", "Frank")
        ids = await client.complete(
            "resourceId", "3", resource_template="demo://resource/dynamic/text/{resourceId}"
        )
        assert ids.values == ("3",)

        # Subscriptions: the server sends one update at once when its updates are turned on.
        uri = "demo://resource/dynamic/text/2"
        async with client.subscribe_resource(uri) as updates:
            await client.call_tool("toggle-subscriber-updates")
            assert await asyncio.wait_for(anext(updates), 15) == uri
            await client.call_tool("toggle-subscriber-updates")  # off again

        # Roots: the server re-reads them when told they changed.
        await asyncio.wait_for(roots_synced.wait(), 15)  # its first read, after start-up
        roots_synced.clear()
        roots.append(types.Root(uri="file:///srv/b", name="b"))
        assert await client.notify_roots_changed() is True
        await asyncio.wait_for(roots_synced.wait(), 15)
        assert synced[-1] == "Roots updated: 2 root(s) received from client"
        assert "Current MCP Roots (2 total)" in await client.call_tool("get-roots-list")

        await client.set_log_level("error")  # logging/setLevel
        assert client.log_level == "error"


# -- elicitation and approval by annotation (issue 11) -----------------------------------------


async def test_server_everything_elicitation_goes_to_the_apps_handler(
    everything_stdio: StdioTransport,
) -> None:
    asked: list[str] = []

    async def fill_in(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        schema = getattr(params, "requested_schema", {})
        assert "name" in schema["properties"]
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True})

    async with McpClient(
        "everything", everything_stdio, timeout=20, elicitation_handler=fill_in
    ) as client:
        result = await client.call_tool("trigger-elicitation-request")
    text = "\n".join(result) if isinstance(result, list) else result
    assert asked == ["Please provide inputs for the following fields:"]
    assert "User provided the requested information" in text
    assert "- Name: Ada" in text and "- Agreed to terms: true" in text


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_server_everything_elicitation_declined_or_cancelled(
    everything_stdio: StdioTransport, action: str
) -> None:
    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action=action)  # type: ignore[arg-type]

    async with McpClient(
        "everything", everything_stdio, timeout=20, elicitation_handler=answer
    ) as client:
        result = await client.call_tool("trigger-elicitation-request")
    text = "\n".join(result) if isinstance(result, list) else result
    expected = "User declined" if action == "decline" else "User cancelled"
    assert expected in text


async def test_server_everything_elicitation_without_a_handler_is_declined(
    everything_stdio: StdioTransport, caplog: pytest.LogCaptureFixture
) -> None:
    async with McpClient("everything", everything_stdio, timeout=20) as client:
        with caplog.at_level(logging.WARNING, logger="agcore_tools.mcp"):
            result = await client.call_tool("trigger-elicitation-request")
    text = "\n".join(result) if isinstance(result, list) else result
    assert "User declined to provide the requested information" in text
    assert "MCP server 'everything' asked for user input" in caplog.text
    assert "no elicitation_handler" in caplog.text


async def test_server_everything_url_elicitation_as_an_error_gives_the_app_the_link(
    everything_stdio: StdioTransport,
) -> None:
    """A 2025-11-25 URLElicitationRequiredError (-32042): the user must open a link before
    the server runs the call. The model reads a recoverable error naming the link's host
    (a link may carry a token); the app finds the links on the error."""
    registry = ToolRegistry()
    async with McpClient("everything", everything_stdio, timeout=20) as client:
        registry.register_all(client.into_tools())
        args = {"url": "https://example.com/done", "errorPath": True}
        failed = await registry.invoke("trigger-url-elicitation", args)
        error = failed.error
        assert isinstance(error, McpError) and error.is_recoverable()
        assert "needs the user to open a link first (at modelcontextprotocol.io" in str(error)
        assert "https://" not in str(error) and error.may_have_run is False
        [link] = error.elicitations
        assert link["mode"] == "url" and link["url"] == "https://modelcontextprotocol.io"
        assert link["elicitationId"] and "Open this link" in link["message"]
        again = await registry.invoke("trigger-url-elicitation", args)  # what the error says
        assert again.error is None


async def test_server_everything_tools_that_write_wait_for_approval(
    everything_stdio: StdioTransport,
) -> None:
    from agcore_tools.mcp import McpPermissionPolicy

    # Per server, by annotation: here every tool that is not read-only asks.
    policy = McpPermissionPolicy(needs_approval=lambda info: info.hint("readOnlyHint") is not True)
    registry = ToolRegistry()
    async with McpClient("everything", everything_stdio, timeout=20) as client:
        registry.register_all(client.into_tools(policy=policy))
        infos = {info.name: info for info in await client.tool_infos()}
        # (into_tools offers the tools that require tasks too, and runs their calls as tasks.)
        writers = {n for n in registry.list_tools() if infos[n].hint("readOnlyHint") is not True}
        asking = {t.name for t in registry if t.needs_approval}
        assert asking == writers and "toggle-simulated-logging" in asking and "echo" not in asking
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "toggle-simulated-logging", "arguments": "{}"},
        }
        outputs = await registry.run_tool_calls([call])
        [request] = outputs.pending_approvals
        assert outputs == [] and request.tool_name == "toggle-simulated-logging"
        done = await registry.run_tool_calls([call], approvals=[request.approve()])
        assert "Started simulated" in done[0]["content"]
        await registry.run_tool_calls([call], approvals=[request.approve()])  # toggle back off
