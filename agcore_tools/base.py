"""The tool interface (:class:`BaseTool`) and the context every execution receives.

Example:
    >>> class Echo(BaseTool):
    ...     name = "echo"
    ...     description = "Return the text it is given."
    ...     parameters = {"type": "object", "properties": {"text": {"type": "string"}}}
    ...
    ...     async def execute(self, args, ctx):
    ...         return args["text"]
    >>> import asyncio
    >>> asyncio.run(Echo().execute({"text": "hi"}, ToolContext()))
    'hi'
"""

from __future__ import annotations

import asyncio
import os
import random
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from .permission import Permission

__all__ = ["BaseTool", "CancellationToken", "ToolContext"]


# Ids come from a private generator seeded from os.urandom: three times cheaper than
# os.urandom per id (a context needs two), unaffected by random.seed() in user code,
# and reseeded in forked children so they never repeat their parent's ids.
def _reseed_ids() -> None:
    global _id_bits
    _id_bits = random.Random().getrandbits


_id_bits = random.Random().getrandbits
if hasattr(os, "register_at_fork"):  # pragma: no branch - absent on Windows only
    os.register_at_fork(after_in_child=_reseed_ids)


def _new_id() -> str:
    # 16 random hex characters: unique enough for tracing, far cheaper than uuid4().
    return _id_bits(64).to_bytes(8, "big").hex()


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
            >>> async def worker(ctx: ToolContext) -> str:
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


class ToolContext:
    """What a tool execution knows about its surroundings (seed §9.A extension point).

    New fields (progress reporting, shared state) can be added here without changing
    :meth:`BaseTool.execute`'s signature. Every argument is optional, so
    ``ToolContext()`` is a fresh context; its ids, token and metadata are made on first
    use, which keeps a context that no tool reads nearly free.

    When the caller gives up on a call (its timeout, a cancelled loop), the call's
    token is cancelled. An async tool is cancelled with it; a sync tool's thread cannot
    be stopped from outside and runs on, so a long sync tool should check
    :attr:`cancelled` now and then and return early once it is true (its result is
    thrown away). Such threads do not keep the process from exiting.

    Example:
        >>> ctx = ToolContext(metadata={"user": "ann"})
        >>> len(ctx.session_id), ctx.call_id, ctx.metadata["user"]
        (16, None, 'ann')
        >>> call = ctx.for_call("call_1")
        >>> call.call_id, call.session_id == ctx.session_id, call.trace_id == ctx.trace_id
        ('call_1', True, True)
        >>> call.cancellation.cancel()  # a call's token is a child of its parent's
        >>> call.cancelled, ctx.cancelled
        (True, False)
    """

    __slots__ = ("_cancellation", "_metadata", "_session_id", "_trace_id", "call_id")

    def __init__(
        self,
        session_id: str | None = None,
        trace_id: str | None = None,
        call_id: str | None = None,
        cancellation: CancellationToken | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._session_id = session_id
        self._trace_id = trace_id
        self.call_id = call_id
        """The model's tool call id, when the call came from a model."""
        self._cancellation = cancellation
        self._metadata = metadata

    @property
    def session_id(self) -> str:
        """Ties together every tool call of one conversation (random unless given)."""
        if self._session_id is None:
            self._session_id = _new_id()
        return self._session_id

    @property
    def trace_id(self) -> str:
        """Ties together the tool calls of one request, for tracing (random unless given)."""
        if self._trace_id is None:
            self._trace_id = _new_id()
        return self._trace_id

    @property
    def cancellation(self) -> CancellationToken:
        """Cancelled when the caller gives up on the call (timeout, cancelled loop);
        a sync tool polls it, an async one can ``await ctx.cancellation.wait()``."""
        if self._cancellation is None:
            self._cancellation = CancellationToken()
        return self._cancellation

    @property
    def metadata(self) -> dict[str, Any]:
        """Free-form values an application passes to its tools (shared, not copied)."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    @property
    def cancelled(self) -> bool:
        """Shorthand for ``self.cancellation.cancelled``."""
        return self._cancellation is not None and self._cancellation.cancelled

    def for_call(self, call_id: str | None) -> ToolContext:
        """A copy for one call: same session, trace and metadata, its own call id and a
        child cancellation token."""
        return ToolContext(
            self.session_id, self.trace_id, call_id, self.cancellation.child(), self.metadata
        )

    def __repr__(self) -> str:
        return (
            f"ToolContext(session_id={self.session_id!r}, trace_id={self.trace_id!r}, "
            f"call_id={self.call_id!r}, cancelled={self.cancelled})"
        )


class BaseTool(ABC):
    """The interface every tool implements, local or MCP.

    Subclasses may set ``name``, ``description``, ``parameters`` and
    ``required_permissions`` as plain class attributes, or as properties.

    Example:
        >>> class Now(BaseTool):
        ...     name = "now"
        ...     description = "The current UNIX time."
        ...     parameters = {"type": "object", "properties": {}}
        ...     required_permissions = ("read",)
        ...
        ...     async def execute(self, args, ctx):
        ...         import time
        ...         return time.time()
        >>> Now().required_permissions
        ('read',)
    """

    name: str
    """Unique name; the model calls the tool by it. Must match ``^[a-zA-Z0-9_-]{1,64}$``."""
    description: str = ""
    """What the tool does; the model reads it to decide when to call the tool."""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}  # noqa: RUF012
    """The JSON Schema of the arguments object."""
    required_permissions: Sequence[Permission | str] = ()
    """Permissions checked before each execution (built-in names or :class:`Permission`)."""

    tags: Sequence[str] = ()
    """Default tags a registry records when ``register()`` is given none."""
    category: str | None = None
    """Default category a registry records when ``register()`` is given none."""
    version: str | None = None
    """Default version a registry records when ``register()`` is given none."""
    strict: bool | None = None
    """Offer the tool in OpenAI's strict mode (True), never (False), or as the registry
    says (None, the default): see ``ToolRegistry(strict=...)``."""
    needs_approval: bool | Callable[[dict[str, Any], ToolContext], Any] = False
    """Whether a call waits for the app's approval before it runs: True, or a function
    (sync or async) of the arguments and context that decides per call (see
    :mod:`agcore_tools.approval`)."""

    @abstractmethod
    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Run the tool with JSON arguments and return a JSON-compatible result.

        The result may hold :class:`~agcore_tools.Image`, :class:`~agcore_tools.Audio`
        and :class:`~agcore_tools.File` values; the model receives them as such.

        Raise a :class:`~agcore_tools.ToolError` subclass for expected failures; any
        other exception is wrapped into a ``ToolExecutionError`` by the registry.
        """

    def definition(self) -> dict[str, Any]:
        """The Chat Completions tool param for this tool.

        Example:
            >>> class T(BaseTool):
            ...     name, description = "t", "A tool."
            ...     async def execute(self, args, ctx): return None
            >>> T().definition()["function"]["name"]
            't'
        """
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {getattr(self, 'name', '?')!r}>"
