"""The cancellation signal a tool polls or awaits.

A leaf module: the context (``base``) hands a token to each call, and progress
reports (``_progress``) check it before delivery, so it lives below both.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import weakref
from collections.abc import Callable

__all__ = ["CancellationToken", "off_cancel", "on_cancel"]

# Guards the tokens' children and waiters against a cancel from another thread (a sync
# app's Stop button) racing the loop's thread as it adds a child or starts to wait.
# One for every token, made here: a Temporal workflow's sandbox, where the loop makes
# tokens, refuses a lock made as a token is.
_TREE = threading.Lock()


def _fresh_lock() -> None:
    global _TREE
    _TREE = threading.Lock()  # a thread of the parent's may have held it at the fork


if hasattr(os, "register_at_fork"):  # pragma: no branch - absent on Windows only
    os.register_at_fork(after_in_child=_fresh_lock)


class CancellationToken:
    """A cancellation signal a tool can poll (also from a worker thread) or await.

    Cancelling a token cancels its children too. Any thread may cancel it: an async
    tool awaiting :meth:`wait` on its event loop wakes up all the same, and waits on
    several loops at once (an app's, the library's) each wake up on their own.

    Example:
        >>> token = CancellationToken()
        >>> child = token.child()
        >>> token.cancel()
        >>> child.cancelled
        True
    """

    __slots__ = ("__weakref__", "_cancelled", "_children", "_hooks", "_waiters")

    def __init__(self) -> None:
        self._cancelled = False
        self._hooks: set[Callable[[], None]] | None = None
        """What :func:`on_cancel` asked to call in the cancelling thread."""
        self._waiters: set[asyncio.Future[None]] | None = None
        """One future for each :meth:`wait` under way, on the waiter's own loop (one
        Event for all would bind the token to the first loop that waits)."""
        # Weak, so a long conversation's context does not keep every finished call's
        # token alive.
        self._children: weakref.WeakSet[CancellationToken] | None = None

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` has been called on this token or a parent."""
        return self._cancelled

    def cancel(self) -> None:
        """Signal cancellation to this token, its children and every waiter.

        Callable from any thread, as often as you like: a waiter on an event loop is
        woken on that loop's thread.

        Example:
            >>> import asyncio, threading
            >>> async def main() -> str:
            ...     token = CancellationToken()
            ...     waiting = asyncio.ensure_future(token.wait())
            ...     await asyncio.sleep(0)  # it waits now
            ...     stop = threading.Thread(target=token.cancel)  # a sync app's Stop button
            ...     stop.start()
            ...     stop.join(10)
            ...     await asyncio.wait_for(waiting, 10)
            ...     return "woken"
            >>> asyncio.run(main())
            'woken'
        """
        with _TREE:
            if self._cancelled:
                return
            self._cancelled = True
            children, self._children = self._children, None
            waiters, self._waiters = self._waiters, None
            hooks, self._hooks = self._hooks, None
        if waiters:
            running = _running_loop()
            for waiter in waiters:
                loop = waiter.get_loop()
                if loop is running:
                    _wake(waiter)
                else:
                    # A closed loop raises RuntimeError: nothing waits on it any more.
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(_wake, waiter)
        for hook in hooks or ():
            hook()
        for child in list(children or ()):
            child.cancel()

    def child(self) -> CancellationToken:
        """A token cancelled with this one, that can also be cancelled on its own."""
        token = CancellationToken()
        with _TREE:
            if self._cancelled:
                token._cancelled = True
            else:
                if self._children is None:
                    self._children = weakref.WeakSet()
                self._children.add(token)
        return token

    async def wait(self) -> None:
        """Return once the token is cancelled.

        Example:
            >>> async def worker(ctx) -> str:
            ...     await ctx.cancellation.wait()
            ...     return "stopped"
        """
        if self._cancelled:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with _TREE:
            if self._cancelled:
                return
            if self._waiters is None:
                self._waiters = set()
            self._waiters.add(waiter)
        try:
            await waiter
        finally:
            # A wait given up on (a timeout) is not kept until a cancel that may never come.
            with _TREE:
                if self._waiters is not None:
                    self._waiters.discard(waiter)

    def __repr__(self) -> str:
        return f"CancellationToken(cancelled={self._cancelled})"


def on_cancel(token: CancellationToken, hook: Callable[[], None]) -> bool:
    """Have ``token``'s cancel (or a parent's) call ``hook``, once, in the cancelling
    thread, until :func:`off_cancel`: how a call hears of its caller's cancel with no
    task or thread waiting for it. False, and no hook, for a token cancelled already.

    Example:
        >>> token, heard = CancellationToken(), []
        >>> on_cancel(token, lambda: heard.append("stop"))
        True
        >>> token.child().cancel()  # a child's cancel is not the token's
        >>> token.cancel()
        >>> token.cancel()  # again: nothing more happens
        >>> heard, on_cancel(token, print)
        (['stop'], False)
    """
    with _TREE:
        if token._cancelled:
            return False
        if token._hooks is None:
            token._hooks = set()
        token._hooks.add(hook)
    return True


def off_cancel(token: CancellationToken, hook: Callable[[], None]) -> None:
    """Stop calling ``hook`` on ``token``'s cancel (one under way in another thread may
    still call it).

    Example:
        >>> token, heard = CancellationToken(), []
        >>> def hook() -> None:
        ...     heard.append("stop")
        >>> on_cancel(token, hook)
        True
        >>> off_cancel(token, hook)
        >>> token.cancel()
        >>> heard
        []
    """
    with _TREE:
        hooks = token._hooks
        if hooks is not None:
            hooks.discard(hook)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # a wait given up on is cancelled already
        waiter.set_result(None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
