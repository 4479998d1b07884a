"""From a model's tool calls to registry calls, and from their results to model text.

Shared by :class:`~agcore_tools.LlmCycle` and :meth:`ToolRegistry.run_tool_calls`, so
both parse arguments, word errors and cut long results the same way.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_core import to_json

from ._attachments import Api, Rendered, attachments_message, function_call_output, render
from ._repair import repair_json
from ._sdk import sdk_field
from ._unicode import scrub
from .approval import ApprovalDecision, ToolCallOutputs
from .base import ToolContext
from .error import (
    InvalidArgumentsError,
    PermissionDeniedError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
)
from .registry import ToolCall, ToolInvocation

if TYPE_CHECKING:
    from .registry import ToolRegistry

__all__ = [
    "ParsedCall",
    "aborted_text",
    "error_text",
    "iter_invocations",
    "model_result",
    "model_text",
    "parse_call",
    "preflight",
    "result_text",
    "run_tool_calls",
    "truncate_utf8",
    "unknown_tool_error",
]

logger = logging.getLogger("agcore_tools.toolcalls")

_MARKER = "\n[... {omitted} bytes omitted ...]\n"


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call of a model, with its arguments parsed (or the reason they are bad)."""

    call_id: str
    """The model's tool call id."""
    name: str
    """The tool the model asked for."""
    arguments: str
    """The arguments as JSON text, as the history records them."""
    args: dict[str, Any] | None
    """The parsed arguments object, or None when ``error`` is set."""
    error: ToolError | None = None
    """Why the call cannot run (unusable arguments, or an unknown tool the loop tells
    the model about), or None."""

    @property
    def input(self) -> Any:
        """The parsed arguments, or the raw text when they could not be parsed."""
        return self.args if self.args is not None else self.arguments


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__


def parse_call(name: str, call_id: str, arguments: Any, *, repair: bool = False) -> ParsedCall:
    """Parse a tool call's arguments: JSON text, or an object some servers send as is.

    Empty arguments mean ``{}``. Text that is not JSON, JSON that is not an object, and
    JSON nested too deeply to parse give a call whose ``error`` is an
    :class:`InvalidArgumentsError` for the model. Lone surrogates in the name, id and
    arguments text become U+FFFD, so the history always encodes as UTF-8. With
    ``repair``, text that is not JSON gets one deterministic repair first (closing a
    document that was cut off, dropping trailing commas: see ``_repair``); the repaired
    text is what the history records.

    Example:
        >>> parse_call("add", "c1", '{"a": 1}').args
        {'a': 1}
        >>> parse_call("add", "c1", "{oops").error.reason[:28]
        'arguments are not valid JSON'
        >>> parse_call("add", "c1", "[" * 100_000).error.reason
        'arguments nest too deeply to parse; send a flatter JSON object'
        >>> parse_call("add", "c1", '{"a": 1, "b": [2, 3],', repair=True).args
        {'a': 1, 'b': [2, 3]}
    """
    name, call_id = scrub(name), scrub(call_id)
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return ParsedCall(call_id, name, "{}", {})
    if isinstance(arguments, str):
        text = scrub(arguments)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            repaired = repair_json(text) if repair else None
            if repaired is not None and repaired.lstrip().startswith("{"):
                logger.info("repaired the arguments of a call to %r: %.200s", name, text)
                return parse_call(name, call_id, repaired)
            reason = (
                f"arguments are not valid JSON ({exc.msg} at line {exc.lineno} column "
                f"{exc.colno}); send a JSON object"
            )
            return ParsedCall(call_id, name, text, None, _invalid(name, reason, exc))
        except RecursionError as exc:
            return ParsedCall(call_id, name, text, None, _invalid(name, _TOO_DEEP, exc))
    else:
        value = arguments
        try:
            text = scrub(json.dumps(arguments, ensure_ascii=False, default=str))
        except (RecursionError, ValueError) as exc:  # ValueError: a circular reference
            return ParsedCall(call_id, name, "{}", None, _invalid(name, _TOO_DEEP, exc))
    if isinstance(value, Mapping):
        return ParsedCall(call_id, name, text, dict(value))
    error = InvalidArgumentsError(name, f"arguments must be a JSON object, got {_json_type(value)}")
    return ParsedCall(call_id, name, text, None, error)


_TOO_DEEP = "arguments nest too deeply to parse; send a flatter JSON object"


def _invalid(name: str, reason: str, cause: BaseException) -> InvalidArgumentsError:
    error = InvalidArgumentsError(name, reason)
    error.__cause__ = cause
    return error


def result_text(output: Any) -> str:
    """A tool's output as text for the model: strings as they are, anything else as JSON.

    Example:
        >>> result_text({"city": "北京", "temp": 21})
        '{"city":"北京","temp":21}'
        >>> result_text("plain text")
        'plain text'
    """
    if isinstance(output, str):
        return output
    return to_json(output, fallback=str).decode("utf-8")


def error_text(error: ToolError) -> str:
    """What the model reads when a call failed.

    Example:
        >>> error_text(ToolNotFoundError("nope"))
        "Error: tool 'nope' is not registered"
    """
    return f"Error: {error}"


def aborted_text(call: ParsedCall, reason: str) -> str:
    """What the model reads for a call that did not run to the end because the loop stopped.

    Example:
        >>> aborted_text(parse_call("add", "c1", "{}"), "the tool loop was cancelled")
        "Error: aborted; tool 'add' did not complete: the tool loop was cancelled"
    """
    return f"Error: aborted; tool '{call.name}' did not complete: {reason}"


def truncate_utf8(text: str, max_bytes: int | None) -> str:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes, keeping its head and tail.

    The cut falls on character boundaries, and a marker between head and tail says how
    many bytes were left out. Text that fits is returned unchanged.

    Example:
        >>> cut = truncate_utf8("天气" * 1000, 120)
        >>> len(cut.encode()) <= 120, "bytes omitted" in cut
        (True, True)
    """
    # 1. Most results fit; four bytes per character is UTF-8's worst case.
    if max_bytes is None or len(text) * 4 <= max_bytes:
        return text
    data = text.encode("utf-8", "surrogatepass")
    total = len(data)
    if total <= max_bytes:
        return text
    # 2. Reserve room for the marker with the largest count it could show.
    budget = max_bytes - len(_MARKER.format(omitted=total))
    if budget <= 0:
        return data[:max_bytes].decode("utf-8", "ignore")
    # 3. Two thirds head, one third tail; "ignore" drops the bytes of a character cut
    #    in two at either edge, so the cut always lands on a character boundary.
    head_size = budget * 2 // 3
    head = data[:head_size].decode("utf-8", "ignore")
    tail = data[total - (budget - head_size) :].decode("utf-8", "ignore")
    omitted = total - len(head.encode("utf-8", "surrogatepass")) - len(tail.encode("utf-8"))
    return f"{head}{_MARKER.format(omitted=omitted)}{tail}"


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
    # pydantic refuses lone surrogates that the json module writes as they are (and
    # scrub() then replaces); anything json cannot write either is the tool's fault.
    try:
        return json.dumps(invocation.output, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, RecursionError, TypeError):
        reason = f"returned a result that cannot be written as JSON: {type(exc).__name__}: {exc}"
        logger.warning("tool %r %s", invocation.tool_name, reason)
        return error_text(ToolExecutionError(invocation.tool_name, reason))


def unknown_tool_error(registry: ToolRegistry, name: str) -> ToolNotFoundError:
    """The error for a call to a tool the registry does not have, listing the tools it has.

    Example:
        >>> from agcore_tools import ToolRegistry
        >>> str(unknown_tool_error(ToolRegistry(), "nope"))
        "tool 'nope' is not registered: the registered tools are: none"
    """
    known = ", ".join(registry.list_tools()) or "none"
    return ToolNotFoundError(name, f"the registered tools are: {known}")


def model_result(
    invocation: ToolInvocation,
    max_bytes: int | None,
    *,
    api: Api,
    max_attachment_bytes: int | None,
) -> Rendered:
    """What the model receives for an invocation: its text (cut at ``max_bytes``) and
    the images, audio and files of its output (see :mod:`agcore_tools.content`)."""
    if invocation.error is None:
        try:
            rendered = render(
                invocation.output,
                api=api,
                max_text_bytes=max_bytes,
                max_attachment_bytes=max_attachment_bytes,
                tool=invocation.tool_name,
            )
        except ToolError as exc:  # bytes of no known kind, from a tool that is not @tool
            error = ToolExecutionError(invocation.tool_name, exc.message)
            return Rendered(truncate_utf8(error_text(error), max_bytes))
        except RecursionError:
            rendered = None  # too deep to look into: model_text says it cannot be written
        if rendered is not None:
            return rendered
    return Rendered(model_text(invocation, max_bytes))


def preflight(registry: ToolRegistry, calls: Iterable[ParsedCall]) -> ToolError | None:
    """The first call the loop must refuse (unknown tool, denied permission), or None.

    Checked for every call of a turn before any of them runs, so a refused call
    stops the loop without side effects from its siblings. A call already marked as
    an unknown tool (the model is told instead, see ``CycleConfig.unknown_tool``) is
    not refused again.
    """
    checker = registry.permission_checker
    for call in calls:
        if isinstance(call.error, ToolNotFoundError):
            continue
        entry = registry.entry(call.name)
        if entry is None:
            return unknown_tool_error(registry, call.name)
        if checker is not None:
            try:
                checker.check(entry.name, entry.permissions)
            except PermissionDeniedError as exc:
                return exc
    return None


async def iter_invocations(
    registry: ToolRegistry,
    calls: Sequence[ParsedCall],
    *,
    ctx: ToolContext,
    timeout: float | None,
) -> AsyncGenerator[tuple[int, ToolInvocation], None]:
    """Run a turn's calls concurrently; yield ``(position, invocation)`` as each ends.

    Calls with unusable arguments yield their error at once and never run; the others
    go through :meth:`ToolRegistry.invoke_as_completed`, which owns their timeouts,
    error handling and cancellation.
    """
    runnable: list[tuple[int, ToolCall]] = []
    for position, call in enumerate(calls):
        if call.args is None:
            yield (
                position,
                ToolInvocation(call.name, call.arguments, error=call.error, call_id=call.call_id),
            )
        else:
            runnable.append((position, ToolCall(call.name, call.args, call.call_id)))
    if not runnable:
        return
    async with contextlib.aclosing(
        registry.invoke_as_completed([c for _, c in runnable], ctx=ctx, timeout=timeout)
    ) as finished:
        async for index, invocation in finished:
            yield runnable[index][0], invocation


async def run_tool_calls(
    registry: ToolRegistry,
    tool_calls: Iterable[Any] | None,
    *,
    ctx: ToolContext | None,
    timeout: float | None,
    max_result_bytes: int | None,
    max_attachment_bytes: int | None,
    repair_arguments: bool = False,
    approvals: Iterable[ApprovalDecision] | None = None,
    approval_key: bytes | None = None,
) -> ToolCallOutputs:
    """Implementation of :meth:`ToolRegistry.run_tool_calls`."""
    # 1. Read each item as a Chat Completions tool call or a Responses function call;
    #    other Responses output items (messages, reasoning) are skipped.
    calls: list[ParsedCall] = []
    shapes: set[str] = set()
    for item in tool_calls or ():
        function = sdk_field(item, "function")
        kind = sdk_field(item, "type")
        if function is not None:
            shape, call_id = "chat", sdk_field(item, "id")
            name, arguments = sdk_field(function, "name"), sdk_field(function, "arguments")
        elif kind == "function_call":
            shape, call_id = "responses", sdk_field(item, "call_id")
            name, arguments = sdk_field(item, "name"), sdk_field(item, "arguments")
        elif isinstance(kind, str):
            continue
        else:
            raise ToolError(
                f"run_tool_calls() cannot read {item!r:.120}: expected Chat Completions tool "
                "calls (message.tool_calls) or Responses 'function_call' items"
            )
        if not call_id or not isinstance(name, str):
            raise ToolError(
                f"run_tool_calls() got a tool call without an id or name: {item!r:.120}"
            )
        shapes.add(shape)
        calls.append(parse_call(name, str(call_id), arguments, repair=repair_arguments))
    if len(shapes) > 1:
        raise ToolError("run_tool_calls() got Chat Completions and Responses calls mixed together")
    # 2. Calls that need approval wait for the app's answer (see _approval.py); then
    #    the rest run, and failures of any kind become error text for the model.
    from ._approval import screen_calls

    ctx = ctx or ToolContext()
    screened, waiting = await screen_calls(registry, calls, ctx, approvals, approval_key)
    calls = list(screened)
    invocations: list[ToolInvocation | None] = [None] * len(calls)
    async for position, invocation in iter_invocations(registry, calls, ctx=ctx, timeout=timeout):
        invocations[position] = invocation
    # 3. One output per call, in the calls' order; on Chat Completions, the images,
    #    audio and files follow the tool messages in one user message.
    api: Api = "responses" if "responses" in shapes else "chat"
    results: list[Rendered] = []
    for done in invocations:
        assert done is not None  # iter_invocations yields every position once
        results.append(
            model_result(done, max_result_bytes, api=api, max_attachment_bytes=max_attachment_bytes)
        )
    outputs = ToolCallOutputs()
    outputs.pending_approvals = tuple(waiting)
    if api == "responses":
        outputs.extend(
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": function_call_output(result),
            }
            for call, result in zip(calls, results, strict=True)
        )
        return outputs
    outputs.extend(
        {"role": "tool", "tool_call_id": call.call_id, "content": result.text}
        for call, result in zip(calls, results, strict=True)
    )
    extra = attachments_message([(c.call_id, c.name) for c in calls], results)
    if extra is not None:
        outputs.append(extra)
    return outputs
