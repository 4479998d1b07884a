"""What the LLM loop reports: finish reasons, usage, responses and stream events.

Events are small frozen dataclasses; match on the class::

    async for event in cycle.submit_stream_with_tools("Weather in Paris?", registry):
        match event:
            case AssistantTextDelta(text=text):
                print(text, end="")
            case ToolExecutionStarted(tool_name=name, input=args):
                print(f"\\n-> {name}({args})")
            case ToolProgress(tool_name=name, progress=done, total=total):
                print(f"   {name}: {done}/{total}")
            case ToolExecutionCompleted(tool_name=name, output=output, error=None):
                print(f"<- {name}: {output}")
            case TurnComplete(finish_reason=reason):
                print(f"\\n[turn ended: {reason.value}]")
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, TypeAlias

from typing_extensions import deprecated

from .._deprecated import renamed
from .._display import (
    bounded_repr,
    call_text,
    html_table,
    html_text,
    markdown_quote,
    markdown_table,
)
from .._progress import ToolBreakerChanged, ToolPartialResult, ToolProgress
from .._sdk import sdk_field
from .._usage import ZERO_USAGE as ZERO_USAGE
from .._usage import ToolCost, Usage
from ..approval import ApprovalRequest, ToolApprovalRequested
from ..error import ToolError
from ..pending import InputRequest, RunningTask, ToolInputRequested
from ..registry import ToolInvocation
from ._costs import COST_HEADERS, NO_TOOL_COSTS, ToolCosts, cost_rows

__all__ = [
    "AssistantTextDelta",
    "ChatResponse",
    "FinishReason",
    "ReasoningDelta",
    "StreamEvent",
    "ToolBreakerChanged",
    "ToolCost",
    "ToolExecutionCompleted",
    "ToolExecutionStarted",
    "ToolPartialResult",
    "ToolProgress",
    "TurnComplete",
    "Usage",
]


class FinishReason(str, enum.Enum):
    """Why the model stopped a turn, as reported by its ``finish_reason``.

    ``OTHER`` stands for anything else a provider sends (or a missing value); the
    raw string is kept on :class:`TurnComplete`.

    Example:
        >>> FinishReason.parse("tool_calls") is FinishReason.TOOL_CALLS
        True
        >>> FinishReason.parse("eos_token")
        <FinishReason.OTHER: 'other'>
    """

    STOP = "stop"
    """The model finished its answer (or hit a stop sequence)."""
    LENGTH = "length"
    """The output hit the token limit."""
    TOOL_CALLS = "tool_calls"
    """The model asked for tool calls."""
    CONTENT_FILTER = "content_filter"
    """The provider's content filter cut the answer."""
    OTHER = "other"
    """Any other value, or none at all."""

    @classmethod
    def parse(cls, value: str | None) -> FinishReason:
        """Map a provider's ``finish_reason`` string to a member (``OTHER`` if unknown, or
        not a string).

        The legacy ``function_call`` counts as ``TOOL_CALLS``.
        """
        if not isinstance(value, str):  # None, or a server's 5 or ["stop"]
            return cls.OTHER
        member = _FINISH_REASONS.get(value)
        return member if member is not None else cls.OTHER


_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """The outcome of one ``submit*`` call: the final assistant message and totals.

    Example:
        >>> r = ChatResponse({"role": "assistant", "content": "Hi"}, "Hi", FinishReason.STOP)
        >>> r.text, r.finish_reason.value
        ('Hi', 'stop')
    """

    message: dict[str, Any]
    """The final assistant message, in the Chat Completions request format."""
    text: str
    """The final assistant message's text ("" when it has none)."""
    finish_reason: FinishReason
    """Why the last turn ended."""
    usage: Usage = ZERO_USAGE
    """Token counts summed over every request this call made."""
    turns: int = 0
    """How many requests this call made."""
    invocations: tuple[ToolInvocation, ...] = ()
    """Every tool call this call executed, turn by turn in the model's call order (not
    completion order), each with its full output."""
    output: Any = None
    """The final answer validated into the call's ``output_type`` (a model, dataclass,
    dict or plain value); None when the call had no ``output_type``."""
    pending_approvals: tuple[ApprovalRequest, ...] = ()
    """The calls waiting for the app's approval; when there are any, the run paused
    before its next request: answer them and resume with
    ``submit_with_tools(None, registry, approvals=[...])`` (see
    :mod:`agcore_tools.approval`)."""
    pending: tuple[ApprovalRequest | InputRequest | RunningTask, ...] = ()
    """Everything the paused run waits for: the approvals of :attr:`pending_approvals`,
    the questions tool calls asked the user (:class:`~agcore_tools.InputRequest`), and
    the server-side tasks still running (:class:`~agcore_tools.RunningTask`, which need
    no answer); see :mod:`agcore_tools.pending`. Answer the questions and approvals and
    resume with one ``submit_with_tools(None, registry, approvals=[...answers])``."""
    tool_costs: ToolCosts = NO_TOOL_COSTS
    """What each tool cost in this call, by tool name (:class:`~agcore_tools.ToolCost`):
    its definition's tokens over the requests that offered it, the arguments the model
    wrote, the results sent back, and its calls, failures and seconds; ``.total`` sums
    them and ``.reconcile()`` compares the call's estimated prompt tokens with
    :attr:`usage`. Tokens are counted with the model's encoding when the ``tokens`` extra
    knows it, else at one token per 4 bytes of UTF-8. Empty without tools.

    Example:
        >>> ChatResponse({}, "", FinishReason.STOP).tool_costs.total.tokens
        0
    """
    refusal: str | None = None
    """The model's refusal when it declined to answer (OpenAI's ``refusal``, on either
    API), else None. :attr:`text` is then usually ""; :attr:`message` keeps the refusal
    under ``"refusal"``, as the history does.

    Example:
        >>> message = {"role": "assistant", "content": "", "refusal": "I can't help."}
        >>> ChatResponse(message, "", FinishReason.STOP, refusal="I can't help.").refusal
        "I can't help."
    """

    @property
    @deprecated(
        "ChatResponse.stop_reason is deprecated; use ChatResponse.finish_reason", category=None
    )
    def stop_reason(self) -> FinishReason:
        """Deprecated: use :attr:`finish_reason`.

        Example:
            >>> import warnings
            >>> with warnings.catch_warnings(record=True) as caught:  # it warns
            ...     warnings.simplefilter("always")
            ...     ChatResponse({}, "", FinishReason.LENGTH).stop_reason
            <FinishReason.LENGTH: 'length'>
            >>> caught[0].category.__name__
            'DeprecationWarning'
        """
        renamed("ChatResponse.stop_reason", "ChatResponse.finish_reason")
        return self.finish_reason

    def _summary_rows(self) -> list[tuple[str, Any]]:
        rows: list[tuple[str, Any]] = [
            ("stop reason", self.finish_reason.value),
            ("turns", self.turns),
            ("usage", _usage_text(self.usage)),
        ]
        # A response of submit()/submit_stream() may ask for calls nobody ran yet.
        requested = [
            call_text(sdk_field(fn, "name"), sdk_field(fn, "arguments"), sdk_field(call, "id"))
            for call in self.message.get("tool_calls") or ()
            if (fn := sdk_field(call, "function")) is not None
        ]
        if requested:
            rows.append(("tool calls requested", "; ".join(requested)))
        if self.pending_approvals:
            waiting = [
                call_text(r.tool_name, r.arguments, r.call_id) for r in self.pending_approvals
            ]
            rows.append(("awaiting approval", "; ".join(waiting)))
        return rows

    def _invocation_rows(self) -> list[tuple[Any, ...]]:
        return [
            (
                inv.tool_name,
                inv.input,
                inv.output if inv.ok else f"error: {inv.error}",
                f"{inv.duration * 1000:.2f} ms",
            )
            for inv in self.invocations
        ]

    def _repr_markdown_(self) -> str:
        """A notebook view: the answer's text, then stop reason, turns, usage and tool calls.

        Example:
            >>> r = ChatResponse({"role": "assistant", "content": "Hi"}, "Hi", FinishReason.STOP)
            >>> print(r._repr_markdown_())
            **ChatResponse** (stop, 0 turns)
            <BLANKLINE>
            > Hi
            <BLANKLINE>
            |  |  |
            |---|---|
            | stop reason | stop |
            | turns | 0 |
            | usage | no usage reported |
        """
        parts = [
            f"**ChatResponse** ({self.finish_reason.value}, {self.turns} turns)",
            markdown_quote(self.text) if self.text else "*(no text)*",
            markdown_table(("", ""), self._summary_rows()),
        ]
        if self.invocations:
            parts.append("**Tool calls**")
            parts.append(markdown_table(_CALL_HEADERS, self._invocation_rows()))
        if self.tool_costs:
            parts.append("**Tool costs**")
            parts.append(markdown_table(COST_HEADERS, cost_rows(self.tool_costs)))
        return "\n\n".join(parts)

    def _repr_html_(self) -> str:
        """The same view as :meth:`_repr_markdown_`, in HTML."""
        parts = [
            f"<p><strong>ChatResponse</strong> ({self.finish_reason.value}, {self.turns} turns)</p>",
            html_text(self.text) if self.text else "<p><em>(no text)</em></p>",
            html_table(("", ""), self._summary_rows()),
        ]
        if self.invocations:
            parts.append(html_table(_CALL_HEADERS, self._invocation_rows(), "Tool calls"))
        if self.tool_costs:
            parts.append(html_table(COST_HEADERS, cost_rows(self.tool_costs), "Tool costs"))
        return "".join(parts)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's plain-text view: the ``repr`` with each field cut at 1,000
        characters, so a long answer or large tool outputs do not land in the notebook
        file whole."""
        printer.text(bounded_repr(self))


_CALL_HEADERS = ("tool", "input", "output", "duration")


def _usage_text(usage: Usage) -> str:
    if usage.reported <= 0:
        over = f" by its {usage.requests} request(s)" if usage.requests > 0 else ""
        return f"no usage reported{over}"
    text = (
        f"{usage.total_tokens} tokens ({usage.prompt_tokens} prompt + "
        f"{usage.completion_tokens} completion) over {usage.requests} request(s)"
    )
    extras = []
    if usage.cached_tokens:
        extras.append(f"{usage.cached_tokens} cached")
    if usage.reasoning_tokens:
        extras.append(f"{usage.reasoning_tokens} reasoning")
    if usage.unreported:
        extras.append(f"only {usage.reported} of {usage.requests} reported usage")
    return f"{text}; {', '.join(extras)}" if extras else text


@dataclass(frozen=True, slots=True)
class AssistantTextDelta:
    """A piece of the assistant's visible text, as it streams in.

    Example:
        >>> AssistantTextDelta("Hel").text
        'Hel'
    """

    text: str
    """The new text."""


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (DeepSeek/Qwen ``reasoning_content``), streamed.

    Example:
        >>> ReasoningDelta("Let me think").text
        'Let me think'
    """

    text: str
    """The new reasoning text."""


@dataclass(frozen=True, slots=True)
class ToolExecutionStarted:
    """A tool call is about to run.

    Example:
        >>> ToolExecutionStarted("add", {"a": 1, "b": 2}, "call_0").tool_name
        'add'
    """

    tool_name: str
    """The tool the model called."""
    input: Any
    """The parsed arguments (the raw text when they were not a JSON object): the
    event's own copy, so changing it changes nothing the call runs with."""
    call_id: str
    """The model's tool call id."""


@dataclass(frozen=True, slots=True)
class ToolExecutionCompleted:
    """A tool call ended, successfully or not. ``output`` is the full, untruncated output.

    Example:
        >>> done = ToolExecutionCompleted("add", "call_0", 3, None, 0.001)
        >>> done.ok, done.output
        (True, 3)
    """

    tool_name: str
    """The tool the model called."""
    call_id: str
    """The model's tool call id."""
    output: Any
    """The tool's JSON-compatible output (None when it failed): the same object as its
    invocation's in ``ChatResponse.invocations``, not a copy (an output can be large),
    so change neither in place."""
    error: ToolError | None
    """What went wrong, or None."""
    duration: float = 0.0
    """Seconds the execution took."""
    model_text: str = ""
    """The text sent back to the model (truncated past ``max_tool_result_bytes``)."""

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.error is None


@dataclass(frozen=True, slots=True)
class TurnComplete:
    """One request's answer is complete.

    ``finish_reason`` is ``TOOL_CALLS`` whenever the assistant message has tool calls,
    even if the provider said ``stop`` (as OpenAI does for a forced ``tool_choice``),
    except for structured output's answer in ``mode="tool"`` (a ``final_result``
    call), which is ``STOP``; ``raw_finish_reason`` is what the provider sent.

    Example:
        >>> TurnComplete(FinishReason.STOP, turn=1).finish_reason.value
        'stop'
    """

    finish_reason: FinishReason
    """Why the turn ended."""
    turn: int = 1
    """The turn's number within this call, from 1."""
    message: dict[str, Any] | None = None
    """The assistant message the turn produced, as appended to the history."""
    usage: Usage | None = None
    """This request's token counts, when the provider reported them."""
    raw_finish_reason: str | None = None
    """The provider's ``finish_reason`` string, unmapped."""

    @property
    @deprecated("TurnComplete.reason is deprecated; use TurnComplete.finish_reason", category=None)
    def reason(self) -> FinishReason:
        """Deprecated: use :attr:`finish_reason`.

        Example:
            >>> import warnings
            >>> with warnings.catch_warnings(record=True) as caught:  # it warns
            ...     warnings.simplefilter("always")
            ...     TurnComplete(FinishReason.STOP).reason
            <FinishReason.STOP: 'stop'>
            >>> caught[0].category.__name__
            'DeprecationWarning'
        """
        renamed("TurnComplete.reason", "TurnComplete.finish_reason")
        return self.finish_reason

    @property
    @deprecated(
        "TurnComplete.raw_reason is deprecated; use TurnComplete.raw_finish_reason", category=None
    )
    def raw_reason(self) -> str | None:
        """Deprecated: use :attr:`raw_finish_reason`.

        Example:
            >>> import warnings
            >>> with warnings.catch_warnings(record=True) as caught:  # it warns
            ...     warnings.simplefilter("always")
            ...     TurnComplete(FinishReason.STOP, raw_finish_reason="eos").raw_reason
            'eos'
            >>> caught[0].category.__name__
            'DeprecationWarning'
        """
        renamed("TurnComplete.raw_reason", "TurnComplete.raw_finish_reason")
        return self.raw_finish_reason


StreamEvent: TypeAlias = (
    AssistantTextDelta
    | ReasoningDelta
    | ToolApprovalRequested
    | ToolInputRequested
    | ToolExecutionStarted
    | ToolProgress
    | ToolPartialResult
    | ToolBreakerChanged
    | ToolExecutionCompleted
    | TurnComplete
)
"""Any event a ``submit_stream*`` iterator yields."""
