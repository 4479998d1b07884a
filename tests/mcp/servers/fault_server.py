"""The fixture server over Streamable HTTP, behind an ASGI layer that misbehaves on request.

Run: ``python fault_server.py --http-fd FD`` on a socket the test already bound (or
with no option, over stdio, for its tools alone). Everything the server does is real (uvicorn, the SDK's session manager); the layer in
front only adds what real deployments do to clients, when a test asks for it through
``POST /control/<what>`` (JSON body):

- ``fail``: answer the next ``times`` POSTs of JSON-RPC ``method`` (``tools/call``, or
  any) with ``status``, ``headers`` and a ``body`` (plain text, "injected failure" unless
  given), before the server sees them; with ``stall_after``, only that many bytes of
  the body are sent, then nothing until the client goes away; with ``repeat``, the body
  is that many times ``body``, and with ``gzip``, it is sent compressed;
- ``fail-delete``: the same for the next session-closing ``DELETE`` (it still ends the
  session; ``stall_after`` too);
- ``wants-initialize``: from now on refuse the requests of ``methods``
  (``["tools/call"]`` unless given) sent outside a session, until ``initialize``, as
  kglite-mcp-server 0.21 does on 2026-07-28 (see ``_gate.py``), after ``delay`` seconds
  (none unless given), with HTTP ``status`` (200 unless given);
- ``token``: from now on require ``Authorization: Bearer <token>`` (401 with a
  ``WWW-Authenticate`` challenge otherwise); ``null`` lifts it;
- ``cut-listen``: end every open ``subscriptions/listen`` response stream, as a
  proxy's idle timeout does;
- ``no-get``: answer the GET stream with 405 (servers may not offer it);
- ``wrong-id``: answer the next ``tools/call`` itself, without the server, with a
  well-formed result ("a stray answer") carrying ``id`` (or, with ``id`` null, the id
  of another ``tools/call`` in flight), as ``application/json`` or SSE (``as``);
- ``malformed``: answer the next ``tools/call`` itself with the text ``raw`` (as
  ``application/json`` or SSE, ``as``);
- ``answer``: the same, ``__ID__`` in ``raw`` standing for the request's id.

With ``gzip``, the answers of ``wrong-id``, ``malformed`` and ``answer`` are sent
compressed (``Content-Encoding: gzip``).

``--mounted`` serves MCP as FastMCP 1.x did, mounted (Starlette's ``Mount``) at ``/mcp``:
Starlette answers ``/mcp`` with a 307 to ``/mcp/``, where the server is.

``--event-store`` keeps every event in memory, so a client can resume a request's SSE
stream after it is cut (``Last-Event-ID``), as servers with resumable streams allow.

``--tls CERT KEY CA`` serves HTTPS (``--client-cert-required``: and asks for a client
certificate signed by CA).

``GET /control/state`` reports the session ids the server issued, how many listen
streams were opened, and how many ``tools/call`` requests the server
accepted (``calls_seen``: answered with a 2xx). Tools added here: ``blob`` (a large text result), ``hold`` and
``hold_read`` (the same, but annotated read-only: safe to call twice), which write
"started" to a marker file, wait (a number of seconds, or until the test creates a
``release`` file), then write "finished" to it, and ``meet``, which
answers once that many calls of it are in at the same time.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import anyio
from _gate import refusal, refuse  # the script's directory is on sys.path
from fixture_server import server
from mcp.server.streamable_http import EventMessage, EventStore
from mcp_types import ToolAnnotations


@server.tool(structured_output=False)
def blob(mebibytes: float) -> str:
    """A text of that many MiB."""
    return "x" * int(mebibytes * 1024 * 1024)


def _mark(marker: str, text: str) -> None:
    """Write ``text`` to ``marker`` aside, then rename it: a test that sees the file
    never reads it empty (``write_text`` creates the file, then writes)."""
    part = Path(f"{marker}.{os.getpid()}.part")
    part.write_text(text)
    os.replace(part, marker)


async def _hold(seconds: float, marker: str, release: str) -> str:
    _mark(marker, "started")  # a few bytes, before the wait
    if release:
        # Ended by the test, not by a race with it: it creates `release` once it has
        # done what must happen while the call runs (killed the first server, say).
        end = time.monotonic() + seconds
        while not Path(release).exists() and time.monotonic() < end:  # noqa: ASYNC110, ASYNC240 - polls a file
            await asyncio.sleep(0.01)
    else:
        await asyncio.sleep(seconds)
    _mark(marker, "finished")  # proof that it ran to the end
    return f"held {seconds}"


@server.tool(structured_output=False)
async def hold(seconds: float, marker: str, release: str = "") -> str:
    """Write 'started' to `marker`, then wait `seconds` (or until `release` exists)."""
    return await _hold(seconds, marker, release)


@server.tool(structured_output=False, annotations=ToolAnnotations(read_only_hint=True))
async def hold_read(seconds: float, marker: str, release: str = "") -> str:
    """Like hold, but read-only (safe to call twice)."""
    return await _hold(seconds, marker, release)


class _Meeting:
    """The calls of ``meet`` in so far."""

    arrived = 0
    full: asyncio.Event | None = None


@server.tool(structured_output=False)
async def meet(count: int, seconds: float) -> str:
    """Answer "met" once `count` calls of meet are in at once, or after `seconds`, how many were."""
    if _Meeting.full is None:
        _Meeting.full = asyncio.Event()
    full = _Meeting.full
    _Meeting.arrived += 1
    if _Meeting.arrived >= count:
        full.set()
    try:
        await asyncio.wait_for(full.wait(), seconds)
    except asyncio.TimeoutError:
        return f"only {_Meeting.arrived} of {count} met"
    return "met"


Scope = dict[str, Any]


class MemoryEvents(EventStore):
    """Every event of every stream, in order, for ``--event-store``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = f"e{len(self.events)}"
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        stream = next((s for e, s, _ in self.events if e == last_event_id), None)
        if stream is None:
            return None
        after = [e for e in self.events if e[1] == stream]
        after = after[[e[0] for e in after].index(last_event_id) + 1 :]
        for event_id, _, message in after:
            if message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


class Faults:
    """The misbehaving layer (see the module docs)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.token: str | None = None
        self.failures: list[dict[str, Any]] = []
        self.no_get = False
        self.sessions: list[str] = []
        self.listens_opened = 0
        self.cut = anyio.Event()
        self.wrong_ids: list[dict[str, Any]] = []
        self.calls_in_flight: list[Any] = []
        self.calls_seen = 0
        self.failed_deletes: list[dict[str, Any]] = []
        self.gate: dict[str, Any] | None = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith("/control/"):
            await self.control(scope, receive, send)
            return
        if self.token is not None and _header(scope, b"authorization") != f"Bearer {self.token}":
            challenge = 'Bearer realm="fault", error="invalid_token"'
            await _respond(send, 401, "invalid token", {"www-authenticate": challenge})
            return
        if scope["method"] == "GET" and self.no_get:
            await _respond(send, 405, "no GET stream here")
            return
        if scope["method"] == "DELETE" and self.failed_deletes:
            failure = self.failed_deletes.pop(0)

            async def dropped(message: dict[str, Any]) -> None:
                pass  # the session ends; the client reads the failure instead

            await self.app(scope, receive, dropped)
            if "stall_after" in failure:
                await _respond_stalled(
                    receive,
                    send,
                    failure["status"],
                    failure.get("body", "injected failure"),
                    failure["stall_after"],
                    failure.get("headers", {}),
                )
            else:
                await _respond_failure(send, failure)
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        try:
            message = json.loads(body)
            method, request_id = message.get("method"), message.get("id")
        except (ValueError, AttributeError):
            method = request_id = None
        failure = self._take_failure(method)
        if failure is not None:
            body = failure.get("body", "injected failure")
            if "stall_after" in failure:
                await _respond_stalled(
                    receive,
                    send,
                    failure["status"],
                    body,
                    failure["stall_after"],
                    failure.get("headers", {}),
                )
            else:
                await _respond_failure(send, failure)
            return
        gate = self.gate
        refused = refusal(scope, body, gate.get("methods", ["tools/call"])) if gate else None
        if gate is not None and refused is not None:
            await refuse(send, refused, gate.get("delay", 0), gate.get("status", 200))
            return
        replay = _replay(body, receive)
        if method == "subscriptions/listen":
            self.listens_opened += 1
            await self.serve_listen(scope, replay, send)
            return
        if method == "tools/call" and self.wrong_ids:
            await self.answer_wrongly(self.wrong_ids.pop(0), request_id, send)
            return
        if method == "tools/call":
            self.calls_in_flight.append(request_id)
        try:
            await self.app(scope, replay, self._watch_sessions(send, method))
        finally:
            if method == "tools/call":
                self.calls_in_flight.remove(request_id)

    async def answer_wrongly(self, fault: dict[str, Any], request_id: Any, send: Any) -> None:
        wrong = fault.get("id")
        if wrong is None and "raw" not in fault:
            [wrong] = [i for i in self.calls_in_flight if i != request_id]
        result = {"content": [{"type": "text", "text": "a stray answer"}], "isError": False}
        answer = fault.get("raw") or json.dumps({"jsonrpc": "2.0", "id": wrong, "result": result})
        answer = answer.replace("__ID__", json.dumps(request_id))
        if fault.get("as") == "json":
            body, headers = answer, {"content-type": "application/json"}
        else:
            body, headers = (
                f"event: message\ndata: {answer}\n\n",
                {"content-type": "text/event-stream"},
            )
        if fault.get("gzip"):
            await _respond(
                send, 200, gzip.compress(body.encode()), {**headers, "content-encoding": "gzip"}
            )
        else:
            await _respond(send, 200, body, headers)

    def _take_failure(self, method: str | None) -> dict[str, Any] | None:
        for failure in self.failures:
            if failure.get("method") in (None, method):
                failure["times"] -= 1
                if failure["times"] <= 0:
                    self.failures.remove(failure)
                return failure
        return None

    def _watch_sessions(self, send: Any, method: str | None) -> Any:
        async def watched(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                if method == "tools/call" and message["status"] < 400:
                    self.calls_seen += 1  # accepted (not a 404 for an unknown session)
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id" and value.decode() not in self.sessions:
                        self.sessions.append(value.decode())
            await send(message)

        return watched

    async def serve_listen(self, scope: Scope, receive: Any, send: Any) -> None:
        started = finished = False
        cut = self.cut

        async def watched(message: dict[str, Any]) -> None:
            nonlocal started, finished
            started = started or message["type"] == "http.response.start"
            finished = message["type"] == "http.response.body" and not message.get("more_body")
            await send(message)

        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await self.app(scope, receive, watched)
                tg.cancel_scope.cancel()

            tg.start_soon(run)
            await cut.wait()
            tg.cancel_scope.cancel()
        if started and not finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def control(self, scope: Scope, receive: Any, send: Any) -> None:
        what = scope["path"].removeprefix("/control/")
        body = await _read_body(receive)
        options = json.loads(body) if body else {}
        if what == "fail":
            options.setdefault("times", 1)
            self.failures.append(options)
        elif what == "fail-delete":
            self.failed_deletes.append(options)
        elif what == "wants-initialize":
            self.gate = options
        elif what == "token":
            self.token = options.get("token")
        elif what == "cut-listen":
            self.cut.set()
            self.cut = anyio.Event()
        elif what == "no-get":
            self.no_get = True
        elif what in ("wrong-id", "malformed", "answer"):
            self.wrong_ids.append(options)
        elif what != "state":
            await _respond(send, 404, f"no control {what!r}")
            return
        state = {
            "sessions": self.sessions,
            "listens_opened": self.listens_opened,
            "calls_seen": self.calls_seen,
        }
        await _respond(send, 200, json.dumps(state), {"content-type": "application/json"})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return str(value.decode())
    return None


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """``receive`` again, the body already read from it given once more."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return dict(await receive())  # then the client's disconnect, when it comes

    return replay


async def _respond(
    send: Any, status: int, text: str | bytes, headers: dict[str, str] | None = None
) -> None:
    headers = {"content-type": "text/plain", **(headers or {})}
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        }
    )
    body = text.encode() if isinstance(text, str) else text
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _respond_failure(send: Any, failure: dict[str, Any]) -> None:
    body = failure.get("body", "injected failure").encode() * failure.get("repeat", 1)
    headers = dict(failure.get("headers", {}))
    if failure.get("gzip"):
        body = gzip.compress(body, compresslevel=1)
        headers["content-encoding"] = "gzip"
    await _respond(send, failure["status"], body, headers)


async def _respond_stalled(
    receive: Any, send: Any, status: int, text: str, sent: int, headers: dict[str, str]
) -> None:
    """The answer of a server, gateway or proxy that sends the status line, the headers
    (with the ``Content-Length`` of all of ``text``) and ``sent`` bytes of the body, then
    nothing more until the client goes away."""
    body = text.encode()
    headers = {"content-type": "text/plain", **headers, "content-length": str(len(body))}
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        }
    )
    await send({"type": "http.response.body", "body": body[:sent], "more_body": True})
    while (await receive())["type"] != "http.disconnect":
        pass


def mounted(faults: Faults) -> Any:
    """``faults`` as FastMCP 1.x served its MCP endpoint: a Starlette ``Mount`` at
    ``/mcp``, whose router redirects ``/mcp`` to ``/mcp/`` (307, an absolute URL)."""
    from starlette.routing import Mount, Router
    from starlette.types import Receive, Send
    from starlette.types import Scope as Mounted

    async def at_mcp(scope: Mounted, receive: Receive, send: Send) -> None:
        # The SDK's app routes /mcp alone; the mount hands it /mcp/.
        await faults({**scope, "path": "/mcp", "root_path": ""}, receive, send)

    async def control(scope: Mounted, receive: Receive, send: Send) -> None:
        await faults(dict(scope), receive, send)

    router = Router([Mount("/mcp", app=at_mcp), Mount("/control", app=control)])

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await faults(scope, receive, send)  # the SDK's session manager starts there
        else:
            await router(scope, receive, send)

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http-fd", type=int, default=None)
    parser.add_argument("--tls", nargs=3, metavar=("CERT", "KEY", "CA"), default=None)
    parser.add_argument("--client-cert-required", action="store_true")
    parser.add_argument("--event-store", action="store_true")
    parser.add_argument("--mounted", action="store_true")
    options = parser.parse_args()
    if options.http_fd is None:
        server.run()
        return
    import ssl

    import uvicorn

    sock = socket.socket(fileno=options.http_fd)
    events = MemoryEvents() if options.event_store else None
    faults = Faults(server.streamable_http_app(event_store=events))
    app = mounted(faults) if options.mounted else faults
    tls: dict[str, Any] = {}
    if options.tls:
        cert, key, ca = options.tls
        tls = {"ssl_certfile": cert, "ssl_keyfile": key, "ssl_ca_certs": ca}
        if options.client_cert_required:
            tls["ssl_cert_reqs"] = ssl.CERT_REQUIRED
    config = uvicorn.Config(app, log_level="warning", lifespan="on", **tls)
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
