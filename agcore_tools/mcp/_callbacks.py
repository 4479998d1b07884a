"""Calling the user's callbacks (``on_log``, ``on_progress``) from inside the MCP SDK's
tasks: sync or async alike, and a callback's failure is logged, never raised into the
SDK, where it would break the connection. The handlers that answer the server
(``sampling_handler``, ``elicitation_handler``, ``roots_handler``) are guarded too: a
failure is told to the server as a generic error, never its text, which may hold
secrets. They may be sync or async as well: a sync one runs in a worker thread, as a
sync tool or ``needs_approval`` function does (the SDK awaited it, and each request
failed with a ``TypeError``). A handler that does not answer in time (:func:`window`)
is given up on, and the server told so: a request the server sent on its own, outside
any call, waited for ever, and a stuck sync handler held a thread of the tool pool until
``close()``. What is no function at all is refused when the client is made
(:func:`check_callback`): called, it failed at each message instead, with a traceback
logged for each."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from .._aio import run_tool, with_timeout
from .._progress import is_async_callable
from ..error import ToolConfigError
from ._error_text import validation_line
from ._watchdog import Watchdog

__all__ = [
    "HANDLER_KEYWORDS",
    "call_user",
    "check_callback",
    "guarded_handler",
    "live_handlers",
    "window",
]

logger = logging.getLogger("agcore_tools.mcp")

_TAKES = {
    # %r escapes the server's newlines and terminal escapes, which would forge records.
    "on_log": "a function of each McpLogMessage (sync or async), such as "
    'lambda message: logger.info("%r", message.data)',
    "on_progress": "a function of each McpProgress (sync or async), such as "
    "lambda update: print(update.progress, update.total)",
    "sampling_handler": "a function of (context, params) (sync or async) answering as "
    "the MCP SDK's sampling callback does",
    "elicitation_handler": "a function of (context, params) (sync or async) answering as "
    "the MCP SDK's elicitation callback does",
    "roots_handler": "a function of (context) (sync or async) answering as the MCP SDK's "
    "list-roots callback does",
}
"""What each of :class:`~agcore_tools.McpClient`'s callbacks takes, for its error."""


def check_callback(server_name: str, what: str, callback: object) -> None:
    """Refuse ``McpClient(<what>=callback)`` when ``callback`` is neither a function
    (anything callable) nor None.

    Example:
        >>> import logging
        >>> check_callback("demo", "on_log", print)
        >>> check_callback("demo", "on_log", logging.getLogger("app"))
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: MCP server 'demo': on_log must be a function of each McpLogMessage (sync or async), such as lambda message: logger.info("%r", message.data), or None; got a Logger
    """
    if callback is None or callable(callback):
        return
    raise ToolConfigError(
        f"MCP server '{server_name}': {what} must be {_TAKES[what]}, or None; got "
        f"{_a(type(callback).__name__)}"
    )


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


async def call_user(callback: Any, value: Any, server_name: str) -> None:
    """Call a user's callback (sync or async); its failure is logged, never raised into the SDK."""
    try:
        result = callback(value)
        if inspect.isawaitable(result):
            await result
    except Exception:  # a user's callback must not break the connection
        logger.exception("MCP server '%s': callback %r raised", server_name, callback)


def window(watchdog: Watchdog, timeout: Callable[[], float]) -> Callable[[], float]:
    """The seconds a handler has to answer a server's request that comes now: the
    client's ``timeout()``, or longer while a tool call in flight on the connection
    (``watchdog``) has a later deadline, as a call's ``timeout=`` may set (2025-era
    requests do not say which call they are for, and it may be that one).

    Example:
        >>> async def now() -> float:
        ...     return window(Watchdog(), lambda: 30.0)()
        >>> asyncio.run(now())
        30.0
    """

    def seconds() -> float:
        left = watchdog.latest() - asyncio.get_running_loop().time()
        return max(timeout(), left)

    return seconds


_ANSWERS = {
    "sampling_handler": ("CreateMessageResult", "CreateMessageResultWithTools"),
    "elicitation_handler": ("ElicitResult",),
    "roots_handler": ("ListRootsResult",),
}
"""The SDK types (of ``mcp_types``) each handler may answer with, besides ``ErrorData``."""


def _answer_type(what: str) -> Any:
    """A pydantic ``TypeAdapter`` of what the handler ``what`` may answer (a mapping of
    the same shape too, as the SDK takes it)."""
    import mcp_types
    from pydantic import TypeAdapter

    kinds = tuple(getattr(mcp_types, name) for name in _ANSWERS[what])
    union: Any = kinds[0]
    for kind in kinds[1:]:
        union = union | kind
    return TypeAdapter(union | mcp_types.ErrorData)


class _Failed(Exception):
    """A handler's own failure, told apart from the end of its time."""

    def __init__(self, exc: Exception) -> None:
        super().__init__()
        self.exc = exc


def guarded_handler(handler: Any, what: str, server_name: str, seconds: Callable[[], float]) -> Any:
    """``handler`` (an app's SDK callback: ``context, params``, or ``context`` alone for
    roots) as the SDK's async callback, whose failure the server gets as a JSON-RPC
    error saying only that ``what`` failed; the exception's type is logged at WARNING
    (not its text, which may hold secrets). A sync handler runs in a worker thread, off
    the event loop, and an awaitable it returns is awaited. One that has not answered
    within ``seconds()`` (see :func:`window`) is given up on, with a WARNING, and the
    server told it did not answer in time. An answer that is not what the handler must
    return (an SDK result, a mapping of its shape, or ``ErrorData``) is logged, its
    type and fault, at WARNING, and the server told the handler gave no valid answer.
    None stays None.

    Example:
        >>> async def broken(context: Any, params: Any) -> Any:
        ...     raise RuntimeError("token sk-123 rejected")
        >>> guarded = guarded_handler(broken, "sampling_handler", "demo", lambda: 5.0)
        >>> asyncio.run(guarded(None, None)).message
        "the client's sampling_handler failed"
        >>> from mcp_types import ListRootsResult, Root
        >>> def listed(context: Any) -> ListRootsResult:
        ...     return ListRootsResult(roots=[Root(uri="file:///srv")])
        >>> roots = guarded_handler(listed, "roots_handler", "demo", lambda: 5.0)
        >>> [str(root.uri) for root in asyncio.run(roots(None)).roots]
        ['file:///srv']
        >>> wrong = guarded_handler(lambda context: ["file:///srv"], "roots_handler", "demo", lambda: 5.0)
        >>> asyncio.run(wrong(None)).message
        "the client's roots_handler returned no valid answer"
        >>> async def stuck(context: Any, params: Any) -> Any:
        ...     await asyncio.Event().wait()
        >>> late = guarded_handler(stuck, "sampling_handler", "demo", lambda: 0.01)
        >>> asyncio.run(late(None, None)).message
        "the client's sampling_handler did not answer within 0.01 s"
    """
    if handler is None:
        return None
    from mcp_types import INTERNAL_ERROR, ErrorData

    awaited = is_async_callable(handler)
    label = f"{what} of MCP server '{server_name}'"
    answers = _answer_type(what)
    expected = " or ".join(_ANSWERS[what])

    async def answer(args: tuple[Any, ...]) -> Any:
        try:
            if awaited:
                return await handler(*args)
            # Cancelled (out of time, or the client closing), the thread runs on and its
            # answer is dropped: no thread can be stopped from outside.
            answered = await run_tool(label, handler, *args)
            if inspect.isawaitable(answered):  # a sync callable wrapping an async one
                answered = await answered
            return answered
        except Exception as exc:
            raise _Failed(exc) from exc

    async def guarded(*args: Any) -> Any:
        limit = seconds()
        try:
            answered = await with_timeout(answer(args), limit)
        except TimeoutError:
            logger.warning(
                "MCP server '%s': the client's %s did not answer within %g s; the server "
                "was told so%s",
                server_name,
                what,
                limit,
                "" if awaited else " (its thread runs on: Python cannot stop a thread)",
            )
            message = f"the client's {what} did not answer within {limit:g} s"
            return ErrorData(code=INTERNAL_ERROR, message=message)
        except _Failed as failed:  # its text may hold secrets: not logged, not sent
            logger.warning(
                "MCP server '%s': the client's %s raised %s; the server was told it failed",
                server_name,
                what,
                type(failed.exc).__name__,
            )
            return ErrorData(code=INTERNAL_ERROR, message=f"the client's {what} failed")
        return valid(answered)

    def valid(answered: Any) -> Any:
        # Checked here, not by the SDK: the SDK told a 2025-era server "Invalid request
        # parameters" (its tool's error then read as the server refusing the call, "not
        # run"), and a 2026-07-28 one's call failed as the server's invalid answer, with
        # nothing naming the handler. The values are not logged: they may hold anything.
        from pydantic import ValidationError

        try:
            return answers.validate_python(answered)
        except ValidationError as exc:
            logger.warning(
                "MCP server '%s': the client's %s returned %s, not %s (or ErrorData): %s; "
                "the server was told it failed",
                server_name,
                what,
                "None" if answered is None else _a(type(answered).__name__),
                _a(expected),
                validation_line(exc),
            )
            message = f"the client's {what} returned no valid answer"
            return ErrorData(code=INTERNAL_ERROR, message=message)

    return guarded


HANDLER_KEYWORDS = {
    "sampling_handler": "sampling_callback",
    "elicitation_handler": "elicitation_callback",
    "roots_handler": "list_roots_callback",
}
"""The MCP SDK ``Client`` keyword each of the client's handlers is passed as."""


def live_handlers(
    read: Callable[[str], Any], server_name: str, seconds: Callable[[], float], declining: Any
) -> dict[str, Any]:
    """The SDK ``Client`` keywords of the handlers that answer the server, each read
    (``read(name)``, such as ``"sampling_handler"``) when a request comes, so that one
    replaced on the client answers from then on, on the connection already open.

    A capability is declared when connecting, and only then: the SDK advertises
    sampling or roots for a callback it is given, and the server sends no request the
    client did not advertise. So sampling and roots get a callback only when their
    handler is set now; one set later takes effect at the next connection (the client
    warns when it is set). Elicitation is always advertised: with no handler (set
    later, or removed), ``declining`` answers (see :mod:`._elicitation`). A sampling
    or roots handler removed after connecting is answered as an error naming it."""
    found: dict[str, Any] = {}
    for what, keyword in HANDLER_KEYWORDS.items():
        if what == "elicitation_handler" or read(what) is not None:
            missing = declining if what == "elicitation_handler" else _removed(what)
            found[keyword] = _live(read, what, server_name, seconds, missing)
        else:
            found[keyword] = None
    return found


def _live(
    read: Callable[[str], Any],
    what: str,
    server_name: str,
    seconds: Callable[[], float],
    missing: Any,
) -> Any:
    """The SDK callback answering with the handler ``what`` as it is when a request
    comes (guarded, see :func:`guarded_handler`), or ``missing`` while there is none."""
    last: list[Any] = [None, None]  # the handler last read, and its guarded form

    async def answer(*args: Any) -> Any:
        handler = read(what)
        if handler is None:
            return await missing(*args)
        if handler is not last[0]:
            last[:] = [handler, guarded_handler(handler, what, server_name, seconds)]
        return await last[1](*args)

    return answer


def _removed(what: str) -> Any:
    """What answers for the ``what`` handler removed after it was advertised."""

    async def refuse(*args: Any) -> Any:
        from mcp_types import INVALID_REQUEST, ErrorData

        return ErrorData(code=INVALID_REQUEST, message=f"the client no longer has a {what}")

    return refuse
