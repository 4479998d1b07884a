"""Rate limits and result caches a fleet shares, on a Redis server (the ``redis``
extra: ``pip install 'agcore-tools[redis]'``).

:class:`RedisStore` is both a :class:`~agcore_tools.policies.RateStore` and a
:class:`~agcore_tools.policies.CacheStore`, on redis-py's asyncio client. Give it to a
:class:`~agcore_tools.RateLimit` or a :class:`~agcore_tools.ResultCache` in every
process (web workers, Temporal workers), and they share one bucket and one cache:

- a rate bucket is one key, ``{prefix}rate:tool:<tool name>`` (or
  ``{prefix}rate:resource:<resource>`` for a policy's ``resource``), holding the
  theoretical arrival time of the next call (the generic cell rate algorithm of :class:`~agcore_tools.policies.MemoryRateStore`),
  reserved by one Lua script that reads the server's clock, so every process shares
  one clock and one reservation is atomic; the key expires once the bucket is full
  again;
- a cached result is one key, ``{prefix}cache:<key>``, written with ``SET ... PX`` (its
  TTL) and read with ``GET``.

The ``prefix`` is the namespace, and the only one: every app (and every tenant) sharing
a server needs a prefix of its own. Two apps on one prefix share their caches, so one
app's tool can be answered with another's cached result (its data), and their tools of
one name share a rate bucket. Left out, the prefix is ``"agcore:"``, and a store on a
server reached over the network logs a warning, once per server; pass
``prefix="agcore:"`` to keep that one knowingly.

A failure talking to Redis is a :class:`~agcore_tools.ToolError` naming what failed,
with redis-py's exception as its ``__cause__``; a URL's credentials never appear in a
message, a log line or the store's ``repr``: everything between ``scheme://`` and the
last ``@`` before the host is shown as ``***``, whatever it holds, and so are a
``password`` or ``username`` in the query (``?password=...``). A password holding
``/``, ``?``, ``#`` or ``@`` must be percent-encoded
(``urllib.parse.quote(password, safe='')``): unencoded, redis-py would read part of it
as the host, port, path or query, so a URL with a ``#``, or an ``@`` that may end a
password, after its host is refused with a :class:`~agcore_tools.ToolConfigError`, no
part of it shown. An ``@`` in a socket's path, or in a query's value after the database
number (``/0?password=p@ss``), is read as written. Creating a store does not connect:
the first call does.

Example:
    >>> from agcore_tools import RateLimit, ResultCache, ToolPolicy
    >>> store = RedisStore("redis://:s3cret@localhost:6379/0", prefix="shop:")
    >>> store
    RedisStore('redis://***@localhost:6379/0', prefix='shop:')
    >>> RedisStore("unix:///run/redis.sock?db=0&password=s3cret")
    RedisStore('unix:///run/redis.sock?db=0&password=***', prefix='agcore:')
    >>> RedisStore("redis://localhost:6379/0?password=s3@cret", prefix="shop:")
    RedisStore('redis://localhost:6379/0?password=***', prefix='shop:')
    >>> RedisStore("rediss://:Zq8v/Kp2+T1=@cache.example.net:6380/0")
    Traceback (most recent call last):
    ...
    agcore_tools.error.ToolConfigError: RedisStore('rediss://***@cache.example.net:6380/0'): the URL has an '@' or '#' after its host, where redis-py would read part of a password as the host, port, path or query; percent-encode the password (urllib.parse.quote(password, safe='')), and any other '@' or '#' as %40 or %23
    >>> policy = ToolPolicy(rate=RateLimit(20, per=1.0, store=store),
    ...                     cache=ResultCache(ttl=300, store=store))
    >>> store.rate_key("tool:lookup"), store.cache_key("agcore:result:lookup::ab12")
    ('shop:rate:tool:lookup', 'shop:cache:agcore:result:lookup::ab12')
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, unquote_plus

from typing_extensions import Self

from .error import ToolConfigError, ToolError
from .policies import RateLimit

if TYPE_CHECKING:
    from types import TracebackType

    import redis.asyncio

__all__ = ["RedisStore"]

logger = logging.getLogger("agcore_tools.policies")

_EXTRA = "pip install 'agcore-tools[redis]'"

# One GCRA reservation, on the server's clock (microseconds). KEYS[1] holds the bucket's
# theoretical arrival time (TAT); ARGV: the interval between calls, the bucket's size
# and the longest acceptable wait (-1 for no bound). Returns the wait before the call
# may start, or false (nil) with nothing taken when the wait is longer than allowed.
# The same steps as MemoryRateStore.reserve_now. Numbers cross as '%.17g' text: a Lua
# number in a reply would be cut to an integer. The key expires when the bucket is full
# again, the moment its TAT passes: an absent key means the same.
_RESERVE = """
if redis.replicate_commands then redis.replicate_commands() end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local interval = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
local stored = redis.call('GET', KEYS[1])
local tat = now
if stored then tat = math.max(tonumber(stored), now) end
local arrival = tat + interval
local wait = arrival - capacity * interval - now
if wait > 0 and max_wait >= 0 and wait > max_wait then return false end
local ttl = math.max(1, math.ceil((arrival - now) / 1000))
redis.call('SET', KEYS[1], string.format('%.17g', arrival), 'PX', ttl)
if wait < 0 then wait = 0 end
return string.format('%.17g', wait)
"""

# Gives one reserved turn back: the TAT moves back one interval (ARGV[1]), never before
# the server's now, as MemoryRateStore.give_back_now does. A TAT at now is a full
# bucket, the same as no key.
_GIVE_BACK = """
if redis.replicate_commands then redis.replicate_commands() end
local stored = redis.call('GET', KEYS[1])
if not stored then return 0 end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local tat = math.max(tonumber(stored) - tonumber(ARGV[1]), now)
local ttl = math.ceil((tat - now) / 1000)
if ttl < 1 then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%.17g', tat), 'PX', ttl)
end
return 1
"""


def _redis_asyncio() -> Any:
    """The ``redis.asyncio`` module, or :class:`ToolConfigError` naming the extra."""
    if importlib.util.find_spec("redis") is None:
        raise ToolConfigError(f"RedisStore needs the redis package (redis-py): {_EXTRA}")
    return importlib.import_module("redis.asyncio")


# Query parameters of a Redis URL that must not be shown: redis-py takes the password
# (and the username) from the query as well as from the userinfo, and passes any other
# parameter on as a connection option (ssl_password, the TLS key's).
_HIDDEN_PARAMS = ("password", "username")


def _hidden(name: str) -> bool:
    return name in _HIDDEN_PARAMS or name.endswith("password")


def _safe_query(query: str) -> tuple[str, list[str]]:
    """The query with its password (``password``, ``ssl_password``, ...) and username
    values replaced by ``***``, and the password values (as written; redis-py reads them
    decoded)."""
    kept: list[str] = []
    secrets: list[str] = []
    for piece in query.split("&"):
        name, equals, value = piece.partition("=")
        if equals and value and _hidden(unquote_plus(name)):
            if unquote_plus(name) != "username":
                secrets.append(value)
            piece = f"{name}=***"
        kept.append(piece)
    return "&".join(kept), secrets


# Where urllib (and so redis-py) ends a URL's authority: at the first '/', '?' or '#'.
_AUTHORITY_END = re.compile(r"[/?#]")

# A host as urllib reads it, with a port of digits (redis-py refuses any other port).
_HOST_PORT = re.compile(r"(\[[^\]]*\]|[^:\[\]]*)(:\d*)?")

_AMBIGUOUS = (
    "the URL has an '@' or '#' after its host, where redis-py would read part of a "
    "password as the host, port, path or query; percent-encode the password "
    "(urllib.parse.quote(password, safe='')), and any other '@' or '#' as %40 or %23"
)


def _problem(scheme: str, authority: str, after: str) -> str | None:
    """Why redis-py might read a URL otherwise than it was meant, or None.

    An unencoded '/' or '?' in a password ends the authority early, and the userinfo's
    '@' lands in the path or the query. So an '@' there is refused, but where no
    password is plausibly cut: in a socket URL with no host, and in a query's value
    after a host, a port of digits and a database number (a password would have to be
    digits, '/', digits, '?', a name and '=') or after an authority with no ':' (no
    password to cut).
    """
    if "#" in after:  # it cuts a password, in the userinfo or the query alike
        return _AMBIGUOUS
    if "@" not in after:
        return None
    if scheme.lower() == "unix":  # names no host: one here is the start of a password
        return _AMBIGUOUS if authority.rpartition("@")[2] else None
    path, _, query = after.partition("?")
    if "@" in path:
        return _AMBIGUOUS
    plain = re.fullmatch(r"/\d*", path) and _HOST_PORT.fullmatch(authority.rpartition("@")[2])
    if ":" in authority and not plain:
        return _AMBIGUOUS
    if any("@" in piece.partition("=")[0] for piece in query.split("&")):
        return _AMBIGUOUS
    return None


def _shown_tail(tail: str) -> str:
    """A URL's text after its userinfo, with its query's secrets and any fragment
    (the rest of a password a '#' cut) as ``***``."""
    tail, hash_mark, fragment = tail.partition("#")
    base, mark, query = tail.partition("?")
    return f"{base}{mark}{_safe_query(query)[0]}{hash_mark}{'***' if fragment else ''}"


def _shown_doubtful(rest: str) -> str:
    """A URL's text after ``scheme://`` when how to read it is in doubt (refused, or no
    scheme): ``***`` up to the last '@', unless that '@' may be a query value's (a
    ``name=`` follows a '?' before it), where nothing of it is shown."""
    before, at, tail = rest.rpartition("@")
    if at and "=" in before.partition("?")[2]:
        return "***"
    return f"{'***' if at else ''}{at}{_shown_tail(tail)}"


def _safe_url(url: str) -> tuple[str, tuple[str, ...], str | None]:
    """The URL as it may be shown, its secrets as written, and why it must be refused
    (None for a URL redis-py reads as meant).

    Shown, the userinfo (everything between ``scheme://`` and the last ``@`` before
    the host, whatever it holds) is ``***``, and so are the values of a query's
    password and username.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:  # redis-py refuses it for want of a scheme, which says why
        return _shown_doubtful(url), (), None
    ends = _AUTHORITY_END.search(rest)
    authority, after = (rest[: ends.start()], rest[ends.start() :]) if ends else (rest, "")
    problem = _problem(scheme, authority, after)
    if problem is not None:
        return f"{scheme}{sep}{_shown_doubtful(rest)}", (), problem
    secrets: list[str] = []
    userinfo, at, host = authority.rpartition("@")
    if at:
        if ":" in userinfo:  # a user name alone is no secret to scrub from redis-py's text
            secrets += [userinfo, userinfo.partition(":")[2]]
        authority = f"***@{host}"
    path, mark, query = after.partition("?")
    query, hidden = _safe_query(query)
    secrets += hidden
    shown = f"{scheme}{sep}{authority}{path}{mark}{query}"
    return shown, tuple(s for s in secrets if s), None


_DEFAULT_PREFIX = "agcore:"

# The servers (as shown) whose default-prefix warning was logged: once each.
_WARNED: set[str] = set()


def _on_socket(client: Any) -> bool:
    """Whether a client talks to its server over a unix socket: one host's own."""
    kwargs: dict[str, Any] = getattr(client.connection_pool, "connection_kwargs", {})
    return bool(kwargs.get("path"))


def _warn_shared(where: str) -> None:
    # Other apps on that server may leave the prefix out too: a warning, not an error,
    # since changing the default would orphan the keys stores already wrote.
    if where in _WARNED:
        return
    _WARNED.add(where)
    logger.warning(
        "RedisStore on %s uses the default key prefix %r: every app that leaves the prefix "
        "out shares its cached results and rate buckets on that server (one app's tool "
        "can be answered with another's cached data); give each app and tenant a prefix "
        "of its own, or pass prefix=%r to keep this one (logged once per server)",
        where,
        _DEFAULT_PREFIX,
        _DEFAULT_PREFIX,
    )


def _describe(client: Any) -> tuple[str, tuple[str, ...]]:
    """Where a client connects, without its password; and the password."""
    kwargs: dict[str, Any] = getattr(client.connection_pool, "connection_kwargs", {})
    password = kwargs.get("password")
    secrets = (password,) if isinstance(password, str) and password else ()
    db = kwargs.get("db", 0)
    if kwargs.get("path"):
        return f"unix://{kwargs['path']}?db={db}", secrets
    return f"redis://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{db}", secrets


class RedisStore:
    """A rate store and a result cache on a Redis server, shared by every process
    that uses the same server and ``prefix`` (see the module docstring).

    ``prefix`` is the namespace: give each app (and tenant) on a server its own, or
    their cached results answer each other's calls. Left out, it is ``"agcore:"``, and
    a store on a server reached over TCP (not a unix socket) logs a warning once per
    server.

    ``client`` is a ``redis.asyncio.Redis`` client, or a URL (``redis://``,
    ``rediss://`` or ``unix://``) the store makes its own client from; extra keyword
    arguments go to ``redis.asyncio.Redis.from_url``. Keys are ``{prefix}rate:{bucket}``
    (the bucket ``tool:<name>`` or ``resource:<resource>``) and ``{prefix}cache:{key}``.
    :meth:`aclose` (or ``async with``) closes a client the store made, never one it was
    given. Without redis-py installed, creating a store
    raises :class:`~agcore_tools.ToolConfigError` naming the extra.

    Example:
        >>> import asyncio
        >>> from agcore_tools.policies import CacheStore, RateStore
        >>> store = RedisStore.from_url("unix:///run/redis/redis.sock")
        >>> isinstance(store, RateStore), isinstance(store, CacheStore), store.prefix
        (True, True, 'agcore:')
        >>> async def main(store: RedisStore) -> None:  # doctest: +SKIP
        ...     async with store:
        ...         await store.reserve("lookup", RateLimit(5, per=1.0), max_wait=2.0)
        ...         await store.give_back("lookup", RateLimit(5, per=1.0))  # never started
        ...         await store.set("k", '"v"', ttl=60.0)
        ...         assert await store.get("k") == '"v"'
        >>> asyncio.run(main(store))  # doctest: +SKIP

        A server that cannot be reached is a :class:`~agcore_tools.ToolError`, and the
        URL's password is left out of it:

        >>> store = RedisStore("unix://:s3cret@/no/such/redis.sock")
        >>> asyncio.run(store.get("k"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolError: RedisStore on unix://***@/no/such/redis.sock: reading cached result 'k' failed: ConnectionError: ...
        >>> asyncio.run(store.aclose())
    """

    __slots__ = (
        "_client",
        "_errors",
        "_give_back",
        "_owned",
        "_reserve",
        "_secrets",
        "_where",
        "prefix",
    )

    def __init__(
        self,
        client: redis.asyncio.Redis | str,
        *,
        prefix: str | None = None,
        **options: Any,
    ) -> None:
        module = _redis_asyncio()
        if prefix is not None and not isinstance(prefix, str):
            raise ToolConfigError(f"RedisStore(prefix={prefix!r}): prefix must be a string")
        self.prefix = _DEFAULT_PREFIX if prefix is None else prefix
        """What every key of this store starts with."""
        self._client: redis.asyncio.Redis
        if isinstance(client, str):
            self._where, self._secrets, problem = _safe_url(client)
            if problem is not None:
                raise ToolConfigError(f"RedisStore({self._where!r}): {problem}")
            try:
                self._client = module.Redis.from_url(client, **options)
            except (ValueError, TypeError) as exc:
                raise ToolConfigError(
                    self._scrub(f"RedisStore({self._where!r}): {type(exc).__name__}: {exc}")
                ) from exc
            # The password redis-py settled on, wherever it came from (URL or options).
            self._secrets += _describe(self._client)[1]
            self._owned = True
        elif isinstance(client, module.Redis):
            if options:
                raise ToolConfigError(
                    f"RedisStore: options {sorted(options)} apply to a URL, not to a client"
                )
            self._client = client
            self._where, self._secrets = _describe(client)
            self._owned = False
        else:
            raise ToolConfigError(
                f"RedisStore({type(client).__name__}): give a redis.asyncio.Redis client or "
                "a redis:// or unix:// URL"
            )
        self._errors: tuple[type[BaseException], ...] = (module.RedisError, OSError)
        self._reserve = self._client.register_script(_RESERVE)
        self._give_back = self._client.register_script(_GIVE_BACK)
        logger.debug("RedisStore on %s, prefix %r", self._where, self.prefix)
        if prefix is None and not _on_socket(self._client):
            _warn_shared(self._where)

    @classmethod
    def from_url(cls, url: str, *, prefix: str | None = None, **options: Any) -> RedisStore:
        """A store with a client of its own on ``url``; ``options`` go to
        ``redis.asyncio.Redis.from_url``.

        Example:
            >>> RedisStore.from_url("redis://localhost:6379/2", prefix="app:")
            RedisStore('redis://localhost:6379/2', prefix='app:')
        """
        if not isinstance(url, str):
            raise ToolConfigError(f"RedisStore.from_url({type(url).__name__}): url must be text")
        return cls(url, prefix=prefix, **options)

    @property
    def client(self) -> redis.asyncio.Redis:
        """The redis-py client the store talks through.

        Example:
            >>> type(RedisStore("redis://localhost").client).__name__
            'Redis'
        """
        return self._client

    def rate_key(self, bucket: str) -> str:
        """The Redis key of a rate bucket: ``bucket`` is ``tool:<tool name>``, or
        ``resource:<resource>`` for the tools of a policy's ``resource``.

        Example:
            >>> RedisStore("redis://localhost").rate_key("resource:orders-api")
            'agcore:rate:resource:orders-api'
        """
        return f"{self.prefix}rate:{bucket}"

    def cache_key(self, key: str) -> str:
        """The Redis key of a cached result.

        Example:
            >>> RedisStore("redis://localhost", prefix="").cache_key("k")
            'cache:k'
        """
        return f"{self.prefix}cache:{key}"

    async def reserve(self, key: str, limit: RateLimit, max_wait: float) -> float | None:
        """Take one call's turn in bucket ``key``: the seconds to wait before starting
        (0.0 for at once), or None, with nothing taken, when the wait would exceed
        ``max_wait`` (see :meth:`~agcore_tools.policies.RateStore.reserve`). One atomic
        script on the server's clock."""
        interval = limit.interval * 1e6
        bound = -1.0 if math.isinf(max_wait) else max(max_wait, 0.0) * 1e6
        try:
            reply = await self._reserve(
                keys=[self.rate_key(key)],
                args=[repr(interval), limit.capacity, repr(bound)],
            )
        except self._errors as exc:
            raise self._failed(f"reserving a turn in rate bucket {key!r}", exc) from exc
        if reply is None:
            return None
        wait = float(reply) / 1e6
        return wait if wait > 0.0 else 0.0

    async def give_back(self, key: str, limit: RateLimit) -> None:
        """Return one turn taken by :meth:`reserve` to bucket ``key``, for a call that
        never started (see :class:`~agcore_tools.policies.RateStore`). One atomic script
        on the server's clock."""
        try:
            await self._give_back(keys=[self.rate_key(key)], args=[repr(limit.interval * 1e6)])
        except self._errors as exc:
            raise self._failed(f"giving back a turn in rate bucket {key!r}", exc) from exc

    async def get(self, key: str) -> str | None:
        """The text cached under ``key``, or None (see
        :meth:`~agcore_tools.policies.CacheStore.get`)."""
        try:
            value = await self._client.get(self.cache_key(key))
        except self._errors as exc:
            raise self._failed(f"reading cached result {key!r}", exc) from exc
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    async def set(self, key: str, value: str, ttl: float) -> None:
        """Cache ``value`` under ``key`` for ``ttl`` seconds (at least a millisecond)."""
        px = max(1, math.ceil(ttl * 1000))
        try:
            await self._client.set(self.cache_key(key), value, px=px)
        except self._errors as exc:
            raise self._failed(f"caching result {key!r}", exc) from exc

    async def aclose(self) -> None:
        """Close the client, if the store made it from a URL (a client it was given is
        the caller's to close)."""
        if self._owned:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"RedisStore({self._where!r}, prefix={self.prefix!r})"

    def _scrub(self, text: str) -> str:
        # Each as written in the URL and decoded (a query's '+' is a space to redis-py);
        # the longest first, so a password containing another is not left half shown.
        forms = {f for s in self._secrets for f in (s, unquote(s), unquote_plus(s)) if f}
        for secret in sorted(forms, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def _failed(self, what: str, exc: BaseException) -> ToolError:
        reason = self._scrub(f"{type(exc).__name__}: {exc}")
        return ToolError(f"RedisStore on {self._where}: {what} failed: {reason}")
