"""Registry adapters: names, prefixes, collisions, permissions (no server needed), the
tools that run as tasks (a server that lists a task-requiring tool), and a server's
refusal of a call in the tool loop."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path

import pytest

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    McpClient,
    McpError,
    McpPermissionPolicy,
    McpToolInfo,
    Permission,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    StdioTransport,
    ToolConfigError,
    ToolContext,
    ToolError,
    ToolRegistry,
    tool,
)
from agcore_tools._names import server_of
from agcore_tools.mcp import McpTool
from agcore_tools.mcp._adapter import adapter_name
from agcore_tools.testing import ScriptedChatServer as S

from .conftest import PAGED, SERVERS, fixture_stdio


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


async def test_a_server_named_in_chinese_keeps_a_prefix_of_its_own() -> None:
    # "数据库" lost every letter, and with them the prefix: its tools were named
    # "_____echo_<digest>", read as having no server at all (tool search's catalogue).
    registry = ToolRegistry()
    names: dict[str, list[str]] = {}
    for server in ("数据库", "数据仓库", "db数据"):
        async with McpClient(server, fixture_stdio(), timeout=15) as client:
            tools = client.into_tools(prefix=True)
            registry.register_all(tools)
            [echo] = [t for t in tools if isinstance(t, McpTool) and t.info.name == "echo"]
            names[server] = [echo.name]
            assert (await registry.invoke(echo.name, {"text": "hi"})).output == "hi"
    digest = {s: hashlib.sha256(s.encode()).hexdigest()[:8] for s in names}
    assert names == {
        "数据库": [f"mcp_{digest['数据库']}__echo"],
        "数据仓库": [f"mcp_{digest['数据仓库']}__echo"],
        "db数据": [f"db_{digest['db数据']}__echo"],
    }
    assert {server_of(n[0]) for n in names.values()} == {n[0][:-6] for n in names.values()}


async def test_a_prefix_given_in_chinese_is_kept_as_the_server_name_would_be() -> None:
    # into_tools(prefix="数据库") lost the prefix, as prefix=True on a server so named
    # did: its tools were named "_____echo_<digest>", read as having no server at all.
    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        tools = client.into_tools(prefix="数据库")
        registry = ToolRegistry()
        registry.register_all(tools)
        [echo] = [t for t in tools if isinstance(t, McpTool) and t.info.name == "echo"]
        assert (await registry.invoke(echo.name, {"text": "hi"})).output == "hi"
    digest = hashlib.sha256("数据库".encode()).hexdigest()[:8]
    assert echo.name == f"mcp_{digest}__echo"
    assert server_of(echo.name) == f"mcp_{digest}"


def test_prefix_option() -> None:
    assert [t.name for t in _client(READ).into_tools(prefix=True)] == ["files__read_file"]
    assert [t.name for t in _client(READ).into_tools(prefix="fs")] == ["fs__read_file"]


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("my server", "my_server__read_file"),
        ("gh-tools", "gh-tools__read_file"),
        ("gh_tools", "gh_tools__read_file"),
        ("v1.2", "v1_2__read_file"),
        ("Café", "Cafe__read_file"),
    ],
)
def test_a_string_prefix_of_separators_and_latin_letters_names_as_before(
    prefix: str, expected: str
) -> None:
    assert [t.name for t in _client(READ).into_tools(prefix=prefix)] == [expected]


def test_a_string_prefix_with_a_symbol_is_the_prefix_a_server_so_named_gets() -> None:
    # A renaming (c____read_file_<digest> before): the CHANGELOG says so.
    named = McpClient("c++", StdioTransport("unused"))
    named._tools = [READ]
    [by_name] = [t.name for t in named.into_tools(prefix=True)]
    assert [t.name for t in _client(READ).into_tools(prefix="c++")] == [by_name]
    assert by_name.startswith("c_") and by_name.endswith("__read_file")


@pytest.mark.parametrize(
    ("name", "prefix", "expected"),
    [
        ("read", "my server", "my_server__read"),
        ("files.read/all", None, "files_read_all"),
        ("ünïcode", "s", "s__unicode"),  # accents dropped, not the letters
        ("Löschen.ﬁle", None, "Loschen_file"),
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


def test_names_that_collide_once_made_valid_each_get_a_name_of_their_own() -> None:
    # "files.read" and "files_read" are one name once made valid. The one that had to
    # change gets a digest of its own name, whatever the listing's order.
    listed = [McpToolInfo("files.read"), McpToolInfo("files_read")]
    assert [t.name for t in _client(*listed).into_tools()] == [
        "files_read_601e4eb6",
        "files_read",
    ]
    assert [t.name for t in _client(*reversed(listed)).into_tools()] == [
        "files_read",
        "files_read_601e4eb6",
    ]


def test_a_name_that_lost_letters_keeps_it_when_the_server_adds_a_tool() -> None:
    # "查询天气" was "____" until the server added "股票查询", then "_____22cf3c76": a
    # paused call or a history naming the old name no longer found the tool.
    alone = [t.name for t in _client(McpToolInfo("查询天气")).into_tools()]
    both = [t.name for t in _client(McpToolInfo("查询天气"), McpToolInfo("股票查询")).into_tools()]
    assert alone == ["_____22cf3c76"]
    assert both[0] == "_____22cf3c76" and both[1].startswith("_____")
    # A name that only lost separators keeps its readable name.
    assert [t.name for t in _client(McpToolInfo("get weather")).into_tools()] == ["get_weather"]


def test_a_name_that_no_longer_reads_as_the_servers_is_noted_in_the_description() -> None:
    # Names in Chinese became "_" and a digest, with nothing else to tell them apart
    # when the server gives no description; the model now reads the server's name.
    listed = [
        McpToolInfo("查询天气"),
        McpToolInfo("查询股票", "查询股票价格。"),
        McpToolInfo("löschen", "Löscht."),  # reads the same once folded: no note
        McpToolInfo("files.read", "Read."),  # only a separator changed: no note
        McpToolInfo("x" * 70 + "_alpha"),  # cut, with a digest
        READ,
    ]
    tools = _client(*listed).into_tools(prefix="cn")
    assert [(t.name, t.description) for t in tools] == [
        ("cn_______cd0726c1", "[MCP name: 查询天气]"),
        ("cn_______4d720d6e", "[MCP name: 查询股票] 查询股票价格。"),
        ("cn__loschen", "Löscht."),
        ("cn__files_read", "Read."),
        (adapter_name("x" * 70 + "_alpha", "cn"), f"[MCP name: {'x' * 70}_alpha]"),
        ("cn__read_file", "Read a file."),
    ]


def test_a_tool_listed_twice_is_registered_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="agcore_tools.mcp"):
        tools = _client(READ, McpToolInfo("read_file", "Another listing.")).into_tools()
    assert [(t.name, t.description) for t in tools] == [("read_file", "Read a file.")]
    assert "lists the tool 'read_file' twice; the first listing is used" in caplog.text


def test_tools_the_server_offers_to_its_app_alone_get_no_adapter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # MCP Apps: a viewer's callbacks are for the page the host renders, not the model.
    save = McpToolInfo("save_pdf", "Overwrite the PDF.", meta={"ui": {"visibility": ["app"]}})
    poll = McpToolInfo("poll_commands", meta={"ui/visibility": ["app"]})  # the older flat key
    both = McpToolInfo("display_pdf", meta={"ui": {"visibility": ["model", "app"]}})
    with caplog.at_level("INFO", logger="agcore_tools.mcp"):
        tools = _client(READ, save, poll, both).into_tools(prefix=True)
    assert [t.name for t in tools] == ["files__read_file", "files__display_pdf"]
    assert (
        "MCP server 'files': 'save_pdf', 'poll_commands' left out of the model's tools: the "
        "server offers them to its app alone"
    ) in caplog.text


async def test_an_mcp_apps_servers_app_only_tools_stay_out_of_what_the_model_sees(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "saved"
    script = str(SERVERS / "apps_server.py")
    transport = StdioTransport(sys.executable, [script], env={"SAVED_TO": str(saved)})
    async with McpClient("viewer", transport, timeout=15) as client:
        infos = {info.name: info for info in await client.tool_infos()}
        assert infos["save"].meta == {
            "ui": {"resourceUri": "ui://viewer/app.html", "visibility": ["app"]}
        }
        assert [name for name, info in infos.items() if info.app_only] == ["save", "poll"]
        registry = ToolRegistry()
        registry.register_all(client.into_tools(prefix=True))
        offered = [d["function"]["name"] for d in registry.definitions()]
        assert offered == ["viewer__show", "viewer__zoom", "viewer__open_document", "viewer__echo"]
        assert [d["function"]["name"] for d in await client.definitions()] == [
            "show",
            "zoom",
            "open_document",
            "echo",
        ]
        # The app's own calls (the page's, through the host) still reach them.
        await client.call_tool("save", {"name": "a.pdf", "text": "new"})
        assert saved.read_text() == "a.pdf: new"


async def test_an_mcp_apps_tool_gives_the_model_its_text_and_its_app_the_structured_content(
    tmp_path: Path,
) -> None:
    # server-pdf's display_pdf: the text tells the model what to do next (the view's id,
    # "do not open it again"); the structuredContent is the viewer's data, which MCP Apps
    # keeps out of the model's context. Before, the model read the viewer's data alone.
    script = str(SERVERS / "apps_server.py")
    transport = StdioTransport(sys.executable, [script], env={"SAVED_TO": str(tmp_path / "s")})
    async with McpClient("viewer", transport, timeout=15) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools(prefix=True))
        said = "Opened a.pdf in view v-1; do not open it again."
        invocation = await registry.invoke("viewer__open_document", {"url": "a.pdf"})
        assert invocation.output == said
        call = {"name": "viewer__open_document", "arguments": '{"url": "a.pdf"}'}
        [answer] = await registry.run_tool_calls([{"id": "c1", "function": call}])
        assert answer["content"] == said
        # A program gets what the model reads: the listing promises no object it lacks.
        assert registry.get("viewer__open_document").output_schema is None
        # The app's own path (call_tool) still gets the viewer's data.
        opened = await client.call_tool("open_document", {"url": "a.pdf"})
        assert opened == {"viewUUID": "v-1", "url": "a.pdf"}
        # A plain tool with an app, wrapped as {"result": v}, still reads as v.
        assert (await registry.invoke("viewer__show", {"name": "b"})).output == "showing b"


async def test_every_tool_of_a_server_is_callable_when_names_collide_once_made_valid() -> None:
    # A real server with tools named in Chinese (every letter becomes "_", so names of
    # one length collide) and with "files.read" beside "files_read": before, into_tools()
    # refused the whole server. Each call reaches the tool it names.
    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        added = ["files.read", "files_read", "查询天气", "获取新闻"]
        for name in added:
            await client.call_tool("add_tool", {"name": name})
        await client.refresh_tools()
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        new = [d["function"] for d in registry.definitions()]
        answers = {}
        for name in [f["name"] for f in new if "Added at run" in f["description"]]:
            invocation = await registry.invoke(name, {})
            answers[name] = str(invocation.output).removeprefix("I am ")
    assert sorted(answers.values()) == sorted(added)
    assert answers["files_read"] == "files_read"
    assert answers["files_read_601e4eb6"] == "files.read"
    assert len(answers) == len(set(answers)) == 4


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


async def test_registering_a_servers_tools_again_replaces_them_as_a_rerun_cell_does() -> None:
    # The notebook cell `registry.register_all(client.into_tools())`, run again: with the
    # same client, then with a new client of the same server (the cell makes it too).
    registry = ToolRegistry()

    @registry.tool
    def local(text: str) -> str:
        """A tool of the app's own, which stays."""
        return text

    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        registry.register_all(client.into_tools())
        names = registry.list_tools()
        registry.register_all(client.into_tools())
        assert registry.list_tools() == names
        async with McpClient("fixture", fixture_stdio(), timeout=15) as again:
            registry.register_all(again.into_tools())
            assert registry.list_tools() == names and registry.get("local") is local
            mcp_names = [name for name in names if name != "local"]
            assert {registry.get(name).client for name in mcp_names} == {again}  # type: ignore[attr-defined]
            # Another server's tool of one of those names still collides.
            taken = registry.get(mcp_names[0]).info  # type: ignore[attr-defined]
            with pytest.raises(ToolConfigError, match="already registered"):
                registry.register_all(_client(taken).into_tools())
            assert registry.get(mcp_names[0]).client is again  # type: ignore[attr-defined]


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


async def test_tools_that_require_tasks_are_offered_and_run_as_tasks() -> None:
    # Task support is a 2025-11-25 field (2026-07-28 dropped it from the core protocol).
    transport = StdioTransport(sys.executable, [str(PAGED), "--task-tool"])
    async with McpClient("paged", transport, timeout=15, protocol="legacy") as client:
        infos = {info.name: info for info in await client.tool_infos()}
        assert infos["research"].task_support == "required"
        assert infos["tool_00"].task_support is None
        adapters = {t.name: t for t in client.into_tools()}
        assert len(adapters) == 26
        assert isinstance(adapters["research"], McpTool) and adapters["research"].as_task
        assert not adapters["tool_00"].as_task  # type: ignore[attr-defined]
        # tasks=True opts in only the tools that support tasks; this one does not.
        opted = {t.name: t for t in client.into_tools(tasks=True)}
        assert not opted["tool_00"].as_task  # type: ignore[attr-defined]
        # This server lists the tool but offers no tasks: a clear error, nothing sent.
        with pytest.raises(McpError, match="tasks"):
            await adapters["research"].execute({}, ToolContext())


async def test_errors_name_the_tool_as_the_model_sees_it() -> None:
    # A prefixed adapter's failures say 'fixture__fail', never the server's own 'fail'.
    from agcore_tools import McpNotInitializedError, ToolExecutionError

    from .conftest import fixture_stdio

    registry = ToolRegistry()
    async with McpClient("fixture", fixture_stdio()) as client:
        registry.register_all(client.into_tools(prefix=True))
        failed = await registry.invoke("fixture__fail", {"message": "the disk is full"})
    assert type(failed.error) is ToolExecutionError
    # The rest is the server's own text, which names its tool its own way.
    assert str(failed.error).startswith("tool 'fixture__fail' failed: ")
    assert str(failed.error).endswith("the disk is full")
    assert failed.error.tool_name == "fixture__fail"
    assert isinstance(failed.error.__cause__, ToolExecutionError)
    assert failed.error.__cause__.tool_name == "fail"
    closed = await registry.invoke("fixture__fail", {"message": "again"})
    assert type(closed.error) is McpNotInitializedError
    assert closed.error.tool_name == "fixture__fail"
    assert "'fail'" not in str(closed.error) and "tool 'fixture__fail'" in str(closed.error)
    assert closed.error.server_name == "fixture"
    assert not closed.error.is_recoverable()


async def test_tasks_naming_a_tool_the_server_does_not_list_is_refused() -> None:
    # A typo in tasks=[...] used to be ignored: the tool's calls ran without tasks.
    transport = StdioTransport(sys.executable, [str(PAGED), "--task-tool"])
    async with McpClient("paged", transport, timeout=15, protocol="legacy") as client:
        await client.tool_infos()
        with pytest.raises(ToolConfigError, match=r"no tool named 'reserch'.*research"):
            client.into_tools(tasks=["reserch"])
        with pytest.raises(ToolConfigError, match="list of tool names"):
            client.into_tools(tasks=[1])  # type: ignore[list-item]
        # One string is one name, not its letters (which would be refused as unknown).
        assert len(client.into_tools(tasks="research")) == 26


async def test_a_model_reads_the_servers_refusal_of_its_call_and_the_loop_goes_on() -> None:
    # A server that refuses a wrong argument with a JSON-RPC error (-32602) instead of
    # isError, as TypeScript servers on the low-level Server and mcp-go servers do.
    # Before: "tool loop stopped" after the first model request.
    registry = ToolRegistry()
    script = [
        S.reply_tool_calls([("paged__protocol_error", {}, "call_wrong")]),
        S.reply_tool_calls([("paged__tool_00", {}, "call_right")]),
        S.reply_text("done"),
    ]
    async with McpClient("paged", StdioTransport(sys.executable, [str(PAGED)])) as client:
        registry.register_all(client.into_tools(prefix=True))
        with S(script) as server:
            cycle = LlmCycle(CycleConfig("test-model"), client=server.client(timeout=10.0))
            try:
                response = await cycle.submit_with_tools("go", registry)
            finally:
                await asyncio.wait_for(cycle.client.close(), 5)
            last = server.requests[-1].json
    assert response.text == "done" and len(server.requests) == 3
    answers = {m["tool_call_id"]: m["content"] for m in last["messages"] if m["role"] == "tool"}
    assert answers["call_wrong"] == (
        "Error: MCP server 'paged': tools/call for tool 'paged__protocol_error' was refused "
        "by the server: this tool always answers with a protocol error (code -32602); the "
        "call was not run"
    )
    assert answers["call_right"] == "tool_00"
    [refused] = [i for i in response.invocations if i.tool_name == "paged__protocol_error"]
    assert refused.may_have_run is False
