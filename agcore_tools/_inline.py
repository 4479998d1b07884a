"""Stream events an app answers inline, and the moment they stop taking answers.

An inline answer counts only while the stream waits at its event: once the app asks
for the next event, the loop has read the answer (or its absence) and moved on. An
answer given later would change nothing, so it is refused rather than dropped without
a word. The approval and input-request events share this rule, and neither module
may reach into the other's, so it lives here, below both.
"""

from __future__ import annotations

from .error import ApprovalError

__all__ = ["InlineEvent", "close_answers"]


class InlineEvent:
    """A stream event that takes one inline answer, until the stream moves on.

    Example:
        >>> event = InlineEvent()
        >>> event._check_open("c1")
        >>> close_answers(event)
        >>> try:
        ...     event._check_open("c1")
        ... except ValueError as exc:
        ...     print(exc)  # doctest: +ELLIPSIS
        the answer to call 'c1' came after the stream moved on: ...
    """

    __slots__ = ("_closed",)

    def __init__(self) -> None:
        self._closed = False

    def _check_open(self, call_id: str) -> None:
        """Refuse an answer once the stream has read past this event."""
        if self._closed:
            raise ApprovalError(
                f"the answer to call {call_id!r} came after the stream moved on: answer "
                "an event before asking for the next one, or resume the paused "
                "response with approvals=[...]"
            )


def close_answers(event: InlineEvent) -> None:
    """Stop ``event`` from taking answers: the loop has read what it got."""
    event._closed = True
