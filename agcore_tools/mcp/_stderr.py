"""A stdio server's stderr: drained continuously, logged within a budget, head and tail kept for errors.

A server that floods stderr must never stall: if nobody read the pipe, the child would
block on its next write and stop answering. So the pipe is always drained at full
speed; only the logging is bounded (a per-second line budget, the rest counted and
reported), and the first and last lines are kept for start-up error messages: a Node
server names its fault on the first line of a crash and a stack of frames follows it,
while Python names it on the last line. Each line is shown as ``_serverlog`` shows a
server's text (control characters escaped, cut), in the log and the tail, which error
messages quote.

A server that fails to start often echoes the credential it was given ("bad credentials:
ghp_..."): the values of its ``env``, and those its command line shows as ``***``
(``--api-key X``, ``-e NAME=X``), are masked in both the log and the tail. The same
masking (see ``agcore_tools/_redact.py``) applies to the log notifications a server sends
(``agcore_tools.mcp.server``), with the credentials an HTTP connection's requests carried
(:class:`SentSecrets`): an ``auth=`` flow puts its token on them, not in the transport.
So does a server's error, both in the library's message and in the SDK errors it is
chained from (a traceback prints them too).
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .._masked_error import masked_error
from .._redact import (
    header_secrets,
    mask,
    mask_credentials,
    secret_values,
    url_secrets,
)
from ..error import ToolError
from ._command_secrets import arg_secrets, env_secrets, named_arg_secrets, secret_name
from ._protocol import PROBE
from ._serverlog import LINES_PER_SECOND, MAX_LINE, LogBudget, safe_text
from .transport import StdioTransport, StreamableHttpTransport

if TYPE_CHECKING:
    from anyio.abc import ByteReceiveStream

__all__ = ["SentSecrets", "StderrLog", "named_transport_secrets", "transport_secrets"]

logger = logging.getLogger("agcore_tools.mcp.stderr")

_CHUNK = 65536
_HEAD_LINES = 10
_TAIL_LINES = 20
_HEAD_CHARS = 2500
_TAIL_CHARS = 4000
"""What :meth:`StderrLog.tail` shows of the first lines and of the last, in characters:
an error message quoting them stays readable (each line may be 2,000 characters)."""
_CAUSE = re.compile(r"\b\w*(?:Error|Exception)(?: \[\w+\])?:|\bpanicked at\b|^panic: ")
"""A line that names what failed: ``Error: ...``, ``TypeError [ERR_X]: ...``,
``sqlite3.OperationalError: ...``, Rust's ``thread 'main' panicked at``, Go's
``panic: ``; not a stack frame, nor the paths a Node error lists."""
_DUMP_HEADER = re.compile(r"Failed to validate request|validation errors? for", re.IGNORECASE)
"""The first line of such a report (pydantic's ``N validation errors for
ClientRequest``, after the SDK's ``Failed to validate request:``)."""
_DUMP_LOOKBACK = 8
"""How many lines before the first naming the probe its report's first line may be:
pydantic quotes the method two lines after it, and a rich log handler's wrapping adds a
few. Fewer than the tail holds, so those lines are still in it."""
_RECENT_CREDENTIALS = 64
"""Distinct credential header values :class:`SentSecrets` keeps from the requests, the
most recently sent. A server echoes what it was sent lately; an auth that signs each
request (an HMAC or SigV4 signature, a JWT per request) sends a new value every time,
and keeping them all grew without end, as did the loop time each request spent on them."""


def transport_secrets(transport: StdioTransport | StreamableHttpTransport) -> list[str]:
    """What a server may echo that a log must not show (``_redact.secret_values``): a
    stdio server's ``env`` values (but a plain file path, and of a URL only its
    password, query values and path tokens, unless the variable's name marks a secret:
    ``_command_secrets.env_secrets``) and the arguments its command line shows as
    ``***`` (see :meth:`StdioTransport.describe`); an HTTP server's header values, and the
    credential after an authentication scheme (the token of ``Bearer ...``), and what
    its URL shows as ``***`` (hosted servers take keys as ``?token=...``): its password
    and query values, but for those of ``api-version``, ``version`` and ``format``.

    Example:
        >>> http = StreamableHttpTransport("https://x/mcp", {"Authorization": "Bearer ghp_S3CRETt0ken",
        ...                                                  "Accept": "application/json, text/event-stream"})
        >>> transport_secrets(http)
        ['application/json, text/event-stream', 'Bearer ghp_S3CRETt0ken', 'ghp_S3CRETt0ken']
        >>> transport_secrets(StreamableHttpTransport("https://x/mcp?tavilyApiKey=tvly-S3CRET&mode=fast"))
        ['tvly-S3CRET']
        >>> transport_secrets(StdioTransport("npx", ["srv", "--api-key", "sk-S3CRETkey"],
        ...                                  env={"DB_PASSWORD": "hunter2-pw"}))
        ['sk-S3CRETkey', 'hunter2-pw']
    """
    if isinstance(transport, StdioTransport):
        return secret_values([*env_secrets(transport.env or {}), *arg_secrets(transport.args)])
    headers = header_secrets((transport.headers or {}).values())
    return secret_values([*headers, *url_secrets(transport.url)])


def named_transport_secrets(transport: StdioTransport | StreamableHttpTransport) -> list[str]:
    """Those of :func:`transport_secrets` that a name or a prefix marks as secrets, as
    a cassette scrubs them from its whole file (where an ordinary value, such as
    ``NODE_ENV=production``, would corrupt what is replayed): the ``env`` values and
    headers whose names end in ``token``, ``key``, ``password``, ``secret``, ... (and
    ``Authorization``, with the token after its scheme); what the command line shows as
    ``***`` for such a name or a key's known prefix (see
    :meth:`StdioTransport.describe`), in ``env`` values too; a URL's password and its
    secret-named query values. Values of any length, longest first.

    Example:
        >>> named_transport_secrets(StdioTransport("docker", ["run", "-e", "NODE_ENV=production",
        ...     "-e", "API_TOKEN=t-S3CRET"], env={"LANG": "en_US.UTF-8", "DB_PASSWORD": "hunter2-pw",
        ...     "DATABASE_URL": "postgresql://app:pw-S3CRET@db/prod"}))
        ['hunter2-pw', 'pw-S3CRET', 't-S3CRET']
        >>> named_transport_secrets(StreamableHttpTransport("https://x/mcp?token=t-S3CRET",
        ...     {"Authorization": "Bearer ghp_S3CRETt0ken", "Accept": "application/json"}))
        ['Bearer ghp_S3CRETt0ken', 'ghp_S3CRETt0ken', 't-S3CRET']
    """
    found: list[str] = []
    if isinstance(transport, StdioTransport):
        # An env entry is what docker's -e NAME=value is: named by NAME, or by its content.
        env = [f"{name}={value}" for name, value in (transport.env or {}).items()]
        found += named_arg_secrets([*transport.args, *env])
    else:
        headers = (transport.headers or {}).items()
        found += header_secrets(value for name, value in headers if secret_name(name))
        found += url_secrets(transport.url, secret_name)
    return sorted(set(found), key=lambda value: (-len(value), value))


class SentSecrets:
    """What a client's connections mask in what its server writes back: the
    :func:`transport_secrets`, and the credentials its requests were seen to carry,
    whatever put them there (an ``auth=`` flow's token, a header the client of an
    ``http_client_factory`` adds), noted as they are sent: the last 64 distinct values
    (a value sent again counts as recent again); then, as a backstop, any credential
    after ``Bearer``, ``Basic`` or ``Token`` (``_redact.mask_credentials``). One for all
    the connections of a client, so that a restart forgets none.

    Example:
        >>> secrets = SentSecrets(StreamableHttpTransport("https://x/mcp"))
        >>> secrets.note([("accept", "application/json, text/event-stream"),
        ...               ("authorization", "Bearer at-S3CRETt0ken")])
        >>> secrets.mask("rejected at-S3CRETt0ken, accept: application/json, text/event-stream")
        'rejected ***, accept: application/json, text/event-stream'
        >>> sorted(secrets.carried())
        ['Bearer at-S3CRETt0ken', 'at-S3CRETt0ken']
    """

    __slots__ = ("_noted", "_static", "_values", "transport")

    def __init__(self, transport: StdioTransport | StreamableHttpTransport) -> None:
        self.transport = transport
        """The transport whose secrets these are."""
        self._static = transport_secrets(transport)
        # The header values noted, least recently sent first (the values are unused).
        self._noted: OrderedDict[str, None] = OrderedDict()
        # Both, longest first (a secret holding another is masked whole), made again
        # by mask() after a change: not per request, which may bring a new value each.
        self._values: list[str] | None = self._static

    def note(self, headers: Iterable[tuple[str, str]]) -> None:
        """Take the values of a request's headers named for a secret (``Authorization``,
        ``Proxy-Authorization``, ``X-Api-Key``, ``Cookie``...): not every header, as
        ``Accept`` or ``Content-Type`` values are words a log needs. The least recently
        sent value goes once there are more than 64.

        Example:
            >>> secrets = SentSecrets(StreamableHttpTransport("https://x/mcp"))
            >>> for n in range(100):
            ...     secrets.note([("authorization", f"Bearer sig-{n:04}"), ("x-api-key", "k-S3CRET")])
            >>> len(secrets.carried()), "k-S3CRET" in secrets.carried()
            (127, True)
            >>> secrets.mask("signatures sig-0099 and sig-0000; key k-S3CRET")
            'signatures *** and sig-0000; key ***'
        """
        noted = self._noted
        for name, value in headers:
            if value in noted:
                noted.move_to_end(value)
            elif secret_name(name):
                noted[value] = None
                if len(noted) > _RECENT_CREDENTIALS:
                    noted.popitem(last=False)
                self._values = None

    def carried(self) -> frozenset[str]:
        """The credentials noted (see :meth:`note`): each value, and the one after its
        scheme (the token of ``Bearer ...``). Not the transport's, which a cassette
        judges by its own rules."""
        return frozenset(header_secrets(tuple(self._noted)))

    def mask(self, text: str) -> str:
        """``text`` with every secret known so far shown as ``***``."""
        values = self._values
        if values is None:
            values = secret_values([*self._static, *header_secrets(tuple(self._noted))])
            self._values = values
        return mask_credentials(mask(text, values))

    def masked(self, exc: BaseException) -> BaseException:
        """``exc`` to chain an error from or to log: itself, or a stand-in of its type
        with every text on its chain masked (``_masked_error.masked_error``), since a
        traceback prints the whole chain, a server's words in the SDK's errors too.

        Example:
            >>> secrets = SentSecrets(StreamableHttpTransport("https://x/mcp"))
            >>> secrets.note([("authorization", "Bearer at-S3CRETt0ken")])
            >>> str(secrets.masked(ValueError("upstream refused at-S3CRETt0ken")))
            'upstream refused ***'
        """
        return masked_error(exc, self.mask)

    def masked_error(self, error: ToolError) -> ToolError:
        """:meth:`masked` for the library's own ``error``: a stand-in of its type, its
        message and attributes masked, with its chain masked (a part of the chain that
        cannot be read is shown as plain text instead).

        Example:
            >>> from agcore_tools import McpError
            >>> secrets = SentSecrets(StreamableHttpTransport("https://x/mcp"))
            >>> secrets.note([("authorization", "Bearer at-S3CRETt0ken")])
            >>> shown = secrets.masked_error(McpError("api", "refused at-S3CRETt0ken"))
            >>> type(shown).__name__, shown.reason
            ('McpError', 'refused ***')
        """
        shown = self.masked(error)
        if isinstance(shown, ToolError):
            return shown
        # Not reached (a ToolError's own text and attributes always read): its text, then.
        return ToolError(str(shown), tool_name=error.tool_name)


class StderrLog:
    """Reads one child's stderr into the ``agcore_tools.mcp.stderr`` logger.

    Each of ``secrets`` (see :func:`transport_secrets`) 8 characters or longer is
    shown as ``***`` in the log and the tail.

    Example:
        >>> log = StderrLog("fs", secrets=["ghp_S3CRETt0ken"])
        >>> log.feed(b"starting\\nbad credentials: ghp_S3CRETt0ken\\n")
        >>> log.tail()
        'starting | bad credentials: ***'
    """

    __slots__ = (
        "_after_cause",
        "_before",
        "_budget",
        "_cause",
        "_dump",
        "_head",
        "_header",
        "_kept",
        "_left_out",
        "_partial",
        "_secrets",
        "_seen",
        "_tail",
        "server_name",
    )

    def __init__(self, server_name: str, secrets: Iterable[str] = ()) -> None:
        self.server_name = server_name
        self._secrets = secret_values(secrets)
        self._head: list[str] = []
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)
        # The lines between head and tail: how many, the last that looked like an
        # error, and how many of them came after it.
        self._left_out = 0
        self._cause: str | None = None
        self._after_cause = 0
        self._before = 0
        """Lines left out of the tail as the probe's report (see :meth:`leave_out_probe_dump`)."""
        self._kept = ""
        """What the tail showed of the lines before that report, once it is left out."""
        self._seen = 0  # lines so far, the ones skipped in a flood included
        self._header: int | None = None  # the last line that may open a probe's report
        # Where the probe's report began, and what the tail showed of the lines before it.
        self._dump: tuple[int, str] | None = None
        self._partial = b""
        self._budget = LogBudget(self._report_suppressed)

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
        if len(self._partial) > MAX_LINE:
            # A line with no end in sight: emit what we have rather than buffer without bound.
            lines.append(self._partial)
            self._partial = b""
        # Only the lines that can still be logged or reach the head or the tail are
        # decoded: a flood costs one split per chunk, not one decode per line.
        first = _HEAD_LINES - len(self._head)
        keep = max(_TAIL_LINES, self._budget.remaining())
        skipped = len(lines) - max(first, 0) - keep
        if skipped > 0:
            self._budget.drop(skipped)
            # The tail's lines came before the skipped ones, and the lines kept after
            # them fill the tail again.
            while self._tail:
                self._leave_out(self._tail.popleft())
            self._left_out += skipped
            self._after_cause += skipped
            self._seen += skipped
            lines = lines[:first] + lines[first + skipped :] if first > 0 else lines[skipped:]
        for raw in lines:
            self._line(raw)

    def flush(self) -> None:
        """Log a last unterminated line and the count of suppressed lines, if any."""
        if self._partial:
            self._line(self._partial)
            self._partial = b""
        self._budget.flush()

    def leave_out_probe_dump(self) -> None:
        """Leave the report the server wrote for the ``server/discover`` probe out of
        :meth:`tail`, which counts its lines (``... N lines for the server/discover
        probe ...``), shows the lines before it as it did, and keeps the first and the
        last of those that come next. The report runs from its first line (``Failed to
        validate request``, ``validation error``) or, with none just before, from the
        first line naming the probe, to now; with no line naming the probe, nothing is
        left out. Every line is still logged.

        Example:
            >>> log = StderrLog("db")
            >>> log.feed(b"Starting the server\\nFailed to validate request: 1 validation error\\n"
            ...          b"  Input should be 'ping' [input_value='server/discover']\\n")
            >>> log.leave_out_probe_dump()
            >>> log.feed(b"Traceback (most recent call last):\\nOSError: disk full\\n")
            >>> log.tail()
            'Starting the server | ... 2 lines for the server/discover probe ... | Traceback (most recent call last): | OSError: disk full'
        """
        if self._dump is None:
            return
        start, self._kept = self._dump
        self._dump = None
        self._before = self._seen - start
        self._head.clear()
        self._tail.clear()
        self._left_out = self._after_cause = 0
        self._cause = None

    def tail(self) -> str:
        """The first 10 lines and the last 20, joined with ``" | "`` for one-line error
        messages; between them, how many lines were left out, and the last of those
        that looks like an error (``Error: ...``, ``panicked at``); after
        :meth:`leave_out_probe_dump`, the lines before the probe's report, the count of
        its lines, then those of the lines since. At most about 8,500 characters (11,000
        with a probe's report left out): the first lines cut at their end, the last at
        their start.

        Example:
            >>> log = StderrLog("db")
            >>> log.feed(b"".join(b"starting %d\\n" % n for n in range(10)))
            >>> log.feed(b"Error: no bindings file\\n" + b"    at load\\n" * 25)
            >>> shown = log.tail().split(" | ")
            >>> shown[:2], shown[9:13], len(shown)
            (['starting 0', 'starting 1'], ['starting 9', 'Error: no bindings file', '... 5 lines ...', '    at load'], 32)
        """
        probe = f"... {_lines(self._before)} for the {PROBE} probe ..." if self._before else ""
        now = self._shown(self._head, self._tail)
        return " | ".join(part for part in (self._kept, probe, now) if part)

    def _shown(self, head: Sequence[str], tail: Sequence[str]) -> str:
        between: list[str] = []
        if self._cause is not None:
            before = self._left_out - self._after_cause - 1
            between += [f"... {_lines(before)} ..."] if before else []
            between.append(self._cause)
            if self._after_cause:
                between.append(f"... {_lines(self._after_cause)} ...")
        elif self._left_out:
            between.append(f"... {_lines(self._left_out)} ...")
        first = " | ".join(head)
        if len(first) > _HEAD_CHARS:
            first = f"{first[:_HEAD_CHARS]}... [cut {len(first) - _HEAD_CHARS} chars]"
        last = " | ".join(tail)
        if len(last) > _TAIL_CHARS:
            last = f"[cut {len(last) - _TAIL_CHARS} chars] ...{last[-_TAIL_CHARS:]}"
        return " | ".join(part for part in (first, *between, last) if part)

    def _mark_dump(self, line: int) -> None:
        """``line`` is the first to name the probe: note where its report began (its
        first line, if just before) and what the tail shows of the lines before it."""
        start = line
        if self._header is not None and line - self._header < _DUMP_LOOKBACK:
            start = self._header
        # The report's lines are the last ones taken: in the tail, or in the head while
        # no line was left out between them.
        head, tail = list(self._head), list(self._tail)
        taken = min(line + 1 - start, len(tail) + (0 if self._left_out else len(head)))
        from_tail = min(taken, len(tail))
        tail = tail[: len(tail) - from_tail]
        head = head[: len(head) - (taken - from_tail)]
        shown = self._shown(head, tail)
        if len(shown) > _HEAD_CHARS:
            shown = f"{shown[:_HEAD_CHARS]}... [cut {len(shown) - _HEAD_CHARS} chars]"
        self._dump = (line + 1 - taken, shown)

    def _report_suppressed(self, suppressed: int) -> None:
        # At the level of the lines it counts: a reader of INFO learns some are
        # missing, while an app logging WARNING and above (or nothing, where
        # Python prints warnings to stderr) is not told on each connect that lines
        # it would never have seen were left out (an mcp-1.x FastMCP server logs a
        # burst of validation errors for the server/discover probe).
        logger.info(
            "[%s] %d stderr lines not logged (more than %d lines per second)",
            self.server_name,
            suppressed,
            LINES_PER_SECOND,
        )

    def _line(self, raw: bytes) -> None:
        # A line is at most a chunk and a cut partial line long (see feed).
        text = raw.decode("utf-8", "replace")
        if self._secrets:
            # Masked before the cut, so a secret across MAX_LINE never shows in part.
            text = mask(text, self._secrets)
        text = text.rstrip()
        if not text:
            return
        text = safe_text(text)
        if len(self._head) < _HEAD_LINES:
            self._head.append(text)
        else:
            self._to_tail(text)
        line, self._seen = self._seen, self._seen + 1
        if _DUMP_HEADER.search(text) is not None:
            self._header = line
        if self._dump is None and PROBE in text:
            self._mark_dump(line)
        if self._budget.take():
            logger.info("[%s] %s", self.server_name, text)

    def _to_tail(self, text: str) -> None:
        if len(self._tail) == _TAIL_LINES:
            self._leave_out(self._tail.popleft())
        self._tail.append(text)

    def _leave_out(self, text: str) -> None:
        self._left_out += 1
        if _CAUSE.search(text) is not None:
            self._cause, self._after_cause = text, 0
        else:
            self._after_cause += 1


def _lines(count: int) -> str:
    return f"{count} line" if count == 1 else f"{count} lines"
