"""Text that always encodes as UTF-8: lone surrogates replaced before they reach history.

A JSON string may spell a lone surrogate (``"\\ud800"``), and ``json.loads`` turns it
into a Python ``str`` that UTF-8 cannot encode. Once such text is in a conversation's
history, every later request fails to encode, so the loop replaces each lone surrogate
with U+FFFD where model output or tool results enter the history. A high surrogate
followed by a low one is first joined into the character they spell: a stream that
split a character's escaped halves across two chunks (``"\\ud83d"``, then
``"\\udc4d"``) gives them side by side once its pieces are joined.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["scrub", "scrub_json"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub(text: str) -> str:
    """``text`` with each surrogate pair joined into its character and every lone
    surrogate replaced by U+FFFD (the same object when clean).

    Example:
        >>> scrub("ok\\ud800!")
        'ok�!'
        >>> scrub("thumbs \\ud83d\\udc4d up")
        'thumbs 👍 up'
        >>> text = "北京"
        >>> scrub(text) is text
        True
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    # UTF-16 spells a pair as the character it stands for; a lone half decodes to U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def scrub_json(value: Any) -> Any:
    """``value`` (dicts, lists, tuples, strings) with every string scrubbed, keys
    included.

    Unchanged parts are returned as they are, so a clean message is not copied.

    Example:
        >>> scrub_json({"content": "\\udfff", "n": [1, "a"]})
        {'content': '�', 'n': [1, 'a']}
    """
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        items = [(scrub_json(k), scrub_json(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list):
        scrubbed = [scrub_json(item) for item in value]
        if all(a is b for a, b in zip(scrubbed, value, strict=True)):
            return value
        return scrubbed
    if isinstance(value, tuple):  # a message's content an app gave as a tuple
        parts = tuple(scrub_json(item) for item in value)
        if all(a is b for a, b in zip(parts, value, strict=True)):
            return value
        return parts
    return value
