"""The Streamable HTTP transport: the SDK's client over an httpx2 client we configure.

httpx2 is the MCP SDK's HTTP client; passing a configured ``httpx2.AsyncClient`` is the
SDK's documented way to set headers, TLS and the rest. Every request goes through
:class:`_Guard`, an httpx2 transport that

- records a failed answer's status, headers and the reason its body gives (what of it
  comes within a second) in the sender's :class:`HttpExchange` (the SDK keeps none of
  them);
- notes the credentials each request carries (:class:`SentSecrets`), whatever put them
  there (an ``auth=`` flow's token), so that what the server writes back is masked;
- once the session is up, turns a network error on one POST into a JSON-RPC error for
  that request alone. The SDK lets it escape the POST's task, which ends the whole
  transport and fails every call in flight. During start-up it is left alone: the
  SDK's version negotiation must see a network error as one, not as a protocol answer;
- fails requests at once when the connection has been given up (a frozen server
  would hold the SDK's closing ``DELETE`` until the HTTP timeout), and gives that
  ``DELETE`` :data:`CLOSE_TIMEOUT` seconds at most in any case, its answer's body
  included, so ``close()`` is bounded even before a frozen server has been noticed;
- reads the answer to each POSTed request before the SDK does, and replaces an answer
  carrying another id by an error answer for the request (see ``_matching``), as it
  does an ``application/json`` answer over ``max_message_size`` as soon as it passes
  it (an SSE event over it fails in the SDK); a compressed answer is decoded here, by
  httpx2's own decoders, so that what is checked and counted is what the SDK reads
  (httpx2 would decode it after this transport, a 300 KiB gzip body into 300 MiB);
  a body the SDK reads whole only for its status (an error's, a redirect's, the closing
  ``DELETE``'s) is decoded here too, and read no further than ``max_message_size``;
- hands the GET stream of a 2025-11-25 session to a :class:`ListenStream`, which
  keeps it coming back where the SDK would give it up.

What it does for the MCP endpoint, it does where the endpoint redirects to on its own
origin as well, as the SDK follows such a redirect: FastMCP 1.x answers ``/mcp`` with
a 307 to ``/mcp/``.

Behind it, :class:`_Routes` sends each request the way its own URL calls for: through
the ``proxy`` given, else through the proxy the environment names for that host (an
OAuth token endpoint may be on the other side of ``NO_PROXY`` from the MCP server),
naming the proxy in a network error.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

import httpx2
from pydantic_core import from_json

from .._aio import with_timeout
from .._redact import url_without_secrets
from ..error import ToolConfigError
from ._auth_watch import WatchedAuth
from ._bodies import BodyCut, decode_here, due_by, peek
from ._exchange import EXCHANGE, HttpExchange, parse_retry_after, server_reason
from ._listen import ListenStream, StreamEvent
from ._matching import JsonBodyCheck, SseCheck
from ._stderr import SentSecrets
from .transport import StreamableHttpTransport

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = ["CLOSE_TIMEOUT", "open_streamable_http"]

CLOSE_TIMEOUT = 1.0
"""Seconds the closing ``DELETE`` of a session may wait for its answer. A server
answers it at once; one that does not has its session ended by its own idle timeout."""

_SESSION_HEADER = "mcp-session-id"
_CONNECTION_CLOSED = -32000  # mcp_types.CONNECTION_CLOSED, the SDK's code for "no answer"
_BODY_PEEK = 1024
"""Bytes of a failed answer's body read for its reason (the rest is left to the SDK)."""
_BODY_WAIT = 1.0
"""Seconds a failed answer's body may take to come, for its reason. The status is the
error; the reason only adds to it, so a server, gateway or proxy that sends the status
line and headers and then stalls has its error reported with what came by then, not
held until the call's own timeout (a ``McpTimeoutError`` that lost the status)."""
_LIMITS = httpx2.Limits(max_connections=None, max_keepalive_connections=20)
"""No cap on connections: each call in flight holds one for its response stream, any
number of tasks may call at once, and each call is bounded by its own timeout. A cap
(httpx2's default is 100) only made the calls beyond it wait, then fail unsent."""


_REDIRECTS_KEPT = 8
"""Places the endpoint redirected to that :class:`_Guard` watches, the latest."""

_Place: TypeAlias = tuple[str, str, int | None, str]
"""A URL's scheme, host, port and path: a request is to the endpoint if these match."""


def _place(url: httpx2.URL) -> _Place:
    return (url.scheme, url.host, url.port, url.path)


def _keeps_method(status: int, method: str) -> bool:
    """Whether httpx2 sends the request that follows a ``status`` redirect of a
    ``method`` request with the same method: the SDK follows no other.

    Example:
        >>> _keeps_method(307, "POST"), _keeps_method(302, "POST"), _keeps_method(301, "GET")
        (True, False, True)
    """
    if status in (307, 308):
        return True
    if status in (302, 303):
        return method in ("GET", "HEAD")
    return status == 301 and method != "POST"


def _same_origin(url: httpx2.URL, target: httpx2.URL) -> bool:
    """Whether a redirect from ``url`` to ``target`` is one the SDK follows: to the same
    scheme, host and port, or the https upgrade of the same host on the default ports
    (``mcp.shared._httpx_utils``; httpx2 keeps the ``Authorization`` header then)."""
    if (url.scheme, url.host, url.port) == (target.scheme, target.host, target.port):
        return True
    upgrade = (url.scheme, url.port, target.scheme, target.port) == ("http", None, "https", None)
    return upgrade and url.host == target.host


class _Guard(httpx2.AsyncBaseTransport):
    """Forwards requests to ``send``, watching what comes back (see the module docs)."""

    def __init__(
        self,
        endpoint: httpx2.URL,
        send: Callable[[httpx2.Request], Awaitable[httpx2.Response]],
        close: Callable[[], Awaitable[None]],
        isolate: Callable[[], bool],
        given_up: Callable[[], bool],
        secrets: SentSecrets,
        limit: int | None = None,
        listen: ListenStream | None = None,
    ) -> None:
        # Only MCP messages to the endpoint are watched, not an auth flow's own requests
        # (a token endpoint, client registration) that go through the same client; and
        # where the endpoint redirects to, as the SDK follows (see _note_redirect).
        self._endpoint = _place(endpoint)
        self._redirected: dict[_Place, None] = {}
        self._where = f"MCP server at {url_without_secrets(str(endpoint))}"  # logged
        self._limit = limit
        self._send = send
        self._close = close
        self._isolate = isolate
        self._given_up = given_up
        self._secrets = secrets
        self._listen = listen

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._given_up():
            raise httpx2.ConnectError("the client gave this connection up", request=request)
        self._secrets.note(request.headers.multi_items())
        listen = self._listen
        place = _place(request.url)
        to_endpoint = place == self._endpoint or place in self._redirected
        if request.method == "GET" and listen is not None and to_endpoint and listen.owns(request):
            response = await listen.send(request, self._send, _describe)
            if 300 <= response.status_code < 400:
                self._cut(request, response)  # the SDK drains a redirect's body
            self._note_redirect(request, response)
            return response
        exchange = EXCHANGE.get()
        mcp_post = request.method == "POST" and to_endpoint
        if not mcp_post:
            exchange = None
        try:
            if request.method == "DELETE" and to_endpoint:
                response = await self._send_delete(request)
            else:
                response = await self._send(request)
        except httpx2.TransportError as exc:
            if exchange is None or not self._isolate():
                raise
            exchange.pool_full = isinstance(exc, httpx2.PoolTimeout)
            exchange.network_error = _pool_full(request) if exchange.pool_full else _describe(exc)
            # A connection that was never made carried nothing; a pooled connection
            # found dead on use fails with a read or write error instead.
            exchange.never_sent = exchange.pool_full or isinstance(
                exc, (httpx2.ConnectError, httpx2.ConnectTimeout)
            )
            return _no_answer(request, exchange.network_error)
        if mcp_post:
            decode_here(request, response)
        if exchange is not None:
            if response.status_code >= 400:
                await _record(exchange, request, response, self._secrets)
            elif exchange.status is not None:
                # An auth flow's retry (after a 401) was answered: forget the refusal.
                exchange.status = None
                exchange.www_authenticate = None
        if mcp_post and response.status_code < 300:
            self._check_answer(request, response)
        elif to_endpoint:
            if mcp_post or request.method == "DELETE" or 300 <= response.status_code < 400:
                # The SDK reads these bodies whole: an error's for the JSON-RPC error in
                # it, a redirect's to drain it (before it follows), the closing DELETE's
                # to drop it.
                self._cut(request, response)
            self._note_redirect(request, response)
        return response

    def _cut(self, request: httpx2.Request, response: httpx2.Response) -> None:
        """Have ``response``'s body read no further than the limit, counted decoded (its
        status, or its redirect, is what counts: a body past the limit adds only memory)."""
        if self._limit is None:
            return
        decode_here(request, response)  # else httpx2 inflates it after the cut
        if isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _Checked(response.stream, BodyCut(self._limit))

    def _note_redirect(self, request: httpx2.Request, response: httpx2.Response) -> None:
        """Watch where the endpoint redirects to as the endpoint itself: FastMCP 1.x
        answers ``/mcp`` with a 307 to ``/mcp/``, which the SDK follows, and an error
        there must be read as one at the endpoint. Only a redirect the SDK follows (the
        same method, to the same origin or its https upgrade); it sends nothing
        elsewhere, so nothing else is watched (a login page a 302 points to)."""
        location = response.headers.get("location")
        if location is None or not _keeps_method(response.status_code, request.method):
            return
        try:
            target = request.url.join(location)
        except httpx2.InvalidURL:
            return  # the SDK's client refuses such a redirect itself
        if not _same_origin(request.url, target):
            return
        redirected = self._redirected
        redirected[_place(target)] = None
        if len(redirected) > _REDIRECTS_KEPT:  # a server that redirects to ever new paths
            del redirected[next(iter(redirected))]

    def _check_answer(self, request: httpx2.Request, response: httpx2.Response) -> None:
        """Have the answer to a POSTed request checked for its id as the SDK reads it.

        The SDK cannot do it: reading an SSE stream, it writes the request's id over the
        id of every answer (``StreamableHTTPTransport._handle_sse_event``), so an answer
        to another request, or to none, reaches the waiting call as its own. Proposed
        upstream fix: compare ``message.id`` with ``original_request_id`` there, drop a
        mismatched answer with a WARNING and resolve the request with an error, and do
        the same in ``_handle_json_response`` (which passes a stray id on, where the
        dispatcher drops it and the request waits out its timeout). The id is rewritten
        only to resume a stream, where it needs no rewriting either.
        """
        stream = response.stream
        if not isinstance(stream, httpx2.AsyncByteStream):
            return
        try:
            sent = from_json(request.content)
        except (ValueError, httpx2.RequestNotRead):
            return
        if not isinstance(sent, dict) or "method" not in sent or sent.get("id") is None:
            return  # a notification, or an answer to the server's own request
        kind = response.headers.get("content-type", "").lower()
        check: JsonBodyCheck | SseCheck
        if kind.startswith("application/json"):
            check = JsonBodyCheck(sent["id"], self._where, self._limit)
        elif kind.startswith("text/event-stream"):
            check = SseCheck(sent["id"], self._where, self._limit)
        else:
            return
        response.stream = _Checked(stream, check)

    async def _send_delete(self, request: httpx2.Request) -> httpx2.Response:
        late = f"no answer to the session's closing DELETE within {CLOSE_TIMEOUT:g} s"
        deadline = asyncio.get_running_loop().time() + CLOSE_TIMEOUT
        try:
            response = await with_timeout(self._send(request), CLOSE_TIMEOUT)
        except TimeoutError as exc:
            raise httpx2.ReadTimeout(late, request=request) from exc
        # The SDK reads the body whole before close() goes on: its headers in time are
        # not enough.
        due_by(request, response, deadline, late)
        return response

    async def aclose(self) -> None:
        await self._close()


class _Checked(httpx2.AsyncByteStream):
    """A response body passed through a :class:`JsonBodyCheck` or :class:`SseCheck`
    (or cut)."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, check: JsonBodyCheck | SseCheck | BodyCut
    ) -> None:
        self._inner = inner
        self._check = check

    async def __aiter__(self) -> AsyncIterator[bytes]:
        check = self._check
        async for chunk in self._inner:
            passed = check.feed(chunk)
            if passed:
                yield passed
            if check.done:
                return  # the rest is not read: closing the response drops its connection
        rest = check.end()
        if rest:
            yield rest

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _record(
    exchange: HttpExchange,
    request: httpx2.Request,
    response: httpx2.Response,
    secrets: SentSecrets,
) -> None:
    status = response.status_code
    exchange.status = status
    exchange.reason = response.reason_phrase
    exchange.retry_after = parse_retry_after(response.headers.get("retry-after"))
    exchange.www_authenticate = response.headers.get("www-authenticate")
    body = await peek(response, _BODY_PEEK, _BODY_WAIT)
    kind = response.headers.get("content-type", "")
    exchange.server_reason = server_reason(body, kind, response.reason_phrase, secrets.mask)
    if _SESSION_HEADER not in request.headers:
        return
    if status == 404:
        exchange.session_gone = True  # the spec's answer for a session it does not know
    elif status == 400:
        # Servers written before the spec settled on 404 answer 400 "No valid session
        # ID provided".
        exchange.session_gone = b"session" in body.lower()


def _no_answer(request: httpx2.Request, reason: str) -> httpx2.Response:
    """The JSON-RPC error the SDK hands the waiting caller, in place of an answer."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": _CONNECTION_CLOSED, "message": reason}}
    return httpx2.Response(
        599,
        headers={"content-type": "application/json"},
        content=json.dumps(error).encode(),
        request=request,
        # What httpx2's request log shows for it.
        extensions={"reason_phrase": b"no answer (the request failed in agcore_tools' client)"},
    )


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else '(no message)'}"


def _pool_full(request: httpx2.Request) -> str:
    waited = request.extensions.get("timeout", {}).get("pool")
    within = f" within {waited:g} s" if isinstance(waited, (int, float)) else ""
    return (
        f"no connection of the HTTP client came free{within}, all being in use (raise "
        "httpx2.Limits(max_connections=...) on the client the http_client_factory makes)"
    )


def _environment_proxy(url: str) -> str | None:
    """The proxy the environment (``HTTPS_PROXY``, ``NO_PROXY``...) names for ``url``:
    ``http://`` when it names none, as httpx reads ``HTTP_PROXY=proxy:3128``."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    return _with_scheme(proxy) if proxy else None


def _with_scheme(proxy: str) -> str:
    return proxy if "://" in proxy else f"http://{proxy}"


def _proxy_origin(scheme: str, proxy: str) -> str:
    """Where the environment's ``proxy`` for ``scheme`` came from, for messages."""
    variables = urllib.request.getproxies_environment()
    for key in (scheme, "all"):
        value = variables.get(key)
        if value and _with_scheme(value) == proxy:
            return f"{key.upper()}_PROXY"
    return "the system's proxy settings"


class _Routes:
    """Sends each request directly or through its proxy: ``proxy`` if given (as httpx's
    ``proxy=`` does), else the one the environment names for the request's own scheme
    and host, looked up once per origin, as httpx2 does with ``trust_env``. A network
    error through a proxy names it (without credentials) and where it came from."""

    def __init__(self, tls: ssl.SSLContext | bool, proxy: str | None) -> None:
        self._tls = tls
        self._proxy = proxy
        self._by_origin: dict[tuple[str, str, int | None], tuple[str | None, str]] = {}
        self._by_proxy: dict[str | None, httpx2.AsyncHTTPTransport] = {}

    def route(self, url: httpx2.URL) -> tuple[str | None, str]:
        """The proxy for ``url`` (None: direct), and where it came from."""
        if self._proxy is not None:
            return self._proxy, "StreamableHttpTransport(proxy=...)"
        origin = (url.scheme, url.host, url.port)
        found = self._by_origin.get(origin)
        if found is None:
            proxy = _environment_proxy(str(url))
            found = (proxy, "" if proxy is None else _proxy_origin(url.scheme, proxy))
            self._by_origin[origin] = found
        return found

    async def send(self, request: httpx2.Request) -> httpx2.Response:
        proxy, origin = self.route(request.url)
        transport = self._by_proxy.get(proxy)
        if transport is None:
            transport = httpx2.AsyncHTTPTransport(verify=self._tls, proxy=proxy, limits=_LIMITS)
            self._by_proxy[proxy] = transport
        try:
            return await transport.handle_async_request(request)
        except _THROUGH_PROXY as exc:
            if proxy is None:
                raise
            text = str(exc).strip().splitlines()
            said = text[0] if text else "(no message)"
            shown = url_without_secrets(proxy)
            raise type(exc)(
                f"{said} (via the proxy {shown}, from {origin})", request=request
            ) from exc

    async def aclose(self) -> None:
        transports = list(self._by_proxy.values())
        self._by_proxy.clear()
        for transport in transports:
            await transport.aclose()


_THROUGH_PROXY = (
    httpx2.NetworkError,
    httpx2.ProxyError,
    httpx2.RemoteProtocolError,
    httpx2.ConnectTimeout,
    httpx2.ReadTimeout,
    httpx2.WriteTimeout,
)
"""What a dead, misspelled or failing proxy gives (not a pool wait, or a bad request)."""


def _tls_context(transport: StreamableHttpTransport) -> ssl.SSLContext | bool:
    """``verify`` and ``cert`` as httpx2 wants them now: one SSL context (or a bool).

    A path that names no file, or a file that is no certificate (or key), is reported
    with the setting's name and the path: ``ssl`` names neither."""
    verify, cert = transport.verify, transport.cert
    if isinstance(verify, bool) and cert is None:
        return verify
    if isinstance(verify, str):
        _check_path("verify", "CA file or directory", verify)
        try:
            if os.path.isdir(verify):
                context = ssl.create_default_context(capath=verify)
            else:
                context = ssl.create_default_context(cafile=verify)
        except (ssl.SSLError, OSError) as exc:
            raise ToolConfigError(
                f"StreamableHttpTransport verify: cannot load the CA certificates in "
                f"{verify!r}: {_describe(exc)}"
            ) from exc
    elif isinstance(verify, bool):
        context = httpx2.create_ssl_context(verify=verify)  # a new one, httpx2's defaults
    else:
        return verify  # the caller's own context (with its client certificate, if any)
    if cert is not None:
        files = (cert,) if isinstance(cert, str) else tuple(cert)
        for path in files:
            _check_path("cert", "client certificate or key file", path)
        try:
            context.load_cert_chain(*files)
        except (ssl.SSLError, OSError) as exc:
            raise ToolConfigError(
                f"StreamableHttpTransport cert: cannot load the client certificate from "
                f"{', '.join(map(repr, files))}: {_describe(exc)}"
            ) from exc
    return context


def _check_path(setting: str, what: str, path: str) -> None:
    if os.path.exists(path):
        return
    where = "" if os.path.isabs(path) else f" (relative to {os.getcwd()!r})"
    raise ToolConfigError(
        f"StreamableHttpTransport {setting}: no such {what} {path!r}{where}; correct the path"
    )


def _build_client(
    transport: StreamableHttpTransport,
    isolate: Callable[[], bool],
    given_up: Callable[[], bool],
    listen: ListenStream | None,
    secrets: SentSecrets,
) -> tuple[httpx2.AsyncClient, httpx2.AsyncClient | None]:
    """The client for the SDK, and the user's own client behind it (if a factory made one)."""
    headers = dict(transport.headers or {})
    timeout = httpx2.Timeout(transport.http_timeout, read=transport.sse_read_timeout)
    endpoint = httpx2.URL(transport.url)
    factory = transport.http_client_factory
    limit = transport.max_message_size
    if factory is None:
        routes = _Routes(_tls_context(transport), transport.proxy)
        guard = _Guard(
            endpoint, routes.send, routes.aclose, isolate, given_up, secrets, limit, listen
        )
        auth = None if transport.auth is None else WatchedAuth(transport.auth, secrets.mask)
        client = httpx2.AsyncClient(headers=headers, auth=auth, timeout=timeout, transport=guard)
        return client, None
    made = factory(headers=headers, timeout=timeout, auth=transport.auth)
    if not isinstance(made, httpx2.AsyncClient):
        raise ToolConfigError(
            f"http_client_factory must return an httpx2.AsyncClient, got {type(made).__name__}"
        )
    user: httpx2.AsyncClient = made

    async def send(request: httpx2.Request) -> httpx2.Response:
        # The user's client adds its auth, hooks, TLS and proxies; redirects stay the
        # SDK's to follow (it checks they keep to the endpoint's origin).
        try:
            return await user.send(request, stream=True, follow_redirects=False)
        finally:
            secrets.note(request.headers.multi_items())  # with what its auth added

    async def close() -> None:
        pass  # closed by open_streamable_http, which owns it

    guard = _Guard(endpoint, send, close, isolate, given_up, secrets, limit, listen)
    # No auth here: the user's client applies the one it was given.
    outer = httpx2.AsyncClient(headers=user.headers, timeout=user.timeout, transport=guard)
    return outer, user


@asynccontextmanager
async def open_streamable_http(
    transport: StreamableHttpTransport,
    isolate: Callable[[], bool] = lambda: False,
    given_up: Callable[[], bool] = lambda: False,
    on_listen: StreamEvent | None = None,
    secrets: SentSecrets | None = None,
) -> AsyncIterator[TransportStreams]:
    """Yield the (read, write) message streams of a Streamable HTTP connection.

    ``isolate`` tells whether a network error on one request should fail that request
    alone (once the session is up); ``given_up`` whether to refuse every request;
    ``on_listen`` hears what becomes of the GET stream (see :class:`ListenStream`);
    ``secrets`` collects the credentials the requests carry.
    """
    from mcp.client.streamable_http import streamable_http_client

    listen = ListenStream(on_listen, given_up) if on_listen is not None else None
    if secrets is None:
        secrets = SentSecrets(transport)
    http, user = _build_client(transport, isolate, given_up, listen, secrets)
    async with AsyncExitStack() as stack:
        if user is not None:
            await stack.enter_async_context(user)
        await stack.enter_async_context(http)
        streams: Any = await stack.enter_async_context(
            streamable_http_client(
                transport.url, http_client=http, max_sse_event_size=transport.max_message_size
            )
        )
        yield streams
