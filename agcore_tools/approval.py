"""Human approval of tool calls: a call that waits for the app's answer before it runs.

A tool that needs approval does not run when the model calls it. The loop (or
:meth:`~agcore_tools.ToolRegistry.run_tool_calls`) hands back an
:class:`ApprovalRequest` instead; the app asks its user and answers with an
:class:`ApprovalDecision` made by :meth:`ApprovalRequest.approve` or
:meth:`ApprovalRequest.reject`, then resumes. The history is the only state: a paused
run is its ``cycle.messages`` (plain JSON), whose last assistant message still has the
waiting calls unanswered. See ``docs/guides/approval.md``.

Example:
    >>> request = ApprovalRequest("call_1", "refund", {"order": 7}, "the tool 'refund' needs approval")
    >>> request.approve().approved
    True
    >>> request.approve(arguments={"order": 8}).arguments_to_run
    {'order': 8}
    >>> request.reject("ask the manager").message
    'ask the manager'
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from ._inline import InlineEvent
from ._text import own_copy
from .base import ToolContext
from .error import ApprovalError

__all__ = [
    "ApprovalDecision",
    "ApprovalRequest",
    "NeedsApproval",
    "ToolApprovalRequested",
    "ToolCallOutputs",
]

NeedsApproval: TypeAlias = bool | Callable[[dict[str, Any], ToolContext], "bool | Awaitable[bool]"]
"""Whether a tool's calls need approval: a constant, or a function (sync or async) of
the call's arguments and context, asked before each call; an awaitable a sync function
returns is awaited."""


def _canonical(call_id: str, tool_name: str, arguments: Mapping[str, Any]) -> bytes:
    import json  # on first use: a plain `import agcore_tools` does not load json

    return json.dumps(
        [call_id, tool_name, arguments], sort_keys=True, separators=(",", ":"), default=str
    ).encode("utf-8")


def approval_signature(
    key: bytes, call_id: str, tool_name: str, arguments: Mapping[str, Any]
) -> str:
    """The HMAC-SHA256 (hex) binding an approval to one call: its id, tool and arguments.

    Example:
        >>> len(approval_signature(b"k", "c1", "refund", {"order": 7}))
        64
    """
    import hashlib
    import hmac

    return hmac.new(key, _canonical(call_id, tool_name, arguments), hashlib.sha256).hexdigest()


_DECISION_FIELDS: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("call_id", str, "a str"),
    ("tool_name", str, "a str"),
    ("arguments", dict, "a dict (the call's arguments)"),
    ("approved", bool, "a bool (True or False)"),
    ("edited_arguments", (dict, type(None)), "a dict or None"),
    ("message", (str, type(None)), "a str or None"),
    ("signature", (str, type(None)), "a str or None"),
)


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """The app's answer to one :class:`ApprovalRequest`; make it with
    :meth:`ApprovalRequest.approve` or :meth:`ApprovalRequest.reject`.

    ``call_id``, ``tool_name`` and ``arguments`` repeat the request's, so an answer
    meant for another call (or for arguments that changed since) is refused with an
    :class:`~agcore_tools.ApprovalError` instead of approving the wrong thing. Plain
    values: it can cross a process boundary as JSON (``dataclasses.asdict``), and a
    field of the wrong type (``approved="false"``) is refused with an ``ApprovalError``.

    Example:
        >>> decision = ApprovalDecision("call_1", "refund", {"order": 7}, approved=False,
        ...                             message="not today")
        >>> decision.approved, decision.arguments_to_run
        (False, None)
    """

    call_id: str
    """The call this answers."""
    tool_name: str
    """The tool the call asked for."""
    arguments: dict[str, Any]
    """The arguments as the model sent them (as the request showed them)."""
    approved: bool
    """Whether the call may run."""
    edited_arguments: dict[str, Any] | None = None
    """Arguments to run instead of the model's, or None; validated again before the run."""
    message: str | None = None
    """On a rejection, the app's message to the model."""
    signature: str | None = None
    """The request's HMAC, when the loop signs its requests (``CycleConfig(approval_key=)``)."""

    def __post_init__(self) -> None:
        # An answer often arrives as JSON from a form or a queue: "false" is truthy, and
        # the signature does not cover `approved`, so a wrong type must never pass.
        for name, kinds, what in _DECISION_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, kinds):
                raise ApprovalError(
                    f"ApprovalDecision.{name} must be {what}, got {type(value).__name__}"
                )

    @property
    def arguments_to_run(self) -> dict[str, Any] | None:
        """The arguments the call runs with if approved (edited or original), else None."""
        if not self.approved:
            return None
        return self.edited_arguments if self.edited_arguments is not None else self.arguments


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A tool call waiting for the app's approval; it has not run.

    ``reason`` says which rule asked: the tool's ``needs_approval``, or a permission
    in ``PermissionConfig.ask``.

    Example:
        >>> request = ApprovalRequest("c1", "delete_file", {"path": "a.txt"},
        ...                           "permission 'delete' is in PermissionConfig.ask")
        >>> decision = request.reject("keep it")
        >>> decision.call_id, decision.approved, decision.message
        ('c1', False, 'keep it')
    """

    call_id: str
    """The model's tool call id."""
    tool_name: str
    """The tool the model called."""
    arguments: dict[str, Any]
    """The arguments the model sent, parsed: the request's own copy, so changing it in
    place changes nothing the call runs with (an answer made from the changed request
    is refused); edit them with ``approve(arguments=...)``."""
    reason: str
    """Which rule asked for approval."""
    signature: str | None = field(default=None, compare=False)
    """An HMAC of the call id, tool name and arguments under the app's key, or None.
    It proves which call an answer is for, not who approved it: whoever holds a signed
    request can answer it."""

    def __post_init__(self) -> None:
        # The caller's dict is the call's own (or a paused program's state): an app that
        # changed a request's arguments in place would change what runs, unchecked.
        object.__setattr__(self, "arguments", own_copy(self.arguments))

    def approve(self, *, arguments: Mapping[str, Any] | None = None) -> ApprovalDecision:
        """Let the call run; with ``arguments``, run it with those instead.

        Example:
            >>> ApprovalRequest("c1", "pay", {"amount": 90}, "asked").approve(
            ...     arguments={"amount": 50}).arguments_to_run
            {'amount': 50}
        """
        if arguments is not None and not isinstance(arguments, Mapping):
            raise ApprovalError(
                "approve(arguments=...) takes a mapping of the arguments to run, got "
                f"{type(arguments).__name__}"
            )
        edited = dict(arguments) if arguments is not None else None
        return ApprovalDecision(
            self.call_id, self.tool_name, self.arguments, True, edited, None, self.signature
        )

    def reject(self, message: str | None = None) -> ApprovalDecision:
        """Refuse the call; the model reads that the user declined, with ``message``.

        Example:
            >>> ApprovalRequest("c1", "pay", {}, "asked").reject().approved
            False
        """
        return ApprovalDecision(
            self.call_id, self.tool_name, self.arguments, False, None, message, self.signature
        )

    def signed(self, key: bytes) -> ApprovalRequest:
        """This request with its :attr:`signature` under ``key``.

        Example:
            >>> signed = ApprovalRequest("c1", "pay", {}, "asked").signed(b"secret")
            >>> signed.signature == approval_signature(b"secret", "c1", "pay", {})
            True
        """
        signature = approval_signature(key, self.call_id, self.tool_name, self.arguments)
        return replace(self, signature=signature)


class ToolApprovalRequested(InlineEvent):
    """Stream event: a call needs approval before it can run.

    It comes after the turn's ``TurnComplete`` and before the turn's
    ``ToolExecutionStarted`` events. Answer it inline with :meth:`approve` or
    :meth:`reject` before asking for the next event, and the stream goes on with the
    call run (or declined); an answer given after that is logged as a warning, as this
    run did not use it. Left unanswered, the other calls still run and the stream
    ends with a response whose ``pending_approvals`` lists it: resume later with
    ``submit_with_tools(None, registry, approvals=[...])``. So does an inline answer
    the loop refuses (edited arguments the tool rejects, say), with a warning on the
    ``agcore_tools.approval`` logger.

    Example:
        >>> event = ToolApprovalRequested(ApprovalRequest("c1", "pay", {"amount": 5}, "asked"))
        >>> event.tool_name, event.call_id, event.input, event.reason, event.decision
        ('pay', 'c1', {'amount': 5}, 'asked', None)
        >>> event.approve(arguments={"amount": 4}).arguments_to_run
        {'amount': 4}
    """

    __slots__ = ("decision", "request")

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__()
        self.request = request
        """The call waiting for approval."""
        self.decision: ApprovalDecision | None = None
        """The inline answer given with :meth:`approve` or :meth:`reject`, or None."""

    @property
    def tool_name(self) -> str:
        """The tool the model called."""
        return self.request.tool_name

    @property
    def call_id(self) -> str:
        """The model's tool call id."""
        return self.request.call_id

    @property
    def input(self) -> dict[str, Any]:
        """The arguments the model sent."""
        return self.request.arguments

    @property
    def reason(self) -> str:
        """Which rule asked for approval."""
        return self.request.reason

    def approve(self, *, arguments: Mapping[str, Any] | None = None) -> ApprovalDecision:
        """Let the call run now (with ``arguments`` instead of the model's, if given)."""
        self._note_answer(self.call_id)
        self.decision = self.request.approve(arguments=arguments)
        return self.decision

    def reject(self, message: str | None = None) -> ApprovalDecision:
        """Decline the call now; the model reads ``message``."""
        self._note_answer(self.call_id)
        self.decision = self.request.reject(message)
        return self.decision

    def __repr__(self) -> str:
        return f"ToolApprovalRequested({self.request!r}, decision={self.decision!r})"


# Items typed Any, not dict[str, Any]: a type checker then lets the list go back into the
# next request as it is (`messages += outputs`, `input=outputs`: the OpenAI SDK's params
# are TypedDicts, and `input` takes a list, which is invariant), and lets an app read
# `output["call_id"]`, which the SDK's union of 33 input items would refuse.
class ToolCallOutputs(list[Any]):
    """What :meth:`~agcore_tools.ToolRegistry.run_tool_calls` returns: the messages
    answering the calls that ran (a plain ``list`` of dicts), and the calls that wait
    for approval in :attr:`pending_approvals`.

    Example:
        >>> outputs = ToolCallOutputs([{"role": "tool", "tool_call_id": "c1", "content": "ok"}])
        >>> len(outputs), outputs.pending_approvals
        (1, ())
    """

    pending_approvals: tuple[ApprovalRequest, ...] = ()
    """The calls that did not run because they need approval; answer them by passing
    these calls (only those still waiting) to ``run_tool_calls`` again with
    ``approvals=``: only the answered calls run then, and the others are listed again."""
