"""What the library's MCP errors say of a failure: a server's words, quoted safely, and
the SDK's own failures and reports, read for what they are, in one line.

A server's words (a JSON-RPC error answer's message, an ``isError`` result's text, a
task's failure) go into the library's errors, which apps log and print, so
:func:`quoted` shows them as the server's log messages are logged (``_serverlog``):
masked first, then its control and invisible format characters escaped (a newline or
a terminal escape would forge a log record or drive the terminal, a bidi override
would make it read otherwise), and cut past
:data:`~agcore_tools.mcp._serverlog.MAX_LINE` characters; :func:`server_word` shows a
short word it chose (a task's id, its status) the same way, cut shorter.

The SDK's own failures have codes that servers use for their errors too (-32000, a
closed connection; -32001, its timeout; -32700, an answer it could not parse):
:func:`sdk_own` and :func:`sdk_parse_error` tell them apart by the SDK's exact
messages, so that a server's answer with one is read as an answer like any other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._serverlog import safe_text

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "GENERIC_CLOSE",
    "first_line",
    "location",
    "malformed",
    "quoted",
    "sdk_own",
    "sdk_parse_error",
    "server_word",
    "size_hint",
    "validation_line",
]

GENERIC_CLOSE = "Connection closed"
"""The SDK's message when its dispatcher shut down (the transport ended)."""
_SDK_TIMEOUT = re.compile(r"Request .* timed out")
"""The SDK's message when its own clock ran out on a request (``Request 'ping' timed out``)."""


def quoted(text: str, hide: Callable[[str], str] = str) -> str:
    r"""A server's ``text`` as a message of the library quotes it: masked by ``hide``
    (the connection's secrets), then on one line with its control and invisible format
    characters escaped (``_serverlog.safe_text``), and cut past
    :data:`~agcore_tools.mcp._serverlog.MAX_LINE` characters (after the masking, so
    that a cut never shows part of a secret).

    Example:
        >>> print(quoted("denied tok-S3CRET\n2025-01-01 CRITICAL app: forged\x1b[2J",
        ...              lambda text: text.replace("tok-S3CRET", "***")))
        denied ***\n2025-01-01 CRITICAL app: forged\x1b[2J
    """
    return safe_text(hide(text))


WORD_LIMIT = 100
"""Characters of a short word a server chooses (a task's id, its status) shown in an
error or a log record: a UUID is 36, and a longer one says nothing more."""


def server_word(word: object) -> str:
    r"""A short word a server chose (a task's id, its status, an input request's key)
    as the library's errors and logs show it: on one line with its control and invisible
    format characters escaped (``_serverlog.safe_text``), as a hostile server's newline
    would forge a log record, and cut past :data:`WORD_LIMIT` characters.

    Example:
        >>> print(server_word("t-1\n2025-01-01 CRITICAL app: forged\x1b[2J"))
        t-1\n2025-01-01 CRITICAL app: forged\x1b[2J
        >>> server_word("x" * 150)[-21:]
        'xxx... [cut 50 chars]'
    """
    return safe_text(str(word), WORD_LIMIT)


def sdk_own(exc: Any, http: bool) -> bool:
    """Whether ``exc``, an SDK ``MCPError`` with code -32000 (connection closed) or
    -32001 (request timed out), is the SDK's own failure, not the server's error answer.

    The SDK's timeout says ``Request 'ping' timed out``; over stdio its closed
    connection says ``Connection closed`` (as an MCP Python SDK server answers requests
    in flight when it shuts down); neither has data. Over HTTP a broken stream fails its
    request with -32000 and a reason, so any -32000 is taken for one (then a ping decides).

    Example:
        >>> from mcp.shared.exceptions import MCPError
        >>> sdk_own(MCPError(-32001, "Request 'ping' timed out"), http=False)
        True
        >>> sdk_own(MCPError(-32001, "upstream API timed out after 30 s"), http=False)
        False
        >>> sdk_own(MCPError(-32000, "Connection closed"), http=False)
        True
        >>> sdk_own(MCPError(-32000, "quota exceeded"), http=False)
        False
    """
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    if exc.code == REQUEST_TIMEOUT:
        return exc.data is None and _SDK_TIMEOUT.fullmatch(exc.message) is not None
    if exc.code == CONNECTION_CLOSED:
        return http or (exc.data is None and exc.message == GENERIC_CLOSE)
    return False


def sdk_parse_error(exc: Any) -> bool:
    """Whether ``exc``, an SDK ``MCPError`` with code -32700, is the SDK's own report of
    an answer it could not read (over HTTP, ``Failed to parse JSON response: ...``), not
    the server's answer saying that it could not read the request.

    Example:
        >>> from mcp.shared.exceptions import MCPError
        >>> sdk_parse_error(MCPError(-32700, "Failed to parse SSE message: 1 validation error"))
        True
        >>> sdk_parse_error(MCPError(-32700, "Parse error: unexpected end of input"))
        False
    """
    return any(exc.message.startswith(f"{head}: ") for head in _PARSED)


def size_hint(message: str) -> str:
    """How to raise the limit that ``message`` (an SDK stream's failure) names, if any."""
    if "byte limit" in message:
        return "; StreamableHttpTransport(max_message_size=...) raises the limit"
    return ""


_PARSED = {
    "Failed to parse JSON response": "the server's answer (application/json)",
    "Failed to parse SSE message": "an SSE event of the server's answer",
}
"""The SDK's parse-error prefixes, and what each says was malformed."""
_PYDANTIC_DETAIL = re.compile(r" \[type=.*$")


def malformed(message: str) -> str:
    r"""One line for the SDK's parse error ``message``: what was malformed, and the
    first of pydantic's complaints, without its input echo and documentation URL.

    Example:
        >>> malformed(
        ...     "Failed to parse JSON response: 1 validation error for union[JSONRPCRequest]\n"
        ...     "  Invalid JSON: EOF while parsing a value at line 1 column 33 "
        ...     "[type=json_invalid, input_value=b'{', input_type=bytes]\n"
        ...     "    For further information visit https://errors.pydantic.dev/2.14/v/json_invalid"
        ... )
        "the server's answer (application/json) is malformed: Invalid JSON: EOF while parsing a value at line 1 column 33"
    """
    head, _, detail = message.partition(": ")
    what = _PARSED.get(head)
    if what is None:
        what, detail = "the server's answer", message
    lines = [
        line.strip()
        for line in detail.splitlines()
        if line.strip() and "errors.pydantic.dev" not in line
    ]
    for i, line in enumerate(lines):
        if " [type=" in line:
            complaint = _PYDANTIC_DETAIL.sub("", line)
            # Before the complaint: where (a field), unless it is pydantic's summary.
            where = lines[i - 1] if i > 1 else ""
            return f"{what} is malformed: {f'{where}: ' if where else ''}{complaint}"
    return f"{what} is malformed: {lines[0] if lines else '(no detail)'}"


def validation_line(exc: ValidationError) -> str:
    """One line for pydantic's ``exc``: where in the answer its first error is (a
    listed tool by its index on the page, from 0), what is wrong there, and how many
    more errors there are. The values are not shown: they may hold anything.

    Example:
        >>> from mcp_types import ListToolsResult
        >>> from pydantic import ValidationError
        >>> tools = [{"name": "ok", "inputSchema": {}}, {"name": "odd", "inputSchema": "object"}]
        >>> try:
        ...     ListToolsResult.model_validate({"tools": tools})
        ... except ValidationError as exc:
        ...     print(validation_line(exc))
        tools[1].inputSchema: Input should be a valid dictionary
    """
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    if not errors:
        return first_line(exc)
    first = errors[0]
    where = location(first["loc"])
    more = len(errors) - 1
    tail = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
    return f"{where}: {first['msg']}{tail}" if where else f"{first['msg']}{tail}"


def location(loc: Sequence[int | str]) -> str:
    """Where in an answer pydantic's error location ``loc`` is, as JSON paths read.

    Example:
        >>> location(("tools", 1, "inputSchema")), location(("icons", 0, "src")), location(())
        ('tools[1].inputSchema', 'icons[0].src', '')
    """
    where = ""
    for step in loc:
        where += f"[{step}]" if isinstance(step, int) else f"{'.' if where else ''}{step}"
    return where


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s text, or ``(no message)``.

    Example:
        >>> first_line(RuntimeError("  bad answer\\nmore  ")), first_line(RuntimeError())
        ('bad answer', '(no message)')
    """
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"
