"""An exception chain with a secret in any of its texts, replaced by stand-ins that show
the masked texts.

A traceback (``logger.exception`` too) prints every exception on a chain, so masking a
new error's own message is not enough when what it is raised from quotes a secret: the
MCP client (a server's error echoing its token) and the model loop (a proxy's 401 body
echoing the API key) chain their errors from :func:`masked_error`'s stand-in instead.
Its own module because copying an exception faithfully (its type, traceback,
attributes, notes, an exception group's members, a chain that comes back round) is a
job apart from knowing which texts are secrets (:mod:`agcore_tools._redact`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["masked_error"]


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
        >>> from agcore_tools._redact import mask
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
