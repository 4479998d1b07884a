"""Secrets the library knows, masked in the text it logs or raises.

A leaf module: the MCP client masks a stdio server's ``env`` values and an HTTP
server's header values (and its URL's query and fragment values and path keys) in what
the server writes (its stderr, its log messages, its errors and the SDK errors they are
chained from), and the model loop masks its client's API key and header values in the
errors a server's answer becomes (a proxy that echoes the bearer token in its 401 body),
the errors they are chained from included, and its base URL's password, query and
fragment values and path keys, in the URL it names and where the server echoes them
(a router's "Unknown route: POST /k/<key>/..."). Which texts are secrets, and how they
are hidden in a string, are here; an exception chain with every text masked is
:mod:`agcore_tools._masked_error`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import unquote, unquote_plus, urlsplit

__all__ = [
    "MIN_SECRET",
    "header_secrets",
    "mask",
    "mask_credentials",
    "misread_userinfo",
    "secret_values",
    "url_secrets",
    "url_without_secrets",
]

MIN_SECRET = 8
"""Shorter values ("1", "true", "en_US") are not masked: they would garble the text
without hiding anything worth guessing."""

_SCHEME = re.compile(
    r"bearer|basic|token|bot|dpop|ssws|apikey|api-key|key|geniekey|negotiate|ntlm",
    re.IGNORECASE,
)
"""HTTP authentication schemes. Named, not any first word: in ``agcore
production-cluster`` the second word is no credential."""
_PLAIN_QUERY = re.compile(r"(?:api[-_]?)?version|format", re.IGNORECASE)
"""Query parameters plainly no secret (Azure's ``api-version``): their values are shown,
as they tell which API a message is about."""


_RUN = re.compile(r"[A-Za-z0-9]{20,}")
"""An unbroken run of letters and digits as long as a random token's: Slack's and
Discord's webhook secrets, a Telegram bot's token after ``bot<id>:``, a hex or
base64url key. Names are short words joined by ``-`` or ``.``
(``gpt-4o-mini-2024-07-18``, ``Meta-Llama-3.1-8B-Instruct``), and long words hold no
digit; a run of letters only is a token when it reads as no words do (see
:func:`_random_letters`)."""
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
"""The words of a camelCase, PascalCase, lower or upper case name."""
_PAIRS = (
    "ab ac ad ag ai al am an ap ar as at au ba be bl bu ca cc ce ch ci ck cl co cr ct cu da "
    "de di ea ec ed ef el em en ep eq er es et ev ex fi fo ge gr gu ha he ho ia ib ic id ie "
    "if ig il im in io is it iv ke la le li ll lo lt lu ma me mi mo mp na nc nd ne nf ng ni "
    "no ns nt oc od ol om on op or ot ou ow pa pe pl po pr pt pu qu ra rc re ri rk rm ro rr "
    "rs rt rv ry sa sc se si so sp ss st su ta te th ti to tr ts tt tu ty ue ul un up ur us "
    "ut va ve vi wo"
)
_COMMON_PAIRS = frozenset(_PAIRS.split())
"""The 150 letter pairs commonest inside the words of 43,000 names of 20 letters or
more (Python's standard library's, and those of the npm and PyPI packages the tests
install; base64 and DNA data left out), of the 676 there are. In a word
or a name made of words, most pairs are among them (``internationalization`` 84%,
``StreamableHttpTransport`` 90%, ``Datenschutzgrundverordnung`` 68%); in random
letters, about a fifth."""


def _random_letters(run: str) -> bool:
    """Whether ``run``, of letters only, reads as no words do: fewer than half of the
    letter pairs inside its words (split where camelCase starts one) are among the
    :data:`_COMMON_PAIRS`. So hold 97% of random strings of 20 letters (a base62 key
    that came out with no digit, 1 in 70 of 24 characters), 99% of 32, and about 35
    of the 43,000 names those pairs were counted in (``WebhookPayloadWebhook``,
    ``MaximumNumberOfHeaps``), which would then be shown as ``***`` in a URL's path.

    Example:
        >>> _random_letters("ghyQYslWtMlbTxVrXmIaqwer"), _random_letters("abcdefghijklmnopqrstuvwx")
        (True, True)
        >>> _random_letters("internationalization"), _random_letters("ListToolsRequestHandler")
        (False, False)
    """
    words = [word.lower() for word in _WORD.findall(run)]
    pairs = [word[n : n + 2] for word in words for n in range(len(word) - 1)]
    return sum(pair in _COMMON_PAIRS for pair in pairs) * 2 < len(pairs)


_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
"""A UUID, which hosted MCP servers take as the credential in their URL's path."""


_HOST = r"(?:\[[0-9A-Fa-f:.]+(?:%25[A-Za-z0-9._~-]+)?\]|[A-Za-z0-9._~%-]+)(?::[0-9]*)?"
_HOST_ON = re.compile(rf"{_HOST}(?:,{_HOST})*(?:[/?].*)?", re.DOTALL)
"""What follows a URL's user info: a host (a name, an address, a bracketed IPv6
address with its zone), a port, or a list of them (a MongoDB replica set's, a
multi-host PostgreSQL URL's), then the path or query; not an e-mail's domain run on into
a query (``example.com&key=...``)."""
_PORT_THEN = re.compile(r"[0-9]+(?:[/?#].*)?", re.DOTALL)
_WEB = frozenset({"http", "https", "ws", "wss"})
"""Schemes whose paths and queries may hold an ``@`` after a port (``/@alice``): for
the others (``postgresql``, ``mongodb``, ``redis``), a password of digits and a ``/``
is likelier than an ``@`` in the path."""


def misread_userinfo(url: str) -> tuple[str, str] | None:
    """The user info of ``url`` as written, and ``url`` without it, when it holds a
    password that ``urlsplit`` does not read: one with an unencoded ``/``, ``?`` or
    ``#``, where ``urlsplit`` ends the user info and reads the rest, password and host
    included, as the path, query or fragment. The user info then runs to the last ``@``
    before a host; None for any other URL. An ``@`` after a user name that holds a
    ``/``, ``?``, ``#`` or ``[`` (a path's, a query's: ``?t=10:30&to=ops@example.com``),
    or, in a web URL, after a port (``https://host:8080/@alice``) is no such thing.

    Example:
        >>> misread_userinfo("postgresql://app:Xy7/q#R2pL9w@db/prod")
        ('app:Xy7/q#R2pL9w', 'postgresql://db/prod')
        >>> misread_userinfo("mongodb://app:Xy7/q9@db1:27017,db2:27017/prod")
        ('app:Xy7/q9', 'mongodb://db1:27017,db2:27017/prod')
        >>> misread_userinfo("postgresql://app:pw@db/prod") is None  # urlsplit reads it
        True
        >>> misread_userinfo("http://127.0.0.1:9?notify=ops@example.com") is None
        True
    """
    scheme, separator, after = url.partition("://")
    userinfo, at, location = after.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if not (separator and at and colon and _HOST_ON.fullmatch(location)):
        return None
    if any(sign in user for sign in "/?#[]"):  # where urlsplit ends a URL's authority
        return None
    try:
        read = urlsplit(url).netloc.rpartition("@")[0]
    except ValueError:  # an unclosed "[": no URL to read at all, which callers hide whole
        return None
    if userinfo == read or (scheme.lower() in _WEB and _PORT_THEN.fullmatch(password)):
        return None
    return userinfo, f"{scheme}://{location}"


def _plain(name: str) -> bool:
    return _PLAIN_QUERY.fullmatch(unquote_plus(name)) is not None


def _flag(part: str) -> bool:
    """Whether ``part``, a query's part with no ``=``, is shown: a flag (``?wsdl``,
    ``?debug``), a word of fewer than :data:`MIN_SECRET` letters, or a parameter plainly
    no secret. Any other is a key given bare (``?sk9Ab8...``), and hidden whole."""
    return _plain(part) or (len(part) < MIN_SECRET and part.isascii() and part.isalpha())


def _token_runs(segment: str) -> list[str]:
    """The parts of a URL path's ``segment`` that make it a token: its UUIDs, and its
    runs of 20 or more letters and digits holding both, or letters only that read as
    no words do (none: an ordinary segment)."""
    runs = [
        run
        for run in _RUN.findall(segment)
        if not run.isdigit() and (not run.isalpha() or _random_letters(run))
    ]
    return [*_UUID.findall(segment), *runs]


def secret_values(values: Iterable[str]) -> list[str]:
    """The ``values`` worth masking (:data:`MIN_SECRET` characters or more), longest
    first, so that a secret containing another is masked whole.

    Example:
        >>> secret_values(["true", "ghp_S3CRETt0ken", "ghp_S3CRETt0ken_and_more"])
        ['ghp_S3CRETt0ken_and_more', 'ghp_S3CRETt0ken']
    """
    return sorted({s for s in values if len(s) >= MIN_SECRET}, key=len, reverse=True)


def header_secrets(values: Iterable[object]) -> list[str]:
    """HTTP header values, the strings among them only, and the credential after an
    authentication scheme (the token of ``Bearer ...``, ``Basic ...``, ``Token ...``).
    Not each word of any value: ``application/json, text/event-stream`` is no secret.

    Example:
        >>> header_secrets(["Bearer ghp_S3CRETt0ken", 3, "application/json, text/event-stream"])
        ['Bearer ghp_S3CRETt0ken', 'ghp_S3CRETt0ken', 'application/json, text/event-stream']
    """
    found = []
    for value in values:
        if not isinstance(value, str):
            continue
        found.append(value)
        scheme, _, credential = value.strip().partition(" ")
        credential = credential.strip()
        # RFC 9110's "scheme token68": the scheme, then one credential.
        if _SCHEME.fullmatch(scheme) and credential and not any(c.isspace() for c in credential):
            found.append(credential)
    return found


def mask(text: str, secrets: Sequence[str]) -> str:
    """``text`` with each of ``secrets`` (from :func:`secret_values`) shown as ``***``.

    Example:
        >>> mask("token ghp_S3CRETt0ken ok", secret_values(["ghp_S3CRETt0ken"]))
        'token *** ok'
    """
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


_SCHEMED_CREDENTIAL = re.compile(
    r"\b(bearer|basic|token)\s+"
    r"(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/-]{8,}=*",
    re.IGNORECASE,
)
"""A credential after its scheme, as a server quotes the ``Authorization`` it got. A
digit or a token68 sign in it tells a token from a word (``Token authentication``)."""


def mask_credentials(text: str) -> str:
    """``text`` with the credential after ``Bearer``, ``Basic`` or ``Token`` shown as
    ``***``, whoever put it on the request: the backstop for a credential this library
    never saw (one that a client's own transport adds).

    Example:
        >>> mask_credentials("rejected Bearer eyJhbGciOi.eyJzdWIi.c2ln; Token authentication off")
        'rejected Bearer ***; Token authentication off'
    """
    return _SCHEMED_CREDENTIAL.sub(lambda found: f"{found.group(1)} ***", text)


def _pairs(text: str) -> str:
    """``text``, a query or a fragment of ``name=value`` pairs, with the values shown
    as ``***``, but for those of parameters plainly no secret, and a part with no ``=``
    as ``***`` unless it is a flag (see :func:`_flag`)."""
    return "&".join(_pair(part) for part in text.split("&") if part)


def _pair(part: str) -> str:
    name, equals, _ = part.partition("=")
    if not equals:
        # Not "name=***": a bare part is the value, and would be shown whole.
        return part if _flag(part) else "***"
    return part if _plain(name) else f"{name}=***"


def _fragment(fragment: str) -> str:
    """``fragment`` with what may be a secret in it shown as ``***``: its values, when
    it holds ``name=value`` pairs (``#access_token=...``, as OAuth's implicit flow
    sends the token); all of it, when it holds a token as a path segment may; else
    (an anchor, ``#section-2``) as written."""
    if "=" in fragment:
        return _pairs(fragment)
    return "***" if _token_runs(fragment) else fragment


def url_without_secrets(url: str) -> str:
    """``url`` with no user or password, its query's values shown as ``***``
    (gateways and hosted servers take keys as ``?api-key=...``), but for those of
    parameters plainly no secret (``api-version``, ``version``, ``format``), and a
    part with no ``=`` shown as ``***`` unless it is a short word (``?wsdl``), and each
    segment of its path that holds a token shown as ``***``: a UUID, or a run of 20 or
    more letters and digits with both among them, or of letters that read as no words
    do (webhooks and hosted MCP servers take their key in the path). Ordinary segments
    (``/v1/chat/completions``, a model's name such as ``gpt-4o-mini-2024-07-18``, a
    numeric id, a long word) are shown. A fragment of
    ``name=value`` pairs has its values hidden as the query's are (OAuth's implicit flow
    puts the token there: ``#access_token=...``), one that holds a token is hidden
    whole, and an anchor (``#section-2``) is shown.

    Example:
        >>> url_without_secrets("https://u:pw@gw.example.com:8443/v1?api-key=s3cret&x")
        'https://gw.example.com:8443/v1?api-key=***&x'
        >>> url_without_secrets("https://api.example.com/v1?sk9Ab8Cd7Ef6Gh5Ij4Kl3Mn2&debug")
        'https://api.example.com/v1?***&debug'
        >>> url_without_secrets("https://res.openai.azure.com/openai?api-version=2024-10-21")
        'https://res.openai.azure.com/openai?api-version=2024-10-21'
        >>> url_without_secrets("sqlite:///var/data/app.db?key=s3cret")
        'sqlite:///var/data/app.db?key=***'
        >>> url_without_secrets("https://hooks.slack.com/services/T0001/B0001/ghyQ7Ysl6WtM5lbTxVrX0mIa")
        'https://hooks.slack.com/services/T0001/B0001/***'
        >>> url_without_secrets("https://hooks.slack.com/services/TABCDEFGH/BABCDEFGH/ghyQYslWtMlbTxVrXmIaqwer")
        'https://hooks.slack.com/services/TABCDEFGH/BABCDEFGH/***'
        >>> url_without_secrets("https://api.telegram.org/bot1234567:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe")
        'https://api.telegram.org/***/getMe'
        >>> url_without_secrets("https://router.huggingface.co/models/meta-llama/Meta-Llama-3.1-8B-Instruct/v1")
        'https://router.huggingface.co/models/meta-llama/Meta-Llama-3.1-8B-Instruct/v1'
        >>> url_without_secrets("https://app.example.com/cb#access_token=ya29.S3cret&token_type=Bearer")
        'https://app.example.com/cb#access_token=***&token_type=***'
        >>> url_without_secrets("https://docs.example.com/guide?version=2#section-2")
        'https://docs.example.com/guide?version=2#section-2'
        >>> url_without_secrets("http://[::1/mcp")  # urlsplit cannot read it
        '***'
        >>> url_without_secrets("mysql://root:p/w#1@localhost:3306/app")  # see misread_userinfo
        'mysql://localhost:3306/app'
    """
    misread = misread_userinfo(url)
    if misread is not None:
        return url_without_secrets(misread[1])
    try:
        parts = urlsplit(url)
    except ValueError:  # not read as a URL (an unclosed "[" of an IPv6 host): none of it
        return "***"
    query = _pairs(parts.query)
    path = "/".join("***" if _token_runs(seg) else seg for seg in parts.path.split("/"))
    fragment = _fragment(parts.fragment)
    host = parts.netloc.rpartition("@")[2]
    unchanged = query == parts.query and path == parts.path and fragment == parts.fragment
    if host == parts.netloc and unchanged:
        # As written: a user copies it from an error to run the command again.
        return url
    # Not urlunsplit: it drops the "//" of an empty host (sqlite:///abs/path.db).
    after_scheme = url.partition(":")[2] if parts.scheme else url
    shown = f"{parts.scheme}:" if parts.scheme else ""
    if parts.netloc or after_scheme.startswith("//"):
        shown += f"//{host}"
    shown += path
    if query:
        shown += f"?{query}"
    if fragment:
        shown += f"#{fragment}"
    return shown


def url_secrets(url: str, named: Callable[[str], bool] | None = None) -> list[str]:
    """The secrets :func:`url_without_secrets` hides: the password, the values of the
    query and of a fragment of ``name=value`` pairs, and their parts with no ``=``
    that are no flag, and the tokens of the path and of the fragment (each such
    segment, and the token runs in it), each as written and decoded (a server may echo
    either); of the query and the fragment, only those whose parameter's name ``named``
    accepts, if given, and then no bare part or token, which has no name.
    Not the user name, which is no secret and often an ordinary word ("postgres").

    Example:
        >>> url_secrets("postgresql://app:p%40ss@db/prod?sslkey=k%2B1&version=2024-10-21")
        ['p%40ss', 'p@ss', 'k%2B1', 'k+1']
        >>> url_secrets("https://x/mcp?token=t1&workspace=w1", named=lambda name: name == "token")
        ['t1']
        >>> url_secrets("https://api.telegram.org/bot1234567:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe")
        ['bot1234567:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw', 'AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw']
        >>> url_secrets("https://app.example.com/cb#access_token=ya29.S3cret&expires_in=3600")
        ['ya29.S3cret', '3600']
        >>> url_secrets("https://api.example.com/v1?sk9Ab8Cd7Ef6Gh5Ij4Kl3Mn2&debug")
        ['sk9Ab8Cd7Ef6Gh5Ij4Kl3Mn2']
        >>> url_secrets("mysql://root:p/w#1@localhost:3306/app")  # see misread_userinfo
        ['p/w#1']
    """
    misread = misread_userinfo(url)
    try:
        parts = urlsplit(url)
    except ValueError:  # not read as a URL: all of it, as url_without_secrets shows it
        return [url]
    # Of a misread password, urlsplit's reading is kept too, should the "@" not end the
    # user info: a misjudged "@" hides more, never less.
    written: list[str | None] = [parts.password]
    if misread is not None:
        written += [misread[0].partition(":")[2], *url_secrets(misread[1], named)]
    pairs = parts.query.split("&")
    if "=" in parts.fragment:
        pairs += parts.fragment.split("&")
    for part in pairs:
        name, equals, value = part.partition("=")
        if not equals:
            written += [] if named is not None or _flag(part) else [part]
        elif not _plain(name) and (named is None or named(unquote_plus(name))):
            written.append(value)
    if named is None:
        segments = parts.path.split("/")
        if "=" not in parts.fragment:
            segments.append(parts.fragment)
        for segment in segments:
            runs = _token_runs(segment)
            written += [segment, *runs] if runs else []
    return _as_found(written)


def _as_found(written: Iterable[str | None]) -> list[str]:
    # Each as written and decoded (a server may echo either), once, in order.
    found: dict[str, None] = {}
    for value in filter(None, written):
        found.update(dict.fromkeys((value, unquote(value), unquote_plus(value))))
    return list(found)
