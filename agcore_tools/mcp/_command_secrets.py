"""Which words of a stdio server's command line, and which of its ``env`` values, are
secrets, and the line shown without them.

``StdioTransport.describe()`` and its ``repr`` show a command with its credentials as
``***``, and the server's stderr is masked with what was hidden: a token passed as
``--token X``, ``-e GITHUB_TOKEN=X``, ``-H "Authorization: Bearer X"``, a URL's password or
query, or a key known by its prefix (``ghp_...``, ``sk-...``); and with the ``env``
values :func:`env_secrets` picks, which docker's ``-e NAME=value`` are shown by too.
Its own module because the transport (what to show) and the stderr relay (what to
mask) both read it.

Example:
    >>> shown_args(["--token", "t0ps3cret", "-e", "NODE_ENV=production", "serve"])
    ('--token', '***', '-e', 'NODE_ENV=***', 'serve')
    >>> shown_args(["-e", "GRAFANA_URL=http://127.0.0.1:3000", "-e", "DATA=/data/chdb"])
    ('-e', 'GRAFANA_URL=http://127.0.0.1:3000', '-e', 'DATA=/data/chdb')
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from .._redact import (
    MIN_SECRET,
    header_secrets,
    misread_userinfo,
    url_secrets,
    url_without_secrets,
)

__all__ = ["arg_secrets", "env_secrets", "named_arg_secrets", "secret_name", "shown_args"]

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# A name ending in one of these words (GITHUB_PERSONAL_ACCESS_TOKEN, --api-key, db_password,
# --pat, a connection string's Pwd= or AccountKey=) names a secret; one merely containing
# it (--key-file, --auth-url, --path) does not.
_SECRET_NAME = re.compile(
    r"(?:[A-Za-z0-9]+[-_])*(?:token|password|passwd|pass|pwd|passphrase|key|apikey|secret|"
    r"credentials?|auth|pat|jwt|cookie|accountkey|sharedaccesskey|sharedaccesssignature)",
    re.IGNORECASE,
)
# Keys whose prefix says what they are (OpenAI's, GitHub's, Slack's, GitLab's, AWS's, ...),
# wherever they stand. At least 16 characters and a digit after the prefix: package names
# and words with such a start (sk-learn, hf_transfer) stay shown.
_KNOWN_KEY = re.compile(
    r"(?<![A-Za-z0-9_-])"
    r"(?:sk-|(?:sk|rk)_(?:live|test)_|gh[pousr]_|github_pat_|xox[abeoprs]-|xapp-|glpat-|"
    r"hf_|npm_|pypi-|AKIA|ASIA|AIza)"
    r"(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{16,}"
)
# Names of secrets that end in no such word: the HTTP credential headers, and query
# parameters carrying keys (Azure Functions' ?code=) or signatures (a SAS's sig=).
_OTHER_SECRET_NAME = re.compile(
    r"(?:proxy-)?authorization|code|(?:[A-Za-z0-9]+[-_])*(?:sig|signature)", re.IGNORECASE
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An env variable whose name holds one of these words anywhere (MYSQL_PASSWORD,
# GRAFANA_SERVICE_ACCOUNT_TOKEN, AWS_SESSION_TOKEN, KEYCLOAK_CREDENTIALS_FILE) has its
# value masked whole, whatever the value is: a secret's name is often not the last word.
# A webhook's URL is its own credential, and its key need not look like one
# (hooks.zapier.com/hooks/catch/1234567/abcde12/): SLACK_WEBHOOK_URL is hidden whole.
_SECRET_ENV_WORD = re.compile(
    r"token|key|secret|pass|pwd|auth|cred|cookie|session|private|signature|hook",
    re.IGNORECASE,
)
# An absolute file path: POSIX, home-relative, or a Windows drive's. No whitespace, and
# none of base64's "+" and "=", which a path seldom has and a key often does.
_PATH = re.compile(r"(?:/|~/|[A-Za-z]:[\\/])[^\s+=]*")
# docker run's and podman's: their values are the server's environment, shown as the
# server's text is masked for env= (see _shown_variable).
_ENV_OPTIONS = ("-e", "--env")
# docker's -e with its NAME=value attached (-eAPI_TOKEN=...): a name in capitals, as
# environment variables are written, so that an option such as -encoding=utf8 is none.
_ATTACHED_ENV = re.compile(r"-e[A-Z_][A-Z0-9_]*")
# mcp-remote's, supergateway's and curl's: header values carry credentials under
# names too varied to list (Authorization, Cookie, X-Api-Key, PRIVATE-TOKEN, ...).
_HEADER_OPTIONS = ("-H", "--header")
# A header's name alone (an HTTP token), as mcp-proxy's two-word -H NAME VALUE has it.
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


class _Hidden:
    """What :meth:`StdioTransport.describe` shows as ``***``, by why it does."""

    __slots__ = ("named", "placed")

    def __init__(self) -> None:
        self.named: list[str] = []
        """Hidden because a name or a prefix says it is a secret (``--token X``,
        ``GITHUB_TOKEN=X``, ``Authorization: X``, ``ghp_...``), or a URL's password."""
        self.placed: list[str] = []
        """Hidden only for where it stands: an ``-e`` value that is no URL or plain
        path, any header value, a URL's query value, whatever its name
        (``-e NODE_ENV=production``)."""


def shown_args(args: Sequence[str], hidden: _Hidden | None = None) -> tuple[str, ...]:
    # `hidden` collects what is shown as ***: the server's stderr is masked with it.
    into = _Hidden() if hidden is None else hidden
    # docker run's and podman run's -e NAME takes the host's value, and what follows is
    # the image or another option: a two-word -e is mcp-proxy's only.
    pairs_env = "run" not in args
    shown = []
    for n, arg in enumerate(args):
        before = args[n - 1] if n > 0 else ""
        pair = _pair_value(args[n - 2], before, arg, into, pairs_env) if n > 1 else None
        shown.append(pair if pair is not None else _shown_arg(arg, before, into))
    return tuple(shown)


def _pair_value(option: str, name: str, arg: str, hidden: _Hidden, env: bool) -> str | None:
    """``arg`` as shown when it is the value of a two-word option, mcp-proxy's
    ``-H``/``--headers NAME VALUE`` and (with ``env``) ``-e NAME VALUE``; else None. The
    value is shown as ``-H 'Name: value'`` or ``-e NAME=value`` would show it."""
    if arg.startswith("-"):
        return None
    if option in (*_HEADER_OPTIONS, "--headers") and _HEADER_NAME.fullmatch(name):
        return _shown_header(f"{name}: {arg}", hidden).partition(": ")[2]
    if env and option in _ENV_OPTIONS and _ENV_NAME.fullmatch(name):
        return _shown_variable(f"{name}={arg}", hidden).partition("=")[2]
    return None


def arg_secrets(args: Sequence[str]) -> list[str]:
    """The values in ``args`` that :meth:`StdioTransport.describe` shows as ``***``."""
    hidden = _Hidden()
    shown_args(args, hidden)
    return [*hidden.named, *hidden.placed]


def named_arg_secrets(args: Sequence[str]) -> list[str]:
    """Those of :func:`arg_secrets` that a name or a prefix marks as secrets: not the
    value of ``-e NODE_ENV=production`` or ``--header 'Accept: application/json'``.

    Example:
        >>> named_arg_secrets(["-e", "NODE_ENV=production", "-e", "API_KEY=k1",
        ...                     "--header", "Accept: text/html", "-H", "Authorization: Bearer t1",
        ...                     "https://x/mcp?workspace=w1&token=t2"])
        ['k1', 'Bearer t1', 't1', 't2']
    """
    hidden = _Hidden()
    shown_args(args, hidden)
    return hidden.named


def secret_name(name: str) -> bool:
    """Whether ``name`` (of an option, a variable, a header or a query parameter) names
    a secret: it ends in ``token``, ``key``, ``password``, ``secret``, ``pat``, ... (see
    :meth:`StdioTransport.describe`), or it is ``Authorization``, or a query's ``code``
    or ``sig`` (Azure's keys and signatures).

    Example:
        >>> [secret_name(n) for n in ("GITHUB_TOKEN", "X-Api-Key", "Authorization", "NODE_ENV")]
        [True, True, True, False]
    """
    name = name.lstrip("-").strip()
    return bool(_SECRET_NAME.fullmatch(name) or _OTHER_SECRET_NAME.fullmatch(name))


def env_secrets(env: Mapping[str, str]) -> list[str]:
    """What of a stdio server's ``env`` values its text is masked with (not what its
    ``repr`` shows: every value is ``***`` there): the whole value of a variable whose
    name holds a secret's word (``TOKEN``, ``KEY``, ``SECRET``, ``PASS``, ``PWD``,
    ``AUTH``, ``CRED``, ``COOKIE``, ``SESSION``, ``PRIVATE``, ``SIGNATURE``, ``HOOK``, or ends in
    one :func:`secret_name` knows); of a URL, only what its messages hide (its
    password, with the user before it, its query's values and bare parts, a token in
    its path or as its user), and also all from after ``://`` to its last ``@`` when
    that holds a ``:`` and a ``/``, ``?`` or ``#`` and a host follows it (a password
    urlsplit does not read), and all of it when it has a ``#`` after its host or
    urlsplit cannot read it; of an absolute file path, nothing (unless it holds a token
    or a known key); of any
    other value, all of it. A server's error quoting its endpoint (``Get
    "http://127.0.0.1:18999/api": connection refused``) or its data path is what tells
    the model and the developer what is wrong: masked, it told nothing, and hid no
    secret. :func:`~agcore_tools._redact.secret_values` then keeps those of
    :data:`~agcore_tools._redact.MIN_SECRET` characters or more, as for every value.

    Example:
        >>> env_secrets({"GRAFANA_URL": "http://127.0.0.1:18999", "CHDB_DATA_PATH": "/data/chdb",
        ...              "GRAFANA_SERVICE_ACCOUNT_TOKEN": "glsa_S3CRET", "DB_HOST": "db.internal",
        ...              "DATABASE_URL": "postgresql://app:pw-S3CRET@db/prod?sslkey=k%2B1"})
        ['glsa_S3CRET', 'db.internal', 'pw-S3CRET', 'k%2B1', 'k+1', 'app:pw-S3CRET']
    """
    found: list[str] = []
    for name, value in env.items():
        if _SECRET_ENV_WORD.search(name) or secret_name(name):
            found.append(value)
        elif _URL.match(value) and not any(c.isspace() for c in value):
            found += _url_env_secrets(value)
        elif not (_PATH.fullmatch(value) and _plain_path(value)):
            found.append(value)
    return found


def _url_env_secrets(url: str) -> list[str]:
    try:
        read = urlsplit(url).netloc.rpartition("@")[0]
    except ValueError:  # not read as a URL (an unclosed "[" of an IPv6 host)
        return [url]
    misread = misread_userinfo(url)
    if "#" in (url if misread is None else misread[1]):
        # Neither an endpoint nor a connection string has a fragment: an unencoded "#"
        # in a key or a query value ends it early, and the rest would read as an anchor.
        return [url]
    found = [*url_secrets(url), *_KNOWN_KEY.findall(url), *_userinfo_secrets(url)]
    if misread is None and ":" not in read and read and not _plain_path(f"/{read}"):
        # A token standing alone as the user (https://<token>@github.com); a user name
        # ("postgres") is no secret, and masked it would garble every mention of it.
        found.append(read)
    return found


def _userinfo_secrets(url: str) -> list[str]:
    # What a server echoing the URL shows of its password beyond the password itself:
    # the user and the password together, as written; and of a password urlsplit
    # misreads, its start, which clients read as the port ('invalid integer value
    # "Xy7" for connection option "port"'). For masking text only: a cassette scrubbed
    # of a password's start would garble what it replays.
    scheme = url.partition("://")[0]
    misread = misread_userinfo(url)
    if misread is not None:
        password = misread[0].partition(":")[2]
        return [_as_written(scheme, misread[0]), re.split(r"[/?#]", password, maxsplit=1)[0]]
    read = urlsplit(url).netloc.rpartition("@")[0]
    return [_as_written(scheme, read)] if ":" in read else []


def _as_written(scheme: str, userinfo: str) -> str:
    # The user and password as the URL writes them: a server echoes the URL whole,
    # where a password shorter than MIN_SECRET would show; and the scheme before them
    # too when even that is shorter ("redis://:pw@cache").
    return userinfo if len(userinfo) >= MIN_SECRET else f"{scheme}://{userinfo}"


def _plain_path(path: str) -> bool:
    # Its segments read as a URL's path: a token among them (a UUID, a long run of
    # letters and digits) or a known key makes it no plain path.
    try:
        tokens = url_secrets(path.replace("\\", "/"))
    except ValueError:  # "//[..." read as an IPv6 host that is none: not plain either
        return False
    return not tokens and not _KNOWN_KEY.search(path)


def _shown_arg(arg: str, before: str, hidden: _Hidden) -> str:
    # `before` is the argument ahead of this one: the option this may be the value of.
    if before.startswith("-") and not arg.startswith("-"):
        if before in _HEADER_OPTIONS:
            return _shown_header(arg, hidden)
        if before in _ENV_OPTIONS:
            return _shown_variable(arg, hidden)
        if _SECRET_NAME.fullmatch(before.lstrip("-")):
            hidden.named.append(arg)
            return "***"
    if _URL.match(arg):
        hidden.named.extend(url_secrets(arg, secret_name))
        hidden.placed.extend(url_secrets(arg))
        with contextlib.suppress(ValueError):  # unreadable: url_without_secrets hides it all
            hidden.placed.extend(_userinfo_secrets(arg))
        return _shown_words(url_without_secrets(arg), hidden)
    name, equals, value = arg.partition("=")
    if not equals:
        return _shown_words(arg, hidden)
    if name in _HEADER_OPTIONS:
        return f"{name}={_shown_header(value, hidden)}"
    if name in _ENV_OPTIONS:
        return f"{name}={_shown_variable(value, hidden)}"
    if _ATTACHED_ENV.fullmatch(name):
        return f"-e{_shown_variable(arg[2:], hidden)}"
    if _SECRET_NAME.fullmatch(name.lstrip("-").strip()):
        hidden.named.append(value)
        return f"{name}=***"
    if ";" in value:
        # A connection string (Server=db;User Id=app;Password=...): each part on its own.
        return ";".join(_shown_arg(part, "", hidden) for part in arg.split(";"))
    # The value may be a URL (--db=redis://:pw@r, DATABASE_URL=postgresql://...) or
    # another NAME=value (--env=API_KEY=..., --set=api_key=...).
    return f"{name}={_shown_arg(value, '', hidden)}"


def _shown_words(text: str, hidden: _Hidden) -> str:
    # What no name marks as a secret: only the keys known by their prefix are hidden.
    def hide(found: re.Match[str]) -> str:
        hidden.named.append(found.group())
        return "***"

    return _KNOWN_KEY.sub(hide, text)


def _shown_header(header: str, hidden: _Hidden) -> str:
    name, colon, value = header.partition(":")
    if not colon or _URL.match(header):
        return _shown_arg(header, "", hidden)
    found = header_secrets([value.strip()])  # and the token of "Bearer ..."
    if secret_name(name):
        hidden.named.extend(found)
    else:
        hidden.placed.extend(found)
        _shown_arg(value.strip(), "", hidden)  # a key or a URL's password in it is named
    return f"{name}: ***"


def _shown_variable(variable: str, hidden: _Hidden) -> str:
    # docker's -e NAME=value is an env entry: shown by env_secrets' rule, as the server's
    # own env is masked. A secret-named variable's value, and a value that is neither a
    # URL nor a plain absolute path (NODE_ENV=production), hidden whole; a URL with what
    # its messages hide hidden; a plain path shown.
    name, equals, value = variable.partition("=")
    if not (equals and _ENV_NAME.fullmatch(name)):
        return _shown_arg(variable, "", hidden)
    if _SECRET_NAME.fullmatch(name):
        hidden.named.append(value)
        return f"{name}=***"
    if _SECRET_ENV_WORD.search(name) or secret_name(name):
        hidden.placed.append(value)
        _shown_arg(value, "", hidden)  # a key or a URL's password in it is named
        return f"{name}=***"
    if _URL.match(value) and not any(c.isspace() for c in value):
        found = _url_env_secrets(value)
        if found != [value]:  # a URL the URL rule reads (else hidden whole, below)
            hidden.placed.extend(found)  # a token as its user, as env_secrets masks it
            return f"{name}={_shown_arg(value, '', hidden)}"
    elif _PATH.fullmatch(value) and _plain_path(value):
        return variable
    hidden.placed.append(value)
    _shown_arg(value, "", hidden)  # a key or a URL's password in it is named
    return f"{name}=***"
