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

from collections.abc import AsyncGenerator, Callable

import httpx2

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

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        exchange = EXCHANGE.get()
        flow = self._auth.async_auth_flow(request)
        try:
            _running(exchange, True)
            outgoing = await flow.__anext__()
            while True:
                # Sending the request itself (again, after a 401) is the server's turn.
                _running(exchange, outgoing is not request)
                response = yield outgoing
                _running(exchange, True)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            _running(exchange, False)
            return
        except Exception as exc:
            _running(exchange, False)
            if exchange is not None and exchange.status in (401, 403):
                exchange.auth_failure = self._hide(describe(exc))
            raise
        finally:
            # Cancelled (a timeout), the flow stays marked as it was, for the error.
            await flow.aclose()


def _running(exchange: HttpExchange | None, running: bool) -> None:
    if exchange is not None:
        exchange.auth_running = running
