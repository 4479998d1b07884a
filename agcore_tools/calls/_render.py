"""From an invocation to what the model reads: its text (or error text), cut at the
result byte limit, and the images, audio and files of its output."""

from __future__ import annotations

import dataclasses
import logging
from contextvars import ContextVar

from .._aio import run_sync
from .._attachments import ANY_SERVER, Api, Rendered, Server, render
from .._records import ParsedCall, ToolInvocation
from .._text import is_large, result_text, truncate_utf8
from .._unicode import scrub
from ..error import ProgramError, ToolError, ToolExecutionError

__all__ = [
    "RENDER_OFF_LOOP",
    "aborted_text",
    "error_text",
    "model_result",
    "model_result_off_loop",
    "model_text",
]

logger = logging.getLogger("agcore_tools.toolcalls")

RENDER_OFF_LOOP: ContextVar[bool] = ContextVar("agcore_tools_render_off_loop", default=True)
"""Whether :func:`model_result_off_loop` may hand a large output to a worker thread,
and a run its registry's definitions to copy (False in a Temporal workflow, whose code
runs no threads)."""


def error_text(error: ToolError) -> str:
    """What the model reads when a call failed.

    Example:
        >>> from agcore_tools import ToolNotFoundError
        >>> error_text(ToolNotFoundError("nope"))
        "Error: tool 'nope' is not registered"
        >>> print(error_text(ProgramError("MemoryError: too big", "MemoryError: too big")))
        Error: tool 'run_python' failed: MemoryError: too big
    """
    if isinstance(error, ProgramError):  # a traceback reads better on its own lines
        # A report that opens with the reason (the sandbox's one-line report) says it once.
        report = error.report
        if report == error.reason or report.startswith(error.reason + "\n"):
            report = report[len(error.reason) + 1 :]
        return f"Error: {error}\n{report}" if report else f"Error: {error}"
    return f"Error: {error}"


def aborted_text(call: ParsedCall, reason: str) -> str:
    """What the model reads for a call that did not run to the end because the loop stopped.

    Example:
        >>> from agcore_tools.calls import parse_call
        >>> aborted_text(parse_call("add", "c1", "{}"), "the tool loop was cancelled")
        "Error: aborted; tool 'add' did not complete: the tool loop was cancelled"
    """
    return f"Error: aborted; tool '{call.name}' did not complete: {reason}"


def model_text(invocation: ToolInvocation, max_bytes: int | None) -> str:
    r"""The text the model receives for an invocation: output or error, truncated.

    It always encodes as UTF-8 (lone surrogates become U+FFFD). An output that cannot
    be written as JSON at all (nested too deeply, circular) reads as an error.

    Example:
        >>> from agcore_tools import ToolInvocation
        >>> model_text(ToolInvocation("echo", {}, output={"text": "\ud800"}), None)
        '{"text":"�"}'
    """
    if invocation.error is not None:
        text = error_text(invocation.error)
    else:
        try:
            text = result_text(invocation.output)
        except (ValueError, RecursionError) as exc:  # PydanticSerializationError: ValueError
            text = _fallback_text(invocation, exc)
    return truncate_utf8(scrub(text), max_bytes)


def _fallback_text(invocation: ToolInvocation, exc: BaseException) -> str:
    # Neither pydantic nor the json module can write it (see result_text): the tool's fault.
    reason = f"returned a result that cannot be written as JSON: {type(exc).__name__}: {exc}"
    logger.warning("tool %r %s", invocation.tool_name, reason)
    return error_text(ToolExecutionError(invocation.tool_name, reason))


def model_result(
    invocation: ToolInvocation,
    max_bytes: int | None,
    *,
    api: Api,
    max_attachment_bytes: int | None,
    server: Server = ANY_SERVER,
    note: str = "",
) -> Rendered:
    """What the model receives for an invocation: its text (cut at ``max_bytes``) and
    the images, audio and files of its output (see :mod:`agcore_tools.content`) that
    the API and ``server`` take. A ``note`` (an approval's edit) heads the text, and
    ``max_bytes`` holds for the two together."""
    if not note:
        return _unnoted(invocation, max_bytes, api, max_attachment_bytes, server)
    room = (
        None
        if max_bytes is None
        else max(max_bytes - len(note.encode("utf-8", "surrogatepass")), 0)
    )
    result = _unnoted(invocation, room, api, max_attachment_bytes, server)
    return dataclasses.replace(result, text=truncate_utf8(note + result.text, max_bytes))


def _unnoted(
    invocation: ToolInvocation,
    max_bytes: int | None,
    api: Api,
    max_attachment_bytes: int | None,
    server: Server,
) -> Rendered:
    if invocation.error is None:
        try:
            rendered = render(
                invocation.output,
                api=api,
                max_text_bytes=max_bytes,
                max_attachment_bytes=max_attachment_bytes,
                tool=invocation.tool_name,
                server=server,
            )
        except ToolError as exc:  # bytes of no known kind, from a tool that is not @tool
            error = ToolExecutionError(invocation.tool_name, exc.message)
            return Rendered(truncate_utf8(error_text(error), max_bytes))
        except RecursionError:
            rendered = None  # too deep to look into: model_text says it cannot be written
        if rendered is not None:
            return rendered
    return Rendered(model_text(invocation, max_bytes))


async def model_result_off_loop(
    invocation: ToolInvocation,
    max_bytes: int | None,
    *,
    api: Api,
    max_attachment_bytes: int | None,
    server: Server = ANY_SERVER,
    note: str = "",
) -> Rendered:
    """:func:`model_result`, made in a worker thread when the output is large (see
    :func:`~agcore_tools._text.is_large`): scanning megabytes of rows for binary values
    and writing them as JSON would hold up the event loop for tens of milliseconds,
    though the model reads only the first ``max_bytes`` of it. A small output, the
    common case, is made here at once."""
    if invocation.error is None and RENDER_OFF_LOOP.get() and is_large(invocation.output):
        return await run_sync(
            model_result,
            invocation,
            max_bytes,
            api=api,
            max_attachment_bytes=max_attachment_bytes,
            server=server,
            note=note,
        )
    return model_result(
        invocation,
        max_bytes,
        api=api,
        max_attachment_bytes=max_attachment_bytes,
        server=server,
        note=note,
    )
