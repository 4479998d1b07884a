"""Why an ``auth=`` flow failed, for the error of the request it was answering.

A 401 (or a 403 step-up) starts the flow inside the request that was refused; when the
flow then fails (a sign-in the user refused, a token store that cannot be written, a
token endpoint that says no), its exception leaves the HTTP client above the transport
that recorded the refusal, and the error named only the refusal. :class:`WatchedAuth`
notes the failure on the request's :class:`~agcore_tools.mcp._exchange.HttpExchange`,
so its error names both. (The client of an ``http_client_factory`` runs its auth below
that transport, which then sees the flow's exception itself, and no refusal.)
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from collections.abc import AsyncGenerator, Callable, Generator

import httpx2

from .._redact import mask, secret_values
from ._command_secrets import secret_name
from ._exchange import EXCHANGE, HttpExchange
from ._relisten import describe

__all__ = ["WatchedAuth"]


class WatchedAuth(httpx2.Auth):
    """Runs ``auth``'s flow unchanged; when it fails after the server refused the
    request's credentials, keeps why (shown by ``hide``) on the request's exchange."""

    def __init__(self, auth: httpx2.Auth, hide: Callable[[str], str]) -> None:
        self._auth = auth
        self._hide = hide
        self.requires_request_body = auth.requires_request_body
        self.requires_response_body = auth.requires_response_body

    def sync_auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        # Only the async client notes the failure (the MCP transport is async); here
        # ``httpx2.Auth``'s default would send the request without the user's credentials.
        return self._auth.sync_auth_flow(request)

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        exchange = EXCHANGE.get()
        flow = self._auth.async_auth_flow(request)
        sent: list[str] = []  # what the flow's own requests carried in their bodies
        try:
            _running(exchange, True)
            outgoing = await flow.__anext__()
            while True:
                # Sending the request itself (again, after a 401) is the server's turn.
                _running(exchange, outgoing is not request)
                if outgoing is not request:
                    sent += _form_secrets(outgoing)
                response = yield outgoing
                _running(exchange, True)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            _running(exchange, False)
            return
        except Exception as exc:
            _running(exchange, False)
            if exchange is not None and exchange.status in (401, 403):
                exchange.auth_failure = self._hide(mask(describe(exc), secret_values(sent)))
            raise
        finally:
            # Cancelled (a timeout), the flow stays marked as it was, for the error.
            await flow.aclose()


def _running(exchange: HttpExchange | None, running: bool) -> None:
    if exchange is not None:
        exchange.auth_running = running


_ALSO_SECRET = frozenset({"code_verifier", "client_assertion", "assertion", "device_code"})
"""Form fields of a token request that hold a secret by a name :func:`secret_name`
does not know (``refresh_token``, ``client_secret``, ``code`` it does)."""


def _form_secrets(request: httpx2.Request) -> list[str]:
    """The secrets of a token request the flow sends itself: its form's (a refresh
    token, an authorization code and its PKCE verifier, a ``client_secret_post``
    secret) and the client secret inside a ``Basic`` header, which a token endpoint
    that quotes what it refused would otherwise put in the error.

    Example:
        >>> token = httpx2.Request("POST", "https://as/token", data={
        ...     "grant_type": "refresh_token", "refresh_token": "rt-S3CRET", "code_verifier": "v-S3CRET"},
        ...     headers={"Authorization": "Basic " + base64.b64encode(b"app:cs-S3CRET").decode()})
        >>> sorted(_form_secrets(token))
        ['app:cs-S3CRET', 'cs-S3CRET', 'rt-S3CRET', 'v-S3CRET']
    """
    found: list[str] = []
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "basic":
        try:
            pair = base64.b64decode(credential, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            pair = ""
        found += [pair, urllib.parse.unquote(pair.partition(":")[2])]
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        try:
            form = urllib.parse.parse_qsl(request.content.decode())
        except (httpx2.RequestNotRead, UnicodeDecodeError):
            form = []
        found += [v for k, v in form if secret_name(k) or k.lower() in _ALSO_SECRET]
    return [value for value in found if value]
