"""What a running tool tells its caller before it returns: progress and preliminary results.

A tool reports through its :class:`~agcore_tools.ToolContext`; the context hands each
report to an :class:`_Emitter`, which delivers it on the event loop's thread (a sync
tool reports from a worker thread) to the app's ``on_event`` callback and, in the
streaming loop, into the event stream. None of it ever reaches the model.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._cancel import CancellationToken
from .error import _ListenerTypeError

__all__ = [
    "ToolBreakerChanged",
    "ToolEvent",
    "ToolEventCallback",
    "ToolInbox",
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
    parent_call_id: str | None = None
    """The call this one was made inside of: a code-mode program's ``run_python`` call,
    whose ``ToolExecutionStarted``/``Completed`` pair its events fall between (the
    program's own calls have none). None for a call the model made itself."""

    @property
    def fraction(self) -> float | None:
        """``progress / total``, or None when the total is unknown."""
        return self.progress / self.total if self.total else None


@dataclass(frozen=True, slots=True)
class ToolPartialResult:
    """A preliminary result: one value a generator tool yielded.

    Every value the tool yields arrives as one of these (an event stream holds up to
    16 unread ones per call, dropping the oldest past that); the last one is also its
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
    parent_call_id: str | None = None
    """The call this one was made inside of (a code-mode program's ``run_python``
    call), as :attr:`ToolProgress.parent_call_id`; None for a call the model made."""


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
"""``ToolContext(on_event=...)``: a plain (not async) function, called on the event
loop's thread with each event (in the tool's own thread when no loop is involved: a
sync tool called directly)."""

_ASYNC_LISTENER = (
    "an async function's coroutine would never be awaited: pass a plain function that "
    "hands the event on, such as the `put_nowait` of an asyncio.Queue a task of yours reads"
)


def is_async_callable(callback: object) -> bool:
    """Whether calling ``callback`` makes a coroutine: an async function (or a
    ``functools.partial`` of one), or an object whose ``__call__`` is one.

    For the callbacks the library calls without awaiting: given an async function, they
    would get a never-awaited coroutine, which is always true.

    Example:
        >>> async def fetch(x): ...
        >>> is_async_callable(fetch), is_async_callable(len)
        (True, False)
    """
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
        type(callback).__call__
    )


def check_listener(callback: object) -> None:
    """Refuse an ``on_event`` that is not callable, or is an async function.

    Example:
        >>> async def send(event): ...
        >>> check_listener(send)
        Traceback (most recent call last):
        ...
        agcore_tools.error._ListenerTypeError: ToolContext(on_event=...) takes a plain function, not the async function send: an async function's coroutine would never be awaited: pass a plain function that hands the event on, such as the `put_nowait` of an asyncio.Queue a task of yours reads
    """
    if not callable(callback):
        raise _ListenerTypeError(
            f"ToolContext(on_event=...) takes a function called with each event, "
            f"got {type(callback).__name__}"
        )
    if is_async_callable(callback):
        name = getattr(callback, "__name__", type(callback).__name__)
        raise _ListenerTypeError(
            f"ToolContext(on_event=...) takes a plain function, not the async function "
            f"{name}: {_ASYNC_LISTENER}"
        )


REPORTS_PER_CALL = 16
"""Unread reports of each kind (:class:`ToolProgress`, :class:`ToolPartialResult`) a
stream holds per call: a burst of reports reaches a consumer whole, while a tool far
ahead of its consumer holds no more than this many in memory."""


class ToolInbox:
    """A streaming run's tool events and its turns' completions, in the order they
    came, for the loop to yield: the queue behind :attr:`ToolContext.inbox`.

    A tool can report far faster than a stream's consumer reads, so what a call reports
    is bounded while unread: past :data:`REPORTS_PER_CALL` unread :class:`ToolProgress`
    events of a call, or as many unread :class:`ToolPartialResult` events, the oldest
    of that kind is dropped. What is kept stays in the order it came. Used on its
    event loop's thread only, by one reader.

    Example:
        >>> inbox = ToolInbox()
        >>> for done in range(1, 21):
        ...     inbox.put_nowait(ToolProgress("index", "call_1", done, 20))
        >>> inbox.put_nowait(ToolProgress("index", "call_2", 1, 3))
        >>> inbox.qsize(), inbox.get_nowait().progress
        (17, 5)
        >>> for value in range(20):
        ...     inbox.put_nowait(ToolPartialResult("search", "call_3", value))
        >>> inbox.qsize(), [inbox.get_nowait() for _ in range(16)][-1].call_id
        (32, 'call_2')
        >>> inbox.get_nowait().value
        4
    """

    __slots__ = ("_held", "_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None
        # Per (kind, tool, call): how many unread reports are held.
        self._held: dict[tuple[type[Any], str | None, str | None], int] = {}

    def put_nowait(self, item: Any) -> None:
        """Add ``item``; a call's unread reports past their bound make room for it."""
        if isinstance(item, (ToolProgress, ToolPartialResult)):
            key = (type(item), item.tool_name, item.call_id)
            held = self._held.get(key, 0)
            if held >= REPORTS_PER_CALL:
                self._drop_first(key)
                held -= 1
            self._held[key] = held + 1
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _drop_first(self, key: tuple[type[Any], str | None, str | None]) -> None:
        kind, tool_name, call_id = key
        for index, unread in enumerate(self._items):
            if type(unread) is kind and (unread.tool_name, unread.call_id) == (tool_name, call_id):
                del self._items[index]
                return

    async def get(self) -> Any:
        """The oldest item, once there is one."""
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._take()

    def get_nowait(self) -> Any:
        """The oldest item; ``asyncio.QueueEmpty`` when there is none."""
        if not self._items:
            raise asyncio.QueueEmpty
        return self._take()

    def _take(self) -> Any:
        item = self._items.popleft()
        if isinstance(item, (ToolProgress, ToolPartialResult)):
            key = (type(item), item.tool_name, item.call_id)
            held = self._held.pop(key, 1) - 1
            if held:
                self._held[key] = held
        return item

    def empty(self) -> bool:
        """Whether nothing is waiting to be read."""
        return not self._items

    def qsize(self) -> int:
        """How many items wait to be read."""
        return len(self._items)


_DRAINED = 1000
_YIELD_EVERY = 64
"""Reports from other threads delivered per turn of the event loop: a flood of them
takes its turns with the loop's other work."""


class _Emitter:
    """Delivers a run's tool events: to the app's callback, and to the stream's inbox.

    Bound to the loop it delivers on; a report from another thread hops onto it. One
    never bound to a loop delivers in the reporting thread. Each call has its own (see
    :meth:`for_call`), which :meth:`end` silences when the call ends.

    Reports from other threads queue up while a hop is on its way, and that one hop
    delivers them all, in order: a tool reporting every row would otherwise wake the
    loop once per report (300,000 reports made the call 20 times slower).
    """

    __slots__ = ("_ended", "_lock", "_queued", "callback", "inbox", "loop", "parent")

    def __init__(
        self,
        callback: ToolEventCallback | None,
        inbox: ToolInbox | None,
        loop: asyncio.AbstractEventLoop | None,
        parent: _Emitter | None = None,
    ) -> None:
        self.callback = callback
        self.inbox = inbox
        self.loop = loop
        self.parent = parent
        self._ended = False
        self._lock = threading.Lock()
        # Reports from other threads not delivered yet; None when no hop is on its way.
        self._queued: deque[tuple[ToolEvent, CancellationToken | None]] | None = None

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
        """Drop what is reported after now: the call has ended (its end is reported).
        What its thread reported before is delivered first, if still on its way."""
        try:
            self._deliver_queued(None)
        finally:
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
        with self._lock:
            queued = self._queued
            if queued is not None:  # a hop is on its way: it takes this report too
                queued.append((event, token))
                waiting = len(queued)
            else:
                self._queued = deque(((event, token),))
        if queued is not None:
            if waiting % _YIELD_EVERY == 0:
                # A thread that reports in a tight loop holds the GIL for its whole
                # switch interval each time, and the loop needs it several times a turn
                # (each hop's write used to let it in): so let it in now and then.
                time.sleep(0)
            return
        try:
            loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: the run is over, nobody listens
            with self._lock:
                self._queued = None
            logger.debug("dropped %r: its event loop is closed", event)

    def _drain(self) -> None:
        # A hop, on the loop: what other threads reported since, a share per turn.
        more = True
        try:
            more = self._deliver_queued(_DRAINED)
        finally:
            if more:  # the rest next turn; the queue stays, so no later report overtakes
                asyncio.get_running_loop().call_soon(self._drain)

    def _deliver_queued(self, most: int | None) -> bool:
        """Deliver up to ``most`` (None: all) of the reports queued from other threads,
        oldest first; whether some are left."""
        with self._lock:
            queued = self._queued
            if queued is None:
                return False  # the call's end delivered them
            count = len(queued) if most is None else min(len(queued), most)
            batch = [queued.popleft() for _ in range(count)]
            if not queued:
                self._queued = None
        for event, token in batch:
            self._deliver(event, token)
        return bool(queued)

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
                returned = self.callback(event)
                # `lambda e: queue.put(e)`, say: a coroutine nobody will run. A Task or
                # a Future (`lambda e: asyncio.create_task(send(e))`) runs on its own.
                if inspect.iscoroutine(returned):
                    returned.close()  # never run: no "never awaited" warning later
                    raise _ListenerTypeError(
                        f"the on_event callback returned a coroutine, which is never "
                        f"awaited: {_ASYNC_LISTENER}"
                    )
            except Exception:  # an app's display callback must not fail the tool
                logger.exception("the on_event callback %r raised on %r", self.callback, event)
