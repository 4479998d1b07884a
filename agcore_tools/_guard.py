"""The state behind a tool's :class:`~agcore_tools.ToolPolicy`: its breaker, its place
in a rate bucket, the calls of its resource running now, and its cached results.

A registry gives each entry with a policy one :class:`Guard`, and ``_execute`` asks it
to admit a call (breaker, rate, concurrency, in that order), to answer it (from the
cache, or by running the tool) and to release it. An entry without a policy has no
guard, and its calls pay one ``is None`` test. The entry's guard is shared by every
view of the registry, so limits hold across all the loops that share it. The breaker's
state machine is ``_breaker``'s; the guard drives it and announces what it changes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

from ._aio import run_sync, with_timeout
from ._breaker import BreakerMachine, BreakerState, counts_as_failure
from ._clock import DEADLINE, now
from ._context import ToolContext, announce
from ._progress import ToolBreakerChanged
from ._slots import Slots
from ._text import args_digest, in_pieces, is_large
from .error import ToolConfigError, ToolError, ToolUnavailableError
from .policies import (
    CacheStore,
    MemoryCacheStore,
    MemoryRateStore,
    RateStore,
    ResultCache,
    ToolPolicy,
)

__all__ = ["GIVE_BACK_TIMEOUT", "RESERVE_TIMEOUT", "Guard", "cache_prefix"]

logger = logging.getLogger("agcore_tools.policies")


GIVE_BACK_TIMEOUT = 0.5
"""The most seconds a shared rate store may take to give back the turn of a call that
never started; past it, the turn stays spent (logged as a warning)."""

RESERVE_TIMEOUT = 5.0
"""The most seconds a shared rate store may take to answer a call's request for its turn
(one round trip; the wait for the turn itself is not part of it); past it, the call is
refused unrun, as when the store is down."""


class Guard:
    """The policy state of one registered tool (see the module docstring).

    Example:
        >>> import asyncio
        >>> from agcore_tools.policies import ToolPolicy, RateLimit
        >>> guard = Guard("lookup", None, ToolPolicy(rate=RateLimit(1, per=60, wait=False)), None)
        >>> asyncio.run(guard.admit(ToolContext(), None))
        >>> guard.release(ToolContext(), None)
        >>> asyncio.run(guard.admit(ToolContext(), None))
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolUnavailableError: tool 'lookup' is unavailable: over its rate limit of 1 call(s) per 60 s; try again in 60 s
    """

    __slots__ = (
        "_bucket",
        "_cache",
        "_rate_store",
        "breaker",
        "name",
        "policy",
        "slots",
        "version",
    )

    def __init__(
        self,
        name: str,
        version: str | None,
        policy: ToolPolicy,
        slots: Slots | None,
        *,
        rate_store: RateStore | None = None,
        cache_store: CacheStore | None = None,
        cache_scope: str = "",
    ) -> None:
        self.name = name
        self.version = version
        self.policy = policy
        self.slots = slots
        """The concurrency cap, shared with every tool of the same resource."""
        self.breaker = BreakerMachine(policy.breaker) if policy.breaker is not None else None
        rate = policy.rate
        # Named apart as the concurrency caps are: a tool and a resource of one name
        # are two buckets.
        self._bucket = f"resource:{policy.resource}" if policy.resource else f"tool:{name}"
        self._rate_store: RateStore | None = None
        if rate is not None:
            # `is None`, not `or`: a store may be empty, so false (it has a length).
            given = rate.store if rate.store is not None else rate_store
            self._rate_store = given if given is not None else MemoryRateStore()
        cache = policy.cache
        self._cache: tuple[ResultCache, CacheStore, str] | None = None
        if cache is not None:
            # A store the policy names holds the keys as they are (a fleet's processes
            # must agree on them); the default one, shared by the process's tools and
            # registries, under the scope of the tool's own policy or the registry.
            if cache.store is not None:
                store, cache_scope = cache.store, ""
            elif cache_store is not None:
                store = cache_store
            else:
                raise ToolConfigError(
                    f"tool '{name}' has a ResultCache and no store to keep it in", tool_name=name
                )
            self._cache = (cache, store, cache_scope)

    @property
    def rate_store(self) -> RateStore | None:
        """The store the rate bucket is in; None without a rate limit.

        Example:
            >>> Guard("t", None, ToolPolicy(concurrency=1), None).rate_store is None
            True
        """
        return self._rate_store

    def hidden(self) -> bool:
        """Whether the tool's breaker is open: it is not offered to the model."""
        breaker = self.breaker
        return breaker is not None and breaker.hidden(now())

    async def admit(self, ctx: ToolContext, deadline: float | None, args: Any = None) -> None:
        """Let a call start, or raise :class:`ToolUnavailableError`: breaker, then rate
        (waiting its turn until ``deadline``, on the library's clock), then concurrency.
        Once it returns, :meth:`release` must follow. A call stopped before it returns
        (cancelled, or out of time waiting for a slot) gives its rate turn back."""
        breaker = self.breaker
        if breaker is not None:
            breaker.admit(self.name, now(), ctx, ctx.call_id, args)
        turn = False
        try:
            if self._rate_store is not None:
                wait = await self._take_turn(deadline)
                turn = True
                if wait > 0.0:
                    await asyncio.sleep(wait)
            if self.slots is not None:
                await self.slots.take()
        except BaseException:
            # The breaker first: the give-back awaits, and may be cancelled in turn.
            if breaker is not None:
                breaker.record(None, now(), ctx)
            if turn:
                await self._give_back_turn()
            raise

    async def _take_turn(self, deadline: float | None) -> float:
        """Reserve the call's rate turn; the seconds to wait for it."""
        rate = self.policy.rate
        store = self._rate_store
        assert rate is not None and store is not None
        max_wait = (
            0.0 if not rate.wait else (float("inf") if deadline is None else deadline - now())
        )
        if isinstance(store, MemoryRateStore):
            wait = store.reserve_now(self._bucket, rate, max_wait)
        else:
            try:
                # Bounded on its own: a store that stopped answering (a stalled Redis)
                # would otherwise hold a call with no timeout for good.
                reserve = store.reserve(self._bucket, rate, max(max_wait, 0.0))
                wait = await with_timeout(reserve, RESERVE_TIMEOUT)
            except Exception as exc:
                # The tool never ran: the model is told so, and its breaker is not.
                why = (
                    f"no answer within {RESERVE_TIMEOUT:g} s"
                    if isinstance(exc, TimeoutError)
                    else _described(exc)
                )
                raise ToolUnavailableError(
                    self.name, f"its rate limit could not be checked: {why}"
                ) from exc
        if wait is None:
            retry = rate.interval if not rate.wait else None
            reason = f"over its rate limit of {rate.calls} call(s) per {rate.per:g} s"
            if rate.wait:
                reason += ", with no turn before its timeout"
            raise ToolUnavailableError(self.name, reason, retry_after=retry)
        return wait

    async def _give_back_turn(self) -> None:
        rate = self.policy.rate
        store = self._rate_store
        assert rate is not None and store is not None
        if isinstance(store, MemoryRateStore):
            store.give_back_now(self._bucket, rate)
            return
        # Optional for a store (see RateStore): one written without it keeps the turn.
        give_back = getattr(store, "give_back", None)
        if give_back is None:
            return
        # Bounded: this runs as the call is cancelled (a Ctrl-C, its timeout), which a
        # store that never answers held up for as long as it stalled.
        try:
            await with_timeout(give_back(self._bucket, rate), GIVE_BACK_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - the call's own outcome matters more
            why = (
                f"no answer within {GIVE_BACK_TIMEOUT:g} s"
                if isinstance(exc, TimeoutError)
                else _described(exc)
            )
            logger.warning(
                "tool %r: could not give back the rate turn of a call that never started: %s",
                self.name,
                why,
            )

    @property
    def caches(self) -> bool:
        """Whether the tool's policy has a :class:`~agcore_tools.ResultCache`."""
        return self._cache is not None

    async def answer(
        self,
        execute: Callable[[], Awaitable[Any]],
        args: dict[str, Any],
        *,
        fresh: bool = False,
        started: list[bool] | None = None,
    ) -> tuple[Any, bool]:
        """The call's output, from the cache or from ``execute``; and whether cached.
        A ``fresh`` call (one a person approved) runs, and the cache never sees it.
        ``started`` (a one-item list) is set true as ``execute`` is called: a call
        answered from the cache, or stopped while the cache was read, never started."""
        cached = self._cache
        if cached is None or fresh:
            _start(started)
            return await execute(), False
        import json  # loaded by the first cached call: `import agcore_tools` skips it

        cache, store, scope = cached
        key = self.cache_key(args)
        if key is None:
            _start(started)
            return await execute(), False
        key = scope + key
        # A cache only saves work: a store that fails (down, full, read-only) or is slow
        # to answer leaves the call uncached, never failed, and leaves the tool the time
        # to run. After a failed read the write is not tried: it would most likely fail
        # too, after as long a wait.
        bound = _store_bound(cache, store)
        try:
            text = await with_timeout(store.get(key), bound)
        except Exception as exc:  # noqa: BLE001 - see above
            self._cache_failed("read; the call runs uncached", exc, bound)
            _start(started)
            return await execute(), False
        if text is not None:
            try:
                answer = json.loads(text)
            except (TypeError, ValueError, RecursionError) as exc:
                # Not what the cache writes (another app's value under the key, nested
                # too deep to decode, a store that mangles it): a store that cannot be
                # read, which fails no call. The tool's result is written over it.
                self._cache_failed("read; the call runs uncached", exc, None)
            else:
                logger.debug("tool %r answered from its cache", self.name)
                return answer, True
        _start(started)
        output = await execute()

        def dumps(value: Any) -> str:
            return json.dumps(value, ensure_ascii=False, allow_nan=False)

        def dumps_in_pieces() -> str:
            return in_pieces(output, dumps, ", ")

        try:
            if is_large(output):
                # The same text, written in a worker thread a run of items at a time: in
                # one go, megabytes of rows would hold up the event loop (json holds the
                # GIL while it writes, in any thread).
                text = await run_sync(dumps_in_pieces)
            else:
                text = dumps(output)
        except (TypeError, ValueError):
            logger.debug("tool %r: a result that is not JSON is not cached", self.name)
            return output, False
        bound = _store_bound(cache, store)  # of the time left now
        try:
            await with_timeout(store.set(key, text, cache.ttl), bound)
        except Exception as exc:  # noqa: BLE001 - the tool succeeded: so does its call
            self._cache_failed("written; the result is returned uncached", exc, bound)
        return output, False

    def _cache_failed(self, what: str, exc: BaseException, bound: float | None) -> None:
        if bound is not None and isinstance(exc, TimeoutError):
            why = f"no answer within {bound:.3g} s"
        else:
            why = _described(exc)
        logger.warning("tool %r: its result cache could not be %s: %s", self.name, what, why)

    def cache_key(self, args: dict[str, Any]) -> str | None:
        """The tool's name, version and canonical arguments, as one key; None for
        arguments that are not JSON.

        Example:
            >>> from agcore_tools.policies import MemoryCacheStore
            >>> guard = Guard("t", "2", ToolPolicy(cache=ResultCache(60)), None,
            ...               cache_store=MemoryCacheStore())
            >>> guard.cache_key({"b": 1, "a": 2}) == guard.cache_key({"a": 2, "b": 1})
            True
        """
        import json  # see answer()

        try:
            canonical = json.dumps(
                args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            )
        except (TypeError, ValueError):
            return None
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        return f"{cache_prefix(self.name)}{self.version or ''}:{digest}"

    def release(
        self,
        ctx: ToolContext,
        error: BaseException | None,
        *,
        ended: bool = True,
        thread: Future[Any] | None = None,
        paused: bool = False,
        args: Any = None,
    ) -> None:
        """End an admitted call: free its slot, and tell the breaker how it went
        (``ended=False`` for a call cancelled before it could end; ``paused`` for one
        that returned a :class:`~agcore_tools.pending.CallPaused`, whose resume decides).
        A ``thread`` the call left running (a sync tool past its timeout) keeps the slot
        until it ends."""
        slots = self.slots
        if slots is not None:
            if thread is None:
                slots.give_back()
            else:
                thread.add_done_callback(lambda _: slots.give_back())
        breaker = self.breaker
        if breaker is None:
            return
        failed: bool | None = None  # no outcome: it says nothing of whether the tool works
        if ended:
            if error is None:
                failed = False
            elif counts_as_failure(error):
                failed = True
            # Else bad arguments or a refusal: no outcome. A half-open breaker's probe
            # refused so closed it, as if the tool worked again.
        call_id = ctx.call_id
        if paused:
            # Its task runs on: neither a success nor a failure yet. Without a call id
            # its resume cannot be known: it decides nothing, as a call cancelled.
            ticket = None if call_id is None else (call_id, args_digest(args))
            changed = breaker.record(None, now(), ctx, paused=ticket)
        else:
            changed = breaker.record(failed, now(), ctx)
        if changed is not None:
            self._announce(ctx, changed)

    def failed_after(self, ctx: ToolContext) -> None:
        """Tell the breaker a call that was released as not ended failed after all (it
        timed out)."""
        breaker = self.breaker
        if breaker is None:
            return
        changed = breaker.record(True, now(), ctx)
        if changed is not None:
            self._announce(ctx, changed)

    def _announce(self, ctx: ToolContext, state: BreakerState) -> None:
        breaker = self.breaker
        assert breaker is not None
        config = breaker.config
        if state == "open":
            logger.warning(
                "tool %r: circuit breaker open for %g s (%d failure(s) within %g s, or a "
                "failed probe); it is left out of the definitions until then",
                self.name,
                config.cool_down,
                config.failures,
                config.window,
            )
        else:
            logger.info("tool %r: circuit breaker closed; the probe call succeeded", self.name)
        if state == "open":
            event = ToolBreakerChanged(self.name, ctx.call_id, "open", config.cool_down)
        else:
            event = ToolBreakerChanged(self.name, ctx.call_id, "closed")
        announce(ctx, event)


def cache_prefix(name: str) -> str:
    """The start of every cache key of tool ``name`` (a name holds no colon, so no
    other tool's keys start so).

    Example:
        >>> cache_prefix("lookup")
        'agcore:result:lookup:'
    """
    return f"agcore:result:{name}:"


def _start(started: list[bool] | None) -> None:
    if started is not None:
        started[0] = True


def _store_bound(cache: ResultCache, store: CacheStore) -> float | None:
    """The seconds one read or write of a cache's ``store`` may take: its
    ``store_timeout``, and at most half the time left to the call; None for the
    in-process store, which never waits."""
    if isinstance(store, MemoryCacheStore):
        return None
    bound = cache.store_timeout
    limit = DEADLINE.get()
    if limit is not None:
        bound = min(bound, max((limit[0] - now()) / 2, 0.0))
    return bound


def _described(exc: BaseException) -> str:
    # A library error's text is its own (a RedisStore's has no password); another
    # store's exception might quote a cached value or an argument: its class only.
    return str(exc) if isinstance(exc, ToolError) else type(exc).__name__
