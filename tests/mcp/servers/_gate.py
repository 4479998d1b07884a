"""Refusing requests until ``initialize`` over Streamable HTTP, as kglite-mcp-server 0.21
does on 2026-07-28 (``initialize_gate.py`` does the same over stdio): what the test
servers share.

A request is refused when it is a JSON-RPC request of one of the gated methods sent
outside a session (without ``Mcp-Session-Id``: a 2026-07-28 request, or one sent
before an ``initialize``), with -32600 "initialize is required", unrun.
:class:`InitializeGate` is an ASGI layer doing it; :func:`refusal` is the check, for a
layer that reads the body itself.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import anyio

REFUSAL = {"code": -32600, "message": "initialize is required"}


def refusal(scope: dict[str, Any], body: bytes, methods: Collection[str]) -> bytes | None:
    """The answer (a JSON body) refusing the request ``body`` POSTed with ``scope``, when
    it is gated; else None."""
    if any(name.lower() == b"mcp-session-id" for name, _ in scope["headers"]):
        return None
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("id") is None:
        return None
    if message.get("method") not in methods:
        return None
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": REFUSAL}).encode()


async def refuse(send: Any, answer: bytes, delay: float = 0.0, status: int = 200) -> None:
    """Send ``answer`` (from :func:`refusal`) as an ``application/json`` answer with
    ``status``, after ``delay`` seconds."""
    await anyio.sleep(delay)
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": answer, "more_body": False})


class InitializeGate:
    """An ASGI layer in front of ``app`` that refuses the requests of ``methods`` sent
    outside a session (see the module docs)."""

    def __init__(self, app: Any, methods: Collection[str]) -> None:
        self.app = app
        self.methods = methods

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        answer = refusal(scope, body, self.methods)
        if answer is not None:
            await refuse(send, answer)
            return
        given = False

        async def replay() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            return dict(await receive())  # then the client's disconnect, when it comes

        await self.app(scope, replay, send)
