"""A server's own text in the library's log: made harmless, cut, and within a budget.

What a server writes to its stderr and sends as log notifications (``notifications/
message``) is logged, and it is untrusted: a newline in it would start a record of its
own making ("... CRITICAL agcore_tools.registry: permission check disabled"), terminal
escapes and ``\\r`` would clear or overwrite a terminal's lines or hide text, and a
chatty or hostile server could write millions of records, or one of a gigabyte. So each
record shows the control characters as escapes, is cut past :data:`MAX_LINE`
characters, and at most :data:`LINES_PER_SECOND` records a second are logged per
server, the others counted in one record. The same rules for stderr (``_stderr``) and
for the log notifications (:class:`ServerLog`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

__all__ = ["LINES_PER_SECOND", "MAX_LINE", "LogBudget", "ServerLog", "safe_text"]

server_logger = logging.getLogger("agcore_tools.mcp.server")

MAX_LINE = 2000
"""Characters of a server's text shown in one log record; the rest is cut."""

LINES_PER_SECOND = 200
"""Records a second logged from one server's stderr, and from its log notifications."""

# C0 and C1 controls (tab aside: it moves the cursor, and overwrites nothing), and the
# Unicode line and paragraph separators, which log viewers and splitlines() break on.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str, limit: int = MAX_LINE) -> str:
    """``text`` fit for one log record: its control characters (other than tab) shown
    as escapes, ``\\n`` and ``\\r`` by name, the others by code (``\\x1b``); other
    characters as they are. Past ``limit`` of its characters, the rest is cut, and the
    record says how many characters were. Mask secrets before: a cut must not show
    part of one.

    Example:
        >>> print(safe_text("all good\\n2025-01-01 CRITICAL app: forged\\x1b[2J\\rover"))
        all good\\n2025-01-01 CRITICAL app: forged\\x1b[2J\\rover
        >>> safe_text("tab\\tand naïve café \\u2028")
        'tab\\tand naïve café \\\\u2028'
        >>> safe_text("x" * 2500)[-22:]
        'xxx... [cut 500 chars]'
    """
    cut = len(text) - limit
    if cut > 0:
        return f"{_CONTROL.sub(_escape, text[:limit])}... [cut {cut} chars]"
    return _CONTROL.sub(_escape, text)


class LogBudget:
    """At most :data:`LINES_PER_SECOND` records a second (each second starting with the
    first record after the last one ended): :meth:`take` says whether a record may be
    logged, and counts the others. The count goes to ``report`` once a record comes in
    a later second, or on :meth:`flush`; no timer runs in between.

    Example:
        >>> reported = []
        >>> budget = LogBudget(reported.append)
        >>> sum(budget.take() for _ in range(250))
        200
        >>> budget.flush()
        >>> reported
        [50]
    """

    __slots__ = ("_left", "_report", "_started", "dropped")

    def __init__(self, report: Callable[[int], None]) -> None:
        self._report = report
        self._started = -float("inf")
        self._left = LINES_PER_SECOND
        self.dropped = 0
        """Records counted and not logged since the last report."""

    def remaining(self) -> int:
        """How many more records may be logged this second (a new second begins here)."""
        now = time.monotonic()
        if now - self._started >= 1.0:
            self.flush()
            self._started = now
            self._left = LINES_PER_SECOND
        return self._left

    def take(self) -> bool:
        """Whether one record may be logged; if not, it is counted."""
        if self.remaining() > 0:
            self._left -= 1
            return True
        self.dropped += 1
        return False

    def drop(self, count: int) -> None:
        """Count ``count`` records not logged, left out before :meth:`take` (a flood
        is counted, not read record by record)."""
        self.dropped += count

    def flush(self) -> None:
        """Report the records counted and not logged, if any."""
        if self.dropped:
            dropped, self.dropped = self.dropped, 0
            self._report(dropped)


class ServerLog:
    """Logs one connection's log notifications on ``agcore_tools.mcp.server``, at their
    level: masked with ``mask``, made safe (:func:`safe_text`), within a
    :class:`LogBudget`. The count of those left out is logged at the highest level
    among them, so an app that logs errors only learns that errors were left out.
    """

    __slots__ = ("_budget", "_dropped_level", "_mask", "server_name")

    def __init__(self, server_name: str, mask: Callable[[str], str]) -> None:
        self.server_name = server_name
        self._mask = mask
        self._budget = LogBudget(self._report)
        self._dropped_level = logging.NOTSET

    def relay(self, level: int, data: object) -> None:
        """Log one message's ``data`` (any JSON value) at ``level``, if the logger
        takes that level and the budget allows it."""
        if not server_logger.isEnabledFor(level):
            return  # not counted either: the app asked not to see it
        if not self._budget.take():
            self._dropped_level = max(self._dropped_level, level)
            return
        # Masked before the cut, so a secret across it never shows in part.
        text = safe_text(self._mask(str(data)))
        server_logger.log(level, "[%s] %s", self.server_name, text)

    def flush(self) -> None:
        """Log the count of the messages left out, if any (the connection ended)."""
        self._budget.flush()

    def _report(self, dropped: int) -> None:
        level, self._dropped_level = self._dropped_level, logging.NOTSET
        server_logger.log(
            level,
            "[%s] %d log messages not logged (more than %d a second)",
            self.server_name,
            dropped,
            LINES_PER_SECOND,
        )
