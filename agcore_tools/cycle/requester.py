"""The seam in front of the model: :class:`LlmCycle` sends each request through a
:class:`Requester`.

Everything the loop knows about where a turn comes from goes through this one object,
as httpx's client reaches the network only through its transport. The loop builds the
request (the history, the offered tools, the request options) and a fresh assembler
for the turn; the requester sends it and feeds what comes back to the assembler.
:class:`OpenAIRequester` sends through the official SDK, with the cycle's retries;
``agcore_tools.temporal`` plugs in one whose request is an activity; a test can plug in
one that answers from a list, with no server at all.
"""

from __future__ import annotations

import abc
import functools
import json
import logging
import sys
import weakref
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from .._masked_error import masked_error
from .._redact import (
    header_secrets,
    mask,
    mask_credentials,
    secret_values,
    url_secrets,
    url_without_secrets,
)
from ..error import ClientTypeError, LlmConfigError, LlmError
from ._client import closed_client, provided_keys
from ._requester import retryless
from ._retry import RetryPolicy
from ._wire import close_stream, open_stream
from ._wires import TurnAssembler, Wire
from .config import CycleConfig
from .events import StreamEvent
from .profiles import ServerProfile, profile_for_models, profile_for_url

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIRequester", "Requester", "TurnRequest", "checked_requester"]

logger = logging.getLogger("agcore_tools.cycle")

_PROBE_TIMEOUT = 5.0  # seconds for the model list that tells the server's profile
# What the SDK says for an error event whose own message it could not find (Hugging
# Face TGI's `{"error": "<text>", "error_type": ...}`): the text is in the error's body.
_SDK_PLACEHOLDER = "An error occurred during streaming"
_SNIPPET = 100  # characters of an event that is not JSON quoted in an error
# What each client's model list told, so a client is asked once, whatever the cycles.
_PROBED: weakref.WeakKeyDictionary[AsyncOpenAI, ServerProfile | None] = weakref.WeakKeyDictionary()
# What each client's server refused and the loop fell back from: it outranks the rest.
_LEARNED: weakref.WeakKeyDictionary[AsyncOpenAI, ServerProfile] = weakref.WeakKeyDictionary()


class TurnRequest:
    """One request of a turn, as the loop hands it to its :class:`Requester`.

    ``params`` are the request's parameters in the Chat Completions shape (``model``,
    ``messages``, ``tools``, the request options; ``stream`` when streamed);
    ``wire.request(client, params)`` turns them into the SDK resource to call
    ``create`` on and the parameters for the cycle's API (``config.api``), and
    ``wire.name`` names that API in errors. ``builder`` assembles the turn: give it
    the whole response (``feed_completion``, an SDK object or its JSON as a dict), or
    each streamed chunk (``feed``, whose events the requester yields) and then
    ``end_stream()``. ``config`` is the cycle's :class:`~agcore_tools.CycleConfig` at
    the time of the request (its retry settings, its API).

    Example:
        >>> from agcore_tools import CycleConfig
        >>> from agcore_tools.cycle._wires import wire_for
        >>> config = CycleConfig("m")
        >>> wire = wire_for(config)
        >>> params = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
        >>> turn = TurnRequest(config, wire, params, False, wire.builder("0", False, None))
        >>> turn.builder.feed_completion({"choices": [{"message": {"content": "Hello"}}]})
        >>> turn.builder.build().text
        'Hello'
    """

    __slots__ = ("builder", "config", "params", "stream", "wire")

    def __init__(
        self,
        config: CycleConfig,
        wire: Wire,
        params: dict[str, Any],
        stream: bool,
        builder: TurnAssembler,
    ) -> None:
        self.config = config
        self.wire = wire
        self.params = params
        self.stream = stream
        self.builder = builder


class Requester(abc.ABC):
    """What :class:`~agcore_tools.LlmCycle` sends its requests through
    (``LlmCycle(config, requester=...)``).

    Subclasses implement :meth:`request`; :meth:`trace_attributes` names the server
    in the loop's OpenTelemetry spans. A requester holds no state of a conversation,
    so one may serve many cycles.

    Example: a requester that answers every request with the same text, no server:

        >>> import asyncio
        >>> from agcore_tools import CycleConfig, LlmCycle
        >>> class Canned(Requester):
        ...     async def request(self, turn: TurnRequest):
        ...         message = {"role": "assistant", "content": "Hello!"}
        ...         choice = {"index": 0, "message": message, "finish_reason": "stop"}
        ...         turn.builder.feed_completion({"choices": [choice]})
        ...         return
        ...         yield  # an async generator: a streamed request yields its events
        >>> cycle = LlmCycle(CycleConfig("m"), requester=Canned())
        >>> asyncio.run(cycle.submit("Hi")).text
        'Hello!'
    """

    __slots__ = ()

    @abc.abstractmethod
    def request(self, turn: TurnRequest) -> AsyncGenerator[StreamEvent, None]:
        """Send ``turn``'s request and feed the response to ``turn.builder``, yielding
        the events a streamed response's chunks make.

        An async generator: the loop closes it when its consumer stops early, which
        should drop the request. A failure the loop should report raises
        :class:`~agcore_tools.LlmError`.
        """

    async def server_profile(self) -> ServerProfile | None:
        """The profile of the server this requester talks to, if it can tell (see
        :mod:`agcore_tools.cycle.profiles`); None by default. Asked once per ``submit*``
        call unless ``CycleConfig.profile`` is set.

        Example:
            >>> import asyncio
            >>> class Quiet(Requester):
            ...     def request(self, turn): raise NotImplementedError
            >>> asyncio.run(Quiet().server_profile()) is None
            True
        """
        return None

    def remember_profile(self, profile: ServerProfile) -> None:
        """Keep ``profile`` as the server's from now on: the loop calls it when the
        server refused a request and the loop fell back (see
        :func:`~agcore_tools.cycle.profiles.read_refusal`). Does nothing by default.

        Example:
            >>> class Quiet(Requester):
            ...     def request(self, turn): raise NotImplementedError
            >>> from agcore_tools.cycle.profiles import OPENAI
            >>> Quiet().remember_profile(OPENAI)
        """
        return None  # a requester without a client has nowhere to keep it

    def trace_attributes(self) -> dict[str, Any]:
        """The OpenTelemetry attributes naming the model's server
        (``gen_ai.provider.name``, ``server.address``, ``server.port``).

        Example:
            >>> class Quiet(Requester):
            ...     def request(self, turn): raise NotImplementedError
            >>> Quiet().trace_attributes()
            {'gen_ai.provider.name': 'openai'}
        """
        return {"gen_ai.provider.name": "openai"}


def checked_requester(requester: object) -> Requester:
    """``requester``, refused with a :class:`~agcore_tools.error.ClientTypeError` when it
    is not a :class:`Requester`: accepted, it failed the first request with a bare
    ``AttributeError`` that named no argument.

    Example:
        >>> checked_requester("http://localhost:8000/v1")
        Traceback (most recent call last):
        ...
        agcore_tools.error.ClientTypeError: LlmCycle(requester=...) takes an agcore_tools.cycle.Requester, got str: subclass Requester, or give an OpenAI SDK client as client=
    """
    if isinstance(requester, Requester):
        return requester
    if type(requester).__module__.partition(".")[0] == "openai":
        fix = "an OpenAI SDK client goes in client="
    else:
        fix = "subclass Requester, or give an OpenAI SDK client as client="
    raise ClientTypeError(
        "LlmCycle(requester=...) takes an agcore_tools.cycle.Requester, got "
        f"{type(requester).__name__}: {fix}"
    )


class OpenAIRequester(Requester):
    """Sends through an ``AsyncOpenAI`` client: the requester a cycle builds from
    ``client=``.

    Requests go through a copy of ``client`` with the SDK's own retries off (shared by
    every requester on the same client); the cycle's retry settings
    (``CycleConfig.retries``) cover a request up to its first streamed chunk, never a
    started stream. SDK errors become :class:`~agcore_tools.LlmError`. A streamed
    response is read as plain dicts (see ``_wire.py``) and closed on any exit.

    Example:
        >>> from openai import AsyncOpenAI
        >>> requester = OpenAIRequester(AsyncOpenAI(api_key="-", base_url="http://127.0.0.1:8000/v1"))
        >>> requester.trace_attributes()["server.port"]
        8000
    """

    __slots__ = ("_sender", "client")

    def __init__(self, client: AsyncOpenAI) -> None:
        scheme = getattr(getattr(client, "base_url", None), "scheme", None)
        if isinstance(scheme, str) and scheme not in ("http", "https"):
            # "127.0.0.1:8000/v1" (no scheme) could never connect, yet every request
            # would be retried as a connection error before failing.
            raise LlmConfigError(
                f"the OpenAI client's base_url {_shown(client)!r} is not an http(s) URL: "
                "begin it with http:// or https:// (base_url=, or OPENAI_BASE_URL)"
            )
        self.client = client
        """The SDK client given."""
        self._sender = retryless(client)  # shared by the requesters on this client

    def _secrets(self, params: Mapping[str, Any]) -> list[str]:
        """What a server may echo that an error must not show: the client's API key, the
        keys a sync client's api_key provider returned lately, the values of its
        ``default_headers`` and of the request's ``extra_headers``, and what its
        ``base_url`` shows as ``***`` (a password, a gateway's ``?api-key=`` or
        ``/k/<key>/``, echoed in a router's "Unknown route: POST /k/<key>/..."), and the
        values of its ``default_query`` and the request's ``extra_query`` the same way
        (the SDK puts them on the URL the router echoes).

        Read when masking, not before sending: with an api_key provider the SDK sets
        ``api_key`` (on the copy that sends) while it prepares the request."""
        client = self.client
        # Strs: a provider given as api_key is kept apart, and api_key holds the last key
        # it gave on the client that asked it, the retry-less copy for this requester.
        keys = [getattr(each, "api_key", None) for each in (client, self._sender)]
        headers = getattr(client, "_custom_headers", None)  # the default_headers given
        extra = params.get("extra_headers")
        return [
            *(key for key in keys if isinstance(key, str)),
            *provided_keys(client),
            *header_secrets(headers.values() if isinstance(headers, Mapping) else ()),
            *header_secrets(extra.values() if isinstance(extra, Mapping) else ()),
            *url_secrets(str(getattr(client, "base_url", ""))),
            *_query_secrets(getattr(client, "default_query", None)),
            *_query_secrets(params.get("extra_query")),
        ]

    def redact(self, params: Mapping[str, Any], text: str) -> str:
        """``text`` with what a server may echo of this client's secrets (its API key,
        header values, its base URL's and the request ``params``' query secrets) shown
        as ``***``, and any credential after ``Bearer``, ``Basic`` or ``Token`` too (one
        the client holds nowhere public, such as an ``AsyncAzureOpenAI``'s Azure AD
        token, or one its ``http_client`` adds): for an error or log line made of a
        server's answer.

        Example:
            >>> from openai import AsyncOpenAI
            >>> requester = OpenAIRequester(AsyncOpenAI(api_key="sk-S3CRET-0123456789"))
            >>> requester.redact({}, "bad key sk-S3CRET-0123456789")
            'bad key ***'
            >>> requester.redact({}, "refused Authorization: Bearer eyJ0eXAi.eyJzdWIi.c2ln")
            'refused Authorization: Bearer ***'
        """
        return mask_credentials(mask(text, secret_values(self._secrets(params))))

    async def request(self, turn: TurnRequest) -> AsyncGenerator[StreamEvent, None]:
        """Send ``turn`` through the SDK, retrying as ``turn.config`` says.

        Example:
            >>> async def main(requester: OpenAIRequester, turn: TurnRequest):  # doctest: +SKIP
            ...     async for event in requester.request(turn):  # the loop does this
            ...         print(event)
        """
        from openai import APIConnectionError, OpenAIError

        config = turn.config
        wire, builder = turn.wire, turn.builder
        retries = config.retries
        # A server (a proxy, a gateway) may echo the bearer token in its error's body.
        redact = functools.partial(self.redact, turn.params)
        # A closed client (the cycle's close(), or the app's own) fails every retry.
        closed = self.client.is_closed
        retry = RetryPolicy(
            retries.max_retries, retries.initial_delay, retries.max_delay, redact, closed
        )
        completions, params = wire.request(self._sender, turn.params)
        # An httpx-based SDK (openai 1.x) lets the transport's error through mid-stream.
        broken: tuple[type[Exception], ...] = (APIConnectionError, *_transport_errors())
        # 1. Retries cover the request up to the first chunk; never a started stream.
        try:
            if not turn.stream:
                create = functools.partial(completions.create, **params)
                builder.feed_completion(await retry.call(create))
                return
            response, first = await retry.call(functools.partial(open_stream, completions, params))
        except (OpenAIError, ValueError, RecursionError) as exc:  # a body that is not JSON,
            # or JSON nested too deeply to parse
            cut = isinstance(exc, broken)
            if (misuse := closed_client(exc, closed=closed(), cut=cut)) is not None:
                raise misuse from masked_error(exc, redact)
            why = redact(f"{_described(exc)}{_unreached(exc, self.client)}")
            # From a masked stand-in of exc when exc quotes a secret: a traceback prints
            # the whole chain.
            raise LlmError(f"{wire.name} request failed: {why}") from masked_error(exc, redact)
        except RuntimeError as exc:  # after RecursionError's clause: it is one
            if (misuse := closed_client(exc, closed=closed(), cut=False)) is not None:
                raise misuse from exc
            raise
        except LlmError as exc:  # a body that is no event stream, quoted
            masked = redact(str(exc))
            if masked == str(exc) or type(exc) is not LlmError:
                raise
            # Its cause, not itself: the unmasked text would show in a traceback.
            raise LlmError(masked) from exc.__cause__
        # 2. Read the stream; closing it on any exit (cancellation included) drops the
        #    HTTP connection, which tells the server to stop generating.
        try:
            chunk, read = first, 0
            while chunk is not None:
                read += 1
                for event in builder.feed(chunk):
                    yield event
                try:
                    chunk = await response.__anext__()
                except StopAsyncIteration:
                    chunk = None
                except broken as exc:
                    # The transport's text may quote what the server sent (a token).
                    broke = redact(f"{type(exc).__name__}: {exc}{_root_cause(exc)}")
                    if builder.raw_reason is None:
                        if (misuse := closed_client(exc, closed=closed(), cut=True)) is not None:
                            raise misuse from masked_error(exc, redact)
                        raise LlmError(
                            f"the model's stream failed after {read} chunk(s): {broke}"
                        ) from masked_error(exc, redact)
                    # A proxy that drops the connection as the stream ends: the turn is
                    # whole (its finish_reason came), and asking again would pay twice.
                    logger.warning(
                        "the model's stream broke after its finish_reason, before its "
                        "end; the turn is kept: %s",
                        broke,
                    )
                    chunk = None
            builder.end_stream()
        except (OpenAIError, ValueError, RecursionError) as exc:  # an event that is not JSON
            why = redact(_described(exc))
            raise LlmError(f"the model's stream failed: {why}") from masked_error(exc, redact)
        except LlmError as exc:  # an error event the server sent, quoted
            masked = redact(str(exc))
            if masked == str(exc) or type(exc) is not LlmError:
                raise
            # Its cause, not itself: the unmasked text would show in a traceback.
            raise LlmError(masked) from exc.__cause__
        finally:
            await close_stream(response)

    async def server_profile(self) -> ServerProfile | None:
        """The profile the client's base URL tells (``api.openai.com``, an Azure host);
        else the one the server's model list tells (``GET /models``: its entries and
        headers), read once per client, within 5 s; else None.

        Example:
            >>> import asyncio
            >>> from openai import AsyncOpenAI
            >>> client = AsyncOpenAI(api_key="-", base_url="https://api.openai.com/v1")
            >>> asyncio.run(OpenAIRequester(client).server_profile()).name
            'openai'
        """
        learned = _LEARNED.get(self.client)
        if learned is not None:
            return learned
        told = profile_for_url(str(self.client.base_url))
        if told is not None:
            return told
        try:
            return _PROBED[self.client]
        except KeyError:
            pass
        from openai import OpenAIError

        try:
            raw = await self._sender.models.with_raw_response.list(timeout=_PROBE_TIMEOUT)
            found = profile_for_models(raw.http_response.json(), raw.headers)
        except RuntimeError as exc:
            closed = self.client.is_closed()
            if (misuse := closed_client(exc, closed=closed, cut=False)) is not None:
                raise misuse from exc
            raise
        except (OpenAIError, ValueError) as exc:
            # A server without a model list is common; OpenAI's profile then applies.
            why = self.redact({}, f"{type(exc).__name__}: {exc}")
            logger.debug("no server profile from the model list: %s", why)
            found = None
        _PROBED[self.client] = found
        return found

    def remember_profile(self, profile: ServerProfile) -> None:
        """Keep ``profile`` for this requester's client, for every cycle on it.

        Example:
            >>> from openai import AsyncOpenAI
            >>> from agcore_tools.cycle.profiles import LLAMA_CPP_PYTHON
            >>> requester = OpenAIRequester(AsyncOpenAI(api_key="-"))
            >>> requester.remember_profile(LLAMA_CPP_PYTHON)
        """
        _LEARNED[self.client] = profile

    def trace_attributes(self) -> dict[str, Any]:
        """The provider (``azure.ai.openai`` for an Azure client) and the server's
        address and port, from the client's base URL."""
        from openai import AsyncAzureOpenAI

        client = self.client
        azure = isinstance(client, AsyncAzureOpenAI)
        attributes: dict[str, Any] = {
            "gen_ai.provider.name": "azure.ai.openai" if azure else "openai"
        }
        url = client.base_url
        if url.host:
            attributes["server.address"] = url.host
            attributes["server.port"] = url.port or (443 if url.scheme == "https" else 80)
        return attributes


def _unreached(exc: BaseException, client: Any) -> str:
    """For a request that reached no server, what the SDK's "Connection error." hides:
    its innermost cause (refused, an unknown host, a TLS failure) and the server tried.

    Example:
        >>> from openai import AsyncOpenAI
        >>> _unreached(ValueError("not a connection failure"), AsyncOpenAI(api_key="-"))
        ''
    """
    from openai import APIConnectionError

    if not isinstance(exc, APIConnectionError):
        return ""
    root: BaseException = exc
    seen = {id(exc)}
    while (following := root.__cause__ or root.__context__) is not None:
        if id(following) in seen:
            break
        seen.add(id(following))
        root = following
    reason = f"{type(root).__name__}: {root}; " if root is not exc and str(root) else ""
    return f" ({reason}server {_shown(client)})"


def _shown(client: Any) -> str:
    """The client's base URL without its userinfo and with its query's values and its
    path's keys as ``***`` (a password, a gateway's ``?api-key=`` or ``/k/<key>/`` stays
    out; Azure's ``api-version`` is shown), as MCP transports show theirs.

    Example:
        >>> from openai import AsyncOpenAI
        >>> _shown(AsyncOpenAI(api_key="-", base_url="https://u:pw@gw.example/v1?api-key=k1"))
        'https://gw.example/v1/?api-key=***'
    """
    return url_without_secrets(str(getattr(client, "base_url", "")))


def _described(exc: BaseException) -> str:
    """What an SDK or decoding error says, for the loop's message: the server's own
    text when the SDK kept it in ``body`` only, and the event that is not JSON quoted.

    Example:
        >>> try:
        ...     json.loads("")
        ... except ValueError as exc:
        ...     print(_described(exc))
        an event that is not JSON (Expecting value): ''
    """
    if isinstance(exc, json.JSONDecodeError):
        return f"an event that is not JSON ({exc.msg}): {exc.doc[:_SNIPPET]!r}"
    message = str(exc)
    if message == _SDK_PLACEHOLDER:
        body = getattr(exc, "body", None)
        said = body.get("message") if isinstance(body, Mapping) else body
        if isinstance(said, str) and said:
            message = " ".join(said.split())
        elif isinstance(body, Mapping):  # an error object without a message: quoted
            message = f"{message}: {json.dumps(body, default=str)[:_SNIPPET]}"
    return f"{type(exc).__name__}: {message}"


def _transport_errors() -> tuple[type[Exception], ...]:
    """The network errors of the HTTP libraries the SDK has loaded (``httpx``,
    ``httpx2``): an httpx-based SDK raises them mid-stream unwrapped.

    Example:
        >>> all(issubclass(kind, Exception) for kind in _transport_errors())
        True
    """
    found: list[type[Exception]] = []
    for name in ("httpx", "httpx2"):
        kind = getattr(sys.modules.get(name), "TransportError", None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            found.append(kind)
    return tuple(found)


def _root_cause(exc: BaseException) -> str:
    """`` (root cause: Type: message)`` for the innermost ``__cause__`` of ``exc``: the
    SDK's "Connection error." says nothing of what broke; the transport's error does.

    Example:
        >>> try:
        ...     try:
        ...         raise OSError("peer closed connection (incomplete chunked read)")
        ...     except OSError as inner:
        ...         raise RuntimeError("Connection error.") from inner
        ... except RuntimeError as outer:
        ...     print(_root_cause(outer))
         (root cause: OSError: peer closed connection (incomplete chunked read))
    """
    root = exc
    seen = {id(root)}
    while root.__cause__ is not None and id(root.__cause__) not in seen:
        root = root.__cause__
        seen.add(id(root))
    if root is exc or str(root) == str(exc):  # httpcore's error under httpx's, say
        return ""
    return f" (root cause: {type(root).__name__}: {root})"


def _query_secrets(query: object) -> list[str]:
    """The values of ``query`` (a client's ``default_query``, a request's
    ``extra_query``) that a URL's query would hide: all but those of parameters plainly
    no secret (``api-version``).

    Example:
        >>> _query_secrets({"api-version": "2024-10-21", "key": "S3cretKey"})
        ['S3cretKey']
        >>> _query_secrets({"key": ["k1-S3cret", "k2-S3cret"]})
        ['k1-S3cret', 'k2-S3cret']
        >>> _query_secrets(None)
        []
    """
    if not isinstance(query, Mapping) or not query:
        return []
    pairs: list[tuple[str, str]] = []
    for name, value in query.items():
        # A list goes out as one value each ("key[]=k1&key[]=k2" from the SDK).
        values = value if isinstance(value, (list, tuple)) else [value]
        pairs += [(str(name), str(item)) for item in values]
    return url_secrets("http://x/?" + urlencode(pairs))
