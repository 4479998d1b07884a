"""What a running tool tells its caller before it returns: progress and preliminary results.

A tool reports through its :class:`~agcore_tools.ToolContext`; the context hands each
report to an :class:`_Emitter`, which delivers it on the event loop's thread (a sync
tool reports from a worker thread) to the app's ``on_event`` callback and, in the
streaming loop, into the event stream. None of it ever reaches the model.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._cancel import CancellationToken

__all__ = [
    "ToolBreakerChanged",
    "ToolEvent",
    "ToolEventCallback",
    "ToolPartialResult",
    "ToolProgress",
]

logger = logging.getLogger("agcore_tools.progress")


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A running tool's progress report (``ctx.report_progress``, or an MCP server's
    ``notifications/progress``).

    Example:
        >>> update = ToolProgress("index_files", "call_1", 30, 120, "scanning")
        >>> update.fraction
        0.25
        >>> ToolProgress("index_files", "call_1", 3).fraction is None
        True
    """

    tool_name: str | None
    """The tool reporting (None when it runs outside a registry)."""
    call_id: str | None
    """The model's tool call id (None outside a model's call)."""
    progress: float
    """Progress so far, in the tool's own unit (it should only grow)."""
    total: float | None = None
    """The value ``progress`` will reach, when known."""
    message: str | None = None
    """A human-readable status, when given."""

    @property
    def fraction(self) -> float | None:
        """``progress / total``, or None when the total is unknown."""
        return self.progress / self.total if self.total else None


@dataclass(frozen=True, slots=True)
class ToolPartialResult:
    """A preliminary result: one value a generator tool yielded.

    Every value the tool yields arrives as one of these; the last one is also its
    final result, which :class:`~agcore_tools.ToolExecutionCompleted` carries and the
    model receives. Earlier values never reach the model.

    Example:
        >>> ToolPartialResult("search", "call_1", {"hits": 10}).value
        {'hits': 10}
    """

    tool_name: str | None
    """The tool reporting (None when it runs outside a registry)."""
    call_id: str | None
    """The model's tool call id (None outside a model's call)."""
    value: Any
    """The value yielded, JSON-compatible like a result."""


@dataclass(frozen=True, slots=True)
class ToolBreakerChanged:
    """A tool's circuit breaker opened or closed (see :class:`~agcore_tools.Breaker`).

    Reported through the context of the call whose end changed it: to ``on_event``
    and, in the streaming loop, into the event stream. While ``state`` is ``"open"``
    the tool is not offered to the model, for ``retry_after`` seconds.

    Example:
        >>> ToolBreakerChanged("charge", "call_7", "open", 30.0).state
        'open'
    """

    tool_name: str
    """The tool whose breaker changed."""
    call_id: str | None
    """The call whose end changed it."""
    state: Literal["open", "closed"]
    """``"open"``: the tool is left out and its calls refused; ``"closed"``: offered again."""
    retry_after: float | None = None
    """Seconds until a probe call is let through, when open."""


ToolEvent: TypeAlias = ToolProgress | ToolPartialResult | ToolBreakerChanged
"""What a tool reports while it runs."""

ToolEventCallback: TypeAlias = Callable[[ToolEvent], object]
"""``ToolContext(on_event=...)``: called on the event loop's thread with each event (in
the tool's own thread when no loop is involved: a sync tool called directly)."""


class _Emitter:
    """Delivers a run's tool events: to the app's callback, and to the stream's inbox.

    Bound to the loop it delivers on; a report from another thread hops onto it. One
    never bound to a loop delivers in the reporting thread. Each call has its own (see
    :meth:`for_call`), which :meth:`end` silences when the call ends.
    """

    __slots__ = ("_ended", "callback", "inbox", "loop", "parent")

    def __init__(
        self,
        callback: ToolEventCallback | None,
        inbox: asyncio.Queue[Any] | None,
        loop: asyncio.AbstractEventLoop | None,
        parent: _Emitter | None = None,
    ) -> None:
        self.callback = callback
        self.inbox = inbox
        self.loop = loop
        self.parent = parent
        self._ended = False

    def bound(self) -> _Emitter:
        """This emitter, or a copy bound to the running loop if it is bound to another."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return self
        if running is self.loop:
            return self
        return _Emitter(self.callback, self.inbox, running, self)

    def for_call(self) -> _Emitter:
        """A child for one call, bound to the running loop if there is one: it delivers
        as this one does until it, or this one, has ended."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = self.loop
        return _Emitter(self.callback, self.inbox, loop, self)

    def end(self) -> None:
        """Drop what is reported after now: the call has ended (its end is reported)."""
        self._ended = True

    @property
    def ended(self) -> bool:
        """Whether this emitter, or one it was made from, has ended."""
        emitter: _Emitter | None = self
        while emitter is not None:
            if emitter._ended:
                return True
            emitter = emitter.parent
        return False

    def emit(self, event: ToolEvent, token: CancellationToken | None) -> None:
        """Deliver ``event`` (from any thread) unless its call was given up on."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = self.loop
        if running is not None and (loop is None or running is loop):
            self._deliver(event, token)
            return
        if loop is None:
            # No loop anywhere (a sync tool called directly, as a unit test does):
            # nothing to hop onto, so the caller's own thread delivers it.
            self._deliver(event, token)
            return
        try:
            loop.call_soon_threadsafe(self._deliver, event, token)
        except RuntimeError:  # the loop is closed: the run is over, nobody listens
            logger.debug("dropped %r: its event loop is closed", event)

    def _deliver(self, event: ToolEvent, token: CancellationToken | None) -> None:
        # A call given up on (timeout, cancelled loop) has reported its end already;
        # what its thread says afterwards must not follow that end.
        if token is not None and token.cancelled:
            return
        if self.ended:  # a helper thread of the tool's, still reporting
            logger.debug("dropped %r: its call has ended", event)
            return
        if self.inbox is not None:
            self.inbox.put_nowait(event)
        if self.callback is not None:
            try:
                self.callback(event)
            except Exception:  # an app's display callback must not fail the tool
                logger.exception("the on_event callback %r raised on %r", self.callback, event)
