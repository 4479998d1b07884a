"""Tool output as model text: JSON for anything not a string, and a byte limit that
keeps head and tail; and a copy of JSON values however deeply they nest.

A leaf module: the renderer of binary values (``_attachments``) and ``calls/`` both cut
text with it, and it and the spans' content writer (``_span_content``) both read a
record's fields (and write a record as pydantic does) with it. The loop's events and
approval requests copy a call's arguments with it, and the notes of an edited call
(``calls/``'s for a direct call, ``_code_mode``'s for a program's) write its arguments
with it.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import to_json, to_jsonable_python

__all__ = [
    "LARGE",
    "in_pieces",
    "is_large",
    "noted_arguments",
    "own_copy",
    "record_dump",
    "record_fields",
    "result_text",
    "short_json",
    "truncate_utf8",
]

S = TypeVar("S", str, bytes)

_MARKER = "\n[... {omitted} bytes omitted ...]\n"

LARGE = 1 << 16
"""Characters of JSON past which a value is converted in a worker thread, not on the
event loop: about a millisecond of work, where the hop to a thread costs a tenth of one."""

_SCALARS = frozenset({int, float, bool, type(None)})
_ITEM = 4  # a scalar's or a separator's share of the JSON text, in characters
_RUN_BYTES = 1 << 18
"""About how much JSON :func:`in_pieces` writes per call: a millisecond or two."""
_FIRST_RUN = 16
_DEEPEST = 8
_NESTING = 255  # containers deep: pydantic-core writes none deeper
_LONGEST_RUN = 4096


def result_text(output: Any) -> str:
    """A tool's output as text for the model: strings as they are, anything else as JSON.

    Example:
        >>> result_text({"city": "北京", "temp": 21})
        '{"city":"北京","temp":21}'
        >>> result_text("plain text")
        'plain text'
        >>> result_text({"ratio": float("nan")})
        '{"ratio":null}'

    pydantic writes no lone surrogate (``os.listdir``'s name of a file whose name is
    not UTF-8); JSON holding one is written by the json module instead, the surrogate
    as it is, for the caller to replace (``_unicode.scrub``) as it does a string's:

        >>> result_text({"files": ["caf\\udce9.txt"]})
        '{"files":["caf\\udce9.txt"]}'
    """
    if isinstance(output, str):
        return output
    try:
        return in_pieces(output, _to_json, b",").decode("utf-8")
    except ValueError as exc:  # PydanticSerializationError, UnicodeEncodeError
        import json  # on first need: a plain `import agcore_tools` does not load json

        try:
            return json.dumps(output, ensure_ascii=False, separators=(",", ":"), default=_plain)
        except (ValueError, TypeError, RecursionError):
            raise exc from None  # pydantic's reason (a circular value, say) is the one


def _plain(value: Any) -> Any:
    # What the json module cannot write, as pydantic writes it: a model's excluded
    # fields stay out, as its str() would not leave them.
    try:
        return to_jsonable_python(value, fallback=str, inf_nan_mode="null")
    except ValueError:  # a lone surrogate in one of its keys: nothing of it is written
        return f"[a {type(value).__name__} that cannot be written as JSON]"


def noted_arguments(arguments: Any) -> str:
    """``arguments`` as an edit note shows them to the model: written as pydantic writes
    them for the model (a model's excluded fields and JSON-masked secrets stay out),
    as JSON, cut at 120 characters.

    Example:
        >>> noted_arguments({"amount": 50, "note": "x" * 200})[:30]
        '{"amount": 50, "note": "xxxxxx'
    """
    return short_json(_model_reads(arguments))


def _model_reads(value: Any) -> Any:
    # An app's objects as pydantic writes them for the model (result_text's way): a
    # model's excluded fields and the secrets its JSON serializers mask stay out, as
    # their str() would not leave them.
    try:
        return to_jsonable_python(value, fallback=str, inf_nan_mode="null")
    except ValueError:  # a lone surrogate in a key, a container holding itself
        return None


def short_json(value: Any) -> str:
    """``value`` as JSON (keys sorted), cut at 120 characters.

    Example:
        >>> short_json({"b": 1, "a": [1.5]})
        '{"a": [1.5], "b": 1}'
    """
    import json  # on first need, as result_text's

    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except ValueError:  # an integer too long to write, or a container holding itself
        return "arguments that cannot be written as JSON"
    return text if len(text) <= 120 else f"{text[:117]}..."


def _to_json(value: Any) -> bytes:
    # NaN and infinities as null, as pydantic writes them: "NaN" is not JSON.
    return to_json(value, fallback=str, inf_nan_mode="null")


def in_pieces(
    value: Any, dump: Callable[[Any], S], comma: S, depth: int = 0, *, large: bool = False
) -> S:
    """``dump(value)`` (a JSON writer, to bytes or text), written a run of items at a
    time when ``value`` is large, as the same text.

    pydantic-core and the json module hold the GIL while they write, so one call on
    megabytes of rows in a worker thread holds up the event loop as long as on it;
    between two runs the loop gets its turn. Each run is about :data:`_RUN_BYTES` of
    JSON: it starts short, looked at (:func:`is_large`) before it is written, and grows
    while its items stay small; an item too large to write in one go is written in
    pieces itself. (One much larger than the items before it in a long list, where runs
    are long, goes with its run.) ``comma`` is what ``dump`` puts between two
    items; ``depth`` is how many containers deep ``value`` is, and ``large`` says it is
    known to be large.

    Example:
        >>> import json
        >>> rows = {"rows": [{"id": n, "tags": ["a", None]} for n in range(9000)]}
        >>> in_pieces(rows, json.dumps, ", ") == json.dumps(rows)
        True
    """
    kind = type(value)
    if (
        not (kind is dict or kind is list or kind is tuple)
        or depth > _DEEPEST  # nesting no data has (or a cycle): dump says what it makes of it
        or not (large or is_large(value, _RUN_BYTES))
    ):
        return dump(value)
    items: Sequence[Any] = list(value.items()) if kind is dict else value
    pieces: list[S] = []
    size, start = _FIRST_RUN, 0
    while start < len(items):
        run = items[start : start + size]
        part = dict(run) if kind is dict else run
        # A large value's only item is large itself. A run is looked at while short:
        # once its items have kept small for a while, their JSON's length sizes the next
        # run instead (a walk of every run would cost more than writing it).
        big = len(items) == 1 or (len(run) <= _FIRST_RUN and is_large(part, _RUN_BYTES))
        if big and len(run) > 1:
            size = len(run) // 2  # too much to write in one call: fewer items
            continue
        if not big:
            piece = dump(part)[1:-1]  # the items, without the brackets around them
        elif kind is dict:
            key, item = run[0]
            # The key as dump writes it ('{"key": null}' less the null), then the value.
            inner = in_pieces(item, dump, comma, depth + 1, large=True)
            piece = dump({key: None})[1:-5] + inner
        else:
            piece = in_pieces(run[0], dump, comma, depth + 1, large=True)
        pieces.append(piece)
        start += len(run)
        size = max(1, min(_LONGEST_RUN, 2 * size, size * _RUN_BYTES // max(len(piece), 1)))
    empty = dump({} if kind is dict else [])
    return empty[:1] + comma.join(pieces) + empty[1:]


def is_large(value: Any, limit: int = LARGE) -> bool:
    """Whether ``value`` likely makes more than ``limit`` characters of JSON: its
    strings' (and bytes') lengths and a few characters per item, added up only until
    they pass ``limit``, so a large value costs a bounded look and a small one a few
    steps. Other objects (a model, a dataclass) count as one item, and a value nested
    deeper than pydantic-core writes (or a cycle) as small: writing it fails at once.

    Example:
        >>> is_large({"rows": [{"id": n, "name": "x" * 10} for n in range(5)]})
        False
        >>> is_large({"rows": [{"id": n, "name": "x" * 10} for n in range(5000)]})
        True
        >>> is_large(["x" * 70_000]), is_large(42)
        (True, False)
    """
    kind = type(value)
    if kind in _SCALARS:
        return False
    if kind is str or kind is bytes:
        return len(value) > limit
    size = 0
    # Depth first, an iterator per container: a long list is never copied or gone over
    # past the item that makes it large.
    stack: list[tuple[Iterator[Any], bool]] = [(iter((value,)), False)]
    while stack:
        items, keyed = stack[-1]
        for item in items:
            if keyed:
                key, item = item
                if type(key) is str:
                    size += len(key)
            kind = type(item)
            if kind is str or kind is bytes:
                size += len(item)
            elif kind is dict or kind is list or kind is tuple:
                size += _ITEM * (len(item) + 1)  # its separators, and its scalars
                if size > limit:
                    return True
                if len(stack) > _NESTING:
                    return False  # nested past what pydantic writes: it fails at once
                stack.append((iter(item.items()), True) if kind is dict else (iter(item), False))
                break
            elif kind not in _SCALARS:
                size += _ITEM
            if size > limit:
                return True
        else:
            stack.pop()
    return False


def truncate_utf8(text: str, max_bytes: int | None) -> str:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes, keeping its head and tail.

    The cut falls on character boundaries, and a marker between head and tail says how
    many bytes were left out. Text that fits is returned unchanged.

    Example:
        >>> cut = truncate_utf8("天气" * 1000, 120)
        >>> len(cut.encode()) <= 120, "bytes omitted" in cut
        (True, True)
    """
    # 1. Most results fit; four bytes per character is UTF-8's worst case.
    if max_bytes is None or len(text) * 4 <= max_bytes:
        return text
    data = text.encode("utf-8", "surrogatepass")
    total = len(data)
    if total <= max_bytes:
        return text
    # 2. Reserve room for the marker with the largest count it could show.
    budget = max_bytes - len(_MARKER.format(omitted=total))
    if budget <= 0:
        return data[:max_bytes].decode("utf-8", "ignore")
    # 3. Two thirds head, one third tail; "ignore" drops the bytes of a character cut
    #    in two at either edge, so the cut always lands on a character boundary.
    head_size = budget * 2 // 3
    head = data[:head_size].decode("utf-8", "ignore")
    tail = data[total - (budget - head_size) :].decode("utf-8", "ignore")
    omitted = total - len(head.encode("utf-8", "surrogatepass")) - len(tail.encode("utf-8"))
    return f"{head}{_MARKER.format(omitted=omitted)}{tail}"


def record_fields(value: Any) -> dict[str, Any] | None:
    """A pydantic model's or a dataclass instance's fields by name (the values
    themselves, bytes not copied), or None for other values. Every field is there,
    excluded ones too: this is for looking into a record (for binary values, say); what
    is written of it is :func:`record_dump`.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Row:
        ...     id: int
        >>> record_fields(Row(3)), record_fields({"id": 3})
        ({'id': 3}, None)
    """
    if isinstance(value, BaseModel):
        named = {name: getattr(value, name) for name in type(value).model_fields}
        return {**named, **(value.model_extra or {})}
    if is_dataclass(value) and not isinstance(value, type):
        return {field.name: getattr(value, field.name) for field in fields(value)}
    return None


def record_dump(
    value: Any, keep: Callable[[Any], bool], fallback: Callable[[Any], Any] | None = None
) -> Any:
    """A record :func:`record_fields` reads, as pydantic writes it, but with each field
    value for which ``keep`` is true left as it is (an ``Image``, a list of them).

    A pydantic model or pydantic dataclass is dumped as ``to_jsonable_python`` writes
    it, in JSON mode: its excluded fields are left out, its serialization aliases are
    the keys, its computed fields and serializers apply. A field kept is written as its
    value, under the key pydantic writes it under, and only when pydantic writes the
    field, in the place pydantic writes it. (pydantic's Python mode writes an ``Image``
    as a dict of its bytes, and would cut it into pieces; its JSON mode, as text.) A
    serializer for JSON only applies, as it does to a record without binary values: a
    secret it masks stays masked. ``fallback`` writes what pydantic has no JSON form for
    (a ``range``, numpy's arrays), as ``to_jsonable_python``'s does; a field pydantic
    cannot write in JSON mode even so is written in Python mode, alone, the others not.
    A standard-library dataclass is its fields, by name, as ``to_jsonable_python``
    writes one.

    Example:
        >>> from pydantic import BaseModel, Field, computed_field
        >>> class Account(BaseModel):
        ...     user_name: str = Field(serialization_alias="userName")
        ...     token: str = Field(exclude=True)
        ...     tags: tuple[str, ...] = ()
        ...     @computed_field
        ...     @property
        ...     def initial(self) -> str:
        ...         return self.user_name[0]
        >>> account = Account(user_name="ann", token="secret", tags=("a",))
        >>> record_dump(account, lambda item: isinstance(item, tuple))
        {'userName': 'ann', 'tags': ('a',), 'initial': 'a'}
    """
    dump = _pydantic_dump(value)
    if dump is None:
        return record_fields(value)
    written = dump(value, mode="python", by_alias=True)
    if not isinstance(written, dict):  # a model_serializer's own shape: no field to put back
        return written
    named = record_fields(value) or {}
    kept = {name for name, item in named.items() if keep(item)}
    # Where pydantic writes a field (under its alias, or nowhere when excluded) is asked
    # of pydantic itself, by dumping that field alone: alias generators, extra fields
    # and the keys a model serializer adds whatever is included are all its to decide.
    added = dump(value, mode="python", by_alias=True, include=set())

    def key_of(alone: Any) -> str | None:
        keys = [key for key in alone if key not in added] if isinstance(alone, dict) else []
        return keys[0] if len(keys) == 1 and keys[0] in written else None

    try:
        # JSON mode, as a record without binary values is written: a serializer for JSON
        # only (a secret masked with when_used="json") applies. The kept fields are left
        # out of it (JSON mode would write an Image's bytes as text, or fail on them).
        data = dump(value, mode="json", by_alias=True, exclude=kept, fallback=fallback)
    except ValueError:  # PydanticSerializationError: a value it cannot write as JSON
        data = None
    if not isinstance(data, dict):
        # Field by field, then: only a field that fails alone is in Python mode (an image
        # a computed field or a model serializer writes), never the whole record.
        data = dict(written)
        for name in named.keys() - kept:
            try:
                alone = dump(value, mode="json", by_alias=True, include={name}, fallback=fallback)
            except ValueError:
                continue
            key = key_of(alone)
            if key is not None:
                data[key] = alone[key]
    for name, item in named.items():
        if name in kept:
            key = key_of(dump(value, mode="python", by_alias=True, include={name}))
            if key is not None:
                data[key] = item
    # In the order pydantic writes the fields.
    ordered = {key: data[key] for key in written if key in data}
    return {**ordered, **data}


def _pydantic_dump(value: Any) -> Callable[..., Any] | None:
    """How pydantic dumps ``value`` (``model_dump`` or a ``TypeAdapter``'s
    ``dump_python``, which take the same options), or None for a value it writes by
    inference: a standard-library dataclass (its fields, by name), anything else."""
    if isinstance(value, BaseModel):
        return type(value).model_dump
    if not is_dataclass(value) or isinstance(value, type):
        return None
    # Here, not at import: pydantic.dataclasses loads pydantic.fields, which
    # `import agcore_tools` does not pay for (a record holding an image is rare).
    from pydantic import TypeAdapter
    from pydantic.dataclasses import is_pydantic_dataclass

    if not is_pydantic_dataclass(type(value)):
        return None
    adapter: TypeAdapter[Any] = TypeAdapter(type(value))  # its own serializer, not rebuilt
    return adapter.dump_python


def own_copy(value: Any) -> Any:
    """A copy of a call's arguments, however deeply they nest: iterative for dicts and
    lists, since the parser takes JSON deeper than ``copy.deepcopy`` can recurse.

    Example:
        >>> args = {"rows": [[1, 2], {"x": [3]}], "name": "a"}
        >>> copied = own_copy(args)
        >>> copied == args, copied["rows"][1]["x"] is args["rows"][1]["x"]
        (True, False)
        >>> deep: list = []
        >>> for _ in range(5000):
        ...     deep = [deep]
        >>> own_copy(deep) is not deep
        True
    """
    if not isinstance(value, (dict, list)):
        return copy.deepcopy(value)  # a str, a number: itself
    root: Any = {} if isinstance(value, dict) else [None] * len(value)
    todo: list[tuple[Any, Any]] = [(value, root)]
    while todo:
        source, target = todo.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, dict):
                target[key] = {}
                todo.append((item, target[key]))
            elif isinstance(item, list):
                target[key] = [None] * len(item)
                todo.append((item, target[key]))
            else:
                target[key] = copy.deepcopy(item)
    return root


def args_digest(args: Any) -> bytes:
    """A digest of a call's arguments (ASCII JSON, so any text encodes; their repr
    when not JSON): a paused call's resume is the same call (see ``_guard``).

    Example:
        >>> args_digest({"b": 1, "a": "x"}) == args_digest({"a": "x", "b": 1})
        True
    """
    import json  # on first need, as above

    try:
        text = json.dumps(args, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(args)
    return hashlib.sha256(text.encode("ascii", "backslashreplace")).digest()
