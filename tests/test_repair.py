"""The optional repair of tool-call arguments: closing what a cut left open, never a guess."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agcore_tools import ToolRegistry
from agcore_tools._repair import repair_json
from agcore_tools.calls import parse_call

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
_DOCUMENTS = st.dictionaries(st.text(max_size=5), _VALUES, max_size=5)


def _consistent(repaired: Any, original: Any) -> bool:
    """``repaired`` keeps a prefix of ``original``'s members, the last possibly cut deeper;
    every scalar is exactly the original's."""
    if isinstance(original, dict):
        if not isinstance(repaired, dict):
            return False
        keys = list(original)
        got = list(repaired)
        if got != keys[: len(got)]:
            return False
        complete = all(repaired[k] == original[k] for k in got[:-1])
        return complete and (not got or _consistent(repaired[got[-1]], original[got[-1]]))
    if isinstance(original, list):
        if not isinstance(repaired, list) or len(repaired) > len(original):
            return False
        complete = all(r == o for r, o in zip(repaired[:-1], original, strict=False))
        return complete and (not repaired or _consistent(repaired[-1], original[len(repaired) - 1]))
    return type(repaired) is type(original) and repaired == original


@settings(max_examples=200, deadline=None)
@given(_DOCUMENTS, st.data(), st.booleans())
def test_a_repaired_prefix_never_holds_a_guessed_value(
    document: dict[str, Any], data: st.DataObject, compact: bool
) -> None:
    separators = (",", ":") if compact else (", ", ": ")
    text = json.dumps(document, separators=separators, ensure_ascii=data.draw(st.booleans()))
    cut = data.draw(st.integers(1, len(text)))
    repaired = repair_json(text[:cut])
    if repaired is None:
        return
    assert _consistent(json.loads(repaired), document), (text[:cut], repaired)
    if cut == len(text):
        assert json.loads(repaired) == document


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"path": "a.txt"', '{"path": "a.txt"}'),
        ('{"rows": [[1, 2], [3, 4]', '{"rows": [[1, 2], [3, 4]]}'),
        ('{"ok": true, "tags": ["a",', '{"ok": true, "tags": ["a"]}'),
        ('{"a": 1,}', '{"a": 1}'),
        ('{"q": "say \\"hi\\""', '{"q": "say \\"hi\\""}'),
        ("{", "{}"),
    ],
)
def test_what_is_repaired(text: str, expected: str) -> None:
    assert repair_json(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"path": "/home/us',  # inside a string: the value may go on
        '{"count": 12',  # 12 or 120?
        '{"flag": tru',
        '{"key"',  # a key without its value
        '{"key":',
        '{"a": "x\\',
        '{"a": 1}}',  # extra text is not a cut
        '{"a": 1} {"a": 2}',
        "{'a': 1}",  # not JSON at all
        "[1, 2,",  # repairable, but not an object: parse_call still refuses it
    ],
)
def test_what_is_not_repaired(text: str) -> None:
    call = parse_call("t", "c1", text, repair=True)
    assert call.args is None and call.error is not None
    assert call.arguments == text


def test_repair_is_off_unless_asked() -> None:
    assert parse_call("t", "c1", '{"a": 1,').args is None
    repaired = parse_call("t", "c1", '{"a": 1,', repair=True)
    assert repaired.args == {"a": 1}
    assert repaired.arguments == '{"a": 1}'  # what the history records


def test_a_call_of_a_turn_cut_at_the_token_limit_is_never_repaired() -> None:
    cut = parse_call("t", "c1", '{"a": 1,', repair=True, cut_at="max_completion_tokens")
    assert (cut.args, cut.arguments) == (None, '{"a": 1,')
    assert cut.error is not None and "(max_completion_tokens)" in str(cut.error)
    assert isinstance(cut.error.__cause__, json.JSONDecodeError)
    whole = parse_call("t", "c1", '{"a": 1}', repair=True, cut_at="max_completion_tokens")
    assert (whole.args, whole.error) == ({"a": 1}, None)  # complete: it runs


async def test_run_tool_calls_repairs_when_asked() -> None:
    registry = ToolRegistry()

    @registry.tool
    def read(path: str) -> str:
        """Read a file."""
        return f"read {path}"

    calls = [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "read", "arguments": '{"path": "a.txt"'},
        }
    ]
    plain = await registry.run_tool_calls(calls)
    assert plain[0]["content"].startswith("Error: tool 'read' got invalid arguments")
    assert await registry.run_tool_calls(calls, repair_arguments=True) == [
        {"role": "tool", "tool_call_id": "c1", "content": "read a.txt"}
    ]
    assert registry.run_tool_calls_sync(calls, repair_arguments=True)[0]["content"] == "read a.txt"
