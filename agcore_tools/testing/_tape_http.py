"""The model's side of a cassette: HTTP requests and responses, recorded and replayed.

The OpenAI SDK takes ``http_client=``; the transports in ``_transports`` plug into
such a client: one wraps the real transport and writes down each request body and the
response (JSON, server-sent events or text) as it passes, the other answers from
:class:`HttpTape` without a socket. Nothing about the connection is kept: no request header at
all, and of a response's headers only its content type and retry hints. The values of
secret-looking query parameters and JSON request-body fields are replaced, and the secrets
seen (those, the key in ``Authorization``, ``api-key`` and the like, cookies, a URL's
password) are collected so that the cassette can make sure no copy of them is left
anywhere in the file: a token in the URL's path included, when it is also one of these.
"""

from __future__ import annotations

import base64
import collections
import json
import logging
import re
import urllib.parse
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..error import CassetteError, CassetteMismatchError
from ._diff import SCRUBBED, first_difference, json_path, scrubbed_match

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "KEPT_HEADERS",
    "SCRUBBED",
    "HttpTape",
    "collect_header_secrets",
    "decode_body",
    "encode_body",
    "json_bytes",
    "request_entry",
    "secret_named",
]

logger = logging.getLogger("agcore_tools.testing")


# A header, query parameter or body field whose name holds one of these carries a secret
# (Authorization, X-Api-Key, access_token, apiKey, X-Amz-Signature).
_SECRET_NAME = re.compile(
    r"auth|key|token|secret|password|passwd|pwd|cookie|session|signature|sig$|credential",
    re.IGNORECASE,
)
# Azure Functions' and API Management's key is ?code=...; a body's "code" field is code
# (the Responses API sends a code interpreter's calls back), so it counts in queries only.
_SECRET_QUERY = re.compile(rf"{_SECRET_NAME.pattern}|^code$", re.IGNORECASE)
# Request fields of the OpenAI APIs whose names look secret and are not.
_NOT_SECRET = frozenset({"prompt_cache_key"})
_BOUNDARY = re.compile(r'multipart/.*;\s*boundary="?([^";]+)', re.IGNORECASE)
_FIXED_BOUNDARY = b"agcore-cassette-boundary"
KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-should-retry")
"""The response headers a cassette keeps."""


def json_bytes(value: Any, indent: int | None = None) -> bytes:
    """``value`` as UTF-8 JSON, non-ASCII text as it is unless a string holds a lone
    surrogate, which only an escape can carry: then all of it escaped.

    Example:
        >>> json_bytes({"t": "é"}), json_bytes({"t": "\\ud83d"})
        (b'{"t": "\\xc3\\xa9"}', b'{"t": "\\\\ud83d"}')
    """
    try:  # half an emoji, when a stream splits its surrogate pair between two chunks
        return json.dumps(value, indent=indent, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value, indent=indent).encode()


def _parse_sse(text: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        fields = [line.partition(":") for line in lines]
        names = [name for name, _, _ in fields]
        simple = all(name in ("event", "data") for name in names) and names.count("data") == 1
        if not simple or names.count("event") > 1:
            events.append({"raw": block})
            continue
        event: dict[str, Any] = {}
        for name, _, value in fields:
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event["event"] = value
            elif value[:1] in ("{", "["):
                try:
                    event["data"] = json.loads(value)
                except ValueError:
                    event["data"] = value
            else:
                event["data"] = value
        events.append(event)
    return events


def _render_sse(events: list[dict[str, Any]]) -> bytes:
    parts: list[bytes] = []
    for event in events:
        if "raw" in event:
            parts.append(f"{event['raw']}\n\n".encode())
            continue
        data = event.get("data", "")
        text = data.encode() if isinstance(data, str) else json_bytes(data)
        head = f"event: {event['event']}\n" if "event" in event else ""
        parts.append(f"{head}data: ".encode() + text + b"\n\n")
    return b"".join(parts)


def encode_body(content_type: str, body: bytes) -> dict[str, Any]:
    """A body as the cassette keeps it: ``json``, ``sse`` events, ``text`` or ``base64``;
    a multipart body (a file upload) with a fixed boundary, as httpx picks a random one
    for each request."""
    if not body:
        return {}
    multipart = _BOUNDARY.search(content_type)
    if multipart is not None:
        body = body.replace(b"--" + multipart.group(1).encode(), b"--" + _FIXED_BOUNDARY)
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body).decode()}
    if "event-stream" in content_type:
        return {"sse": _parse_sse(text)}
    if "json" in content_type or text[:1] in ("{", "["):
        try:
            return {"json": json.loads(text)}
        except ValueError:
            pass
    return {"text": text}


def decode_body(entry: dict[str, Any]) -> bytes:
    """The bytes of a body kept by :func:`encode_body`."""
    if "json" in entry:
        return json_bytes(entry["json"])
    if "sse" in entry:
        return _render_sse(entry["sse"])
    if "text" in entry:
        return str(entry["text"]).encode()
    if "base64" in entry:
        return base64.b64decode(entry["base64"])
    return b""


def _scrubbed_url(url: httpx2.URL, secrets: set[str]) -> str:
    parts = urllib.parse.urlsplit(str(url))
    query = []
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_QUERY.search(name):
            secrets.add(value)
            value = SCRUBBED
        query.append((name, value))
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    if parts.username or parts.password:
        secrets.update(filter(None, (parts.username, parts.password)))
    return urllib.parse.urlunsplit(
        (parts.scheme, netloc, parts.path, urllib.parse.urlencode(query), "")
    )


def secret_named(name: str) -> bool:
    """Whether a header, query parameter, body field or variable ``name`` holds a word
    of a secret's (``auth``, ``key``, ``token``, ``secret``, ``password``, ...).

    Example:
        >>> [secret_named(n) for n in ("X-Api-Key", "SECRET_KEY_BASE", "NODE_ENV")]
        [True, True, False]
    """
    return _SECRET_NAME.search(name) is not None


def collect_header_secrets(headers: Iterable[tuple[str, str]], secrets: set[str]) -> None:
    """Add to ``secrets`` the values of the ``headers`` (name, value) named like secrets
    (and ``OpenAI-Organization``): the whole value, the credential after its scheme,
    each cookie's value.

    Example:
        >>> found = set()
        >>> collect_header_secrets([("Authorization", "Bearer t1"), ("Accept", "text/html")], found)
        >>> sorted(found)
        ['Bearer t1', 't1']
    """
    for name, value in headers:
        if not _SECRET_NAME.search(name) and name.lower() not in ("openai-organization",):
            continue
        secrets.add(value)
        scheme, _, credential = value.partition(" ")
        if credential and scheme.lower() in ("bearer", "basic", "token"):
            secrets.add(credential)
        secrets.update(filter(None, (c.partition("=")[2].strip() for c in value.split(";"))))


def _scrubbed_json(value: Any, secrets: set[str]) -> Any:
    # Only a string is a secret: what "api_key" names in a tool's JSON schema is a schema.
    if isinstance(value, dict):
        kept = {}
        for name, item in value.items():
            if isinstance(item, str) and name not in _NOT_SECRET and _SECRET_NAME.search(name):
                secrets.add(item)
                item = SCRUBBED
            kept[name] = _scrubbed_json(item, secrets)
        return kept
    if isinstance(value, list):
        return [_scrubbed_json(item, secrets) for item in value]
    return value


def request_entry(request: httpx2.Request, body: bytes, secrets: set[str]) -> dict[str, Any]:
    """A request as the cassette keeps it: method, scrubbed URL and body; no header.

    Example:
        >>> import httpx2
        >>> request = httpx2.Request("POST", "https://gw.example/v1/chat/completions?code=k1",
        ...     json={"model": "m", "api_key": "sk-in-body-123", "max_tokens": 5})
        >>> found = set()
        >>> request_entry(request, request.read(), found)
        {'method': 'POST', 'url': 'https://gw.example/v1/chat/completions?code=%5Bscrubbed%5D', 'json': {'model': 'm', 'api_key': '[scrubbed]', 'max_tokens': 5}}
        >>> sorted(found)
        ['k1', 'sk-in-body-123']
    """
    collect_header_secrets(request.headers.multi_items(), secrets)
    entry = {"method": request.method, "url": _scrubbed_url(request.url, secrets)}
    entry.update(encode_body(request.headers.get("content-type", ""), body))
    if "json" in entry:
        entry["json"] = _scrubbed_json(entry["json"], secrets)
    return entry


def _body(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("method", "url")}


def _route(method: str, url: str) -> str:
    return f"{method} {urllib.parse.unquote(urllib.parse.urlsplit(url).path)}"


class HttpTape:
    """The HTTP interactions of a cassette, in order, and which were replayed."""

    def __init__(self, interactions: list[dict[str, Any]], secrets: set[str]) -> None:
        self.interactions = interactions
        """The cassette's list (HTTP and MCP interactions), shared."""
        self.secrets = secrets
        """Secret values seen while recording (the cassette scrubs them on save)."""
        self.mismatch: CassetteMismatchError | None = None
        """The first difference met while replaying, if any."""
        self.sent: list[dict[str, Any]] = []
        """The requests (as :func:`request_entry` gives them) this run sent, in order."""
        self._queues: dict[str, collections.deque[tuple[int, dict[str, Any]]]] = {}
        self._order: list[dict[str, Any]] = []
        self._played: set[int] = set()
        self.rewind()

    def rewind(self) -> None:
        """Start replaying from the first recorded request again."""
        self._order = [i for i in self.interactions if i.get("kind") == "http"]
        self._queues = collections.defaultdict(collections.deque)
        for index, interaction in enumerate(self._order):
            request = interaction["request"]
            self._queues[_route(request["method"], request["url"])].append((index, interaction))
        self._played = set()
        self.sent = []

    def record(self, interaction: dict[str, Any]) -> None:
        """Add a new interaction (its response may be filled in later)."""
        self.interactions.append(interaction)
        self.sent.append(interaction["request"])

    def unplayed(self) -> list[int]:
        """The indexes of the recorded requests no replayed request asked for."""
        return [i for i in range(len(self._order)) if i not in self._played]

    def played(self) -> list[int]:
        """The indexes of the recorded requests a replayed request was answered from."""
        return sorted(self._played)

    def play(self, got: dict[str, Any]) -> dict[str, Any]:
        """The recorded response to the request ``got`` (a :func:`request_entry`).

        The answer is the first unplayed interaction on the request's route (method
        and path, where a ``[scrubbed]`` secret matches any text; the host is not
        compared) whose body matches, tool results aside: so
        identical requests are answered in their recorded order, and runs made
        concurrently replay though they now send their requests in another order.
        When none matches, raises :class:`CassetteMismatchError`: saying where the
        same request was recorded, if it was on another path (a client replaying
        against another base URL), or else at the first difference from the oldest
        unplayed request on the route.
        """
        self.sent.append(got)
        route = _route(got["method"], got["url"])
        theirs = _body(got)
        queue = self._queues.get(route)
        if not queue:  # a recorded path with a secret in it, scrubbed
            queue = next(
                (q for r, q in self._queues.items() if q and scrubbed_match(r, route)), None
            )
        if not queue:
            self._fail(self._moved(route, theirs) or self._mismatch_route(route))
        assert queue is not None
        differences = []
        for index, interaction in queue:
            found = first_difference(_body(interaction["request"]), theirs)
            if found is None:
                break
            differences.append((index, found))
        else:
            index, (path, old, new) = differences[0]
            if path and path[0] in ("json", "text", "sse", "base64"):
                path = path[1:]
            moved = self._moved(route, theirs)
            self._fail(moved or CassetteMismatchError(index, json_path(path), old, new))
        del queue[len(differences)]
        self._played.add(index)
        response: dict[str, Any] | None = interaction.get("response")
        if response is None:  # a cassette saved before transport errors were recorded
            raise CassetteError(
                f"request {index} ({route}) has no recorded response: it failed or was "
                "cut off while recording; record the cassette again"
            )
        return response

    def _moved(self, route: str, body: dict[str, Any]) -> CassetteMismatchError | None:
        """The error for a request recorded, unplayed, on another path to the same
        endpoint only (``/v1/chat/completions``, ``/api/v1/chat/completions``)."""
        endpoint = route.rsplit("/", 1)[-1]
        for recorded, queue in self._queues.items():
            if recorded == route or recorded.split(" ", 1)[0] != route.split(" ", 1)[0]:
                continue
            if recorded.rsplit("/", 1)[-1] != endpoint or scrubbed_match(recorded, route):
                continue
            for index, interaction in queue:
                if first_difference(_body(interaction["request"]), body) is None:
                    return CassetteMismatchError(
                        index,
                        "url",
                        recorded,
                        route,
                        message=f"request {index} was recorded as {recorded!r} and replayed "
                        f"as {route!r}: the client's base URL differs from the recording's",
                    )
        return None

    def _mismatch_route(self, route: str) -> CassetteMismatchError:
        waiting = self.unplayed()
        if not waiting:
            count = len(self._order)
            return CassetteMismatchError(
                count,
                "url",
                None,
                route,
                message=f"request {count} ({route}) is past the end of the cassette, "
                f"which holds {count} request(s)",
            )
        index = waiting[0]
        request = self._order[index]["request"]
        return CassetteMismatchError(index, "url", _route(request["method"], request["url"]), route)

    def _fail(self, error: CassetteMismatchError) -> None:
        if self.mismatch is None:
            self.mismatch = error
        logger.error("replay: %s", error)
        raise error
