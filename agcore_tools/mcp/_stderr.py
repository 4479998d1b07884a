"""A stdio server's stderr: drained continuously, logged within a budget, tail kept for errors.

A server that floods stderr must never stall: if nobody read the pipe, the child would
block on its next write and stop answering. So the pipe is always drained at full
speed; only the logging is bounded (a per-second line budget, the rest counted and
reported), and the last lines are kept for start-up error messages.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anyio.abc import ByteReceiveStream

__all__ = ["StderrLog"]

logger = logging.getLogger("agcore_tools.mcp.stderr")

_CHUNK = 65536
_TAIL_LINES = 20
_MAX_LINE = 2000
_LINES_PER_SECOND = 200


class StderrLog:
    """Reads one child's stderr into the ``agcore_tools.mcp.stderr`` logger.

    Example:
        >>> log = StderrLog("fs")
        >>> log.feed(b"starting\\nready\\n")
        >>> log.tail()
        'starting | ready'
    """

    __slots__ = ("_budget", "_partial", "_suppressed", "_tail", "_window", "server_name")

    def __init__(self, server_name: str) -> None:
        self.server_name = server_name
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._partial = b""
        self._window = 0.0
        self._budget = _LINES_PER_SECOND
        self._suppressed = 0

    async def pump(self, stream: ByteReceiveStream) -> None:
        """Read ``stream`` until end of file (or until cancelled)."""
        import anyio

        try:
            while True:
                self.feed(await stream.receive(_CHUNK))
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            self.flush()

    def feed(self, data: bytes) -> None:
        """Take one chunk of stderr output."""
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > _MAX_LINE:
            # A line with no end in sight: emit what we have rather than buffer without bound.
            lines.append(self._partial)
            self._partial = b""
        # Only the lines that can still be logged or reach the tail are decoded: a flood
        # costs one split per chunk, not one decode per line.
        keep = max(_TAIL_LINES, self._remaining_budget())
        skipped = len(lines) - keep
        if skipped > 0:
            self._suppressed += skipped
            lines = lines[skipped:]
        for raw in lines:
            self._line(raw)

    def flush(self) -> None:
        """Log a last unterminated line and the count of suppressed lines, if any."""
        if self._partial:
            self._line(self._partial)
            self._partial = b""
        self._report_suppressed()

    def tail(self) -> str:
        """The last lines, joined with ``" | "`` for one-line error messages."""
        return " | ".join(self._tail)

    def _remaining_budget(self) -> int:
        now = time.monotonic()
        if now - self._window >= 1.0:
            self._report_suppressed()
            self._window = now
            self._budget = _LINES_PER_SECOND
        return self._budget

    def _report_suppressed(self) -> None:
        if self._suppressed:
            logger.warning(
                "[%s] %d stderr lines not logged (more than %d lines per second)",
                self.server_name,
                self._suppressed,
                _LINES_PER_SECOND,
            )
            self._suppressed = 0

    def _line(self, raw: bytes) -> None:
        text = raw[:_MAX_LINE].decode("utf-8", "replace").rstrip()
        if not text:
            return
        self._tail.append(text)
        if self._remaining_budget() > 0:
            self._budget -= 1
            logger.info("[%s] %s", self.server_name, text)
        else:
            self._suppressed += 1
