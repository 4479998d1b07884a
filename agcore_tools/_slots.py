"""A concurrency cap that several event loops and threads share: the slots of a
:class:`~agcore_tools.ToolPolicy`'s ``concurrency``, for one tool or for every tool of a
``resource``. Kept apart from :mod:`agcore_tools._guard`, which holds one.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections import deque

__all__ = ["Slots"]


class Slots:
    """At most ``limit`` calls at once; the rest wait in arrival order.

    Not an ``asyncio.Semaphore``: a slot freed by a finishing call is handed straight to
    the first waiter, so a newcomer cannot take it in between. A registry is shared by
    every loop that uses it (an app's, the library's for ``*_sync`` calls, one per
    thread), so the count is under a lock and a slot goes to a waiter of another loop
    through that loop (``call_soon_threadsafe``).

    Example:
        >>> import asyncio
        >>> async def main() -> tuple[int, int]:
        ...     slots = Slots(1)
        ...     await slots.take()
        ...     waiter = asyncio.ensure_future(slots.take())
        ...     await asyncio.sleep(0)
        ...     waiting = len(slots.waiters)
        ...     slots.give_back()
        ...     await waiter
        ...     return waiting, slots.running
        >>> asyncio.run(main())
        (1, 1)
    """

    __slots__ = ("__weakref__", "_lock", "limit", "running", "waiters")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self.waiters: deque[asyncio.Future[None]] = deque()
        self._lock = threading.Lock()
        _LIVE_SLOTS.add(self)

    def _forget_parent(self) -> None:
        # A forked child has none of its parent's calls: the slots they held, the
        # waiters of the parent's loops and a lock a parent's thread held are all stale.
        self.running = 0
        self.waiters = deque()
        self._lock = threading.Lock()

    async def take(self) -> None:
        """Wait for a slot; the caller's timeout bounds the wait."""
        with self._lock:
            if self.running < self.limit and not self.waiters:
                self.running += 1
                return
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.waiters.append(turn)
        try:
            await turn
        except BaseException:
            with self._lock:
                handed = turn.done() and not turn.cancelled()
                if not handed and turn in self.waiters:  # give_back() skips the others
                    self.waiters.remove(turn)
            if handed:  # handed a slot as it was cancelled: pass it on
                self.give_back()
            raise

    def give_back(self) -> None:
        """Free a slot: the first waiter gets it, else it is free."""
        with self._lock:
            waiters = self.waiters
            while waiters:
                turn = waiters.popleft()
                if turn.done():
                    continue
                loop = turn.get_loop()
                if _running_loop() is loop:
                    turn.set_result(None)
                    return
                try:
                    loop.call_soon_threadsafe(self._hand, turn)
                except RuntimeError:  # its loop is closed: that waiter is gone
                    continue
                return
            self.running -= 1

    def _hand(self, turn: asyncio.Future[None]) -> None:
        # On the waiter's own loop: it may have been cancelled since.
        if turn.done():
            self.give_back()
        else:
            turn.set_result(None)


_LIVE_SLOTS: weakref.WeakSet[Slots] = weakref.WeakSet()


def _free_slots() -> None:
    for slots in list(_LIVE_SLOTS):
        slots._forget_parent()


if hasattr(os, "register_at_fork"):  # pragma: no branch - absent on Windows only
    os.register_at_fork(after_in_child=_free_slots)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
