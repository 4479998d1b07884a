"""The stdio framing: one JSON-RPC message per line on a child's stdout and stdin.

These are the session's read and write streams themselves (the SDK's ``ReadStream``
and ``WriteStream`` protocols), not pump tasks behind memory streams: a line is
parsed in the task that receives it and written in the task that sends it. A memory
stream costs each message a hand-over between two tasks and a checkpoint on each
side, a measurable share of a stdio call's client CPU (docs/benchmarks.md, MCP).
Parsing is the SDK's: ``mcp_types.jsonrpc_message_adapter``.
"""

from __future__ import annotations

import logging
import sys
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._redact import mask
from ._limits import HEAD, TAIL, too_large
from ._matching import PendingIds, without_lone_surrogates
from ._protocol import PROBE
from ._serverlog import safe_text
from ._streams import ClosedOnExit

if TYPE_CHECKING:
    from anyio.abc import ByteReceiveStream, ByteSendStream
    from mcp.shared.message import SessionMessage

__all__ = ["LineReader", "LineWriter"]

logger = logging.getLogger("agcore_tools.mcp")

_CHUNK = 65536
_SHOWN = 200
"""Characters of a line that is not JSON-RPC shown in its log record: enough to tell
which banner or log line it is."""


class LineReader(ClosedOnExit):
    """The messages on ``stdout``; a line that is not JSON-RPC is skipped and counted
    (``skipped``), the first one logged at WARNING, the rest at DEBUG: as text (UTF-8),
    each of ``secrets`` (see ``_stderr.transport_secrets``) shown as ``***``, escaped
    and cut as stderr lines are (``_serverlog.safe_text``), to its first 200 characters.

    Ends (``anyio.EndOfStream``) at the end of stdout, once the pipe fails, or once
    closed. Reading stops while nobody receives: the child then blocks on a full pipe.
    With ``pending`` (shared with the :class:`LineWriter`), an answer whose id no
    request has is dropped, and the request it came for fails; so does a request whose
    answer is not valid JSON-RPC (see ``_matching``).

    A line longer than ``limit`` bytes is not kept: once that much of it has come,
    the request it answers fails (with ``pending``; see ``_limits``), and the rest of
    it is read and dropped. The next line is whole again: JSON text holds no raw line
    break, so a newline always ends a message, and the connection goes on.
    """

    __slots__ = (
        "_adapter",
        "_answers",
        "_closed",
        "_dropping",
        "_endings",
        "_head",
        "_invalid",
        "_limit",
        "_message",
        "_partial",
        "_pending",
        "_ready",
        "_secrets",
        "_size",
        "_stdout",
        "_tail",
        "_where",
        "ended",
        "eof",
        "skipped",
    )

    def __init__(
        self,
        stdout: ByteReceiveStream,
        pending: PendingIds | None = None,
        where: str = "MCP server",
        limit: int | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        import anyio
        import mcp_types
        from mcp.shared.message import SessionMessage
        from pydantic import ValidationError

        self._stdout = stdout
        self._where = where  # which server, in the warning about stray output
        self._secrets = secrets
        self._ready: deque[SessionMessage] = deque()
        self._partial: list[bytes] = []
        self._size = 0
        """Bytes in ``_partial``."""
        self._limit = sys.maxsize if limit is None else limit
        self._dropping = False
        """Whether the line being read is over the limit, and dropped as it comes."""
        self._head = b""
        """The start of that line, while what it answers is still to be told."""
        self._tail = b""
        """Its last bytes so far, meanwhile."""
        self._closed = False
        self.ended = anyio.Event()
        """Set once reading has ended, whatever ended it."""
        self.eof = False
        """Whether stdout itself ended (the child closed it, or every holder exited)."""
        self.skipped = 0
        """Lines that were not JSON-RPC, skipped."""
        # Looked up once: receive() runs for every message.
        self._adapter = mcp_types.jsonrpc_message_adapter
        self._message = SessionMessage
        self._invalid = ValidationError
        self._pending = pending
        self._answers = (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)
        self._endings = (
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            OSError,
        )

    async def receive(self) -> SessionMessage | Exception:
        """The next message, reading more of stdout when none is parsed yet."""
        ready = self._ready
        while not ready:
            if self._closed:
                import anyio

                raise anyio.EndOfStream
            try:
                chunk = await self._stdout.receive(_CHUNK)
            except self._endings as exc:
                # The session's receive loop ends on this, which fails every pending
                # request with CONNECTION_CLOSED.
                self.eof = type(exc) is self._endings[0]  # anyio.EndOfStream
                self._closed = True
                self.ended.set()
                continue
            self._split(chunk)
        return ready.popleft()

    def _split(self, chunk: bytes) -> None:
        if self._dropping:
            end = chunk.find(b"\n")
            self._dropped(chunk if end < 0 else chunk[:end], ended=end >= 0)
            chunk = chunk[end + 1 :] if end >= 0 else b""
            if not chunk:
                return
        partial = self._partial
        if b"\n" not in chunk:
            partial.append(chunk)
            self._size += len(chunk)
            if self._size > self._limit:
                self._overflow()
            return
        if partial:
            partial.append(chunk)
            chunk = b"".join(partial)
            partial.clear()
        *lines, rest = chunk.split(b"\n")
        self._size = len(rest)
        if rest:
            partial.append(rest)
        for line in lines:
            if not line.strip():
                continue
            if len(line) > self._limit:
                self._head, self._tail = line[:HEAD], b""
                self._dropped(line, ended=True)
                continue
            fixed = None
            message: Any
            try:
                message = self._adapter.validate_json(line, by_name=False)
            except self._invalid:
                fixed = without_lone_surrogates(line)
                message = self._repaired(fixed) if fixed is not None else None
            if message is None:
                pending = self._pending
                answers = pending.invalid(fixed or line) if pending is not None else None
                if answers is not None:
                    # The answer to a waiting request, malformed or too deep to read:
                    # it fails at once.
                    self._deliver(answers)
                    continue
                self._stray(line)
                continue
            if self._pending is not None and isinstance(message, self._answers):
                instead = self._pending.answered(message.id)
                if instead is not None:
                    self._deliver(instead)
                    continue
            self._ready.append(self._message(message))
        if self._size > self._limit:
            self._overflow()

    def _repaired(self, fixed: bytes) -> Any:
        """The message a line holds once its lone surrogates are U+FFFD (``fixed``, see
        ``_matching.without_lone_surrogates``), or None if it is still no message."""
        try:
            return self._adapter.validate_json(fixed, by_name=False)
        except self._invalid:
            return None

    def _stray(self, line: bytes) -> None:
        """Count and log a line that is not JSON-RPC."""
        # Servers print banners and logs to stdout; the connection stays up. The first
        # such line is worth a WARNING; a server that does it once does it on every
        # message, and the rest would drown the app's log.
        self.skipped += 1
        level = logging.WARNING if self.skipped == 1 else logging.DEBUG
        if not logger.isEnabledFor(level):
            return
        # As text: a banner's box drawing and emoji read as themselves, not as escaped
        # bytes. Masked before the cut, so a secret across it never shows in part.
        text = mask(line.decode("utf-8", "replace"), self._secrets)
        logger.log(
            level,
            "%s wrote a line to stdout that is not JSON-RPC; skipped "
            "(stdout carries MCP messages only, logs belong on stderr): %s",
            self._where,
            safe_text(text.rstrip(), _SHOWN),
        )

    def _deliver(self, answers: list[dict[str, Any]]) -> None:
        """Hand on error answers built in place of what was read."""
        self._ready.extend(
            self._message(self._adapter.validate_python(answer, by_name=False))
            for answer in answers
        )

    def _overflow(self) -> None:
        """The line being read has passed the limit: drop what came of it, and the rest
        as it comes."""
        partial = self._partial
        head = bytearray()
        for piece in partial:
            head += piece[: HEAD - len(head)]
            if len(head) >= HEAD:
                break
        self._head, self._tail = bytes(head), b""
        last = partial[-1]
        partial.clear()
        self._size = 0
        self._dropped(last, ended=False, first=True)

    def _dropped(self, piece: bytes, *, ended: bool, first: bool = False) -> None:
        """``piece`` of a line over the limit was read (its last, if ``ended``): once
        what it answers can be told (from its start, else at its end), fail that
        request."""
        self._dropping = not ended
        if not self._head:
            return  # told already
        self._tail = (self._tail + piece[-TAIL:])[-TAIL:]
        if not (ended or first):
            return  # its start told nothing: only its end can
        problem = too_large(self._limit, "StdioTransport")
        pending = self._pending
        if pending is None:
            logger.warning("%s wrote a line to stdout that %s; dropped", self._where, problem[0])
            answers: list[dict[str, Any]] | None = []
        else:
            answers = pending.unreadable(self._head, self._tail if ended else None, problem)
        if answers is None:
            return  # an answer whose id may come at its end
        self._head = self._tail = b""
        self._deliver(answers)

    def unanswered(self) -> list[str]:
        """The methods of the requests written to the child that no answer has come for
        (known with ``pending`` only), oldest first."""
        return self._pending.waiting() if self._pending is not None else []

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Stop reading: later receives end (stdout itself is closed with the process)."""
        self._closed = True
        self._ready.clear()
        self.ended.set()


class LineWriter(ClosedOnExit):
    """Writes each message to ``stdin`` as one line, in the sender's task.

    A write the child no longer takes (it died or closed its stdin) ends ``stdout``'s
    reading instead of failing the sender: the session then fails every pending
    request with CONNECTION_CLOSED, this one included, after the connection has
    noticed its end (as when the child's stdout ends first). ``pending`` learns of each
    request written, and of each the client gives up (``notifications/cancelled``).
    """

    __slots__ = (
        "_broken",
        "_cancel",
        "_closed",
        "_failures",
        "_pending",
        "_request",
        "_stdin",
        "_stdout",
        "probing",
    )

    def __init__(
        self, stdin: ByteSendStream, stdout: ByteReceiveStream, pending: PendingIds | None = None
    ) -> None:
        import anyio
        import mcp_types

        self._pending = pending
        self._request = mcp_types.JSONRPCRequest
        self._cancel = mcp_types.JSONRPCNotification
        self._stdin = stdin
        self._stdout = stdout
        self._closed = False
        self._broken = False
        self._failures = (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError)
        self.probing = anyio.Event()
        """Set once a ``server/discover`` probe is written."""

    async def send(self, message: SessionMessage, /) -> None:
        """Write ``message`` and wait while the pipe is full."""
        if self._closed:
            import anyio

            raise anyio.ClosedResourceError
        if self._broken:
            return
        pending = self._pending
        if pending is not None:
            sent = message.message
            if isinstance(sent, self._request):
                pending.sent(sent.id, sent.method)
                if sent.method == PROBE:
                    self.probing.set()
            elif isinstance(sent, self._cancel) and sent.method == "notifications/cancelled":
                pending.cancelled((sent.params or {}).get("requestId"))
        await self._write(message.message.model_dump_json(by_alias=True, exclude_unset=True))

    async def nudge(self, number: int) -> None:
        """Write a ``ping`` of the framing's own (the ``number``-th), whose answer is
        dropped: see ``_stdio.nudge_probe`` for why."""
        if self._closed or self._broken or self._pending is None:
            return
        request_id = f"agcore-nudge-{number}"
        self._pending.own(request_id)
        await self._write(f'{{"jsonrpc":"2.0","id":"{request_id}","method":"ping"}}')

    async def _write(self, line: str) -> None:
        try:
            await self._stdin.send(line.encode() + b"\n")
        except self._failures as exc:
            self._broken = True
            logger.debug("MCP server stopped reading its stdin (%r); ending the connection", exc)
            await self._stdout.aclose()

    async def aclose(self) -> None:
        """Refuse later sends (stdin itself is closed when the process stops)."""
        self._closed = True
