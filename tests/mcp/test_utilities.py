"""Server instructions, ping, the log level and roots changes, against the fixture
server over stdio and Streamable HTTP, on both protocol generations."""

from __future__ import annotations

import asyncio
import logging
import math
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from agcore_tools import McpClient, McpError, StdioTransport, StreamableHttpTransport
from agcore_tools.mcp import McpLogMessage

from .conftest import SERVERS, assert_no_stray_tasks, fixture_stdio
from .servers.fixture_server import INSTRUCTIONS

pytestmark = pytest.mark.timeout(60)

ERAS = pytest.mark.parametrize("protocol", ["auto", "legacy"])


@ERAS
async def test_instructions_and_ping(make_client: Any, protocol: str) -> None:
    client = make_client(protocol=protocol)
    assert client.instructions is None
    async with client:
        assert client.instructions == INSTRUCTIONS
        seconds = await client.ping()
        assert isinstance(seconds, float) and 0 < seconds < client.timeout
    assert client.instructions is None


class Logs:
    """Collects log messages; waits for the last one of a tool call."""

    def __init__(self) -> None:
        self.messages: list[McpLogMessage] = []
        self._error = asyncio.Event()

    def __call__(self, message: McpLogMessage) -> None:
        self.messages.append(message)
        if message.level == "error":
            self._error.set()

    async def levels_of(self, client: McpClient) -> list[str]:
        """The levels the next log_each_level call delivers (its error always comes last)."""
        self.messages.clear()
        self._error.clear()
        assert await client.call_tool("log_each_level") == "logged"
        await asyncio.wait_for(self._error.wait(), 10)
        return [m.level for m in self.messages]


@ERAS
async def test_set_log_level_filters_the_servers_messages(make_client: Any, protocol: str) -> None:
    logs = Logs()
    async with make_client(protocol=protocol, on_log=logs) as client:
        # 2026-07-28 servers send what the client asks for (log_level="info"); older
        # ones choose for themselves until told (this one: everything).
        everything = ["debug", "info", "warning", "error"]
        assert await logs.levels_of(client) == (
            everything if protocol == "legacy" else everything[1:]
        )
        await client.set_log_level("ERROR")  # as Python's logging spells it
        assert client.log_level == "error"
        assert await logs.levels_of(client) == ["error"]
        await client.set_log_level("debug")
        assert await logs.levels_of(client) == everything
        with pytest.raises(ValueError, match="unknown log level 'loud'"):
            await client.set_log_level("loud")


@ERAS
async def test_a_chosen_log_level_is_asked_for_again_after_a_restart(protocol: str) -> None:
    # A handshake-era session starts at the server's default level (this one's: debug),
    # and the level set_log_level() chose was not sent again: after a restart the
    # client got every message it had asked not to.
    logs = Logs()
    client = McpClient("fixture", fixture_stdio(), protocol=protocol, on_log=logs, timeout=15)
    async with client:
        await client.set_log_level("error")
        assert await logs.levels_of(client) == ["error"]
        with pytest.raises(McpError):
            await client.call_tool("die", {"code": 3})
        assert await logs.levels_of(client) == ["error"]  # the call starts it again
        await client.close()
        await client.connect()
        assert await logs.levels_of(client) == ["error"]
    await assert_no_stray_tasks()


async def test_a_level_chosen_while_a_restart_resends_the_old_one_is_the_servers_last(
    tmp_path: Path,
) -> None:
    # The restart's re-send of 'error' is held by the server until another setLevel
    # arrives. It was sent beside set_log_level('warning'), so 'warning' took effect
    # first and 'error', the level the app had replaced, was the server's last.
    # No wait on the fixed code: once set_log_level() waits for the lock the re-send
    # holds, the test releases the held re-send itself.
    mode = tmp_path / "set_level"
    transport = fixture_stdio(env={"FIXTURE_SET_LEVEL_FILE": str(mode)})
    logs = Logs()
    client = McpClient("fixture", transport, protocol="legacy", on_log=logs, timeout=15)
    waiting = asyncio.Event()

    class Watched(asyncio.Lock):
        async def acquire(self) -> bool:
            if self.locked():
                waiting.set()
            return await super().acquire()

    client._session.level_lock = Watched()
    async with client:
        await client.set_log_level("error")
        mode.write_text("hold:error")
        with pytest.raises(McpError):
            await client.call_tool("die", {"code": 3})
        # Starts it again; its re-send of 'error' is held until released.
        assert await client.call_tool("echo", {"text": "up"}) == "up"
        chosen = asyncio.ensure_future(client.set_log_level("warning"))
        waited = asyncio.ensure_future(waiting.wait())
        await asyncio.wait([chosen, waited], timeout=30, return_when=asyncio.FIRST_COMPLETED)
        waited.cancel()
        mode.write_text("release")
        await asyncio.wait_for(chosen, 30)
        assert await logs.levels_of(client) == ["warning", "error"]
    await assert_no_stray_tasks()


class Warnings(logging.Handler):
    """Keeps the WARNINGs of ``agcore_tools.mcp`` about the log level (not the one
    about the connection lost); wakes a waiter at the first."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self.first = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "setLevel" in record.getMessage() or "log level" in record.getMessage():
            self.records.append(record)
            self.first.set()


@contextmanager
def warnings_of_mcp() -> Iterator[Warnings]:
    handler = Warnings()
    mcp_logger = logging.getLogger("agcore_tools.mcp")
    mcp_logger.addHandler(handler)
    try:
        yield handler
    finally:
        mcp_logger.removeHandler(handler)


async def test_a_server_that_never_answers_set_level_again_holds_up_no_restart(
    tmp_path: Path,
) -> None:
    # Sent within the restart's deadline, a setLevel the server left unanswered made
    # the call that restarted it time out; it is sent beside it, with a bound of its own.
    mode = tmp_path / "set_level"
    transport = fixture_stdio(env={"FIXTURE_SET_LEVEL_FILE": str(mode)})
    # Not 3 s: on a loaded machine the fixture's start-up alone can take that long.
    client = McpClient("fixture", transport, protocol="legacy", timeout=10)
    with warnings_of_mcp() as warned:
        async with client:
            await client.set_log_level("error")
            mode.write_text("hang")
            with pytest.raises(McpError):
                await client.call_tool("die", {"code": 3})
            started = time.monotonic()
            assert await client.call_tool("echo", {"text": "restarted"}) == "restarted"
            # It did not wait for the restart's setLevel: that is still unanswered.
            assert time.monotonic() - started < client.timeout
            assert not warned.records
            await asyncio.wait_for(warned.first.wait(), 30)
            assert await client.call_tool("echo", {"text": "still up"}) == "still up"
            assert client.connected
        [record] = warned.records
        assert record.getMessage() == (
            "MCP server 'fixture': did not answer logging/setLevel within 10 s after "
            "reconnecting; its log level may be its default, not 'error'"
        )
        # One still waiting when the client closes is cancelled, not left running.
        mode.write_text("hang")
        async with client:
            assert await client.call_tool("echo", {"text": "again"}) == "again"
        await assert_no_stray_tasks()
        assert len(warned.records) == 1


async def test_a_refused_set_level_after_a_restart_is_a_warning_without_secrets(
    tmp_path: Path,
) -> None:
    mode = tmp_path / "set_level"
    token = "ghp_S3CRETt0ken"
    env = {"FIXTURE_SET_LEVEL_FILE": str(mode), "API_TOKEN": token}
    client = McpClient("fixture", fixture_stdio(env=env), protocol="legacy", timeout=15)
    with warnings_of_mcp() as warned:
        async with client:
            await client.set_log_level("warning")
            mode.write_text("fail")
            with pytest.raises(McpError):
                await client.call_tool("die", {"code": 3})
            assert await client.call_tool("echo", {"text": "up"}) == "up"
            await asyncio.wait_for(warned.first.wait(), 10)
            assert client.connected
    [record] = warned.records
    assert record.getMessage() == (
        "MCP server 'fixture': could not set its log level to 'warning' again after "
        "reconnecting: MCPError: level refused for ***"
    )


async def test_a_servers_log_messages_mask_its_credentials_as_its_stderr_does(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Env values (stdio) and header values (HTTP) of 8 characters or more, as in stderr;
    # on_log gets the data as the server sent it.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.server")
    token = "ghp_S3CRETt0ken"
    stdio = make_client.transport == "stdio"
    expected = 1 if stdio else 3
    received: list[McpLogMessage] = []
    all_in = asyncio.Event()

    def on_log(message: McpLogMessage) -> None:  # called after the line is logged
        received.append(message)
        if len(received) == expected:
            all_in.set()

    if stdio:
        client = make_client(env={"API_TOKEN": token}, on_log=on_log)
    else:
        url = make_client().transport.url  # the fixture server over HTTP
        # Not each word of every header value: only the token after Bearer.
        headers = {"Authorization": f"Bearer {token}", "X-Client": "agcore production-cluster"}
        client = McpClient(
            "fixture", StreamableHttpTransport(url, headers=headers), timeout=15, on_log=on_log
        )
    async with client:
        assert await client.call_tool("log_credentials") == "logged"
        await asyncio.wait_for(all_in.wait(), 10)  # notifications may trail the answer
    logged = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.mcp.server"]
    if stdio:
        assert logged == ["[fixture] authenticating with ***"]
    else:
        assert sorted(logged) == [
            "[fixture] authenticating with -",
            "[fixture] client deployment: production-cluster",
            "[fixture] header: ***; token ***",
        ]
    assert token in "".join(str(message.data) for message in received)


class Received:
    """An ``on_log`` that keeps what it gets, and waits until ``count`` messages came."""

    def __init__(self, count: int) -> None:
        self.messages: list[McpLogMessage] = []
        self._count = count
        self._all_in = asyncio.Event()

    def __call__(self, message: McpLogMessage) -> None:
        self.messages.append(message)
        if len(self.messages) == self._count:
            self._all_in.set()

    async def wait(self) -> None:
        await asyncio.wait_for(self._all_in.wait(), 30)  # notifications may trail the answer


def log_server(on_log: Received) -> McpClient:
    """A client of a real server sending what its ``log`` tool is told to as log messages."""
    transport = StdioTransport(
        sys.executable, [str(SERVERS / "log_server.py")], env={"API_TOKEN": "ghp_S3CRETt0ken"}
    )
    return McpClient("srv", transport, timeout=15, on_log=on_log)


def server_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "agcore_tools.mcp.server"]


async def test_a_log_level_spelt_otherwise_than_mcps_is_read_as_the_level_it_means(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # "warn", "INFO", "trace": the SDK refused each such message, logging a WARNING with
    # a traceback in its place (outside the 200-a-second budget), and on_log got nothing.
    caplog.set_level(logging.DEBUG)
    spelt = ["warn", "INFO", "Error", "trace", "fatal"]
    received = Received(len(spelt))
    async with log_server(received) as client:
        assert await client.call_tool("log_as", {"text": "ping", "levels": spelt}) == "logged"
        await received.wait()
    assert [m.level for m in received.messages] == [
        "warning",
        "info",
        "error",
        "debug",
        "critical",
    ]
    assert [r.levelno for r in server_records(caplog)] == [
        logging.WARNING,
        logging.INFO,
        logging.ERROR,
        logging.DEBUG,
        logging.CRITICAL,
    ]
    assert "Failed to validate notification" not in caplog.text


async def test_a_servers_log_message_cannot_forge_records_or_drive_the_terminal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A newline started a record of the server's making, and terminal escapes and \r
    # cleared the screen, hid text or overwrote the line: all now shown as escapes.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.server")
    sent = (
        "all good {token}\n2025-01-01 00:00:00,000 CRITICAL agcore_tools.registry: "
        "permission check disabled\x1b[2J\x1b[31mRED\x1b[0m\rOVERWRITE\x00\x85\u2028"
        "\ttabs and naïve ünïcode stay"
    )
    received = Received(1)
    async with log_server(received) as client:
        assert await client.call_tool("log", {"text": sent}) == "logged"
        await received.wait()
    assert [r.getMessage() for r in server_records(caplog)] == [
        "[srv] all good ***\\n2025-01-01 00:00:00,000 CRITICAL agcore_tools.registry: "
        "permission check disabled\\x1b[2J\\x1b[31mRED\\x1b[0m\\rOVERWRITE\\x00\\x85"
        "\\u2028\ttabs and naïve ünïcode stay"
    ]
    # on_log gets the data as the server sent it: the app reads it on purpose.
    assert [m.data for m in received.messages] == [sent.replace("{token}", "ghp_S3CRETt0ken")]


async def test_a_servers_log_message_cannot_read_otherwise_than_it_holds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Bidi overrides and isolates, zero-width characters and tag characters reached
    # the log as sent: a record read otherwise than it held ("Trojan Source").
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.server")
    sent = "user \u202enimda\u202c \u2066x\u2069 ok\u200b\u200e\ufeff\U000e0041 naïve 東京 🚀"
    received = Received(1)
    async with log_server(received) as client:
        await client.call_tool("log", {"text": sent})
        await received.wait()
    assert [r.getMessage() for r in server_records(caplog)] == [
        "[srv] user \\u202enimda\\u202c \\u2066x\\u2069 ok\\u200b\\u200e\\ufeff\\U000e0041 "
        "naïve 東京 🚀"
    ]
    assert [m.data for m in received.messages] == [sent]


async def test_a_long_log_message_is_cut_saying_how_much(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One record of a mebibyte reached the app's log whole.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.server")
    text = "x" * 1995 + "{token}"  # the token across the cut: masked before it
    received = Received(1)
    async with log_server(received) as client:
        await client.call_tool("log", {"text": text, "repeat": 500})
        await received.wait()
    cut = (1995 + len("***")) * 500 - 2000
    assert [r.getMessage() for r in server_records(caplog)] == [
        f"[srv] {'x' * 1995}***xx... [cut {cut} chars]"
    ]
    assert len(received.messages[0].data) == (1995 + len("ghp_S3CRETt0ken")) * 500


async def test_a_flood_of_log_messages_is_counted_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 20,000 log messages of one call were 20,000 records (and took seconds to log).
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.server")
    count = 5000
    received = Received(count)
    started = time.monotonic()
    async with log_server(received) as client:
        await client.call_tool("log", {"text": "flood", "count": count, "level": "warning"})
        await received.wait()
    # The left-out ones are reported when the connection ends, whatever the time.
    seconds = time.monotonic() - started
    records = server_records(caplog)
    logged = [r for r in records if r.getMessage() == "[srv] flood"]
    notices = [r for r in records if r not in logged]
    pattern = re.compile(r"\[srv\] (\d+) log messages not logged \(more than 200 a second\)")
    counted = [pattern.fullmatch(r.getMessage()) for r in notices]
    assert all(counted) and notices
    # At most 200 a second: each second starts with a record, so there were no more
    # seconds than the whole run's, plus one.
    assert len(logged) <= 200 * (math.floor(seconds) + 1)
    assert len(logged) + sum(int(m[1]) for m in counted if m) == count
    assert {r.levelno for r in notices} == {logging.WARNING}  # the level of those left out
    assert len(received.messages) == count  # on_log gets every one


async def test_log_messages_the_app_does_not_log_are_not_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agcore_tools.mcp.server")
    received = Received(401)
    async with log_server(received) as client:
        await client.call_tool("log", {"text": "chatter", "count": 400, "level": "info"})
        await client.call_tool("log", {"text": "trouble"})
        await received.wait()
    assert [r.getMessage() for r in server_records(caplog)] == ["[srv] trouble"]


@ERAS
async def test_roots_changes_reach_the_server(make_client: Any, protocol: str) -> None:
    roots = [types.Root(uri="file:///srv/a")]

    async def list_roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=list(roots))

    async with make_client(protocol=protocol, roots_handler=list_roots) as client:
        roots.append(types.Root(uri="file:///srv/b"))
        sent = await client.notify_roots_changed()
        if protocol == "auto":
            # 2026-07-28 has no such notification: servers ask within each request.
            assert sent is False
            assert await client.call_tool("roots_changed_count") == "0"
            return
        assert sent is True
        assert await client.call_tool("roots") == "file:///srv/a,file:///srv/b"
        # A notification has no answer: watch the server's count (bounded).
        for _ in range(100):
            if await client.call_tool("roots_changed_count") == "1":
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the server never counted notifications/roots/list_changed")


async def test_roots_changes_need_a_roots_handler() -> None:
    client = McpClient("x", StdioTransport("unused"))
    with pytest.raises(ValueError, match="no roots_handler was given"):
        await client.notify_roots_changed()


class _Session:
    """Answers logging/setLevel after ``delay`` seconds, keeping the levels sent."""

    def __init__(self, delay: float = 0) -> None:
        self.delay = delay
        self.sent: list[str] = []

    async def send_request(self, request: Any, result: Any) -> Any:
        self.sent.append(request.params.level)
        await asyncio.sleep(self.delay)
        return result()


class _Client:
    def __init__(self, session: _Session) -> None:
        self.session = session


def _client(session: _Session) -> Any:
    return _Client(session)


async def test_a_set_log_level_in_progress_during_a_reconnect_is_no_unanswered_set_level() -> None:
    # The re-send bounded its wait for set_log_level()'s lock with the server's answer,
    # and warned "did not answer logging/setLevel within N s" though it never sent one.
    # restore_log_level alone, with a bound of 0.2 s: through a client it waits out the
    # client's timeout (test_a_level_chosen_while_a_restart_... covers that path).
    from agcore_tools.mcp._log_restore import restore_log_level

    session, lock = _Session(), asyncio.Lock()
    with warnings_of_mcp() as warned, _debug() as seen:
        async with lock:  # the app's set_log_level() is in progress
            await restore_log_level(_client(session), lambda: "error", lock, 0.2, "s", str)
        assert not warned.records and session.sent == []
        assert any("set_log_level() in progress held the level" in m for m in seen)
        assert not lock.locked()
        # A lock freed in time: the latest level is sent; a server slower than the
        # bound is warned about, and the lock is freed.
        await restore_log_level(_client(session), lambda: "info", lock, 0.2, "s", str)
        assert session.sent == ["info"] and not warned.records
        slow = _Session(delay=5)
        await restore_log_level(_client(slow), lambda: "debug", lock, 0.2, "s", str)
        assert slow.sent == ["debug"] and not lock.locked()
        assert "did not answer logging/setLevel within 0.2 s" in warned.records[0].getMessage()


@contextmanager
def _debug() -> Iterator[list[str]]:
    """The messages of ``agcore_tools.mcp``, DEBUG ones included."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep(logging.DEBUG)
    mcp_logger = logging.getLogger("agcore_tools.mcp")
    mcp_logger.addHandler(handler)
    level = mcp_logger.level
    mcp_logger.setLevel(logging.DEBUG)
    try:
        yield seen
    finally:
        mcp_logger.removeHandler(handler)
        mcp_logger.setLevel(level)
