"""Every wait is bounded by its caller's timeout (issue 25, item 1): ``close()`` of a
client whose server froze (SIGSTOP) returns within :data:`CLOSE_BOUND`, on both
protocol eras, and a session renewal logs one clear line.

Calls to a frozen server, and the restarts they trigger, are cases 8 and 9 of
``test_fault_matrix.py``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from agcore_tools import McpClient, McpError, StreamableHttpTransport
from agcore_tools.mcp._http import CLOSE_TIMEOUT

from .conftest import FaultServer, QuietHandler, assert_no_stray_tasks, handwritten

pytestmark = pytest.mark.timeout(90)

ERAS = ["legacy", "auto"]
MARGIN = 0.5
"""The most a wait may overrun its timeout (issue 25's target)."""
CLOSE_BOUND = CLOSE_TIMEOUT + MARGIN
"""close() of a client whose server froze: the closing DELETE's bound, and the margin."""

T = TypeVar("T")


async def timed(awaitable: Awaitable[T]) -> tuple[float, T]:
    started = time.monotonic()
    value = await awaitable
    return time.monotonic() - started, value


def client_for(server: FaultServer, protocol: str, **options: Any) -> McpClient:
    return McpClient(
        "frozen",
        StreamableHttpTransport(server.url),
        protocol=protocol,  # type: ignore[arg-type]
        timeout=20,
        **options,
    )


def assert_one_clear_line(caplog: pytest.LogCaptureFixture, ours: str) -> None:
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r for r in loud if r.name.startswith("mcp")] == [], "the SDK logged loudly"
    assert any(ours in r.getMessage() for r in loud if r.name == "agcore_tools.mcp")


async def test_a_session_renewal_logs_one_clear_line(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with client_for(fault_server, "legacy") as client:
        fault_server.restart()
        assert await client.call_tool("echo", {"text": "renewed"}) == "renewed"
    assert_one_clear_line(caplog, "connection lost: the server no longer knows the session")
    # The SDK's WARNING about its closing DELETE is kept, at DEBUG.
    routed = [r.getMessage() for r in caplog.records if "the MCP SDK reported" in r.getMessage()]
    assert any("Session termination failed" in m for m in routed)


@pytest.mark.parametrize("protocol", ERAS)
async def test_close_of_a_client_whose_server_froze_is_bounded(
    fault_server: FaultServer, protocol: str
) -> None:
    client = client_for(fault_server, protocol)
    await client.connect()
    assert await client.call_tool("echo", {"text": "x"}) == "x"
    fault_server.freeze()
    took, _ = await timed(client.close())
    assert took < CLOSE_BOUND, f"close() took {took:.2f} s"
    assert not client.connected
    await assert_no_stray_tasks()


async def test_close_is_bounded_when_the_closing_delete_holds_its_body(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    # A server (or a proxy) that sends the DELETE's status and headers, then holds the
    # body: the SDK reads it whole, which only the owner task's 5 s bound ended, with
    # an ERROR that the server "did not shut down" (a trickle, a byte now and then, is
    # not ended by httpx2's read timeout either).
    caplog.set_level(logging.DEBUG)
    client = client_for(fault_server, "legacy")
    await client.connect()
    await fault_server.control("fail-delete", status=200, body="d" * 1024, stall_after=1)
    took, _ = await timed(client.close())
    assert took < CLOSE_BOUND, f"close() took {took:.2f} s"
    assert not client.connected
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == []
    routed = [r.getMessage() for r in caplog.records if "the MCP SDK reported" in r.getMessage()]
    assert any("no answer to the session's closing DELETE within 1 s" in m for m in routed)
    await assert_no_stray_tasks()


@pytest.mark.parametrize(
    ("content_type", "body"),
    [("text/html", b"<html><body>Sign in</body></html>"), ("application/json", b"{not json")],
)
async def test_an_endpoint_answering_no_mcp_message_fails_with_one_clear_line(
    caplog: pytest.LogCaptureFixture, content_type: str, body: bytes
) -> None:
    # A login page or a proxy's error page: the SDK logged an ERROR with a traceback
    # beside the client's own error, on stderr when the app configures no logging.
    class Page(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with handwritten(Page) as url:
        caplog.set_level(logging.DEBUG)
        client = McpClient("page", StreamableHttpTransport(url), timeout=10)
        with pytest.raises(McpError, match="MCP server 'page': cannot connect"):
            await client.connect()
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in loud if r.name.startswith("mcp")] == []
    routed = [r.getMessage() for r in caplog.records if "the MCP SDK reported" in r.getMessage()]
    assert routed, "the SDK's record is kept, at DEBUG"


async def test_a_token_the_server_echoes_in_an_answer_the_sdk_cannot_parse_is_masked_in_its_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The SDK logs "Error parsing JSON response" with the body it failed on, which the
    # client routes to DEBUG; it held the token whole, in the message and traceback.
    token = "ghp_S3CRETt0ken00"

    class Echo(QuietHandler):
        def do_POST(self) -> None:
            sent = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            body = f'{{"id": {sent.get("id", 0)}, "t": "{token}"'.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with handwritten(Echo) as url:
        caplog.set_level(logging.DEBUG)
        headers = {"Authorization": f"Bearer {token}"}
        client = McpClient("echo", StreamableHttpTransport(url, headers), timeout=10)
        with pytest.raises(McpError):
            await client.connect()
    routed = [r for r in caplog.records if "the MCP SDK reported" in r.getMessage()]
    assert routed, "the SDK's record is kept, at DEBUG"
    formatter = logging.Formatter()
    assert [r.getMessage() for r in caplog.records if token in formatter.format(r)] == []
