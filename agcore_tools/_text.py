"""Tool output as model text: JSON for anything not a string, and a byte limit that
keeps head and tail; and a copy of JSON values however deeply they nest.

A leaf module: the renderer of binary values (``_attachments``) and ``calls/`` both cut
text with it, and it and the spans' content writer (``_span_content``) both read a
record's fields with it. The loop's events and approval requests copy a call's
arguments with it.
"""

from __future__ import annotations

import copy
from dataclasses import fields, is_dataclass
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json

__all__ = ["own_copy", "record_fields", "result_text", "truncate_utf8"]

_MARKER = "\n[... {omitted} bytes omitted ...]\n"


def result_text(output: Any) -> str:
    """A tool's output as text for the model: strings as they are, anything else as JSON.

    Example:
        >>> result_text({"city": "北京", "temp": 21})
        '{"city":"北京","temp":21}'
        >>> result_text("plain text")
        'plain text'
        >>> result_text({"ratio": float("nan")})
        '{"ratio":null}'
    """
    if isinstance(output, str):
        return output
    # NaN and infinities as null, as pydantic writes them: "NaN" is not JSON.
    return to_json(output, fallback=str, inf_nan_mode="null").decode("utf-8")


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
    themselves, bytes not copied, as ``model_dump`` would), or None for other values.

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
