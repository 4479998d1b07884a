"""What a tool execution knows about its surroundings: :class:`ToolContext`.

Below the JSON-Schema layer, which recognises a function's context parameter by this
class, and below the tool model, whose ``execute`` receives one.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import warnings
from typing import Any, overload

from typing_extensions import deprecated

from ._cancel import CancellationToken
from ._keywords import unknown_keyword
from ._progress import (
    ToolEvent,
    ToolEventCallback,
    ToolInbox,
    ToolPartialResult,
    ToolProgress,
    _Emitter,
    check_listener,
)
from .error import _OptionTypeError

__all__ = ["ToolContext"]


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


class ToolContext:
    """What a tool execution knows about its surroundings.

    Every argument is optional and given by keyword (positional arguments are
    deprecated), so ``ToolContext()`` is a fresh context; its ids, token,
    metadata and shared state are made on first use, which keeps a context that no tool
    reads nearly free.

    When the caller gives up on a call (its timeout, a cancelled loop), the call's
    token is cancelled. An async tool is cancelled with it; a sync tool's thread cannot
    be stopped from outside and runs on, so a long sync tool should check
    :attr:`cancelled` now and then and return early once it is true (its result is
    thrown away). Such threads do not keep the process from exiting.

    A long tool reports how far it is with :meth:`report_progress`; the reports go to
    ``on_event`` and, in the streaming loop, into the event stream, never to the model.
    :attr:`shared_state` is one mapping shared by every call of a run.

    Example:
        >>> ctx = ToolContext(metadata={"user": "ann"})
        >>> len(ctx.session_id), ctx.call_id, ctx.metadata["user"]
        (16, None, 'ann')
        >>> call = ctx.for_call("call_1", "lookup")
        >>> call.call_id, call.tool_name, call.session_id == ctx.session_id
        ('call_1', 'lookup', True)
        >>> call.trace_id == ctx.trace_id
        True
        >>> call.shared_state is ctx.shared_state
        True
        >>> call.cancellation.cancel()  # a call's token is a child of its parent's
        >>> call.cancelled, ctx.cancelled
        (True, False)
    """

    __slots__ = (
        "_cancellation",
        "_events",
        "_metadata",
        "_run_id",
        "_session_id",
        "_shared",
        "_trace_id",
        "call_id",
        "parent_call_id",
        "tool_name",
    )

    @overload
    def __init__(
        self,
        *,
        session_id: str | None = None,
        trace_id: str | None = None,
        call_id: str | None = None,
        cancellation: CancellationToken | None = None,
        metadata: dict[str, Any] | None = None,
        on_event: ToolEventCallback | None = None,
        shared_state: dict[str, Any] | None = None,
        tool_name: str | None = None,
        run_id: str | None = None,
    ) -> None: ...

    @overload
    @deprecated(
        "positional arguments to ToolContext are deprecated; pass them by keyword",
        category=None,  # _positional() warns, naming the keywords
    )
    def __init__(
        self,
        *args: Any,
        session_id: str | None = None,
        trace_id: str | None = None,
        call_id: str | None = None,
        cancellation: CancellationToken | None = None,
        metadata: dict[str, Any] | None = None,
        on_event: ToolEventCallback | None = None,
        shared_state: dict[str, Any] | None = None,
        tool_name: str | None = None,
        run_id: str | None = None,
    ) -> None: ...

    def __init__(
        self,
        *args: Any,
        session_id: str | None = None,
        trace_id: str | None = None,
        call_id: str | None = None,
        cancellation: CancellationToken | None = None,
        metadata: dict[str, Any] | None = None,
        on_event: ToolEventCallback | None = None,
        shared_state: dict[str, Any] | None = None,
        tool_name: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> None:
        # **unknown, not a wrapper (checks_keywords): a context is made per tool call,
        # and the overloads above are all a type checker sees.
        if unknown:
            raise unknown_keyword("ToolContext()", next(iter(unknown)), _KEYWORDS)
        if args:
            session_id, trace_id, call_id, cancellation, metadata = _positional(
                args, session_id, trace_id, call_id, cancellation, metadata
            )
        self._session_id = session_id
        self._trace_id = trace_id
        self._run_id = run_id
        self.call_id = call_id
        """The model's tool call id, when the call came from a model."""
        self.parent_call_id: str | None = None
        """The call this call was made inside of (a code-mode program's ``run_python``
        call), which its progress reports name; None for a call the model made."""
        self.tool_name = tool_name
        """The name of the tool being called, when the registry runs it."""
        self._cancellation = cancellation
        self._metadata = metadata
        self._shared = shared_state
        if on_event is not None:
            check_listener(on_event)
        self._events = None if on_event is None else _Emitter(on_event, None, None).bound()

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
    def run_id(self) -> str:
        """Names the run the call belongs to, for :attr:`idempotency_key`: the one given
        (a Temporal workflow gives its workflow id), else the session id.

        Example:
            >>> ToolContext(session_id="s1").run_id, ToolContext(run_id="r1").run_id
            ('s1', 'r1')
        """
        return self._run_id if self._run_id is not None else self.session_id

    @property
    def idempotency_key(self) -> str | None:
        """A key that names this call and stays the same when it is retried: the run id
        and the model's call id, or None outside a model's call. A tool passes it to an
        API that deduplicates requests; MCP servers receive it in the request's
        ``_meta`` (``dev.agcore/idempotency-key``).

        The loop gives every call of a history its own id (a server's id repeated from
        an earlier turn is replaced), but it sees one history only: runs of separate
        histories need separate run ids, or their calls can share a key (see the tool
        policies guide, "Idempotency keys").

        Example:
            >>> ToolContext(run_id="r1").for_call("call_1", "pay").idempotency_key
            'r1:call_1'
            >>> ToolContext().idempotency_key is None
            True
        """
        call_id = self.call_id
        return None if call_id is None else f"{self.run_id}:{call_id}"

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
    def shared_state(self) -> dict[str, Any]:
        """A mapping every tool call of one run reads and writes (shared, not copied).

        Calls made through :meth:`for_call` share their parent's. Each
        ``LlmCycle.submit_*`` run starts a fresh one (unless ``shared_state=`` was
        given), and a run resumed with ``prompt=None`` keeps the one of the run it
        resumes. Calls of one turn run concurrently: use a key per call, or a lock.
        It lives in memory only, never in the history.

        Example:
            >>> ctx = ToolContext()
            >>> ctx.for_call("c1").shared_state["rows"] = 3
            >>> ctx.for_call("c2").shared_state["rows"]
            3
        """
        if self._shared is None:
            self._shared = {}
        return self._shared

    @property
    def listening(self) -> bool:
        """Whether reports go anywhere: to an ``on_event`` listener, or to a streaming
        run's :attr:`inbox`. A tool can skip work that only feeds reports when not.

        Example:
            >>> ToolContext().listening, ToolContext(on_event=print).listening
            (False, True)
        """
        return self._events is not None

    @property
    def inbox(self) -> ToolInbox | None:
        """The queue a streaming run's tool events go into (see :meth:`for_run`), or None.
        It holds up to 16 of a call's unread progress reports and as many of its
        unread preliminary results (dropping the oldest of a kind past that).

        Example:
            >>> ToolContext().inbox is None
            True
        """
        events = self._events
        return events.inbox if events is not None else None

    def for_run(
        self, shared_state: dict[str, Any] | None = None, *, inbox: bool = False
    ) -> ToolContext:
        """The context a loop run's tool calls derive theirs from.

        It keeps this context's session, trace, call id, metadata, cancellation token
        (the app cancels the run through it) and listener. Its shared state is the one
        this context was given, else ``shared_state``, else a fresh one. With
        ``inbox`` (call it on the event loop), every report also goes into a queue on
        the running loop, read through :attr:`inbox`.

        Example:
            >>> import asyncio
            >>> async def main() -> bool:
            ...     app = ToolContext(metadata={"user": "ann"})
            ...     run = app.for_run({"rows": 3}, inbox=True)
            ...     same = run.cancellation is app.cancellation and run.session_id == app.session_id
            ...     return same and run.shared_state["rows"] == 3 and run.inbox is not None
            >>> asyncio.run(main())
            True
        """
        run = ToolContext(
            session_id=self.session_id,
            trace_id=self.trace_id,
            call_id=self.call_id,
            cancellation=self.cancellation,
            metadata=self.metadata,
            shared_state=self._shared if self._shared is not None else shared_state,
            tool_name=self.tool_name,
            run_id=self._run_id,
        )
        run.parent_call_id = self.parent_call_id
        run._events = self._events
        if inbox:
            callback = self._events.callback if self._events is not None else None
            run._events = _Emitter(callback, ToolInbox(), asyncio.get_running_loop())
        return run

    @property
    def cancelled(self) -> bool:
        """Shorthand for ``self.cancellation.cancelled``."""
        return self._cancellation is not None and self._cancellation.cancelled

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell the caller how far the tool is: ``progress`` out of ``total`` (if known).

        Callable from an async tool and from a sync tool's worker thread. The report
        becomes a :class:`~agcore_tools.ToolProgress`, delivered on the event loop's
        thread to ``on_event`` and, in the streaming loop, as an event; it never
        reaches the model. A context no loop ever used (a sync tool called directly)
        calls ``on_event`` in the reporting thread. Without a listener, or once the
        call was given up on, it does nothing.

        Example:
            >>> import asyncio
            >>> seen = []
            >>> ctx = ToolContext(on_event=seen.append).for_call("c1", "index")
            >>> async def index(ctx: ToolContext) -> None:
            ...     for done in range(1, 3):
            ...         ctx.report_progress(done, 2, f"file {done}")
            >>> asyncio.run(index(ctx))
            >>> [(e.tool_name, e.progress, e.total, e.message) for e in seen]
            [('index', 1, 2, 'file 1'), ('index', 2, 2, 'file 2')]
        """
        events = self._events
        if events is not None:
            event = ToolProgress(
                self.tool_name, self.call_id, progress, total, message, self.parent_call_id
            )
            events.emit(event, self._cancellation)

    def report_partial(self, value: Any) -> None:
        """Report a preliminary result: a :class:`~agcore_tools.ToolPartialResult`,
        delivered as :meth:`report_progress` delivers progress. A generator tool
        reports each value it yields this way.

        Example:
            >>> import asyncio
            >>> seen = []
            >>> ctx = ToolContext(on_event=seen.append).for_call("c1", "search")
            >>> async def search(ctx: ToolContext) -> None:
            ...     ctx.report_partial(["first hit"])
            >>> asyncio.run(search(ctx))
            >>> [(e.tool_name, e.value) for e in seen]
            [('search', ['first hit'])]
        """
        events = self._events
        if events is not None:
            partial = ToolPartialResult(self.tool_name, self.call_id, value, self.parent_call_id)
            events.emit(partial, self._cancellation)

    def report(self, event: ToolEvent) -> None:
        """Deliver one of the library's tool events (progress, a partial result, a
        breaker change) as :meth:`report_progress` delivers progress.

        Example:
            >>> import asyncio
            >>> seen = []
            >>> async def main() -> None:
            ...     ToolContext(on_event=seen.append).report(ToolProgress("t", None, 1))
            >>> asyncio.run(main())
            >>> [e.progress for e in seen]
            [1]
        """
        events = self._events
        if events is not None:
            events.emit(event, self._cancellation)

    def bind_loop(self) -> None:
        """Tie the context's reports to the running event loop; call it on the loop
        before a worker thread gets the context, so the thread's reports know which
        loop to hop onto (a context made outside any loop does not know).

        Example:
            >>> import asyncio
            >>> async def main() -> None:
            ...     ToolContext(on_event=print).bind_loop()
            >>> asyncio.run(main())
        """
        if self._events is not None:
            self._events = self._events.bound()

    def for_call(self, call_id: str | None, tool_name: str | None = None) -> ToolContext:
        """A copy for one call: same session, trace, metadata, shared state and event
        listener, its own call id (and tool name) and a child cancellation token."""
        # Filled slot by slot: one call of this per tool call, on the hot path.
        ctx = _blank_context()
        ctx._session_id = self.session_id
        ctx._trace_id = self.trace_id
        ctx._run_id = self._run_id
        ctx.call_id = call_id
        # A call made inside another (a program's, in run_python) names it; the same
        # call seen again (the registry naming its tool) keeps its own parent.
        ctx.parent_call_id = self.parent_call_id if call_id == self.call_id else self.call_id
        ctx.tool_name = tool_name if tool_name is not None else self.tool_name
        ctx._cancellation = self.cancellation.child()
        ctx._metadata = self.metadata
        ctx._shared = self.shared_state
        events = self._events
        # A worker thread's reports hop onto this loop; the call's end silences them.
        ctx._events = events.for_call() if events is not None else None
        return ctx

    def __repr__(self) -> str:
        return (
            f"ToolContext(session_id={self.session_id!r}, trace_id={self.trace_id!r}, "
            f"call_id={self.call_id!r}, cancelled={self.cancelled})"
        )


_POSITIONAL = ("session_id", "trace_id", "call_id", "cancellation", "metadata")
_KEYWORDS = tuple(inspect.signature(ToolContext).parameters)[1:-1]  # not *args, **unknown


def _positional(args: tuple[Any, ...], *given: Any) -> list[Any]:
    # The deprecated positional form of ToolContext(...): the first five parameters.
    if len(args) > len(_POSITIONAL):
        raise _OptionTypeError(
            f"ToolContext() takes at most {len(_POSITIONAL)} positional arguments "
            f"({len(args)} given); pass them by keyword"
        )
    values = list(given)
    for position, value in enumerate(args):
        if values[position] is not None:
            raise _OptionTypeError(
                f"ToolContext() got multiple values for '{_POSITIONAL[position]}'"
            )
        values[position] = value
    named = ", ".join(f"{name}=..." for name in _POSITIONAL[: len(args)])
    warnings.warn(
        f"positional arguments to ToolContext are deprecated; pass them by keyword: "
        f"ToolContext({named})",
        DeprecationWarning,
        stacklevel=3,
    )
    return values


def _blank_context() -> ToolContext:
    return ToolContext.__new__(ToolContext)


def end_reports(ctx: ToolContext) -> None:
    """Drop what ``ctx``'s call (and any call made from it) reports from now on: the
    call has ended, and nothing it reports may follow its end."""
    if ctx._events is not None:
        ctx._events.end()


def announce(ctx: ToolContext, event: ToolEvent) -> None:
    """Deliver ``event``, news of ``ctx``'s tool rather than of its call (a breaker
    that opened), even when the call was cancelled: a call cut off by its timeout is
    what opens a breaker most often, and its cancelled token dropped the news."""
    if ctx._events is not None:
        ctx._events.emit(event, None)
