"""What a tool may do and how often: concurrency limits, rate limits, circuit breakers
and cached results, declared per tool or set by a registry for a group of tools.

A tool that fronts a rate-limited API, a single-writer database or a flaky service
needs more than a timeout. A :class:`ToolPolicy` says how many of its calls may run at
once (alone, or with every tool sharing its ``resource``), how many may start per
period (:class:`RateLimit`), when to stop offering it after failures
(:class:`Breaker`), and whether a repeat of the same call may be answered from a cache
(:class:`ResultCache`). The registry applies them to every call, after the permission
check and the approval, in this fixed order: breaker, rate, concurrency, cache,
execution.

The records here are plain values. The state they govern (the open breaker, the
bucket, the running calls, the cached results) lives with the tool for the parts of
its own policy, so every registry that holds the tool shares it (a tool passed on its
own to each run, in a fresh registry, too), and with the registry for the parts a
group rule of its sets. A rate bucket or a result cache
whose state a fleet must share plugs in through :class:`RateStore` and
:class:`CacheStore`; the in-process defaults, :class:`MemoryRateStore` and
:class:`MemoryCacheStore`, need no server (:mod:`agcore_tools.redis` ships a shared
one).

Example:
    >>> import asyncio
    >>> from agcore_tools import ToolRegistry, tool
    >>> registry = ToolRegistry()
    >>> @registry.tool(policy=ToolPolicy(concurrency=2, rate=RateLimit(10, per=1.0)))
    ... def lookup(order_id: str) -> str:
    ...     '''Look an order up.'''
    ...     return f"order {order_id}: shipped"
    >>> asyncio.run(registry.invoke("lookup", {"order_id": "A1"})).output
    'order A1: shipped'
"""

from __future__ import annotations

import math
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

from ._aio import positive_number
from ._clock import now
from ._keywords import checks_init_keywords
from .error import ToolConfigError

__all__ = [
    "Breaker",
    "CacheStore",
    "MemoryCacheStore",
    "MemoryRateStore",
    "RateLimit",
    "RateStore",
    "ResultCache",
    "ToolPolicy",
]


@runtime_checkable
class RateStore(Protocol):
    """Where the token buckets of rate limits live: in this process by default, or in a
    server a fleet shares (see :mod:`agcore_tools.redis`).

    A store may also define ``async def give_back(self, key: str, limit: RateLimit) ->
    None``, which returns one turn taken by :meth:`reserve` to ``key``'s bucket. It is
    optional (not part of this protocol, so stores written without it still are one):
    the registry calls it, when the store has it, for a call that took a turn and then
    never started (cancelled while it waited for its turn, or for a concurrency slot),
    and waits at most half a second for it. Without it, or past that wait, that turn
    stays spent. Both stores of the library define it.

    Example:
        >>> isinstance(MemoryRateStore(), RateStore)
        True
    """

    async def reserve(self, key: str, limit: RateLimit, max_wait: float) -> float | None:
        """Take one call's turn in ``key``'s bucket: the seconds the call must wait
        before it starts (0.0 for at once), or None, with nothing taken, when it would
        have to wait longer than ``max_wait`` seconds."""
        ...


@runtime_checkable
class CacheStore(Protocol):
    """Where cached results live, as JSON text under a key: in this process by
    default, or in a server a fleet shares (see :mod:`agcore_tools.redis`).

    Example:
        >>> isinstance(MemoryCacheStore(), CacheStore)
        True
    """

    async def get(self, key: str) -> str | None:
        """The text stored under ``key``, or None when there is none or it expired."""
        ...

    async def set(self, key: str, value: str, ttl: float) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds."""
        ...


@checks_init_keywords
@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``calls`` calls per ``per`` seconds, as a token bucket of ``burst``
    tokens (``calls`` unless given) refilled evenly.

    A call over the limit waits its turn, within its timeout; with ``wait=False`` it is
    answered at once with a :class:`~agcore_tools.ToolUnavailableError` the model can
    act on (it says when to try again). ``store`` shares the bucket across processes
    (the default keeps it in this one).

    Example:
        >>> RateLimit(5, per=60).interval, RateLimit(5, per=60, burst=2).capacity
        (12.0, 2)
        >>> RateLimit(0)
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: RateLimit(calls=0): calls must be a positive integer
    """

    calls: int
    """Calls allowed per period."""
    per: float = 1.0
    """The period, in seconds."""
    burst: int | None = None
    """How many calls may start back to back after a quiet spell (``calls`` if None)."""
    wait: bool = True
    """Whether a call over the limit waits its turn (True) or is refused at once."""
    store: RateStore | None = None
    """Where the bucket lives: a :class:`RateStore`, such as
    ``agcore_tools.redis.RedisStore(url)`` (not the URL itself), or None for this
    process."""

    def __post_init__(self) -> None:
        if not isinstance(self.calls, int) or isinstance(self.calls, bool) or self.calls < 1:
            raise ToolConfigError(
                f"RateLimit(calls={self.calls!r}): calls must be a positive integer"
            )
        if not _positive(self.per):
            raise ToolConfigError(f"RateLimit(per={self.per!r}): per must be a positive number")
        burst = self.burst
        if burst is not None and (
            not isinstance(burst, int) or isinstance(burst, bool) or burst < 1
        ):
            raise ToolConfigError(
                f"RateLimit(burst={self.burst!r}): burst must be a positive integer or None"
            )
        if not isinstance(self.wait, bool):
            # wait="no" is truthy: the limit would wait, the opposite of what was meant.
            raise ToolConfigError(f"RateLimit(wait={self.wait!r}): wait must be True or False")
        _check_store("RateLimit", self.store, RateStore)

    @property
    def interval(self) -> float:
        """Seconds between two calls at the steady rate."""
        return self.per / self.calls

    @property
    def capacity(self) -> int:
        """The bucket's size: ``burst``, else ``calls``."""
        return self.burst if self.burst is not None else self.calls


@checks_init_keywords
@dataclass(frozen=True, slots=True)
class Breaker:
    """A circuit breaker: after ``failures`` failed calls within ``window`` seconds the
    tool is *open* for ``cool_down`` seconds.

    While open, the tool is left out of the definitions a request offers, and a call
    to it is answered without running. After the cool-down one probe call is let
    through (*half-open*): its success closes the breaker, its failure opens it again
    (a probe with bad arguments, or refused, decides nothing: the next call probes). A
    call that pauses (an MCP task still running) decides nothing either; its resume,
    known by its call id and arguments, is let through whatever the state, and a
    probe's decides.
    A failure is a call that ran and failed (it raised, timed out, or its server
    failed), or an MCP call its server could not take (down, or refusing the client's
    credentials); bad arguments and other refusals do not count. Changes are logged
    and reported as :class:`~agcore_tools.ToolBreakerChanged` events.

    Example:
        >>> Breaker(failures=3, window=30.0, cool_down=10.0).failures
        3
    """

    failures: int = 5
    """Failures within the window that open the breaker."""
    window: float = 60.0
    """Seconds over which failures are counted."""
    cool_down: float = 30.0
    """Seconds the breaker stays open before it lets a probe through."""

    def __post_init__(self) -> None:
        if (
            not isinstance(self.failures, int)
            or isinstance(self.failures, bool)
            or self.failures < 1
        ):
            raise ToolConfigError(
                f"Breaker(failures={self.failures!r}): failures must be a positive integer"
            )
        for name in ("window", "cool_down"):
            value = getattr(self, name)
            if not _positive(value):
                raise ToolConfigError(f"Breaker({name}={value!r}): must be a positive number")


def _check_store(owner: str, store: object, kind: type) -> None:
    # Checked here: a store of the wrong kind failed every rate-limited call with a bare
    # AttributeError, and left a cache off with a warning per call.
    if store is None or isinstance(store, kind):
        return
    # Never the value: a Redis URL may hold a password.
    url = ": wrap the URL, store=RedisStore(url)" if isinstance(store, str) else ""
    raise ToolConfigError(
        f"{owner}(store=...): store must be a {kind.__name__}, such as "
        "agcore_tools.redis.RedisStore(url), or None for this process; got "
        f"{type(store).__name__}{url}"
    )


# Ten years: far below what Redis accepts as an expiry (PX up to about 9e15 s from now).
_MAX_TTL = 10 * 365 * 86400


@checks_init_keywords
@dataclass(frozen=True, slots=True)
class ResultCache:
    """Answer a repeat of a successful call from a cache for ``ttl`` seconds.

    Only for idempotent tools: the same arguments must mean the same result. The key is
    the tool's name, its version and its arguments as canonical JSON; failures are
    never stored, nor results that are not JSON (images, files), and a registry refuses
    it on a tool that needs approval. A call ``PermissionConfig.ask`` puts to a person
    runs once approved: the cache neither answers nor stores it. ``store`` shares the
    cache across processes; the default keeps it in this one, in a
    :class:`MemoryCacheStore` every tool's cache of the process shares, so its bounds
    hold for all of them together (each tool's results kept apart). ``ttl`` is at most
    ten years.

    A cache only saves work: when its store cannot be read, the call runs uncached;
    when it cannot be written, the call returns its result all the same. Either is
    logged as a warning (``agcore_tools.policies``), never reported as the call failing.
    A store that is slow to answer counts as one that cannot be: each read and each
    write waits at most ``store_timeout`` seconds, and at most half the time the call
    has left (its timeout covers the cache's time too), so a hung store leaves the tool
    time to run.

    Example:
        >>> ResultCache(ttl=300).ttl, ResultCache(ttl=300).store_timeout
        (300, 0.5)
    """

    ttl: float
    """Seconds a result stays valid."""
    store: CacheStore | None = None
    """Where results live: a :class:`CacheStore`, such as
    ``agcore_tools.redis.RedisStore(url)`` (not the URL itself), or None for this
    process."""
    store_timeout: float = 0.5
    """The most seconds one read or write of a shared ``store`` may take; past it, a
    read is a miss and a write is skipped (each logged as a warning)."""

    def __post_init__(self) -> None:
        if not _positive(self.ttl) or self.ttl > _MAX_TTL:
            raise ToolConfigError(
                f"ResultCache(ttl={self.ttl!r}): ttl must be a positive number of seconds, "
                f"at most {_MAX_TTL} (ten years)"
            )
        if not _positive(self.store_timeout):
            raise ToolConfigError(
                f"ResultCache(store_timeout={self.store_timeout!r}): store_timeout must be a "
                "positive number of seconds"
            )
        _check_store("ResultCache", self.store, CacheStore)


@checks_init_keywords
@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How a tool's calls are governed. Every part is optional; an empty policy
    changes nothing.

    ``concurrency`` caps the calls running at once in this process: those of this tool,
    or, with ``resource``, those of every tool naming the same resource (a database
    several tools write to). Calls over the cap wait their turn, and the wait counts
    against their timeout. ``resource`` also names the rate limit's bucket, so tools
    sharing an API quota can share one.

    Example:
        >>> db = ToolPolicy(concurrency=1, resource="orders-db")
        >>> strict = db.merged(ToolPolicy(breaker=Breaker()))
        >>> strict.concurrency, strict.resource, strict.breaker.failures
        (1, 'orders-db', 5)
    """

    concurrency: int | None = None
    """Calls that may run at once (None for no cap)."""
    resource: str | None = None
    """The name several tools share a concurrency cap and a rate bucket under."""
    rate: RateLimit | None = None
    """Calls that may start per period."""
    breaker: Breaker | None = None
    """When to stop offering and calling a failing tool."""
    cache: ResultCache | None = None
    """Answer repeats of the same call from a cache."""

    def __post_init__(self) -> None:
        limit = self.concurrency
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 1
        ):
            raise ToolConfigError(
                f"ToolPolicy(concurrency={limit!r}): concurrency must be a positive integer"
            )
        if self.resource is not None and (not isinstance(self.resource, str) or not self.resource):
            raise ToolConfigError(
                f"ToolPolicy(resource={self.resource!r}): resource must be a non-empty string"
            )
        for name, kind in (("rate", RateLimit), ("breaker", Breaker), ("cache", ResultCache)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                # ToolPolicy(breaker=3) would fail at the first call, outside any error.
                raise ToolConfigError(
                    f"ToolPolicy({name}={value!r}): {name} takes a {kind.__name__}, "
                    f"such as {kind.__name__}(...)"
                )

    def merged(self, other: ToolPolicy) -> ToolPolicy:
        """This policy with every part ``other`` sets taken from ``other``.

        Example:
            >>> ToolPolicy(concurrency=4).merged(ToolPolicy(concurrency=1)).concurrency
            1
        """
        parts = {f.name: getattr(self, f.name) for f in fields(self)}
        parts.update(
            {
                f.name: getattr(other, f.name)
                for f in fields(other)
                if getattr(other, f.name) is not None
            }
        )
        return ToolPolicy(**parts)

    @property
    def empty(self) -> bool:
        """Whether the policy sets nothing.

        Example:
            >>> ToolPolicy().empty, ToolPolicy(concurrency=1).empty
            (True, False)
        """
        return all(getattr(self, f.name) is None for f in fields(self))


class MemoryRateStore:
    """Token buckets in this process (the default :class:`RateStore`), timed by the
    library's clock, so a Temporal workflow stays deterministic.

    Each bucket is the theoretical arrival time of its next call (the generic cell rate
    algorithm): one number per key, and a reservation is a few arithmetic steps, under
    a lock, since a registry is shared by every thread and loop that uses it. The
    numbers are whole nanoseconds: in floating point, the wait of a call on a full
    bucket, ``(now + interval) - capacity * interval - now``, comes out a hair above
    zero at many clock readings, and ``wait=False`` then refused a call within the
    limit.

    Example:
        >>> import asyncio
        >>> store, limit = MemoryRateStore(), RateLimit(2, per=1.0)
        >>> [asyncio.run(store.reserve("k", limit, 0.0)) for _ in range(3)]
        [0.0, 0.0, None]
    """

    __slots__ = ("_lock", "_next", "_prune_at")

    def __init__(self) -> None:
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()
        self._prune_at = _PRUNE_FROM

    async def reserve(self, key: str, limit: RateLimit, max_wait: float) -> float | None:
        """See :meth:`RateStore.reserve`."""
        return self.reserve_now(key, limit, max_wait)

    def reserve_now(self, key: str, limit: RateLimit, max_wait: float) -> float | None:
        """:meth:`reserve` without the coroutine: a registry's uncontended path."""
        with self._lock:
            moment = _nanoseconds(now())
            interval = _nanoseconds(limit.interval)
            arrival = max(self._next.get(key, moment), moment) + interval
            wait = arrival - limit.capacity * interval - moment
            if wait <= 0:
                self._next[key] = arrival
                self._prune(moment)
                return 0.0
            seconds = wait / _NS
            if seconds > max_wait:
                return None
            self._next[key] = arrival
            return seconds

    def _prune(self, moment: int) -> None:
        # A bucket whose next arrival has passed is full, as a bucket never used is:
        # such buckets go once the buckets have doubled since the last time (O(1) a
        # call), so the keys of tools that came and went leave nothing.
        if len(self._next) < self._prune_at:
            return
        self._next = {key: arrival for key, arrival in self._next.items() if arrival > moment}
        self._prune_at = max(2 * len(self._next), _PRUNE_FROM)

    async def give_back(self, key: str, limit: RateLimit) -> None:
        """Return one reserved turn to ``key``'s bucket, for a call that never started
        (see :class:`RateStore`)."""
        self.give_back_now(key, limit)

    def give_back_now(self, key: str, limit: RateLimit) -> None:
        """:meth:`give_back` without the coroutine.

        The bucket's next arrival moves back one interval, never before now: a turn
        given back cannot make the bucket fuller than full.

        Example:
            >>> store, limit = MemoryRateStore(), RateLimit(1, per=60.0)
            >>> store.reserve_now("k", limit, 0.0), store.reserve_now("k", limit, 0.0)
            (0.0, None)
            >>> store.give_back_now("k", limit)
            >>> store.reserve_now("k", limit, 0.0)
            0.0
        """
        with self._lock:
            arrival = self._next.get(key)
            if arrival is not None:
                self._next[key] = max(arrival - _nanoseconds(limit.interval), _nanoseconds(now()))

    def __len__(self) -> int:
        """The buckets held: those used since the last look for full ones, which go
        once the buckets have doubled.

        Example:
            >>> store = MemoryRateStore()
            >>> store.reserve_now("k", RateLimit(1, per=60.0), 0.0), len(store)
            (0.0, 1)
        """
        return len(self._next)


class MemoryCacheStore:
    """Results in this process (the default :class:`CacheStore`): at most
    ``max_entries``, taking at most ``max_bytes`` of memory, the least recently used
    dropped first, each expiring after its TTL by the library's clock. Expired results
    are dropped as the store is used (a result stored or read), and a result larger
    than ``max_bytes`` is not kept. Safe to share across threads and loops (under a
    lock). The default store, for every :class:`ResultCache` that names none, is one
    for the whole process, with the default bounds: they hold for all its tools
    together. A store given to a ``ResultCache`` is bounded on its own.

    Example:
        >>> import asyncio
        >>> store = MemoryCacheStore()
        >>> asyncio.run(store.set("k", '"v"', ttl=60.0))
        >>> asyncio.run(store.get("k")), asyncio.run(store.get("other"))
        ('"v"', None)
    """

    __slots__ = ("_bytes", "_items", "_lock", "_stored", "max_bytes", "max_entries")

    def __init__(self, max_entries: int = 1024, max_bytes: int = 64 * 1024 * 1024) -> None:
        for name, value in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ToolConfigError(
                    f"MemoryCacheStore({name}={value!r}): must be a positive integer"
                )
        self.max_entries = max_entries
        """The most results kept."""
        self.max_bytes = max_bytes
        """The most memory the results' text may take, in bytes (64 MiB by default)."""
        # Each result with its expiry and its size, least recently used first.
        self._items: OrderedDict[str, tuple[float, str, int]] = OrderedDict()
        self._bytes = 0
        self._stored = 0  # results stored since every expired one was last dropped
        self._lock = threading.Lock()

    async def get(self, key: str) -> str | None:
        """See :meth:`CacheStore.get`."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            moment = now()
            self._expire(moment, sweep=False)
            if item[0] <= moment:
                self._drop(key)
                return None
            self._items.move_to_end(key)
            return item[1]

    async def set(self, key: str, value: str, ttl: float) -> None:
        """See :meth:`CacheStore.set`."""
        size = sys.getsizeof(value)  # the text's own memory: nothing is serialised
        with self._lock:
            moment = now()
            self._drop(key)
            if size > self.max_bytes:
                return  # it would push every other result out, and still not fit
            self._items[key] = (moment + ttl, value, size)
            self._bytes += size
            self._expire(moment, sweep=True)
            while len(self._items) > self.max_entries or self._bytes > self.max_bytes:
                self._drop(next(iter(self._items)))

    def _expire(self, moment: float, *, sweep: bool) -> None:
        """Drop the results expired at ``moment`` at the front; with ``sweep`` (a result
        stored), all of them now and then, at O(1) a result stored."""
        items = self._items
        # A store's results mostly share one TTL (a tool's own, a group rule's), so
        # the least recently used expire first: those at the front.
        while items:
            first = next(iter(items))
            if items[first][0] > moment:
                break
            self._drop(first)
        # Those a read moved back, or stored with a shorter TTL behind a live one, go
        # in a sweep once as many results were stored as the store holds.
        if not sweep:
            return
        self._stored += 1
        if self._stored >= len(items):
            self._stored = 0
            for key in [key for key, item in items.items() if item[0] <= moment]:
                self._drop(key)

    def _drop(self, key: str) -> None:
        item = self._items.pop(key, None)
        if item is not None:
            self._bytes -= item[2]

    def forget(self, prefix: str) -> int:
        """Drop every result whose key starts with ``prefix``; return how many.

        Example:
            >>> import asyncio
            >>> store = MemoryCacheStore()
            >>> asyncio.run(store.set("lookup:1", '"a"', ttl=60.0))
            >>> asyncio.run(store.set("other:1", '"b"', ttl=60.0))
            >>> store.forget("lookup:"), len(store)
            (1, 1)
        """
        with self._lock:
            gone = [key for key in self._items if key.startswith(prefix)]
            for key in gone:
                self._drop(key)
            return len(gone)

    def __len__(self) -> int:
        return len(self._items)


_NS = 1_000_000_000
_PRUNE_FROM = 64  # buckets a MemoryRateStore holds before it first looks for full ones


def _nanoseconds(seconds: float) -> int:
    return round(seconds * _NS)


def _positive(value: object) -> bool:
    return positive_number(value) and math.isfinite(value)
