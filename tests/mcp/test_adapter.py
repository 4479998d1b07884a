"""Registry adapters: names, prefixes, collisions, permissions (no server needed), and
the tools left out (a server that lists a task-requiring tool)."""

from __future__ import annotations

import logging
import sys

import pytest

from agcore_tools import (
    McpClient,
    McpError,
    McpPermissionPolicy,
    McpToolInfo,
    Permission,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    StdioTransport,
    ToolError,
    ToolRegistry,
    tool,
)
from agcore_tools.mcp import McpTool
from agcore_tools.mcp._adapter import adapter_name

from .conftest import PAGED


def _client(*infos: McpToolInfo, **options: object) -> McpClient:
    client = McpClient("files", StdioTransport("unused"), **options)  # type: ignore[arg-type]
    client._tools = list(infos)  # as if connect() had listed them
    return client


READ = McpToolInfo(
    "read_file", "Read a file.", annotations={"readOnlyHint": True, "openWorldHint": False}
)
WRITE = McpToolInfo(
    "write_file", "Write a file.", annotations={"destructiveHint": False, "openWorldHint": False}
)
DELETE = McpToolInfo("delete_file", "Delete a file.")


def test_names_are_the_servers_by_default() -> None:
    tools = _client(READ, WRITE).into_tools()
    assert [t.name for t in tools] == ["read_file", "write_file"]
    assert all(isinstance(t, McpTool) for t in tools)
    assert tools[0].description == "Read a file."
    assert tools[0].parameters == {"type": "object", "properties": {}}


def test_prefix_option() -> None:
    assert [t.name for t in _client(READ).into_tools(prefix=True)] == ["files__read_file"]
    assert [t.name for t in _client(READ).into_tools(prefix="fs")] == ["fs__read_file"]


@pytest.mark.parametrize(
    ("name", "prefix", "expected"),
    [
        ("read", "my server", "my_server__read"),
        ("files.read/all", None, "files_read_all"),
        ("ünïcode", "s", "s___n_code"),
    ],
)
def test_names_are_cut_to_the_model_api_limit(name: str, prefix: str | None, expected: str) -> None:
    assert adapter_name(name, prefix) == expected


def test_long_names_keep_a_distinguishing_hash() -> None:
    a = adapter_name("x" * 70 + "_alpha", "server")
    b = adapter_name("x" * 70 + "_beta", "server")
    assert len(a) == len(b) == 64
    assert a != b
    assert a.startswith("server__xxx")


def test_adapter_names_that_collide_fail_loudly() -> None:
    client = _client(McpToolInfo("files.read"), McpToolInfo("files_read"))
    with pytest.raises(ToolError, match="would both be registered as 'files_read'"):
        client.into_tools()


def test_a_collision_in_a_registry_fails_loudly_never_overwrites() -> None:
    registry = ToolRegistry()

    @registry.tool
    def read_file(path: str) -> str:
        """A local tool with the MCP tool's name."""
        return path

    with pytest.raises(ToolError, match="already registered"):
        registry.register_all(_client(READ, WRITE).into_tools())
    assert registry.get("read_file") is read_file  # untouched
    assert "write_file" not in registry  # all or none
    registry.register_all(_client(READ, WRITE).into_tools(prefix=True))
    assert registry.list_tools() == ["read_file", "files__read_file", "files__write_file"]


def test_permissions_come_from_the_annotation_policy() -> None:
    read, write, delete = _client(READ, WRITE, DELETE).into_tools()
    assert read.required_permissions == (Permission.READ,)
    assert write.required_permissions == (Permission.WRITE,)
    assert delete.required_permissions == (Permission.WRITE, Permission.DELETE, Permission.NETWORK)


def test_the_policy_is_replaceable_per_client_and_per_call() -> None:
    strict = _client(READ, permission_policy=McpPermissionPolicy(trust_annotations=False))
    assert strict.into_tools()[0].required_permissions == (
        Permission.WRITE,
        Permission.DELETE,
        Permission.NETWORK,
    )
    custom = _client(READ, permission_policy=lambda info: ["read", Permission.custom("mcp:files")])
    assert custom.into_tools()[0].required_permissions == (
        Permission.READ,
        Permission.custom("mcp:files"),
    )
    assert _client(READ).into_tools(policy=lambda info: ["shell"])[0].required_permissions == (
        Permission.SHELL,
    )


async def test_a_permission_checker_refuses_risky_mcp_tools_before_any_call() -> None:
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))  # allows read + network
    registry.register_all(_client(READ, DELETE).into_tools())
    with pytest.raises(PermissionDeniedError, match="'delete_file' needs 'write'"):
        await registry.invoke("delete_file", {"path": "/etc/passwd"})


def test_adapters_carry_tags_and_category() -> None:
    registry = ToolRegistry()
    registry.register_all(_client(READ).into_tools())
    entry = registry.entry("read_file")
    assert entry is not None and entry.tags == ("mcp",) and entry.category == "mcp:files"
    assert [e.name for e in registry.find_by_category("mcp:files")] == ["read_file"]


def test_local_tools_and_mcp_adapters_share_a_registry() -> None:
    registry = ToolRegistry()
    with registry.as_default():

        @tool
        def add(a: int, b: int) -> int:
            """Add."""
            return a + b

    registry.register_all(_client(READ).into_tools(prefix=True))
    assert [d["function"]["name"] for d in registry.definitions()] == ["add", "files__read_file"]


async def test_tools_that_require_tasks_are_left_out_with_a_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp")
    # Task support is a 2025-11-25 field (2026-07-28 dropped it from the core protocol).
    transport = StdioTransport(sys.executable, [str(PAGED), "--task-tool"])
    async with McpClient("paged", transport, timeout=15, protocol="legacy") as client:
        infos = {info.name: info for info in await client.tool_infos()}
        assert infos["research"].task_support == "required"
        assert infos["tool_00"].task_support is None
        names = [t.name for t in client.into_tools()]
        assert "research" not in names and len(names) == 25
        # What a model would get if it were offered: every call fails.
        with pytest.raises(McpError, match="requires task augmentation \\(code -32601\\)"):
            await client.call_tool("research")
    assert any(
        "'research' left out of into_tools()" in r.getMessage() and "SEP-1686" in r.getMessage()
        for r in caplog.records
    )
