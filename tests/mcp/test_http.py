"""The HTTP settings of StreamableHttpTransport, against real servers: TLS with a CA of
the test's own, client certificates, a forward proxy, the client factory, timeouts."""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

from agcore_tools import McpClient, McpError, StreamableHttpTransport, ToolConfigError, ToolError
from agcore_tools.mcp._exchange import parse_retry_after
from agcore_tools.mcp._http import _environment_proxy

from .conftest import FaultServer

pytestmark = pytest.mark.timeout(60)

trustme = pytest.importorskip("trustme")


class Pki:
    """A CA of the test's own, a server certificate for 127.0.0.1 and a client one."""

    def __init__(self, directory: Path) -> None:
        ca = trustme.CA()
        self.ca = directory / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        server = ca.issue_cert("127.0.0.1")
        self.server_cert, self.server_key = directory / "server.pem", directory / "server.key"
        server.cert_chain_pems[0].write_to_path(str(self.server_cert))
        server.private_key_pem.write_to_path(str(self.server_key))
        client = ca.issue_cert("agcore-tools-test-client")
        self.client_cert, self.client_key = directory / "client.pem", directory / "client.key"
        client.cert_chain_pems[0].write_to_path(str(self.client_cert))
        client.private_key_pem.write_to_path(str(self.client_key))
        self.client_both = directory / "client-both.pem"
        client.private_key_and_cert_chain_pem.write_to_path(str(self.client_both))

    def server_options(self) -> list[str]:
        return ["--tls", str(self.server_cert), str(self.server_key), str(self.ca)]


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


@pytest.fixture
def tls_server(pki: Pki) -> Iterator[FaultServer]:
    server = FaultServer(*pki.server_options())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def mtls_server(pki: Pki) -> Iterator[FaultServer]:
    server = FaultServer(*pki.server_options(), "--client-cert-required")
    try:
        yield server
    finally:
        server.stop()


async def echo_through(transport: StreamableHttpTransport, **options: Any) -> Any:
    async with McpClient("http", transport, timeout=20, **options) as client:
        return await client.call_tool("echo", {"text": "through"})


# -- TLS --------------------------------------------------------------------------------


async def test_tls_with_our_own_ca_file_or_context(tls_server: FaultServer, pki: Pki) -> None:
    assert await echo_through(StreamableHttpTransport(tls_server.url, verify=str(pki.ca)))
    context = ssl.create_default_context(cafile=str(pki.ca))
    assert await echo_through(StreamableHttpTransport(tls_server.url, verify=context))


async def test_tls_verification_is_on_by_default_and_can_be_turned_off(
    tls_server: FaultServer,
) -> None:
    with pytest.raises(McpError, match="CERTIFICATE_VERIFY_FAILED"):
        await echo_through(StreamableHttpTransport(tls_server.url))
    assert await echo_through(StreamableHttpTransport(tls_server.url, verify=False)) == "through"


async def test_client_certificates(mtls_server: FaultServer, pki: Pki) -> None:
    ca = str(pki.ca)
    with pytest.raises(McpError, match=f"cannot connect to {mtls_server.url}"):
        await echo_through(StreamableHttpTransport(mtls_server.url, verify=ca))
    pair = (str(pki.client_cert), str(pki.client_key))
    assert await echo_through(StreamableHttpTransport(mtls_server.url, verify=ca, cert=pair))
    one_file = str(pki.client_both)
    assert await echo_through(StreamableHttpTransport(mtls_server.url, verify=ca, cert=one_file))


async def test_a_tls_file_that_is_not_there_or_no_certificate_is_named_with_its_setting(
    tmp_path: Path,
) -> None:
    # ssl's own error names neither: "FileNotFoundError: [Errno 2] No such file or directory".
    url = "https://127.0.0.1:1/mcp"
    missing = str(tmp_path / "corp-ca.pme")
    with pytest.raises(ToolConfigError) as info:
        await echo_through(StreamableHttpTransport(url, verify=missing))
    assert str(info.value) == (
        f"StreamableHttpTransport verify: no such CA file or directory {missing!r}; correct the path"
    )
    with pytest.raises(ToolConfigError, match=r"cert: no such client certificate or key file "):
        await echo_through(StreamableHttpTransport(url, cert=(missing, missing)))
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ToolConfigError, match=r"verify: cannot load the CA certificates in '"):
        await echo_through(StreamableHttpTransport(url, verify=str(garbage)))
    with pytest.raises(ToolConfigError, match=r"cert: cannot load the client certificate from '"):
        await echo_through(StreamableHttpTransport(url, cert=str(garbage)))


@pytest.mark.parametrize("setting", ["verify", "cert"])
async def test_a_tls_file_mistake_fails_once_without_blaming_the_probe(
    tls_server: FaultServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, setting: str
) -> None:
    # The client's own mistake was taken for a server the server/discover probe broke:
    # a WARNING told the user to try protocol="legacy" (which cannot help), and the
    # transport was built a second time before the ToolConfigError came out.
    caplog.set_level(logging.DEBUG, logger="agcore_tools")
    garbage = tmp_path / "corp.pem"
    garbage.write_text("not a certificate\n")
    missing = str(tmp_path / "corp-ca.pme")
    if setting == "verify":
        transport = StreamableHttpTransport(tls_server.url, verify=missing)
        expected = f"verify: no such CA file or directory {missing!r}; correct the path"
    else:
        transport = StreamableHttpTransport(tls_server.url, cert=str(garbage))
        expected = f"cert: cannot load the client certificate from {str(garbage)!r}: "
    with pytest.raises(ToolConfigError) as info:
        await McpClient("tls", transport, timeout=20).connect()
    assert str(info.value).startswith(f"StreamableHttpTransport {expected}")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    [failed] = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.mcp"]
    assert failed == "MCP server 'tls' failed to start"  # one attempt, no probe retry


# -- a proxy ----------------------------------------------------------------------------


class ForwardProxy:
    """A plain-HTTP forward proxy on 127.0.0.1: one request per connection, relayed as
    it streams (SSE included), noting each request line."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc_info: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *lines = [line for line in head.split("\r\n") if line]
            method, target, version = request_line.split(" ")
            self.seen.append(f"{method} {target}")
            url = urlsplit(target)
            length = next(
                (int(h.split(":", 1)[1]) for h in lines if h.lower().startswith("content-length")),
                0,
            )
            body = await reader.readexactly(length)
            kept = [h for h in lines if not h.lower().startswith(("connection", "proxy-"))]
            upstream_r, upstream_w = await asyncio.open_connection(url.hostname, url.port)
            path = url.path + (f"?{url.query}" if url.query else "")
            upstream_w.write(
                "\r\n".join(
                    [f"{method} {path} {version}", *kept, "Connection: close", "", ""]
                ).encode("latin-1")
                + body
            )
            answer = await upstream_r.readuntil(b"\r\n\r\n")
            # Tell the client too that this connection ends with the response.
            writer.write(answer[:-2] + b"Connection: close\r\n\r\n")
            while chunk := await upstream_r.read(65536):
                writer.write(chunk)
                await writer.drain()
            upstream_w.close()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def test_requests_go_through_the_proxy(fault_server: FaultServer) -> None:
    proxy = ForwardProxy()
    async with proxy as proxy_url:
        transport = StreamableHttpTransport(fault_server.url, proxy=proxy_url)
        assert await echo_through(transport, protocol="legacy") == "through"
    assert f"POST {fault_server.url}" in proxy.seen


@pytest.fixture
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


class TokenFromElsewhere(httpx2.Auth):
    """Asks another host for its token first, as an OAuth flow asks its token endpoint."""

    def __init__(self, token_url: str) -> None:
        self.token_url = token_url
        self.token: str | None = None

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self.token is None:
            answer = yield httpx2.Request("POST", self.token_url, json={})
            await answer.aread()
            self.token = f"t-{answer.status_code}"
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


async def test_each_host_follows_the_environments_proxy_rules(
    fault_server: FaultServer, no_proxy_settings: pytest.MonkeyPatch
) -> None:
    # The proxy chosen for the MCP server's URL carried every request, the token
    # endpoint's too, though NO_PROXY lists its host.
    token_url = f"http://localhost:{fault_server.port}/control/state"
    proxy = ForwardProxy()
    async with proxy as proxy_url:
        no_proxy_settings.setenv("HTTP_PROXY", proxy_url)
        no_proxy_settings.setenv("NO_PROXY", "localhost")
        auth = TokenFromElsewhere(token_url)
        transport = StreamableHttpTransport(fault_server.url, auth=auth)
        assert await echo_through(transport, protocol="legacy") == "through"
    assert auth.token == "t-200"
    assert f"POST {fault_server.url}" in proxy.seen
    assert not [seen for seen in proxy.seen if "localhost" in seen]


async def test_a_dead_proxy_is_named_with_where_it_came_from(
    fault_server: FaultServer, no_proxy_settings: pytest.MonkeyPatch
) -> None:
    # The message named the server as unreachable, and the proxy not at all.
    dead = "http://user:pr0xy-pw@127.0.0.1:1"
    with pytest.raises(McpError) as info:
        await echo_through(StreamableHttpTransport(fault_server.url, proxy=dead))
    message = str(info.value)
    assert f"cannot connect to {fault_server.url}: ConnectError: " in message
    assert message.endswith(
        "(via the proxy http://127.0.0.1:1, from StreamableHttpTransport(proxy=...))"
    )
    assert "pr0xy-pw" not in message
    no_proxy_settings.setenv("HTTP_PROXY", dead)
    with pytest.raises(McpError) as info:
        await echo_through(StreamableHttpTransport(fault_server.url))
    assert str(info.value).endswith("(via the proxy http://127.0.0.1:1, from HTTP_PROXY)")


async def test_a_proxy_in_the_environment_without_a_scheme_is_an_http_one(
    fault_server: FaultServer, no_proxy_settings: pytest.MonkeyPatch
) -> None:
    # HTTP_PROXY=host:port, which httpx reads as http://host:port, was handed to the
    # transport as it was, and every request failed on its unknown scheme.
    proxy = ForwardProxy()
    async with proxy as proxy_url:
        no_proxy_settings.setenv("HTTP_PROXY", proxy_url.removeprefix("http://"))
        transport = StreamableHttpTransport(fault_server.url)
        assert await echo_through(transport, protocol="legacy") == "through"
    assert f"POST {fault_server.url}" in proxy.seen
    no_proxy_settings.setenv("HTTP_PROXY", "user:pr0xy-pw@127.0.0.1:1")
    with pytest.raises(McpError) as info:
        await echo_through(StreamableHttpTransport(fault_server.url))
    assert str(info.value).endswith("(via the proxy http://127.0.0.1:1, from HTTP_PROXY)")
    assert "pr0xy-pw" not in str(info.value)


async def test_a_proxy_given_without_a_scheme_is_an_http_one_as_in_the_environment(
    fault_server: FaultServer,
) -> None:
    # proxy="host:port", which HTTP_PROXY=host:port beside it is read as, was kept as it
    # was, and the first request failed on its unknown scheme ("proxy").
    proxy = ForwardProxy()
    async with proxy as proxy_url:
        transport = StreamableHttpTransport(fault_server.url, proxy=proxy_url[len("http://") :])
        assert transport.proxy == proxy_url
        assert await echo_through(transport, protocol="legacy") == "through"
    assert f"POST {fault_server.url}" in proxy.seen


@pytest.mark.parametrize(
    "proxy",
    [
        "htp://proxy:3128",
        "me:pr0xy-pw@proxy:port",
        ":3128",
        "not a url",
        "http://me:pr0xy-pw@proxy host:3128",
        "http://[not:an:address]:3128",
    ],
)
def test_a_proxy_that_is_no_proxy_url_is_refused_where_the_transport_is_made(proxy: str) -> None:
    # Each was taken, and failed only at the first request ("not a url" as the host
    # "not a url", on a DNS error).
    with pytest.raises(ToolConfigError) as info:
        StreamableHttpTransport("http://127.0.0.1:8000/mcp", proxy=proxy)
    message = str(info.value)
    assert message.startswith("StreamableHttpTransport proxy must be a proxy URL such as ")
    assert "pr0xy-pw" not in message and "\n" not in message


def test_the_environment_names_the_proxy_unless_no_proxy_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    assert _environment_proxy("https://mcp.example.com/mcp") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://corp-proxy:3128")
    assert _environment_proxy("https://mcp.example.com/mcp") == "http://corp-proxy:3128"
    assert _environment_proxy("http://mcp.example.com/mcp") is None
    monkeypatch.setenv("HTTPS_PROXY", "corp-proxy:3128")  # as httpx reads it: http://
    assert _environment_proxy("https://mcp.example.com/mcp") == "http://corp-proxy:3128"
    monkeypatch.setenv("HTTPS_PROXY", "socks5://corp-proxy:1080")
    assert _environment_proxy("https://mcp.example.com/mcp") == "socks5://corp-proxy:1080"
    monkeypatch.setenv("NO_PROXY", "example.com")
    assert _environment_proxy("https://mcp.example.com/mcp") is None


# -- the client factory -----------------------------------------------------------------


async def test_a_client_factory_makes_the_client_and_keeps_the_error_details(
    fault_server: FaultServer,
) -> None:
    made: list[httpx2.AsyncClient] = []
    requests: list[str] = []

    async def note(request: httpx2.Request) -> None:
        requests.append(request.method)

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        client = httpx2.AsyncClient(
            headers=headers, timeout=timeout, event_hooks={"request": [note]}
        )
        made.append(client)
        return client

    transport = StreamableHttpTransport(
        fault_server.url, {"X-Team": "tools"}, http_client_factory=factory
    )
    async with McpClient("factory", transport, timeout=20) as client:
        assert await client.call_tool("echo", {"text": "made"}) == "made"
        assert made[0].headers["X-Team"] == "tools"
        await fault_server.control("fail", status=502, method="tools/call")
        with pytest.raises(McpError) as info:
            await client.call_tool("echo", {"text": "x"})
        assert info.value.status_code == 502
        assert client.connected
    assert "POST" in requests
    assert [c.is_closed for c in made] == [True]


def test_settings_that_exclude_each_other_are_refused() -> None:
    with pytest.raises(ToolError, match="set verify, cert and proxy on the client"):
        StreamableHttpTransport("https://x/mcp", verify=False, http_client_factory=lambda: None)
    with pytest.raises(ToolError, match="load the client certificate into it"):
        StreamableHttpTransport("https://x/mcp", verify=ssl.create_default_context(), cert="c.pem")


# -- timeouts and limits ----------------------------------------------------------------


async def test_sse_read_timeout_ends_a_silent_stream(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    transport = StreamableHttpTransport(fault_server.url, sse_read_timeout=1)
    async with McpClient("slow", transport, timeout=30, protocol="legacy") as client:
        started = time.monotonic()
        with pytest.raises(McpError) as info:
            await client.call_tool("hold", {"seconds": 10, "marker": str(tmp_path / "m")})
        assert time.monotonic() - started < 8
        assert info.value.is_recoverable()
        assert client.connected  # one stream went quiet; the server still answers


async def test_more_calls_at_once_than_httpx2s_default_pool_holds_all_run(
    fault_server: FaultServer,
) -> None:
    # Each call holds a connection for its response stream: past httpx2's default of
    # 100 connections, the calls waited http_timeout for one, then failed unsent
    # ("PoolTimeout: (no message)"), labelled as calls that may have run.
    count = 120
    transport = StreamableHttpTransport(fault_server.url, http_timeout=2)
    async with McpClient("many", transport, timeout=60) as client:
        calls = [client.call_tool("meet", {"count": count, "seconds": 30}) for _ in range(count)]
        results = await asyncio.gather(*calls, return_exceptions=True)
    assert results == ["met"] * count


async def test_a_call_that_waits_out_the_pool_of_a_factorys_client_says_it_was_not_sent(
    fault_server: FaultServer,
) -> None:
    def factory(**options: Any) -> httpx2.AsyncClient:
        options["timeout"] = httpx2.Timeout(10, pool=0.5)
        return httpx2.AsyncClient(**options, limits=httpx2.Limits(max_connections=3))

    transport = StreamableHttpTransport(fault_server.url, http_client_factory=factory)
    async with McpClient("pooled", transport, timeout=30) as client:
        # Three connections (one perhaps the notification stream's) for six calls that
        # hold theirs until all six are in, which cannot happen: the rest wait for one.
        calls = [client.call_tool("meet", {"count": 6, "seconds": 3}) for _ in range(6)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        unsent = [r for r in results if isinstance(r, McpError)]
        met = [r for r in results if isinstance(r, str)]
        assert len(unsent) >= 3 and len(met) + len(unsent) == 6, results
        assert all(answer.startswith("only ") for answer in met)
        for error in unsent:
            assert error.may_have_run is False and error.is_recoverable()
            assert "tools/call 'meet' was not sent: no connection of the HTTP client came " in (
                str(error)
            )
            assert "httpx2.Limits(max_connections=...)" in str(error)
            assert str(error).endswith("; the call was not run")
        assert client.connected  # the server was never in question
        assert await client.call_tool("echo", {"text": "still"}) == "still"
        state = await fault_server.control("state")
        assert state["calls_seen"] == len(met) + 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"http_timeout": 0}, "http_timeout must be a positive number"),
        ({"sse_read_timeout": "long"}, "sse_read_timeout must be a positive number"),
        ({"max_message_size": 0}, r"max_message_size must be a positive int \(bytes\) or None"),
        ({"http_client_factory": 3}, "http_client_factory must be callable"),
    ],
)
def test_bad_http_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        StreamableHttpTransport("http://127.0.0.1:1/mcp", **options)


def test_retry_after_takes_seconds_or_an_http_date() -> None:
    from email.utils import formatdate

    assert parse_retry_after("7") == 7.0
    in_a_minute = parse_retry_after(formatdate(time.time() + 60, usegmt=True))
    assert in_a_minute is not None and 55 < in_a_minute <= 60
    assert parse_retry_after(formatdate(time.time() - 60, usegmt=True)) == 0.0
    assert parse_retry_after("soon") is None
