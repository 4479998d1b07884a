"""``CycleConfig``: the model, the loop's limits, and the request options."""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..error import LlmConfigError
from .history import HistoryPolicy, TrimOldest

__all__ = ["CycleConfig"]

# The loop sets these itself; accepting them as options would silently conflict.
_RESERVED_OPTIONS = frozenset({"model", "messages", "stream", "tools"})
_UNKNOWN_TOOL_POLICIES = ("raise", "tell_model")


@dataclass(frozen=True, init=False)
class CycleConfig:
    """Settings of an :class:`~agcore_tools.LlmCycle`.

    Any keyword not listed below is a request option passed unchanged to
    ``chat.completions.create`` on every request (``temperature``, ``tool_choice``,
    ``parallel_tool_calls``, ``max_completion_tokens``, ``extra_body``,
    ``extra_headers``, ``timeout``, ...). They are gathered in ``request_options``.

    A forced ``tool_choice`` (``"required"``, or a dict naming a tool) applies to the
    first request of each ``submit*`` call; later requests of the call send ``"auto"``
    (an ``allowed_tools`` choice keeps its tools, in ``"auto"`` mode), so a forced loop
    can end before ``max_turns``. Pass ``reset_tool_choice=False`` to force every
    request.

    A call to a tool the registry does not have stops the loop with an ``LlmError``
    (``unknown_tool="raise"``, the default). With ``unknown_tool="tell_model"`` the
    call's result is instead the error text, which lists the registered tools, and
    the loop goes on; a denied permission still stops it.

    Example:
        >>> config = CycleConfig("gpt-4o-mini", max_turns=5, temperature=0.2)
        >>> config.max_turns, dict(config.request_options)
        (5, {'temperature': 0.2})
        >>> from dataclasses import replace
        >>> replace(config, max_turns=None).request_options["temperature"]
        0.2
    """

    model: str
    """The model name sent with every request."""
    max_turns: int | None
    """Most requests one ``submit*`` call may make; None for no limit."""
    tool_timeout_secs: float | None
    """Time limit of each tool call, in seconds; None for none."""
    max_tool_result_bytes: int | None
    """UTF-8 bytes of a tool result's text the model sees before it is cut; None for no
    limit."""
    max_tool_attachment_bytes: int | None
    """Bytes of each image, sound or file a tool returns; a larger one is not sent and
    the model reads why (see :mod:`agcore_tools.content`). None for no limit."""
    max_retries: int
    """Retries of a failed request (408, 409, 429, 5xx, timeouts, connection errors)."""
    retry_initial_delay: float
    """Seconds before the first retry; doubled each time, with jitter."""
    retry_max_delay: float
    """Longest computed wait between retries, in seconds (a server's ``Retry-After``
    of up to 60 s is honoured even when longer)."""
    unknown_tool: Literal["raise", "tell_model"]
    """What a call to an unregistered tool does: ``"raise"`` stops the loop with an
    ``LlmError``; ``"tell_model"`` answers the call with the error text (listing the
    registered tools) and goes on."""
    reset_tool_choice: bool
    """Whether a forced ``tool_choice`` becomes ``"auto"`` after a call's first request."""
    max_definition_tokens: int | None
    """Most tokens the tool definitions of one request may cost (counted with
    ``tiktoken`` for a model it knows, else estimated; see :mod:`agcore_tools._budget`);
    a request over it is not sent and raises :class:`~agcore_tools.DefinitionBudgetError`
    naming the costliest tools. None for no limit."""
    repair_arguments: bool
    """Whether tool-call arguments that are not valid JSON get one deterministic repair
    (closing a document that was cut off, dropping trailing commas) before the error
    goes back to the model. Off by default; it never guesses a value, so a document cut
    inside a string or a number is not repaired."""
    history: HistoryPolicy
    """Chooses which messages each request sends; the default, ``TrimOldest()`` with no
    budget, sends them all (see :mod:`agcore_tools.cycle.history`)."""
    approval_key: bytes | None = field(repr=False)
    """A secret the loop signs its :class:`~agcore_tools.ApprovalRequest` values with
    (HMAC-SHA256 over call id, tool and arguments); a resume then refuses an approval
    without the matching signature. None (the default) signs nothing."""
    request_options: Mapping[str, Any]
    """Options passed to ``chat.completions.create`` (read-only)."""

    def __init__(
        self,
        model: str,
        *,
        max_turns: int | None = 10,
        tool_timeout_secs: float | None = 60.0,
        max_tool_result_bytes: int | None = 16384,
        max_tool_attachment_bytes: int | None = 5 * 1024 * 1024,
        max_retries: int = 3,
        retry_initial_delay: float = 0.5,
        retry_max_delay: float = 8.0,
        unknown_tool: Literal["raise", "tell_model"] = "raise",
        reset_tool_choice: bool = True,
        max_definition_tokens: int | None = None,
        repair_arguments: bool = False,
        history: HistoryPolicy | None = None,
        approval_key: bytes | None = None,
        request_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        merged = {**(request_options or {}), **options}
        reserved = sorted(_RESERVED_OPTIONS.intersection(merged))
        if reserved:
            raise LlmConfigError(
                f"CycleConfig cannot take {', '.join(reserved)} as request options: the loop "
                "sets them (register tools in a ToolRegistry)"
            )
        _check("max_turns", max_turns, minimum=1, optional=True)
        _check("tool_timeout_secs", tool_timeout_secs, minimum=0.0, optional=True, strict=True)
        _check("max_tool_result_bytes", max_tool_result_bytes, minimum=64, optional=True)
        _check("max_tool_attachment_bytes", max_tool_attachment_bytes, minimum=1, optional=True)
        _check("max_retries", max_retries, minimum=0)
        _check("retry_initial_delay", retry_initial_delay, minimum=0.0)
        _check("retry_max_delay", retry_max_delay, minimum=0.0)
        _check("max_definition_tokens", max_definition_tokens, minimum=1, optional=True)
        if unknown_tool not in _UNKNOWN_TOOL_POLICIES:
            raise LlmConfigError(
                f"CycleConfig.unknown_tool must be 'raise' or 'tell_model', got {unknown_tool!r}"
            )
        if not isinstance(reset_tool_choice, bool):
            raise LlmConfigError(
                f"CycleConfig.reset_tool_choice must be True or False, got {reset_tool_choice!r}"
            )
        if not isinstance(repair_arguments, bool):
            raise LlmConfigError(
                f"CycleConfig.repair_arguments must be True or False, got {repair_arguments!r}"
            )
        if approval_key is not None and (not isinstance(approval_key, bytes) or not approval_key):
            raise LlmConfigError("CycleConfig.approval_key must be non-empty bytes or None")
        if not isinstance(model, str) or not model:
            raise LlmConfigError(f"CycleConfig.model must be a non-empty string, got {model!r}")
        set_ = object.__setattr__
        set_(self, "model", model)
        set_(self, "max_turns", max_turns)
        set_(self, "tool_timeout_secs", tool_timeout_secs)
        set_(self, "max_tool_result_bytes", max_tool_result_bytes)
        set_(self, "max_tool_attachment_bytes", max_tool_attachment_bytes)
        set_(self, "max_retries", max_retries)
        set_(self, "retry_initial_delay", retry_initial_delay)
        set_(self, "retry_max_delay", retry_max_delay)
        set_(self, "unknown_tool", unknown_tool)
        set_(self, "reset_tool_choice", reset_tool_choice)
        set_(self, "max_definition_tokens", max_definition_tokens)
        set_(self, "repair_arguments", repair_arguments)
        set_(self, "history", history if history is not None else TrimOldest())
        set_(self, "approval_key", approval_key)
        set_(self, "request_options", types.MappingProxyType(merged))


def _check(
    name: str,
    value: float | None,
    *,
    minimum: float,
    optional: bool = False,
    strict: bool = False,
) -> None:
    if value is None and optional:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and value is not None:
        ok = value > minimum if strict else value >= minimum
    if not ok:
        bound = f"greater than {minimum:g}" if strict else f"at least {minimum:g}"
        none = " or None" if optional else ""
        raise LlmConfigError(f"CycleConfig.{name} must be {bound}{none}, got {value!r}")
