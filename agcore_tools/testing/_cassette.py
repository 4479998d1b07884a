"""Record a real run once, replay it in tests: :class:`Cassette`."""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, cast

from typing_extensions import Self

from .._version import __version__
from ..cycle.transport import sdk_is_httpx2_based
from ..error import (
    CassetteError,
    CassetteMismatchError,
    _CassetteConfigError,
    _CassetteTypeError,
)
from ..mcp import McpClient, StdioTransport, StreamableHttpTransport
from ..mcp._stderr import named_transport_secrets
from ._check import check_cassette
from ._tape_http import SCRUBBED, HttpTape, collect_header_secrets, json_bytes, secret_named
from ._tape_mcp import CassetteMcpClient, McpTape

if TYPE_CHECKING:
    import httpx2
    from openai import AsyncOpenAI

__all__ = ["Cassette", "RecordMode"]

logger = logging.getLogger("agcore_tools.testing")

RecordMode = Literal["once", "rewrite", "none"]
"""When a :class:`Cassette` records: ``"once"`` when its file does not exist yet (then
it replays), ``"rewrite"`` always (the run goes to the real model and servers again),
``"none"`` never (a missing file is an error)."""

_MODES = ("once", "rewrite", "none")
_VERSION = 1
# Shorter values found in the requests ("test", "1") are too likely to be ordinary text;
# the values given as ``secrets=`` are scrubbed whatever their length.
_MIN_SECRET = 8
# Also secret in an MCP server's env, as StdioTransport.describe() hides them: a
# webhook's URL is its own credential (SLACK_WEBHOOK_URL, SLACK_HOOK_URL), and so is
# what a name calls private (GOOGLE_PRIVATE_KEY_ID, SERVICE_PRIVATE_ID)...
_SECRET_ENV = re.compile(r"hook|private", re.IGNORECASE)
# ... but not where files are (GIT_HOOKS_PATH, HOOKS_DIR, PRIVATE_DIR): a path, scrubbed
# from the whole file, would change what is replayed. Doubt scrubs: a webhook's name is
# secret whatever it ends in, and so is one naming a URL, a link or an endpoint; a PATH
# after a single HOOK is a webhook's URL path (SLACK_HOOK_PATH=/services/T0/B0/secret),
# and the rule of secret_named() applies to all (PRIVATE_KEY_PATH holds "key").
_FOLDER = re.compile(r"(?:^|[_-])(?:dir|dirs|directory|folder)$", re.IGNORECASE)
_PATH = re.compile(r"(?:^|[_-])paths?$", re.IGNORECASE)
_ONE_HOOK = re.compile(r"hook(?!s)", re.IGNORECASE)
_WEB = re.compile(r"url|uri|link|endpoint|route|host|addr", re.IGNORECASE)
_ENDPOINTS = ("/chat/completions", "/responses", "/models", "/embeddings", "/completions")


class Cassette:
    """One JSON file holding a run's model requests and responses and its MCP calls.

    Recording, :meth:`client` (or :meth:`http_client`, for an ``AsyncOpenAI`` you make)
    sends each request to the real model and writes it down with its answer: Chat
    Completions and Responses, JSON and server-sent events; and :meth:`mcp` wraps an
    :class:`~agcore_tools.McpClient` so its tool list and tool calls are written down
    too. :meth:`save` (or leaving ``with``) writes the file, with no request header,
    no value of a secret-looking query parameter or JSON body field, and no copy of
    any key or cookie the requests carried, or of a wrapped MCP server's ``env``,
    header or command-line secrets or of the credentials its requests carried,
    anywhere (see the testing guide for the list).

    Replaying, the same calls answer from the file: no socket, no server process.
    Each request must match the recorded one (the model, the messages, the tools, the
    options), except for tool results, which may differ; the first difference raises
    :class:`~agcore_tools.testing.CassetteMismatchError` with the request's index and the JSON
    path (``request 2 differs at messages[3].content: recorded 'x', got 'y'``).
    Leaving ``with`` also fails if a recorded request was never asked for again.
    Wrap a replay in :func:`no_network` to make sure nothing goes out.

    Example:
        Record a run against a model (here the scripted one), then replay it offline:

        >>> import asyncio, tempfile, pathlib
        >>> from agcore_tools import CycleConfig, LlmCycle, ToolRegistry
        >>> from agcore_tools.testing import ScriptedChatServer, no_network
        >>> registry = ToolRegistry()
        >>> @registry.tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> async def run(cassette: Cassette, **options) -> list[dict]:
        ...     async with cassette.client(**options) as client:
        ...         cycle = LlmCycle(CycleConfig("m"), client=client)
        ...         await cycle.submit_with_tools("What is 2 + 3?", registry)
        ...         return cycle.messages
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "add.json"
        >>> script = [ScriptedChatServer.reply_tool_calls([("add", {"a": 2, "b": 3})]),
        ...           ScriptedChatServer.reply_text("5")]
        >>> with ScriptedChatServer(script) as server, Cassette(path) as cassette:
        ...     print(cassette.mode, cassette.recording)
        ...     recorded = asyncio.run(run(cassette, base_url=server.base_url, api_key="sk-secret-123"))
        once True
        >>> "sk-secret-123" in path.read_text()
        False
        >>> with no_network(), Cassette(path, "none") as cassette:
        ...     print(cassette.recording, len(cassette.requests))  # GET /models, then 2 turns
        ...     replayed = asyncio.run(run(cassette))
        False 3
        >>> replayed == recorded
        True
        >>> cassette.requests[2]["messages"][-1]["content"]  # the tool's result
        '5'
        >>> cassette.sent[2]["messages"][-1]["content"]  # this run's tool result
        '5'
        >>> cassette.path == path, len(cassette.interactions)
        (True, 3)

        A changed request is reported at its first difference:

        >>> async def other(cassette: Cassette) -> None:
        ...     async with cassette.client() as client:
        ...         await LlmCycle(CycleConfig("m"), client=client).submit_with_tools(
        ...             "What is 2 + 4?", registry)
        >>> cassette = Cassette(path, "none")
        >>> asyncio.run(other(cassette))
        Traceback (most recent call last):
        ...
        agcore_tools.error.CassetteMismatchError: request 1 differs at messages[0].content: recorded 'What is 2 + 3?', got 'What is 2 + 4?'
        >>> cassette.rewind()
        >>> asyncio.run(run(cassette)) == recorded
        True
        >>> cassette.check()
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: RecordMode = "once",
        *,
        secrets: Iterable[str] = (),
    ) -> None:
        """Open the cassette at ``path``: read it to replay, or start an empty one to record.

        Args:
            path: The JSON file.
            mode: When to record (see :data:`RecordMode`).
            secrets: More values to scrub from the file on save (a password that a
                tool's arguments carry, a token in the base URL's path, say), beside
                the keys and cookies found in the requests' headers, query strings and
                JSON bodies and the MCP transports' secrets: a list of strings, each
                scrubbed whatever its length (those found are scrubbed from 8
                characters up).

        Raises:
            CassetteError: ``mode`` is not one of the three (then a ``ValueError`` too),
                or ``"none"`` and the file is missing, or the file is not a cassette, or
                one with a field missing or of the wrong type (a hand edit), named by
                its JSON path (``interactions[1].request has no "method"``), or the
                file cannot be opened (a name too long for the file system); also a
                ``TypeError`` when ``secrets`` is one string rather than a list of them,
                or holds a value that is not a string.
        """
        self.path = Path(path)
        """The cassette's file."""
        if mode not in _MODES:
            raise _CassetteConfigError(
                f"record mode must be 'once', 'rewrite' or 'none', got {mode!r}"
            )
        named = _named_secrets(secrets)
        self.mode: RecordMode = mode
        """When it records (see :data:`RecordMode`)."""
        exists = _is_file(self.path)
        if mode == "none" and not exists:
            raise CassetteError(f"cassette {self.path} is missing (record mode 'none')")
        self.recording = mode == "rewrite" or not exists
        """Whether this run goes to the real model and servers and is written down."""
        data = {} if self.recording else self._read()
        self.interactions: list[dict[str, Any]] = list(data.get("interactions", []))
        """Every recorded exchange in order: ``{"kind": "http", "request": ...,
        "response": ...}`` and ``{"kind": "mcp", "method": "tools/list" or
        "tools/call", ...}``."""
        self._base_urls = _recorded_base_urls(data)  # each client()'s, in order
        self._clients = 0  # replaying: the client() calls so far
        self._named = named
        self._secrets: set[str] = set()  # found in the requests while recording
        self._recorded_clients: list[McpClient] = []  # their requests' credentials, on save
        self._http = HttpTape(self.interactions, self._secrets)
        self._mcp = McpTape(self.interactions, self._http)

    @classmethod
    def from_interactions(cls, interactions: Iterable[Mapping[str, Any]]) -> Cassette:
        """A replaying cassette held in memory, with no file (for tests of tests).

        Raises ``CassetteError`` for an interaction a replay cannot use (a field missing
        or of the wrong type), naming it.

        Example:
            >>> Cassette.from_interactions([]).recording
            False
        """
        cassette = cls.__new__(cls)
        cassette.path = Path(os.devnull)
        cassette.mode = "none"
        cassette.recording = False
        cassette.interactions = [dict(i) for i in interactions]
        check_cassette({"interactions": cassette.interactions}, "Cassette.from_interactions()")
        cassette._base_urls = []
        cassette._clients = 0
        cassette._named = frozenset()
        cassette._secrets = set()
        cassette._recorded_clients = []
        cassette._http = HttpTape(cassette.interactions, cassette._secrets)
        cassette._mcp = McpTape(cassette.interactions, cassette._http)
        return cassette

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CassetteError(f"cassette {self.path} cannot be read: {exc}") from exc
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise CassetteError(f"cassette {self.path} is not a version-{_VERSION} cassette")
        check_cassette(data, f"cassette {self.path}")
        return data

    # -- the model's side ----------------------------------------------------------------

    @property
    def requests(self) -> list[Any]:
        """The recorded request bodies (parsed JSON), in order; None for a request with
        no body (the loop's ``GET /models``). Replaying, these are the recording's,
        whose tool results may differ from this run's: :attr:`sent` has this run's."""
        return [_body_of(i["request"]) for i in self.interactions if i.get("kind") == "http"]

    @property
    def sent(self) -> list[Any]:
        """The request bodies this run sent (parsed JSON), in order, as :attr:`requests`
        gives them: what to assert on for what the model was sent. Recording, the
        recorded ones; replaying, the code under test's, tool results included (the
        replay does not compare them to the recording's). :meth:`rewind` empties it."""
        return [_body_of(entry) for entry in self._http.sent]

    def http_client(self, transport: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncClient:
        """An ``http_client`` for ``AsyncOpenAI``: recording through ``transport`` (by
        default a plain ``httpx2.AsyncHTTPTransport``), or replaying with no socket.

        Raises ``CassetteError`` (a ``ValueError`` too) when the installed OpenAI SDK is
        older than 3.0: its client is built on ``httpx``, which cannot drive the
        cassette's ``httpx2`` transports.

        Example:
            >>> from openai import AsyncOpenAI
            >>> cassette = Cassette.from_interactions([])
            >>> client = AsyncOpenAI(api_key="unused", http_client=cassette.http_client())
        """
        if not sdk_is_httpx2_based():
            import openai

            raise _CassetteConfigError(
                f"Cassette needs openai>=3 (an httpx2-based client); openai "
                f"{openai.__version__} is httpx-based: upgrade openai to record and replay"
            )
        from openai import DefaultAsyncHttpxClient

        from ._transports import RecordingTransport, ReplayTransport

        if not self.recording:
            return DefaultAsyncHttpxClient(transport=ReplayTransport(self._http))
        if transport is None:
            import httpx2

            transport = httpx2.AsyncHTTPTransport()
        return DefaultAsyncHttpxClient(transport=RecordingTransport(transport, self._http))

    def client(self, **options: Any) -> AsyncOpenAI:
        """An ``AsyncOpenAI`` on :meth:`http_client` (so openai 3 or later), with the
        SDK's retries off.

        Recording, ``options`` go to ``AsyncOpenAI`` (``base_url``, ``api_key``, or the
        ``OPENAI_*`` variables as usual). Replaying, the key is a dummy and the base
        URL the one recorded for the client made in the same place: the n-th call
        replays against the n-th recorded client's, so that a run with clients of two
        providers (``.../v1`` and ``https://openrouter.ai/api/v1``) replays; ``options``
        other than those two still apply.

        Example:
            >>> Cassette.from_interactions([]).client().api_key
            'replay'
        """
        from openai import AsyncOpenAI

        options.setdefault("max_retries", 0)
        if not self.recording:
            options["api_key"] = "replay"
            options["base_url"] = self._replay_base_url(self._clients)
            self._clients += 1
            return AsyncOpenAI(http_client=self.http_client(), **options)
        client = AsyncOpenAI(http_client=self.http_client(), **options)
        self._base_urls.append(_scrubbed_base(str(client.base_url)))
        return client

    def _replay_base_url(self, number: int) -> str:
        if self._base_urls:  # a run that makes more clients than recorded: the last one's
            return self._base_urls[min(number, len(self._base_urls) - 1)]
        for interaction in self.interactions:
            if interaction.get("kind") == "http":
                url = str(interaction["request"]["url"]).split("?", 1)[0]
                for endpoint in _ENDPOINTS:
                    if url.endswith(endpoint):
                        return url[: -len(endpoint)]
        return "http://cassette.invalid/v1"

    # -- MCP -------------------------------------------------------------------------------

    def mcp(self, client: McpClient) -> CassetteMcpClient:
        """``client``'s tools through the cassette: recorded, or replayed with no server.

        Use the result where the client was used: ``async with``, ``definitions()``,
        ``call_tool()``, ``into_tools()``. Replaying, ``client`` is never connected.
        Recording, its transport's secrets are scrubbed from the file too, since a
        server may quote its token in an error or a result: the values of a stdio
        server's ``env`` entries and an HTTP server's headers whose names look secret
        (``API_TOKEN``, ``SLACK_WEBHOOK_URL``, ``Authorization`` and the token after
        ``Bearer``), and what its
        command line shows as ``***`` for such a name or a key's known prefix; and the
        credentials its requests carried (the last 64), whatever put them there (the token
        of an ``auth=`` flow, a header of an ``http_client_factory``'s client: see
        :attr:`McpClient.sent_credentials <agcore_tools.McpClient.sent_credentials>`).
        Not ordinary values (``NODE_ENV=production``): scrubbed from the whole file,
        they would change what is replayed.

        Example:
            >>> from agcore_tools import McpClient, StdioTransport
            >>> Cassette.from_interactions([]).mcp(McpClient("fs", StdioTransport("server")))
            <CassetteMcpClient 'fs' replaying>
        """
        if self.recording:
            self._secrets.update(_transport_secrets(client.transport))
            self._recorded_clients.append(client)
        return CassetteMcpClient(self._mcp, client, recording=self.recording)

    # -- the end ---------------------------------------------------------------------------

    def rewind(self) -> None:
        """Replay from the start again (the same cassette, another run).

        Example:
            >>> Cassette.from_interactions([]).rewind()
        """
        self._http.rewind()
        self._mcp.rewind()
        self._clients = 0
        self._http.mismatch = self._mcp.mismatch = None

    def check(self) -> None:
        """Raise the first difference met while replaying, if any, even one the code
        under test caught (a tool's error becomes a tool result), or a recorded
        request, or MCP tool call, that was not asked for again.

        Example:
            >>> Cassette.from_interactions([]).check()  # nothing recorded, nothing missed
        """
        if self.recording:
            return
        for mismatch in (self._http.mismatch, self._mcp.mismatch):
            if mismatch is not None:
                raise mismatch
        unplayed = self._http.unplayed()
        if unplayed:
            index = unplayed[0]
            request = [i for i in self.interactions if i.get("kind") == "http"][index]["request"]
            route = f"{request['method']} {urllib.parse.urlsplit(request['url']).path}"
            raise CassetteMismatchError(
                index,
                "url",
                route,
                None,
                message=f"request {index} ({route}) was recorded but the replay never sent it "
                f"({len(unplayed)} request(s) left)",
            )
        calls = self._mcp.unplayed()
        if calls:
            index, call = calls[0]
            raise CassetteMismatchError(
                index,
                "tool",
                call["tool"],
                None,
                message=f"MCP call {index} (tool '{call['tool']}' on server '{call['server']}') "
                f"was recorded but the replay never made it ({len(calls)} call(s) left)",
            )

    def save(self) -> None:
        """Write the file (recording only), with every secret seen replaced.

        The file is written beside the cassette and then put in its place, so a save
        that fails leaves the cassette that was there. Raises ``CassetteError`` when
        the file cannot be written.

        Example:
            >>> Cassette.from_interactions([]).save()  # replaying: nothing to write
        """
        if not self.recording:
            return
        carried = {s for client in self._recorded_clients for s in client.sent_credentials}
        found = {s for s in self._secrets | carried if len(s) >= _MIN_SECRET}
        secrets = sorted(found | self._named, key=len, reverse=True)
        data = {
            "version": _VERSION,
            "recorded_with": f"agcore_tools {__version__}",
            "base_url": self._base_urls[0] if self._base_urls else None,
            "interactions": self.interactions,
        }
        if len(set(self._base_urls)) > 1:
            data["base_urls"] = self._base_urls
        content = json_bytes(_scrub(data, secrets), indent=1) + b"\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _replace(self.path, content)
        except OSError as exc:
            raise CassetteError(f"cassette {self.path} cannot be written: {exc}") from exc
        logger.info("recorded %d interaction(s) to %s", len(self.interactions), self.path)

    def close(self) -> None:
        """Recording: :meth:`save`. Replaying: :meth:`check`.

        Example:
            >>> Cassette.from_interactions([]).close()
        """
        if self.recording:
            self.save()
        else:
            self.check()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:  # a failed run is not saved: it would be replayed as it failed
            self.close()

    def __repr__(self) -> str:
        if not hasattr(self, "interactions"):  # __init__ raised (a traceback shows it)
            return f"<Cassette {str(getattr(self, 'path', '?'))!r}, not opened>"
        mode = "recording" if self.recording else "replaying"
        return f"<Cassette {str(self.path)!r} {mode}, {len(self.interactions)} interaction(s)>"


def _named_secrets(secrets: Iterable[str]) -> frozenset[str]:
    # Never shown in the errors: the value may be the very secret to hide.
    if isinstance(secrets, (str, bytes)):
        raise _CassetteTypeError(
            f"Cassette(secrets=...) takes a list of strings, got a {type(secrets).__name__} "
            "(read as its characters, the value itself would not be scrubbed): "
            "pass secrets=[value]"
        )
    if not isinstance(secrets, Iterable):
        raise _CassetteTypeError(
            f"Cassette(secrets=...) takes a list of strings, got {type(secrets).__name__}"
        )
    named = set()
    for number, secret in enumerate(secrets):
        if not isinstance(secret, str):
            raise _CassetteTypeError(
                f"Cassette(secrets=...) takes a list of strings, got "
                f"{type(secret).__name__} at secrets[{number}]: pass each secret as a str"
            )
        if secret:
            named.add(secret)
    return frozenset(named)


def _recorded_base_urls(data: Mapping[str, Any]) -> list[str]:
    # One base URL, or none, is kept as "base_url"; "base_urls" holds each client's in
    # order when they differ.
    if "base_urls" in data:
        return list(data["base_urls"])
    return [data["base_url"]] if data.get("base_url") else []


def _replace(path: Path, content: bytes) -> None:
    # Opened by name, not by tempfile, so that the cassette gets the usual permissions
    # (mkstemp's are the owner's only). Named for the cassette, but short, so that any
    # cassette whose own name fits the file system's 255 bytes can be saved.
    temporary = path.with_name(f".{path.name[:40]}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(temporary, "xb") as file:
            file.write(content)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _body_of(request: Mapping[str, Any]) -> Any:
    return request.get("json", request.get("text"))


def _scrubbed_base(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def _is_file(path: Path) -> bool:
    """Whether the cassette ``path`` exists; a name the file system refuses (too long,
    say) is a ``CassetteError``. Not ``Path.is_file()``, which says False for any
    ``OSError`` where it is built on ``os.path.isfile()`` (Python 3.14)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except ValueError:  # a NUL in the name, as Path.is_file() takes it
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False  # what Path.is_file() takes as no file
        raise CassetteError(f"cassette {path} cannot be opened: {exc}") from exc


def _transport_secrets(transport: StdioTransport | StreamableHttpTransport) -> set[str]:
    # The rule the requests' header names are judged by applies too: a name holding
    # key, token, auth... (SECRET_KEY_BASE, which ends in no secret's word).
    found = set(named_transport_secrets(transport))
    if isinstance(transport, StdioTransport):
        env = (transport.env or {}).items()
        found.update(value for name, value in env if _secret_env(name))
    else:
        collect_header_secrets((transport.headers or {}).items(), found)
    return found


def _secret_env(name: str) -> bool:
    """Whether an MCP server's ``env`` entry ``name`` holds a secret."""
    if secret_named(name) or "webhook" in name.lower():
        return True
    if _SECRET_ENV.search(name) is None:
        return False
    if _WEB.search(name):
        return True
    if _FOLDER.search(name):
        return False
    return _PATH.search(name) is None or _ONE_HOOK.search(name) is not None


def _scrub(value: Any, secrets: list[str]) -> Any:
    # Values only: a key is the file's structure ("role", "content", a tool's name).
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, SCRUBBED)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(item, secrets) for item in value]
    return cast(Any, value)
