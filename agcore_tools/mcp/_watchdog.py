"""The time bound of every ``tools/call``, kept by one timer per connection.

Tool calls run without the SDK's per-request clock, which would arm and cancel a timer
for every request (see ``_UNTIMED`` in ``client.py``); this bound covers the whole
call, its write included. ``asyncio.timeout`` would likewise schedule and cancel a
timer per call, a measurable share of a sequential call's client CPU (see
docs/benchmarks.md, MCP). Here one timer serves every call in flight on a connection:
a call only records its deadline, and the timer, when it fires, cancels the calls
past theirs (which then raise ``TimeoutError``, as ``asyncio.timeout`` would, and the
SDK sends ``notifications/cancelled`` for each) and re-arms itself for the earliest
deadline left, or not at all once nothing is in flight.

The timer outlives the calls that armed it (the next call reuses it), so it runs in an
empty context: a copy of the caller's would keep whatever the caller's context
variables hold alive until it fires. A connection that ends stops it (:meth:`close`).
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import sys
from collections.abc import Awaitable
from typing import Any, TypeVar

from .._aio import with_timeout

__all__ = ["Watchdog"]

T = TypeVar("T")

# A timer may run a hair before its deadline by the loop's clock (asyncio runs handles
# due within its clock resolution); a call this close to its deadline has reached it.
_SLACK = 0.001


class Watchdog:
    """Bounds the calls in flight on one event loop (a connection lives on one)."""

    __slots__ = (
        "_armed_for",
        "_closed",
        "_deadlines",
        "_expired",
        "_general",
        "_handle",
        "_idle",
        "_running",
    )

    def __init__(self) -> None:
        self._deadlines: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = math.inf
        self._running = 0  # the calls in flight, by either path of bound()
        self._idle: asyncio.Event | None = None  # what idle() waits on, set at 0 running
        self._closed = False
        self._general: list[float] = []  # the deadlines of the calls bounded the general way

    async def bound(self, awaitable: Awaitable[T], seconds: float) -> T:
        """Await ``awaitable``; after ``seconds``, cancel it and raise ``TimeoutError``.

        Example:
            >>> import asyncio
            >>> async def slow() -> None:
            ...     await asyncio.sleep(10)
            >>> async def demo() -> str:
            ...     watchdog = Watchdog()
            ...     try:
            ...         await watchdog.bound(slow(), 0.01)
            ...     except TimeoutError:
            ...         return "timed out"
            ...     return "finished"
            >>> asyncio.run(demo())
            'timed out'
        """
        task = asyncio.current_task()
        if task is None or task in self._deadlines or sys.version_info < (3, 11):
            # Nested in another bounded call of this task (or no Task.uncancel): the
            # general form, in flight all the same for idle() and latest().
            deadline = asyncio.get_running_loop().time() + seconds
            self._general.append(deadline)
            self._running += 1
            try:
                return await with_timeout(awaitable, seconds)
            finally:
                self._general.remove(deadline)
                self._ended()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        self._deadlines[task] = deadline
        if deadline < self._armed_for:
            self._arm(loop, deadline)
        cancelling = task.cancelling()
        handled = False
        self._running += 1
        try:
            return await awaitable
        except asyncio.CancelledError as exc:
            # Ours when the timer cancelled this task and nobody else did meanwhile
            # (asyncio.timeout's test); withdrawing our request, as it does.
            if task in self._expired:
                handled = True
                if task.uncancel() <= cancelling:
                    raise TimeoutError from exc
            raise
        finally:
            del self._deadlines[task]
            if task in self._expired:
                self._expired.discard(task)
                if not handled:  # it ended some other way: take our request back
                    task.uncancel()
            if self._closed and not self._deadlines:
                self._disarm()
            self._ended()

    def _ended(self) -> None:
        self._running -= 1
        if self._running == 0 and self._idle is not None:
            # Those waiting keep this event; a later idle() waits on a new one.
            self._idle.set()
            self._idle = None

    async def idle(self, seconds: float) -> bool:
        """Wait until no call is in flight, ``seconds`` at most; whether none is.

        Example:
            >>> import asyncio
            >>> async def demo() -> list[bool]:
            ...     watchdog = Watchdog()
            ...     call = asyncio.create_task(watchdog.bound(asyncio.sleep(0.01), 5))
            ...     await asyncio.sleep(0)  # the call is in flight
            ...     return [await watchdog.idle(0), await watchdog.idle(5), call.done()]
            >>> asyncio.run(demo())
            [False, True, True]
        """
        if self._running == 0:
            return True
        if self._idle is None:
            self._idle = asyncio.Event()
        try:
            await with_timeout(self._idle.wait(), seconds)
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        """Stop the timer once no call is in flight: the connection has ended, so no
        call will reuse it.

        Example:
            >>> import asyncio
            >>> async def demo() -> bool:
            ...     watchdog = Watchdog()
            ...     await watchdog.bound(asyncio.sleep(0), 30)  # armed, on Python 3.11+
            ...     watchdog.close()
            ...     return watchdog.armed
            >>> asyncio.run(demo())
            False
        """
        self._closed = True
        if not self._deadlines:
            self._disarm()

    @property
    def armed(self) -> bool:
        """Whether the timer is set (it stays set between calls, for the next one)."""
        return self._handle is not None

    def latest(self) -> float:
        """The latest deadline (the loop's clock) of the calls in flight; ``-inf`` when
        none is.

        Example:
            >>> import asyncio, math
            >>> async def demo() -> bool:
            ...     watchdog = Watchdog()
            ...     call = asyncio.create_task(watchdog.bound(asyncio.sleep(0.01), 5))
            ...     await asyncio.sleep(0)  # the call is in flight
            ...     in_flight = watchdog.latest() - asyncio.get_running_loop().time()
            ...     await call
            ...     return 4 < in_flight <= 5 and watchdog.latest() == -math.inf
            >>> asyncio.run(demo())
            True
        """
        return max((*self._deadlines.values(), *self._general), default=-math.inf)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed_for = when
        self._handle = loop.call_at(when, self._fire, loop, context=contextvars.Context())

    def _disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed_for = math.inf

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._handle = None
        self._armed_for = math.inf
        due = loop.time() + _SLACK
        earliest = math.inf
        for task, deadline in self._deadlines.items():
            if task in self._expired:
                continue
            if deadline <= due:
                self._expired.add(task)
                task.cancel()
            else:
                earliest = min(earliest, deadline)
        if earliest < math.inf:
            self._arm(loop, earliest)
