"""A loopback Chat Completions server for ``bench_scale.py``, built not to be the bottleneck.

Run as its own process: ``python benchmarks/scale_server.py`` prints its port on stdout,
then serves until stdin closes. It answers ``POST .../chat/completions`` with
bytes prepared once at start-up (JSON, or SSE when the request says ``"stream": true``),
picked by how far the conversation is: the number of assistant messages in the request
since the last user message (0: three parallel tool calls, 1: two, 2: the text
answer), the same script as
``bench_cycle.py``. It parses no JSON per request (it counts ``"assistant"`` in the
body's bytes) and runs on a bare ``asyncio.Protocol``, so a request costs it tens of
microseconds: the client, not the server, is what the benchmark measures.

The answers are built by :class:`agcore_tools.testing.ScriptedChatServer`'s own
formatters, so they are the same JSON and SSE the tests use.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import sys
import threading
from typing import Any, ClassVar

from agcore_tools.testing import ScriptedChatServer
from agcore_tools.testing._formats import reply_chunks, reply_json

S = ScriptedChatServer
SCRIPT = [
    S.reply_tool_calls(
        [("get_weather", {"city": c}) for c in ("Paris", "Tokyo", "Oslo")],
        text="Checking the three cities.",
    ),
    S.reply_tool_calls([("add", {"a": 18, "b": 24}), ("add", {"a": 42, "b": 9})]),
    S.reply_text("Paris 18 °C, Tokyo 24 °C, Oslo 9 °C; together 51 °C."),
]
ANSWER = SCRIPT[-1].text

_STREAM = re.compile(rb'"stream"\s*:\s*true')
_USAGE = re.compile(rb'"include_usage"\s*:\s*true')


def _json_answer(body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(data) + data


def _sse_answer(chunks: list[Any]) -> bytes:
    data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    data += b"data: [DONE]\n\n"
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"content-length: %d\r\n\r\n"
    )
    return head % len(data) + data


def prepared_answers() -> dict[tuple[int, bool, bool], bytes]:
    """(turn, stream, include_usage) -> the whole HTTP response."""
    formatter = ScriptedChatServer([])  # its settings shape the bodies
    ids = itertools.count()
    answers = {}
    for turn, reply in enumerate(SCRIPT):
        answers[turn, False, False] = _json_answer(reply_json(formatter, ids, reply))
        for usage in (False, True):
            answers[turn, True, usage] = _sse_answer(reply_chunks(formatter, ids, reply, usage))
    return answers


class _Connection(asyncio.Protocol):
    answers: ClassVar[dict[tuple[int, bool, bool], bytes]] = {}

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            body = bytes(self.buffer[end + 4 : end + 4 + length])
            del self.buffer[: end + 4 + length]
            # How far this tool loop is: the assistant messages since the last user one.
            turn = min(body.count(b'"assistant"', body.rfind(b'"user"')), len(SCRIPT) - 1)
            stream = _STREAM.search(body) is not None
            usage = stream and _USAGE.search(body) is not None
            assert self.transport is not None
            self.transport.write(self.answers[turn, stream, usage])


async def serve() -> None:
    _Connection.answers = prepared_answers()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Connection, "127.0.0.1", 0, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    closed = asyncio.Event()
    # Serve until the parent closes our stdin (or dies).
    threading.Thread(
        target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(closed.set)), daemon=True
    ).start()
    async with server:
        await closed.wait()


if __name__ == "__main__":
    asyncio.run(serve())
