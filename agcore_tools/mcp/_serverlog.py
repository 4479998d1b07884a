"""A server's own text in the library's log: made harmless, cut, and within a budget.

What a server writes to its stderr and sends as log notifications (``notifications/
message``) is logged, and it is untrusted: a newline in it would start a record of its
own making ("... CRITICAL agcore_tools.registry: permission check disabled"), terminal
escapes and ``\\r`` would clear or overwrite a terminal's lines or hide text, and a
chatty or hostile server could write millions of records, or one of a gigabyte; bidi
overrides and zero-width characters would make a record read otherwise than it holds.
So each record shows the control and invisible format characters as escapes
(:func:`safe_text`), is cut past :data:`MAX_LINE`
characters, and at most :data:`LINES_PER_SECOND` records a second are logged per
server, the others counted in one record. The same rules for stderr (``_stderr``) and
for the log notifications (:class:`ServerLog`).
"""

from __future__ import annotations

import logging
import re
import time
import unicodedata
from collections.abc import Callable

__all__ = ["LINES_PER_SECOND", "MAX_LINE", "LogBudget", "ServerLog", "safe_text"]

server_logger = logging.getLogger("agcore_tools.mcp.server")

MAX_LINE = 2000
"""Characters of a server's text shown in one log record; the rest is cut."""

LINES_PER_SECOND = 200
"""Records a second logged from one server's stderr, and from its log notifications."""

# What a reader cannot see as it is: C0 and C1 controls (category Cc; tab aside, as it
# moves the cursor and overwrites nothing); the line and paragraph separators (Zl, Zp),
# which log viewers and splitlines() break on; the format characters (Cf: bidi
# overrides, isolates and marks, which reorder what a line shows, as in "Trojan
# Source"; zero-width characters; the tag characters, which can carry hidden ASCII);
# and lone surrogates (Cs), which a log handler cannot encode. Listed from Unicode 15.1:
# the re module has no category classes, and working them out from unicodedata over
# every code point would cost a third of a second at import (a test holds the list to
# the running Python's unicodedata).
_HIDDEN = (
    "\x00-\x08\x0a-\x1f\x7f-\x9f\xad\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2"
    "\u180e\u200b\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
# The soft hyphen (U+00AD) among them, though text from HTML carries it (&shy;): a log
# line is not hyphenated for layout, so it serves no word there, and most viewers show
# it as nothing, hiding a break inside a word: "ad\xadmin" reads as "admin" while a
# search for the name misses it, as with a zero-width space.
_MARKS = "\u061c\u200e\u200f"
# The left-to-right, right-to-left and Arabic letter marks (Cf too) are how Hebrew and
# Arabic text is written right: each acts as one invisible letter of its direction. They
# open no embedding and reverse no letters, as the overrides, embeddings and isolates
# do ("Trojan Source": rustc's text_direction_codepoint_in_literal lint, made against
# it, names those nine only); what a mark can do is what any right-to-left letter does to
# the digits and punctuation beside it: lay them out right to left ("port \u200f80 443"
# shows as "port 443 80" in a terminal, as "שלום 80 443" shows "443 80 שלום"). So they
# stay as they are in a line that holds a right-to-left letter, which a reader sees and
# knows the line for; in a line with none they serve no script and are escaped, so that
# no number of a line in Latin letters is laid out otherwise than it is written.
# The zero-width non-joiner and joiner (also Cf) are part of how Persian and Indic
# words are written, and join an emoji sequence (a family, a flag): between two
# characters of such text they stay; next to ASCII, a line's ends, or another hidden
# character, they are escaped too.
_TEXT = f"[^\\x00-\\x7f{_HIDDEN}{_MARKS}]"
_JOINERS = f"(?<!{_TEXT})[\u200c\u200d]|[\u200c\u200d](?!{_TEXT})"
_CONTROL = re.compile(f"[{_HIDDEN}]|{_JOINERS}")
_CONTROL_OR_MARK = re.compile(f"[{_HIDDEN}{_MARKS}]|{_JOINERS}")
_MARK = re.compile(f"[{_MARKS}]")
_RIGHT_TO_LEFT = frozenset({"R", "AL"})
"""The bidi classes of Hebrew's, Arabic's, Syriac's, Thaana's (...) letters."""
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escaped(text: str) -> str:
    """``text`` with what :func:`safe_text` escapes escaped: the bidi marks too, unless
    a right-to-left letter is shown in it (not one of the escaped characters, such as
    the Syriac abbreviation mark, which is of class AL too)."""
    if _MARK.search(text) is None:
        return _CONTROL.sub(_escape, text)
    shown = _CONTROL_OR_MARK.sub("", text)
    right_to_left = any(unicodedata.bidirectional(char) in _RIGHT_TO_LEFT for char in shown)
    return (_CONTROL if right_to_left else _CONTROL_OR_MARK).sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def safe_text(text: str, limit: int = MAX_LINE) -> str:
    """``text`` fit for one log record: the characters a reader cannot see as they are
    shown as escapes: control characters (other than tab), ``\\n`` and ``\\r`` by
    name, the others by code (``\\x1b``); the line and paragraph separators
    (``\\u2028``); the invisible format characters, such as the bidi overrides and
    isolates that make a line read other than it holds (``\\u202e``) and the
    zero-width ones (but a joiner or non-joiner inside non-ASCII text, as Persian
    words and emoji sequences have), and the soft hyphen; the left-to-right,
    right-to-left and Arabic letter marks, unless the text shows a right-to-left
    letter (Hebrew and Arabic text is written with them); and lone surrogates. Other
    characters (accents, CJK, emoji) stay as they are. Past ``limit`` of its
    characters, the rest is cut, and the record says how many characters were. Mask
    secrets before: a cut must not show part of one.

    Example:
        >>> print(safe_text("all good\\n2025-01-01 CRITICAL app: forged\\x1b[2J\\rover"))
        all good\\n2025-01-01 CRITICAL app: forged\\x1b[2J\\rover
        >>> safe_text("tab\\tand naïve café \\u2028")
        'tab\\tand naïve café \\\\u2028'
        >>> print(safe_text("access \\u202edenied\\u202c 東京 🚀 a\\u200bb ad\\u200cmin"))
        access \\u202edenied\\u202c 東京 🚀 a\\u200bb ad\\u200cmin
        >>> safe_text("می\\u200cخواهم 👩\\u200d💻") == "می\\u200cخواهم 👩\\u200d💻"
        True
        >>> safe_text("שלום!\\u200f port \\u202e80") == "שלום!\\u200f port \\\\u202e80"
        True
        >>> print(safe_text("port \\u200f80 443, ad\\xadmin"))
        port \\u200f80 443, ad\\xadmin
        >>> safe_text("x" * 2500)[-22:]
        'xxx... [cut 500 chars]'
    """
    cut = len(text) - limit
    if cut > 0:
        return f"{_escaped(text[:limit])}... [cut {cut} chars]"
    return _escaped(text)


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
