"""Where a ``submit*`` call's loop leaves its :class:`ChatResponse`.

The loop writes it; the :class:`~agcore_tools.EventStream` that hands out the call's
events and the call's trace (which records the summed usage) both read it. A holder of
its own, rather than an attribute of either, keeps the loop from writing into another
class and the stream and the trace from importing each other.
"""

from __future__ import annotations

from .events import ChatResponse, Usage

__all__ = ["Outcome"]


class Outcome:
    """The call's response once the loop has one; None until then (or for good, when
    the loop fails or is stopped). And the usage of the requests answered so far, which
    a run that fails or is stopped still spent.

    Example:
        >>> outcome = Outcome()
        >>> outcome.response is None, outcome.usage is None
        (True, True)
    """

    __slots__ = ("response", "usage")

    def __init__(self) -> None:
        self.response: ChatResponse | None = None
        self.usage: Usage | None = None
        """The summed usage of the call's answered requests (None before the first)."""
