"""How a connection's start-up goes, and the error it raises when it fails.

Apart from the owner task (``_connection``) because telling how a start-up failed is a
job of its own: what the child process, the handshake's HTTP answer, the server's
error answer and a first attempt that the ``server/discover`` probe broke (see
``_handshake``) each say is weighed in an order that names the real cause first. The
MCP SDK's import, the first thing a process's first start-up does, is here too.
"""

from __future__ import annotations

from collections.abc import Callable

from .._aio import import_off_loop
from ..error import McpError, McpNotInitializedError, McpTimeoutError, ToolError
from . import _handshake
from ._exchange import HttpExchange, sdk_detail
from ._relisten import describe, leaf
from ._stderr import SentSecrets
from ._stdio import ChildProcess
from .transport import StdioTransport, StreamableHttpTransport

__all__ = ["Startup", "import_sdk"]

# What the first connect imports (most of a second): loaded in a worker thread first,
# so the connect's own imports find them and the loop keeps running meanwhile.
_SDK_MODULES = ("anyio", "mcp", "mcp_types")

_SDK_IMPORT_TIMEOUT = 60.0
"""Seconds the MCP SDK's import may take, once per process (the first connect's).

Not the client's ``timeout``, which bounds the server's start-up: the import is the
client's own cost, which no setting can shorten, and on a loaded machine (or with a
cold disk cache) it can take seconds, so counting it would fail a short-timeout first
connect before the server was even spawned. It runs in a worker thread, so the loop
goes on meanwhile; this bound is only for an import that hangs (a stuck network mount).
"""


async def import_sdk(server_name: str) -> None:
    """Import the MCP SDK off the loop, for the server ``server_name`` starting: at most
    :data:`_SDK_IMPORT_TIMEOUT` seconds, once per process (later starts find it loaded).
    """
    try:
        await import_off_loop(_SDK_MODULES, _SDK_IMPORT_TIMEOUT)
    except TimeoutError as exc:
        raise McpTimeoutError(
            server_name,
            f"the MCP SDK did not finish importing within {_SDK_IMPORT_TIMEOUT:g} s",
        ) from exc
    except ImportError as exc:
        raise McpError(server_name, f"cannot import the MCP SDK: {exc}") from exc


class Startup:
    """The start-up of one connection, attempt by attempt; ``secrets`` (the client's)
    masks what the server said in what it reports.

    Example:
        >>> transport = StdioTransport("files-server")
        >>> startup = Startup("files", transport, SentSecrets(transport))
        >>> print(startup.error(None, None, False, True, lambda: 30.0))  # timed out
        MCP server 'files': `files-server` did not complete the MCP handshake within 30 s
    """

    def __init__(
        self,
        server_name: str,
        transport: StdioTransport | StreamableHttpTransport,
        secrets: SentSecrets,
    ) -> None:
        self.server_name = server_name
        self.transport = transport
        self.secrets = secrets
        self.http = not isinstance(transport, StdioTransport)
        self.exchange = HttpExchange()
        """The HTTP outcome of this attempt's handshake (see ``_exchange``)."""
        self.first_try: str | None = None
        """How the first attempt went, when the probe broke it (see ``_handshake``)."""

    def retry_legacy(self, exc: Exception, child: ChildProcess | None) -> bool:
        """Whether a start-up that failed with ``exc`` (``child``: a stdio server's
        process) is tried again with the ``initialize`` handshake alone, as the probe
        broke the server; if so, say so, and start the next attempt's record."""
        http = self.exchange if self.http else None
        reason = _handshake.probe_failure(exc, child, http, self.secrets.mask)
        if reason is None:
            return False
        _handshake.warn(self.server_name, self.transport, reason, exc, self.secrets)
        self.first_try, self.exchange = reason, HttpExchange()
        return True

    def error(
        self,
        exc: BaseException | None,
        child: ChildProcess | None,
        stopped: bool,
        timed_out: bool,
        timeout: Callable[[], float],
    ) -> ToolError:
        """The error of a start-up that failed with ``exc`` (None: it ended without a
        session), masked: ``stopped`` by the client, ``timed_out`` after the client's
        ``timeout()`` seconds."""
        name = self.server_name
        what = self.transport.describe()
        tail = child.stderr.tail() if child is not None else ""
        first = self.first_try
        retried = _handshake.attempts_note(first) if first is not None else ""
        stderr = f"{retried}; stderr: {tail}" if tail else retried
        if isinstance(exc, ToolError):
            return self.secrets.masked_error(exc)
        answer = _handshake.answer(exc, self.http, self.secrets.mask)
        if stopped:
            error: ToolError = McpNotInitializedError(name, "closed while connecting")
        elif timed_out:
            # Checked first: the child then stopped on our signal, not on its own.
            error = McpTimeoutError(
                name,
                f"{what} did not complete the MCP handshake within "
                f"{timeout():g} s{_handshake.unanswered(child)}{signing_in(self.exchange)}"
                f"{stderr}",
            )
        elif answer is not None and self.exchange.status is None:
            # Checked before the exit: a stdio child exits once its stdin is closed.
            error = McpError(name, f"cannot connect to {what}: {answer}{stderr}")
        elif child is not None and child.returncode is not None:
            error = McpError(name, f"{what} {child.exit_text()} during start-up{stderr}")
        elif exc is None:
            error = McpNotInitializedError(name, "start-up ended without a session")
        elif self.exchange.status is not None:
            http = self.exchange
            # 405 to the handshake's POST: most often an old HTTP+SSE endpoint (".../sse"
            # in Cursor's and Claude's configs), which answers GET only; Express servers
            # answer such a POST with 404.
            hint = _handshake.old_sse_hint(http.status, what)
            error = McpError(
                name,
                f"cannot connect to {what}: {http.describe()}{hint}"
                f"{sdk_detail(leaf(exc), self.secrets.mask)}{retried}",
                status_code=http.status,
                retry_after=http.retry_after,
            )
        else:
            error = McpError(name, f"cannot connect to {what}: {describe(exc)}{stderr}")
        error.__cause__ = exc
        # What the server said (its refusal, in the SDK's errors too) may echo a credential.
        return self.secrets.masked_error(error)


def signing_in(http: HttpExchange) -> str:
    """For a handshake that timed out: that an ``auth=`` flow was still answering the
    server's refusal, as when a sign-in waits on the user (not when it had sent the
    request again and the server was slow to answer it); else ``""``.

    Example:
        >>> refused = HttpExchange(status=401, reason="Unauthorized", auth_running=True)
        >>> signing_in(refused)[:62]
        '; the auth flow answering its HTTP 401 Unauthorized had not fi'
        >>> refused.auth_running = False  # the retry is out, unanswered
        >>> signing_in(refused), signing_in(HttpExchange())
        ('', '')
    """
    if http.status not in (401, 403) or not http.auth_running:
        return ""
    refusal = HttpExchange(status=http.status, reason=http.reason).describe()
    return (
        f"; the auth flow answering its {refusal} had not finished (a sign-in waits "
        "on the user: give the client a longer timeout, or sign in ahead of time)"
    )
