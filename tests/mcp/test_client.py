"""McpClient against the fixture server, over stdio and Streamable HTTP (real processes).

Each test in "Lifecycle and failure behaviour" of the issue has a section here.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from agcore_tools import (
    AgcoreError,
    Audio,
    Image,
    McpClient,
    McpError,
    McpNotInitializedError,
    McpTimeoutError,
    PermissionChecker,
    PermissionConfig,
    StdioTransport,
    StreamableHttpTransport,
    ToolConfigError,
    ToolError,
    ToolExecutionError,
    ToolRegistry,
)
from agcore_tools.error import McpUsageError
from agcore_tools.mcp import McpLogMessage, McpPermissionPolicy, McpProgress, McpRecovery

from .conftest import (
    FIXTURE,
    PAGED,
    SERVERS,
    HttpServer,
    assert_group_gone,
    assert_no_stray_tasks,
    fixture_stdio,
    pid_alive,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)


# -- handshake, list, call (seed acceptance 14-16) ---------------------------------------


async def test_server_info_is_read_from_the_top_of_a_discover_answer_without_the_stamp() -> None:
    # The C# SDK's servers send serverInfo beside capabilities, not in _meta, where the
    # MCP SDK reads it: server_info was None on 2026-07-28 (and their name on legacy).
    args = [str(SERVERS / "answer_proxy.py"), "info-top-level", "server/discover"]
    transport = StdioTransport(sys.executable, args, stop_grace=1)
    async with McpClient("csharp", transport, timeout=20) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_info == {"name": "fixture", "version": "1.0.0"}
    assert client.server_info is None


async def test_connect_negotiates_and_lists_tools_like_a_registry(make_client: Any) -> None:
    async with make_client() as client:
        assert client.connected
        assert client.protocol_version == "2026-07-28"  # the SDK's discover path
        assert client.server_info == {"name": "fixture", "version": "1.0.0"}
        definitions = await client.list_tools()
    by_name = {d["function"]["name"]: d for d in definitions}
    assert by_name["weather"] == {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "The weather in a city (structured output).",
            "parameters": by_name["weather"]["function"]["parameters"],
        },
    }
    assert by_name["weather"]["function"]["parameters"]["required"] == ["city"]
    assert not client.connected


async def test_legacy_handshake_is_available(make_client: Any) -> None:
    async with make_client(protocol="legacy") as client:
        assert client.protocol_version == "2025-11-25"
        assert await client.call_tool("echo", {"text": "hi"}) == "hi"


async def test_call_tool_result_mapping(make_client: Any) -> None:
    async with make_client() as client:
        assert await client.call_tool("weather", {"city": "Paris"}) == {
            "city": "Paris",
            "temperature": 21.5,
        }
        assert await client.call_tool("echo", {"text": "plain"}) == "plain"
        assert await client.call_tool("two_texts") == "first\nsecond"
        assert await client.call_tool("mixed") == [
            "a picture:",
            Image(b"\x89PNG\r\n\x1a\n", "image/png"),
        ]
        assert await client.call_tool("picture") == [Image(b"\x89PNG\r\n", "image/png")]
        assert await client.call_tool("beep") == [Audio(b"RIFF$\0\0\0WAVEfmt " + bytes(16))]


async def test_is_error_raises_a_recoverable_tool_execution_error(make_client: Any) -> None:
    async with make_client() as client:
        with pytest.raises(ToolExecutionError) as info:
            await client.call_tool("fail", {"message": "the disk is full"})
    assert "the disk is full" in str(info.value)
    assert info.value.tool_name == "fail"
    assert info.value.is_recoverable()


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_json_rpc_error_answer_is_recoverable_and_says_whether_the_call_ran(
    protocol: str,
) -> None:
    # Before: unrecoverable (a model's wrong argument stopped the tool loop), and even a
    # refusal said the call "may have run".
    transport = StdioTransport(sys.executable, [str(PAGED)], env={"API_TOKEN": "tok-S3CRET-42"})
    client = McpClient("paged", transport, protocol=protocol)  # type: ignore[arg-type]
    async with client:
        with pytest.raises(McpError) as refused:
            await client.call_tool("protocol_error")
        assert type(refused.value) is McpError and refused.value.is_recoverable()
        assert refused.value.may_have_run is False and refused.value.tool_name == "protocol_error"
        assert str(refused.value) == (
            "MCP server 'paged': tools/call 'protocol_error' was refused by the server: this "
            "tool always answers with a protocol error (code -32602); the call was not run"
        )
        # Another code (mcp-go answers a failed handler with 0): the server ran the tool
        # at least in part. What it says has the transport's secrets masked.
        failing = {"code": 0, "message": "backend refused $API_TOKEN"}
        with pytest.raises(McpError) as failed:
            await client.call_tool("protocol_error", failing)
        assert failed.value.is_recoverable() and failed.value.may_have_run is True
        assert str(failed.value) == (
            "MCP server 'paged': tools/call 'protocol_error' failed on the server: backend "
            "refused *** (code 0); the call may have run on the server, so do not assume it "
            "had no effect"
        )
        assert client.connected and await client.call_tool("tool_00") == "tool_00"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@pytest.mark.parametrize("code", [-32000, -32001])
async def test_a_servers_own_error_with_a_code_the_sdk_also_uses_is_its_answer(
    protocol: str, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    # JSON-RPC leaves -32000 to -32099 to servers; the SDK uses -32000 for a closed
    # connection and -32001 for its own timeout. Before: the server's -32000 read as
    # "connection lost" (its message dropped, the healthy server stopped and started
    # again, the tool loop stopped), its -32001 as "timed out after 20 s", at once.
    transport = StdioTransport(sys.executable, [str(PAGED)], stop_grace=1)
    client = McpClient("paged", transport, protocol=protocol, timeout=20)  # type: ignore[arg-type]
    async with client:
        failing = {"code": code, "message": "quota exceeded for project X"}
        started = time.monotonic()
        with pytest.raises(McpError) as failed:
            await client.call_tool("protocol_error", failing)
        assert time.monotonic() - started < 5
        assert type(failed.value) is McpError and failed.value.is_recoverable()
        assert str(failed.value) == (
            "MCP server 'paged': tools/call 'protocol_error' failed on the server: quota "
            f"exceeded for project X (code {code}); the call may have run on the server, so "
            "do not assume it had no effect"
        )
        assert failed.value.may_have_run is True
        assert client.connected
        assert await client.call_tool("tool_00") == "tool_00"
    assert not [r for r in caplog.records if "connection lost" in r.getMessage()]


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@pytest.mark.parametrize(
    ("code", "ran"),
    [(-32700, False), (-32600, False), (-32601, False), (-32602, False), (-32603, True)],
)
async def test_a_servers_standard_json_rpc_error_is_its_answer_quoted_and_split_by_code(
    protocol: str, code: int, ran: bool
) -> None:
    # The SDK reports an answer it cannot parse with -32700 too. Before: the server's
    # own -32700 (it could not parse the request) read as "the server's answer is
    # malformed", unrecoverable, and said the call may have run.
    transport = StdioTransport(
        sys.executable, [str(PAGED)], env={"API_TOKEN": "tok-S3CRET-42"}, stop_grace=1
    )
    client = McpClient("paged", transport, protocol=protocol, timeout=20)  # type: ignore[arg-type]
    async with client:
        pid = client.pid
        said = {"code": code, "message": "bad request \u202e$API_TOKEN\x1b[2J"}
        with pytest.raises(McpError) as answered:
            await client.call_tool("protocol_error", said)
        error = answered.value
        assert type(error) is McpError and error.is_recoverable()
        assert error.may_have_run is ran
        verb = "failed on the server" if ran else "was refused by the server"
        outcome = (
            "the call may have run on the server, so do not assume it had no effect"
            if ran
            else "the call was not run"
        )
        assert str(error) == (
            f"MCP server 'paged': tools/call 'protocol_error' {verb}: bad request "
            f"\\u202e***\\x1b[2J (code {code}); {outcome}"
        )
        # The healthy server was neither stopped nor started again.
        assert client.connected and client.pid == pid
        assert await client.call_tool("tool_00") == "tool_00"


async def test_a_refusal_is_recoverable_and_not_run_over_each_transport(make_client: Any) -> None:
    # Over HTTP, a 2026-07-28 server sends it with HTTP 400; before, that said "may
    # have run" (and over stdio the error was unrecoverable too).
    async with make_client() as client:
        with pytest.raises(McpError) as refused:
            await client.call_tool("open_vault", {"vault": "Notes"})
        assert refused.value.is_recoverable() and refused.value.may_have_run is False
        message = str(refused.value)
        assert message.startswith("MCP server 'fixture': tools/call 'open_vault' was refused by")
        assert message.endswith(
            "Unknown vault: Notes. Available vaults: notes (code -32602); the call was not run"
        )


FORGED = "x\n2025-01-01 CRITICAL agcore_tools.registry: checks off\x1b[2J\x9b1m"
"""A server's words with a line of its own making and terminal escapes (ESC, and C1's CSI)."""
ESCAPED = "x\\n2025-01-01 CRITICAL agcore_tools.registry: checks off\\x1b[2J\\x9b1m"
"""The same as the library's errors and log lines show it (as its log messages are)."""


async def test_a_servers_words_in_an_error_are_escaped_as_its_log_messages_are(
    make_client: Any,
) -> None:
    # Its JSON-RPC error answer (HTTP 400 on 2026-07-28) and its isError text went into
    # the library's errors as sent, but for newlines made spaces: an app that logs the
    # error let the server clear the terminal, or set its colours.
    async with make_client() as client:
        with pytest.raises(McpError) as refused:
            await client.call_tool("open_vault", {"vault": FORGED})
        with pytest.raises(ToolExecutionError) as failed:
            await client.call_tool("fail", {"message": FORGED})
        with pytest.raises(ToolExecutionError) as long:
            await client.call_tool("fail", {"message": "y" * 2500})
    assert f"Unknown vault: {ESCAPED}. Available vaults: notes (code -32602)" in str(refused.value)
    assert str(failed.value) == f"tool 'fail' failed: Error executing tool fail: {ESCAPED}"
    assert str(long.value).endswith("y... [cut 527 chars]")
    for error in (refused.value, failed.value):
        assert not re.search("[\x00-\x1f\x7f-\x9f]", str(error)), str(error)


TROJAN = "\u202eadmin\u2066 \u2069ok\u200b\u2028\U000e0041 naïve 東京 🚀"
"""A server's words that read other than they hold: a right-to-left override, isolates,
a zero-width space, a line separator and a tag character, next to text that stays."""
TROJAN_SHOWN = "\\u202eadmin\\u2066 \\u2069ok\\u200b\\u2028\\U000e0041 naïve 東京 🚀"


async def test_a_servers_words_in_an_error_have_their_invisible_characters_escaped(
    make_client: Any,
) -> None:
    # Bidi overrides and zero-width characters went into the library's errors as sent:
    # a logged or printed error read otherwise than it held ("Trojan Source").
    async with make_client() as client:
        with pytest.raises(McpError) as refused:
            await client.call_tool("open_vault", {"vault": TROJAN})
        with pytest.raises(ToolExecutionError) as failed:
            await client.call_tool("fail", {"message": TROJAN})
    assert f"Unknown vault: {TROJAN_SHOWN}. Available vaults" in str(refused.value)
    assert str(failed.value) == f"tool 'fail' failed: Error executing tool fail: {TROJAN_SHOWN}"


async def test_timeout_raises_and_cancels_the_request_on_the_server(
    make_client: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    async with make_client(timeout=10) as client:
        started = time.monotonic()
        with pytest.raises(McpTimeoutError, match=r"tools/call 'slow' timed out after 0\.5 s"):
            await client.call_tool("slow", {"seconds": 30, "marker": str(marker)}, timeout=0.5)
        assert time.monotonic() - started < 3
        # The server saw notifications/cancelled (stdio) or the aborted POST (HTTP) and
        # cancelled the tool, which wrote the marker.
        await wait_until(marker.exists, "the server's 'cancelled' marker")
        assert marker.read_text() == "cancelled"  # written aside and renamed: never empty
        assert await client.call_tool("echo", {"text": "still fine"}) == "still fine"


async def test_calls_before_connect_and_after_close_raise_not_initialized() -> None:
    client = McpClient("fixture", fixture_stdio())
    with pytest.raises(McpNotInitializedError, match="call connect\\(\\) first"):
        await client.call_tool("echo", {"text": "x"})
    with pytest.raises(McpNotInitializedError):
        await client.list_tools()
    with pytest.raises(McpNotInitializedError):
        client.into_tools()
    await client.connect()
    await client.close()
    with pytest.raises(McpNotInitializedError):
        await client.call_tool("echo", {"text": "x"})


async def test_close_is_idempotent_and_connect_is_too() -> None:
    client = McpClient("fixture", fixture_stdio())
    await client.close()
    await client.connect()
    pid = client.pid
    await client.connect()  # already connected: same server
    assert client.pid == pid
    await client.close()
    await client.close()
    assert not client.connected
    await assert_no_stray_tasks()


def test_with_timeout_returns_the_client() -> None:
    client = McpClient("x", fixture_stdio())
    assert client.with_timeout(2.5) is client
    assert client.timeout == 2.5
    with pytest.raises(ToolError):
        client.with_timeout(0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        # Each was taken: -1 meant 0, and "loud" went to the server at every connect.
        (
            {"tools_ttl": -1},
            "MCP server 'x': tools_ttl must be seconds (0 or more) or None, got -1",
        ),
        ({"tools_ttl": "60"}, "tools_ttl must be seconds (0 or more) or None, got '60'"),
        ({"log_level": "loud"}, "MCP server 'x': log_level must be one of debug, info, notice,"),
        ({"log_level": 20}, "log_level must be one of debug"),
    ],
)
def test_a_bad_setting_is_refused_when_the_client_is_made(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolConfigError) as raised:
        McpClient("x", fixture_stdio(), **options)
    assert message in str(raised.value)
    assert isinstance(raised.value, ValueError)


async def _async_policy(info: Any) -> list[str]:
    return ["read"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        # Each was taken; permission_policy then failed into_tools() with a bare
        # TypeError after the server was started, and on_log or on_progress logged a
        # traceback for each message, losing it ("yes" for tasks was read as True).
        (
            {"permission_policy": PermissionConfig(allowed=["read"])},
            "MCP server 'x': permission_policy must be a function of McpToolInfo returning "
            "the permissions its tool requires (such as McpPermissionPolicy(...)), got a "
            "PermissionConfig: a PermissionConfig says what is allowed, and goes to "
            "ToolRegistry(PermissionChecker(config))",
        ),
        (
            {"permission_policy": PermissionChecker()},
            "got a PermissionChecker: a PermissionChecker says what is allowed, and goes to "
            "ToolRegistry(checker)",
        ),
        ({"permission_policy": "trust"}, "(such as McpPermissionPolicy(...)), or None; got str"),
        ({"permission_policy": _async_policy}, "not the async function _async_policy"),
        (
            # The example logs the data with %r: as sent, a newline in it would forge
            # a record.
            {"on_log": logging.getLogger("myapp")},
            "MCP server 'x': on_log must be a function of each McpLogMessage (sync or async), "
            'such as lambda message: logger.info("%r", message.data), or None; got a Logger',
        ),
        ({"on_progress": "print"}, "on_progress must be a function of each McpProgress"),
        ({"sampling_handler": 1}, "sampling_handler must be a function of (context, params) "),
        ({"elicitation_handler": "ask"}, "elicitation_handler must be a function of (context, "),
        ({"roots_handler": ["/tmp"]}, "roots_handler must be a function of (context) (sync or "),
        ({"tasks": "yes"}, "MCP server 'x': tasks must be True or False, got str 'yes'"),
        ({"tasks": 1}, "tasks must be True or False, got int 1"),
    ],
)
def test_a_callback_policy_or_flag_of_the_wrong_kind_is_refused_when_the_client_is_made(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolConfigError) as raised:
        McpClient("x", fixture_stdio(), **options)
    assert message in str(raised.value)
    assert isinstance(raised.value, ValueError) and "\n" not in str(raised.value)


def test_callbacks_and_policies_that_are_functions_are_taken() -> None:
    def policy(info: Any) -> list[str]:
        return ["read"]

    async def answer(context: Any, params: Any) -> None:
        return None

    handler: Any = answer  # the SDK's callback types, which the client only stores here
    updates: list[McpProgress] = []
    client = McpClient(
        "x",
        fixture_stdio(),
        permission_policy=policy,
        on_log=print,
        on_progress=updates.append,
        sampling_handler=handler,
        elicitation_handler=handler,
        tasks=True,
    )
    assert (client.permission_policy, client.on_log, client.tasks) == (policy, print, True)
    assert isinstance(McpClient("x", fixture_stdio()).permission_policy, McpPermissionPolicy)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: McpClient("x", fixture_stdio(), timout=5),  # type: ignore[call-arg]
            "McpClient() got an unknown keyword 'timout': did you mean timeout=...?",
        ),
        (
            lambda: StdioTransport("python", argz=[]),  # type: ignore[call-arg]
            "StdioTransport() got an unknown keyword 'argz': did you mean args=...?",
        ),
        (
            lambda: StreamableHttpTransport("http://127.0.0.1/mcp", header={}),  # type: ignore[call-arg]
            "StreamableHttpTransport() got an unknown keyword 'header': did you mean headers=",
        ),
        (
            lambda: McpPermissionPolicy(trust_anotations=False),  # type: ignore[call-arg]
            "McpPermissionPolicy() got an unknown keyword 'trust_anotations': did you mean ",
        ),
        (
            lambda: McpRecovery(max_restart=2),  # type: ignore[call-arg]
            "McpRecovery() got an unknown keyword 'max_restart': did you mean max_restarts=",
        ),
    ],
    ids=["McpClient", "StdioTransport", "StreamableHttpTransport", "policy", "recovery"],
)
def test_a_misspelt_keyword_of_an_mcp_class_names_the_right_one(make: Any, message: str) -> None:
    # Python's bare TypeError, outside AgcoreError, naming no valid keyword.
    with pytest.raises(TypeError) as raised:
        make()
    error = raised.value
    assert str(error).startswith(message), str(error)
    assert isinstance(error, ToolConfigError) and isinstance(error, AgcoreError)
    assert type(error.__cause__) is TypeError  # Python's, kept


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda c: c.call_tool("echo", {"text": "hi"}, timout=5),
            "McpClient.call_tool() got an unknown keyword 'timout': did you mean timeout=...?",
        ),
        (
            lambda c: c.into_tools(prefx=True),
            "McpClient.into_tools() got an unknown keyword 'prefx': did you mean prefix=...?",
        ),
        (
            lambda c: c.read_resource(url="demo://x"),
            "McpClient.read_resource() got an unknown keyword 'url': did you mean uri=...?",
        ),
        (
            lambda c: c.get_prompt("trip", args={"country": "Peru"}),
            "McpClient.get_prompt() got an unknown keyword 'args': did you mean arguments=...?",
        ),
        (
            lambda c: c.start_task("build", tl=60),
            "McpClient.start_task() got an unknown keyword 'tl': did you mean ttl=...?",
        ),
        (
            lambda c: c.call_tool_sync("echo", timout=5),
            "McpClient.call_tool_sync() got an unknown keyword 'timout': did you mean timeout=...?",
        ),
        (
            lambda c: c.list_tools(refresh=True),
            "McpClient.list_tools() got an unknown keyword 'refresh': it takes no keywords",
        ),
        (
            lambda c: c.connect(timeout=5),
            "McpClient.connect() got an unknown keyword 'timeout': it takes no keywords",
        ),
    ],
    ids=[
        "call_tool",
        "into_tools",
        "read_resource",
        "get_prompt",
        "start_task",
        "call_tool_sync",
        "list_tools",
        "connect",
    ],
)
async def test_a_misspelt_keyword_of_an_mcp_client_method_is_the_librarys_error(
    call: Any, message: str
) -> None:
    # Before: Python's bare TypeError, outside AgcoreError and naming no valid keyword,
    # though McpClient(timout=5) itself named timeout. Nothing is sent: the call fails
    # as it is made (an async one when awaited), before any connection.
    client = McpClient("x", fixture_stdio())
    with pytest.raises(TypeError) as raised:
        made = call(client)
        if asyncio.iscoroutine(made):
            await made
    error = raised.value
    assert str(error) == message
    assert isinstance(error, ToolConfigError) and isinstance(error, AgcoreError)
    assert type(error.__cause__) is TypeError  # Python's, kept
    assert not client.connected


def test_no_cache_no_log_level_and_mcps_levels_are_taken() -> None:
    client = McpClient("x", fixture_stdio(), tools_ttl=0, log_level=None)
    assert (client.tools_ttl, client.log_level) == (0, None)
    assert McpClient("x", fixture_stdio(), tools_ttl=2.5, log_level="warning").tools_ttl == 2.5


def test_a_log_level_spelt_as_pythons_logging_spells_it_is_taken_in_lower_case() -> None:
    # "WARNING", as logging.getLevelName() gives it, was refused when the client was made.
    assert McpClient("x", fixture_stdio(), log_level="WARNING").log_level == "warning"
    assert McpClient("x", fixture_stdio(), log_level="Error").log_level == "error"


async def test_a_path_as_the_command_and_none_as_args_are_taken() -> None:
    # pathlib.Path for the interpreter, and a config entry's args=entry.get("args").
    transport = StdioTransport(Path(sys.executable), None)  # type: ignore[arg-type]
    assert (transport.command, transport.args) == (sys.executable, ())
    with_args = StdioTransport(Path(sys.executable), [str(FIXTURE)])  # type: ignore[arg-type]
    async with McpClient("fx", with_args, timeout=30) as client:
        assert "echo" in [info.name for info in await client.tool_infos()]


def test_a_command_given_with_its_arguments_in_one_list_is_told_to_split_them() -> None:
    with pytest.raises(ToolConfigError) as raised:
        StdioTransport([sys.executable, str(FIXTURE), "--token", "s3cr3t-value"])  # type: ignore[arg-type]
    message = str(raised.value)
    assert message.startswith("StdioTransport takes the command as a string and its arguments")
    assert "use StdioTransport(command, args=[...])" in message
    assert "s3cr3t-value" not in message


# -- start-up failures ----------------------------------------------------------------------


async def test_missing_command_fails_fast() -> None:
    client = McpClient("ghost", StdioTransport("no-such-mcp-server-binary"), timeout=5)
    started = time.monotonic()
    with pytest.raises(McpError, match="cannot start `no-such-mcp-server-binary`"):
        await client.connect()
    assert time.monotonic() - started < 2
    assert not client.connected


async def test_a_whole_command_line_as_the_command_is_told_how_to_split_it() -> None:
    # "No such file or directory" was all it said: the first try of many.
    command = "no-such-mcp-launcher -y server-fs --token s3cret /tmp"
    client = McpClient("fs", StdioTransport(command), timeout=5)
    with pytest.raises(McpError) as raised:
        await client.connect()
    message = str(raised.value)
    assert message.endswith(
        "; a command line goes as the program and a list of arguments: "
        "StdioTransport('no-such-mcp-launcher', ['-y', 'server-fs', '--token', '***', '/tmp'])"
    )
    assert isinstance(raised.value.__cause__, FileNotFoundError)
    # A program that is missing under its own name gets no such hint.
    lone = McpClient("ghost", StdioTransport("no-such-mcp-server-binary", ["-y"]), timeout=5)
    with pytest.raises(McpError) as raised:
        await lone.connect()
    assert "a command line goes" not in str(raised.value)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ('{"seconds": 0}', "got str (a JSON string: pass json.loads() of it)"),
        ({1: 2}, "got dict"),
        ([("seconds", 0)], "got list"),
    ],
)
async def test_arguments_that_are_no_mapping_of_names_are_refused_before_sending(
    args: object, why: str
) -> None:
    # They failed inside the SDK ("dictionary update sequence element #0 ...") or as an
    # invalid answer that "may have run on the server", though nothing was sent.
    client = McpClient("x", StdioTransport("never-started"))
    with pytest.raises(McpUsageError, match=re.escape(why)) as caught:
        await client.call_tool("slow", args)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith("call_tool('slow'): arguments must be a mapping")
    with pytest.raises(McpUsageError):
        await client.start_task("slow", args)  # type: ignore[arg-type]


async def test_an_argument_json_cannot_hold_is_refused_before_sending() -> None:
    # The SDK failed to serialise the request, which read as a call that "may have run
    # on the server", though nothing was sent.
    client = McpClient("x", StdioTransport("never-started"))
    with pytest.raises(McpUsageError, match="an argument cannot be sent as JSON") as caught:
        await client.call_tool("slow", {"seconds": object()})
    assert caught.value.may_have_run is None
    assert isinstance(caught.value.__cause__, Exception)
    with pytest.raises(McpUsageError, match="start_task\\('slow'\\): an argument"):
        await client.start_task("slow", {"when": object()})


async def test_a_missing_working_directory_is_named_as_such(tmp_path: Path) -> None:
    # The OS says "No such file or directory" for it, which read as the command's.
    missing = tmp_path / "gone"
    client = McpClient("x", StdioTransport(sys.executable, ["s.py"], cwd=missing), timeout=5)
    with pytest.raises(McpError, match=re.escape(f"its working directory '{missing}': No such")):
        await client.connect()


async def test_server_exiting_during_start_up_reports_code_and_stderr() -> None:
    code = "import sys; print('fatal: no config file', file=sys.stderr); sys.exit(2)"
    client = McpClient(
        "broken", StdioTransport(sys.executable, ["-c", code], stop_grace=0.5), timeout=10
    )
    started = time.monotonic()
    with pytest.raises(McpError) as info:
        await client.connect()
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "exited with code 2 during start-up" in message
    assert "stderr: fatal: no config file" in message


async def test_a_token_a_failing_server_echoes_is_masked_in_the_error_and_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    secret = "ghp_S3CRETt0ken"
    code = "import os, sys; sys.exit('bad credentials: ' + os.environ['GITHUB_TOKEN'])"
    transport = StdioTransport(sys.executable, ["-c", code], {"GITHUB_TOKEN": secret})
    with pytest.raises(McpError) as info:
        await McpClient("gh", transport, timeout=10).connect()
    assert str(info.value).endswith("during start-up; stderr: bad credentials: ***")
    assert "[gh] bad credentials: ***" in caplog.messages
    assert secret not in caplog.text


async def test_a_token_a_failing_server_echoes_from_its_args_is_masked_in_the_error_and_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The command line shown hid these args' values, but the server's stderr showed
    # them when it echoed them: only env values were masked there.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    secrets = [f"SECRET-{n}-0123456789" for n in range(5)]
    args = [
        *("--api-key", secrets[0], "--token", secrets[1], "-e", f"GITHUB_TOKEN={secrets[2]}"),
        *(f"postgresql://app:{secrets[3]}@db/prod", "--header"),
        f"Authorization: Bearer {secrets[4]}",
    ]
    code = (
        "import sys; print('rejected:', *sys.argv[1:], file=sys.stderr); "
        "print('token', sys.argv[-1].split()[-1], file=sys.stderr); sys.exit(3)"
    )
    client = McpClient("srv", StdioTransport(sys.executable, ["-c", code, *args]), timeout=10)
    with pytest.raises(McpError, match="exited with code 3 during start-up") as info:
        await client.connect()
    message = str(info.value)
    assert message.endswith(
        "stderr: rejected: --api-key *** --token *** -e GITHUB_TOKEN=*** "
        "postgresql://***@db/prod --header Authorization: *** | token ***"
    )  # the user with the password, as for env values: a short password shows alone
    assert caplog.messages[-1] == "[srv] token ***"
    assert not [s for s in secrets if s in message or s in caplog.text or s in client.stderr_tail]


async def test_server_that_never_answers_times_out_and_is_stopped() -> None:
    code = "import sys, time; print('waiting forever', file=sys.stderr, flush=True); time.sleep(60)"
    # The default stop_grace (2 s per step) does not apply to a server that never started.
    client = McpClient("mute", StdioTransport(sys.executable, ["-c", code]), timeout=1.0)
    started = time.monotonic()
    with pytest.raises(McpTimeoutError) as info:
        await client.connect()
    # The timeout, plus a prompt stop: no graceful wait for a server that never started.
    assert time.monotonic() - started < 1.0 + 0.8
    assert "did not complete the MCP handshake within 1 s" in str(info.value)
    assert "waiting forever" in str(info.value)
    assert client.stderr_tail == "waiting forever"  # kept after the failed start
    await assert_no_stray_tasks()


async def test_a_server_that_ignores_server_discover_is_named_with_the_legacy_fix() -> None:
    # A 2025-era server that ignores requests it does not know (no -32601 answer).
    args = [str(SERVERS / "answer_proxy.py"), "ignore", "server/discover"]
    transport = StdioTransport(sys.executable, args, stop_grace=1)
    # The legacy handshake sends no probe. (First, too: the SDK's import, which the
    # first connect of a process waits for within its timeout, is then done.)
    async with McpClient("old", transport, timeout=20, protocol="legacy") as client:
        assert await client.call_tool("echo", {"text": "hi"}) == "hi"
    with pytest.raises(McpTimeoutError) as info:
        await McpClient("old", transport, timeout=1.0).connect()
    message = str(info.value)
    assert "did not complete the MCP handshake within 1 s; it never answered server/discover" in (
        message
    )
    assert 'McpClient(..., protocol="legacy")' in message
    await assert_no_stray_tasks()


async def test_unreachable_http_server_fails_within_the_timeout() -> None:
    client = McpClient("nowhere", StreamableHttpTransport("http://127.0.0.1:9/mcp"), timeout=5)
    with pytest.raises(McpError, match=r"cannot connect to http://127\.0\.0\.1:9/mcp"):
        await client.connect()
    await assert_no_stray_tasks()


# -- lifecycle: tasks -----------------------------------------------------------------------


async def test_connect_and_close_in_different_tasks_with_many_concurrent_calls(
    make_client: Any,
) -> None:
    client = make_client()
    await asyncio.create_task(client.connect())

    async def caller(i: int) -> str:
        return await client.call_tool("echo", {"text": f"call {i}"})

    results = await asyncio.gather(*(asyncio.create_task(caller(i)) for i in range(100)))
    assert results == [f"call {i}" for i in range(100)]
    await asyncio.create_task(client.close())
    assert not client.connected
    await assert_no_stray_tasks()


async def test_close_from_another_task_while_connect_is_in_flight() -> None:
    code = "import time; time.sleep(60)"
    client = McpClient(
        "slowstart", StdioTransport(sys.executable, ["-c", code], stop_grace=0.5), timeout=30
    )
    connecting = asyncio.create_task(client.connect())
    await asyncio.sleep(0.5)
    started = time.monotonic()
    await asyncio.create_task(client.close())
    with pytest.raises(McpNotInitializedError, match="closed while connecting"):
        await connecting
    assert time.monotonic() - started < 5
    await assert_no_stray_tasks()


async def test_cancelling_connect_stops_the_server() -> None:
    code = "import time; time.sleep(60)"
    client = McpClient(
        "slowstart", StdioTransport(sys.executable, ["-c", code], stop_grace=0.5), timeout=30
    )
    connecting = asyncio.create_task(client.connect())
    # Not a fixed 0.5 s, which a loaded machine can overrun.
    await wait_until(lambda: client.pid is not None, "the server to be started")
    pid = client.pid
    assert pid is not None
    connecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await connecting
    assert not pid_alive(pid)
    await assert_no_stray_tasks()


# -- lifecycle: a server that dies ---------------------------------------------------------


async def test_server_dying_mid_call_fails_that_call_and_later_ones_promptly(
    make_client: Any,
) -> None:
    # Without recovery, later calls fail until connect(); tests/mcp/test_recovery.py
    # covers the default, which starts the server again on the next call.
    client = make_client(timeout=30, recovery=None)
    await client.connect()
    in_flight = [asyncio.create_task(client.call_tool("slow", {"seconds": 20})) for _ in range(5)]
    await asyncio.sleep(0.2)
    started = time.monotonic()
    with pytest.raises(McpError) as info:
        await client.call_tool("die", {"code": 3})
    for task in in_flight:
        with pytest.raises(McpError):
            await task
    assert time.monotonic() - started < 2, "failures must not wait for the 30 s timeout"
    assert "connection lost" in str(info.value)
    if make_client.transport == "stdio":
        assert "exited with code 3" in str(info.value)

    assert not client.connected
    with pytest.raises(McpNotInitializedError, match="connection was lost"):
        await client.call_tool("echo", {"text": "x"})
    assert time.monotonic() - started < 3

    if make_client.transport == "stdio":
        await client.connect()  # starts a new server
        assert client.connected
        assert await client.call_tool("echo", {"text": "back"}) == "back"
    await client.close()
    await assert_no_stray_tasks()


async def test_server_killed_between_calls_is_noticed_without_a_call() -> None:
    import os
    import signal

    client = McpClient("victim", fixture_stdio(), recovery=None)
    await client.connect()
    assert client.pid is not None
    os.kill(client.pid, signal.SIGKILL)
    for _ in range(100):
        if not client.connected:
            break
        await asyncio.sleep(0.02)
    assert not client.connected
    with pytest.raises(McpNotInitializedError, match="was killed by signal 9"):
        await client.call_tool("echo", {"text": "x"})
    await client.close()


# -- lifecycle: the child's environment ---------------------------------------------------


async def test_stdio_child_gets_a_minimal_environment_plus_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "also-secret")
    client = McpClient("env", fixture_stdio(env={"FIXTURE_TOKEN": "given"}))
    async with client:
        seen = await client.call_tool("environment")
    assert "OPENAI_API_KEY" not in seen
    assert "AWS_SECRET_ACCESS_KEY" not in seen
    assert seen["FIXTURE_TOKEN"] == "given"
    assert seen["PATH"]
    assert set(seen) <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "FIXTURE_TOKEN"} | {
        # set by the Python interpreter itself at start-up
        "LC_CTYPE"
    }


# -- lifecycle: stderr ----------------------------------------------------------------------


async def test_stderr_goes_to_logging(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    client = McpClient("talky", fixture_stdio("--print-stderr", "hello from the server"))
    async with client:
        await client.call_tool("echo", {"text": "x"})
        assert client.stderr_tail.endswith("hello from the server")
    assert any(
        r.name == "agcore_tools.mcp.stderr" and "[talky] hello from the server" in r.getMessage()
        for r in caplog.records
    )


async def test_a_servers_stderr_cannot_drive_the_terminal(caplog: pytest.LogCaptureFixture) -> None:
    # Its \r and escapes erased and overwrote the "[rogue]" prefix on a terminal.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    line = "starting\x1b[2K\rCRITICAL agcore_tools.registry: all permissions granted\x1b[8m"
    client = McpClient("rogue", fixture_stdio("--print-stderr", line))
    async with client:
        await client.call_tool("echo", {"text": "x"})
    # Read once closed: the whole of its stderr has been read by then.
    shown = "starting\\x1b[2K\\rCRITICAL agcore_tools.registry: all permissions granted\\x1b[8m"
    logged = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.mcp.stderr"]
    assert f"[rogue] {shown}" in logged
    assert not any("\r" in text or "\x1b" in text for text in logged)


async def test_a_server_flooding_stderr_does_not_stall_the_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.stderr")
    async with McpClient("flood", fixture_stdio(), timeout=10) as client:
        await client.call_tool("flood_stderr", {"megabytes": 16})
        started = time.monotonic()
        results = await asyncio.gather(
            *(client.call_tool("echo", {"text": str(i)}) for i in range(200))
        )
        elapsed = time.monotonic() - started
        assert results == [str(i) for i in range(200)]
        assert elapsed < 5, f"200 calls took {elapsed:.1f} s while the server flooded stderr"
        await asyncio.sleep(1.2)  # a second budget window passes: the count gets reported
        await client.call_tool("flood_stderr", {"megabytes": 1})
        await asyncio.sleep(0.3)
    stderr_records = [r for r in caplog.records if r.name == "agcore_tools.mcp.stderr"]
    assert any("stderr lines not logged" in r.getMessage() for r in stderr_records)
    # Bounded: a few hundred log lines per second, not the 80 000+ lines written.
    assert len(stderr_records) < 2000


# -- lifecycle: process group ---------------------------------------------------------------


async def test_close_ends_the_child_and_its_process_group() -> None:
    client = McpClient("parent", fixture_stdio())
    await client.connect()
    pgid = client.pid
    assert pgid is not None
    grandchild = (await client.call_tool("spawn_grandchild"))["result"]
    assert pid_alive(grandchild)
    started = time.monotonic()
    await client.close()
    assert not pid_alive(pgid)
    assert not pid_alive(grandchild)
    assert_group_gone(pgid)
    # stdin closed -> the server exits; the sleep left in its group gets SIGTERM at once.
    assert time.monotonic() - started < 4


async def test_a_child_ignoring_stdin_close_and_sigterm_is_killed() -> None:
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "sys.stdin.close()\n"
        "time.sleep(60)\n"
    )
    client = McpClient(
        "stubborn", StdioTransport(sys.executable, ["-c", code], stop_grace=0.5), timeout=1
    )
    with pytest.raises(McpTimeoutError):
        await client.connect()
    # connect() failed, but only after the child was stopped: stdin close (0.5 s grace),
    # SIGTERM (ignored, 0.5 s grace), SIGKILL.
    assert client.pid is None or not pid_alive(client.pid)


# -- server-to-client traffic ---------------------------------------------------------------


async def test_ping_from_the_server_is_answered() -> None:
    async with McpClient("pinger", fixture_stdio(), protocol="legacy") as client:
        assert await client.call_tool("ping_client") == "pong"


async def test_sampling_and_roots_are_advertised_only_with_handlers_elicitation_declines(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with make_client() as client:
        advertised = json.loads(await client.call_tool("capabilities"))
        assert set(advertised) == {"elicitation"}
        # Without a handler, the request is declined (not a protocol error), and logged.
        with caplog.at_level(logging.WARNING, logger="agcore_tools.mcp"):
            assert await client.call_tool("ask_each_era", {"question": "colour?"}) == "decline: "
        assert "asked for user input ('colour?'); declined" in caplog.text
        assert "elicitation_handler" in caplog.text


async def _elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": f"blue ({params.message})"})


async def _sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="sampled!"), model="stub"
    )


async def _roots(ctx: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///srv/project")])


async def _check_handlers_routed(make_client: Any, handlers: dict[str, Any]) -> None:
    async with make_client(**handlers) as client:
        advertised = await client.call_tool("capabilities")
        for capability in ("sampling", "elicitation", "roots"):
            assert f'"{capability}"' in advertised
        # 2026-07-28: the request comes back as input_required and the SDK routes it.
        assert await client.call_tool("ask_each_era", {"question": "colour?"}) == (
            "accept: blue (colour?)"
        )
    async with make_client(protocol="legacy", **handlers) as client:
        # 2025-11-25: server-to-client requests on the connection.
        assert await client.call_tool("ask", {"question": "colour?"}) == "accept: blue (colour?)"
        assert await client.call_tool("sample", {"prompt": "hi"}) == "sampled!"
        assert await client.call_tool("roots") == "file:///srv/project"


async def test_handlers_are_advertised_and_routed(make_client: Any) -> None:
    handlers = {
        "elicitation_handler": _elicit,
        "sampling_handler": _sample,
        "roots_handler": _roots,
    }
    await _check_handlers_routed(make_client, handlers)


async def test_sync_handlers_answer_from_a_worker_thread(make_client: Any) -> None:
    # Before: the SDK awaited what a plain function returned, so every request failed
    # with a TypeError: logged as a WARNING for sampling and elicitation, sent to the
    # server as its text (with the SDK's traceback logged) for roots.
    loop_thread = threading.get_ident()
    ran_on: list[int] = []

    def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        ran_on.append(threading.get_ident())
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled!"), model="x"
        )

    def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        ran_on.append(threading.get_ident())
        return types.ElicitResult(action="accept", content={"answer": f"blue ({params.message})"})

    def roots(ctx: Any) -> types.ListRootsResult:
        ran_on.append(threading.get_ident())
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/project")])

    handlers: dict[str, Any] = {
        "sampling_handler": sample,
        "elicitation_handler": elicit,
        "roots_handler": roots,
    }
    await _check_handlers_routed(make_client, handlers)
    # Off the event loop, where a blocking handler (input(), a sync SDK) would stop it.
    assert len(ran_on) == 4 and loop_thread not in ran_on


async def _sampled_later(client: McpClient) -> str:
    """How the fixture server's ``sample_later`` request went, once it has (15 s at most)."""
    deadline = time.monotonic() + 15
    while (outcome := await client.call_tool("sampled_later")) == "waiting":
        assert time.monotonic() < deadline, "the server's request was never answered"
        await asyncio.sleep(0.05)
    return str(outcome)


async def test_a_handler_that_does_not_answer_in_time_is_given_up_on(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A sync handler stuck (a console prompt nobody answers, a model client that hangs):
    # a request the server sent on its own, outside any call, was never answered, and
    # the handler's thread counted against the tool pool until close().
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    release = threading.Event()

    def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        release.wait(60)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="late"), model="x"
        )

    try:
        async with make_client(protocol="legacy", sampling_handler=sample) as client:
            # Connected under the default 15 s: a loaded machine's start-up can take over
            # 3 s. The handler's bound is the timeout when the server asks.
            client.timeout = 3
            assert await client.call_tool("sample_later", {"prompt": "hi"}) == "asking"
            started = time.monotonic()
            outcome = await _sampled_later(client)
            took = time.monotonic() - started
            assert outcome == "refused: the client's sampling_handler did not answer within 3 s"
            assert took < 3 + 1, f"answered after {took:.2f} s"
            started = time.monotonic()
        took = time.monotonic() - started
        assert took < 2, f"close() took {took:.2f} s"
    finally:
        release.set()
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning == (
        "MCP server 'fixture': the client's sampling_handler did not answer within 3 s; the "
        "server was told so (its thread runs on: Python cannot stop a thread)"
    )


async def test_a_handler_has_as_long_as_the_call_that_asked(make_client: Any) -> None:
    # A call's own timeout= (longer than the client's) bounds the person or model its
    # tool asks through the handler, as the guide says.
    def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        time.sleep(2)  # a slow model: the answer takes longer than the client's timeout
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="slow"), model="x"
        )

    async with make_client(protocol="legacy", sampling_handler=sample) as client:
        client.timeout = 1  # once connected: the server's start-up may take longer
        assert await client.call_tool("sample", {"prompt": "hi"}, timeout=10) == "slow"


async def test_a_failing_handler_tells_the_server_no_details(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def leaky(ctx: Any, params: Any) -> Any:
        raise RuntimeError("upstream refused key sk-SECRET-42")

    def leaky_roots(ctx: Any) -> Any:  # sync: it runs in a worker thread
        raise RuntimeError("upstream refused key sk-SECRET-42")

    handlers = {
        "elicitation_handler": leaky,
        "sampling_handler": leaky,
        "roots_handler": leaky_roots,
    }
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    async with make_client(protocol="legacy", **handlers) as client:
        for tool, args in (
            ("sample", {"prompt": "hi"}),
            ("ask", {"question": "colour?"}),
            ("roots", {}),
        ):
            with pytest.raises(ToolError) as caught:
                await client.call_tool(tool, args)
            # What the server reports back is all it was sent: no secret in it.
            assert "sk-SECRET" not in str(caught.value)
            assert "handler failed" in str(caught.value)
    assert "sk-SECRET" not in caplog.text
    assert "the client's sampling_handler raised RuntimeError" in caplog.text
    assert "the client's elicitation_handler raised RuntimeError" in caplog.text
    assert "the client's roots_handler raised RuntimeError" in caplog.text


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_handler_that_answers_the_wrong_thing_is_named_in_the_log(
    make_client: Any, caplog: pytest.LogCaptureFixture, protocol: str
) -> None:
    # A handler returning what the SDK cannot send (a plain string, None, a list): on
    # 2025-11-25 the SDK told the server "Invalid request parameters", so the call read
    # as refused by the server ("the call was not run") though its tool had run; on
    # 2026-07-28 it failed as the server's invalid answer. Nothing named the handler.
    def elicit(ctx: Any, params: Any) -> Any:
        return "accept sk-SECRET-42"

    def roots(ctx: Any) -> Any:
        return ["file:///srv/project"]

    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp")
    handlers = {"elicitation_handler": elicit, "roots_handler": roots}
    async with make_client(protocol=protocol, **handlers) as client:
        with pytest.raises(ToolError) as caught:
            await client.call_tool("ask_each_era", {"question": "colour?"})
        assert "refused by the server" not in str(caught.value)
        assert "not run" not in str(caught.value)
        if protocol == "auto":  # the legacy server's tool says only that it failed
            said = "the client's elicitation_handler returned no valid answer"
            assert said in str(caught.value)
        else:
            with pytest.raises(ToolError) as caught:
                await client.call_tool("roots")
            assert "not run" not in str(caught.value)
    assert "sk-SECRET" not in caplog.text
    assert (
        "the client's elicitation_handler returned a str, not an ElicitResult (or ErrorData): "
        "ElicitResult: Input should be a valid dictionary or instance of ElicitResult"
    ) in caplog.text
    if protocol == "legacy":
        assert "the client's roots_handler returned a list, not a ListRootsResult" in caplog.text
    # An answer of the right shape as a mapping is taken, as the SDK takes it.
    answer = {"action": "accept", "content": {"answer": "red"}}
    async with make_client(protocol=protocol, elicitation_handler=lambda c, p: answer) as client:
        assert await client.call_tool("ask_each_era", {"question": "colour?"}) == "accept: red"


async def test_a_call_refused_for_want_of_a_listing_is_sent_again_after_one(
    http_server: HttpServer,
) -> None:
    # 2026-07-28 over HTTP: the client mirrors an argument marked x-mcp-header into an
    # Mcp-Param-* header only for a tool it has listed. The server refuses the call
    # without it (HEADER_MISMATCH); the SDK client re-lists and sends it again.
    async with McpClient("fixture", StreamableHttpTransport(http_server.url)) as client:
        assert client.protocol_version == "2026-07-28"
        assert await client.call_tool("add_routed_tool") == "added routed"
        assert await client.call_tool("routed", {"region": "eu"}) == "routed to eu"


async def test_log_and_progress_notifications_reach_logging_and_callbacks(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agcore_tools.mcp")
    logs: list[McpLogMessage] = []
    updates: list[McpProgress] = []

    async def on_progress(update: McpProgress) -> None:
        updates.append(update)

    async with make_client(on_log=logs.append, on_progress=on_progress) as client:
        assert await client.call_tool("progress", {"steps": 3}) == "done"
        # Notifications are delivered in their own tasks, and may trail the answer.
        await wait_until(lambda: len(updates) >= 3 and len(logs) >= 1, "the notifications")
    assert [(u.progress, u.total, u.message) for u in updates] == [
        (1.0, 3.0, "step 1"),
        (2.0, 3.0, "step 2"),
        (3.0, 3.0, "step 3"),
    ]
    assert updates[0].tool_name == "progress" and updates[0].server_name == "fixture"
    assert [(m.level, m.data) for m in logs] == [("warning", "progress tool finished")]
    messages = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert ("agcore_tools.mcp.server", logging.WARNING, "[fixture] progress tool finished") in (
        messages
    )
    assert any(name == "agcore_tools.mcp.progress" and "step 2" in m for name, _, m in messages)


async def test_a_credential_in_a_progress_message_or_a_declined_question_is_masked_in_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The server's log messages were logged with the transport's secrets masked, but
    # its progress messages (DEBUG) and a question declined for want of an
    # elicitation_handler (WARNING) were logged as the server sent them.
    secret = "ghp_S3CRETt0ken00"
    caplog.set_level(logging.DEBUG, logger="agcore_tools.mcp")
    updates: list[McpProgress] = []
    last = asyncio.Event()

    def on_progress(update: McpProgress) -> None:  # called after the line is logged
        updates.append(update)
        last.set()

    transport = fixture_stdio(env={"API_TOKEN": secret})
    async with McpClient("fx", transport, on_progress=on_progress) as client:
        label = f"uploading with {secret}"
        assert await client.call_tool("progress", {"steps": 1, "label": label}) == "done"
        await asyncio.wait_for(last.wait(), 10)  # notifications may trail the answer
        asked = {"question": f"is {secret} yours?"}
        assert await client.call_tool("ask_each_era", asked) == "decline: "
    assert secret not in caplog.text, caplog.text
    assert "[fx] progress: 1.0/1.0 uploading with *** 1" in caplog.text
    assert "asked for user input ('is *** yours?'); declined" in caplog.text
    assert updates[0].message == f"{label} 1"  # the callback gets it as sent, as on_log


async def test_a_progress_message_is_logged_escaped(caplog: pytest.LogCaptureFixture) -> None:
    # Logged at DEBUG as the server sent it, masked only: a newline in it made a record
    # of the server's own making, an escape sequence drove the terminal.
    caplog.set_level(logging.DEBUG, logger="agcore_tools.mcp.progress")
    updates: list[McpProgress] = []
    last = asyncio.Event()

    def on_progress(update: McpProgress) -> None:  # called after the line is logged
        updates.append(update)
        last.set()

    async with McpClient("fx", fixture_stdio(), on_progress=on_progress) as client:
        assert await client.call_tool("progress", {"steps": 1, "label": FORGED}) == "done"
        await asyncio.wait_for(last.wait(), 10)  # notifications may trail the answer
    [line] = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.mcp.progress"]
    assert line == f"[fx] progress: 1.0/1.0 {ESCAPED} 1"
    assert updates[0].message == f"{FORGED} 1"  # the callback gets it as sent


async def test_a_raising_callback_is_logged_not_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(update: McpProgress) -> None:
        raise RuntimeError("callback bug")

    async with McpClient("fx", fixture_stdio(), on_progress=broken) as client:
        assert await client.call_tool("progress", {"steps": 1}) == "done"
        await wait_until(
            lambda: any("callback bug" in (r.exc_text or "") for r in caplog.records),
            "the callback's error to be logged",
        )


# -- tool list: pagination, cache, invalidation, TTL ----------------------------------------


def _paged(*args: str) -> StdioTransport:
    return StdioTransport(sys.executable, [str(PAGED), *args])


async def test_list_tools_follows_pagination_and_caches() -> None:
    async with McpClient("paged", _paged(), protocol="legacy") as client:
        names = [d["function"]["name"] for d in await client.list_tools()]
        assert len(names) == 25 and names[:2] == ["count_lists", "protocol_error"]
        await client.list_tools()
        await client.list_tools()
        assert await client.call_tool("count_lists") == "1"  # connect()'s fetch only
        await client.refresh_tools()
        assert await client.call_tool("count_lists") == "2"


async def test_tools_ttl_expires_the_cache() -> None:
    # Two clients, not one with 0.3 s for both halves: a loaded machine outlived 0.3 s
    # between the listing at connect and the next read, which then fetched again.
    async with McpClient("paged", _paged(), protocol="legacy", tools_ttl=60) as client:
        await client.list_tools()  # within the ttl: from the cache
        assert await client.call_tool("count_lists") == "1"
    async with McpClient("paged", _paged(), protocol="legacy", tools_ttl=0.3) as client:
        await asyncio.sleep(0.4)  # past the ttl (a slow machine only takes longer)
        await client.list_tools()
        assert await client.call_tool("count_lists") == "2"


async def test_server_ttl_ms_is_honoured() -> None:
    # Two servers, as for tools_ttl: a loaded machine outlived a short ttl between the
    # listing at connect and the next read (300 ms did, under load 5; 2 s only narrowed
    # that window, at 2 s a run).
    async with McpClient("paged", _paged("--ttl-ms", "60000")) as client:
        assert client.protocol_version == "2026-07-28"
        await client.list_tools()  # within the ttl: from the cache
        assert await client.call_tool("count_lists") == "1"
    async with McpClient("paged", _paged("--ttl-ms", "300")) as client:
        await asyncio.sleep(0.4)  # past the ttl (a slow machine only takes longer)
        await client.list_tools()
        assert await client.call_tool("count_lists") == "2"


async def test_list_changed_invalidates_the_cache(make_client: Any) -> None:
    for protocol in ("auto", "legacy"):
        async with make_client(protocol=protocol) as client:
            before = {d["function"]["name"] for d in await client.list_tools()}
            assert "fresh" not in before
            await client.call_tool("add_tool", {"name": "fresh"})
            for _ in range(50):
                if "fresh" in {d["function"]["name"] for d in await client.list_tools()}:
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail(f"list_changed did not invalidate the cache ({protocol})")
            assert await client.call_tool("fresh") == "I am fresh"


async def test_tools_can_be_listed_by_many_tasks_at_once() -> None:
    async with McpClient("paged", _paged(), protocol="legacy") as client:
        await client.refresh_tools()  # count 2
        client._invalidate_tools(None)
        lists = await asyncio.gather(*(client.list_tools() for _ in range(20)))
        assert all(len(listed) == 25 for listed in lists)
        assert await client.call_tool("count_lists") == "3"  # one fetch served all 20


# -- adapters in a registry (seed acceptance 17, without the model) -------------------------


async def test_adapters_run_through_a_registry(make_client: Any) -> None:
    registry = ToolRegistry()
    async with make_client() as client:
        registry.register_all(client.into_tools(prefix=True))
        assert "fixture__weather" in registry
        invocation = await registry.invoke("fixture__weather", {"city": "Oslo"})
        assert invocation.result() == {"city": "Oslo", "temperature": 21.5}
        failed = await registry.invoke("fixture__fail", {"message": "nope"})
        assert isinstance(failed.error, ToolExecutionError) and "nope" in str(failed.error)
    gone = await registry.invoke("fixture__echo", {"text": "x"})
    assert isinstance(gone.error, McpNotInitializedError)


_FIRST_CONNECT = """
import asyncio, sys, time
from agcore_tools import McpClient, StdioTransport

async def ticker(gaps):
    last = time.perf_counter()
    while True:
        await asyncio.sleep(0.005)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now

async def main():
    gaps = []
    tick = asyncio.create_task(ticker(gaps))
    await asyncio.sleep(0.05)
    gaps.clear()
    print("connect starts", file=sys.stderr, flush=True)
    async with McpClient("paged", StdioTransport(sys.executable, [sys.argv[1]])) as client:
        await client.list_tools()
    tick.cancel()
    print(f"largest gap {max(gaps):.3f}")

asyncio.run(main())
"""


def test_the_first_connect_imports_the_mcp_sdk_off_the_event_loop() -> None:
    # A fresh process: the MCP SDK is not imported yet (`-X importtime` says how long
    # the connect's imports took, so the bound below means something).
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _FIRST_CONNECT, str(PAGED)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    during = done.stderr.split("connect starts", 1)[1]
    # `import time: self | cumulative | name`; top-level imports have no indent.
    tops = re.findall(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)", during)
    imported = sum(int(us) for us, _ in tops) / 1e6
    gap = float(done.stdout.split("largest gap ")[1])
    if imported < 0.2:  # a machine this fast would not notice a stall either
        pytest.skip(f"the connect's imports took only {imported:.2f} s")
    assert gap < min(0.25, imported / 2), (
        f"the loop stalled {gap:.2f} s; imports took {imported:.2f} s"
    )


# A server with no imports to speak of (it starts in a few tens of milliseconds), for a
# client whose SDK import is made slower than its timeout, as on a loaded machine.
_QUICK_SERVER = """
import json, sys
for raw in sys.stdin:
    message = json.loads(raw)
    if "id" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "quick", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "hi"}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""

_SLOW_SDK_IMPORT = """
import asyncio, importlib.abc, sys, time
from agcore_tools import McpClient, StdioTransport

TIMEOUT, IMPORT_TAKES, SERVER = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]


class SlowImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "mcp_types":
            time.sleep(IMPORT_TAKES)  # the import, slowed as a loaded machine slows it
        return None


sys.meta_path.insert(0, SlowImport())


async def main():
    transport = StdioTransport(sys.executable, ["-c", SERVER], stop_grace=1)
    async with McpClient("quick", transport, protocol="legacy", timeout=TIMEOUT) as client:
        print(await client.call_tool("hello"))

asyncio.run(main())
"""


def test_the_first_connect_does_not_count_the_sdk_import_against_the_timeout() -> None:
    # Before: McpTimeoutError "the MCP SDK did not finish importing within 3 s", on the
    # client side, before the server was spawned.
    done = subprocess.run(
        [sys.executable, "-c", _SLOW_SDK_IMPORT, "3", "3.5", _QUICK_SERVER],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "hi\n"


_REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("_REQUEST")


async def test_a_connection_keeps_nothing_of_the_context_it_was_made_in(
    make_client: Any,
) -> None:
    # The connection's owner task, and the SDK tasks it starts, which read the server's
    # messages and answer its own requests, ran in a copy of the context that
    # connected, for the client's life: what the app's context variables held then (a
    # request's objects, the span current then) stayed alive, and every request the
    # server sent on its own was handled as part of that long-gone request.
    seen: list[str] = []

    def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        seen.append(_REQUEST.get("none"))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="ok"), model="x"
        )

    client = make_client(protocol="legacy", sampling_handler=sample)

    async def request() -> None:
        _REQUEST.set("the request that connected")
        await client.connect()

    try:
        await asyncio.create_task(request())
        # The server asks once the call has returned, as its own background work does.
        assert await client.call_tool("sample_later", {"prompt": "hi"}) == "asking"
        assert await _sampled_later(client) == "answered: ok"
    finally:
        await client.close()
    assert seen == ["none"]
