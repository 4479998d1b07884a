"""One deterministic repair of tool-call arguments that are not valid JSON.

Models cut a call off (a token limit) or leave a trailing comma. :func:`repair_json`
closes the containers of a document that was cut off and drops trailing commas, and
nothing else: it never guesses a value. A document cut inside a string, a number, a
``tru`` or right after a key is not repaired (the last value may be incomplete), so
every value of a repaired document is one the model wrote in full.
"""

from __future__ import annotations

import json

__all__ = ["repair_json"]

_CLOSERS = {"{": "}", "[": "]"}
_LITERALS = ("true", "false", "null")
_WHITESPACE = " \t\r\n"


def repair_json(text: str) -> str | None:
    """``text`` made valid JSON by closing what was left open, or None if that is not enough.

    Example:
        >>> repair_json('{"path": "a.txt", "lines": [1, 2,')
        '{"path": "a.txt", "lines": [1, 2]}'
        >>> repair_json('{"a": [1, 2,], "b": true,}')
        '{"a": [1, 2], "b": true}'
        >>> repair_json('{"path": "/home/us') is None  # the path may be longer
        True
        >>> repair_json('{"count": 12') is None  # 12, or 120?
        True
    """
    out: list[str] = []
    # One frame per open container: its opener, what it expects next, and where in
    # ``out`` its last comma is (a trailing one is dropped).
    stack: list[list[object]] = []
    in_string = escape = False
    token = ""  # a number or literal being read

    def value_done() -> None:
        if stack:
            stack[-1][1] = "comma"

    def end_token() -> bool:
        nonlocal token
        if token:
            try:
                json.loads(token)
            except ValueError:
                return False
            token = ""
            value_done()
        return True

    for char in text:
        if in_string:
            out.append(char)
            if escape:
                escape = False
            elif char == "\\":
                escape = True
            elif char == '"':
                in_string = False
                if stack and stack[-1][1] == "key":
                    stack[-1][1] = "colon"
                else:
                    value_done()
            continue
        if (char in _WHITESPACE or char in ',:{}[]"') and not end_token():
            return None
        if char in _WHITESPACE:
            out.append(char)
        elif char == '"':
            in_string = True
            out.append(char)
        elif char in "{[":
            stack.append([char, "key" if char == "{" else "value", None])
            out.append(char)
        elif char in "}]":
            if not stack or _CLOSERS[str(stack[-1][0])] != char or not _close(stack.pop(), out):
                return None
            out.append(char)
            value_done()
        elif char == ",":
            if not stack or stack[-1][1] != "comma":
                return None
            stack[-1][1] = "key" if stack[-1][0] == "{" else "value"
            stack[-1][2] = len(out)
            out.append(char)
        elif char == ":":
            if not stack or stack[-1][1] != "colon":
                return None
            stack[-1][1] = "value"
            out.append(char)
        else:
            token += char
            out.append(char)
    if in_string or (token and token not in _LITERALS) or not end_token():
        return None
    while stack:
        frame = stack.pop()
        if not _close(frame, out):
            return None
        out.append(_CLOSERS[str(frame[0])])
        value_done()
    repaired = "".join(out).rstrip()
    try:
        json.loads(repaired)
    except ValueError:
        return None
    return repaired


def _close(frame: list[object], out: list[str]) -> bool:
    # Whether the container may close here; drops its trailing comma, if any.
    opener, state, comma = frame
    if state == "comma":
        return True
    if state != ("key" if opener == "{" else "value"):
        return False  # a key without its value
    if comma is not None:
        out[int(str(comma))] = ""
    return True
