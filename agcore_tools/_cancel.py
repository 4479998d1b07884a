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
    tool awaiting :meth:`wait` on its event loop wakes up all the same.

    Example:
        >>> token = CancellationToken()
        >>> child = token.child()
        >>> token.cancel()
        >>> child.cancelled
        True
    """

    __slots__ = ("__weakref__", "_cancelled", "_children", "_event", "_hooks", "_loop")

    def __init__(self) -> None:
        self._cancelled = False
        self._hooks: set[Callable[[], None]] | None = None
        """What :func:`on_cancel` asked to call in the cancelling thread."""
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop :attr:`_event` is awaited on."""
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
            event, loop = self._event, self._loop
            hooks, self._hooks = self._hooks, None
        if event is not None and loop is not None:
            if _running_loop() is loop:
                event.set()
            else:
                # A closed loop raises RuntimeError: nothing waits on it any more.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(event.set)
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
        loop = asyncio.get_running_loop()
        with _TREE:
            if self._cancelled:
                return
            if self._event is None:
                self._event, self._loop = asyncio.Event(), loop
            event = self._event
        await event.wait()

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


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
