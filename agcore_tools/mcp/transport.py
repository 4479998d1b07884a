"""How to reach an MCP server: a child process over stdio, or a Streamable HTTP endpoint.

These are plain descriptions; :class:`~agcore_tools.McpClient` opens them on ``connect()``.

Example:
    >>> StdioTransport("python", ["server.py"], env={"LOG_LEVEL": "debug"}).describe()
    '`python server.py`'
    >>> StreamableHttpTransport("http://127.0.0.1:8000/mcp").describe()
    'http://127.0.0.1:8000/mcp'
"""

from __future__ import annotations

import enum
import ipaddress
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, TypeAlias, overload
from urllib.parse import urlsplit

from typing_extensions import deprecated

from .._aio import positive_number
from .._deprecated import renamed
from .._keywords import checks_init_keywords
from .._redact import misread_userinfo, url_without_secrets
from ..error import ToolConfigError, _AuthTypeError
from ._command_secrets import shown_args

if TYPE_CHECKING:
    import ssl

    import httpx2

__all__ = ["McpTransport", "StdioTransport", "StreamableHttpTransport"]

_MAX_MESSAGE_SIZE = 32 * 1024 * 1024
"""The default of ``max_message_size``: the largest message taken from a server, in
bytes (32 MiB)."""


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET = _Unset.UNSET


@checks_init_keywords
@dataclass(frozen=True, slots=True, repr=False)
class StdioTransport:
    """Start the server as a child process and exchange JSON-RPC lines over its stdin/stdout.

    The child gets a minimal environment: the variables the MCP SDK's
    ``get_default_environment()`` keeps (``PATH``, ``HOME``, ``USER``, ``LOGNAME``,
    ``SHELL``, ``TERM``), plus ``env``. Secrets in the parent's environment, such as
    ``OPENAI_API_KEY``, never reach it; pass what the server needs in ``env``.
    The child runs in its own process group, and ``close()`` ends the whole group, so
    helpers it started (``npx`` starts ``node``) do not outlive it. Its stderr goes to
    the ``agcore_tools.mcp.stderr`` logger, with the values of ``env`` and those
    :meth:`describe` hides in ``args`` shown as ``***``.

    Example:
        >>> t = StdioTransport("npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"])
        >>> t.args
        ('-y', '@modelcontextprotocol/server-filesystem', '/tmp')
    """

    command: str
    """The executable, looked up on the child's ``PATH`` (a ``pathlib.Path`` is stored
    as a string)."""
    args: Sequence[str] = ()
    """Its arguments (stored as a tuple; None is taken as none)."""
    env: Mapping[str, str] | None = None
    """Extra environment variables, added over the minimal default environment."""
    cwd: str | os.PathLike[str] | None = None
    """The child's working directory; None keeps the parent's."""
    stop_grace: float = 2.0
    """Seconds ``close()`` waits after closing the child's stdin, and again after
    SIGTERM, before escalating (to SIGTERM, then SIGKILL)."""
    max_message_size: int | None = _MAX_MESSAGE_SIZE
    """The longest line taken from the child's stdout, in bytes (a message, a result
    with it, is one line); None for no limit. A longer one is not kept: the request it
    answers fails at once with a recoverable :class:`~agcore_tools.McpError` naming the
    limit, the rest of the line is read and dropped, and the connection goes on with
    the next line."""

    def __post_init__(self) -> None:
        if isinstance(self.command, os.PathLike):
            object.__setattr__(self, "command", os.fspath(self.command))
        if isinstance(self.command, (list, tuple)):
            # Hidden: the arguments may hold a token.
            raise ToolConfigError(
                f"StdioTransport takes the command as a string and its arguments apart, got "
                f"a {type(self.command).__name__}: use StdioTransport(command, args=[...])"
            )
        if not isinstance(self.command, str) or not self.command:
            raise ToolConfigError(f"StdioTransport needs a non-empty command, got {self.command!r}")
        if self.args is None:  # as a config entry without "args" gives it
            object.__setattr__(self, "args", ())
        if isinstance(self.args, str):
            raise ToolConfigError(
                f"StdioTransport args must be a list of strings, got {self.args!r}"
            )
        for number, arg in enumerate(self.args):
            if not isinstance(arg, (str, int, float, os.PathLike)):
                raise ToolConfigError(
                    f"StdioTransport args[{number}] must be a string, got {_kind(arg)}"
                )
        # Frozen: normalise through object.__setattr__ so callers' lists can't change it later.
        object.__setattr__(self, "args", tuple(str(a) for a in self.args))
        if self.env is not None:
            object.__setattr__(
                self, "env", _strings("StdioTransport env", self.env, "env={'NAME': 'value'}")
            )
        if not self.stop_grace > 0:
            raise ToolConfigError(
                f"StdioTransport stop_grace must be positive, got {self.stop_grace!r}"
            )
        _check_size("StdioTransport", self.max_message_size)

    def describe(self) -> str:
        """The command line as a shell would take it, in backticks, for messages, with
        its secrets hidden: a URL's user and password and its query's values; the
        value of an option or ``NAME=value`` named for a secret (``--token``,
        ``--api-key``, ``--password``, ``--pat``, ``GITHUB_PERSONAL_ACCESS_TOKEN=``,
        ...), in a connection string too (``Server=db;Password=...``); of a
        ``-e``/``--env`` value (docker's), what the server's text is masked with for an
        ``env`` value (whole when its name marks a secret or it is no URL or plain
        absolute path; of a URL, its password, query values and path keys; of a plain
        path, nothing); every header's value after
        ``--header``/``-H`` (mcp-remote's); and, wherever it stands, a key known by
        its prefix (``sk-``, ``ghp_``, ``github_pat_``, ``xoxb-``, ``glpat-``,
        ``AKIA``, ...) followed by 16 or more characters, a digit among them.

        Example:
            >>> StdioTransport("npx", ["server-postgres", "postgresql://app:pw@db/prod",
            ...                        "--api-key=k1", "--token", "t1"]).describe()
            "`npx server-postgres postgresql://db/prod '--api-key=***' --token '***'`"
            >>> StdioTransport("docker", ["run", "-i", "--rm", "-e", "GITHUB_TOKEN=ghp_1",
            ...                           "ghcr.io/github/github-mcp-server"]).describe()
            "`docker run -i --rm -e 'GITHUB_TOKEN=***' ghcr.io/github/github-mcp-server`"
            >>> StdioTransport("docker", ["run", "-e", "GRAFANA_URL=http://127.0.0.1:3000",
            ...                           "-e", "DB_URL=postgresql://app:pw@db/prod"]).describe()
            '`docker run -e GRAFANA_URL=http://127.0.0.1:3000 -e DB_URL=postgresql://db/prod`'
            >>> StdioTransport("npx", ["mcp-remote", "https://mcp.example.com/sse",
            ...                        "--header", "Authorization: Bearer t1"]).describe()
            "`npx mcp-remote https://mcp.example.com/sse --header 'Authorization: ***'`"
            >>> StdioTransport("npx", ["-y", "@acme/mcp-server", "sk-proj-0123456789abcdef",
            ...                        "--conn", "Server=db;User Id=app;Pwd=pw1"]).describe()
            "`npx -y @acme/mcp-server '***' --conn 'Server=db;User Id=app;Pwd=***'`"
        """
        return f"`{shlex.join([self.command, *shown_args(self.args)])}`"

    def __repr__(self) -> str:
        # env's values are the server's secrets (tokens, keys): their names only; args
        # may hold them too (a database URL with its password).
        env = None if self.env is None else dict.fromkeys(self.env, "***")
        return (
            f"StdioTransport(command={self.command!r}, args={shown_args(self.args)!r}, "
            f"env={env!r}, cwd={self.cwd!r}, stop_grace={self.stop_grace!r}, "
            f"max_message_size={self.max_message_size!r})"
        )


@checks_init_keywords
@dataclass(frozen=True, slots=True, init=False, repr=False)
class StreamableHttpTransport:
    """Talk to a server at a Streamable HTTP endpoint (MCP's HTTP transport).

    The HTTP settings (TLS, proxy, timeouts) configure the client this library builds
    on the MCP SDK's HTTP stack; ``http_client_factory`` replaces that client with
    yours (then leave ``verify``, ``cert`` and ``proxy`` alone: configure your client).
    ``max_sse_event_size=`` still works, with a ``DeprecationWarning``: it is
    ``max_message_size``, which now bounds every answer, not only those over SSE.

    Example:
        >>> t = StreamableHttpTransport("https://mcp.example.com/mcp", {"Authorization": "Bearer ..."})
        >>> sorted(t.headers)
        ['Authorization']
        >>> StreamableHttpTransport("https://mcp.internal/mcp", verify="/etc/ssl/corp-ca.pem",
        ...     cert=("client.pem", "client.key"), proxy="http://proxy:3128").max_message_size
        33554432
    """

    url: str
    """The endpoint, such as ``http://127.0.0.1:8000/mcp``."""
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    """Extra HTTP headers sent with every request (authorisation, for example);
    stored as a dict (empty when None). Left out of ``repr()``: they may hold secrets."""
    auth: httpx2.Auth | None = field(default=None, repr=False, compare=False)
    """Authenticates every request: the MCP SDK's ``OAuthClientProvider`` (OAuth with
    discovery, registration, PKCE, refresh and scope step-up), one of its
    client-credentials providers, or any other ``httpx2.Auth``. See the MCP guide."""
    verify: bool | str | ssl.SSLContext = True
    """TLS verification: True (the system's CAs), False (none), a CA bundle file or
    directory, or an :class:`ssl.SSLContext`."""
    cert: str | tuple[str, str] | None = None
    """A client certificate: one PEM file with certificate and key, or (cert, key) files
    (with an :class:`ssl.SSLContext` in ``verify``, load it into that instead)."""
    proxy: str | None = None
    """A proxy URL for every request (``http``, ``https``, ``socks5`` or ``socks5h``;
    ``proxy:3128``, with no scheme, is kept as ``http://proxy:3128``, as the environment's
    value is read); None has each request use the proxy that
    ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` (and ``NO_PROXY``) name for its own host
    (an ``http://`` one when the value has no scheme, as httpx reads it). One that is no
    such URL is refused here, with a :class:`~agcore_tools.ToolConfigError`."""
    http_timeout: float = 30.0
    """Seconds to connect, or send a request (and, with a client of
    ``http_client_factory``, to wait for a connection of its pool)."""
    sse_read_timeout: float = 300.0
    """Seconds an open response stream may stay silent (the request timeout of
    :class:`McpClient` is what bounds a call)."""
    max_message_size: int | None = _MAX_MESSAGE_SIZE
    """The largest message taken from the server, in bytes: an ``application/json``
    answer, or one server-sent event (a result travels as one), counted once
    decompressed; None for no limit. A larger answer is not read on: its request
    fails at once with a recoverable :class:`~agcore_tools.McpError` naming the limit,
    and the connection stays up."""
    http_client_factory: Callable[..., httpx2.AsyncClient] | None = None
    """Makes the HTTP client instead of this library, called with the MCP SDK's
    ``McpHttpClientFactory`` keywords (``headers``, ``timeout``, ``auth``) once per
    connection; the connection closes the client."""

    @overload
    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        verify: bool | str | ssl.SSLContext = True,
        cert: str | tuple[str, str] | None = None,
        proxy: str | None = None,
        http_timeout: float = 30.0,
        sse_read_timeout: float = 300.0,
        max_message_size: int | None = _MAX_MESSAGE_SIZE,
        http_client_factory: Callable[..., httpx2.AsyncClient] | None = None,
    ) -> None: ...

    @overload
    @deprecated(
        "StreamableHttpTransport(max_sse_event_size=...) is deprecated; use "
        "StreamableHttpTransport(max_message_size=...)",
        category=None,  # renamed() warns at run time
    )
    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        verify: bool | str | ssl.SSLContext = True,
        cert: str | tuple[str, str] | None = None,
        proxy: str | None = None,
        http_timeout: float = 30.0,
        sse_read_timeout: float = 300.0,
        max_message_size: int | None = _MAX_MESSAGE_SIZE,
        http_client_factory: Callable[..., httpx2.AsyncClient] | None = None,
        *,
        max_sse_event_size: int | None,
    ) -> None: ...

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        verify: bool | str | ssl.SSLContext = True,
        cert: str | tuple[str, str] | None = None,
        proxy: str | None = None,
        http_timeout: float = 30.0,
        sse_read_timeout: float = 300.0,
        max_message_size: int | None = _MAX_MESSAGE_SIZE,
        http_client_factory: Callable[..., httpx2.AsyncClient] | None = None,
        *,
        max_sse_event_size: int | _Unset | None = _UNSET,
    ) -> None:
        if max_sse_event_size is not _UNSET:
            renamed(
                "StreamableHttpTransport(max_sse_event_size=...)",
                "StreamableHttpTransport(max_message_size=...)",
                stacklevel=4,  # past checks_init_keywords' wrapper, at the caller's line
            )
            if max_message_size not in (_MAX_MESSAGE_SIZE, max_sse_event_size):
                raise ToolConfigError(
                    "StreamableHttpTransport takes max_message_size or its old name "
                    "max_sse_event_size, not both: give max_message_size alone"
                )
            max_message_size = max_sse_event_size
        given: tuple[object, ...] = (url, headers, auth, verify, cert, proxy, http_timeout)
        given += (sse_read_timeout, max_message_size, http_client_factory)
        for spec, value in zip(fields(self), given, strict=True):
            object.__setattr__(self, spec.name, value)
        self.__post_init__()

    @property
    @deprecated(
        "StreamableHttpTransport.max_sse_event_size is deprecated; use "
        "StreamableHttpTransport.max_message_size",
        category=None,
    )
    def max_sse_event_size(self) -> int | None:
        """Deprecated: use :attr:`max_message_size`.

        Example:
            >>> import warnings
            >>> with warnings.catch_warnings(record=True) as caught:  # it warns
            ...     warnings.simplefilter("always")
            ...     StreamableHttpTransport("https://x/mcp", max_message_size=1024).max_sse_event_size
            1024
            >>> caught[0].category.__name__
            'DeprecationWarning'
        """
        renamed(
            "StreamableHttpTransport.max_sse_event_size",
            "StreamableHttpTransport.max_message_size",
        )
        return self.max_message_size

    def __post_init__(self) -> None:
        if not isinstance(self.url, str):
            kind = type(self.url).__name__  # not its repr: a URL object shows its password
            raise ToolConfigError(
                f"StreamableHttpTransport needs an http(s) URL as a str, got {kind}"
            )
        if not self.url.startswith(("http://", "https://")):
            raise ToolConfigError(  # its password, and a key in its query or path, hidden
                "StreamableHttpTransport needs an http(s) URL, got "
                f"{url_without_secrets(self.url)!r}"
            )
        try:
            urlsplit(self.url)
        except ValueError as exc:
            # A bracketed host that is no IPv6 address ("http://[::1/mcp"). The value is
            # not shown: it cannot be split to leave out its password.
            raise ToolConfigError(
                "StreamableHttpTransport needs an http(s) URL, got one whose host in "
                "brackets is no address"
            ) from exc
        if misread_userinfo(self.url) is not None:
            # Every client reads the password's start as the port ("Invalid port: ..."):
            # it could never connect, and the error would show that part of the password.
            raise ToolConfigError(
                "StreamableHttpTransport got a URL whose password holds an unencoded '/', "
                f"'?' or '#' ({url_without_secrets(self.url)!r}): percent-encode them "
                "(%2F, %3F, %23)"
            )
        object.__setattr__(self, "headers", _header_values(self.headers or {}))
        if isinstance(self.proxy, str):
            object.__setattr__(self, "proxy", _proxy_url(self.proxy))
        if self.auth is not None:
            _check_auth(self.auth)
        _check_http_settings(self)

    def describe(self) -> str:
        """The URL without credentials, for messages: no user or password, the query's
        values hidden (hosted servers take keys as ``?token=...``), and its parts with no
        ``=`` but for short words (``?<key>``, not ``?debug``), and the path's segments
        that hold a key (``/u/<key>/mcp``; see ``_redact.url_without_secrets``).

        Example:
            >>> StreamableHttpTransport("https://u:pw@mcp.example.com/mcp?key=s3cret").describe()
            'https://mcp.example.com/mcp?key=***'
        """
        return url_without_secrets(self.url)

    def __repr__(self) -> str:
        # headers and auth are left out, and the URLs' credentials hidden: secrets.
        shown = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("headers", "auth", "http_client_factory")
        }
        shown["url"] = self.describe()
        if isinstance(self.proxy, str):
            shown["proxy"] = url_without_secrets(self.proxy)
        return f"StreamableHttpTransport({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


def split_command_hint(transport: StdioTransport) -> str:
    """For a command that could not be started: when it holds whitespace and names no
    file, how to give it as a program and its arguments (secrets in them hidden, as
    :meth:`StdioTransport.describe` hides them); else ``""``.

    Example:
        >>> split_command_hint(StdioTransport("npx -y server-fs /tmp"))
        "; a command line goes as the program and a list of arguments: StdioTransport('npx', ['-y', 'server-fs', '/tmp'])"
        >>> split_command_hint(StdioTransport("npx", ["-y", "server-fs"]))
        ''
    """
    command = transport.command
    if not any(c.isspace() for c in command) or os.path.exists(command):
        return ""
    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote
        words = command.split()
    if not words:
        return ""
    args = list(shown_args([*words[1:], *transport.args]))
    return (
        "; a command line goes as the program and a list of arguments: "
        f"StdioTransport({words[0]!r}, {args!r})"
    )


def _strings(what: str, values: Mapping[str, object], example: str) -> dict[str, str]:
    if not isinstance(values, Mapping):
        # "A=1" or "Authorization: Bearer ..." failed on .items(); not shown: a secret.
        raise ToolConfigError(
            f"{what} must be a dict of names to strings, got {_kind(values)}: use {example}"
        )
    # None would be sent as the string "None" (an unset variable read with os.environ.get).
    for key, value in values.items():
        if not isinstance(key, str):
            raise ToolConfigError(f"{what} must map names to strings, got a {_kind(key)} name")
        if not isinstance(value, (str, int, float)):
            raise ToolConfigError(f"{what}[{key!r}] must be a string, got {_kind(value)}")
    return {key: str(value) for key, value in values.items()}


def _header_values(headers: Mapping[str, object]) -> dict[str, str]:
    # A token read from a file ends in a newline: HTTP drops whitespace around a value
    # anyway, so it goes; one left inside would make the HTTP library's error quote the
    # whole value, token and all.
    what = "StreamableHttpTransport headers"
    given = _strings(what, headers, "headers={'Authorization': 'Bearer ...'}")
    values = {key: value.strip(" \t\r\n") for key, value in given.items()}
    for key, value in values.items():
        if not value.isascii() or any(c in value for c in "\r\n\0"):
            raise ToolConfigError(
                f"{what}[{key!r}] holds a line break, a NUL or a non-ASCII character, which "
                "an HTTP header cannot carry (its value is not shown: it may be a secret)"
            )
    return values


def _kind(value: object) -> str:
    # Its type only: the value may be a secret.
    return "None" if value is None else type(value).__name__


def _check_auth(auth: object) -> None:
    import httpx2  # only when auth is given, and then the caller has imported it already

    if not isinstance(auth, httpx2.Auth):
        raise _AuthTypeError(
            f"StreamableHttpTransport auth must be an httpx2.Auth, such as the MCP SDK's "
            f"OAuthClientProvider, got {type(auth).__name__}"
        )


_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")
"""The proxies httpx2 speaks to."""

_HOST_NAME = re.compile(r"[\w-]+(?:\.[\w-]+)*\.?")
"""A host name: dot-separated labels of letters (of any script: IDNA is httpx2's),
digits, ``-`` and ``_``; an IPv4 address is one too."""


def _is_host(host: str) -> bool:
    """Whether ``host`` (a URL's, brackets off) can name a proxy: a host name or an IP
    address, so that ``proxy="not a url"`` (host "not a url") is refused up front.

    Example:
        >>> _is_host("proxy.internal"), _is_host("::1"), _is_host("not a url")
        (True, True, False)
    """
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)  # a zone (%eth0) included
        except ValueError:
            return False
        return True
    return _HOST_NAME.fullmatch(host) is not None


def _proxy_url(proxy: str) -> str:
    """``proxy`` with ``http://`` when it names no scheme, as ``HTTP_PROXY=proxy:3128``
    is read (and httpx and curl read it); refused when it is no proxy URL even so (another
    scheme, no host, a host that is no name or address, a port that is no number). Given
    as ``proxy=``, such a value failed only at the first request.

    Example:
        >>> _proxy_url("proxy:3128"), _proxy_url("socks5://proxy:1080")
        ('http://proxy:3128', 'socks5://proxy:1080')
    """
    url = proxy.strip()
    url = url if "://" in url else f"http://{url}"
    refused = (
        "StreamableHttpTransport proxy must be a proxy URL such as 'http://proxy:3128' "
        "(http, https, socks5 or socks5h), got"
    )
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        # A bracketed host that is no IPv6 address. The value is not shown: it cannot be
        # split to leave out its password.
        raise ToolConfigError(f"{refused} one whose host in brackets is no address") from exc
    try:
        parts.port  # noqa: B018 - reading it checks it: "proxy:abc" fails here
    except ValueError:
        ok = False
    else:
        host = parts.hostname
        ok = parts.scheme.lower() in _PROXY_SCHEMES and host is not None and _is_host(host)
    if not ok:
        raise ToolConfigError(f"{refused} {url_without_secrets(url)!r}")
    return url


def _check_http_settings(t: StreamableHttpTransport) -> None:
    for name in ("http_timeout", "sse_read_timeout"):
        value = getattr(t, name)
        if not positive_number(value):
            raise ToolConfigError(
                f"StreamableHttpTransport {name} must be a positive number, got {value!r}"
            )
    _check_size("StreamableHttpTransport", t.max_message_size)
    if t.cert is not None and not isinstance(t.verify, (bool, str)):
        raise ToolConfigError(
            "StreamableHttpTransport: with an SSLContext in verify, load the client "
            "certificate into it (load_cert_chain) instead of passing cert"
        )
    if t.http_client_factory is not None:
        if not callable(t.http_client_factory):
            raise ToolConfigError("StreamableHttpTransport http_client_factory must be callable")
        if t.verify is not True or t.cert is not None or t.proxy is not None:
            raise ToolConfigError(
                "StreamableHttpTransport: with http_client_factory, set verify, cert and proxy "
                "on the client the factory makes"
            )


def _check_size(owner: str, size: object) -> None:
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        raise ToolConfigError(
            f"{owner} max_message_size must be a positive int (bytes) or None, got {size!r}"
        )


McpTransport: TypeAlias = "StdioTransport | StreamableHttpTransport"
"""Either transport."""
