"""Token stores, and OAuth through StreamableHttpTransport(auth=) against a real OAuth server.

The server is tests/mcp/servers/oauth_server.py: an MCP server with its own
authorization server (the SDK's routes), whose authorization endpoint approves at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import traceback
from collections.abc import Awaitable, Callable, Generator, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from mcp.shared.exceptions import MCPError

from agcore_tools import McpClient, McpError, McpTimeoutError, StreamableHttpTransport, ToolIOError
from agcore_tools.mcp import FileTokenStorage, InMemoryTokenStorage, McpLogMessage

from .conftest import SERVERS, HttpServer

pytestmark = pytest.mark.timeout(60)

OAUTH_SERVER = SERVERS / "oauth_server.py"
REDIRECT_URI = "http://localhost:8765/callback"


class Browser:
    """The user: follows the authorization URL and reads the code from the redirect."""

    def __init__(self) -> None:
        self.sign_ins = 0
        self.refuse = False
        self._result: AuthorizationCodeResult | None = None

    async def open(self, authorization_url: str) -> None:
        if self.refuse:
            raise RuntimeError("the user closed the sign-in window")
        self.sign_ins += 1
        async with httpx2.AsyncClient(timeout=10) as http:
            redirect = (await http.get(authorization_url)).headers["location"]
        query = parse_qs(urlsplit(redirect).query)
        self._result = AuthorizationCodeResult(code=query["code"][0], state=query["state"][0])

    async def callback(self) -> AuthorizationCodeResult:
        assert self._result is not None
        return self._result


def oauth(url: str, storage: object, browser: Browser) -> OAuthClientProvider:
    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(client_name="tests", redirect_uris=[REDIRECT_URI]),  # type: ignore[list-item]
        storage=storage,  # type: ignore[arg-type]
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )


@pytest.fixture
def oauth_server() -> Iterator[HttpServer]:
    server = HttpServer(OAUTH_SERVER)
    try:
        yield server
    finally:
        server.stop()


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


# -- the stores ------------------------------------------------------------------------


@pytest.fixture(params=["memory", "file"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> InMemoryTokenStorage | FileTokenStorage:
    if request.param == "memory":
        return InMemoryTokenStorage()
    return FileTokenStorage(tmp_path / "tokens.json")


def test_a_store_starts_empty_and_keeps_what_it_is_given(
    store: InMemoryTokenStorage | FileTokenStorage,
) -> None:
    assert run(store.get_tokens()) is None
    assert run(store.get_client_info()) is None
    info = OAuthClientInformationFull(
        client_id="app", client_secret="cs-1", redirect_uris=[REDIRECT_URI]
    )  # type: ignore[list-item]
    run(store.set_client_info(info))
    run(store.set_tokens(OAuthToken(access_token="at-1", refresh_token="rt-1", scope="tools")))
    assert run(store.get_client_info()) == info
    assert run(store.get_tokens()) == OAuthToken(
        access_token="at-1", refresh_token="rt-1", scope="tools"
    )


def test_expires_in_counts_from_when_the_token_was_stored(
    store: InMemoryTokenStorage | FileTokenStorage,
) -> None:
    run(store.set_tokens(OAuthToken(access_token="at-1", expires_in=3600)))
    token = run(store.get_tokens())
    assert isinstance(token, OAuthToken) and token.access_token == "at-1"
    assert token.expires_in is not None and 3500 < token.expires_in <= 3600


def test_an_expired_token_comes_back_without_its_access_token_so_the_provider_refreshes(
    store: InMemoryTokenStorage | FileTokenStorage,
) -> None:
    run(store.set_tokens(OAuthToken(access_token="at-1", refresh_token="rt-1", expires_in=0)))
    token = run(store.get_tokens())
    assert isinstance(token, OAuthToken)
    assert (token.access_token, token.refresh_token, token.expires_in) == ("", "rt-1", 0)
    run(store.set_tokens(OAuthToken(access_token="at-2", expires_in=0)))  # nothing to refresh with
    assert run(store.get_tokens()) is None


def test_concurrent_writes_to_a_file_store_keep_both(tmp_path: Path) -> None:
    store = FileTokenStorage(tmp_path / "tokens.json")

    async def both() -> None:
        await asyncio.gather(
            store.set_tokens(OAuthToken(access_token="at-1")),
            store.set_client_info(OAuthClientInformationFull(client_id="app")),
        )

    run(both())
    fresh = FileTokenStorage(store.path)
    assert run(fresh.get_client_info()) == OAuthClientInformationFull(client_id="app")
    assert run(fresh.get_tokens()) == OAuthToken(access_token="at-1")


def test_the_token_file_is_created_0600_whatever_the_umask_in_a_0700_directory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config" / "agent" / "tokens.json"
    old = os.umask(0)
    try:
        run(FileTokenStorage(path).set_tokens(OAuthToken(access_token="at-1")))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert os.listdir(path.parent) == ["tokens.json"]  # no temporary file left behind


def test_a_write_replaces_the_file_instead_of_writing_into_it(tmp_path: Path) -> None:
    # Writing in place would keep an old file's loose mode while the secret goes in.
    path = tmp_path / "tokens.json"
    path.write_text("{}")
    path.chmod(0o644)
    before = path.stat().st_ino
    run(FileTokenStorage(path).set_tokens(OAuthToken(access_token="at-1")))
    assert path.stat().st_ino != before
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["tokens"] == {
        "access_token": "at-1",
        "token_type": "Bearer",
    }


def test_a_file_others_can_read_is_narrowed_when_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": {"access_token": "at-1"}}))
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, "agcore_tools.mcp.auth"):
        token = run(FileTokenStorage(path).get_tokens())
    assert isinstance(token, OAuthToken) and token.access_token == "at-1"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "readable by others (mode 644)" in caplog.text


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"tokens": {"access_token": "at-SECRET", "refresh', "is not valid JSON"),
        ('["at-SECRET"]', "does not hold a JSON object"),
        (
            '{"tokens": {"access_token": "at-SECRET", "expires_in": "rt-SECRET"}}',
            "has an invalid 'tokens' entry (bad fields: expires_in)",
        ),
    ],
)
def test_a_bad_token_file_is_reported_without_its_content(
    tmp_path: Path, content: str, reason: str
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content)
    path.chmod(0o600)
    with pytest.raises(ToolIOError) as caught:
        run(FileTokenStorage(path).get_tokens())
    assert str(caught.value) == f"token file {path} {reason}; delete it to sign in again"
    assert "SECRET" not in "".join(traceback.format_exception(caught.value))


# -- OAuth end to end ------------------------------------------------------------------


def test_sign_in_once_then_the_token_file_is_enough(
    oauth_server: HttpServer, tmp_path: Path
) -> None:
    browser = Browser()
    path = tmp_path / "tokens.json"

    async def connect_and_add(a: int, b: int) -> object:
        auth = oauth(oauth_server.url, FileTokenStorage(path), browser)
        async with McpClient(
            "remote", StreamableHttpTransport(oauth_server.url, auth=auth), timeout=20
        ) as c:
            return await c.call_tool("add", {"a": a, "b": b})

    assert run(connect_and_add(2, 3)) == "5"
    assert browser.sign_ins == 1
    assert run(connect_and_add(4, 5)) == "9"  # a new provider, as after a restart
    assert browser.sign_ins == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_expired_stored_token_is_refreshed_without_a_new_sign_in(
    oauth_server: HttpServer, tmp_path: Path
) -> None:
    browser = Browser()
    store = FileTokenStorage(tmp_path / "tokens.json")

    async def connect_and_add() -> object:
        auth = oauth(oauth_server.url, store, browser)
        async with McpClient(
            "remote", StreamableHttpTransport(oauth_server.url, auth=auth), timeout=20
        ) as c:
            return await c.call_tool("add", {"a": 1, "b": 1})

    assert run(connect_and_add()) == "2"
    first = run(store.get_tokens())
    assert isinstance(first, OAuthToken) and first.refresh_token
    run(store.set_tokens(first.model_copy(update={"expires_in": 0})))  # as if its hour had passed
    assert run(connect_and_add()) == "2"
    second = run(store.get_tokens())
    assert isinstance(second, OAuthToken)
    assert browser.sign_ins == 1
    assert second.access_token not in ("", first.access_token)
    assert second.refresh_token != first.refresh_token  # the server rotates them


def test_tokens_reach_no_log_record_and_no_error_message(
    oauth_server: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger: ours, the SDK's, httpx2's, httpcore's
    browser = Browser()
    store = InMemoryTokenStorage()
    auth = oauth(oauth_server.url, store, browser)
    errors: list[BaseException] = []

    async def scenario() -> None:
        transport = StreamableHttpTransport(oauth_server.url, auth=auth)
        async with McpClient("remote", transport, timeout=20) as remote:
            assert await remote.call_tool("add", {"a": 2, "b": 3}) == "5"
            tokens = await store.get_tokens()
            client = await store.get_client_info()
            assert tokens is not None and client is not None and client.client_secret
            async with httpx2.AsyncClient(timeout=10) as http:  # the server forgets the token
                revoked = await http.post(
                    oauth_server.url.replace("/mcp", "/revoke"),
                    data={
                        "token": tokens.access_token,
                        "client_id": client.client_id,
                        "client_secret": client.client_secret,
                    },
                )
                assert revoked.status_code == 200
            browser.refuse = True  # so signing in again fails
            with pytest.raises(McpError) as refused:
                await remote.call_tool("add", {"a": 1, "b": 1})
            errors.append(refused.value)
            # A token passed as a header is no safer in a message.
            header = {"Authorization": f"Bearer {tokens.access_token}"}
            fixed = StreamableHttpTransport(oauth_server.url, headers=header)
            errors.append(ValueError(repr(fixed)))
            with pytest.raises(McpError) as unauthorised:
                async with McpClient("fixed", fixed, timeout=20):
                    pass
            errors.append(unauthorised.value)

    run(scenario())
    tokens = run(store.get_tokens())
    client = run(store.get_client_info())
    assert isinstance(tokens, OAuthToken) and isinstance(client, OAuthClientInformationFull)
    secrets = [tokens.access_token, tokens.refresh_token, client.client_secret]
    assert all(secrets) and browser.sign_ins == 1
    logged = [record.getMessage() for record in caplog.records]
    logged += [caplog.handler.format(record) for record in caplog.records]  # with tracebacks
    shown = ["".join(traceback.format_exception(error)) for error in errors]
    assert len(logged) > 20 and len(shown) == 3  # the flow and the failures did run
    # The refused sign-in is what ended the connection (the SDK logs it).
    assert any("the user closed the sign-in window" in text for text in logged)
    for secret in secrets:
        assert not [text for text in logged if secret in text], "a secret was logged"
        assert not [text for text in shown if secret in text], "a secret is in an error"


@pytest.mark.parametrize("client_made_by", ["the library", "a factory"])
def test_an_auth_token_the_server_logs_back_is_masked_as_a_header_token_is(
    oauth_server: HttpServer, caplog: pytest.LogCaptureFixture, client_made_by: str
) -> None:
    # The token of auth= is in no setting of the transport: it is the one the requests
    # carried (put there by the provider, or by the factory's client) that is masked.
    caplog.set_level(logging.INFO, logger="agcore_tools.mcp.server")
    store = InMemoryTokenStorage()
    auth = oauth(oauth_server.url, store, Browser())
    factory = None
    if client_made_by == "a factory":

        def factory(**options: object) -> httpx2.AsyncClient:
            return httpx2.AsyncClient(**options)  # type: ignore[arg-type]

    received: list[object] = []
    logged = asyncio.Event()

    def on_log(message: McpLogMessage) -> None:  # called after the line is logged
        received.append(message.data)
        logged.set()

    async def scenario() -> None:
        transport = StreamableHttpTransport(
            oauth_server.url, auth=auth, http_client_factory=factory
        )
        async with McpClient("remote", transport, timeout=20, on_log=on_log) as remote:
            assert await remote.call_tool("log_credentials") == "logged"
            await asyncio.wait_for(logged.wait(), 10)  # notifications may trail the answer

    run(scenario())
    tokens = run(store.get_tokens())
    assert isinstance(tokens, OAuthToken)
    shown = [r.getMessage() for r in caplog.records if r.name == "agcore_tools.mcp.server"]
    assert shown == ["[remote] upstream rejected credentials: ***; token ***"]
    token = tokens.access_token
    assert received == [f"upstream rejected credentials: Bearer {token}; token {token}"]


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_an_auth_token_the_server_echoes_in_its_error_is_in_no_part_of_the_traceback(
    oauth_server: HttpServer, protocol: str
) -> None:
    # The error's message had it masked, but the SDK's error it was chained from kept
    # the server's words: a printed traceback (logger.exception, an app's crash) showed
    # the token, which the auth= flow put on the request and no setting of the client holds.
    store = InMemoryTokenStorage()
    auth = oauth(oauth_server.url, store, Browser())
    caught: list[McpError] = []

    async def scenario() -> None:
        transport = StreamableHttpTransport(oauth_server.url, auth=auth)
        client = McpClient("remote", transport, timeout=20, protocol=protocol)  # type: ignore[arg-type]
        async with client:
            with pytest.raises(McpError) as rejected:
                await client.call_tool("reject_credentials")
            caught.append(rejected.value)

    run(scenario())
    tokens = run(store.get_tokens())
    assert isinstance(tokens, OAuthToken) and tokens.access_token
    [error] = caught
    shown = "".join(traceback.format_exception(error))
    assert tokens.access_token not in shown, shown
    cause = error.__cause__  # still there, of its type, with the server's words masked
    assert type(cause) is MCPError and str(cause) == "upstream rejected credentials: ***"
    assert f"{type(cause).__module__}.MCPError: upstream rejected credentials: ***" in shown


class _SignsEachRequest(httpx2.Auth):
    """A new credential on every request, as an HMAC or SigV4 signature (or a JWT made
    per request) is; without a scheme, so that only the client's notes can mask it."""

    def __init__(self) -> None:
        self.signed = 0

    def auth_flow(
        self, request: httpx2.Request
    ) -> Generator[httpx2.Request, httpx2.Response, None]:
        self.signed += 1
        request.headers["Authorization"] = f"sig-{self.signed:05}-S3CRET"
        yield request


async def test_an_auth_that_signs_each_request_has_the_last_credentials_kept_not_all(
    http_server: HttpServer,
) -> None:
    # Every distinct credential a connection's requests carried was kept for the
    # client's life, and the whole list sorted again for each new one: with an auth that
    # signs each request, memory grew without end, and each request took longer on the
    # loop (11 ms each after 20,000). The last 64 distinct values are kept now.
    auth = _SignsEachRequest()
    static = "static-key-S3CRET"
    transport = StreamableHttpTransport(http_server.url, {"X-Api-Key": static}, auth=auth)
    async with McpClient("signed", transport, timeout=20, protocol="legacy") as client:
        for _ in range(150):
            await client.ping()
        carried = client.sent_credentials
        with pytest.raises(McpError) as rejected:
            await client.call_tool("reject_credentials")
    assert auth.signed > 150
    assert len(carried) <= 64
    assert static in carried  # sent with every request: always among the last
    assert "sig-00001-S3CRET" not in carried
    # The signature of the call itself, the newest, is masked where the server quotes it.
    assert "upstream rejected credentials: *** (code 0)" in str(rejected.value)
    assert "S3CRET" not in "".join(traceback.format_exception(rejected.value))


class _ReadOnlyStore(InMemoryTokenStorage):
    """A token store whose writes fail, as a vault the app may read but not write."""

    async def set_tokens(self, tokens: OAuthToken) -> None:
        raise OSError("the token vault is read-only")


@pytest.mark.parametrize("failing", ["the token store", "the sign-in"])
def test_an_auth_flow_that_fails_after_a_401_is_named_in_the_error(
    oauth_server: HttpServer, failing: str
) -> None:
    # The error named only the server's 401 ("invalid_token: Authentication required"),
    # which the auth flow was answering, not why the flow failed (a token store that
    # could not be written, a sign-in the user refused): that was only in the chained
    # exception group, or not in the error at all.
    browser = Browser()
    store = _ReadOnlyStore() if failing == "the token store" else InMemoryTokenStorage()
    auth = oauth(oauth_server.url, store, browser)
    transport = StreamableHttpTransport(oauth_server.url, auth=auth)

    async def scenario() -> McpError:
        if failing == "the token store":
            with pytest.raises(McpError) as refused:
                async with McpClient("remote", transport, timeout=20):
                    pass
            return refused.value
        async with McpClient("remote", transport, timeout=20) as remote:
            assert await remote.call_tool("add", {"a": 2, "b": 3}) == "5"
            tokens = await store.get_tokens()
            client = await store.get_client_info()
            assert tokens is not None and client is not None and client.client_secret
            async with httpx2.AsyncClient(timeout=10) as http:  # the server forgets the token
                revoked = await http.post(
                    oauth_server.url.replace("/mcp", "/revoke"),
                    data={
                        "token": tokens.access_token,
                        "client_id": client.client_id,
                        "client_secret": client.client_secret,
                    },
                )
                assert revoked.status_code == 200
            browser.refuse = True
            with pytest.raises(McpError) as refused:
                await remote.call_tool("add", {"a": 1, "b": 1})
            return refused.value

    error = run(scenario())
    assert isinstance(error, McpError)
    message = str(error)
    assert "HTTP 401 Unauthorized" in message  # what the flow was answering
    why = {
        "the token store": "OSError: the token vault is read-only",
        "the sign-in": "RuntimeError: the user closed the sign-in window",
    }[failing]
    assert f"; the auth flow then failed: {why}" in message, message


def test_clients_sharing_one_provider_refresh_an_expired_token_once(
    oauth_server: HttpServer, tmp_path: Path
) -> None:
    # What the guide recommends for two clients of one server: one provider, not one
    # each on the same store (each would refresh with the same rotating refresh token,
    # and the second would be refused and have the user sign in again).
    browser = Browser()
    path = tmp_path / "tokens.json"

    async def add(auth: OAuthClientProvider) -> object:
        transport = StreamableHttpTransport(oauth_server.url, auth=auth)
        async with McpClient("remote", transport, timeout=20) as c:
            return await c.call_tool("add", {"a": 1, "b": 2})

    assert run(add(oauth(oauth_server.url, FileTokenStorage(path), browser))) == "3"
    store = FileTokenStorage(path)
    first = run(store.get_tokens())
    assert isinstance(first, OAuthToken) and first.refresh_token
    run(store.set_tokens(first.model_copy(update={"expires_in": 0})))  # its hour has passed

    async def both() -> list[object]:
        shared = oauth(oauth_server.url, FileTokenStorage(path), browser)
        return list(await asyncio.gather(add(shared), add(shared)))

    assert run(both()) == ["3", "3"]
    assert browser.sign_ins == 1  # refreshed, once, with no new sign-in
    second = run(store.get_tokens())
    assert isinstance(second, OAuthToken) and second.refresh_token != first.refresh_token


class _NeverAnswers(Browser):
    """A user who never comes back from the sign-in page."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = False

    async def callback(self) -> AuthorizationCodeResult:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


def test_a_connect_that_times_out_in_a_sign_in_says_it_was_signing_in(
    oauth_server: HttpServer,
) -> None:
    # The timeout said only that the server "did not complete the MCP handshake within
    # 5 s", as if the server were slow, when the server had answered at once (a 401) and
    # the client was waiting on the user's sign-in.
    browser = _NeverAnswers()
    auth = oauth(oauth_server.url, InMemoryTokenStorage(), browser)

    async def scenario() -> McpError:
        transport = StreamableHttpTransport(oauth_server.url, auth=auth)
        with pytest.raises(McpError) as timed_out:
            async with McpClient("remote", transport, timeout=5):
                pass
        return timed_out.value

    error = run(scenario())
    assert isinstance(error, McpTimeoutError)
    assert browser.cancelled  # the wait for the callback ended with the connect
    message = str(error)
    assert "did not complete the MCP handshake within 5 s" in message
    assert "; the auth flow answering its HTTP 401 Unauthorized had not finished" in message, (
        message
    )


class _RetriesWithAToken(httpx2.Auth):
    """An auth flow that answers a 401 at once, with a token it already holds."""

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        response = yield request
        if response.status_code == 401:
            request.headers["Authorization"] = "Bearer t0ken-S3CRET"
            yield request


def _refuses_then_waits(
    done: asyncio.Event,
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """A server that answers a request without credentials with a 401 and does not
    answer the one that carries them until ``done``."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if b"\r\nauthorization:" in head.lower():
                await done.wait()
                writer.close()
                return
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\n"
                b"Content-Length: 0\r\n\r\n"
            )
            await writer.drain()

    return serve


def test_a_connect_that_times_out_after_the_auth_flow_retried_does_not_blame_a_sign_in() -> None:
    # The auth flow had answered the 401 and sent the request again; the server was
    # slow to answer that. The timeout said the auth flow "had not finished (a sign-in
    # waits on the user ...)", since the 401 stays on the exchange until the retry is
    # answered.
    async def scenario() -> McpError:
        done = asyncio.Event()
        server = await asyncio.start_server(_refuses_then_waits(done), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport = StreamableHttpTransport(
            f"http://127.0.0.1:{port}/mcp", auth=_RetriesWithAToken()
        )
        try:
            with pytest.raises(McpError) as timed_out:
                async with McpClient("slow", transport, timeout=2):
                    pass
        finally:
            done.set()
            server.close()
        return timed_out.value

    error = run(scenario())
    assert isinstance(error, McpTimeoutError)
    message = str(error)
    assert "did not complete the MCP handshake within 2 s" in message
    assert "auth flow" not in message, message


class _ExchangesACode(httpx2.Auth):
    """An auth flow that answers a 401 as the SDK's does: a token request, whose
    refusal it quotes in its exception (``Token exchange failed (400): <body>``)."""

    requires_response_body = True

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        response = yield request
        if response.status_code == 401:
            form = {
                "grant_type": "authorization_code",
                "code": "c0de-S3CRET-1234",
                "code_verifier": "v3rifier-S3CRET-5678",
                "client_secret": "cl1ent-S3CRET-90",
            }
            token = yield httpx2.Request("POST", request.url.copy_with(path="/token"), data=form)
            raise RuntimeError(f"Token exchange failed ({token.status_code}): {token.text}")


async def _echoing_token_endpoint(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """An MCP endpoint that answers 401, and a token endpoint that refuses the grant
    quoting the form it was sent."""
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        await _echo_token_requests(reader, writer)


async def _echo_token_requests(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length)
        if head.startswith(b"POST /token "):
            answer = b'{"error": "invalid_grant", "error_description": "no grant ' + body + b'"}'
            writer.write(
                b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer)
            )
        else:
            writer.write(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\n"
                b"Content-Length: 0\r\n\r\n"
            )
        await writer.drain()


def test_what_the_auth_flow_sent_in_a_form_is_masked_in_why_it_failed() -> None:
    # The flow's failure is now in the error's message; a token endpoint that quotes
    # the grant it refused put the code, the PKCE verifier and the client secret there
    # (they travel in a form body, not in a header, so the connection never noted them).
    async def scenario() -> McpError:
        server = await asyncio.start_server(_echoing_token_endpoint, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp", auth=_ExchangesACode())
        try:
            with pytest.raises(McpError) as failed:
                async with McpClient("echo", transport, timeout=10):
                    pass
        finally:
            server.close()
        return failed.value

    message = str(run(scenario()))
    assert "; the auth flow then failed: RuntimeError: Token exchange failed (400)" in message
    assert "S3CRET" not in message, message


def test_the_watched_auth_runs_the_users_flow_in_a_sync_client_too() -> None:
    # httpx2.Auth's own sync flow sends the request unchanged: the wrapper, which
    # overrode only the async one, dropped the user's credentials in a sync client.
    from agcore_tools.mcp._auth_watch import WatchedAuth

    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("authorization"))
        return httpx2.Response(200)

    auth = WatchedAuth(httpx2.BasicAuth("u", "p"), str)
    with httpx2.Client(transport=httpx2.MockTransport(handler), auth=auth) as http:
        http.get("http://mcp.example/")
    assert seen == ["Basic dTpw"]  # base64 of u:p
