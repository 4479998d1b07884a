"""A handshake that failed: what its error says, and the second attempt when the
``server/discover`` probe broke the server.

With ``protocol="auto"`` a connection sends ``server/discover`` first. The SDK already
falls back to ``initialize`` on the same connection when the probe is answered with an
error or an invalid answer. It cannot when the probe ends the connection: servers built
on the MCP Python SDK 1.8 and older (chroma-mcp pins 1.6.0) cannot validate a request
they do not know, and exit with code 1 and a pydantic dump on stderr. So the owner task
(``_connection``) starts such a server once more, with the ``initialize`` handshake
alone, within the same start-up deadline, and logs a WARNING naming
``protocol="legacy"``, which skips the probe. Once that handshake succeeds, the client's
later restarts of a stdio server skip the probe too (an HTTP server is probed again: a
5xx may have been a passing outage of a 2026-07-28 server).

So do the restarts of a stdio server that answered the probe with an error and took the
handshake on the same connection (:func:`connected`): later MCP Python SDK 1.x releases
do, and log a validation error of about 90 lines on stderr for the probe, at every
start. That report (from its first line, when a line names ``server/discover``) is also
left out of that connection's stderr tail, which a later crash's message would
otherwise open with, as if it told its cause; the lines before it stay. Over HTTP such a
probe costs one request and prints nothing: it is sent again.

The restart needs evidence that the probe was the cause. Every server that exits during
start-up (a missing config file, a bad token) also leaves the probe unanswered, and
starting those twice would double their side effects and bury their own error: so a
stdio server is started again only when its stderr names ``server/discover`` (the
validation errors of pydantic and serde quote the method they refused). Over HTTP a new
connection costs one request and starts nothing, so it is tried when the server was
reached and failed the handshake without refusing it (a 5xx, a dropped connection, an
error answer), not when it refused it at the door (401, 404, 405) or never answered, and
not for any other error: the client's own (a ``verify=`` path that is wrong) would only
come again, after a WARNING blaming the probe.

A server may also answer the probe, agree on 2026-07-28, answer ``tools/list``, and then
refuse every other request until it gets ``initialize`` (kglite-mcp-server 0.21 answers
``tools/call`` with -32600 "initialize is required"). Such a refusal
(:func:`wants_initialize`) was not run, so the session connects again with the
``initialize`` handshake, within the request's deadline, remembers it for the client's
later connections (over HTTP too: this is what the server said, not a passing
outage), logs a WARNING naming ``protocol="legacy"`` (:func:`warn_initialize`), and
sends the request again (``_recover.send_again``).

What a client learns this way is also remembered for the process, by server
(:func:`server_key`: a stdio server's command, arguments, working directory and
environment; an HTTP server's URL): a new client of the same server starts with the
``initialize`` handshake at once, instead of starting the server twice (rmcp, the Rust
SDK, exits on the probe in its 0.x and 1.x releases). An app that makes a client per
request or per user pays the probe once. Each WARNING above is logged once per server
and process, and at DEBUG after that. Both memories are bounded (the
:data:`SERVERS_KEPT` servers last used), keep digests of the keys (no argument or
header is held), and are shared by the process's threads and loops under a lock. A
start-up with the handshake alone that a remembered server fails makes the process
forget it (:func:`forget`): the next new client probes again, as a server upgraded to
2026-07-28 alone would need.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from pydantic import ValidationError

from ._error_text import malformed, quoted, sdk_own, sdk_parse_error, validation_line
from ._exchange import HttpExchange
from ._matching import invalid_reason, mismatch_reason
from ._protocol import PROBE, is_modern
from ._relisten import describe, leaf
from ._stderr import SentSecrets
from ._stdio import ChildProcess
from .transport import StdioTransport, StreamableHttpTransport

if TYPE_CHECKING:
    from mcp import Client

__all__ = [
    "SERVERS_KEPT",
    "answer",
    "attempts_note",
    "connected",
    "forget",
    "forget_all",
    "initialize_note",
    "old_sse_hint",
    "probe_failure",
    "remember",
    "remembered",
    "server_key",
    "unanswered",
    "wants_initialize",
    "warn",
    "warn_initialize",
]

logger = logging.getLogger("agcore_tools.mcp")

_OLD_SSE_HINT = (
    " (the server refused a POST: it may speak the deprecated HTTP+SSE transport, which "
    "McpClient does not; use the server's Streamable HTTP endpoint, often /mcp)"
)

_DROPPED = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, EOFError)
"""How a server that was reached and then dropped the connection fails, besides httpx2's
read, write and protocol errors (imported with the SDK, at the first connect)."""

SERVERS_KEPT = 64
"""How many servers the process remembers as needing the ``initialize`` handshake (and,
apart, as warned about): the least recently used is dropped first."""


class _Recent:
    """A bounded set of keys, the least recently used dropped first; thread-safe."""

    def __init__(self, size: int) -> None:
        self._keys: OrderedDict[str, None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            if key not in self._keys:
                return False
            self._keys.move_to_end(str(key))
            return True

    def add(self, key: str) -> bool:
        """Add ``key`` (or mark it used); whether it was new."""
        with self._lock:
            new = key not in self._keys
            self._keys[key] = None
            self._keys.move_to_end(key)
            while len(self._keys) > self._size:
                self._keys.popitem(last=False)
            return new

    def discard(self, key: str) -> None:
        with self._lock:
            self._keys.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()


class _Client(Protocol):
    """What the memories read of a client's settings."""

    @property
    def transport(self) -> StdioTransport | StreamableHttpTransport: ...


# Weakly: the set must not keep a client alive (see _unclosed). Keyed by the client
# object: its own restarts skip the probe even once the process's memory dropped it.
_LEGACY: weakref.WeakSet[Any] = weakref.WeakSet()
_NEEDS_INITIALIZE = _Recent(SERVERS_KEPT)
"""The servers (:func:`server_key`) that new clients connect to with the handshake."""
_WARNED = _Recent(SERVERS_KEPT)
"""The servers (by kind of warning) already warned about at WARNING level."""


def server_key(transport: StdioTransport | StreamableHttpTransport) -> str:
    """What identifies ``transport``'s server for the process's memories: a digest of a
    stdio server's command, arguments, working directory and environment, or of an
    HTTP server's URL (a digest, so no credential in them is kept).

    Example:
        >>> server_key(StdioTransport("srv", ["--a"])) == server_key(StdioTransport("srv", ["--a"]))
        True
        >>> server_key(StdioTransport("srv", ["--a"])) == server_key(StdioTransport("srv", ["--b"]))
        False
    """
    parts: list[Any]
    if isinstance(transport, StdioTransport):
        cwd = os.fspath(transport.cwd) if transport.cwd is not None else None
        env = sorted((transport.env or {}).items())
        parts = ["stdio", transport.command, list(transport.args), cwd, env]
    else:
        parts = ["http", transport.url]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def remembered(settings: _Client) -> bool:
    """Whether this client's server failed the probe and then took the handshake, on
    one of this client's connections or (see the module docs) another client's."""
    return settings in _LEGACY or server_key(settings.transport) in _NEEDS_INITIALIZE


def remember(settings: _Client) -> None:
    """Skip the probe on this client's later connections, and on new clients' of the
    same server."""
    _LEGACY.add(settings)
    _NEEDS_INITIALIZE.add(server_key(settings.transport))


def forget(settings: _Client) -> None:
    """Probe this client's server again on new clients' connections (its start-up with
    the handshake alone failed); this client's own memory stays."""
    _NEEDS_INITIALIZE.discard(server_key(settings.transport))


def forget_all() -> None:
    """Forget every server the process remembered, and that it warned about them."""
    _NEEDS_INITIALIZE.clear()
    _WARNED.clear()


def _level(kind: str, transport: StdioTransport | StreamableHttpTransport) -> int:
    """WARNING for the first warning of ``kind`` about ``transport``'s server in the
    process, DEBUG for later ones."""
    first = _WARNED.add(f"{kind} {server_key(transport)}")
    return logging.WARNING if first else logging.DEBUG


def connected(
    settings: _Client, client: Client, child: ChildProcess | None, mode: str, retried: bool
) -> None:
    """After the handshake of a connection of ``settings``'s client succeeded, on
    ``client``'s session: for a stdio server (``child``) that took the ``initialize``
    handshake where the probe failed, on a second start-up (``retried``) or on the same
    connection (``mode`` "auto", and a session of the 2025 era), skip the probe on the
    client's later connections; in the second case, leave the report it wrote on stderr
    for the probe, if any, out of its tail (see the module docs)."""
    if child is None:
        return  # HTTP: probed again (see the module docs)
    if retried:
        remember(settings)
    elif mode == "auto" and not is_modern(client):
        remember(settings)
        # The lines it wrote for the probe have been read: they came before its answer
        # on stdout, and the handshake took one more round trip. Only those: a server
        # that wrote nothing for it (a TypeScript SDK's) keeps its start-up lines.
        child.stderr.leave_out_probe_dump()


def probe_failure(
    exc: BaseException,
    child: ChildProcess | None,
    http: HttpExchange | None,
    hide: Callable[[str], str] = str,
) -> str | None:
    """How a start-up that sent the probe failed, when a second one with the handshake
    alone may do better (see the module docs); else None. ``http`` is the handshake's
    HTTP outcome (None for stdio, whose ``child`` is then the process). A server's error
    answer is quoted masked by ``hide`` (see ``_error_text.quoted``).

    Example:
        >>> probe_failure(ConnectionResetError("reset by peer"), None, HttpExchange())
        'failed: ConnectionResetError: reset by peer'
        >>> print(probe_failure(RuntimeError("x"), None, HttpExchange(status=401)))
        None
        >>> from agcore_tools import ToolConfigError
        >>> print(probe_failure(ToolConfigError("verify: no such CA file"), None, HttpExchange()))
        None
    """
    if http is None:
        return _stdio_failure(child)
    import httpx2
    from mcp.shared.exceptions import MCPError
    from mcp_types import PARSE_ERROR, REQUEST_TIMEOUT, UNSUPPORTED_PROTOCOL_VERSION

    inner = leaf(exc)
    if http.status is not None:
        return f"failed: {http.describe()}" if http.status >= 500 else None
    if isinstance(inner, MCPError):
        if inner.code == UNSUPPORTED_PROTOCOL_VERSION:
            return None  # a server of 2026-07-28 alone
        if inner.code == REQUEST_TIMEOUT and sdk_own(inner, http=True):
            return None  # it did not answer in time (a server's own -32001 is an answer)
        if inner.code == PARSE_ERROR and sdk_parse_error(inner):
            return f"failed: {quoted(malformed(inner.message), hide)}"
        return f"failed: {quoted(inner.message, hide)} (code {inner.code})"
    dropped = (httpx2.ReadError, httpx2.WriteError, httpx2.RemoteProtocolError, *_DROPPED)
    if isinstance(inner, dropped):
        return f"failed: {describe(inner)}"
    # Anything else says nothing against the server: nothing reached it (a refused
    # connection, a TLS failure), it did not answer in time, or the client's own setup
    # failed (a verify= path that is wrong, an auth flow's error), which a second
    # attempt would only repeat after a WARNING blaming the probe.
    return None


def _stdio_failure(child: ChildProcess | None) -> str | None:
    """How a child the probe ended went (``exited with code 1``); None when it is still
    running, the client stopped it, it answered the probe, or its stderr does not name it."""
    if child is None or child.returncode is None or child.stop_signal is not None:
        return None
    reader = child.reader
    if reader is None or PROBE not in reader.unanswered() or PROBE not in child.stderr.tail():
        return None
    return child.exit_text()


def warn(
    server_name: str,
    transport: StdioTransport | StreamableHttpTransport,
    reason: str,
    exc: BaseException,
    secrets: SentSecrets,
) -> None:
    """Say that the probe broke the server, and how to skip it: at WARNING the first
    time for this server in the process, then at DEBUG. ``reason`` and ``exc`` are
    shown masked by ``secrets``: a server's error answer may repeat the credential the
    request carried, as the other records and errors of a failed start-up know."""
    logger.log(
        _level("probe", transport),
        "MCP server '%s': %s %s on the %s protocol probe; trying again with the "
        'initialize handshake alone (McpClient(..., protocol="legacy") skips the probe)',
        server_name,
        transport.describe(),
        secrets.mask(reason),
        PROBE,
    )
    shown = secrets.masked(exc)
    logger.debug("MCP server '%s': the probe's failure", server_name, exc_info=shown)


def unanswered(child: ChildProcess | None) -> str:
    """Which handshake request a stdio server left unanswered, for the timeout's message."""
    reader = child.reader if child is not None else None
    waiting = reader.unanswered() if reader is not None else []
    if PROBE in waiting:
        return (
            f"; it never answered {PROBE}, the protocol version probe (a server that "
            'ignores requests it does not know needs McpClient(..., protocol="legacy"))'
        )
    return f"; it never answered {waiting[0]}" if waiting else ""


def attempts_note(first: str) -> str:
    """What the error of a failed second attempt adds, naming the first.

    Example:
        >>> attempts_note("exited with code 1")
        ' (second attempt, with the initialize handshake alone; the first, with the server/discover probe, exited with code 1)'
    """
    return (
        f" (second attempt, with the initialize handshake alone; the first, with the "
        f"{PROBE} probe, {first})"
    )


def old_sse_hint(status: int | None, url: str) -> str:
    """The hint for a refused handshake POST that suggests an old HTTP+SSE endpoint
    (405; 400 or 404 from a path ending in ``/sse``), else ``""``.

    Example:
        >>> old_sse_hint(404, "http://localhost:8000/sse").startswith(" (the server refused a POST")
        True
    """
    path = urlsplit(url).path.rstrip("/")
    if status == 405 or (status in (400, 404) and path.endswith("/sse")):
        return _OLD_SSE_HINT
    return ""


_HANDSHAKE_RESULTS = frozenset({"InitializeResult", "DiscoverResult"})
"""The SDK's models of the handshake's answers: pydantic names the one an answer failed."""


def answer(exc: BaseException | None, http: bool, hide: Callable[[str], str] = str) -> str | None:
    """What the server answered, when an error answer (or an invalid one) ended start-up;
    its words masked by ``hide`` and made safe to quote (``_error_text.quoted``). Not
    the SDK's own failures with the codes servers use too (``_error_text.sdk_own``):
    a server's own -32000 or -32001 is its answer, and so is its -32700 (it could not
    parse the request), which the SDK's report of an answer it could not parse is not
    (``_error_text.sdk_parse_error``). An answer the SDK's model refuses (no
    ``capabilities``) is named by its first fault, without the value.

    Example:
        >>> from mcp.shared.exceptions import MCPError
        >>> answer(MCPError(-32001, "upstream identity service timed out"), http=False)
        'the server refused the handshake: upstream identity service timed out (code -32001)'
        >>> print(answer(MCPError(-32001, "Request 'initialize' timed out"), http=False))
        None
        >>> from mcp_types import InitializeResult
        >>> try:
        ...     InitializeResult.model_validate({"protocolVersion": "2025-06-18"})
        ... except ValidationError as exc:
        ...     print(answer(exc, http=False))
        the handshake got an invalid answer: capabilities: Field required (and 1 more error)
    """
    from mcp.shared.exceptions import MCPError
    from mcp_types import PARSE_ERROR

    inner = leaf(exc) if exc is not None else None
    if isinstance(inner, ValidationError) and inner.title in _HANDSHAKE_RESULTS:
        # pydantic's own text echoes the answer's values (input_value=...), which may
        # hold a credential: one line naming the field, as tools/list's (_recover).
        return f"the handshake got an invalid answer: {quoted(validation_line(inner), hide)}"
    if not isinstance(inner, MCPError) or sdk_own(inner, http):
        return None
    if inner.code == PARSE_ERROR and sdk_parse_error(inner):
        # The SDK's report echoes the answer, cut short by pydantic: a credential in it
        # is cut too, and no longer masked. One line of it, without the echo (as _recover).
        return f"the handshake got an invalid answer: {quoted(malformed(inner.message), hide)}"
    problem = invalid_reason(inner.data, inner.message)
    if problem is not None:
        return f"the handshake got an invalid answer: {quoted(problem, hide)}"
    stray = mismatch_reason(inner.data, inner.message)
    if stray is not None:
        return f"the handshake failed: {quoted(stray, hide)}"
    return f"the server refused the handshake: {quoted(inner.message, hide)} (code {inner.code})"


_UNINITIALIZED_CODES = frozenset({-32600, -32002})
"""The codes of a refusal for want of ``initialize``: -32600 (invalid request, as
kglite-mcp-server answers), and -32002, LSP's "server not initialized", which servers
borrow."""
_UNINITIALIZED = re.compile("initiali[sz]", re.IGNORECASE)
"""What the refusal's message says of it ("initialize is required", "Server not
initialized"); a refusal with one of those codes for any other reason is left alone."""


def wants_initialize(client: Client | None, exc: BaseException) -> str | None:
    """The server's refusal (its message and code) when ``exc`` is its answer, on a
    2026-07-28 session of ``client``, that refuses a request until the client sends
    ``initialize``; else None.

    Example:
        >>> from mcp.shared.exceptions import MCPError
        >>> from types import SimpleNamespace
        >>> modern = SimpleNamespace(protocol_version="2026-07-28")
        >>> wants_initialize(modern, MCPError(-32600, "initialize is required"))
        'initialize is required (code -32600)'
        >>> print(wants_initialize(modern, MCPError(-32600, "arguments must be an object")))
        None
    """
    from mcp.shared.exceptions import MCPError

    if client is None or not isinstance(exc, MCPError) or not is_modern(client):
        return None
    if exc.code not in _UNINITIALIZED_CODES or not _UNINITIALIZED.search(exc.message):
        return None
    return f"{exc.message} (code {exc.code})"


_LATER_FIELDS = ("cacheScope", "resultType", "ttlMs")
"""The fields 2026-07-28 adds to a list's result, which a 2025 answer lacks."""


def older_shape(client: Client | None, exc: BaseException) -> str | None:
    """What is missing, when ``exc`` is the SDK's refusal of a ``tools/list`` answer on a
    2026-07-28 session of ``client`` that lacks only the fields that revision adds
    (``resultType``, ``ttlMs``, ``cacheScope``): a server that agreed on 2026-07-28 and
    answers in the 2025 shape (``@mcp-z/server`` 2.2.3). Else None. Only for a list,
    which may be asked again: a ``tools/call`` so answered has run.

    Example:
        >>> from types import SimpleNamespace
        >>> from mcp_types.methods import validate_server_result
        >>> modern = SimpleNamespace(protocol_version="2026-07-28")
        >>> def refusal(method, answer):
        ...     try:
        ...         validate_server_result(method, "2026-07-28", answer)
        ...     except ValidationError as exc:
        ...         return exc
        >>> print(older_shape(modern, refusal("tools/list", {"tools": []})))
        its answer lacks cacheScope, resultType and ttlMs, which 2026-07-28 requires
        >>> print(older_shape(modern, refusal("prompts/list", {"prompts": []})))
        None
    """
    if client is None or not isinstance(exc, ValidationError) or not is_modern(client):
        return None
    if exc.title != "ListToolsResult":  # another answer: the WARNING names tools/list
        return None
    missing = set()
    for error in exc.errors():
        place = error.get("loc", ())
        if error.get("type") != "missing" or len(place) != 1 or place[0] not in _LATER_FIELDS:
            return None
        missing.add(str(place[0]))
    if not missing:
        return None
    *most, last = sorted(missing)
    named = f"{', '.join(most)} and {last}" if most else last
    return f"its answer lacks {named}, which 2026-07-28 requires"


def warn_initialize(
    server_name: str,
    transport: StdioTransport | StreamableHttpTransport,
    version: str,
    action: str,
    said: str,
) -> None:
    """Say that the server, on protocol ``version``, refused ``action`` for want of
    ``initialize`` (``said``, its words, masked and made safe by the caller), and how
    to use the handshake from the start: at WARNING the first time for this server in
    the process, then at DEBUG."""
    logger.log(
        _level("initialize", transport),
        "MCP server '%s' agreed on protocol %s, which has no initialize handshake, then "
        "refused %s: %s; connecting again with the initialize handshake "
        '(McpClient(..., protocol="legacy") uses it from the start)',
        server_name,
        version,
        action,
        said,
    )


def initialize_note(said: str) -> str:
    """What the error of a request that failed again after connecting with the
    ``initialize`` handshake adds, naming the first refusal (``said``).

    Example:
        >>> initialize_note("initialize is required (code -32600)")
        ' (second attempt, after connecting again with the initialize handshake; the first, without it, was refused: initialize is required (code -32600))'
    """
    return (
        " (second attempt, after connecting again with the initialize handshake; the "
        f"first, without it, was refused: {said})"
    )
