"""History policies: exchanges are the unit, and tool calls never lose their results."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agcore_tools import HistoryPolicy, LlmError, TrimOldest
from agcore_tools.cycle import split_exchanges

from .conftest import assert_history_valid

SYSTEM = {"role": "system", "content": "You are terse."}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def tool_turn(*ids: str) -> list[dict[str, Any]]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    return [{"role": "assistant", "content": None, "tool_calls": calls}] + [
        {"role": "tool", "tool_call_id": i, "content": "x" * 50} for i in ids
    ]


HISTORY = [
    SYSTEM,
    user("one"),
    *tool_turn("a1", "a2"),
    assistant("first answer"),
    user("two"),
    *tool_turn("b1"),
    assistant("second answer"),
    user("three"),
]


def test_split_exchanges_starts_each_exchange_at_a_user_message() -> None:
    system, exchanges = split_exchanges(HISTORY)
    assert system == [SYSTEM]
    assert [ex[0]["content"] for ex in exchanges] == ["one", "two", "three"]
    assert [len(ex) for ex in exchanges] == [5, 4, 1]


def test_messages_before_the_first_user_message_form_their_own_exchange() -> None:
    system, exchanges = split_exchanges([*tool_turn("z"), user("u")])
    assert system == []
    assert [len(ex) for ex in exchanges] == [2, 1]


def attachments(*ids: str) -> dict[str, Any]:
    """The user message that carries tool calls' images, as the loop makes it."""
    from agcore_tools import Image
    from agcore_tools._attachments import Rendered, attachments_message, render

    image = Image(b"GIF89a" + bytes(40))
    results: list[Rendered | None] = [
        render(image, api="chat", max_text_bytes=None, max_attachment_bytes=None, tool="f")
        for _ in ids
    ]
    message = attachments_message([(i, "f") for i in ids], results)
    assert message is not None
    return message


def test_the_images_of_tool_results_stay_in_their_exchange() -> None:
    history = [
        SYSTEM,
        user("Show the chart."),
        *tool_turn("p1"),
        attachments("p1"),
        assistant("Here it is."),
        user("Thanks."),
    ]
    _, exchanges = split_exchanges(history)
    assert [len(ex) for ex in exchanges] == [5, 1]
    # Trimmed as one unit: the prompt never goes while its images stay, nor the reverse.
    assert TrimOldest(max_messages=6).select(history) == [SYSTEM, history[-1]]
    assert TrimOldest(max_messages=7).select(history) == history
    # A user's own message right after tool messages (a loop that stopped) starts one.
    stopped = [user("a"), *tool_turn("q1"), user("b")]
    assert [len(ex) for ex in split_exchanges(stopped)[1]] == [3, 1]


def test_no_budget_sends_everything_as_is() -> None:
    assert TrimOldest().select(HISTORY) is HISTORY


def test_max_messages_drops_the_oldest_whole_exchanges() -> None:
    kept = TrimOldest(max_messages=6).select(HISTORY)
    assert kept == [SYSTEM, *HISTORY[6:]]  # exchange "one" (5 messages) dropped
    assert_history_valid(list(kept))


def test_max_chars_counts_the_json_of_the_messages() -> None:
    kept = TrimOldest(max_chars=450).select(HISTORY)  # sizes: 47 + (502, 320, 36)
    assert kept[0] == SYSTEM
    assert [m["content"] for m in kept if m["role"] == "user"] == ["two", "three"]


def test_the_newest_exchange_is_kept_even_alone_over_budget(caplog) -> None:
    huge = [SYSTEM, user("old"), assistant("x"), user("y" * 1000)]
    kept = TrimOldest(max_chars=100).select(huge)
    assert kept == [SYSTEM, huge[-1]]
    assert "exceeds the history budget" in caplog.text


def test_the_system_prompt_is_always_kept() -> None:
    kept = TrimOldest(max_messages=1).select(HISTORY)
    assert kept == [SYSTEM, HISTORY[-1]]


@pytest.mark.parametrize("field", ["max_messages", "max_chars"])
def test_budgets_must_be_positive(field: str) -> None:
    with pytest.raises(LlmError, match=field):
        TrimOldest(**{field: 0})


def test_a_custom_policy_satisfies_the_protocol() -> None:
    class LastExchange:
        def select(self, messages):
            system, exchanges = split_exchanges(messages)
            return system + exchanges[-1]

    assert isinstance(LastExchange(), HistoryPolicy)
    assert isinstance(TrimOldest(), HistoryPolicy)
    assert LastExchange().select(HISTORY) == [SYSTEM, user("three")]


# -- property: whatever the budget, tool calls and their results stay together --------------

exchange = st.lists(st.sampled_from(["text", "tools1", "tools3", "images"]), min_size=0, max_size=3)


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [SYSTEM] if draw(st.booleans()) else []
    counter = 0
    for n, steps in enumerate(draw(st.lists(exchange, min_size=1, max_size=6))):
        messages.append(user(f"u{n}" * draw(st.integers(1, 30))))
        for step in steps:
            if step == "text":
                messages.append(assistant("a" * draw(st.integers(0, 80))))
            else:
                ids = [f"c{counter + i}" for i in range(3 if step == "tools3" else 1)]
                counter += len(ids)
                messages.extend(tool_turn(*ids))
                if step == "images":
                    messages.append(attachments(*ids))
    return messages


@settings(max_examples=300, deadline=None)
@given(
    histories(),
    st.one_of(st.none(), st.integers(1, 20)),
    st.one_of(st.none(), st.integers(1, 2000)),
)
def test_trimming_never_separates_tool_calls_from_their_results(
    messages: list[dict[str, Any]], max_messages: int | None, max_chars: int | None
) -> None:
    kept = list(TrimOldest(max_messages=max_messages, max_chars=max_chars).select(messages))
    assert_history_valid(kept)
    # Tool results' images stay right behind their tool messages.
    for index, message in enumerate(kept):
        if isinstance(message["content"], list):
            assert index > 0 and kept[index - 1]["role"] == "tool"
    # A suffix of whole exchanges behind the untouched system prompt.
    system, exchanges = split_exchanges(messages)
    assert kept[: len(system)] == system
    rest = kept[len(system) :]
    assert rest == messages[len(messages) - len(rest) :]
    assert not rest or rest[0]["role"] == "user" or rest == exchanges[0]
    assert exchanges[-1] == messages[len(messages) - len(exchanges[-1]) :]
    assert rest[-len(exchanges[-1]) :] == exchanges[-1]  # the newest exchange survives
