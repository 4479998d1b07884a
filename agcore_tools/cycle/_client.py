"""Which OpenAI SDK clients ``LlmCycle`` accepts, and the async twin of a sync one.

The loop is async (it runs tools concurrently while it reads the model's stream), so it
needs an ``AsyncOpenAI``. Most apps hold a sync ``OpenAI``; rather than a second,
blocking copy of the loop, the cycle builds an ``AsyncOpenAI`` with the same settings
and owns it (``aclose()``/``close_sync()`` close it; the caller's client stays theirs).

A client the cycle builds (from the environment, or a sync client's twin) sends through
sharded pools (``_sharded.LibraryPooled``): it costs what the
SDK's default client costs for one conversation at a time, and stays cheap with
hundreds in flight (see ``docs/benchmarks.md``, "Scale"). Most users never read that
page, so the default is the one that scales. On the library's loop (the ``*_sync``
methods) those clients share one pool, so a cycle per request reuses its connections;
building one costs about a millisecond, the TLS context being built once per process,
at the first request, off the loop. With a proxy in the environment the SDK's default client is kept: an
``http_client`` with its own transport would ignore ``HTTPS_PROXY``. So it is with an
OpenAI SDK older than 3.0, whose client is built on ``httpx``, not ``httpx2`` as the
sharded transport is.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import threading
import urllib.request
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .. import _sync
from .._aio import run_sync, with_timeout
from ..error import ClientTypeError, LlmConfigError, LlmError, LlmUsageError
from .transport import sdk_is_httpx2_based

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

__all__ = [
    "FORKED",
    "ClientTypeError",
    "accept_client",
    "check_client_loop",
    "client_from_env",
    "closed_client",
    "loop_misuse",
    "provided_keys",
]

logger = logging.getLogger("agcore_tools.cycle")


_ACCEPTED = "an openai.AsyncOpenAI or an openai.OpenAI client (or a subclass of AsyncOpenAI)"

# How long the twin waits for a sync client's api_key provider (a token provider, such
# as Azure's get_bearer_token_provider, may ask a credential service over the network).
KEY_PROVIDER_TIMEOUT = 60.0

# The keys a twin's api_key provider returned lately, by twin: a request's error masks
# them (a proxy may echo the bearer token). A token lives an hour or so; a handful
# covers the ones still in use.
KEPT_KEYS = 8
_PROVIDED: weakref.WeakKeyDictionary[Any, collections.deque[str]] = weakref.WeakKeyDictionary()

# The process and the event loop each client's connections belong to: those of its
# first request through a cycle. Weak keys and, where the loop allows, a weak loop.
_BOUND: weakref.WeakKeyDictionary[Any, tuple[int, Callable[[], asyncio.AbstractEventLoop | None]]]
_BOUND = weakref.WeakKeyDictionary()
_BOUND_LOCK = threading.Lock()
# The clients a cycle built, each with whether it is on the shared-pool transport: on
# the library's loop those send through that loop's pool, which binds them to no loop.
_BUILT: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def accept_client(client: Any) -> tuple[AsyncOpenAI, bool]:
    """The client the cycle drives, and whether the cycle owns (and closes) it.

    An ``AsyncOpenAI`` (or subclass, such as ``AsyncAzureOpenAI``) is used as given.
    A sync ``OpenAI`` gets an async twin with its API key (or api_key provider),
    organization, project, base URL, timeout, retries, default headers and default
    query; one built with ``workload_identity=`` or ``provider=`` is refused, as are
    other types, with a ``TypeError`` naming what is accepted.
    """
    from openai import AsyncOpenAI, AzureOpenAI, OpenAI

    if isinstance(client, AsyncOpenAI):
        _hint_sharding()
        return client, False
    if isinstance(client, AzureOpenAI):
        raise ClientTypeError(
            f"LlmCycle(client=...) takes {_ACCEPTED}; a sync AzureOpenAI cannot be "
            "converted (its authentication and API version are Azure's own): pass an "
            "AsyncAzureOpenAI"
        )
    if isinstance(client, OpenAI):
        # Both absent on the older SDKs pyproject.toml allows; the provider has no
        # public view.
        for option, value in (
            ("workload_identity", getattr(client, "workload_identity", None)),
            ("provider", getattr(client, "_provider", None)),
        ):
            if value is not None:
                raise ClientTypeError(
                    f"LlmCycle(client=...) takes {_ACCEPTED}; a sync OpenAI built with "
                    f"{option}= cannot be converted (its authentication is the SDK's own): "
                    "pass an AsyncOpenAI built the same way"
                )
        if _custom_http_client(client):
            # Its proxy, certificates and hooks would be dropped without a word.
            raise ClientTypeError(
                f"LlmCycle(client=...) takes {_ACCEPTED}; a sync OpenAI built with "
                "http_client= cannot be converted (an async client needs an async "
                "transport): pass an AsyncOpenAI built with an async http_client "
                "(openai.DefaultAsyncHttpxClient(...)) configured the same way"
            )
        return async_twin(client), True
    name = type(client).__name__
    view = next((v for v in _VIEWS if name.endswith(v[0])), None)
    # client.with_raw_response (or with_streaming_response): a view of a client, whose
    # create() answers raw responses the loop cannot read.
    hint = f" (that is client.{view[1]}: pass the client itself)" if view is not None else ""
    raise ClientTypeError(f"LlmCycle(client=...) takes {_ACCEPTED}, got {name}{hint}")


_VIEWS = (
    ("WithRawResponse", "with_raw_response"),
    ("WithStreamedResponse", "with_streaming_response"),
)


def _custom_http_client(client: OpenAI) -> bool:
    """Whether ``client`` was built with an ``http_client`` of the caller's: the SDK's
    own is its private ``SyncHttpxClientWrapper`` (the SDK has no public view of it)."""
    own = getattr(client, "_client", None)
    return own is not None and type(own).__name__ != "SyncHttpxClientWrapper"


def async_twin(client: OpenAI) -> AsyncOpenAI:
    """An ``AsyncOpenAI`` with the same settings as ``client``.

    A custom ``http_client`` (proxies, certificates) cannot carry over: an async client
    needs an async transport, so ``LlmCycle`` refuses such a client (pass your own
    ``AsyncOpenAI`` for that). An api_key
    provider (``OpenAI(api_key=callable)``) is called for each request, as the sync
    client does, in a worker thread (it may block) for at most
    ``KEY_PROVIDER_TIMEOUT`` seconds. Raises ``LlmConfigError`` when the SDK refuses
    the settings (no API key, for one).
    """
    from openai import AsyncOpenAI, OpenAIError

    # The SDK keeps a callable api_key only here: client.api_key is "" until the first
    # request, then the key of that moment, and no public attribute returns the callable.
    # Older SDKs (before api_key providers) have no such attribute.
    provider = getattr(client, "_api_key_provider", None)
    # Any: the stubs of the SDKs before api_key providers take a str only.
    keys: collections.deque[str] = collections.deque(maxlen=KEPT_KEYS)
    api_key: Any = _async_key_provider(provider, keys) if callable(provider) else client.api_key
    http_client = _scaling_http_client()
    try:
        twin = AsyncOpenAI(
            api_key=api_key,
            organization=client.organization,
            project=client.project,
            base_url=client.base_url,
            timeout=client.timeout,
            max_retries=client.max_retries,
            # What the caller passed as default_headers. The SDK has no public view of
            # those alone: its default_headers property mixes in its own sync-client
            # headers (User-Agent, X-Stainless-Async: false, the platform's, which it
            # probes, blocking, on first use), and copy()/with_options() only make a
            # sync client.
            default_headers=getattr(client, "_custom_headers", None) or None,
            default_query=client.default_query or None,  # public: exactly the caller's
            http_client=http_client,
        )
    except OpenAIError as exc:
        raise LlmConfigError(
            f"cannot build the AsyncOpenAI twin of the sync OpenAI client given: {exc}; "
            "pass an AsyncOpenAI instead"
        ) from exc
    if callable(provider):
        _PROVIDED[twin] = keys
    _BUILT[twin] = http_client is not None
    return twin


def provided_keys(client: object) -> tuple[str, ...]:
    """The keys the api_key provider of ``client``, a sync client's twin, returned
    lately (the last :data:`KEPT_KEYS` distinct ones); none for any other client.

    Example:
        >>> provided_keys(object())
        ()
    """
    try:
        keys = _PROVIDED.get(client)
    except TypeError:  # a client that cannot be weakly referenced is no twin
        return ()
    return tuple(keys) if keys is not None else ()


def _async_key_provider(
    provider: Callable[[], str], keys: collections.deque[str]
) -> Callable[[], Awaitable[str]]:
    """An async api_key provider that runs the sync ``provider`` in a worker thread, and
    keeps the last distinct keys it returned in ``keys``."""

    def call() -> str:
        # Wrapped in the thread, so that a TimeoutError of the provider's own (a socket's)
        # is not taken for the wait below running out.
        try:
            return provider()
        except Exception as exc:
            raise LlmError(
                "the api_key provider of the sync OpenAI client given failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    async def key() -> str:
        try:
            value = await with_timeout(run_sync(call), KEY_PROVIDER_TIMEOUT)
        except TimeoutError as exc:
            raise LlmError(
                "the api_key provider of the sync OpenAI client given did not return a "
                f"key within {KEY_PROVIDER_TIMEOUT:g} s"
            ) from exc
        if isinstance(value, str) and value not in keys:
            keys.append(value)
        return value

    return key


def client_from_env() -> AsyncOpenAI:
    """An ``AsyncOpenAI`` from the environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``).

    Raises :class:`LlmConfigError` (a ``ValueError``) when the SDK refuses the
    environment: a setup mistake, such as no API key.
    """
    from openai import AsyncOpenAI, OpenAIError

    http_client = _scaling_http_client()
    try:
        client = AsyncOpenAI(http_client=http_client)
    except OpenAIError as exc:
        reason = str(exc).strip().rstrip(".")
        raise LlmConfigError(
            f"cannot create the OpenAI client from the environment ({reason}): set "
            "OPENAI_API_KEY or pass client="
        ) from exc
    _BUILT[client] = http_client is not None
    return client


FORKED = (
    "this LlmCycle was used before this process was forked, and its client's connections "
    "stay the parent's: make a new LlmCycle (with a new client) in this process"
)
_CLIENT_WAS_CLOSED = (
    "the OpenAI client was closed before or while this call's model request was sent, so "
    "the request failed: LlmCycle.close() closes a client the cycle made, and an app "
    "closes its own; close either once the calls that use it have ended"
)
_CLIENT_CLOSED = "the client has been closed"  # httpx's (and httpx2's) text
_MOVED = (
    "this LlmCycle's last call ran in another event loop, which its client's connections "
    "belong to: use a cycle from one loop (its *_sync methods share the library's own), "
    "or one LlmCycle per loop"
)
_CLOSED_LOOP = "Event loop is closed"  # asyncio's text
_CLOSED_LOOP_FIX = (
    "this AsyncOpenAI client holds connections of an event loop that has closed (an "
    "earlier asyncio.run() the app used it in), which this call can neither use nor close: "
    "use one client per event loop, for the *_sync calls a sync OpenAI client (the cycle "
    "builds its twin on agcore_tools' own loop)"
)


def closed_client(exc: BaseException, *, closed: bool, cut: bool) -> LlmUsageError | None:
    """What the app did, when a request fails while its SDK client is ``closed``
    (``client.is_closed()``: the cycle's ``close()`` closed the client it made, or the
    app closed its own, before the call or while it ran): the request raises this
    instead, with the SDK's error as its cause. ``exc`` is how a closed client fails:
    the HTTP client's ``RuntimeError`` ("Cannot send a request, as the client has been
    closed."), or a connection error (``cut``: the response it was reading was cut).
    Anything else is left as it is.

    Example:
        >>> sent = RuntimeError("Cannot send a request, as the client has been closed.")
        >>> closed_client(sent, closed=True, cut=False)  # doctest: +ELLIPSIS
        LlmUsageError("the OpenAI client was closed before or while ...")
        >>> closed_client(sent, closed=False, cut=False) is None
        True
        >>> closed_client(RuntimeError("an app's own error"), closed=True, cut=False) is None
        True
    """
    if not closed:
        return None
    if cut or (type(exc) is RuntimeError and _CLIENT_CLOSED in str(exc)):
        return LlmUsageError(_CLIENT_WAS_CLOSED)
    return None


def loop_misuse(
    exc: RuntimeError, *, moved: bool, forked: bool, sdk_client: bool
) -> LlmUsageError | None:
    """What the app did, when a run's ``RuntimeError`` is asyncio's (``Event loop is
    closed``, ``... is bound to a different event loop``) about a client used across
    event loops: its text names asyncio's objects, not the app's mistake, so the run
    raises this instead, with asyncio's error as its cause. ``moved``: the cycle's last
    call ran in another loop; ``forked``: in a parent process; ``sdk_client``: the run
    sends through an OpenAI SDK client (not an app's own ``Requester``).

    Example:
        >>> loop_misuse(RuntimeError("Event loop is closed"), moved=False, forked=False,
        ...             sdk_client=False) is None
        True
    """
    if moved and not isinstance(exc, LlmError):
        return LlmUsageError(FORKED if forked else _MOVED)
    # The app's requests on its client, in a loop now closed (no cycle saw it).
    if sdk_client and type(exc) is RuntimeError and str(exc) == _CLOSED_LOOP:
        return LlmUsageError(_CLOSED_LOOP_FIX)
    return None


def check_client_loop(client: object, loop: asyncio.AbstractEventLoop) -> None:
    """Refuse, before anything is sent, a request of ``client`` from ``loop`` when the
    client's connections belong to another event loop, or to the process this one was
    forked from: its first request through a cycle tells which.

    Sent anyway, the request reaches the model (and is billed), then asyncio's bare
    ``RuntimeError`` ("Event loop is closed", "... is bound to a different event loop")
    ends the call before its answer is read, every other time.

    Example:
        >>> class Client: ...
        >>> client, first, second = Client(), asyncio.new_event_loop(), asyncio.new_event_loop()
        >>> check_client_loop(client, first)
        >>> check_client_loop(client, second)
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmUsageError: this AsyncOpenAI client's connections belong to the event loop of its first request, and this call runs in another (a new asyncio.run(), or a *_sync call after an await): use one client per event loop, for the *_sync calls a sync OpenAI client (the cycle builds its twin on agcore_tools' own loop)
        >>> first.close(); second.close()
    """
    built = _BUILT.get(client)
    if built and _sync.is_library_loop(loop):
        return
    pid = os.getpid()
    with _BOUND_LOCK:
        bound = _BOUND.get(client)
        if bound is None:
            _BOUND[client] = (pid, _weak(loop))
            return
    if bound[0] == pid and bound[1]() is loop:
        return
    if built is not None:  # the app never saw this client: the cycle is what it reused
        raise LlmUsageError(
            "this LlmCycle's own client has its connections in the event loop of the "
            "cycle's first call, or the process this one was forked from, and this call "
            "runs in another: make a new LlmCycle there (its *_sync methods run in "
            "agcore_tools' own loop from anywhere)"
        )
    if bound[0] != pid:
        raise LlmUsageError(
            "this AsyncOpenAI client was used before this process was forked, and its "
            "connections stay the parent's: make a new client in this process"
        )
    raise LlmUsageError(
        "this AsyncOpenAI client's connections belong to the event loop of its first "
        "request, and this call runs in another (a new asyncio.run(), or a *_sync call "
        "after an await): use one client per event loop, for the *_sync calls a sync "
        "OpenAI client (the cycle builds its twin on agcore_tools' own loop)"
    )


def _weak(loop: asyncio.AbstractEventLoop) -> Callable[[], asyncio.AbstractEventLoop | None]:
    # Weak, so a closed loop is not kept for its client's sake; a loop type that cannot
    # be weakly referenced is held.
    try:
        return weakref.ref(loop)
    except TypeError:
        return lambda: loop


def _scaling_http_client() -> Any:
    """The ``http_client`` of a client the cycle builds: sharded, and on the library's
    loop shared with the other clients the library builds (:class:`LibraryPooled`),
    unless a proxy is set or the SDK predates httpx2.

    ``None`` (the SDK's own client) when the environment names a proxy, which only a
    client without a transport of its own honors, or when the installed OpenAI SDK is
    older than 3.0 (httpx-based, so it cannot drive the sharded httpx2 transport).
    """
    if urllib.request.getproxies() or not sdk_is_httpx2_based():
        return None
    from openai import DefaultAsyncHttpxClient

    from ._sharded import LibraryPooled  # httpx2: loaded with the first client, not before

    return DefaultAsyncHttpxClient(transport=LibraryPooled())


_hinted = False


def _hint_sharding() -> None:
    """Say once, at DEBUG, that a client of one's own scales better sharded."""
    global _hinted
    if not _hinted:
        _hinted = True
        logger.debug(
            "LlmCycle uses the AsyncOpenAI client given; past a few hundred concurrent "
            "conversations in one process, build it with "
            "http_client=agcore_tools.cycle.sharded_http_client() (docs/benchmarks.md, Scale)"
        )
