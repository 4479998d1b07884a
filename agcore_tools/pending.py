"""What a paused run waits for besides approvals: a question to the user, a running task.

Both pause the loop exactly as an approval does; ``response.pending`` lists every
item, and one ``submit_with_tools(None, registry, approvals=[...])`` resumes it.

**Questions.** An MCP server may ask the user something while it runs a call (elicitation; on
2026-07-28 an ``input_required`` answer). With an ``elicitation_handler`` on the
:class:`~agcore_tools.McpClient`, the handler answers at once. Without one, the loop
pauses exactly as it does for approval: the response's ``pending`` lists an
:class:`InputRequest`, the app asks its user (now or tomorrow), answers with
:meth:`InputRequest.accept`, :meth:`~InputRequest.decline` or
:meth:`~InputRequest.cancel`, and resumes with
``submit_with_tools(None, registry, approvals=[answer])`` in any process. The question,
and all the server needs to go on (its ``requestState``, unchanged), ride on the open
call in the history, so ``json.dumps(cycle.messages)`` stays all an app saves.

**Running tasks.** An MCP tool run as a task (a build, a report) that has not ended
when the adapter stops waiting leaves a :class:`RunningTask`: it needs no answer. The
task's id rides on the open call, and a resume, in any process, waits for the same
task instead of calling the tool again.

A tool of any kind can pause this way: it returns :class:`CallPaused` and has a
``resume_next(call_id, resume)`` method (see :class:`ResumableTool`), which the loop
calls with the answers before it runs the call again.

Example:
    >>> request = InputRequest("c1~q", "c1", "book", "How many seats?",
    ...     {"type": "object", "properties": {"seats": {"type": "integer"}},
    ...      "required": ["seats"]})
    >>> request.accept({"seats": 2}).content
    {'seats': 2}
    >>> request.decline().action
    'decline'
    >>> request.accept({"seats": "two"})
    Traceback (most recent call last):
    ...
    agcore_tools.error.ApprovalError: the answer to input request 'c1~q' does not fit its schema: 'two' is not of type 'integer' (at seats)
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ._inline import InlineEvent
from .error import ApprovalError

__all__ = [
    "KEEPER",
    "LEFT_RUNNING",
    "PAUSED_CALL",
    "CallPaused",
    "InputAction",
    "InputAnswer",
    "InputRequest",
    "ResumableTool",
    "RunningTask",
    "ToolInputRequested",
    "WorkKeeper",
]

PAUSED_CALL = "paused_call"
"""The key, on an open tool call in the history, of what it waits for and the tool's state."""

InputAction = Literal["accept", "decline", "cancel"]
"""How the user answered: gave the content, said no, or dismissed the question."""


@dataclass(frozen=True, slots=True)
class InputAnswer:
    """The app's answer to one :class:`InputRequest`; plain values, so it can cross a
    process boundary as JSON (``dataclasses.asdict``).

    Example:
        >>> InputAnswer("c1~q", "c1", "cancel").content is None
        True
    """

    request_id: str
    """The :attr:`InputRequest.request_id` it answers."""
    call_id: str
    """The tool call that asked."""
    action: InputAction
    """accept, decline or cancel."""
    content: dict[str, Any] | None = None
    """The answer (with ``accept`` only), checked against the requested schema."""


@dataclass(frozen=True, slots=True)
class InputRequest:
    """A question a tool call asks the user, waiting for the app's answer.

    Example:
        >>> q = InputRequest("c1~name", "c1", "greet", "Your name?", {"type": "object"})
        >>> q.cancel().action
        'cancel'
    """

    request_id: str
    """Unique: the call id, ``~``, the server's key for the question, ``~``, and a
    random token naming this pause, so an answer kept from an earlier question of the
    same call id is refused (call ids repeat)."""
    call_id: str
    """The tool call that asked; it stays open in the history until answered."""
    tool_name: str
    """The tool, by its registry name."""
    message: str
    """The question, as the server put it."""
    requested_schema: dict[str, Any] = field(default_factory=dict)
    """A JSON Schema (a flat object) the accepted content must fit."""

    def accept(self, content: Mapping[str, Any]) -> InputAnswer:
        """Answer with ``content``, checked against :attr:`requested_schema`
        (:class:`~agcore_tools.error.ApprovalError`, a ``ValueError``, when it does not fit)."""
        checked = check_content(self.request_id, self.requested_schema, content)
        return InputAnswer(self.request_id, self.call_id, "accept", checked)

    def decline(self) -> InputAnswer:
        """Answer that the user said no."""
        return InputAnswer(self.request_id, self.call_id, "decline")

    def cancel(self) -> InputAnswer:
        """Answer that the user dismissed the question."""
        return InputAnswer(self.request_id, self.call_id, "cancel")


def check_content(
    request_id: str, schema: Mapping[str, Any], content: Mapping[str, Any]
) -> dict[str, Any]:
    """``content`` as a plain dict, once it fits ``schema``; else :class:`ApprovalError`.

    Example:
        >>> check_content("q", {"type": "object"}, {"a": 1})
        {'a': 1}
    """
    if not isinstance(content, Mapping):
        raise ApprovalError(
            f"the answer to input request '{request_id}' must be a mapping, "
            f"got {type(content).__name__}"
        )
    plain = dict(content)
    # jsonschema comes with the mcp runtime dependency; loaded only when an answer is given.
    import jsonschema  # type: ignore[import-untyped]

    validator = jsonschema.Draft202012Validator(dict(schema))
    error = jsonschema.exceptions.best_match(validator.iter_errors(plain))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        at = f" (at {where})" if where else ""
        unfit = f"the answer to input request '{request_id}' does not fit its schema"
        raise ApprovalError(
            f"{unfit}: {error.message}{at}",
            redacted=f"{unfit}: the '{error.validator}' rule failed{at}",
        )
    return plain


@dataclass(frozen=True, slots=True)
class RunningTask:
    """A tool call whose server-side task had not ended when the run paused. It needs
    no answer: resume with ``submit_with_tools(None, registry)`` to wait for it again.

    Example:
        >>> t = RunningTask("c1~task", "c1", "build", "ci", "t-42", "working", "step 2/3")
        >>> t.status, t.message
        ('working', 'step 2/3')
    """

    request_id: str
    """Unique within the run: the call id and ``~task``."""
    call_id: str
    """The tool call; it stays open in the history until the task ends."""
    tool_name: str
    """The tool, by its registry name."""
    server: str
    """The MCP server running the task."""
    task_id: str
    """The server's id for the task."""
    status: str
    """The task's last status seen: working, input_required, ..."""
    message: str | None = None
    """The server's last status message."""


@dataclass(frozen=True, slots=True)
class CallPaused:
    """What a tool returns to pause its call until ``requests`` are answered (a
    :class:`RunningTask` needs no answer).

    ``state`` (plain JSON) is kept on the open call in the history and handed back,
    with the answers, to the tool's ``resume_next`` before the call runs again.

    Example:
        >>> q = InputRequest("c1~q", "c1", "t", "Sure?", {"type": "object"})
        >>> CallPaused((q,), {"step": 1}).requests[0].message
        'Sure?'
    """

    requests: tuple[InputRequest | RunningTask, ...]
    """What the call waits for; it goes on once every question is answered."""
    state: dict[str, Any]
    """What the tool needs to go on (JSON); the loop stores it and signs it."""


@runtime_checkable
class ResumableTool(Protocol):
    """A tool whose paused calls the loop can resume (an MCP tool, ``run_python``).

    It may also have ``stopped(call_id) -> CallPaused | None``: what a call leaves
    running when the run stops before the call ends (an MCP task), so the call stays
    open in the history with it instead of being answered "cancelled". The loop asks
    with the turn's :data:`LEFT_RUNNING` set, where the cancelled call put it.
    """

    def resume_next(self, call_id: str, resume: Mapping[str, Any]) -> None:
        """Make the next run of ``call_id`` go on from ``resume``: ``{"state": ...,
        "answers": {request_id: answer-as-dict}}``."""
        ...


class WorkKeeper(Protocol):
    """Where a call that starts long-running work (an MCP task) keeps its handle, so a
    retry of the same call picks the work up instead of starting it again. A Temporal
    activity is one: it keeps the handle in its heartbeats (see
    :mod:`agcore_tools.temporal`), and a retried activity recalls it.

    It may also have ``given_up() -> bool``: whether the call, cancelled, is given up
    for good (its run cancelled, or gone), so that its work is cancelled too rather
    than kept for a retry.
    """

    @property
    def wait(self) -> float | None:
        """Seconds to wait for the work before the call pauses; None: wait it out."""
        ...

    def recall(self) -> Mapping[str, Any] | None:
        """The handle an earlier attempt of this call kept, or None."""
        ...

    def keep(self, handle: Mapping[str, Any]) -> None:
        """Keep ``handle`` (plain JSON) for a retry of this call."""
        ...


KEEPER: ContextVar[WorkKeeper | None] = ContextVar("agcore_work_keeper", default=None)
"""The :class:`WorkKeeper` of the call running in this context, if any."""

LEFT_RUNNING: ContextVar[dict[str, list[Any]] | None] = ContextVar(
    "agcore_left_running", default=None
)
"""Where the calls of the loop's current tool turn, cancelled before they ended, leave
the work they started (an MCP task's handle), by call id, for the tool's
``stopped(call_id)``. Set only in a turn, which asks only about the calls it leaves
unanswered: a call cut off by its timeout leaves nothing here (an MCP task call
cancels its task), nor does a call cancelled elsewhere (``invoke_all()``). One per
turn, since call ids repeat across the conversations that share a tool, never within a
turn."""


class ToolInputRequested(InlineEvent):
    """A stream event: a tool call asks the user something. Answer it inline with
    :meth:`accept`, :meth:`decline` or :meth:`cancel` before asking for the next event
    and the call goes on in the same run; leave it unanswered and the run pauses with it
    in ``response.pending`` (a later answer is logged as a warning: this run did not
    use it).

    Example:
        >>> q = InputRequest("c1~q", "c1", "t", "Sure?", {"type": "object"})
        >>> event = ToolInputRequested(q)
        >>> event.decline().action, event.answer is not None
        ('decline', True)
        >>> event.cancel().action, event.accept({"sure": True}).content
        ('cancel', {'sure': True})
    """

    __slots__ = ("answer", "request")

    def __init__(self, request: InputRequest) -> None:
        super().__init__()
        self.request = request
        """The question."""
        self.answer: InputAnswer | None = None
        """The inline answer, once given."""

    def accept(self, content: Mapping[str, Any]) -> InputAnswer:
        """Answer with ``content`` (checked against the schema); the call goes on."""
        self._note_answer(self.request.call_id)
        self.answer = self.request.accept(content)
        return self.answer

    def decline(self) -> InputAnswer:
        """Answer that the user said no; the call goes on."""
        self._note_answer(self.request.call_id)
        self.answer = self.request.decline()
        return self.answer

    def cancel(self) -> InputAnswer:
        """Answer that the user dismissed the question; the call goes on."""
        self._note_answer(self.request.call_id)
        self.answer = self.request.cancel()
        return self.answer

    def __repr__(self) -> str:
        return f"ToolInputRequested({self.request.request_id!r}, {self.request.message!r})"
