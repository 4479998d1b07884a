"""An offline, scripted Chat Completions server for tests, demos, benchmarks and notebooks.

:class:`ScriptedChatServer` serves ``POST /v1/chat/completions`` over real HTTP on
127.0.0.1 (a random free port), from a background thread with its own event loop, so
it works the same under pytest, in a script and in a running notebook. Each request
takes the next item of its script and is answered as JSON, or as server-sent events
when the request says ``"stream": true``. Every request is captured (parsed JSON and
headers). It uses the standard library only.

It also serves ``POST /v1/responses`` (the Responses API), as JSON or as its
server-sent events (``response.output_text.delta``, ... ``response.completed``) from
the same script items: a :class:`Reply` becomes a response whose ``output`` holds its
reasoning as a ``reasoning`` item (with ``encrypted_content`` when the request's
``include`` asks for it), its text as a ``message`` item and its ``function_call``
items, in that order.

Script items:

- :meth:`ScriptedChatServer.reply_text` / :meth:`~ScriptedChatServer.reply_tool_calls`
  build a :class:`Reply` (text, tool calls, reasoning, usage), served in either format;
- :meth:`ScriptedChatServer.error` builds a :class:`RawResponse` with a status code
  and headers (``Retry-After``, ``retry-after-ms``, ...);
- :class:`RawStream` sends exact SSE lines: chunk dicts, comment lines, error objects,
  :class:`Pause` steps (during which a client disconnect is noticed);
- a callable ``(CapturedRequest) -> item`` decides per request (if it raises, the
  request gets a 500 naming the exception, kept in ``CapturedRequest.script_error``).

:class:`Cassette` records a run against a real model and real MCP servers (or this
server) to one JSON file and replays it offline, with no socket (:func:`no_network`);
``pytest_plugins = ["agcore_tools.testing.pytest_plugin"]`` adds a ``cassette``
fixture and ``--record-mode``.

Example:
    >>> from agcore_tools.testing import ScriptedChatServer
    >>> script = [
    ...     ScriptedChatServer.reply_tool_calls([("add", {"a": 2, "b": 3})]),
    ...     ScriptedChatServer.reply_text("2 + 3 = 5"),
    ... ]
    >>> with ScriptedChatServer(script) as server:  # doctest: +SKIP
    ...     client = server.client()  # an AsyncOpenAI pointed at the server
    ...     ...
    ...     server.requests[0].json["messages"]
"""

from ..error import CassetteError, CassetteMismatchError
from ._cassette import Cassette, RecordMode
from ._network import NetworkGuard, no_network
from ._server import (
    CapturedRequest,
    Pause,
    RawResponse,
    RawStream,
    Reply,
    ScriptedChatServer,
    ScriptItem,
)
from ._tape_mcp import CassetteMcpClient
from ._tools import StaticTool

__all__ = [
    "CapturedRequest",
    "Cassette",
    "CassetteError",
    "CassetteMcpClient",
    "CassetteMismatchError",
    "NetworkGuard",
    "Pause",
    "RawResponse",
    "RawStream",
    "RecordMode",
    "Reply",
    "ScriptItem",
    "ScriptedChatServer",
    "StaticTool",
    "no_network",
]
