"""Faults of real servers over Streamable HTTP (issue 9, part 6) beyond the fault matrix
of ``test_fault_matrix.py`` (which has the restart, expiry, large results, HTTP errors,
load and frozen-server cases on both eras): calls cut by a restart, auth, limits.

The server is ``servers/fault_server.py``: the fixture server under uvicorn, in its
own process, behind a layer that injects what deployments do to clients on request.
``legacy`` is the 2025-11-25 handshake (sessions, SSE responses); ``auto`` negotiates
2026-07-28 (no sessions, a ``subscriptions/listen`` stream).
"""

from __future__ import annotations

import asyncio
import json
import time
import traceback
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from agcore_tools import (
    CycleConfig,
    LlmCycle,
    McpClient,
    McpError,
    McpTimeoutError,
    StreamableHttpTransport,
    ToolExecutionError,
    ToolRegistry,
)
from agcore_tools.testing import Cassette, ScriptedChatServer, no_network

from .conftest import FaultServer

pytestmark = pytest.mark.timeout(90)

ERAS = ["legacy", "auto"]


def client_for(server: FaultServer, protocol: str, **options: Any) -> McpClient:
    options.setdefault("timeout", 20)
    transport = options.pop("transport", None) or StreamableHttpTransport(server.url)
    return McpClient("faulty", transport, protocol=protocol, **options)  # type: ignore[arg-type]


async def wait_for(condition: Any, what: str, seconds: float = 15) -> None:
    """Poll an observable condition (a server's state, a file) until it holds."""
    deadline = time.monotonic() + seconds
    while not await condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


# -- a server restart mid-session, an expired session --------------------------------------


async def test_tool_lists_and_the_rest_of_the_protocol_recover_too(
    fault_server: FaultServer,
) -> None:
    async with client_for(fault_server, "legacy") as client:
        fault_server.restart()
        assert "echo" in [t["function"]["name"] for t in await client.refresh_tools()]
        fault_server.restart()
        assert [r.uri for r in await client.list_resources()]
        fault_server.restart()
        assert await client.ping() >= 0
        assert len((await fault_server.control("state"))["sessions"]) == 1
        assert client.connected


async def test_without_recovery_a_lost_session_says_so_and_connected_turns_false(
    fault_server: FaultServer,
) -> None:
    client = client_for(fault_server, "legacy", recovery=None)
    async with client:
        await client.call_tool("echo", {"text": "one"})
        fault_server.restart()
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "two"})
        assert info.value.status_code == 404
        assert "no longer knows the session (HTTP 404 Not Found)" in str(info.value)
        assert not client.connected
        await client.connect()  # connect() starts a new session
        assert await client.call_tool("echo", {"text": "three"}) == "three"


@pytest.mark.parametrize(("tool", "retried"), [("hold_read", True), ("hold", False)])
async def test_a_restart_during_a_call_retries_it_only_if_it_is_safe_to_repeat(
    fault_server: FaultServer, tmp_path: Path, tool: str, retried: bool
) -> None:
    marker, release = tmp_path / "started", tmp_path / "release"
    client = client_for(fault_server, "legacy")
    async with client:
        # Held until the test releases it, not for 1 s: a test descheduled that long
        # restarted a server whose call had already ended.
        held = {"seconds": 30, "marker": str(marker), "release": str(release)}
        call = asyncio.create_task(client.call_tool(tool, held))
        await wait_for(lambda: asyncio.to_thread(marker.exists), "the call to start")
        marker.unlink()
        fault_server.restart()
        if retried:
            await wait_for(
                lambda: asyncio.to_thread(marker.exists), "the call to run again on the new server"
            )
            release.touch()
            assert await call == "held 30.0"
            assert marker.read_text() == "finished"
        else:
            with pytest.raises(McpError, match="connection lost") as info:
                await call
            assert not info.value.is_recoverable()  # as any lost connection
            assert not marker.exists()
            assert await client.call_tool("echo", {"text": "next"}) == "next"
        assert client.connected


async def test_a_call_cut_off_by_a_restart_fails_alone_on_2026_07_28(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    client = client_for(fault_server, "auto")
    async with client:
        call = asyncio.create_task(client.call_tool("hold", {"seconds": 30, "marker": str(marker)}))
        await wait_for(lambda: asyncio.to_thread(marker.exists), "the call to start")
        started = time.monotonic()
        fault_server.restart()
        with pytest.raises(McpError) as info:
            await call
        assert time.monotonic() - started < 10
        # The SDK's reason is kept, and the connection is not declared lost: the
        # server answered the ping that followed.
        assert "connection lost" not in str(info.value)
        assert "RemoteProtocolError" in str(info.value) or "stream" in str(info.value)
        assert info.value.is_recoverable()
        assert client.connected
        assert await client.call_tool("echo", {"text": "still here"}) == "still here"


# -- large results ----------------------------------------------------------------------


async def test_an_event_over_the_size_limit_fails_that_call_alone(
    fault_server: FaultServer,
) -> None:
    transport = StreamableHttpTransport(fault_server.url, max_message_size=1024 * 1024)
    async with client_for(fault_server, "legacy", transport=transport) as client:
        with pytest.raises(McpError) as info:
            await client.call_tool("blob", {"mebibytes": 1.5})
        message = str(info.value)
        assert "SSE stream failed" in message and "1048576 byte limit" in message
        assert "StreamableHttpTransport(max_message_size=...) raises the limit" in message
        assert info.value.is_recoverable()
        assert client.connected
        assert await client.call_tool("echo", {"text": "fine"}) == "fine"


# -- the listen stream ------------------------------------------------------------------


# -- HTTP errors ------------------------------------------------------------------------


async def test_a_401_names_the_status_and_challenge_then_a_valid_token_works(
    fault_server: FaultServer,
) -> None:
    await fault_server.control("token", token="right-token")
    wrong = StreamableHttpTransport(fault_server.url, {"Authorization": "Bearer wrong-token"})
    with pytest.raises(McpError) as info:
        await client_for(fault_server, "auto", transport=wrong).connect()
    assert info.value.status_code == 401
    assert 'HTTP 401 Unauthorized: "invalid token" (WWW-Authenticate: Bearer realm="fault"' in str(
        info.value
    )
    assert "wrong-token" not in str(info.value)

    right = StreamableHttpTransport(fault_server.url, {"Authorization": "Bearer right-token"})
    async with client_for(fault_server, "legacy", transport=right) as client:
        assert await client.call_tool("echo", {"text": "in"}) == "in"
        await fault_server.control("token", token="rotated")  # the server stops accepting it
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "out"})
        assert info.value.status_code == 401
        assert not info.value.is_recoverable()
        assert info.value.may_have_run is False  # refused before it ran
        assert "right-token" not in str(info.value)
        await fault_server.control("token", token="right-token")  # the token is valid again
        assert await client.call_tool("echo", {"text": "back"}) == "back"


async def test_a_405_to_the_handshake_suggests_an_old_http_sse_endpoint(
    fault_server: FaultServer,
) -> None:
    # A ".../sse" URL from a Cursor or Claude config: the old transport's endpoint takes
    # GET only, and the error said "HTTP 405 Method Not Allowed" and nothing more.
    await fault_server.control("fail", status=405, method="initialize", times=2)
    with pytest.raises(McpError) as info:
        await client_for(fault_server, "legacy").connect()
    assert info.value.status_code == 405
    assert (
        'HTTP 405 Method Not Allowed: "injected failure" (the server refused a POST: it may '
        "speak the " in str(info.value)
    )
    assert "deprecated HTTP+SSE transport" in str(info.value)


async def test_a_404_to_the_handshake_of_an_sse_url_suggests_the_old_transport_too(
    fault_server: FaultServer,
) -> None:
    # Express servers (the TypeScript SDK's) answer a POST to their old /sse endpoint
    # with 404, not 405: the error said "HTTP 404 Not Found" and nothing more.
    old = StreamableHttpTransport(f"{fault_server.base}/sse")
    with pytest.raises(McpError) as info:
        await client_for(fault_server, "legacy", transport=old).connect()
    assert info.value.status_code == 404
    assert "HTTP 404 Not Found (the server refused a POST: it may speak the deprecated " in str(
        info.value
    )
    elsewhere = StreamableHttpTransport(f"{fault_server.base}/nowhere")
    with pytest.raises(McpError) as info:
        await client_for(fault_server, "legacy", transport=elsewhere).connect()
    assert info.value.status_code == 404
    assert "HTTP+SSE" not in str(info.value)


async def test_an_http_errors_body_says_why_and_a_refusal_is_not_run(
    fault_server: FaultServer,
) -> None:
    # The status line alone reached the error, and a 413 (or any refusal but 401, 403
    # and 429) was labelled "may have run".
    token = "Bearer ghp_S3CRETt0ken00"
    transport = StreamableHttpTransport(fault_server.url, {"Authorization": token})
    scope = {"error": "insufficient_scope", "error_description": "token lacks the repo scope"}
    too_big = "request body of 6291456 bytes exceeds the 1 MiB limit"
    down = "database unavailable: connection pool exhausted\n  at db.connect (db.js:12)"
    echoed = f"invalid credentials {token} for " + "x" * 400
    html = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    json_kind, text = "application/json", "text/plain"
    # (status, body, its content type, what the message quotes of it, may_have_run)
    cases = [
        (
            403,
            json.dumps(scope),
            json_kind,
            "insufficient_scope: token lacks the repo scope",
            False,
        ),
        (413, too_big, text, too_big, False),
        (
            422,
            json.dumps({"detail": "text: field required"}),
            json_kind,
            "text: field required",
            False,
        ),
        (500, down, text, " ".join(down.split()), True),
        (400, echoed, text, ("invalid credentials *** for " + "x" * 400)[:299] + "…", False),
        (502, html, "text/html", "", True),
    ]
    async with client_for(fault_server, "legacy", transport=transport) as client:
        for status, body, kind, said, may_have_run in cases:
            headers = {"content-type": kind}
            await fault_server.control(
                "fail", status=status, method="tools/call", body=body, headers=headers
            )
            with pytest.raises(McpError) as info:
                await client.call_tool("echo", {"text": "x"})
            error = info.value
            quoted = f": {json.dumps(said, ensure_ascii=False)}" if said else ""
            expected = f"failed: HTTP {status} {HTTPStatus(status).phrase}{quoted}"
            assert error.reason == f"tools/call 'echo' {expected}", error.reason
            assert "ghp_S3CRETt0ken00" not in str(error)
            assert (error.status_code, error.may_have_run) == (status, may_have_run)
        assert client.connected
        assert await client.call_tool("echo", {"text": "fine"}) == "fine"


async def test_an_http_error_whose_body_stalls_is_reported_at_once_by_its_status(
    fault_server: FaultServer,
) -> None:
    # The guard waited for the first KiB of the body with no bound but the read timeout
    # (300 s): a gateway that sent a 500's headers and then nothing held the call for
    # its whole timeout, which ended it as McpTimeoutError ("may have run"), the status,
    # Retry-After and the verdict lost. The body now gets about a second.
    body = "rate limit exceeded; the next window opens in 2 minutes"
    json_kind, text = "application/json", "text/plain"
    # (status, its content type, bytes of the body sent, what the message quotes)
    cases = [
        (500, text, 0, ""),
        # The SDK reads a JSON error body whole: it must not wait for the rest either.
        (503, json_kind, 0, ""),
        # What came in time is quoted, as the first KiB of a long body is.
        (429, text, 19, '"rate limit exceeded"'),
    ]
    async with client_for(fault_server, "legacy", timeout=8) as client:
        for status, kind, sent, said in cases:
            # Longer than the timeout: reported, not waited for.
            headers = {"content-type": kind, "retry-after": "120"}
            await fault_server.control(
                "fail",
                status=status,
                method="tools/call",
                body=body,
                headers=headers,
                stall_after=sent,
            )
            with pytest.raises(McpError) as info:
                await client.call_tool("echo", {"text": "x"})
            error = info.value
            assert not isinstance(error, McpTimeoutError), error
            quoted = f": {said}" if said else ""
            expected = f"HTTP {status} {HTTPStatus(status).phrase}{quoted}; retry after 120 s"
            assert error.reason == f"tools/call 'echo' failed: {expected}", error.reason
            assert (error.status_code, error.retry_after) == (status, 120)
            assert error.may_have_run is (status == 500)
        assert client.connected
        assert await client.call_tool("echo", {"text": "fine"}) == "fine"


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_server_mounted_at_mcp_has_its_http_errors_read_after_its_redirect(
    protocol: str,
) -> None:
    # FastMCP 1.x mounted its app at /mcp: Starlette answers /mcp with a 307 to /mcp/,
    # which the SDK follows. The guard watched /mcp alone, so a 500 from /mcp/ read
    # "Server returned an error response (code -32603)", without its status, and a
    # 503's Retry-After was not waited out.
    server = FaultServer("--mounted")
    try:
        async with client_for(server, protocol) as client:
            assert await client.call_tool("echo", {"text": "hi"}) == "hi"
            await server.control("fail", status=500, method="tools/call", body="disk full")
            with pytest.raises(McpError) as info:
                await client.call_tool("echo", {"text": "x"})
            error = info.value
            assert error.reason == (
                "tools/call 'echo' failed: HTTP 500 Internal Server Error: \"disk full\""
            ), error.reason
            assert (error.status_code, error.may_have_run) == (500, True)
            await server.control(
                "fail", status=503, method="tools/call", headers={"Retry-After": "1"}
            )
            assert await client.call_tool("echo", {"text": "again"}, timeout=10) == "again"
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_token_the_server_echoes_in_its_error_is_in_no_part_of_the_traceback(
    fault_server: FaultServer, protocol: str
) -> None:
    # The error's message had it masked, but the SDK's error it was chained from (its
    # __cause__) kept the server's words: a printed traceback (logger.exception, an
    # app's crash) showed the token. The cause is still there, of its type, masked.
    secret = "ghp_S3CRETt0ken00"
    transport = StreamableHttpTransport(fault_server.url, {"Authorization": f"Bearer {secret}"})
    said = {"code": -32603, "message": f"token {secret} revoked"}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": said})
    kind = {"content-type": "application/json"}
    caught: list[McpError] = []
    async with client_for(fault_server, protocol, transport=transport) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        with pytest.raises(McpError) as answered:  # its JSON-RPC error answer
            await client.call_tool("reject_credentials")
        caught.append(answered.value)
        # As the loop meets it: the adapter's error, chained from the client's.
        invoked = await registry.invoke("reject_credentials", {})
        assert isinstance(invoked.error, McpError)
        caught.append(invoked.error)
        await fault_server.control("fail", status=403, method="tools/call", body=body, headers=kind)
        with pytest.raises(McpError) as refused:  # an HTTP refusal with a JSON-RPC body
            await client.call_tool("echo", {"text": "x"})
        caught.append(refused.value)
    if protocol == "legacy":  # "auto" answers a refused probe by falling back to it
        await fault_server.control("fail", status=401, body=body, headers=kind)
        with pytest.raises(McpError) as handshake:  # its refusal of the handshake
            await client_for(fault_server, protocol, transport=transport).connect()
        caught.append(handshake.value)
    for error in caught:
        shown = "".join(traceback.format_exception(error))
        assert secret not in shown, shown
        assert "*** revoked" in shown or "upstream rejected credentials: ***" in shown
    answer, _, http_error, *_ = (error.__cause__ for error in caught)
    assert type(answer) is MCPError and answer.code == 0
    assert str(answer) == "upstream rejected credentials: ***"
    assert type(http_error) is MCPError and http_error.code == -32603
    assert http_error.message == "token *** revoked"


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_token_in_the_urls_query_that_the_server_echoes_is_masked(
    fault_server: FaultServer, protocol: str
) -> None:
    # A key in the URL (?token=..., as hosted servers take keys) was hidden in the
    # library's own messages, but shown where the server quoted it: in the error's
    # message and in the SDK's error under it. A short value (mode=fast) is no secret.
    secret = "qs-S3CRETt0ken00"
    transport = StreamableHttpTransport(f"{fault_server.url}?token={secret}&mode=fast")
    async with client_for(fault_server, protocol, transport=transport) as client:
        with pytest.raises(McpError) as answered:
            await client.call_tool("reject_credentials")
    error = answered.value
    shown = "".join(traceback.format_exception(error))
    assert secret not in shown, shown
    assert error.reason.endswith("upstream rejected credentials: (none); ?token=*** (code 0)")
    assert str(error.__cause__) == "upstream rejected credentials: (none); ?token=***"


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_token_a_failed_tool_quotes_in_its_error_result_is_masked(
    fault_server: FaultServer, protocol: str
) -> None:
    # A tool that fails answers isError, whose text the model reads as it reads a
    # JSON-RPC error answer: the credential it quoted was masked in the one, not in the
    # other (a header's token, or the URL's).
    header, query = "ghp_S3CRETt0ken00", "qs-S3CRETt0ken00"
    url = f"{fault_server.url}?token={query}"
    transport = StreamableHttpTransport(url, {"Authorization": f"Bearer {header}"})
    async with client_for(fault_server, protocol, transport=transport) as client:
        registry = ToolRegistry()
        registry.register_all(client.into_tools())
        with pytest.raises(ToolExecutionError) as failed:
            await client.call_tool("refuse_credentials")
        invoked = await registry.invoke("refuse_credentials", {})  # as the loop meets it
    assert isinstance(invoked.error, ToolExecutionError)
    for error in (failed.value, invoked.error):
        shown = "".join(traceback.format_exception(error))
        assert header not in shown and query not in shown, shown
        assert str(error).endswith("upstream rejected credentials: ***; ?token=***"), error


async def test_a_retry_after_longer_than_the_timeout_is_reported(
    fault_server: FaultServer,
) -> None:
    async with client_for(fault_server, "legacy") as client:
        await fault_server.control(
            "fail", status=429, method="tools/call", headers={"Retry-After": "120"}
        )
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "x"}, timeout=5)
        assert info.value.status_code == 429
        assert info.value.retry_after == 120
        assert 'HTTP 429 Too Many Requests: "injected failure"; retry after 120 s' in str(
            info.value
        )
        assert str(info.value).endswith("; the call was not run")


async def test_a_recorded_429_replays_as_the_same_recoverable_error(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # The replayed error was a plain McpError, not recoverable, its server named twice:
    # the loop stopped where the recording had sent the error to the model and gone on.
    path = tmp_path / "busy.json"

    async def run(cassette: Cassette, **options: Any) -> tuple[str | None, list[Any]]:
        client = cassette.mcp(client_for(fault_server, "legacy"))
        async with client, cassette.client(**options) as model:
            registry = ToolRegistry()
            registry.register_all(client.into_tools())
            cycle = LlmCycle(CycleConfig("m"), client=model)
            response = await cycle.submit_with_tools("Echo x", registry)
        return response.text, cycle.messages

    script = [
        ScriptedChatServer.reply_tool_calls([("echo", {"text": "x"})]),
        ScriptedChatServer.reply_text("The echo service is busy."),
    ]
    await fault_server.control(
        "fail", status=429, method="tools/call", headers={"Retry-After": "120"}
    )
    async with ScriptedChatServer(script) as server:
        with Cassette(path, "rewrite") as cassette:
            recorded = await run(cassette, base_url=server.base_url, api_key="sk-test")
    assert recorded[0] == "The echo service is busy."
    with no_network():
        with Cassette(path, "none") as cassette:
            assert await run(cassette) == recorded  # the same tool result, the same turns
        async with Cassette(path, "none").mcp(client_for(fault_server, "legacy")) as client:
            with pytest.raises(McpError) as info:
                await client.call_tool("echo", {"text": "x"})
    error = info.value
    assert type(error) is McpError and error.is_recoverable()
    assert (error.status_code, error.retry_after, error.may_have_run) == (429, 120, False)
    assert error.reason == (
        """tools/call 'echo' failed: HTTP 429 Too Many Requests: "injected failure"; """
        "retry after 120 s"
    )
    assert str(error) == f"MCP server 'faulty': {error.reason}; the call was not run"


# -- a frozen server --------------------------------------------------------------------


# -- load -------------------------------------------------------------------------------
