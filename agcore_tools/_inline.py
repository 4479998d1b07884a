"""Stream events an app answers inline, and the moment an answer stops counting.

An inline answer counts only while the stream waits at its event: once the app asks
for the next event, the loop has read the answer (or its absence) and moved on. An
answer given later still makes a decision the app can pass to ``approvals=[...]`` on a
resume, but the run it was meant for will not use it, so it is logged rather than
dropped without a word. A consumer that stops iterating at the event (to ask the user
later) never moved on, so its answer, made for the resume, is not logged. The approval and
input-request events share this rule, and neither module may reach into the other's,
so it lives here, below both.
"""

from __future__ import annotations

import logging

__all__ = ["InlineEvent", "close_answers"]

logger = logging.getLogger("agcore_tools.approval")


class InlineEvent:
    """A stream event that takes one inline answer, until the stream moves on.

    Example:
        >>> event = InlineEvent()
        >>> event._note_answer("c1")  # in time: nothing to say
        >>> close_answers(event)
        >>> event._note_answer("c1")  # too late: logged on agcore_tools.approval
    """

    __slots__ = ("_closed",)

    def __init__(self) -> None:
        self._closed = False

    def _note_answer(self, call_id: str) -> None:
        """Log an answer given after the stream read past this event."""
        if self._closed:
            logger.warning(
                "the inline answer to call %r came after the stream moved on, so this run "
                "did not use it: answer an event before asking for the next one, or pass "
                "the decision to approvals=[...] when resuming",
                call_id,
            )


def close_answers(event: InlineEvent) -> None:
    """Mark ``event`` as read: the loop has taken what answer it had, and moved on."""
    event._closed = True
