"""Secrets the library knows, masked in the text it logs or raises.

A leaf module: the MCP client masks a stdio server's ``env`` values and an HTTP
server's header values (and its URL's query and fragment values and path keys) in what
the server writes (its stderr, its log messages, its errors and the SDK errors they are
chained from), and the model loop masks its client's API key and header values in the
errors a server's answer becomes (a proxy that echoes the bearer token in its 401 body),
the errors they are chained from included, and its base URL's password, query and
fragment values and path keys, in the URL it names and where the server echoes them
(a router's "Unknown route: POST /k/<key>/...").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit

__all__ = [
    "MIN_SECRET",
    "header_secrets",
    "mask",
    "mask_credentials",
    "masked_error",
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
digit."""
_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
"""A UUID, which hosted MCP servers take as the credential in their URL's path."""


def _plain(name: str) -> bool:
    return _PLAIN_QUERY.fullmatch(unquote_plus(name)) is not None


def _flag(part: str) -> bool:
    """Whether ``part``, a query's part with no ``=``, is shown: a flag (``?wsdl``,
    ``?debug``), a word of fewer than :data:`MIN_SECRET` letters, or a parameter plainly
    no secret. Any other is a key given bare (``?sk9Ab8...``), and hidden whole."""
    return _plain(part) or (len(part) < MIN_SECRET and part.isascii() and part.isalpha())


def _token_runs(segment: str) -> list[str]:
    """The parts of a URL path's ``segment`` that make it a token: its UUIDs, and its
    runs of 20 or more letters and digits holding both (none: an ordinary segment)."""
    runs = [run for run in _RUN.findall(segment) if not (run.isalpha() or run.isdigit())]
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
    more letters and digits with both among them (webhooks and hosted MCP servers take
    their key in the path). Ordinary segments (``/v1/chat/completions``, a model's name
    such as ``gpt-4o-mini-2024-07-18``, a numeric id) are shown. A fragment of
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
    """
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
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # not read as a URL: all of it, as url_without_secrets shows it
        return [url]
    written = [parts.password]
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
    found: dict[str, None] = {}
    for value in filter(None, written):
        found.update(dict.fromkeys((value, unquote(value), unquote_plus(value))))
    return list(found)


def masked_error(exc: BaseException, redact: Callable[[str], str]) -> BaseException:
    """``exc`` to chain an error from: itself when ``redact`` changes no text on its
    chain (its message and notes, its causes' and contexts', an exception group's
    members'), else a stand-in of its type, with its traceback and attributes (strings
    in their dicts, lists, tuples and pydantic models masked too; an ``OSError``'s
    ``errno``, ``strerror`` and file names), showing the text ``redact`` returns.

    A traceback (``logger.exception`` too) prints every exception on the chain, so
    masking the new error's own message is not enough when ``exc`` quotes the secret.
    Each exception on the chain that leads to one showing a secret is a stand-in too,
    linked to the stand-ins of the others: a chain that comes back round (a cause whose
    context is ``exc``) never leads to an original that shows the secret.

    Example:
        >>> hide = lambda text: mask(text, ["ghp_S3CRETt0ken"])
        >>> try:
        ...     raise ConnectionError("refused") from ValueError("bad token ghp_S3CRETt0ken")
        ... except ConnectionError as exc:
        ...     shown = masked_error(exc, hide)
        >>> type(shown).__name__, str(shown), type(shown.__cause__).__name__, str(shown.__cause__)
        ('ConnectionError', 'refused', 'ValueError', 'bad token ***')
        >>> clean = ValueError("nothing to hide")
        >>> masked_error(clean, hide) is clean
        True
    """
    try:
        return _masked_chain(exc, redact)
    except Exception:  # noqa: BLE001 - a masking bug must never hide the error it masks
        return _unmaskable(exc, redact)


def _unmaskable(exc: BaseException, redact: Callable[[str], str]) -> BaseException:
    """The stand-in of an exception that cannot be masked: a plain one with its masked
    text (not from ``exc``, nor with its text unmasked: the secret would print with it)."""
    kind = type(exc)
    return Exception(f"{kind.__module__}.{kind.__qualname__}: {_safe_text(exc, redact)}")


def _safe_text(exc: BaseException, redact: Callable[[str], str]) -> str:
    try:
        return redact(str(exc))
    except Exception:  # noqa: BLE001 - its str() or the masking failed: no text then
        return "(its message could not be read and masked)"


def _masked_chain(exc: BaseException, redact: Callable[[str], str]) -> BaseException:
    found = _reachable(exc)
    shown = {key: _shown(node, redact) for key, node in found.items()}
    changed = [key for key, node in found.items() if _changes(node, shown[key], redact)]
    if not changed:
        return exc
    # Decided for the whole chain before any stand-in is made, and linked once all are:
    # in a cycle through a link that shows nothing (B, the cause of A, whose context is
    # A), B's stand-in leads back to A's, where B itself would lead to A.
    linked_from: dict[int, list[int]] = {}
    for key, node in found.items():
        for link in _links(node):
            linked_from.setdefault(id(link), []).append(key)
    copied = set(changed)
    todo = list(changed)
    while todo:
        for key in linked_from.get(todo.pop(), ()):
            if key not in copied:
                copied.add(key)
                todo.append(key)
    order = [key for key in found if key in copied]
    made: dict[int, BaseException] = {}
    for key in order:
        _make(found[key], shown, copied, made, redact)
    for key in order:
        node, stand_in = found[key], made[key]
        cause, context = node.__cause__, node.__context__
        stand_in.__cause__ = None if cause is None else made.get(id(cause), cause)
        stand_in.__context__ = None if context is None else made.get(id(context), context)
        stand_in.__suppress_context__ = node.__suppress_context__
        stand_in.__traceback__ = node.__traceback__
    return made[id(exc)]


def _reachable(exc: BaseException) -> dict[int, BaseException]:
    """Every exception on ``exc``'s chain, by id, each once: no recursion, as a chain
    may be longer than Python recurses."""
    found: dict[int, BaseException] = {}
    todo = [exc]
    while todo:
        node = todo.pop()
        if id(node) not in found:
            found[id(node)] = node
            todo.extend(_links(node))
    return found


def _links(exc: BaseException) -> list[BaseException]:
    """What a traceback of ``exc`` prints besides it: its cause, its context, and an
    exception group's members."""
    linked = [link for link in (exc.__cause__, exc.__context__) if link is not None]
    return linked + _members(exc)


def _shown(exc: BaseException, redact: Callable[[str], str]) -> tuple[str, str] | None:
    """``exc``'s text, and masked; None when it cannot be read or masked."""
    try:
        text = str(exc)
        return text, redact(text)
    except Exception:  # noqa: BLE001 - then its stand-in says so (see _unmaskable)
        return None


def _changes(
    exc: BaseException, shown: tuple[str, str] | None, redact: Callable[[str], str]
) -> bool:
    """Whether a traceback shows ``exc`` itself (its message, its notes) differently
    once masked."""
    if shown is None or shown[0] != shown[1]:
        return True
    notes = getattr(exc, "__notes__", None)  # printed too; kept in vars(exc)
    return isinstance(notes, list) and any(_note_changes(note, redact) for note in notes)


def _make(
    exc: BaseException,
    shown: dict[int, tuple[str, str] | None],
    copied: set[int],
    made: dict[int, BaseException],
    redact: Callable[[str], str],
) -> BaseException:
    """The stand-in of ``exc``, one of ``copied``, put in ``made``. An exception group
    holds its members from the start: theirs are made first."""
    key = id(exc)
    if key in made:  # made already, or a group that holds itself
        return made[key]
    plain = made[key] = _unmaskable(exc, redact)
    read = shown[key]
    if read is None:
        return plain
    try:
        members = [
            _make(member, shown, copied, made, redact) if id(member) in copied else member
            for member in _members(exc)
        ]
        if members:
            made[key] = _group_stand_in(exc, read[1], members, redact)
        else:
            made[key] = _stand_in(exc, read[1], redact)
    except Exception:  # noqa: BLE001 - a masking bug must never hide the error it masks
        made[key] = plain  # the rest of the chain keeps its types
    return made[key]


def _stand_in(exc: BaseException, shown: str, redact: Callable[[str], str]) -> BaseException:
    kind = type(exc)
    stand_in: BaseException | None
    try:
        if isinstance(exc, OSError) and exc.errno is not None:
            stand_in = _os_stand_in(exc, redact)
        else:
            # Not through __init__: the SDK's errors want the request, the response.
            stand_in = kind.__new__(kind, shown)
    except TypeError:  # a type that needs more to be made (an ExceptionGroup)
        stand_in = None
    if stand_in is not None:
        # Its attributes (message, body, response) masked, keeping what they tell.
        vars(stand_in).update({k: _masked_value(v, redact) for k, v in vars(exc).items()})
    if stand_in is None or shown not in str(stand_in):  # its str() reads other fields
        return Exception(f"{kind.__module__}.{kind.__qualname__}: {shown}")
    return stand_in


def _os_stand_in(exc: OSError, redact: Callable[[str], str]) -> OSError:
    """An ``OSError`` like ``exc``, its ``errno``, ``strerror`` and file names kept
    (masked): they are slots, not in its dict, and its str() reads them."""
    fields: list[Any] = [exc.errno, _masked_value(exc.strerror, redact)]
    names = [_masked_value(exc.filename, redact), _masked_value(exc.filename2, redact)]
    if names[1] is not None:
        fields += [names[0], getattr(exc, "winerror", None), names[1]]
    elif names[0] is not None:
        fields.append(names[0])
    kind = type(exc)
    stand_in: OSError = kind.__new__(kind, *fields)
    # A subclass with an __init__ of its own reads the fields in OSError's __init__,
    # not in __new__; for the others it does nothing.
    OSError.__init__(stand_in, *fields)
    return stand_in


def _members(exc: BaseException) -> list[BaseException]:
    """The exceptions an exception group holds (a traceback prints each), else none."""
    members = getattr(exc, "exceptions", None)
    if isinstance(members, tuple) and all(isinstance(m, BaseException) for m in members):
        return list(members)
    return []


def _group_stand_in(
    exc: BaseException, shown: str, members: list[BaseException], redact: Callable[[str], str]
) -> BaseException:
    """An exception group like ``exc`` holding ``members``; its message masked."""
    kind = type(exc)
    message = getattr(exc, "message", "")
    try:
        stand_in = kind(redact(message), members)
    except Exception:  # noqa: BLE001 - a group type made another way: shown as text
        return Exception(f"{kind.__module__}.{kind.__qualname__}: {shown}")
    # Not what the group was made with: the exceptiongroup backport (Python 3.10) keeps
    # its message and members in its dict, which would bring the unmasked ones back.
    made = vars(stand_in).keys()
    kept = {k: v for k, v in vars(exc).items() if k not in made}
    vars(stand_in).update({k: _masked_value(v, redact) for k, v in kept.items()})
    return stand_in


def _note_changes(note: object, redact: Callable[[str], str]) -> bool:
    return isinstance(note, str) and redact(note) != note


def _masked_value(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` with every string in it redacted: its dicts, lists and tuples copied,
    however deep they nest (an API error's body parsed from JSON may nest thousands
    deep: no recursion) and when they contain themselves (each copied once).

    Example:
        >>> loop: list = ["ghp_S3CRETt0ken"]
        >>> loop.append(loop)
        >>> copied = _masked_value({"body": (loop, 3)}, lambda text: text.replace("S3CRET", "***"))
        >>> copied["body"][0][0], copied["body"][0][1] is copied["body"][0]
        ('ghp_***t0ken', True)
    """
    if isinstance(value, str):
        return redact(value)
    if callable(getattr(type(value), "model_copy", None)) and hasattr(value, "__dict__"):
        # A pydantic model (the MCP SDK's MCPError keeps its message in one, and its
        # str() reads it there): a copy with its fields masked, not validated again.
        fields = {k: _masked_value(v, redact) for k, v in vars(value).items()}
        return value.model_copy(update=fields)
    if not _is_container(value):
        return value
    copies: dict[int, Any] = {}
    stack = [_Copying(value, copies)]
    while True:
        frame = stack[-1]
        inner = frame.fill(redact, copies)
        if inner is not None:
            stack.append(_Copying(inner, copies))
            continue
        stack.pop()
        done = frame.done(copies)
        if not stack:
            return done
        stack[-1].put(done)


def _is_container(value: object) -> bool:
    return isinstance(value, (dict, list)) or type(value) is tuple


_BUILDING = object()
"""What a tuple's copy is while its items are copied (it cannot hold itself)."""


class _Copying:
    """One dict, list or tuple being copied by :func:`_masked_value`."""

    __slots__ = ("items", "key", "source", "target")

    def __init__(self, source: Any, copies: dict[int, Any]) -> None:
        self.source = source
        self.target: Any = {} if isinstance(source, dict) else []
        copies[id(source)] = _BUILDING if type(source) is tuple else self.target
        self.items = iter(source.items() if isinstance(source, dict) else enumerate(source))
        self.key: Any = None

    def fill(self, redact: Callable[[str], str], copies: dict[int, Any]) -> Any:
        """Copy items until one is a container not copied yet: return it (None at the end)."""
        for key, item in self.items:
            self.key = key
            if isinstance(item, str):
                self.put(redact(item))
            elif not _is_container(item):
                self.put(item)
            elif id(item) in copies:
                copy = copies[id(item)]
                if copy is _BUILDING:
                    raise ValueError("a tuple that contains itself cannot be copied")
                self.put(copy)
            else:
                return item
        return None

    def put(self, value: Any) -> None:
        """The copy of the item at ``key``."""
        if isinstance(self.target, dict):
            self.target[self.key] = value
        else:
            self.target.append(value)

    def done(self, copies: dict[int, Any]) -> Any:
        if type(self.source) is not tuple:
            return self.target
        copies[id(self.source)] = copy = tuple(self.target)
        return copy
