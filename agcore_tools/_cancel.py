"""The cancellation signal a tool polls or awaits.

A leaf module: the context (``base``) hands a token to each call, and progress
reports (``_progress``) check it before delivery, so it lives below both.
"""

from __future__ import annotations

import asyncio
import weakref

__all__ = ["CancellationToken"]


class CancellationToken:
    """A cancellation signal a tool can poll (also from a worker thread) or await.

    Cancelling a token cancels its children too.

    Example:
        >>> token = CancellationToken()
        >>> child = token.child()
        >>> token.cancel()
        >>> child.cancelled
        True
    """

    __slots__ = ("__weakref__", "_cancelled", "_children", "_event")

    def __init__(self) -> None:
        self._cancelled = False
        self._event: asyncio.Event | None = None
        # Weak, so a long conversation's context does not keep every finished call's
        # token alive.
        self._children: weakref.WeakSet[CancellationToken] | None = None

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` has been called on this token or a parent."""
        return self._cancelled

    def cancel(self) -> None:
        """Signal cancellation to this token, its children and every waiter.

        Call it from the event loop's thread.
        """
        if self._cancelled:
            return
        self._cancelled = True
        if self._event is not None:
            self._event.set()
        children, self._children = self._children, None
        for child in list(children or ()):
            child.cancel()

    def child(self) -> CancellationToken:
        """A token cancelled with this one, that can also be cancelled on its own."""
        token = CancellationToken()
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
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()

    def __repr__(self) -> str:
        return f"CancellationToken(cancelled={self._cancelled})"
