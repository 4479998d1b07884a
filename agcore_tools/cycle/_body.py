"""The request parameters a wire hands the SDK: plain-JSON lists ride in ``extra_body``.

The SDK's ``create`` passes its whole request body through its ``transform``, a walk
that reads every value against the parameter's TypedDict annotations (aliases, formats,
pydantic models, iterables, omitted keys). For the history, which the loop keeps as
plain JSON, that walk changes nothing, yet it costs milliseconds per turn and grows with
the history (5.5 ms at 20 messages, 43 ms at 200, against 0.05 and 0.19 ms for
``json.dumps`` of the same), which makes it the loop's largest O(history) cost.

So :func:`lighten` moves the plain-JSON lists (the history, the tool definitions) into
the SDK's public ``extra_body`` and leaves an empty list in their place. The SDK still
checks and transforms every other parameter and still sends, retries, times out,
authenticates (Azure included) and raises as ever; its ``extra_body`` merge puts each
list back at its key's place, so the body is byte for byte the one ``create`` would
send. A list that is not plain JSON (a pydantic model, a tuple, an omitted key, a
datetime somewhere inside) stays where it was, and the SDK transforms it as before.

The same walk finds a lone surrogate in the lists' strings (in a message the app
appended to ``cycle.messages`` itself, or in content given as a tuple): no request can
encode one, so the messages holding one are sent with it as U+FFFD, the others as they
are.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from .._unicode import scrub_json

__all__ = ["is_plain_json", "lighten", "without_unused_tool_options"]

_SCALARS = frozenset({str, int, float, bool, type(None)})


def is_plain_json(value: Any) -> bool:
    """Whether ``value`` is made only of dicts with str keys, lists, str, int, float,
    bool and None (exact types: what the SDK's transform leaves as it is).

    Iterative, so a deeply nested value is no RecursionError here.

    Example:
        >>> is_plain_json([{"role": "user", "content": "héllo", "n": [1, 2.5, None]}])
        True
        >>> is_plain_json([{"role": "user", "content": ("a tuple",)}])
        False
    """
    return _inspect(value)[0]  # one walk of a value, shared with the surrogate check


def _inspect(value: Any) -> tuple[bool, bool]:
    """Whether ``value`` is plain JSON (as :func:`is_plain_json`), and whether a string
    in it holds a surrogate, keys included (a tool's schema names its properties as its
    author or an MCP server wrote them), looking through tuples too."""
    plain = True
    strings: list[str] = []  # checked together at the end, in C
    note = strings.append
    dicts: list[dict[Any, Any]] = []  # their keys too
    keep = dicts.append
    stack = [value]
    pop = stack.pop
    extend = stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:
            note(item)
        elif kind is dict:
            if plain:
                for key in item:
                    if type(key) is not str:
                        plain = False
                        break
            keep(item)
            extend(item.values())
        elif kind is list:
            extend(item)
        elif kind is tuple:
            plain = False
            extend(item)
        elif kind not in _SCALARS:
            plain = False
    # The keys, joined in C; with a key that is not a string, the others alone.
    keys = itertools.chain.from_iterable(dicts)
    note("".join(keys if plain else (key for key in keys if isinstance(key, str))))
    # One join and one encode, which refuses any surrogate: a test of each string took
    # longer. UTF-16 is the quickest (0.4 ms for 1.5 million characters of CJK text,
    # UTF-8 1.5 ms, a regex search 8.6 ms); ASCII text is known so once joined.
    joined = "".join(strings)
    if joined.isascii():
        return plain, False
    try:
        joined.encode("utf-16-le")
    except UnicodeEncodeError:
        return plain, True
    return plain, False


def lighten(params: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """``params`` with each plain-JSON list under ``keys`` moved into ``extra_body``.

    The key keeps an empty list, so it keeps its place in the body the SDK builds; the
    caller's own ``extra_body`` entries win over the moved ones, as they win over any
    parameter. ``params`` itself is not changed.

    Example:
        >>> lighten({"model": "m", "messages": [{"role": "user", "content": "hi"}],
        ...          "extra_body": {"seed": 1}}, ["messages"])  # doctest: +NORMALIZE_WHITESPACE
        {'model': 'm', 'messages': [],
         'extra_body': {'messages': [{'role': 'user', 'content': 'hi'}], 'seed': 1}}
    """
    moved: dict[str, Any] = {}
    scrubbed: dict[str, Any] = {}
    for key in keys:
        value = params.get(key)
        if type(value) is not list or not value:
            continue
        plain, dirty = _inspect(value)
        if dirty:
            # A lone surrogate the history holds as the app put it there (a message it
            # appended itself, a tuple's text), which no request can encode: sent as
            # U+FFFD. Only the messages holding one are copied.
            value = scrubbed[key] = scrub_json(value)
            plain = is_plain_json(value)
        if plain:
            moved[key] = value
    extra = params.get("extra_body")
    if not moved or (extra is not None and not isinstance(extra, Mapping)):
        # Nothing to move, or an extra_body the SDK itself should refuse.
        return {**params, **scrubbed} if scrubbed else params
    sent = {**params, **scrubbed}
    for key in moved:
        sent[key] = []
    if extra is not None:
        moved.update(extra)
    sent["extra_body"] = moved
    return sent


def without_unused_tool_options(params: dict[str, Any], options: Iterable[str]) -> dict[str, Any]:
    """``params`` without ``options`` (``tool_choice``...) when it offers no tools.

    The API refuses ``tool_choice`` on a request without ``tools``; a cycle configured
    with one still makes plain requests (``submit()``), and a tool selection can offer
    nothing on a turn.

    Example:
        >>> without_unused_tool_options({"model": "m", "tool_choice": "auto"}, ["tool_choice"])
        {'model': 'm'}
    """
    if params.get("tools"):
        return params
    return {key: value for key, value in params.items() if key not in options}
