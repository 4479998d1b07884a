"""The scripted server: script items, the HTTP server thread and the reply formats."""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from typing_extensions import Self

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "CapturedRequest",
    "Pause",
    "RawResponse",
    "RawStream",
    "Reply",
    "ScriptItem",
    "ScriptedChatServer",
]

from .._aio import with_timeout
from ..error import LlmUsageError, _ScriptedServerError
from ._formats import (
    CREATED,
    prompt_tokens,
    reply_chunks,
    reply_json,
    responses_events,
    responses_json,
)
from ._script import (
    CapturedRequest,
    Pause,
    RawResponse,
    RawStream,
    Reply,
    ScriptItem,
    described,
    tool_call_triples,
)

logger = logging.getLogger("agcore_tools.testing")

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 10.0
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 408: "Request Timeout"}
_REASONS.update({409: "Conflict", 429: "Too Many Requests", 500: "Internal Server Error"})
_REASONS.update({502: "Bad Gateway", 503: "Service Unavailable"})


class ScriptedChatServer:
    """A Chat Completions server on 127.0.0.1 that answers from a script.

    Start and stop it with ``with`` (or ``async with``, or :meth:`start`/:meth:`stop`).
    With ``repeat=True`` the script starts over when exhausted; otherwise a request
    past its end gets a 500 whose message says so. A script function that raises, or an
    item that cannot be served, also gets a 500 naming the exception, marked not to be
    retried (``x-should-retry: false``); the exception is kept in the request's
    :attr:`~CapturedRequest.script_error`. A script that is not a list of items (one
    :class:`Reply`, a string), or an item made wrong (``reply_tool_calls`` given one
    tuple, a text that is not a string, a status that is not an int), raises
    :class:`~agcore_tools.LlmUsageError` (a ``TypeError``) when it is made. Every
    response and chunk is ``created`` at
    the same fixed time, ``1700000000``, so a run recorded against the server twice
    gives the same responses.

    Example:
        >>> server = ScriptedChatServer([ScriptedChatServer.reply_text("Hello!")])
        >>> with server:
        ...     server.base_url.startswith("http://127.0.0.1:")
        True

        Without ``with``, and with the script extended by :meth:`add`, which also works
        while serving; every request is captured:

        >>> import asyncio
        >>> server = ScriptedChatServer().start()
        >>> server.add(ScriptedChatServer.reply_text("Hi"))
        >>> async def ask() -> str | None:
        ...     async with server.client() as client:
        ...         reply = await client.chat.completions.create(
        ...             model="m", messages=[{"role": "user", "content": "Hello"}]
        ...         )
        ...         return reply.choices[0].message.content
        >>> asyncio.run(ask())
        'Hi'
        >>> server.requests[0].json["messages"], server.requests[0].stream
        ([{'role': 'user', 'content': 'Hello'}], False)
        >>> server.stop()
    """

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        repeat: bool = False,
        model: str = "scripted-model",
        chunk_chars: int = 16,
        count_prompt: bool = False,
    ) -> None:
        self.model = model
        """The ``model`` field of every response."""
        self.count_prompt = count_prompt
        """Whether a reply without its own ``usage`` reports ``prompt_tokens`` counted
        from the request: one token per 4 bytes of the whole body as received, rounded
        up (else a fixed 10)."""
        self.chunk_chars = chunk_chars
        """Characters of text or arguments per streamed chunk."""
        self.repeat = repeat
        """Whether the script starts over when exhausted."""
        self.requests: list[CapturedRequest] = []
        """Every request received, in order."""
        self._script: collections.deque[ScriptItem] = collections.deque(_items(script))
        self._played: list[ScriptItem] = []
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.port = 0
        """The port it listens on (0 until started)."""

    # -- script building -------------------------------------------------------------

    @staticmethod
    def reply_text(
        text: str,
        *,
        reasoning: str | None = None,
        usage: Mapping[str, int] | None = None,
        finish_reason: str | None = None,
    ) -> Reply:
        """A text answer.

        Example:
            >>> ScriptedChatServer.reply_text("Hi").text
            'Hi'
        """
        return Reply(text, (), reasoning, finish_reason, usage)

    @staticmethod
    def reply_tool_calls(
        calls: Iterable[tuple[str, Any] | tuple[str, Any, str | None]],
        *,
        text: str | None = None,
        reasoning: str | None = None,
        usage: Mapping[str, int] | None = None,
        finish_reason: str | None = None,
    ) -> Reply:
        """An answer asking for tool calls, given as ``(name, arguments[, id])``.

        Example:
            >>> ScriptedChatServer.reply_tool_calls([("add", {"a": 1, "b": 2})]).tool_calls
            (('add', {'a': 1, 'b': 2}, None),)
        """
        triples = tool_call_triples(calls, "reply_tool_calls")
        return Reply(text, triples, reasoning, finish_reason, usage)

    @staticmethod
    def error(
        status: int,
        message: str = "scripted error",
        *,
        headers: Mapping[str, str] | None = None,
        type: str = "server_error",
    ) -> RawResponse:
        """An error response in OpenAI's format.

        Example:
            >>> ScriptedChatServer.error(429, headers={"Retry-After": "1"}).status
            429
        """
        for what, value in (("message", message), ("type", type)):
            if not isinstance(value, str):
                raise LlmUsageError(
                    f"ScriptedChatServer.error()'s {what} is a str, got {described(value)}"
                )
        body = {"error": {"message": message, "type": type, "code": None, "param": None}}
        return RawResponse(status, body, dict(headers or {}))

    def chunk(
        self,
        delta: Mapping[str, Any] | None = None,
        finish_reason: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A ``chat.completion.chunk`` for :class:`RawStream` scripts.

        Example:
            >>> ScriptedChatServer().chunk({"content": "Hi"})["choices"][0]["delta"]
            {'content': 'Hi'}
        """
        choice = {"index": 0, "delta": dict(delta or {}), "finish_reason": finish_reason}
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "choices": [choice],
            **fields,
        }

    def add(self, *items: ScriptItem) -> None:
        """Append items to the script (also while serving)."""
        self._script.extend(items)

    # -- lifecycle -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client: ``http://127.0.0.1:<port>/v1``."""
        if not self.port:
            raise _ScriptedServerError(
                "ScriptedChatServer is not running; use `with server:` first"
            )
        return f"http://127.0.0.1:{self.port}/v1"

    def client(self, **options: Any) -> AsyncOpenAI:
        """An ``AsyncOpenAI`` pointed at this server (SDK retries off unless given).

        Example:
            >>> with ScriptedChatServer() as server:  # doctest: +SKIP
            ...     client = server.client(timeout=5.0)
        """
        from openai import AsyncOpenAI

        options.setdefault("max_retries", 0)
        options.setdefault("api_key", "scripted-key")
        return AsyncOpenAI(base_url=self.base_url, **options)

    def start(self) -> Self:
        """Start serving in a background thread; returns once the port is bound."""
        if self._thread is not None:
            raise _ScriptedServerError("ScriptedChatServer is already running")
        self._ready.clear()
        self._failure = None
        self._thread = threading.Thread(target=self._run, name="scripted-chat-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT):
            raise _ScriptedServerError(
                f"ScriptedChatServer did not start within {_START_TIMEOUT:g} s"
            )
        if self._failure is not None:
            self._thread.join(_STOP_TIMEOUT)
            self._thread = None
            raise _ScriptedServerError(
                f"ScriptedChatServer failed to start: {self._failure}"
            ) from self._failure
        return self

    def stop(self) -> None:
        """Stop serving: close open connections and join the thread."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None:
            return
        if loop is not None and stopping is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stopping.set)
        thread.join(_STOP_TIMEOUT)
        if thread.is_alive():
            raise _ScriptedServerError(
                f"ScriptedChatServer did not stop within {_STOP_TIMEOUT:g} s"
            )
        self._thread = None
        self.port = 0

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait (polling, without blocking the loop) until ``predicate()`` is true.

        Raises ``TimeoutError`` after ``timeout`` seconds.

        Example:
            >>> async def check(server):  # doctest: +SKIP
            ...     await server.wait_for(lambda: server.requests[-1].disconnected)
        """
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met within {timeout:g} s")
            await asyncio.sleep(0.005)

    # -- serving ---------------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # a thread must not die silently: start() re-raises it
            self._failure = exc
            logger.exception("ScriptedChatServer stopped with an error")
        finally:
            self._ready.set()
            loop.close()
            self._loop = None

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        connections: set[asyncio.Task[None]] = set()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            connections.add(task)
            try:
                await self._connection(reader, writer)
            except asyncio.CancelledError:
                # stop() cancels open connections; ending the task quietly here keeps
                # asyncio's stream callback from reporting the cancellation as an error.
                logger.debug("connection closed by stop()")
            finally:
                connections.discard(task)

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            # Close connections before the server: Python 3.12+'s wait_closed() waits
            # for them.
            server.close()
            for task in list(connections):
                task.cancel()
            await asyncio.gather(*connections, return_exceptions=True)
            await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                # Numbered once it has arrived, with no await before it is appended:
                # another pooled connection may have delivered a request meanwhile.
                request.index = len(self.requests)
                if request.method == "GET" and request.path.partition("?")[0].rstrip("/").endswith(
                    "/models"
                ):
                    # The model list a loop may read to tell the server (see
                    # cycle/profiles.py): answered, not recorded, not scripted.
                    listing = self._render(request, self._model_list())
                    await self._answer(request, listing, reader, writer)
                    continue
                self.requests.append(request)
                try:
                    await self._answer(request, self._scripted(request), reader, writer)
                except ConnectionError as exc:
                    # The client can hang up while a write is still being flushed;
                    # that is the same disconnect as one noticed during a Pause.
                    logger.debug("client hung up during request #%d: %s", request.index + 1, exc)
                    request.disconnected = True
                if request.disconnected:
                    return
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            logger.debug("client connection ended: %s", exc)
        finally:
            writer.close()

    def _model_list(self) -> ScriptItem:
        listing = {"object": "model", "id": self.model, "owned_by": "agcore-tools"}
        return RawResponse(200, json.dumps({"object": "list", "data": [listing]}).encode())

    def _scripted(self, request: CapturedRequest) -> _Wire:
        """The answer to ``request`` from the script; a 500 naming the error if the
        script's function raised or its item cannot be served."""
        try:
            return self._render(request, self._next_item(request))
        except Exception as exc:
            # The test's own mistake. Answered, not a dropped connection, which the
            # client would retry, quietly taking the next item.
            request.script_error = exc
            logger.error(
                "ScriptedChatServer: the script failed on request #%d",
                request.index + 1,
                exc_info=exc,
            )
            failure = self.error(
                500,
                f"ScriptedChatServer: the script failed on request #{request.index + 1}: "
                f"{type(exc).__name__}: {exc}",
                headers={"x-should-retry": "false"},
                type="script_error",
            )
            return self._render(request, failure)

    def _next_item(self, request: CapturedRequest) -> ScriptItem:
        path = request.path.partition("?")[0].rstrip("/")  # a client's default_query
        if request.method != "POST" or not path.endswith(("/chat/completions", "/responses")):
            return self.error(
                404,
                f"ScriptedChatServer serves POST /v1/chat/completions and /v1/responses "
                f"only, not {request.method} {request.path}",
                type="not_found",
            )
        try:
            body = request.json
        except ValueError as exc:
            return self.error(400, f"the request body is not JSON: {exc}", type="invalid_json")
        if not isinstance(body, dict):
            return self.error(400, "the request body is not a JSON object", type="invalid_json")
        if not self._script and self.repeat and self._played:
            self._script.extend(self._played)
            self._played.clear()
        if not self._script:
            return self.error(
                500,
                f"ScriptedChatServer: the script is exhausted (request #{request.index + 1})",
                headers={"x-should-retry": "false"},  # another attempt finds it no fuller
                type="script_exhausted",
            )
        item = self._script.popleft()
        if self.repeat:
            self._played.append(item)
        while callable(item):
            item = item(request)
        return item

    def _render(self, request: CapturedRequest, item: ScriptItem) -> _Wire:
        delay = 0.0
        if isinstance(item, Reply):
            delay = item.delay
            prompt = prompt_tokens(request.body) if self.count_prompt else None
            if request.path.partition("?")[0].rstrip("/").endswith("/responses"):
                answer = responses_json(self, self._ids, item, request.json, prompt)
                item = (
                    RawStream(responses_events(self, answer), done=False)
                    if request.stream
                    else RawResponse(200, answer)
                )
            elif request.stream:  # Chat Completions
                include_usage = bool(
                    (request.json.get("stream_options") or {}).get("include_usage")
                )
                item = RawStream(reply_chunks(self, self._ids, item, include_usage, prompt))
            else:
                item = RawResponse(200, reply_json(self, self._ids, item, prompt))
        if isinstance(item, RawResponse):
            body = item.body if isinstance(item.body, bytes) else json.dumps(item.body).encode()
            head = _head(item.status, "application/json", item.headers, len(body))
            return _Wire(head + body, (), delay)
        if not isinstance(item, RawStream):
            raise TypeError(
                "a script item is a Reply, RawResponse, RawStream or a function returning "
                f"one, not {type(item).__name__}: {item!r}"
            )
        events: list[Any] = [*item.events, "data: [DONE]"] if item.done else list(item.events)
        parts: list[bytes | Pause] = []
        for event in events:
            if isinstance(event, Pause):
                parts.append(event)
                continue
            text = event if isinstance(event, str) else "data: " + json.dumps(event)
            data = (text + "\n\n").encode()
            parts.append(b"%x\r\n%s\r\n" % (len(data), data))
        head = _head(item.status, "text/event-stream", item.headers, None)
        return _Wire(head, parts, delay, chunked=True, drop_connection=item.drop_connection)

    async def _answer(
        self,
        request: CapturedRequest,
        wire: _Wire,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        if wire.delay and not await _hold(reader, wire.delay, request):
            return
        _send(writer, wire.head)
        for part in wire.parts:
            if isinstance(part, Pause):
                await writer.drain()
                if not await _hold(reader, part.seconds, request):
                    return
                continue
            _send(writer, part)
        if wire.drop_connection:
            await writer.drain()
            writer.transport.abort()
            request.disconnected = True
            return
        if wire.chunked:
            _send(writer, b"0\r\n\r\n")
        await writer.drain()
        request.completed = True


def _items(script: Any) -> Iterable[ScriptItem]:
    """``script``, unless it is one item or a text, not a list of items."""
    one = isinstance(script, Reply | RawResponse | RawStream | Pause) or callable(script)
    if one or not isinstance(script, Iterable) or isinstance(script, str | bytes | Mapping):
        raise LlmUsageError(
            f"ScriptedChatServer takes a list of script items, got {described(script)}: "
            "wrap one item in a list"
        )
    return cast(Iterable[ScriptItem], script)


@dataclass(frozen=True)
class _Wire:
    """A response made ready before its first byte is sent, so that a script's mistake
    is answered as an error rather than found in the middle of a stream."""

    head: bytes
    parts: Sequence[bytes | Pause]
    delay: float = 0.0
    chunked: bool = False
    drop_connection: bool = False


def _send(writer: asyncio.StreamWriter, data: bytes) -> None:
    # Once a write has failed the transport drops the rest, logging a warning for each
    # (hundreds for a stream whose reader broke off).
    if writer.is_closing():
        raise ConnectionResetError("the client closed the connection")
    writer.write(data)


def _head(status: int, content_type: str, headers: Mapping[str, str], length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    if not any(name.lower() == "content-type" for name in headers):  # a given one replaces it
        lines.append(f"content-type: {content_type}")
    if length is None:
        lines += ["transfer-encoding: chunked", "cache-control: no-cache"]
    else:
        lines.append(f"content-length: {length}")
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _read_request(reader: asyncio.StreamReader) -> CapturedRequest | None:
    """The next request on a connection, its index not set yet (-1); None at its end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the client closed an idle keep-alive connection
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")
        body = b"".join(parts)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return CapturedRequest(-1, method, path, headers, body)


async def _hold(reader: asyncio.StreamReader, seconds: float, request: CapturedRequest) -> bool:
    """Wait ``seconds``; False (and ``request.disconnected``) if the client hung up."""
    try:
        data = await with_timeout(reader.read(1), seconds)
    except TimeoutError:
        return True
    if not data:
        request.disconnected = True
        return False
    return True
